"""Episodes: the policy protocol, failing policies, determinism, log replay, the gymnasium env,
frames rendered from the simulated state."""

from __future__ import annotations

import numpy as np
import pytest
from sim_cases import scenario
from sim_policies import CrashAtStep3, NaNAtStep2, SlowAtStep4, SpinAtStep1, WrongShape, brake

from avsim.sim.episode import run_episode
from avsim.sim.metrics import EpisodeScorer
from avsim.sim.policies import ConstantVelocityPolicy, ExpertPolicy, load_policy
from avsim.sim.stepper import AgentMode, Controller, SimConfig, Simulator
from avsim.sim.vehicle import StateIndex


def _road_sim(steps: int = 20, **kwargs: object) -> Simulator:
    n = 81
    x = np.linspace(-50.0, -50.0 + 8.0 * 8.0, n)  # 8 m/s for 8 s
    return Simulator(scenario(np.c_[x, np.zeros(n)], np.zeros(n)), SimConfig(steps=steps, **kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("policy", "step", "reason", "hang_s"),
    [
        (CrashAtStep3(), 3, "policy raised ZeroDivisionError at step 3: division by zero in the planner", 600.0),
        (NaNAtStep2(), 2, "policy output at step 2: action: contains NaN or infinite values", 600.0),
        (WrongShape(), 0, "expected a Trajectory, a Control, an array (N, 3) of poses or (2,) controls, got shape (4, 2)", 600.0),
        (SlowAtStep4(), 4, "policy did not return within 2 s at step 4 (its hang limit; its time budget is 0.2 s of CPU)", 2.0),
        # 0.25 CPU seconds may take many wall seconds on a loaded machine: a hang limit far above that
        (SpinAtStep1(), 1, "s (CPU) at step 1, over its time budget of 0.2 s", 600.0),
    ],
)
def test_a_failing_policy_ends_the_episode_with_its_reason_and_keeps_the_rollout(policy: object, step: int, reason: str, hang_s: float) -> None:
    sim = _road_sim()
    result = run_episode(sim, policy, budget_s=0.2, hang_s=hang_s)  # type: ignore[arg-type]
    assert result.status == "policy_error" and result.steps == step
    assert reason in result.end_reason and "\n" not in result.end_reason
    assert sim.recorder is not None and sim.recorder.n_recorded == step + 1  # the states it drove are kept
    assert np.isfinite(sim.recorder.ego_states()).all()


def test_waiting_is_not_computing_a_busy_machine_does_not_end_the_episode() -> None:
    """The budget counts CPU time: a call that waits 3x its budget (a starved process looks the same
    in wall time) completes; only past the hang limit does waiting end the episode."""
    import time

    from avsim.sim.episode import MIN_HANG_S, hang_limit_s

    def waits(observation: object) -> np.ndarray:
        time.sleep(0.3)
        return np.array([0.0, 0.0])

    assert run_episode(_road_sim(steps=3), waits, budget_s=0.1).status == "completed"
    assert hang_limit_s(0.1) == MIN_HANG_S and hang_limit_s(10.0) == 100.0


def test_a_plain_function_is_a_policy() -> None:
    sim = _road_sim()
    assert run_episode(sim, brake).status == "completed"
    assert sim.recorder is not None and sim.recorder.ego_states()[-1, StateIndex.VELOCITY_X] < 8.0


def test_same_seed_same_rollout() -> None:
    def rollout(seed: int) -> np.ndarray:
        sim = _road_sim(steps=30, agents=AgentMode.IDM)
        run_episode(sim, ConstantVelocityPolicy(), seed=seed)
        assert sim.recorder is not None
        return sim.recorder.ego_states()

    np.testing.assert_array_equal(rollout(7), rollout(7))


def test_log_replay_gives_the_log_and_its_scores() -> None:
    """The expert with perfect tracking drives the logged states; its scores are the human's."""
    n = 81
    t = np.arange(n) * 0.1
    x = -50.0 + 8.0 * t - 0.3 * t**2  # slowing down
    sim = Simulator(scenario(np.c_[x, np.zeros(n)], np.zeros(n)), SimConfig(controller=Controller.PERFECT))
    assert run_episode(sim, ExpertPolicy()).status == "completed"
    assert sim.recorder is not None
    states = sim.recorder.ego_states()
    np.testing.assert_allclose(states[:-2], sim.log_states[: len(states) - 2], atol=1e-9)  # past the log's end: extrapolated
    scorer = EpisodeScorer(sim, sim.recorder.plans)
    mine, human = scorer.scene.metrics(0, 60), scorer.human.metrics(0, 60)
    for name in ("no_at_fault_collisions", "drivable_area_compliance", "driving_direction_compliance", "traffic_light_compliance",
                 "progress_m", "time_to_collision_within_bound", "lane_keeping", "history_comfort", "comfort"):  # fmt: skip
        np.testing.assert_allclose(getattr(mine, name), getattr(human, name), atol=1e-6, err_msg=name)


def test_builtin_policies_load_and_unknown_ones_are_refused() -> None:
    from avsim.core.errors import AvsimInputError

    assert isinstance(load_policy("expert"), ExpertPolicy)
    assert load_policy("sim_policies:brake") is brake
    assert isinstance(load_policy("sim_policies:CrashAtStep3"), CrashAtStep3)
    for bad in ("fastest", "sim_policies:nothing", "no_such_module_45:x"):
        with pytest.raises(AvsimInputError):
            load_policy(bad)


def test_gym_env_passes_check_env() -> None:
    pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    from avsim.sim.gym_env import AvsimDrivingEnv

    n = 81
    sc = scenario(np.c_[np.linspace(-50.0, 14.0, n), np.zeros(n)], np.zeros(n))
    for action in ("control", "trajectory"):
        env = AvsimDrivingEnv(sc, agents="idm", action=action, steps=15, render_mode="rgb_array")
        check_env(env, skip_render_check=False)
        obs, _ = env.reset(seed=1)
        assert env.observation_space.contains(obs)


@pytest.mark.slow
def test_frames_are_rendered_from_the_simulated_state() -> None:
    """Log replay's frames are the renderer's frames of the log (same pose, boxes and lights)."""
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.scenario.sample.scene import make_sample_scenario
    from avsim.sim.render_source import RenderedControlSource

    sc = make_sample_scenario(0, duration_s=2.0)
    cams = ("camera_front_wide_120fov", "camera_rear_tele_30fov")
    sim = Simulator(sc, SimConfig(controller=Controller.PERFECT), RenderedControlSource(cams, (192, 108)))
    obs = sim.reset()
    want = SceneRenderer(sc, cameras=cams, size=(192, 108), fps=10).render_frame(0)
    for cam in cams:
        np.testing.assert_array_equal(obs.cameras[cam], want[cam])
    sim.source.close()


def test_privileged_scene_is_the_labels_record() -> None:
    """`observation.scene().boxes` holds what `avsim labels` writes to boxes3d.json for the same time."""
    from avsim.core.agents import AgentTracks
    from avsim.core.transforms import yaw_to_quat
    from avsim.render.labels.boxes import frame_boxes_3d

    n = 41
    t = np.arange(n) * 0.1
    agents = AgentTracks.from_unsorted(
        np.repeat(["car_b", "car_a"], n), np.repeat(["car", "truck"], n), np.tile(np.round(t * 1e9).astype(np.int64), 2),
        np.r_[np.c_[-20 + 6 * t, np.full(n, 3.5), np.full(n, 0.8)], np.c_[30 - 5 * t, np.full(n, -3.5), np.full(n, 1.2)]],
        np.r_[np.tile([4.5, 2.0, 1.6], (n, 1)), np.tile([9.0, 2.5, 2.4], (n, 1))], yaw_to_quat(np.r_[np.zeros(n), np.full(n, np.pi)]),
    )  # fmt: skip
    sc = scenario(np.c_[np.linspace(-40.0, -8.0, n), np.zeros(n)], np.zeros(n), agents=agents)
    sim = Simulator(sc, SimConfig(controller=Controller.PERFECT, steps=12))
    obs = sim.reset()
    policy = ExpertPolicy()
    policy.reset(sim.episode)  # type: ignore[arg-type]
    for _ in range(7):
        obs = sim.step(policy(obs))
    mine, labels = obs.scene().boxes, frame_boxes_3d(sc, np.array([obs.timestamp_ns]))[0]
    np.testing.assert_array_equal(mine.track_id, labels.track_id)
    np.testing.assert_array_equal(mine.object_class, labels.object_class)
    for name in ("center_ego_m", "size_lwh_m", "rotation_ego_wxyz", "yaw_ego_rad"):
        np.testing.assert_allclose(getattr(mine, name), getattr(labels, name), atol=1e-9, err_msg=name)


def test_the_episode_headline_is_the_mean_over_the_4_s_windows_and_each_window_has_its_own_ec() -> None:
    """NAVSIM v2 scores a frame's EC against the frame 0.5 s before; the episode is the mean over the
    windows, the whole rollout a diagnostic beside it."""
    sim = _road_sim(steps=60)
    assert run_episode(sim, ConstantVelocityPolicy()).status == "completed"
    assert sim.recorder is not None and [p.step for p in sim.recorder.plans] == list(range(60))
    scorer = EpisodeScorer(sim, sim.recorder.plans)
    assert sorted(scorer.ec) == list(range(5, 60))
    windows = scorer.per_step()
    scored = [w for w in windows if w]
    assert len(scored) == 21  # windows from steps 0..20 fit in 60 steps
    assert windows[0]["two_frame_extended_comfort"] is None and windows[5]["two_frame_extended_comfort"] == scorer.ec[5]
    episode = scorer.episode(windows, scorer.rollout())
    assert episode["aggregation"] == "window_mean" and episode["windows_scored"] == 21
    assert episode["pdms"] == pytest.approx(np.mean([w["pdms"] for w in scored]))
    assert episode["epdms"] == pytest.approx(np.mean([w["epdms"] for w in scored]))
    short = _road_sim(steps=10)
    run_episode(short, ConstantVelocityPolicy())
    assert short.recorder is not None
    s = EpisodeScorer(short, short.recorder.plans)
    assert s.episode(s.per_step(), s.rollout())["aggregation"] == "rollout"
