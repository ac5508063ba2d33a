"""`avsim eval sampson` as a library call: read clips (rectified as they are read), take F from the
calibration (or RANSAC, when asked), score, and describe what was done.

Camera names come from `camera` / `other_camera`, else from the clip's file name
(`<clip>.<camera>.mp4`, as `avsim render` writes it). Without a calibration the camera
models are the cosmos rig's (rectification only) and F must be estimated: `ransac=True`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.cameras import Camera
from avsim.core.errors import AvsimInputError
from avsim.core.progress import StepProgress
from avsim.evaluation.calibration import SampsonCalibration, calibration_from_scenario, load_calibration_json
from avsim.evaluation.matchers import Matcher
from avsim.evaluation.rectify import RectifyConfig
from avsim.evaluation.results import MetricTable
from avsim.evaluation.sampson import (
    FrameErrors,
    MatchConfig,
    PreparedView,
    RectifyMode,
    calibrated_temporal_F,
    cross_errors,
    fundamental_from_pose,
    prepare_view,
    temporal_errors,
    video_summary,
)

RENDER_FPS = 30.0  # `avsim render --fps` default (avsim.render.style.DEFAULT_FPS)
NO_F_SOURCE = "give --scenario DIR or --calibration FILE.json for F from the calibration, or --ransac to estimate F from the matches"


@dataclass(frozen=True)
class SampsonOptions:
    """Settings of one `avsim eval sampson` run (validated; see the command's --help)."""

    camera: str | None = None
    other_camera: str | None = None
    scenario: Path | None = None
    calibration: Path | None = None
    rig: str = "scenario"
    fps: float = RENDER_FPS
    start_frame: int = 0
    max_frames: int | None = None
    frame_gap: int = 1
    ransac: bool = False
    rectify: RectifyMode = "frames"
    rect: RectifyConfig = field(default_factory=RectifyConfig)
    match: MatchConfig = field(default_factory=MatchConfig)

    def __post_init__(self) -> None:
        checks = [
            (self.scenario is not None and self.calibration is not None, "--calibration", "give --scenario or --calibration, not both"),
            (not (np.isfinite(self.fps) and self.fps > 0), "--fps", f"must be > 0, got {self.fps}"),
            (self.start_frame < 0, "--start-frame", f"must be >= 0, got {self.start_frame}"),
            (self.max_frames is not None and self.max_frames < 1, "--max-frames", f"must be >= 1, got {self.max_frames}"),
            (self.frame_gap < 1, "--frame-gap", f"must be >= 1, got {self.frame_gap}"),
            (self.rectify not in ("frames", "keypoints", "none"), "--rectify", f"frames, keypoints or none, got {self.rectify!r}"),
        ]  # fmt: skip
        for bad, option, reason in checks:
            if bad:
                raise AvsimInputError("sampson", option, reason)

    @property
    def f_source(self) -> str:
        """How F is obtained, as the document names it."""
        if self.ransac:
            return "RANSAC"
        if self.scenario is not None:
            return f"calibration: scenario {self.scenario}"
        return f"calibration: {self.calibration}"


def _calibration(video: Path, opts: SampsonOptions) -> SampsonCalibration | None:
    if opts.scenario is not None:
        return calibration_from_scenario(opts.scenario, opts.fps, opts.start_frame, opts.rig)
    if opts.calibration is not None:
        return load_calibration_json(opts.calibration, opts.start_frame)
    if not opts.ransac:
        raise AvsimInputError(video, "calibration", NO_F_SOURCE)
    return None


def _camera_name(clip: Path, given: str | None, names: tuple[str, ...], option: str, required: bool) -> str | None:
    """`given`, else the camera whose name ends the clip's file name, else None (or an error)."""
    if given is not None:
        return given
    stem = clip.stem if clip.is_file() else clip.name
    hits = [n for n in names if stem == n or stem.endswith(f".{n}") or stem.endswith(f"_{n}")]
    if hits:
        return max(hits, key=len)
    if required:
        raise AvsimInputError(clip, option, f"no camera name in the file name; give {option} (one of {', '.join(names)})")
    return None


def _camera_model(clip: Path, name: str | None, cal: SampsonCalibration | None, size: tuple[int, int], option: str) -> Camera | None:
    if name is None:
        return None
    if cal is not None:
        return cal.camera(name, size[0], size[1], option)
    from avsim.core.rig import cosmos_rig

    rig = cosmos_rig(size[0], size[1])
    if name not in rig.names:
        raise AvsimInputError(clip, option, f"{name!r} is not a cosmos rig camera ({', '.join(rig.names)}); give --scenario or --calibration")
    return rig.camera(name)


def _frame_count(clip: Path, max_frames: int | None) -> int:
    """Frames the clip will give (for the progress bar; 0 when the container does not say)."""
    from avsim.evaluation.video_frames import IMAGE_SUFFIXES

    if clip.is_dir():
        n = sum(1 for p in clip.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    else:
        try:
            import av

            with av.open(str(clip)) as container:
                n = int(container.streams.video[0].frames) if container.streams.video else 0
        except Exception:  # the reader reports unreadable files with a proper message
            n = 0
    if max_frames is None:
        return n
    return min(n, max_frames) if n else max_frames


@dataclass(frozen=True, eq=False)
class _View:
    clip: Path
    name: str | None
    view: PreparedView


def _read_view(clip: Path, given: str | None, option: str, cal: SampsonCalibration | None, opts: SampsonOptions,
               progress: StepProgress | None) -> _View:  # fmt: skip
    """Read (and rectify) one clip; its camera model is resolved from the first frame's size."""
    from avsim.core.rig import COSMOS_VIEW_NAMES
    from avsim.evaluation.video_frames import iter_frames

    names = cal.names if cal is not None else COSMOS_VIEW_NAMES
    name = _camera_name(clip, given, names, option, required=cal is not None)
    frames: Iterator[np.ndarray] = islice(iter_frames(clip), opts.max_frames)
    first = next(frames, None)
    if first is None:
        raise AvsimInputError(clip, "frames", "clip has no frames")
    camera = _camera_model(clip, name, cal, (first.shape[1], first.shape[0]), option)
    total = _frame_count(clip, opts.max_frames)
    step = f"read + rectify {name or clip.name}"
    return _View(clip, name, prepare_view(chain([first], frames), camera, opts.rectify, opts.rect, progress, step, total))


def _need_K(v: _View) -> np.ndarray:
    if v.view.K is None:
        raise AvsimInputError(v.clip, "--rectify", "calibrated F needs rectified frames (--rectify frames or keypoints) or an undistorted pinhole camera")
    return v.view.K


def _tse(v: _View, cal: SampsonCalibration | None, opts: SampsonOptions, matcher: Matcher,
         progress: StepProgress | None) -> list[FrameErrors]:  # fmt: skip
    n = len(v.view.frames)
    if n <= opts.frame_gap:
        raise AvsimInputError(v.clip, "frames", f"{n} frames: TSE needs more than --frame-gap {opts.frame_gap}")
    Fs = None
    if cal is not None and not opts.ransac:
        assert v.name is not None  # a calibration always names the camera
        poses = cal.camera_poses(v.name)
        if len(poses) < n:
            raise AvsimInputError(cal.path, "poses", f"{len(poses)} frame poses from --start-frame {opts.start_frame}, the clip has {n} frames")
        K = _need_K(v)
        Fs = calibrated_temporal_F(poses[:n], K, opts.frame_gap, opts.match.min_baseline_m)
    return temporal_errors(v.view, opts.match, Fs, opts.frame_gap, matcher, progress, f"match {v.name or v.clip.name} t, t+{opts.frame_gap}")


def _cse(v0: _View, v1: _View, cal: SampsonCalibration | None, opts: SampsonOptions, matcher: Matcher,
         progress: StepProgress | None) -> list[FrameErrors]:  # fmt: skip
    F = None
    if cal is not None and not opts.ransac:
        assert v0.name is not None and v1.name is not None
        rel = cal.rig_pose(v0.name, v1.name)
        F = fundamental_from_pose(rel, _need_K(v0), _need_K(v1), opts.match.min_baseline_m)
        if F is None:
            raise AvsimInputError(cal.path, "cameras", f"{v0.name} and {v1.name} are {np.linalg.norm(rel[:3, 3]):.3f} m apart: "
                                  "no epipolar geometry (their images are related by a homography)")  # fmt: skip
    errs, _ = cross_errors(v0.view, v1.view, opts.match, F, matcher, progress, f"match {v0.name or 'video'} / {v1.name or 'other'}")
    return errs


def _describe_rect(views: list[_View]) -> dict[str, Any]:
    return {v.name or v.clip.name: v.view.rectification for v in views}


def _rows(kind: str, s: dict[str, Any], opts: SampsonOptions, views: list[_View]) -> list[list[Any]]:
    m = s["matches"]
    rect = views[0].view.rectification
    rect_txt = "none" if rect["mode"] == "none" else f"{rect['mode']} -> {rect['width_px']}x{rect['height_px']} pinhole, {rect['hfov_deg']:g} deg hfov"
    skipped = ", ".join(f"{n} {why}" for why, n in s["skipped"].items()) or "0"
    unit = "frame pairs" if kind == "TSE" else "frames"
    return [
        [f"{kind} median of frame medians (px)", s["median_of_frame_medians_px"]],
        [f"{kind} mean of frame means (px)", s["mean_of_frame_means_px"]],
        [f"{unit} scored / total", f"{s['frames'] - s['frames_without_f']} / {s['frames']}"],
        [f"{unit} skipped", skipped],
        ["matches: total (per frame min / median / max)", f"{m['total']} ({m['per_frame_min']} / {m['per_frame_median']:g} / {m['per_frame_max']})"],
        ["cameras", " / ".join(v.name or "(no model)" for v in views)],
        ["F", opts.f_source],
        ["rectification", rect_txt],
    ]  # fmt: skip


def sampson_table(video: Path, other: Path | None, opts: SampsonOptions, matcher: Matcher | None = None,
                  progress: StepProgress | None = None) -> MetricTable:  # fmt: skip
    """TSE of `video`, or CSE of `video` against `other` (same instants), as a printable table.

    Args:
        video: clip (video file or frame folder).
        other: the second view for CSE, or None for TSE.
        opts: the run's settings.
        matcher: keypoint matcher (default SIFT + ratio test with `opts.match`).
        progress: called per frame read and rectified and per pair matched.

    Returns:
        The table and the JSON document (errors, match counts, F source, rectification, frames).
    """
    t0 = time.perf_counter()
    cal = _calibration(video, opts)
    matcher = matcher or opts.match.matcher()
    views = [_read_view(video, opts.camera, "--camera", cal, opts, progress)]
    if other is None:
        kind, errs = "TSE", _tse(views[0], cal, opts, matcher, progress)
    else:
        views.append(_read_view(other, opts.other_camera, "--other-camera", cal, opts, progress))
        kind, errs = "CSE", _cse(views[0], views[1], cal, opts, matcher, progress)
    summary = video_summary(errs)
    frames_used = {"read": [len(v.view.frames) for v in views], "start_frame": opts.start_frame if cal is not None else None,
                   "fps": opts.fps if opts.scenario is not None else None, "frame_gap": opts.frame_gap if kind == "TSE" else None}  # fmt: skip
    doc = {"metric": kind, **summary, "clips": [str(v.clip) for v in views], "cameras": [v.name for v in views],
           "f_source": opts.f_source, "rectification": _describe_rect(views), "matching": {**opts.match.as_dict(), **matcher.describe()},
           "frames_used": frames_used, "seconds": round(time.perf_counter() - t0, 3)}  # fmt: skip
    return MetricTable(f"{kind} (Sampson error)", ["quantity", "value"], _rows(kind, summary, opts, views), doc)
