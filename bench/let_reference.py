"""avsim's LET-3D-AP against Waymo's compiled metrics op, on fresh random inputs fed as files.

For each seed a random multi-frame scene (vehicles, pedestrians, cyclists and signs; crowded
clusters where several predictions compete, duplicates, false positives, boxes near the IoU
thresholds) is written as Waymo `metrics_pb2.Objects` files, ground truth and predictions.
avsim reads them as `avsim eval let --gt gt.bin --pred pd.bin` does; the official op
(`py_metrics_ops.detection_metrics`, the camera-only challenge config of
`metrics/tools/compute_detection_let_metrics_main.cc`: OBJECT_TYPE and RANGE breakdowns,
LEVEL_2, Hungarian matcher, range-aligned LET) reads the same files in a second Python that has
TensorFlow. Every breakdown's AP/APL/APH must agree within 1e-5 and TP/FP/FN at every score
cutoff exactly; the table also gives each side's time (files read + metric) and the ratio.

The official op needs TensorFlow 2.13 (the `.so` of waymo-open-dataset-tf-2-12-0 1.6.7 links
absl lts_20230125), so it runs in its own environment:

    python3.11 -m venv /tmp/tfvenv
    /tmp/tfvenv/bin/pip install tensorflow-cpu==2.13.1 "numpy<1.24"
    /tmp/tfvenv/bin/pip install --no-deps waymo-open-dataset-tf-2-12-0
    .venv/bin/python bench/let_reference.py --waymo-python /tmp/tfvenv/bin/python --seeds 0 1 2 3

Exit status 1 when any number differs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from avsim.evaluation.jobs import read_gt_boxes, read_pred_boxes
from avsim.evaluation.let_ap import Boxes3D, LetConfig, evaluate_let
from avsim.evaluation.waymo_objects import write_waymo_objects

SIZES_M = {"vehicle": (4.5, 1.9, 1.6), "pedestrian": (0.8, 0.8, 1.8), "cyclist": (1.8, 0.6, 1.7), "sign": (0.7, 0.15, 0.8)}
WAYMO_TYPES = {"vehicle": 1, "pedestrian": 2, "sign": 3, "cyclist": 4}
RANGES = ("[0, 30)", "[30, 50)", "[50, +inf)")

# The official side: reads the files by the reference tool's rules and prints the op's outputs.
OFFICIAL = r'''
import json, sys, time
import numpy as np
import tensorflow as tf
from waymo_open_dataset import label_pb2
from waymo_open_dataset.metrics.ops import py_metrics_ops
from waymo_open_dataset.protos import breakdown_pb2, metrics_pb2

def config():
    c = metrics_pb2.Config(box_type=label_pb2.Label.Box.TYPE_3D, matcher_type=metrics_pb2.MatcherProto.TYPE_HUNGARIAN,
                           iou_thresholds=[0.0, 0.5, 0.3, 0.3, 0.3], score_cutoffs=[i * 0.01 for i in range(100)] + [1.0])
    let = c.let_metric_config
    let.enabled, let.longitudinal_tolerance_percentage, let.min_longitudinal_tolerance_meter = True, 0.1, 0.5
    let.align_type = metrics_pb2.Config.LongitudinalErrorTolerantConfig.TYPE_RANGE_ALIGNED
    let.sensor_location.x, let.sensor_location.y, let.sensor_location.z = 1.43, 0.0, 2.18
    for b in (breakdown_pb2.Breakdown.OBJECT_TYPE, breakdown_pb2.Breakdown.RANGE):
        c.breakdown_generator_ids.append(b)
        c.difficulties.append(metrics_pb2.Difficulty(levels=[label_pb2.Label.LEVEL_2]))
    return c

def read(path, gt):
    objs = metrics_pb2.Objects.FromString(open(path, "rb").read()).objects
    keys, rows, types, scores = [], [], [], []
    for o in objs:
        if gt and (o.object.num_top_lidar_points_in_box <= 0 or not o.object.most_visible_camera_name):
            continue
        b = o.object.camera_synced_box if gt else o.object.box
        keys.append((o.context_name + "_" + str(o.camera_name), o.frame_timestamp_micros))
        rows.append([b.center_x, b.center_y, b.center_z, b.length, b.width, b.height, b.heading])
        types.append(o.object.type)
        scores.append(o.score)
    return keys, np.asarray(rows, np.float32).reshape(-1, 7), np.asarray(types, np.uint8), np.asarray(scores, np.float32)

t0 = time.perf_counter()
gk, gb, gtype, _ = read(sys.argv[1], True)
pk, pb, ptype, ps = read(sys.argv[2], False)
ids = {k: i for i, k in enumerate(sorted(set(gk) | set(pk)))}
cfg = config()
ap, aph, apl, pr, _, _, _ = py_metrics_ops.detection_metrics(
    prediction_bbox=tf.constant(pb), prediction_type=tf.constant(ptype), prediction_score=tf.constant(ps),
    prediction_frame_id=tf.constant([ids[k] for k in pk], tf.int64), prediction_overlap_nlz=tf.zeros(len(pk), tf.bool),
    ground_truth_bbox=tf.constant(gb), ground_truth_type=tf.constant(gtype),
    ground_truth_frame_id=tf.constant([ids[k] for k in gk], tf.int64),
    ground_truth_difficulty=tf.fill([len(gk)], tf.constant(2, tf.uint8)), config=cfg.SerializeToString())
seconds = time.perf_counter() - t0
from waymo_open_dataset.metrics.python import config_util_py as config_util
names = config_util.get_breakdown_names_from_config(cfg)
print(json.dumps({"seconds": seconds, "names": names, "ap": ap.numpy().tolist(), "apl": apl.numpy().tolist(),
                  "aph": aph.numpy().tolist(), "tp_fp_fn": pr.numpy()[:, :, 2:5].tolist()}))
'''


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float32).astype(np.float64)


def random_scene(seed: int, n_frames: int = 20) -> tuple[Boxes3D, Boxes3D]:
    """Ground truth (integer frame keys in micros) and predictions of one random scene."""
    rng = np.random.default_rng(seed)
    frames, labels, rows = [], [], []
    for f in range(n_frames):
        for cls, size in SIZES_M.items():
            centres = [rng.uniform(-80, 80, 2) for _ in range(int(rng.integers(2, 7)))]
            centres += [centres[0] + rng.normal(0, 1.0, 2) for _ in range(int(rng.integers(0, 3)))]  # a cluster
            for c in centres:
                frames.append(100_000 * (f + 1))
                labels.append(cls)
                rows.append([c[0], c[1], size[2] / 2, *(np.asarray(size) * rng.uniform(0.85, 1.15, 3)), rng.uniform(-np.pi, np.pi)])
    # float32-representable values: the op takes float32 boxes, so both sides see the same numbers
    gt = Boxes3D.ground_truth(np.asarray(frames), np.asarray(labels), _f32(np.asarray(rows)))
    keep = rng.random(len(gt)) < 0.85
    pb = gt.boxes[keep].copy()
    rng_m = np.linalg.norm(pb[:, :2], axis=1, keepdims=True)
    pb[:, :2] *= 1 + rng.normal(0, 0.04, (len(pb), 1))  # longitudinal error grows with range
    pb[:, :3] += rng.normal(0, 0.15, (len(pb), 3)) * (1 + rng_m / 60)
    pb[:, 3:6] *= rng.uniform(0.8, 1.2, (len(pb), 3))
    pb[:, 6] += rng.normal(0, 0.3, len(pb))
    dup = rng.random(len(pb)) < 0.3
    fp = rng.random(len(pb)) < 0.2
    fp_rows = pb[fp].copy()
    fp_rows[:, :2] += rng.uniform(-15, 15, (int(fp.sum()), 2))
    all_rows = np.vstack([pb, pb[dup] + np.r_[rng.normal(0, 0.5, 2), np.zeros(5)], fp_rows])
    f_keep, l_keep = gt.frame[keep], gt.label[keep]
    pd = Boxes3D(np.r_[f_keep, f_keep[dup], f_keep[fp]], np.r_[l_keep, l_keep[dup], l_keep[fp]], _f32(all_rows),
                 _f32(rng.uniform(0, 1, len(all_rows))))  # fmt: skip
    return gt, pd


def avsim_side(gt_path: Path, pd_path: Path) -> tuple[float, dict[tuple[str, str], tuple[np.ndarray, ...]]]:
    """Seconds (files read + metric) and, per (class, range), AP/APL/APH and TP/FP/FN per cutoff."""
    t0 = time.perf_counter()
    gt, _ = read_gt_boxes(gt_path)
    pd = read_pred_boxes(pd_path)
    ev = evaluate_let(gt, pd, LetConfig())
    res = ev.result()
    seconds = time.perf_counter() - t0
    out = {}
    for key, counts in ev.counts.items():
        t = counts.totals()
        tp, npd, ngt = t["tp"], t["num_pd"], float(t["num_gt"])
        per = res.per_class[key.cls]
        v = per.all if key.range_bin is None else per.ranges[key.range_bin]
        out[(key.cls.value, key.range_name)] = (np.array([v.ap, v.apl, v.aph]), np.column_stack([tp, npd - tp, ngt - tp]))
    return seconds, out


def official_key(name: str) -> tuple[str, str] | None:
    """("vehicle", "all") from "OBJECT_TYPE_TYPE_VEHICLE_LEVEL_2", ranges from "RANGE_TYPE_..._[0, 30)_LEVEL_2"."""
    for cls in WAYMO_TYPES:
        token = f"TYPE_{cls.upper()}_"
        if token in name:
            if name.startswith("OBJECT_TYPE"):
                return cls, "all"
            rng = next(r for r in RANGES if r in name)
            return cls, rng.replace("+inf", "inf")
    return None


def compare(seed: int, waymo_python: str, work: Path, n_frames: int) -> tuple[bool, list[str]]:
    gt, pd = random_scene(seed, n_frames)
    write_waymo_objects(gt, work / "gt.bin", context_name=f"seed{seed}", ground_truth=True)
    write_waymo_objects(pd, work / "pd.bin", context_name=f"seed{seed}")
    ours_s, ours = avsim_side(work / "gt.bin", work / "pd.bin")
    proc = subprocess.run([waymo_python, "-c", OFFICIAL, str(work / "gt.bin"), str(work / "pd.bin")],
                          capture_output=True, text=True, check=True)  # fmt: skip
    ref = json.loads(proc.stdout.strip().splitlines()[-1])
    ok, worst_ap, checked = True, 0.0, 0
    for i, name in enumerate(ref["names"]):
        key = official_key(name)
        if key is None or key not in ours:
            continue
        aps, counts = ours[key]
        d_ap = float(np.abs(aps - [ref["ap"][i], ref["apl"][i], ref["aph"][i]]).max())
        same_counts = bool(np.array_equal(np.rint(counts), np.asarray(ref["tp_fp_fn"][i])))
        worst_ap, checked = max(worst_ap, d_ap), checked + 1
        if d_ap > 1e-5 or not same_counts:
            ok = False
            print(f"seed {seed} {name}: AP diff {d_ap:.2e}, TP/FP/FN equal: {same_counts}", flush=True)
    line = (f"| {seed} | {len(gt)} | {len(pd)} | {checked} | {worst_ap:.1e} | {'exact' if ok else 'DIFFER'} | "
            f"{ours_s:.2f} | {ref['seconds']:.2f} | {ref['seconds'] / ours_s:.1f}x |")  # fmt: skip
    return ok and checked == 16, [line]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--waymo-python", required=True, help="a Python with tensorflow 2.13 and waymo-open-dataset")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--frames", type=int, default=20, help="frames per scene (about 20 GT boxes each)")
    args = p.parse_args(argv)
    print("| seed | GT boxes | predictions | breakdowns | max AP/APL/APH diff | TP/FP/FN | avsim s | Waymo op s | op / avsim |")
    print("|---|---|---|---|---|---|---|---|---|")
    all_ok = True
    with tempfile.TemporaryDirectory(prefix="avsim-let-ref-") as tmp:
        for seed in args.seeds:
            ok, lines = compare(seed, args.waymo_python, Path(tmp), args.frames)
            print("\n".join(lines), flush=True)
            all_ok &= ok
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
