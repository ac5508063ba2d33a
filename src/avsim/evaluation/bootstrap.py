"""Percentile bootstrap confidence intervals over resampling units (clips or frames).

Resamples are drawn as multinomial counts per unit, so a metric that accepts per-unit weights
(LET-AP, lane metrics: additive per-frame counts) is re-evaluated without re-matching.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from avsim.core.errors import AvsimValueError


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile bootstrap interval."""

    estimate: float
    low: float
    high: float
    level: float
    n_resamples: int
    unit: str
    n_units: int
    seed: int
    note: str = ""  # why there is no interval (then low and high are NaN)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "estimate": self.estimate, "ci_low": self.low, "ci_high": self.high, "level": self.level,
            "n_resamples": self.n_resamples, "resampling_unit": self.unit, "n_units": self.n_units,
            "seed": self.seed,
        }
        return {**out, "note": self.note} if self.note else out


MIN_UNITS = 2  # fewer resampling units than this give every resample the same value


def too_few_units(n_units: int, unit: str) -> str:
    """The note that replaces an interval drawn from fewer than MIN_UNITS units ("" if enough).

    Args:
        n_units: resampling units available (clips, frames, videos).
        unit: their name, singular.

    Returns:
        e.g. "n/a (1 clip)", or "".
    """
    if n_units >= MIN_UNITS:
        return ""
    return f"n/a ({n_units} {unit}{'' if n_units == 1 else 's'})"


def no_interval(estimate: float, level: float, n_resamples: int, unit: str, n_units: int, seed: int) -> Interval:
    """An estimate without an interval: too few units to resample."""
    nan = float("nan")
    return Interval(estimate, nan, nan, level, n_resamples, unit, n_units, seed, too_few_units(n_units, unit))


def resample_counts(n_units: int, n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n_units) multinomial counts: how often each unit is drawn per resample."""
    if n_units <= 0:
        return np.zeros((n_resamples, 0))
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=n_resamples).astype(np.float64)


def _percentile_bounds(vals: np.ndarray, level: float) -> tuple[float, float]:
    """Central `level` percentile interval of the finite entries of `vals` (NaNs if none)."""
    vals = np.asarray(vals, dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return float("nan"), float("nan")
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(vals, [a, 1.0 - a])
    return float(lo), float(hi)


def bootstrap_weighted(
    statistic: Callable[[np.ndarray | None], float],
    n_units: int,
    unit: str,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Interval of `statistic(weights)` where weights (n_units,) are resample counts.

    `statistic(None)` must give the point estimate. Resamples whose statistic is NaN (e.g. no
    ground truth drawn) are left out of the percentiles.
    """
    if not 0.0 < level < 1.0:
        raise AvsimValueError(f"level: must be in (0, 1), got {level}")
    est = float(statistic(None))
    if too_few_units(n_units, unit):
        return no_interval(est, level, n_resamples, unit, n_units, seed)
    counts = resample_counts(n_units, n_resamples, seed)
    vals = np.array([statistic(w) for w in counts], dtype=np.float64) if n_units else np.zeros(0)
    lo, hi = _percentile_bounds(vals, level)
    return Interval(est, lo, hi, level, n_resamples, unit, n_units, seed)


def _bootstrap_location(
    values: np.ndarray,
    weighted_stat: Callable[[np.ndarray, np.ndarray], float],
    unit: str,
    n_resamples: int,
    level: float,
    seed: int,
) -> Interval:
    """Interval of `weighted_stat(v, w)` over finite `values`; unit weights give the estimate."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]

    def stat(w: np.ndarray | None) -> float:
        if v.size == 0:
            return float("nan")
        return float(weighted_stat(v, np.ones_like(v) if w is None else w))

    return bootstrap_weighted(stat, v.size, unit, n_resamples, level, seed)


def bootstrap_mean(values: np.ndarray, unit: str, n_resamples: int = 1000, level: float = 0.95, seed: int = 0) -> Interval:
    """Interval of the mean of per-unit `values (N,)` (NaNs dropped first)."""
    return _bootstrap_location(values, lambda v, w: (w * v).sum() / w.sum(), unit, n_resamples, level, seed)


def bootstrap_grouped_mean(values: np.ndarray, groups: np.ndarray, unit: str, n_resamples: int = 1000,
                           level: float = 0.95, seed: int = 0) -> Interval:  # fmt: skip
    """Interval of the mean of `values (N,)` when whole groups are resampled (e.g. the views of a
    clip together: values correlated within a group must not count as independent units).

    Args:
        values: one value per item (NaNs dropped first).
        groups: (N,) the group of each item (any labels).
        unit: the groups' name, singular (e.g. "clip").
        n_resamples, level, seed: as `bootstrap_weighted`.

    Returns:
        the estimate (mean over all items) and the interval over group resamples; `n_units` is
        the number of groups.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    ok = np.isfinite(v)
    _, g = np.unique(np.asarray(groups)[ok], return_inverse=True)
    v = v[ok]
    n_groups = int(g.max()) + 1 if g.size else 0

    def stat(w: np.ndarray | None) -> float:
        if v.size == 0:
            return float("nan")
        wi = np.ones_like(v) if w is None else w[g]
        return float((wi * v).sum() / wi.sum()) if wi.sum() > 0 else float("nan")

    return bootstrap_weighted(stat, n_groups, unit, n_resamples, level, seed)


def bootstrap_median(values: np.ndarray, unit: str, n_resamples: int = 1000, level: float = 0.95, seed: int = 0) -> Interval:
    """Interval of the median of per-unit `values (N,)` (NaNs dropped first)."""
    return _bootstrap_location(
        values, lambda v, w: np.median(np.repeat(v, w.astype(np.int64))), unit, n_resamples, level, seed
    )


def bootstrap_many(
    statistics: Callable[[np.ndarray | None], dict[str, float]],
    n_units: int,
    unit: str,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Interval]:
    """Several statistics from the same resamples (paired: e.g. real, generated and their gap)."""
    est = statistics(None)
    if too_few_units(n_units, unit):
        return {k: no_interval(float(v), level, n_resamples, unit, n_units, seed) for k, v in est.items()}
    counts = resample_counts(n_units, n_resamples, seed)
    draws: dict[str, list[float]] = {k: [] for k in est}
    for w in counts:
        vals = statistics(w)
        for k in est:
            draws[k].append(float(vals.get(k, float("nan"))))
    return {
        k: Interval(float(v), *_percentile_bounds(np.asarray(draws[k]), level), level, n_resamples, unit, n_units, seed)
        for k, v in est.items()
    }
