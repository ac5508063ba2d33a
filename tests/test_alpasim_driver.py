"""`avsim sim --policy alpasim://HOST:PORT`: a reference AlpaSim driver (tests/alpasim_reference.py,
written against the same .proto) drives episodes over 127.0.0.1; drivers that hang, disconnect or
answer malformed trajectories end the episode with one line and keep the rollout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from alpasim_reference import ReferenceDriver, serve_driver

from avsim.core.errors import AvsimInputError
from avsim.scenario.sample import make_sample_scenario
from avsim.sim.actions import Trajectory
from avsim.sim.alpasim.address import parse_address
from avsim.sim.alpasim.driver import AlpasimDriverPolicy, DriverError, ego_trajectory
from avsim.sim.alpasim.frames import LocalFrame
from avsim.sim.episode import run_episode
from avsim.sim.run import SimOptions, run_sim
from avsim.sim.stepper import SimConfig, Simulator

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
FRONT = "camera_front_wide_120fov"


@pytest.fixture(scope="module")
def scenario():  # type: ignore[no-untyped-def]
    return make_sample_scenario(0, duration_s=3.0)


def _episode(scenario, driver: ReferenceDriver, tmp: Path, steps: int = 12, budget_s: float = 3.0, cameras: tuple[str, ...] | None = (FRONT,)):  # type: ignore[no-untyped-def]
    server, port = serve_driver(driver)
    try:
        opts = SimOptions(policy=f"alpasim://127.0.0.1:{port}", cameras=cameras, size=(320, 180), steps=steps, budget_s=budget_s,
                          step_scores=False)  # fmt: skip
        summary = run_sim(tmp, tmp / "out", opts, scenario=scenario)
    finally:
        driver.release.set()
        server.stop(grace=None)
    return summary, json.loads((tmp / "out" / "sim_metrics.json").read_text())


# ---- fast: the address and the answer's conversion ------------------------------------------------
@pytest.mark.parametrize("spec", ["alpasim://", "alpasim://host", "alpasim://host:0", "alpasim://host:99999", "alpasim://h:1/x",
                                  "alpasim://h:1?image=gif", "grpc://h:1"])  # fmt: skip
def test_bad_driver_addresses_are_refused(spec: str) -> None:
    with pytest.raises(AvsimInputError, match="--policy"):
        parse_address(spec)


def test_a_local_frame_trajectory_becomes_the_ego_frame_trajectory_at_the_sim_step() -> None:
    state = np.zeros(11)
    state[:3] = (100.0, 50.0, np.pi / 2)  # facing +y
    t = np.array([0.0, 0.25, 0.5, 1.0])
    world = np.stack([np.full(4, 100.0) - 0.0 * t, 50.0 + 4.0 * t, np.full(4, np.pi / 2)], axis=1)  # 4 m/s ahead
    traj = ego_trajectory(t, world, state, 0.1)
    assert isinstance(traj, Trajectory) and traj.interval_s == 0.1 and traj.poses.shape == (10, 3)
    np.testing.assert_allclose(traj.poses[:, 0], 0.4 * np.arange(1, 11), atol=1e-12)
    np.testing.assert_allclose(traj.poses[:, 1:], 0.0, atol=1e-12)
    short = ego_trajectory(np.array([0.05]), world[1:2], state, 0.1)  # one pose under a step
    assert short.poses.shape == (1, 3) and short.interval_s == pytest.approx(0.05)


# ---- over loopback -------------------------------------------------------------------------------
@pytest.mark.distributed
def test_reference_driver_drives_an_episode_through_the_egodriver_contract(scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    driver = ReferenceDriver()
    summary, doc = _episode(scenario, driver, tmp_path)
    log = driver.log
    assert summary.status == "completed" and summary.steps == 12 and log.problems == []
    assert len(log.sessions) == 1 and log.closed == [log.sessions[0].session_uuid]
    session = log.sessions[0]
    assert session.debug_info.scene_id == scenario.scenario_id and session.random_seed == 0
    (cam,) = session.rollout_spec.vehicle.available_cameras
    assert cam.logical_id == FRONT and (cam.intrinsics.resolution_w, cam.intrinsics.resolution_h) == (320, 180)
    assert cam.intrinsics.WhichOneof("camera_param") == "ftheta_param"
    np.testing.assert_allclose([cam.rig_to_camera.vec.x, cam.rig_to_camera.vec.y, cam.rig_to_camera.vec.z],
                               scenario.rig.extrinsic(FRONT).translation, atol=1e-6)  # fmt: skip
    steps_us = [int(t) // 1000 for t in Simulator(scenario, SimConfig(steps=12)).step_times_ns[:12]]
    assert [d.time_now_us for d in log.drives] == steps_us and [d.time_query_us - d.time_now_us for d in log.drives] == [100_000] * 12
    assert [(c, s, e, sh) for c, s, e, sh in log.images] == [(FRONT, t, t, (180, 320, 3)) for t in steps_us]
    # the egomotion is the rollout's ego, local -> rig with world = local + origin
    from avsim.scenario.io import load_scenario

    rollout = load_scenario(tmp_path / "out" / "scenario")
    origin = LocalFrame.of(scenario).origin_m
    sent = np.array([[p.pose.vec.x, p.pose.vec.y, p.pose.vec.z] for p in log.poses]) + origin
    np.testing.assert_allclose(sent, rollout.ego.pose_at(rollout.ego.timestamps_ns[:12]).translation, atol=2e-4)
    # the route is in the rig frame: it starts under the ego and runs ahead
    first = np.array([[w.x, w.y] for w in log.routes[0].waypoints])
    assert np.hypot(*first[0]) < 2.0 and first[-1, 0] > 90.0
    # following its plan at 6 m/s, the ego sped up from the log's speed, stayed on the road and hit nothing
    assert doc["episode"]["drivable_area_compliance"] == 1.0 and doc["episode"]["no_at_fault_collisions"] == 1.0
    speeds = rollout.ego.pose_at(rollout.ego.timestamps_ns).translation
    assert np.hypot(*(speeds[-1, :2] - speeds[0, :2])) > 5.0


@pytest.mark.distributed
@pytest.mark.parametrize(
    ("behaviour", "at", "expected"),
    [
        ("hang", 3, "drive: DEADLINE_EXCEEDED"),
        ("malformed", 2, "drive returned a malformed trajectory: timestamps do not increase (pose 3)"),
        ("nan", 2, "drive returned a malformed trajectory: pose 2: expected a finite translation"),
        ("terminate", 4, "ended the session (terminate_session)"),
    ],
)
def test_a_failing_driver_ends_the_episode_with_one_line_and_keeps_the_rollout(scenario, tmp_path: Path, behaviour: str, at: int,  # type: ignore[no-untyped-def]
                                                                               expected: str) -> None:  # fmt: skip
    driver = ReferenceDriver(behaviour, at)
    summary, doc = _episode(scenario, driver, tmp_path, budget_s=1.0 if behaviour == "hang" else 3.0)
    assert summary.status == "policy_error" and summary.steps == at
    assert expected in summary.end_reason and f"at step {at}" in summary.end_reason and "\n" not in summary.end_reason
    assert doc["settings"]["steps_run"] == at and doc["settings"]["status"] == "policy_error"
    assert (tmp_path / "out" / "scenario" / "ego.parquet").is_file()


@pytest.mark.distributed
def test_a_driver_that_disconnects_ends_the_episode(scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    driver = ReferenceDriver()
    server, port = serve_driver(driver)

    def leave_after_step_2(k: int, n: int) -> None:  # the driver's process goes away between steps 2 and 3
        if k == 3:
            server.stop(grace=None).wait()

    opts = SimOptions(policy=f"alpasim://127.0.0.1:{port}", steps=10, budget_s=3.0, step_scores=False)
    summary = run_sim(tmp_path, tmp_path / "out", opts, scenario=scenario, on_step=leave_after_step_2)
    assert summary.status == "policy_error" and summary.steps == 3 and len(driver.log.drives) == 3
    assert "UNAVAILABLE" in summary.end_reason and "at step 3" in summary.end_reason


@pytest.mark.distributed
def test_an_empty_answer_keeps_the_motion_until_the_driver_is_ready(scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    driver = ReferenceDriver("empty", at=4)
    summary, _ = _episode(scenario, driver, tmp_path, steps=8, cameras=None)
    assert summary.status == "completed" and driver.log.problems == [] and driver.log.images == []


@pytest.mark.distributed
def test_no_driver_at_the_address_fails_the_reset(scenario) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    policy = AlpasimDriverPolicy(f"alpasim://127.0.0.1:{port}", connect_timeout_s=0.5)
    result = run_episode(Simulator(scenario, SimConfig(steps=3)), policy)
    assert result.status == "policy_error" and result.steps == 0
    assert result.end_reason.startswith("policy reset raised DriverError: driver 127.0.0.1:") and "start_session" in result.end_reason
    sim = Simulator(scenario, SimConfig(steps=3))
    sim.reset()
    with pytest.raises(DriverError, match="start_session: (UNAVAILABLE|DEADLINE_EXCEEDED)"):
        policy.reset(sim.episode)  # type: ignore[arg-type]


@pytest.mark.distributed
@pytest.mark.subprocess
def test_the_command_drives_with_an_alpasim_driver(scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from avsim.scenario.io import save_scenario

    save_scenario(scenario, tmp_path / "s")
    driver = ReferenceDriver()
    server, port = serve_driver(driver)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(TESTS), os.environ.get("PYTHONPATH", "")])}
    try:
        result = subprocess.run([sys.executable, "-m", "avsim.cli.main", "sim", "s", "out", "--policy", f"alpasim://127.0.0.1:{port}",
                                 "--steps", "6", "--cameras", FRONT, "--size", "320x180", "--budget", "5"],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    finally:
        server.stop(grace=None)
    assert result.returncode == 0, result.stderr
    assert "6 steps (completed)" in result.stdout and driver.log.problems == [] and len(driver.log.drives) == 6
    doc = json.loads((tmp_path / "out" / "sim_metrics.json").read_text())
    assert doc["settings"]["policy"] == f"alpasim://127.0.0.1:{port}" and doc["settings"]["policy_name"] == f"alpasim://127.0.0.1:{port}"
