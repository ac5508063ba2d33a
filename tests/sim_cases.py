"""Hand-built roads and motions for the closed-loop simulator's tests (avsim.sim).

The road runs east along x: lane E0a (x -60..0) ends at a stop line, E0b (0..20) enters the
junction under light "L", E0c (20..150) continues; E1 runs east beside them (y = 3.5); W0 runs
west (y = -3.5). Lanes are 3.5 m wide; the drivable area covers y in [-5.25, 5.25]. The ego is a
4.8 x 2.0 m box whose centre is 1.4 m ahead of its rear axle.
"""

from __future__ import annotations

import numpy as np

from avsim.core.agents import AgentTracks
from avsim.core.lights import TrafficLightStates
from avsim.core.rig import cosmos_rig
from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3
from avsim.maps import HDMap, LaneLines, Lanes, Polygons, Polylines
from avsim.maps.road import RoadModel
from avsim.scenario import Scenario
from avsim.scenario.road import road_model
from avsim.sim.boxes import Boxes
from avsim.sim.route import Route, build_route
from avsim.sim.scoring import Scene
from avsim.sim.vehicle import StateIndex, VehicleParameters, initial_state

DT_S = 0.1
VEHICLE = VehicleParameters(4.8, 2.0, 1.6, 1.4, 2.9)
LANES = {  # id: (start xy, end xy)
    "E0a": ((-60.0, 0.0), (0.0, 0.0)),
    "E0b": ((0.0, 0.0), (20.0, 0.0)),
    "E0c": ((20.0, 0.0), (150.0, 0.0)),
    "E1": ((-60.0, 3.5), (150.0, 3.5)),
    "W0": ((150.0, -3.5), (-60.0, -3.5)),
}


def _line(a: tuple[float, float], b: tuple[float, float], offset: float = 0.0) -> np.ndarray:
    a_, b_ = np.asarray(a), np.asarray(b)
    d = (b_ - a_) / np.linalg.norm(b_ - a_)
    n = np.array([-d[1], d[0]])
    t = np.linspace(0.0, 1.0, 21)[:, None]
    xy = a_ + t * (b_ - a_) + offset * n
    return np.c_[xy, np.zeros(len(xy))]


def road_map() -> HDMap:
    ids = list(LANES)
    centre = Polylines.from_list(ids, [_line(*LANES[k]) for k in ids])
    left = Polylines.from_list(ids, [_line(*LANES[k], 1.75) for k in ids])
    right = Polylines.from_list(ids, [_line(*LANES[k], -1.75) for k in ids])
    area = Polygons.from_list(["road"], [np.array([[-60.0, -5.25, 0], [150.0, -5.25, 0], [150.0, 5.25, 0], [-60.0, 5.25, 0]])])
    lines = Polylines.from_list(["edge"], [np.array([[-60.0, 5.25, 0], [150.0, 5.25, 0]])])
    return HDMap.build(lanes=Lanes(np.array(ids), left, right, centre), drivable_areas=area,
                       lane_lines=LaneLines(lines, np.array(["WHITE"]), np.array(["SOLID_SINGLE"])))  # fmt: skip


def scenario(ego_xy: np.ndarray, ego_yaw: np.ndarray, lights: list[tuple[float, str]] | None = None,
             agents: AgentTracks | None = None) -> Scenario:  # fmt: skip
    """A scenario on the road: the ego's rear-axle path at 10 Hz, light "L"'s (time s, state) changes."""
    n = len(ego_xy)
    t_ns = np.arange(n, dtype=np.int64) * 100_000_000
    ego = EgoTrajectory(t_ns, SE3.from_yaw(np.asarray(ego_yaw, float), np.c_[ego_xy, np.zeros(n)]))
    changes = lights or [(0.0, "green")]
    states = TrafficLightStates.from_unsorted(["L"] * len(changes), [round(t * 1e9) for t, _ in changes], [s for _, s in changes])
    meta = {"ego_size_m": [4.8, 2.0, 1.6], "ego_rear_axle_to_center_m": 1.4, "ego_wheel_base_m": 2.9,
            "lane_successors": {"E0a": ["E0b"], "E0b": ["E0c"]}, "traffic_light_lanes": {"L": ["E0a"]}}  # fmt: skip
    return Scenario("sim_case", cosmos_rig(320, 180), ego, agents if agents is not None else AgentTracks.empty(), road_map(), states, meta)


def states_along(x0: float, y: float, speed: np.ndarray, yaw: float = 0.0) -> np.ndarray:
    """Ego states (T, 11) driving straight at heading `yaw` from (x0, y) with the given speeds (m/s per step)."""
    speed = np.asarray(speed, float)
    dist = np.r_[0.0, np.cumsum(speed[:-1] * DT_S)]
    accel = np.gradient(speed, DT_S) if len(speed) > 1 else np.zeros(1)
    out = np.stack([initial_state(x0 + d * np.cos(yaw), y + d * np.sin(yaw), yaw, v, a, 0.0, VEHICLE.wheel_base_m)
                    for d, v, a in zip(dist, speed, accel)])  # fmt: skip
    return out


def box(track: str, xy: tuple[float, float], yaw: float = 0.0, v: float = 0.0, cls: str = "Car", size: tuple[float, float] = (4.5, 2.0)) -> Boxes:
    """One box row (`cls` in avsim's classes; its source class is the same)."""
    return Boxes(np.array([track]), np.array([cls]), np.array([cls]), np.array([[xy[0], xy[1], 0.8]]),
                 np.array([[size[0], size[1], 1.6]]), np.array([yaw]), np.array([[v * np.cos(yaw), v * np.sin(yaw)]]))  # fmt: skip


def road_and_route(sc: Scenario | None = None) -> tuple[RoadModel, Route]:
    """The road graph and the route of an ego driving east along E0 (or along `sc`'s log)."""
    sc = sc or scenario(np.c_[np.linspace(-50, 100, 30), np.zeros(30)], np.zeros(30))
    road = road_model(sc)
    pose = sc.ego.world_SE3_ego
    yaw = np.asarray(pose.yaw_rad).reshape(-1)
    centres = pose.translation[:, :2] + 1.4 * np.stack([np.cos(yaw), np.sin(yaw)], axis=1)
    return road, build_route(road, centres, yaw)


def scene(states: np.ndarray, boxes: list[Boxes] | Boxes | None = None, red: list[list[str]] | None = None,
          road_route: tuple[RoadModel, Route] | None = None) -> Scene:  # fmt: skip
    """A scene of one ego sequence (T, 11) among boxes (one set per step, or the same at every step)."""
    road, route = road_route or road_and_route()
    t = len(states)
    per_step = boxes if isinstance(boxes, list) else [boxes if boxes is not None else Boxes.empty()] * t
    ids = list(road.lane_ids)
    reds = [np.array([ids.index(k) for k in r], np.int64) for r in (red or [[]] * t)]
    return Scene(np.asarray(states)[None], per_step, reds, road, route, VEHICLE, DT_S)


def moving_box(track: str, x0: float, y: float, v: float, steps: int, yaw: float = 0.0, cls: str = "Car") -> list[Boxes]:
    """A box driving at constant speed, one row per step."""
    return [box(track, (x0 + v * k * DT_S * np.cos(yaw), y + v * k * DT_S * np.sin(yaw)), yaw, v, cls) for k in range(steps)]


def heading_of(states: np.ndarray) -> np.ndarray:
    return states[:, StateIndex.HEADING]
