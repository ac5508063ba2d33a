"""Traffic-rule checks of `avsim validate`: what a road user does that the road forbids.

Every check works on the road users sampled on the validation grid (`Motion`, rows sorted by
track and time) and vectorises over all rows at once; each finding has ids (road user or
`ego`, map element), the time span and a short reason. Thresholds live in
`avsim.edit.validation_inputs.ValidationConfig`. Vehicles are the ego and agents of
`rule_vehicle_classes` (Car, Truck); `red_light` also checks `red_light_classes` (cyclists).

- `red_light`: a vehicle's front crosses a controlled lane's stop point while the lane's light is
  red (yellow and unknown do not count). Lanes per light come from the road model
  (`avsim.maps.light_control.light_lanes`); the
  stop point is the light's `metadata['traffic_light_stop_points_m']` entry projected onto the
  lane when there is one (Waymo / ScenarioNet: the controlled lane is the one through the
  junction), else the end of the lane's centre line. Crossing = the front's signed distance
  along the lane direction there goes from < 0 to >= 0 between two samples, within the lane's
  half width to the side, heading within `red_light_heading_deg` of the lane's.
- `wrong_way`: a vehicle inside at least one lane polygon (left rail + right rail), moving faster
  than `wrong_way_min_speed_mps`, whose heading is more than `wrong_way_angle_deg` from the
  centre-line tangent of every lane it is in, for at least `wrong_way_min_s`.
- `speed_limit`: faster than the limit of the lane it is in plus `speed_limit_tolerance_mps`
  for at least `speed_limit_min_s`. Limits come from `metadata['lane_speed_limits_mps']`
  ({lane_id: m/s}), which the ScenarioNet and Waymo motion importers fill from their lanes'
  `speed_limit_mph`; maps without limits (nuScenes, AV2, the sample) are not checked.
- `solid_line_crossing`: a vehicle's centre crosses a lane line whose pattern on the side it
  comes from is solid (`avsim.maps.style.lane_style`; for double lines the first pattern is the
  left copy, so `YELLOW DASHED_SOLID` may be crossed from its dashed side only). One finding per
  vehicle and line, over the span of its crossings.
- `stop_line`: a vehicle stopped (slower than `stop_speed_mps`) for at least `stop_line_min_s`
  with the wait line between its rear and its front and its front more than
  `stop_line_tolerance_m` beyond it, heading along a lane that meets the line. Not checked:
  failing to stop at a stop sign (the maps do not tie signs to approaches in a usable way).
- `jaywalking`: a pedestrian more than `jaywalk_margin_m` inside the road and more than
  `crosswalk_margin_m` outside every crosswalk for at least `jaywalk_min_s`. The road is the
  drivable area when it holds the ego (as for `off_road`), else the union of the lane polygons.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely

from avsim.core.transforms import wrap_angle
from avsim.maps import HDMap
from avsim.maps.lane_geometry import LaneGeometry
from avsim.maps.queries import element_geometries
from avsim.maps.road import RoadModel
from avsim.maps.style import lane_style
from avsim.scenario import Scenario

from .common import start_ns
from .findings import EGO_ID, Finding, time_runs
from .validation_inputs import AgentBoxes, ValidationConfig


@dataclass(frozen=True, eq=False)
class Motion:
    """Road users on the grid, N rows sorted by (id, time index).

    ids, cls (N,) str; ti (N,) grid index; t_ns (N,) grid time; t_s (N,) edit-clock seconds;
    xy (N, 2) box centre; yaw (N,); length_m (N,); speed_mps (N,) centre speed (0 when the track
    has a single sample); prev (N,) row of the same track one grid step earlier, -1 if none.
    """

    ids: np.ndarray
    cls: np.ndarray
    ti: np.ndarray
    t_ns: np.ndarray
    t_s: np.ndarray
    xy: np.ndarray
    yaw: np.ndarray
    length_m: np.ndarray
    speed_mps: np.ndarray
    prev: np.ndarray

    def heading_xy(self) -> np.ndarray:
        """Unit heading vectors.

        Returns:
            (N, 2) cos, sin of each row's yaw.
        """
        return np.stack([np.cos(self.yaw), np.sin(self.yaw)], axis=1)

    def front_xy(self) -> np.ndarray:
        """Centre of the front edge of each box.

        Returns:
            (N, 2) xy, half a length ahead of the box centre.
        """
        return self.xy + self.length_m[:, None] / 2 * self.heading_xy()


def motion_on_grid(scenario: Scenario, boxes: AgentBoxes, grid: np.ndarray, sample_rate_hz: float) -> Motion:
    """The sampled boxes as `Motion` (sorted rows, speeds, previous-row links).

    Args:
        scenario: the scenario (for its clock start).
        boxes: the validation boxes on the grid.
        grid: (T,) int ns grid times.
        sample_rate_hz: the grid rate.

    Returns:
        The road users' motion.
    """
    order = np.lexsort((boxes.ti, boxes.ids))
    ids, ti, xy = boxes.ids[order], boxes.ti[order], boxes.xy[order]
    n = len(ids)
    linked = np.zeros(n, bool)
    if n > 1:
        linked[1:] = (ids[1:] == ids[:-1]) & (np.diff(ti) == 1)
    prev = np.where(linked, np.arange(n) - 1, -1)
    v_in = np.full(n, np.nan)
    v_in[linked] = np.linalg.norm(xy[linked] - xy[prev[linked]], axis=1) * sample_rate_hz
    v_out = np.r_[v_in[1:], np.nan]
    speed = np.where(np.isnan(v_in), v_out, np.where(np.isnan(v_out), v_in, (v_in + v_out) / 2))
    t_ns = np.asarray(grid, dtype=np.int64)[ti]
    return Motion(ids, boxes.cls[order], ti, t_ns, (t_ns - start_ns(scenario)) / 1e9, xy, boxes.yaw[order],
                  boxes.lw[order, 0], np.nan_to_num(speed), prev)  # fmt: skip


def _row_runs(m: Motion, mask: np.ndarray, min_s: float) -> list[tuple[int, int]]:
    """Runs (first row, last row) of consecutive samples of one track where `mask` holds, >= min_s long."""
    cont = np.zeros(len(mask), bool)
    cont[m.prev >= 0] = mask[m.prev[m.prev >= 0]]
    starts = np.flatnonzero(mask & ~cont)
    nxt = np.r_[cont[1:] & mask[1:], False]  # the next row continues this track and is masked too
    ends = np.flatnonzero(mask & ~nxt)
    return [(int(s), int(e)) for s, e in zip(starts, ends) if m.t_s[e] - m.t_s[s] >= min_s - 1e-9]


def _vehicles(m: Motion, classes: tuple[str, ...]) -> np.ndarray:
    return np.isin(m.cls, classes) | (m.ids == EGO_ID)


def _tangent_yaw(lines: np.ndarray, points_xy: np.ndarray) -> np.ndarray:
    """Heading (P,) of each line at the point nearest to each point (lines, points (P,) / (P, 2))."""
    pts = shapely.points(points_xy)
    with np.errstate(invalid="ignore"):  # degenerate (zero-length) lines locate to NaN
        s = np.nan_to_num(shapely.line_locate_point(lines, pts))
    length = shapely.length(lines)
    a = shapely.get_coordinates(shapely.line_interpolate_point(lines, np.maximum(s - 0.5, 0.0)))
    b = shapely.get_coordinates(shapely.line_interpolate_point(lines, np.minimum(s + 0.5, length)))
    d = (b - a).reshape(-1, 2)
    return np.where(np.hypot(d[:, 0], d[:, 1]) > 1e-9, np.arctan2(d[:, 1], d[:, 0]), np.nan)


def check_traffic_rules(scenario: Scenario, boxes: AgentBoxes, grid: np.ndarray, config: ValidationConfig,
                        road_model: RoadModel, road: shapely.Geometry | None) -> list[Finding]:  # fmt: skip
    """Every rule of `config.rule_checks` (see the module docstring).

    Args:
        scenario: the scenario.
        boxes: the validation boxes on the grid.
        grid: (T,) int ns grid times.
        config: thresholds.
        road_model: the scenario's road model (lanes, light control).
        road: the drivable area when it describes the ego's road, else None.

    Returns:
        The findings (unsorted).
    """
    if not len(boxes.ids):
        return []
    m = motion_on_grid(scenario, boxes, grid, config.sample_rate_hz)
    lanes, controlled = road_model.geometry, road_model.controlled_lanes
    veh = _vehicles(m, config.rule_vehicle_classes)
    rows = np.flatnonzero(veh)
    point, lane = lanes.members(m.xy[rows])
    member = (rows[point], lane)
    in_lane = np.zeros(len(m.ids), bool)
    in_lane[member[0]] = True
    checks = {
        "red_light": lambda: check_red_light(scenario, m, lanes, controlled, config),
        "wrong_way": lambda: check_wrong_way(m, lanes, member, veh, config),
        "speed_limit": lambda: check_speed_limit(scenario, m, lanes, member, veh, config),
        "solid_line_crossing": lambda: check_solid_lines(scenario.map, m, veh & in_lane, config),
        "stop_line": lambda: check_stop_lines(scenario.map, m, lanes, veh, config),
        "jaywalking": lambda: check_jaywalking(scenario.map, m, lanes, road, config),
    }
    findings: list[Finding] = []
    for kind in config.rule_checks:
        findings += checks[kind]()
    return findings


def _light_state_rows(scenario: Scenario, light: str, t_ns: np.ndarray) -> np.ndarray:
    states = scenario.lights
    sel = np.asarray(states.light_id).astype(str) == light
    t_l, s_l = np.asarray(states.timestamps_ns)[sel], np.asarray(states.state)[sel].astype(str)
    k = np.searchsorted(t_l, t_ns, side="right") - 1
    return np.where(k >= 0, s_l[np.maximum(k, 0)] if len(s_l) else "unknown", "unknown")


def _stop_point(lanes: LaneGeometry, k: int, stop_xy: np.ndarray | None) -> tuple[np.ndarray, float, float]:
    """(point (2,), lane heading there, lane half width there) of lane k's stop point."""
    line = lanes.centres[k]
    if stop_xy is None:
        p = np.asarray(shapely.get_coordinates(line)[-1], dtype=np.float64)
    else:
        p = shapely.get_coordinates(shapely.line_interpolate_point(line, shapely.line_locate_point(line, shapely.Point(stop_xy))))[0]
    yaw = float(_tangent_yaw(np.array([line], dtype=object), p[None])[0])
    pt = shapely.Point(p)
    width = float(shapely.distance(lanes.left[k], pt) + shapely.distance(lanes.right[k], pt))
    return p, yaw, max(width / 2, 0.5) if width > 0 else 1.75


def _lane_turn_rad(lanes: LaneGeometry, k: int) -> float:
    """Heading change (rad, left positive) from the start to the end of lane k's centre line."""
    p = shapely.get_coordinates(lanes.centres[k])
    if len(p) < 2:
        return 0.0
    d0, d1 = p[1] - p[0], p[-1] - p[-2]
    return float(wrap_angle(np.arctan2(d1[1], d1[0]) - np.arctan2(d0[1], d0[0])))


def _stopped_before(m: Motion, r: int, config: ValidationConfig) -> bool:
    """Whether the track of row r was stopped at some sample in the `red_light_stop_lookback_s` before it."""
    k = r
    while m.prev[k] >= 0 and m.t_s[r] - m.t_s[m.prev[k]] <= config.red_light_stop_lookback_s:
        k = int(m.prev[k])
        if m.speed_mps[k] < config.stop_speed_mps:
            return True
    return False


def check_red_light(scenario: Scenario, m: Motion, lanes: LaneGeometry, controlled: dict[str, list[int]],
                    config: ValidationConfig) -> list[Finding]:  # fmt: skip
    """`red_light` findings: fronts crossing a stop point while its light is red (see module docstring).

    Args:
        scenario: the scenario (lights, stop points in metadata).
        m: the road users on the grid.
        lanes: the lane geometry.
        controlled: light id -> controlled lane indices.
        config: thresholds.

    Returns:
        The findings, ids (road user, lane).
    """
    stops = scenario.metadata.get("traffic_light_stop_points_m") or {}
    veh = _vehicles(m, config.rule_vehicle_classes + config.red_light_classes)
    has_prev = m.prev >= 0
    front = m.front_xy()
    hits: dict[tuple[str, str], tuple[float, int, int]] = {}  # (id, light) -> (|across|, row, lane)
    for light in sorted(controlled):
        red = _light_state_rows(scenario, light, m.t_ns) == "red"
        if not red.any():
            continue
        for k in controlled[light]:
            stop = stops.get(light)
            p, yaw_u, half_w = _stop_point(lanes, k, None if stop is None else np.asarray(stop, dtype=np.float64)[:2])
            u = np.array([np.cos(yaw_u), np.sin(yaw_u)])
            rel = front - p
            along, across = rel @ u, rel @ np.array([-u[1], u[0]])
            before = np.where(has_prev, along[np.maximum(m.prev, 0)], np.inf)
            aligned = np.abs(wrap_angle(m.yaw - yaw_u)) < np.deg2rad(config.red_light_heading_deg)
            right_turn = _lane_turn_rad(lanes, k) < -np.deg2rad(45.0)
            for r in np.flatnonzero(veh & red & (before < 0) & (along >= 0) & (np.abs(across) <= half_w) & aligned):
                if right_turn and config.red_light_right_turn_after_stop and _stopped_before(m, int(r), config):
                    continue
                key = (str(m.ids[r]), light)
                if key not in hits or abs(across[r]) < hits[key][0]:
                    hits[key] = (float(abs(across[r])), int(r), k)
    findings = []
    for (tid, light), (_, r, k) in sorted(hits.items()):
        red_rows = _light_state_rows(scenario, light, np.array([m.t_ns[r]]))
        reason = f"front passes the stop point of lane {lanes.ids[k]} at {m.t_s[r]:.2f} s while {light} is {red_rows[0]}"
        findings.append(Finding("red_light", float(m.t_s[r]), (tid, str(lanes.ids[k])), reason, end_s=float(m.t_s[r])))
    return findings


def _lane_run_findings(kind: str, m: Motion, runs: list[tuple[int, int]], lane_of_row: dict[int, int],
                       lanes: LaneGeometry, what: str) -> list[Finding]:  # fmt: skip
    findings = []
    for s, e in runs:
        lane_id = str(lanes.ids[lane_of_row[s]])
        reason = f"{what} in lane {lane_id} from {m.t_s[s]:.2f} to {m.t_s[e]:.2f} s"
        findings.append(Finding(kind, float(m.t_s[s]), (str(m.ids[s]), lane_id), reason, end_s=float(m.t_s[e])))
    return findings


def check_wrong_way(m: Motion, lanes: LaneGeometry, member: tuple[np.ndarray, np.ndarray], veh: np.ndarray,
                    config: ValidationConfig) -> list[Finding]:  # fmt: skip
    """`wrong_way` findings: heading against every lane the vehicle is in (see module docstring).

    Args:
        m: the road users on the grid.
        lanes: the lane geometry.
        member: (row (P,), lane index (P,)) of every vehicle row inside every lane.
        veh: (N,) bool, the rows of vehicles.
        config: thresholds.

    Returns:
        The findings, ids (road user, lane).
    """
    rows, lane = member
    if not len(rows):
        return []
    tangent = _tangent_yaw(lanes.centres[lane], m.xy[rows])
    against = np.abs(wrap_angle(m.yaw[rows] - tangent)) > np.deg2rad(config.wrong_way_angle_deg)
    along = ~against  # an unknown tangent (degenerate centre line) never counts against
    inside = np.zeros(len(m.ids), bool)
    inside[rows] = True
    compatible = np.zeros(len(m.ids), bool)
    compatible[rows[along]] = True
    wrong = veh & inside & ~compatible & (m.speed_mps > config.wrong_way_min_speed_mps)
    first_lane = {int(r): int(k) for r, k in zip(rows[::-1], lane[::-1])}
    runs = _row_runs(m, wrong, config.wrong_way_min_s)
    return _lane_run_findings("wrong_way", m, runs, first_lane, lanes, "drives against the lane direction")


def check_speed_limit(scenario: Scenario, m: Motion, lanes: LaneGeometry, member: tuple[np.ndarray, np.ndarray],
                      veh: np.ndarray, config: ValidationConfig) -> list[Finding]:  # fmt: skip
    """`speed_limit` findings from `metadata['lane_speed_limits_mps']` (see module docstring).

    Args:
        scenario: the scenario (its metadata).
        m: the road users on the grid.
        lanes: the lane geometry.
        member: (row (P,), lane index (P,)) of every vehicle row inside every lane.
        veh: (N,) bool, the rows of vehicles.
        config: thresholds.

    Returns:
        The findings, ids (road user, lane).
    """
    limits = scenario.metadata.get("lane_speed_limits_mps") or {}
    rows, lane = member
    if not limits or not len(rows):
        return []
    lane_limit = np.array([float(limits.get(str(i), np.nan)) for i in lanes.ids])
    row_limit = np.full(len(m.ids), -np.inf)
    np.maximum.at(row_limit, rows, np.nan_to_num(lane_limit[lane], nan=-np.inf))
    known = np.isfinite(row_limit)
    over = veh & known & (m.speed_mps > np.where(known, row_limit, 0.0) + config.speed_limit_tolerance_mps)
    first_lane = {int(r): int(k) for r, k in zip(rows[::-1], lane[::-1]) if np.isfinite(lane_limit[k])}
    findings = []
    for s, e in _row_runs(m, over, config.speed_limit_min_s):
        lane_id = str(lanes.ids[first_lane[s]])
        top = float(m.speed_mps[s : e + 1].max())
        reason = (f"up to {top:.1f} m/s in lane {lane_id} (limit {lane_limit[first_lane[s]]:.1f} m/s) "
                  f"from {m.t_s[s]:.2f} to {m.t_s[e]:.2f} s")  # fmt: skip
        findings.append(Finding("speed_limit", float(m.t_s[s]), (str(m.ids[s]), lane_id), reason, end_s=float(m.t_s[e])))
    return findings


def _side_of(lines: np.ndarray, points_xy: np.ndarray) -> np.ndarray:
    """Sign (P,) of each point's offset from each line: +1 left of its direction, -1 right, 0 on it."""
    yaw = np.nan_to_num(_tangent_yaw(lines, points_xy))
    with np.errstate(invalid="ignore"):
        s = np.nan_to_num(shapely.line_locate_point(lines, shapely.points(points_xy)))
    rel = points_xy - shapely.get_coordinates(shapely.line_interpolate_point(lines, s)).reshape(-1, 2)
    cross = np.cos(yaw) * rel[:, 1] - np.sin(yaw) * rel[:, 0]
    return np.where(np.abs(cross) < 1e-6, 0.0, np.sign(cross))


def check_solid_lines(hdmap: HDMap, m: Motion, veh: np.ndarray, config: ValidationConfig) -> list[Finding]:
    """`solid_line_crossing` findings: centre paths crossing a line solid on the side they come from.

    Args:
        hdmap: the map (its lane lines).
        m: the road users on the grid.
        veh: (N,) bool, the rows to check (vehicles inside a lane).
        config: thresholds.

    Returns:
        The findings, ids (road user, lane line).
    """
    ll = hdmap.lane_lines
    styles = [lane_style(t) for t in ll.lane_types()]
    solid_any = np.array([any(p.pairs is None for p in st.patterns) for st in styles], bool)
    rows = np.flatnonzero(veh & (m.prev >= 0))
    if not solid_any.any() or not len(rows):
        return []
    line_idx = np.flatnonzero(solid_any)
    geoms = element_geometries(ll)[line_idx]
    start = m.xy[m.prev[rows]]
    segs = shapely.linestrings(np.stack([start, m.xy[rows]], axis=1))
    seg, hit = shapely.STRtree(geoms).query(segs, predicate="intersects")
    if not len(seg):
        return []
    yaw = _tangent_yaw(geoms[hit], start[seg])
    shallow = np.abs(np.sin(wrap_angle(m.yaw[rows[seg]] - yaw))) < np.sin(np.deg2rad(config.solid_line_max_angle_deg))
    seg, hit = seg[shallow], hit[shallow]  # steep crossings: through a junction, not a lane change
    side_start = _side_of(geoms[hit], start[seg])
    side_end = _side_of(geoms[hit], m.xy[rows[seg]])
    crossed = (side_start != 0) & (side_end * side_start <= 0)  # a sample exactly on the line counts once
    seg, hit, from_left = seg[crossed], hit[crossed], side_start[crossed] > 0
    crossings: dict[tuple[str, str], list[float]] = {}
    for sg, h, left in zip(seg, hit, from_left):
        patterns = styles[line_idx[h]].patterns
        if (patterns[0] if left or len(patterns) == 1 else patterns[1]).pairs is None:
            r = rows[sg]
            crossings.setdefault((str(m.ids[r]), str(ll.ids[line_idx[h]])), []).append(float(m.t_s[r]))
    findings = []
    for (tid, lid), times in sorted(crossings.items()):
        k = int(np.flatnonzero(ll.ids == lid)[0])
        reason = f"centre crosses solid lane line {lid} ({ll.lane_type(k)}) {len(times)} time(s), {times[0]:.2f} to {times[-1]:.2f} s"
        findings.append(Finding("solid_line_crossing", times[0], (tid, lid), reason, end_s=times[-1]))
    return findings


def _approach_yaws(hdmap: HDMap, lanes: LaneGeometry, lines: np.ndarray) -> list[np.ndarray]:
    """Per wait line, the headings of the lane centre lines that meet it (within 1 m)."""
    out = []
    for line in lines:
        near = lanes.tree.query(line.buffer(1.0), predicate="intersects") if len(lanes.ids) else np.zeros(0, int)
        near = [k for k in near if shapely.intersects(lanes.centres[k], line.buffer(1.0))]
        if not near:
            out.append(np.zeros(0))
            continue
        pts = shapely.get_coordinates(shapely.shortest_line(lanes.centres[near], line))[0::2]  # the points on the lanes
        out.append(_tangent_yaw(lanes.centres[near], pts))
    return out


def check_stop_lines(hdmap: HDMap, m: Motion, lanes: LaneGeometry, veh: np.ndarray, config: ValidationConfig) -> list[Finding]:
    """`stop_line` findings: stopped with the front beyond a wait line (see module docstring).

    Args:
        hdmap: the map (its wait lines).
        m: the road users on the grid.
        lanes: the lane geometry (approach directions).
        veh: (N,) bool, the rows of vehicles.
        config: thresholds.

    Returns:
        The findings, ids (road user, wait line).
    """
    rows = np.flatnonzero(veh & (m.speed_mps < config.stop_speed_mps))
    if not len(hdmap.wait_lines) or not len(rows):
        return []
    lines = element_geometries(hdmap.wait_lines)
    u = m.heading_xy()[rows] * m.length_m[rows, None] / 2
    rear, front = m.xy[rows] - u, m.xy[rows] + u
    seg, hit = shapely.STRtree(lines).query(shapely.linestrings(np.stack([rear, front], axis=1)), predicate="intersects")
    if not len(seg):
        return []
    beyond = shapely.distance(lines[hit], shapely.points(front[seg])) > config.stop_line_tolerance_m
    approach = _approach_yaws(hdmap, lanes, lines)
    over: dict[tuple[str, int], list[int]] = {}
    for sg, h, ok in zip(seg, hit, beyond):
        r = int(rows[sg])
        yaws = approach[h]
        if ok and (not len(yaws) or (np.abs(wrap_angle(m.yaw[r] - yaws)) < np.pi / 4).any()):
            over.setdefault((str(m.ids[r]), int(h)), []).append(r)
    findings = []
    for (tid, h), rs in sorted(over.items()):
        ti = m.ti[rs]
        for s, e in time_runs(ti):
            t0, t1 = float(m.t_s[rs[int(np.searchsorted(ti, s))]]), float(m.t_s[rs[int(np.searchsorted(ti, e))]])
            if t1 - t0 >= config.stop_line_min_s - 1e-9:
                lid = str(hdmap.wait_lines.ids[h])
                reason = f"stopped with its front beyond stop line {lid} from {t0:.2f} to {t1:.2f} s"
                findings.append(Finding("stop_line", t0, (tid, lid), reason, end_s=t1))
    return findings


def check_jaywalking(hdmap: HDMap, m: Motion, lanes: LaneGeometry, road: shapely.Geometry | None,
                     config: ValidationConfig) -> list[Finding]:  # fmt: skip
    """`jaywalking` findings: pedestrians on the road outside every crosswalk (see module docstring).

    Args:
        hdmap: the map (its crosswalks).
        m: the road users on the grid.
        lanes: the lane geometry (the road when `road` is None; the nearest lane names the finding).
        road: the drivable area when it describes the ego's road, else None.
        config: thresholds.

    Returns:
        The findings, ids (road user, nearest lane).
    """
    ped = m.cls == "Pedestrian"
    if not ped.any() or not len(hdmap.crosswalks):
        return []  # a map without crosswalks cannot tell a crossing from jaywalking
    if road is None:
        if not len(lanes.ids):
            return []
        road = shapely.union_all(lanes.polygons)
    inner = shapely.buffer(road, -config.jaywalk_margin_m)
    shapely.prepare(inner)
    rows = np.flatnonzero(ped)
    on_road = np.zeros(len(m.ids), bool)
    on_road[rows] = shapely.contains_xy(inner, m.xy[rows, 0], m.xy[rows, 1])
    cw = shapely.union_all([shapely.make_valid(shapely.Polygon(np.asarray(c)[:, :2])) for c in hdmap.crosswalks])
    cw = shapely.buffer(cw, config.crosswalk_margin_m)
    shapely.prepare(cw)
    on_road[rows] &= ~shapely.contains_xy(cw, m.xy[rows, 0], m.xy[rows, 1])
    findings = []
    for s, e in _row_runs(m, on_road, config.jaywalk_min_s):
        lane_id = str(lanes.ids[int(lanes.tree.nearest(shapely.Point(m.xy[s])))]) if len(lanes.ids) else "drivable_area"
        reason = f"on the road outside every crosswalk (near lane {lane_id}) from {m.t_s[s]:.2f} to {m.t_s[e]:.2f} s"
        findings.append(Finding("jaywalking", float(m.t_s[s]), (str(m.ids[s]), lane_id), reason, end_s=float(m.t_s[e])))
    return findings
