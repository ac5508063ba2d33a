"""FID and FVD feature extraction over clips, with a cache keyed by file content.

A cached entry is keyed by the clip's content hash (sha256 of its bytes) and by everything
that changes the features: network, weights source, preprocessing, frame limits and window
parameters. Entries are `.npy` files (loaded with `allow_pickle=False`) written atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.progress import StepProgress, report_step
from avsim.evaluation.results import json_ready
from avsim.evaluation.video_frames import (
    clip_frame_count,
    content_hash,
    iter_clip_windows,
    iter_frame_batches,
)

if TYPE_CHECKING:
    from avsim.evaluation.inception import Normalization


class FeatureCache:
    """A folder of cached feature arrays; `None` disables caching."""

    def __init__(self, folder: str | os.PathLike[str] | None) -> None:
        self.folder = Path(folder) if folder is not None else None
        self.hits = 0  # entries read back (work a rerun did not redo)
        self.misses = 0  # entries computed and written

    def stats(self) -> dict[str, Any]:
        """Where the cache is and what this run read back and computed."""
        return {"folder": None if self.folder is None else str(self.folder), "hits": self.hits, "computed": self.misses}

    def _path(self, key: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{key}.npy"

    def get(self, key: str) -> np.ndarray | None:
        p = self._path(key)
        if p is None or not p.is_file():
            return None
        try:
            return np.load(p, allow_pickle=False)
        except (ValueError, OSError):
            return None  # a damaged entry is recomputed

    def get_json(self, key: str) -> Any:
        """A cached JSON document (a per-clip result), or None."""
        if self.folder is None or not (self.folder / f"{key}.json").is_file():
            return None
        try:
            doc = json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
        except (ValueError, OSError):
            return None  # a damaged entry is recomputed
        self.hits += 1
        return doc

    def put_json(self, key: str, value: Any) -> None:
        if self.folder is None:
            return
        self.misses += 1
        with atomic_output_path(self.folder / f"{key}.json") as tmp:
            tmp.write_text(json.dumps(json_ready(value), allow_nan=False), encoding="utf-8")

    def put(self, key: str, value: np.ndarray) -> None:
        p = self._path(key)
        if p is None:
            return
        with atomic_output_path(p) as tmp, open(tmp, "wb") as fh:
            np.save(fh, np.ascontiguousarray(value), allow_pickle=False)


def cache_key(clip_hash: str, params: dict[str, Any]) -> str:
    blob = json.dumps(params, sort_keys=True, default=str).encode()
    return f"{clip_hash[:32]}-{hashlib.sha256(blob).hexdigest()[:16]}"


def _cached(clip: Path, cache: FeatureCache, params: dict[str, Any], compute: Callable[[], np.ndarray]) -> np.ndarray:
    key = cache_key(content_hash(clip), params) if cache.folder is not None else ""
    hit = cache.get(key) if key else None
    if hit is not None:
        cache.hits += 1
        return hit
    value = compute()
    if key:
        cache.misses += 1
        cache.put(key, value)
    return value


class _FrameCounter:
    """Frames done over a list of clips, reported as one progress step."""

    def __init__(self, clips: Sequence[Path], max_frames: int | None, progress: StepProgress | None, step: str) -> None:
        self.progress, self.step, self.done = progress, step, 0
        self.total = sum(clip_frame_count(c, max_frames) for c in clips) if progress is not None else 0

    def add(self, n: int) -> None:
        self.done += n
        self.total = max(self.total, self.done)
        report_step(self.progress, self.step, self.done, self.total)


def fid_clip_features(
    clips: Sequence[Path], model: Any, source: str, batch_size: int = 16, max_frames: int | None = None,
    normalization: Normalization = "pytorch_fid", cache: FeatureCache | None = None,
    progress: StepProgress | None = None, step: str = "FID features",
) -> list[np.ndarray]:
    """Inception features per clip (frames pooled later: FID over frames).

    Args:
        clips: video files or frame folders.
        model, source: the Inception network and where its weights came from (cache key).
        batch_size: frames per network batch.
        max_frames: frames per clip (None: all).
        normalization: input normalisation (see `inception_features`).
        cache: feature cache (None: no caching).
        progress: called with `(step, frames done, frames in all clips)`.
        step: the progress step's name.

    Returns:
        one `(T_i, 2048)` array per clip.
    """
    from avsim.evaluation.inception import inception_features

    cache = cache or FeatureCache(None)
    params = {"kind": "fid", "weights": source, "norm": normalization, "max_frames": max_frames}
    counter = _FrameCounter(clips, max_frames, progress, step)

    def compute(clip: Path) -> np.ndarray:
        feats = []
        for b in iter_frame_batches(clip, batch_size, max_frames):
            feats.append(inception_features(model, b, normalization))
            counter.add(len(b))
        return np.concatenate(feats) if feats else np.zeros((0, 2048))

    def one(clip: Path) -> np.ndarray:
        before = counter.done
        out = _cached(clip, cache, params, partial(compute, clip))
        if counter.done == before:  # from the cache
            counter.add(len(out))
        return out

    return [one(c) for c in clips]


def _window_count(frames: int, window: int, stride: int, max_windows: int | None) -> int:
    n = max(0, (frames - window) // stride + 1)
    return n if max_windows is None else min(n, max_windows)


def fvd_clip_features(
    clips: Sequence[Path], model: Any, source: str, window: int = 16, stride: int = 16,
    max_windows: int | None = None, batch_size: int = 2, cache: FeatureCache | None = None,
    progress: StepProgress | None = None, step: str = "FVD windows",
) -> list[np.ndarray]:
    """I3D logits per clip, one row per `window`-frame window.

    Args:
        clips: video files or frame folders.
        model, source: the I3D network and where its weights came from (cache key).
        window, stride: frames per window and between window starts.
        max_windows: windows per clip (None: all).
        batch_size: windows per network batch.
        cache: feature cache (None: no caching).
        progress: called with `(step, windows done, windows in all clips)`.
        step: the progress step's name.

    Returns:
        one `(W_i, 400)` array per clip.
    """
    from avsim.evaluation.i3d import i3d_logits

    cache = cache or FeatureCache(None)
    params = {"kind": "fvd", "weights": source, "window": window, "stride": stride, "max_windows": max_windows}
    counter = _FrameCounter([], None, progress, step)
    if progress is not None:
        counter.total = sum(_window_count(clip_frame_count(c), window, stride, max_windows) for c in clips)

    def compute(clip: Path) -> np.ndarray:
        out, buf = [], []
        for w in iter_clip_windows(clip, window, stride, max_windows):
            buf.append(w)
            if len(buf) == batch_size:
                out.append(i3d_logits(model, np.stack(buf), batch_size))
                counter.add(len(buf))
                buf = []
        if buf:
            out.append(i3d_logits(model, np.stack(buf), batch_size))
            counter.add(len(buf))
        return np.concatenate(out) if out else np.zeros((0, 400))

    return [_cached(c, cache, params, partial(compute, c)) for c in clips]
