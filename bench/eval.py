"""Benchmark of the evaluation metrics (not a test; no timing asserts).

    .venv/bin/python bench/eval.py                 # full sizes (10,000 frames each)
    .venv/bin/python bench/eval.py --frames 1000   # quicker
    .venv/bin/python bench/eval.py --skip-fid      # no Inception run

Measures LET-AP (F frames x 50 GT x 60 predictions, 3 classes, all breakdowns), the OpenLane
lane metrics (F frames, ~6 GT and ~6 predicted lanes each), the literal per-frame reference
port of the lane metric (tests/test_eval_reference_impl.py, a subset, extrapolated), and FID
feature extraction on CPU: decode-only frames/s vs network frames/s on the Udacity clip.
Prints a table with the machine and library versions.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from avsim.evaluation.let_ap import Boxes3D

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def let_data(n_frames: int, seed: int = 0) -> tuple[Boxes3D, Boxes3D]:
    rng = np.random.default_rng(seed)
    n_gt, n_tp, n_fp = 50, 45, 15
    frames = np.repeat(np.arange(n_frames), n_gt)
    cls = np.array(["vehicle", "pedestrian", "cyclist"])[rng.integers(0, 3, frames.size)]
    size = np.select([cls == "vehicle", cls == "pedestrian"], [1, 2], 3)
    dims = np.array([[0, 0, 0], [4.5, 1.9, 1.6], [0.8, 0.8, 1.8], [1.8, 0.7, 1.7]])[size]
    ang, r = rng.uniform(-np.pi, np.pi, frames.size), rng.uniform(3, 80, frames.size)
    gt_boxes = np.column_stack([r * np.cos(ang), r * np.sin(ang), dims[:, 2] / 2, dims, rng.uniform(-np.pi, np.pi, frames.size)])
    sel = (np.arange(n_frames)[:, None] * n_gt + np.arange(n_tp)).ravel()
    pb = gt_boxes[sel].copy()
    pb[:, :2] *= (1 + rng.normal(0, 0.05, sel.size))[:, None]  # depth error grows with range
    pb[:, :3] += rng.normal(0, 0.2, (sel.size, 3))
    pb[:, 6] += rng.normal(0, 0.2, sel.size)
    nf = n_frames * n_fp
    fa, fr = rng.uniform(-np.pi, np.pi, nf), rng.uniform(3, 80, nf)
    fp = np.column_stack([fr * np.cos(fa), fr * np.sin(fa), np.full(nf, 0.8), np.tile([4.5, 1.9, 1.6], (nf, 1)), rng.uniform(-3, 3, nf)])
    gt = Boxes3D.ground_truth(frames, cls, gt_boxes)
    pred = Boxes3D(np.concatenate([frames[sel], np.repeat(np.arange(n_frames), n_fp)]),
                   np.concatenate([cls[sel], np.full(nf, "vehicle")]), np.concatenate([pb, fp]),
                   rng.uniform(0, 1, sel.size + nf))
    return gt, pred


LaneLists = tuple[list[int], list[np.ndarray], list[int], list[np.ndarray], list[int], list[np.ndarray], list[int]]


def lane_data(n_frames: int, seed: int = 0) -> LaneLists:
    """GT (frame, points, category, visibility) and predicted (frame, points, category) lanes."""
    rng = np.random.default_rng(seed)
    frames, lanes, cats, vis, pf, pl, pc = [], [], [], [], [], [], []
    for f in range(n_frames):
        for k in range(6):
            m = int(rng.integers(10, 40))
            y = np.sort(rng.uniform(0, 110, m))
            x0 = -9 + 3.6 * k + rng.normal(0, 0.3)
            lane = np.column_stack([x0 + rng.normal(0, 0.01) * y, y, 0.01 * y])
            frames.append(f)
            lanes.append(lane)
            cats.append(int(rng.integers(1, 13)))
            vis.append(rng.random(m) > 0.05)
            if rng.random() < 0.9:
                pf.append(f)
                pc.append(cats[-1])
                pl.append(lane + [rng.normal(0, 0.4), 0.0, rng.normal(0, 0.2)])
        if rng.random() < 0.5:
            y = np.linspace(5, 60, 15)
            pf.append(f)
            pc.append(1)
            pl.append(np.column_stack([rng.uniform(-9, 9, 15), y, np.zeros(15)]))
    return frames, lanes, cats, vis, pf, pl, pc


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


Row = tuple[str, str, str]  # benchmark, result, notes


def let_rows(n_frames: int) -> list[Row]:
    from avsim.evaluation.let_ap import evaluate_let
    from avsim.evaluation.let_result import LetMetric

    gt, pred = let_data(n_frames)
    ev, t_match = timed(lambda: evaluate_let(gt, pred))
    res, t_res = timed(lambda: ev.result())
    return [(f"LET-AP {n_frames} frames x 50 GT x 60 pred (3 classes + 9 range bins)",
             f"{t_match + t_res:.2f} s", f"match {t_match:.2f} s, AP {t_res:.3f} s; headline AP {res.headline[LetMetric.AP]:.3f}")]


def lane_rows(n_frames: int) -> list[Row]:
    from avsim.evaluation.lanes import LaneSet, evaluate_lanes

    frames, lanes, cats, vis, pf, pl, pc = lane_data(n_frames)
    g = LaneSet.from_lists(frames, lanes, cats, vis)
    p = LaneSet.from_lists(pf, pl, pc)
    lres, t_lane = timed(lambda: evaluate_lanes(g, p).result())
    rows = [(f"Lanes {n_frames} frames ({len(g)} GT, {len(p)} pred lanes)", f"{t_lane:.2f} s", f"F1 {lres['f_score']:.3f}")]

    sys.path.insert(0, str(REPO / "tests"))
    from test_eval_reference_impl import lane_frame_reference

    sub = min(300, n_frames)
    by_g: dict[int, list[int]] = {}
    by_p: dict[int, list[int]] = {}
    for i, f in enumerate(frames):
        by_g.setdefault(f, []).append(i)
    for i, f in enumerate(pf):
        by_p.setdefault(f, []).append(i)
    t0 = time.perf_counter()
    for f in range(sub):
        gi, pi = by_g.get(f, []), by_p.get(f, [])
        lane_frame_reference([lanes[i] for i in gi], [cats[i] for i in gi], [vis[i] for i in gi],
                             [pl[i] for i in pi], [pc[i] for i in pi])
    t_ref = (time.perf_counter() - t0) * n_frames / sub
    rows.append((f"Lanes, literal per-frame port of the reference (extrapolated from {sub} frames)", f"{t_ref:.1f} s", "same numbers (tests)"))
    return rows


def fid_rows(n: int) -> list[Row]:
    data = Path(os.environ.get("AVSIM_SHARED_DIR", REPO.parent / "shared")) / "data" / "udacity" / "solidWhiteRight.mp4"
    if not data.is_file():
        return [("FID", "skipped", f"{data} not found (set AVSIM_SHARED_DIR)")]
    import torch

    from avsim.evaluation.inception import (
        inception_features,
        load_fid_inception,
    )
    from avsim.evaluation.video_frames import iter_frame_batches

    _, t_dec = timed(lambda: sum(len(b) for b in iter_frame_batches(data, 16, n)))
    model, _ = load_fid_inception()
    inception_features(model, np.zeros((1, 299, 299, 3), np.uint8))  # warm-up
    batches = list(iter_frame_batches(data, 16, n))
    _, t_net = timed(lambda: [inception_features(model, b) for b in batches])
    _, t_all = timed(lambda: [inception_features(model, b) for b in iter_frame_batches(data, 16, n)])
    return [(f"FID decode only (960x540 H.264, {n} frames)", f"{n / t_dec:.0f} frames/s", ""),
            (f"FID Inception on CPU ({torch.get_num_threads()} threads, batch 16)", f"{n / t_net:.1f} frames/s", ""),
            ("FID end to end (decode in a thread + network)", f"{n / t_all:.1f} frames/s", "network-bound if ~ the line above")]


def print_rows(rows: list[Row]) -> None:
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    vers = ", ".join(f"{p} {md.version(p)}" for p in ("numpy", "scipy", "torch", "opencv-python-headless", "av"))
    print(f"machine: {machine}\nversions: {vers}\n")
    w = max(len(r[0]) for r in rows)
    print(f"{'benchmark'.ljust(w)}  {'result':>16}  notes")
    for name, val, note in rows:
        print(f"{name.ljust(w)}  {val:>16}  {note}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=10_000)
    ap.add_argument("--fid-frames", type=int, default=64)
    ap.add_argument("--skip-fid", action="store_true")
    args = ap.parse_args()
    rows = let_rows(args.frames) + lane_rows(args.frames)
    if not args.skip_fid:
        rows += fid_rows(args.fid_frames)
    print_rows(rows)


if __name__ == "__main__":
    main()
