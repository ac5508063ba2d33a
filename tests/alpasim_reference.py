"""Reference AlpaSim peers for the tests, written against avsim's .proto files as any AlpaSim program
would be against NVlabs/alpasim's: a driver (EgodriverService server) that follows the route it is
sent, and helpers a runtime uses to call a sensorsim server. Loopback only (127.0.0.1)."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass, field

import cv2
import grpc
import numpy as np

from avsim.sim.alpasim.protos import common_pb2, egodriver_pb2, egodriver_pb2_grpc

SPEED_MPS = 6.0
HORIZON_POSES = 40  # 4 s at 0.1 s


def yaw_of(q: common_pb2.Quat) -> float:
    """Yaw of a (w, x, y, z) quaternion."""
    return float(np.arctan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z)))


def quat_of_yaw(yaw: float) -> common_pb2.Quat:
    return common_pb2.Quat(w=float(np.cos(yaw / 2)), z=float(np.sin(yaw / 2)))


@dataclass
class DriverLog:
    """What the reference driver received, and what it found wrong (`problems`)."""

    sessions: list[egodriver_pb2.DriveSessionRequest] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    images: list[tuple[str, int, int, tuple[int, ...]]] = field(default_factory=list)  # (camera, start, end, shape)
    poses: list[common_pb2.PoseAtTime] = field(default_factory=list)
    egomotion_sizes: list[int] = field(default_factory=list)  # poses per submit_egomotion_observation
    states: list[common_pb2.DynamicState] = field(default_factory=list)
    routes: list[egodriver_pb2.Route] = field(default_factory=list)
    drives: list[egodriver_pb2.DriveRequest] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class ReferenceDriver(egodriver_pb2_grpc.EgodriverServiceServicer):
    """Follows the route at SPEED_MPS: the route's waypoints (rig frame) walked by arc length, turned
    into local-frame rig poses with the last egomotion pose, as AlpaSim's driver does.

    behaviour: "follow"; "hang" (drive sleeps 30 s from drive call `at`); "malformed" (from drive
    call `at`, timestamps that go back); "nan" (a NaN pose); "empty" (an empty trajectory before
    call `at`, then "follow"); "terminate" (terminate_session at call `at`).
    """

    def __init__(self, behaviour: str = "follow", at: int = 3) -> None:
        self.behaviour, self.at = behaviour, at
        self.log = DriverLog()
        self.release = threading.Event()

    def start_session(self, request: egodriver_pb2.DriveSessionRequest, context: grpc.ServicerContext) -> common_pb2.SessionRequestStatus:
        self.log.sessions.append(request)
        return common_pb2.SessionRequestStatus()

    def close_session(self, request: egodriver_pb2.DriveSessionCloseRequest, context: grpc.ServicerContext) -> common_pb2.Empty:
        self.log.closed.append(request.session_uuid)
        return common_pb2.Empty()

    def _check_session(self, uuid: str) -> None:
        if not self.log.sessions or uuid != self.log.sessions[-1].session_uuid:
            self.log.problems.append(f"unknown session {uuid!r}")

    def submit_image_observation(self, request: egodriver_pb2.RolloutCameraImage, context: grpc.ServicerContext) -> common_pb2.Empty:
        self._check_session(request.session_uuid)
        img = request.camera_image
        decoded = cv2.imdecode(np.frombuffer(img.image_bytes, np.uint8), cv2.IMREAD_COLOR)
        cams = {c.logical_id: c for c in self.log.sessions[-1].rollout_spec.vehicle.available_cameras} if self.log.sessions else {}
        if decoded is None:
            self.log.problems.append(f"{img.logical_id}: image bytes do not decode")
        elif img.logical_id not in cams:
            self.log.problems.append(f"{img.logical_id}: not among the session's cameras")
        elif decoded.shape[:2] != (cams[img.logical_id].intrinsics.resolution_h, cams[img.logical_id].intrinsics.resolution_w):
            self.log.problems.append(f"{img.logical_id}: image {decoded.shape} differs from its spec's resolution")
        self.log.images.append((img.logical_id, img.frame_start_us, img.frame_end_us, () if decoded is None else decoded.shape))
        return common_pb2.Empty()

    def submit_egomotion_observation(self, request: egodriver_pb2.RolloutEgoTrajectory, context: grpc.ServicerContext) -> common_pb2.Empty:
        self._check_session(request.session_uuid)
        if len(request.trajectory.poses) != len(request.dynamic_states):
            self.log.problems.append("egomotion: poses and dynamic states differ in number")
        for p in request.trajectory.poses:
            if self.log.poses and p.timestamp_us <= self.log.poses[-1].timestamp_us:
                self.log.problems.append(f"egomotion: time {p.timestamp_us} does not increase")
        self.log.poses.extend(request.trajectory.poses)
        self.log.egomotion_sizes.append(len(request.trajectory.poses))
        self.log.states.extend(request.dynamic_states)
        return common_pb2.Empty()

    def submit_route(self, request: egodriver_pb2.RouteRequest, context: grpc.ServicerContext) -> common_pb2.Empty:
        self.log.routes.append(request.route)
        return common_pb2.Empty()

    def submit_recording_ground_truth(self, request: egodriver_pb2.GroundTruthRequest, context: grpc.ServicerContext) -> common_pb2.Empty:
        return common_pb2.Empty()

    def get_version(self, request: common_pb2.Empty, context: grpc.ServicerContext) -> common_pb2.VersionId:
        return common_pb2.VersionId(version_id="avsim-reference-driver")

    def drive(self, request: egodriver_pb2.DriveRequest, context: grpc.ServicerContext) -> egodriver_pb2.DriveResponse:
        self._check_session(request.session_uuid)
        self.log.drives.append(request)
        k = len(self.log.drives) - 1
        if self.behaviour == "hang" and k >= self.at:
            self.release.wait(30.0)
        if self.behaviour == "terminate" and k == self.at:
            return egodriver_pb2.DriveResponse(terminate_session=True)
        if self.behaviour == "empty" and k < self.at:
            return egodriver_pb2.DriveResponse()
        if not self.log.poses or not self.log.routes or self.log.routes[-1].timestamp_us != request.time_now_us:
            self.log.problems.append(f"drive at {request.time_now_us}: egomotion and route of this time were not sent first")
            return egodriver_pb2.DriveResponse()
        traj = self._plan(request.time_now_us)
        if self.behaviour == "malformed" and k >= self.at:
            traj.poses[3].timestamp_us = traj.poses[1].timestamp_us
        if self.behaviour == "nan" and k >= self.at:
            traj.poses[2].pose.vec.x = float("nan")
        return egodriver_pb2.DriveResponse(trajectory=traj)

    def _plan(self, now_us: int) -> common_pb2.Trajectory:
        ego = self.log.poses[-1]
        route = np.array([[w.x, w.y] for w in self.log.routes[-1].waypoints], np.float64)
        route = route[np.isfinite(route).all(axis=1)]  # the runtime pads a route that ends with NaN
        seg = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(route, axis=0), axis=1))]
        yaw0 = yaw_of(ego.pose.quat)
        c, s = np.cos(yaw0), np.sin(yaw0)
        out = common_pb2.Trajectory(poses=[ego])
        for i in range(1, HORIZON_POSES + 1):
            d = min(SPEED_MPS * 0.1 * i, seg[-1])
            x, y = np.interp(d, seg, route[:, 0]), np.interp(d, seg, route[:, 1])
            j = min(int(np.searchsorted(seg, d)), len(route) - 1)
            dx, dy = route[j] - route[max(j - 1, 0)]
            heading = yaw0 + (float(np.arctan2(dy, dx)) if (dx or dy) else 0.0)
            out.poses.append(common_pb2.PoseAtTime(
                pose=common_pb2.Pose(vec=common_pb2.Vec3(x=ego.pose.vec.x + c * x - s * y, y=ego.pose.vec.y + s * x + c * y, z=ego.pose.vec.z),
                                     quat=quat_of_yaw(heading)),
                timestamp_us=now_us + 100_000 * i))  # fmt: skip
        return out


def serve_driver(driver: ReferenceDriver) -> tuple[grpc.Server, int]:
    """Start `driver` on 127.0.0.1 (a free port); returns the server and its port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    egodriver_pb2_grpc.add_EgodriverServiceServicer_to_server(driver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def wait_until(predicate: object, timeout_s: float = 30.0) -> bool:
    """Poll a callable until it returns true (or the time runs out)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False
