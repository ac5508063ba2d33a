"""Closed loop with the generated world (`avsim sim --observe generated`): chunks, forecasts,
re-planning, drift figures, and episodes on the CPU debug config with random weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.scenario.sample import make_sample_scenario
from avsim.sim.actions import Control, Trajectory
from avsim.sim.boxes import Boxes
from avsim.sim.chunks import ChunkPlanPolicy, ChunkSchedule, ReplanMode, remaining_plan
from avsim.sim.episode import run_episode
from avsim.sim.generated.drift import ChunkDrift, rnds_values
from avsim.sim.generated.forecast import ChunkForecaster, ctrv_poses, plan_poses
from avsim.sim.generated.options import GenerationOptions
from avsim.sim.observation import FrameState
from avsim.sim.policies import ConstantVelocityPolicy
from avsim.sim.run import Observe, SimOptions, run_sim
from avsim.sim.stepper import Controller, SimConfig, Simulator

REPO = Path(__file__).resolve().parents[1]
VIEWS = ("camera_front_wide_120fov", "camera_cross_left_120fov")


# ---- fast ----------------------------------------------------------------------------------------
def test_chunk_schedule() -> None:
    s = ChunkSchedule(5, 1)
    assert [s.start(c) for c in range(4)] == [0, 5, 9, 13]
    assert [s.chunk_of(k) for k in range(14)] == [0] * 5 + [1] * 4 + [2] * 4 + [3]
    assert [k for k in range(14) if s.is_start(k)] == [0, 5, 9, 13]
    assert list(s.steps(0)) == [0, 1, 2, 3, 4] and list(s.steps(2)) == [9, 10, 11, 12]
    assert [k for k in range(14) if s.plans_at(k)] == [0, 4, 8, 12]  # the last step of each chunk
    assert ChunkSchedule(29, 1).start(1) == 29 and ChunkSchedule(29, 1).start(2) == 57 and ChunkSchedule(5, 0).start(2) == 10
    for bad in ((0, 0), (5, 5), (5, -1)):
        with pytest.raises(AvsimValueError):
            ChunkSchedule(*bad)


def test_generation_options_check_the_chunk() -> None:
    assert GenerationOptions(config="debug").model_config().frames_per_chunk == 5
    assert GenerationOptions(chunk_frames=9).model_config().frames_per_chunk == 9
    for kwargs, field in (({"chunk_frames": 8}, "--chunk-frames"), ({"chunk_frames": 33}, "--chunk-frames"), ({"overlap": 2}, "--overlap"),
                          ({"config": "debug", "overlap": 5}, "--overlap"), ({"config": "nope"}, "--config")):  # fmt: skip
        with pytest.raises(AvsimInputError, match=field):
            GenerationOptions(**kwargs).model_config()  # type: ignore[arg-type]


def test_forecasts_follow_the_plan_from_the_actual_pose() -> None:
    t = np.arange(4) * 0.1
    straight = np.zeros(11)
    straight[[0, 1, 2, 3]] = (10.0, 5.0, np.pi / 2, 4.0)
    np.testing.assert_allclose(ctrv_poses(straight, t), np.c_[np.full(4, 10.0), 5.0 + 4.0 * t, np.full(4, np.pi / 2)], atol=1e-12)
    turning = straight.copy()
    turning[9] = 0.5  # yaw rate: an arc of radius 8 m
    arc = ctrv_poses(turning, np.array([np.pi, 2 * np.pi]))  # a quarter and half a turn about (2, 5) (heading +y: left is -x)
    np.testing.assert_allclose(arc, [[2.0, 13.0, np.pi], [-6.0, 5.0, 1.5 * np.pi]], atol=1e-9)
    plan = np.c_[np.arange(8.0), np.zeros(8), np.zeros(8)]  # 1 m a step along +x from (0, 0)
    got = plan_poses(plan, np.array([1.2, 0.5, np.pi / 2]), 4)  # the ego is 0.2 m further and turned left
    np.testing.assert_allclose(got, [[1.2, 0.5, np.pi / 2], [1.2, 1.5, np.pi / 2], [1.2, 2.5, np.pi / 2], [1.2, 3.5, np.pi / 2]], atol=1e-12)
    assert plan_poses(plan[:3], np.array([1.0, 0.0, 0.0]), 5)[-1, 0] == pytest.approx(5.0)  # continued past its end


def test_the_forecast_moves_boxes_at_constant_velocity_and_lights_on_their_schedule() -> None:
    scenario = make_sample_scenario(0, duration_s=3.0)
    sim = Simulator(scenario, SimConfig(steps=10))
    sim.reset()
    state = sim.frame_state()
    assert sim.episode is not None
    states = ChunkForecaster(sim.episode, 5).states(state, 5)
    assert [s.step for s in states] == [0, 1, 2, 3, 4] and states[0] is state
    b0, b4 = state.boxes, states[4].boxes
    np.testing.assert_allclose(b4.center_m[:, :2], b0.center_m[:, :2] + 0.4 * b0.velocity_mps, atol=1e-12)
    assert states[4].lights == sim.lights.at(4) and states[4].timestamp_ns == int(sim.step_times_ns[4])


def test_remaining_plan_and_wait_mode_plan_once_per_chunk() -> None:
    world = np.c_[np.arange(5.0), np.zeros(5), np.zeros(5)]
    np.testing.assert_allclose(remaining_plan(world, 1), world[2:])
    np.testing.assert_allclose(remaining_plan(world, 6), [[7.0, 0.0, 0.0]])  # past its end: continued
    scenario = make_sample_scenario(0, duration_s=3.0)
    calls: list[int] = []

    class Recording(ConstantVelocityPolicy):
        def __call__(self, observation):  # type: ignore[no-untyped-def]
            calls.append(observation.step)
            return super().__call__(observation)

    sim = Simulator(scenario, SimConfig(steps=12, controller=Controller.PERFECT))
    result = run_episode(sim, ChunkPlanPolicy(Recording(), ChunkSchedule(5, 1)))
    assert result.status == "completed" and calls == [0, 4, 8]
    assert sim.recorder is not None
    st = sim.recorder.ego_states()
    # perfect tracking of the held plan: the ego drove straight on at the speed it had when it planned
    plan = st[0, :2] + np.arange(5)[:, None] * 0.1 * st[0, 3] * np.array([np.cos(st[0, 2]), np.sin(st[0, 2])])
    np.testing.assert_allclose(st[:5, :2], plan, atol=1e-9)
    held = ChunkPlanPolicy(lambda obs: Control(0.5, 0.0), ChunkSchedule(5, 1))
    assert run_episode(Simulator(scenario, SimConfig(steps=6)), held).status == "completed"


def test_drift_figures() -> None:
    drifts = [ChunkDrift(10.0, 20.0, {}, {}), ChunkDrift(4.0, 20.0, {"a|b": float("nan")}, {"a|b": 0}), ChunkDrift(8.0, 10.0, {}, {})]
    assert rnds_values(drifts) == [1.0, 0.4, 1.6]
    d = drifts[1]
    d.observe(np.array([0.0, 0.0, 0.1]), np.array([3.0, 4.0, -0.1]))
    d.observe(np.array([0.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]))
    assert d.forecast_error_m == 5.0 and d.forecast_heading_error_rad == pytest.approx(0.2)
    assert d.as_dict()["cse_px"] == {"a|b": None} and d.as_dict()["cse_mean_px"] is None


def test_frame_state_carries_the_plan_it_was_steered_along() -> None:
    sim = Simulator(make_sample_scenario(0, duration_s=3.0), SimConfig(steps=4))
    sim.reset()
    assert sim.frame_state().plan_world is None
    sim.step(Trajectory(np.array([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]), 0.1))
    fs = sim.frame_state()
    assert isinstance(fs, FrameState) and fs.plan_world is not None and fs.plan_world.shape[1] == 3
    sim.step(Control(0.0, 0.0))
    assert sim.frame_state().plan_world is None
    assert isinstance(Boxes.empty(), Boxes)


# ---- episodes on the debug config -------------------------------------------------------------------
def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[np.ndarray], list[np.ndarray] | None, list[np.ndarray]]]:
    from avsim.sim.generated.generator import ChunkGenerator

    calls: list[tuple[list[np.ndarray], list[np.ndarray] | None, list[np.ndarray]]] = []
    original = ChunkGenerator.generate

    def generate(self, control, conditioning, seed):  # type: ignore[no-untyped-def]
        out = original(self, control, conditioning, seed)
        calls.append((control, conditioning, out))
        return out

    monkeypatch.setattr(ChunkGenerator, "generate", generate)
    return calls


@pytest.mark.e2e
@pytest.mark.slow
def test_each_chunk_is_generated_from_the_policy_driven_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from avsim.scenario.io import load_scenario
    from avsim.sim.render_source import RenderedControlSource

    calls = _spy(monkeypatch)
    scenario = make_sample_scenario(0, duration_s=3.0)
    opts = SimOptions(policy="sim_policies:hard_brake", observe=Observe.GENERATED, cameras=VIEWS, steps=9, step_scores=False,
                      generation=GenerationOptions(config="debug", random_weights=True))  # fmt: skip
    summary = run_sim(tmp_path, tmp_path / "out", opts, scenario=scenario)
    assert summary.status == "completed" and len(calls) == 3
    doc = json.loads((tmp_path / "out" / "sim_metrics.json").read_text())
    gen = doc["generation"]
    assert gen["config"] == "debug" and gen["views"] == list(VIEWS) and gen["output_is_noise"] and gen["chunk_frames"] == 5
    assert [(c["first_step"], c["last_step"], c["steps_shown"]) for c in gen["chunks"]] == [(0, 4, 5), (5, 8, 4), (9, 12, 1)]
    assert gen["chunks"][0]["rnds"] == 1.0 and all(c["q_generated"] > 0 and c["q_control"] > 0 for c in gen["chunks"])
    assert all(set(c["cse_px"]) == {"camera_front_wide_120fov|camera_cross_left_120fov"} for c in gen["chunks"])
    timing = json.loads((tmp_path / "out" / "timing.json").read_text())
    assert [c["index"] for c in timing["chunks"]] == [0, 1, 2] and all(c["generation_s"] > 0 for c in timing["chunks"])
    # chunk 1's first control frame is the braking ego's world at step 5, not the log's
    rollout = load_scenario(tmp_path / "out" / "scenario")
    sim = Simulator(scenario, SimConfig(steps=9))
    sim.reset()
    assert np.linalg.norm(rollout.ego.pose_at(rollout.ego.timestamps_ns[5:6]).translation[0, :2] - sim.log_states[5, :2]) > 0.05
    reference = RenderedControlSource(VIEWS, (112, 64))
    replay = Simulator(scenario, SimConfig(steps=9), reference)
    obs = replay.reset()
    for _ in range(5):
        obs = replay.step(Control(-6.0, 0.0))
    control, conditioning, _ = calls[1]
    for v, cam in enumerate(VIEWS):
        assert np.array_equal(control[v][1], obs.cameras[cam])  # after the overlap frame
        assert conditioning is not None and np.array_equal(conditioning[v], calls[0][2][v][-1:])  # the previous chunk's last frame
    videos = sorted(p.name for p in (tmp_path / "out" / "generated").iterdir())
    assert videos == [f"{c}.mp4" for c in sorted(VIEWS)]
    from avsim.core.video import read_video

    frames = read_video(tmp_path / "out" / "generated" / f"{VIEWS[0]}.mp4")
    assert frames.shape == (10, 64, 112, 3)


@pytest.mark.e2e
@pytest.mark.slow
def test_generated_episodes_are_deterministic_and_wait_mode_plans_per_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _spy(monkeypatch)
    scenario = make_sample_scenario(0, duration_s=3.0)
    docs = []
    for i, replan in enumerate((ReplanMode.WAIT, ReplanMode.WAIT)):
        opts = SimOptions(policy="constant-velocity", observe=Observe.GENERATED, cameras=VIEWS[:1], steps=5, step_scores=False, replan=replan,
                          generation=GenerationOptions(config="debug", random_weights=True))  # fmt: skip
        run_sim(tmp_path, tmp_path / f"out{i}", opts, scenario=scenario)
        docs.append((tmp_path / f"out{i}" / "sim_metrics.json").read_bytes())
    assert docs[0] == docs[1]
    doc = json.loads(docs[0])
    assert doc["settings"]["replan"] == "wait" and doc["settings"]["observe"] == "generated"
    assert len(calls) == 4  # two chunks an episode: the same frames (the mp4 bitstream is not compared: libx264 may vary)
    for (c0, _, g0), (c1, _, g1) in zip(calls[:2], calls[2:]):
        assert all(np.array_equal(x, y) for x, y in zip(g0 + c0, g1 + c1))


@pytest.mark.e2e
@pytest.mark.subprocess
@pytest.mark.slow
def test_the_command_runs_a_generated_closed_loop_episode(tmp_path: Path) -> None:
    """The issue's command, shortened: `avsim sim s out --policy idm --observe generated --config debug --random-weights`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}

    def avsim(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "avsim.cli.main", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)

    assert avsim("sample", "s", "--duration-s", "2").returncode == 0
    res = avsim("sim", "s", "out", "--policy", "idm", "--observe", "generated", "--config", "debug", "--random-weights", "--steps", "6",
                "--cameras", ",".join(VIEWS))  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "RANDOM WEIGHTS" in res.stderr and "Traceback" not in res.stderr
    doc = json.loads((tmp_path / "out" / "sim_metrics.json").read_text())
    assert [c["first_step"] for c in doc["generation"]["chunks"]] == [0, 5] and doc["settings"]["status"] == "completed"
    bad = avsim("sim", "s", "out2", "--observe", "generated", "--config", "debug", "--random-weights", "--rate", "20", "--steps", "2")
    assert bad.returncode == 1 and bad.stderr.strip().splitlines()[-1].startswith("error: --rate: rate: with --observe generated")
    assert not (tmp_path / "out2").exists()
