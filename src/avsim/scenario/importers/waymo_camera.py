"""Waymo's rolling-shutter camera model, restated in avsim's frames (RDF camera, world_SE3_ego).

Waymo perception cameras read the image out column by column (or row by row): each column is
exposed at its own time between ``camera_trigger_time`` and ``camera_readout_done_time`` while
the vehicle keeps moving. Waymo's camera model (waymo-open-dataset
``wdl_limited/camera/camera_model.cc``, used by its ``world_to_image`` op) projects a world point
by solving for the time at which the readout line reaches the point. The facts it is built on,
restated here in avsim's conventions:

- Pixel time: ``base = trigger + shutter / 2`` and ``readout = readout_done - trigger - shutter``;
  a pixel (x, y) is exposed at ``base + readout * x / W`` (LEFT_TO_RIGHT), ``* (W - x) / W``
  (RIGHT_TO_LEFT), ``* y / H`` (TOP_TO_BOTTOM) or ``* (H - y) / H`` (BOTTOM_TO_TOP).
  ``GLOBAL_SHUTTER`` projects with the image pose only; ``UNKNOWN`` aborts Waymo's model (here:
  `AvsimValueError`).
- Motion: the image ``pose`` (world_SE3_vehicle) holds at ``pose_timestamp``; the ego moves with
  the image ``velocity``: (v_x, v_y, v_z) in the WORLD frame, (w_x, w_y, w_z) used by the camera
  model as the angular velocity in the VEHICLE frame. The camera origin moves at
  ``v + (world_R_ego w) x (world_R_ego ego_t_camera)`` (lever arm), linearly in time; its
  rotation is linearised: ``camera_R_world(t) = (I - t [w_cam]x) camera_R_world(0)``, with
  ``w_cam`` the angular velocity in camera axes.
- Solve: ``t`` (seconds from ``pose_timestamp``) is found by Newton steps from ``t = 0`` on the
  residual ``t - s(t) * factor + (pose_timestamp - t_principal_point)``, where ``s`` is the point's
  normalised coordinate along the readout (x / z for column readout, y / z for row readout),
  ``factor = +-readout / (normalised extent of the image along the readout)`` (the extent is the
  undistorted normalised coordinate of the two image edges through the image centre line; the
  sign is negative for RIGHT_TO_LEFT / BOTTOM_TO_TOP) and ``t_principal_point`` the pixel time of
  (c_u, c_v). Steps repeat while |residual| > 1e-5 s, at most 4; a final |residual| > 0.1 s, or
  a point at depth <= 0 at any step, is invalid. Waymo's step uses the derivative
  ``1 - factor / z * (s * dz/dt + d(x or y)/dt)``, where the exact derivative of ``s`` would have
  ``-s * dz/dt``; the root is the same but the returned value depends on the iterates, so it is
  reproduced as is.
- Lens: OpenCV k1, k2, p1, p2, k3 in normalised coordinates; a radial factor
  ``1 + k1 r^2 + k2 r^4 + k3 r^6`` outside [0.8, 1.2] makes the projection invalid, the pixel
  then being the normalised direction scaled to ``hypot(W, H)`` from (c_u, c_v). Undistortion is
  the fixed-point iteration ``x = (x_d - tangential(x)) / radial(x)``, at most 20 times, stopping
  when a step is below ``1e-12 / (f_u^2 + f_v^2)`` (squared, normalised units).

Waymo's camera frame is x forward, y left, z up with normalised coordinates (-y/x, -z/x); avsim's
RDF frame gives the same numbers as (x/z, y/z), so everything above is computed in RDF. Only the
camera model is restated; the renderer stays global-shutter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape

if TYPE_CHECKING:
    from avsim.core.cameras import PinholeCamera
    from avsim.core.transforms import SE3

__all__ = [
    "READOUT_DIRECTIONS", "RollingShutterCapture", "ShutterProjection", "pixel_time_s", "project_points",
    "undistort_normalized",
]  # fmt: skip

READOUT_DIRECTIONS = ("UNKNOWN", "TOP_TO_BOTTOM", "LEFT_TO_RIGHT", "BOTTOM_TO_TOP", "RIGHT_TO_LEFT", "GLOBAL_SHUTTER")
ROLLING_DIRECTIONS = ("TOP_TO_BOTTOM", "LEFT_TO_RIGHT", "BOTTOM_TO_TOP", "RIGHT_TO_LEFT")
RESIDUAL_THRESHOLD_S = 1e-5
MAX_NEWTON_STEPS = 4
MAX_FINAL_RESIDUAL_S = 0.1
MAX_UNDISTORT_STEPS = 20
RADIAL_BOUNDS = (0.8, 1.2)


def _floats(value: object, n: int, name: str) -> tuple[float, ...]:
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise AvsimValueError(f"{name}: expected {n} finite values, got {value!r}")
    return tuple(float(v) for v in arr)


@dataclass(frozen=True)
class RollingShutterCapture:
    """Timing and ego motion of one camera image (Waymo ``CameraImage`` fields; JSON-safe numbers).

    Attributes:
        readout: the camera's ``rolling_shutter_direction`` name, one of `READOUT_DIRECTIONS`.
        pose_time_s: ``pose_timestamp``: the time of the image pose (s, Unix).
        trigger_time_s: ``camera_trigger_time`` (s).
        readout_done_time_s: ``camera_readout_done_time`` (s).
        shutter_s: ``shutter``: exposure time of one column / row (s).
        velocity_mps: (3,) ego velocity in the world frame at ``pose_time_s``.
        angular_velocity_radps: (3,) ego angular velocity in the ego (vehicle) frame.
    """

    readout: str
    pose_time_s: float
    trigger_time_s: float
    readout_done_time_s: float
    shutter_s: float
    velocity_mps: tuple[float, ...]
    angular_velocity_radps: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.readout not in READOUT_DIRECTIONS:
            raise AvsimValueError(f"RollingShutterCapture.readout: expected one of {READOUT_DIRECTIONS}, got {self.readout!r}")
        for name in ("pose_time_s", "trigger_time_s", "readout_done_time_s", "shutter_s"):
            object.__setattr__(self, name, _floats(getattr(self, name), 1, f"RollingShutterCapture.{name}")[0])
        object.__setattr__(self, "velocity_mps", _floats(self.velocity_mps, 3, "RollingShutterCapture.velocity_mps"))
        object.__setattr__(self, "angular_velocity_radps", _floats(self.angular_velocity_radps, 3, "RollingShutterCapture.angular_velocity_radps"))

    @property
    def is_rolling(self) -> bool:
        """Whether the readout is one of the four rolling directions (not GLOBAL_SHUTTER / UNKNOWN)."""
        return self.readout in ROLLING_DIRECTIONS

    @property
    def readout_s(self) -> float:
        """Readout duration: readout_done - trigger - shutter (s)."""
        return self.readout_done_time_s - self.trigger_time_s - self.shutter_s


@dataclass(frozen=True)
class ShutterProjection:
    """World points projected the way Waymo's camera model does.

    Attributes:
        uv_px: (N, 2) pixels; NaN where the point is behind the camera or the solve diverged.
            Where only the lens check failed (`valid` False, finite uv), the pixel is Waymo's
            out-of-image stand-in along the point's direction.
        depth_m: (N,) depth along the optical axis at the solved time (NaN as uv).
        valid: (N,) Waymo's validity: in front of the camera, solve converged, lens factor in bounds.
        time_from_pose_s: (N,) solved capture time minus ``pose_time_s`` (0 for a global shutter).
    """

    uv_px: np.ndarray
    depth_m: np.ndarray
    valid: np.ndarray
    time_from_pose_s: np.ndarray


def undistort_normalized(camera: PinholeCamera, uv_px: np.ndarray) -> np.ndarray:
    """Undistorted normalised coordinates of pixels, by Waymo's fixed-point iteration.

    Args:
        camera: the pinhole camera (f, c, k1, k2, p1, p2, k3).
        uv_px: (N, 2) pixel coordinates.

    Returns:
        (N, 2) normalised coordinates (x / z, y / z) in the RDF camera frame.
    """
    k1, k2, p1, p2, k3 = camera.distortion
    uv = np.asarray(uv_px, dtype=np.float64).reshape(-1, 2)
    xd, yd = (uv[:, 0] - camera.cx_px) / camera.fx_px, (uv[:, 1] - camera.cy_px) / camera.fy_px
    x, y = xd.copy(), yd.copy()
    active = np.ones(len(uv), dtype=bool)
    min_step2 = 1e-12 / (camera.fx_px**2 + camera.fy_px**2)
    for _ in range(MAX_UNDISTORT_STEPS):
        r2 = x * x + y * y
        radial = 1.0 + r2 * k1 + r2 * r2 * k2 + r2 * r2 * r2 * k3
        new_x = (xd - (2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x))) / radial
        new_y = (yd - (2.0 * p2 * x * y + p1 * (r2 + 2.0 * y * y))) / radial
        step2 = (new_x - x) ** 2 + (new_y - y) ** 2
        x, y = np.where(active, new_x, x), np.where(active, new_y, y)
        active &= ~(step2 < min_step2)
        if not active.any():
            break
    return np.stack([x, y], -1)


def _distort_checked(camera: PinholeCamera, xn: np.ndarray, yn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixels (N, 2) of normalised coordinates, and whether the radial factor is in `RADIAL_BOUNDS`."""
    k1, k2, p1, p2, k3 = camera.distortion
    r2 = xn * xn + yn * yn
    radial = 1.0 + k1 * r2 + k2 * r2 * r2 + k3 * r2 * r2 * r2
    ok = (radial >= RADIAL_BOUNDS[0]) & (radial <= RADIAL_BOUNDS[1])
    xd = xn * radial + 2.0 * p1 * xn * yn + p2 * (r2 + 2.0 * xn * xn)
    yd = yn * radial + p1 * (r2 + 2.0 * yn * yn) + 2.0 * p2 * xn * yn
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = math.hypot(camera.width_px, camera.height_px) / np.sqrt(r2)
    u = np.where(ok, xd * camera.fx_px + camera.cx_px, xn * scale + camera.cx_px)
    v = np.where(ok, yd * camera.fy_px + camera.cy_px, yn * scale + camera.cy_px)
    return np.stack([u, v], -1), ok


def pixel_time_s(capture: RollingShutterCapture, width_px: int, height_px: int, uv_px: np.ndarray) -> np.ndarray:
    """Mid-exposure time of pixels (s, the capture's clock).

    Args:
        capture: the image's timing (a rolling readout).
        width_px: image width.
        height_px: image height.
        uv_px: (N, 2) pixel coordinates.

    Returns:
        (N,) times.

    Raises:
        AvsimValueError: the readout is not one of the four rolling directions.
    """
    uv = np.asarray(uv_px, dtype=np.float64).reshape(-1, 2)
    base = capture.trigger_time_s + 0.5 * capture.shutter_s
    line = {
        "TOP_TO_BOTTOM": capture.readout_s / height_px * uv[:, 1],
        "BOTTOM_TO_TOP": capture.readout_s / height_px * (height_px - uv[:, 1]),
        "LEFT_TO_RIGHT": capture.readout_s / width_px * uv[:, 0],
        "RIGHT_TO_LEFT": capture.readout_s / width_px * (width_px - uv[:, 0]),
    }.get(capture.readout)
    if line is None:
        raise AvsimValueError(f"readout {capture.readout}: no pixel time (Waymo's camera model aborts on it)")
    return base + line


@dataclass(frozen=True)
class _Motion:
    """Per-image constants of the solve (RDF camera axes, world frame)."""

    camera_R_world: np.ndarray  # (3, 3) at the pose time
    world_t_camera: np.ndarray  # (3,) at the pose time
    camera_velocity_mps: np.ndarray  # (3,) world
    skew_omega: np.ndarray  # (3, 3) [w_cam]x
    rotation_rate: np.ndarray  # (3, 3) d camera_R_world / dt = -[w_cam]x camera_R_world
    horizontal: bool
    factor_s: float
    pose_offset_s: float  # pose_time - t(principal point)


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _motion(camera: PinholeCamera, world_SE3_ego: SE3, ego_SE3_camera: SE3, capture: RollingShutterCapture) -> _Motion:
    world_R_ego, ego_R_camera = np.asarray(world_SE3_ego.rotation), np.asarray(ego_SE3_camera.rotation)
    world_R_camera = world_R_ego @ ego_R_camera
    world_t_camera = world_R_ego @ np.asarray(ego_SE3_camera.translation) + np.asarray(world_SE3_ego.translation)
    omega_ego = np.asarray(capture.angular_velocity_radps)
    lever_m = world_R_ego @ np.asarray(ego_SE3_camera.translation)
    camera_velocity = np.asarray(capture.velocity_mps) + np.cross(world_R_ego @ omega_ego, lever_m)
    skew_omega = _skew(ego_R_camera.T @ omega_ego)
    horizontal = capture.readout in ("LEFT_TO_RIGHT", "RIGHT_TO_LEFT")
    w, h = camera.width_px, camera.height_px
    edges = np.array([[0.0, 0.5 * h], [w, 0.5 * h]]) if horizontal else np.array([[0.5 * w, 0.0], [0.5 * w, h]])
    normalized = undistort_normalized(camera, edges)[:, 0 if horizontal else 1]
    factor = capture.readout_s / (normalized[1] - normalized[0])
    if capture.readout in ("RIGHT_TO_LEFT", "BOTTOM_TO_TOP"):
        factor = -factor
    t_principal = float(pixel_time_s(capture, w, h, np.array([[camera.cx_px, camera.cy_px]]))[0])
    return _Motion(world_R_camera.T, world_t_camera, camera_velocity, skew_omega, -skew_omega @ world_R_camera.T,
                   horizontal, float(factor), capture.pose_time_s - t_principal)  # fmt: skip


def _camera_points(m: _Motion, points_m: np.ndarray, velocity_mps: np.ndarray, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Camera-frame points (N, 3) at times t (s from the pose), and the (N, 3, 3) rotations used."""
    camera_R_world = m.camera_R_world[None] + t_s[:, None, None] * m.rotation_rate[None]
    camera_position = m.world_t_camera[None] + t_s[:, None] * m.camera_velocity_mps[None]
    offset = points_m + t_s[:, None] * velocity_mps - camera_position
    return np.einsum("nij,nj->ni", camera_R_world, offset), camera_R_world


def _solve_times(m: _Motion, points_m: np.ndarray, velocity_mps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Newton solve of the capture time per point: times (N,) and a (N,) failure mask."""
    n = len(points_m)
    t_s, residual = np.zeros(n), np.full(n, 2.0 * RESIDUAL_THRESHOLD_S)
    active, failed = np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
    axis = 0 if m.horizontal else 1
    for _ in range(MAX_NEWTON_STEPS):
        if not active.any():
            break
        p, camera_R_world = _camera_points(m, points_m, velocity_mps, t_s)
        failed |= active & ~(p[:, 2] > 0)
        active &= ~failed
        with np.errstate(divide="ignore", invalid="ignore"):
            s = p[:, axis] / p[:, 2]
            rate = np.einsum("nij,nj->ni", camera_R_world, velocity_mps - m.camera_velocity_mps) - p @ m.skew_omega.T
            jacobian = 1.0 - m.factor_s / p[:, 2] * (s * rate[:, 2] + rate[:, axis])
            r = t_s - s * m.factor_s + m.pose_offset_s
            residual = np.where(active, r, residual)
            t_s = np.where(active, t_s - r / jacobian, t_s)
        active &= np.abs(residual) > RESIDUAL_THRESHOLD_S
    return t_s, failed | (np.abs(residual) > MAX_FINAL_RESIDUAL_S)


def project_points(
    points_world_m: np.ndarray,
    camera: PinholeCamera,
    world_SE3_ego: SE3,
    ego_SE3_camera: SE3,
    capture: RollingShutterCapture,
    points_velocity_mps: np.ndarray | None = None,
) -> ShutterProjection:
    """Project world points as Waymo's camera model does (rolling, or global for GLOBAL_SHUTTER).

    Args:
        points_world_m: (N, 3) world points.
        camera: the pinhole camera with Waymo's intrinsics (f_u, f_v, c_u, c_v, k1, k2, p1, p2, k3).
        world_SE3_ego: the ego pose at ``capture.pose_time_s`` (Waymo's image ``pose``).
        ego_SE3_camera: the RDF camera mount (Waymo's extrinsic with the axes turned to RDF).
        capture: the image's timing and ego velocity.
        points_velocity_mps: (N, 3) world velocities of the points (default: static).

    Returns:
        `ShutterProjection` with arrays of N rows.

    Raises:
        AvsimValueError: the readout is UNKNOWN (Waymo's model aborts on it) or shapes are wrong.
    """
    points = np.asarray(points_world_m, dtype=np.float64).reshape(-1, 3)
    velocity = np.zeros_like(points) if points_velocity_mps is None else np.asarray(points_velocity_mps, dtype=np.float64)
    check_shape(velocity, points.shape, "points_velocity_mps")
    if np.shape(world_SE3_ego.rotation) != (3, 3) or np.shape(ego_SE3_camera.rotation) != (3, 3):
        raise AvsimValueError("world_SE3_ego, ego_SE3_camera: expected single (unbatched) transforms")
    if capture.readout == "UNKNOWN":
        raise AvsimValueError("readout UNKNOWN: Waymo's camera model aborts on it; project with a global shutter")
    if capture.is_rolling:
        m = _motion(camera, world_SE3_ego, ego_SE3_camera, capture)
        t_s, failed = _solve_times(m, points, velocity)
        p, _ = _camera_points(m, points, velocity, t_s)
    else:
        t_s, failed = np.zeros(len(points)), np.zeros(len(points), dtype=bool)
        world_SE3_camera = world_SE3_ego.compose(ego_SE3_camera)
        p = (points - np.asarray(world_SE3_camera.translation)) @ np.asarray(world_SE3_camera.rotation)
    failed |= ~(p[:, 2] > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        uv, lens_ok = _distort_checked(camera, p[:, 0] / p[:, 2], p[:, 1] / p[:, 2])
    uv[failed] = np.nan
    depth = np.where(failed, np.nan, p[:, 2])
    return ShutterProjection(uv, depth, ~failed & lens_ok, t_s)
