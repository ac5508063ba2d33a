"""`avsim sim` and `avsim run sim` end to end: the sample driven through its intersection, a failing
policy, and the converted real scenes on Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
AVSIM = [sys.executable, "-m", "avsim.cli.main"]


def _avsim(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(TESTS), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([*AVSIM, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sim")
    result = _avsim("sample", "s", cwd=folder, timeout=900)
    assert result.returncode == 0, result.stderr
    return folder


@pytest.mark.e2e
@pytest.mark.subprocess
@pytest.mark.slow
def test_idm_policy_drives_the_sample_through_the_intersection_among_idm_agents(sample: Path) -> None:
    """The issue's "done when": `avsim sample s && avsim sim s out --policy idm --agents idm`."""
    result = _avsim("sim", "s", "out", "--policy", "idm", "--agents", "idm", cwd=sample, timeout=2700)
    assert result.returncode == 0, result.stderr
    out = sample / "out"
    doc = json.loads((out / "sim_metrics.json").read_text())
    ep = doc["episode"]
    assert doc["settings"]["status"] == "completed" and doc["settings"]["steps_run"] == 200
    assert ep["no_at_fault_collisions"] == 1.0 and ep["drivable_area_compliance"] == 1.0 and ep["traffic_light_compliance"] == 1.0
    assert not [f for f in doc["rules"]["findings"] if f["kind"] in ("overlap", "red_light")]
    import polars as pl

    table = pl.read_parquet(out / "steps.parquet")
    assert table.height == 201 and not table["contact"].any()
    assert table["y_m"][-1] > 20.0  # the ego started 57 m south of the junction and left it northwards
    assert table["window_epdms"].drop_nulls().len() > 100
    # the rollout is a native scenario: the other commands read it unchanged
    for args in (("validate", "out/scenario"), ("info", "out/scenario"),
                 ("render", "out/scenario", "r", "--frames", "2", "--size", "320x180", "--cameras", "camera_front_wide_120fov"),
                 ("export-scene", "out/scenario", "out.glb", "--every", "50")):  # fmt: skip
        res = _avsim(*args, cwd=sample, timeout=600)
        assert res.returncode == 0, (args, res.stderr)


@pytest.mark.e2e
@pytest.mark.subprocess
def test_a_crashing_policy_ends_cleanly_and_keeps_its_rollout(sample: Path) -> None:
    result = _avsim("sim", "s", "crash", "--policy", "sim_policies:CrashAtStep3", "--steps", "10", cwd=sample, timeout=600)
    assert result.returncode == 1, result.stderr  # the rollout is kept and the command fails
    lines = [ln for ln in result.stderr.splitlines() if "episode ended early" in ln]
    assert lines == ["episode ended early: policy raised ZeroDivisionError at step 3: division by zero in the planner"]
    assert "Traceback" not in result.stderr
    doc = json.loads((sample / "crash" / "sim_metrics.json").read_text())
    assert doc["settings"]["status"] == "policy_error" and doc["settings"]["steps_run"] == 3
    from avsim.scenario.io import load_scenario

    assert len(load_scenario(sample / "crash" / "scenario").ego.timestamps_ns) == 4


@pytest.mark.e2e
@pytest.mark.subprocess
def test_bad_options_are_usage_errors(sample: Path) -> None:
    assert _avsim("sim", "s", "o", "--agents", "smart", cwd=sample, timeout=360).returncode == 2
    res = _avsim("sim", "s", "o", "--policy", "nowhere:nothing", cwd=sample, timeout=360)
    assert res.returncode == 1 and res.stderr.strip().splitlines()[-1].startswith("error: --policy: policy: cannot import module")
    assert not (sample / "o").exists()


@pytest.mark.realdata
@pytest.mark.distributed
@pytest.mark.e2e
@pytest.mark.slow
def test_run_sim_over_converted_real_scenes_on_ray(shared_data: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    src = shared_data / "scenarionet"
    res = _avsim("run", "convert", str(src), "conv", "--workers", "2", cwd=tmp_path, timeout=900)
    assert res.returncode == 0, res.stderr
    res = _avsim("run", "sim", "conv", "out", "--policy", "idm", "--agents", "idm", "--steps", "30", "--seeds", "0,1", "--engine", "ray",
                 "--workers", "2", cwd=tmp_path, timeout=2700)  # fmt: skip
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "out" / "job_report.json").read_text())
    assert report["engine"] == "ray" and report["counts"]["failed"] == 0 and report["counts"]["done"] == 2 * 8
    import polars as pl

    summary = pl.read_csv(tmp_path / "out" / "sim_summary.csv")
    assert summary.height == 16 and set(summary["seed"].to_list()) == {0, 1}
    done = summary.filter(pl.col("episode_status") == "completed")
    assert done.height >= 12 and np.isfinite(done["epdms"].to_numpy()).all()
    again = _avsim("run", "sim", "conv", "out", "--policy", "idm", "--agents", "idm", "--steps", "30", "--seeds", "0,1", "--workers", "2",
                   cwd=tmp_path, timeout=900)  # fmt: skip
    assert again.returncode == 0 and json.loads((tmp_path / "out" / "job_report.json").read_text())["counts"]["skipped"] == 16
