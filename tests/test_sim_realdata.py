"""Closed loop on every real scene of ../shared/data: each converted scene through `avsim run sim`
(one `avsim sim` episode per scene) with the expert (log replay) and the IDM planner.

Asserted on the scenes a closed loop can drive (CLOSED_LOOP: every one with at least 4 s of ego
poses and lanes): the route read from the log follows the road it drove (its progress along the
route within 5 % of its driven length, never far from it), the expert scores like NAVSIM scores
its human (PDMS >= 0.8 on each, >= 0.95 on average, the human inside the drivable area), and the
IDM planner keeps DAC 1 where the human did and makes progress. The mmdetection3d info holds two
samples' sensor poses (0.5 s, no lanes): it runs, `avsim validate` flags its poses, nothing more
is asserted on it. The IDM episodes are cut to 4 s (one window each; about 13 s of CPU an 8 s episode took, most of it the planner) to keep CI on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.subprocess]

SCENES = {  # name: path under ../shared/data
    "nus-0103": "scenarionet/sd_nuscenes_v1.0-mini_scene-0103.pkl",
    "nus-0553": "scenarionet/sd_nuscenes_v1.0-mini_scene-0553.pkl",
    "nus-0655": "scenarionet/sd_nuscenes_v1.0-mini_scene-0655.pkl",
    "nus-0757": "scenarionet/sd_nuscenes_v1.0-mini_scene-0757.pkl",
    "nus-0796": "scenarionet/sd_nuscenes_v1.0-mini_scene-0796.pkl",
    "nus-0916": "scenarionet/sd_nuscenes_v1.0-mini_scene-0916.pkl",
    "nus-1077": "scenarionet/sd_nuscenes_v1.0-mini_scene-1077.pkl",
    "sn-waymo": "scenarionet/sd_waymo_v1.2_eb4b91b10ca94ff2.pkl",
    "womd": "waymo/motion_data_one_scenario.tfrecord",
    "av2-sensor": "av2/sensor",
    "av2-fc": "av2/forecasting",
    "rdshq": "rdshq-example/assets/example",
    "mmdet": "nuscenes-mmdet3d/nus_info.pkl",
}
CLOSED_LOOP = [name for name in SCENES if name != "mmdet"]
IDM_DURATION_S = 4.0


def _avsim(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([sys.executable, "-m", "avsim.cli.main", *args], cwd=cwd, capture_output=True, text=True, timeout=3600)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def _source(shared: Path, rel: str) -> Path:
    path = shared / rel
    if path.is_dir() and rel.startswith("av2/"):
        (path,) = [p for p in path.iterdir() if p.is_dir()]  # one log / scenario folder
    return path


@pytest.fixture(scope="module")
def dataset(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from avsim.scenario.importers.registry import convert
    from avsim.scenario.io import save_scenario

    root = tmp_path_factory.mktemp("real_closed_loop")
    for name, rel in SCENES.items():
        save_scenario(convert(_source(shared_data, rel)), root / "data" / name)
    return root


def _episodes(root: Path, policy: str, *options: str) -> dict[str, dict]:
    out = root / policy
    if not out.exists():
        _avsim("run", "sim", "data", policy, "--policy", policy, "--workers", "2", *options, cwd=root)
    return {name: json.loads((out / name / "seed0" / "sim_metrics.json").read_text()) for name in SCENES}


@pytest.fixture(scope="module")
def expert(dataset: Path) -> dict[str, dict]:
    return _episodes(dataset, "expert")


@pytest.fixture(scope="module")
def idm(dataset: Path) -> dict[str, dict]:
    return _episodes(dataset, "idm", "--duration", str(IDM_DURATION_S))


def test_every_real_scene_runs_with_both_policies(expert: dict[str, dict], idm: dict[str, dict]) -> None:
    for runs in (expert, idm):
        assert {name: doc["settings"]["status"] for name, doc in runs.items()} == dict.fromkeys(SCENES, "completed")


def test_routes_follow_the_road_the_log_drove(expert: dict[str, dict]) -> None:
    for name in CLOSED_LOOP:
        route = expert[name]["route"]
        assert route["lanes"], name
        assert route["log_max_offset_m"] < 3.0, (name, route)
        if route["log_driven_m"] > 5.0:
            assert abs(route["log_progress_m"] - route["log_driven_m"]) <= 0.05 * route["log_driven_m"], (name, route)
        assert route["length_m"] >= route["log_progress_m"], name


def test_the_expert_scores_like_navsims_human(expert: dict[str, dict]) -> None:
    pdms = {name: expert[name]["episode"]["pdms"] for name in CLOSED_LOOP}
    assert min(pdms.values()) >= 0.8, pdms
    assert np.mean(list(pdms.values())) >= 0.95, pdms
    for name in CLOSED_LOOP:
        ep = expert[name]["episode"]
        assert ep["aggregation"] == "window_mean" and ep["windows_scored"] > 0, name
        assert ep["drivable_area_compliance"] == 1.0 and ep["no_at_fault_collisions"] == 1.0, (name, ep)
        assert ep["ego_progress"] == 1.0, (name, ep)  # the log is its own reference


def test_the_idm_planner_keeps_to_the_road_where_the_human_did(expert: dict[str, dict], idm: dict[str, dict]) -> None:
    for name in CLOSED_LOOP:
        ep = idm[name]["episode"]
        if expert[name]["episode"]["drivable_area_compliance"] == 1.0:
            assert ep["drivable_area_compliance"] == 1.0, (name, ep)
        assert ep["driving_direction_compliance"] == 1.0, (name, ep)


def test_the_idm_planner_makes_progress_where_the_human_did(dataset: Path, expert: dict[str, dict], idm: dict[str, dict]) -> None:
    import polars as pl

    for name in CLOSED_LOOP:
        log = pl.read_parquet(dataset / "expert" / name / "seed0" / "steps.parquet")
        mine = pl.read_parquet(dataset / "idm" / name / "seed0" / "steps.parquet")
        steps = len(mine)
        human_m = float(log["route_progress_m"][steps - 1] - log["route_progress_m"][0])
        idm_m = float(mine["route_progress_m"][-1] - mine["route_progress_m"][0])
        if human_m > 10.0:
            assert idm_m > 0.5 * human_m, (name, idm_m, human_m)
        else:
            assert idm_m < human_m + 40.0, (name, idm_m, human_m)


def test_validate_names_the_implausible_poses_of_the_real_logs(dataset: Path) -> None:
    from avsim.edit.validate import ValidationConfig, validate_scenario
    from avsim.scenario.io import load_scenario

    config = ValidationConfig(rule_checks=())
    found = [f for f in validate_scenario(load_scenario(dataset / "data" / "nus-0655"), config) if f.kind == "ego_pose"]
    assert found and found[-1].reason.startswith("ego poses 195-198") and "steps back 1.91 m" in found[-1].reason
    assert not [f for f in validate_scenario(load_scenario(dataset / "data" / "rdshq"), config) if f.kind == "ego_pose"]
