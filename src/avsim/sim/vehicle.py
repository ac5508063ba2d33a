"""The ego vehicle: its state array, its dimensions and the kinematic bicycle model that moves it.

The state is NAVSIM's array representation (`navsim/.../pdm_planner/utils/pdm_enums.py`,
`StateIndex`): one float64 row of 11 values at the rear-axle centre, in the world frame. The
motion model restates NAVSIM's `BatchKinematicBicycleModel.propagate_state` (first-order lags on
acceleration and steering angle, forward Euler, rear-axle reference) and adds the limits of
`VehicleLimits` (acceleration, jerk, steering angle and rate, no reversing); with
`VehicleLimits.navsim()` it is NAVSIM's model exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.typing import NDArrayFloat

# a typical car where a scenario does not say (as `avsim validate` assumes; avsim.edit.common)
DEFAULT_SIZE_M = (4.8, 2.0, 1.6)
DEFAULT_REAR_AXLE_TO_CENTER_M = 1.4
WHEEL_BASE_FRACTION = 0.597  # nuPlan's Pacifica: wheel base 3.089 m of 5.176 m length


class StateIndex(IntEnum):
    """Columns of an ego state row (NAVSIM's `StateIndex`, same order)."""

    X = 0
    Y = 1
    HEADING = 2
    VELOCITY_X = 3
    VELOCITY_Y = 4
    ACCELERATION_X = 5
    ACCELERATION_Y = 6
    STEERING_ANGLE = 7
    STEERING_RATE = 8
    ANGULAR_VELOCITY = 9
    ANGULAR_ACCELERATION = 10


N_STATE = len(StateIndex)


@dataclass(frozen=True)
class VehicleParameters:
    """Box and axle geometry of the ego (nuPlan's `VehicleParameters`, the parts the sim reads).

    length_m, width_m, height_m: the box; rear_axle_to_center_m: box centre ahead of the rear
    axle; wheel_base_m: rear to front axle.
    """

    length_m: float
    width_m: float
    height_m: float
    rear_axle_to_center_m: float
    wheel_base_m: float

    def __post_init__(self) -> None:
        for name in ("length_m", "width_m", "height_m", "wheel_base_m"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise AvsimValueError(f"VehicleParameters.{name}: must be a finite number > 0, got {value!r}")
        if not math.isfinite(self.rear_axle_to_center_m):
            raise AvsimValueError("VehicleParameters.rear_axle_to_center_m: must be finite")

    @property
    def half_length_m(self) -> float:
        return self.length_m / 2

    @property
    def half_width_m(self) -> float:
        return self.width_m / 2

    @classmethod
    def pacifica(cls) -> VehicleParameters:
        """nuPlan's `get_pacifica_parameters()` (the vehicle NAVSIM scores with)."""
        return cls(length_m=4.049 + 1.127, width_m=1.1485 * 2.0, height_m=1.777,
                   rear_axle_to_center_m=(4.049 + 1.127) / 2 - 1.127, wheel_base_m=3.089)  # fmt: skip

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> VehicleParameters:
        """The ego of a scenario: `ego_size_m`, `ego_rear_axle_to_center_m` and `ego_wheel_base_m`
        from its metadata where given, else a typical car (`DEFAULT_SIZE_M`, wheel base
        `WHEEL_BASE_FRACTION` of the length).

        Args:
            metadata: the scenario's metadata.

        Returns:
            The parameters.
        """
        size = metadata.get("ego_size_m")
        ok = isinstance(size, (list, tuple)) and len(size) == 3 and all(isinstance(v, (int, float)) for v in size)
        length, width, height = (float(v) for v in size) if ok else DEFAULT_SIZE_M  # type: ignore[union-attr]
        offset = metadata.get("ego_rear_axle_to_center_m")
        offset = float(offset) if isinstance(offset, (int, float)) and not isinstance(offset, bool) else DEFAULT_REAR_AXLE_TO_CENTER_M
        base = metadata.get("ego_wheel_base_m")
        base = float(base) if isinstance(base, (int, float)) and not isinstance(base, bool) else WHEEL_BASE_FRACTION * length
        return cls(length, width, height, offset, base)


@dataclass(frozen=True)
class VehicleLimits:
    """What the ego's actuators can do (applied to the commands before the model's lags).

    max_accel_mps2 / max_decel_mps2: commanded longitudinal acceleration in [-max_decel, max_accel];
    max_jerk_mps3: the commanded acceleration changes by at most this times dt per step;
    max_steering_angle_rad: tyre angle bound (NAVSIM: pi/3); max_steering_rate_radps: commanded
    steering rate bound; accel_time_constant_s / steering_time_constant_s: NAVSIM's first-order
    lags; allow_reverse: False keeps the speed >= 0 (NAVSIM does not bound it).
    """

    max_accel_mps2: float = 4.0
    max_decel_mps2: float = 9.0
    max_jerk_mps3: float = 30.0
    max_steering_angle_rad: float = math.pi / 3
    max_steering_rate_radps: float = 2.0
    accel_time_constant_s: float = 0.2
    steering_time_constant_s: float = 0.05
    allow_reverse: bool = False

    def __post_init__(self) -> None:
        for name in ("max_accel_mps2", "max_decel_mps2", "max_jerk_mps3", "max_steering_angle_rad", "max_steering_rate_radps"):
            value = getattr(self, name)
            if not value > 0:
                raise AvsimValueError(f"VehicleLimits.{name}: must be > 0 (inf for none), got {value!r}")
        for name in ("accel_time_constant_s", "steering_time_constant_s"):
            if not getattr(self, name) >= 0:
                raise AvsimValueError(f"VehicleLimits.{name}: must be >= 0")

    @classmethod
    def navsim(cls) -> VehicleLimits:
        """NAVSIM's `BatchKinematicBicycleModel` defaults: only the steering angle is bounded."""
        inf = math.inf
        return cls(inf, inf, inf, math.pi / 3, inf, 0.2, 0.05, allow_reverse=True)


class KinematicBicycle:
    """NAVSIM's kinematic bicycle model (rear-axle reference) with actuator limits.

    Args:
        vehicle: the ego's geometry (its wheel base).
        limits: actuator limits (`VehicleLimits.navsim()`: none but NAVSIM's).
    """

    def __init__(self, vehicle: VehicleParameters, limits: VehicleLimits | None = None) -> None:
        self.vehicle = vehicle
        self.limits = limits or VehicleLimits()

    def limit_commands(self, states: NDArrayFloat, commands: NDArrayFloat, dt_s: float) -> NDArrayFloat:
        """The commands the actuators can follow: acceleration within its bounds and within the jerk
        bound of the current acceleration, steering rate within its bound.

        Args:
            states: (B, 11) current states.
            commands: (B, 2) (acceleration m/s^2, steering rate rad/s).
            dt_s: the step.

        Returns:
            (B, 2) limited commands.
        """
        lim = self.limits
        accel = states[:, StateIndex.ACCELERATION_X]
        a = np.clip(commands[:, 0], -lim.max_decel_mps2, lim.max_accel_mps2)
        a = np.clip(a, accel - lim.max_jerk_mps3 * dt_s, accel + lim.max_jerk_mps3 * dt_s)
        rate = np.clip(commands[:, 1], -lim.max_steering_rate_radps, lim.max_steering_rate_radps)
        return np.stack([a, rate], axis=1)

    def propagate(self, states: NDArrayFloat, commands: NDArrayFloat, dt_s: float) -> NDArrayFloat:
        """One step of the model (NAVSIM's `propagate_state` after `limit_commands`).

        Args:
            states: (B, 11) states at t.
            commands: (B, 2) (acceleration, steering rate) commands.
            dt_s: the step (s).

        Returns:
            (B, 11) states at t + dt.
        """
        lim, base = self.limits, self.vehicle.wheel_base_m
        cmd = self.limit_commands(states, commands, dt_s)
        accel, steer = states[:, StateIndex.ACCELERATION_X], states[:, StateIndex.STEERING_ANGLE]
        ideal_steer = dt_s * cmd[:, 1] + steer
        # first-order lags (NAVSIM `_update_commands`)
        new_accel = dt_s / (dt_s + lim.accel_time_constant_s) * (cmd[:, 0] - accel) + accel
        new_steer = dt_s / (dt_s + lim.steering_time_constant_s) * (ideal_steer - steer) + steer
        steer_rate = (new_steer - steer) / dt_s
        v = states[:, StateIndex.VELOCITY_X]
        heading = states[:, StateIndex.HEADING]
        out = states.copy()
        out[:, StateIndex.X] = states[:, StateIndex.X] + v * np.cos(heading) * dt_s
        out[:, StateIndex.Y] = states[:, StateIndex.Y] + v * np.sin(heading) * dt_s
        # NAVSIM integrates the heading with the steering angle before this step's change
        out[:, StateIndex.HEADING] = _principal_value(heading + v * np.tan(steer) / base * dt_s)
        v_next = v + new_accel * dt_s
        if not lim.allow_reverse:
            stopped = v_next < 0.0
            new_accel = np.where(stopped, -v / dt_s, new_accel)  # the acceleration that stops it exactly
            v_next = np.maximum(v_next, 0.0)
        out[:, StateIndex.VELOCITY_X] = v_next
        out[:, StateIndex.VELOCITY_Y] = 0.0
        out[:, StateIndex.STEERING_ANGLE] = np.clip(steer + steer_rate * dt_s, -lim.max_steering_angle_rad, lim.max_steering_angle_rad)
        out[:, StateIndex.ANGULAR_VELOCITY] = v_next * np.tan(out[:, StateIndex.STEERING_ANGLE]) / base
        out[:, StateIndex.ACCELERATION_X] = new_accel
        out[:, StateIndex.ACCELERATION_Y] = 0.0
        out[:, StateIndex.ANGULAR_ACCELERATION] = (out[:, StateIndex.ANGULAR_VELOCITY] - states[:, StateIndex.ANGULAR_VELOCITY]) / dt_s
        out[:, StateIndex.STEERING_RATE] = steer_rate
        return out


def _principal_value(angle_rad: NDArrayFloat) -> NDArrayFloat:
    """Angles wrapped to [-pi, pi) (nuPlan's `principal_value`)."""
    return (angle_rad + np.pi) % (2 * np.pi) - np.pi


def initial_state(x_m: float, y_m: float, heading_rad: float, speed_mps: float, accel_mps2: float = 0.0,
                  yaw_rate_radps: float = 0.0, wheel_base_m: float = 2.9) -> NDArrayFloat:  # fmt: skip
    """One ego state row from a pose and its motion (steering from the yaw rate: tan(delta) = L w / v).

    Args:
        x_m, y_m, heading_rad: the rear-axle pose in the world.
        speed_mps: longitudinal speed.
        accel_mps2: longitudinal acceleration.
        yaw_rate_radps: yaw rate.
        wheel_base_m: for the steering angle.

    Returns:
        (11,) float64.
    """
    state = np.zeros(N_STATE)
    state[StateIndex.X], state[StateIndex.Y], state[StateIndex.HEADING] = x_m, y_m, heading_rad
    state[StateIndex.VELOCITY_X], state[StateIndex.ACCELERATION_X] = speed_mps, accel_mps2
    state[StateIndex.ANGULAR_VELOCITY] = yaw_rate_radps
    if speed_mps > 0.5:
        state[StateIndex.STEERING_ANGLE] = float(np.clip(np.arctan(wheel_base_m * yaw_rate_radps / speed_mps), -np.pi / 3, np.pi / 3))
    return state


def to_ego_frame(poses_world: NDArrayFloat, state: NDArrayFloat) -> NDArrayFloat:
    """World poses (N, 3) in the frame of the ego state row (rear axle)."""
    x, y, h = state[StateIndex.X], state[StateIndex.Y], state[StateIndex.HEADING]
    c, s = np.cos(h), np.sin(h)
    dx, dy = poses_world[:, 0] - x, poses_world[:, 1] - y
    heading = (poses_world[:, 2] - h + np.pi) % (2 * np.pi) - np.pi
    return np.stack([c * dx + s * dy, -s * dx + c * dy, heading], axis=1)
