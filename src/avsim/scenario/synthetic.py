"""Small synthetic scenes built in code with the core types (for tests and benchmarks).

`highway_scenario` is a straight multi-lane road with every kind of map element the spec
draws (typed lane lines incl. double and dashed ones, road boundaries, a wait line, poles, a
concave crosswalk, a road marking, signs, a traffic light that changes state) and moving
cars, a truck, pedestrians and a cyclist, so a render exercises every code path.
"""

from __future__ import annotations

import numpy as np

from avsim.core.agents import AgentTracks
from avsim.core.lights import TrafficLightStates
from avsim.core.rig import CameraRig, cosmos_rig
from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3, yaw_to_quat
from avsim.core.typing import NDArrayFloat
from avsim.maps import Cuboids, HDMap, LaneLines, Polygons, Polylines
from avsim.scenario import Scenario

NS_PER_S = 1_000_000_000


def straight_ego(duration_s: float, speed_mps: float = 10.0, rate_hz: float = 10.0, yaw_rad: float = 0.0) -> EgoTrajectory:
    """Ego driving straight along `yaw_rad` from the origin at constant speed.

    Args:
        duration_s: length of the trajectory in seconds.
        speed_mps: constant speed in m/s.
        rate_hz: pose rate.
        yaw_rad: heading in the world frame.

    Returns:
        round(duration_s * rate_hz) + 1 poses from t = 0.
    """
    n = round(duration_s * rate_hz) + 1
    t = np.arange(n) / rate_hz
    direction = np.array([np.cos(yaw_rad), np.sin(yaw_rad), 0.0])
    positions = t[:, None] * speed_mps * direction[None]
    rotation = np.broadcast_to(SE3.from_yaw(yaw_rad, np.zeros(3)).rotation, (n, 3, 3)).copy()
    return EgoTrajectory((t * NS_PER_S).round().astype(np.int64), SE3(rotation, positions))


def _line(x0: float, x1: float, y: float, step_m: float = 2.0) -> NDArrayFloat:
    x = np.arange(x0, x1 + 1e-9, step_m)
    return np.stack([x, np.full_like(x, y), np.zeros_like(x)], -1)


def highway_map(length_m: float = 400.0) -> HDMap:
    """A straight 4-lane road along +x from -50 m, with every drawn element type.

    Args:
        length_m: where the road ends (x, metres).

    Returns:
        The map.
    """
    x0, x1 = -50.0, length_m
    lines = [
        ("ll_left_edge", _line(x0, x1, 7.0), "WHITE", "SOLID_SINGLE"),
        ("ll_l1", _line(x0, x1, 3.5), "WHITE", "LONG_DASHED_SINGLE"),
        ("ll_centre", _line(x0, x1, 0.0 + 1.75 - 1.75), "YELLOW", "SOLID_GROUP"),
        ("ll_r1", _line(x0, x1, -3.5), "WHITE", "SHORT_DASHED_SINGLE"),
        ("ll_right_edge", _line(x0, x1, -7.0), "YELLOW", "DASHED_SOLID"),
    ]
    lane_lines = LaneLines(
        Polylines.from_list([l[0] for l in lines], [l[1] for l in lines]),
        np.array([l[2] for l in lines]), np.array([l[3] for l in lines]),
    )  # fmt: skip
    boundaries = Polylines.from_list(["rb_left", "rb_right"], [_line(x0, x1, 9.0, 5.0), _line(x0, x1, -9.0, 5.0)])
    wait = Polylines.from_list(["wait_0"], [np.array([[78.0, -7.0, 0.0], [78.0, 0.0, 0.0]])])
    poles = Polylines.from_list(
        [f"pole_{i}" for i in range(6)],
        [np.array([[20.0 + 30 * i, 10.5, 0.0], [20.0 + 30 * i, 10.5, 6.0]]) for i in range(6)],
    )
    # concave (U-shaped) crosswalk across the road and an arrow-shaped road marking
    crosswalk = np.array(
        [[80, -8, 0], [84, -8, 0], [84, 8, 0], [80, 8, 0], [80, 3, 0], [82, 3, 0], [82, -3, 0], [80, -3, 0]], float
    )
    arrow = np.array([[60, -5.6, 0], [64, -5.6, 0], [64, -6.2, 0], [66, -5.25, 0], [64, -4.3, 0], [64, -4.9, 0], [60, -4.9, 0]], float)
    signs = Cuboids(
        np.array(["sign_0"]), np.array([[70.0, -10.5, 3.0]]), np.array([[0.1, 0.9, 0.9]]), yaw_to_quat(np.array([np.pi]))
    )
    light = Cuboids(
        np.array(["light_0"]), np.array([[86.0, -4.0, 5.5]]), np.array([[0.4, 0.4, 1.2]]), yaw_to_quat(np.array([np.pi]))
    )
    return HDMap.build(
        lane_lines=lane_lines,
        road_boundaries=boundaries,
        wait_lines=wait,
        poles=poles,
        crosswalks=Polygons.from_list(["cw_0"], [crosswalk]),
        road_markings=Polygons.from_list(["rm_0"], [arrow]),
        traffic_signs=signs,
        traffic_lights=light,
    )


def highway_scenario(duration_s: float = 4.0, rig: CameraRig | None = None, speed_mps: float = 10.0) -> Scenario:
    """Ego on the highway map with traffic around it (see module docstring).

    Args:
        duration_s: clip length in seconds (ego poses at 10 Hz).
        rig: camera rig (default: `cosmos_rig()`).
        speed_mps: ego speed.

    Returns:
        The scenario "synthetic_highway".
    """
    ego = straight_ego(duration_s, speed_mps)
    ts = ego.timestamps_ns
    t_s = (ts - ts[0]) / NS_PER_S
    rows = []
    specs = [  # id, class, start centre, size, yaw, speed along the yaw
        ("car_a", "Car", (25.0, -1.75, 0.8), (4.6, 1.9, 1.6), 0.0, 8.0),
        ("car_b", "Car", (45.0, 1.75, 0.8), (4.4, 1.8, 1.5), np.pi, 9.0),
        ("car_c", "Car", (-15.0, -5.25, 0.8), (4.8, 2.0, 1.7), 0.0, 12.0),
        ("truck_a", "Heavy truck", (8.0, 5.25, 1.8), (12.0, 2.6, 3.6), 0.0, 10.0),
        ("ped_a", "Pedestrian", (81.0, -6.0, 0.9), (0.6, 0.6, 1.8), np.pi / 2, 1.2),
        ("cyc_a", "Bicycle", (55.0, -7.8, 0.8), (1.8, 0.6, 1.6), 0.0, 5.0),
        ("other_a", "Barrier", (95.0, 8.5, 0.5), (2.0, 0.5, 1.0), 0.0, 0.0),
    ]
    for tid, cls, c, s, yaw, v in specs:
        direction = np.array([np.cos(yaw), np.sin(yaw), 0.0])
        for t_ns, t in zip(ts, t_s):
            rows.append((tid, cls, int(t_ns), np.array(c) + direction * v * t, s, yaw_to_quat(np.array(yaw))))
    cols = list(zip(*rows))
    agents = AgentTracks.from_unsorted(
        np.array(cols[0]), np.array(cols[1]), np.array(cols[2], np.int64),
        np.array(cols[3], float), np.array(cols[4], float), np.array(cols[5], float),
    )  # fmt: skip
    half = int(ts[len(ts) // 2])
    lights = TrafficLightStates.from_unsorted(["light_0", "light_0"], [int(ts[0]), half], ["red", "green"])
    return Scenario("synthetic_highway", rig or cosmos_rig(), ego, agents, highway_map(), lights, {"source": "synthetic"})
