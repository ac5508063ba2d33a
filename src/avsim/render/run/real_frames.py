"""Real camera frames for `avsim render --overlay`: where they are, when they were taken, their size.

A camera's real frames are a video (`DIR/<clip>.<camera>.mp4` or `DIR/<camera>.mp4`; frame
times from the stream's pts) or an image folder `DIR/<camera>/*.jpg|jpeg|png`. An image's time
is the integer its file name ends in: 16 digits are microseconds (nuScenes
`..__<us>.jpg`), 19 digits nanoseconds; other names need `--overlay-fps F` (images in name
order at F frames/s, which also overrides name times). Real time 0 is the first real frame, which
is the render's first frame unless `--overlay-offset S` (render time t shows real time t + S).
Render frame k pairs with the real frame nearest in time; a render that runs past the real clip
by more than half a real frame period, or real frames whose size differs from the render's
with another aspect ratio (> 1 %), is an AvsimInputError before anything is rendered. Frames of
the same aspect ratio are resized (INTER_AREA), and `RealCamera.resized` says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from avsim.core.digest import input_digest
from avsim.core.errors import AvsimInputError
from avsim.core.image import image_size_px, read_image_rgb
from avsim.core.safe_files import regular_file
from avsim.core.typing import NDArrayByte, NDArrayFloat, NDArrayInt
from avsim.core.video import check_complete, check_frame_size, iter_video_frames, open_video

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
ASPECT_TOLERANCE = 0.01  # relative aspect-ratio difference below which real frames are resized
_TRAILING_INT = re.compile(r"(\d+)$")
_DIGITS_TO_S = {16: 1e-6, 19: 1e-9}  # microseconds (nuScenes), nanoseconds


@dataclass(frozen=True)
class RealCamera:
    """One camera's real frames, their times and how they pair with the render frames.

    `video` (a video file) or `images` (files in time order) is set. `times_s (N,)` are the real
    frame times relative to the first; `pick (K,)` is the real frame index of each render frame.
    """

    camera: str
    source: Path
    video: Path | None
    images: tuple[Path, ...]
    times_s: NDArrayFloat
    size_px: tuple[int, int]  # (width, height) of the real frames
    render_size_px: tuple[int, int]
    pick: NDArrayInt

    def __post_init__(self) -> None:
        if (self.video is None) == (len(self.images) == 0):
            raise ValueError("a real camera has either a video or images")
        if len(self.pick) and (int(np.max(self.pick)) >= len(self.times_s) or int(np.min(self.pick)) < 0):
            raise ValueError("pick indexes past the real frames")

    @property
    def resized(self) -> bool:
        """Whether the real frames are resized to the render size."""
        return self.size_px != self.render_size_px

    def message(self) -> str:
        """One line for the user when the frames are resized ("" when not).

        Returns:
            "<camera>: real frames <source> resized WxH -> wxh" or "".
        """
        if not self.resized:
            return ""
        (w, h), (rw, rh) = self.size_px, self.render_size_px
        return f"{self.camera}: real frames {self.source} resized {w}x{h} -> {rw}x{rh}"

    def digest(self) -> str:
        """Content digest of the real frames (`avsim.core.digest.input_digest`).

        Returns:
            64 hex characters over the files' names and bytes.
        """
        files = [self.video] if self.video is not None else list(self.images)
        return input_digest(files, self.source if self.video is None else self.source.parent, {"camera": self.camera})


def find_source(folder: Path, camera: str, clip_id: str) -> Path:
    """Where one camera's real frames are.

    Args:
        folder: the `--overlay` folder.
        camera: camera name.
        clip_id: clip id (without chunk suffix).

    Returns:
        The video file or image folder.
    """
    if not folder.is_dir():
        raise AvsimInputError(folder, "--overlay", "not a folder of real camera frames")
    for candidate in (folder / f"{clip_id}.{camera}.mp4", folder / f"{camera}.mp4"):
        if candidate.exists() or candidate.is_symlink():
            return regular_file(candidate, "video")  # a FIFO or device is named, not taken for missing
    image_dir = folder / camera
    if image_dir.is_dir() and _image_files(image_dir):
        return image_dir
    raise AvsimInputError(folder, camera, f"no real frames: expected {clip_id}.{camera}.mp4, {camera}.mp4 or {camera}/*.jpg|png")


def _image_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def video_times_s(path: Path) -> tuple[NDArrayFloat, tuple[int, int]]:
    """Presentation times of a video's frames (from the packets' pts, nothing decoded) and its size.

    Args:
        path: video file.

    Returns:
        (N,) seconds relative to the first frame, ascending, and (width, height).
    """
    container, stream = open_video(path)  # no video stream, a FIFO, too large a frame: one line each
    try:
        with container:
            base = stream.time_base if stream.time_base is not None else Fraction(1, 1)
            pts = sorted(int(p.pts) for p in container.demux(stream) if p.pts is not None)
            size = (int(stream.width), int(stream.height))
            listed = int(stream.frames or 0)
    except av.error.FFmpegError as exc:
        raise AvsimInputError(path, "video", f"cannot read the real video: {exc}") from None
    check_complete(path, len(pts), listed)
    if not pts:
        raise AvsimInputError(path, "frames", "the real video has no frames")
    times = np.asarray([float((p - pts[0]) * base) for p in pts], np.float64)
    return times, size


def image_times_s(files: list[Path], fps: float | None) -> tuple[list[Path], NDArrayFloat]:
    """Times of an image folder's frames (see the module docstring for the naming rule).

    Args:
        files: the images, sorted by name.
        fps: `--overlay-fps` (None: times from the names).

    Returns:
        The files in time order and (N,) seconds relative to the first.
    """
    if fps is not None:
        return files, np.arange(len(files), dtype=np.float64) / fps
    stamps = []
    for path in files:
        match = _TRAILING_INT.search(path.stem)
        scale = _DIGITS_TO_S.get(len(match.group(1))) if match else None
        if match is None or scale is None:
            raise AvsimInputError(path, "name", "no 16-digit (us) or 19-digit (ns) timestamp at the end of the name; give --overlay-fps F")
        stamps.append((int(match.group(1)), scale))
    order = sorted(range(len(files)), key=lambda i: stamps[i][0])
    t0 = stamps[order[0]][0]
    return [files[i] for i in order], np.asarray([(stamps[i][0] - t0) * stamps[i][1] for i in order], np.float64)


def nearest_frames(real_times_s: NDArrayFloat, render_times_s: NDArrayFloat) -> NDArrayInt:
    """Index of the real frame nearest in time to each render time (compared in whole ns; ties: the earlier frame).

    Args:
        real_times_s: (N,) ascending real frame times.
        render_times_s: (K,) render frame times on the same clock.

    Returns:
        (K,) int64 indices into `real_times_s`.
    """
    real_ns = np.round(np.asarray(real_times_s, np.float64) * 1e9).astype(np.int64)  # exact ties in whole ns
    render_ns = np.round(np.asarray(render_times_s, np.float64) * 1e9).astype(np.int64)
    right = np.clip(np.searchsorted(real_ns, render_ns, side="left"), 0, len(real_ns) - 1)
    left = np.clip(right - 1, 0, len(real_ns) - 1)
    take_left = np.abs(render_ns - real_ns[left]) <= np.abs(real_ns[right] - render_ns)
    return np.where(take_left, left, right).astype(np.int64)


def _check_duration(source: Path, real_times_s: NDArrayFloat, render_times_s: NDArrayFloat, fps: float) -> None:
    period = float(np.median(np.diff(real_times_s))) if len(real_times_s) > 1 else 0.0
    late = float(render_times_s.max()) - float(real_times_s[-1])
    early = float(real_times_s[0]) - float(render_times_s.min())
    if late > period / 2 + 1e-9 or early > period / 2 + 1e-9:
        real_rate = f"{1 / period:g} fps" if period > 0 else "1 frame"
        raise AvsimInputError(
            source, "duration",
            f"the render ({len(render_times_s)} frames at {fps:g} fps, {render_times_s.min():.3f}-{render_times_s.max():.3f} s) "
            f"runs past the real frames ({len(real_times_s)} at {real_rate}, 0-{real_times_s[-1]:.3f} s)",
        )  # fmt: skip


def _check_size(source: Path, size_px: tuple[int, int], render_size_px: tuple[int, int]) -> None:
    (w, h), (rw, rh) = size_px, render_size_px
    if abs((w / h) / (rw / rh) - 1.0) > ASPECT_TOLERANCE:
        raise AvsimInputError(source, "size", f"real frames are {w}x{h}, the render is {rw}x{rh}: aspect ratios differ by more than 1 %")


def plan_camera(
    folder: Path, camera: str, clip_id: str, render_times_s: NDArrayFloat, fps: float,
    render_size_px: tuple[int, int], overlay_fps: float | None = None,
) -> RealCamera:  # fmt: skip
    """Find, time and size-check one camera's real frames and pair them with the render frames.

    Args:
        folder: the `--overlay` folder.
        camera: camera name.
        clip_id: clip id.
        render_times_s: (K,) times of the render frames on the real clock (offset applied).
        fps: render rate (for the message).
        render_size_px: (width, height) of the render.
        overlay_fps: `--overlay-fps` for image folders (None: from the names).

    Returns:
        The camera's real frames and their pairing.
    """
    source = find_source(folder, camera, clip_id)
    video: Path | None = None
    images: tuple[Path, ...] = ()
    if not source.is_dir():
        video = source
        times_s, size_px = video_times_s(source)
    else:
        files, times_s = image_times_s(_image_files(source), overlay_fps)
        images = tuple(files)
        size_px = _image_size(files[0])
    _check_duration(source, times_s, render_times_s, fps)
    _check_size(source, size_px, render_size_px)
    pick = nearest_frames(times_s, render_times_s)
    return RealCamera(camera, source, video, images, times_s, size_px, render_size_px, pick)


def _image_size(path: Path) -> tuple[int, int]:
    size = image_size_px(regular_file(path, "image"))
    if size is not None:
        check_frame_size(path, *size)
        return size
    img = read_image(path)
    return int(img.shape[1]), int(img.shape[0])


def read_image(path: Path) -> NDArrayByte:
    """Decode one real image (size checked from its header first: `avsim.core.image.read_image_rgb`).

    Args:
        path: a jpg or png file.

    Returns:
        (H, W, 3) uint8 RGB.
    """
    return read_image_rgb(path)


def fit(frame_rgb: NDArrayByte, render_size_px: tuple[int, int]) -> NDArrayByte:
    """A real frame at the render size (unchanged when it already is).

    Args:
        frame_rgb: (H', W', 3) uint8.
        render_size_px: (width, height).

    Returns:
        (H, W, 3) uint8.
    """
    w, h = render_size_px
    if frame_rgb.shape[:2] == (h, w):
        return frame_rgb
    return np.asarray(cv2.resize(frame_rgb, (w, h), interpolation=cv2.INTER_AREA), dtype=np.uint8)


class RealReader:
    """Real frames of one camera by index, at the render size (a video is decoded forward once)."""

    def __init__(self, real: RealCamera) -> None:
        """Args:
            real: the camera's planned real frames.
        """
        self.real = real
        self._frames: Iterator[NDArrayByte] | None = None
        self._next_index = 0
        self._last: tuple[int, NDArrayByte] | None = None

    def frame(self, index: int) -> NDArrayByte:
        """Real frame `index` (indices must not decrease between calls for a video).

        Args:
            index: real frame index.

        Returns:
            (H, W, 3) uint8 RGB at the render size.
        """
        if self._last is not None and self._last[0] == index:
            return self._last[1]
        if self.real.video is None:
            img = read_image(self.real.images[index])
        else:
            if self._frames is None or index < self._next_index:
                self._frames, self._next_index = iter_video_frames(self.real.video), 0
            img = next(self._frames)  # the real video is decoded forward, each frame once
            self._next_index += 1
            while self._next_index <= index:
                img = next(self._frames)
                self._next_index += 1
        out = fit(img, self.real.render_size_px)
        self._last = (index, out)
        return out
