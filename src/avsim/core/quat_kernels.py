"""Compiled quaternion code, with numpy's operation order (the results equal `avsim.core.transforms`'s).

`rotated_quats` turns a batch of rotations R @ W[n] into quaternions in one compiled pass (the
labels' camera_R_object of every box), as `matrix_to_quat` does them: sums left to right, the
largest-diagonal branch, the norm of the squares summed in order, the canonical sign.
"""

from __future__ import annotations

import numpy as np

from avsim.core.jit import njit
from avsim.core.transforms import matrix_to_quat
from avsim.core.typing import NDArrayFloat


@njit
def _rotated_quats_into(R_cw: NDArrayFloat, W: NDArrayFloat, out: NDArrayFloat) -> bool:
    # out (M, 4) = matrix_to_quat(einsum("ij,njk->nik", R_cw, W)) with numpy's operation order (sums
    # left to right, the largest-diagonal branch, norm of the squares summed in order, canonical sign);
    # False (out unusable) where a matrix has NaN or a zero-norm branch: the caller takes numpy's path
    m = np.empty((3, 3))
    for n in range(W.shape[0]):
        for i in range(3):
            for k in range(3):
                m[i, k] = R_cw[i, 0] * W[n, 0, k] + R_cw[i, 1] * W[n, 1, k] + R_cw[i, 2] * W[n, 2, k]
                if m[i, k] != m[i, k]:
                    return False
        trace = m[0, 0] + m[1, 1] + m[2, 2]
        best, top = 0, trace
        for j in range(3):
            if m[j, j] > top:
                best, top = j + 1, m[j, j]
        if best == 0:
            q = (1 + trace, m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1])
        elif best == 1:
            q = (m[2, 1] - m[1, 2], 1 + m[0, 0] - m[1, 1] - m[2, 2], m[0, 1] + m[1, 0], m[0, 2] + m[2, 0])
        elif best == 2:
            q = (m[0, 2] - m[2, 0], m[0, 1] + m[1, 0], 1 - m[0, 0] + m[1, 1] - m[2, 2], m[1, 2] + m[2, 1])
        else:
            q = (m[1, 0] - m[0, 1], m[0, 2] + m[2, 0], m[1, 2] + m[2, 1], 1 - m[0, 0] - m[1, 1] + m[2, 2])
        norm = np.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
        if norm == 0:
            return False
        first = q[0] / norm
        for j in range(4):
            if abs(q[j] / norm) > 1e-12:
                first = q[j] / norm
                break
        for j in range(4):
            out[n, j] = -(q[j] / norm) if first < 0 else q[j] / norm
    return True


def rotated_quats(R: NDArrayFloat, W: NDArrayFloat) -> NDArrayFloat:
    """Quaternions of R @ W[n] for a batch of rotations, compiled, equal to numpy's to the last bit.

    Args:
        R: (3, 3) rotation applied on the left (e.g. camera_R_world).
        W: (M, 3, 3) rotations (e.g. world_R_object).

    Returns:
        (M, 4) scalar-first unit quaternions, `matrix_to_quat(einsum("ij,njk->nik", R, W))` (numpy's path where the
        compiled one gives up: NaN entries, a zero-norm branch).
    """
    out = np.empty((len(W), 4))
    if _rotated_quats_into(np.ascontiguousarray(R, np.float64), np.ascontiguousarray(W, np.float64), out):
        return out
    return matrix_to_quat(np.einsum("ij,njk->nik", R, W))
