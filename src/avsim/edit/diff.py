"""What changed between two scenarios: agents, map elements, light timelines, ego, time span.

Every track, map element and light present in only one of A and B is listed as added or
removed, over its whole span (so a crop or time change that drops a track shows it, with the
span it had). Values of tracks and light timelines present in both are compared where both
clips have data (a cropped clip does not show every later light change as a difference).
`diff_scenarios` returns a JSON-ready dict (times in seconds from A's start, distances in
metres); `format_diff` renders it for people, in full or as counts per kind (`diff_summary`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from avsim.core.agents import AgentTracks
from avsim.core.lights import TrafficLightStates
from avsim.maps import HDMap
from avsim.maps.elements import MAP_ELEMENT_TYPES, Cuboids, LaneLines, Lanes
from avsim.scenario import Scenario

from .common import columns
from .ops_agents import _sample_track
from .selectors import MapElements


def _r(x: float) -> float:
    return round(float(x), 3)


def _tracks(agents: AgentTracks) -> dict[str, dict]:
    """Each track's rows (columns by name), by track id."""
    cols = columns(agents)
    return {tid: {k: v[rows] for k, v in cols.items()} for tid, rows in agents.track_slices()}


def _within(track: dict, lo: int, hi: int) -> dict:
    """The rows of a track within [lo, hi] ns (the whole track when none lie there)."""
    keep = (track["timestamps_ns"] >= lo) & (track["timestamps_ns"] <= hi)
    return {k: v[keep] for k, v in track.items()} if keep.any() else track


def _span_s(track: dict, t0: int) -> list[float]:
    return [_r((int(track["timestamps_ns"][0]) - t0) / 1e9), _r((int(track["timestamps_ns"][-1]) - t0) / 1e9)]


def _track_diff(ta: dict, tb: dict, t0: int) -> dict | None:
    same_shape = len(ta["timestamps_ns"]) == len(tb["timestamps_ns"])
    if same_shape and all(np.array_equal(ta[k], tb[k]) for k in ta):
        return None
    out: dict = {}
    if ta["source_class"][0] != tb["source_class"][0]:
        out["class"] = [str(ta["source_class"][0]), str(tb["source_class"][0])]
    if not np.allclose(np.median(ta["size_m"], 0), np.median(tb["size_m"], 0)):
        out["size_m"] = [np.median(ta["size_m"], 0).round(3).tolist(), np.median(tb["size_m"], 0).round(3).tolist()]
    span_a = (int(ta["timestamps_ns"][0]), int(ta["timestamps_ns"][-1]))
    span_b = (int(tb["timestamps_ns"][0]), int(tb["timestamps_ns"][-1]))
    if span_a != span_b:
        out["span_s"] = [[_r((s - t0) / 1e9) for s in span_a], [_r((s - t0) / 1e9) for s in span_b]]
    lo, hi = max(span_a[0], span_b[0]), min(span_a[1], span_b[1])
    grid = np.unique(np.concatenate([ta["timestamps_ns"], tb["timestamps_ns"]]))
    grid = grid[(grid >= lo) & (grid <= hi)]
    if len(grid):
        pa, pb = _sample_track(ta, grid), _sample_track(tb, grid)
        d = np.linalg.norm(pa["center_m"] - pb["center_m"], axis=1)
        k = int(np.argmax(d))
        out["max_displacement_m"] = _r(d[k])
        out["at_s"] = _r((int(grid[k]) - t0) / 1e9)
    else:
        out["max_displacement_m"] = None
    return out


def _elements(el: MapElements) -> dict[str, tuple]:
    """id -> a tuple of arrays describing the element (geometry and attributes)."""
    out = {}
    if isinstance(el, Cuboids):
        for i, k in enumerate(np.asarray(el.ids).astype(str)):
            out[k] = (el.center_m[i], el.size_m[i], el.orientation[i])
        return out
    if isinstance(el, Lanes):
        for i, k in enumerate(np.asarray(el.ids).astype(str)):
            out[k] = (el.left[i], el.right[i], el.centre[i])
        return out
    lines = el.lines if isinstance(el, LaneLines) else el
    for i, k in enumerate(np.asarray(lines.ids).astype(str)):
        attrs: tuple = (lines[i],)
        if isinstance(el, LaneLines):
            s = slice(int(lines.offsets[i]), int(lines.offsets[i + 1]))
            attrs += (np.array([el.color[i], el.style[i]]),)
            if el.vertex_color is not None:
                assert el.vertex_style is not None  # LaneLines requires both or neither
                attrs += (el.vertex_color[s], el.vertex_style[s])
        out[k] = attrs
    return out


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(np.asarray(x).shape == np.asarray(y).shape and np.array_equal(x, y) for x, y in zip(a, b))


def _map_diff(ma: HDMap, mb: HDMap) -> dict[str, Any]:
    out = {}
    for kind in MAP_ELEMENT_TYPES:
        ea, eb = _elements(getattr(ma, kind)), _elements(getattr(mb, kind))
        added = sorted(set(eb) - set(ea))
        removed = sorted(set(ea) - set(eb))
        changed = sorted(k for k in set(ea) & set(eb) if not _same(ea[k], eb[k]))
        if added or removed or changed:
            entry: dict[str, Any] = {"added": added, "removed": removed, "changed": changed}
            if kind == "lane_lines":
                la, lb = getattr(ma, kind), getattr(mb, kind)
                ta = dict(zip(np.asarray(la.ids).astype(str), la.lane_types()))
                tb = dict(zip(np.asarray(lb.ids).astype(str), lb.lane_types()))
                entry["types"] = {k: [ta.get(k), tb[k]] for k in added + changed if ta.get(k) != tb[k]}
            out[kind] = entry
    return out


def _light_diff(la: TrafficLightStates, lb: TrafficLightStates, t0: int, lo: int, hi: int) -> dict[str, Any]:
    """Lights whose state differs at some time within [lo, hi] (the clips' common span)."""
    ids_a = set(np.asarray(la.light_id).astype(str).tolist())
    ids_b = set(np.asarray(lb.light_id).astype(str).tolist())
    changed = []
    for lid in sorted(ids_a & ids_b):
        sa, sb = np.asarray(la.light_id) == lid, np.asarray(lb.light_id) == lid
        if np.array_equal(la.timestamps_ns[sa], lb.timestamps_ns[sb]) and np.array_equal(la.state[sa], lb.state[sb]):
            continue
        times = np.unique(np.concatenate([[lo], la.timestamps_ns[sa], lb.timestamps_ns[sb]]))
        times = times[(times >= lo) & (times <= hi)]
        one = np.array([lid])
        first = next((int(t) for t in times if la.state_at(one, int(t))[0] != lb.state_at(one, int(t))[0]), None)
        if first is None:
            continue  # same states wherever both clips exist (e.g. one was cropped)
        changed.append({"id": lid, "first_difference_s": _r((first - t0) / 1e9),
                        "a": _timeline(la, sa, t0), "b": _timeline(lb, sb, t0)})  # fmt: skip
    return {"added": sorted(ids_b - ids_a), "removed": sorted(ids_a - ids_b), "changed": changed}


def _timeline(lights: TrafficLightStates, sel: np.ndarray, t0: int) -> list[Any]:
    return [[_r((int(t) - t0) / 1e9), str(s)] for t, s in zip(lights.timestamps_ns[sel], lights.state[sel])]


def diff_scenarios(a: Scenario, b: Scenario) -> dict[str, Any]:
    """The difference from scenario `a` to scenario `b` (see module docstring)."""
    t0 = int(a.ego.timestamps_ns[0])
    ego_a, ego_b = a.ego, b.ego
    lo = max(int(ego_a.timestamps_ns[0]), int(ego_b.timestamps_ns[0]))
    hi = min(int(ego_a.timestamps_ns[-1]), int(ego_b.timestamps_ns[-1]))
    grid = np.unique(np.concatenate([ego_a.timestamps_ns, ego_b.timestamps_ns]))
    grid = grid[(grid >= lo) & (grid <= hi)]
    ego_disp = 0.0
    if len(grid):
        ego_disp = float(np.linalg.norm(ego_a.pose_at(grid).translation - ego_b.pose_at(grid).translation, axis=1).max())
    tracks_a, tracks_b = _tracks(a.agents), _tracks(b.agents)
    changed = []
    for tid in sorted(set(tracks_a) & set(tracks_b)):
        d = _track_diff(_within(tracks_a[tid], lo, hi), _within(tracks_b[tid], lo, hi), t0)
        if d is not None:
            changed.append({"id": tid, **d})
    added, removed = sorted(set(tracks_b) - set(tracks_a)), sorted(set(tracks_a) - set(tracks_b))
    d = {
        "a": a.scenario_id,
        "b": b.scenario_id,
        "time": {
            "a_span_s": [0.0, _r(ego_a.duration_s)],
            "b_span_s": [_r((int(ego_b.timestamps_ns[0]) - t0) / 1e9), _r((int(ego_b.timestamps_ns[-1]) - t0) / 1e9)],
            "a_rate_hz": _r(ego_a.rate_hz),
            "b_rate_hz": _r(ego_b.rate_hz),
        },
        "ego": {"max_displacement_m": _r(ego_disp), "poses": [len(ego_a), len(ego_b)]},
        "agents": {
            "added": added,
            "removed": removed,
            "spans_s": {tid: _span_s((tracks_b if tid in tracks_b else tracks_a)[tid], t0) for tid in added + removed},
            "changed": changed,
            "unchanged": len(set(tracks_a) & set(tracks_b)) - len(changed),
        },
        "map": _map_diff(a.map, b.map),
        "lights": _light_diff(a.lights, b.lights, t0, lo, hi),
        "metadata_changed": sorted(k for k in set(a.metadata) | set(b.metadata) if a.metadata.get(k) != b.metadata.get(k)),
    }
    d["scene_unchanged"] = scene_unchanged(d)
    return d


def is_identical(d: dict[str, Any]) -> bool:
    """True when a diff shows no change at all (ids aside)."""
    return scene_unchanged(d) and not d["metadata_changed"]


def scene_unchanged(d: dict[str, Any]) -> bool:
    """True when time span, ego, agents, map and lights are all unchanged (metadata may differ).

    An edit output that differs from its source only in metadata (its `edit_history`) holds
    edits that changed nothing; `format_diff` says so.
    """
    t = d["time"]
    return (
        t["a_span_s"] == t["b_span_s"] and t["a_rate_hz"] == t["b_rate_hz"] and d["ego"]["max_displacement_m"] == 0
        and d["ego"]["poses"][0] == d["ego"]["poses"][1]
        and not (d["agents"]["added"] or d["agents"]["removed"] or d["agents"]["changed"])
        and not d["map"] and not any(d["lights"].values())
    )  # fmt: skip


NOTHING_CHANGED = "scene unchanged: only metadata differs (the edits changed nothing)"


def _added_removed(label: str, entry: dict) -> list[str]:
    spans = entry.get("spans_s", {})

    def span(k: str) -> str:
        return f" ({spans[k][0]:.2f}..{spans[k][1]:.2f} s)" if k in spans else ""

    return [f"{label} + {k}{span(k)}" for k in entry["added"]] + [f"{label} - {k}{span(k)}" for k in entry["removed"]]


def diff_summary(d: dict[str, Any]) -> dict[str, Any]:
    """Counts per kind of a diff dict (`avsim diff --summary`).

    Args:
        d: a `diff_scenarios` result.

    Returns:
        {"a", "b", "time_changed", "ego_max_displacement_m", "agents": {added, removed, changed,
        unchanged}, "map": {element type: {added, removed, changed}}, "lights": {added, removed,
        changed}, "metadata_changed": count, "scene_unchanged": `scene_unchanged(d)`}.
    """
    t = d["time"]
    ag, li = d["agents"], d["lights"]
    return {
        "a": d["a"],
        "b": d["b"],
        "time_changed": t["a_span_s"] != t["b_span_s"] or t["a_rate_hz"] != t["b_rate_hz"],
        "ego_max_displacement_m": d["ego"]["max_displacement_m"],
        "agents": {"added": len(ag["added"]), "removed": len(ag["removed"]), "changed": len(ag["changed"]), "unchanged": ag["unchanged"]},
        "map": {kind: {k: len(e[k]) for k in ("added", "removed", "changed")} for kind, e in d["map"].items()},
        "lights": {k: len(li[k]) for k in ("added", "removed", "changed")},
        "metadata_changed": len(d["metadata_changed"]),
        "scene_unchanged": scene_unchanged(d),
    }


def _format_summary(d: dict[str, Any]) -> str:
    c = diff_summary(d)
    t = d["time"]
    lines = [f"{d['a']} -> {d['b']}"]
    if c["time_changed"]:
        lines.append(f"time: {t['a_span_s'][0]:g}..{t['a_span_s'][1]:g} s -> {t['b_span_s'][0]:g}..{t['b_span_s'][1]:g} s")
    lines.append(f"ego: moved up to {c['ego_max_displacement_m']:.2f} m")
    ag = c["agents"]
    lines.append(f"agents: +{ag['added']} -{ag['removed']} ~{ag['changed']} ({ag['unchanged']} unchanged)")
    for kind, e in c["map"].items():
        lines.append(f"map {kind}: +{e['added']} -{e['removed']} ~{e['changed']}")
    li = c["lights"]
    lines.append(f"lights: +{li['added']} -{li['removed']} ~{li['changed']}")
    if c["metadata_changed"]:
        lines.append(f"metadata: {c['metadata_changed']} key(s) changed")
    if is_identical(d):
        lines.append("no differences")
    elif scene_unchanged(d):
        lines.append(NOTHING_CHANGED)
    return "\n".join(lines)


def format_diff(d: dict[str, Any], summary: bool = False) -> str:
    """Human-readable report of a diff dict.

    Args:
        d: a `diff_scenarios` result.
        summary: counts per kind only (agents, each map element type, lights) instead of one
            line per added, removed and changed item.

    Returns:
        The report, one item per line.
    """
    if summary:
        return _format_summary(d)
    lines = [f"{d['a']} -> {d['b']}"]
    t = d["time"]
    if t["a_span_s"] != t["b_span_s"] or t["a_rate_hz"] != t["b_rate_hz"]:
        lines.append(f"time: {t['a_span_s'][0]:g}..{t['a_span_s'][1]:g} s @ {t['a_rate_hz']:g} Hz -> "
                     f"{t['b_span_s'][0]:g}..{t['b_span_s'][1]:g} s @ {t['b_rate_hz']:g} Hz")  # fmt: skip
    if d["ego"]["max_displacement_m"] or d["ego"]["poses"][0] != d["ego"]["poses"][1]:
        lines.append(f"ego: moved up to {d['ego']['max_displacement_m']:.2f} m ({d['ego']['poses'][0]} -> {d['ego']['poses'][1]} poses)")
    ag = d["agents"]
    lines += _added_removed("agent", ag)
    for c in ag["changed"]:
        parts = []
        if c.get("max_displacement_m") is not None:
            parts.append(f"moved up to {c['max_displacement_m']:.2f} m (at {c['at_s']:.2f} s)")
        if "class" in c:
            parts.append(f"class {c['class'][0]} -> {c['class'][1]}")
        if "size_m" in c:
            parts.append(f"size {c['size_m'][0]} -> {c['size_m'][1]}")
        if "span_s" in c:
            parts.append(f"span {c['span_s'][0]} -> {c['span_s'][1]} s")
        lines.append(f"agent ~ {c['id']}: " + ", ".join(parts))
    lines.append(f"agents unchanged: {ag['unchanged']}")
    for kind, e in d["map"].items():
        for k in e["added"]:
            lines.append(f"map {kind} + {k}" + (f" ({e['types'][k][1]})" if "types" in e and k in e["types"] else ""))
        for k in e["removed"]:
            lines.append(f"map {kind} - {k}")
        for k in e["changed"]:
            typ = e.get("types", {}).get(k)
            lines.append(f"map {kind} ~ {k}" + (f" ({typ[0]} -> {typ[1]})" if typ else ""))
    li = d["lights"]
    lines += _added_removed("light", li)
    for c in li["changed"]:
        lines.append(f"light ~ {c['id']}: differs from {c['first_difference_s']:.2f} s: {c['a']} -> {c['b']}")
    if d["metadata_changed"]:
        lines.append("metadata changed: " + ", ".join(d["metadata_changed"]))
    if len(lines) == 2 and is_identical(d):
        lines.append("no differences")
    elif scene_unchanged(d) and not is_identical(d):
        lines.append(NOTHING_CHANGED)
    return "\n".join(lines)
