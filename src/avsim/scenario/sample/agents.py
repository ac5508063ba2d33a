"""The cast of the embedded sample: who enters where and when, with which size and driver parameters.

`build_cast` draws every random choice of the sample's traffic (the seed changes who is where,
never the map or the ego's start); the stepper (`avsim.scenario.sample.traffic`) then simulates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from avsim.scenario.sample import roads
from avsim.scenario.sample.routes import Route, ped_route
from avsim.scenario.sample.signals import SignalPlan

WARMUP_S = 20.0  # the simulation starts this long before the clip, so queues exist at t = 0

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
    ego_lane_key = (arm_of[ego_arm], ego_lane)
    for arm in range(4):
        for lane in (0, 1):
            _add_lane_traffic(cast, rng, route_index, arm, lane, duration_s, ego_lane_key)
    _add_cyclists(cast, rng, route_index)
    _add_pedestrians(cast, rng, routes, route_index, plan)
    return cast


def _add_vehicle(cast: Cast, rng: np.random.Generator, route_index: dict[str, int], arm: int,
                 lane: int, spawn: float, s0: float, v: float, inflow: bool,
                 heavy: str | None = None, movement: str | None = None) -> None:
    """Draw one car, truck or bus entering inbound lane `lane` of `arm` and add it to `cast`."""
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


# heavy vehicles that enter within the clip whatever the seed: (arm, lane) -> (class, time)
FORCED_HEAVY = {(2, 1): ("Truck", -14.0), (0, 0): ("Bus", -9.0), (1, 0): ("Truck", 1.0)}
# turns that happen within the clip whatever the seed
FORCED_TURN = {(0, 1): "right", (2, 1): "right", (1, 1): "right", (3, 1): "right", (1, 0): "left"}


def _add_lane_traffic(cast: Cast, rng: np.random.Generator, route_index: dict[str, int], arm: int,
                      lane: int, duration_s: float, ego_lane_key: tuple[int, int]) -> None:
    """The initial platoon, the arrivals during the clip and the forced heavy vehicle of one lane."""
    t_start = -WARMUP_S
    add = partial(_add_vehicle, cast, rng, route_index, arm, lane)
    # initial platoon at the warm-up start, spread over the far part of the approach
    turn = FORCED_TURN.get((arm, lane))
    if (arm, lane) != ego_lane_key:
        positions = [float(rng.uniform(0.0, 20.0))]
        while positions[-1] < roads.ARM_LENGTH_M - roads.STOP_LINE_M - 40.0:
            positions.append(positions[-1] + float(rng.uniform(30.0, 70.0)))
        for s in positions[:-1]:
            # on the N-S road the last car of the first platoon arrives just after its
            # light turned red, so it waits near the head of the queue for the green
            forced = turn if arm % 2 == 1 and s == positions[0] else None
            add(t_start, s, 10.0, False, movement=forced)
        turn = None if arm % 2 == 1 else turn
    # arrivals at the map edge during the clip (Poisson, ~1 per 10 s per lane)
    t = t_start + float(rng.exponential(6.0))
    while t < duration_s - 2.0:
        if (arm, lane) != ego_lane_key or t > 3.0:
            # on the green E-W road, the first arrival reaches the stop line on green
            forced = turn if t >= t_start + 1.0 else None
            add(t, 0.0, 11.0, True, movement=forced)
            turn = None if forced else turn
        t += float(rng.uniform(4.0, 8.0) + rng.exponential(5.0))
    if (arm, lane) in FORCED_HEAVY:
        heavy, t_heavy = FORCED_HEAVY[(arm, lane)]
        add(t_heavy + float(rng.uniform(-1.0, 1.0)), 0.0, 10.0, True, heavy)


def _add_cyclists(cast: Cast, rng: np.random.Generator, route_index: dict[str, int]) -> None:
    """One cyclist per bike lane, entering around a fixed time."""
    for arm, t_bike in ((1, -12.0), (0, -4.0), (2, 2.0), (3, -16.0)):
        r = route_index[f"{roads.lane_id(arm, 'in', 'bike')}__straight"]
        v0 = float(rng.uniform(4.5, 6.0))
        size = (float(rng.uniform(1.7, 1.85)), float(rng.uniform(0.6, 0.7)),
                float(rng.uniform(1.65, 1.8)))
        cast.add(r, t_bike + float(rng.uniform(-3.0, 3.0)), 0.0, v0, "Cyclist", size, v0,
                 1.0, 1.5, 1.0, 1.2, True)


# pedestrians: (route kind, arm, side): crossing at the crosswalks, rounding corners, walking away
PED_PLAN = [("cross", 0, 1), ("cross", 2, -1), ("cross", 1, 1), ("cross", 3, -1),
            ("cross", 0, -1), ("corner", 1, -1), ("corner", 3, 1), ("out", 2, 1),
            ("corner", 0, 1), ("out", 3, -1), ("cross", 2, 1), ("out", 1, -1)]


def _add_pedestrians(cast: Cast, rng: np.random.Generator, routes: list[Route],
                     route_index: dict[str, int], plan: SignalPlan) -> None:
    """The pedestrians of `PED_PLAN`; their walking routes are appended to `routes`."""
    for i, (kind, arm, side) in enumerate(PED_PLAN):
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
