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
    # the route as AlpaSim's runtime sends it: 20 waypoints 80/19 m apart in the rig frame (z 0), from under the ego
    first = np.array([[w.x, w.y, w.z] for w in log.routes[0].waypoints])
    assert first.shape == (20, 3) and np.isfinite(first).all() and np.hypot(*first[0, :2]) < 2.0 and (first[:, 2] == 0).all()
    np.testing.assert_allclose(np.linalg.norm(np.diff(first, axis=0), axis=1), 80 / 19, rtol=0.02)
    assert log.egomotion_sizes == [1] * 12  # asked every step: the one pose since the last update
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


# ---- AlpaSim's runtime semantics (NVlabs/alpasim src/runtime/alpasim_runtime) -----------------------
def test_the_route_is_twenty_waypoints_four_metres_apart_and_nan_past_its_end() -> None:
    from avsim.sim.alpasim.driver_messages import ROUTE_SPACING_M, route_waypoints
    from avsim.sim.route import Path as RoutePath

    path = RoutePath.of(np.stack([np.linspace(0.0, 50.0, 51), np.full(51, 3.0)], axis=1))  # 50 m due east at y = 3
    state = np.zeros(11)
    state[:3] = (10.0, 4.0, np.pi / 2)  # 1 m left of the route, facing north: the route runs to the rig's right (-y)
    wp = route_waypoints(path, state)
    assert wp.shape == (20, 3) and pytest.approx(80 / 19) == ROUTE_SPACING_M
    finite = np.isfinite(wp).all(axis=1)
    assert finite.tolist() == [True] * 10 + [False] * 10  # 40 m left from the projection: 0, 4.2, ..., 37.9 m; then NaN, never the last point again
    np.testing.assert_allclose(wp[:10], np.stack([np.full(10, -1.0), -np.arange(10) * 80 / 19, np.zeros(10)], axis=1), atol=1e-9)


def test_a_plan_reaching_far_ahead_is_followed_only_up_to_the_horizon() -> None:
    from avsim.sim.alpasim.driver import MAX_PLAN_AHEAD_S
    from avsim.sim.alpasim.protos import common_pb2

    frame = LocalFrame(np.zeros(3))
    poses = [common_pb2.PoseAtTime(pose=common_pb2.Pose(vec=common_pb2.Vec3(x=x), quat=common_pb2.Quat(w=1.0)), timestamp_us=t)
             for x, t in ((0.0, 1_000_000), (5.0, 2_000_000), (1e6, 10**14), (2e6, 2**64 - 1))]  # fmt: skip  # 10^14 us: 3 years ahead
    from avsim.sim.alpasim.driver import driver_poses

    times_s, world = driver_poses(poses, frame, 1_000_000_000)
    assert times_s[0] == 0.0 and times_s[1] == 1.0 and times_s[-1] > 1e13
    traj = ego_trajectory(times_s, world, np.zeros(11), 0.1)
    assert traj.poses.shape == (int(round(MAX_PLAN_AHEAD_S / 0.1)), 3) and np.isfinite(traj.poses).all()  # 300 poses, not 10^15


@pytest.mark.parametrize("spec", ["alpasim://h:1?interval=0", "alpasim://h:1?interval=-1", "alpasim://h:1?interval=nan", "alpasim://h:1?warmup=1e9",
                                  "alpasim://h:1?speed=2"])  # fmt: skip
def test_bad_driver_settings_are_refused(spec: str) -> None:
    with pytest.raises(AvsimInputError, match="--policy"):
        parse_address(spec)


@pytest.mark.distributed
def test_a_driver_asked_every_three_steps_gets_the_egomotion_since_its_last_update(scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    driver = ReferenceDriver()
    server, port = serve_driver(driver)
    try:
        opts = SimOptions(policy=f"alpasim://127.0.0.1:{port}?interval=0.3", cameras=(FRONT,), size=(160, 90), steps=10, budget_s=3.0, step_scores=False)
        summary = run_sim(tmp_path, tmp_path / "out", opts, scenario=scenario)
    finally:
        server.stop(grace=None)
    log = driver.log
    steps_us = [int(t) // 1000 for t in Simulator(scenario, SimConfig(steps=10)).step_times_ns[:10]]
    assert summary.status == "completed" and log.problems == []
    assert [d.time_now_us for d in log.drives] == steps_us[::3] and {d.time_query_us - d.time_now_us for d in log.drives} == {300_000}
    assert log.egomotion_sizes == [1, 3, 3, 3]  # the first update: the episode's start; then the three steps since the last one
    assert [p.timestamp_us for p in log.poses] == steps_us  # every step's pose, once, in order
    assert len(log.images) == 10  # frames go to the driver every step, as the runtime submits each rendered frame


@pytest.mark.distributed
def test_a_warm_up_replays_the_log_while_the_driver_gets_every_call(scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from avsim.scenario.io import load_scenario

    ends = {}
    for warmup in ("0", "0.5"):
        driver = ReferenceDriver()
        server, port = serve_driver(driver)
        try:
            opts = SimOptions(policy=f"alpasim://127.0.0.1:{port}?warmup={warmup}", steps=10, budget_s=3.0, step_scores=False)
            assert run_sim(tmp_path, tmp_path / warmup, opts, scenario=scenario).status == "completed"
        finally:
            server.stop(grace=None)
        assert len(driver.log.drives) == 10 and driver.log.problems == []  # asked at every step, warm-up or not
        rollout = load_scenario(tmp_path / warmup / "scenario")
        ends[warmup] = rollout.ego.pose_at(rollout.ego.timestamps_ns[:6]).translation[:, :2]
    log_xy = scenario.ego.pose_at(Simulator(scenario, SimConfig(steps=10)).step_times_ns[:6]).translation[:, :2]
    assert np.abs(ends["0.5"] - log_xy).max() < 0.02  # the first 0.5 s (5 steps) replay the log (0.008 m: the tracker)
    assert np.abs(ends["0"][5] - log_xy[5]).max() > 0.1  # without it the driver's 6 m/s plan has moved the ego off the log (0.13 m)
