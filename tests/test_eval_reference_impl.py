"""Literal, loop-by-loop restatements of the reference metrics (spec sections 1-2) for tests.

They follow the reference algorithms step by step (one frame, one lane, one cutoff at a time)
and share no code with avsim.evaluation beyond the IoU helper, so the vectorised
implementations can be checked against them on random inputs. The lane part restates
OpenLane's eval_3D_lane.py `LaneEval.bench` (the version with "both invisible -> 0" and
"0 < cost < 1 -> 1"), assigning with OR-tools' `SimpleMinCostFlow` on the graph OpenLane's
`SolveMinCostFlow` builds, arc by arc in its order (ties included: which optimal assignment
the solver returns decides which pairs count).
"""

from __future__ import annotations

import numpy as np
from scipy.interpolate import interp1d
from scipy.optimize import linear_sum_assignment

Y_SAMPLES = np.arange(3, 103, dtype=np.float64)


def _resample(lane: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    fx = interp1d(lane[:, 1], lane[:, 0], fill_value="extrapolate")
    fz = interp1d(lane[:, 1], lane[:, 2], fill_value="extrapolate")
    return fx(Y_SAMPLES), fz(Y_SAMPLES)


def _prep(lanes, cats, vis_list):
    out, out_c = [], []
    for lane, c, v in zip(lanes, cats, vis_list):
        lane = np.asarray(lane, float)
        if v is not None:
            lane = lane[np.asarray(v) > 0.5]
        if lane.shape[0] < 2:
            continue
        if not (lane[0, 1] < Y_SAMPLES[-1] and lane[-1, 1] > Y_SAMPLES[0]):  # endpoints as given
            continue
        lane = lane[(lane[:, 1] > 0) & (lane[:, 1] < 200)]
        lane = lane[(lane[:, 0] > -10) & (lane[:, 0] < 10)]
        if lane.shape[0] < 2:
            continue
        x, z = _resample(lane)
        vis = (x >= -10) & (x <= 10) & (lane[:, 1].min() <= Y_SAMPLES) & (lane[:, 1].max() >= Y_SAMPLES)
        if vis.sum() <= 1:
            continue
        out.append((x, z, vis))
        out_c.append(c)
    return out, out_c


def _solve_min_cost_flow(cost: np.ndarray) -> list[tuple[int, int]]:
    """OpenLane's SolveMinCostFlow with an all-ones adjacency: source 0, GT 1..G, predictions
    G+1..G+P, sink G+P+1; arcs added one by one in its order; supply min(G, P)."""
    from ortools.graph.python import min_cost_flow

    n_g, n_p = cost.shape
    mcf = min_cost_flow.SimpleMinCostFlow()
    for i in range(n_g):
        mcf.add_arc_with_capacity_and_unit_cost(0, 1 + i, 1, 0)
    for i in range(n_g):
        for j in range(n_p):
            mcf.add_arc_with_capacity_and_unit_cost(1 + i, 1 + n_g + j, 1, int(cost[i, j]))
    for j in range(n_p):
        mcf.add_arc_with_capacity_and_unit_cost(1 + n_g + j, n_g + n_p + 1, 1, 0)
    flow = min(n_g, n_p)
    for node in range(n_g + n_p + 2):
        mcf.set_node_supply(node, flow if node == 0 else -flow if node == n_g + n_p + 1 else 0)
    assert mcf.solve() == mcf.OPTIMAL
    return [(mcf.tail(a) - 1, mcf.head(a) - n_g - 1) for a in range(mcf.num_arcs())
            if mcf.tail(a) != 0 and mcf.head(a) != n_g + n_p + 1 and mcf.flow(a) > 0]  # fmt: skip


def lane_frame_reference(gt_lanes, gt_cats, gt_vis, pred_lanes, pred_cats):
    """One frame: (r_lane, p_lane, c_lane, cnt_gt, cnt_pred, match_num, xn, xf, zn, zf lists)."""
    g, gc = _prep(gt_lanes, gt_cats, gt_vis)
    p, pc = _prep(pred_lanes, pred_cats, [None] * len(pred_lanes))
    close = 38
    cost = np.full((len(g), len(p)), 1000, dtype=int)
    nmatch = np.zeros((len(g), len(p)))
    err = {}
    for i, (gx, gz, gv) in enumerate(g):
        for j, (px, pz, pv) in enumerate(p):
            dx, dz = np.abs(gx - px), np.abs(gz - pz)
            both = gv & pv
            neither = ~gv & ~pv
            other = ~(both | neither)
            d = np.sqrt(dx**2 + dz**2)
            d[neither] = 0
            d[other] = 1.5
            nmatch[i, j] = np.sum(d < 1.5) - np.sum(neither)
            c = np.sum(d)
            cost[i, j] = 1 if 0 < c < 1 else int(c)
            e = []
            for v in (dx, dz):
                for sl in (slice(0, close), slice(close, None)):
                    n = both[sl].sum()
                    e.append(np.sum(v[sl] * both[sl]) / n if n > 0 else -1)
            err[i, j] = (e[0], e[1], e[2], e[3])
    r = pp = cc = m = 0
    xn, xf, zn, zf = [], [], [], []
    if len(g) and len(p):
        for i, j in _solve_min_cost_flow(cost):
            if cost[i, j] < 150:
                m += 1
                if nmatch[i, j] / g[i][2].sum() >= 0.75:
                    r += 1
                if nmatch[i, j] / p[j][2].sum() >= 0.75:
                    pp += 1
                if pc[j] == gc[i] or (pc[j] == 20 and gc[i] == 21):
                    cc += 1
                a, b, c_, d_ = err[i, j]
                xn.append(a)
                zn.append(c_)
                xf.append(b)
                zf.append(d_)
    return r, pp, cc, len(g), len(p), m, xn, xf, zn, zf


def _waymo_edge(iou, la, iou_thr):
    """(CanMatch, edge weight) of one pair as Waymo's HungarianMatcher builds its edges:
    matcher.h holds IoU, LA and the thresholds as float (compare in float32); a pair that
    cannot match has edge 0 before the assignment is solved; std::round(float(iou * la) *
    1000000) rounds halves away from zero."""
    iou32, la32 = np.float32(iou), np.float32(la)
    ok = bool(la32 > 0 and iou32 >= np.float32(iou_thr))
    scaled = float(np.float32(iou32 * la32) * np.float32(1e6))
    return ok, int(np.floor(scaled + 0.5)) if ok else 0


def let_ap_reference(gt_frames, gt_labels, gt_boxes, pd_frames, pd_labels, pd_boxes, pd_scores,
                     cls, iou_thr, sensor=(1.43, 0.0, 2.18), tol_frac=0.1, tol_min=0.5):
    """Per-cutoff (P, PL, PH, R) curves of one class by dense per-frame Hungarian matching."""
    from avsim.evaluation.box_iou import paired_iou_3d

    sensor = np.asarray(sensor)
    cutoffs = np.concatenate([np.arange(100) * 0.01, [1.0]]).astype(np.float32)
    frames = sorted(set(gt_frames.tolist()) | set(pd_frames.tolist()))
    tp = np.zeros(101)
    la_s = np.zeros(101)
    ha_s = np.zeros(101)
    npd = np.zeros(101)
    ngt = 0
    for f in frames:
        g = gt_boxes[(gt_frames == f) & (gt_labels == cls)].copy()
        pm = (pd_frames == f) & (pd_labels == cls)
        p_all, s_all = pd_boxes[pm].copy(), pd_scores[pm]
        g[:, :3] -= sensor
        p_all[:, :3] -= sensor
        ngt += len(g)
        for k, cut in enumerate(cutoffs):
            keep = s_all.astype(np.float32) >= cut
            p = p_all[keep]
            npd[k] += len(p)
            if len(g) == 0 or len(p) == 0:
                continue
            W = np.zeros((len(g), len(p)), dtype=np.int64)
            ok = np.zeros((len(g), len(p)), bool)
            LA = np.zeros((len(g), len(p)))
            HA = np.zeros((len(g), len(p)))
            for i in range(len(g)):
                for j in range(len(p)):
                    G, P = g[i, :3], p[j, :3]
                    rg, rp = max(np.linalg.norm(G), 1e-6), max(np.linalg.norm(P), 1e-6)
                    cos = G @ P / (rg * rp)
                    tol = max(tol_frac * rg, tol_min)
                    la = min(max(1 - abs(rp * cos - rg) / tol, 0.0), 1.0)
                    shifted = p[j].copy()
                    shifted[:3] = P * (G @ P) / max(P @ P, 1e-6)
                    iou = paired_iou_3d(g[i : i + 1], shifted[None])[0]
                    ok[i, j], W[i, j] = _waymo_edge(iou, la, iou_thr)
                    LA[i, j] = la
                    dh = abs((p[j, 6] - g[i, 6] + np.pi) % (2 * np.pi) - np.pi)
                    HA[i, j] = min(max(1 - dh / np.pi, 0.0), 1.0)
            r, c = linear_sum_assignment(W, maximize=True)
            for i, j in zip(r, c):
                if ok[i, j]:  # an assigned pair counts when it can match (matcher.cc)
                    tp[k] += 1
                    la_s[k] += LA[i, j]
                    ha_s[k] += HA[i, j]
    rec = tp / ngt if ngt else np.zeros(101)
    prec = [np.where(npd > 0, v / np.maximum(npd, 1), 0.0) for v in (tp, la_s, ha_s)]
    prec = [np.where(rec == 0, 1.0, pr) for pr in prec]
    return prec[0], prec[1], prec[2], rec, ngt, int(npd[0])
