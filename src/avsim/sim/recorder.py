"""What an episode leaves behind: the ego's states and commands and every box at every step, and
the rollout as a native scenario (`avsim render`, `labels`, `view`, `validate`, `eval` and
`export-scene` read it unchanged).

Memory: the ego's rows are preallocated for the episode (88 bytes a step), boxes are kept as one
small struct of arrays per step (about 100 bytes per box), a policy's plan every step (its world
reference, about 1 kB for 4 s: the extended comfort compares each with the one 0.5 s before);
camera frames are never kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from avsim.core.agents import AgentTracks
from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3, yaw_to_quat
from avsim.core.typing import NDArrayFloat, NDArrayInt
from avsim.scenario import Scenario
from avsim.sim.boxes import Boxes
from avsim.sim.vehicle import N_STATE, StateIndex


@dataclass(frozen=True)
class Plan:
    """A trajectory the policy returned at `step`: the ego state then and its world reference (M+1, 3)."""

    step: int
    state: NDArrayFloat
    reference: NDArrayFloat


class Recorder:
    """Per-step records of one episode of at most `n_steps` steps.

    Args:
        n_steps: the episode's planned length.
    """

    def __init__(self, n_steps: int) -> None:
        self.states = np.full((n_steps + 1, N_STATE), np.nan)
        self.commands = np.full((n_steps, 2), np.nan)
        self.policy_s = np.full(n_steps + 1, np.nan)
        self.boxes: list[Boxes] = []
        self.plans: list[Plan] = []
        self.last_step = -1

    def record_state(self, step: int, state: NDArrayFloat, boxes: Boxes) -> None:
        """The ego state and the boxes at `step` (steps are recorded in order)."""
        self.states[step] = state
        self.boxes.append(boxes)
        self.last_step = step

    def record_command(self, step: int, command: NDArrayFloat) -> None:
        """The commands applied from `step` to `step + 1`."""
        self.commands[step] = command

    def record_plan(self, plan: Plan) -> None:
        """A trajectory the policy returned (every step's, for the extended comfort)."""
        self.plans.append(plan)

    def record_policy_time(self, step: int, seconds: float) -> None:
        """How long the policy took at `step`."""
        self.policy_s[step] = seconds

    @property
    def n_recorded(self) -> int:
        """States recorded (steps 0..last_step)."""
        return self.last_step + 1

    def ego_states(self) -> NDArrayFloat:
        """(T, 11) the recorded ego states."""
        return self.states[: self.n_recorded]

    def bytes_per_step(self) -> float:
        """Bytes held per recorded step (ego rows, boxes and the policy's plans)."""
        box_bytes = sum(sum(getattr(b, f).nbytes for f in ("track_id", "source_class", "object_class", "center_m", "size_m", "yaw_rad",
                                                           "velocity_mps")) for b in self.boxes)  # fmt: skip
        plan_bytes = sum(p.reference.nbytes + p.state.nbytes for p in self.plans)
        return (box_bytes + plan_bytes + self.states.nbytes / max(len(self.states), 1) * self.n_recorded) / max(self.n_recorded, 1)


def rollout_scenario(source: Scenario, recorder: Recorder, step_times_ns: NDArrayInt, metadata: dict[str, Any], scenario_id: str) -> Scenario:
    """The recorded episode as a scenario: the source's rig, map and lights, the simulated ego and agents.

    The ego keeps the logged height (z) at each time (maps carry elevation); its rotation is its
    yaw. Agents are the recorded boxes at each step (IDM agents where they drove, replayed boxes
    where they were replayed).

    Args:
        source: the scenario the episode ran on.
        recorder: the episode's records.
        step_times_ns: (T+1,) the step times.
        metadata: added under `metadata['sim']`.
        scenario_id: the rollout's id.

    Returns:
        The rollout scenario.
    """
    n = recorder.n_recorded
    t = np.asarray(step_times_ns[:n], np.int64)
    st = recorder.ego_states()
    z = source.ego.pose_at(np.clip(t, source.start_ns, source.end_ns)).translation[:, 2]
    pose = SE3.from_yaw(st[:, StateIndex.HEADING], np.c_[st[:, StateIndex.X], st[:, StateIndex.Y], z])
    parts = []
    for k, boxes in enumerate(recorder.boxes[:n]):
        if len(boxes):
            parts.append((boxes.track_id, boxes.source_class, np.full(len(boxes), t[k]), boxes.center_m, boxes.size_m, boxes.yaw_rad))
    if parts:
        ids, src, ts, center, size, yaw = (np.concatenate(c) for c in zip(*parts))
        agents = AgentTracks.from_unsorted(ids, src, ts, center, size, yaw_to_quat(yaw))
    else:
        agents = AgentTracks.empty()
    meta = {**source.metadata, "sim": metadata}
    return Scenario(scenario_id, source.rig, EgoTrajectory(t, pose), agents, source.map, source.lights, meta)
