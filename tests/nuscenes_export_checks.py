"""Checks of an `avsim export nuscenes` dataroot by its consumers, shared by the sample and the real-data tests.

- `open_export`: nuscenes-devkit's `NuScenes` on it;
- `check_structure`: every table's links (samples, sample_data chains, annotation chains, files);
- `detection_eval`: the devkit's detection-eval steps (`load_gt` on a split of the exported scenes,
  `add_center_dist`, `filter_eval_boxes`, `accumulate`, `calc_ap`, `calc_tp`) for given predictions;
- `oracle` / `shifted`: predictions equal to the ground truth, or moved by a fixed distance;
- `check_round_trip`: `avsim convert --from nuscenes` of the export against the source scenario;
- `check_mmdet3d_infos`: mmdetection3d's info converter (restated) against `avsim labels-mmdet3d`.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

TP_METRICS = ("trans_err", "scale_err", "orient_err", "vel_err", "attr_err")


def open_export(root: Path, version: str) -> Any:
    from nuscenes.nuscenes import NuScenes

    with contextlib.redirect_stdout(io.StringIO()):
        return NuScenes(version=version, dataroot=str(root), verbose=False)


def check_structure(nusc: Any, root: Path) -> dict[str, int]:
    """Links and files of every table; returns counts of what was checked."""
    for scene in nusc.scene:
        tokens, t = [], scene["first_sample_token"]
        while t:
            tokens.append(t)
            t = nusc.get("sample", t)["next"]
        assert len(tokens) == scene["nbr_samples"] and tokens[-1] == scene["last_sample_token"]
        times = [nusc.get("sample", t)["timestamp"] for t in tokens]
        assert all(0.4e6 <= b - a <= 0.6e6 for a, b in zip(times, times[1:])), times  # 2 Hz keyframes
    for sd in nusc.sample_data:
        assert (root / sd["filename"]).is_file(), sd["filename"]
        assert sd["filename"].startswith("samples/" if sd["is_key_frame"] else "sweeps/")
        sample = nusc.get("sample", sd["sample_token"])
        assert sd["timestamp"] <= sample["timestamp"] + 100_000  # a sweep belongs to the next sample (capture offsets aside)
        if sd["next"]:
            nxt = nusc.get("sample_data", sd["next"])
            assert nxt["prev"] == sd["token"] and nxt["timestamp"] > sd["timestamp"] and nxt["channel"] == sd["channel"]
        if sd["is_key_frame"]:
            assert sample["data"][sd["channel"]] == sd["token"]
    for inst in nusc.instance:
        n, t = 0, inst["first_annotation_token"]
        while t:
            ann = nusc.get("sample_annotation", t)
            assert ann["instance_token"] == inst["token"]
            n, last, t = n + 1, t, ann["next"]
        assert n == inst["nbr_annotations"] and last == inst["last_annotation_token"]
    for ann in nusc.sample_annotation:
        assert ann["visibility_token"] in ("1", "2", "3", "4") and len(ann["attribute_tokens"]) <= 1
        assert np.isclose(np.linalg.norm(ann["rotation"]), 1.0) and min(ann["size"]) > 0
    return {"samples": len(nusc.sample), "sample_data": len(nusc.sample_data), "annotations": len(nusc.sample_annotation)}


def detection_eval(nusc: Any, predictions: Any, gt: Any | None = None) -> tuple[dict[str, float], dict[str, dict[str, float]], Any]:
    """AP per class (mean over the distance thresholds) and TP errors, by the devkit's steps, over the
    classes the (filtered) ground truth holds; returns (APs, TP errors, filtered GT)."""
    from nuscenes.eval.common.config import config_factory
    from nuscenes.eval.common.loaders import add_center_dist, filter_eval_boxes
    from nuscenes.eval.common.utils import center_distance
    from nuscenes.eval.detection.algo import accumulate, calc_ap, calc_tp

    cfg = config_factory("detection_cvpr_2019")
    if gt is None:
        gt = filtered_gt(nusc)
    with contextlib.redirect_stdout(io.StringIO()):
        pred = filter_eval_boxes(nusc, add_center_dist(nusc, predictions), cfg.class_range)
    classes = sorted({b.detection_name for b in gt.all})
    aps, tps = {}, {}
    for c in classes:
        data = {d: accumulate(gt, pred, c, center_distance, d) for d in cfg.dist_ths}
        aps[c] = float(np.mean([calc_ap(data[d], cfg.min_recall, cfg.min_precision) for d in cfg.dist_ths]))
        # as `DetectionEval.evaluate`: no orientation, velocity or attribute error for cones, none of the latter two for barriers
        skip = {"traffic_cone": ("attr_err", "vel_err", "orient_err"), "barrier": ("attr_err", "vel_err")}.get(c, ())
        tps[c] = {m: np.nan if m in skip else float(calc_tp(data[cfg.dist_th_tp], cfg.min_recall, m)) for m in TP_METRICS}
    return aps, tps, gt


def filtered_gt(nusc: Any) -> Any:
    """`load_gt` of a split holding every exported scene (`create_splits_scenes` gives nuScenes' own
    scene names; the export's are the clips'), then the devkit's distance and point filters."""
    import nuscenes.eval.common.loaders as loaders
    from nuscenes.eval.common.config import config_factory
    from nuscenes.eval.detection.data_classes import DetectionBox

    cfg = config_factory("detection_cvpr_2019")
    split = {"mini_val" if nusc.version.endswith("mini") else "val": [s["name"] for s in nusc.scene]}
    with mock.patch.object(loaders, "create_splits_scenes", lambda: split), contextlib.redirect_stdout(io.StringIO()):
        gt = loaders.load_gt(nusc, next(iter(split)), DetectionBox)
        if not gt.all:
            return gt  # the devkit's filter needs one box to know the box type
        return loaders.filter_eval_boxes(nusc, loaders.add_center_dist(nusc, gt), cfg.class_range)


def oracle(gt: Any, shift_m: float = 0.0, scores: bool = False) -> Any:
    """Predictions equal to the ground truth (GT velocity and attribute), optionally moved `shift_m` along x."""
    from nuscenes.eval.common.data_classes import EvalBoxes
    from nuscenes.eval.detection.data_classes import DetectionBox

    out = EvalBoxes()
    for token in gt.sample_tokens:
        boxes = []
        for k, b in enumerate(gt[token]):
            t = (b.translation[0] + shift_m, b.translation[1], b.translation[2])
            boxes.append(DetectionBox(sample_token=token, translation=t, size=b.size, rotation=b.rotation, velocity=b.velocity,
                                      detection_name=b.detection_name, attribute_name=b.attribute_name,
                                      detection_score=float(1.0 - 0.01 * k) if scores else 1.0))  # fmt: skip
        out.add_boxes(token, boxes)
    return out


def check_oracle(nusc: Any, shifted_ap: bool = True) -> int:
    """mAP 1 and zero TP errors for the oracle; with `shifted_ap`, AP 0.5 when every box is 1.5 m off (matched at
    2 and 4 m only: a scene whose boxes of one class stand 1.5 m from each other, or where the shift crosses
    the class range, gives another figure)."""
    gt = filtered_gt(nusc)
    if not gt.all:
        return 0
    aps, tps, gt = detection_eval(nusc, oracle(gt), gt)
    assert aps == {c: 1.0 for c in aps} or np.allclose(list(aps.values()), 1.0), aps
    for c, errs in tps.items():
        no_velocity = all(np.isnan(b.velocity).any() for b in gt.all if b.detection_name == c)  # one-annotation tracks
        for m, v in errs.items():
            if m == "vel_err" and no_velocity and not np.isnan(v):
                assert v == 1.0, (c, m, v)  # the devkit's `cummean` of all-NaN errors
                continue
            assert np.isnan(v) or v < 1e-6, (c, m, v)
    if shifted_ap:
        shifted, _, _ = detection_eval(nusc, oracle(gt, shift_m=1.5), gt)
        np.testing.assert_allclose(list(shifted.values()), 0.5, atol=1e-12)
    return len(gt.all)


def check_round_trip(export_root: Path, scene_name: str, source: Any, times_ns: np.ndarray, channels: dict[str, str],
                     tmp: Path) -> Any:  # fmt: skip
    """`avsim convert` of one exported scene: its ego poses at the exported times, its calibration (extrinsics;
    the exported pinhole intrinsics) and its keyframe boxes are the source scenario's."""
    from avsim.cli import main
    from avsim.render.labels.boxes import frame_boxes_3d
    from avsim.scenario.exporters.nuscenes_tables import content_token
    from avsim.scenario.io import load_scenario

    assert main(["convert", f"{export_root}::{scene_name}", str(tmp / "back"), "--from", "nuscenes"]) == 0
    back = load_scenario(tmp / "back")
    manifest = json.loads((export_root / "avsim_export.json").read_text())
    scene_token, scene = next((t, s) for t, s in manifest["scenes"].items() if s["name"] == scene_name)
    assert scene["channels"] == channels
    assert back.rig.names == tuple(channels)
    for cam in back.rig.names:
        np.testing.assert_allclose(back.rig.extrinsic(cam).as_matrix(), source.rig.extrinsic(cam).as_matrix(), atol=1e-12)
    key_ns = back.agents.timestamps_ns
    offsets = {0, *source.rig.capture_offset_ns.tolist()}
    ours = {(t + o + 500) // 1000 * 1000: t + o for t in times_ns.tolist() for o in offsets}  # exported at whole microseconds
    np.testing.assert_allclose(back.rig.capture_offset_ns, [source.rig.capture_offset_ns[source.rig.index(c)] for c in back.rig.names],
                               atol=1000)  # fmt: skip
    t_back = back.ego.timestamps_ns
    common = [t for t in t_back.tolist() if t in ours]
    assert len(common) == len(t_back) >= len(set(key_ns.tolist()))
    src = source.ego.pose_at(np.array([ours[t] for t in common])).as_matrix()
    got = back.ego.pose_at(np.array(common)).as_matrix()
    np.testing.assert_allclose(got, src, atol=1e-9)
    for t in np.unique(key_ns).tolist():
        fb = frame_boxes_3d(source, np.array([ours[t]]))[0]
        rows = back.agents.timestamps_ns == t
        order = np.argsort(back.agents.track_id[rows])
        instance = np.array([content_token("instance", scene_token, str(k)) for k in fb.track_id.tolist()])
        src_order = np.argsort(instance)
        assert back.agents.track_id[rows][order].tolist() == instance[src_order].tolist()
        np.testing.assert_allclose(back.agents.center_m[rows][order], fb.center_world_m[src_order], atol=1e-9)
        np.testing.assert_allclose(back.agents.size_m[rows][order], fb.size_lwh_m[src_order], atol=1e-12)
        q_back, q_src = back.agents.orientation[rows][order], fb.rotation_world_wxyz[src_order]
        np.testing.assert_allclose(np.abs(np.sum(q_back * q_src, axis=1)), 1.0, atol=1e-9)
    return back


def check_mmdet3d_infos(nusc: Any, export_root: Path, labels: Path, tmp: Path) -> tuple[int, int]:
    """mmdetection3d's nuScenes info converter (restated, tests/mmdet3d_nuscenes_reference.py) runs on the export; its
    infos of each keyframe are those `avsim labels-mmdet3d` writes for the same frame: pose, camera intrinsics and
    extrinsics (the static `cam2ego` where the cameras have no capture offset), `lidar2cam`, the boxes (moved from
    its LiDAR frame to the ego frame), classes, and each camera's boxes (2-D box, camera-frame box, centre, depth) for
    the boxes both list; velocities by their definitions (the converter's is the devkit's `box_velocity` over the
    neighbouring keyframes, avsim's the track's own +/- 0.05 s). Returns (boxes, camera boxes) compared."""
    import mmdet3d_nuscenes_reference as ref

    from avsim.cli import main
    from avsim.core.transforms import SE3
    from avsim.scenario.importers.safe_pickle import load_pickle

    infos = ref.infos(nusc)
    assert len(infos) == len(nusc.sample) and all(len(i["images"]) == 6 for i in infos)
    assert main(["labels-mmdet3d", str(tmp / "info.pkl"), str(labels)]) == 0
    manifest = json.loads((export_root / "avsim_export.json").read_text())
    (scene,) = manifest["scenes"].values()
    ours = {round(s["timestamp"] * 1e6) + scene["time_offset_us"]: s for s in load_pickle(tmp / "info.pkl")["data_list"]}
    (log,) = manifest["logs"].values()
    back = SE3(np.eye(3), -np.asarray(log["world_offset_m"])).as_matrix()
    camera_of = {ch: cam for cam, ch in scene["channels"].items()}
    n_boxes = n_cam = 0
    for info in infos:
        mine = ours[round(info["timestamp"] * 1e6)]
        # the converter rounds its 4x4 matrices to float32 (`convert_quaternion_to_matrix`)
        np.testing.assert_allclose(back @ np.asarray(info["ego2global"]), mine["ego2global"], atol=1e-7 * np.abs(info["ego2global"]).max())
        lidar2ego = np.asarray(info["lidar_points"]["lidar2ego"], np.float64)
        for ch, im in info["images"].items():
            theirs = mine["images"][camera_of[ch]]
            np.testing.assert_allclose(im["cam2img"], theirs["cam2img"], atol=1e-12)
            if abs(im["timestamp"] - info["timestamp"]) < 1e-6:  # captured at the frame time: the static extrinsic is avsim's camera pose
                np.testing.assert_allclose(im["cam2ego"], theirs["cam2ego"], atol=1e-6)
            np.testing.assert_allclose(im["lidar2cam"], np.asarray(theirs["lidar2cam"]) @ lidar2ego, atol=1e-5)  # float32 in the info
            assert (export_root / im["data_path"]).is_file() or Path(im["data_path"]).is_file()
        categories = [nusc.get("sample_annotation", t)["category_name"] for t in nusc.get("sample", info["token"])["anns"]]
        n_boxes += _same_boxes(info, mine, lidar2ego, categories)
        n_cam += _same_camera_boxes(info, mine, camera_of)
    return n_boxes, n_cam


def _same_boxes(info: dict, mine: dict, lidar2ego: np.ndarray, categories: list[str]) -> int:
    """The converter's boxes (LiDAR frame) against avsim's (ego frame), matched by centre. Classes: avsim's info
    names avsim's collapsed class (a bus is a truck there), the export keeps the finer nuScenes category."""
    from avsim.core.agents import collapse_class
    from avsim.render.labels.mmdet3d_info import AVSIM_TO_NUSCENES, NUSCENES_CLASSES

    theirs = np.array([b["bbox_3d"] for b in info["instances"]]).reshape(-1, 7)
    ours = np.array([b["bbox_3d"] for b in mine["instances"]]).reshape(-1, 7)
    assert len(theirs) == len(ours)
    centres = theirs[:, :3] @ lidar2ego[:3, :3].T + lidar2ego[:3, 3]
    mount_yaw = np.arctan2(lidar2ego[1, 0], lidar2ego[0, 0])
    for k, b in enumerate(ours):
        j = int(np.argmin(np.linalg.norm(centres - b[:3], axis=1)))
        np.testing.assert_allclose(centres[j], b[:3], atol=2e-5)  # the converter's float32 lidar2ego carries them
        np.testing.assert_allclose(theirs[j, 3:6], b[3:6], atol=1e-6)
        assert abs((theirs[j, 6] + mount_yaw - b[6] + np.pi) % (2 * np.pi) - np.pi) < 1e-5
        collapsed = AVSIM_TO_NUSCENES.get(collapse_class(categories[j]))
        assert mine["instances"][k]["bbox_label"] == (NUSCENES_CLASSES.index(collapsed) if collapsed else -1)
        assert info["instances"][j]["bbox_label"] == mine["instances"][k]["bbox_label"] or categories[j] != {
            "car": "vehicle.car", "truck": "vehicle.truck", "pedestrian": "human.pedestrian.adult", "bicycle": "vehicle.bicycle"}.get(collapsed)
        v = np.asarray(info["instances"][j]["velocity"]) @ lidar2ego[:2, :2].T
        assert np.linalg.norm(v - np.asarray(mine["instances"][k]["velocity"])) <= 0.25 * np.linalg.norm(v) + 0.3
    return len(ours)


def _same_camera_boxes(info: dict, mine: dict, camera_of: dict[str, str]) -> int:
    """Each camera's boxes that avsim lists (the ones it shows) and the converter lists, fully inside the image."""
    n = 0
    for ch, boxes in info["cam_instances"].items():
        theirs = mine["cam_instances"][camera_of[ch]]
        w, h = mine["images"][camera_of[ch]]["width"], mine["images"][camera_of[ch]]["height"]
        for b in theirs:
            x1, y1, x2, y2 = b["bbox"]
            if x1 <= 0 or y1 <= 0 or x2 >= w or y2 >= h:
                continue  # the converter clips to nuScenes' 1600 x 900, avsim to the image
            c = min(boxes, key=lambda o: np.linalg.norm(np.asarray(o["center_2d"]) - b["center_2d"]))
            # within 1e-4 px and 2e-5 m (the export and avsim's info reach the boxes by different products of poses)
            np.testing.assert_allclose(c["bbox"], b["bbox"], atol=1e-4)
            np.testing.assert_allclose(c["bbox_3d"][:6], b["bbox_3d"][:6], atol=2e-5)
            assert abs((c["bbox_3d"][6] - b["bbox_3d"][6] + np.pi) % (2 * np.pi) - np.pi) < 1e-5
            np.testing.assert_allclose(c["center_2d"] + [c["depth"]], b["center_2d"] + [b["depth"]], atol=1e-4)
            assert c["attr_label"] == b["attr_label"]  # the export's attribute is the labels' own
            n += 1
    return n
