"""The world of the chunk about to happen, forecast from the current step.

A chunk's control frames are rendered before its steps are driven, so its later frames show a
forecast: from the state of the chunk's first step,

- the ego follows the plan it is steering along (`FrameState.plan_world`: the tracker's world
  reference, moved rigidly so that its pose at this step is the ego's actual pose, continued along
  its last step past its end), or, without a plan (step 0, a `Control` action), drives on at
  constant speed and yaw rate;
- every other road user moves on at its current velocity, heading held;
- the lights take their scheduled states (the scenario's light timeline, not a forecast).

The first state is the step's own (nothing forecast). The forecast error (forecast ego pose against
the driven one, per chunk) is part of the drift figures (`avsim.sim.generated.drift`).
"""

from __future__ import annotations

import numpy as np

from avsim.core.trajectory import NS_PER_S
from avsim.core.typing import NDArrayFloat
from avsim.sim.boxes import Boxes
from avsim.sim.observation import EpisodeInfo, FrameState
from avsim.sim.stepper import LightSchedule
from avsim.sim.vehicle import StateIndex

__all__ = ["ChunkForecaster", "ctrv_poses", "plan_poses"]


def ctrv_poses(state: NDArrayFloat, times_s: NDArrayFloat) -> NDArrayFloat:
    """Poses (K, 3) at `times_s` after the state, at constant speed and yaw rate (exact arcs)."""
    x, y, h = (float(state[i]) for i in (StateIndex.X, StateIndex.Y, StateIndex.HEADING))
    v, w = float(state[StateIndex.VELOCITY_X]), float(state[StateIndex.ANGULAR_VELOCITY])
    t = np.asarray(times_s, np.float64)
    heading = h + w * t
    if abs(w) < 1e-6:
        return np.stack([x + v * t * np.cos(h), y + v * t * np.sin(h), heading], axis=1)
    r = v / w
    return np.stack([x + r * (np.sin(heading) - np.sin(h)), y - r * (np.cos(heading) - np.cos(h)), heading], axis=1)


def plan_poses(plan_world: NDArrayFloat, pose: NDArrayFloat, count: int) -> NDArrayFloat:
    """`count` poses at the sim's step along a plan made one step ago, re-anchored on `pose`.

    Args:
        plan_world: (M+1, 3) the plan (row 0: the previous step, row 1: planned for now).
        pose: (3,) the ego's actual x, y, heading now.
        count: poses wanted (now, then one per step).

    Returns:
        (count, 3) poses; row 0 is `pose`.
    """
    need = count + 1
    rows = np.asarray(plan_world, np.float64)
    if len(rows) < need:  # continue along the last step
        step = rows[-1] - rows[-2] if len(rows) >= 2 else np.zeros(3)
        rows = np.vstack([rows, rows[-1] + np.arange(1, need - len(rows) + 1)[:, None] * step])
    planned = rows[1:need]
    dh = float(pose[2] - planned[0, 2])
    c, s = np.cos(dh), np.sin(dh)
    rel = planned[:, :2] - planned[0, :2]
    out = np.stack([pose[0] + c * rel[:, 0] - s * rel[:, 1], pose[1] + s * rel[:, 0] + c * rel[:, 1], planned[:, 2] + dh], axis=1)
    out[0] = pose
    return out


def _moved(boxes: Boxes, dt_s: float) -> Boxes:
    """The boxes `dt_s` later at constant velocity (heading held)."""
    if not len(boxes) or dt_s == 0.0:
        return boxes
    centre = boxes.center_m.copy()
    centre[:, :2] += boxes.velocity_mps * dt_s
    return Boxes(boxes.track_id, boxes.source_class, boxes.object_class, centre, boxes.size_m, boxes.yaw_rad, boxes.velocity_mps)


class ChunkForecaster:
    """Forecast states of the steps of a chunk (see the module docstring).

    Args:
        episode: the episode (its scenario's lights and step clock).
        horizon_steps: the most steps a chunk spans (the light schedule is kept that far past the episode).
    """

    def __init__(self, episode: EpisodeInfo, horizon_steps: int) -> None:
        times = episode.step_times_ns
        extra = times[-1] + np.round(np.arange(1, horizon_steps + 1) * (NS_PER_S * episode.dt_s)).astype(np.int64)
        self.times_ns = np.r_[times, extra]
        self.dt_s = episode.dt_s
        self.lights = LightSchedule(episode.scenario, self.times_ns)

    def ego_poses(self, state: FrameState, count: int) -> NDArrayFloat:
        """(count, 3) forecast ego x, y, heading from `state`, one per step."""
        st = state.ego_state
        pose = np.array([st[StateIndex.X], st[StateIndex.Y], st[StateIndex.HEADING]], np.float64)
        if state.plan_world is not None and len(state.plan_world) >= 2:
            return plan_poses(state.plan_world, pose, count)
        out = ctrv_poses(st, np.arange(count) * self.dt_s)
        out[0] = pose
        return out

    def states(self, state: FrameState, count: int) -> list[FrameState]:
        """The states of `count` steps from `state` (the first is `state` itself).

        Args:
            state: the current step's state.
            count: steps to forecast, this one included.

        Returns:
            One `FrameState` per step.
        """
        poses = self.ego_poses(state, count)
        out = [state]
        for j in range(1, count):
            row = state.ego_state.copy()
            row[StateIndex.X], row[StateIndex.Y], row[StateIndex.HEADING] = poses[j]
            k = min(state.step + j, len(self.times_ns) - 1)
            out.append(FrameState(state.step + j, int(self.times_ns[k]), row, state.ego_z_m, _moved(state.boxes, j * self.dt_s),
                                  self.lights.at(k), None))  # fmt: skip
        return out
