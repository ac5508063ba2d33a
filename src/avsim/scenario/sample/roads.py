"""Road geometry of the embedded sample: a signalised four-way urban intersection.

Pure geometry on numpy arrays (world frame FLU, metres, z up, flat ground at z = 0); no avsim
types here, so the traffic simulation and the map assembly can share it. `avsim.scenario.sample` turns
the output of `build_road_network` into an `HDMap`.

Layout (all four arms identical, rotated by 90 degrees):
- arm k points along `u_k = (cos k*90deg, sin k*90deg)` (E, N, W, S); `n_k` is `u_k` rotated by
  +90 deg. Right-hand traffic: inbound lanes (towards the centre) lie on the `+n_k` side;
- per direction two 3.5 m lanes, then a 1.5 m bike lane, then the curb at 8.5 m from the
  centre line, then a 3 m sidewalk (not a map element; pedestrians walk on it);
- curb returns of radius 4 m, crosswalks 4 m wide from 12.5 m to 16.5 m from the centre,
  stop lines at 17.5 m;
- lane lines: double yellow centre line (dashed-solid yellow on the far part of the N/S road),
  solid white lane divider over the last 30 m before the stop line and long-dashed further out,
  white bike-lane line (short-dashed over the 20 m where right-turning cars cross it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import shapely
from shapely import affinity
from shapely.geometry import LineString, Polygon

ARM_NAMES = ("E", "N", "W", "S")
LANE_WIDTH_M = 3.5
LANES_PER_DIRECTION = 2
BIKE_LANE_WIDTH_M = 1.5
CURB_OFFSET_M = LANES_PER_DIRECTION * LANE_WIDTH_M + BIKE_LANE_WIDTH_M  # 8.5
# the 3 m sidewalk (CURB_OFFSET_M .. CURB_OFFSET_M + 3 m) is not a map element; walking lines lie on it
CORNER_RADIUS_M = 4.0
CORNER_START_M = CURB_OFFSET_M + CORNER_RADIUS_M  # 12.5: curb straight beyond this
CROSSWALK_NEAR_M = 12.5
CROSSWALK_FAR_M = 16.5
STOP_LINE_M = 17.5
ARM_LENGTH_M = 160.0
SOLID_DIVIDER_M = 30.0  # no lane changes over the last 30 m before the stop line
BIKE_MIXING_M = 20.0  # dashed bike-lane line where right-turning cars cross it
DOUBLE_YELLOW_FAR_M = 60.0  # N/S road: double yellow up to here, dashed-solid beyond
INNER_LANE_OFFSET_M = 0.5 * LANE_WIDTH_M  # 1.75
OUTER_LANE_OFFSET_M = 1.5 * LANE_WIDTH_M  # 5.25
BIKE_LANE_OFFSET_M = LANES_PER_DIRECTION * LANE_WIDTH_M + 0.5 * BIKE_LANE_WIDTH_M  # 7.75
LANE_OFFSETS_M = (INNER_LANE_OFFSET_M, OUTER_LANE_OFFSET_M)
# Pedestrian walking lines on the sidewalk (distance from the road centre line): walkers going
# counter-clockwise around the intersection keep to the curb side, clockwise to the building
# side, so opposite walkers never meet head on. Walkers wait for the signal at the curb.
SIDEWALK_CCW_OFFSET_M = 10.0
SIDEWALK_CW_OFFSET_M = 11.0
CURB_WAIT_OFFSET_M = CURB_OFFSET_M + 0.4
CROSSWALK_LANES_M = (13.6, 15.4)  # s of the two walking lines across each crosswalk

STRAIGHT_STEP_M = 5.0  # vertex spacing of straight map polylines (like real HD maps)
ARC_STEP_M = 1.0


def arm_axes(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors (u_k, n_k) (2,) of arm k: outward along the arm and its left normal."""
    angle = 0.5 * np.pi * (k % 4)
    u = np.array([np.cos(angle), np.sin(angle)])
    n = np.array([-np.sin(angle), np.cos(angle)])
    return np.round(u, 12), np.round(n, 12)


def arm_point(k: int, s_m: np.ndarray | float, offset_m: np.ndarray | float) -> np.ndarray:
    """World xy (..., 2) of the point at distance `s_m` along arm k, `offset_m` to its left."""
    u, n = arm_axes(k)
    s = np.asarray(s_m, dtype=np.float64)[..., None]
    o = np.asarray(offset_m, dtype=np.float64)[..., None]
    return s * u + o * n


def segment(p0: np.ndarray, p1: np.ndarray, step_m: float = STRAIGHT_STEP_M) -> np.ndarray:
    """Straight polyline (n, 2) from p0 to p1 with vertices at most `step_m` apart."""
    count = max(int(np.ceil(np.linalg.norm(p1 - p0) / step_m)), 1) + 1
    alpha = np.linspace(0.0, 1.0, count)[:, None]
    return (1.0 - alpha) * p0 + alpha * p1


def arc(center: np.ndarray, radius_m: float, start_rad: float, sweep_rad: float,
        step_m: float = ARC_STEP_M) -> np.ndarray:
    """Circular arc (n, 2) from angle `start_rad`, sweeping `sweep_rad` (+ = counter-clockwise)."""
    count = max(int(np.ceil(abs(sweep_rad) * radius_m / step_m)), 2) + 1
    angles = start_rad + np.linspace(0.0, sweep_rad, count)
    return center + radius_m * np.stack([np.cos(angles), np.sin(angles)], axis=-1)


def join(*parts: np.ndarray) -> np.ndarray:
    """Concatenate polylines, dropping a vertex repeated at each joint."""
    out = [parts[0]]
    for part in parts[1:]:
        out.append(part[1:] if np.allclose(part[0], out[-1][-1], atol=1e-9) else part)
    return np.concatenate(out, axis=0)


def offset_polyline(points: np.ndarray, offset_m: float) -> np.ndarray:
    """Polyline (n, 2) shifted `offset_m` to its left; exact for lines and for evenly sampled
    circular arcs (the tangent at a vertex is the chord of its neighbours; at the ends the
    chord direction is corrected by half the turn between the first / last two chords)."""
    chord = np.unwrap(np.arctan2(*np.diff(points, axis=0).T[::-1]))
    heading = np.empty(len(points))
    if len(points) == 2:
        heading[:] = chord[0]
    else:
        heading[1:-1] = np.unwrap(np.arctan2(*(points[2:] - points[:-2]).T[::-1]))
        heading[0] = 2.0 * chord[0] - heading[1]
        heading[-1] = 2.0 * chord[-1] - heading[-2]
    normal = np.stack([-np.sin(heading), np.cos(heading)], axis=1)
    return points + offset_m * normal


def lift(points_xy: np.ndarray, z_m: float = 0.0) -> np.ndarray:
    """(n, 2) -> (n, 3) at height `z_m`."""
    return np.concatenate([points_xy, np.full((len(points_xy), 1), z_m)], axis=1)


# --- lanes and movements ---------------------------------------------------------------------

@dataclass(frozen=True)
class LaneSpec:
    """One lane: centre line (n, 2) in travel direction, width, and its role."""

    lane_id: str
    centre_xy: np.ndarray
    width_m: float
    kind: str  # "inbound" | "outbound" | "connector"
    arm: int  # arm of an in/outbound lane; the inbound arm of a connector
    successors: tuple[str, ...] = ()


def lane_id(arm: int, direction: str, lane: int | str) -> str:
    """`E_in_0` (inner lane), `E_in_1` (outer lane), `E_in_bike`, `N_out_0`, ..."""
    return f"{ARM_NAMES[arm % 4]}_{direction}_{lane}"


def movement_target(arm: int, movement: str) -> int:
    """Exit arm of a movement from inbound arm `arm`: right turn -> k+1, straight k+2, left k+3."""
    return (arm + {"right": 1, "straight": 2, "left": 3}[movement]) % 4


def connector_centre(arm: int, offset_m: float, movement: str,
                     step_m: float = ARC_STEP_M) -> np.ndarray:
    """Centre line (n, 2) through the intersection from the stop line of inbound lane
    (arm, offset) to the start of the outbound lane with the same offset on the exit arm.

    Turns are circular quarter arcs tangent to both lanes, so curvature is continuous except at
    the two joints (radius 12.25 m right, 19.25 m left for the 2-lane road).
    """
    u, n = arm_axes(arm)
    start = STOP_LINE_M * u + offset_m * n
    if movement == "straight":
        end = -STOP_LINE_M * u + offset_m * n
        return segment(start, end, step_m)
    start_angle = float(np.arctan2(*(-n)[::-1])) if movement == "right" else float(
        np.arctan2(*n[::-1]))
    if movement == "right":
        center = STOP_LINE_M * (u + n)
        return arc(center, STOP_LINE_M - offset_m, start_angle, -0.5 * np.pi, step_m)
    center = STOP_LINE_M * (u - n)
    return arc(center, STOP_LINE_M + offset_m, start_angle, 0.5 * np.pi, step_m)


MOVEMENTS_BY_LANE: dict[int | str, tuple[str, ...]] = {
    0: ("left", "straight"),
    1: ("straight", "right"),
    "bike": ("straight",),
}


def lane_offset(lane: int | str) -> float:
    return BIKE_LANE_OFFSET_M if lane == "bike" else LANE_OFFSETS_M[int(lane)]


def lane_width(lane: int | str) -> float:
    return BIKE_LANE_WIDTH_M if lane == "bike" else LANE_WIDTH_M


def build_lanes() -> list[LaneSpec]:
    """All lanes: per arm 2 inbound + bike, 2 outbound + bike, and the connectors."""
    lanes: list[LaneSpec] = []
    for k in range(4):
        for lane in (0, 1, "bike"):
            o = lane_offset(lane)
            w = lane_width(lane)
            succ = tuple(f"{lane_id(k, 'in', lane)}__{m}" for m in MOVEMENTS_BY_LANE[lane])
            inbound = segment(arm_point(k, ARM_LENGTH_M, o), arm_point(k, STOP_LINE_M, o))
            lanes.append(LaneSpec(lane_id(k, "in", lane), inbound, w, "inbound", k, succ))
            outbound = segment(arm_point(k, STOP_LINE_M, -o), arm_point(k, ARM_LENGTH_M, -o))
            lanes.append(LaneSpec(lane_id(k, "out", lane), outbound, w, "outbound", k))
            for m in MOVEMENTS_BY_LANE[lane]:
                exit_lane = lane_id(movement_target(k, m), "out", lane)
                lanes.append(LaneSpec(f"{lane_id(k, 'in', lane)}__{m}",
                                      connector_centre(k, o, m), w, "connector", k, (exit_lane,)))
    return lanes


# --- painted lines, curbs and surfaces ------------------------------------------------------

@dataclass(frozen=True)
class LaneLineSpec:
    line_id: str
    points_xy: np.ndarray
    color: str
    style: str


def build_lane_lines() -> list[LaneLineSpec]:
    """Painted lane lines of every arm (none inside the intersection)."""
    lines: list[LaneLineSpec] = []

    def add(name: str, k: int, s0: float, s1: float, offset: float, color: str, style: str) -> None:
        pts = segment(arm_point(k, s0, offset), arm_point(k, s1, offset))
        lines.append(LaneLineSpec(f"{ARM_NAMES[k]}_{name}", pts, color, style))

    for k in range(4):
        if k % 2 == 1:  # N/S road: passing zone marking on the far part
            add("centre_near", k, STOP_LINE_M, DOUBLE_YELLOW_FAR_M, 0.0, "YELLOW", "SOLID_GROUP")
            add("centre_far", k, DOUBLE_YELLOW_FAR_M, ARM_LENGTH_M, 0.0, "YELLOW", "DASHED_SOLID")
        else:
            add("centre", k, STOP_LINE_M, ARM_LENGTH_M, 0.0, "YELLOW", "SOLID_GROUP")
        solid_end = STOP_LINE_M + SOLID_DIVIDER_M
        add("in_divider_solid", k, STOP_LINE_M, solid_end, LANE_WIDTH_M, "WHITE", "SOLID_SINGLE")
        add("in_divider_dashed", k, solid_end, ARM_LENGTH_M, LANE_WIDTH_M,
            "WHITE", "LONG_DASHED_SINGLE")
        add("out_divider", k, STOP_LINE_M, ARM_LENGTH_M, -LANE_WIDTH_M,
            "WHITE", "LONG_DASHED_SINGLE")
        bike_line = LANES_PER_DIRECTION * LANE_WIDTH_M
        mix_end = STOP_LINE_M + BIKE_MIXING_M
        add("in_bike_mixing", k, STOP_LINE_M, mix_end, bike_line, "WHITE", "SHORT_DASHED_SINGLE")
        add("in_bike", k, mix_end, ARM_LENGTH_M, bike_line, "WHITE", "SOLID_SINGLE")
        add("out_bike", k, STOP_LINE_M, ARM_LENGTH_M, -bike_line, "WHITE", "SOLID_SINGLE")
    return lines


def corner_curb(k: int) -> np.ndarray:
    """Curb (n, 2) of the block between arm k and arm k+1, from arm k's end to arm k+1's end."""
    u, n = arm_axes(k)
    center = CORNER_START_M * (u + n)
    inner = arc(center, CORNER_RADIUS_M, float(np.arctan2(-n[1], -n[0])), -0.5 * np.pi, 0.5)
    return join(
        segment(arm_point(k, ARM_LENGTH_M, CURB_OFFSET_M), arm_point(k, CORNER_START_M,
                                                                     CURB_OFFSET_M)),
        inner,
        segment(arm_point(k + 1, CORNER_START_M, -CURB_OFFSET_M),
                arm_point(k + 1, ARM_LENGTH_M, -CURB_OFFSET_M)),
    )


def drivable_area() -> np.ndarray:
    """Outer ring (n, 2), counter-clockwise, not closed: the road surface between the curbs."""
    return join(*[corner_curb(k) for k in range(4)])


def crosswalk(k: int) -> np.ndarray:
    """Crosswalk rectangle (4, 2) across arm k, curb to curb."""
    return np.stack([
        arm_point(k, CROSSWALK_NEAR_M, -CURB_OFFSET_M), arm_point(k, CROSSWALK_FAR_M,
                                                                  -CURB_OFFSET_M),
        arm_point(k, CROSSWALK_FAR_M, CURB_OFFSET_M), arm_point(k, CROSSWALK_NEAR_M,
                                                                CURB_OFFSET_M),
    ])


def wait_line(k: int) -> np.ndarray:
    """Stop line (n, 2) across the inbound lanes and bike lane of arm k."""
    return segment(arm_point(k, STOP_LINE_M, 0.0), arm_point(k, STOP_LINE_M, CURB_OFFSET_M), 1.0)


def _arrow_head(tip: tuple[float, float], direction_rad: float, length: float = 1.2,
                width: float = 0.9) -> Polygon:
    head = Polygon([(0.0, 0.0), (-length, 0.5 * width), (-length, -0.5 * width)])
    head = affinity.rotate(head, direction_rad, origin=(0, 0), use_radians=True)
    return affinity.translate(head, *tip)


def arrow_marking(movements: tuple[str, ...]) -> np.ndarray:
    """Lane-arrow outline (n, 2) in a lane frame (x along travel, tip at x = 0, y left).

    A straight shaft with a head, plus a bent branch with its own head per turn; the union is
    one concave polygon, as painted arrows are in real HD maps.
    """
    shaft_w = 0.15
    parts = [LineString([(-5.0, 0.0), (-1.1, 0.0)]).buffer(shaft_w, cap_style="flat"),
             _arrow_head((0.0, 0.0), 0.0)]
    for m in movements:
        side = {"left": 1.0, "right": -1.0}.get(m)
        if side is None:
            continue
        branch = LineString([(-3.2, 0.0), (-2.4, 0.3 * side), (-2.0, 0.55 * side)])
        parts.append(branch.buffer(shaft_w, cap_style="flat", join_style="mitre"))
        parts.append(_arrow_head((-2.0, 1.35 * side), 0.5 * np.pi * side, 0.85, 0.7))
    union = shapely.union_all(parts).simplify(0.01)
    if union.geom_type != "Polygon":
        raise AssertionError("lane arrow is not one polygon")  # geometry bug, not user input
    ring = np.asarray(union.exterior.coords)[:-1]
    return ring


def place_in_lane(local_xy: np.ndarray, arm: int, s_m: float, offset_m: float) -> np.ndarray:
    """Transform a lane-frame shape of an inbound lane of `arm` to world xy; local x points
    along the travel direction (towards the centre), tip at distance `s_m` from the centre."""
    u, n = arm_axes(arm)
    forward, left = -u, -n
    origin = s_m * u + offset_m * n
    return origin + local_xy[:, :1] * forward + local_xy[:, 1:2] * left


@dataclass(frozen=True)
class StreetFurniture:
    """Poles (2-point polylines), traffic lights and signs (cuboids) as plain arrays."""

    pole_ids: list[str] = field(default_factory=list)
    poles: list[np.ndarray] = field(default_factory=list)  # each (2, 3)
    light_ids: list[str] = field(default_factory=list)
    light_center: list[np.ndarray] = field(default_factory=list)
    light_size: list[np.ndarray] = field(default_factory=list)
    light_yaw: list[float] = field(default_factory=list)
    light_lanes: dict[str, list[str]] = field(default_factory=dict)
    sign_ids: list[str] = field(default_factory=list)
    sign_center: list[np.ndarray] = field(default_factory=list)
    sign_size: list[np.ndarray] = field(default_factory=list)
    sign_yaw: list[float] = field(default_factory=list)


SIGNAL_POLE_HEIGHT_M = 7.0
MAST_ARM_HEIGHT_M = 6.3
LIGHT_SIZE_M = (0.35, 0.45, 1.1)  # depth, width, height of a three-section head with backplate
LIGHT_GROUPS = ("left_through", "through_right")


def light_id(arm: int, group: str) -> str:
    return f"light_{ARM_NAMES[arm % 4]}_{group}"


def build_furniture() -> StreetFurniture:
    """Signal poles with mast arms and one head per lane group over each inbound lane (on the
    far side, facing the approaching traffic), street lights, and signs."""
    f = StreetFurniture()

    def pole(pid: str, base_xy: np.ndarray, top: np.ndarray | float) -> None:
        top_pt = np.array([*base_xy, top]) if np.ndim(top) == 0 else np.asarray(top)
        f.pole_ids.append(pid)
        f.poles.append(np.stack([np.array([*base_xy, 0.0]), top_pt]))

    def sign(sid: str, center: np.ndarray, size: tuple[float, float, float], yaw: float) -> None:
        f.sign_ids.append(sid)
        f.sign_center.append(np.asarray(center, dtype=np.float64))
        f.sign_size.append(np.asarray(size, dtype=np.float64))
        f.sign_yaw.append(float(yaw))

    for k in range(4):
        u, n = arm_axes(k)
        name = ARM_NAMES[k]
        facing = float(np.arctan2(u[1], u[0]))  # heads face the traffic coming along -u_k
        # far-right corner of approach k, on the sidewalk inside the curb return
        pole_xy = -11.0 * u + 10.2 * n
        pole(f"pole_signal_{name}", pole_xy, SIGNAL_POLE_HEIGHT_M)
        arm_end = -11.0 * u + 0.6 * n
        pole(f"pole_mast_arm_{name}", pole_xy, np.array([*arm_end, MAST_ARM_HEIGHT_M]))
        f.poles[-1][0, 2] = MAST_ARM_HEIGHT_M  # mast arm: horizontal, from the pole top
        for group, lane, o in zip(LIGHT_GROUPS, (0, 1), LANE_OFFSETS_M):
            lid = light_id(k, group)
            f.light_ids.append(lid)
            xy = -11.0 * u + o * n
            f.light_center.append(np.array([*xy, MAST_ARM_HEIGHT_M - 0.1 - 0.5 * LIGHT_SIZE_M[2]]))
            f.light_size.append(np.array(LIGHT_SIZE_M))
            f.light_yaw.append(facing)
            lanes = [lane_id(k, "in", lane)] + ([lane_id(k, "in", "bike")] if lane == 1 else [])
            f.light_lanes[lid] = lanes
        # street-name sign on the mast arm, next to the pole
        sign(f"sign_street_name_{name}", np.array([*(-11.0 * u + 8.0 * n), MAST_ARM_HEIGHT_M
                                                   + 0.25]), (0.04, 1.5, 0.3), facing)
        # speed limit for inbound traffic on the right-hand sidewalk, on its own post
        sl_xy = arm_point(k, 70.0, CURB_OFFSET_M + 0.6)
        pole(f"pole_sign_speed_{name}", sl_xy, 2.9)
        sign(f"sign_speed_limit_{name}", np.array([*sl_xy, 2.45]), (0.04, 0.6, 0.75), facing)
        # pedestrian-crossing warning ahead of the crosswalk
        pc_xy = arm_point(k, 40.0, CURB_OFFSET_M + 0.6)
        pole(f"pole_sign_ped_{name}", pc_xy, 2.9)
        sign(f"sign_ped_crossing_{name}", np.array([*pc_xy, 2.45]), (0.04, 0.75, 0.75), facing)
        # no-parking sign for outbound traffic
        np_xy = arm_point(k, 30.0, -(CURB_OFFSET_M + 0.6))
        pole(f"pole_sign_no_parking_{name}", np_xy, 2.7)
        sign(f"sign_no_parking_{name}", np.array([*np_xy, 2.35]), (0.04, 0.45, 0.6),
             facing + np.pi)
        # street lights on alternating sides every 35 m, at the curb edge of the sidewalk
        for i, s in enumerate(np.arange(25.0, ARM_LENGTH_M, 35.0)):
            side = 1.0 if (i + k) % 2 == 0 else -1.0
            pole(f"pole_street_light_{name}_{i}", arm_point(k, s, side * (CURB_OFFSET_M + 0.5)),
                 9.0)
    return f
