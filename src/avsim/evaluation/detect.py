"""Run a user's detector over clips and write what `avsim eval let`, `avsim eval lanes` and
`avsim eval report` read (`avsim eval detect`).

A *clip folder* holds `labels/index.json` (as `avsim render --labels`, `avsim labels` or
`avsim generate` write it) and, for every camera the index names, the video
`<video_clip>.<camera>.mp4` beside `labels/` (the control render's `OUT/<clip>/`, the
generated `GEN/`, or real recordings laid out the same way). Every labelled instant becomes
one `FrameBatch`: the frames of all cameras at that instant, with each camera's calibration
(from the labels' OpenLane files: camera model and ego pose). The detector is any callable
`FrameBatch -> Detections` (a class named by `--detector` is instantiated once without
arguments). Its boxes are 3-D boxes in the ego frame with LET classes and scores; its lanes
are 3-D lane lines in OpenLane's ground frame under the front camera.

Output folder (one side of a report):

    OUT/detections.parquet       the detector's boxes (box table; frames "<clip>@<sample_token>")
    OUT/lanes.parquet            its lanes (lane table, same frame keys)
    OUT/gt/boxes.parquet         ground truth from the labels (boxes3d.json), same keys
    OUT/gt/lanes.parquet         ground truth lanes (the front camera's OpenLane files)
    OUT/videos/<clip>/<camera>.mp4   links to the clip's videos (FID / FVD / Sampson)
    OUT/detect.json              the detector, clips, frames and cameras

Each clip is detected on its own (`detect_clip` gives its `ClipDetections`) and the parts are
merged, in clip order, by `write_detect_output`: `avsim eval detect` does both in one process;
`avsim run eval detect` runs one clip per task, writes each part as a one-clip folder (no
videos/) and merges the parts read back (`read_detect_part`) on the driver into the same files.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.label_folders import is_label_folder, labels_folder
from avsim.core.label_folders import read_index as read_label_index
from avsim.core.names import join_names, safe_name
from avsim.core.progress import StepProgress, report_step
from avsim.core.safe_files import contained_file, file_kind
from avsim.evaluation.lanes import LaneSet
from avsim.evaluation.let_ap import Boxes3D
from avsim.evaluation.let_result import LetClass

FRONT_CAMERA = "camera_front_wide_120fov"
# avsim camera axes (x right, y down, z forward) in OpenLane / Waymo camera axes (x forward, y left, z up)
FLU_R_RDF = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


@dataclass(frozen=True)
class CameraCalibration:
    """One camera: its model as the labels store it and its mounting.

    camera: dict `{"model": "ftheta" | "pinhole", "width_px", "height_px", ...}` (the scenario's
        camera dict; `avsim.core.cameras` reads it); ego_SE3_camera: (4, 4) camera (x right,
        y down, z forward) to ego (x forward, y left, z up), metres.
    """

    name: str
    camera: dict[str, Any]
    ego_SE3_camera: np.ndarray


@dataclass(frozen=True)
class FrameBatch:
    """All cameras of one labelled instant of a clip.

    images: (V, H, W, 3) uint8 RGB, in the order of `cameras` and `calibration`;
    world_SE3_ego: (4, 4) the ego pose at `timestamp_ns`.
    """

    clip: str
    clip_dir: Path
    frame_index: int
    timestamp_ns: int
    sample_token: str
    cameras: tuple[str, ...]
    images: np.ndarray
    calibration: tuple[CameraCalibration, ...]
    world_SE3_ego: np.ndarray


@dataclass(frozen=True)
class Detections:
    """What a detector returns for one `FrameBatch`.

    boxes_ego: (N, 7) (x, y, z, length, width, height, yaw_rad): box centre in the ego frame
        (x forward, y left, z up, m), yaw about ego z from ego x; labels: N LET classes;
        scores: (N,) in [0, 1]; lanes: 3-D lane lines, each (n_i, 3) in OpenLane's ground frame
        (x right, y forward, z up, m, origin under the front camera); lane_categories: OpenLane
        category codes (-1: none).
    """

    boxes_ego: np.ndarray = field(default_factory=lambda: np.zeros((0, 7)))
    labels: tuple[LetClass, ...] = ()
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lanes: tuple[np.ndarray, ...] = ()
    lane_categories: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        boxes = np.asarray(self.boxes_ego, np.float64).reshape(-1, 7)
        labels = tuple(LetClass.parse(c) for c in self.labels)
        scores = np.asarray(self.scores, np.float64).reshape(-1)
        if not (len(boxes) == len(labels) == len(scores)):
            raise AvsimValueError(f"Detections: {len(boxes)} boxes, {len(labels)} labels, {len(scores)} scores")
        if not (np.isfinite(boxes).all() and np.isfinite(scores).all()):
            raise AvsimValueError("Detections: boxes and scores must be finite")
        if ((scores < 0) | (scores > 1)).any():  # as the box tables `avsim eval let` reads require
            bad = float(scores[(scores < 0) | (scores > 1)][0])
            raise AvsimValueError(f"Detections: scores must be in [0, 1], got {bad:g}")
        if (boxes[:, 3:6] <= 0).any():  # as the box tables `avsim eval let` reads require
            raise AvsimValueError("Detections: box sizes (length, width, height) must be > 0")
        lanes = tuple(np.asarray(ln, np.float64).reshape(-1, 3) for ln in self.lanes)
        cats = tuple(int(c) for c in self.lane_categories) or (-1,) * len(lanes)
        if len(cats) != len(lanes):
            raise AvsimValueError(f"Detections: {len(lanes)} lanes, {len(cats)} lane categories")
        for name, value in (("boxes_ego", boxes), ("labels", labels), ("scores", scores), ("lanes", lanes), ("lane_categories", cats)):
            object.__setattr__(self, name, value)


Detector = Callable[[FrameBatch], Detections]


def import_detector(spec: str) -> Any:
    """`module:attribute` -> the attribute, imported but not instantiated; one line when it is not a callable.

    `avsim run eval detect` checks the spec with it on the driver before any task starts.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise AvsimInputError("--detector", "spec", f"expected MODULE:CALLABLE, got {spec!r}")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise AvsimInputError("--detector", spec, f"cannot import: {exc}") from None
    if not callable(obj):
        raise AvsimInputError("--detector", spec, "is not callable")
    return obj


def load_detector(spec: str) -> Detector:
    """`module:attribute` -> the detector (a class is instantiated without arguments)."""
    obj = import_detector(spec)
    detector = obj() if isinstance(obj, type) else obj
    if not callable(detector):
        raise AvsimInputError("--detector", spec, "is not callable")
    return detector


# --------------------------------------------------------------------------- clips


def is_clip_folder(path: Path) -> bool:
    """Whether `path` is a clip folder (it holds labels/index.json)."""
    return is_label_folder(labels_folder(path))


def list_clip_folders(path: Path) -> list[Path]:
    """Clip folders at or under `path` (folders holding labels/index.json), sorted by name."""
    if is_clip_folder(path):
        return [path]
    if not path.is_dir():
        raise AvsimInputError(path, "CLIPS", "not a folder")
    found = sorted(c for c in path.iterdir() if c.is_dir() and is_clip_folder(c))
    if not found:
        raise AvsimInputError(path, "CLIPS", "no clip folder (a folder with labels/index.json and its videos)")
    return found


def read_index(clip_dir: Path) -> dict[str, Any]:
    """The clip's `labels/index.json`, checked (`avsim.core.label_folders.read_index`)."""
    return read_label_index(labels_folder(clip_dir))


def clip_name(index: dict[str, Any], clip_dir: Path) -> str:
    """The clip's name: its scenario id (or folder name) as a safe file name (it names `OUT/videos/<clip>/`)."""
    return safe_name(str(index.get("scenario_id") or clip_dir.name))


def video_path(clip_dir: Path, video_clip: str, camera: str) -> Path:
    p = join_names(clip_dir, f"{video_clip}.{camera}.mp4")
    kind = file_kind(p)
    if kind == "missing":
        raise AvsimInputError(p, "video", f"missing: camera {camera} of {video_clip} (expected beside labels/)")
    return contained_file(clip_dir, p.name, p, "video")  # a FIFO, a device or a link out of the clip folder: named


class ClipCalibrations:
    """Every camera-frame's `CameraCalibration` of one clip: the OpenLane files, or the compact tables read once."""

    def __init__(self, clip_dir: Path) -> None:
        self.clip_dir = clip_dir
        self._compact: tuple[dict[str, dict[str, Any]], dict[tuple[str, int], np.ndarray]] | None = None

    def __call__(self, camera: str, frame_index: int) -> CameraCalibration:
        from avsim.render.labels import compact

        labels = labels_folder(self.clip_dir)
        if os.path.lexists(join_names(labels, "openlane", camera, f"{frame_index:06d}.json")) or not compact.is_compact(labels):
            return calibration(self.clip_dir, camera, frame_index)
        if self._compact is None:
            index = compact.read_index(labels)
            models = {c: compact.camera_model(labels, index, c).to_dict() for c in index["cameras"]}
            self._compact = models, compact.camera_poses(labels, index)
        models, poses = self._compact
        if camera not in models or (camera, frame_index) not in poses:
            raise AvsimInputError(labels / compact.CAMERA_POSES, "camera", f"no pose of {camera} at frame {frame_index}")
        return CameraCalibration(camera, models[camera], poses[camera, frame_index])


def calibration(clip_dir: Path, camera: str, frame_index: int) -> CameraCalibration:
    """A camera's model and mounting from the labels' OpenLane file of that frame (or the compact tables)."""
    from avsim.core.safe_json import read_json
    from avsim.render.labels import compact

    labels = labels_folder(clip_dir)
    p = join_names(labels, "openlane", camera, f"{frame_index:06d}.json")
    if not os.path.lexists(p) and compact.is_compact(labels):
        return ClipCalibrations(clip_dir)(camera, frame_index)
    doc = read_json(p, "openlane")
    if not isinstance(doc, dict):
        raise AvsimInputError(p, "json", "top level must be an object")
    model = doc.get("camera_model")
    try:
        if model is None and doc.get("intrinsic") is not None:  # a plain pinhole file (no camera_model)
            K = np.asarray(doc["intrinsic"], np.float64).reshape(3, 3)
            model = {"model": "pinhole", "fx_px": K[0, 0], "fy_px": K[1, 1], "cx_px": K[0, 2], "cy_px": K[1, 2]}
        ego_T_cam = np.asarray(doc["extrinsic"], np.float64).reshape(4, 4)
    except (KeyError, TypeError, ValueError):
        raise AvsimInputError(p, "extrinsic", "intrinsic must be 3x3 and extrinsic 4x4 numbers") from None
    if not np.isfinite(ego_T_cam).all() or not isinstance(model, dict):
        raise AvsimInputError(p, "extrinsic", "NaN or infinite values, or no camera model")
    ego_SE3_camera = ego_T_cam.copy()
    ego_SE3_camera[:3, :3] = ego_T_cam[:3, :3] @ FLU_R_RDF
    return CameraCalibration(camera, dict(model or {}), ego_SE3_camera)


def iter_batches(clip_dir: Path) -> Iterator[FrameBatch]:
    """Every labelled instant of a clip, all cameras, in index order (videos streamed)."""
    from avsim.core.video import iter_video_frames

    index = read_index(clip_dir)
    cams = tuple(str(c) for c in index["cameras"])
    name = clip_name(index, clip_dir)
    calibrations = ClipCalibrations(clip_dir)
    by_video: dict[str, list[dict[str, Any]]] = {}
    for f in index["frames"]:
        by_video.setdefault(str(f["video_clip"]), []).append(f)
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
            yield FrameBatch(name, clip_dir, fi, int(f["timestamp_ns"]), str(f["sample_token"]), cams, np.stack(images),
                             tuple(calibrations(c, fi) for c in cams), np.asarray(f["world_SE3_ego"], np.float64))  # fmt: skip


def frame_key(clip: str, sample_token: str) -> str:
    return f"{clip}@{sample_token}"


# --------------------------------------------------------------------------- ground truth


def front_camera(cameras: list[str]) -> str:
    return FRONT_CAMERA if FRONT_CAMERA in cameras else cameras[0]


def clip_ground_truth(clip_dir: Path) -> tuple[Boxes3D, LaneSet]:
    """The labels' boxes and front-camera OpenLane lanes (either label layout), frames keyed by clip."""
    from avsim.evaluation.detections import read_nuscenes_submission
    from avsim.evaluation.lane_io import read_label_lanes
    from avsim.render.labels import compact

    index = read_index(clip_dir)
    name = clip_name(index, clip_dir)
    tokens = {str(f["sample_token"]): frame_key(name, str(f["sample_token"])) for f in index["frames"]}
    labels = labels_folder(clip_dir)
    if (labels / "boxes3d.json").is_file() or not compact.is_compact(labels):
        boxes = read_nuscenes_submission(labels / "boxes3d.json", token_to_frame=tokens)
    else:
        boxes = read_nuscenes_submission(labels / compact.BOXES3D, token_to_frame=tokens, doc=compact.boxes3d_document(labels))
    lanes = read_label_lanes(labels, front_camera(list(index["cameras"])), ground_truth=True)
    keys = np.array([tokens.get(str(k), frame_key(name, str(k))) for k in lanes.frame])
    return boxes, LaneSet(keys, lanes.category, lanes.points_m, lanes.offsets, lanes.visibility)


# --------------------------------------------------------------------------- run


@dataclass(frozen=True)
class ClipDetections:
    """One clip's part of the output: the detector's boxes and lanes, the labels' ground truth,
    and the clip's entry of `detect.json` (`detect_clip` makes it; `write_detect_output` merges parts).

    clip_dir: the clip folder; record: `{"clip", "folder", "frames", "cameras"}`, the clip's entry
    of detect.json `clips`; frames: the instants the detector saw; boxes, lanes: the detector's;
    gt_boxes, gt_lanes: the labels'; all frames keyed `<clip>@<sample_token>`.
    """

    clip_dir: Path
    record: dict[str, Any]
    frames: int
    boxes: Boxes3D
    lanes: LaneSet
    gt_boxes: Boxes3D
    gt_lanes: LaneSet


def _concat_boxes(parts: list[Boxes3D]) -> Boxes3D:
    if not parts:
        return Boxes3D(np.zeros(0, str), np.zeros(0, str), np.zeros((0, 7)), np.zeros(0))
    return Boxes3D(*(np.concatenate([getattr(b, f) for b in parts]) for f in ("frame", "label", "boxes", "score")))


def _concat_lanes(frames: list[str], lanes: list[np.ndarray], cats: list[int]) -> LaneSet:
    return LaneSet.from_lists(frames, lanes, cats) if lanes else LaneSet.from_lists([], [], [])


def detect_clip(clip_dir: Path, detector: Detector, spec: str, on_frame: Callable[[], None] | None = None) -> ClipDetections:
    """Run `detector` on every labelled instant of one clip (all cameras) and read its ground truth.

    Args:
        clip_dir: a clip folder (module docstring).
        detector: the callable.
        spec: how it was named (named in an error).
        on_frame: called after each instant (progress).

    Returns:
        The clip's part.
    """
    index = read_index(clip_dir)
    pred_parts, lane_f, lane_p, lane_c, frames = [], [], [], [], 0
    for batch in iter_batches(clip_dir):
        try:
            det = detector(batch)
        except Exception as exc:  # the user's detector (or a callable that is none, `os:system`): one line
            text = " ".join(str(exc).split())[:300]
            raise AvsimInputError("--detector", spec, f"raised {type(exc).__name__} on {batch.clip} frame {batch.frame_index}: {text}") from None
        if not isinstance(det, Detections):
            raise AvsimInputError("--detector", spec, f"returned {type(det).__name__}, expected avsim.evaluation.detect.Detections")
        key = frame_key(batch.clip, batch.sample_token)
        n = len(det.scores)
        pred_parts.append(Boxes3D(np.full(n, key, dtype=object).astype(str), np.array([c.value for c in det.labels], dtype=str),
                                  det.boxes_ego, det.scores))  # fmt: skip
        lane_f += [key] * len(det.lanes)
        lane_p += list(det.lanes)
        lane_c += list(det.lane_categories)
        frames += 1
        if on_frame is not None:
            on_frame()
    gt_boxes, gt_lanes = clip_ground_truth(clip_dir)
    record = {"clip": clip_name(index, clip_dir), "folder": str(clip_dir), "frames": len(index["frames"]),
              "cameras": list(index["cameras"])}  # fmt: skip
    return ClipDetections(clip_dir, record, frames, _concat_boxes(pred_parts), _concat_lanes(lane_f, lane_p, lane_c), gt_boxes, gt_lanes)


def write_detect_output(out: Path, parts: list[ClipDetections], spec: str, link_videos: bool = True) -> dict[str, Any]:
    """Merge clip parts, in order, into the output folder (module docstring) and write `detect.json` last.

    Args:
        out: the output folder (one side of a report).
        parts: the clips' parts; two clips of one name are refused (their frame keys would collide).
        spec: the detector's name (recorded in detect.json).
        link_videos: also link `out/videos/<clip>/<camera>.mp4` to the clips' videos.

    Returns:
        The detect.json document.
    """
    from avsim.evaluation.detections import write_box_table
    from avsim.evaluation.lane_io import write_lane_table

    seen: dict[str, Path] = {}
    for part in parts:
        name = str(part.record["clip"])
        if name in seen:
            raise AvsimInputError(part.clip_dir, "scenario_id", f"clip {name!r} is also {seen[name]}; frame keys would collide")
        seen[name] = part.clip_dir
    (out / "gt").mkdir(parents=True, exist_ok=True)
    write_box_table(_concat_boxes([p.boxes for p in parts]), out / "detections.parquet")
    write_lane_table(_merge_lane_sets([p.lanes for p in parts]), out / "lanes.parquet")
    write_box_table(_concat_boxes([p.gt_boxes for p in parts]), out / "gt" / "boxes.parquet")
    write_lane_table(_merge_lane_sets([p.gt_lanes for p in parts]), out / "gt" / "lanes.parquet")
    if link_videos:
        _link_videos([p.clip_dir for p in parts], out / "videos")
    doc = {"format": "avsim-detect", "detector": spec, "clips": [p.record for p in parts], "frames": sum(p.frames for p in parts),
           "frame_keys": "<clip>@<sample_token>"}  # fmt: skip
    with atomic_output_path(out / "detect.json") as tmp:
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def read_detect_part(folder: Path) -> ClipDetections:
    """A one-clip output folder (`write_detect_output(folder, [part], spec, link_videos=False)`) read back as its part.

    Args:
        folder: the folder (detect.json with one clip, the four tables).

    Returns:
        The part, equal to the one written (frame keys as str).
    """
    from avsim.core.safe_json import read_json
    from avsim.evaluation.detections import read_box_table
    from avsim.evaluation.lane_io import read_lane_table

    doc = read_json(folder / "detect.json", "detect")
    clips = doc.get("clips") if isinstance(doc, dict) else None
    if not isinstance(clips, list) or len(clips) != 1 or not isinstance(clips[0], dict) or "folder" not in clips[0]:
        raise AvsimInputError(folder / "detect.json", "clips", "expected the record of one clip")

    def boxes(path: Path) -> Boxes3D:
        b = read_box_table(path)
        return Boxes3D(b.frame.astype(str), b.label, b.boxes, b.score)

    return ClipDetections(Path(str(clips[0]["folder"])), clips[0], int(doc.get("frames", 0)), boxes(folder / "detections.parquet"),
                          read_lane_table(folder / "lanes.parquet"), boxes(folder / "gt" / "boxes.parquet"),
                          read_lane_table(folder / "gt" / "lanes.parquet"))  # fmt: skip


def run_detector(clips: Path, out: Path, detector: Detector, spec: str, progress: StepProgress | None = None) -> dict[str, Any]:
    """Detect on every labelled instant of every clip under `clips` and write `out` (module docstring).

    Args:
        clips: a clip folder or a folder of them.
        out: the output folder (one side of a report).
        detector: the callable.
        spec: how it was named (recorded in detect.json).
        progress: `(step, frames done, frames)`.

    Returns:
        the detect.json document.
    """
    folders = list_clip_folders(clips)
    total = sum(len(read_index(c)["frames"]) for c in folders)
    done = [0]

    def on_frame() -> None:
        done[0] += 1
        report_step(progress, f"detect {clips.name}", done[0], total)

    parts = [detect_clip(clip_dir, detector, spec, on_frame) for clip_dir in folders]
    return write_detect_output(out, parts, spec)


def _merge_lane_sets(parts: list[LaneSet]) -> LaneSet:
    frames, lanes, cats, vis = [], [], [], []
    for ls in parts:
        for i in range(len(ls)):
            a, b = ls.offsets[i], ls.offsets[i + 1]
            frames.append(ls.frame[i])
            lanes.append(ls.points_m[a:b])
            cats.append(int(ls.category[i]))
            vis.append(ls.visibility[a:b] if ls.visibility is not None else np.ones(b - a, bool))
    return LaneSet.from_lists(frames, lanes, cats, vis) if lanes else LaneSet.from_lists([], [], [])


def _link_videos(folders: list[Path], videos: Path) -> None:
    """OUT/videos/<clip>/<camera>.mp4 -> the clip's videos (the report's multi-view layout)."""
    for clip_dir in folders:
        index = read_index(clip_dir)
        first = str(index["frames"][0]["video_clip"]) if index["frames"] else clip_name(index, clip_dir)
        target = join_names(videos, clip_name(index, clip_dir))
        target.mkdir(parents=True, exist_ok=True)
        for cam in index["cameras"]:
            link = join_names(target, f"{cam}.mp4")
            if link.is_symlink() or link.exists():
                link.unlink()
            os.symlink(video_path(clip_dir, first, str(cam)).resolve(), link)


def report_command(out: Path, generated: bool) -> str:
    """The `avsim eval report` line to run on `out` next (both sides, or one side and a GEN_OUT to give)."""
    if not generated:
        return f"avsim eval report --real {out} --generated GEN_OUT --gt {out / 'gt'}"
    return f"avsim eval report --real {out / 'real'} --generated {out / 'generated'} --gt {out / 'real' / 'gt'} --out {out / 'report'}"


def summary_lines(result: dict[str, Any], out: Path) -> list[str]:
    """What `avsim eval detect` and `avsim run eval detect` print: frames and clips per side, then the next command.

    Args:
        result: `detect_sides`' result (`sides`, `report_command`).
        out: the output folder.

    Returns:
        The lines.
    """
    two = len(result["sides"]) > 1
    lines = [f"{side}: {doc['frames']} frames of {len(doc['clips'])} clip(s) -> {out / side if two else out}"
             for side, doc in result["sides"].items()]  # fmt: skip
    return [*lines, f"next: {result['report_command']}"]


def detect_sides(clips: Path, out: Path, spec: str, generated: Path | None = None,
                 progress: StepProgress | None = None) -> dict[str, Any]:  # fmt: skip
    """`avsim eval detect`: one side into `out`, or with `generated` both sides into `out/real`
    and `out/generated` (ground truth from each side's labels under `<side>/gt`).

    Returns:
        {"sides": {name: detect.json}, "report_command": the `avsim eval report` line to run next}.
    """
    detector = load_detector(spec)
    if generated is None:
        return {"sides": {"real": run_detector(clips, out, detector, spec, progress)}, "report_command": report_command(out, False)}
    sides = {"real": run_detector(clips, out / "real", detector, spec, progress),
             "generated": run_detector(generated, out / "generated", detector, spec, progress)}  # fmt: skip
    return {"sides": sides, "report_command": report_command(out, True)}
