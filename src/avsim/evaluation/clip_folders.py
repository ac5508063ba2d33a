"""Clip folders as `avsim eval detect` reads them: where they are, which cameras are evaluated,
each camera's calibration, and every labelled instant as a `FrameBatch`.

A *clip folder* holds `labels/index.json` (as `avsim render --labels`, `avsim labels` or
`avsim generate` write it) and, for every camera the index names, the video
`<video_clip>.<camera>.mp4` beside `labels/`. `CLIPS` (either side of `avsim eval detect`, and
the DATASET of `avsim run eval detect`) is one clip folder, a folder of clip folders, or a folder
of folders of them (what `avsim run render --labels` and `avsim run generate` write: `OUT/<item>/<clip>/`).

The *evaluated cameras* of a clip are the cameras a detector is given and ground truth is
counted for: `--cameras` when given (every clip must have them), else, when both sides run, the
cameras the real and the generated clip of the same name both have (a generated clip of one
view is compared with the real clip's same view, not with six more), else all the clip's cameras.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.label_folders import INDEX_JSON, is_label_folder, labels_folder
from avsim.core.label_folders import read_index as read_label_index
from avsim.core.names import join_names, safe_name
from avsim.core.safe_files import contained_file, file_kind
from avsim.evaluation.detect_types import FLU_R_RDF, CameraCalibration, FrameBatch

FRONT_CAMERA = "camera_front_wide_120fov"


def is_clip_folder(path: Path) -> bool:
    """Whether `path` is a clip folder (it holds labels/index.json)."""
    return is_label_folder(labels_folder(path))


def list_clip_folders(path: Path) -> list[Path]:
    """Clip folders at or under `path`: `path` itself, its clip subfolders, or the clip folders of
    its subfolders (`OUT/<item>/<clip>/`), sorted by name.

    Args:
        path: a clip folder, a folder of them, or a folder of such folders.

    Returns:
        The clip folders; a subfolder that neither is nor holds a clip folder is a one-line error.
    """
    if is_clip_folder(path):
        return [path]
    if not path.is_dir():
        raise AvsimInputError(path, "CLIPS", "not a folder")
    found: list[Path] = []
    for sub in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if is_clip_folder(sub):
            found.append(sub)
            continue
        inner = sorted(c for c in sub.iterdir() if c.is_dir() and is_clip_folder(c))
        if not inner:
            raise AvsimInputError(sub, "CLIPS", "neither a clip folder (labels/index.json and its videos) nor a folder of them")
        found += inner
    if not found:
        raise AvsimInputError(path, "CLIPS", "no clip folder (a folder with labels/index.json and its videos)")
    return found


def read_index(clip_dir: Path) -> dict[str, Any]:
    """A clip folder's `labels/index.json`, checked (`avsim.core.label_folders.read_index`)."""
    return read_label_index(labels_folder(clip_dir))


def clip_name(index: dict[str, Any], clip_dir: Path) -> str:
    """The clip's name: its scenario id (the same on both sides of a report), else the folder's name, as a
    safe file name (it names `OUT/videos/<clip>/`)."""
    return safe_name(str(index.get("scenario_id") or clip_dir.name))


def parse_cameras(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """`--cameras a,b` as a tuple (None or empty: not given)."""
    if value is None:
        return None
    names = tuple(c.strip() for c in (value.split(",") if isinstance(value, str) else value) if c.strip())
    return names or None


def evaluated_cameras(real: Sequence[Path], generated: Sequence[Path] = (), requested: Sequence[str] | None = None) -> dict[Path, tuple[str, ...]]:
    """The cameras each clip folder is evaluated on (module docstring), in the clip's own order.

    Args:
        real: the real side's clip folders.
        generated: the generated side's clip folders (empty: one side).
        requested: `--cameras` (None: not given).

    Returns:
        clip folder -> its evaluated cameras; a clip without a requested camera, or a pair of
        clips that share none, is a one-line error naming the clip's index.
    """
    cams = {c: tuple(str(x) for x in read_index(c)["cameras"]) for c in [*real, *generated]}
    out: dict[Path, tuple[str, ...]] = {}
    if requested:
        for clip, have in cams.items():
            missing = [c for c in requested if c not in have]
            if missing:
                raise AvsimInputError(labels_folder(clip) / INDEX_JSON, "cameras", f"no camera {missing[0]!r} (--cameras; it has {', '.join(have)})")
            out[clip] = tuple(c for c in have if c in requested)
        return out
    names = {side: {clip_name(read_index(c), c): c for c in clips} for side, clips in (("real", real), ("generated", generated))}
    for side, other in (("real", "generated"), ("generated", "real")):
        for name, clip in names[side].items():
            twin = names[other].get(name)
            shared = cams[clip] if twin is None else tuple(c for c in cams[clip] if c in cams[twin])
            if not shared:
                raise AvsimInputError(labels_folder(clip) / INDEX_JSON, "cameras",
                                      f"clip {name!r} shares no camera with {twin} (real and generated are compared on the cameras both have)")  # fmt: skip
            out[clip] = shared
    return out


def video_path(clip_dir: Path, video_clip: str, camera: str) -> Path:
    """`<clip_dir>/<video_clip>.<camera>.mp4` (a missing video, a FIFO, a device or a link out of the clip folder is a one-line error)."""
    p = join_names(clip_dir, f"{video_clip}.{camera}.mp4")
    if file_kind(p) == "missing":
        raise AvsimInputError(p, "video", f"missing: camera {camera} of {video_clip} (expected beside labels/)")
    return contained_file(clip_dir, p.name, p, "video")


class ClipCalibrations:
    """Every camera-frame's `CameraCalibration` of one clip: the OpenLane files, or the compact tables read once."""

    def __init__(self, clip_dir: Path) -> None:
        self.clip_dir = clip_dir
        self._compact: tuple[dict[str, dict[str, Any]], dict[tuple[str, int], np.ndarray]] | None = None

    def __call__(self, camera: str, frame_index: int) -> CameraCalibration:
        from avsim.render.labels import compact

        labels = labels_folder(self.clip_dir)
        if os.path.lexists(join_names(labels, "openlane", camera, f"{frame_index:06d}.json")) or not compact.is_compact(labels):
            return _openlane_calibration(labels, camera, frame_index)
        if self._compact is None:
            index = compact.read_index(labels)
            for c in index["cameras"]:
                compact.camera_model(labels, index, c)  # a model that is not one: one line
            models = {c: dict(index["camera_models"][c]) for c in index["cameras"]}
            self._compact = models, compact.camera_poses(labels, index)
        models, poses = self._compact
        if camera not in models or (camera, frame_index) not in poses:
            raise AvsimInputError(labels / compact.CAMERA_POSES, "camera", f"no pose of {camera} at frame {frame_index}")
        return CameraCalibration(camera, models[camera], poses[camera, frame_index])


def calibration(clip_dir: Path, camera: str, frame_index: int) -> CameraCalibration:
    """A camera's model and mounting at one frame: from the labels' OpenLane file of that frame, or the compact tables."""
    return ClipCalibrations(clip_dir)(camera, frame_index)


def _openlane_calibration(labels: Path, camera: str, frame_index: int) -> CameraCalibration:
    from avsim.core.safe_json import read_json

    p = join_names(labels, "openlane", camera, f"{frame_index:06d}.json")
    doc = read_json(p, "openlane")
    if not isinstance(doc, dict):
        raise AvsimInputError(p, "json", "top level must be an object")
    model = doc.get("camera_model")
    try:
        if model is None and doc.get("intrinsic") is not None:  # a plain pinhole file (no camera_model)
            K = np.asarray(doc["intrinsic"], np.float64).reshape(3, 3)
            model = {"model": "pinhole", "fx_px": K[0, 0], "fy_px": K[1, 1], "cx_px": K[0, 2], "cy_px": K[1, 2]}
        # layout 3 writes the camera in its own ground frame as `extrinsic` and ego_T_camera as `ego_extrinsic`
        ego_T_cam = np.asarray(doc.get("ego_extrinsic", doc["extrinsic"]), np.float64).reshape(4, 4)
    except (KeyError, TypeError, ValueError):
        raise AvsimInputError(p, "extrinsic", "intrinsic must be 3x3 and extrinsic 4x4 numbers") from None
    if not np.isfinite(ego_T_cam).all() or not isinstance(model, dict):
        raise AvsimInputError(p, "extrinsic", "NaN or infinite values, or no camera model")
    ego_SE3_camera = ego_T_cam.copy()
    ego_SE3_camera[:3, :3] = ego_T_cam[:3, :3] @ FLU_R_RDF
    return CameraCalibration(camera, dict(model or {}), ego_SE3_camera)


def lane_camera(clip_dir: Path, cameras: Sequence[str]) -> str:
    """The camera whose lanes are evaluated: the cosmos front wide camera when evaluated, else the
    evaluated camera looking most nearly along the ego's forward axis (at the clip's first frame).

    Args:
        clip_dir: the clip folder.
        cameras: the evaluated cameras.

    Returns:
        The camera's name.
    """
    if FRONT_CAMERA in cameras or len(cameras) == 1:
        return FRONT_CAMERA if FRONT_CAMERA in cameras else cameras[0]
    first = int(read_index(clip_dir)["frames"][0]["frame_index"])
    forward = [float(calibration(clip_dir, c, first).ego_SE3_camera[0, 2]) for c in cameras]  # ego x of each optical axis
    return cameras[int(np.argmax(forward))]


def iter_batches(clip_dir: Path, cameras: Sequence[str] | None = None) -> Iterator[FrameBatch]:
    """Every labelled instant of a clip, the evaluated cameras at their own sizes, in index order (videos streamed).

    Args:
        clip_dir: the clip folder.
        cameras: the evaluated cameras (default all of the clip's).

    Returns:
        The batches.
    """
    from avsim.core.video import iter_video_frames

    index = read_index(clip_dir)
    cams = tuple(cameras) if cameras else tuple(str(c) for c in index["cameras"])
    name = clip_name(index, clip_dir)
    by_video: dict[str, list[dict[str, Any]]] = {}
    for f in index["frames"]:
        by_video.setdefault(str(f["video_clip"]), []).append(f)
    lanes_from = lane_camera(clip_dir, cams) if index["frames"] else ""
    calibrations = ClipCalibrations(clip_dir)
    for video_clip, frames in by_video.items():
        wanted = {int(f["video_frame"]): f for f in frames}
        streams = [iter_video_frames(video_path(clip_dir, video_clip, c)) for c in cams]
        for k, images in enumerate(zip(*streams)):
            if k > max(wanted):
                break
            f = wanted.get(k)
            if f is None:
                continue
            fi = int(f["frame_index"])
            cal = tuple(calibrations(c, fi) for c in cams)
            yield FrameBatch(name, clip_dir, fi, int(f["timestamp_ns"]), str(f["sample_token"]), cams, tuple(images), cal,
                             np.asarray(f["world_SE3_ego"], np.float64), lanes_from)  # fmt: skip


def frame_key(clip: str, sample_token: str) -> str:
    """A labelled instant's key in every table `avsim eval detect` writes: `<clip>@<sample_token>`."""
    return f"{clip}@{sample_token}"
