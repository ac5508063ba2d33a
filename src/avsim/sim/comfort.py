"""NAVSIM's comfort metrics (`pdm_comfort_metrics.py`), restated on avsim's state arrays.

History comfort (HC; NAVSIM v1's comfort C on a proposal alone): every one of six signals stays
strictly inside its bound over the whole sequence, each signal from Savitzky-Golay filters of the
states (`scipy.signal.savgol_filter`, NAVSIM's window lengths and orders):

| signal | bound |
|---|---|
| longitudinal acceleration at the box centre | (-4.05, 2.40) m/s^2 |
| lateral acceleration at the box centre (the state's ACCELERATION_Y, 0 for the bicycle model, as NAVSIM) | (-4.89, 4.89) m/s^2 |
| jerk of the acceleration magnitude | (-8.37, 8.37) m/s^3 |
| longitudinal jerk | (-4.13, 4.13) m/s^3 |
| yaw acceleration | (-1.93, 1.93) rad/s^2 |
| yaw rate | (-0.95, 0.95) rad/s |

Extended comfort (EC, two frames): the RMS differences of acceleration, jerk, yaw rate and yaw
acceleration between two overlapping simulated plans stay within 0.7, 0.5, 0.1, 0.1.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.signal import savgol_filter

from avsim.core.typing import NDArrayBool, NDArrayFloat
from avsim.sim.vehicle import StateIndex

MAX_ABS_MAG_JERK = 8.37
MAX_ABS_LAT_ACCEL = 4.89
MAX_LON_ACCEL = 2.40
MIN_LON_ACCEL = -4.05
MAX_ABS_YAW_ACCEL = 1.93
MAX_ABS_LON_JERK = 4.13
MAX_ABS_YAW_RATE = 0.95
EC_ACCELERATION = 0.7
EC_JERK = 0.5
EC_YAW_RATE = 0.1
EC_YAW_ACCEL = 0.1


@lru_cache(maxsize=64)
def _savgol_operator(n: int, window: int, poly: int, deriv: int, delta: float) -> NDArrayFloat:
    """The (n, n) matrix of `savgol_filter` along an axis of length n (mode "interp"): the filter is
    linear, so its columns are the filtered unit vectors (computed once per shape and options)."""
    return savgol_filter(np.eye(n), window_length=window, polyorder=poly, deriv=deriv, delta=delta, axis=0)


def savgol(y: NDArrayFloat, window: int, poly: int, deriv: int = 0, delta: float = 1.0) -> NDArrayFloat:
    """`scipy.signal.savgol_filter(y, window, poly, deriv, delta, axis=-1)` as one matrix product
    (the same numbers up to rounding; a batch of sequences costs one product).

    Args:
        y: (..., n) sequences.
        window, poly, deriv, delta: the filter's options.

    Returns:
        (..., n) filtered sequences.
    """
    op = _savgol_operator(int(y.shape[-1]), int(window), int(poly), int(deriv), float(delta))
    return np.asarray(y, np.float64) @ op.T


def center_acceleration(states: NDArrayFloat, rear_axle_to_center_m: float) -> NDArrayFloat:
    """(..., 2) acceleration at the box centre (NAVSIM's `get_acceleration_shifted` by (d, 0)):
    ax + d w^2 + d w_dot, ay."""
    w, w_dot = states[..., StateIndex.ANGULAR_VELOCITY], states[..., StateIndex.ANGULAR_ACCELERATION]
    ax = states[..., StateIndex.ACCELERATION_X] + rear_axle_to_center_m * w**2 + rear_axle_to_center_m * w_dot
    return np.stack([ax, states[..., StateIndex.ACCELERATION_Y]], axis=-1)


def _acceleration(states: NDArrayFloat, coordinate: str, rear_axle_to_center_m: float, window: int = 8) -> NDArrayFloat:
    n_time = states.shape[-2]
    if coordinate in ("x", "y"):
        acc = center_acceleration(states, rear_axle_to_center_m)[..., 0 if coordinate == "x" else 1]
    else:
        acc = np.hypot(states[..., StateIndex.ACCELERATION_X], states[..., StateIndex.ACCELERATION_Y])
    if n_time <= 2:  # too few states for NAVSIM's quadratic filter (an episode that ended at once): used unfiltered
        return np.round(acc, 8)
    return np.round(savgol(acc, min(window, n_time), 2), 8)


def _derivative(y: NDArrayFloat, time_s: NDArrayFloat, window: int = 5, poly: int = 2, deriv: int = 1) -> NDArrayFloat:
    """NAVSIM's `_approximate_derivatives`: a Savitzky-Golay derivative over equally spaced times."""
    window = min(window, len(time_s))
    if not poly < window:
        raise ValueError(f"{poly} < {window} does not hold!")
    dx = np.diff(time_s)
    if not (dx > 0).all():
        raise RuntimeError("dx is not monotonically increasing!")
    return savgol(y, window, poly, deriv, float(dx.mean()))


def _jerk(states: NDArrayFloat, coordinate: str, time_s: NDArrayFloat, rear_axle_to_center_m: float) -> NDArrayFloat:
    acc = _acceleration(states, coordinate, rear_axle_to_center_m)
    if states.shape[-2] <= 2:  # no quadratic fit through fewer than 3 states: no jerk to measure
        return np.zeros_like(acc)
    return np.round(_derivative(acc, time_s, window=min(15, states.shape[-2]), poly=2), 8)


def unwrap_heading(headings: NDArrayFloat) -> NDArrayFloat:
    """NAVSIM's `_phase_unwrap` (successive differences within pi)."""
    adjust = np.zeros_like(headings)
    adjust[..., 1:] = np.cumsum(np.round(np.diff(headings, axis=-1) / (2 * np.pi)), axis=-1)
    return headings - 2 * np.pi * adjust


def _yaw_rate(states: NDArrayFloat, time_s: NDArrayFloat, deriv: int = 1, poly: int = 2) -> NDArrayFloat:
    # NAVSIM passes no window here: `_approximate_derivatives`' default of 5
    if states.shape[-2] <= poly:  # too few states for the fit (an episode that ended at once): no rate to measure
        return np.zeros(states.shape[:-1])
    return np.round(_derivative(unwrap_heading(states[..., StateIndex.HEADING]), time_s, deriv=deriv, poly=poly), 8)


def _within(metric: NDArrayFloat, lo: float | None, hi: float | None) -> NDArrayBool:
    """NAVSIM's `_within_bound`: strictly inside (a falsy bound means none), over the last axis."""
    lo = lo if lo else -np.inf
    hi = hi if hi else np.inf
    return np.all((metric > lo) & (metric < hi), axis=-1)


def comfort_signals(states: NDArrayFloat, time_s: NDArrayFloat, rear_axle_to_center_m: float) -> dict[str, NDArrayFloat]:
    """The six filtered signals (each (B, T)) of `ego_is_comfortable`.

    Args:
        states: (B, T, 11) states.
        time_s: (T,) equally spaced times.
        rear_axle_to_center_m: the ego's rear-axle-to-centre distance.

    Returns:
        lon_acceleration, lat_acceleration, jerk, lon_jerk, yaw_acceleration, yaw_rate.
    """
    return {
        "lon_acceleration": _acceleration(states, "x", rear_axle_to_center_m),
        "lat_acceleration": _acceleration(states, "y", rear_axle_to_center_m),
        "jerk": _jerk(states, "magnitude", time_s, rear_axle_to_center_m),
        "lon_jerk": _jerk(states, "x", time_s, rear_axle_to_center_m),
        "yaw_acceleration": _yaw_rate(states, time_s, deriv=2, poly=3),
        "yaw_rate": _yaw_rate(states, time_s),
    }


BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "lon_acceleration": (MIN_LON_ACCEL, MAX_LON_ACCEL),
    "lat_acceleration": (-MAX_ABS_LAT_ACCEL, MAX_ABS_LAT_ACCEL),
    "jerk": (-MAX_ABS_MAG_JERK, MAX_ABS_MAG_JERK),
    "lon_jerk": (-MAX_ABS_LON_JERK, MAX_ABS_LON_JERK),
    "yaw_acceleration": (-MAX_ABS_YAW_ACCEL, MAX_ABS_YAW_ACCEL),
    "yaw_rate": (-MAX_ABS_YAW_RATE, MAX_ABS_YAW_RATE),
}


def ego_is_comfortable(states: NDArrayFloat, time_s: NDArrayFloat, rear_axle_to_center_m: float) -> NDArrayBool:
    """(B, 6) whether each signal stays within its bound (NAVSIM's `ego_is_comfortable`).

    Args:
        states: (B, T, 11) states.
        time_s: (T,) times.
        rear_axle_to_center_m: the ego's rear-axle-to-centre distance.

    Returns:
        (B, 6) bool in `BOUNDS` order.
    """
    signals = comfort_signals(states, time_s, rear_axle_to_center_m)
    return np.stack([_within(signals[k], *BOUNDS[k]) for k in BOUNDS], axis=-1)


def two_frame_extended_comfort(states_1: NDArrayFloat, states_2: NDArrayFloat, time_s: NDArrayFloat) -> NDArrayBool:
    """(B,) NAVSIM's `ego_is_two_frame_extended_comfort` of two overlapping state sequences (B, T, 11)."""

    def features(st: NDArrayFloat) -> list[NDArrayFloat]:
        return [_acceleration(st, "magnitude", 0.0), _jerk(st, "magnitude", time_s, 0.0), _yaw_rate(st, time_s),
                _yaw_rate(st, time_s, deriv=2)]  # fmt: skip

    rms = [np.sqrt(np.mean((a - b) ** 2, axis=1)) for a, b in zip(features(states_1), features(states_2))]
    limits = (EC_ACCELERATION, EC_JERK, EC_YAW_RATE, EC_YAW_ACCEL)
    return np.logical_and.reduce([r <= lim for r, lim in zip(rms, limits)])
