"""Steps grouped into the generated video's chunks, and how a policy re-plans inside a chunk.

A video model makes its frames a chunk at a time: chunk 0 holds `frames` frames (steps
0 .. frames - 1); every later chunk starts with the last `overlap` frames already generated (its
conditioning) and adds `frames - overlap` new ones, so chunk c >= 1 shows steps
`start(c) .. start(c) + new_frames - 1` with `start(c) = frames + (c - 1) (frames - overlap)`.
One frame a step: the sim's rate is the model's frame rate.

`ReplanMode` says what the policy does between chunks (docs/closed_loop.md, "Generated video"):

- `HOLD`: the policy is asked every step and sees the chunk's frame of that step; a new plan
  moves the ego at once, while the chunk's frames, generated along the plan it had when the chunk
  began, are held until the next chunk (they are not generated again);
- `WAIT`: the policy plans at step 0 and at the last step of every chunk, seeing the newest
  frame; in between the ego follows that plan (`ChunkPlanPolicy`), and the next chunk is generated
  along it, so the frames follow the trajectory the ego drives.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.typing import NDArrayFloat
from avsim.sim.actions import Control, PolicyError, Trajectory, parse_action, reference_poses
from avsim.sim.episode import policy_name, reset_policy
from avsim.sim.observation import EpisodeInfo, Observation
from avsim.sim.stepper import pad_reference
from avsim.sim.vehicle import StateIndex, to_ego_frame


class ReplanMode(str, Enum):
    """How a policy re-plans inside a chunk (see the module docstring)."""

    HOLD = "hold"
    WAIT = "wait"


@dataclass(frozen=True)
class ChunkSchedule:
    """frames: frames per chunk (the model's 1 + 4k); overlap: generated frames a chunk is
    conditioned on (0 or 1 + 4k, fewer than `frames`)."""

    frames: int
    overlap: int = 1

    def __post_init__(self) -> None:
        if self.frames < 1 or not 0 <= self.overlap < self.frames:
            raise AvsimValueError(f"ChunkSchedule: expected frames >= 1 and 0 <= overlap < frames, got {self.frames}, {self.overlap}")

    @property
    def new_frames(self) -> int:
        """Frames a chunk after the first adds."""
        return self.frames - self.overlap

    def start(self, chunk: int) -> int:
        """The first step a chunk shows (its first new frame)."""
        return 0 if chunk == 0 else self.frames + (chunk - 1) * self.new_frames

    def chunk_of(self, step: int) -> int:
        """The chunk whose new frames hold `step`."""
        return 0 if step < self.frames else 1 + (step - self.frames) // self.new_frames

    def is_start(self, step: int) -> bool:
        """Whether `step` is a chunk's first new frame (the chunk is generated at that step)."""
        return step == self.start(self.chunk_of(step))

    def steps(self, chunk: int) -> range:
        """The steps of a chunk's new frames."""
        start = self.start(chunk)
        return range(start, start + (self.frames if chunk == 0 else self.new_frames))

    def plans_at(self, step: int) -> bool:
        """Whether a `WAIT` policy plans at `step`: step 0 and the last step of every chunk."""
        return step == 0 or self.is_start(step + 1)


class ChunkPlanPolicy:
    """A policy that plans only where `schedule.plans_at` says and follows that plan in between
    (`ReplanMode.WAIT`).

    At a planning step the wrapped policy's output is returned unchanged (the episode loop checks
    it) and kept: a trajectory as its world poses at the sim's step, a control as it is. At the
    other steps the kept plan's remaining poses are returned in the current ego frame (continued
    along its last step when they run out), or the kept control.

    Args:
        policy: the wrapped policy.
        schedule: the chunks.
    """

    def __init__(self, policy: Any, schedule: ChunkSchedule) -> None:
        self.policy, self.schedule = policy, schedule
        self.name = policy_name(policy)
        self._plan: tuple[int, NDArrayFloat] | Control | None = None
        self._dt_s = 0.1

    def reset(self, episode: EpisodeInfo) -> None:
        self._plan, self._dt_s = None, episode.dt_s
        reset_policy(self.policy, episode)

    def close(self) -> None:
        close = getattr(self.policy, "close", None)
        if callable(close):
            close()

    def __call__(self, observation: Observation) -> Any:
        if self._plan is None or self.schedule.plans_at(observation.step):
            out = self.policy(observation)
            self._keep(out, observation)
            return out
        if isinstance(self._plan, Control):
            return self._plan
        made_at, world = self._plan
        return Trajectory(to_ego_frame(remaining_plan(world, observation.step - made_at), observation.ego_state), self._dt_s)

    def _keep(self, out: Any, observation: Observation) -> None:
        try:
            action = parse_action(out, self._dt_s)
        except PolicyError:
            self._plan = None  # the episode loop reports it
            return
        if isinstance(action, Control):
            self._plan = action
            return
        st = observation.ego_state
        world = reference_poses(action, (st[StateIndex.X], st[StateIndex.Y], st[StateIndex.HEADING]), self._dt_s)
        self._plan = (observation.step, np.asarray(world))


def remaining_plan(world: NDArrayFloat, elapsed: int) -> NDArrayFloat:
    """The future poses of a plan `elapsed` steps after it was made.

    Args:
        world: (M+1, 3) world poses at the sim's step, row 0 when it was made.
        elapsed: steps since then (>= 0).

    Returns:
        (K, 3) poses from the next step on, K >= 1 (past the plan's end: continued along its last step).
    """
    n = len(world)
    if elapsed + 1 < n:
        rows = world[elapsed:]
    else:
        step = world[-1] - world[-2] if n >= 2 else np.zeros(3)
        rows = world[-1] + (elapsed - (n - 1) + np.arange(2))[:, None] * step
    return pad_reference(rows, 2)[1:]
