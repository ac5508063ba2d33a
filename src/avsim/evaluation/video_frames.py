"""Frame sources for the video metrics: video files (streamed with PyAV) and frame folders.

A *clip* is one video file or one folder of image frames (sorted by name). `list_clips`
expands a path into clips: a video file, a frame folder, or a folder holding videos and/or
frame folders. Frames are always `(H, W, 3)` uint8 RGB. Decoding runs in a background thread
so that feature extraction is limited by the network, not by the decoder.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.image import read_image_rgb
from avsim.core.safe_files import file_kind
from avsim.core.video import iter_video_frames

VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".avi", ".webm")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def list_clips(path: str | os.PathLike[str]) -> list[Path]:
    """Clips under `path`, sorted: a video file, a frame folder, or a folder of those."""
    p = Path(path)
    if p.is_file():
        if p.suffix.lower() not in VIDEO_SUFFIXES:
            raise AvsimInputError(p, "file", f"not a video ({', '.join(VIDEO_SUFFIXES)})")
        return [p]
    if not p.is_dir():
        kind = file_kind(p)
        raise AvsimInputError(p, "path", "no such file or folder" if kind == "missing" else f"is {kind}, not a video or a folder")
    if _images_in(p):
        return [p]
    clips = sorted(c for c in p.iterdir() if (c.is_file() and c.suffix.lower() in VIDEO_SUFFIXES) or (c.is_dir() and _images_in(c)))
    if not clips:
        raise AvsimInputError(p, "clips", "no videos or frame folders found")
    return clips


def clip_frame_count(clip: str | os.PathLike[str], max_frames: int | None = None) -> int:
    """Frames a clip holds (a video's container count, 0 when it does not say), capped at `max_frames`.

    Args:
        clip: video file or frame folder.
        max_frames: cap (None: no cap).

    Returns:
        the count, for progress totals (decoding decides what is actually read).
    """
    from avsim.core.video import video_info

    p = Path(clip)
    try:
        n = len(_images_in(p)) if p.is_dir() else int(video_info(p)["frames"])
    except Exception:  # an unreadable file is reported when it is decoded, with its own error
        n = 0
    return n if max_frames is None else min(n, max_frames)


def iter_frames(clip: str | os.PathLike[str]) -> Iterator[np.ndarray]:
    """Frames of one clip, decoded one at a time."""
    p = Path(clip)
    if p.is_dir():
        for img_path in _images_in(p):
            yield read_image_rgb(img_path)  # size checked from the header first
    else:
        yield from iter_video_frames(p)


def _prefetch(it: Iterator[np.ndarray], depth: int = 4) -> Iterator[np.ndarray]:
    """Run `it` in a thread, `depth` items ahead (PyAV and OpenCV release the GIL)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()

    def work() -> None:
        try:
            for item in it:
                q.put(item)
        except BaseException as exc:
            q.put(exc)
        q.put(done)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    while True:
        item = q.get()
        if item is done:
            break
        if isinstance(item, BaseException):
            raise item
        yield item
    t.join()


def iter_frame_batches(clip: str | os.PathLike[str], batch_size: int, max_frames: int | None = None) -> Iterator[np.ndarray]:
    """Batches `(B, H, W, 3)` of a clip's frames (the last may be shorter), prefetched."""
    def batches() -> Iterator[np.ndarray]:
        buf: list[np.ndarray] = []
        for i, frame in enumerate(iter_frames(clip)):
            if max_frames is not None and i >= max_frames:
                break
            buf.append(frame)
            if len(buf) == batch_size:
                yield np.stack(buf)
                buf = []
        if buf:
            yield np.stack(buf)

    return _prefetch(batches())


def iter_clip_windows(clip: str | os.PathLike[str], window: int, stride: int, max_windows: int | None = None) -> Iterator[np.ndarray]:
    """Consecutive-frame windows `(window, H, W, 3)` every `stride` frames (FVD clips)."""
    def windows_impl() -> Iterator[np.ndarray]:
        buf: list[np.ndarray] = []
        n = 0
        for i, frame in enumerate(iter_frames(clip)):
            if stride > window and (i % stride) >= window:
                continue
            buf.append(frame)
            if len(buf) == window:
                yield np.stack(buf)
                n += 1
                if max_windows is not None and n >= max_windows:
                    return
                buf = buf[stride:] if stride < window else []

    return _prefetch(windows_impl())


def read_clip(clip: str | os.PathLike[str], max_frames: int | None = None) -> np.ndarray:
    """All frames of a clip `(T, H, W, 3)` (or the first `max_frames`)."""
    frames = []
    for i, f in enumerate(iter_frames(clip)):
        if max_frames is not None and i >= max_frames:
            break
        frames.append(f)
    if not frames:
        raise AvsimInputError(clip, "frames", "clip has no frames")
    return np.stack(frames)


def content_hash(clip: str | os.PathLike[str]) -> str:
    """sha256 of a clip's bytes (for a frame folder: of each image's name and bytes, in order)."""
    p = Path(clip)
    h = hashlib.sha256()
    files = _images_in(p) if p.is_dir() else [p]
    for f in files:
        if p.is_dir():
            h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()
