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
from avsim.core.trajectory import EgoTrajectory, UniformTimes
from avsim.maps import HDMap


@dataclass(frozen=True, eq=False)
class Scenario:
    """A clip: camera rig, ego trajectory, agent tracks, HD map, light states, metadata.

    All world-frame data share one world frame; timestamps are int64 ns.
    """

    scenario_id: str
    rig: CameraRig
    ego: EgoTrajectory
    agents: AgentTracks
    map: HDMap
    lights: TrafficLightStates
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.scenario_id, str) or not self.scenario_id:
            raise AvsimValueError("scenario_id: must be a non-empty string")
        for name, cls in (("rig", CameraRig), ("ego", EgoTrajectory), ("agents", AgentTracks), ("lights", TrafficLightStates)):
            if not isinstance(getattr(self, name), cls):
                raise AvsimValueError(f"{name}: expected {cls.__name__}, got {type(getattr(self, name)).__name__}")
        if not hasattr(self.map, "element_counts"):
            raise AvsimValueError(f"map: expected an HDMap, got {type(self.map).__name__}")
        object.__setattr__(self, "metadata", dict(self.metadata))

    @property
    def start_ns(self) -> int:
        return int(self.ego.timestamps_ns[0])

    @property
    def end_ns(self) -> int:
        return int(self.ego.timestamps_ns[-1])

    @property
    def duration_s(self) -> float:
        return self.ego.duration_s

    def frame_timestamps(self, rate_hz: float) -> np.ndarray:
        """Render timestamps (K,) over the ego span at `rate_hz`."""
        return self.ego.uniform_timestamps(rate_hz)

    def frame_times(self, rate_hz: float) -> UniformTimes:
        """`frame_timestamps`, lazily: `len()` without building them, frames made when indexed."""
        return self.ego.uniform_times(rate_hz)

    def replace(self, **changes: Any) -> Scenario:
        """A copy with the given fields replaced (validated like a new Scenario)."""
        return dataclasses.replace(self, **changes)
