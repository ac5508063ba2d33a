"""`avsim export nuscenes` on every real scene of ../shared/data (issue 56): convert, label 1 s at 12 fps with
JPEG images (the rig and image aspect of each source), export, and check the dataroot by its consumers:
nuscenes-devkit loads it and every link and file holds, its detection-eval steps give mAP 1 for the oracle, and `avsim convert` gives back the converted scenario (ego poses at every
exported capture, extrinsics, capture offsets, keyframe boxes); `NuScenesMap` reads the map expansion of every
scene with a map."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from nuscenes_export_checks import check_oracle, check_round_trip, check_structure, open_export

from avsim.cli import main

SHARED = [
    *(f"scenarionet/sd_nuscenes_v1.0-mini_scene-{n}.pkl" for n in ("0103", "0553", "0655", "0757", "0796", "0916", "1077")),
    "scenarionet/sd_waymo_v1.2_eb4b91b10ca94ff2.pkl", "waymo/motion_data_one_scenario.tfrecord",
    "av2/sensor/adcf7d18-0510-35b0-a2fa-b4cea13a6d76", "av2/forecasting/0a1e6f0a-1817-4a98-b02e-db8c9327d151",
    "rdshq-example/assets/example", "nuscenes-mmdet3d/nus_info.pkl", "nuscenes-dataroot",
]  # fmt: skip


@pytest.mark.realdata
@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize("rel", SHARED)
def test_every_real_scene_exports_and_comes_back(shared_data: Path, tmp_path: Path, rel: str) -> None:
    from avsim.scenario.io import load_scenario

    if rel.startswith("waymo/"):
        pytest.importorskip("waymo_open_dataset.protos.scenario_pb2", reason="the `waymo` extra is not installed")
    src = shared_data / rel
    if rel == "nuscenes-dataroot":  # the nuScenes importer's real-calibration dataroot (tests/test_importers_nuscenes.py)
        from test_importers_nuscenes import write_nuscenes_fixture

        src = tmp_path / "nuscenes"
        write_nuscenes_fixture(shared_data / "nuscenes-mmdet3d" / "nus_info.pkl", src)
    assert main(["convert", str(src), str(tmp_path / "s")]) == 0
    source = load_scenario(tmp_path / "s")
    frames = min(13, int((source.end_ns - (source.frame_origin_ns or source.start_ns)) * 12 // 1_000_000_000) + 1)
    assert main(["labels", str(tmp_path / "s"), str(tmp_path / "l"), "--fps", "12", "--frames", str(frames), "--size", "x180",
                 "--images", "jpg"]) == 0  # fmt: skip
    assert main(["export", "nuscenes", str(tmp_path / "l"), str(tmp_path / "nus"), "--scenario", str(tmp_path / "s"),
                 "--version", "v1.0-mini"]) == 0  # fmt: skip
    nusc = open_export(tmp_path / "nus", "v1.0-mini")
    counts = check_structure(nusc, tmp_path / "nus")
    assert counts["samples"] == (frames + 1) // 6 + 1 >= 2  # a keyframe every 6 frames, the last within 0.1 s of its mark
    check_oracle(nusc, shifted_ap=False)
    (labels,) = (tmp_path / "l").glob("*/labels")
    index = json.loads((labels / "index.json").read_text())
    manifest = json.loads((tmp_path / "nus" / "avsim_export.json").read_text())
    (scene,) = manifest["scenes"].values()
    times = np.array([f["timestamp_ns"] for f in index["frames"]], np.int64)[: scene["frames"]]
    back = check_round_trip(tmp_path / "nus", scene["name"], source, times, scene["channels"], tmp_path)
    (log,) = manifest["logs"].values()
    if source.map.lanes.ids.size or source.map.lane_lines.ids.size:  # NuScenesMap reads the expansion of the real map
        from nuscenes.map_expansion.map_api import NuScenesMap

        nmap = NuScenesMap(dataroot=str(tmp_path / "nus"), map_name=log["location"])
        assert len(nmap.lane) == len(back.map.lanes) > 0 or len(nmap.lane_divider) + len(nmap.road_divider) > 0
