"""Semantic validation of a scenario: what an edit can break that the types cannot see.

Checks (each finding carries the edit-clock time, the ids involved and a short reason):
- `overlap`: two boxes (agents and the ego) intersect at some time: oriented-box (separating
  axis) test in the ground plane plus a height-interval test; contact within
  `overlap_tolerance_m` of penetration is allowed. One finding per pair and contiguous run.
- `off_road`: a vehicle's box centre is more than `offroad_tolerance_m` outside the road model's
  drivable area (`avsim.maps.drivable`: the map's drivable polygons, lanes, junctions, the
  road-boundary outlines and the pockets between them), only when that area holds the ego for at
  least `min_ego_coverage` of the clip (otherwise the map does not describe the ego's road).
- `ego_pose`: the ego's source poses jump, step back or accelerate beyond what a car can
  (`avsim.scenario.ego_motion`: `ego_pose_max_speed_mps`, `ego_pose_back_step_m`,
  `ego_pose_max_accel_mps2`, judged at most at `sample_rate_hz`); one finding per stretch of
  implausible poses, naming the source pose indices (the simulator drops them, docs/closed_loop.md).
- `speed` / `acceleration`: beyond per-class limits (acceleration over a 0.5 s window, so
  label jitter does not count).
- `track_gap`: a track is unobserved for longer than `gap_factor` times the scenario's
  typical sample interval (and at least `min_gap_s`).
- `track_end`: a vehicle's track ends (longer than that before the clip ends) while its box
  centre is on the drivable area and within `vanish_range_m` of the ego: it vanishes in view
  (e.g. a parked car whose track an edit cut short).
- `light_conflict`: lights controlling crossing lanes are green (or yellow) at the same time.
  The lanes a light controls come from the road model (`avsim.maps.light_control`:
  `metadata['traffic_light_lanes']`, a light id that is also a lane id, or the lane that ends
  before the light within `light_assoc_radius_m` ahead and `light_assoc_lateral_m` to the
  side). Two lights conflict when their lanes, each extended
  `light_assoc_radius_m` straight on past its end, intersect at 45 to 135 degrees (crossing
  traffic; opposing approaches run parallel and never conflict).

Traffic rules (`avsim.edit.rules`, documented there; thresholds here, `rule_checks` picks which
run): `red_light` (a vehicle's front passes a controlled lane's stop point, from the road model,
while its light is red; yellow does not count), `wrong_way`, `speed_limit` (lane limits from
`metadata['lane_speed_limits_mps']`), `solid_line_crossing`, `stop_line` and `jaywalking`. Their
findings have ids (road user, map element) and a time span (`Finding.end_s`).

Every check that reads the road reads one `avsim.maps.road.RoadModel` (`validate_scenario`'s
`road`, built from the scenario when not given).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import shapely

from avsim.core.transforms import wrap_angle
from avsim.maps import HDMap
from avsim.maps.light_control import LightAssociation, lane_end_headings
from avsim.maps.road import RoadModel
from avsim.scenario import Scenario
from avsim.scenario.ego_motion import PoseIssue, PoseLimits, implausible_ego_poses
from avsim.scenario.road import road_model

from .common import start_ns
from .findings import EGO_ID, Finding, time_runs
from .rules import check_traffic_rules
from .validation_inputs import AgentBoxes, ValidationConfig, boxes_on_grid

__all__ = ["EGO_ID", "Finding", "ValidationConfig", "drivable_area", "findings_document", "light_lanes", "scenario_road", "validate_scenario"]

def findings_document(scenario: Scenario, findings: list[Finding]) -> dict[str, Any]:
    """`avsim validate --json`: the scenario id, every finding and the count per kind."""
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.kind] = counts.get(f.kind, 0) + 1
    return {"scenario_id": scenario.scenario_id, "findings": [f.to_dict() for f in findings], "counts": counts}


def scenario_road(scenario: Scenario, config: ValidationConfig | None = None) -> RoadModel:
    """The scenario's road model with `config`'s light-to-lane reach."""
    config = config or ValidationConfig()
    return road_model(scenario, LightAssociation(config.light_assoc_radius_m, config.light_assoc_lateral_m))


def validate_scenario(scenario: Scenario, config: ValidationConfig | None = None, road: RoadModel | None = None) -> list[Finding]:
    """All findings, sorted by (time, kind, ids).

    Args:
        scenario: the scenario.
        config: thresholds and the checks to run.
        road: the scenario's road model (None: built from the scenario, `scenario_road`).

    Returns:
        The findings.
    """
    config = config or ValidationConfig()
    road = road if road is not None else scenario_road(scenario, config)
    grid = scenario.ego.uniform_timestamps(config.sample_rate_hz)
    boxes = boxes_on_grid(scenario, grid, config)
    area = ego_road(road, boxes, config)
    findings = []
    findings += check_overlaps(scenario, boxes, grid, config)
    findings += check_off_road(scenario, area, boxes, grid, config)
    findings += check_kinematics(scenario, boxes, grid, config)
    findings += check_ego_poses(scenario, config)
    findings += check_gaps(scenario, config)
    findings += check_track_ends(scenario, area, config)
    findings += check_light_conflicts(scenario, road, config)
    if config.rule_checks:
        findings += check_traffic_rules(scenario, boxes, grid, config, road, area)
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
    """The drivable area the road model builds from a map (`avsim.maps.drivable`), or None when it has no road surface."""
    area = RoadModel(hdmap).drivable
    return None if area.is_empty else area


def ego_road(road: RoadModel, boxes: AgentBoxes, config: ValidationConfig) -> shapely.Geometry | None:
    """The road model's drivable area when it describes the road the ego drives on, else None.

    Args:
        road: the scenario's road model.
        boxes: the validation boxes.
        config: `min_ego_coverage` (and `offroad_tolerance_m` for the coverage test).

    Returns:
        The drivable area (not buffered, prepared), or None when it is empty or holds the ego's
        centre less than `min_ego_coverage` of the time (a map that does not cover its road).
    """
    area = road.drivable
    if area.is_empty:
        return None
    ego_rows = boxes.ids == EGO_ID
    if ego_rows.any() and _near(area, boxes.xy[ego_rows], config.offroad_tolerance_m).mean() < config.min_ego_coverage:
        return None
    return area


def _near(area: shapely.Geometry, xy: np.ndarray, tolerance_m: float) -> np.ndarray:
    """(n,) whether points lie within `tolerance_m` of the area (inside it or near its edge)."""
    if not len(xy):
        return np.zeros(0, bool)
    inside = shapely.contains_xy(area, xy[:, 0], xy[:, 1])
    rest = np.flatnonzero(~inside)
    if len(rest):
        inside[rest] = shapely.dwithin(area, shapely.points(xy[rest]), tolerance_m)
    return inside


def check_off_road(scenario: Scenario, area: shapely.Geometry | None, boxes: AgentBoxes, grid: np.ndarray,
                   config: ValidationConfig) -> list[Finding]:  # fmt: skip
    """`off_road` findings: vehicle centres farther than `offroad_tolerance_m` outside `area` (`ego_road`)."""
    if area is None or not len(boxes.ids):
        return []
    ego_rows = boxes.ids == EGO_ID
    vehicle = np.isin(boxes.cls, config.offroad_classes) | ego_rows
    rows = np.flatnonzero(vehicle)
    inside = _near(area, boxes.xy[rows], config.offroad_tolerance_m)
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


def check_ego_poses(scenario: Scenario, config: ValidationConfig) -> list[Finding]:
    """`ego_pose` findings: stretches of implausible ego source poses (`avsim.scenario.ego_motion`).

    Args:
        scenario: the scenario.
        config: `ego_pose_*` thresholds and `sample_rate_hz`.

    Returns:
        One finding per stretch of overlapping issues, naming its source pose indices.
    """
    limits = PoseLimits(config.sample_rate_hz, config.ego_pose_max_speed_mps, config.ego_pose_back_step_m, config.ego_pose_max_accel_mps2)
    stretches: list[list[PoseIssue]] = []
    for issue in implausible_ego_poses(scenario.ego, limits):
        if stretches and issue.first <= max(i.last for i in stretches[-1]):
            stretches[-1].append(issue)
        else:
            stretches.append([issue])
    findings = []
    t0 = start_ns(scenario)
    for group in stretches:
        first, last = min(i.first for i in group), max(i.last for i in group)
        first_ns, last_ns = min(i.first_ns for i in group), max(i.last_ns for i in group)
        worst = {i.kind: i for i in sorted(group, key=lambda i: i.value)}  # per kind, its largest
        what = "; ".join(worst[k].reason for k in ("jump", "back_step", "acceleration") if k in worst)
        reason = f"ego poses {first}-{last} ({(first_ns - t0) / 1e9:.2f}-{(last_ns - t0) / 1e9:.2f} s): {what}"
        findings.append(Finding("ego_pose", (first_ns - t0) / 1e9, (EGO_ID,), reason, end_s=(last_ns - t0) / 1e9))
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
    on_road = _near(road, xy, config.offroad_tolerance_m)
    findings = []
    for k in np.flatnonzero(near & on_road):
        t = (int(ts[k]) - start_ns(scenario)) / 1e9
        reason = f"track ends {(ego_end - int(ts[k])) / 1e9:.2f} s before the clip, on the road {float(np.linalg.norm(xy[k] - ego_xy[k])):.1f} m from the ego (vanishes in view)"
        findings.append(Finding("track_end", t, (str(ids[rows[k]]),), reason))
    return findings


# ----------------------------------------------------------------------------- lights
def light_lanes(scenario: Scenario, config: ValidationConfig | None = None) -> dict[str, list[int]]:
    """Lane indices each light controls (the road model's `controlled_lanes`; only lights whose lanes are known)."""
    return scenario_road(scenario, config).controlled_lanes


def check_light_conflicts(scenario: Scenario, road: RoadModel, config: ValidationConfig) -> list[Finding]:
    """`light_conflict` findings: lights of crossing lanes showing go at the same time (see the module docstring)."""
    lanes = road.controlled_lanes
    if len(lanes) < 2:
        return []
    ends, yaws = lane_end_headings(scenario.map)
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
