"""What a policy returns: a future trajectory in the ego frame or direct controls, and the check
that turns any returned value into one of them (or a one-line reason why not)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from avsim.core.typing import NDArrayFloat

MAX_TRAJECTORY_POSES = 1000  # NAVSIM's trajectories have 8; a policy's plan at the sim's step: 10 s at 100 Hz
MAX_HORIZON_S = 60.0  # how far ahead a trajectory may reach (NAVSIM: 4 s)
MAX_REACH_M = 10_000.0  # how far from the ego a trajectory's pose may be (60 s at 160 m/s)


class PolicyError(Exception):
    """A policy's output (or its call) cannot be used; `str()` is the one-line reason."""


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Future poses of the ego's rear axle in the ego frame at the current step (x forward, y left).

    poses: (N, 3) x_m, y_m, heading_rad at times interval_s, 2 interval_s, ... after now (NAVSIM's
    `Trajectory`: 8 poses at 0.5 s); they are interpolated to the sim's step and tracked by the
    LQR tracker. start: (3,) the plan's own pose now, where it is not the ego's (a path-following
    planner's point on its path, as PDM-Closed's trajectories begin: the tracker then sees the
    ego's lateral and heading error to it); None: the ego's pose (NAVSIM's `transform_trajectory`).
    """

    poses: NDArrayFloat
    interval_s: float = 0.1
    start: NDArrayFloat | None = None


@dataclass(frozen=True)
class Control:
    """Direct commands: longitudinal acceleration (m/s^2) and tyre steering rate (rad/s)."""

    accel_mps2: float
    steering_rate_radps: float


Action = Trajectory | Control


def parse_action(value: Any, dt_s: float) -> Action:
    """A policy's return value as an action, or `PolicyError` saying what is wrong with it.

    Accepted: a `Trajectory`, a `Control`, an array (N, 3) (poses at the sim's step) or an array (2,)
    (acceleration, steering rate).

    Args:
        value: what the policy returned.
        dt_s: the sim's step (the interval of a bare pose array).

    Returns:
        The action.
    """
    if isinstance(value, Control):
        arr = np.array([value.accel_mps2, value.steering_rate_radps], dtype=np.float64)
        _finite(arr, "control")
        return value
    if isinstance(value, Trajectory):
        poses = _as_array(value.poses, "trajectory.poses")
        if poses.ndim != 2 or poses.shape[1] != 3 or len(poses) < 1:
            raise PolicyError(f"trajectory.poses: expected shape (N, 3) with N >= 1, got {poses.shape}")
        interval = _interval(value.interval_s)
        _check_poses(poses, interval, "trajectory.poses")
        start = None
        if value.start is not None:
            start = _as_array(value.start, "trajectory.start")
            if start.shape != (3,):
                raise PolicyError(f"trajectory.start: expected shape (3,), got {start.shape}")
            _check_poses(start[None], interval, "trajectory.start")
        return Trajectory(poses, interval, start)
    arr = _as_array(value, "action")
    if arr.shape == (2,):
        _finite(arr, "action")
        return Control(float(arr[0]), float(arr[1]))
    if arr.ndim == 2 and arr.shape[1] == 3 and len(arr) >= 1:
        _check_poses(arr, dt_s, "action")
        return Trajectory(arr, dt_s)
    raise PolicyError(f"action: expected a Trajectory, a Control, an array (N, 3) of poses or (2,) controls, got shape {arr.shape}")


def _interval(value: Any) -> float:
    try:
        interval = float(value)
    except (TypeError, ValueError):
        raise PolicyError(f"trajectory.interval_s: expected a number, got {type(value).__name__}") from None
    if not (np.isfinite(interval) and 0 < interval <= MAX_HORIZON_S):
        raise PolicyError(f"trajectory.interval_s: expected a number in (0, {MAX_HORIZON_S:g}] s, got {interval!r}")
    return interval


def _check_poses(poses: NDArrayFloat, interval_s: float, name: str) -> None:
    """Bounds of a trajectory before anything is made from it (its reference grows with its horizon)."""
    if len(poses) > MAX_TRAJECTORY_POSES:
        raise PolicyError(f"{name}: {len(poses)} poses, more than the {MAX_TRAJECTORY_POSES} a trajectory may have")
    if len(poses) * interval_s > MAX_HORIZON_S:
        raise PolicyError(f"{name}: reaches {len(poses) * interval_s:g} s ahead, more than the {MAX_HORIZON_S:g} s a trajectory may")
    _finite(poses, name)
    if np.abs(poses[:, :2]).max() > MAX_REACH_M:
        raise PolicyError(f"{name}: a pose {np.abs(poses[:, :2]).max():g} m from the ego, more than the {MAX_REACH_M:g} m a trajectory may reach")


def _as_array(value: Any, name: str) -> NDArrayFloat:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise PolicyError(f"{name}: expected numbers, got {type(value).__name__}") from None


def _finite(arr: NDArrayFloat, name: str) -> None:
    if not np.all(np.isfinite(arr)):
        raise PolicyError(f"{name}: contains NaN or infinite values")


def reference_poses(traj: Trajectory, world_pose: tuple[float, float, float], dt_s: float) -> NDArrayFloat:
    """The world-frame reference (M+1, 3) the tracker follows: the current pose (or the trajectory's
    `start`), then the trajectory interpolated at the sim's step (x, y linear, heading unwrapped linear), as NAVSIM's
    `transform_trajectory` + `InterpolatedTrajectory` do.

    Args:
        traj: the ego-frame trajectory.
        world_pose: (x, y, heading) of the ego now.
        dt_s: the sim's step.

    Returns:
        (M+1, 3) poses at 0, dt, 2 dt, ... up to the trajectory's last time.
    """
    x0, y0, h0 = world_pose
    c, s = np.cos(h0), np.sin(h0)
    local = np.vstack([np.zeros((1, 3)) if traj.start is None else traj.start[None], traj.poses])
    world = np.stack([x0 + c * local[:, 0] - s * local[:, 1], y0 + s * local[:, 0] + c * local[:, 1], np.unwrap(h0 + local[:, 2])], axis=1)
    t_src = np.arange(len(local)) * traj.interval_s
    count = max(int(np.floor(t_src[-1] / dt_s + 1e-9)), 1)
    t_dst = np.minimum(np.arange(count + 1) * dt_s, t_src[-1])
    return np.stack([np.interp(t_dst, t_src, world[:, k]) for k in range(3)], axis=1)
