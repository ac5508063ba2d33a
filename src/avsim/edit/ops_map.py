"""Map edits: restyle lane lines (whole or over an arc-length range), remove, add and move
elements (crosswalks, wait lines, road markings, signs, lights, ...), by id or region.

Renderers draw a lane line with one type (its most frequent per-vertex pair), so restyling an
arc-length range splits the line at the range's ends into separate lines: the first piece
keeps the original id, later pieces are named ``<id>@<start>m`` (arc length where they begin).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.lights import TrafficLightStates
from avsim.core.transforms import yaw_to_quat
from avsim.maps.elements import MAP_ELEMENT_TYPES, Cuboids, LaneLines, Lanes, Polygons, Polylines
from avsim.scenario import Scenario

from .ops_agents import _ground_z
from .routes import arc_length_m

POLYLINE_KINDS = ("road_boundaries", "wait_lines", "poles")
POLYGON_KINDS = ("crosswalks", "road_markings", "drivable_areas")
CUBOID_KINDS = ("traffic_signs", "traffic_lights")
LANE_COLORS = ("WHITE", "YELLOW", "OTHER")


# ----------------------------------------------------------------------------- lane lines
def _cut(points: np.ndarray, s_nodes: np.ndarray, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Sub-polyline between arc lengths a < b, with interpolated end vertices.

    Returns (points (n, 3), source vertex index (n,) whose attributes each output vertex takes).
    """
    inner = np.flatnonzero((s_nodes > a) & (s_nodes < b))

    def at(s: float) -> tuple[np.ndarray, int]:
        k = int(np.clip(np.searchsorted(s_nodes, s, side="right") - 1, 0, len(points) - 2))
        u = (s - s_nodes[k]) / max(s_nodes[k + 1] - s_nodes[k], 1e-12)
        return points[k] + np.clip(u, 0, 1) * (points[k + 1] - points[k]), k

    pa, ka = at(a)
    pb, kb = at(b)
    pts = np.concatenate([pa[None], points[inner], pb[None]])
    src = np.concatenate([[ka], inner, [min(kb, len(points) - 1)]]).astype(np.int64)
    return pts, src


def _piece_id(base: str, s: float) -> str:
    return f"{base}@{s:.2f}m"


def _check_restyle(color: str | None, style: str | None, s_range_m: tuple[float, float] | None) -> None:
    if color is None and style is None:
        raise AvsimValueError("restyle: give color and/or style")
    if color is not None and color not in LANE_COLORS:
        raise AvsimValueError(f"color: {color!r} is not one of {LANE_COLORS}")
    if style is not None and (not style or not style.replace("_", "").isalnum() or style != style.upper()):
        raise AvsimValueError(f"style: {style!r} is not an upper-case style name such as LONG_DASHED_SINGLE")
    if s_range_m is not None and not (0 <= s_range_m[0] < s_range_m[1]):
        raise AvsimValueError("s_range_m: needs 0 <= start < end")


def _pieces(a: float, b: float, total: float) -> list[tuple[float, float, bool]]:
    """A line of length `total` cut at arc lengths a <= b: (start, end, inside [a, b]) per piece."""
    cuts = [0.0, a, b, total]
    pieces = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        if hi - lo > 1e-6:
            pieces.append((lo, hi, lo >= a - 1e-9 and hi <= b + 1e-9))
    return pieces


def restyle_lane_lines(
    scenario: Scenario,
    mask: np.ndarray,
    color: str | None = None,
    style: str | None = None,
    s_range_m: tuple[float, float] | None = None,
) -> Scenario:
    """Set colour and/or style of the selected lane lines, optionally only over [s0, s1] metres
    of 3-D arc length from each line's first vertex (the rest keeps its type)."""
    _check_restyle(color, style, s_range_m)
    ll: LaneLines = scenario.map.lane_lines
    mask = np.asarray(mask, dtype=bool)
    has_vertex = ll.vertex_color is not None
    out_ids, out_pts, out_color, out_style, out_vc, out_vs = [], [], [], [], [], []

    def emit(i: str, pts: np.ndarray, c: str, s: str, vc: np.ndarray | None, vs: np.ndarray | None) -> None:
        out_ids.append(i)
        out_pts.append(pts)
        out_color.append(c)
        out_style.append(s)
        out_vc.append(vc)
        out_vs.append(vs)

    for k in range(len(ll)):
        sl = slice(int(ll.lines.offsets[k]), int(ll.lines.offsets[k + 1]))
        pts = np.array(ll.lines.points_m[sl])
        vc = np.array(ll.vertex_color[sl]) if ll.vertex_color is not None else None  # i.e. has_vertex
        vs = np.array(ll.vertex_style[sl]) if ll.vertex_style is not None else None  # set together with vertex_color
        base_id, c0, s0 = str(ll.ids[k]), str(ll.color[k]), str(ll.style[k])
        new_c, new_s = color or c0, style or s0
        if not mask[k]:
            emit(base_id, pts, c0, s0, vc, vs)
            continue
        s_nodes = arc_length_m(pts)
        total = float(s_nodes[-1])
        a, b = (0.0, total) if s_range_m is None else (max(0.0, s_range_m[0]), min(total, s_range_m[1]))
        if s_range_m is not None and a >= total:
            raise AvsimValueError(f"s_range_m: line {base_id!r} is only {total:.2f} m long")
        for n, (lo, hi, inside) in enumerate(_pieces(a, b, total)):
            p, src = _cut(pts, s_nodes, lo, hi)
            pid = base_id if n == 0 else _piece_id(base_id, lo)
            if inside:
                pvc = (np.full(len(p), color) if color else vc[src]) if vc is not None else None
                pvs = (np.full(len(p), style) if style else vs[src]) if vs is not None else None
                emit(pid, p, new_c, new_s, pvc, pvs)
            else:
                # untouched pieces keep the line's own (possibly per-vertex) type
                emit(pid, p, c0, s0, vc[src] if vc is not None else None, vs[src] if vs is not None else None)
    all_ids = out_ids
    if len(set(all_ids)) != len(all_ids):
        raise AvsimValueError("restyle: splitting produced a duplicate lane-line id; restyle a different range")
    new = LaneLines(
        Polylines.from_list(np.array(all_ids, dtype=str), out_pts),
        np.array(out_color, dtype=str),
        np.array(out_style, dtype=str),
        np.concatenate(cast("list[np.ndarray]", out_vc)).astype(str) if has_vertex and out_vc else (np.zeros(0, "<U5") if has_vertex else None),
        np.concatenate(cast("list[np.ndarray]", out_vs)).astype(str) if has_vertex and out_vs else (np.zeros(0, "<U12") if has_vertex else None),
    )
    return scenario.replace(map=scenario.map.replace(lane_lines=new))


# ----------------------------------------------------------------------------- remove / move
def remove_map_elements(scenario: Scenario, kind: str, mask: np.ndarray) -> Scenario:
    """Delete the elements of `kind` where `mask` (K,) holds; removing traffic lights also drops
    their state timelines."""
    _check_kind(kind)
    mask = np.asarray(mask, dtype=bool)
    elements = getattr(scenario.map, kind)
    removed = np.asarray(elements.ids)[mask].astype(str)
    changes: dict[str, Any] = {"map": scenario.map.replace(**{kind: elements.select(~mask)})}
    if kind == "traffic_lights" and len(removed):
        lights = scenario.lights
        keep = ~np.isin(np.asarray(lights.light_id).astype(str), removed)
        changes["lights"] = TrafficLightStates(
            np.array(lights.light_id[keep]), np.array(lights.timestamps_ns[keep]), np.array(lights.state[keep])
        )
    return scenario.replace(**changes)


def _shift_lines(lines: Polylines, mask: np.ndarray, delta: np.ndarray) -> Polylines:
    pts = np.array(lines.points_m, copy=True)
    pts[lines.vertex_mask(mask)] += delta
    return type(lines)(np.array(lines.ids), pts, np.array(lines.offsets))


def move_map_elements(scenario: Scenario, kind: str, mask: np.ndarray, dx_m: float = 0.0, dy_m: float = 0.0, dz_m: float = 0.0) -> Scenario:
    """Translate the elements of `kind` where `mask` holds by (dx, dy, dz) metres."""
    _check_kind(kind)
    mask = np.asarray(mask, dtype=bool)
    delta = np.array([dx_m, dy_m, dz_m], dtype=np.float64)
    el = getattr(scenario.map, kind)
    new: LaneLines | Lanes | Cuboids | Polylines
    if isinstance(el, LaneLines):
        new = LaneLines(_shift_lines(el.lines, mask, delta), np.array(el.color), np.array(el.style),
                        None if el.vertex_color is None else np.array(el.vertex_color),
                        None if el.vertex_style is None else np.array(el.vertex_style))  # fmt: skip
    elif isinstance(el, Lanes):
        new = Lanes(np.array(el.ids), *(_shift_lines(p, mask, delta) for p in (el.left, el.right, el.centre)))
    elif isinstance(el, Cuboids):
        c = np.array(el.center_m, copy=True)
        c[mask] += delta
        new = Cuboids(np.array(el.ids), c, np.array(el.size_m), np.array(el.orientation))
    else:
        new = _shift_lines(el, mask, delta)
    return scenario.replace(map=scenario.map.replace(**{kind: new}))


# ----------------------------------------------------------------------------- add
def _xyz(scenario: Scenario, points: np.ndarray, lift_m: float = 0.0) -> np.ndarray:
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] not in (2, 3):
        raise AvsimValueError("points: need (K, 2) or (K, 3) coordinates")
    if pts.shape[1] == 2:
        pts = np.concatenate([pts, (_ground_z(scenario, pts) + lift_m)[:, None]], axis=1)
    return pts


def add_map_element(
    scenario: Scenario,
    kind: str,
    element_id: str,
    points: np.ndarray | None = None,
    center: Sequence[float] | None = None,
    size_m: Sequence[float] | None = None,
    yaw_rad: float = 0.0,
    color: str = "WHITE",
    style: str = "SOLID_SINGLE",
) -> Scenario:
    """Add one element. Polylines (lane_lines, road_boundaries, wait_lines, poles) and polygons
    (crosswalks, road_markings, drivable_areas) take `points` (K, 2|3; z from the ground under
    them when missing); traffic_signs / traffic_lights take `center` (2|3), `size_m`, `yaw_rad`."""
    _check_kind(kind)
    if kind == "lanes":
        raise AvsimValueError("type: adding lanes is not supported (they need left, right and centre rails); add lane_lines")
    element_id = str(element_id)
    el = getattr(scenario.map, kind)
    if element_id in set(np.asarray(el.ids).astype(str).tolist()):
        raise AvsimValueError(f"id: {kind} already has an element {element_id!r}")
    if kind in CUBOID_KINDS:
        if center is None:
            raise AvsimValueError(f"center: {kind} needs a centre")
        size = np.asarray(size_m if size_m is not None else ((0.3, 0.4, 1.0) if kind == "traffic_lights" else (0.1, 0.8, 0.8)), dtype=np.float64)
        c = np.asarray(center, dtype=np.float64)
        if c.shape == (2,):
            c = np.r_[c, _ground_z(scenario, c[None])[0] + (5.0 if kind == "traffic_lights" else 2.5)]
        cuboids = Cuboids(
            np.concatenate([np.asarray(el.ids).astype(str), [element_id]]),
            np.concatenate([np.asarray(el.center_m), c[None]]),
            np.concatenate([np.asarray(el.size_m), size[None]]),
            np.concatenate([np.asarray(el.orientation), yaw_to_quat(np.array([yaw_rad]))]),
        )
        return scenario.replace(map=scenario.map.replace(**{kind: cuboids}))
    if points is None:
        raise AvsimValueError(f"points: {kind} needs points")
    pts = _xyz(scenario, points)
    lines = el.lines if isinstance(el, LaneLines) else el
    cls = Polygons if kind in POLYGON_KINDS else Polylines
    if len(pts) < cls.min_points:
        raise AvsimValueError(f"points: {kind} needs at least {cls.min_points} points")
    arrays = [np.array(lines[k]) for k in range(len(lines))] + [pts]
    ids = np.concatenate([np.asarray(lines.ids).astype(str), [element_id]])
    geometry = cls.from_list(ids, arrays)
    new: LaneLines | Polylines
    if isinstance(el, LaneLines):
        if color not in LANE_COLORS:
            raise AvsimValueError(f"color: {color!r} is not one of {LANE_COLORS}")
        vc = None if el.vertex_color is None else np.concatenate([np.asarray(el.vertex_color).astype(str), [color] * len(pts)])
        vs = None if el.vertex_style is None else np.concatenate([np.asarray(el.vertex_style).astype(str), [style] * len(pts)])
        new = LaneLines(geometry, np.concatenate([np.asarray(el.color).astype(str), [color]]), np.concatenate([np.asarray(el.style).astype(str), [style]]), vc, vs)
    else:
        new = geometry
    return scenario.replace(map=scenario.map.replace(**{kind: new}))


def _check_kind(kind: str) -> None:
    if kind not in MAP_ELEMENT_TYPES:
        raise AvsimValueError(f"type: unknown map element type {kind!r} (one of {', '.join(MAP_ELEMENT_TYPES)})")


__all__ = [
    "restyle_lane_lines",
    "remove_map_elements",
    "move_map_elements",
    "add_map_element",
    "POLYLINE_KINDS",
    "POLYGON_KINDS",
    "CUBOID_KINDS",
]
