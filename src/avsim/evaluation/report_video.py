"""The report's video section: FID (Inception frames pooled) and FVD (I3D 16-frame windows)
real vs generated, with both covariance normalisers, a bootstrap over clips, and warnings
when the numbers cannot be trusted (fewer feature rows than dimensions, fewer than 2 clips).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.progress import StepProgress
from avsim.evaluation.bootstrap import Interval, no_interval, resample_counts, too_few_units
from avsim.evaluation.frechet import CovarianceNorm

if TYPE_CHECKING:
    from avsim.evaluation.features import FeatureCache
    from avsim.evaluation.report_config import ReportConfig


def _per_clip(per_view: list[np.ndarray], owner: list[int], n_clips: int) -> list[np.ndarray]:
    """Feature rows of each clip: the rows of all its views, stacked (views in name order)."""
    out = []
    for k in range(n_clips):
        rows = [f for f, o in zip(per_view, owner) if o == k and len(f)]
        out.append(np.concatenate(rows) if rows else np.zeros((0, per_view[0].shape[1] if per_view else 1)))
    return out


def _clip_features(kind: str, rc: list[Path], gc: list[Path], cfg: ReportConfig, cache: FeatureCache,
                   progress: StepProgress | None) -> tuple[list[np.ndarray], list[np.ndarray], dict[str, Any]]:  # fmt: skip
    """Per-clip feature rows of each side for "fid" (Inception frames) or "fvd" (I3D windows),
    and the extractor's description."""
    from avsim.evaluation.features import fid_clip_features, fvd_clip_features

    if kind == "fid":
        from avsim.evaluation.inception import describe as describe_inception
        from avsim.evaluation.inception import load_fid_inception

        inception, src = load_fid_inception(cfg.inception_weights)
        fr = fid_clip_features(rc, inception, src, max_frames=cfg.max_frames, cache=cache, progress=progress, step="FID real")
        fg = fid_clip_features(gc, inception, src, max_frames=cfg.max_frames, cache=cache, progress=progress, step="FID generated")
        return fr, fg, describe_inception(src, "pytorch_fid")
    from avsim.evaluation.i3d import describe as describe_i3d
    from avsim.evaluation.i3d import load_i3d

    i3d, src = load_i3d(cfg.i3d_weights)
    fr = fvd_clip_features(rc, i3d, src, max_windows=cfg.fvd_max_windows, cache=cache, progress=progress, step="FVD real")
    fg = fvd_clip_features(gc, i3d, src, max_windows=cfg.fvd_max_windows, cache=cache, progress=progress, step="FVD generated")
    return fr, fg, describe_i3d(src)


def _stack_rows(per_clip: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All feature rows of one side `(N, D)` and the clip each row came from `(N,)`."""
    kept = [f for f in per_clip if len(f)]
    if not kept:
        return np.zeros((0, 1)), np.zeros(0, np.int64)
    owner = np.concatenate([np.full(len(f), i) for i, f in enumerate(per_clip)])
    return np.concatenate(kept), owner


def _frechet_interval(fr: list[np.ndarray], fg: list[np.ndarray], norm: CovarianceNorm, cfg: ReportConfig) -> Interval:
    """The report's interval: `frechet_interval_over_clips` with the report's settings."""
    return frechet_interval_over_clips(fr, fg, norm, cfg.n_resamples, cfg.level, cfg.seed)


def frechet_interval_over_clips(fr: list[np.ndarray], fg: list[np.ndarray], norm: CovarianceNorm, n_resamples: int,
                                level: float, seed: int) -> Interval:  # fmt: skip
    """Frechet distance with a percentile bootstrap over clips, each side resampled independently
    (the sides are different sets of clips); no interval when a side has fewer than 2 clips.

    `avsim eval report` and `avsim run eval fid|fvd` both compute their interval here.

    Args:
        fr, fg: the per-clip feature rows of the real and generated side, each `(T_i, D)`.
        norm: the covariance normaliser.
        n_resamples: requested resamples; at most 200 are drawn (each draw is an SVD of a rows x
            rows matrix).
        level: the central interval's coverage, e.g. 0.95.
        seed: the real side's clip counts use `seed`, the generated side's `seed + 1`.

    Returns:
        The estimate on all rows and its interval (unit "clip").
    """
    from avsim.evaluation.frechet import frechet_distance_features

    (xr, owner_r), (xg, owner_g) = _stack_rows(fr), _stack_rows(fg)
    value = frechet_distance_features(xr, xg, norm)
    n_boot = min(n_resamples, 200)
    n_clips = min(len(fr), len(fg))
    if too_few_units(n_clips, "clip"):
        return no_interval(value, level, n_boot, "clip", n_clips, seed)
    cr, cg = resample_counts(len(fr), n_boot, seed), resample_counts(len(fg), n_boot, seed + 1)
    draws = []
    for a, b in zip(cr, cg):
        ra = np.repeat(np.arange(len(xr)), a[owner_r].astype(int))
        rb = np.repeat(np.arange(len(xg)), b[owner_g].astype(int))
        if len(ra) >= 2 and len(rb) >= 2:
            draws.append(frechet_distance_features(xr[ra], xg[rb], norm))
    lo, hi = (np.quantile(draws, [(1 - level) / 2, 1 - (1 - level) / 2]) if draws else (math.nan, math.nan))
    return Interval(value, float(lo), float(hi), level, n_boot, "clip", len(fr) + len(fg), seed)


RESAMPLING_NOTE = ("clip: all views of a clip are drawn together (views of one drive are correlated); "
                   "real and generated clips are drawn independently")


def video_section(real: dict[str, dict[str, Path]], gen: dict[str, dict[str, Path]], cfg: ReportConfig,
                  progress: StepProgress | None = None) -> dict[str, Any]:  # fmt: skip
    """FID (frames pooled) and FVD (16-frame windows), both covariance normalisers named, with a
    bootstrap over clips (all views of a clip together).

    Args:
        real, gen: clip name -> view name -> path, per side.
        cfg: the report's settings (`cache_dir`: per-view features kept there, so a rerun
            recomputes nothing it finished).
        progress: `(step, done, total)` per frame (FID) or window (FVD).

    Returns:
        per metric the estimate and interval under each normaliser, or `skipped` with the reason.
    """
    from avsim.evaluation.features import FeatureCache
    from avsim.evaluation.frechet import rank_warning
    from avsim.evaluation.report_clips import clip_groups

    out: dict[str, Any] = {}
    cache = FeatureCache(cfg.cache_dir)
    (rc, r_owner), (gc, g_owner) = clip_groups(real), clip_groups(gen)
    for kind in ("fid", "fvd"):
        try:
            fr, fg, desc = _clip_features(kind, rc, gc, cfg, cache, progress)
        except AvsimInputError as exc:
            out[kind] = {"skipped": str(exc)}
            continue
        empty_views = sum(len(f) == 0 for f in fr + fg)
        fr, fg = _per_clip(fr, r_owner, len(real)), _per_clip(fg, g_owner, len(gen))
        n_r, n_g = sum(len(f) for f in fr), sum(len(f) for f in fg)
        if n_r < 2 or n_g < 2:
            out[kind] = {"skipped": f"need at least 2 feature rows per side, got {n_r} real / {n_g} generated"}
            continue
        name = "FID" if kind == "fid" else "FVD (TF-Hub I3D)"
        res: dict[str, Any] = {"features": desc, "rows": {"real": n_r, "generated": n_g},
                               "unit": "frame" if kind == "fid" else "16-frame window", "name": name,
                               "resampling": {"unit": "clip", "clips": {"real": len(fr), "generated": len(fg)},
                                              "views": {"real": len(rc), "generated": len(gc)}, "description": RESAMPLING_NOTE}}  # fmt: skip
        for norm in get_args(CovarianceNorm):
            res[norm] = _frechet_interval(fr, fg, norm, cfg).as_dict()
        warning = rank_warning(kind.upper(), n_r, n_g, 2048 if kind == "fid" else 400)
        res["warnings"] = [warning] if warning else []
        if empty_views:
            what = "fewer than 16 frames: FVD is undefined for them" if kind == "fvd" else "no frames"
            res["warnings"].append(f"{empty_views} view(s) with {what}; left out")
        out[kind] = res
    out["cache"] = cache.stats()
    return out
