"""The route and egomotion an AlpaSim driver receives, built from avsim's episode as AlpaSim's runtime
builds them (NVlabs/alpasim `src/runtime/alpasim_runtime`, read for these rules).

Route (`route_generator.py`, `events/policy.py`): `ROUTE_WAYPOINTS` (20) points `ROUTE_SPACING_M`
(80 / 19 = 4.21 m) apart along the route, the first at the ego's projection onto it
(`RouteGenerator.generate_route`: `resample_from_point` with `ROUTE_LOOKAHEAD_DISTANCE_M / (NUM_WAYPOINTS - 1)`),
in the rig frame with z = 0 (`zero_out_z`); cut at the first spacing outside 3.5..4.5 m and padded
with NaN to 20 points (`prepare_for_policy`): where the route ends within 80 m, the tail is NaN
(never a repeated last point).

Egomotion (`events/policy.py`: "send all egomotion observations since the last update"): every ego
pose after the previous update up to now, local->rig, each with its dynamic state in the rig frame.
The first update carries the logged ego from the log's start up to now (`event_loop.py` seeds the
recorded context: velocity and yaw rate from the log by centred differences, accelerations zero;
avsim resolves that velocity in the rig frame, as the message defines it, where the runtime's
seed keeps the local frame's axes); later ones the sim's ego at every step since the previous
update (one a step when the driver is asked every step; `interval` steps with `?interval=`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayFloat
from avsim.sim.alpasim.frames import LocalFrame, ns_to_us, pose_to_proto
from avsim.sim.alpasim.protos import common_pb2, egodriver_pb2
from avsim.sim.vehicle import StateIndex

__all__ = ["Centreline", "EgoSample", "egomotion_message", "log_context", "route_message", "route_waypoints", "sim_sample"]

ROUTE_WAYPOINTS = 20
ROUTE_LOOKAHEAD_M = 80.0
ROUTE_SPACING_M = ROUTE_LOOKAHEAD_M / (ROUTE_WAYPOINTS - 1)
ROUTE_SPACING_RANGE_M = (3.5, 4.5)


class Centreline(Protocol):
    """The route's centre line as `route_waypoints` reads it (`avsim.sim.route.Path`)."""

    @property
    def length_m(self) -> float: ...

    def project(self, xy: NDArrayFloat) -> NDArrayFloat: ...

    def pose_at(self, s_m: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]: ...


@dataclass(frozen=True)
class EgoSample:
    """One egomotion observation: the time (us), world_SE3_ego, and the rig-frame dynamic state
    (linear velocity x, y; linear acceleration x, y; yaw rate; yaw acceleration)."""

    timestamp_us: int
    world_SE3_ego: SE3
    dynamics: tuple[float, float, float, float, float, float]

    def state(self) -> common_pb2.DynamicState:
        vx, vy, ax, ay, wz, az = self.dynamics
        return common_pb2.DynamicState(linear_velocity=common_pb2.Vec3(x=vx, y=vy), linear_acceleration=common_pb2.Vec3(x=ax, y=ay),
                                       angular_velocity=common_pb2.Vec3(z=wz), angular_acceleration=common_pb2.Vec3(z=az))  # fmt: skip


def sim_sample(timestamp_ns: int, world_SE3_ego: SE3, state: NDArrayFloat) -> EgoSample:
    """The sim's ego at one step as an egomotion observation (its state row's rig-frame dynamics)."""
    s = state
    dyn = (float(s[StateIndex.VELOCITY_X]), float(s[StateIndex.VELOCITY_Y]), float(s[StateIndex.ACCELERATION_X]),
           float(s[StateIndex.ACCELERATION_Y]), float(s[StateIndex.ANGULAR_VELOCITY]), float(s[StateIndex.ANGULAR_ACCELERATION]))  # fmt: skip
    return EgoSample(ns_to_us(int(timestamp_ns)), world_SE3_ego, dyn)


def log_context(ego: EgoTrajectory, now_ns: int) -> list[EgoSample]:
    """The logged ego before `now_ns` (from the log's start) as egomotion observations: velocity and yaw
    rate by centred differences of the log (one-sided at its ends), resolved in the rig frame;
    accelerations zero (as the runtime's seed).

    Args:
        ego: the logged ego.
        now_ns: the first update's time (its own sample is the sim's, not the log's).

    Returns:
        The samples with times before now, oldest first.
    """
    times = ego.timestamps_ns
    n = int(np.searchsorted(times, now_ns, side="left"))
    if n == 0:
        return []
    poses = ego.pose_at(times)
    t_s = (times - times[0]) / 1e9
    xy = poses.translation[:, :2]
    yaw = np.unwrap(np.asarray(poses.yaw_rad, np.float64).reshape(-1))
    if len(times) > 1:
        vel = np.stack([np.gradient(xy[:, 0], t_s), np.gradient(xy[:, 1], t_s)], -1)
        rate = np.gradient(yaw, t_s)
    else:
        vel, rate = np.zeros((1, 2)), np.zeros(1)
    c, s = np.cos(yaw), np.sin(yaw)
    v_rig = np.stack([c * vel[:, 0] + s * vel[:, 1], -s * vel[:, 0] + c * vel[:, 1]], -1)
    return [EgoSample(ns_to_us(int(times[i])), poses[i], (float(v_rig[i, 0]), float(v_rig[i, 1]), 0.0, 0.0, float(rate[i]), 0.0))
            for i in range(n)]  # fmt: skip


def egomotion_message(session: str, samples: list[EgoSample], frame: LocalFrame) -> egodriver_pb2.RolloutEgoTrajectory:
    """`submit_egomotion_observation`'s request: the samples' local->rig poses and rig-frame dynamic states."""
    poses = [common_pb2.PoseAtTime(pose=pose_to_proto(frame.to_local(s.world_SE3_ego)), timestamp_us=s.timestamp_us) for s in samples]
    return egodriver_pb2.RolloutEgoTrajectory(session_uuid=session, trajectory=common_pb2.Trajectory(poses=poses),
                                              dynamic_states=[s.state() for s in samples])  # fmt: skip


def route_waypoints(path: Centreline, state: NDArrayFloat) -> NDArrayFloat:
    """The route ahead as the runtime sends it (see the module docstring).

    Args:
        path: the episode's route centre line (`Route.centerline`).
        state: the ego's state row (world frame).

    Returns:
        (ROUTE_WAYPOINTS, 3) rig-frame points (x forward, y left, z 0), NaN rows past the route's end.
    """
    x, y, h = (float(state[i]) for i in (StateIndex.X, StateIndex.Y, StateIndex.HEADING))
    s0 = float(path.project(np.array([[x, y]]))[0])
    s = s0 + np.arange(ROUTE_WAYPOINTS) * ROUTE_SPACING_M
    s = s[s <= path.length_m + 1e-9]
    xy, _ = path.pose_at(s)
    rel = xy - [x, y]
    c, sn = np.cos(h), np.sin(h)
    pts = np.stack([rel[:, 0] * c + rel[:, 1] * sn, -rel[:, 0] * sn + rel[:, 1] * c, np.zeros(len(rel))], axis=1)
    gaps = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    bad = np.flatnonzero((gaps < ROUTE_SPACING_RANGE_M[0]) | (gaps > ROUTE_SPACING_RANGE_M[1]))
    if bad.size:
        pts = pts[: bad[0] + 1]
    return np.vstack([pts, np.full((ROUTE_WAYPOINTS - len(pts), 3), np.nan)])


def route_message(session: str, now_us: int, waypoints: NDArrayFloat) -> egodriver_pb2.RouteRequest:
    """`submit_route`'s request: the waypoints (rig frame) at `now_us`."""
    route = egodriver_pb2.Route(timestamp_us=now_us, waypoints=[common_pb2.Vec3(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in waypoints])
    return egodriver_pb2.RouteRequest(session_uuid=session, route=route)
