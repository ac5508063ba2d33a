"""Rigid transforms (SE3) and rotation helpers.

Quaternions are scalar-first ``(w, x, y, z)``. `SE3` is batched: ``rotation (..., 3, 3)`` and
``translation (..., 3)``; a name like ``world_SE3_ego`` maps ego-frame points into the world.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape

UNIT_QUAT_TOLERANCE = 1e-3


def _as_float(a: np.ndarray | float, name: str) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise AvsimValueError(f"{name}: contains NaN or infinite values")
    return arr


def _check_last(arr: np.ndarray, shape: tuple[int, ...], name: str) -> None:
    check_shape(arr, ("*", *shape), name)


def check_unit_quat(q: np.ndarray, name: str = "quaternion") -> None:
    """Raise if any quaternion's norm deviates from 1 by more than 1e-3.

    Args:
        q: (..., 4) quaternions (w, x, y, z).
        name: what `q` is, for the error message.

    Raises:
        AvsimValueError: a quaternion is not of unit norm (the first bad row is named).
    """
    norms = np.linalg.norm(np.asarray(q, dtype=np.float64), axis=-1)
    bad = np.abs(norms - 1.0) > UNIT_QUAT_TOLERANCE
    if np.any(bad):
        first = int(np.flatnonzero(bad.ravel())[0])
        raise AvsimValueError(f"{name}: non-unit quaternion at row {first} (norm {norms.ravel()[first]:.6f})")


def quat_normalize(q: np.ndarray) -> np.ndarray:
    """Unit quaternions (..., 4) in canonical sign (w >= 0; first non-zero component > 0).

    Args:
        q: (..., 4) quaternions (w, x, y, z), any non-zero norm.

    Returns:
        (..., 4) float64 unit quaternions, one sign per rotation.
    """
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
    """Rotation matrices (..., 3, 3) from quaternions (..., 4) (normalised first).

    Args:
        q: (..., 4) quaternions (w, x, y, z).

    Returns:
        (..., 3, 3) float64 rotation matrices.
    """
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

    Args:
        R: (..., 3, 3) rotation matrices.

    Returns:
        (..., 4) float64 unit quaternions (w, x, y, z) in canonical sign.
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
    """Hamilton product a * b of quaternions (..., 4) (rotation b first, then a).

    Args:
        a: (..., 4) quaternions (w, x, y, z).
        b: (..., 4) quaternions; batch shapes broadcast with `a`.

    Returns:
        (..., 4) float64 products (not renormalised).
    """
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
    """Spherical interpolation along the shortest arc; alpha (...) may lie outside [0, 1].

    Args:
        q0: (..., 4) start quaternions.
        q1: (..., 4) end quaternions.
        alpha: (...) interpolation parameters (0 -> q0, 1 -> q1), or one float.

    Returns:
        (..., 4) float64 unit quaternions in canonical sign.
    """
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
    """Quaternions (..., 4) of rotations by `yaw_rad` about +z.

    Args:
        yaw_rad: (...) heading angles in radians, or one float.

    Returns:
        (..., 4) float64 unit quaternions (w, x, y, z).
    """
    half = 0.5 * np.asarray(yaw_rad, dtype=np.float64)
    zeros = np.zeros_like(half)
    return quat_normalize(np.stack([np.cos(half), zeros, zeros, np.sin(half)], -1))


def quat_to_yaw(q: np.ndarray) -> np.ndarray:
    """Heading angle (rad, in (-pi, pi]) of the rotated x axis projected on the ground plane.

    Args:
        q: (..., 4) quaternions (w, x, y, z).

    Returns:
        (...) float64 headings in radians.
    """
    return matrix_to_yaw(quat_to_matrix(q))


def yaw_to_matrix(yaw_rad: np.ndarray | float) -> np.ndarray:
    """Rotation matrices (..., 3, 3) about +z.

    Args:
        yaw_rad: (...) heading angles in radians, or one float.

    Returns:
        (..., 3, 3) float64 rotation matrices.
    """
    yaw = np.asarray(yaw_rad, dtype=np.float64)
    c, s = np.cos(yaw), np.sin(yaw)
    zeros, ones = np.zeros_like(yaw), np.ones_like(yaw)
    return np.stack(
        [np.stack([c, -s, zeros], -1), np.stack([s, c, zeros], -1), np.stack([zeros, zeros, ones], -1)], -2
    )


def matrix_to_yaw(R: np.ndarray) -> np.ndarray:
    """Heading (rad) of the rotated x axis in the xy plane.

    Args:
        R: (..., 3, 3) rotation matrices.

    Returns:
        (...) float64 headings in radians, in (-pi, pi].
    """
    R = np.asarray(R, dtype=np.float64)
    return np.arctan2(R[..., 1, 0], R[..., 0, 0])


def wrap_angle(angle_rad: np.ndarray | float) -> np.ndarray:
    """Wrap angles to [-pi, pi).

    Args:
        angle_rad: (...) angles in radians, or one float.

    Returns:
        (...) float64 wrapped angles.
    """
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
        """Identity poses.

        Args:
            batch_shape: batch dimensions of the result; () for one pose.

        Returns:
            SE3 with rotation (*batch_shape, 3, 3) = I and translation (*batch_shape, 3) = 0.
        """
        return cls(np.broadcast_to(np.eye(3), batch_shape + (3, 3)).copy(), np.zeros(batch_shape + (3,)))

    @classmethod
    def from_matrix(cls, T: np.ndarray) -> SE3:
        """Poses from homogeneous matrices.

        Args:
            T: (..., 4, 4) matrices; the last row is ignored.

        Returns:
            SE3 with batch shape T.shape[:-2].
        """
        T = _as_float(T, "matrix")
        _check_last(T, (4, 4), "matrix")
        return cls(T[..., :3, :3].copy(), T[..., :3, 3].copy())

    @classmethod
    def from_quat(cls, quat: np.ndarray, translation: np.ndarray) -> SE3:
        """Poses from quaternions and translations.

        Args:
            quat: (..., 4) quaternions (w, x, y, z), normalised here.
            translation: (..., 3) translations (m).

        Returns:
            SE3 with the batch shape of `translation`.
        """
        return cls(quat_to_matrix(quat), np.asarray(translation, dtype=np.float64))

    @classmethod
    def from_yaw(cls, yaw_rad: np.ndarray | float, translation: np.ndarray) -> SE3:
        """Poses rotated about +z.

        Args:
            yaw_rad: (...) headings in radians, or one float.
            translation: (..., 3) translations (m).

        Returns:
            SE3 with the batch shape of `translation`.
        """
        return cls(yaw_to_matrix(yaw_rad), np.asarray(translation, dtype=np.float64))

    @classmethod
    def stack(cls, poses: list[SE3]) -> SE3:
        """Stack poses of one batch shape along a new first axis.

        Args:
            poses: K poses, each with batch shape B.

        Returns:
            SE3 with batch shape (K, *B).
        """
        return cls(np.stack([p.rotation for p in poses]), np.stack([p.translation for p in poses]))

    # views --------------------------------------------------------------------------------
    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Batch dimensions: () for one pose, (N,) for N poses."""
        return self.translation.shape[:-1]

    def __len__(self) -> int:
        if not self.batch_shape:
            raise TypeError("unbatched SE3 has no length")
        return self.batch_shape[0]

    def __getitem__(self, index: Any) -> SE3:
        """The pose(s) at `index` of the batch dimensions (numpy indexing)."""
        return SE3(self.rotation[index], self.translation[index])

    def as_matrix(self) -> np.ndarray:
        """Homogeneous matrices of the poses.

        Returns:
            (..., 4, 4) float64 matrices [[R, t], [0, 1]].
        """
        T = np.zeros(self.batch_shape + (4, 4))
        T[..., :3, :3] = self.rotation
        T[..., :3, 3] = self.translation
        T[..., 3, 3] = 1.0
        return T

    @property
    def quat(self) -> np.ndarray:
        """Rotations as (..., 4) unit quaternions (w, x, y, z), w >= 0."""
        return matrix_to_quat(self.rotation)

    @property
    def yaw_rad(self) -> np.ndarray:
        """Headings (...) in radians of the rotated x axis in the xy plane."""
        return matrix_to_yaw(self.rotation)

    # algebra ------------------------------------------------------------------------------
    def compose(self, other: SE3) -> SE3:
        """``a_SE3_b.compose(b_SE3_c) = a_SE3_c`` (batch shapes broadcast).

        Args:
            other: the pose applied first (b_SE3_c).

        Returns:
            The composed pose (a_SE3_c), batch shapes broadcast.
        """
        R = self.rotation @ other.rotation
        t = np.einsum("...ij,...j->...i", self.rotation, other.translation) + self.translation
        return SE3(R, t)

    __matmul__ = compose

    def inverse(self) -> SE3:
        """The inverse transform (b_SE3_a for a_SE3_b).

        Returns:
            SE3 of the same batch shape.
        """
        Rt = np.swapaxes(self.rotation, -1, -2)
        return SE3(Rt, -np.einsum("...ij,...j->...i", Rt, self.translation))

    def apply(self, points: np.ndarray) -> np.ndarray:
        """Transform points (..., N, 3) (or (3,) for an unbatched pose) into the target frame.

        Args:
            points: (..., N, 3) or (N, 3) or (3,) points in the source frame (m).

        Returns:
            float64 points of the same shape in the target frame.
        """
        pts = np.asarray(points, dtype=np.float64)
        check_shape(pts, ("*", 3), "points")
        if pts.ndim == 1:
            return self.rotation @ pts + self.translation
        return np.einsum("...ij,...nj->...ni", self.rotation, pts) + self.translation[..., None, :]
