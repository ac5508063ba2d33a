"""`avsim labels` on the real nuScenes calibration and boxes of ../shared/data/nuscenes-mmdet3d (skipped when absent):
the exported COCO `center_px` equal the official mono3d `center2d` within 0.5 px."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from avsim.cli import main


@pytest.fixture
def mono3d(shared_data: Path) -> Path:
    path = shared_data / "nuscenes-mmdet3d" / "nus_infos_mono3d.coco.json"
    if not path.is_file():
        pytest.skip(f"{path} not found (real data is not shipped with avsim)")
    return path


@pytest.mark.e2e
def test_exported_centres_match_official_center2d(mono3d: Path, tmp_path: Path) -> None:
    assert main(["convert", "--from", "mmdet3d", str(mono3d), str(tmp_path / "scn")]) == 0
    # the keyframe at the images' native size (labels are in the pixels of the rendered size)
    assert main(["labels", str(tmp_path / "scn"), str(tmp_path / "out"), "--frames", "1", "--size", "1600x900", "--label-files", "standard"]) == 0
    ref = json.loads(mono3d.read_text())
    camera_of = {im["id"]: im["file_name"].split("/")[1] for im in ref["images"]}
    (folder,) = (tmp_path / "out").glob("*/labels")
    errors = []
    for ann in ref["annotations"]:
        cam = camera_of[ann["image_id"]]
        ours = json.loads((folder / "coco" / f"{cam}.json").read_text())["annotations"]
        centre = np.asarray(ann["bbox_cam3d"][:3])  # the official box centre, camera frame (OpenCV axes)
        dist = [np.linalg.norm(np.asarray(o["center_camera_m"]) - centre) for o in ours]
        best = ours[int(np.argmin(dist))]  # boxes matched by nearest 3-D centre
        assert min(dist) < 0.01, (cam, ann["id"], min(dist))
        errors.append(np.abs(np.asarray(best["center_px"]) - np.asarray(ann["center2d"][:2])).max())
        assert best["center_depth_m"] == pytest.approx(ann["center2d"][2], abs=1e-3)
    assert len(errors) == len(ref["annotations"]) == 11
    assert max(errors) < 0.5, errors


def _world_heading(lidar_R_world: np.ndarray, yaw_lidar: float) -> float:
    """The world heading of the upright box whose lidar-frame yaw (the converter's pyquaternion yaw_pitch_roll[0]) is
    `yaw_lidar`, found by bisection on the converter's own forward rule (independent of the importer's closed form)."""
    from pyquaternion import Quaternion  # what the converter calls
    from scipy.optimize import brentq

    def converter_yaw(psi: float) -> float:
        c, s = np.cos(psi), np.sin(psi)
        R = lidar_R_world @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        return float(np.angle(np.exp(1j * (Quaternion(matrix=R, rtol=1e-5, atol=1e-5).yaw_pitch_roll[0] - yaw_lidar))))

    guess = yaw_lidar + np.arctan2(lidar_R_world[0, 1], lidar_R_world[0, 0])  # the yaw-only answer
    return brentq(converter_yaw, guess - 0.3, guess + 0.3, xtol=1e-14)


def test_frame_0_of_a_converted_info_is_the_keyframe(shared_data: Path, tmp_path: Path) -> None:
    """`avsim convert` of the real info .pkl (a lidar tilted in the world) + `avsim labels --frames 1`: frame 0 is the
    first sample, every camera at its own capture time, and the boxes project as the converter's cam_instances
    would (centres K @ lidar2cam @ centre; corners of the upright world box): centres < 0.5 px, corners < 1 px."""
    info = shared_data / "nuscenes-mmdet3d" / "nus_info.pkl"
    if not info.is_file():
        pytest.skip(f"{info} not found (real data is not shipped with avsim)")
    from avsim.scenario.importers.mmdet3d_boxes import lidar_boxes
    from avsim.scenario.importers.safe_pickle import load_pickle

    assert main(["convert", "--from", "mmdet3d", str(info), str(tmp_path / "scn")]) == 0
    assert main(["labels", str(tmp_path / "scn"), str(tmp_path / "out"), "--frames", "1", "--size", "1600x900", "--label-files", "standard"]) == 0
    (folder,) = (tmp_path / "out").glob("*/labels")
    sample = min(load_pickle(info)["data_list"], key=lambda s: s["timestamp"])
    index = json.loads((folder / "index.json").read_text())
    assert index["frames"][0]["timestamp_ns"] == round(sample["timestamp"] * 1e6) * 1000  # the keyframe, not the first capture
    world_T_lidar = np.asarray(sample["ego2global"]) @ np.asarray(sample["lidar_points"]["lidar2ego"])
    tilt = np.degrees(np.arccos(world_T_lidar[2, 2]))
    centre_l, lwh, yaw_l = lidar_boxes(np.array([i["bbox_3d"] for i in sample["instances"]]), legacy=True)
    signs = np.array([[i, j, k] for i in (1, -1) for j in (1, -1) for k in (1, -1)], float)
    centre_errors, corner_errors = [], []
    for cam, im in sample["images"].items():
        K, cam_T_lidar = np.asarray(im["cam2img"]), np.asarray(im["lidar2cam"])
        cam_T_world = cam_T_lidar @ np.linalg.inv(world_T_lidar)
        ours = json.loads((folder / "coco" / f"{cam}.json").read_text())["annotations"]
        for ann in (a for a in ours if a["track_id"].startswith(f"{sample['sample_idx']}:")):  # the keyframe's boxes
            c_cam = np.asarray(ann["center_camera_m"])
            c_all = centre_l @ cam_T_lidar[:3, :3].T + cam_T_lidar[:3, 3]
            k = int(np.argmin(np.linalg.norm(c_all - c_cam, axis=1)))
            assert np.linalg.norm(c_all[k] - c_cam) < 1e-3, (cam, ann["track_id"])
            centre_errors.append(np.abs((K @ c_all[k])[:2] / c_all[k][2] - np.asarray(ann["center_px"])).max())
            psi = _world_heading(np.linalg.inv(world_T_lidar)[:3, :3], float(yaw_l[k]))
            c, s = np.cos(psi), np.sin(psi)
            corners_w = (world_T_lidar[:3, :3] @ centre_l[k] + world_T_lidar[:3, 3]) + (signs * lwh[k] / 2) @ np.array(
                [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]).T  # fmt: skip
            corners_c = corners_w @ cam_T_world[:3, :3].T + cam_T_world[:3, 3]
            if np.all(corners_c[:, 2] > 0.1):
                uv = (corners_c @ K.T)[:, :2] / corners_c[:, 2:]
                mine = np.asarray(ann["corners_px"], float)  # the render spec's corner order: compare as sets
                corner_errors.append(max(np.linalg.norm(mine - p, axis=1).min() for p in uv))
    assert tilt > 1.0 and len(centre_errors) >= 10 and len(corner_errors) >= 8, (tilt, len(centre_errors), len(corner_errors))
    assert max(centre_errors) < 0.5 and max(corner_errors) < 1.0, (max(centre_errors), max(corner_errors))
