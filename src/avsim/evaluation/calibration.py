"""Camera calibration for calibrated Sampson errors: from an avsim scenario or a small JSON file.

A `SampsonCalibration` holds, per camera, its intrinsics (any `avsim.core.cameras` model) and
its mounting `ego_SE3_camera` (4x4, camera RDF -> ego FLU), and, for the temporal error, the
pose of every video frame: `world_SE3_ego` (T, 4, 4) shared by the rig, or a camera's own
`world_SE3_camera` (T, 4, 4). Frame 0 of the poses is frame 0 of the videos.

JSON format (`format` optional; unknown keys are errors; every matrix is nested lists):

    {"format": "avsim-sampson-calibration",
     "cameras": {"front": {"K": [[fx, 0, cx], [0, fy, cy], [0, 0, 1]], "width_px": 1280, "height_px": 720,
                           "ego_SE3_camera": [[...4 rows of 4...]]},
                 "right": {"camera": {"model": "ftheta", ...}, "ego_SE3_camera": [[...]]}},
     "world_SE3_ego": [[[...4x4...]], ...]}

A camera gives either `K` with `width_px`/`height_px` (an undistorted pinhole) or `camera`, a
camera dict as a scenario stores it (`Camera.to_dict()`), and optionally its own
`world_SE3_camera` list instead of the shared `world_SE3_ego`. Intrinsics are for the size
they name; they are rescaled to the clip's frame size as `avsim render --size` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.cameras import Camera, PinholeCamera, camera_from_dict
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.safe_json import read_json

CALIBRATION_FORMAT = "avsim-sampson-calibration"
TOP_KEYS = frozenset({"format", "cameras", "world_SE3_ego"})
CAMERA_KEYS = frozenset({"K", "width_px", "height_px", "camera", "ego_SE3_camera", "world_SE3_camera"})
ROTATION_TOL = 1e-6


@dataclass(frozen=True, eq=False)
class SampsonCalibration:
    """Intrinsics, rig extrinsics and per-frame poses of the cameras of a clip."""

    source: str  # "scenario DIR" or "FILE", as the output document names the F source
    path: Path  # the file or folder errors name
    cameras: dict[str, Camera]
    ego_SE3_camera: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (4, 4)
    world_SE3_ego: np.ndarray | None = None  # (T, 4, 4) per video frame
    world_SE3_camera: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (T, 4, 4)

    @property
    def names(self) -> tuple[str, ...]:
        """Camera names."""
        return tuple(self.cameras)

    def check_name(self, name: str, option: str) -> None:
        """Raise AvsimInputError (naming `option`) when the calibration has no camera `name`.

        Args:
            name: camera name.
            option: the command-line option that named it.
        """
        if name not in self.cameras:
            raise AvsimInputError(self.path, option, f"no camera {name!r} in the calibration; cameras are {', '.join(self.names)}")

    def camera(self, name: str, width_px: int, height_px: int, option: str = "--camera") -> Camera:
        """The intrinsics of camera `name` rescaled to a clip of `width_px` x `height_px`.

        Args:
            name: camera name.
            width_px: frame width of the clip.
            height_px: frame height of the clip.
            option: the command-line option that named the camera (for the error).

        Returns:
            The camera model at the clip's resolution.
        """
        self.check_name(name, option)
        cam = self.cameras[name]
        return cam if (cam.width_px, cam.height_px) == (width_px, height_px) else cam.resize(width_px, height_px)

    def rig_pose(self, name_a: str, name_b: str) -> np.ndarray:
        """a_SE3_b (4, 4): camera b's frame in camera a's (from the rig extrinsics).

        Args:
            name_a: first camera.
            name_b: second camera.

        Returns:
            (4, 4) rigid transform.
        """
        for n in (name_a, name_b):
            if n not in self.ego_SE3_camera:
                raise AvsimInputError(self.path, f"cameras.{n}.ego_SE3_camera", "missing (the cross-camera error needs the rig extrinsics)")
        return np.linalg.inv(self.ego_SE3_camera[name_a]) @ self.ego_SE3_camera[name_b]

    def camera_poses(self, name: str) -> np.ndarray:
        """world_SE3_camera (T, 4, 4) of camera `name` at every video frame.

        Args:
            name: camera name.

        Returns:
            (T, 4, 4) poses: the camera's own, else world_SE3_ego composed with its mounting.
        """
        if name in self.world_SE3_camera:
            return self.world_SE3_camera[name]
        if self.world_SE3_ego is None:
            raise AvsimInputError(self.path, "world_SE3_ego", "missing (the temporal error needs a pose per frame)")
        if name not in self.ego_SE3_camera:
            raise AvsimInputError(self.path, f"cameras.{name}.ego_SE3_camera", "missing (needed with world_SE3_ego)")
        return self.world_SE3_ego @ self.ego_SE3_camera[name]


# --------------------------------------------------------------------------- scenario


def calibration_from_scenario(folder: Path, fps: float, start_frame: int = 0, rig: str = "scenario") -> SampsonCalibration:
    """The rig and ego poses a clip was rendered with (`avsim render SCENARIO --fps F --frames A:B`).

    Args:
        folder: the avsim scenario folder.
        fps: the render rate (frame k of the render is at `scenario.frame_timestamps(fps)[k]`).
        start_frame: the render frame that is frame 0 of the videos (A of `--frames A:B`).
        rig: "scenario" (its own rig) or a named rig (`avsim render --rig`).

    Returns:
        The calibration, with world_SE3_ego for every frame from `start_frame` on.
    """
    from avsim.core.rig import named_rig, world_SE3_camera_at
    from avsim.scenario.io import load_scenario

    if not (np.isfinite(fps) and fps > 0):
        raise AvsimInputError(folder, "--fps", f"must be > 0, got {fps}")
    scenario = load_scenario(folder, allow_empty_map=True)
    try:
        camera_rig = scenario.rig if rig == "scenario" else named_rig(rig)
    except AvsimValueError as exc:
        raise AvsimInputError(folder, "--rig", str(exc)) from None
    timestamps_ns = scenario.frame_timestamps(fps)
    if not 0 <= start_frame < len(timestamps_ns):
        raise AvsimInputError(folder, "--start-frame", f"{start_frame} is outside the {len(timestamps_ns)} frames at {fps:g} fps")
    mounts = camera_rig.ego_SE3_camera.as_matrix()
    times = timestamps_ns[start_frame:]
    at_capture = {  # cameras that fire away from the frame time: their own pose at their capture time
        n: np.stack([world_SE3_camera_at(scenario, camera_rig, int(t), i).as_matrix() for t in times])
        for i, n in enumerate(camera_rig.names) if camera_rig.capture_offset_ns[i] != 0
    }  # fmt: skip
    return SampsonCalibration(
        f"scenario {folder}", Path(folder), dict(zip(camera_rig.names, camera_rig.cameras)),
        {n: mounts[i] for i, n in enumerate(camera_rig.names)},
        scenario.ego.pose_at(times).as_matrix(), at_capture,
    )  # fmt: skip


# --------------------------------------------------------------------------- JSON


def _pose_array(path: Path, where: str, value: Any, batched: bool) -> np.ndarray:
    """A (4, 4) or (T, 4, 4) rigid transform from nested lists, strictly checked."""
    want = "a list of 4x4 matrices" if batched else "a 4x4 matrix (4 rows of 4 numbers)"
    try:
        m = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise AvsimInputError(path, where, f"expected {want}") from None
    if m.shape[-2:] != (4, 4) or m.ndim != (3 if batched else 2) or (batched and m.shape[0] == 0):
        raise AvsimInputError(path, where, f"expected {want}, got shape {m.shape}")
    if not np.isfinite(m).all():
        raise AvsimInputError(path, where, "non-finite value")
    mats = m.reshape(-1, 4, 4)
    bottom = np.abs(mats[:, 3] - np.array([0.0, 0.0, 0.0, 1.0])).max(axis=-1)
    R = mats[:, :3, :3]
    ortho = np.abs(R @ np.swapaxes(R, -1, -2) - np.eye(3)).max(axis=(-1, -2))
    bad = np.flatnonzero((bottom > 1e-9) | (ortho > ROTATION_TOL) | (np.linalg.det(R) <= 0))
    if bad.size:
        at = f"[{bad[0]}]" if batched else ""
        raise AvsimInputError(path, f"{where}{at}", "not a rigid transform (rotation block not orthonormal with det +1, or last row not [0, 0, 0, 1])")
    return m


def _intrinsics(path: Path, where: str, entry: dict[str, Any]) -> Camera:
    """A camera from `K` + `width_px`/`height_px`, or from a `camera` dict."""
    if ("K" in entry) == ("camera" in entry):
        raise AvsimInputError(path, where, "give exactly one of K (with width_px, height_px) or camera")
    if "camera" in entry:
        if not isinstance(entry["camera"], dict) or {"width_px", "height_px"} & entry.keys():
            raise AvsimInputError(path, f"{where}.camera", "expected a camera dict (its own width_px/height_px inside it)")
        try:
            return camera_from_dict(entry["camera"])
        except AvsimValueError as exc:
            raise AvsimInputError(path, f"{where}.camera", str(exc)) from None
    try:
        K = np.asarray(entry["K"], dtype=np.float64)
    except (TypeError, ValueError):
        raise AvsimInputError(path, f"{where}.K", "expected a 3x3 matrix") from None
    if K.shape != (3, 3) or not np.isfinite(K).all():
        raise AvsimInputError(path, f"{where}.K", f"expected a finite 3x3 matrix, got shape {K.shape}")
    if K[0, 1] != 0 or K[1, 0] != 0 or K[2, 0] != 0 or K[2, 1] != 0 or K[2, 2] != 1 or K[0, 0] <= 0 or K[1, 1] <= 0:
        raise AvsimInputError(path, f"{where}.K", "expected [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] with fx, fy > 0")
    size = []
    for key in ("width_px", "height_px"):
        v = entry.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise AvsimInputError(path, f"{where}.{key}", "missing or not a positive integer (needed with K)")
        size.append(v)
    return PinholeCamera(size[0], size[1], K[0, 0], K[1, 1], K[0, 2], K[1, 2])


def _camera_entry(path: Path, name: str, entry: Any) -> tuple[Camera, np.ndarray | None, np.ndarray | None]:
    where = f"cameras.{name}"
    if not isinstance(entry, dict):
        raise AvsimInputError(path, where, "expected an object")
    unknown = sorted(set(entry) - CAMERA_KEYS)
    if unknown:
        raise AvsimInputError(path, f"{where}.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(CAMERA_KEYS))})")
    camera = _intrinsics(path, where, entry)
    mount = _pose_array(path, f"{where}.ego_SE3_camera", entry["ego_SE3_camera"], False) if "ego_SE3_camera" in entry else None
    world = _pose_array(path, f"{where}.world_SE3_camera", entry["world_SE3_camera"], True) if "world_SE3_camera" in entry else None
    if mount is None and world is None:
        raise AvsimInputError(path, f"{where}.ego_SE3_camera", "missing (give ego_SE3_camera, or world_SE3_camera per frame)")
    return camera, mount, world


def _read_document(path: Path) -> dict[str, Any]:
    if not Path(path).exists() and not Path(path).is_symlink():
        raise AvsimInputError(path, "calibration", "not found")
    doc = read_json(path)  # a FIFO or device is named for what it is
    if not isinstance(doc, dict):
        raise AvsimInputError(path, "json", "expected an object at the top level")
    unknown = sorted(set(doc) - TOP_KEYS)
    if unknown:
        raise AvsimInputError(path, unknown[0], f"unknown key (allowed: {', '.join(sorted(TOP_KEYS))})")
    if doc.get("format", CALIBRATION_FORMAT) != CALIBRATION_FORMAT:
        raise AvsimInputError(path, "format", f"expected {CALIBRATION_FORMAT!r}, got {doc['format']!r}")
    if not isinstance(doc.get("cameras"), dict) or not doc["cameras"]:
        raise AvsimInputError(path, "cameras", "missing or empty (an object: camera name -> calibration)")
    return doc


def _from_frame(path: Path, where: str, poses: np.ndarray, start_frame: int) -> np.ndarray:
    if not 0 <= start_frame < len(poses):
        raise AvsimInputError(path, where, f"--start-frame {start_frame} is outside its {len(poses)} poses")
    return poses[start_frame:]


def load_calibration_json(path: Path, start_frame: int = 0) -> SampsonCalibration:
    """Read and validate a calibration JSON (format in the module docstring).

    Args:
        path: the JSON file.
        start_frame: the pose index that is frame 0 of the videos.

    Returns:
        The calibration; every problem raises AvsimInputError naming the file and the field.
    """
    path = Path(path)
    doc = _read_document(path)
    cameras: dict[str, Camera] = {}
    mounts: dict[str, np.ndarray] = {}
    worlds: dict[str, np.ndarray] = {}
    for name, entry in doc["cameras"].items():
        cameras[name], mount, world = _camera_entry(path, name, entry)
        if mount is not None:
            mounts[name] = mount
        if world is not None:
            worlds[name] = _from_frame(path, f"cameras.{name}.world_SE3_camera", world, start_frame)
    ego = None
    if "world_SE3_ego" in doc:
        ego = _from_frame(path, "world_SE3_ego", _pose_array(path, "world_SE3_ego", doc["world_SE3_ego"], True), start_frame)
    return SampsonCalibration(str(path), path, cameras, mounts, ego, worlds)


def calibration_document(calibration: SampsonCalibration) -> dict[str, Any]:
    """The calibration as a JSON-ready document `load_calibration_json` reads back.

    Args:
        calibration: e.g. from `calibration_from_scenario`.

    Returns:
        {"format", "cameras": {name: {"camera", "ego_SE3_camera"[, "world_SE3_camera"]}}[, "world_SE3_ego"]}.
    """
    cams: dict[str, Any] = {}
    for name, cam in calibration.cameras.items():
        entry: dict[str, Any] = {"camera": cam.to_dict()}
        if name in calibration.ego_SE3_camera:
            entry["ego_SE3_camera"] = calibration.ego_SE3_camera[name].tolist()
        if name in calibration.world_SE3_camera:
            entry["world_SE3_camera"] = calibration.world_SE3_camera[name].tolist()
        cams[name] = entry
    doc: dict[str, Any] = {"format": CALIBRATION_FORMAT, "cameras": cams}
    if calibration.world_SE3_ego is not None:
        doc["world_SE3_ego"] = calibration.world_SE3_ego.tolist()
    return doc
