"""Typed results of LET-3D-AP: class and metric names as `Enum`s, AP integration, per-cutoff
counts (TP / FP / FN), and the challenge's headline mean.

Waymo's leaderboard ranks camera-only detection by the mean over VEHICLE, PEDESTRIAN and
CYCLIST (`ALL_NS`; waymo-open-dataset `protos/breakdown.proto`: "ALL_NS in the leaderboard is
the mean of VEHICLE, PED, CYCLIST metrics"); signs are left out, and a class without ground
truth or without predictions has AP 0 there (the metrics op returns 0 for an empty breakdown),
so it still counts in the mean. That mean is `LetResult.headline`. The average over the
classes that have ground truth (signs included) is kept under its own name,
`LetResult.mean_over_classes_with_gt`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape


class LetClass(str, Enum):
    """The LET object classes (Waymo's TYPE_VEHICLE, TYPE_PEDESTRIAN, TYPE_CYCLIST, TYPE_SIGN)."""

    VEHICLE = "vehicle"
    PEDESTRIAN = "pedestrian"
    CYCLIST = "cyclist"
    SIGN = "sign"

    @staticmethod
    def parse(name: object) -> LetClass:
        """The class named `name`; any other name is an error listing the classes."""
        if isinstance(name, LetClass):
            return name
        try:
            return LetClass(name)
        except ValueError:
            known = ", ".join(c.value for c in LetClass)
            raise AvsimValueError(f"unknown class {name!r} (LET classes: {known})") from None


class LetMetric(str, Enum):
    """LET-3D-AP, LET-3D-APL (longitudinal affinity weighted) and LET-3D-APH (heading weighted)."""

    AP = "ap"
    APL = "apl"
    APH = "aph"

    @property
    def display_name(self) -> str:
        return f"LET-3D-{self.name}"


# The leaderboard's mean (ALL_NS): vehicle, pedestrian, cyclist; a class absent from the data
# counts with AP 0. The challenge ranks by its LET-3D-APL.
WAYMO_MEAN_CLASSES = (LetClass.VEHICLE, LetClass.PEDESTRIAN, LetClass.CYCLIST)
WAYMO_RANKING_METRIC = LetMetric.APL
HEADLINE_NAME = "Waymo mean over vehicle, pedestrian, cyclist (absent classes count as 0)"


@dataclass(frozen=True)
class RangeBin:
    """A range breakdown: boxes whose centre is [lo_m, hi_m) from the vehicle origin."""

    lo_m: float
    hi_m: float

    @property
    def name(self) -> str:
        hi = "inf" if not math.isfinite(self.hi_m) else f"{self.hi_m:g}"
        return f"[{self.lo_m:g}, {hi})"

    def contains(self, range_m: np.ndarray) -> np.ndarray:
        return (range_m >= self.lo_m) & (range_m < self.hi_m)


@dataclass(frozen=True)
class Breakdown:
    """A class, and a range bin of it (None: the whole class)."""

    cls: LetClass
    range_bin: RangeBin | None = None

    @property
    def range_name(self) -> str:
        return "all" if self.range_bin is None else self.range_bin.name


# --------------------------------------------------------------------------- AP integration


def average_precision(
    precisions: np.ndarray | list[float], recalls: np.ndarray | list[float], max_recall_delta: float = 0.05
) -> float:
    """Waymo's AP integration of a precision/recall curve (any order, any length)."""
    p = np.asarray(precisions, dtype=np.float64).ravel()
    r = np.asarray(recalls, dtype=np.float64).ravel()
    check_shape(r, p.shape, "recalls")
    if not 0.0 < max_recall_delta <= 1.0:
        raise AvsimValueError("max_recall_delta: must be in (0, 1]")
    if p.size == 0:
        return 0.0
    best: dict[float, float] = {0.0: 1.0}
    for pi, ri in zip(p.tolist(), r.tolist()):
        best[ri] = max(best.get(ri, 0.0), pi)
    points: list[tuple[float, float]] = []  # (precision, recall), recall descending
    keys = sorted(best)
    last = keys[0]
    running = 0.0
    for rec in reversed(keys):
        while last - rec > max_recall_delta + 1e-6:
            last -= max_recall_delta
            points.append((running, last))
        running = max(best[rec], running)
        points.append((running, rec))
        last = rec
    if len(points) >= 2:  # the (recall 0, precision 1) seed is not real data
        points[-1] = (points[-2][0], points[-1][1])
    area = 0.0
    for (p0, r0), (p1, r1) in zip(points[:-1], points[1:]):
        area += 0.5 * (r0 - r1) * (p0 + p1)
    return float(area)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class APResult:
    """AP, APL, APH of one breakdown with the per-cutoff curves and counts they came from.

    precision, precision_l, precision_h, recall, tp, fp, fn: (K,) over the K score cutoffs
    (101 for the challenge: 0.00, 0.01, ..., 1.00); counts are frame-weighted under a bootstrap.
    """

    ap: float
    apl: float
    aph: float
    num_gt: int
    num_pd: int
    precision: np.ndarray
    precision_l: np.ndarray
    precision_h: np.ndarray
    recall: np.ndarray
    tp: np.ndarray
    fp: np.ndarray
    fn: np.ndarray

    def metric(self, metric: LetMetric) -> float:
        return float(getattr(self, metric.value))

    def as_dict(self, curves: bool = True) -> dict[str, Any]:
        """JSON-ready: the three metrics and counts; with `curves` the per-cutoff curves and TP/FP/FN."""
        d: dict[str, Any] = {"ap": self.ap, "apl": self.apl, "aph": self.aph, "num_gt": self.num_gt, "num_pd": self.num_pd}
        if curves:
            d.update(
                precision=self.precision.tolist(), precision_l=self.precision_l.tolist(),
                precision_h=self.precision_h.tolist(), recall=self.recall.tolist(),
                tp=_counts(self.tp), fp=_counts(self.fp), fn=_counts(self.fn),
            )  # fmt: skip
        return d


def _counts(v: np.ndarray) -> list[float | int]:
    """Counts as integers when they are (no bootstrap weights), else as floats."""
    r = np.round(v)
    return [int(x) for x in r] if np.allclose(v, r, atol=1e-9) else v.tolist()


def ap_from_totals(totals: dict[str, np.ndarray], max_recall_delta: float = 0.05) -> APResult:
    """AP/APL/APH from per-cutoff totals (see `let_ap.BreakdownCounts.totals`)."""
    tp, la, ha, npd = totals["tp"], totals["la"], totals["ha"], totals["num_pd"]
    ngt = float(totals["num_gt"])
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.where(ngt > 0, tp / ngt, 0.0) if ngt > 0 else np.zeros_like(tp)
        precs = [np.where(npd > 0, v / np.where(npd > 0, npd, 1.0), 0.0) for v in (tp, la, ha)]
    precs = [np.where(recall == 0.0, 1.0, pr) for pr in precs]
    total_pd = int(round(float(npd[0]))) if npd.size else 0
    if ngt <= 0 or total_pd == 0:
        aps = [0.0, 0.0, 0.0]
    else:
        aps = [average_precision(pr, recall, max_recall_delta) for pr in precs]
    fp, fn = npd - tp, ngt - tp
    return APResult(aps[0], aps[1], aps[2], int(round(ngt)), total_pd, precs[0], precs[1], precs[2], recall, tp, fp, fn)


@dataclass(frozen=True)
class ClassResult:
    """One class: the whole class (`all`) and each range bin."""

    all: APResult
    ranges: dict[RangeBin, APResult]


@dataclass(frozen=True)
class LetResult:
    """LET metrics of an evaluation: per class and range bin, and the two averages by name.

    headline: the leaderboard's mean over `WAYMO_MEAN_CLASSES` (absent classes count as 0).
    mean_over_classes_with_gt: the mean over the classes that have ground truth (signs included).
    """

    per_class: dict[LetClass, ClassResult]
    headline: dict[LetMetric, float]
    mean_over_classes_with_gt: dict[LetMetric, float]
    classes_with_gt: tuple[LetClass, ...]

    def metric(self, cls: LetClass, metric: LetMetric, range_bin: RangeBin | None = None) -> float:
        """A class's metric (0 for a class the evaluation never saw, as the challenge counts it)."""
        c = self.per_class.get(cls)
        if c is None:
            return 0.0
        r = c.all if range_bin is None else c.ranges.get(range_bin)
        return 0.0 if r is None else r.metric(metric)

    def headline_dict(self) -> dict[str, Any]:
        """The headline as JSON: its definition, the classes and AP / APL / APH."""
        return {"name": HEADLINE_NAME, "classes": [c.value for c in WAYMO_MEAN_CLASSES],
                "ranking_metric": WAYMO_RANKING_METRIC.value, **{m.value: v for m, v in self.headline.items()}}  # fmt: skip

    def per_class_dict(self, curves: bool = True) -> dict[str, dict[str, Any]]:
        """Per class and range ("all", "[0, 30)", ...) as JSON."""
        return {
            c.value: {"all": r.all.as_dict(curves), **{b.name: v.as_dict(curves) for b, v in r.ranges.items()}}
            for c, r in self.per_class.items()
        }


def let_result(per_class: dict[LetClass, ClassResult]) -> LetResult:
    """The result with its headline and its mean over classes with ground truth."""
    with_gt = tuple(c for c in per_class if per_class[c].all.num_gt > 0)
    headline = {m: float(np.mean([_metric_or_zero(per_class, c, m) for c in WAYMO_MEAN_CLASSES])) for m in LetMetric}
    mean_gt = {m: float(np.mean([per_class[c].all.metric(m) for c in with_gt])) if with_gt else 0.0 for m in LetMetric}
    return LetResult(per_class, headline, mean_gt, with_gt)


def _metric_or_zero(per_class: dict[LetClass, ClassResult], cls: LetClass, metric: LetMetric) -> float:
    c = per_class.get(cls)
    return 0.0 if c is None else c.all.metric(metric)
