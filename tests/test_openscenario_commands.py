"""OpenSCENARIO end to end: `avsim convert` of scenariogeneration's examples and their render,
parameter distributions and edit sweeps as named variants, an `avsim sim` episode with the storyboard
driving traffic around a policy ego, and `avsim export openscenario` checked by ASAM's checker
(asam-qc-openscenarioxml 1.0.0) and converted back to the same tracks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import openscenario_examples as ex
import pytest

from avsim.cli import main
from avsim.scenario import Scenario
from avsim.scenario.io import load_scenario

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("xosc_commands")
    ex.write_resources(folder)
    return folder


def _same_tracks(a: Scenario, b: Scenario) -> dict[str, float]:
    """Every pose of `a` at its time in `b`: the largest position and rotation differences (and the rows not found)."""
    out = {"missing": 0.0, "ego_m": 0.0, "ego_rot": 0.0, "agents_m": 0.0, "agents_quat": 0.0}
    j = np.searchsorted(b.ego.timestamps_ns, a.ego.timestamps_ns)
    hit = (j < len(b.ego)) & (b.ego.timestamps_ns[np.minimum(j, len(b.ego) - 1)] == a.ego.timestamps_ns)
    out["missing"] += float((~hit).sum())
    pa, pb = a.ego.world_SE3_ego, b.ego.world_SE3_ego
    out["ego_m"] = float(np.linalg.norm(pa.translation[hit] - pb.translation[j[hit]], axis=1).max())
    out["ego_rot"] = float(np.abs(pa.rotation[hit] - pb.rotation[j[hit]]).max())
    for track, sl in a.agents.track_slices():
        tb = b.agents.track(track)
        ta = a.agents.timestamps_ns[sl]
        k = np.searchsorted(tb.timestamps_ns, ta)
        found = (k < len(tb)) & (tb.timestamps_ns[np.minimum(k, max(len(tb) - 1, 0))] == ta) if len(tb) else np.zeros(len(ta), bool)
        out["missing"] += float((~found).sum())
        if found.any():
            out["agents_m"] = max(out["agents_m"], float(np.linalg.norm(a.agents.center_m[sl][found] - tb.center_m[k[found]], axis=1).max()))
            qa, qb = a.agents.orientation[sl][found], tb.orientation[k[found]]
            out["agents_quat"] = max(out["agents_quat"], float(np.minimum(np.abs(qa - qb).max(1), np.abs(qa + qb).max(1)).max()))
        assert set(tb.source_class) <= {str(a.agents.source_class[sl][0])}
    return out


@pytest.mark.e2e
@pytest.mark.subprocess
def test_examples_convert_and_render(root: Path, tmp_path: Path) -> None:
    lane_change = ex.lane_change(root, [0.004], [20])[0]  # the ego alone changes lanes on a spiral-arc road
    for kind, xosc in (("cut_in", ex.cut_in(root)), ("trajectory", ex.trajectory(root)), ("lane_change", lane_change)):
        out = tmp_path / kind
        assert main(["convert", str(xosc), str(out), "--root", str(root)]) == 0
        s = load_scenario(out)
        assert s.metadata["source_format"] == "openscenario" and len(s.map.lanes) >= 4
        assert s.metadata["ego_size_m"] == [5.04, 2.0, 1.5] and s.metadata["openscenario"]["ego"] == "Ego"
        assert kind == "lane_change" or len(s.agents.track_ids) >= 1  # the lane change has the ego only
        video = tmp_path / f"{kind}_render"
        assert main(["render", str(out), str(video), "--size", "160x90", "--cameras", "camera_front_wide_120fov", "--frames", "4"]) == 0
        assert list(video.rglob("*.mp4"))
    # a bad file is one line and exit 1, nothing written
    bad = root / "xosc" / "bad.xosc"
    bad.write_text("<OpenSCENARIO><FileHeader revMajor='1' revMinor='9' date='x' description='' author=''/></OpenSCENARIO>")
    assert main(["convert", str(bad), str(tmp_path / "bad")]) == 1 and not (tmp_path / "bad").exists()
    assert main(["convert", str(ex.cut_in(root)), str(tmp_path / "x"), "--root", str(root), "--start", "1"]) == 2


@pytest.mark.subprocess
def test_distribution_and_sweep_make_named_variants(root: Path, tmp_path: Path) -> None:
    dist = root / "xosc" / "speeds.xosc"
    ex.distribution(root)  # base_scenario.xosc with $egospeed, $targetspeed
    dist.write_text(
        '<OpenSCENARIO><FileHeader revMajor="1" revMinor="2" date="2024-01-01T00:00:00" description="d" author="a"/>'
        '<ParameterValueDistribution><ScenarioFile filepath="base_scenario.xosc"/><Deterministic>'
        '<DeterministicSingleParameterDistribution parameterName="egospeed"><DistributionSet><Element value="20"/><Element value="30"/>'
        '</DistributionSet></DeterministicSingleParameterDistribution></Deterministic></ParameterValueDistribution></OpenSCENARIO>')  # fmt: skip
    out = tmp_path / "variants"
    assert main(["convert", str(dist), str(out), "--root", str(root)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "avsim-edit-manifest" and [v["name"] for v in manifest["variants"]] == ["egospeed-20", "egospeed-30"]
    for v, speed in zip(manifest["variants"], (20, 30)):
        s = load_scenario(out / v["folder"])
        x = s.ego.world_SE3_ego.translation[:, 0]
        assert s.scenario_id == f"base_scenario__{v['name']}"
        assert (x[-1] - x[0]) / s.duration_s == pytest.approx(speed, rel=1e-9)
    # the same through an edit sweep over a converted scenario
    base = tmp_path / "base"
    assert main(["convert", str(root / "xosc" / "base_scenario.xosc"), str(base), "--root", str(root)]) == 0
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("version: 1\nsweep:\n  v: [12.5, 25]\nops:\n  - op: openscenario_parameters\n    values: {egospeed: $v}\n")
    assert main(["edit", str(base), str(sweep), str(tmp_path / "edited")]) == 0
    edited = json.loads((tmp_path / "edited" / "manifest.json").read_text())["variants"]
    for v, speed in zip(edited, (12.5, 25)):
        s = load_scenario(tmp_path / "edited" / v["folder"])
        x = s.ego.world_SE3_ego.translation[:, 0]
        assert (x[-1] - x[0]) / s.duration_s == pytest.approx(speed, rel=1e-9) and s.metadata["openscenario"]["parameters"]["egospeed"] in ("12.5", "25")
    sweep.write_text("version: 1\nops:\n  - op: openscenario_parameters\n    values: {nope: 1}\n")
    assert main(["edit", str(base), str(sweep), str(tmp_path / "bad")]) == 1


@pytest.mark.e2e
def test_sim_episode_with_the_storyboard_driving_traffic_around_a_policy_ego(root: Path, tmp_path: Path) -> None:
    scenario = tmp_path / "cut_in"
    assert main(["convert", str(ex.cut_in(root)), str(scenario), "--root", str(root)]) == 0
    recorded = load_scenario(scenario)
    out = tmp_path / "sim"
    assert main(["sim", str(scenario), str(out), "--policy", "constant-velocity", "--controller", "perfect", "--agents", "storyboard", "--no-step-scores"]) == 0
    metrics = json.loads((out / "sim_metrics.json").read_text())
    assert metrics["settings"]["agents"] == "storyboard" and metrics["settings"]["status"] == "completed"
    rollout = load_scenario(out / "scenario")
    assert set(rollout.agents.track_ids) == {"Target1", "Target2"}
    # the constant-velocity ego drives as the storyboard's ego did (30 m/s along the lane): the storyboard's
    # cars do what they did in the recording, step for step
    t = 2.5e9
    a, b = recorded.agents.at(recorded.start_ns + int(t)), rollout.agents.at(rollout.start_ns + int(t))
    order_a, order_b = np.argsort(a.track_id), np.argsort(b.track_id)
    assert np.abs(a.center_m[order_a] - b.center_m[order_b]).max() < 0.05
    # a slower policy ego: the red car's cut-in trigger (its headway from the ego) fires earlier
    slow = tmp_path / "slow"
    assert main(["sim", str(scenario), str(slow), "--policy", "openscenario_policies:slow", "--agents", "storyboard", "--no-step-scores"]) == 0
    red = load_scenario(slow / "scenario").agents.track("Target1")
    red_rec = recorded.agents.track("Target1")
    lateral_start = lambda tr: (tr.timestamps_ns[np.argmax(np.abs(tr.center_m[:, 1] - tr.center_m[0, 1]) > 0.01)] - tr.timestamps_ns[0]) / 1e9  # noqa: E731
    assert lateral_start(red) < lateral_start(red_rec) - 0.2


@pytest.mark.subprocess
def test_sample_export_passes_asam_checker_and_round_trips(session_sample_dir: Path, tmp_path: Path) -> None:
    from asam_checker import check_xosc

    out = tmp_path / "xosc"
    assert main(["export", "openscenario", str(session_sample_dir), str(out)]) == 0
    xosc = out / "avsim_sample_seed0.xosc"
    assert (out / "avsim_sample_seed0.xodr").is_file()
    issues, statuses = check_xosc(xosc, tmp_path)
    assert not issues, issues
    assert statuses and set(statuses.values()) == {"COMPLETED"}, statuses
    again = tmp_path / "again"
    assert main(["export", "openscenario", str(session_sample_dir), str(again)]) == 0
    if (again / xosc.name).read_bytes() != xosc.read_bytes():
        import difflib
        a, b = xosc.read_text().splitlines(), (again / xosc.name).read_text().splitlines()
        raise AssertionError("\n".join(list(difflib.unified_diff(a, b, lineterm="", n=1))[:20]))
    back = tmp_path / "back"
    assert main(["convert", str(xosc), str(back)]) == 0
    sample, reimport = load_scenario(session_sample_dir), load_scenario(back)
    assert reimport.scenario_id == sample.scenario_id and reimport.start_ns == sample.start_ns and reimport.end_ns == sample.end_ns
    d = _same_tracks(sample, reimport)
    assert d["missing"] == 0 and d["ego_m"] <= 0.01 and d["agents_m"] <= 0.01, d
    assert d["ego_rot"] < 1e-9 and d["agents_quat"] < 1e-9, d


REAL_SCENES = ["scenarionet/sd_nuscenes_v1.0-mini_scene-0103.pkl", "av2/sensor/adcf7d18-0510-35b0-a2fa-b4cea13a6d76",
               "av2/forecasting/0a1e6f0a-1817-4a98-b02e-db8c9327d151", "waymo/motion_data_one_scenario.tfrecord"]  # fmt: skip


@pytest.mark.realdata
@pytest.mark.subprocess
@pytest.mark.parametrize("name", REAL_SCENES)
def test_real_scene_export_passes_asam_checker_and_round_trips(shared_data: Path, tmp_path: Path, name: str) -> None:
    """One scene of every importer with tracks (the other real scenes pass too, docs/editing.md; each costs about
    7 CPU-seconds here): its export passes ASAM's checker and every pose comes back. The map is
    cut to 30 m around the ego's start (the OpenDRIVE export of a whole nuScenes map takes a minute; tests of the
    map export are tests/test_opendrive_export.py's; the tracks do not depend on it)."""
    from dataclasses import replace

    from asam_checker import check_xosc

    from avsim.maps.queries import within_radius
    from avsim.scenario.exporters.openscenario import export_openscenario
    from avsim.scenario.importers.registry import convert

    scene = convert(shared_data / name)
    scene = replace(scene, map=within_radius(scene.map, scene.ego.world_SE3_ego.translation[0, :2], 30.0))
    written = export_openscenario(scene, tmp_path / "xosc")
    issues, statuses = check_xosc(written.xosc, tmp_path)
    assert not [i for i in issues if i[0] == "ERROR"], issues
    assert set(statuses.values()) == {"COMPLETED"}, statuses
    back = convert(written.xosc)
    d = _same_tracks(scene, back)  # every pose comes back, at its time (between the conversion's steps too)
    assert d["missing"] == 0 and d["ego_m"] <= 0.01 and d["agents_m"] <= 0.01, d
    assert d["ego_rot"] < 1e-9 and d["agents_quat"] < 1e-9, d
