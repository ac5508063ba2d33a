"""Camera rigs: named cameras with their sensor-to-ego extrinsics.

`ego_SE3_camera` maps camera-frame (RDF) points into the ego frame (FLU, origin at the rear
axle on the ground). Default rigs are approximate mountings for datasets whose files carry no
calibration; importers attach the real calibration whenever the data has it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from avsim.core.cameras import Camera, FThetaCamera, PinholeCamera
from avsim.core.errors import AvsimValueError
from avsim.core.names import require_name
from avsim.core.shapes import check_shape
from avsim.core.trajectory import NS_PER_S, EgoTrajectory
from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayInt

MAX_CAPTURE_OFFSET_NS = NS_PER_S  # |capture time - frame time| of any camera, at most 1 s

# The seven views of the multi-view model, in model (view-embedding) index order.
COSMOS_VIEW_NAMES: tuple[str, ...] = (
    "camera_front_wide_120fov",
    "camera_cross_right_120fov",
    "camera_rear_right_70fov",
    "camera_rear_tele_30fov",
    "camera_rear_left_70fov",
    "camera_cross_left_120fov",
    "camera_front_tele_30fov",
)

# camera RDF axes expressed in ego FLU for a camera looking along ego +x
_EGO_R_CAMERA_FORWARD = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


def camera_mount(
    x_m: float, y_m: float, z_m: float, yaw_rad: float, pitch_down_rad: float = 0.0, roll_rad: float = 0.0
) -> SE3:
    """ego_SE3_camera for a camera at (x, y, z) in the ego frame looking along `yaw_rad`.

    Yaw is about ego +z (0 = forward, +pi/2 = left); pitch tilts the optical axis down.

    Args:
        x_m: forward position in the ego frame (m).
        y_m: left position (m).
        z_m: height (m).
        yaw_rad: viewing direction about ego +z.
        pitch_down_rad: downward tilt of the optical axis.
        roll_rad: roll about the optical axis.

    Returns:
        Unbatched SE3 (rotation (3, 3), translation (3,)) from camera to ego frame.
    """
    cy, sy = np.cos(yaw_rad), np.sin(yaw_rad)
    ego_R_yaw = np.array([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]])
    # pitch about the camera x axis (right): positive tilts +z (optical axis) towards +y (down)
    cp, sp = np.cos(pitch_down_rad), np.sin(pitch_down_rad)
    cam_R_pitch = np.array([[1.0, 0.0, 0.0], [0.0, cp, sp], [0.0, -sp, cp]])
    cr, sr = np.cos(roll_rad), np.sin(roll_rad)
    cam_R_roll = np.array([[cr, -sr, 0.0], [sr, cr, 0.0], [0.0, 0.0, 1.0]])
    rotation = ego_R_yaw @ _EGO_R_CAMERA_FORWARD @ cam_R_pitch @ cam_R_roll
    return SE3(rotation, np.array([x_m, y_m, z_m], dtype=np.float64))


@dataclass(frozen=True, eq=False)
class CameraRig:
    """Named cameras; `ego_SE3_camera` has batch shape (V,) in the order of `names`.

    `capture_offset_ns` (V,) int64 is each camera's capture time minus the frame time (ns):
    camera i images the world at `t + capture_offset_ns[i]` (e.g. nuScenes cameras fire as
    the lidar sweeps past them). All zeros (the default) = every camera at the frame time.
    """

    names: tuple[str, ...]
    cameras: tuple[Camera, ...]
    ego_SE3_camera: SE3
    capture_offset_ns: NDArrayInt = field(default=None, kw_only=True)  # type: ignore[arg-type]  # None -> zeros

    def __post_init__(self) -> None:
        names = tuple(str(n) for n in self.names)
        cameras = tuple(self.cameras)
        if not names:
            raise AvsimValueError("rig.names: a rig needs at least one camera")
        for k, name in enumerate(names):  # camera names become file names (OUT/<clip>/<clip>.<camera>.mp4)
            require_name(name, f"rig.names[{k}]")
        if len(set(names)) != len(names):
            raise AvsimValueError(f"rig.names: duplicate camera names in {names}")
        if len(cameras) != len(names):
            raise AvsimValueError(f"rig.cameras: {len(cameras)} cameras for {len(names)} names")
        if self.ego_SE3_camera.batch_shape != (len(names),):
            raise AvsimValueError(
                f"rig.ego_SE3_camera: expected batch shape ({len(names)},), got {self.ego_SE3_camera.batch_shape}"
            )
        for name, cam in zip(names, cameras):
            if not isinstance(cam, (PinholeCamera, FThetaCamera)):
                raise AvsimValueError(f"rig.cameras[{name}]: not a camera model: {type(cam).__name__}")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "cameras", cameras)
        object.__setattr__(self, "capture_offset_ns", _check_capture_offsets(self.capture_offset_ns, len(names)))

    @property
    def has_capture_offsets(self) -> bool:
        """Whether any camera fires away from the frame time (some offset is non-zero)."""
        return bool(np.any(self.capture_offset_ns))

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """Position of camera `name` in `names`.

        Args:
            name: camera name.

        Returns:
            Its index into `names`, `cameras` and `ego_SE3_camera`.

        Raises:
            AvsimValueError: no camera has that name.
        """
        try:
            return self.names.index(name)
        except ValueError:
            raise AvsimValueError(f"rig: no camera named {name!r}; cameras are {', '.join(self.names)}") from None

    def camera(self, name: str) -> Camera:
        """The intrinsics of camera `name`.

        Args:
            name: camera name.

        Returns:
            Its camera model.
        """
        return self.cameras[self.index(name)]

    def extrinsic(self, name: str) -> SE3:
        """The mounting (ego_SE3_camera) of camera `name`.

        Args:
            name: camera name.

        Returns:
            Unbatched SE3 from camera to ego frame.
        """
        return self.ego_SE3_camera[self.index(name)]

    def subset(self, names: list[str] | tuple[str, ...]) -> CameraRig:
        """The named cameras only, in the order given.

        Args:
            names: camera names.

        Returns:
            CameraRig with those cameras.
        """
        idx = [self.index(n) for n in names]
        offsets = self.capture_offset_ns[idx]
        return CameraRig(
            tuple(self.names[i] for i in idx), tuple(self.cameras[i] for i in idx), self.ego_SE3_camera[idx],
            capture_offset_ns=offsets,
        )

    def resize(self, width_px: int, height_px: int) -> CameraRig:
        """Every camera re-imaged at `width_px` x `height_px` (same lens, same mounting).

        Args:
            width_px: new image width.
            height_px: new image height.

        Returns:
            CameraRig with the resized cameras.
        """
        cameras = tuple(c.resize(width_px, height_px) for c in self.cameras)
        return CameraRig(self.names, cameras, self.ego_SE3_camera, capture_offset_ns=self.capture_offset_ns)

    def resize_each(self, sizes_px: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> CameraRig:
        """Each camera re-imaged at its own size (same lens, same mounting).

        Args:
            sizes_px: (width, height) of each camera, in rig order.

        Returns:
            CameraRig with the resized cameras.
        """
        if len(sizes_px) != len(self.cameras):
            raise AvsimValueError(f"sizes_px: expected {len(self.cameras)} (width, height) pairs, got {len(sizes_px)}")
        cameras = tuple(c.resize(int(w), int(h)) for c, (w, h) in zip(self.cameras, sizes_px))
        return CameraRig(self.names, cameras, self.ego_SE3_camera, capture_offset_ns=self.capture_offset_ns)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CameraRig):
            return NotImplemented
        return (
            self.names == other.names
            and self.cameras == other.cameras
            and np.array_equal(self.ego_SE3_camera.as_matrix(), other.ego_SE3_camera.as_matrix())
            and np.array_equal(self.capture_offset_ns, other.capture_offset_ns)
        )


def _check_capture_offsets(offsets: Any, n_cameras: int) -> NDArrayInt:
    """(V,) read-only int64 capture offsets (zeros for None), or AvsimValueError naming the field."""
    if offsets is None:
        out = np.zeros(n_cameras, np.int64)
    else:
        arr = np.asarray(offsets)
        check_shape(arr, (n_cameras,), "rig.capture_offset_ns")
        if arr.size and not (np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_):
            raise AvsimValueError(f"rig.capture_offset_ns: expected integer nanoseconds, got {arr.dtype}")
        if np.issubdtype(arr.dtype, np.unsignedinteger) and np.any(arr > MAX_CAPTURE_OFFSET_NS):
            raise AvsimValueError(f"rig.capture_offset_ns: |offset| must be <= {MAX_CAPTURE_OFFSET_NS} ns (1 s)")
        out = arr.astype(np.int64)
        bad = np.flatnonzero(np.abs(out) > MAX_CAPTURE_OFFSET_NS)
        if bad.size:
            raise AvsimValueError(
                f"rig.capture_offset_ns: |offset| must be <= {MAX_CAPTURE_OFFSET_NS} ns (1 s), got {out[bad[0]]} at camera {bad[0]}"
            )
    out = out.copy()
    out.setflags(write=False)
    return out


def capture_times_ns(rig: CameraRig, timestamp_ns: int) -> NDArrayInt:
    """When each camera of the rig images frame time `timestamp_ns`.

    Args:
        rig: the camera rig (its `capture_offset_ns`).
        timestamp_ns: the frame time (ns).

    Returns:
        (V,) int64 capture times, `timestamp_ns + capture_offset_ns`.
    """
    return np.int64(timestamp_ns) + rig.capture_offset_ns


def world_SE3_camera_at(scenario_or_ego: Any, rig: CameraRig, timestamp_ns: int, camera_index: int | None = None) -> SE3:
    """Camera poses in the world frame at frame time `timestamp_ns`, each camera at its own capture time.

    Camera i sits at `ego.pose_at(t + capture_offset_ns[i]) . ego_SE3_camera[i]` (the ego pose
    interpolated, or extrapolated outside the trajectory, exactly as `EgoTrajectory.pose_at`).
    With all-zero offsets this is the single ego pose at t composed with each mounting.

    Args:
        scenario_or_ego: an EgoTrajectory, or anything with one as `.ego` (a Scenario).
        rig: the camera rig.
        timestamp_ns: the frame time (ns).
        camera_index: one camera (index into the rig); None for all.

    Returns:
        SE3 camera -> world: batch shape (V,) for all cameras, unbatched for one.
    """
    ego = scenario_or_ego if isinstance(scenario_or_ego, EgoTrajectory) else scenario_or_ego.ego
    indices = range(len(rig)) if camera_index is None else [int(camera_index)]
    if rig.has_capture_offsets:
        offsets = rig.capture_offset_ns[list(indices)]
        world_SE3_ego = ego.pose_at(np.int64(timestamp_ns) + offsets)
        poses = [world_SE3_ego[k].compose(rig.ego_SE3_camera[i]) for k, i in enumerate(indices)]
    else:  # one ego pose for every camera: the frame-time path
        pose = ego.pose_at(np.array([timestamp_ns], np.int64))[0]
        poses = [pose.compose(rig.ego_SE3_camera[i]) for i in indices]
    return poses[0] if camera_index is not None else SE3.stack(poses)


def _rig(entries: list[tuple[str, Camera, SE3]]) -> CameraRig:
    return CameraRig(tuple(e[0] for e in entries), tuple(e[1] for e in entries), SE3.stack([e[2] for e in entries]))


def _ftheta_for_fov(hfov_deg: float, width_px: int, height_px: int) -> FThetaCamera:
    """An f-theta lens whose horizontal field of view is `hfov_deg` at this image size.

    Wide lenses store a backward polynomial (r -> theta), narrow ones a forward one, as the
    public default intrinsics do; a mild cubic term gives the usual fisheye compression.
    """
    half_w = width_px / 2.0
    half_fov = np.radians(hfov_deg) / 2.0
    if hfov_deg >= 100:
        k3 = 0.06 * half_fov / half_w**3  # theta grows slightly faster than r near the edge
        k1 = (half_fov - k3 * half_w**3) / half_w
        return FThetaCamera(width_px, height_px, half_w, height_px / 2.0, (0.0, k1, 0.0, k3, 0.0, 0.0), True)
    f3 = -0.05 * half_w / half_fov**3
    f1 = (half_w - f3 * half_fov**3) / half_fov
    return FThetaCamera(width_px, height_px, half_w, height_px / 2.0, (0.0, f1, 0.0, f3, 0.0, 0.0), False)


def cosmos_rig(width_px: int = 1280, height_px: int = 720) -> CameraRig:
    """The 7-camera rig of the multi-view model (names and fields of view from the render spec).

    Lenses are f-theta with the default 120/70/30 degree horizontal fields of view; mountings
    are plausible positions on a mid-size car (roof-front cluster, side mirrors, rear).

    Args:
        width_px: image width of every camera.
        height_px: image height of every camera.

    Returns:
        CameraRig of 7 f-theta cameras.
    """
    deg = np.radians
    mounts = {
        "camera_front_wide_120fov": (120, camera_mount(1.75, 0.0, 1.55, 0.0, deg(3))),
        "camera_cross_right_120fov": (120, camera_mount(2.05, -0.95, 1.05, deg(-70), deg(4))),
        "camera_rear_right_70fov": (70, camera_mount(1.95, -0.95, 1.10, deg(-140), deg(4))),
        "camera_rear_tele_30fov": (30, camera_mount(-0.85, 0.0, 1.50, np.pi, deg(2))),
        "camera_rear_left_70fov": (70, camera_mount(1.95, 0.95, 1.10, deg(140), deg(4))),
        "camera_cross_left_120fov": (120, camera_mount(2.05, 0.95, 1.05, deg(70), deg(4))),
        "camera_front_tele_30fov": (30, camera_mount(1.75, 0.0, 1.55, 0.0, deg(1))),
    }
    return _rig([(n, _ftheta_for_fov(mounts[n][0], width_px, height_px), mounts[n][1]) for n in COSMOS_VIEW_NAMES])


def _pinhole_for_fov(hfov_deg: float, width_px: int, height_px: int) -> PinholeCamera:
    f = (width_px / 2.0) / np.tan(np.radians(hfov_deg) / 2.0)
    return PinholeCamera(width_px, height_px, f, f, width_px / 2.0, height_px / 2.0)


def nuscenes_rig() -> CameraRig:
    """Approximate nuScenes 6-camera rig (1600x900; front cameras ~70 deg, back ~110 deg).

    Returns:
        CameraRig of 6 pinhole cameras.
    """
    deg = np.radians
    spec = [
        ("CAM_FRONT", 64.5, camera_mount(1.70, 0.0, 1.51, 0.0)),
        ("CAM_FRONT_RIGHT", 64.5, camera_mount(1.55, -0.49, 1.50, deg(-55))),
        ("CAM_BACK_RIGHT", 64.5, camera_mount(1.05, -0.48, 1.56, deg(-110))),
        ("CAM_BACK", 109.0, camera_mount(0.05, 0.0, 1.57, np.pi)),
        ("CAM_BACK_LEFT", 64.5, camera_mount(1.05, 0.48, 1.56, deg(110))),
        ("CAM_FRONT_LEFT", 64.5, camera_mount(1.52, 0.49, 1.51, deg(55))),
    ]
    return _rig([(n, _pinhole_for_fov(f, 1600, 900), m) for n, f, m in spec])


def av2_rig() -> CameraRig:
    """Approximate Argoverse 2 ring rig (7 cameras; the front centre camera is portrait).

    Returns:
        CameraRig of 7 pinhole cameras.
    """
    deg = np.radians
    spec = [
        ("ring_front_center", 1550, 2048, 47.0, camera_mount(1.63, 0.0, 1.42, 0.0)),
        ("ring_front_left", 2048, 1550, 60.0, camera_mount(1.55, 0.25, 1.42, deg(45))),
        ("ring_front_right", 2048, 1550, 60.0, camera_mount(1.55, -0.25, 1.42, deg(-45))),
        ("ring_side_left", 2048, 1550, 60.0, camera_mount(0.95, 0.45, 1.42, deg(100))),
        ("ring_side_right", 2048, 1550, 60.0, camera_mount(0.95, -0.45, 1.42, deg(-100))),
        ("ring_rear_left", 2048, 1550, 60.0, camera_mount(-0.15, 0.35, 1.42, deg(150))),
        ("ring_rear_right", 2048, 1550, 60.0, camera_mount(-0.15, -0.35, 1.42, deg(-150))),
    ]
    return _rig([(n, _pinhole_for_fov(f, w, h), m) for n, w, h, f, m in spec])


def waymo_rig() -> CameraRig:
    """Approximate Waymo Open 5-camera rig (front three 1920x1280, sides 1920x886).

    Returns:
        CameraRig of 5 pinhole cameras.
    """
    deg = np.radians
    spec = [
        ("FRONT", 1920, 1280, 50.4, camera_mount(1.54, 0.0, 2.12, 0.0)),
        ("FRONT_LEFT", 1920, 1280, 50.4, camera_mount(1.50, 0.10, 2.12, deg(45))),
        ("FRONT_RIGHT", 1920, 1280, 50.4, camera_mount(1.50, -0.10, 2.12, deg(-45))),
        ("SIDE_LEFT", 1920, 886, 50.4, camera_mount(1.43, 0.10, 2.12, deg(90))),
        ("SIDE_RIGHT", 1920, 886, 50.4, camera_mount(1.43, -0.10, 2.12, deg(-90))),
    ]
    return _rig([(n, _pinhole_for_fov(f, w, h), m) for n, w, h, f, m in spec])


NAMED_RIGS = {"cosmos": cosmos_rig, "nuscenes": nuscenes_rig, "av2": av2_rig, "waymo": waymo_rig}


def named_rig(name: str) -> CameraRig:
    """A default rig by name: cosmos, nuscenes, av2 or waymo.

    Args:
        name: one of `NAMED_RIGS`.

    Returns:
        That rig.
    """
    try:
        return NAMED_RIGS[name]()
    except KeyError:
        raise AvsimValueError(f"rig: unknown rig {name!r}; choose one of {', '.join(NAMED_RIGS)}") from None
