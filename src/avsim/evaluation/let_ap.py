"""LET-3D-AP, LET-3D-APL and LET-3D-APH (Waymo camera-only 3-D detection metrics).

Follows the Waymo Open Dataset reference (challenge configuration) as written down in
`shared/specs/metrics.md` section 1: longitudinal-error-tolerant IoU, Hungarian matching per
frame and score cutoff, precision weighted by longitudinal affinity (APL) or heading accuracy
(APH), and Waymo's recall-envelope AP integration.

Speed: matching is only recomputed where it can change. Candidate pairs (same frame, same
class, able to match: LA > 0 and LET-IoU at the class threshold) are split into connected components; a component's matching
depends only on which of its predictions are kept, and that set changes only at the score
cutoffs its own predictions cross. Single-edge components are solved in closed form; larger
ones run the Hungarian solver once per distinct kept set. Per-cutoff totals are accumulated as
interval events, so any frame weighting (bootstrap resampling) is a cheap re-sum.

All boxes are rows `(cx, cy, cz, l, w, h, heading_rad)` in the vehicle frame (x forward,
y left, z up; centre of the box).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from avsim.core.errors import AvsimValueError
from avsim.core.progress import StepProgress, report_step
from avsim.core.shapes import check_shape
from avsim.evaluation.box_iou import paired_iou_3d
from avsim.evaluation.let_pairs import heading_accuracy, let_aligned_centers, quantised_weight
from avsim.evaluation.let_result import (
    APResult,
    Breakdown,
    ClassResult,
    LetClass,
    LetResult,
    RangeBin,
    ap_from_totals,
    average_precision,
    let_result,
)

__all__ = ["APResult", "Boxes3D", "LetClass", "LetConfig", "LetEvaluation", "average_precision", "evaluate_let"]

WAYMO_SENSOR_LOCATION_M = (1.43, 0.0, 2.18)
# Waymo's reference tool (metrics/tools/compute_detection_let_metrics_main.cc): vehicle 0.5,
# pedestrian, sign and cyclist 0.3. These four are the LET classes; any other label is refused.
DEFAULT_IOU_THRESHOLDS = {LetClass.VEHICLE: 0.5, LetClass.PEDESTRIAN: 0.3, LetClass.CYCLIST: 0.3, LetClass.SIGN: 0.3}
LET_CLASSES = tuple(c.value for c in LetClass)
RANGE_BINS_M = ((0.0, 30.0), (30.0, 50.0), (50.0, math.inf))
_PAIR_BLOCK = 2_000_000  # all-pairs block size before the cheap prefilters
MAX_LET_PAIRS = 1_000_000_000  # same-frame (gt, pred) pairs of one class LET compares, in blocks (about a minute of work)
MAX_STORED_PAIRS = 20_000_000  # pairs a metric keeps at once (the lane metric keeps each pair's cost: about 1 GB)


def waymo_score_cutoffs() -> np.ndarray:
    """The challenge's 101 score cutoffs 0.00, 0.01, ..., 1.00 as float32 (as the reference)."""
    return np.concatenate([np.arange(100) * 0.01, [1.0]]).astype(np.float32)


@dataclass(frozen=True)
class LetConfig:
    """Parameters of LET matching; defaults are the Waymo camera-only challenge values."""

    sensor_location_m: tuple[float, float, float] = WAYMO_SENSOR_LOCATION_M
    tolerance_fraction: float = 0.10
    min_tolerance_m: float = 0.5
    iou_thresholds: dict[LetClass, float] = field(default_factory=lambda: dict(DEFAULT_IOU_THRESHOLDS))
    max_recall_delta: float = 0.05
    range_bins_m: tuple[tuple[float, float], ...] = RANGE_BINS_M

    def iou_threshold(self, label: LetClass | str) -> float:
        """The class's IoU threshold; a label without one is an error (never a silent default)."""
        cls = LetClass.parse(label)
        if cls not in self.iou_thresholds:
            known = ", ".join(c.value for c in self.iou_thresholds)
            raise AvsimValueError(f"class {cls.value!r} has no LET IoU threshold (classes: {known})")
        return float(self.iou_thresholds[cls])

    @property
    def range_bins(self) -> tuple[RangeBin, ...]:
        return tuple(RangeBin(lo, hi) for lo, hi in self.range_bins_m)

    def as_dict(self) -> dict[str, Any]:
        return {
            "sensor_location_m": list(self.sensor_location_m),
            "tolerance_fraction": self.tolerance_fraction,
            "min_tolerance_m": self.min_tolerance_m,
            "iou_thresholds": {c.value: v for c, v in self.iou_thresholds.items()},
            "max_recall_delta": self.max_recall_delta,
            "range_bins_m": [[lo, hi if math.isfinite(hi) else "inf"] for lo, hi in self.range_bins_m],
            "score_cutoffs": "0.00:0.01:1.00 (101, float32)",
        }


@dataclass(frozen=True)
class Boxes3D:
    """A table of 3-D boxes in the vehicle frame, one row per box (struct of arrays).

    frame (N,) any hashable dtype (frame key); label (N,) str; boxes (N, 7) float64
    (cx, cy, cz, l, w, h, heading_rad); score (N,) float64 (1 for ground truth).
    """

    frame: np.ndarray
    label: np.ndarray
    boxes: np.ndarray
    score: np.ndarray

    def __post_init__(self) -> None:
        boxes = np.asarray(self.boxes, dtype=np.float64)
        if boxes.size == 0:
            boxes = boxes.reshape(0, 7)
        dims = check_shape(boxes, ("N", 7), "boxes")
        if not np.isfinite(boxes).all():
            raise AvsimValueError("boxes: must be finite")
        if (boxes[:, 3:6] <= 0).any():
            raise AvsimValueError("boxes: sizes (l, w, h) must be positive")
        frame = np.asarray(self.frame)
        label = np.asarray(self.label, dtype=str)
        score = np.asarray(self.score, dtype=np.float64)
        for name, arr in (("frame", frame), ("label", label), ("score", score)):
            check_shape(arr, ("N",), name, dims=dims)
        if not np.isfinite(score).all():
            raise AvsimValueError("score: must be finite")
        object.__setattr__(self, "boxes", boxes)
        object.__setattr__(self, "frame", frame)
        object.__setattr__(self, "label", label)
        object.__setattr__(self, "score", score)

    @staticmethod
    def ground_truth(frame: np.ndarray, label: np.ndarray, boxes: np.ndarray) -> Boxes3D:
        return Boxes3D(frame, label, boxes, np.ones(len(np.asarray(frame))))

    @staticmethod
    def empty() -> Boxes3D:
        return Boxes3D(np.zeros(0, np.int64), np.zeros(0, str), np.zeros((0, 7)), np.zeros(0))

    def __len__(self) -> int:
        return self.boxes.shape[0]

    def select(self, mask: np.ndarray) -> Boxes3D:
        return Boxes3D(self.frame[mask], self.label[mask], self.boxes[mask], self.score[mask])


# --------------------------------------------------------------------------- matching core


@dataclass(frozen=True)
class _Events:
    """Per-cutoff contributions as intervals [start, end) of cutoff indices, per frame."""

    frame: np.ndarray  # (E,) int64 frame code
    start: np.ndarray  # (E,) int64
    end: np.ndarray  # (E,) int64
    tp: np.ndarray  # (E,) float64
    la: np.ndarray
    ha: np.ndarray

    @staticmethod
    def concat(parts: list[_Events]) -> _Events:
        if not parts:
            z = np.zeros(0, np.int64)
            zf = np.zeros(0)
            return _Events(z, z, z, zf, zf, zf)
        return _Events(*(np.concatenate([getattr(e, f) for e in parts]) for f in ("frame", "start", "end", "tp", "la", "ha")))


@dataclass(frozen=True)
class BreakdownCounts:
    """Everything needed to compute AP for one breakdown under any frame weighting.

    gt_frame (G,) frame codes of its GT; pd_frame (P,), pd_levels (P,) number of cutoffs each
    prediction survives; tp_events: matched contributions.
    """

    num_cutoffs: int
    gt_frame: np.ndarray
    pd_frame: np.ndarray
    pd_levels: np.ndarray
    tp_events: _Events

    def totals(self, frame_weight: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Per-cutoff totals (K,) of tp, la, ha, num_pd and the scalar num_gt."""
        k = self.num_cutoffs

        def w(frames: np.ndarray) -> np.ndarray:
            return np.ones(frames.shape[0]) if frame_weight is None else frame_weight[frames]

        def interval_sum(start: np.ndarray, end: np.ndarray, values: np.ndarray) -> np.ndarray:
            diff = np.bincount(start, weights=values, minlength=k + 1)[: k + 1]
            diff = diff - np.bincount(end, weights=values, minlength=k + 1)[: k + 1]
            return np.cumsum(diff)[:k]

        ev = self.tp_events
        we = w(ev.frame)
        zeros = np.zeros(self.pd_levels.shape[0], np.int64)
        return {
            "tp": interval_sum(ev.start, ev.end, ev.tp * we),
            "la": interval_sum(ev.start, ev.end, ev.la * we),
            "ha": interval_sum(ev.start, ev.end, ev.ha * we),
            "num_pd": interval_sum(zeros, self.pd_levels, w(self.pd_frame)),
            "num_gt": np.asarray(w(self.gt_frame).sum()),
        }


@dataclass(frozen=True)
class _Pairs:
    gi: np.ndarray  # (E,) GT row
    pj: np.ndarray  # (E,) prediction row
    weight: np.ndarray  # (E,) int64 Hungarian weight (`quantised_weight`), > 0
    la: np.ndarray
    ha: np.ndarray


_PAIR_FIELDS = ("gi", "pj", "weight", "la", "ha")


def pair_count(gt_key: np.ndarray, pd_key: np.ndarray) -> tuple[int, int, int, int]:
    """How many (gt row, pd row) pairs share a key, and the key (index into the union) with the most.

    Returns:
        (total pairs, worst key's position in `np.union1d(gt_key, pd_key)`, its gt rows, its pd rows).
    """
    keys = np.union1d(gt_key, pd_key)
    g_cnt = np.searchsorted(np.sort(gt_key), keys, "right") - np.searchsorted(np.sort(gt_key), keys, "left")
    p_cnt = np.searchsorted(np.sort(pd_key), keys, "right") - np.searchsorted(np.sort(pd_key), keys, "left")
    counts = g_cnt.astype(np.float64) * p_cnt
    worst = int(np.argmax(counts)) if counts.size else 0
    return int(counts.sum()), worst, int(g_cnt[worst]) if counts.size else 0, int(p_cnt[worst]) if counts.size else 0


def iter_pairs_within_groups(gt_key: np.ndarray, pd_key: np.ndarray, block: int = _PAIR_BLOCK) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """All (gt row, pd row) index pairs with equal integer keys, in blocks of at most `block` pairs
    (memory bounded by the block, whatever the number of pairs)."""
    g_order = np.argsort(gt_key, kind="stable")
    p_order = np.argsort(pd_key, kind="stable")
    keys = np.union1d(gt_key, pd_key)
    g_start = np.searchsorted(gt_key[g_order], keys, "left")
    g_cnt = np.searchsorted(gt_key[g_order], keys, "right") - g_start
    p_start = np.searchsorted(pd_key[p_order], keys, "left")
    p_cnt = np.searchsorted(pd_key[p_order], keys, "right") - p_start
    counts = g_cnt * p_cnt
    keep = counts > 0
    g_start, p_start, p_cnt, counts = g_start[keep], p_start[keep], p_cnt[keep], counts[keep]
    ends = np.cumsum(counts)
    starts = ends - counts
    total = int(ends[-1]) if ends.size else 0
    for first in range(0, total, block):
        index = np.arange(first, min(first + block, total), dtype=np.int64)
        group = np.searchsorted(ends, index, "right")
        local = index - starts[group]
        yield g_order[g_start[group] + local // p_cnt[group]], p_order[p_start[group] + local % p_cnt[group]]


def pairs_within_groups(gt_key: np.ndarray, pd_key: np.ndarray, limit: int = MAX_STORED_PAIRS) -> tuple[np.ndarray, np.ndarray]:
    """All (gt row, pd row) index pairs with equal integer keys, at most `limit` of them (else AvsimValueError)."""
    total, worst, g, p = pair_count(gt_key, pd_key)
    if total > limit:
        raise AvsimValueError(f"{total} box or lane pairs to compare (one frame has {g} ground-truth and {p} predicted), "
                              f"more than the {limit} a metric compares at once")  # fmt: skip
    blocks = list(iter_pairs_within_groups(gt_key, pd_key))
    if not blocks:
        z = np.zeros(0, np.int64)
        return z, z
    return np.concatenate([b[0] for b in blocks]), np.concatenate([b[1] for b in blocks])


def _candidate_pairs(
    gt_box: np.ndarray, pd_box: np.ndarray, gi: np.ndarray, pj: np.ndarray, cfg: LetConfig,
    iou_threshold: float, r_gt: np.ndarray, r_pd: np.ndarray,
) -> _Pairs:
    """Filter all-pairs to those that can match and compute their measures.

    A pair can match when its longitudinal affinity is positive and its LET-IoU reaches the
    class threshold (Waymo's `CanMatch`); every other pair has weight 0 in the Hungarian
    assignment, so it is left out before assigning (never discarded after it). Pairs whose
    quantised weight rounds to 0 are left out too: with weight 0 the assignment cannot prefer
    them, and the reference drops a 0-weight assignment only if it cannot match.
    `gt_box`, `pd_box` are sensor-relative; `r_gt`, `r_pd` their clamped centre ranges.
    """
    gc, pc = gt_box[:, :3], pd_box[:, :3]
    # G.P from columns (no (E, 3) temporaries); e_lon = |r_pd cos - r_gt| = |G.P / r_gt - r_gt|.
    dot = gc[gi, 0] * pc[pj, 0] + gc[gi, 1] * pc[pj, 1] + gc[gi, 2] * pc[pj, 2]
    rg = r_gt[gi]
    tol = np.maximum(cfg.tolerance_fraction * rg, cfg.min_tolerance_m)
    la = np.clip(1.0 - np.abs(dot / rg - rg) / tol, 0.0, 1.0)
    keep = la > 0.0
    gi, pj, la = gi[keep], pj[keep], la[keep]
    g, p = gt_box[gi], pd_box[pj]
    # Cheap overlap test on circumscribed circles and heights, after the LET shift.
    shifted = let_aligned_centers(g[:, :3], p[:, :3])
    reach = 0.5 * (np.hypot(g[:, 3], g[:, 4]) + np.hypot(p[:, 3], p[:, 4]))
    dxy = np.hypot(shifted[:, 0] - g[:, 0], shifted[:, 1] - g[:, 1])
    dz = np.abs(shifted[:, 2] - g[:, 2])
    keep = (dxy < reach) & (dz < 0.5 * (g[:, 5] + p[:, 5]))
    g, p, gi, pj, la, shifted = g[keep], p[keep], gi[keep], pj[keep], la[keep], shifted[keep]
    moved = p.copy()
    moved[:, :3] = shifted
    iou32, la32 = paired_iou_3d(g, moved).astype(np.float32), la.astype(np.float32)
    weight = quantised_weight(iou32, la32)
    keep = (weight > 0) & (la32 > 0) & (iou32 >= np.float32(iou_threshold))
    ha = heading_accuracy(g[:, 6], p[:, 6])
    return _Pairs(gi[keep], pj[keep], weight[keep], la[keep], ha[keep])


def _segment_starts(sorted_keys: np.ndarray) -> np.ndarray:
    if sorted_keys.size == 0:
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])


def _star_events(pairs: _Pairs, idx: np.ndarray, comp: np.ndarray, pd_frame: np.ndarray, pd_levels: np.ndarray) -> _Events:
    """Components with one GT and several predictions, in closed form.

    With a single row the assignment takes the kept prediction of largest weight (first in
    row order on ties), so prediction j is the one assigned for the cutoffs where it is kept
    and no heavier prediction is: [max level of heavier ones, its own level).
    """
    order = idx[np.lexsort((pairs.pj[idx], -pairs.weight[idx], comp[idx]))]
    c = comp[order]
    lv = pd_levels[pairs.pj[order]]
    starts = _segment_starts(c)
    seg = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, c.size]))
    # exclusive segmented running max of levels (levels <= 101 < 1000)
    shifted = lv + seg * 1000
    run = np.maximum.accumulate(shifted) - seg * 1000
    prev = np.r_[0, run[:-1]]
    prev[starts] = 0
    good = lv > prev
    o = order[good]
    return _Events(pd_frame[pairs.pj[o]], prev[good], lv[good], np.ones(o.size), pairs.la[o], pairs.ha[o])


def _fan_events(pairs: _Pairs, idx: np.ndarray, comp: np.ndarray, pd_frame: np.ndarray, pd_levels: np.ndarray) -> _Events:
    """Components with one prediction and several GTs: it goes to its heaviest GT while kept."""
    order = idx[np.lexsort((pairs.gi[idx], -pairs.weight[idx], comp[idx]))]
    o = order[_segment_starts(comp[order])]
    pj = pairs.pj[o]
    return _Events(pd_frame[pj], np.zeros(o.size, np.int64), pd_levels[pj], np.ones(o.size), pairs.la[o], pairs.ha[o])


def _match_events(
    pairs: _Pairs, gt_frame: np.ndarray, pd_frame: np.ndarray, pd_levels: np.ndarray, n_gt: int, n_pd: int
) -> _Events:
    """Hungarian matching for every score cutoff, as interval events."""
    if pairs.gi.shape[0] == 0:
        return _Events.concat([])
    graph = coo_matrix(
        (np.ones(pairs.gi.shape[0]), (pairs.gi, n_gt + pairs.pj)), shape=(n_gt + n_pd, n_gt + n_pd)
    )
    _, comp_of_node = connected_components(graph, directed=False)
    comp = comp_of_node[pairs.gi]
    edges = np.bincount(comp)
    gts = np.bincount(comp[np.unique(pairs.gi, return_index=True)[1]], minlength=edges.size)
    pds = np.bincount(comp[np.unique(pairs.pj, return_index=True)[1]], minlength=edges.size)
    kind_gt1, kind_pd1 = gts[comp] == 1, pds[comp] == 1
    parts = [
        _star_events(pairs, np.flatnonzero(kind_gt1), comp, pd_frame, pd_levels),  # includes single edges
        _fan_events(pairs, np.flatnonzero(kind_pd1 & ~kind_gt1), comp, pd_frame, pd_levels),
    ]
    multi = np.flatnonzero(~kind_gt1 & ~kind_pd1)
    if multi.size:
        order = multi[np.argsort(comp[multi], kind="stable")]
        for ix in np.split(order, _segment_starts(comp[order])[1:]):
            parts.append(_match_component(pairs, ix, pd_frame, pd_levels))
    return _Events.concat(parts)


def _match_component(pairs: _Pairs, idx: np.ndarray, pd_frame: np.ndarray, pd_levels: np.ndarray) -> _Events:
    """Solve one connected component at each distinct set of kept predictions."""
    rows, r_inv = np.unique(pairs.gi[idx], return_inverse=True)
    cols, c_inv = np.unique(pairs.pj[idx], return_inverse=True)
    weight = np.zeros((rows.size, cols.size), np.int64)
    weight[r_inv, c_inv] = pairs.weight[idx]
    la = np.zeros((rows.size, cols.size))
    la[r_inv, c_inv] = pairs.la[idx]
    ha = np.zeros((rows.size, cols.size))
    ha[r_inv, c_inv] = pairs.ha[idx]
    levels = pd_levels[cols]
    frame = pd_frame[cols[0]]
    starts, ends, tps, las, has = [], [], [], [], []
    prev = 0
    for lvl in np.unique(levels):
        if lvl == 0:
            continue
        kept = np.flatnonzero(levels >= lvl)
        r, c = linear_sum_assignment(weight[:, kept], maximize=True)
        c = kept[c]
        good = weight[r, c] > 0
        if good.any():
            starts.append(prev)
            ends.append(int(lvl))
            tps.append(float(good.sum()))
            las.append(float(la[r, c][good].sum()))
            has.append(float(ha[r, c][good].sum()))
        prev = int(lvl)
    n = len(starts)
    return _Events(
        np.full(n, frame, np.int64), np.asarray(starts, np.int64), np.asarray(ends, np.int64),
        np.asarray(tps), np.asarray(las), np.asarray(has),
    )


def class_pairs(
    gt_frame: np.ndarray, gt_box: np.ndarray, pd_frame: np.ndarray, pd_box: np.ndarray, iou_threshold: float, cfg: LetConfig
) -> _Pairs:
    """Candidate (positive-weight) pairs of one class; boxes sensor-relative, frames int codes."""
    r_gt = np.maximum(np.sqrt((gt_box[:, :3] ** 2).sum(axis=1)), 1e-6)
    r_pd = np.maximum(np.sqrt((pd_box[:, :3] ** 2).sum(axis=1)), 1e-6)
    total, worst, g, p = pair_count(gt_frame, pd_frame)
    if total > MAX_LET_PAIRS:
        raise AvsimValueError(f"{total} box pairs to compare (one frame has {g} ground-truth and {p} predicted boxes of a class), "
                              f"more than the {MAX_LET_PAIRS} LET matching compares")  # fmt: skip
    parts = [_candidate_pairs(gt_box, pd_box, gi, pj, cfg, iou_threshold, r_gt, r_pd) for gi, pj in iter_pairs_within_groups(gt_frame, pd_frame)]
    if not parts:
        z = np.zeros(0, np.int64)
        return _Pairs(z, z, z, np.zeros(0), np.zeros(0))
    return _Pairs(*(np.concatenate([getattr(q, f) for q in parts]) for f in _PAIR_FIELDS))


def breakdown_counts(
    gt_frame: np.ndarray,
    pd_frame: np.ndarray,
    pd_score: np.ndarray,
    pairs: _Pairs,
    gt_mask: np.ndarray,
    pd_mask: np.ndarray,
    cutoffs: np.ndarray,
) -> BreakdownCounts:
    """Match one breakdown (a class's rows selected by `gt_mask`, `pd_mask`) at all cutoffs."""
    pd_levels = np.searchsorted(cutoffs, pd_score.astype(np.float32), side="right").astype(np.int64)
    sel = gt_mask[pairs.gi] & pd_mask[pairs.pj]
    sub = _Pairs(*(getattr(pairs, f)[sel] for f in _PAIR_FIELDS))
    events = _match_events(sub, gt_frame, pd_frame, pd_levels, gt_frame.shape[0], pd_frame.shape[0])
    return BreakdownCounts(cutoffs.shape[0], gt_frame[gt_mask], pd_frame[pd_mask], pd_levels[pd_mask], events)


# --------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class LetEvaluation:
    """Matched counts per breakdown, reusable for bootstrap; `result()` gives the metrics."""

    config: LetConfig
    frame_keys: np.ndarray  # (F,) original frame keys; codes index this
    classes: tuple[LetClass, ...]
    counts: dict[Breakdown, BreakdownCounts]

    def result(self, frame_weight: np.ndarray | None = None, range_bins: bool = True) -> LetResult:
        """AP/APL/APH per class and range bin, the headline (Waymo's mean over vehicle,
        pedestrian, cyclist) and the mean over classes with ground truth.

        Args:
            frame_weight: (F,) weights of the frames (indexed like `frame_keys`), e.g. bootstrap
                counts; None: every frame once.
            range_bins: also compute the range breakdowns.

        Returns:
            the typed result (`avsim.evaluation.let_result.LetResult`).
        """
        delta = self.config.max_recall_delta
        per: dict[LetClass, ClassResult] = {}
        for cls in self.classes:
            ranges = {}
            if range_bins:
                ranges = {b.range_bin: ap_from_totals(c.totals(frame_weight), delta)
                          for b, c in self.counts.items() if b.cls == cls and b.range_bin is not None}  # fmt: skip
            per[cls] = ClassResult(ap_from_totals(self.counts[Breakdown(cls)].totals(frame_weight), delta), ranges)
        return let_result(per)


def frame_codes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Joint integer codes of two frame-key arrays: (keys (F,), codes_a, codes_b)."""
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        both = np.concatenate([a.astype(np.int64), b.astype(np.int64)])
    else:
        both = np.concatenate([a.astype(str), b.astype(str)])
    keys, codes = np.unique(both, return_inverse=True)
    codes = codes.astype(np.int64).ravel()
    return keys, codes[: a.shape[0]], codes[a.shape[0] :]


def range_bin_name(lo: float, hi: float) -> str:
    return RangeBin(lo, hi).name


def evaluate_let(
    gt: Boxes3D, pred: Boxes3D, config: LetConfig | None = None, progress: StepProgress | None = None
) -> LetEvaluation:
    """Match `pred` against `gt` for every class (and range bin) and score cutoff.

    Args:
        gt: ground-truth boxes (N, 7), vehicle frame.
        pred: predicted boxes (M, 7) with scores.
        config: matching parameters (default: the Waymo camera-only challenge's).
        progress: called as `("LET classes", done, total)` after each class.

    Returns:
        the per-class, per-range-bin counts at every score cutoff (`.result()` gives AP/APL/APH).
    """
    cfg = config or LetConfig()
    cutoffs = waymo_score_cutoffs()
    keys, g_code, p_code = frame_codes(gt.frame, pred.frame)
    sensor = np.asarray(cfg.sensor_location_m, dtype=np.float64)
    g_box, p_box = gt.boxes.copy(), pred.boxes.copy()
    g_box[:, :3] -= sensor
    p_box[:, :3] -= sensor
    # Range bins use the distance from the vehicle origin (not the sensor).
    g_rng = np.linalg.norm(gt.boxes[:, :3], axis=1)
    p_rng = np.linalg.norm(pred.boxes[:, :3], axis=1)
    names = sorted(set(gt.label.tolist()) | set(pred.label.tolist()))
    classes = tuple(sorted((LetClass.parse(n) for n in names), key=list(LetClass).index))
    counts: dict[Breakdown, BreakdownCounts] = {}
    for k, cls in enumerate(classes):
        g_idx, p_idx = np.flatnonzero(gt.label == cls.value), np.flatnonzero(pred.label == cls.value)
        gf, pf = g_code[g_idx], p_code[p_idx]
        pairs = class_pairs(gf, g_box[g_idx], pf, p_box[p_idx], cfg.iou_threshold(cls), cfg)
        gr, pr = g_rng[g_idx], p_rng[p_idx]
        subsets = [(Breakdown(cls), np.ones(g_idx.size, bool), np.ones(p_idx.size, bool))]
        subsets += [(Breakdown(cls, b), b.contains(gr), b.contains(pr)) for b in cfg.range_bins]
        for key, gsel, psel in subsets:
            counts[key] = breakdown_counts(gf, pf, pred.score[p_idx], pairs, gsel, psel, cutoffs)
        report_step(progress, "LET classes", k + 1, len(classes))
    return LetEvaluation(cfg, keys, classes, counts)
