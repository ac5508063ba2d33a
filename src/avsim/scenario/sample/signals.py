"""Fixed-time signal controller of the embedded sample: `SignalPlan` and the phase of each arm.

Two phases (E-W road, N-S road), each green, yellow, all-red; times in seconds of clip time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SignalPlan:
    """Fixed-time two-phase plan: phase 0 = E-W road (arms E, W), phase 1 = N-S road.

    Each phase: green, yellow, all-red; the two phases alternate, so crossing directions are
    never released together. Times in seconds relative to the clip start (t = 0). Pedestrians
    walking parallel to a phase may start crossing during the first `walk_s` of its green.
    """

    green_s: float = 14.0
    yellow_s: float = 3.0
    all_red_s: float = 1.0
    ew_green_start_s: float = -8.0
    walk_s: float = 5.0

    @property
    def cycle_s(self) -> float:
        return 2.0 * (self.green_s + self.yellow_s + self.all_red_s)

    def phase_start_s(self, phase: int) -> float:
        return self.ew_green_start_s + phase * 0.5 * self.cycle_s

    def _time_in_phase(self, phase: int, t_s: np.ndarray | float) -> np.ndarray:
        return np.mod(np.asarray(t_s, dtype=np.float64) - self.phase_start_s(phase), self.cycle_s)

    def state(self, phase: int, t_s: float) -> str:
        """'green' | 'yellow' | 'red' of `phase` at time `t_s`."""
        tau = float(self._time_in_phase(phase, t_s))
        if tau < self.green_s:
            return "green"
        return "yellow" if tau < self.green_s + self.yellow_s else "red"

    def walk(self, phase: int, t_s: float) -> bool:
        return bool(self._time_in_phase(phase, t_s) < self.walk_s)

    def changes(self, phase: int, t0_s: float, t1_s: float) -> list[tuple[float, str]]:
        """(time, new state) at t0 (the state then) and at every change in (t0, t1]."""
        out = [(t0_s, self.state(phase, t0_s))]
        bounds = (0.0, self.green_s, self.green_s + self.yellow_s)
        first = np.floor((t0_s - self.phase_start_s(phase)) / self.cycle_s) - 1
        for c in np.arange(first, first + 3 + (t1_s - t0_s) / self.cycle_s):
            for b, st in zip(bounds, ("green", "yellow", "red")):
                t = self.phase_start_s(phase) + c * self.cycle_s + b
                if t0_s < t <= t1_s + 1e-9:
                    out.append((float(t), st))
        return sorted(out)


def arm_phase(arm: int) -> int:
    """Signal phase of the traffic coming in on `arm`."""
    return arm % 2


def crosswalk_phase(arm: int) -> int:
    """Phase pedestrians crossing `arm` walk with (they move parallel to the other road)."""
    return (arm + 1) % 2
