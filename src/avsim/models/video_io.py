"""Video input/output of the generation pipeline (PyAV via `avsim.core.video`; H.264 yuv420p).

- Finding per-view control videos in the renderer's layouts:
  ``<dir>/<clip>/<clip>.<camera>.mp4`` (what `avsim render` writes), ``<dir>/<clip>.<camera>.mp4``,
  and the post-training layout ``<dir>/control_input_hdmap_bbox/ftheta_<camera>/<clip>.mp4``
  (also ``<dir>/videos/ftheta_<camera>/<clip>.mp4`` for RGB input videos).
- Reading frames at the model rate (every round(fps / 10)-th frame) resized to the model size
  (bilinear, antialiased).
- Writing one mp4 per view and a labelled grid mp4.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from avsim.core.errors import AvsimInputError
from avsim.core.rig import MOSAIC_ORDER
from avsim.core.video import MP4Writer, iter_video_frames, video_info

# Grid order of the render spec's mosaic (row-major, 3 columns).
GRID_ORDER: tuple[str, ...] = MOSAIC_ORDER


def resolve_camera(name: str, cameras: Sequence[str]) -> str:
    """Accept a full camera name or a short one (`front_wide`, `camera_front_wide`)."""
    if name in cameras:
        return name
    short = name.removeprefix("camera_")
    hits = [c for c in cameras if c.removeprefix("camera_").startswith(short + "_") or c.removeprefix("camera_") == short]
    if len(hits) != 1:
        raise AvsimInputError("--views", name, f"unknown camera; choose from {', '.join(cameras)}")
    return hits[0]


def find_view_videos(
    directory: str | Path, cameras: Sequence[str], clip: str | None = None, kind: str = "control"
) -> tuple[str, dict[str, Path]]:
    """Locate one mp4 per camera; returns (clip id, {camera: path}).

    Searches the layouts listed in the module docstring; in the post-training layout `kind`
    ("control" or "rgb") picks `control_input_hdmap_bbox/` or `videos/`. Several clips in one
    folder need `clip`.
    """
    sub = "control_input_hdmap_bbox" if kind == "control" else "videos"
    root = Path(directory)
    if not root.is_dir():
        raise AvsimInputError(root, "directory", "not a folder")
    candidates: dict[str, dict[str, Path]] = {}
    for cam in cameras:
        patterns = [f"*/*.{cam}.mp4", f"*.{cam}.mp4", f"{sub}/ftheta_{cam}/*.mp4", f"ftheta_{cam}/*.mp4"]
        for pattern in patterns:
            for path in sorted(root.glob(pattern)):
                clip_id = path.name[: -len(f".{cam}.mp4")] if path.name.endswith(f".{cam}.mp4") else path.stem
                candidates.setdefault(clip_id, {}).setdefault(cam, path)
    if clip is not None:
        candidates = {k: v for k, v in candidates.items() if k == clip}
    complete = {k: v for k, v in candidates.items() if all(c in v for c in cameras)}
    if not complete:
        found = {k: sorted(v) for k, v in candidates.items()}
        raise AvsimInputError(root, "videos", f"no clip with a video for every view {list(cameras)}; found {found or 'none'}")
    if len(complete) > 1:
        raise AvsimInputError(root, "clip", f"several clips found ({', '.join(sorted(complete))}); choose one with --clip")
    clip_id, paths = next(iter(complete.items()))
    return clip_id, {c: paths[c] for c in cameras}


def frame_stride(fps: float, model_fps: float) -> int:
    """Take every n-th frame so that fps / n is the model rate (30 fps -> 3 at 10 fps)."""
    if fps <= 0:
        return 1
    return max(1, round(fps / model_fps))


def read_model_frames(
    path: Path, num_frames: int, height_px: int, width_px: int, model_fps: float, start: int = 0
) -> torch.Tensor:
    """`num_frames` frames at the model rate from model-frame `start`: (T, 3, H, W) uint8."""
    info = video_info(path)
    stride = frame_stride(float(info["fps"]), model_fps)
    wanted = range(start * stride, (start + num_frames) * stride, stride)
    frames = []
    for i, frame in enumerate(iter_video_frames(path)):
        if i in wanted:
            frames.append(frame)
            if len(frames) == num_frames:
                break
    if len(frames) < num_frames:
        raise AvsimInputError(path, "frames", f"need {num_frames} frames at {model_fps:g} fps from frame {start} "
                              f"(stride {stride}); the video has too few")
    return resize_frames(torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2), height_px, width_px)


def resize_frames(frames: torch.Tensor, height_px: int, width_px: int) -> torch.Tensor:
    """(T, 3, H, W) uint8 -> (T, 3, height, width) uint8, bilinear with antialiasing."""
    if frames.shape[-2:] == (height_px, width_px):
        return frames
    out = F.interpolate(frames.float(), size=(height_px, width_px), mode="bilinear", antialias=True, align_corners=False)
    return out.round().clamp(0, 255).to(torch.uint8)


def to_model_range(frames: torch.Tensor) -> torch.Tensor:
    """(T, 3, H, W) uint8 -> (1, 3, T, H, W) float32 in [-1, 1] (x / 127.5 - 1)."""
    return (frames.float() / 127.5 - 1.0).permute(1, 0, 2, 3)[None]


def to_uint8(video: torch.Tensor) -> torch.Tensor:
    """(1, 3, T, H, W) in [-1, 1] -> (T, 3, H, W) uint8."""
    return ((video[0].float().clamp(-1, 1) + 1.0) * 127.5).round().to(torch.uint8).permute(1, 0, 2, 3)


def write_video(path: Path, frames: torch.Tensor, fps: float) -> None:
    """(T, 3, H, W) uint8 -> H.264 yuv420p mp4 (deterministic bytes)."""
    _t, _, h, w = frames.shape
    with MP4Writer(path, w, h, fps=fps) as writer:
        for f in frames.permute(0, 2, 3, 1).numpy():
            writer.write(np.ascontiguousarray(f))


def grid_frames(views: dict[str, torch.Tensor], max_width_px: int = 1920) -> torch.Tensor:
    """Mosaic (3 columns, render-spec order) of per-view (T, 3, H, W) uint8 with camera labels."""
    import cv2

    names = [c for c in GRID_ORDER if c in views] + [c for c in views if c not in GRID_ORDER]
    t, _, h, w = next(iter(views.values())).shape
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    scale = min(1.0, max_width_px / (cols * w))
    ch, cw = max(2, int(h * scale) // 2 * 2), max(2, int(w * scale) // 2 * 2)
    grid = np.zeros((t, rows * ch, cols * cw, 3), np.uint8)
    font_scale = max(0.3, ch / 720 * 1.2)
    for k, name in enumerate(names):
        cell = resize_frames(views[name], ch, cw).permute(0, 2, 3, 1).numpy()
        r, c = divmod(k, cols)
        block = np.ascontiguousarray(cell)
        label = name.removeprefix("camera_")
        for f in block:
            cv2.putText(f, label, (4, int(14 * font_scale / 0.4)), cv2.FONT_HERSHEY_SIMPLEX, font_scale,
                        (255, 255, 255), 1, cv2.LINE_AA)
        grid[:, r * ch : (r + 1) * ch, c * cw : (c + 1) * cw] = block
    return torch.from_numpy(grid).permute(0, 3, 1, 2)


__all__ = [
    "GRID_ORDER",
    "find_view_videos",
    "frame_stride",
    "grid_frames",
    "read_model_frames",
    "resize_frames",
    "resolve_camera",
    "to_model_range",
    "to_uint8",
    "write_video",
]
