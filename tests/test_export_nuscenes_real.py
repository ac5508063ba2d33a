"""`avsim export nuscenes` on every real scene of ../shared/data (issue 56): each scene converted and labelled (7
frames at 12 fps, two keyframes, JPEG images in the rig and image aspect of its source), then ONE export of all
of them (one dataroot, one scene per source; the real-data tests share it) checked by its consumers:
nuscenes-devkit loads it and every link and file holds, its detection-eval steps give mAP 1 for the oracle over
every scene, and, per scene, `avsim convert` gives back the converted scenario (ego poses at every exported
capture, extrinsics, capture offsets, keyframe boxes) and `NuScenesMap` reads the map expansion of every scene
with a map (a location past nuScenes' four once the devkit's list holds it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

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
VERSION = "v1.0-mini"
FRAMES = 7  # keyframes at 0 and 0.5 s


def _source(shared_data: Path, rel: str, tmp: Path) -> Path | None:
    """The source path of `rel` (None: absent from ../shared/data)."""
    if rel == "nuscenes-dataroot":  # the nuScenes importer's real-calibration dataroot (tests/test_importers_nuscenes.py)
        info = shared_data / "nuscenes-mmdet3d" / "nus_info.pkl"
        if not info.is_file():
            return None
        from test_importers_nuscenes import write_nuscenes_fixture

        write_nuscenes_fixture(info, tmp / "nuscenes")
        return tmp / "nuscenes"
    return shared_data / rel if (shared_data / rel).exists() else None


def _has_waymo() -> bool:
    try:
        import waymo_open_dataset.protos.scenario_pb2  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def real_export(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every real scene converted (`s/<k>/`) and labelled (`clips/<k>-<clip>/`), exported once into `nus/`."""
    from avsim.scenario.io import load_scenario

    root = tmp_path_factory.mktemp("nuscenes_real")
    (root / "clips").mkdir()
    scenes: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    for k, rel in enumerate(SHARED):
        if rel.startswith("waymo/") and not _has_waymo():
            skipped[rel] = "the `waymo` extra is not installed"
            continue
        src = _source(shared_data, rel, root / f"src{k}")
        if src is None:
            skipped[rel] = "not in ../shared/data"
            continue
        scenario = root / "s" / str(k)
        assert main(["convert", str(src), str(scenario)]) == 0, rel
        source = load_scenario(scenario)
        frames = min(FRAMES, int((source.end_ns - (source.frame_origin_ns or source.start_ns)) * 12 // 1_000_000_000) + 1)
        assert main(["labels", str(scenario), str(root / "l" / str(k)), "--fps", "12", "--frames", str(frames), "--size", "x180",
                     "--images", "jpg"]) == 0, rel  # fmt: skip
        (clip,) = (root / "l" / str(k)).iterdir()
        shutil.move(clip, root / "clips" / f"{k}-{clip.name}")
        scenes[rel] = {"source": source, "clip": f"{k}-{clip.name}", "frames": frames}
    assert main(["export", "nuscenes", str(root / "clips"), str(root / "nus"), "--scenario", str(root / "s"), "--version", VERSION]) == 0
    return {"root": root, "out": root / "nus", "scenes": scenes, "skipped": skipped, "nusc": open_export(root / "nus", VERSION)}


@pytest.mark.realdata
@pytest.mark.e2e
@pytest.mark.slow
def test_the_export_of_every_real_scene_loads_links_and_scores_the_oracle_1(real_export: dict[str, Any]) -> None:
    nusc, scenes = real_export["nusc"], real_export["scenes"]
    assert len(nusc.scene) == len(scenes) and len(scenes) + len(real_export["skipped"]) == len(SHARED)
    check_structure(nusc, real_export["out"])
    by_name = {s["name"]: s for s in nusc.scene}
    for rel, info in scenes.items():
        assert by_name[info["clip"]]["nbr_samples"] == (info["frames"] + 1) // 6 + 1 >= 2, rel  # a keyframe every 6 frames
    assert check_oracle(nusc, shifted_ap=False) > 0


@pytest.mark.realdata
@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize("rel", SHARED)
def test_every_real_scene_comes_back_with_its_map(real_export: dict[str, Any], tmp_path: Path, rel: str) -> None:
    if rel in real_export["skipped"]:
        pytest.skip(f"{rel}: {real_export['skipped'][rel]}")
    info = real_export["scenes"][rel]
    source, out = info["source"], real_export["out"]
    index = json.loads((real_export["root"] / "clips" / info["clip"] / "labels" / "index.json").read_text())
    manifest = json.loads((out / "avsim_export.json").read_text())
    scene = next(s for s in manifest["scenes"].values() if s["name"] == info["clip"])
    times = np.array([f["timestamp_ns"] for f in index["frames"]], np.int64)[: scene["frames"]]
    back = check_round_trip(out, scene["name"], source, times, scene["channels"], tmp_path)
    if source.map.lanes.ids.size or source.map.lane_lines.ids.size:  # NuScenesMap reads the expansion of the real map
        from nuscenes.map_expansion import map_api

        nusc = real_export["nusc"]
        scene_row = next(s for s in nusc.scene if s["name"] == info["clip"])
        location = nusc.get("log", scene_row["log_token"])["location"]
        added = location not in map_api.locations
        if added:
            map_api.locations.append(location)
        try:
            nmap = map_api.NuScenesMap(dataroot=str(out), map_name=location)
        finally:
            if added:
                map_api.locations.remove(location)
        assert len(nmap.lane) == len(back.map.lanes) > 0 or len(nmap.lane_divider) + len(nmap.road_divider) > 0
