"""3-D lane metrics as OpenLane-V1's evaluation (F-score, x/z error near/far, category accuracy).

Follows the OpenLane / PersFormer 3-D lane evaluation as written down in
`shared/specs/metrics.md` section 2. Lanes live in OpenLane's ground frame: x right, y forward,
z up, metres. All lanes of all frames are held as one ragged table (`LaneSet`); pruning,
resampling and pair costs are vectorised over the whole table, and only the per-frame
minimum-cost assignment is a Python-level loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape
from avsim.evaluation.let_ap import frame_codes, pairs_within_groups

_PAIR_BLOCK = 50_000  # lane pairs per block: bounds the (E, 100) working arrays


@dataclass(frozen=True)
class LaneConfig:
    """OpenLane-V1 evaluation constants (the reference's defaults)."""

    x_min_m: float = -10.0
    x_max_m: float = 10.0
    y_samples_m: tuple[float, ...] = tuple(float(v) for v in range(3, 103))
    dist_threshold_m: float = 1.5
    ratio_threshold: float = 0.75
    near_far_split_m: float = 40.0
    prune_y_max_m: float = 200.0

    @property
    def y_samples(self) -> np.ndarray:
        return np.asarray(self.y_samples_m, dtype=np.float64)

    @property
    def near_count(self) -> int:
        """Number of samples counted as near (y <= split): 38 for the defaults."""
        return int(np.flatnonzero(self.y_samples > self.near_far_split_m)[0])

    def as_dict(self) -> dict[str, Any]:
        ys = self.y_samples
        return {
            "x_range_m": [self.x_min_m, self.x_max_m],
            "y_samples_m": [float(ys[0]), float(ys[-1]), len(ys)],
            "dist_threshold_m": self.dist_threshold_m,
            "ratio_threshold": self.ratio_threshold,
            "near_far_split_m": self.near_far_split_m,
        }


@dataclass(frozen=True)
class LaneSet:
    """Lanes of many frames in the OpenLane ground frame (ragged struct of arrays).

    frame (L,) frame keys; category (L,) int64 (OpenLane codes; -1 = none given);
    points_m (M, 3) x right, y forward, z up; offsets (L+1,) int64; visibility (M,) bool.
    """

    frame: np.ndarray
    category: np.ndarray
    points_m: np.ndarray
    offsets: np.ndarray
    visibility: np.ndarray | None = field(default=None)

    def __post_init__(self) -> None:
        pts = np.asarray(self.points_m, dtype=np.float64)
        if pts.size == 0:
            pts = pts.reshape(0, 3)
        check_shape(pts, ("M", 3), "points_m")
        if not np.isfinite(pts).all():
            raise AvsimValueError("points_m: must be finite")
        off = np.asarray(self.offsets, dtype=np.int64)
        frame = np.asarray(self.frame)
        n = frame.shape[0]
        if off.shape != (n + 1,) or off[0] != 0 or off[-1] != pts.shape[0] or (np.diff(off) < 0).any():
            raise AvsimValueError(f"offsets: expected non-decreasing (L+1,) from 0 to {pts.shape[0]}")
        cat = np.asarray(self.category, dtype=np.int64)
        check_shape(cat, (n,), "category")
        vis = np.ones(pts.shape[0], bool) if self.visibility is None else np.asarray(self.visibility) > 0.5
        check_shape(vis, (pts.shape[0],), "visibility")
        for name, value in (("points_m", pts), ("offsets", off), ("frame", frame), ("category", cat), ("visibility", vis)):
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return self.frame.shape[0]

    @property
    def lane_index(self) -> np.ndarray:
        """Lane row of every point, (M,)."""
        return np.repeat(np.arange(len(self)), np.diff(self.offsets))

    @staticmethod
    def from_lists(frames: list, lanes: list[np.ndarray], categories: list[int] | None = None,
                   visibilities: list[np.ndarray] | None = None) -> LaneSet:
        """Build from per-lane arrays `(n_i, 3)`."""
        counts = [np.asarray(l).reshape(-1, 3).shape[0] for l in lanes]
        pts = np.concatenate([np.asarray(l, np.float64).reshape(-1, 3) for l in lanes]) if lanes else np.zeros((0, 3))
        vis = None if visibilities is None else (np.concatenate([np.asarray(v) for v in visibilities]) if lanes else np.zeros(0))
        cat = np.full(len(lanes), -1) if categories is None else np.asarray(categories, np.int64)
        frame_arr = np.asarray(frames) if frames else np.zeros(0, np.int64)
        return LaneSet(frame_arr, cat, pts, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), vis)


# --------------------------------------------------------------------------- preprocessing


def _keep_points(ls: LaneSet, keep: np.ndarray) -> LaneSet:
    counts = np.bincount(ls.lane_index[keep], minlength=len(ls))
    off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    assert ls.visibility is not None  # __post_init__ always sets an array
    return LaneSet(ls.frame, ls.category, ls.points_m[keep], off, ls.visibility[keep])


def _keep_lanes(ls: LaneSet, keep: np.ndarray) -> LaneSet:
    pkeep = keep[ls.lane_index]
    counts = np.diff(ls.offsets)[keep]
    off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    assert ls.visibility is not None  # __post_init__ always sets an array
    return LaneSet(ls.frame[keep], ls.category[keep], ls.points_m[pkeep], off, ls.visibility[pkeep])


def _sort_by_y(ls: LaneSet) -> LaneSet:
    order = np.lexsort((ls.points_m[:, 1], ls.lane_index))  # stable within equal y
    assert ls.visibility is not None  # __post_init__ always sets an array
    return LaneSet(ls.frame, ls.category, ls.points_m[order], ls.offsets, ls.visibility[order])


def _count(ls: LaneSet) -> np.ndarray:
    return np.diff(ls.offsets)


def prune_lanes(ls: LaneSet, cfg: LaneConfig, use_visibility: bool) -> LaneSet:
    """The reference's per-lane pruning before resampling (spec section 2, steps 1-3)."""
    if use_visibility:
        assert ls.visibility is not None  # __post_init__ always sets an array
        ls = _keep_points(ls, ls.visibility)
    ls = _keep_lanes(ls, _count(ls) >= 2)
    if len(ls):
        # The reference tests the lane's first and last points as given (OpenLane lanes run
        # with increasing y, where this is the spec's "sorted by y" reading).
        first_y = ls.points_m[ls.offsets[:-1], 1]
        last_y = ls.points_m[ls.offsets[1:] - 1, 1]
        ys = cfg.y_samples
        ls = _keep_lanes(ls, (first_y < ys[-1]) & (last_y > ys[0]))
    p = ls.points_m
    inside = (p[:, 1] > 0) & (p[:, 1] < cfg.prune_y_max_m) & (p[:, 0] > cfg.x_min_m) & (p[:, 0] < cfg.x_max_m)
    ls = _keep_points(ls, inside)
    ls = _keep_lanes(ls, _count(ls) >= 2)
    return _sort_by_y(ls)  # resampling (like scipy's interp1d) works on y-sorted points


def resample_lanes(ls: LaneSet, cfg: LaneConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x (L, S), z (L, S) at the y samples and visibility (L, S) bool, for y-sorted lanes.

    Linear interpolation with linear extrapolation from the end segments (as scipy's
    interp1d(fill_value="extrapolate")). A sample is visible when -10 <= x <= 10 and it lies
    within the lane's own y extent.
    """
    ys = cfg.y_samples
    n_lanes, n_s = len(ls), ys.shape[0]
    if n_lanes == 0:
        z = np.zeros((0, n_s))
        return z, z.copy(), np.zeros((0, n_s), bool)
    start, cnt = ls.offsets[:-1], _count(ls)
    lane = ls.lane_index
    # Points are y-sorted within lanes and y is pruned to (0, 200): this key is monotone overall.
    span = cfg.prune_y_max_m * 2.0 + 1.0
    key = lane * span + ls.points_m[:, 1]
    query = (np.arange(n_lanes)[:, None] * span + ys[None, :]).ravel()
    pos = np.searchsorted(key, query, side="left").reshape(n_lanes, n_s) - start[:, None]
    hi = np.clip(pos, 1, cnt[:, None] - 1) + start[:, None]
    lo = hi - 1
    p = ls.points_m
    dy = p[hi, 1] - p[lo, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (ys[None, :] - p[lo, 1]) / dy
    x = p[lo, 0] + t * (p[hi, 0] - p[lo, 0])
    z = p[lo, 2] + t * (p[hi, 2] - p[lo, 2])
    y_min = p[start, 1]
    y_max = p[start + cnt - 1, 1]
    vis = (x >= cfg.x_min_m) & (x <= cfg.x_max_m) & (ys[None, :] >= y_min[:, None]) & (ys[None, :] <= y_max[:, None])
    return x, z, vis


@dataclass(frozen=True)
class _Resampled:
    frame: np.ndarray  # (L,) frame codes
    category: np.ndarray
    x: np.ndarray
    z: np.ndarray
    vis: np.ndarray


def _prepare(ls: LaneSet, codes: np.ndarray, cfg: LaneConfig, use_visibility: bool) -> _Resampled:
    ls = LaneSet(codes, ls.category, ls.points_m, ls.offsets, ls.visibility)
    ls = prune_lanes(ls, cfg, use_visibility)
    x, z, vis = resample_lanes(ls, cfg)
    keep = vis.sum(axis=1) > 1
    return _Resampled(ls.frame[keep].astype(np.int64), ls.category[keep], x[keep], z[keep], vis[keep])


# --------------------------------------------------------------------------- matching


def _pair_costs(g: _Resampled, p: _Resampled, gi: np.ndarray, pj: np.ndarray, cfg: LaneConfig) -> tuple[np.ndarray, np.ndarray]:
    """Integer assignment cost and num_match of lane pairs (the reference's definitions)."""
    gv, pv = g.vis[gi], p.vis[pj]
    both = gv & pv
    other = gv ^ pv
    dx = g.x[gi] - p.x[pj]
    dz = g.z[gi] - p.z[pj]
    dist = np.sqrt(dx * dx + dz * dz)
    # d = dist where both visible, 0 where both invisible, the threshold otherwise; built by
    # multiplication so that the summed values (and so int(sum)) equal the reference's.
    d = dist * both + cfg.dist_threshold_m * other
    # num_match = #(d < thr) - #(both invisible) = #(both visible and dist < thr)
    num_match = (both & (dist < cfg.dist_threshold_m)).sum(axis=1)
    total = d.sum(axis=1)
    cost = np.where((total > 0) & (total < 1), 1, total.astype(np.int64))
    return cost, num_match


def _pair_errors(g: _Resampled, p: _Resampled, gi: np.ndarray, pj: np.ndarray, cfg: LaneConfig) -> dict[str, np.ndarray]:
    """Mean |dx|, |dz| over both-visible samples, near and far (NaN where none)."""
    both = g.vis[gi] & p.vis[pj]
    k = cfg.near_count
    out = {}
    for name, v in (("x", np.abs(g.x[gi] - p.x[pj])), ("z", np.abs(g.z[gi] - p.z[pj]))):
        for part, sl in (("near", slice(0, k)), ("far", slice(k, None))):
            n = both[:, sl].sum(axis=1)
            s = (v[:, sl] * both[:, sl]).sum(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                out[f"{name}_{part}"] = np.where(n > 0, s / np.maximum(n, 1), np.nan)
    return out


def min_cost_flow_assignment(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reference's assignment of GT rows to predicted columns, ties included.

    OpenLane's `utils/MinCostFlow.SolveMinCostFlow` builds this graph for OR-tools'
    `SimpleMinCostFlow`: node 0 the source, 1..G the GT lanes, G+1..G+P the predictions, G+P+1
    the sink; arcs (capacity 1) source -> each GT (cost 0), every GT -> every prediction in
    row-major order (the integer pair cost), each prediction -> sink (cost 0); supply min(G, P).
    The same graph, in the same arc order, goes to the same solver here: an optimal assignment
    is not unique when costs tie, and which one OR-tools returns decides which pairs count
    (e.g. 2 x 2 equal costs where only one of the two optimal assignments keeps both pairs
    under the match threshold). OR-tools 9.3 (`pywrapgraph`, the API OpenLane calls) and 9.14
    (`ortools.graph.python`) return the same flows on 3,000 tie-heavy matrices.

    Args:
        cost: (G, P) int64 pair costs, G, P >= 1.

    Returns:
        (rows, cols) of the assigned pairs, in the solver's arc order (row-major).
    """
    from ortools.graph.python import min_cost_flow

    n_g, n_p = cost.shape
    solver = min_cost_flow.SimpleMinCostFlow()
    gt_nodes, pd_nodes = np.arange(1, n_g + 1), np.arange(n_g + 1, n_g + n_p + 1)
    tails = np.concatenate([np.zeros(n_g, np.int64), np.repeat(gt_nodes, n_p), pd_nodes])
    heads = np.concatenate([gt_nodes, np.tile(pd_nodes, n_g), np.full(n_p, n_g + n_p + 1)])
    costs = np.concatenate([np.zeros(n_g, np.int64), cost.astype(np.int64).ravel(), np.zeros(n_p, np.int64)])
    solver.add_arcs_with_capacity_and_unit_cost(tails, heads, np.ones(tails.size, np.int64), costs)
    flow = min(n_g, n_p)
    supplies = np.zeros(n_g + n_p + 2, np.int64)
    supplies[0], supplies[-1] = flow, -flow
    solver.set_nodes_supplies(np.arange(supplies.size), supplies)
    if solver.solve() != solver.OPTIMAL:  # a complete bipartite graph always has a feasible flow
        raise AvsimValueError(f"min-cost flow failed on a {n_g} x {n_p} lane cost matrix")
    pair_arcs = np.arange(n_g, n_g + n_g * n_p)
    used = pair_arcs[solver.flows(pair_arcs) > 0]
    return (used - n_g) // n_p, (used - n_g) % n_p


@dataclass(frozen=True)
class LaneEvaluation:
    """Per-frame counts and per-match errors; `result()` gives dataset metrics."""

    config: LaneConfig
    frame_keys: np.ndarray
    # per frame (F,): recall TPs, precision TPs, correct categories, #gt, #pred, #matches
    r_lane: np.ndarray
    p_lane: np.ndarray
    c_lane: np.ndarray
    cnt_gt: np.ndarray
    cnt_pred: np.ndarray
    match_num: np.ndarray
    has_category: bool
    # per match (K,)
    match_frame: np.ndarray
    x_near: np.ndarray
    x_far: np.ndarray
    z_near: np.ndarray
    z_far: np.ndarray

    def result(self, frame_weight: np.ndarray | None = None) -> dict[str, float]:
        w = np.ones(self.r_lane.shape[0]) if frame_weight is None else np.asarray(frame_weight, np.float64)

        def ratio(a: np.ndarray, b: np.ndarray) -> float:
            den = float((b * w).sum())
            return float((a * w).sum()) / den if den > 0 else 0.0

        recall = ratio(self.r_lane, self.cnt_gt)
        precision = ratio(self.p_lane, self.cnt_pred)
        f = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        cat = ratio(self.c_lane, self.match_num) if self.has_category else float("nan")
        mw = w[self.match_frame]

        def wmean(v: np.ndarray) -> float:
            ok = np.isfinite(v) & (mw > 0)
            return float((v[ok] * mw[ok]).sum() / mw[ok].sum()) if ok.any() else float("nan")

        return {
            "f_score": f, "precision": precision, "recall": recall, "category_accuracy": cat,
            "x_error_near_m": wmean(self.x_near), "x_error_far_m": wmean(self.x_far),
            "z_error_near_m": wmean(self.z_near), "z_error_far_m": wmean(self.z_far),
            "num_gt": int(round(float((self.cnt_gt * w).sum()))),
            "num_pred": int(round(float((self.cnt_pred * w).sum()))),
            "num_matches": int(round(float((self.match_num * w).sum()))),
        }


def evaluate_lanes(gt: LaneSet, pred: LaneSet, config: LaneConfig | None = None) -> LaneEvaluation:
    """Evaluate predicted lanes against ground truth, frame by frame (frames keyed by `frame`).

    GT points are pruned by their visibility; predictions are taken as fully visible, as in
    the reference. Frames that appear in either set count.
    """
    cfg = config or LaneConfig()
    keys, g_code, p_code = frame_codes(gt.frame, pred.frame)
    n_f = keys.shape[0]
    g = _prepare(gt, g_code, cfg, use_visibility=True)
    p = _prepare(pred, p_code, cfg, use_visibility=False)
    cnt_gt = np.bincount(g.frame, minlength=n_f).astype(np.float64)
    cnt_pred = np.bincount(p.frame, minlength=n_f).astype(np.float64)
    has_category = bool((pred.category >= 0).any()) if len(pred) else False

    gi, pj = pairs_within_groups(g.frame, p.frame)
    order = np.lexsort((pj, gi, g.frame[gi])) if gi.size else gi
    gi, pj = gi[order], pj[order]
    costs, nmatch = [], []
    for st in range(0, gi.shape[0], _PAIR_BLOCK):
        c, n = _pair_costs(g, p, gi[st : st + _PAIR_BLOCK], pj[st : st + _PAIR_BLOCK], cfg)
        costs.append(c)
        nmatch.append(n)
    meas = {"cost": np.concatenate(costs), "num_match": np.concatenate(nmatch)} if costs else {}

    r_lane, p_lane, c_lane, match_num = (np.zeros(n_f) for _ in range(4))
    sel_pairs: list[np.ndarray] = []
    pair_frame = g.frame[gi]
    bounds = np.flatnonzero(np.diff(pair_frame)) + 1 if gi.size else np.zeros(0, np.int64)
    max_cost = cfg.dist_threshold_m * cfg.y_samples.shape[0]
    for idx in np.split(np.arange(gi.shape[0]), bounds) if gi.size else []:
        rows, r_inv = np.unique(gi[idx], return_inverse=True)
        cols, c_inv = np.unique(pj[idx], return_inverse=True)
        cost = np.zeros((rows.size, cols.size), np.int64)
        cost[r_inv, c_inv] = meas["cost"][idx]
        r, c = min_cost_flow_assignment(cost)
        pair_of = np.zeros((rows.size, cols.size), np.int64)
        pair_of[r_inv, c_inv] = idx
        chosen = pair_of[r, c]
        sel_pairs.append(chosen[meas["cost"][chosen] < max_cost])
    chosen = np.concatenate(sel_pairs) if sel_pairs else np.zeros(0, np.int64)
    cg, cp = gi[chosen], pj[chosen]
    fr = g.frame[cg]
    nm = meas["num_match"][chosen].astype(np.float64) if chosen.size else np.zeros(0)
    rec_tp = nm / g.vis[cg].sum(axis=1) >= cfg.ratio_threshold
    pre_tp = nm / p.vis[cp].sum(axis=1) >= cfg.ratio_threshold
    cat_ok = (p.category[cp] == g.category[cg]) | ((p.category[cp] == 20) & (g.category[cg] == 21))
    np.add.at(r_lane, fr, rec_tp)
    np.add.at(p_lane, fr, pre_tp)
    np.add.at(c_lane, fr, cat_ok)
    np.add.at(match_num, fr, 1.0)

    errs = _pair_errors(g, p, cg, cp, cfg)
    return LaneEvaluation(
        cfg, keys, r_lane, p_lane, c_lane, cnt_gt, cnt_pred, match_num, has_category,
        fr.astype(np.int64), errs["x_near"], errs["x_far"], errs["z_near"], errs["z_far"],
    )
