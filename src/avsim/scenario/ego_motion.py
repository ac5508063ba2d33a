"""Plausibility of a scenario's ego poses: where a source's poses cannot be a vehicle's motion.

Real logs carry pose glitches a car cannot drive: ScenarioNet's nuScenes scenes step back 0.4 to
1.9 m near their end (every later pose shifted by the same amount), some jump forward by half a
metre for one step, and a high-rate pose stream can jitter by centimetres within milliseconds.
`implausible_ego_poses` finds them on the ego's source poses, thinned to at most `rate_hz` (a
pose at least 1 / `rate_hz` after the previous kept one, so a 200 Hz stream is judged at 10 Hz
and millimetre jitter is not read as acceleration):

- `jump`: the speed between two kept poses exceeds `max_speed_mps`;
- `back_step`: the ego moves backwards (along its heading) by more than `back_step_m` between
  two poses while it moves forwards by more than that on both neighbouring steps (a car that
  reverses does so over several poses);
- `acceleration`: the change of velocity between the steps before and after a pose exceeds
  `max_accel_mps2` (1.5 g; tyres hold about 1 g).

Each issue names the source pose indices it involves (`first`, `last`), their times, and the
pose it takes for the displaced one (`suspect`). `avsim validate` reports them as `ego_pose`
findings. `plausible_ego` is the log the simulator replays (docs/closed_loop.md): the source
poses without the suspect ones (the source samples between the suspect's kept neighbours), the
ego interpolated over the gap; a jump or back-step within `tail_s` of the log's end (every later
pose shifted, as ScenarioNet's nuScenes logs end) cuts the log before the displaced pose.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from avsim.core.trajectory import NS_PER_S, EgoTrajectory
from avsim.core.typing import NDArrayBool, NDArrayInt


@dataclass(frozen=True)
class PoseLimits:
    """The thresholds of `implausible_ego_poses` (see the module docstring)."""

    rate_hz: float = 10.0
    max_speed_mps: float = 70.0
    back_step_m: float = 0.05
    max_accel_mps2: float = 15.0
    tail_s: float = 1.0


@dataclass(frozen=True)
class PoseIssue:
    """One implausible stretch of ego poses: kind (`jump`, `back_step`, `acceleration`), the source
    pose indices first..last it involves, their timestamps (ns), the measured value, a reason, and
    the source pose taken for the displaced one (`suspect`)."""

    kind: str
    first: int
    last: int
    first_ns: int
    last_ns: int
    value: float
    reason: str
    suspect: int


def thinned_indices(timestamps_ns: NDArrayInt, rate_hz: float) -> NDArrayInt:
    """Indices of poses kept at most `rate_hz` apart (greedy from the first; a 1 % tolerance on the spacing).

    Args:
        timestamps_ns: (N,) sorted timestamps.
        rate_hz: the highest rate kept.

    Returns:
        (M,) kept indices, the first always kept.
    """
    t = np.asarray(timestamps_ns, np.int64)
    if not len(t):
        return np.zeros(0, np.int64)
    gap = int(round(NS_PER_S / rate_hz * 0.99))
    keep = [0]
    for i in range(1, len(t)):
        if t[i] - t[keep[-1]] >= gap:
            keep.append(i)
    return np.asarray(keep, np.int64)


def implausible_ego_poses(ego: EgoTrajectory, limits: PoseLimits | None = None) -> list[PoseIssue]:
    """The ego's implausible poses (see the module docstring), in time order.

    Args:
        ego: the ego trajectory.
        limits: the thresholds.

    Returns:
        The issues.
    """
    lim = limits or PoseLimits()
    idx = thinned_indices(ego.timestamps_ns, lim.rate_hz)
    if len(idx) < 2:
        return []
    t_ns = np.asarray(ego.timestamps_ns, np.int64)[idx]
    t = (t_ns - t_ns[0]) / NS_PER_S
    xy = np.asarray(ego.world_SE3_ego.translation)[idx, :2]
    yaw = np.asarray(ego.world_SE3_ego.yaw_rad).reshape(-1)[idx]
    d = np.diff(xy, axis=0)
    dt = np.diff(t)
    vel = d / dt[:, None]
    speed = np.linalg.norm(vel, axis=1)
    along = d[:, 0] * np.cos(yaw[:-1]) + d[:, 1] * np.sin(yaw[:-1])
    issues = []

    def issue(kind: str, a: int, b: int, value: float, reason: str) -> None:
        suspect = int(idx[a + 1])  # the pose after a jump or back-step, the middle pose of an acceleration
        issues.append(PoseIssue(kind, int(idx[a]), int(idx[b]), int(t_ns[a]), int(t_ns[b]), float(value), reason, suspect))

    for k in np.flatnonzero(speed > lim.max_speed_mps).tolist():
        issue("jump", k, k + 1, speed[k], f"jumps {np.linalg.norm(d[k]):.2f} m in {dt[k]:.3f} s ({speed[k]:.1f} m/s)")
    fwd = along > lim.back_step_m
    for k in range(1, len(along) - 1):
        if along[k] < -lim.back_step_m and fwd[k - 1] and fwd[k + 1]:
            issue("back_step", k, k + 1, -along[k], f"steps back {-along[k]:.2f} m between moves forward")
    if len(vel) >= 2:
        acc = np.linalg.norm(np.diff(vel, axis=0), axis=1) / ((dt[1:] + dt[:-1]) / 2)
        for k in np.flatnonzero(acc > lim.max_accel_mps2).tolist():
            issue("acceleration", k, k + 2, acc[k], f"accelerates at {acc[k]:.1f} m/s^2 (limit {lim.max_accel_mps2:g})")
    return sorted(issues, key=lambda i: (i.first_ns, i.kind))


def plausible_mask(ego: EgoTrajectory, limits: PoseLimits | None = None) -> NDArrayBool:
    """(N,) the source poses `plausible_ego` keeps (see the module docstring).

    Args:
        ego: the ego trajectory.
        limits: the thresholds.

    Returns:
        The mask (the first pose is always kept).
    """
    lim = limits or PoseLimits()
    t = np.asarray(ego.timestamps_ns, np.int64)
    keep = np.ones(len(t), bool)
    kept = thinned_indices(t, lim.rate_hz)
    position = {int(i): k for k, i in enumerate(kept.tolist())}
    for issue in implausible_ego_poses(ego, lim):
        if issue.kind in ("jump", "back_step") and (t[-1] - t[issue.suspect]) / NS_PER_S <= lim.tail_s:
            keep[issue.suspect :] = False
            continue
        k = position[issue.suspect]
        lo = int(kept[k - 1]) + 1 if k > 0 else issue.suspect
        hi = int(kept[k + 1]) if k + 1 < len(kept) else len(t)
        keep[lo:hi] = False
    keep[0] = True
    return keep


def plausible_ego(ego: EgoTrajectory, limits: PoseLimits | None = None) -> EgoTrajectory:
    """The ego without its implausible poses (see the module docstring); the same object when it has none.

    Args:
        ego: the ego trajectory.
        limits: the thresholds.

    Returns:
        The ego trajectory the simulator replays.
    """
    keep = plausible_mask(ego, limits)
    if keep.all():
        return ego
    return EgoTrajectory(np.asarray(ego.timestamps_ns)[keep], ego.world_SE3_ego[np.flatnonzero(keep)])
