"""Ego edits: replace the trajectory (waypoints or a lane route), shift it sideways (lane change).

Poses keep the ego convention: origin at the rear-axle centre on the ground, x forward.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3, yaw_to_matrix
from avsim.scenario import Scenario
from avsim.scenario.road import road_model

from . import routes
from .common import check_time, check_waypoints, to_s
from .ops_agents import _ground_z


def _ego_from_path(timestamps_ns: np.ndarray, xyz: np.ndarray, yaw: np.ndarray) -> EgoTrajectory:
    return EgoTrajectory(np.array(timestamps_ns, dtype=np.int64), SE3(yaw_to_matrix(yaw), np.array(xyz, dtype=np.float64)))


def replace_ego_waypoints(scenario: Scenario, times_s: Sequence[float], xy_m: np.ndarray) -> Scenario:
    """New ego trajectory through waypoints (K, 2|3) at `times_s` (K,), sampled on the current
    ego timestamps within the waypoints' span (the clip is cropped to that span)."""
    t_wp, xy = check_waypoints(scenario, times_s, xy_m)
    if xy.shape[1] == 2:
        xy = np.concatenate([xy, _ground_z(scenario, xy)[:, None]], axis=1)
    t_all = to_s(scenario, scenario.ego.timestamps_ns)
    mask, xyz, yaw = routes.waypoint_path(t_wp, xy, t_all)
    if mask.sum() < 2:
        raise AvsimValueError("waypoints: their time span holds fewer than two ego timestamps")
    return scenario.replace(ego=_ego_from_path(np.asarray(scenario.ego.timestamps_ns)[mask], xyz, yaw))


def replace_ego_route(
    scenario: Scenario,
    speed: routes.SpeedProfile,
    start_xy_m: Sequence[float] | None = None,
    heading_rad: float | None = None,
    turns: Sequence[str] = (),
) -> Scenario:
    """New ego trajectory following the map's lanes with a speed profile, on the current ego
    timestamps. Starts at the current ego start (and heading) unless given."""
    first = scenario.ego.world_SE3_ego[0]
    start = np.asarray(first.translation)[:2] if start_xy_m is None else np.asarray(start_xy_m, dtype=np.float64)[:2]
    heading = float(np.asarray(first.yaw_rad)) if heading_rad is None and start_xy_m is None else heading_rad
    t_all = to_s(scenario, scenario.ego.timestamps_ns)
    length = float(speed.distance_m(np.array([t_all[-1]]))[0]) + 10.0
    route = routes.lane_route(road_model(scenario), start, length, heading, tuple(turns))
    xyz, yaw = routes.follow_path(route, t_all, speed)
    return scenario.replace(ego=_ego_from_path(scenario.ego.timestamps_ns, xyz, yaw))


def shift_ego_lateral(scenario: Scenario, offset_m: float, start_s: float = 0.0, duration_s: float = 0.0) -> Scenario:
    """Move the ego `offset_m` to its left (negative: right) from `start_s` on.

    With `duration_s` > 0 the offset ramps in smoothly (quintic) over that time: a lane change.
    With 0 the ego is displaced from `start_s` on without a transition (a parallel lane).
    Heading follows the new path's tangent where the ego moves; roll and pitch are kept.
    """
    check_time(scenario, start_s, "start_s")
    if duration_s < 0:
        raise AvsimValueError("duration_s: must be >= 0")
    if duration_s > 0:
        check_time(scenario, start_s + duration_s, "start_s + duration_s")
    ego = scenario.ego
    t = to_s(scenario, ego.timestamps_ns)
    pose = ego.world_SE3_ego
    yaw = np.asarray(pose.yaw_rad)
    ramp = routes.smootherstep((t - start_s) / duration_s) if duration_s > 0 else (t >= start_s - 1e-9).astype(np.float64)
    d = offset_m * ramp
    xyz = np.array(pose.translation, copy=True)
    xyz[:, 0] -= d * np.sin(yaw)
    xyz[:, 1] += d * np.cos(yaw)
    new_yaw = yaw.copy()
    if len(t) >= 2 and duration_s > 0:
        speed = np.linalg.norm(np.gradient(xyz[:, :2], t, axis=0), axis=1)
        path_yaw = routes.path_yaw_rad(xyz[:, :2], float(yaw[0]))
        new_yaw = np.where(speed > 0.5, path_yaw, yaw)
    dyaw = new_yaw - yaw
    rotation = yaw_to_matrix(dyaw) @ np.asarray(pose.rotation)
    return scenario.replace(ego=EgoTrajectory(np.array(ego.timestamps_ns), SE3(rotation, xyz)))
