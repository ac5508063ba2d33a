"""The view-packed latent layout: views folded into latent time.

Every multi-view tensor of the pipeline, the DiT and training is laid out as
``(B, C, V*T, H, W)``: view ``v`` owns latent frames ``[v*T, (v+1)*T)`` along dim 2, in the
order of the views given (the DiT's tokens follow the same (view, t, h, w) order). These
helpers are the only code that knows this; they check shapes and never copy more than the
equivalent hand indexing.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

VIEW_DIM = 2
"""The dimension of a packed (B, C, V*T, H, W) tensor that holds views x frames."""


def frames_per_view(x: Tensor, num_views: int) -> int:
    """T of a packed (B, C, V*T, H, W) tensor; raises unless V divides dim 2."""
    if x.ndim != 5:
        raise ValueError(f"expected a packed (B, C, V*T, H, W) tensor, got shape {tuple(x.shape)}")
    if num_views < 1 or x.shape[VIEW_DIM] % num_views:
        raise ValueError(f"{x.shape[VIEW_DIM]} latent frames do not split into {num_views} views")
    return x.shape[VIEW_DIM] // num_views


def pack_views(views: Sequence[Tensor]) -> Tensor:
    """Per-view (B, C, T, H, W) tensors (equal shapes) -> packed (B, C, V*T, H, W)."""
    if not views:
        raise ValueError("pack_views needs at least one view")
    shape = views[0].shape
    if len(shape) != 5 or any(v.shape != shape for v in views):
        raise ValueError(f"views must be equal (B, C, T, H, W) tensors, got {[tuple(v.shape) for v in views]}")
    return torch.cat(list(views), dim=VIEW_DIM)


def unpack_views(x: Tensor, num_views: int) -> list[Tensor]:
    """Packed (B, C, V*T, H, W) -> V views (B, C, T, H, W) (views of `x`, no copy)."""
    frames_per_view(x, num_views)
    return list(x.chunk(num_views, dim=VIEW_DIM))


def repeat_per_view(values: Tensor, count: int) -> Tensor:
    """(V, ...) per-view values -> (V*count, ...): each view's row repeated `count` times.

    The per-frame (count = T) or per-token (count = tokens per view) expansion that matches
    the packed order.
    """
    return values.repeat_interleave(count, dim=0)


def first_frames_mask(num_first: Tensor, num_views: int, frames: int) -> Tensor:
    """(B,) frame counts k -> (B, 1, V*T, 1, 1) float32 mask, 1 on the first k frames of each view."""
    if num_first.ndim != 1:
        raise ValueError(f"num_first must be (B,), got {tuple(num_first.shape)}")
    t = torch.arange(frames).repeat(num_views)  # latent-frame index within its view
    return (t[None, :] < num_first[:, None]).float()[:, None, :, None, None]


def place_first_frames(first: Tensor, num_views: int, frames: int) -> Tensor:
    """Packed (B, C, V*k, H, W) first frames -> packed (B, C, V*T, H, W), zeros after frame k.

    The inverse of taking each view's first k frames (k <= T); keeps dtype and device.
    """
    k = frames_per_view(first, num_views)
    if k > frames:
        raise ValueError(f"{k} first frames per view exceed the {frames} frames of a view")
    b, c, _, h, w = first.shape
    out = first.new_zeros(b, c, num_views * frames, h, w)
    for v, view in enumerate(unpack_views(first, num_views)):
        out[:, :, v * frames : v * frames + k] = view
    return out


__all__ = [
    "VIEW_DIM",
    "first_frames_mask",
    "frames_per_view",
    "pack_views",
    "place_first_frames",
    "repeat_per_view",
    "unpack_views",
]
