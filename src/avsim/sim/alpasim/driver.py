"""An AlpaSim driver as an avsim policy: `avsim sim --policy alpasim://HOST:PORT[?image=...&interval=...&warmup=...]`.

`AlpasimDriverPolicy` speaks AlpaSim's v0 `EgodriverService` (avsim's own .proto files, same wire
format), in the order AlpaSim's runtime does (`avsim.sim.alpasim.driver_messages` for the route and
egomotion rules, read from the runtime's code):

- at `reset`: `start_session` (a new session id, the episode's seed, the scene id, and the rig's
  cameras the episode shows, as `AvailableCamera` specs at the images' size with their
  rig->camera poses), waiting up to `connect_timeout_s` for the driver to come up;
- at every step: `submit_image_observation` per camera (PNG, or JPEG with `?image=jpeg`, the
  exposure's start and end both at the step time);
- at every policy step (every step, or every `?interval=S` seconds): `submit_egomotion_observation`
  (every ego pose since the last update, local->rig, with its rig-frame dynamic state; the first
  update also carries the logged ego before the episode's start), `submit_route` (20 waypoints
  4.21 m apart from the ego's projection, rig frame, NaN past the route's end), then
  `drive(time_now_us, time_query_us = now + one policy step)`;
- at `close`: `close_session`.

The driver's answer is the rig's planned poses in the local frame (local->rig, timestamped, the
first usually "now"); avsim takes the poses after now, moves them into the current ego frame and
samples them at the sim's step (x, y and unwrapped heading linear in time, up to
`MAX_PLAN_AHEAD_S` ahead) as a `Trajectory`; between policy steps the ego follows the last
answer. An empty trajectory (a driver still gathering frames, as AlpaSim's reference driver
answers until it has enough) keeps the ego's motion (no acceleration, no steering change).

Warm-up (`?warmup=S`, as the runtime's `force_gt_duration_us`): the steps that end within the
first S seconds follow the log (the expert's log replay) while the driver still gets every
observation and `drive` call, its answers checked and not followed.

A trajectory that is not finite, whose times do not increase or that ends before now, a gRPC error
(the driver down, `UNAVAILABLE`) or no answer in time (every call of a step shares 90% of the
policy's budget as its gRPC deadline, `DEADLINE_EXCEEDED`), and a `terminate_session` answer raise
`DriverError`: the episode ends there with one line and keeps its rollout.

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
from avsim.sim.alpasim.driver_messages import (
    EgoSample,
    egomotion_message,
    log_context,
    route_message,
    route_waypoints,
    sim_sample,
)
from avsim.sim.alpasim.frames import LocalFrame, ns_to_us, pose_from_proto, rig_cameras
from avsim.sim.alpasim.protos import common_pb2, egodriver_pb2, egodriver_pb2_grpc
from avsim.sim.observation import EpisodeInfo, Observation
from avsim.sim.policies import ExpertPolicy
from avsim.sim.vehicle import StateIndex

__all__ = ["AlpasimDriverPolicy", "DriverError", "driver_poses", "ego_trajectory"]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # AlpaSim's runtime allows 64 MiB messages
MAX_TRAJECTORY_POSES = 100_000
MAX_PLAN_AHEAD_S = 30.0  # an answer is followed up to this far ahead (300 poses at 0.1 s), however far its poses reach
DEADLINE_SHARE = 0.9  # of the policy's budget, for the gRPC calls of one step
STEP_TOLERANCE = 1e-6  # seconds: an interval or warm-up within this of a whole number of steps


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
        spec: `alpasim://HOST:PORT[?image=png|jpeg&interval=S&warmup=S]` (`avsim.sim.alpasim.address`).
        budget_s: the policy's time budget per call (the gRPC deadlines share 90% of it).
        rig: returns the cameras the episode shows, at their image size (None: no cameras), once
            the observation source is reset.
        connect_timeout_s: how long `start_session` waits for the driver.
    """

    def __init__(self, spec: str, budget_s: float = 1.0, rig: Callable[[], CameraRig | None] | None = None,
                 connect_timeout_s: float = 30.0) -> None:  # fmt: skip
        self.settings = parse_address(spec)
        self.address, self.image_format = self.settings.target, self.settings.image
        self.name = f"{SCHEME}://{self.address}"
        self.budget_s, self.connect_timeout_s = float(budget_s), float(connect_timeout_s)
        self._rig = rig or (lambda: None)
        self._channel: grpc.Channel | None = None
        self._stub: egodriver_pb2_grpc.EgodriverServiceStub | None = None
        self._session = ""
        self._dt_s, self._every, self._warmup_steps = 0.1, 1, 0
        self._frame: LocalFrame | None = None
        self._episode: EpisodeInfo | None = None
        self._pending: list[EgoSample] = []  # egomotion since the last update
        self._plan: tuple[int, NDArrayFloat, NDArrayFloat] | None = None  # the last answer: its now (ns), times after it (s), world x, y, yaw
        self._expert = ExpertPolicy()

    # ------------------------------------------------------------------ session
    def reset(self, episode: EpisodeInfo) -> None:
        self.close()
        self._dt_s = episode.dt_s
        self._every = self._steps_of(self.settings.interval_s, "interval") if self.settings.interval_s else 1
        self._warmup_steps = self._steps_of(self.settings.warmup_s, "warmup") if self.settings.warmup_s else 0
        self._channel = grpc.insecure_channel(self.address, options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                                                                     ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)])  # fmt: skip
        self._stub = egodriver_pb2_grpc.EgodriverServiceStub(self._channel)
        self._frame, self._episode, self._pending, self._plan = LocalFrame.of(episode.scenario), episode, [], None
        if self._warmup_steps:
            self._expert.reset(episode)
        rig = self._rig()
        request = egodriver_pb2.DriveSessionRequest(
            session_uuid=str(uuid.uuid4()), random_seed=int(episode.seed),
            debug_info=egodriver_pb2.DriveSessionRequest.DebugInfo(scene_id=episode.scenario.scenario_id),
            rollout_spec=egodriver_pb2.DriveSessionRequest.RolloutSpec(
                vehicle=egodriver_pb2.DriveSessionRequest.RolloutSpec.VehicleDefinition(available_cameras=rig_cameras(rig) if rig else [])),
        )  # fmt: skip
        self._rpc("start_session", request, self.connect_timeout_s, wait_for_ready=True)
        self._session = request.session_uuid

    def _steps_of(self, seconds: float, what: str) -> int:
        """Whole sim steps in `seconds` (DriverError unless it is a multiple of the step)."""
        steps = round(seconds / self._dt_s)
        if abs(steps * self._dt_s - seconds) > STEP_TOLERANCE or (what == "interval" and steps < 1):
            raise DriverError(f"{what}: {seconds:g} s is not a whole number of the sim's {self._dt_s:g} s steps")
        return int(steps)

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
        assert self._frame is not None and self._episode is not None
        deadline = time.monotonic() + DEADLINE_SHARE * self.budget_s
        now_us = ns_to_us(observation.timestamp_ns)
        for name, image in observation.cameras.items():
            shot = egodriver_pb2.RolloutCameraImage.CameraImage(frame_start_us=now_us, frame_end_us=now_us, logical_id=name,
                                                                image_bytes=_encoded(image, self.image_format))  # fmt: skip
            self._rpc("submit_image_observation", egodriver_pb2.RolloutCameraImage(session_uuid=self._session, camera_image=shot),
                      deadline - time.monotonic())  # fmt: skip
        if observation.step == 0:
            self._pending = log_context(self._episode.scenario.ego, observation.timestamp_ns)
        self._pending.append(sim_sample(observation.timestamp_ns, observation.world_SE3_ego, observation.ego_state))
        if observation.step % self._every == 0:
            self._update(observation, now_us, deadline)
        if observation.step < self._warmup_steps:
            return self._expert(observation)
        return self._follow(observation)

    def _update(self, observation: Observation, now_us: int, deadline: float) -> None:
        """The policy step's egomotion, route and drive call; the answer becomes the plan followed."""
        assert self._frame is not None
        self._rpc("submit_egomotion_observation", egomotion_message(self._session, self._pending, self._frame), deadline - time.monotonic())
        self._pending = []
        waypoints = route_waypoints(observation.episode.route.centerline, observation.ego_state)
        self._rpc("submit_route", route_message(self._session, now_us, waypoints), deadline - time.monotonic())
        query = now_us + int(round(self._every * self._dt_s * 1e6))
        answer = self._rpc("drive", egodriver_pb2.DriveRequest(session_uuid=self._session, time_now_us=now_us, time_query_us=query),
                           deadline - time.monotonic())  # fmt: skip
        if answer.terminate_session:
            raise DriverError(f"driver {self.address} ended the session (terminate_session) at {now_us} us")
        poses = list(answer.trajectory.poses)
        if not poses:
            self._plan = None
            return
        try:
            times_s, world = driver_poses(poses, self._frame, observation.timestamp_ns)
        except DriverError as exc:
            raise DriverError(f"driver {self.address} drive returned a malformed trajectory: {exc}") from None
        self._plan = (observation.timestamp_ns, times_s, world)

    def _follow(self, observation: Observation) -> Trajectory | Control:
        """The last answer from now on (the ego's motion kept when there is none, or it has run out)."""
        if self._plan is None:
            return Control(0.0, 0.0)
        at_ns, times_s, world = self._plan
        times_s = times_s - (observation.timestamp_ns - at_ns) / 1e9
        if times_s[-1] <= 0:
            return Control(0.0, 0.0)
        return ego_trajectory(times_s, world, observation.ego_state, self._dt_s)


def driver_poses(poses: list[common_pb2.PoseAtTime], frame: LocalFrame, now_ns: int) -> tuple[NDArrayFloat, NDArrayFloat]:
    """A drive answer's poses as (times after now (K,) s, world x, y, yaw (K, 3)); DriverError naming what is wrong."""
    if len(poses) > MAX_TRAJECTORY_POSES:
        raise DriverError(f"{len(poses)} poses (at most {MAX_TRAJECTORY_POSES})")
    stamps = [int(p.timestamp_us) for p in poses]  # fixed64: Python ints (any 64-bit value), no int64 overflow
    back = next((i for i in range(1, len(stamps)) if stamps[i] <= stamps[i - 1]), None)
    if back is not None:
        raise DriverError(f"timestamps do not increase (pose {back})")
    out = np.zeros((len(poses), 3))
    for i, p in enumerate(poses):
        try:
            world = frame.to_world(pose_from_proto(p.pose, f"pose {i}"))
        except Exception as exc:  # SpecError: not finite, zero quaternion
            raise DriverError(str(exc)) from None
        R = world.rotation
        out[i] = (world.translation[0], world.translation[1], np.arctan2(R[1, 0], R[0, 0]))
    times_s = np.array([(t * 1000 - int(now_ns)) / 1e9 for t in stamps], np.float64)
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
        Poses at dt, 2 dt, ... up to the last time or `MAX_PLAN_AHEAD_S` (one pose at the last time when it is under a step).
    """
    x, y, h = (float(state[i]) for i in (StateIndex.X, StateIndex.Y, StateIndex.HEADING))
    c, s = np.cos(h), np.sin(h)
    dx, dy = world[:, 0] - x, world[:, 1] - y
    local = np.stack([c * dx + s * dy, -s * dx + c * dy, np.unwrap(world[:, 2] - h)], axis=1)
    if times_s[0] > 0:  # the driver left "now" out: the ego is where it is
        times_s, local = np.r_[0.0, times_s], np.vstack([np.zeros(3), local])
    t_last = min(float(times_s[-1]), MAX_PLAN_AHEAD_S)
    if t_last < dt_s:
        return Trajectory(np.array([[np.interp(t_last, times_s, local[:, k]) for k in range(3)]]), t_last)
    grid = np.arange(1, int(np.floor(t_last / dt_s + 1e-9)) + 1) * dt_s
    poses = np.stack([np.interp(grid, times_s, local[:, k]) for k in range(3)], axis=1)
    poses[:, 2] = (poses[:, 2] + np.pi) % (2 * np.pi) - np.pi
    return Trajectory(poses, dt_s)
