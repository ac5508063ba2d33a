"""3-D rotary position embedding (RoPE) of the Cosmos DiT, with per-view restart.

The head dimension is split into a temporal part and two equal spatial parts
(t 44, h 42, w 42 for head_dim 128). Each axis has its own frequency base
theta_axis = theta * r_axis ** (d_axis / (d_axis - 2)) (NTK-style extrapolation ratio r_axis).
Angles are laid out [t, h, w] and the whole block is repeated twice, which is what the
non-interleaved ("rotate-half") formulation expects.

Multi-view: positions restart in every view, so view v's tokens have t = 0..T-1 exactly like
view 0's; the table for V views is the single-view table repeated V times.
"""

from __future__ import annotations

import torch
from torch import Tensor

from avsim.models.config import DiTConfig


def axis_dims(head_dim: int) -> tuple[int, int, int]:
    """(t, h, w) sizes of the head-dimension split, e.g. 128 -> (44, 42, 42)."""
    dim_h = head_dim // 6 * 2
    return head_dim - 2 * dim_h, dim_h, dim_h


def _axis_freqs(dim: int, theta: float, ratio: float) -> Tensor:
    base = theta * ratio ** (dim / (dim - 2))
    exponents = torch.arange(0, dim, 2, dtype=torch.float64)[: dim // 2] / dim
    return 1.0 / base**exponents


def rope_angles(cfg: DiTConfig, t: int, h: int, w: int, device: torch.device | str | None = None) -> Tensor:
    """Rotation angles (radians) of one view's tokens in (t, h, w) order.

    Returns float32 (t * h * w, head_dim). Positions are integer latent-frame / patch indices.
    """
    dim_t, dim_h, dim_w = axis_dims(cfg.head_dim)
    f_t = _axis_freqs(dim_t, cfg.rope_theta, cfg.rope_t_extrapolation_ratio)
    f_h = _axis_freqs(dim_h, cfg.rope_theta, cfg.rope_h_extrapolation_ratio)
    f_w = _axis_freqs(dim_w, cfg.rope_theta, cfg.rope_w_extrapolation_ratio)
    a_t = torch.outer(torch.arange(t, dtype=torch.float64), f_t)[:, None, None, :].expand(t, h, w, -1)
    a_h = torch.outer(torch.arange(h, dtype=torch.float64), f_h)[None, :, None, :].expand(t, h, w, -1)
    a_w = torch.outer(torch.arange(w, dtype=torch.float64), f_w)[None, None, :, :].expand(t, h, w, -1)
    half = torch.cat([a_t, a_h, a_w], dim=-1).reshape(t * h * w, -1)
    return torch.cat([half, half], dim=-1).to(device=device, dtype=torch.float32)


def multiview_rope_angles(
    cfg: DiTConfig, num_views: int, t: int, h: int, w: int, device: torch.device | str | None = None
) -> Tensor:
    """Angles for `num_views` views laid out (view, t, h, w); each view restarts at t = 0.

    Returns float32 (num_views * t * h * w, head_dim).
    """
    return rope_angles(cfg, t, h, w, device).repeat(num_views, 1)


def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: Tensor, angles: Tensor) -> Tensor:
    """Rotate q or k, shape (B, S, H, D), by `angles` (S, D); computed in float32 (float64 kept).

    Returns the input dtype's promotion with float32 (callers cast back before attention).
    """
    if x.shape[1] != angles.shape[0] or x.shape[-1] != angles.shape[-1]:
        raise ValueError(f"rope table {tuple(angles.shape)} does not match tokens {tuple(x.shape)}")
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(compute)
    ang = angles.to(device=x.device, dtype=compute)[None, :, None, :]
    return xf * torch.cos(ang) + _rotate_half(xf) * torch.sin(ang)
