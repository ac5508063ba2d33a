"""Run a user's detector over clips and write what `avsim eval let`, `avsim eval lanes` and
`avsim eval report` read (`avsim eval detect`).

Clip folders, the evaluated cameras and the `FrameBatch` of each labelled instant are
`avsim.evaluation.clip_folders`'; ground truth is `avsim.evaluation.detect_truth`'s (the boxes
the evaluated cameras show, `GtVisibility`). The detector is any callable
`FrameBatch -> Detections` (a class named by `--detector` is instantiated once without
arguments). Its boxes are 3-D boxes in the ego frame with LET classes and scores; its lanes
are 3-D lane lines in OpenLane's ground frame of the batch's lane camera.

Output folder (one side of a report):

    OUT/detections.parquet       the detector's boxes (box table; frames "<clip>@<sample_token>")
    OUT/lanes.parquet            its lanes (lane table, same frame keys)
    OUT/gt/boxes.parquet         ground truth: the labelled boxes the evaluated cameras show, same keys
    OUT/gt/lanes.parquet         ground truth lanes (the lane camera's OpenLane files, point visibility kept)
    OUT/videos/<clip>/<camera>.mp4   links to the clip's videos of the evaluated cameras (FID / FVD / Sampson)
    OUT/videos/<clip>/calibration.json   their cameras and mountings (`avsim-sampson-calibration`)
    OUT/detect.json              the detector, and per clip its cameras, instants and ground-truth counts

Each clip is detected on its own (`detect_clip` gives its `ClipDetections`) and the parts are
merged, in clip order, by `write_detect_output`: `avsim eval detect` does both in one process;
`avsim run eval detect` runs one clip per task, writes each part as a one-clip folder (no
videos/) and merges the parts read back (`read_detect_part`) on the driver into the same files.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.names import join_names
from avsim.core.progress import StepProgress, report_step
from avsim.evaluation.clip_folders import (
    FRONT_CAMERA,
    calibration,
    clip_name,
    evaluated_cameras,
    frame_key,
    is_clip_folder,
    iter_batches,
    list_clip_folders,
    read_index,
    video_path,
)
from avsim.evaluation.detect_truth import clip_ground_truth
from avsim.evaluation.detect_types import CameraCalibration, Detections, Detector, FrameBatch, GtVisibility
from avsim.evaluation.lanes import LaneSet
from avsim.evaluation.let_ap import Boxes3D

__all__ = [
    "FRONT_CAMERA", "CameraCalibration", "ClipDetections", "Detections", "Detector", "FrameBatch", "GtVisibility",
    "calibration", "clip_ground_truth", "clip_name", "detect_clip", "detect_sides", "evaluated_cameras", "frame_key",
    "import_detector", "is_clip_folder", "iter_batches", "list_clip_folders", "load_detector", "read_detect_part",
    "read_index", "report_command", "run_detector", "summary_lines", "video_path", "write_detect_output",
]  # fmt: skip
DETECT_FORMAT = "avsim-detect"
CALIBRATION_JSON = "calibration.json"  # OUT/videos/<clip>/calibration.json


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


# --------------------------------------------------------------------------- run


@dataclass(frozen=True)
class ClipDetections:
    """One clip's part of the output: the detector's boxes and lanes, the labels' ground truth,
    and the clip's entry of `detect.json` (`detect_clip` makes it; `write_detect_output` merges parts).

    clip_dir: the clip folder; record: the clip's entry of detect.json `clips` (`clip`, `folder`,
    `frames`, `cameras`, `lane_camera`, `gt_visibility`, `gt_boxes`, `gt_boxes_unseen`, `instants`:
    the sample tokens the detector saw); frames: how many; boxes, lanes: the detector's;
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


def detect_clip(clip_dir: Path, detector: Detector, spec: str, on_frame: Callable[[], None] | None = None,
                cameras: tuple[str, ...] | None = None, gt_visibility: GtVisibility = GtVisibility.VISIBLE) -> ClipDetections:  # fmt: skip
    """Run `detector` on every labelled instant of one clip (its evaluated cameras) and read its ground truth.

    Args:
        clip_dir: a clip folder (`avsim.evaluation.clip_folders`).
        detector: the callable.
        spec: how it was named (named in an error).
        on_frame: called after each instant (progress).
        cameras: the evaluated cameras (default all of the clip's).
        gt_visibility: which labelled boxes are ground truth.

    Returns:
        The clip's part.
    """
    index = read_index(clip_dir)
    cams = tuple(cameras) if cameras else tuple(str(c) for c in index["cameras"])
    truth = clip_ground_truth(clip_dir, cams, gt_visibility)
    pred_parts, lane_f, lane_p, lane_c, tokens = [], [], [], [], []
    for batch in iter_batches(clip_dir, cams):
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
        tokens.append(batch.sample_token)
        if on_frame is not None:
            on_frame()
    record = {"clip": clip_name(index, clip_dir), "folder": str(clip_dir), "frames": len(index["frames"]), "cameras": list(cams),
              "lane_camera": truth.lane_camera, "gt_visibility": str(GtVisibility(gt_visibility)), "gt_boxes": len(truth.boxes.score),
              "gt_boxes_unseen": truth.unseen, "instants": tokens}  # fmt: skip
    return ClipDetections(clip_dir, record, len(tokens), _concat_boxes(pred_parts), _concat_lanes(lane_f, lane_p, lane_c), truth.boxes,
                          truth.lanes)  # fmt: skip


def write_detect_output(out: Path, parts: list[ClipDetections], spec: str, link_videos: bool = True) -> dict[str, Any]:
    """Merge clip parts, in order, into the output folder (module docstring) and write `detect.json` last.

    Args:
        out: the output folder (one side of a report).
        parts: the clips' parts; two clips of one name are refused (their frame keys would collide).
        spec: the detector's name (recorded in detect.json).
        link_videos: also link `out/videos/<clip>/<camera>.mp4` to the clips' videos (and write their calibration.json).

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
        for p in parts:
            _link_videos(p.clip_dir, tuple(p.record.get("cameras") or read_index(p.clip_dir)["cameras"]), out / "videos")
    doc = {"format": DETECT_FORMAT, "detector": spec, "clips": [p.record for p in parts], "frames": sum(p.frames for p in parts),
           "gt_boxes": sum(int(p.record.get("gt_boxes", 0)) for p in parts),
           "gt_boxes_unseen": sum(int(p.record.get("gt_boxes_unseen", 0)) for p in parts),
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


def run_detector(clips: Path, out: Path, detector: Detector, spec: str, progress: StepProgress | None = None,
                 cameras: dict[Path, tuple[str, ...]] | None = None, gt_visibility: GtVisibility = GtVisibility.VISIBLE) -> dict[str, Any]:  # fmt: skip
    """Detect on every labelled instant of every clip under `clips` and write `out` (module docstring).

    Args:
        clips: a clip folder, a folder of them, or a folder of such folders.
        out: the output folder (one side of a report).
        detector: the callable.
        spec: how it was named (recorded in detect.json).
        progress: `(step, frames done, frames)`.
        cameras: each clip folder's evaluated cameras (`clip_folders.evaluated_cameras`; default all).
        gt_visibility: which labelled boxes are ground truth.

    Returns:
        the detect.json document.
    """
    folders = list_clip_folders(clips)
    total = sum(len(read_index(c)["frames"]) for c in folders)
    done = [0]

    def on_frame() -> None:
        done[0] += 1
        report_step(progress, f"detect {clips.name}", done[0], total)

    parts = [detect_clip(c, detector, spec, on_frame, (cameras or {}).get(c), gt_visibility) for c in folders]
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


def _link_videos(clip_dir: Path, cameras: tuple[str, ...], videos: Path) -> None:
    """OUT/videos/<clip>/<camera>.mp4 -> the clip's videos of `cameras` (the report's multi-view layout), and
    OUT/videos/<clip>/calibration.json: their cameras and mountings, and the ego pose of every video frame
    when each one is labelled (`avsim eval sampson --calibration` and the report read it)."""
    from avsim.core.cameras import camera_from_dict
    from avsim.evaluation.calibration import SampsonCalibration, calibration_document

    index = read_index(clip_dir)
    first = str(index["frames"][0]["video_clip"]) if index["frames"] else clip_name(index, clip_dir)
    target = join_names(videos, clip_name(index, clip_dir))
    target.mkdir(parents=True, exist_ok=True)
    for cam in cameras:
        link = join_names(target, f"{cam}.mp4")
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(video_path(clip_dir, first, str(cam)).resolve(), link)
    if not index["frames"]:
        return
    frames = sorted((f for f in index["frames"] if str(f["video_clip"]) == first), key=lambda f: int(f["video_frame"]))
    cal = {c: calibration(clip_dir, c, int(frames[0]["frame_index"])) for c in cameras}
    if not all(v.camera.get("width_px") for v in cal.values()):  # a plain OpenLane pinhole without its size: no model to write
        return
    every = [int(f["video_frame"]) for f in frames] == list(range(len(frames)))
    doc = calibration_document(SampsonCalibration(
        str(clip_dir), clip_dir, {c: camera_from_dict(v.camera) for c, v in cal.items()}, {c: v.ego_SE3_camera for c, v in cal.items()},
        np.asarray([f["world_SE3_ego"] for f in frames], np.float64) if every else None))  # fmt: skip
    with atomic_output_path(target / CALIBRATION_JSON) as tmp:
        tmp.write_text(json.dumps(doc, indent=1) + "\n")


def report_command(out: Path, generated: bool) -> str:
    """The `avsim eval report` line to run on `out` next (both sides, or one side and a GEN_OUT to give)."""
    if not generated:
        return f"avsim eval report --real {out} --generated GEN_OUT --gt {out / 'gt'}"
    return f"avsim eval report --real {out / 'real'} --generated {out / 'generated'} --gt {out / 'real' / 'gt'} --out {out / 'report'}"


def summary_lines(result: dict[str, Any], out: Path) -> list[str]:
    """What `avsim eval detect` and `avsim run eval detect` print: per side the frames, clips and
    ground-truth boxes (and how many no evaluated camera shows), then the next command.

    Args:
        result: `detect_sides`' result (`sides`, `report_command`).
        out: the output folder.

    Returns:
        The lines.
    """
    two = len(result["sides"]) > 1
    lines = []
    for side, doc in result["sides"].items():
        cams = sorted({c for clip in doc["clips"] for c in clip.get("cameras", ())})
        unseen = int(doc.get("gt_boxes_unseen", 0))
        gt = f"{doc.get('gt_boxes', 0)} ground-truth boxes" + (f" ({unseen} more seen by no evaluated camera, left out)" if unseen else "")
        lines.append(f"{side}: {doc['frames']} frames of {len(doc['clips'])} clip(s), cameras {', '.join(cams)}; {gt} -> "
                     f"{out / side if two else out}")  # fmt: skip
    return [*lines, f"next: {result['report_command']}"]


def detect_sides(clips: Path, out: Path, spec: str, generated: Path | None = None, progress: StepProgress | None = None,
                 cameras: tuple[str, ...] | None = None, gt_visibility: GtVisibility = GtVisibility.VISIBLE) -> dict[str, Any]:  # fmt: skip
    """`avsim eval detect`: one side into `out`, or with `generated` both sides into `out/real`
    and `out/generated` (ground truth from each side's labels under `<side>/gt`), each clip on its
    evaluated cameras (`clip_folders.evaluated_cameras`: `cameras`, else those both sides have).

    Returns:
        {"sides": {name: detect.json}, "report_command": the `avsim eval report` line to run next}.
    """
    detector = load_detector(spec)
    real = list_clip_folders(clips)
    gen = list_clip_folders(generated) if generated is not None else []
    cams = evaluated_cameras(real, gen, cameras)
    if generated is None:
        doc = run_detector(clips, out, detector, spec, progress, cams, gt_visibility)
        return {"sides": {"real": doc}, "report_command": report_command(out, False)}
    sides = {"real": run_detector(clips, out / "real", detector, spec, progress, cams, gt_visibility),
             "generated": run_detector(generated, out / "generated", detector, spec, progress, cams, gt_visibility)}  # fmt: skip
    return {"sides": sides, "report_command": report_command(out, True)}
