"""Video input/output of the generation pipeline (PyAV via `avsim.core.video`; H.264 yuv420p).

- Finding per-view control videos in the renderer's layouts:
  ``<dir>/<clip>/<clip>.<camera>.mp4`` (what `avsim render` writes), ``<dir>/<clip>.<camera>.mp4``,
  and the post-training layout ``<dir>/control_input_hdmap_bbox/ftheta_<camera>/<clip>.mp4``
  (also ``<dir>/videos/ftheta_<camera>/<clip>.mp4`` for RGB input videos).
- Reading frames at the model rate, chosen by their presentation times (`frame_times_s`,
  `select_frames`: the frame shown at each 1/10 s step; every 3rd frame of a 30 fps video),
  resized to the model size (bilinear, antialiased).
- Writing one mp4 per view and a labelled grid mp4.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import av
import numpy as np
import torch
import torch.nn.functional as F

from avsim.core.errors import AvsimInputError
from avsim.core.mosaic import camera_rows, mosaic_layout
from avsim.core.rig import cosmos_rig
from avsim.core.video import MP4Writer, iter_video_frames


def resolve_camera(name: str, cameras: Sequence[str]) -> str:
    """Accept a full camera name or a short one (`front_wide`, `camera_front_wide`)."""
    if name in cameras:
        return name
    short = name.removeprefix("camera_")
    hits = [c for c in cameras if c.removeprefix("camera_").startswith(short + "_") or c.removeprefix("camera_") == short]
    if len(hits) != 1:
        raise AvsimInputError("--views", name, f"unknown camera; choose from {', '.join(cameras)}")
    return hits[0]


def _clip_videos(root: Path, cameras: Sequence[str], kind: str) -> dict[str, dict[str, Path]]:
    """clip id -> {camera: path} of every mp4 found for `cameras` (complete or not), sorted by clip id."""
    sub = "control_input_hdmap_bbox" if kind == "control" else "videos"
    if not root.is_dir():
        raise AvsimInputError(root, "directory", "not a folder")
    candidates: dict[str, dict[str, Path]] = {}
    for cam in cameras:
        patterns = [f"*/*.{cam}.mp4", f"*.{cam}.mp4", f"{sub}/ftheta_{cam}/*.mp4", f"ftheta_{cam}/*.mp4"]
        for pattern in patterns:
            for path in sorted(root.glob(pattern)):
                clip_id = path.name[: -len(f".{cam}.mp4")] if path.name.endswith(f".{cam}.mp4") else path.stem
                candidates.setdefault(clip_id, {}).setdefault(cam, path)
    return dict(sorted(candidates.items()))


def view_clips(directory: str | Path, cameras: Sequence[str], kind: str = "control") -> dict[str, dict[str, Path]]:
    """Every clip of a folder that has an mp4 for each of `cameras`: clip id -> {camera: path}, sorted by clip id.

    Searches the layouts listed in the module docstring; in the post-training layout `kind`
    ("control" or "rgb") picks `control_input_hdmap_bbox/` or `videos/`.

    Args:
        directory: the folder.
        cameras: the views every clip must have.
        kind: "control" or "rgb".

    Returns:
        The complete clips (possibly none), views in the order of `cameras`.
    """
    found = _clip_videos(Path(directory), cameras, kind)
    return {k: {c: v[c] for c in cameras} for k, v in found.items() if all(c in v for c in cameras)}


def find_view_videos(
    directory: str | Path, cameras: Sequence[str], clip: str | None = None, kind: str = "control"
) -> tuple[str, dict[str, Path]]:
    """Locate one mp4 per camera; returns (clip id, {camera: path}).

    Searches the layouts listed in the module docstring (`view_clips`); several clips in one
    folder need `clip`.
    """
    found = {k: v for k, v in _clip_videos(Path(directory), cameras, kind).items() if clip is None or k == clip}
    complete = {k: {c: v[c] for c in cameras} for k, v in found.items() if all(c in v for c in cameras)}
    if not complete:
        listed = {k: sorted(v) for k, v in found.items()}
        raise AvsimInputError(Path(directory), "videos", f"no clip with a video for every view {list(cameras)}; found {listed or 'none'}")
    if len(complete) > 1:
        raise AvsimInputError(Path(directory), "clip", f"several clips found ({', '.join(sorted(complete))}); choose one with --clip")
    clip_id, paths = next(iter(complete.items()))
    return clip_id, paths


def frame_stride(fps: float, model_fps: float) -> int:
    """The nominal number of source frames per model frame (30 fps -> 3 at 10 fps); frames are chosen by `select_frames`."""
    if fps <= 0:
        return 1
    return max(1, round(fps / model_fps))


def frame_times_s(path: Path) -> np.ndarray:
    """Presentation times of a video's frames, in display (decode output) order, from the container's packets.

    Only packets are read (no frame is decoded); times are relative to the first frame.

    Args:
        path: a video file.

    Returns:
        (N,) float64 seconds, increasing, the first 0.

    Raises:
        AvsimInputError: the file cannot be read, has no video stream or no frame with a time.
    """
    path = Path(path)
    if not path.is_file():
        raise AvsimInputError(path, "file", "video file not found")
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise AvsimInputError(path, "streams", "no video stream")
            stream = container.streams.video[0]
            base = float(stream.time_base or 0)
            pts = [packet.pts for packet in container.demux(stream) if packet.pts is not None and packet.size]
    except av.error.FFmpegError as exc:
        raise AvsimInputError(path, "container", f"cannot read the frame times: {exc}") from exc
    if not pts or base <= 0:
        raise AvsimInputError(path, "frames", "no frame with a presentation time")
    ticks = np.sort(np.asarray(pts, np.int64))
    return (ticks - ticks[0]).astype(np.float64) * base


def select_frames(times_s: np.ndarray, rate_hz: float, count: int, start: int = 0, source: object = "video") -> np.ndarray:
    """The source frame shown at each of `count` times `(start + k) / rate_hz` after the first frame.

    A frame is shown from its time until the next frame's; the frame selected for time t is the
    one whose time is nearest to t, and it must lie within half a source frame interval (the
    median spacing) of t: a 30 fps video gives frames 0, 3, 6, ... for 10 Hz, a 10 fps video
    every frame, and a gap (dropped frames) or the end of the video is an error, never a
    silently repeated frame.

    Args:
        times_s: (N,) increasing frame times in seconds (`frame_times_s`).
        rate_hz: the rate of the selected frames (the model rate).
        count: how many frames to select.
        start: the first selected time, in frames at `rate_hz`.
        source: named in an error (the video path).

    Returns:
        (count,) int64 source frame indices.

    Raises:
        AvsimInputError: a requested time has no frame within half a source interval.
    """
    times = np.asarray(times_s, np.float64)
    interval_s = float(np.median(np.diff(times))) if times.size > 1 else 1.0 / rate_hz
    wanted_s = times[0] + (start + np.arange(count, dtype=np.float64)) / rate_hz
    after = np.searchsorted(times, wanted_s)
    before, after = np.clip(after - 1, 0, times.size - 1), np.clip(after, 0, times.size - 1)
    nearest = np.where(np.abs(times[before] - wanted_s) <= np.abs(times[after] - wanted_s), before, after)
    off_s = np.abs(times[nearest] - wanted_s)
    bad = np.flatnonzero(off_s > 0.5 * interval_s + 1e-6)
    if bad.size:
        k = int(bad[0])
        if wanted_s[k] > times[-1]:
            raise AvsimInputError(source, "frames", f"need {count} frames at {rate_hz:g} fps from frame {start} "
                                  f"(up to t={wanted_s[-1]:.3f} s); the video has too few (it ends at t={times[-1]:.3f} s)")  # fmt: skip
        raise AvsimInputError(source, "frames", f"no frame within half a frame interval of t={wanted_s[k]:.3f} s "
                              f"(nearest at {times[nearest[k]]:.3f} s): the video has a gap")  # fmt: skip
    return nearest.astype(np.int64)


def read_frames(path: Path, indices: np.ndarray, height_px: int, width_px: int) -> torch.Tensor:
    """Frames `indices` (increasing, in display order) of a video, resized: (T, 3, H, W) uint8.

    Args:
        path: the video.
        indices: (T,) increasing source frame indices (`select_frames`).
        height_px, width_px: the output size (bilinear, antialiased).

    Returns:
        (T, 3, height_px, width_px) uint8.
    """
    wanted = [int(i) for i in indices]
    position = {index: k for k, index in enumerate(wanted)}
    frames: list[np.ndarray | None] = [None] * len(wanted)
    for i, frame in enumerate(iter_video_frames(path)):
        if i in position:
            frames[position[i]] = frame
        if i >= wanted[-1]:
            break
    kept = [f for f in frames if f is not None]
    if len(kept) != len(wanted):
        raise AvsimInputError(path, "frames", f"needs frame {wanted[-1]}; the video decodes fewer frames than its packets")
    return resize_frames(torch.from_numpy(np.stack(kept)).permute(0, 3, 1, 2), height_px, width_px)


def read_model_frames(
    path: Path, num_frames: int, height_px: int, width_px: int, model_fps: float, start: int = 0
) -> torch.Tensor:
    """`num_frames` frames at the model rate from model-frame `start`, chosen by time (`select_frames`): (T, 3, H, W) uint8."""
    indices = select_frames(frame_times_s(path), model_fps, num_frames, start, source=path)
    return read_frames(path, indices, height_px, width_px)


def resample(images: torch.Tensor, height_px: int, width_px: int) -> torch.Tensor:
    """The generator's resampling of control frames to the model size: bilinear, antialiased, pixel
    centres aligned as `align_corners=False` (a point at pixel-centre coordinate u of the source is
    at (u + 0.5) * s - 0.5 in the output, s = output / source size per axis).

    Args:
        images: (N, C, H, W) float.
        height_px, width_px: the output size.

    Returns:
        (N, C, height_px, width_px) float32.
    """
    return F.interpolate(images.float(), size=(height_px, width_px), mode="bilinear", antialias=True, align_corners=False)


def resize_frames(frames: torch.Tensor, height_px: int, width_px: int) -> torch.Tensor:
    """(T, 3, H, W) uint8 -> (T, 3, height, width) uint8 by `resample`."""
    if frames.shape[-2:] == (height_px, width_px):
        return frames
    return resample(frames, height_px, width_px).round().clamp(0, 255).to(torch.uint8)


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


def grid_frames(views: dict[str, torch.Tensor], max_size_px: tuple[int, int] = (1920, 1080)) -> torch.Tensor:
    """Mosaic of per-view (T, 3, H, W) uint8 with camera labels, in the render mosaic's layout
    (`avsim.core.mosaic.camera_rows` of the model rig: front row, sides, rear; every row as wide,
    no empty cell), views at their own size in the widest row unless the grid would exceed
    `max_size_px`.

    Args:
        views: view name -> (T, 3, H, W) uint8 (every view the same shape).
        max_size_px: (width, height) the grid fits in.

    Returns:
        (T, 3, grid height, grid width) uint8.
    """
    import cv2

    t, _, h, w = next(iter(views.values())).shape
    layout = mosaic_layout(camera_rows(list(views), cosmos_rig()), w - w % 2, h, max_size_px=max_size_px)
    grid = np.zeros((t, layout.height_px, layout.width_px, 3), np.uint8)
    for tile in layout.tiles:
        block = np.ascontiguousarray(resize_frames(views[tile.camera], tile.height_px, tile.width_px).permute(0, 2, 3, 1).numpy())
        font_scale = max(0.3, tile.height_px / 720 * 1.2)
        label = tile.camera.removeprefix("camera_")
        for f in block:
            cv2.putText(f, label, (4, int(14 * font_scale / 0.4)), cv2.FONT_HERSHEY_SIMPLEX, font_scale,
                        (255, 255, 255), 1, cv2.LINE_AA)
        grid[:, tile.y_px : tile.y_px + tile.height_px, tile.x_px : tile.x_px + tile.width_px] = block
    return torch.from_numpy(grid).permute(0, 3, 1, 2)


__all__ = [
    "find_view_videos",
    "frame_stride",
    "frame_times_s",
    "grid_frames",
    "read_frames",
    "read_model_frames",
    "select_frames",
    "resample",
    "resize_frames",
    "resolve_camera",
    "to_model_range",
    "view_clips",
    "to_uint8",
    "write_video",
]
