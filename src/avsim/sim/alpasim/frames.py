"""avsim's frames, times and cameras in AlpaSim's wire terms, and back.

Frames (AlpaSim's CONTRIBUTING.md, "Coordinate Systems"):

- AlpaSim's *rig* frame is avsim's ego frame: x forward, y left, z up, origin at the rear axle
  on the ground;
- its *local* frame is a fixed frame per scene. avsim's is the scenario's world frame moved to
  an origin near the scene (`LocalFrame`: the ego's first position rounded to whole metres), so
  that AlpaSim's float32 poses keep centimetres and better (a converted log's world coordinates
  can be 10^5 m, where float32 steps are 1 cm); world = local + origin, exactly;
- poses are active transforms: a `Pose` local->rig is where the rig sits in the local frame,
  i.e. avsim's `world_SE3_ego` in the local frame; rig->camera is avsim's `ego_SE3_camera`
  (camera axes x right, y down, z forward, the RDF convention of both);
- quaternions are (w, x, y, z); times are integer microseconds (`fixed64`): avsim's nanoseconds
  floor-divided by 1000 (a scenario before time 0 cannot be served).

Cameras: avsim's f-theta and OpenCV pinhole models map one to one onto `CameraSpec`'s
`ftheta_param` and `opencv_pinhole_param` (k1, k2, k3 radial, p1, p2 tangential; a spec with
k4..k6 or thin-prism terms is refused: avsim's pinhole has none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from avsim.core.cameras import Camera, FThetaCamera, PinholeCamera
from avsim.core.errors import AvsimValueError
from avsim.core.rig import CameraRig
from avsim.core.transforms import SE3, matrix_to_quat, quat_to_matrix
from avsim.core.typing import NDArrayFloat
from avsim.scenario import Scenario
from avsim.sim.alpasim.protos import common_pb2, sensorsim_pb2

__all__ = ["LocalFrame", "camera_from_spec", "camera_spec", "ns_to_us", "pose_from_proto", "pose_to_proto", "rig_cameras", "us_to_ns"]

NS_PER_US = 1000
MAX_POLY_TERMS = 16  # longer f-theta polynomials are refused before they are read


class SpecError(AvsimValueError):
    """A request's camera or pose cannot be used; `str()` says which field and why."""


@dataclass(frozen=True)
class LocalFrame:
    """AlpaSim's local frame of a scenario: world = local + origin_m (see the module docstring)."""

    origin_m: NDArrayFloat

    @classmethod
    def of(cls, scenario: Scenario) -> LocalFrame:
        """The scenario's local frame: its ego's first position rounded to whole metres."""
        first = scenario.ego.pose_at(np.array([scenario.start_ns])).translation[0]
        return cls(np.asarray(np.round(np.asarray(first, np.float64)), np.float64))

    def to_local(self, world: SE3) -> SE3:
        """A world pose in the local frame."""
        return SE3(world.rotation, world.translation - self.origin_m)

    def to_world(self, local: SE3) -> SE3:
        """A local pose in the world frame."""
        return SE3(local.rotation, local.translation + self.origin_m)


def ns_to_us(t_ns: int) -> int:
    """Nanoseconds -> AlpaSim's microseconds (floor; refused below 0: `fixed64` is unsigned)."""
    if t_ns < 0:
        raise AvsimValueError(f"time: AlpaSim's microsecond clock starts at 0, got {t_ns} ns")
    return int(t_ns) // NS_PER_US


def us_to_ns(t_us: int) -> int:
    """AlpaSim's microseconds -> nanoseconds."""
    return int(t_us) * NS_PER_US


def pose_to_proto(pose: SE3) -> common_pb2.Pose:
    """An unbatched SE3 as a `common.Pose` (float32 on the wire)."""
    q = matrix_to_quat(pose.rotation)
    t = pose.translation
    return common_pb2.Pose(vec=common_pb2.Vec3(x=float(t[0]), y=float(t[1]), z=float(t[2])),
                           quat=common_pb2.Quat(w=float(q[0]), x=float(q[1]), y=float(q[2]), z=float(q[3])))  # fmt: skip


def pose_from_proto(pose: common_pb2.Pose, field: str = "pose") -> SE3:
    """A `common.Pose` as an SE3 (its quaternion normalised); SpecError when it is not finite or zero."""
    q = np.array([pose.quat.w, pose.quat.x, pose.quat.y, pose.quat.z], np.float64)
    t = np.array([pose.vec.x, pose.vec.y, pose.vec.z], np.float64)
    norm = float(np.linalg.norm(q))
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(t)) and norm > 1e-6):
        raise SpecError(f"{field}: expected a finite translation and a non-zero quaternion")
    return SE3(quat_to_matrix(q / norm), t)


def camera_spec(name: str, camera: Camera) -> sensorsim_pb2.CameraSpec:
    """avsim's camera as a `CameraSpec` (global shutter: avsim's rigs have none other).

    Args:
        name: the logical id.
        camera: an f-theta or pinhole camera.

    Returns:
        The spec at the camera's resolution.
    """
    spec = sensorsim_pb2.CameraSpec(logical_id=name, resolution_h=camera.height_px, resolution_w=camera.width_px,
                                    shutter_type=sensorsim_pb2.ShutterType.GLOBAL)  # fmt: skip
    if isinstance(camera, FThetaCamera):
        p = spec.ftheta_param
        p.principal_point_x, p.principal_point_y = camera.cx_px, camera.cy_px
        kind = sensorsim_pb2.FthetaCameraParam.PolynomialType
        p.reference_poly = kind.PIXELDIST_TO_ANGLE if camera.is_backward_poly else kind.ANGLE_TO_PIXELDIST
        p.pixeldist_to_angle_poly.extend(camera.poly if camera.is_backward_poly else camera.backward_poly.tolist())
        p.angle_to_pixeldist_poly.extend(camera.forward_poly.tolist() if camera.is_backward_poly else camera.poly)
        p.max_angle = camera.max_theta_rad
        p.linear_cde.linear_c, p.linear_cde.linear_d, p.linear_cde.linear_e = camera.linear_cde
        return spec
    assert isinstance(camera, PinholeCamera)
    k1, k2, p1, p2, k3 = camera.distortion
    q = spec.opencv_pinhole_param
    q.principal_point_x, q.principal_point_y, q.focal_length_x, q.focal_length_y = camera.cx_px, camera.cy_px, camera.fx_px, camera.fy_px
    q.radial_coeffs.extend([k1, k2, k3, 0.0, 0.0, 0.0])
    q.tangential_coeffs.extend([p1, p2])
    q.thin_prism_coeffs.extend([0.0, 0.0, 0.0, 0.0])
    return spec


def _coeffs(values: list[float], field: str, keep: int) -> tuple[float, ...]:
    """The first `keep` coefficients (zero-padded); SpecError when more are non-zero or any is not finite."""
    if len(values) > MAX_POLY_TERMS:
        raise SpecError(f"{field}: at most {MAX_POLY_TERMS} coefficients, got {len(values)}")
    arr = np.asarray(values, np.float64)
    if not np.all(np.isfinite(arr)):
        raise SpecError(f"{field}: coefficients must be finite")
    if np.any(arr[keep:] != 0.0):
        raise SpecError(f"{field}: avsim's camera model takes {keep} coefficients; terms past them must be 0")
    return tuple(np.r_[arr[:keep], np.zeros(max(keep - len(arr), 0))].tolist())


def camera_from_spec(spec: sensorsim_pb2.CameraSpec, width_px: int, height_px: int) -> Camera:
    """The camera a spec describes, imaged at `width_px` x `height_px` (intrinsics scaled from the
    spec's resolution as `avsim render --size` scales a rig's, when the two differ).

    Args:
        spec: the request's camera.
        width_px: the image width wanted.
        height_px: the image height wanted.

    Returns:
        An f-theta or pinhole camera.

    Raises:
        SpecError: a model avsim does not have (OpenCV fisheye, a windshield model) or bad values.
    """
    native_w, native_h = (spec.resolution_w or width_px), (spec.resolution_h or height_px)
    which = spec.WhichOneof("camera_param")
    try:
        if which == "ftheta_param":
            camera: Camera = _ftheta(spec.ftheta_param, native_w, native_h)
        elif which == "opencv_pinhole_param":
            p = spec.opencv_pinhole_param
            k1, k2, k3 = _coeffs(list(p.radial_coeffs), "opencv_pinhole_param.radial_coeffs", 3)
            p1, p2 = _coeffs(list(p.tangential_coeffs), "opencv_pinhole_param.tangential_coeffs", 2)
            _coeffs(list(p.thin_prism_coeffs), "opencv_pinhole_param.thin_prism_coeffs", 0)
            camera = PinholeCamera(native_w, native_h, p.focal_length_x, p.focal_length_y, p.principal_point_x, p.principal_point_y,
                                   (k1, k2, p1, p2, k3))  # fmt: skip
        else:
            raise SpecError(f"camera_intrinsics: {which or 'no camera model'} is not supported (f-theta and OpenCV pinhole are)")
        if spec.WhichOneof("external_distortion") is not None:
            raise SpecError("camera_intrinsics.external_distortion: a windshield model is not supported")
    except SpecError:
        raise
    except AvsimValueError as exc:
        raise SpecError(f"camera_intrinsics: {exc}") from None
    return camera if (native_w, native_h) == (width_px, height_px) else camera.resize(width_px, height_px)


def _ftheta(p: sensorsim_pb2.FthetaCameraParam, width_px: int, height_px: int) -> FThetaCamera:
    kind = sensorsim_pb2.FthetaCameraParam.PolynomialType
    backward = p.reference_poly != kind.ANGLE_TO_PIXELDIST
    if p.reference_poly == kind.UNKNOWN:  # no reference named: the one given
        backward = len(p.pixeldist_to_angle_poly) > 0
    field = "ftheta_param.pixeldist_to_angle_poly" if backward else "ftheta_param.angle_to_pixeldist_poly"
    poly = _coeffs(list(p.pixeldist_to_angle_poly if backward else p.angle_to_pixeldist_poly), field, 6)
    cde = (p.linear_cde.linear_c, p.linear_cde.linear_d, p.linear_cde.linear_e) if p.HasField("linear_cde") else (1.0, 0.0, 0.0)
    return FThetaCamera(width_px, height_px, p.principal_point_x, p.principal_point_y, poly, backward, cde)


def rig_cameras(rig: CameraRig) -> list[sensorsim_pb2.AvailableCamerasReturn.AvailableCamera]:
    """Every camera of a rig as AlpaSim's `AvailableCamera` (spec and rig->camera pose)."""
    return [sensorsim_pb2.AvailableCamerasReturn.AvailableCamera(intrinsics=camera_spec(name, cam), rig_to_camera=pose_to_proto(rig.ego_SE3_camera[i]),
                                                                logical_id=name)
            for i, (name, cam) in enumerate(zip(rig.names, rig.cameras))]  # fmt: skip
