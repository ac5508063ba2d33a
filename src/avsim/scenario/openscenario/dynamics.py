"""Transition dynamics: how a speed or a lateral offset goes from its start value a to its target
a + b over a parameter range c (a duration, a distance, or the range a peak rate implies).

The shapes are the standard's, with esmini's formulas (`OSCPrivateAction.cpp`, TransitionDynamics):

- step: the target at once;
- linear: f(x) = a + b x / c;
- cubic: f(x) = a + 3 b (x/c)^2 - 2 b (x/c)^3 (zero slope at both ends; peak slope 1.5 b / c);
- sinusoidal: f(x) = a - b (cos(pi x / c) - 1) / 2 (peak slope pi b / (2 c)).

With the `rate` dimension the value is the peak rate and c follows from it (linear: b / rate,
cubic: 1.5 b / rate, sinusoidal: pi b / (2 rate)); the parameter then runs in time. A maximum
rate (an entity's acceleration limit) stretches the parameter's progress (`scale`), as esmini's
`SetMaxRate` does. A parameter range under 1e-6 is a step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from avsim.scenario.openscenario.model import DynamicsDimension, DynamicsShape

SMALL = 1e-6  # esmini's SMALL_NUMBER
LARGE = 1e10  # esmini's LARGE_NUMBER


def _avoid_zero(x: float) -> float:
    return x if abs(x) > SMALL else (SMALL if x >= 0 else -SMALL)


@dataclass
class Transition:
    """A running transition (mutable: the action steps it).

    Args:
        shape: the shape.
        dimension: time, distance or rate.
        value: the duration (s), distance (m) or peak rate (unit/s).
        start: the start value a.
        target: the target value a + b.
    """

    shape: DynamicsShape
    dimension: DynamicsDimension
    value: float
    start: float = 0.0
    target: float = 0.0
    param: float = 0.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        self.range = self.value
        self.set_values(self.start, self.target)

    def set_values(self, start: float, target: float) -> None:
        """Set a and a + b (with the rate dimension the range follows from the peak rate)."""
        self.start, self.target = start, target
        if self.dimension is DynamicsDimension.RATE and self.value > SMALL:
            rate = math.copysign(abs(self.value), self.target - self.start)
            self.range = _avoid_zero(self.range_for_peak(rate))

    @property
    def is_step(self) -> bool:
        return self.shape is DynamicsShape.STEP or (self.dimension is not DynamicsDimension.RATE and self.range < SMALL)

    @property
    def delta(self) -> float:
        return self.target - self.start

    def range_for_peak(self, peak: float) -> float:
        """The parameter range whose peak slope is `peak` (0 for a step)."""
        if self.shape is DynamicsShape.STEP:
            return 0.0
        factor = {DynamicsShape.LINEAR: 1.0, DynamicsShape.CUBIC: 1.5, DynamicsShape.SINUSOIDAL: math.pi / 2}[self.shape]
        return factor * self.delta / peak

    def range_for_peak_second(self, peak: float) -> float:
        """The parameter range whose peak second derivative is `peak` (esmini's
        `GetTargetParamValByPrimPrimPeak`; linear reuses the cubic equation)."""
        if self.shape is DynamicsShape.STEP:
            return 0.0
        if self.shape is DynamicsShape.SINUSOIDAL:
            return math.pi * math.sqrt(abs(self.delta) / (2 * peak))
        return math.sqrt(6 * abs(self.delta) / peak)

    def peak_slope(self) -> float:
        """The largest slope of the shape (a step: an infinite one, signed)."""
        if self.dimension is DynamicsDimension.RATE:
            return math.copysign(abs(self.value), self.delta)
        if self.is_step:
            return LARGE * (1.0 if self.delta > 0 else -1.0 if self.delta < 0 else 0.0)
        factor = {DynamicsShape.LINEAR: 1.0, DynamicsShape.CUBIC: 1.5, DynamicsShape.SINUSOIDAL: math.pi / 2}[self.shape]
        return factor * self.delta / _avoid_zero(self.range)

    def limit_slope(self, max_slope: float) -> None:
        """Stretch the parameter's progress so the slope never exceeds `max_slope` (esmini's `SetMaxRate`)."""
        peak = abs(self.peak_slope())
        self.scale = peak / abs(_avoid_zero(max_slope)) if peak > abs(max_slope) else 1.0

    def value_at(self, shape: DynamicsShape | None = None) -> float:
        """f(param) of `shape` (default: the transition's own)."""
        if self.is_step:
            return self.target
        shape = shape or self.shape
        x = self.param / _avoid_zero(self.range)
        if shape is DynamicsShape.LINEAR:
            return self.start + self.delta * x
        if shape is DynamicsShape.SINUSOIDAL:
            return self.start - self.delta * (math.cos(math.pi * x) - 1) / 2
        return self.start + self.delta * x * x * (3 - 2 * x)

    def slope(self) -> float:
        """f'(param), divided by the progress scale (esmini's `EvaluateScaledPrim`)."""
        if self.is_step:
            return self.peak_slope() / self.scale
        c = _avoid_zero(self.range)
        if self.shape is DynamicsShape.LINEAR:
            out = self.delta / c
        elif self.shape is DynamicsShape.SINUSOIDAL:
            out = math.pi * self.delta * math.sin(math.pi * self.param / c) / (2 * c)
        else:
            out = 6 * self.delta * (c - self.param) * self.param / c**3
        return out / self.scale

    def step(self, d_param: float) -> None:
        """Advance the parameter by `d_param` (divided by the scale), clamped to [0, range]."""
        self.param = min(max(self.param + d_param / self.scale, 0.0), self.range)

    @property
    def done(self) -> bool:
        return self.param > self.range - SMALL
