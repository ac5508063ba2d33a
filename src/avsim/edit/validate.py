"""Semantic validation of a scenario: what an edit can break that the types cannot see.

Checks (each finding carries the edit-clock time, the ids involved and a short reason):
- `overlap`: two boxes (agents and the ego) intersect at some time: oriented-box (separating
  axis) test in the ground plane plus a height-interval test; contact within
  `overlap_tolerance_m` of penetration is allowed. One finding per pair and contiguous run.
- `off_road`: a vehicle's box centre is more than `offroad_tolerance_m` outside the map's
  drivable area (only when the map has drivable areas that hold the ego for at least
  `min_ego_coverage` of the clip; otherwise they are partial, e.g. Waymo driveways only).
- `speed` / `acceleration`: beyond per-class limits (acceleration over a 0.5 s window, so
  label jitter does not count).
- `track_gap`: a track is unobserved for longer than `gap_factor` times the scenario's
  typical sample interval (and at least `min_gap_s`).
- `track_end`: a vehicle's track ends (longer than that before the clip ends) while its box
  centre is on the drivable area and within `vanish_range_m` of the ego: it vanishes in view
  (e.g. a parked car whose track an edit cut short).
- `light_conflict`: lights controlling crossing lanes are green (or yellow) at the same time.
  The lanes a light controls are known from `metadata['traffic_light_lanes']`
  ({light_id: [lane_id, ...]}), from a light id that is also a lane id (Waymo / ScenarioNet),
  or from geometry: the lane whose centre line ends nearest before the light (or its stop
  point), with the light within `light_assoc_radius_m` straight ahead and at most
  `light_assoc_lateral_m` to the side. Two lights conflict when their lanes, each extended
  `light_assoc_radius_m` straight on past its end, intersect at 45 to 135 degrees (crossing
  traffic; opposing approaches run parallel and never conflict).

Traffic rules (`avsim.edit.rules`, documented there; thresholds here, `rule_checks` picks which
run): `red_light` (a vehicle's front passes a controlled lane's stop point, from `light_lanes`,
while its light is red; yellow does not count), `wrong_way`, `speed_limit` (lane limits from
`metadata['lane_speed_limits_mps']`), `solid_line_crossing`, `stop_line` and `jaywalking`. Their
findings have ids (road user, map element) and a time span (`Finding.end_s`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import shapely

from avsim.core.transforms import wrap_angle
from avsim.maps import HDMap
from avsim.scenario import Scenario

from .common import start_ns
from .findings import EGO_ID, Finding, time_runs
from .rules import check_traffic_rules
from .validation_inputs import AgentBoxes, ValidationConfig, boxes_on_grid

__all__ = ["EGO_ID", "Finding", "ValidationConfig", "drivable_area", "findings_document", "light_lanes", "validate_scenario"]

def findings_document(scenario: Scenario, findings: list[Finding]) -> dict[str, Any]:
    """`avsim validate --json`: the scenario id, every finding and the count per kind."""
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.kind] = counts.get(f.kind, 0) + 1
    return {"scenario_id": scenario.scenario_id, "findings": [f.to_dict() for f in findings], "counts": counts}


def validate_scenario(scenario: Scenario, config: ValidationConfig | None = None) -> list[Finding]:
    """All findings, sorted by (time, kind, ids)."""
    config = config or ValidationConfig()
    grid = scenario.ego.uniform_timestamps(config.sample_rate_hz)
    boxes = boxes_on_grid(scenario, grid, config)
    findings = []
    findings += check_overlaps(scenario, boxes, grid, config)
    findings += check_off_road(scenario, boxes, grid, config)
    findings += check_kinematics(scenario, boxes, grid, config)
    findings += check_gaps(scenario, config)
    road = ego_road(scenario, boxes, config)
    findings += check_track_ends(scenario, road, config)
    findings += check_light_conflicts(scenario, config)
    if config.rule_checks:
        findings += check_traffic_rules(scenario, boxes, grid, config, light_lanes(scenario, config), road)
    return sorted(findings, key=lambda f: (round(f.time_s, 6), f.kind, f.ids))


def _t_s(scenario: Scenario, grid: np.ndarray, ti) -> float:
    return float((int(grid[ti]) - start_ns(scenario)) / 1e9)


# ----------------------------------------------------------------------------- overlaps
def box_penetration_m(
    xy_a: np.ndarray, yaw_a: np.ndarray, lw_a: np.ndarray, xy_b: np.ndarray, yaw_b: np.ndarray, lw_b: np.ndarray
) -> np.ndarray:
    """Separating-axis penetration depth (P,) of pairs of oriented rectangles (<= 0: apart).

    The depth is the smallest overlap of the two boxes' projections over the four candidate
    axes (each box's length and width directions).
    """
    axes = np.stack([
        np.stack([np.cos(yaw_a), np.sin(yaw_a)], -1), np.stack([-np.sin(yaw_a), np.cos(yaw_a)], -1),
        np.stack([np.cos(yaw_b), np.sin(yaw_b)], -1), np.stack([-np.sin(yaw_b), np.cos(yaw_b)], -1),
    ], axis=1)  # fmt: skip  (P, 4, 2)

    def radius(yaw: np.ndarray, lw: np.ndarray) -> np.ndarray:
        u = np.stack([np.cos(yaw), np.sin(yaw)], -1)[:, None, :]
        v = np.stack([-np.sin(yaw), np.cos(yaw)], -1)[:, None, :]
        return np.abs((axes * u).sum(-1)) * lw[:, :1] / 2 + np.abs((axes * v).sum(-1)) * lw[:, 1:] / 2

    dist = np.abs((axes * (xy_b - xy_a)[:, None, :]).sum(-1))
    overlap = radius(yaw_a, lw_a) + radius(yaw_b, lw_b) - dist
    return overlap.min(axis=1)


def check_overlaps(scenario: Scenario, boxes: AgentBoxes, grid: np.ndarray, config: ValidationConfig) -> list[Finding]:
    if not len(boxes.ids):
        return []
    hit_pairs: dict[tuple[str, str], list[tuple[int, float]]] = {}
    order = np.argsort(boxes.ti, kind="stable")
    ti_sorted = boxes.ti[order]
    bounds = np.searchsorted(ti_sorted, np.arange(len(grid) + 1))
    half_diag = np.linalg.norm(boxes.lw, axis=1) / 2
    for t in range(len(grid)):
        rows = order[bounds[t] : bounds[t + 1]]
        if len(rows) < 2:
            continue
        i, j = np.triu_indices(len(rows), k=1)
        a, b = rows[i], rows[j]
        near = np.linalg.norm(boxes.xy[a] - boxes.xy[b], axis=1) < half_diag[a] + half_diag[b]
        zover = (np.minimum(boxes.z[a, 1], boxes.z[b, 1]) - np.maximum(boxes.z[a, 0], boxes.z[b, 0])) > config.overlap_tolerance_m
        a, b = a[near & zover], b[near & zover]
        if not len(a):
            continue
        depth = box_penetration_m(boxes.xy[a], boxes.yaw[a], boxes.lw[a], boxes.xy[b], boxes.yaw[b], boxes.lw[b])
        for ia, ib, d in zip(a, b, depth):
            if d > config.overlap_tolerance_m:
                lo_id, hi_id = sorted((str(boxes.ids[ia]), str(boxes.ids[ib])))
                hit_pairs.setdefault((lo_id, hi_id), []).append((t, float(d)))
    findings = []
    for (ida, idb), hits in sorted(hit_pairs.items()):
        ti = np.array([h[0] for h in hits])
        depth = np.array([h[1] for h in hits])
        for s, e in time_runs(ti):
            sel = (ti >= s) & (ti <= e)
            reason = (f"boxes overlap by up to {depth[sel].max():.2f} m from {_t_s(scenario, grid, s):.2f} "
                      f"to {_t_s(scenario, grid, e):.2f} s")  # fmt: skip
            findings.append(Finding("overlap", _t_s(scenario, grid, s), (ida, idb), reason))
    return findings


# ----------------------------------------------------------------------------- off road
def drivable_area(hdmap: HDMap) -> shapely.Geometry | None:
    """Union of the map's drivable polygons (shapely), or None when it has none."""
    da = hdmap.drivable_areas
    if not len(da):
        return None
    polys = [shapely.make_valid(shapely.Polygon(np.asarray(da[k])[:, :2])) for k in range(len(da))]
    return shapely.union_all(polys)


def ego_road(scenario: Scenario, boxes: AgentBoxes, config: ValidationConfig) -> shapely.Geometry | None:
    """The map's drivable area when it describes the road the ego drives on, else None.

    Args:
        scenario: the scenario.
        boxes: the validation boxes.
        config: `min_ego_coverage` (and `offroad_tolerance_m` for the coverage test).

    Returns:
        The union of the drivable areas (not buffered), or None when the map has none or they
        hold the ego's centre less than `min_ego_coverage` of the time (partial maps).
    """
    area = drivable_area(scenario.map)
    if area is None:
        return None
    ego_rows = boxes.ids == EGO_ID
    if ego_rows.any():
        grown = area.buffer(config.offroad_tolerance_m)
        if shapely.contains_xy(grown, boxes.xy[ego_rows, 0], boxes.xy[ego_rows, 1]).mean() < config.min_ego_coverage:
            return None
    return area


def check_off_road(scenario: Scenario, boxes: AgentBoxes, grid: np.ndarray, config: ValidationConfig) -> list[Finding]:
    area = ego_road(scenario, boxes, config)
    if area is None or not len(boxes.ids):
        return []
    area = area.buffer(config.offroad_tolerance_m)
    shapely.prepare(area)
    ego_rows = boxes.ids == EGO_ID
    vehicle = np.isin(boxes.cls, config.offroad_classes) | ego_rows
    rows = np.flatnonzero(vehicle)
    inside = shapely.contains_xy(area, boxes.xy[rows, 0], boxes.xy[rows, 1])
    out = rows[~inside]
    findings = []
    for tid in sorted(set(boxes.ids[out].tolist())):
        ti = np.sort(boxes.ti[out][boxes.ids[out] == tid])
        ever_in = bool(inside[boxes.ids[rows] == tid].any())
        for s, e in time_runs(ti):
            verb = "leaves" if ever_in else "is outside"
            reason = f"{verb} the drivable area from {_t_s(scenario, grid, s):.2f} to {_t_s(scenario, grid, e):.2f} s"
            findings.append(Finding("off_road", _t_s(scenario, grid, s), (tid,), reason))
    return findings


# ----------------------------------------------------------------------------- kinematics
def check_kinematics(scenario: Scenario, boxes: AgentBoxes, grid: np.ndarray, config: ValidationConfig) -> list[Finding]:
    dt = 1.0 / config.sample_rate_hz
    win = max(1, int(round(config.accel_window_s / dt)))
    findings = []
    agent_rows = boxes.ids != EGO_ID
    ids, cls = boxes.ids[agent_rows], boxes.cls[agent_rows]
    ti, xy = boxes.ti[agent_rows], boxes.xy[agent_rows]
    for tid in sorted(set(ids.tolist())):
        sel = np.flatnonzero(ids == tid)
        sel = sel[np.argsort(ti[sel])]
        c = str(cls[sel[0]])
        t_idx = ti[sel]
        if len(sel) < 2:
            continue
        step = np.diff(t_idx) * dt
        v = np.linalg.norm(np.diff(xy[sel], axis=0), axis=1) / step
        v_lim = config.speed_limits_mps.get(c, config.speed_limits_mps["Others"])
        if (v > v_lim).any():
            k = int(np.argmax(v > v_lim))
            findings.append(Finding("speed", _t_s(scenario, grid, t_idx[k]), (tid,),
                                    f"speed up to {v.max():.1f} m/s exceeds the {c} limit {v_lim:g} m/s"))  # fmt: skip
        if len(v) > win:
            vel = np.diff(xy[sel], axis=0) / step[:, None]
            t_mid = (t_idx[1:] + t_idx[:-1]) / 2 * dt
            acc = np.linalg.norm(vel[win:] - vel[:-win], axis=1) / np.maximum(t_mid[win:] - t_mid[:-win], 1e-9)
            a_lim = config.accel_limits_mps2.get(c, config.accel_limits_mps2["Others"])
            if (acc > a_lim).any():
                k = int(np.argmax(acc > a_lim))
                findings.append(Finding("acceleration", _t_s(scenario, grid, t_idx[k]), (tid,),
                                        f"acceleration up to {acc.max():.1f} m/s^2 exceeds the {c} limit {a_lim:g} m/s^2"))  # fmt: skip
    return findings


# ----------------------------------------------------------------------------- gaps
def check_gaps(scenario: Scenario, config: ValidationConfig) -> list[Finding]:
    agents = scenario.agents
    if len(agents) < 2:
        return []
    ts = np.asarray(agents.timestamps_ns)
    same = np.asarray(agents.track_id)[1:] == np.asarray(agents.track_id)[:-1]
    d = np.diff(ts)[same]
    if not len(d):
        return []
    typical = float(np.median(d)) / 1e9
    limit = max(config.gap_factor * typical, config.min_gap_s)
    findings = []
    idx = np.flatnonzero(same)
    for k, gap in zip(idx, np.diff(ts)[same]):
        if gap / 1e9 > limit:
            t = (int(ts[k]) - start_ns(scenario)) / 1e9
            findings.append(Finding("track_gap", t, (str(agents.track_id[k]),),
                                    f"unobserved for {gap / 1e9:.2f} s (typical step {typical:.2f} s)"))  # fmt: skip
    return findings


def _typical_step_s(agents: Any) -> float | None:
    """The median interval between a track's consecutive samples (None: no track has two)."""
    same = np.asarray(agents.track_id)[1:] == np.asarray(agents.track_id)[:-1]
    d = np.diff(np.asarray(agents.timestamps_ns))[same]
    return float(np.median(d)) / 1e9 if len(d) else None


def check_track_ends(scenario: Scenario, road: shapely.Geometry | None, config: ValidationConfig) -> list[Finding]:
    """`track_end`: vehicles whose tracks end before the clip does, on the road and near the ego.

    Args:
        scenario: the scenario.
        road: `ego_road(...)` (None: the map does not describe the road; nothing is reported).
        config: `gap_factor`, `min_gap_s`, `offroad_tolerance_m`, `offroad_classes`, `vanish_range_m`.

    Returns:
        One finding per vanishing track, at the time of its last sample.
    """
    agents = scenario.agents
    step = _typical_step_s(agents) if len(agents) else None
    if road is None or step is None:
        return []
    ids = np.asarray(agents.track_id).astype(str)
    last = np.flatnonzero(np.r_[ids[1:] != ids[:-1], True])
    ts = np.asarray(agents.timestamps_ns)[last]
    ego_end = int(scenario.ego.timestamps_ns[-1])
    early = (ego_end - ts) / 1e9 > max(config.gap_factor * step, config.min_gap_s)
    early &= np.isin(np.asarray(agents.object_class).astype(str)[last], config.offroad_classes)
    if not early.any():
        return []
    rows, ts = last[early], ts[early]
    xy = np.asarray(agents.center_m)[rows, :2]
    ego_xy = np.asarray(scenario.ego.pose_at(ts).translation).reshape(-1, 3)[:, :2]
    near = np.linalg.norm(xy - ego_xy, axis=1) <= config.vanish_range_m
    on_road = shapely.contains_xy(road.buffer(config.offroad_tolerance_m), xy[:, 0], xy[:, 1])
    findings = []
    for k in np.flatnonzero(near & on_road):
        t = (int(ts[k]) - start_ns(scenario)) / 1e9
        reason = f"track ends {(ego_end - int(ts[k])) / 1e9:.2f} s before the clip, on the road {float(np.linalg.norm(xy[k] - ego_xy[k])):.1f} m from the ego (vanishes in view)"
        findings.append(Finding("track_end", t, (str(ids[rows[k]]),), reason))
    return findings


# ----------------------------------------------------------------------------- lights
def _lane_end_headings(hdmap: HDMap) -> tuple[np.ndarray, np.ndarray]:
    centre = hdmap.lanes.centre
    ends, yaws = [], []
    for k in range(len(centre)):
        p = np.asarray(centre[k])
        d = p[-1, :2] - p[-2, :2]
        ends.append(p[-1, :2])
        yaws.append(np.arctan2(d[1], d[0]))
    return np.asarray(ends).reshape(-1, 2), np.asarray(yaws)


def light_lanes(scenario: Scenario, config: ValidationConfig | None = None) -> dict[str, list[int]]:
    """Lane indices each light controls (only lights whose lanes are known)."""
    config = config or ValidationConfig()
    hdmap = scenario.map
    lane_ids = [str(i) for i in np.asarray(hdmap.lanes.ids)]
    index = {lid: k for k, lid in enumerate(lane_ids)}
    light_ids = sorted(set(np.asarray(scenario.lights.light_id).astype(str).tolist()))
    explicit = scenario.metadata.get("traffic_light_lanes") or {}
    out: dict[str, list[int]] = {}
    positions = {str(i): np.asarray(c)[:2] for i, c in zip(np.asarray(hdmap.traffic_lights.ids), np.asarray(hdmap.traffic_lights.center_m))}
    for lid, p in (scenario.metadata.get("traffic_light_stop_points_m") or {}).items():
        positions.setdefault(str(lid), np.asarray(p, dtype=np.float64)[:2])
    ends, yaws = _lane_end_headings(hdmap) if lane_ids else (np.zeros((0, 2)), np.zeros(0))
    for light in light_ids:
        if light in explicit:
            out[light] = [index[x] for x in explicit[light] if str(x) in index]
        elif light in index:
            out[light] = [index[light]]
        elif light in positions and len(ends):
            # the lane that ends nearest before the light, the light straight ahead over it
            rel = positions[light] - ends
            along = rel[:, 0] * np.cos(yaws) + rel[:, 1] * np.sin(yaws)
            across = -rel[:, 0] * np.sin(yaws) + rel[:, 1] * np.cos(yaws)
            ok = (along >= -2.0) & (along <= config.light_assoc_radius_m) & (np.abs(across) <= config.light_assoc_lateral_m)
            if ok.any():
                out[light] = [int(np.flatnonzero(ok)[np.argmin(along[ok])])]
    return {k: v for k, v in out.items() if v}


def check_light_conflicts(scenario: Scenario, config: ValidationConfig) -> list[Finding]:
    lanes = light_lanes(scenario, config)
    if len(lanes) < 2:
        return []
    ends, yaws = _lane_end_headings(scenario.map)
    reach = config.light_assoc_radius_m
    paths = {}
    for k in {k for v in lanes.values() for k in v}:
        p = np.asarray(scenario.map.lanes.centre[k])[:, :2]
        ahead = ends[k] + reach * np.array([np.cos(yaws[k]), np.sin(yaws[k])])
        paths[k] = shapely.LineString(np.vstack([p, ahead]))  # the lane and its way on through the junction
    lights = sorted(lanes)
    crossing = []
    for i, a in enumerate(lights):
        for b in lights[i + 1 :]:
            if any(
                np.deg2rad(45) <= abs(float(wrap_angle(yaws[ka] - yaws[kb]))) <= np.deg2rad(135)
                and paths[ka].intersects(paths[kb])
                for ka in lanes[a]
                for kb in lanes[b]
            ):
                crossing.append((a, b))
    if not crossing:
        return []
    states = scenario.lights
    t_all = np.asarray(states.timestamps_ns)
    lo, hi = start_ns(scenario), int(scenario.ego.timestamps_ns[-1])
    change_times = np.unique(np.r_[lo, t_all[(t_all > lo) & (t_all <= hi)]])
    findings = []
    go = {"green", "yellow"}
    for a, b in crossing:
        conflict_times = []
        for t in change_times:
            sa, sb = states.state_at(np.array([a, b]), int(t))
            if sa in go and sb in go:
                conflict_times.append(int(t))
        if conflict_times:
            t0 = (conflict_times[0] - start_ns(scenario)) / 1e9
            findings.append(Finding("light_conflict", t0, (a, b), "lights of crossing lanes both show go (green/yellow)"))
    return findings
