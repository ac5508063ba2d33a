"""Built-in policies (log replay, constant velocity) and the loader of a user's `MODULE:CALLABLE`.

- `ExpertPolicy` replays the log: at every step it returns the logged ego's next 4 s of poses
  (`EpisodeInfo.log_ego`: the source's without its implausible poses; at the sim's step,
  continued at constant velocity past the log's end) in the current ego frame, starting from the
  log's pose now (`Trajectory.start`)
  (NAVSIM's human agent returns the human trajectory the same way). With the perfect controller
  (`avsim sim --policy expert`'s default) the rollout is the log; with the LQR tracker it is the
  log as the tracker follows it.
- `ConstantVelocityPolicy` is NAVSIM's `ConstantVelocityAgent`: 8 poses 0.5 s apart straight ahead
  at the current speed.
- `IDMPlannerPolicy` (`avsim.sim.planner`) is the PDM-Closed-style lane-following planner.
"""

from __future__ import annotations

import importlib
from enum import Enum
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.trajectory import NS_PER_S
from avsim.sim.actions import Trajectory
from avsim.sim.observation import EpisodeInfo, Observation
from avsim.sim.planner import IDMPlannerPolicy
from avsim.sim.vehicle import StateIndex, to_ego_frame

HORIZON_S = 4.0


class BuiltinPolicy(str, Enum):
    """The policies `avsim sim --policy` knows by name."""

    EXPERT = "expert"
    CONSTANT_VELOCITY = "constant-velocity"
    IDM = "idm"


class ExpertPolicy:
    """Log replay (see the module docstring)."""

    name = "expert"

    def reset(self, episode: EpisodeInfo) -> None:
        steps = int(round(HORIZON_S / episode.dt_s))
        extra = episode.step_times_ns[-1] + np.round(np.arange(1, steps + 2) * (NS_PER_S * episode.dt_s)).astype(np.int64)
        log = episode.log_ego if episode.log_ego is not None else episode.scenario.ego
        pose = log.pose_at(np.r_[episode.step_times_ns, extra])  # constant velocity past the log
        self._poses = np.c_[pose.translation[:, :2], np.asarray(pose.yaw_rad).reshape(-1)]
        self._steps, self._dt = steps, episode.dt_s

    def __call__(self, observation: Observation) -> Trajectory:
        k = observation.step
        future = self._poses[k + 1 : k + 1 + self._steps]
        now = to_ego_frame(self._poses[k : k + 1], observation.ego_state)[0]  # the log's pose now: a tracker closes the gap to it
        return Trajectory(to_ego_frame(future, observation.ego_state), self._dt, now)


class ConstantVelocityPolicy:
    """NAVSIM's constant-velocity agent (see the module docstring)."""

    name = "constant-velocity"
    interval_s = 0.5
    num_poses = 8

    def __call__(self, observation: Observation) -> Trajectory:
        v = float(observation.ego_state[StateIndex.VELOCITY_X])
        t = np.arange(1, self.num_poses + 1) * self.interval_s
        return Trajectory(np.stack([v * t, np.zeros_like(t), np.zeros_like(t)], axis=1), self.interval_s)


def load_policy(spec: str) -> Any:
    """A policy by built-in name or `MODULE:CALLABLE` (a class is instantiated without arguments).

    A `MODULE:CALLABLE` runs the named module's code: it is the user's own policy, as a plugin.

    Args:
        spec: expert, constant-velocity, idm or MODULE:CALLABLE.

    Returns:
        The policy (a callable).
    """
    if spec in (p.value for p in BuiltinPolicy):
        kind = BuiltinPolicy(spec)
        if kind is BuiltinPolicy.EXPERT:
            return ExpertPolicy()
        if kind is BuiltinPolicy.CONSTANT_VELOCITY:
            return ConstantVelocityPolicy()
        return IDMPlannerPolicy()
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise AvsimInputError("--policy", "policy", f"expected {', '.join(p.value for p in BuiltinPolicy)} or MODULE:CALLABLE, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or whatever the module's own code raises while it loads
        raise AvsimInputError("--policy", "policy", f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"[:400]) from None
    target = getattr(module, attr, None)
    if target is None:
        raise AvsimInputError("--policy", "policy", f"module {module_name!r} has no attribute {attr!r}")
    try:
        policy = target() if isinstance(target, type) else target
    except Exception as exc:  # the user's constructor (a required argument, its own error): one line
        text = " ".join(str(exc).split())[:200]
        raise AvsimInputError("--policy", "policy", f"{spec}: the class cannot be made without arguments: {type(exc).__name__}: {text}") from None
    if not callable(policy):
        raise AvsimInputError("--policy", "policy", f"{spec} is not callable")
    return policy
