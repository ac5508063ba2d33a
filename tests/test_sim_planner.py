"""The IDM planner (PDM-Closed restated, avsim.sim.planner): one plan from a hand-built state on the
road of `sim_cases` (lane E0 east along y = 0, its stop line at x = 0 under light "L"; the ego's
front is 3.8 m ahead of its rear axle)."""

from __future__ import annotations

import numpy as np
from sim_cases import DT_S, VEHICLE, box, road_and_route, scenario, states_along

from avsim.sim.actions import Trajectory
from avsim.sim.boxes import Boxes
from avsim.sim.observation import EpisodeInfo, FrameState, Observation
from avsim.sim.planner import IDMPlannerPolicy, PlannerConfig

FRONT_M = VEHICLE.rear_axle_to_center_m + VEHICLE.length_m / 2


def _plan(x0_m: float, speed_mps: float, boxes: Boxes, light: str = "green", config: PlannerConfig | None = None) -> Trajectory:
    """The planner's plan for the ego at (x0_m, 0) heading east at `speed_mps`, among still `boxes`."""
    n = 200
    sc = scenario(np.c_[np.linspace(-55.0, 140.0, n), np.zeros(n)], np.zeros(n))
    road, route = road_and_route(sc)
    episode = EpisodeInfo(sc, road, route, VEHICLE, DT_S, sc.ego.timestamps_ns, 0, np.random.default_rng(0))
    policy = IDMPlannerPolicy(config)
    policy.reset(episode)
    state = states_along(x0_m, 0.0, np.array([speed_mps]))[0]
    return policy(Observation(0, 0, 0.0, state, FrameState(0, 0, state, 0.0, boxes, {"L": light}), {}, episode))


def test_the_planner_stops_at_a_red_light_and_drives_on_at_green() -> None:
    red = _plan(-30.0, 8.0, Boxes.empty(), "red")
    assert -30.0 + red.poses[:, 0].max() + FRONT_M <= 0.0  # the front stays behind the stop line
    green = _plan(-30.0, 8.0, Boxes.empty(), "green")
    assert -30.0 + green.poses[-1, 0] > 5.0  # on past the stop line


def test_an_object_is_in_the_way_by_its_box_corners() -> None:
    # a parked car whose centre is 2.3 m off the lane's centre line, turned 0.6 rad into it: a
    # corner reaches 0.2 m from the line, 2.6 m along the road from x = 5
    car = box("c", (5.0, 2.3), yaw=0.6)
    corner_x = 5.0 - (2.25 * np.cos(0.6) + 1.0 * np.sin(0.6))
    plan = _plan(-30.0, 8.0, car)
    assert -30.0 + plan.poses[:, 0].max() + FRONT_M < corner_x
    assert -30.0 + plan.poses[-1, 0] > corner_x - 15.0  # it drives up to it, not stop far off


def test_a_car_crossing_ahead_makes_the_planner_brake() -> None:
    # a car crossing north 6 m/s, 4 m ahead of the ego's rear axle and 9 m to its right: the best
    # proposal accelerates past and takes its contact on the side (not at fault, so PDM-Closed's
    # collision brake lets it), the TTC infraction within 2 s brakes (brake_on_ttc)
    crossing = box("x", (4.0, -9.0), yaw=np.pi / 2, v=6.0)
    braked = _plan(-2.0, 4.0, crossing)
    assert braked.start is None and braked.poses[-1, 0] < 0.5  # PDMEmergencyBrake's straight stop
    assert -2.0 + braked.poses[:, 0].max() + FRONT_M < 4.0 - 1.0  # short of the crossing car's path
    on = _plan(-2.0, 4.0, crossing, config=PlannerConfig(brake_on_ttc=False))
    assert on.poses[-1, 0] > 10.0
