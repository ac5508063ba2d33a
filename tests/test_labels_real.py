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
    assert main(["labels", str(tmp_path / "scn"), str(tmp_path / "out"), "--frames", "1", "--size", "1600x900"]) == 0
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
