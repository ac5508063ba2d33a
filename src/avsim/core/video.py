"""MP4 video I/O with PyAV: streaming H.264 writer and frame reader.

Writers stream frames straight to the encoder (memory does not grow with clip length) and are
atomic: the file appears under its final name only after the encoder has been flushed, the
container closed and its header read back with the frame count written (`mp4_frame_count`).

Readers check the frame size from the stream header before decoding (`MAX_FRAME_SIDE_PX`:
"too large", not "corrupt") and count what they decode: a video that ends before the frame
count its container lists is an error naming both counts, or, with `allow_truncated` (the
`avsim --allow-truncated` option sets `ALLOW_TRUNCATED_ENV`), a `TruncatedMediaWarning`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import ExitStack
from fractions import Fraction
from pathlib import Path
from types import TracebackType

import av
import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import ALLOW_TRUNCATED_ENV, AvsimInputError, AvsimOutputError, TruncatedMediaWarning
from avsim.core.safe_files import regular_file
from avsim.core.yuv import rgb_to_yuv420p

MAX_FRAME_SIDE_PX = 8192  # frames read from videos and images (as `avsim render --size` writes at most)


def check_frame_size(path: str | os.PathLike[str], width_px: int, height_px: int) -> None:
    """Refuse frames larger than `MAX_FRAME_SIDE_PX` a side (from a header, before decoding).

    Args:
        path: the video or image (named in the message).
        width_px: frame width from its header.
        height_px: frame height from its header.
    """
    if max(width_px, height_px) > MAX_FRAME_SIDE_PX:
        raise AvsimInputError(path, "size", f"{width_px}x{height_px} px frames are too large (at most {MAX_FRAME_SIDE_PX} px a side)")
    if min(width_px, height_px) <= 0:
        raise AvsimInputError(path, "size", f"frame size {width_px}x{height_px} px in the header is not valid")


def iso_boxes_end(path: str | os.PathLike[str]) -> str | None:
    """Why an mp4/mov file (ISO base media) is cut short, or None when its top-level boxes tile it exactly.

    A faststart mp4 keeps its index (`moov`) at the front, so a copy cut short still lists every
    frame; only the boxes' sizes tell that the media data (`mdat`) ends past the file's end.
    Files that are not ISO base media (no `ftyp` box first) are not checked (None).

    Args:
        path: the file.

    Returns:
        None, or a one-line reason.
    """
    size = os.path.getsize(path)
    seen: set[bytes] = set()
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8 or head[4:8] != b"ftyp":
            return None
        offset = 0
        while offset < size:
            fh.seek(offset)
            header = fh.read(16)
            if len(header) < 8:
                return f"a box header is cut at byte {offset} of {size}"
            box_size, kind = int.from_bytes(header[:4], "big"), header[4:8]
            if box_size == 1 and len(header) == 16:
                box_size = int.from_bytes(header[8:16], "big")
            elif box_size == 0:  # extends to the end of the file
                box_size = size - offset
            if box_size < 8 or offset + box_size > size:
                return f"box {kind.decode('latin-1')!r} ends at byte {offset + box_size}, the file has {size}"
            seen.add(kind)
            offset += box_size
    missing = [k.decode() for k in (b"moov", b"mdat") if k not in seen]
    return f"no {' or '.join(missing)} box" if missing else None


def mp4_frame_count(path: str | os.PathLike[str]) -> int:
    """The frame count a video's container header lists (nothing decoded), once its boxes are whole.

    Args:
        path: video file.

    Returns:
        frames of the first video stream (0 when the container does not say).

    Raises:
        AvsimInputError: not a readable container (e.g. an mp4 whose index never got written), an
            mp4 cut short (`iso_boxes_end`) or no video stream.
    """
    cut = iso_boxes_end(path)
    if cut is not None:
        raise AvsimInputError(path, "container", f"truncated: {cut}")
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise AvsimInputError(path, "streams", "no video stream")
            return int(container.streams.video[0].frames)
    except av.error.FFmpegError as exc:
        raise AvsimInputError(path, "container", f"cannot open video: {exc}") from None


def check_written_mp4(path: Path, frames: int) -> None:
    """The check of a finished mp4 before its rename: it opens and lists `frames` frames.

    Args:
        path: the closed temporary file.
        frames: the frames written into it.

    Raises:
        AvsimOutputError: the file does not open or lists another count (a write cut short).
    """
    try:
        listed = mp4_frame_count(path)
    except AvsimInputError as exc:
        raise AvsimOutputError(path, f"incomplete after writing ({exc.reason})") from None
    if listed != frames:
        raise AvsimOutputError(path, f"incomplete after writing: {listed} of {frames} frames")


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
        tmp = self._stack.enter_context(atomic_output_path(self.path, check=lambda t: check_written_mp4(t, self.frames_written)))
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
        """Flush and close the encoder, then (on success) check the file and rename it into place.

        A failure while flushing or closing (a full disk fails here: the faststart pass rewrites
        the file) drops the temporary like any other exception: nothing is left under `path`.
        """
        try:
            if self._container is not None and self._stream is not None:
                if exc_type is None:
                    for packet in self._stream.encode(None):
                        self._container.mux(packet)
                self._container.close()
        except BaseException as close_exc:
            self._container = self._stream = None
            if not self._stack.__exit__(type(close_exc), close_exc, close_exc.__traceback__):
                raise
            return
        self._container = self._stream = None  # the encoder's buffers go with its objects, now
        self._stack.__exit__(exc_type, exc, tb)


def _allow_truncated(allow_truncated: bool | None) -> bool:
    return os.environ.get(ALLOW_TRUNCATED_ENV) == "1" if allow_truncated is None else allow_truncated


def open_video(path: Path) -> tuple[av.container.InputContainer, av.video.stream.VideoStream]:
    """An input container and its first video stream, the frame size checked from the header.

    Args:
        path: video file (a regular file: a FIFO or device is refused before it is opened).

    Returns:
        (container, stream); the caller closes the container.
    """
    regular_file(path, "file")
    try:
        container = av.open(str(path))
    except av.error.FFmpegError as exc:
        raise AvsimInputError(path, "container", f"cannot open video: {exc}") from exc
    if not container.streams.video:
        kinds: list[str] = sorted({str(s.type) for s in container.streams}) or ["none"]
        container.close()
        raise AvsimInputError(path, "streams", f"no video stream (streams: {', '.join(kinds)})")
    stream = container.streams.video[0]
    try:
        check_frame_size(path, int(stream.width), int(stream.height))
    except AvsimInputError:
        container.close()
        raise
    return container, stream


def iter_video_frames(path: str | os.PathLike[str], allow_truncated: bool | None = None) -> Iterator[np.ndarray]:
    """Yield the frames of a video file, decoded one at a time.

    The frame size is checked from the stream header before anything is decoded. When decoding
    ends before the frame count the container lists, the video is truncated: an error, or with
    `allow_truncated` a `TruncatedMediaWarning` naming both counts (the frames read are kept).
    A caller that stops early (reads a prefix) is not affected.

    Args:
        path: video file.
        allow_truncated: accept a truncated video with a warning; None: the `ALLOW_TRUNCATED_ENV`
            environment variable decides (set by `avsim --allow-truncated`).

    Returns:
        An iterator of (H, W, 3) uint8 RGB frames.

    Raises:
        AvsimInputError: missing, not a regular file, unreadable, stream-less, too large, corrupt
            or truncated file.
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise AvsimInputError(path, "file", "video file not found")
    container, stream = open_video(path)
    with container:
        listed = int(stream.frames or 0)
        stream.thread_type = "AUTO"
        decoded = 0
        try:
            for frame in container.decode(stream):
                yield frame.to_ndarray(format="rgb24")
                decoded += 1
        except av.error.FFmpegError as exc:
            if iso_boxes_end(path) is None:  # damaged inside, not cut short
                raise AvsimInputError(path, "frames", f"corrupt or truncated video: {exc}") from exc
            listed = max(listed, decoded + 1)  # the last packet was cut in the middle
    check_complete(path, decoded, listed, allow_truncated)


def check_complete(path: str | os.PathLike[str], got: int, listed: int, allow_truncated: bool | None = None) -> None:
    """A video read to its end must give the frames its container lists (else it was truncated).

    Args:
        path: the video (named in the message).
        got: frames (or packets) read to the end of the file.
        listed: the container's frame count (0: it does not say; nothing is checked).
        allow_truncated: warn (`TruncatedMediaWarning`) instead of failing; None: `ALLOW_TRUNCATED_ENV` decides.
    """
    if got >= listed:
        return
    reason = f"truncated: {got} of the {listed} frames its container lists could be read"
    if not _allow_truncated(allow_truncated):
        raise AvsimInputError(path, "frames", f"{reason} (avsim --allow-truncated reads what is there)")
    warnings.warn(f"{path}: frames: {reason}; using those {got}", TruncatedMediaWarning, stacklevel=3)


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
    """Frame count, fps, width and height of a video file (from its header; size-checked).

    Args:
        path: video file.

    Returns:
        {"frames": int, "fps": float (nominal rate), "width_px": int, "height_px": int}.
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise AvsimInputError(path, "file", "video file not found")
    container, stream = open_video(path)
    with container:
        return {
            "frames": int(stream.frames),
            # the stream's nominal rate; average_rate is frames / duration and reads low (29.9)
            "fps": float(stream.guessed_rate or stream.average_rate or 0),
            "width_px": int(stream.width),
            "height_px": int(stream.height),
        }
