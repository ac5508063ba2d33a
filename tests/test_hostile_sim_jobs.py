"""`avsim sim` and `avsim run` under hostile use: policies that ask for too much, two runs into one OUT,
a full disk, a killed `run sim`, `--wait` on every run kind; and `eval lanes` of labels against themselves.

The option bounds (`--steps 1000000000`, `--seeds 0:100000000`, ...) are rows of tests/hostile_cases_surfaces.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stderr_lines import error_line

from avsim.cli import main
from avsim.core.locks import BUSY_REASON, output_lock

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sim_hostile")
    assert main(["sample", str(root / "s")]) == 0
    return root / "s"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(TESTS), os.environ.get("PYTHONPATH", "")])}


# ---------------------------------------------------------------------------- a policy that asks for too much
@pytest.mark.parametrize(("value", "reason"), [
    (("poses", 100_000, 0.1), "100000 poses, more than the 1000 a trajectory may have"),
    (("poses", 8, 1e300), "trajectory.interval_s: expected a number in (0, 60] s, got 1e+300"),
    (("poses", 700, 0.1), "reaches 70 s ahead, more than the 60 s a trajectory may"),
    (("far", 8, 0.5), "a pose 1e+09 m from the ego, more than the 10000 m"),
    (("bare", 2000, 0.1), "action: 2000 poses"),
])  # fmt: skip
def test_a_trajectory_is_bounded_before_anything_is_made_of_it(value: tuple[str, int, float], reason: str) -> None:
    from avsim.sim.actions import PolicyError, Trajectory, parse_action

    kind, n, interval = value
    poses = np.zeros((n, 3))
    if kind == "far":
        poses[-1, 0] = 1e9
    action: Any = poses if kind == "bare" else Trajectory(poses, interval)
    with pytest.raises(PolicyError) as info:
        parse_action(action, 0.1)
    assert reason in str(info.value)


@pytest.mark.e2e
def test_a_policy_returning_100000_poses_ends_its_episode_in_one_line(sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was a 74.5 GiB allocation; now the episode ends at step 0 with the reason (the documented policy_error)."""
    import json

    assert main(["sim", str(sample), str(tmp_path / "o"), "--policy", "sim_policies:many_poses", "--steps", "5"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "episode ended early: policy output at step 0: trajectory.poses: 100000 poses" in err
    doc = json.loads((tmp_path / "o" / "sim_metrics.json").read_text())
    assert doc["settings"]["status"] == "policy_error" and "more than the 1000" in doc["settings"]["end_reason"]


def test_a_scenario_longer_than_an_episode_may_be_needs_steps(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scenario's own span (no --steps) is bounded as --steps is (the sample's 20 s at 10 Hz: 200 steps, the bound set to 100)."""
    from avsim.core.errors import AvsimValueError
    from avsim.scenario.io import load_scenario
    from avsim.sim import stepper

    monkeypatch.setattr(stepper, "MAX_SIM_STEPS", 100)
    with pytest.raises(AvsimValueError, match="is 200 steps at 10 Hz, more than the 100 an episode may have; pass --steps or --duration"):
        stepper.Simulator(load_scenario(sample), stepper.SimConfig())
    with pytest.raises(AvsimValueError, match=r"SimConfig\.steps: expected 1 to 100"):
        stepper.SimConfig(steps=101)


# ---------------------------------------------------------------------------- one writer per OUT
@pytest.mark.e2e
def test_two_sims_into_one_out_are_locked_and_wait_waits(sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    args = ["sim", str(sample), str(out), "--policy", "expert", "--steps", "3", "--no-step-scores"]
    with output_lock(out):
        capsys.readouterr()
        assert main(args) == 1
        assert error_line(capsys.readouterr().err) == f"error: {out}: {BUSY_REASON}"
        waiter = threading.Thread(target=lambda: main([*args, "--wait"]))
        waiter.start()
        time.sleep(1.0)
        assert waiter.is_alive() and not (out / "sim_metrics.json").exists(), "--wait must not write while another holds OUT"
    waiter.join(600)
    assert (out / "sim_metrics.json").is_file() and not [p for p in tmp_path.rglob(".*")]
    assert f"warning: {out}: another avsim process is writing here; waiting for it (--wait)" in capsys.readouterr().err


@pytest.mark.subprocess
def test_a_full_disk_during_sim_is_one_line_and_leaves_nothing(sample: Path, tmp_path: Path) -> None:
    """It was a polars traceback (`ComputeError: ... No space left on device (os error 28)`)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no private mount namespace here (unshare -m): the disk-full path is not exercised")
    disk = tmp_path / "disk"
    disk.mkdir()
    script = (f"mount -t tmpfs -o size=64k tmpfs {disk} && {sys.executable} -m avsim.cli.main sim {sample} {disk}/out "
              f"--policy expert --steps 5 --no-step-scores 2>err.txt; echo $? > rc.txt; find {disk} -mindepth 1 > left.txt")  # fmt: skip
    done = subprocess.run(["unshare", "-m", "bash", "-c", script], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "rc.txt").read_text().strip() == "1"
    assert error_line((tmp_path / "err.txt").read_text()) == f"error: {disk / 'out'}: disk full"
    assert (tmp_path / "left.txt").read_text().split() == []


# ---------------------------------------------------------------------------- avsim run
KINDS = {  # every `avsim run` kind, with the arguments it needs besides DATASET OUT
    "render": [], "labels": [], "convert": [], "generate": ["--random-weights"], "pair": [], "encode": [], "sim": [],
    "eval fid": ["--real", "R"], "eval fvd": ["--real", "R"], "eval detect": ["--detector", "m:f"],
}  # fmt: skip


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_run_kind_takes_wait(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--wait` reaches the job (their refusal tells the user to pass it; it was missing on sim, generate, pair, encode)."""
    from avsim.jobs import run as job_run
    from avsim.jobs.run import JobReport

    seen: list[bool] = []

    def run_job(kind_: str, *args: Any, wait: bool = False, **kwargs: Any) -> JobReport:
        seen.append(wait)
        return JobReport(kind_, [])

    monkeypatch.setattr(job_run, "run_job", run_job)
    argv = ["run", *kind.split(), str(tmp_path / "ds"), str(tmp_path / "out"), *KINDS[kind]]
    assert main(argv) == 0 and main([*argv, "--wait"]) == 0
    assert seen == [False, True]


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_killed_run_sim_leaves_nothing_the_next_run_keeps(sample: Path, tmp_path: Path) -> None:
    """SIGKILL while an episode runs (its `avsim sim` inside the item's temporary), then a rerun: no temporaries left."""
    (tmp_path / "ds").mkdir()
    shutil.copytree(sample, tmp_path / "ds" / "a")
    args = [sys.executable, "-m", "avsim.cli.main", "run", "sim", "ds", "out", "--policy", "sim_policies:SlowAtStep4", "--steps", "8",
            "--budget", "600", "--workers", "1"]  # fmt: skip
    proc = subprocess.Popen(args, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 600
    while not [p for p in (tmp_path / "out" / "a").glob("..*")] and time.monotonic() < deadline:  # the inner temporary exists
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left = sorted(p.name for p in (tmp_path / "out" / "a").iterdir())
    assert any(name.startswith("..") for name in left), left  # what a killed run leaves
    rerun = subprocess.run(args[:-6] + ["--policy", "expert", "--steps", "3", "--workers", "1"], cwd=tmp_path, env=_env(), capture_output=True,
                           text=True, timeout=900)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert sorted(p.name for p in (tmp_path / "out" / "a").iterdir()) == ["seed0"]
    assert not [p for p in (tmp_path / "out").rglob(".*")], "temporaries of the killed run were kept"


# ---------------------------------------------------------------------------- eval lanes on untouched labels
@pytest.mark.e2e
@pytest.mark.parametrize("layout", ["compact", "standard"])
def test_eval_lanes_reads_label_openlane_folders_on_either_side(sample: Path, tmp_path: Path, layout: str) -> None:
    """docs/labels.md: `--gt LABELS/openlane/<camera>` reads compact labels as it reads the standard files; given
    as --pred too (labels of another clip), a folder against itself is a perfect score."""
    import json

    cam = "camera_front_wide_120fov"
    assert main(["labels", str(sample), str(tmp_path / "L"), "--frames", "4", "--size", "320x180", "--cameras", cam, "--label-files", layout]) == 0
    folder = tmp_path / "L" / "avsim_sample_seed0" / "labels" / "openlane" / cam
    assert main(["eval", "lanes", "--gt", str(folder), "--pred", str(folder), "--out", str(tmp_path / "r.json")]) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["f_score"] == doc["recall"] == doc["precision"] == 1.0
    assert main(["eval", "lanes", "--gt", str(folder), "--pred", str(sample), "--out", str(tmp_path / "s.json")]) == 0
