"""The ego's models: NAVSIM's kinematic bicycle and LQR tracker restated, limits, perfect tracking."""

from __future__ import annotations

import numpy as np
import pytest
from sim_cases import DT_S, VEHICLE

from avsim.sim.actions import Control, PolicyError, Trajectory, parse_action, reference_poses
from avsim.sim.stepper import pad_reference, perfect_tracking
from avsim.sim.tracker import LQRConfig, LQRTracker, velocity_curvature_profiles
from avsim.sim.vehicle import KinematicBicycle, StateIndex, VehicleLimits, initial_state

S = StateIndex


def test_bicycle_step_is_navsims() -> None:
    """One step of NAVSIM's `propagate_state`, written out by hand (no limits but the steering angle)."""
    model = KinematicBicycle(VEHICLE, VehicleLimits.navsim())
    st = initial_state(1.0, 2.0, 0.3, 8.0, 0.5, 0.1, VEHICLE.wheel_base_m)
    st[S.STEERING_RATE] = 0.0
    out = model.propagate(st[None], np.array([[2.0, 0.4]]), DT_S)[0]
    a = DT_S / (DT_S + 0.2) * (2.0 - 0.5) + 0.5  # lagged acceleration
    delta = st[S.STEERING_ANGLE]
    ideal = DT_S * 0.4 + delta
    delta_new = DT_S / (DT_S + 0.05) * (ideal - delta) + delta
    assert out[S.X] == pytest.approx(1.0 + 8.0 * np.cos(0.3) * DT_S)
    assert out[S.Y] == pytest.approx(2.0 + 8.0 * np.sin(0.3) * DT_S)
    assert out[S.HEADING] == pytest.approx(0.3 + 8.0 * np.tan(delta) / VEHICLE.wheel_base_m * DT_S)  # the angle before the step
    assert out[S.VELOCITY_X] == pytest.approx(8.0 + a * DT_S)
    assert out[S.ACCELERATION_X] == pytest.approx(a)
    assert out[S.STEERING_ANGLE] == pytest.approx(delta_new)
    assert out[S.STEERING_RATE] == pytest.approx((delta_new - delta) / DT_S)
    assert out[S.ANGULAR_VELOCITY] == pytest.approx(out[S.VELOCITY_X] * np.tan(delta_new) / VEHICLE.wheel_base_m)


def test_limits_bound_acceleration_jerk_steering_and_speed() -> None:
    lim = VehicleLimits(max_accel_mps2=2.0, max_decel_mps2=3.0, max_jerk_mps3=10.0, max_steering_rate_radps=0.5)
    model = KinematicBicycle(VEHICLE, lim)
    st = initial_state(0.0, 0.0, 0.0, 0.05, 0.0)
    cmd = model.limit_commands(st[None], np.array([[50.0, 9.0]]), DT_S)[0]
    assert cmd[0] == pytest.approx(1.0)  # jerk: at most 10 m/s^3 * 0.1 s from 0
    assert cmd[1] == pytest.approx(0.5)
    braking = st.copy()
    braking[S.ACCELERATION_X] = -3.0
    stop = model.propagate(braking[None], np.array([[-50.0, 0.0]]), DT_S)[0]
    assert stop[S.VELOCITY_X] == 0.0  # no reversing: 0.05 - 0.3 m/s is held at 0
    assert stop[S.ACCELERATION_X] == pytest.approx(-0.05 / DT_S)  # the deceleration that stops it exactly


def _chained_lateral(tracker: LQRTracker, x0: np.ndarray, v: np.ndarray, kappa: np.ndarray) -> np.ndarray:
    """NAVSIM's `_lateral_lqr_controller`: the horizon's matrices multiplied one step at a time."""
    b, dt, base = len(x0), tracker.dt_s, tracker.wheel_base_m
    A, B, g = np.tile(np.eye(3), (b, 1, 1)), np.zeros((b, 3, 1)), np.zeros((b, 3))
    for k in range(v.shape[1]):
        step = np.tile(np.eye(3), (b, 1, 1))
        step[:, 0, 1], step[:, 1, 2] = v[:, k] * dt, v[:, k] * dt / base
        affine = np.zeros((b, 3))
        affine[:, 1] = -v[:, k] * kappa[:, k] * dt
        A, B, g = step @ A, step @ B, np.einsum("bij,bj->bi", step, g) + affine
        B[:, 2, 0] += dt
    err = np.einsum("bij,bj->bi", A, x0) + g
    err[:, 1:] = np.arctan2(np.sin(err[:, 1:]), np.cos(err[:, 1:]))
    BtQ = B.transpose(0, 2, 1) @ np.diag([1.0, 10.0, 0.0])
    return -1.0 / ((BtQ @ B)[:, 0, 0] + 1.0) * np.einsum("bj,bj->b", BtQ[:, 0], err)


def test_lateral_lqr_closed_form_equals_navsims_chained_products() -> None:
    rng = np.random.default_rng(0)
    tracker = LQRTracker(VEHICLE.wheel_base_m, DT_S)
    x0, v, kappa = rng.normal(size=(6, 3)), rng.uniform(0, 15, (6, 10)), rng.normal(0, 0.05, (6, 10))
    np.testing.assert_allclose(tracker._lateral(x0, v, kappa), _chained_lateral(tracker, x0, v, kappa), rtol=1e-12, atol=1e-12)


def test_profiles_of_a_constant_speed_arc() -> None:
    """Poses on a circle of radius 20 m at 8 m/s: the fitted velocity is 8 and the curvature 1/20."""
    t = np.arange(41) * DT_S
    ang = 8.0 * t / 20.0
    poses = np.stack([20 * np.sin(ang), 20 * (1 - np.cos(ang)), ang], axis=1)[None]
    v, k = velocity_curvature_profiles(poses, DT_S, LQRConfig())
    np.testing.assert_allclose(v[0], 8.0, atol=0.02)
    np.testing.assert_allclose(k[0, 2:-2], 1 / 20.0, atol=2e-3)


def test_tracker_holds_a_constant_speed_straight_reference() -> None:
    tracker = LQRTracker(VEHICLE.wheel_base_m, DT_S)
    st = initial_state(0.0, 0.0, 0.0, 10.0)
    ref = np.stack([np.arange(41) * 1.0, np.zeros(41), np.zeros(41)], axis=1)[None]
    np.testing.assert_allclose(tracker.commands(st[None], ref)[0], [0.0, 0.0], atol=1e-6)
    slow = initial_state(0.0, 0.0, 0.0, 8.0)
    assert tracker.commands(slow[None], ref)[0, 0] > 0.5  # behind the reference speed: accelerate


def test_perfect_tracking_reproduces_central_differences() -> None:
    """The logged states are central differences of the poses: perfect tracking gives them back."""
    t = np.arange(8) * DT_S
    x = 3.0 * t + 0.5 * t**2
    poses = np.stack([x, np.zeros(8), np.zeros(8)], axis=1)
    st = initial_state(x[0], 0.0, 0.0, (x[1] - 0.0) / DT_S, 0.0)
    st[S.VELOCITY_X] = 3.0 + 0.0  # v(0)
    new = perfect_tracking(st, poses, DT_S, VEHICLE.wheel_base_m)
    assert new[S.X] == x[1]
    assert new[S.VELOCITY_X] == pytest.approx((x[2] - x[0]) / (2 * DT_S))
    assert new[S.ACCELERATION_X] == pytest.approx(((x[3] - x[1]) / (2 * DT_S) - 3.0) / (2 * DT_S))


def test_reference_interpolates_a_navsim_trajectory() -> None:
    """8 ego-frame poses at 0.5 s become a world reference at the 0.1 s step, starting at the ego."""
    poses = np.stack([np.arange(1, 9) * 5.0, np.zeros(8), np.zeros(8)], axis=1)
    ref = reference_poses(Trajectory(poses, 0.5), (10.0, 20.0, np.pi / 2), DT_S)
    assert ref.shape == (41, 3)
    np.testing.assert_allclose(ref[0], [10.0, 20.0, np.pi / 2])
    np.testing.assert_allclose(ref[5], [10.0, 25.0, np.pi / 2], atol=1e-9)
    assert pad_reference(ref[:2], 12).shape == (12, 3)


def test_a_plan_that_starts_off_the_ego_brings_the_tracker_back_to_its_path() -> None:
    """PDM-Closed's trajectories start at the path's point at the ego's progress: the tracker sees the
    offset and closes it; a plan that starts at the ego (NAVSIM's agents) keeps the offset."""
    from avsim.sim.vehicle import KinematicBicycle, VehicleLimits

    tracker, model = LQRTracker(VEHICLE.wheel_base_m, DT_S), KinematicBicycle(VEHICLE, VehicleLimits())
    path = np.stack([np.arange(1, 41) * 1.0, np.full(40, -1.0), np.zeros(40)], axis=1)  # 1 m to the ego's right, 10 m/s

    def drive(start: np.ndarray | None) -> float:
        st = initial_state(0.0, 0.0, 0.0, 10.0)
        for _ in range(50):  # re-planned every step, in the current ego frame (5 s)
            from avsim.sim.vehicle import to_ego_frame

            world = path + [st[S.X], 0.0, 0.0]
            traj = Trajectory(to_ego_frame(world, st), DT_S, None if start is None else to_ego_frame(np.r_[[[st[S.X], -1.0, 0.0]]], st)[0])
            ref = reference_poses(traj, (st[S.X], st[S.Y], st[S.HEADING]), DT_S)
            st = model.propagate(st[None], tracker.commands(st[None], ref[None]), DT_S)[0]
        return float(st[S.Y])

    assert abs(drive(np.zeros(3)) + 1.0) < 0.2
    assert abs(drive(None) + 1.0) > 0.5


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (np.zeros(3), "expected a Trajectory"),
        (np.array([np.nan, 0.0]), "NaN"),
        (np.zeros((4, 2)), "expected a Trajectory"),
        ("fast", "expected numbers"),
        (Trajectory(np.zeros((3, 3)), -1.0), "interval_s"),
        (Trajectory(np.zeros((3, 3)), 0.1, np.zeros(2)), "trajectory.start: expected shape"),
    ],
)
def test_bad_actions_are_refused_with_a_reason(value: object, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_action(value, DT_S)


def test_actions_parse() -> None:
    assert isinstance(parse_action(np.array([1.0, 0.1]), DT_S), Control)
    traj = parse_action(np.zeros((5, 3)), DT_S)
    assert isinstance(traj, Trajectory) and traj.interval_s == DT_S
