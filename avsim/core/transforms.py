"""Rigid transforms (SE3) and rotation helpers.

Quaternions are scalar-first ``(w, x, y, z)``. `SE3` is batched: ``rotation (..., 3, 3)`` and
``translation (..., 3)``; a name like ``world_SE3_ego`` maps ego-frame points into the world.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from avsim.core.errors import AvsimValueError

UNIT_QUAT_TOLERANCE = 1e-3


def _as_float(a: np.ndarray | float, name: str) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise AvsimValueError(f"{name}: contains NaN or infinite values")
    return arr


def _check_last(arr: np.ndarray, shape: tuple[int, ...], name: str) -> None:
    if arr.shape[arr.ndim - len(shape) :] != shape or arr.ndim < len(shape):
        raise AvsimValueError(f"{name}: expected shape (..., {', '.join(map(str, shape))}), got {arr.shape}")


def check_unit_quat(q: np.ndarray, name: str = "quaternion") -> None:
    """Raise if any quaternion's norm deviates from 1 by more than 1e-3."""
    norms = np.linalg.norm(np.asarray(q, dtype=np.float64), axis=-1)
    bad = np.abs(norms - 1.0) > UNIT_QUAT_TOLERANCE
    if np.any(bad):
        first = int(np.flatnonzero(bad.ravel())[0])
        raise AvsimValueError(f"{name}: non-unit quaternion at row {first} (norm {norms.ravel()[first]:.6f})")


def quat_normalize(q: np.ndarray) -> np.ndarray:
    """Unit quaternions (..., 4) in canonical sign (w >= 0; first non-zero component > 0)."""
    q = _as_float(q, "quaternion")
    _check_last(q, (4,), "quaternion")
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(norm == 0):
        raise AvsimValueError("quaternion: zero-norm quaternion")
    q = q / norm
    # canonical sign (q and -q are one rotation): first component that is not ~0 is positive
    significant = np.abs(q) > 1e-12
    first = np.take_along_axis(q, np.argmax(significant, axis=-1)[..., None], axis=-1)
    return np.where(first < 0, -q, q)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) from quaternions (..., 4) (normalised first)."""
    w, x, y, z = np.moveaxis(quat_normalize(q), -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """Quaternions (..., 4) with w >= 0 from rotation matrices (..., 3, 3).

    Uses the largest-diagonal branch per element, which is accurate for every rotation.
    """
    R = _as_float(R, "rotation")
    _check_last(R, (3, 3), "rotation")
    m = R.reshape(-1, 3, 3)
    trace = m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2]
    candidates = np.stack(
        [
            np.stack([1 + trace, m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0], m[:, 1, 0] - m[:, 0, 1]], -1),
            np.stack([m[:, 2, 1] - m[:, 1, 2], 1 + m[:, 0, 0] - m[:, 1, 1] - m[:, 2, 2], m[:, 0, 1] + m[:, 1, 0], m[:, 0, 2] + m[:, 2, 0]], -1),
            np.stack([m[:, 0, 2] - m[:, 2, 0], m[:, 0, 1] + m[:, 1, 0], 1 - m[:, 0, 0] + m[:, 1, 1] - m[:, 2, 2], m[:, 1, 2] + m[:, 2, 1]], -1),
            np.stack([m[:, 1, 0] - m[:, 0, 1], m[:, 0, 2] + m[:, 2, 0], m[:, 1, 2] + m[:, 2, 1], 1 - m[:, 0, 0] - m[:, 1, 1] + m[:, 2, 2]], -1),
        ],
        1,
    )  # (N, 4 branches, 4)
    diag = np.stack([trace, m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]], -1)
    best = np.argmax(diag, axis=-1)
    q = candidates[np.arange(len(m)), best]
    return quat_normalize(q).reshape(R.shape[:-2] + (4,))


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b of quaternions (..., 4) (rotation b first, then a)."""
    aw, ax, ay, az = np.moveaxis(np.asarray(a, dtype=np.float64), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.asarray(b, dtype=np.float64), -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        -1,
    )


def quat_slerp(q0: np.ndarray, q1: np.ndarray, alpha: np.ndarray | float) -> np.ndarray:
    """Spherical interpolation along the shortest arc; alpha (...) may lie outside [0, 1]."""
    q0 = quat_normalize(q0)
    q1 = quat_normalize(q1)
    alpha = np.asarray(alpha, dtype=np.float64)[..., None]
    dot = np.sum(q0 * q1, axis=-1, keepdims=True)
    q1 = np.where(dot < 0, -q1, q1)  # shortest arc
    dot = np.clip(np.abs(dot), -1.0, 1.0)
    theta = np.arccos(dot)
    sin_theta = np.sin(theta)
    near = sin_theta < 1e-9  # nearly identical: linear interpolation is exact enough
    safe = np.where(near, 1.0, sin_theta)
    w0 = np.where(near, 1.0 - alpha, np.sin((1.0 - alpha) * theta) / safe)
    w1 = np.where(near, alpha, np.sin(alpha * theta) / safe)
    return quat_normalize(w0 * q0 + w1 * q1)


def yaw_to_quat(yaw_rad: np.ndarray | float) -> np.ndarray:
    """Quaternions (..., 4) of rotations by `yaw_rad` about +z."""
    half = 0.5 * np.asarray(yaw_rad, dtype=np.float64)
    zeros = np.zeros_like(half)
    return quat_normalize(np.stack([np.cos(half), zeros, zeros, np.sin(half)], -1))


def quat_to_yaw(q: np.ndarray) -> np.ndarray:
    """Heading angle (rad, in (-pi, pi]) of the rotated x axis projected on the ground plane."""
    return matrix_to_yaw(quat_to_matrix(q))


def yaw_to_matrix(yaw_rad: np.ndarray | float) -> np.ndarray:
    """Rotation matrices (..., 3, 3) about +z."""
    yaw = np.asarray(yaw_rad, dtype=np.float64)
    c, s = np.cos(yaw), np.sin(yaw)
    zeros, ones = np.zeros_like(yaw), np.ones_like(yaw)
    return np.stack(
        [np.stack([c, -s, zeros], -1), np.stack([s, c, zeros], -1), np.stack([zeros, zeros, ones], -1)], -2
    )


def matrix_to_yaw(R: np.ndarray) -> np.ndarray:
    """Heading (rad) of the rotated x axis in the xy plane."""
    R = np.asarray(R, dtype=np.float64)
    return np.arctan2(R[..., 1, 0], R[..., 0, 0])


def wrap_angle(angle_rad: np.ndarray | float) -> np.ndarray:
    """Wrap angles to [-pi, pi)."""
    return (np.asarray(angle_rad, dtype=np.float64) + np.pi) % (2 * np.pi) - np.pi


@dataclass(frozen=True, eq=False)
class SE3:
    """Batched rigid transform: ``p_target = rotation @ p_source + translation``.

    rotation: (..., 3, 3) orthonormal, det +1; translation: (..., 3). Batch shapes must match.
    """

    rotation: np.ndarray
    translation: np.ndarray

    def __post_init__(self) -> None:
        R = _as_float(self.rotation, "rotation")
        t = _as_float(self.translation, "translation")
        _check_last(R, (3, 3), "rotation")
        _check_last(t, (3,), "translation")
        if R.shape[:-2] != t.shape[:-1]:
            raise AvsimValueError(f"SE3: rotation batch {R.shape[:-2]} != translation batch {t.shape[:-1]}")
        err = np.abs(R @ np.swapaxes(R, -1, -2) - np.eye(3)).max(initial=0.0)
        if err > 1e-5:
            raise AvsimValueError(f"rotation: not orthonormal (max error {err:.2e})")
        if R.size and np.any(np.linalg.det(R) < 0):
            raise AvsimValueError("rotation: reflection (det < 0)")
        R.setflags(write=False)
        t.setflags(write=False)
        object.__setattr__(self, "rotation", R)
        object.__setattr__(self, "translation", t)

    # constructors -------------------------------------------------------------------------
    @classmethod
    def identity(cls, batch_shape: tuple[int, ...] = ()) -> SE3:
        return cls(np.broadcast_to(np.eye(3), batch_shape + (3, 3)).copy(), np.zeros(batch_shape + (3,)))

    @classmethod
    def from_matrix(cls, T: np.ndarray) -> SE3:
        T = _as_float(T, "matrix")
        _check_last(T, (4, 4), "matrix")
        return cls(T[..., :3, :3].copy(), T[..., :3, 3].copy())

    @classmethod
    def from_quat(cls, quat: np.ndarray, translation: np.ndarray) -> SE3:
        return cls(quat_to_matrix(quat), np.asarray(translation, dtype=np.float64))

    @classmethod
    def from_yaw(cls, yaw_rad: np.ndarray | float, translation: np.ndarray) -> SE3:
        return cls(yaw_to_matrix(yaw_rad), np.asarray(translation, dtype=np.float64))

    @classmethod
    def stack(cls, poses: list[SE3]) -> SE3:
        return cls(np.stack([p.rotation for p in poses]), np.stack([p.translation for p in poses]))

    # views --------------------------------------------------------------------------------
    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self.translation.shape[:-1]

    def __len__(self) -> int:
        if not self.batch_shape:
            raise TypeError("unbatched SE3 has no length")
        return self.batch_shape[0]

    def __getitem__(self, index) -> SE3:
        return SE3(self.rotation[index], self.translation[index])

    def as_matrix(self) -> np.ndarray:
        T = np.zeros(self.batch_shape + (4, 4))
        T[..., :3, :3] = self.rotation
        T[..., :3, 3] = self.translation
        T[..., 3, 3] = 1.0
        return T

    @property
    def quat(self) -> np.ndarray:
        return matrix_to_quat(self.rotation)

    @property
    def yaw_rad(self) -> np.ndarray:
        return matrix_to_yaw(self.rotation)

    # algebra ------------------------------------------------------------------------------
    def compose(self, other: SE3) -> SE3:
        """``a_SE3_b.compose(b_SE3_c) = a_SE3_c`` (batch shapes broadcast)."""
        R = self.rotation @ other.rotation
        t = np.einsum("...ij,...j->...i", self.rotation, other.translation) + self.translation
        return SE3(R, t)

    __matmul__ = compose

    def inverse(self) -> SE3:
        Rt = np.swapaxes(self.rotation, -1, -2)
        return SE3(Rt, -np.einsum("...ij,...j->...i", Rt, self.translation))

    def apply(self, points: np.ndarray) -> np.ndarray:
        """Transform points (..., N, 3) (or (3,) for an unbatched pose) into the target frame."""
        pts = np.asarray(points, dtype=np.float64)
        if pts.shape[-1] != 3:
            raise AvsimValueError(f"points: expected (..., 3), got {pts.shape}")
        if pts.ndim == 1:
            return self.rotation @ pts + self.translation
        return np.einsum("...ij,...nj->...ni", self.rotation, pts) + self.translation[..., None, :]
