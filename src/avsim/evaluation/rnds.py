"""RNDS: long-horizon error accumulation over autoregressive chunks (spec section 6).

RNDS[i] = (Q[i] / Q_gt[i]) / (Q[1] / Q_gt[1]) for chunk i (1-based), where Q is a per-chunk
quality score of the generated chunk and Q_gt that of the matching real chunk. The paper uses
DOVER; its weights cannot be fetched here, so the scorer is a plug-in: any callable mapping a
chunk `(T, H, W, 3) uint8` to a float where higher is better. `sharpness_score` is a built-in,
weight-free scorer (documented as a proxy, not DOVER).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape
from avsim.evaluation.bootstrap import Interval, bootstrap_mean, resample_counts, too_few_units

ChunkScorer = Callable[[np.ndarray], float]


def sharpness_score(chunk: np.ndarray) -> float:
    """Mean variance of the Laplacian of the grey frames (higher = sharper); a weight-free proxy."""
    c = np.asarray(chunk)
    check_shape(c, ("T", "H", "W", 3), "chunk")
    vals = [cv2.Laplacian(cv2.cvtColor(f.astype(np.uint8), cv2.COLOR_RGB2GRAY), cv2.CV_64F).var() for f in c]
    return float(np.mean(vals))


BUILTIN_SCORERS: dict[str, ChunkScorer] = {"sharpness": sharpness_score}


def load_scorer(spec: str) -> ChunkScorer:
    """A scorer by built-in name ('sharpness') or 'package.module:function'."""
    if spec in BUILTIN_SCORERS:
        return BUILTIN_SCORERS[spec]
    if ":" not in spec:
        raise AvsimValueError(f"scorer: unknown {spec!r}; use {sorted(BUILTIN_SCORERS)} or 'module:function'")
    mod, fn = spec.split(":", 1)
    scorer = getattr(importlib.import_module(mod), fn, None)
    if not callable(scorer):
        raise AvsimValueError(f"scorer: {spec!r} is not a callable")
    return scorer


def chunk_video(frames: np.ndarray, chunk_frames: int) -> list[np.ndarray]:
    """Split `(T, H, W, 3)` into consecutive chunks of `chunk_frames` (a short tail is dropped)."""
    if chunk_frames <= 0:
        raise AvsimValueError("chunk_frames: must be positive")
    n = len(frames) // chunk_frames
    return [frames[i * chunk_frames : (i + 1) * chunk_frames] for i in range(n)]


def rnds_curve(q_generated: np.ndarray, q_real: np.ndarray) -> np.ndarray:
    """Per-video RNDS curves: inputs `(V, C)` (or `(C,)`) chunk scores -> `(V, C)`."""
    q = np.atleast_2d(np.asarray(q_generated, dtype=np.float64))
    g = np.atleast_2d(np.asarray(q_real, dtype=np.float64))
    check_shape(g, q.shape, "q_real")
    if q.shape[1] < 1:
        raise AvsimValueError("q_generated: needs at least one chunk")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = q / g
        return ratio / ratio[:, :1]


@dataclass(frozen=True)
class RndsResult:
    curve: np.ndarray  # (C,) mean over videos
    band_low: np.ndarray  # (C,) bootstrap band over videos
    band_high: np.ndarray
    per_video: np.ndarray  # (V, C)
    mean: Interval  # mean of the curve over chunks 2..C (chunk 1 is 1 by construction)

    band_note: str = ""  # why there is no band (then band_low and band_high are NaN)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "curve": self.curve.tolist(), "band_low": self.band_low.tolist(), "band_high": self.band_high.tolist(),
            "per_video": self.per_video.tolist(), "mean_over_chunks_2_to_C": self.mean.as_dict(),
        }
        return {**out, "band_note": self.band_note} if self.band_note else out


def rnds_summary(q_generated: np.ndarray, q_real: np.ndarray, n_resamples: int = 1000, seed: int = 0, level: float = 0.95) -> RndsResult:
    """Mean RNDS curve over videos with a percentile bootstrap band (resampling videos)."""
    per = rnds_curve(q_generated, q_real)
    finite = np.isfinite(per).all(axis=1)
    per_ok = per[finite]
    if per_ok.shape[0] == 0:
        raise AvsimValueError("q_real: every video has a zero or non-finite first-chunk ratio")
    curve = per_ok.mean(axis=0)
    tail = per_ok[:, 1:].mean(axis=1) if per_ok.shape[1] > 1 else np.ones(per_ok.shape[0])
    mean = bootstrap_mean(tail, "video", n_resamples, level, seed)
    note = too_few_units(per_ok.shape[0], "video")
    if note:  # one video: every resample is that video, so a band would be the curve itself
        nan = np.full_like(curve, np.nan)
        return RndsResult(curve, nan, nan.copy(), per, mean, note)
    counts = resample_counts(per_ok.shape[0], n_resamples, seed)
    boot = counts @ per_ok / counts.sum(axis=1, keepdims=True)
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(boot, [a, 1 - a], axis=0)
    return RndsResult(curve, lo, hi, per, mean)


def score_chunks(videos: Sequence[np.ndarray], chunk_frames: int, scorer: ChunkScorer) -> np.ndarray:
    """Scores `(V, C)` of each video's chunks (C = the shortest video's chunk count)."""
    chunks = [chunk_video(v, chunk_frames) for v in videos]
    c = min(len(x) for x in chunks) if chunks else 0
    if c == 0:
        raise AvsimValueError(f"videos: shorter than one chunk of {chunk_frames} frames")
    return np.array([[scorer(x[i]) for i in range(c)] for x in chunks], dtype=np.float64)
