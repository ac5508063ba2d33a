"""The Scenario: everything needed to render one driving clip."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from avsim.core.agents import AgentTracks
from avsim.core.errors import AvsimValueError
from avsim.core.lights import TrafficLightStates
from avsim.core.rig import CameraRig
from avsim.core.trajectory import EgoTrajectory, UniformTimes, uniform_timestamps
from avsim.maps import HDMap


@dataclass(frozen=True, eq=False)
class Scenario:
    """A clip: camera rig, ego trajectory, agent tracks, HD map, light states, metadata.

    All world-frame data share one world frame; timestamps are int64 ns. `frame_origin_ns` is
    the time of frame 0 of a render (the source's first sample, its keyframe, where an importer
    knows one), within the ego span; None: the first ego pose. Frames run from it at the render
    rate to the last ego pose.
    """

    scenario_id: str
    rig: CameraRig
    ego: EgoTrajectory
    agents: AgentTracks
    map: HDMap
    lights: TrafficLightStates
    metadata: dict[str, Any] = field(default_factory=dict)
    frame_origin_ns: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.scenario_id, str) or not self.scenario_id:
            raise AvsimValueError("scenario_id: must be a non-empty string")
        for name, cls in (("rig", CameraRig), ("ego", EgoTrajectory), ("agents", AgentTracks), ("lights", TrafficLightStates)):
            if not isinstance(getattr(self, name), cls):
                raise AvsimValueError(f"{name}: expected {cls.__name__}, got {type(getattr(self, name)).__name__}")
        if not hasattr(self.map, "element_counts"):
            raise AvsimValueError(f"map: expected an HDMap, got {type(self.map).__name__}")
        object.__setattr__(self, "metadata", dict(self.metadata))
        if self.frame_origin_ns is not None:
            t = self.frame_origin_ns
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
                raise AvsimValueError(f"frame_origin_ns: expected integer nanoseconds or None, got {t!r}")
            if not self.start_ns <= int(t) <= self.end_ns:
                raise AvsimValueError(f"frame_origin_ns: {int(t)} is outside the ego span [{self.start_ns}, {self.end_ns}]")
            object.__setattr__(self, "frame_origin_ns", int(t))

    @property
    def start_ns(self) -> int:
        return int(self.ego.timestamps_ns[0])

    @property
    def end_ns(self) -> int:
        return int(self.ego.timestamps_ns[-1])

    @property
    def duration_s(self) -> float:
        return self.ego.duration_s

    @property
    def frame_start_ns(self) -> int:
        """Time of frame 0: `frame_origin_ns`, else the first ego pose."""
        return self.start_ns if self.frame_origin_ns is None else self.frame_origin_ns

    def frame_timestamps(self, rate_hz: float) -> np.ndarray:
        """Render timestamps (K,) at `rate_hz` from `frame_start_ns` to at most the last ego pose."""
        return uniform_timestamps(self.frame_start_ns, self.end_ns, rate_hz)

    def frame_times(self, rate_hz: float) -> UniformTimes:
        """`frame_timestamps`, lazily: `len()` without building them, frames made when indexed."""
        return UniformTimes(self.frame_start_ns, self.end_ns, rate_hz)

    def replace(self, **changes: Any) -> Scenario:
        """A copy with the given fields replaced (validated like a new Scenario)."""
        return dataclasses.replace(self, **changes)
