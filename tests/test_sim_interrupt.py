"""`avsim sim` interrupted by SIGINT or SIGTERM (`avsim.sim.interrupts`): the episode stops, the rollout so far is scored and
written as for a policy that fails (status `interrupted`), and the command exits 128 + the signal's number; also with generated
frames, where the signal stops the chunk being made. The tests signal when the policy says it reached a step (a marker file):
orderings, no wall-clock thresholds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from avsim.scenario.sample import make_sample_scenario
from avsim.sim.interrupts import Interrupted, interrupted_result, stop_on_signals
from avsim.sim.stepper import SimConfig, Simulator

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
WAIT_S = 900.0


def _start(tmp: Path, *args: str, mark_step: int, wait_s: float) -> tuple[subprocess.Popen[str], Path]:
    mark = tmp / "mark"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "AVSIM_TEST_MARK": str(mark), "AVSIM_TEST_MARK_STEP": str(mark_step), "AVSIM_TEST_MARK_WAIT": str(wait_s)}  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "avsim.cli.main", "sim", "s", "out", "--policy", "sim_policies:MarkAtStep", *args],
                            cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    return proc, mark


def _signal_at_mark(proc: subprocess.Popen[str], mark: Path, signum: int) -> tuple[str, str]:
    end = time.monotonic() + WAIT_S
    while not mark.exists() and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    assert mark.exists(), proc.communicate(timeout=60)
    proc.send_signal(signum)
    return proc.communicate(timeout=WAIT_S)


@pytest.fixture()
def scene(tmp_path: Path) -> Path:
    from avsim.scenario.io import save_scenario

    save_scenario(make_sample_scenario(0, duration_s=3.0), tmp_path / "s")
    return tmp_path


def test_a_signal_with_nothing_recorded_leaves_nothing_to_keep() -> None:
    sim = Simulator(make_sample_scenario(0, duration_s=1.0), SimConfig(steps=3))
    with pytest.raises(Interrupted, match="interrupted by SIGINT"):
        interrupted_result(sim, Interrupted(signal.SIGINT))  # not reset: no step recorded
    sim.reset()
    result = interrupted_result(sim, Interrupted(signal.SIGTERM))
    assert result.status == "interrupted" and result.steps == 0 and result.end_reason == "interrupted by SIGTERM at step 0"
    with stop_on_signals(), pytest.raises(Interrupted) as info:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(60)
    assert info.value.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


@pytest.mark.e2e
@pytest.mark.subprocess
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signalled_episode_keeps_its_rollout_so_far(scene: Path, signum: int) -> None:
    proc, mark = _start(scene, "--steps", "20", mark_step=3, wait_s=WAIT_S)  # the policy waits at step 3 until the signal
    out, err = _signal_at_mark(proc, mark, signum)
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, err
    assert f"episode ended early: interrupted by {name} at step 3" in err and "Traceback" not in err
    assert "3 steps (interrupted)" in out
    doc = json.loads((scene / "out" / "sim_metrics.json").read_text())
    assert doc["settings"]["status"] == "interrupted" and doc["settings"]["steps_run"] == 3 and doc["settings"]["steps_planned"] == 20
    from avsim.scenario.io import load_scenario

    assert len(load_scenario(scene / "out" / "scenario").ego.timestamps_ns) == 4  # steps 0..3 driven
    assert (scene / "out" / "steps.parquet").is_file() and not [p for p in scene.iterdir() if p.name.startswith(".out")]


@pytest.mark.e2e
@pytest.mark.subprocess
@pytest.mark.slow
def test_a_generated_episode_interrupted_while_a_chunk_is_made_keeps_the_steps_shown(scene: Path) -> None:
    """The debug model with random weights on the CPU: chunk 1 (steps 0-4) is made, the policy marks step 4, the signal arrives
    while chunk 2 is being made (the step 4 -> 5 transition): the rollout of steps 0..4 at least is written."""
    views = "camera_front_wide_120fov,camera_cross_left_120fov"
    proc, mark = _start(scene, "--steps", "9", "--observe", "generated", "--config", "debug", "--random-weights", "--cameras", views,
                        mark_step=4, wait_s=0.0)  # fmt: skip
    out, err = _signal_at_mark(proc, mark, signal.SIGINT)
    assert proc.returncode == 130, err
    assert "sim: chunk 1/3 (steps 0-4) generated in" in err and "interrupted by SIGINT at step" in err and "Traceback" not in err
    doc = json.loads((scene / "out" / "sim_metrics.json").read_text())
    steps = doc["settings"]["steps_run"]
    assert doc["settings"]["status"] == "interrupted" and steps >= 4
    assert [c["first_step"] for c in doc["generation"]["chunks"]][:1] == [0]
    from avsim.core.video import read_video

    frames = read_video(scene / "out" / "generated" / "camera_front_wide_120fov.mp4")
    assert frames.shape[0] >= steps and np.isfinite(frames.astype(float)).all()
