"""An AlpaSim driver as an avsim policy: `avsim sim --policy alpasim://HOST:PORT`.

`AlpasimDriverPolicy` speaks AlpaSim's v0 `EgodriverService` (avsim's own .proto files, same wire
format), in the order AlpaSim's runtime does:

- at `reset`: `start_session` (a new session id, the episode's seed, the scene id, and the rig's
  cameras the episode shows, as `AvailableCamera` specs at the images' size with their
  rig->camera poses), waiting up to `connect_timeout_s` for the driver to come up;
- at every call: `submit_image_observation` per camera (PNG, or JPEG with `?image=jpeg`, the
  exposure's start and end both at the step time), `submit_egomotion_observation` (the ego rig
  pose local->rig and its dynamic state in the rig frame), `submit_route` (the route ahead, rig
  frame), then `drive(time_now_us, time_query_us = now + one step)`;
- at `close`: `close_session`.

The driver's answer is the rig's planned poses in the local frame (local->rig, timestamped, the
first usually "now"); avsim takes the poses after now, moves them into the current ego frame and
samples them at the sim's step (x, y and unwrapped heading linear in time) as a `Trajectory`. An
empty trajectory (a driver still gathering frames, as AlpaSim's reference driver answers until it
has enough) keeps the ego's motion (no acceleration, no steering change). A trajectory that is not
finite, whose times do not increase or that ends before now, a gRPC error (the driver down,
`UNAVAILABLE`) or no answer in time (every call shares 90% of the policy's budget as its gRPC
deadline, `DEADLINE_EXCEEDED`), and a `terminate_session` answer raise `DriverError`: the episode
ends there with one line and keeps its rollout.

Frames and times: `avsim.sim.alpasim.frames`.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from typing import Any

import cv2
import grpc
import numpy as np

from avsim.core.rig import CameraRig
from avsim.core.typing import NDArrayByte, NDArrayFloat
from avsim.sim.actions import Control, Trajectory
from avsim.sim.alpasim.address import SCHEME, parse_address
from avsim.sim.alpasim.frames import LocalFrame, ns_to_us, pose_from_proto, pose_to_proto, rig_cameras, us_to_ns
from avsim.sim.alpasim.protos import common_pb2, egodriver_pb2, egodriver_pb2_grpc
from avsim.sim.observation import EpisodeInfo, Observation
from avsim.sim.vehicle import StateIndex

__all__ = ["AlpasimDriverPolicy", "DriverError", "driver_poses", "ego_trajectory"]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # AlpaSim's runtime allows 64 MiB messages
MAX_TRAJECTORY_POSES = 100_000
DEADLINE_SHARE = 0.9  # of the policy's budget, for the gRPC calls of one step


class DriverError(Exception):
    """The driver failed or answered something unusable; `str()` is the one-line reason."""


def _encoded(image: NDArrayByte, fmt: str) -> bytes:
    ok, buf = cv2.imencode(".png" if fmt == "png" else ".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR),
                           [] if fmt == "png" else [cv2.IMWRITE_JPEG_QUALITY, 95])  # fmt: skip
    if not ok:
        raise DriverError(f"could not encode a {image.shape} image as {fmt}")
    return bytes(buf)


class AlpasimDriverPolicy:
    """An AlpaSim egodriver as a policy (see the module docstring).

    Args:
        spec: `alpasim://HOST:PORT[?image=png|jpeg]`.
        budget_s: the policy's time budget per call (the gRPC deadlines share 90% of it).
        rig: returns the cameras the episode shows, at their image size (None: no cameras), once
            the observation source is reset.
        connect_timeout_s: how long `start_session` waits for the driver.
    """

    def __init__(self, spec: str, budget_s: float = 1.0, rig: Callable[[], CameraRig | None] | None = None,
                 connect_timeout_s: float = 30.0) -> None:  # fmt: skip
        self.address, self.image_format = parse_address(spec)
        self.name = f"{SCHEME}://{self.address}"
        self.budget_s, self.connect_timeout_s = float(budget_s), float(connect_timeout_s)
        self._rig = rig or (lambda: None)
        self._channel: grpc.Channel | None = None
        self._stub: egodriver_pb2_grpc.EgodriverServiceStub | None = None
        self._session = ""
        self._dt_s = 0.1
        self._frame: LocalFrame | None = None

    # ------------------------------------------------------------------ session
    def reset(self, episode: EpisodeInfo) -> None:
        self.close()
        self._channel = grpc.insecure_channel(self.address, options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                                                                     ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)])  # fmt: skip
        self._stub = egodriver_pb2_grpc.EgodriverServiceStub(self._channel)
        self._frame, self._dt_s = LocalFrame.of(episode.scenario), episode.dt_s
        rig = self._rig()
        request = egodriver_pb2.DriveSessionRequest(
            session_uuid=str(uuid.uuid4()), random_seed=int(episode.seed),
            debug_info=egodriver_pb2.DriveSessionRequest.DebugInfo(scene_id=episode.scenario.scenario_id),
            rollout_spec=egodriver_pb2.DriveSessionRequest.RolloutSpec(
                vehicle=egodriver_pb2.DriveSessionRequest.RolloutSpec.VehicleDefinition(available_cameras=rig_cameras(rig) if rig else [])),
        )  # fmt: skip
        self._rpc("start_session", request, self.connect_timeout_s, wait_for_ready=True)
        self._session = request.session_uuid

    def close(self) -> None:
        """Close the session (if one is open) and the channel; errors here are ignored (the episode is over)."""
        if self._session and self._stub is not None:
            with contextlib.suppress(grpc.RpcError):
                self._stub.close_session(egodriver_pb2.DriveSessionCloseRequest(session_uuid=self._session), timeout=max(self.budget_s, 1.0))
        self._session = ""
        if self._channel is not None:
            self._channel.close()
        self._channel = self._stub = None

    def _rpc(self, method: str, request: Any, timeout_s: float, wait_for_ready: bool = False) -> Any:
        if self._stub is None:
            raise DriverError(f"{method}: no session (reset() first)")
        if timeout_s <= 0:
            raise DriverError(f"{method}: no time left of the {self.budget_s:g} s budget")
        try:
            return getattr(self._stub, method)(request, timeout=timeout_s, wait_for_ready=wait_for_ready)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = " ".join(str(exc.details() if hasattr(exc, "details") else exc).split())[:200]
            name = code.name if code is not None else "error"
            raise DriverError(f"driver {self.address} {method}: {name}: {details}") from None

    # ------------------------------------------------------------------ one step
    def __call__(self, observation: Observation) -> Trajectory | Control:
        deadline = time.monotonic() + DEADLINE_SHARE * self.budget_s
        now_us = ns_to_us(observation.timestamp_ns)
        for name, image in observation.cameras.items():
            shot = egodriver_pb2.RolloutCameraImage.CameraImage(frame_start_us=now_us, frame_end_us=now_us, logical_id=name,
                                                                image_bytes=_encoded(image, self.image_format))  # fmt: skip
            self._rpc("submit_image_observation", egodriver_pb2.RolloutCameraImage(session_uuid=self._session, camera_image=shot),
                      deadline - time.monotonic())  # fmt: skip
        self._rpc("submit_egomotion_observation", self._egomotion(observation, now_us), deadline - time.monotonic())
        route = egodriver_pb2.Route(timestamp_us=now_us, waypoints=[common_pb2.Vec3(x=float(x), y=float(y), z=0.0) for x, y in observation.route_ego_xy])
        self._rpc("submit_route", egodriver_pb2.RouteRequest(session_uuid=self._session, route=route), deadline - time.monotonic())
        query = now_us + int(round(self._dt_s * 1e6))
        answer = self._rpc("drive", egodriver_pb2.DriveRequest(session_uuid=self._session, time_now_us=now_us, time_query_us=query),
                           deadline - time.monotonic())  # fmt: skip
        if answer.terminate_session:
            raise DriverError(f"driver {self.address} ended the session (terminate_session) at {now_us} us")
        return self._action(answer.trajectory, observation)

    def _egomotion(self, observation: Observation, now_us: int) -> egodriver_pb2.RolloutEgoTrajectory:
        assert self._frame is not None
        st = observation.ego_state
        pose = common_pb2.PoseAtTime(pose=pose_to_proto(self._frame.to_local(observation.world_SE3_ego)), timestamp_us=now_us)
        state = common_pb2.DynamicState(
            linear_velocity=common_pb2.Vec3(x=float(st[StateIndex.VELOCITY_X]), y=float(st[StateIndex.VELOCITY_Y])),
            linear_acceleration=common_pb2.Vec3(x=float(st[StateIndex.ACCELERATION_X]), y=float(st[StateIndex.ACCELERATION_Y])),
            angular_velocity=common_pb2.Vec3(z=float(st[StateIndex.ANGULAR_VELOCITY])),
            angular_acceleration=common_pb2.Vec3(z=float(st[StateIndex.ANGULAR_ACCELERATION])),
        )  # fmt: skip
        return egodriver_pb2.RolloutEgoTrajectory(session_uuid=self._session, trajectory=common_pb2.Trajectory(poses=[pose]),
                                                  dynamic_states=[state])  # fmt: skip

    def _action(self, trajectory: common_pb2.Trajectory, observation: Observation) -> Trajectory | Control:
        poses = list(trajectory.poses)
        if not poses:
            return Control(0.0, 0.0)
        assert self._frame is not None
        try:
            times_s, local = driver_poses(poses, self._frame, observation.timestamp_ns)
        except DriverError as exc:
            raise DriverError(f"driver {self.address} drive returned a malformed trajectory: {exc}") from None
        return ego_trajectory(times_s, local, observation.ego_state, self._dt_s)


def driver_poses(poses: list[common_pb2.PoseAtTime], frame: LocalFrame, now_ns: int) -> tuple[NDArrayFloat, NDArrayFloat]:
    """A drive answer's poses as (times after now (K,) s, world x, y, yaw (K, 3)); DriverError naming what is wrong."""
    if len(poses) > MAX_TRAJECTORY_POSES:
        raise DriverError(f"{len(poses)} poses (at most {MAX_TRAJECTORY_POSES})")
    times_us = np.array([p.timestamp_us for p in poses], np.int64)
    if np.any(np.diff(times_us) <= 0):
        raise DriverError(f"timestamps do not increase (pose {int(np.argmax(np.diff(times_us) <= 0)) + 1})")
    out = np.zeros((len(poses), 3))
    for i, p in enumerate(poses):
        try:
            world = frame.to_world(pose_from_proto(p.pose, f"pose {i}"))
        except Exception as exc:  # SpecError: not finite, zero quaternion
            raise DriverError(str(exc)) from None
        R = world.rotation
        out[i] = (world.translation[0], world.translation[1], np.arctan2(R[1, 0], R[0, 0]))
    times_s = (np.array([us_to_ns(int(t)) for t in times_us], np.int64) - now_ns) / 1e9
    if times_s[-1] <= 0:
        raise DriverError(f"every pose is at or before now (the last at {times_s[-1]:+.3f} s)")
    return times_s, out


def ego_trajectory(times_s: NDArrayFloat, world: NDArrayFloat, state: NDArrayFloat, dt_s: float) -> Trajectory:
    """World poses at times after now as a `Trajectory` in the current ego frame at the sim's step.

    Args:
        times_s: (K,) increasing times relative to now (some may be <= 0).
        world: (K, 3) world x, y, yaw.
        state: the ego state row now.
        dt_s: the sim's step.

    Returns:
        Poses at dt, 2 dt, ... up to the last time (one pose at the last time when it is under a step).
    """
    x, y, h = (float(state[i]) for i in (StateIndex.X, StateIndex.Y, StateIndex.HEADING))
    c, s = np.cos(h), np.sin(h)
    dx, dy = world[:, 0] - x, world[:, 1] - y
    local = np.stack([c * dx + s * dy, -s * dx + c * dy, np.unwrap(world[:, 2] - h)], axis=1)
    if times_s[0] > 0:  # the driver left "now" out: the ego is where it is
        times_s, local = np.r_[0.0, times_s], np.vstack([np.zeros(3), local])
    t_last = float(times_s[-1])
    if t_last < dt_s:
        return Trajectory(np.array([[np.interp(t_last, times_s, local[:, k]) for k in range(3)]]), t_last)
    grid = np.arange(1, int(np.floor(t_last / dt_s + 1e-9)) + 1) * dt_s
    poses = np.stack([np.interp(grid, times_s, local[:, k]) for k in range(3)], axis=1)
    poses[:, 2] = (poses[:, 2] + np.pi) % (2 * np.pi) - np.pi
    return Trajectory(poses, dt_s)
