"""The trajectory tracker: NAVSIM's LQR tracker (`batch_lqr.py`, `batch_lqr_utils.py`), restated.

A reference trajectory (poses at the sim's step, the first one the current pose) is turned into
velocity and curvature profiles by two regularised least-squares fits (jerk and curvature-rate
penalties), then two one-step LQR problems give the commands: a longitudinal one (velocity at
`tracking_horizon` steps ahead, acceleration held) and a lateral one (lateral error, heading
error and steering angle of the linearised bicycle over the horizon, steering rate held); near a
stop a proportional controller replaces both. The fits solve their normal equations with
`numpy.linalg.solve` where NAVSIM takes `pinv`: the matrices are positive definite (the penalty
terms), so the solutions are the same. The batched solves run with one BLAS thread (`_solve`): a
batch of small systems is one LAPACK call per matrix, and OpenBLAS's threads for each cost 200x
the solve itself on a loaded 2-core machine (3.5 s against 0.018 s for 200 systems of 82 unknowns).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from avsim.core.typing import NDArrayFloat
from avsim.sim.vehicle import StateIndex


@dataclass(frozen=True)
class LQRConfig:
    """NAVSIM's `BatchLQRTracker` defaults."""

    q_longitudinal: float = 10.0
    r_longitudinal: float = 1.0
    q_lateral: tuple[float, float, float] = (1.0, 10.0, 0.0)
    r_lateral: float = 1.0
    tracking_horizon: int = 10
    jerk_penalty: float = 1e-4
    curvature_rate_penalty: float = 1e-2
    stopping_proportional_gain: float = 0.5
    stopping_velocity_mps: float = 0.2


def _wrap(angle: NDArrayFloat) -> NDArrayFloat:
    return np.arctan2(np.sin(angle), np.cos(angle))


def _profile(initial: NDArrayFloat, derivatives: NDArrayFloat, dt_s: float) -> NDArrayFloat:
    """(B, M+1) values from initial (B,) and derivatives (B, M) by Euler integration."""
    return initial[:, None] + np.concatenate([np.zeros((len(initial), 1)), np.cumsum(derivatives * dt_s, axis=-1)], axis=-1)


@lru_cache(maxsize=16)
def _velocity_structure(m: int, jerk_penalty: float) -> tuple[NDArrayFloat, NDArrayFloat]:
    """The parts of the velocity fit that depend only on its size: the (2M, M) mask of the
    displacement matrix's nonzero acceleration terms and the jerk penalty's R^T R (M, M)."""
    mask = np.repeat(np.tril(np.ones((m, m)), k=0), 2, axis=0)
    band = np.zeros((m - 2, m - 1))
    idx = np.arange(m - 2)
    band[idx, idx + 1], band[idx, idx] = 1.0, -1.0
    R = np.concatenate([np.zeros((m - 2, 1)), band], axis=1)
    return mask, jerk_penalty * (R.T @ R)


def fit_velocity(xy_disp: NDArrayFloat, headings: NDArrayFloat, dt_s: float, jerk_penalty: float) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Initial velocity (B,) and accelerations (B, M-1) whose integration best explains the
    displacements along the headings (`_fit_initial_velocity_and_acceleration_profile`).

    Args:
        xy_disp: (B, M, 2) displacements between consecutive poses.
        headings: (B, M) heading at the start of each displacement.
        dt_s: time between poses.
        jerk_penalty: weight of the squared acceleration differences.

    Returns:
        (v0 (B,), accelerations (B, M-1)).
    """
    b, m = headings.shape
    y = xy_disp.reshape(b, -1)
    col = np.empty((b, 2 * m))
    col[:, 0::2], col[:, 1::2] = np.cos(headings), np.sin(headings)
    mask, penalty = _velocity_structure(m, float(jerk_penalty))
    A = col[..., None] * (dt_s**2 * mask)  # acceleration j acts on displacement i >= j (dt^2 each)
    A[..., 0] = col * dt_s
    At = A.transpose(0, 2, 1)
    x = _solve(At @ A + penalty, np.einsum("bij,bj->bi", At, y))
    return x[:, 0], x[:, 1:]


@lru_cache(maxsize=1)
def _blas_libraries() -> tuple[Any, ...]:
    """The process's BLAS libraries' thread controls (found once: finding them costs about a millisecond)."""
    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


def _solve(lhs: NDArrayFloat, rhs: NDArrayFloat) -> NDArrayFloat:
    """`numpy.linalg.solve` of a batch (B, n, n) x = (B, n) on one BLAS thread (each library set to one
    thread and back directly: threadpoolctl's `limit` context costs about 10 us a call, as much as a
    40 x 40 solve)."""
    libs = _blas_libraries()
    before = [lib.num_threads for lib in libs]
    for lib, n in zip(libs, before):
        if n != 1:
            lib.set_num_threads(1)
    try:
        return np.linalg.solve(lhs, rhs[..., None])[..., 0]
    finally:
        for lib, n in zip(libs, before):
            if n != 1:
                lib.set_num_threads(n)


@lru_cache(maxsize=16)
def _curvature_structure(m: int, curvature_rate_penalty: float, initial_curvature_penalty: float) -> tuple[NDArrayFloat, NDArrayFloat]:
    """The curvature fit's lower-triangular ones (M, M) and its penalty matrix Q (M, M)."""
    Q = curvature_rate_penalty * np.eye(m)
    Q[0, 0] = initial_curvature_penalty
    return np.tri(m), Q


def fit_curvature(heading_disp: NDArrayFloat, velocity: NDArrayFloat, dt_s: float, curvature_rate_penalty: float,
                  initial_curvature_penalty: float = 1e-10) -> tuple[NDArrayFloat, NDArrayFloat]:  # fmt: skip
    """Initial curvature (B,) and curvature rates (B, M-1) (`_fit_initial_curvature_and_curvature_rate_profile`).

    Args:
        heading_disp: (B, M) heading changes between poses.
        velocity: (B, M) velocity at the start of each change.
        dt_s: time between poses.
        curvature_rate_penalty: weight of the squared curvature rates.
        initial_curvature_penalty: small weight on the initial curvature (well posed at zero speed).

    Returns:
        (kappa0 (B,), curvature rates (B, M-1)).
    """
    b, m = heading_disp.shape
    tri, Q = _curvature_structure(m, float(curvature_rate_penalty), float(initial_curvature_penalty))
    A = np.repeat(tri[None], b, axis=0)
    A[:, :, 0] = velocity * dt_s
    A[:, 1:, 1:] *= (velocity * dt_s**2)[:, 1:, None]
    At = A.transpose(0, 2, 1)
    x = _solve(At @ A + Q, np.einsum("bij,bj->bi", At, heading_disp))
    return x[:, 0], x[:, 1:]


def velocity_curvature_profiles(poses: NDArrayFloat, dt_s: float, config: LQRConfig) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Velocity (B, M) and curvature (B, M) profiles of reference poses (B, M+1, 3)
    (`get_velocity_curvature_profiles_with_derivatives_from_poses`)."""
    diff = np.diff(poses, axis=1)
    v0, accel = fit_velocity(diff[..., :2], poses[:, :-1, 2], dt_s, config.jerk_penalty)
    velocity = _profile(v0, accel, dt_s)
    k0, rates = fit_curvature(_wrap(diff[..., 2]), velocity, dt_s, config.curvature_rate_penalty)
    return velocity, _profile(k0, rates, dt_s)


class LQRTracker:
    """NAVSIM's `BatchLQRTracker.track_trajectory` for a batch of reference trajectories.

    Args:
        wheel_base_m: the ego's wheel base.
        dt_s: time between reference poses (the sim step).
        config: weights and horizon (NAVSIM's defaults).
    """

    def __init__(self, wheel_base_m: float, dt_s: float, config: LQRConfig | None = None) -> None:
        self.wheel_base_m, self.dt_s = float(wheel_base_m), float(dt_s)
        self.config = config or LQRConfig()

    def commands(self, states: NDArrayFloat, reference: NDArrayFloat, index: int = 0,
                 profiles: tuple[NDArrayFloat, NDArrayFloat] | None = None) -> NDArrayFloat:  # fmt: skip
        """Acceleration and steering-rate commands that track `reference` from `states`.

        Args:
            states: (B, 11) current states.
            reference: (B, N+1, 3) reference poses (x, y, heading) at the sim step; pose `index`
                is the reference at the current time (0 in closed loop: the plan starts now).
            index: the current iteration within the reference (NAVSIM's `current_iteration.index`).
            profiles: the references' (velocity, curvature) profiles when already fitted.

        Returns:
            (B, 2) (acceleration m/s^2, steering rate rad/s).
        """
        cfg, h, dt = self.config, self.config.tracking_horizon, self.dt_s
        velocity, curvature = profiles if profiles is not None else velocity_curvature_profiles(reference, dt, cfg)
        ref = reference[:, index]
        dx, dy = states[:, StateIndex.X] - ref[:, 0], states[:, StateIndex.Y] - ref[:, 1]
        lateral = np.stack([-dx * np.sin(ref[:, 2]) + dy * np.cos(ref[:, 2]), _wrap(states[:, StateIndex.HEADING] - ref[:, 2]),
                            states[:, StateIndex.STEERING_ANGLE]], axis=-1)  # fmt: skip
        v0 = states[:, StateIndex.VELOCITY_X]
        ref_idx = min(index + h, velocity.shape[1] - 1)
        ref_v = velocity[:, ref_idx]
        curv = np.repeat(curvature[:, ref_idx, None], h, axis=1)
        curv[:, : ref_idx - index] = curvature[:, index:ref_idx]
        out = np.zeros((len(states), 2))
        stop = (ref_v <= cfg.stopping_velocity_mps) & (v0 <= cfg.stopping_velocity_mps)
        out[stop, 0] = -cfg.stopping_proportional_gain * (v0[stop] - ref_v[stop])
        go = ~stop
        if go.any():
            b_lon = h * dt
            accel = -1.0 / (b_lon * cfg.q_longitudinal * b_lon + cfg.r_longitudinal) * b_lon * cfg.q_longitudinal * (v0[go] - ref_v[go])
            out[go, 0] = accel
            v_prof = _profile(v0[go], np.repeat(accel[:, None], h, axis=1), dt)[:, :h]
            out[go, 1] = self._lateral(lateral[go], v_prof, curv[go])
        return out

    def _lateral(self, x0: NDArrayFloat, velocity: NDArrayFloat, curvature: NDArrayFloat) -> NDArrayFloat:
        """Steering rate (B,) of the one-step lateral LQR over the horizon (`_lateral_lqr_controller`).

        NAVSIM chains the horizon's step matrices S_k = [[1, a_k, 0], [0, 1, b_k], [0, 0, 1]]
        (a_k = v_k dt, b_k = v_k dt / L) and affine terms (0, w_k, 0) (w_k = -v_k kappa_k dt) one
        matrix product at a time; these matrices multiply in closed form (M(a, b, c) M(a', b', c') =
        M(a + a', b + b', c + c' + a b')), so the same A, B and g come from prefix sums:
        A = M(sum a, sum b, sum_{i > j} a_i b_j), B = dt sum_k (c_k, sum_{i > k} b_i, 1) and
        g = sum_k w_k (sum_{i > k} a_i, 1, 0), with c_k = sum_{i > j > k} a_i b_j.
        """
        cfg, dt, base = self.config, self.dt_s, self.wheel_base_m
        a = velocity * dt
        b = velocity * dt / base
        w = -velocity * curvature * dt
        after_a = np.cumsum(a[:, ::-1], axis=1)[:, ::-1] - a  # sum over i > k
        after_b = np.cumsum(b[:, ::-1], axis=1)[:, ::-1] - b
        ab = b * after_a  # a_i b_j summed over i > j, per j
        after_ab = np.cumsum(ab[:, ::-1], axis=1)[:, ::-1] - ab  # c_k
        A = np.zeros((len(a), 3, 3))
        A[:, 0, 0] = A[:, 1, 1] = A[:, 2, 2] = 1.0
        A[:, 0, 1], A[:, 1, 2], A[:, 0, 2] = a.sum(axis=1), b.sum(axis=1), ab.sum(axis=1)
        B = dt * np.stack([after_ab.sum(axis=1), after_b.sum(axis=1), np.full(len(a), float(a.shape[1]))], axis=1)
        g = np.stack([(w * after_a).sum(axis=1), w.sum(axis=1), np.zeros(len(a))], axis=1)
        err = np.einsum("bij,bj->bi", A, x0) + g
        err[:, 1:] = _wrap(err[:, 1:])
        q = np.asarray(cfg.q_lateral)
        btq = B * q  # B^T Q for diagonal Q, (b, 3)
        inv = -1.0 / ((btq * B).sum(axis=1) + cfg.r_lateral)
        return inv * (btq * err).sum(axis=1)
