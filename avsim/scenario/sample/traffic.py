"""Traffic of the embedded sample: a fixed-time signal controller and a 10 Hz microsimulation.

Every road user follows a fixed route (a dense centre line through the lanes of
`avsim.scenario.sample.roads`, or a sidewalk/crosswalk walking line) and only chooses its acceleration,
with the Intelligent Driver Model (Treiber et al. 2000) towards the nearest obstacle ahead:

- the body of any road user that lies in the corridor ahead of it (car following, queues,
  crossing traffic physically in the way);
- the predicted bodies (5 s ahead, 6 s for pedestrians, along their own routes, accelerating
  towards their desired speed but never past where they must stop) of road users with right
  of way: pedestrians on a crosswalk, then whoever entered the intersection first, then
  through traffic, pedestrians at the curb on their walk signal, right turns, permissive left
  turns. Yielding happens behind the own stop line (or before a crosswalk), never inside the
  intersection, and nobody enters it without room to clear it;
- the stop line while its signal is red, or yellow and a comfortable stop is still possible;
  the curb while pedestrians have no walk signal.

Boxes are checked for overlap afterwards (`find_overlaps`); `avsim.scenario.sample` re-simulates
without the offending road user in the rare case the rules above do not prevent one.

The simulation starts `WARMUP_S` before the clip so queues and platoons exist at its start.
Everything is numpy on struct-of-arrays state; the result is deterministic for a seed.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree
from shapely.geometry import LineString, Point, Polygon

from avsim.scenario.sample import roads

SIM_RATE_HZ = 10.0
SIM_DT_S = 1.0 / SIM_RATE_HZ
WARMUP_S = 20.0
ROUTE_STEP_M = 0.25
ROUTE_PAD_BEFORE_M = 20.0  # routes extend straight before their start and after their end so
ROUTE_PAD_AFTER_M = 60.0  # bodies and look-ahead corridors never index outside them
LATERAL_ACCEL_MPS2 = 2.0  # comfortable lateral acceleration in turns
YELLOW_STOP_DECEL_MPS2 = 3.0  # stop on yellow only if this deceleration suffices
STOP_LINE_GAP_M = 0.6  # vehicles stop this far before the stop line
MAX_DECEL_MPS2 = 8.0

KIND_VEHICLE, KIND_BIKE, KIND_PED = 0, 1, 2


# --- signals ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SignalPlan:
    """Fixed-time two-phase plan: phase 0 = E-W road (arms E, W), phase 1 = N-S road.

    Each phase: green, yellow, all-red; the two phases alternate, so crossing directions are
    never released together. Times in seconds relative to the clip start (t = 0). Pedestrians
    walking parallel to a phase may start crossing during the first `walk_s` of its green.
    """

    green_s: float = 14.0
    yellow_s: float = 3.0
    all_red_s: float = 1.0
    ew_green_start_s: float = -8.0
    walk_s: float = 5.0

    @property
    def cycle_s(self) -> float:
        return 2.0 * (self.green_s + self.yellow_s + self.all_red_s)

    def phase_start_s(self, phase: int) -> float:
        return self.ew_green_start_s + phase * 0.5 * self.cycle_s

    def _time_in_phase(self, phase: int, t_s: np.ndarray | float) -> np.ndarray:
        return np.mod(np.asarray(t_s, dtype=np.float64) - self.phase_start_s(phase), self.cycle_s)

    def state(self, phase: int, t_s: float) -> str:
        """'green' | 'yellow' | 'red' of `phase` at time `t_s`."""
        tau = float(self._time_in_phase(phase, t_s))
        if tau < self.green_s:
            return "green"
        return "yellow" if tau < self.green_s + self.yellow_s else "red"

    def walk(self, phase: int, t_s: float) -> bool:
        return bool(self._time_in_phase(phase, t_s) < self.walk_s)

    def changes(self, phase: int, t0_s: float, t1_s: float) -> list[tuple[float, str]]:
        """(time, new state) at t0 (the state then) and at every change in (t0, t1]."""
        out = [(t0_s, self.state(phase, t0_s))]
        bounds = (0.0, self.green_s, self.green_s + self.yellow_s)
        first = np.floor((t0_s - self.phase_start_s(phase)) / self.cycle_s) - 1
        for c in np.arange(first, first + 3 + (t1_s - t0_s) / self.cycle_s):
            for b, st in zip(bounds, ("green", "yellow", "red")):
                t = self.phase_start_s(phase) + c * self.cycle_s + b
                if t0_s < t <= t1_s + 1e-9:
                    out.append((float(t), st))
        return sorted(out)


def arm_phase(arm: int) -> int:
    """Signal phase of the traffic coming in on `arm`."""
    return arm % 2


def crosswalk_phase(arm: int) -> int:
    """Phase pedestrians crossing `arm` walk with (they move parallel to the other road)."""
    return (arm + 1) % 2


# --- routes -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Route:
    """A dense path (arc-length parameterised, `ROUTE_STEP_M` apart) and its rules.

    Arc length s = 0 at the route start; `points_xy[i]` is at s = i * step - pad_before.
    """

    name: str
    kind: int
    points_xy: np.ndarray  # (n, 2) including the straight pads
    length_m: float  # without pads
    v_allow_mps: np.ndarray  # (n,) speed allowed by the curvature ahead
    s_stop_m: float = np.inf  # stop line (vehicles) or curb where pedestrians wait
    s_cross_end_m: float = -np.inf  # end of the intersection box / crosswalk
    phase: int = -1  # signal phase governing s_stop (-1: none)
    light: str = ""  # light id (vehicles)
    movement: str = "straight"  # straight | right | left | walk
    crosswalk_entry_m: tuple[float, ...] = ()  # where the path enters crosswalks (vehicles)


def _resample(poly: np.ndarray, step: float) -> tuple[np.ndarray, float]:
    seg = np.linalg.norm(np.diff(poly, axis=0), axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    length = float(cum[-1])
    s = np.arange(0.0, length + 1e-9, step)
    return np.stack([np.interp(s, cum, poly[:, 0]), np.interp(s, cum, poly[:, 1])], 1), length


def _fillet(poly: np.ndarray, radius: float) -> np.ndarray:
    """Round every interior corner of a polyline with a circular arc of `radius`."""
    out = [poly[0]]
    for a, b, c in zip(poly[:-2], poly[1:-1], poly[2:]):
        d1 = (b - a) / np.linalg.norm(b - a)
        d2 = (c - b) / np.linalg.norm(c - b)
        turn = np.arctan2(d1[0] * d2[1] - d1[1] * d2[0], d1 @ d2)
        if abs(turn) < 1e-6:
            out.append(b)
            continue
        r = min(radius, 0.45 * np.linalg.norm(b - a), 0.45 * np.linalg.norm(c - b)) / np.tan(
            0.5 * abs(turn))
        r = min(r, radius)
        t = r * np.tan(0.5 * abs(turn))
        p1 = b - t * d1
        left = np.array([-d1[1], d1[0]]) * np.sign(turn)
        center = p1 + r * left
        start = np.arctan2(*(p1 - center)[::-1])
        out.extend(roads.arc(center, r, start, turn, 0.2))
    out.append(poly[-1])
    return np.asarray(out)


def make_route(name: str, kind: int, poly: np.ndarray, *, s_stop: float = np.inf,
               s_cross_end: float = -np.inf, phase: int = -1, light: str = "",
               movement: str = "straight", crosswalk_entry: tuple[float, ...] = ()) -> Route:
    dense, length = _resample(poly, ROUTE_STEP_M)
    d0 = dense[1] - dense[0]
    d1 = dense[-1] - dense[-2]
    d0 /= np.linalg.norm(d0)
    d1 /= np.linalg.norm(d1)
    pre = dense[0] - d0 * np.arange(ROUTE_PAD_BEFORE_M, 0.0, -ROUTE_STEP_M)[:, None]
    post = dense[-1] + d1 * np.arange(ROUTE_STEP_M, ROUTE_PAD_AFTER_M + 1e-9,
                                      ROUTE_STEP_M)[:, None]
    pts = np.concatenate([pre, dense, post])
    tangent = np.gradient(pts, axis=0)
    heading = np.unwrap(np.arctan2(tangent[:, 1], tangent[:, 0]))
    curvature = np.abs(np.gradient(heading)) / ROUTE_STEP_M
    # smooth over 2 m so the discrete joints between lines and arcs do not spike
    kernel = np.ones(9) / 9.0
    curvature = np.convolve(curvature, kernel, mode="same")
    v_curve = np.sqrt(LATERAL_ACCEL_MPS2 / np.maximum(curvature, 1e-4))
    v_allow = v_curve.copy()
    decel = 1.5
    for i in range(len(v_allow) - 2, -1, -1):
        v_allow[i] = min(v_allow[i], np.sqrt(v_allow[i + 1] ** 2 + 2 * decel * ROUTE_STEP_M))
    return Route(name, kind, pts, length, v_allow, s_stop, s_cross_end, phase, light, movement,
                 crosswalk_entry)


def _lane_map() -> dict[str, roads.LaneSpec]:
    return {lane.lane_id: lane for lane in roads.build_lanes()}


def vehicle_route(lanes: dict[str, roads.LaneSpec], arm: int, lane: int | str,
                  movement: str) -> Route:
    """Inbound lane -> connector -> outbound lane of the exit arm."""
    inbound = lanes[roads.lane_id(arm, "in", lane)]
    conn = lanes[f"{inbound.lane_id}__{movement}"]
    outbound = lanes[conn.successors[0]]
    # the same arc as the map's connector, sampled at the route step so headings turn smoothly
    fine = roads.connector_centre(arm, roads.lane_offset(lane), movement, ROUTE_STEP_M)
    poly = roads.join(inbound.centre_xy, fine, outbound.centre_xy)
    s_stop = roads.ARM_LENGTH_M - roads.STOP_LINE_M
    conn_len = float(np.linalg.norm(np.diff(conn.centre_xy, axis=0), axis=1).sum())
    light = roads.light_id(arm, roads.LIGHT_GROUPS[0 if lane == 0 else 1])
    kind = KIND_BIKE if lane == "bike" else KIND_VEHICLE
    return make_route(f"{inbound.lane_id}__{movement}", kind, poly, s_stop=s_stop,
                      s_cross_end=s_stop + conn_len, phase=arm_phase(arm), light=light,
                      movement=movement, crosswalk_entry=_crosswalk_entries(poly))


def _crosswalk_entries(poly: np.ndarray) -> tuple[float, ...]:
    """Arc lengths where a path enters a crosswalk (with 0.5 m to spare), so that vehicles
    yielding to pedestrians stop before the crosswalk rather than on it."""
    line = LineString(poly)
    entries = []
    for k in range(4):
        inside = line.intersection(Polygon(roads.crosswalk(k)).buffer(0.5))
        for part in getattr(inside, "geoms", [inside]):
            if not part.is_empty:
                entries.append(float(line.project(Point(part.coords[0]))))
    return tuple(sorted(entries))


def _arc_length_at(route: Route, point_xy: np.ndarray) -> float:
    """Arc length of the route point nearest `point_xy`."""
    i = int(np.argmin(np.linalg.norm(route.points_xy - point_xy, axis=1)))
    return i * ROUTE_STEP_M - ROUTE_PAD_BEFORE_M


def ped_route(kind: str, arm: int, side: int, s_start: float, s_end: float) -> Route:
    """Walking routes on the sidewalk ring (see `sample_roads`): `side` +1 = the +n side.

    - "cross": walk in along arm `arm`, wait at the curb, cross the arm, walk out on the other
      side; - "corner": walk in and round the block corner onto the next arm, walking out;
    - "out": walk out along the arm away from the intersection.
    """
    ccw, cw = roads.SIDEWALK_CCW_OFFSET_M, roads.SIDEWALK_CW_OFFSET_M
    o_in = ccw if side > 0 else cw  # walking in on the +n side goes counter-clockwise
    name = f"ped_{kind}_{roads.ARM_NAMES[arm]}_{'+' if side > 0 else '-'}"
    p = roads.arm_point
    if kind == "cross":
        s_c = roads.CROSSWALK_LANES_M[0 if side > 0 else 1]
        wait = roads.CURB_WAIT_OFFSET_M
        pts = np.stack([p(arm, s_start, side * o_in), p(arm, s_c, side * o_in),
                        p(arm, s_c, side * wait), p(arm, s_c, -side * wait),
                        p(arm, s_c, -side * o_in), p(arm, s_end, -side * o_in)])
        route = make_route(name, KIND_PED, _fillet(pts, 1.0), movement="walk")
        # the curb edges, where the crossing starts (waiting pedestrians' fronts stop just
        # short of it) and ends, as arc lengths on the filleted route
        curb = roads.CURB_OFFSET_M + 0.05
        s_on, s_off = (_arc_length_at(route, p(arm, s_c, sgn * curb)) for sgn in (side, -side))
        return dataclasses.replace(route, s_stop_m=s_on, s_cross_end_m=s_off,
                                   phase=crosswalk_phase(arm))
    if kind == "corner":
        nxt = arm + (1 if side > 0 else -1)
        corner = p(arm, o_in, side * o_in)
        pts = np.stack([p(arm, s_start, side * o_in), corner, p(nxt, s_end, -side * o_in)])
        return make_route(name, KIND_PED, _fillet(pts, 1.5), movement="walk")
    o_out = cw if side > 0 else ccw
    pts = np.stack([p(arm, s_start, side * o_out), p(arm, s_end, side * o_out)])
    return make_route(name, KIND_PED, pts, movement="walk")


# --- road users -------------------------------------------------------------------------------

@dataclass
class Cast:
    """Struct of arrays describing every road user before simulation (index 0 = ego)."""

    route: list[int]
    spawn_s: list[float]  # simulation time of appearance (s, clip time)
    s0_m: list[float]  # initial arc length on the route
    v_init: list[float]
    source_class: list[str]
    size: list[tuple[float, float, float]]
    v0: list[float]
    a: list[float]
    b: list[float]
    headway: list[float]
    jam: list[float]
    inflow: list[bool]  # spawned at the route start: waits until the entry is clear

    @classmethod
    def empty(cls) -> Cast:
        return cls(*[[] for _ in range(12)])

    def add(self, route: int, spawn_s: float, s0: float, v_init: float, source_class: str,
            size: tuple[float, float, float], v0: float, a: float, b: float, headway: float,
            jam: float, inflow: bool) -> None:
        for name, value in zip(
                ("route", "spawn_s", "s0_m", "v_init", "source_class", "size", "v0", "a", "b",
                 "headway", "jam", "inflow"),
                (route, spawn_s, s0, v_init, source_class, size, v0, a, b, headway, jam,
                 inflow)):
            getattr(self, name).append(value)

    def __len__(self) -> int:
        return len(self.route)


EGO_SIZE_M = (4.87, 1.95, 1.55)
EGO_ROUTE = ("S", 0, "straight")  # arm, lane, movement
EGO_DISTANCE_TO_STOP_LINE_M = 36.0
EGO_SPEED_MPS = 10.0


def _car_size(rng: np.random.Generator) -> tuple[float, float, float]:
    kind = rng.random()
    if kind < 0.55:  # sedans / hatchbacks
        return (float(rng.uniform(4.2, 4.9)), float(rng.uniform(1.78, 1.88)),
                float(rng.uniform(1.42, 1.55)))
    if kind < 0.9:  # SUVs
        return (float(rng.uniform(4.5, 5.0)), float(rng.uniform(1.85, 1.98)),
                float(rng.uniform(1.65, 1.85)))
    return (float(rng.uniform(5.3, 5.9)), float(rng.uniform(1.95, 2.05)),  # pickups, vans
            float(rng.uniform(1.85, 2.1)))


def _truck(rng: np.random.Generator, bus: bool) -> tuple[str, tuple[float, float, float]]:
    if bus:
        return "Bus", (12.0, 2.55, 3.2)
    return "Truck", (float(rng.uniform(10.0, 12.0)), 2.5, float(rng.uniform(3.3, 3.8)))


def build_cast(rng: np.random.Generator, routes: list[Route], route_index: dict[str, int],
               duration_s: float, plan: SignalPlan) -> Cast:
    """Ego (index 0), vehicles on every approach (queues form during the warm-up), cyclists
    and pedestrians; the seed changes who is where, never the map or the ego's start.

    The pedestrians' walking routes are appended to `routes` and `route_index`.
    """
    cast = Cast.empty()
    arm_of = {n: i for i, n in enumerate(roads.ARM_NAMES)}
    ego_arm, ego_lane, ego_mv = EGO_ROUTE
    ego_route = route_index[f"{roads.lane_id(arm_of[ego_arm], 'in', ego_lane)}__{ego_mv}"]
    s_ego = routes[ego_route].s_stop_m - EGO_DISTANCE_TO_STOP_LINE_M - 0.5 * EGO_SIZE_M[0]
    cast.add(ego_route, 0.0, s_ego, EGO_SPEED_MPS, "Car", EGO_SIZE_M, 12.5, 1.6, 2.0, 1.4,
             2.0, False)
    t_start = -WARMUP_S

    def add_vehicle(arm: int, lane: int, spawn: float, s0: float, v: float, inflow: bool,
                    heavy: str | None = None, movement: str | None = None) -> None:
        movements = roads.MOVEMENTS_BY_LANE[lane]
        weights = np.array([0.35, 0.65]) if lane == 0 else np.array([0.7, 0.3])
        mv = movements[int(rng.choice(len(movements), p=weights))]
        if movement is not None:
            mv, heavy = movement, None
        elif heavy is None and rng.random() < 0.08:
            heavy = "Truck" if rng.random() < 0.6 else "Bus"
        if heavy is not None:
            mv = "straight"  # a 12 m rigid box does not fit the 4 m curb returns
            cls, size = _truck(rng, heavy == "Bus")
            v0, a, b, hw, jam = rng.uniform(10.0, 12.0), 1.0, 1.5, 1.8, 3.0
        else:
            cls, size = "Car", _car_size(rng)
            v0, a, b = rng.uniform(11.5, 14.0), rng.uniform(1.4, 2.0), 2.0
            hw, jam = rng.uniform(1.1, 1.6), rng.uniform(1.8, 2.5)
        r = route_index[f"{roads.lane_id(arm, 'in', lane)}__{mv}"]
        cast.add(r, spawn, s0, min(v, v0), cls, size, float(v0), float(a), b, float(hw),
                 float(jam), inflow)

    ego_lane_key = (arm_of[ego_arm], ego_lane)
    forced_heavy = {(2, 1): ("Truck", -14.0), (0, 0): ("Bus", -9.0), (1, 0): ("Truck", 1.0)}
    # turns that happen within the clip whatever the seed
    forced_turn = {(0, 1): "right", (2, 1): "right", (1, 1): "right", (3, 1): "right",
                   (1, 0): "left"}
    for arm in range(4):
        for lane in (0, 1):
            # initial platoon at the warm-up start, spread over the far part of the approach
            turn = forced_turn.get((arm, lane))
            if (arm, lane) != ego_lane_key:
                positions = [float(rng.uniform(0.0, 20.0))]
                while positions[-1] < roads.ARM_LENGTH_M - roads.STOP_LINE_M - 40.0:
                    positions.append(positions[-1] + float(rng.uniform(30.0, 70.0)))
                for s in positions[:-1]:
                    # on the N-S road the last car of the first platoon arrives just after its
                    # light turned red, so it waits near the head of the queue for the green
                    forced = turn if arm % 2 == 1 and s == positions[0] else None
                    add_vehicle(arm, lane, t_start, s, 10.0, False, movement=forced)
                turn = None if arm % 2 == 1 else turn
            # arrivals at the map edge during the clip (Poisson, ~1 per 10 s per lane)
            t = t_start + float(rng.exponential(6.0))
            while t < duration_s - 2.0:
                if (arm, lane) != ego_lane_key or t > 3.0:
                    # on the green E-W road, the first arrival reaches the stop line on green
                    forced = turn if t >= t_start + 1.0 else None
                    add_vehicle(arm, lane, t, 0.0, 11.0, True, movement=forced)
                    turn = None if forced else turn
                t += float(rng.uniform(4.0, 8.0) + rng.exponential(5.0))
            if (arm, lane) in forced_heavy:
                heavy, t_heavy = forced_heavy[(arm, lane)]
                add_vehicle(arm, lane, t_heavy + float(rng.uniform(-1.0, 1.0)), 0.0, 10.0,
                            True, heavy)
    # cyclists in the bike lanes
    for arm, t_bike in ((1, -12.0), (0, -4.0), (2, 2.0), (3, -16.0)):
        r = route_index[f"{roads.lane_id(arm, 'in', 'bike')}__straight"]
        v0 = float(rng.uniform(4.5, 6.0))
        size = (float(rng.uniform(1.7, 1.85)), float(rng.uniform(0.6, 0.7)),
                float(rng.uniform(1.65, 1.8)))
        cast.add(r, t_bike + float(rng.uniform(-3.0, 3.0)), 0.0, v0, "Cyclist", size, v0,
                 1.0, 1.5, 1.0, 1.2, True)
    # pedestrians: crossing at the crosswalks, rounding corners, walking away
    ped_plan = [("cross", 0, 1), ("cross", 2, -1), ("cross", 1, 1), ("cross", 3, -1),
                ("cross", 0, -1), ("corner", 1, -1), ("corner", 3, 1), ("out", 2, 1),
                ("corner", 0, 1), ("out", 3, -1), ("cross", 2, 1), ("out", 1, -1)]
    for i, (kind, arm, side) in enumerate(ped_plan):
        if kind == "out":
            s_from = float(rng.uniform(12.0, 20.0))
        else:
            s_from = float(rng.uniform(22.0, 40.0))
        route = ped_route(kind, arm, side, s_from, float(rng.uniform(45.0, 60.0)))
        routes.append(route)
        route_index[f"{route.name}#{i}"] = len(routes) - 1
        v0 = float(rng.uniform(1.15, 1.5))
        size = (float(rng.uniform(0.5, 0.7)), float(rng.uniform(0.55, 0.7)),
                float(rng.uniform(1.55, 1.9)))
        if kind == "cross":
            # reach the curb shortly before the walk signal, so every crossing pedestrian
            # waits a little and then crosses within (or just before) the clip
            walk = plan.phase_start_s(route.phase)
            walk += plan.cycle_s * np.ceil((-12.0 - walk) / plan.cycle_s)
            spawn = walk - route.s_stop_m / v0 - float(rng.uniform(0.5, 6.0))
        else:
            spawn = float(rng.uniform(-25.0, 0.0))
        cast.add(len(routes) - 1, spawn, 0.0, v0, "Pedestrian", size, v0, 0.8, 1.5, 0.6,
                 0.5, True)
    return cast


def vehicle_routes() -> tuple[list[Route], dict[str, int]]:
    """Every vehicle and bike route of the network, by name (`<inbound lane>__<movement>`)."""
    lanes = _lane_map()
    routes: list[Route] = []
    for arm in range(4):
        for lane in (0, 1, "bike"):
            for mv in roads.MOVEMENTS_BY_LANE[lane]:
                routes.append(vehicle_route(lanes, arm, lane, mv))
    return routes, {r.name: i for i, r in enumerate(routes)}


# --- simulation -------------------------------------------------------------------------------

TAUS_S = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
HORIZON_S = (5.0, 5.0, 6.0)  # prediction horizon by kind: pedestrians on a 17 m crosswalk
# are seen early enough by vehicles turning into it
BODY_SPACING_M = 0.8
SAME_DIRECTION_RAD = np.deg2rad(35.0)
# extra lateral clearance (m) between the bodies of two road users, by kind (vehicle, bike,
# pedestrian): pedestrians pass each other closely, everyone keeps more room from them
MARGIN_M = np.array([[0.35, 0.5, 0.5], [0.5, 0.5, 0.5], [0.5, 0.5, 0.2]])
# right of way before the intersection: through > pedestrians (at the curb, on their walk
# signal, over the turning traffic that must yield to them) > right turns > left turns
PRIORITY = {"straight": 3.0, "walk": 2.5, "right": 2.0, "left": 1.0}


@dataclass(frozen=True)
class SimResult:
    """Recorded states at `SIM_RATE_HZ` over the clip, one row per (agent, time), sorted by
    agent then time; agent indices refer to the `Cast` (0 = ego)."""

    agent: np.ndarray  # (N,) int64
    time_s: np.ndarray  # (N,) float64, multiples of SIM_DT_S
    center_xy: np.ndarray  # (N, 2)
    yaw_rad: np.ndarray  # (N,)
    speed_mps: np.ndarray  # (N,)
    # the ego's exact kinematics along its route at every step (constant acceleration within
    # a step), so its poses can be evaluated at any rate without interpolation error
    ego_time_s: np.ndarray  # (K,)
    ego_s_m: np.ndarray  # (K,)
    ego_v_mps: np.ndarray  # (K,)
    ego_a_mps2: np.ndarray  # (K,)


class RouteTable:
    """All routes concatenated so per-agent lookups are single vectorised gathers."""

    def __init__(self, routes: list[Route]) -> None:
        counts = np.array([len(r.points_xy) for r in routes])
        self.offset = np.concatenate([[0], np.cumsum(counts)])[:-1]
        self.count = counts
        self.points = np.concatenate([r.points_xy for r in routes])
        tangent = np.concatenate([np.gradient(r.points_xy, axis=0) for r in routes])
        self.tangent = tangent / np.linalg.norm(tangent, axis=1, keepdims=True)
        self.v_allow = np.concatenate([r.v_allow_mps for r in routes])
        self.pad = ROUTE_PAD_BEFORE_M / ROUTE_STEP_M

    def lookup(self, route: np.ndarray, s_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions (..., 2) and unit tangents (..., 2) at arc lengths `s_m` on `route`."""
        f = np.clip(s_m / ROUTE_STEP_M + self.pad, 0.0, self.count[route] - 1.000001)
        i0 = np.floor(f).astype(np.int64)
        alpha = (f - i0)[..., None]
        g = self.offset[route] + i0
        xy = self.points[g] * (1.0 - alpha) + self.points[g + 1] * alpha
        d = self.tangent[g] * (1.0 - alpha) + self.tangent[g + 1] * alpha
        return xy, d / np.linalg.norm(d, axis=-1, keepdims=True)

    def allowed_speed(self, route: np.ndarray, s_m: np.ndarray) -> np.ndarray:
        f = np.clip(np.round(s_m / ROUTE_STEP_M + self.pad), 0, self.count[route] - 1)
        return self.v_allow[self.offset[route] + f.astype(np.int64)]


@dataclass(frozen=True)
class _Fleet:
    """Per-agent constants of a simulation (struct of arrays over the cast)."""

    route: np.ndarray
    length: np.ndarray
    width: np.ndarray
    v0: np.ndarray
    acc_max: np.ndarray
    dec: np.ndarray
    headway: np.ndarray
    jam: np.ndarray
    spawn: np.ndarray
    inflow: np.ndarray
    is_ped: np.ndarray
    s_stop: np.ndarray
    s_cross_end: np.ndarray
    phase: np.ndarray
    route_len: np.ndarray
    base_prio: np.ndarray
    lookahead: np.ndarray
    corr_step: np.ndarray
    body_count: np.ndarray
    kind: np.ndarray
    crosswalk_entry: np.ndarray  # (n, 4), padded with inf
    n_tau: np.ndarray  # prediction samples (TAUS_S[:n_tau])

    @classmethod
    def from_cast(cls, routes: list[Route], cast: Cast) -> _Fleet:
        size = np.asarray(cast.size, dtype=np.float64)
        length, width = size[:, 0], size[:, 1]
        kind = np.array([routes[r].kind for r in cast.route])
        is_ped = kind == KIND_PED
        return cls(
            route=np.asarray(cast.route, dtype=np.int64), length=length, width=width,
            v0=np.asarray(cast.v0), acc_max=np.asarray(cast.a), dec=np.asarray(cast.b),
            headway=np.asarray(cast.headway), jam=np.asarray(cast.jam),
            spawn=np.asarray(cast.spawn_s), inflow=np.asarray(cast.inflow), is_ped=is_ped,
            s_stop=np.array([routes[r].s_stop_m for r in cast.route]),
            s_cross_end=np.array([routes[r].s_cross_end_m for r in cast.route]),
            phase=np.array([routes[r].phase for r in cast.route]),
            route_len=np.array([routes[r].length_m for r in cast.route]),
            base_prio=np.array([PRIORITY[routes[r].movement] for r in cast.route]),
            # pedestrians look across the whole crosswalk before stepping off the curb
            lookahead=np.where(is_ped, 18.0, np.where(kind == KIND_BIKE, 20.0, 45.0)),
            corr_step=np.where(is_ped, 0.4, np.where(kind == KIND_BIKE, 0.5, 1.0)),
            body_count=np.maximum(1, np.ceil((length - width) / BODY_SPACING_M).astype(int) + 1),
            kind=kind,
            n_tau=np.searchsorted(TAUS_S, np.array(HORIZON_S)[kind], side="right"),
            crosswalk_entry=np.array([(routes[r].crosswalk_entry_m + (np.inf,) * 4)[:4]
                                      for r in cast.route]),
        )


def _idm(v, v0, a, b, headway, jam, gap, dv):
    free = a * (1.0 - (v / np.maximum(v0, 0.1)) ** 4)
    s_star = jam + np.maximum(0.0, v * headway + v * dv / (2.0 * np.sqrt(a * b)))
    return np.maximum(free, -3.0), -a * (s_star / np.maximum(gap, 0.05)) ** 2


def simulate(routes: list[Route], cast: Cast, plan: SignalPlan, duration_s: float,
             exclude: frozenset[int] = frozenset()) -> SimResult:
    """Run the microsimulation from -WARMUP_S to `duration_s`; record the clip at 10 Hz."""
    table = RouteTable(routes)
    fleet = _Fleet.from_cast(routes, cast)
    n = len(cast)
    route, length, is_ped, s_stop = fleet.route, fleet.length, fleet.is_ped, fleet.s_stop
    v0, acc_max, dec, headway, jam = fleet.v0, fleet.acc_max, fleet.dec, fleet.headway, fleet.jam
    s = np.asarray(cast.s0_m, dtype=np.float64).copy()
    v = np.asarray(cast.v_init, dtype=np.float64).copy()
    status = np.zeros(n, dtype=np.int8)  # 0 pending, 1 active, 2 gone
    status[list(exclude)] = 2
    committed = np.zeros(n, dtype=bool)
    entry_s = np.full(n, np.inf)  # time the front crossed the stop line / curb
    s_cap = np.full(n, np.inf)  # where each agent will stop at most (for predictions)
    records: list[tuple[np.ndarray, ...]] = []
    ego_rows: list[tuple[float, float, float, float]] = []
    steps = int(np.floor((duration_s + WARMUP_S) * SIM_RATE_HZ + 1e-6))
    for k in range(steps + 1):
        t = -WARMUP_S + k * SIM_DT_S
        _spawn(table, t, fleet, s, status)
        act = np.flatnonzero(status == 1)
        if act.size == 0:
            continue
        xy, d = table.lookup(route[act], s[act])
        if t >= -1e-9:
            records.append((act, np.full(act.size, round(t, 6)), xy, np.arctan2(d[:, 1], d[:, 0]),
                            v[act].copy()))
        front = s[act] + 0.5 * length[act]
        rear = s[act] - 0.5 * length[act]
        entered = np.isinf(entry_s[act]) & (front > s_stop[act])
        entry_s[act[entered]] = t
        inside = (front > s_stop[act]) & (rear < fleet.s_cross_end[act])
        rank = np.zeros(n)
        # who goes first: pedestrians on a crosswalk, then whoever entered the intersection
        # first, then through > right > left; the ego wins ties (lowest index)
        rank[act] = np.where(inside & is_ped[act], 3e6,
                             np.where(inside, 2e6 - 1e3 * entry_s[act],
                                      1e3 * fleet.base_prio[act])) - act
        heading = np.zeros((n, 2))
        heading[act] = d
        gap, v_obst, phys_gap, at_line = _obstacles(table, fleet, act, s, v, rank, heading,
                                                    s_cap)
        stop_jam = np.where(is_ped[act], 0.1, STOP_LINE_GAP_M)
        # waiting at the own line for someone else's path is a stop-line stop too
        obst_jam = np.where(at_line, stop_jam, jam[act])
        obst_headway = np.where(at_line, np.minimum(headway[act], 0.6), headway[act])
        a_free, a_obst = _idm(v[act], np.minimum(v0[act], table.allowed_speed(route[act],
                                                                                 s[act])),
                              acc_max[act], dec[act], obst_headway, obst_jam, gap,
                              v[act] - v_obst)
        # signals: stop line for vehicles and bikes, curb for pedestrians
        stop_gap = np.full(act.size, np.inf)
        for m, i in enumerate(act):
            if fleet.phase[i] < 0:
                continue
            if is_ped[i]:
                line = s_stop[i]
                if front[m] < line - 0.05 and not plan.walk(int(fleet.phase[i]), t):
                    stop_gap[m] = line - front[m]
                continue
            to_line = s_stop[i] - front[m]
            if to_line < -0.05:
                committed[i] = False
                continue
            state = plan.state(int(fleet.phase[i]), t)
            if state == "green" or committed[i]:
                continue
            if state == "yellow" and v[i] ** 2 > 2.0 * YELLOW_STOP_DECEL_MPS2 * max(to_line, 0.01):
                committed[i] = True
                continue
            stop_gap[m] = to_line
        # a stop line is approached more decisively than a car ahead (whose braking must be
        # anticipated): a short time gap keeps IDM from crawling the last metres
        _, a_stop = _idm(v[act], v0[act], acc_max[act], dec[act], np.minimum(headway[act], 0.6),
                         stop_jam, stop_gap, v[act])
        accel = np.clip(a_free + np.minimum(a_obst, a_stop), -MAX_DECEL_MPS2, acc_max[act])
        # IDM only approaches standstill asymptotically; real drivers stop: creeping the last
        # decimetres becomes a full stop within this step
        near = np.minimum(gap - obst_jam, stop_gap - stop_jam) < 0.25
        creep = near & (v[act] < 0.3) & (accel < 0.0)
        accel = np.where(creep, -v[act] / SIM_DT_S, accel)
        # ... and, once standing close behind a standing obstacle, do not creep up to it
        hold = (v[act] < 0.01) & ((stop_gap < stop_jam + 2.0)
                                  | ((gap < obst_jam + 1.5) & (v_obst < 0.1)))
        accel = np.where(hold, np.minimum(accel, 0.0), accel)
        if act[0] == 0 and t >= -1e-9:
            ego_rows.append((round(t, 6), float(s[0]), float(v[0]), float(accel[0])))
        s_cap[act] = s[act] + np.minimum(phys_gap, stop_gap)
        v_new = np.maximum(v[act] + accel * SIM_DT_S, 0.0)
        stopped = (v_new == 0.0) & (accel < 0.0)
        ds = np.where(stopped, v[act] ** 2 / (2.0 * np.maximum(-accel, 1e-6)),
                      0.5 * (v[act] + v_new) * SIM_DT_S)
        s[act] += ds
        v[act] = v_new
        status[act[s[act] + 0.5 * length[act] > fleet.route_len[act]]] = 2
    return _stack_records(records, np.array(ego_rows).reshape(-1, 4))


def _spawn(table: RouteTable, t: float, fleet: _Fleet, s: np.ndarray,
           status: np.ndarray) -> None:
    """Activate agents whose time has come; inflowing ones wait until their entry is clear."""
    due = np.flatnonzero((status == 0) & (fleet.spawn <= t + 1e-9))
    for i in due:
        if fleet.inflow[i]:
            act = np.flatnonzero(status == 1)
            if act.size:
                xy_i, _ = table.lookup(fleet.route[i:i + 1], s[i:i + 1])
                xy, _ = table.lookup(fleet.route[act], s[act])
                dist = np.linalg.norm(xy - xy_i, axis=1)
                if np.any(dist < 0.5 * (fleet.length[act] + fleet.length[i]) + 6.0):
                    continue
        status[i] = 1


def _obstacles(table: RouteTable, fleet: _Fleet, act: np.ndarray, s: np.ndarray,
               v: np.ndarray, rank: np.ndarray, heading: np.ndarray, s_cap: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Nearest obstacle ahead of every active agent (arrays over `act`): gap (m), obstacle
    speed along the agent's heading, gap to the nearest standing physical obstacle, and
    whether the gap is to the agent's own stop line (waiting there for someone).

    Bodies are sampled along each agent's axis (spacing <= 0.8 m) now and at the prediction
    horizons TAUS_S; corridors are sampled along each agent's route ahead of its front.
    """
    route, length, width = fleet.route, fleet.length, fleet.width
    acc_max, v0 = fleet.acc_max, fleet.v0
    to_line = np.where(np.isfinite(fleet.s_stop), fleet.s_stop - s - 0.5 * length, -1.0)
    clear_dist = np.where(fleet.is_ped, -np.inf, fleet.s_cross_end - s + 0.5 * length + 1.0)
    # bodies
    # (standing agents only if nothing holds them: they are about to go)
    free = (v[act] > 0.05) | (s_cap[act] - s[act] > 0.5)
    n_tau = np.where(free, fleet.n_tau[act], 1)
    owner = np.repeat(act, n_tau)
    tau = TAUS_S[_within_group(n_tau)]
    # predicted along the own route, but never past where the agent is about to stop
    # (accelerating towards the desired speed: a car waiting at a green light is about to go)
    advance = np.minimum(v[owner] * tau + 0.5 * acc_max[owner] * tau**2, v0[owner] * tau)
    s_pred = np.where(tau > 0.0, np.minimum(s[owner] + advance,
                                            np.maximum(s_cap[owner], s[owner])), s[owner])
    centre, direction = table.lookup(route[owner], s_pred)
    reps = fleet.body_count[owner]
    b_owner = np.repeat(owner, reps)
    b_tau = np.repeat(tau, reps)
    rep_b = np.repeat(reps, reps)
    local = np.where(rep_b > 1, _within_group(reps) / np.maximum(rep_b - 1, 1) - 0.5, 0.0)
    extent = (length[b_owner] - width[b_owner])
    b_dir = np.repeat(direction, reps, axis=0)
    b_xy = np.repeat(centre, reps, axis=0) + (local * extent)[:, None] * b_dir
    # corridors
    counts = np.floor(fleet.lookahead[act] / fleet.corr_step[act]).astype(int) + 1
    c_owner = np.repeat(act, counts)
    c_dist = _within_group(counts) * np.repeat(fleet.corr_step[act], counts)
    c_xy, c_dir = table.lookup(route[c_owner], s[c_owner] + 0.5 * length[c_owner] + c_dist)
    gap = np.full(act.size, np.inf)
    v_obst = np.zeros(act.size)
    at_line = np.zeros(act.size, dtype=bool)
    pairs = cKDTree(c_xy).sparse_distance_matrix(cKDTree(b_xy), 3.3, output_type="ndarray")
    if pairs.size == 0:
        return gap, v_obst, gap.copy(), at_line
    ci, bj, dist = pairs["i"], pairs["j"], pairs["v"]
    me, other = c_owner[ci], b_owner[bj]
    thr = 0.5 * (width[me] + width[other]) + MARGIN_M[fleet.kind[me], fleet.kind[other]]
    cos_h = np.sum(heading[me] * heading[other], axis=1)
    # do the two paths cross where they meet? (judged there, not on the current headings: a
    # car about to turn across a bike lane is still parallel to the cyclist beside it)
    crossing = np.sum(c_dir[ci] * b_dir[bj], axis=1) < np.cos(SAME_DIRECTION_RAD)
    physical = b_tau[bj] == 0.0
    keep = (me != other) & (dist < thr) & (physical | (crossing & (rank[other] > rank[me])))
    me, other, cd, physical, cos_h = me[keep], other[keep], c_dist[ci[keep]], physical[keep], \
        cos_h[keep]
    if me.size == 0:
        return gap, v_obst, gap.copy(), at_line
    # mutual physical blocking: the higher-ranked of the two goes first
    n_all = len(v)
    mutual = physical & np.isin(other * n_all + me, (me * n_all + other)[physical]) & (
        rank[me] > rank[other])
    me, other, cd, physical, cos_h = (x[~mutual] for x in (me, other, cd, physical, cos_h))
    g = np.maximum(cd - 0.5 * width[other], 0.05)
    # pedestrians are given way to before the crosswalk, not on it (where the waiting vehicle
    # would stand in their way)
    front = s[me] + 0.5 * length[me]
    entry = fleet.crosswalk_entry[me]
    ahead = (entry <= (front + cd)[:, None]) & (entry > front[:, None] - 0.1)
    before_cw = np.where(ahead, entry, -np.inf).max(axis=1) - front
    g = np.where(fleet.is_ped[other] & np.isfinite(before_cw),
                 np.minimum(g, np.maximum(before_cw, 0.05)), g)
    # wait behind the own stop line, not inside the intersection where waiting blocks others,
    # when yielding to someone's predicted path, or when a slow or standing obstacle leaves no
    # room to clear the intersection ("don't block the box")
    line = to_line[me]
    blocks_box = physical & (cd < clear_dist[me]) & (v[other] * np.maximum(cos_h, 0.0) < 2.0)
    to_own_line = (~physical | blocks_box) & (line > 0.0) & (line < g)
    g = np.where(to_own_line, line, g)
    # where each agent will stop at most, for the others' predictions: physical obstacles only
    # (an agent waiting for someone's predicted path is expected to go once it is clear),
    # and only standing ones: a moving obstacle will have moved on
    phys_gap = np.full(act.size, np.inf)
    standing = physical & (v[other] < 0.3)
    np.minimum.at(phys_gap, np.searchsorted(act, me[standing]), g[standing])
    order = np.lexsort((g, me))
    me, other, g, physical, cos_h, to_own_line = (
        x[order] for x in (me, other, g, physical, cos_h, to_own_line))
    first = np.concatenate([[True], me[1:] != me[:-1]])
    slot = np.searchsorted(act, me[first])
    gap[slot] = g[first]
    follows = physical[first] & (cos_h[first] >= np.cos(SAME_DIRECTION_RAD))
    v_obst[slot] = np.where(follows, v[other[first]] * cos_h[first], 0.0)
    at_line[slot] = to_own_line[first]
    return gap, v_obst, phys_gap, at_line


def _within_group(counts: np.ndarray) -> np.ndarray:
    """[0..c0-1, 0..c1-1, ...] for group sizes `counts`."""
    starts = np.cumsum(counts) - counts
    return np.arange(int(counts.sum())) - np.repeat(starts, counts)


def _stack_records(records: list[tuple[np.ndarray, ...]], ego: np.ndarray) -> SimResult:
    agent = np.concatenate([r[0] for r in records]).astype(np.int64)
    time_s = np.concatenate([r[1] for r in records])
    xy = np.concatenate([r[2] for r in records])
    yaw = np.concatenate([r[3] for r in records])
    speed = np.concatenate([r[4] for r in records])
    order = np.lexsort((time_s, agent))
    return SimResult(agent[order], time_s[order], xy[order], yaw[order], speed[order],
                     *ego.T.copy())


def ego_arc_length(result: SimResult, time_s: np.ndarray) -> np.ndarray:
    """The ego's arc length along its route at any times within the recorded steps."""
    k = np.clip(np.searchsorted(result.ego_time_s, time_s + 1e-9, side="right") - 1, 0,
                len(result.ego_time_s) - 1)
    tau = np.maximum(time_s - result.ego_time_s[k], 0.0)
    v, a = result.ego_v_mps[k], result.ego_a_mps2[k]
    # the integrator stops a braking vehicle at v = 0 instead of reversing
    t_stop = np.where(a < 0.0, v / np.maximum(-a, 1e-9), np.inf)
    tau = np.minimum(tau, t_stop)
    return result.ego_s_m[k] + v * tau + 0.5 * a * tau**2


# --- overlap check ----------------------------------------------------------------------------

def box_polygons_xy(center_xy: np.ndarray, yaw_rad: np.ndarray, length_m: np.ndarray,
                    width_m: np.ndarray) -> np.ndarray:
    """Ground-plane corners (N, 4, 2) of oriented boxes, counter-clockwise."""
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    hl, hw = 0.5 * length_m, 0.5 * width_m
    local = np.stack([np.stack([hl, hw], -1), np.stack([-hl, hw], -1),
                      np.stack([-hl, -hw], -1), np.stack([hl, -hw], -1)], axis=1)
    rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], axis=1)  # (N, 2, 2)
    return np.einsum("nij,nkj->nki", rot, local) + center_xy[:, None, :]


def boxes_overlap(corners_a: np.ndarray, corners_b: np.ndarray, clearance_m: float) -> np.ndarray:
    """Separating-axis test for pairs of oriented rectangles (P, 4, 2): True where they come
    closer than `clearance_m` along every candidate axis (i.e. intersect after inflation)."""
    def axes(c):
        e = np.stack([c[:, 1] - c[:, 0], c[:, 2] - c[:, 1]], axis=1)
        return e / np.linalg.norm(e, axis=-1, keepdims=True)

    all_axes = np.concatenate([axes(corners_a), axes(corners_b)], axis=1)  # (P, 4, 2)
    pa = np.einsum("pkd,pad->pak", corners_a, all_axes)
    pb = np.einsum("pkd,pad->pak", corners_b, all_axes)
    separated = (pa.max(-1) + clearance_m <= pb.min(-1)) | (pb.max(-1) + clearance_m <= pa.min(-1))
    return ~separated.any(axis=1)


def find_overlaps(agent: np.ndarray, time_s: np.ndarray, center_xy: np.ndarray,
                  yaw_rad: np.ndarray, size_lw: np.ndarray, clearance_m: float = 0.05,
                  upsample: int = 3) -> set[tuple[int, int]]:
    """Pairs (i < j) of agents whose boxes overlap at a sample time or in between.

    Rows sorted by (agent, time) at a uniform step; between consecutive samples of an agent
    the box is interpolated linearly at `upsample` sub-steps, as a renderer at a higher rate
    would see it.
    """
    same = agent[1:] == agent[:-1]
    ag, tm, xy, yw = [agent], [time_s], [center_xy], [yaw_rad]
    for k in range(1, upsample):
        alpha = k / upsample
        dyaw = np.angle(np.exp(1j * (yaw_rad[1:] - yaw_rad[:-1])))
        ag.append(agent[:-1][same])
        tm.append((time_s[:-1] + alpha * (time_s[1:] - time_s[:-1]))[same])
        xy.append((center_xy[:-1] + alpha * (center_xy[1:] - center_xy[:-1]))[same])
        yw.append((yaw_rad[:-1] + alpha * dyaw)[same])
    ag, tm, xy, yw = (np.concatenate(x) for x in (ag, tm, xy, yw))
    key = np.round(tm * 1000.0 * upsample).astype(np.int64)
    order = np.argsort(key, kind="stable")
    ag, key, xy, yw = ag[order], key[order], xy[order], yw[order]
    corners = box_polygons_xy(xy, yw, size_lw[ag, 0], size_lw[ag, 1])
    radius = 0.5 * np.hypot(size_lw[ag, 0], size_lw[ag, 1]) + clearance_m
    bounds = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True])
    found: set[tuple[int, int]] = set()
    for lo, hi in itertools.pairwise(bounds):
        i, j = np.triu_indices(hi - lo, k=1)
        i, j = i + lo, j + lo
        near = np.linalg.norm(xy[i] - xy[j], axis=1) < radius[i] + radius[j]
        i, j = i[near], j[near]
        if i.size == 0:
            continue
        hit = boxes_overlap(corners[i], corners[j], clearance_m)
        for a, b in zip(ag[i[hit]], ag[j[hit]]):
            found.add((int(min(a, b)), int(max(a, b))))
    return found
