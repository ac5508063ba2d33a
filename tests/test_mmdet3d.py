"""mmdetection3d importer on the real nuScenes infos in ../shared/data/nuscenes-mmdet3d (skipped
when absent) and on hostile files (synthetic, always run)."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import mmdet3d_synth as synth
import numpy as np
import pytest

from avsim.cli import main
from avsim.scenario import projection_check as pc
from avsim.scenario.importers.mmdet3d_source import load_mmdet3d
from avsim.scenario.importers.registry import detect_format
from avsim.scenario.importers.safe_pickle import load_pickle
from avsim.scenario.io import load_scenario

SWEEP = "samples/LIDAR_TOP/n015-2018-08-02-17-16-37+0800__LIDAR_TOP__1533201470948018.pcd.bin"


@pytest.fixture
def mmdet_dir(shared_data: Path) -> Path:
    folder = shared_data / "nuscenes-mmdet3d"
    if not (folder / "nus_info.pkl").exists():
        pytest.skip(f"{folder} not found (real data is not shipped with avsim)")
    return folder


def run(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_mono3d_projection_through_convert_save_load(mmdet_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """centre2d within 0.5 px, unclipped 2-D boxes within 1 px, on the scenario as saved by `avsim convert`."""
    src = mmdet_dir / "nus_infos_mono3d.coco.json"
    rc, _, err = run(["convert", "--from", "mmdet3d", src, tmp_path / "scn"], capsys)
    assert rc == 0, err
    labels = pc.reference_source(src).labels
    saved = pc.ReferenceSource(load_scenario(tmp_path / "scn"), labels)
    assert saved.scenario.metadata["box_convention"] == "wlh_pos_yaw"
    report = pc.check_projection(saved)
    assert sum(s.boxes for s in report.cameras) == 11 and sum(s.missing for s in report.cameras) == 0
    assert sum(s.centres_compared for s in report.cameras) == 11
    assert sum(s.corners_compared for s in report.cameras) == 9 and sum(s.skipped_clipped for s in report.cameras) == 2
    assert max(s.centre_max_px for s in report.cameras if s.centres_compared) < 0.5
    assert max(s.corner_max_px for s in report.cameras if s.corners_compared) < 1.0
    assert dict(pc.reference_source(src).images) == {
        ("CAM_BACK_LEFT", 1531883530447423000): src.parent / "samples/CAM_BACK_LEFT/n015-2018-07-18-11-07-57+0800__CAM_BACK_LEFT__1531883530447423.jpg"
    }


def test_mono3d_documented_convention_does_not_fit_this_file(mmdet_dir: Path) -> None:
    fits = pc.reference_source(mmdet_dir / "nus_infos_mono3d.coco.json").scenario.metadata["box_convention_fit_px"]
    assert fits["wlh_pos_yaw"] < 0.05 and fits["lhw_neg_yaw"] > 10


def test_info_pkl_rig_ego_and_agents(mmdet_dir: Path) -> None:
    scn = load_mmdet3d(mmdet_dir / "nus_info.pkl")
    assert scn.rig.names == ("CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK_RIGHT", "CAM_BACK", "CAM_BACK_LEFT", "CAM_FRONT_LEFT")
    assert all((c.width_px, c.height_px) == (1600, 900) for c in scn.rig.cameras)
    assert scn.metadata["image_size"].startswith("nuScenes default 1600x900")
    # 2 samples + 1 lidar sweep + 12 camera captures, strictly increasing
    assert len(scn.ego) == 15 and np.all(np.diff(scn.ego.timestamps_ns) > 0)
    assert len(scn.agents) == 75 and len(set(scn.agents.track_id)) == 75
    assert "0:0" in set(scn.agents.track_id) and "1:37" in set(scn.agents.track_id)


def test_capture_offsets_are_the_first_samples_camera_minus_sample_time(mmdet_dir: Path) -> None:
    info = load_pickle(mmdet_dir / "nus_info.pkl")
    scn = load_mmdet3d(mmdet_dir / "nus_info.pkl")
    samples = sorted(info["data_list"], key=lambda s: s["timestamp"])
    assert scn.frame_origin_ns == round(samples[0]["timestamp"] * 1e6) * 1000 > scn.start_ns  # frame 0: the keyframe
    for cam in scn.rig.names:
        d = [round(s["images"][cam]["timestamp"] * 1e6) - round(s["timestamp"] * 1e6) for s in samples]
        assert scn.metadata["capture_offsets_ns"][cam] == d[0] * 1000
        assert int(scn.rig.capture_offset_ns[scn.rig.index(cam)]) == d[0] * 1000
        assert scn.metadata["capture_offsets_spread_ns"][cam] == max(abs(v - d[0]) for v in d) * 1000 > 0


def test_info_pkl_projection_matches_lidar2cam(mmdet_dir: Path) -> None:
    """Through the import (world boxes, ego at camera time, rig) == the file's own lidar2cam + cam2img."""
    info = load_pickle(mmdet_dir / "nus_info.pkl")
    scn = load_mmdet3d(mmdet_dir / "nus_info.pkl")
    checked = 0
    for s in info["data_list"]:
        for k, inst in enumerate(s["instances"]):
            b = np.asarray(inst["bbox_3d"], dtype=np.float64)
            centre_lidar = b[:3]
            for cam in scn.rig.names:
                im = s["images"][cam]
                p = np.asarray(im["lidar2cam"]) @ np.append(centre_lidar, 1.0)
                if p[2] < 1.0:
                    continue
                ref = (np.asarray(im["cam2img"]) @ p[:3])[:2] / p[2]
                if not (-200 < ref[0] < 1800 and -200 < ref[1] < 1100):
                    continue
                label = pc.ReferenceLabel(cam, round(im["timestamp"] * 1e6) * 1000, f"{s['sample_idx']}:{k}", ref, [np.nan] * 4, False)
                proj = pc.project_label(scn, label)
                assert proj is not None
                assert np.linalg.norm(proj.center_px - ref) < 1e-2, (cam, k)
                checked += 1
    assert checked >= 30


def _sweep_points(mmdet_dir: Path) -> np.ndarray:
    raw = np.fromfile(mmdet_dir / SWEEP, dtype=np.float32)
    assert raw.size % 5 == 0
    pts = raw.reshape(-1, 5)
    assert np.all(pts[:, 4] == np.round(pts[:, 4])) and pts[:, 4].min() >= 0 and pts[:, 4].max() <= 31  # ring ids
    return pts[:, :3].astype(np.float64)


def test_box_convention_of_the_legacy_info(mmdet_dir: Path) -> None:
    """nus_info.pkl is 0.x: (w, l, h, -yaw - pi/2), gravity centre - checked on velocity, ground and points."""
    info = load_pickle(mmdet_dir / "nus_info.pkl")
    scn = load_mmdet3d(mmdet_dir / "nus_info.pkl")
    sample = next(s for s in info["data_list"] if s["lidar_points"]["lidar_path"] == Path(SWEEP).name and s["sample_idx"] == 1)
    world_T_lidar = np.asarray(sample["ego2global"]) @ np.asarray(sample["lidar_points"]["lidar2ego"])
    rows = [scn.agents.track(f"1:{k}") for k in range(len(sample["instances"]))]
    # heading agrees with the velocity of every moving box (velocity in the lidar frame)
    vel = np.array([i["velocity"] for i in sample["instances"]])
    heading_lidar = np.array([np.linalg.inv(world_T_lidar[:3, :3]) @ quat_x(r.orientation[0]) for r in rows])
    moving = np.linalg.norm(vel, axis=1) > 1.0
    cos = np.sum(heading_lidar[moving, :2] * vel[moving], axis=1) / np.linalg.norm(vel[moving], axis=1)
    assert moving.sum() >= 5 and cos.min() > 0.98
    # box bottoms sit on the ground the sweep sees (gravity centre, not bottom centre)
    pts = _sweep_points(mmdet_dir)
    bottoms = np.array([i["bbox_3d"][2] - i["bbox_3d"][5] / 2 for i in sample["instances"]])
    ground = np.median(pts[:, 2])
    assert abs(np.median(bottoms) - ground) < 0.25
    assert np.median(np.array([i["bbox_3d"][2] for i in sample["instances"]])) - ground > 0.6
    # lidar points inside each imported box never exceed the annotation's num_lidar_pts
    world_pts = pts @ world_T_lidar[:3, :3].T + world_T_lidar[:3, 3]
    inside = [count_inside(world_pts, r) for r in rows]
    assert all(n <= i["num_lidar_pts"] for n, i in zip(inside, sample["instances"]))


def quat_x(q: np.ndarray) -> np.ndarray:
    from avsim.core.transforms import quat_to_matrix

    return quat_to_matrix(q)[:, 0]


def count_inside(points: np.ndarray, track: object) -> int:
    from avsim.core.transforms import quat_to_matrix

    R = quat_to_matrix(track.orientation[0])  # type: ignore[attr-defined]
    local = (points - track.center_m[0]) @ R  # type: ignore[attr-defined]
    return int(np.sum(np.all(np.abs(local) <= track.size_m[0] / 2, axis=1)))  # type: ignore[attr-defined]


def test_convert_cli_and_folder_detection(mmdet_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert detect_format(mmdet_dir / "nus_info.pkl") == "mmdet3d"
    assert detect_format(mmdet_dir / "nus_infos_mono3d.coco.json") == "mmdet3d"
    assert detect_format(mmdet_dir) == "mmdet3d"  # one info .pkl (+ a .coco.json) -> the .pkl
    rc, _, err = run(["convert", mmdet_dir, tmp_path / "a"], capsys)
    assert rc == 0, err
    assert load_scenario(tmp_path / "a").scenario_id == "n015-2018-08-02-17-16-37+0800"
    rc, _, err = run(["convert", f"{mmdet_dir / 'nus_info.pkl'}::no-such-log", tmp_path / "b"], capsys)
    assert rc == 1 and "no log named 'no-such-log'" in err and err.count("\n") == 1
    two = tmp_path / "two"
    two.mkdir()
    for name in ("a.pkl", "b.pkl"):
        os.symlink(mmdet_dir / "nus_info.pkl", two / name)
    rc, _, err = run(["convert", "--from", "mmdet3d", two, tmp_path / "c"], capsys)
    assert rc == 1 and "2 info files" in err and not (tmp_path / "c").exists()


def test_convert_is_deterministic(mmdet_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for k in (1, 2):
        assert run(["convert", mmdet_dir / "nus_info.pkl", tmp_path / f"s{k}"], capsys)[0] == 0
    for f in sorted((tmp_path / "s1").iterdir()):
        assert f.read_bytes() == (tmp_path / "s2" / f.name).read_bytes(), f.name


class _Evil:
    def __reduce__(self) -> tuple:
        return (os.system, ("echo pwned",))


@pytest.mark.parametrize("case", ["global", "truncated", "missing_key", "empty", "bad_matrix"])
def test_hostile_infos_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    good = synth.write_info(tmp_path / "good", image=False)
    bad = tmp_path / "bad.pkl"
    info = synth.info_dict()
    if case == "global":
        info["data_list"][0]["evil"] = _Evil()
        bad.write_bytes(pickle.dumps(info))
        needle = "refused: global 'posix.system'" if os.name == "posix" else "refused"
    elif case == "truncated":
        bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
        needle = "truncated or corrupt pickle"
    elif case == "missing_key":
        del info["data_list"][1]["images"]["CAM_FRONT"]["cam2img"]
        bad.write_bytes(pickle.dumps(info))
        needle = "data_list[1].images.CAM_FRONT.cam2img: missing"
    elif case == "empty":
        bad.write_bytes(pickle.dumps({"metainfo": {}, "data_list": []}))
        needle = "data_list: expected a non-empty list"
    else:
        info["data_list"][0]["ego2global"] = [[1.0, 0.0], [0.0, 1.0]]
        bad.write_bytes(pickle.dumps(info))
        needle = "ego2global: expected a 4x4 matrix"
    rc, _, err = run(["convert", "--from", "mmdet3d", bad, tmp_path / "out"], capsys)
    assert rc == 1 and err.startswith("error: ") and err.count("\n") == 1, err
    assert needle in err, err
    assert not (tmp_path / "out").exists()


def test_logs_and_scenes_split_into_clips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    info = synth.info_dict()
    late = pickle.loads(pickle.dumps(info["data_list"][0]))  # the same log 60 s later: another scene
    late["timestamp"] += 60.0
    late["images"]["CAM_FRONT"]["timestamp"] += 60.0
    other = pickle.loads(pickle.dumps(info["data_list"][1]))  # another log, earlier
    other["timestamp"] -= 100.0
    other["images"]["CAM_FRONT"]["timestamp"] -= 100.0
    other["images"]["CAM_FRONT"]["img_path"] = other["images"]["CAM_FRONT"]["img_path"].replace(synth.LOG, "n999-other")
    other["lidar_points"]["lidar_path"] = other["lidar_points"]["lidar_path"].replace(synth.LOG, "n999-other")
    info["data_list"] += [late, other]
    path = synth.write_info(tmp_path, image=False, info=info)
    assert load_mmdet3d(path).scenario_id == "n999-other"
    assert load_mmdet3d(f"{path}::{synth.LOG}").scenario_id == f"{synth.LOG}#0"
    late_clip = load_mmdet3d(f"{path}::{synth.LOG}#1")
    assert late_clip.metadata["samples"] == 1 and len(late_clip.agents) == len(synth.BOXES)
    rc, _, err = run(["convert", f"{path}::nope", tmp_path / "o"], capsys)
    assert rc == 1 and f"logs: n999-other, {synth.LOG}#0, {synth.LOG}#1" in err


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("not_json", "json"),
        ("no_annotations", "annotations: missing"),
        ("short_box", "annotations[0].bbox_cam3d: expected 7 finite numbers"),
        ("bad_quat", "images[0].ego2global_rotation: non-unit quaternion"),
        ("bad_size", "images[0].width: width / height must be integers"),
    ],
)
def test_hostile_mono3d_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, needle: str) -> None:
    doc = {
        "images": [{
            "file_name": f"samples/CAM_FRONT/{synth.LOG}__CAM_FRONT__{synth.T0_US}.jpg", "id": "im0", "token": "s0",
            "cam2ego_rotation": [0.5, -0.5, 0.5, -0.5], "cam2ego_translation": [1.7, 0.0, 1.5],
            "ego2global_rotation": [1.0, 0.0, 0.0, 0.0], "ego2global_translation": [10.0, 20.0, 0.0],
            "cam_intrinsic": synth.K.tolist(), "width": 1600, "height": 900,
        }],
        "annotations": [{"image_id": "im0", "id": 0, "category_name": "car", "bbox": [700.0, 400.0, 100.0, 60.0],
                         "bbox_cam3d": [0.0, 0.5, 20.0, 1.9, 4.5, 1.6, 0.0], "center2d": [816.3, 523.2, 20.0]}],
        "categories": [{"id": 0, "name": "car"}],
    }  # fmt: skip
    src = tmp_path / "x_mono3d.coco.json"
    if case == "no_annotations":
        del doc["annotations"]
    elif case == "short_box":
        doc["annotations"][0]["bbox_cam3d"] = [1.0, 2.0]
    elif case == "bad_quat":
        doc["images"][0]["ego2global_rotation"] = [2.0, 0.0, 0.0, 0.0]
    elif case == "bad_size":
        doc["images"][0]["width"] = "wide"
    src.write_text("{not json" if case == "not_json" else json.dumps(doc))
    rc, _, err = run(["convert", src, tmp_path / "out"], capsys)
    assert rc == 1 and err.startswith("error: ") and err.count("\n") == 1, err
    assert needle in err, err
    assert not (tmp_path / "out").exists()
