"""Rectified flow (flow matching): the sigma shift and the sigma <-> network-timestep map.

Convention (Cosmos rectified flow), shared by the sampler (`avsim.models.samplers`) and the
training objective (`avsim.train.objective`)::

    x_sigma = (1 - sigma) x0 + sigma eps      sigma in [0, 1]
    v       = eps - x0                        what the network predicts
    x0_hat  = x_sigma - sigma v
    t       = int(1000 sigma)                 the network's integer timestep (truncated)

The resolution shift ``s sigma / (1 + (s - 1) sigma)`` moves noise levels towards 1 (more
noise) for large frames; it is monotone and fixes 0 and 1. Both the sampler's sigma grid and
the training noise sampler apply it with the same shift (5 at 720p).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # import-light at run time: the CLI reads the defaults without torch
    import numpy as np
    from torch import Tensor

DEFAULT_SIGMA_SHIFT = 5.0
"""Shift of the released 720p recipe (generation and post-training)."""

TIMESTEP_SCALE = 1000.0
"""t = int(TIMESTEP_SCALE * sigma)."""

ArrayT = TypeVar("ArrayT", "Tensor", "np.ndarray")


def shift_sigma(sigma: ArrayT, shift: float) -> ArrayT:
    """``s sigma / (1 + (s - 1) sigma)`` elementwise, in sigma's own dtype (tensor or array)."""
    return shift * sigma / (1.0 + (shift - 1.0) * sigma)


def timestep_of(sigma: float) -> int:
    """Integer network timestep of one noise level: t = int(1000 sigma) (truncated, sigma >= 0)."""
    return int(TIMESTEP_SCALE * float(sigma))


def timesteps_of(sigmas: Tensor) -> list[int]:
    """`timestep_of` of every element of a 1-D tensor of noise levels."""
    return [timestep_of(s) for s in sigmas.tolist()]


def timestep_tensor(sigma: Tensor) -> Tensor:
    """(B,) noise levels -> (B,) float32 timesteps t = int(1000 sigma), computed in float64.

    Same values as `timestep_of` on each element (the sampler and training agree).
    """
    return (sigma.double() * TIMESTEP_SCALE).floor().float()


__all__ = [
    "DEFAULT_SIGMA_SHIFT",
    "TIMESTEP_SCALE",
    "shift_sigma",
    "timestep_of",
    "timestep_tensor",
    "timesteps_of",
]
