"""`avsim labels-mmdet3d`: an mmdetection3d 1.1+ nuScenes-style info file of labelled clips (issue 41).

mmdetection3d itself does not install beside avsim (its mmcv / torch pins), so the file is checked field by field
against the layout `update_infos_to_v2.py` writes, read back by avsim's own mmdet3d importer (the reader of real
infos: its `cam_instances` must agree with the imported rig and boxes, as on real nuScenes infos), and its camera
boxes' angle against pyquaternion's `yaw_pitch_roll` (what the converter calls)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from avsim.cli import main

CAM = "camera_front_wide_120fov"
CLIP = "avsim_sample_seed0"
SAMPLE_KEYS = {"sample_idx", "token", "timestamp", "ego2global", "images", "lidar_points", "instances", "cam_instances"}
IMAGE_KEYS = {"img_path", "height", "width", "cam2img", "cam2ego", "lidar2cam", "timestamp", "sample_data_token"}
CAM_INSTANCE_KEYS = {"bbox_label", "bbox_label_3d", "bbox", "bbox_3d_isvalid", "bbox_3d", "velocity", "center_2d", "depth", "attr_label"}


def _check_info(info_path: Path, scenario_dir: Path, frames: int) -> dict:
    from pyquaternion import Quaternion

    from avsim.core.transforms import quat_to_matrix, yaw_to_quat
    from avsim.scenario import projection_check as pc
    from avsim.scenario.importers.safe_pickle import load_pickle
    from avsim.scenario.io import load_scenario

    info = load_pickle(info_path)  # builtins only: what mmengine.load reads too
    assert info["metainfo"]["info_version"] == "1.1" and info["metainfo"]["categories"]["car"] == 0
    assert len(info["data_list"]) == frames
    for s in info["data_list"]:
        assert set(s) >= SAMPLE_KEYS and np.asarray(s["ego2global"]).shape == (4, 4)
        for cam, im in s["images"].items():
            assert set(im) >= IMAGE_KEYS and np.asarray(im["cam2img"]).shape == (3, 3)
            assert (info_path.parent / im["img_path"]).is_file()
            np.testing.assert_allclose(np.asarray(im["lidar2cam"]) @ np.asarray(im["cam2ego"]), np.eye(4), atol=1e-12)
            for ci in s["cam_instances"][cam]:
                assert set(ci) == CAM_INSTANCE_KEYS and ci["depth"] > 0
                x1, y1, x2, y2 = ci["bbox"]
                assert 0 <= x1 <= x2 <= im["width"] and 0 <= y1 <= y2 <= im["height"]
        for b in s["instances"]:
            assert len(b["bbox_3d"]) == 7 and len(b["velocity"]) == 2 and b["num_lidar_pts"] in (0, 1)
    # the camera boxes' angle is the converter's: -yaw_pitch_roll[0] of the box rotation in the camera frame
    s = info["data_list"][0]
    ego_T_cam = np.asarray(s["images"][CAM]["cam2ego"]) if CAM in s["images"] else None
    if ego_T_cam is not None:
        for ci in s["cam_instances"][CAM]:
            k = int(np.argmin([np.linalg.norm(np.asarray(b["bbox_3d"][:3]) @ ego_T_cam[:3, :3] - ego_T_cam[:3, 3] @ ego_T_cam[:3, :3]
                                              - np.asarray(ci["bbox_3d"][:3])) for b in s["instances"]]))  # fmt: skip
            R = ego_T_cam[:3, :3].T @ quat_to_matrix(yaw_to_quat(s["instances"][k]["bbox_3d"][6]))  # the sample: upright boxes, flat ego
            assert ci["bbox_3d"][6] == pytest.approx(-Quaternion(matrix=R, atol=1e-9).yaw_pitch_roll[0], abs=1e-9)
    n = _restated_cam_instances(info)
    # avsim's importer of real infos reads it back (boxes upright in the world, as nuScenes'): its camera labels
    # agree with the imported rig, poses and boxes
    report = pc.check_projection(pc.reference_source(info_path), "info")
    compared = [c for c in report.cameras if c.centres_compared]
    assert compared and max(c.centre_max_px for c in compared) < 1e-6
    return {"labels": n, "corner_max_px": max(c.corner_max_px for c in compared if c.corners_compared),
            "scenario": load_scenario(scenario_dir)}  # fmt: skip


def _restated_cam_instances(info: dict) -> int:
    """Each camera box again from its `instances` box (upright in the lidar frame, mmdetection3d's LiDAR boxes) by the
    converter's steps: corners through lidar2cam, those in front projected with cam2img, their hull clipped to the image."""
    from shapely.geometry import MultiPoint, box

    signs = np.array([[i, j, k] for i in (1, -1) for j in (1, -1) for k in (1, -1)], float) / 2
    n = 0
    for s in info["data_list"]:
        inst = np.array([b["bbox_3d"] for b in s["instances"]]).reshape(-1, 7)
        for cam, im in s["images"].items():
            T, K = np.asarray(im["lidar2cam"]), np.asarray(im["cam2img"])
            centres = inst[:, :3] @ T[:3, :3].T + T[:3, 3]
            for ci in s["cam_instances"][cam]:
                k = int(np.argmin(np.linalg.norm(centres - np.asarray(ci["bbox_3d"][:3]), axis=1)))
                c, sn = np.cos(inst[k, 6]), np.sin(inst[k, 6])
                corners = (signs * inst[k, 3:6]) @ np.array([[c, -sn, 0.0], [sn, c, 0.0], [0.0, 0.0, 1.0]]).T + inst[k, :3]
                cc = corners @ T[:3, :3].T + T[:3, 3]
                front = cc[cc[:, 2] > 0]
                uv = (front @ K.T)[:, :2] / front[:, 2:]
                want = MultiPoint([tuple(p) for p in uv]).convex_hull.intersection(box(0, 0, im["width"], im["height"])).bounds
                np.testing.assert_allclose(ci["bbox"], want, atol=1e-3)  # float32 rotations of the compact table
                c2 = K @ centres[k]
                np.testing.assert_allclose(ci["center_2d"], c2[:2] / c2[2], atol=1e-9)
                n += 1
    return n


@pytest.mark.e2e
def test_info_of_a_labelled_clip_with_images(tmp_path: Path) -> None:
    assert main(["sample", str(tmp_path / "s"), "--duration-s", "1"]) == 0
    assert main(["labels", str(tmp_path / "s"), str(tmp_path / "out"), "--frames", "4", "--size", "x180", "--images", "jpg"]) == 0
    assert main(["labels-mmdet3d", str(tmp_path / "infos" / "train.pkl"), str(tmp_path / "out")]) == 0
    got = _check_info(tmp_path / "infos" / "train.pkl", tmp_path / "s", 4)
    assert got["labels"] > 50 and got["corner_max_px"] < 1e-6  # the sample's ego is level: upright in the ego is upright in the world
    # the nuScenes camera names stock configs read (the front tele has no counterpart), and each box's attribute
    assert main(["labels-mmdet3d", str(tmp_path / "infos" / "nus.pkl"), str(tmp_path / "out"), "--camera-names", "nuscenes"]) == 0
    entry = pickle.loads((tmp_path / "infos" / "nus.pkl").read_bytes())["data_list"][0]
    assert sorted(entry["images"]) == sorted(["CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_FRONT_LEFT", "CAM_BACK", "CAM_BACK_LEFT", "CAM_BACK_RIGHT"])
    assert entry["images"]["CAM_FRONT"]["sample_data_token"].endswith(":CAM_FRONT") and set(entry["cam_instances"]) == set(entry["images"])
    labels = {i["attr_label"] for v in entry["cam_instances"].values() for i in v}
    assert labels - {8} and labels <= set(range(9))  # attributes from the boxes' motion (8: "None", barriers)
    assert main(["labels-mmdet3d", str(tmp_path / "infos" / "one.pkl"), str(tmp_path / "out"), "--camera-names",
                 "camera_front_wide_120fov=CAM_FRONT"]) == 0  # fmt: skip
    assert list(pickle.loads((tmp_path / "infos" / "one.pkl").read_bytes())["data_list"][0]["images"]) == ["CAM_FRONT"]
    assert main(["labels-mmdet3d", str(tmp_path / "infos" / "bad.pkl"), str(tmp_path / "out"), "--camera-names", "nope=CAM_FRONT"]) == 1


@pytest.mark.e2e
def test_info_of_a_render_without_images_decodes_its_videos(tmp_path: Path) -> None:
    assert main(["sample", str(tmp_path / "s"), "--duration-s", "1"]) == 0
    assert main(["render", str(tmp_path / "s"), str(tmp_path / "out"), "--frames", "2", "--size", "x180", "--labels",
                 "--label-files", "standard"]) == 0  # fmt: skip
    info = tmp_path / "infos" / "val.pkl"
    assert main(["labels-mmdet3d", str(info), str(tmp_path / "out" / CLIP / "labels")]) == 0
    _check_info(info, tmp_path / "s", 2)
    assert len(list((tmp_path / "infos" / "images" / CLIP).rglob("*.jpg"))) == 2 * 7


def test_no_label_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["labels-mmdet3d", str(tmp_path / "i.pkl"), str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no label folder" in err[0] and not (tmp_path / "i.pkl").exists()


@pytest.mark.realdata
@pytest.mark.e2e
def test_info_of_a_real_av2_clip(shared_data: Path, tmp_path: Path) -> None:
    logs = sorted((shared_data / "av2" / "sensor").glob("*"))
    if not logs:
        pytest.skip("no Argoverse 2 sensor log in the shared data")
    assert main(["convert", str(logs[0]), str(tmp_path / "s")]) == 0
    assert main(["labels", str(tmp_path / "s"), str(tmp_path / "out"), "--fps", "2", "--frames", "3", "--size", "x360",
                 "--images", "jpg"]) == 0  # fmt: skip
    assert main(["labels-mmdet3d", str(tmp_path / "train.pkl"), str(tmp_path / "out")]) == 0
    got = _check_info(tmp_path / "train.pkl", tmp_path / "s", 3)
    # AV2 boxes are upright in the (pitched) ego frame, which the info holds exactly; read back as nuScenes boxes,
    # upright in the world, their corners move by the ego's tilt
    assert got["labels"] > 20 and got["corner_max_px"] < 1.0
    index = json.loads(next((tmp_path / "out").glob("*/labels/index.json")).read_text())
    assert index["camera_sizes_px"]["ring_front_center"] == [272, 360]
