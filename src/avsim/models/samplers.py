"""Rectified-flow samplers: shifted sigma grid, UniPC (bh2, order 2), Euler, CFG, conditioning.

Stateless functions on tensors; no model imports. Convention (Cosmos rectified flow, see
`avsim.models.flow`, which owns the shift and the sigma -> t map): x_sigma = (1 - sigma) x0 +
sigma eps, the network predicts v = eps - x0, x0_hat = x - sigma v, and is fed the integer
timestep t = int(1000 sigma). `timestep_of` / `timesteps_of` are re-exported from there.

A sampler takes ``velocity_fn(x, sigma: float, t: int) -> v`` (same shape as x) and returns
the final sample. Guidance and conditioning-frame handling wrap a velocity function
(`guided_velocity`, `conditioned_velocity`), so a sampler never knows about models.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from avsim.models.defaults import SAMPLER_NAMES
from avsim.models.flow import DEFAULT_SIGMA_SHIFT, shift_sigma, timestep_of, timesteps_of

VelocityFn = Callable[[Tensor, float, int], Tensor]
Sampler = Callable[[VelocityFn, Tensor, Tensor], Tensor]


SIGMA_MAX = float(np.float32(0.999))
"""First sigma of the unshifted grid: 0.999 rounded to float32 (0.99900001287...), as the
reference scheduler reads it back from its float32 training sigmas (sigma_max of
FlowUniPCMultistepScheduler, cosmos-transfer2.5 cosmos_transfer2/_src/predict2/models/fm_solvers_unipc.py)."""


def sigma_grid(num_steps: int, shift: float = DEFAULT_SIGMA_SHIFT) -> Tensor:
    """Shifted grid of `num_steps + 1` sigmas ending in 0, float32.

    base = linspace(SIGMA_MAX, 0, N + 1)[:N] (float64); sigma = s b / (1 + (s - 1) b); then 0.
    """
    if num_steps < 1:
        raise ValueError("num_steps must be >= 1")
    base = np.linspace(SIGMA_MAX, 0.0, num_steps + 1, dtype=np.float64)[:num_steps]
    sig = shift_sigma(base, shift)
    return torch.from_numpy(np.append(sig, 0.0).astype(np.float32))


def euler_sample(velocity_fn: VelocityFn, x: Tensor, sigmas: Tensor) -> Tensor:
    """Plain Euler: x_{i+1} = x_i + (sigma_{i+1} - sigma_i) v_i."""
    s = [float(v) for v in sigmas.tolist()]
    for i in range(len(s) - 1):
        v = velocity_fn(x, s[i], timestep_of(s[i]))
        x = x + (s[i + 1] - s[i]) * v
    return x


def _lam(sigma: float) -> float:
    return math.log((1.0 - sigma) / sigma) if sigma > 0 else math.inf


def unipc_sample(velocity_fn: VelocityFn, x: Tensor, sigmas: Tensor) -> Tensor:
    """UniPC multistep, order 2, bh2, x0-prediction, lower order at first and last step.

    The corrector refines x_i with the new prediction m_i; the predictor then steps from the
    corrected sample. The last step (to sigma 0) returns m_{N-1} exactly.
    """
    s = [float(v) for v in sigmas.tolist()]
    n = len(s) - 1
    lam = [_lam(v) for v in s]
    ms: list[Tensor] = []  # x0 predictions m_i
    prev_x = x  # corrected sample of the previous step (x~_{i-1})
    prev_order = 0
    for i in range(n):
        v = velocity_fn(x, s[i], timestep_of(s[i]))
        m = x - s[i] * v
        if i >= 1:
            x = _unipc_correct(prev_x, m, ms, s, lam, i, prev_order)
        ms = (ms + [m])[-3:]
        order = min(2, n - i, i + 1)
        prev_x = x
        if s[i + 1] == 0.0:
            x = m
        else:
            x = _unipc_predict(x, ms, s, lam, i, order)
        prev_order = order
    return x


def _unipc_correct(x_prev: Tensor, m_i: Tensor, ms: list[Tensor], s: list[float], lam: list[float], i: int, order: int) -> Tensor:
    """x~_i from x~_{i-1}, m_{i-1} (and m_{i-2} at order 2) and the new m_i."""
    h = lam[i] - lam[i - 1]
    hh = -h
    phi = math.expm1(hh)
    alpha_i = 1.0 - s[i]
    m_prev = ms[-1]
    base = (s[i] / s[i - 1]) * x_prev - alpha_i * phi * m_prev
    d = m_i - m_prev
    if order == 1:
        return base - alpha_i * phi * 0.5 * d
    r = (lam[i - 2] - lam[i - 1]) / h
    d1 = (ms[-2] - m_prev) / r
    g1 = phi / hh - 1.0
    g2 = g1 / hh - 0.5
    rho = np.linalg.solve(np.array([[1.0, 1.0], [r, 1.0]]), np.array([g1 / phi, 2.0 * g2 / phi]))
    return base - alpha_i * phi * (float(rho[0]) * d1 + float(rho[1]) * d)


def _unipc_predict(x: Tensor, ms: list[Tensor], s: list[float], lam: list[float], i: int, order: int) -> Tensor:
    h = lam[i + 1] - lam[i]
    phi = math.expm1(-h)
    alpha_next = 1.0 - s[i + 1]
    m_i = ms[-1]
    out = (s[i + 1] / s[i]) * x - alpha_next * phi * m_i
    if order == 2:
        r = (lam[i - 1] - lam[i]) / h
        out = out - alpha_next * phi * 0.5 * (ms[-2] - m_i) / r
    return out


def cfg_combine(v_cond: Tensor, v_uncond: Tensor, guidance: float) -> Tensor:
    """Classifier-free guidance v = v_c + g (v_c - v_u)."""
    return v_cond + guidance * (v_cond - v_uncond)


def guided_velocity(cond_fn: VelocityFn, uncond_fn: VelocityFn | None, guidance: float) -> VelocityFn:
    """Wrap two velocity functions with CFG (g == 0 or no uncond: the conditional one alone)."""
    if uncond_fn is None or guidance == 0.0:
        return cond_fn

    def fn(x: Tensor, sigma: float, t: int) -> Tensor:
        return cfg_combine(cond_fn(x, sigma, t), uncond_fn(x, sigma, t), guidance)

    return fn


def replace_frames(x: Tensor, clean: Tensor, frame_mask: Tensor) -> Tensor:
    """Where frame_mask (broadcastable to x, 1 = conditioning frame) is set, take `clean`."""
    return clean * frame_mask + x * (1 - frame_mask)


def conditioned_velocity(
    net_fn: Callable[[Tensor, float, int], Tensor], clean: Tensor, noise: Tensor, frame_mask: Tensor
) -> VelocityFn:
    """Conditioning frames: the network sees clean latents there and their velocity is eps - x0_gt.

    `net_fn(x_in, sigma, t)` is the (guided) network call; `noise` the initial eps.
    """
    gt_velocity = noise - clean

    def fn(x: Tensor, sigma: float, t: int) -> Tensor:
        v = net_fn(replace_frames(x, clean, frame_mask), sigma, t)
        return replace_frames(v, gt_velocity, frame_mask)

    return fn


SAMPLERS: dict[str, Sampler] = {"unipc": unipc_sample, "euler": euler_sample}


def sample(method: str, velocity_fn: VelocityFn, x: Tensor, sigmas: Tensor) -> Tensor:
    """Run the sampler named `method` (one of `SAMPLER_NAMES`)."""
    if method not in SAMPLERS:
        raise ValueError(f"unknown sampler {method!r} ({', '.join(SAMPLER_NAMES)})")
    return SAMPLERS[method](velocity_fn, x, sigmas)


def pixel_to_latent_frames(num_pixel_frames: int, temporal_factor: int = 4) -> int:
    """Causal-VAE frame count: 0 -> 0, 1 -> 1, 1 + 4k -> 1 + k (rounded up in between)."""
    if num_pixel_frames <= 0:
        return 0
    return 1 + math.ceil((num_pixel_frames - 1) / temporal_factor)


def chunk_starts(total_frames: int, chunk_frames: int, overlap: int, num_chunks: int | None = None) -> list[int]:
    """Start frames of autoregressive chunks: each chunk repeats the last `overlap` frames.

    With `num_chunks` None, as many chunks as fit completely in `total_frames`.
    """
    if not 0 <= overlap < chunk_frames:
        raise ValueError("overlap must be in [0, chunk_frames)")
    stride = chunk_frames - overlap
    fit = 0 if total_frames < chunk_frames else 1 + (total_frames - chunk_frames) // stride
    n = fit if num_chunks is None else num_chunks
    if n < 1 or n > fit:
        raise ValueError(f"{total_frames} frames hold {fit} chunk(s) of {chunk_frames} with overlap {overlap}; asked {n}")
    return [k * stride for k in range(n)]


__all__ = [
    "SAMPLERS",
    "SAMPLER_NAMES",
    "SIGMA_MAX",
    "cfg_combine",
    "chunk_starts",
    "conditioned_velocity",
    "euler_sample",
    "guided_velocity",
    "pixel_to_latent_frames",
    "replace_frames",
    "sample",
    "sigma_grid",
    "timestep_of",
    "timesteps_of",
    "unipc_sample",
]
