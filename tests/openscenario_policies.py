"""Policies for the storyboard-traffic tests: `slow` brakes the ego to 20 m/s and holds it there."""

from __future__ import annotations

from typing import Any

from avsim.sim.actions import Control
from avsim.sim.vehicle import StateIndex


def slow(observation: Any) -> Control:
    """Brake at 3 m/s^2 while faster than 20 m/s, then hold the speed, straight on."""
    v = float(observation.ego_state[StateIndex.VELOCITY_X])
    return Control(-3.0 if v > 20.0 else 0.0, 0.0)
