"""MP4 video I/O with PyAV: streaming H.264 writer and frame reader.

Writers stream frames straight to the encoder (memory does not grow with clip length) and are
atomic: the file appears under its final name only after the encoder has been flushed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from fractions import Fraction
from pathlib import Path
from types import TracebackType

import av
import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.yuv import rgb_to_yuv420p


class MP4Writer:
    """Write RGB frames (H, W, 3) uint8 to a browser-playable H.264 yuv420p mp4 (faststart).

    Frames are converted to YUV 4:2:0 by `avsim.core.yuv.rgb_to_yuv420p` (BT.601 limited range,
    libswscale's arithmetic: luma identical, chroma within one level).

    Use as a context manager; on an exception nothing is left at `path`. The encoder runs
    single-threaded. Reproducible content belongs to the frames, not the file: under heavy CPU
    load libx264's bitstream for the same frames was seen to vary (root cause not found), so
    tests compare frames, never mp4 bytes.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        width_px: int,
        height_px: int,
        fps: float = 30.0,
        crf: int = 18,
        preset: str = "veryfast",
    ) -> None:
        """Set up a writer; the file is created on `__enter__` and renamed into place on a clean exit.

        Args:
            path: output .mp4 path.
            width_px: frame width (even).
            height_px: frame height (even).
            fps: frame rate.
            crf: x264 constant rate factor (quality).
            preset: x264 preset.

        Raises:
            ValueError: an odd frame size (yuv420p needs even sizes).
        """
        if width_px % 2 or height_px % 2:
            raise ValueError(f"yuv420p needs even frame sizes, got {width_px}x{height_px}")
        self.path = Path(path)
        self.width_px, self.height_px = int(width_px), int(height_px)
        self.fps = fps
        # single-threaded x264 (also inside x264 itself): parallelism comes from encoding
        # several cameras at once
        self._options = {"crf": str(crf), "preset": preset, "x264-params": "threads=1:lookahead-threads=1"}
        self._stack = ExitStack()
        self._container: av.container.OutputContainer | None = None
        self._stream: av.video.stream.VideoStream | None = None
        self.frames_written = 0

    def __enter__(self) -> MP4Writer:
        tmp = self._stack.enter_context(atomic_output_path(self.path))
        self._container = av.open(str(tmp), mode="w", format="mp4", options={"movflags": "+faststart"})
        stream = self._container.add_stream("libx264", rate=Fraction(self.fps).limit_denominator(1001))
        stream.width, stream.height = self.width_px, self.height_px
        stream.pix_fmt = "yuv420p"
        stream.options = dict(self._options)
        stream.codec_context.thread_count = 1  # parallelism comes from encoding cameras at once
        self._stream = stream
        return self

    def write(self, frame_rgb: np.ndarray) -> None:
        """Encode one frame.

        Args:
            frame_rgb: (H, W, 3) uint8 RGB frame of the writer's size.
        """
        if frame_rgb.shape != (self.height_px, self.width_px, 3) or frame_rgb.dtype != np.uint8:
            raise ValueError(
                f"frame must be ({self.height_px}, {self.width_px}, 3) uint8, "
                f"got {frame_rgb.shape} {frame_rgb.dtype}"
            )
        assert self._container is not None and self._stream is not None, "use MP4Writer as a context manager"
        # converted here (one compiled pass), not by libswscale inside the encoder: see avsim.core.yuv
        video_frame = av.VideoFrame.from_ndarray(rgb_to_yuv420p(frame_rgb), format="yuv420p")
        for packet in self._stream.encode(video_frame):
            self._container.mux(packet)
        self.frames_written += 1

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._container is not None and self._stream is not None:
                if exc_type is None:
                    for packet in self._stream.encode(None):
                        self._container.mux(packet)
                self._container.close()
        finally:
            self._container = self._stream = None  # the encoder's buffers go with its objects, now
            self._stack.__exit__(exc_type, exc, tb)


def iter_video_frames(path: str | os.PathLike[str]) -> Iterator[np.ndarray]:
    """Yield the frames of a video file, decoded one at a time.

    Args:
        path: video file.

    Returns:
        An iterator of (H, W, 3) uint8 RGB frames.

    Raises:
        AvsimInputError: missing, unreadable, stream-less or corrupt file.
    """
    path = Path(path)
    if not path.is_file():
        raise AvsimInputError(path, "file", "video file not found")
    try:
        container = av.open(str(path))
    except av.error.FFmpegError as exc:
        raise AvsimInputError(path, "container", f"cannot open video: {exc}") from exc
    with container:
        if not container.streams.video:
            raise AvsimInputError(path, "streams", "no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        try:
            for frame in container.decode(stream):
                yield frame.to_ndarray(format="rgb24")
        except av.error.FFmpegError as exc:
            raise AvsimInputError(path, "frames", f"corrupt or truncated video: {exc}") from exc


def read_video(path: str | os.PathLike[str], max_frames: int | None = None) -> np.ndarray:
    """Read a whole video (or its first `max_frames`).

    Args:
        path: video file.
        max_frames: read at most this many frames; None reads all.

    Returns:
        (T, H, W, 3) uint8 RGB frames.

    Raises:
        AvsimInputError: unreadable file or no frames.
    """
    frames = []
    for i, frame in enumerate(iter_video_frames(path)):
        if max_frames is not None and i >= max_frames:
            break
        frames.append(frame)
    if not frames:
        raise AvsimInputError(path, "frames", "video has no frames")
    return np.stack(frames)


def video_info(path: str | os.PathLike[str]) -> dict[str, float | int]:
    """Frame count, fps, width and height of a video file.

    Args:
        path: video file.

    Returns:
        {"frames": int, "fps": float (nominal rate), "width_px": int, "height_px": int}.
    """
    path = Path(path)
    if not path.is_file():
        raise AvsimInputError(path, "file", "video file not found")
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return {
            "frames": int(stream.frames),
            # the stream's nominal rate; average_rate is frames / duration and reads low (29.9)
            "fps": float(stream.guessed_rate or stream.average_rate or 0),
            "width_px": int(stream.width),
            "height_px": int(stream.height),
        }
