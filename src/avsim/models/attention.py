"""Attention modules of the DiT with a swappable attention backend.

A backend is any callable ``backend(q, k, v) -> out`` on sequence-major tensors
(B, S, H, D) -> (B, S_q, H, D). Modules hold it as a plain attribute ``backend`` (not a
registered submodule, so it never appears in a state dict). RoPE and the per-head q/k RMSNorm
are applied *before* the backend call, so a context-parallel backend (e.g. Ulysses all-to-all,
installed from `avsim.train` with `set_attention_backend`) only has to redistribute q, k, v.

`SelfAttention` is global over every token it is given. `CrossAttention` is per view: each
token attends only to its own view's 512-token text chunk; the grouping comes from a per-token
view index, so it works on any subset or order of tokens (a sequence shard).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from avsim.models.rope import apply_rope


@runtime_checkable
class AttentionBackend(Protocol):
    """Computes softmax(q k^T / sqrt(D)) v on (B, S, H, D) tensors; no mask, no dropout."""

    def __call__(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor: ...


class SDPABackend:
    """torch.nn.functional.scaled_dot_product_attention (the default)."""

    def __call__(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return out.transpose(1, 2)

    def __repr__(self) -> str:
        return "SDPABackend()"


class FlashAttnBackend:
    """flash_attn.flash_attn_func on CUDA fp16/bf16 tensors; falls back to SDPA otherwise."""

    def __init__(self) -> None:
        try:
            from flash_attn import flash_attn_func
        except ImportError:
            flash_attn_func = None
        self._flash = flash_attn_func
        self._fallback = SDPABackend()

    @property
    def available(self) -> bool:
        return self._flash is not None

    def __call__(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        if self._flash is None or not q.is_cuda or q.dtype not in (torch.float16, torch.bfloat16):
            return self._fallback(q, k, v)
        return self._flash(q, k, v)

    def __repr__(self) -> str:
        return f"FlashAttnBackend(available={self.available})"


def default_backend() -> AttentionBackend:
    return SDPABackend()


class RMSNorm(nn.Module):
    """RMS normalisation over the last dimension, computed in float32, weight `weight`."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        xf = x.to(compute)
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.to(compute)).to(x.dtype)


class _Attention(nn.Module):
    """Projections and per-head q/k RMSNorm shared by self- and cross-attention."""

    is_self_attention: bool = False

    def __init__(self, query_dim: int, context_dim: int, num_heads: int, head_dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        inner = num_heads * head_dim
        self.num_heads, self.head_dim = num_heads, head_dim
        self.q_proj = nn.Linear(query_dim, inner, bias=False)
        self.q_norm = RMSNorm(head_dim, eps)
        self.k_proj = nn.Linear(context_dim, inner, bias=False)
        self.k_norm = RMSNorm(head_dim, eps)
        self.v_proj = nn.Linear(context_dim, inner, bias=False)
        self.output_proj = nn.Linear(inner, query_dim, bias=False)
        self.backend: AttentionBackend = default_backend()

    def _heads(self, x: Tensor) -> Tensor:
        return x.unflatten(-1, (self.num_heads, self.head_dim))


class SelfAttention(_Attention):
    """Global self-attention with 3-D RoPE on q and k."""

    is_self_attention = True

    def __init__(self, dim: int, num_heads: int, eps: float = 1e-6) -> None:
        super().__init__(dim, dim, num_heads, dim // num_heads, eps)

    def forward(self, x: Tensor, rope_angles: Tensor) -> Tensor:
        """x (B, L, D), rope_angles (L, head_dim) -> (B, L, D)."""
        q = self.q_norm(self._heads(self.q_proj(x)))
        k = self.k_norm(self._heads(self.k_proj(x)))
        v = self._heads(self.v_proj(x))
        q = apply_rope(q, rope_angles).to(v.dtype)
        k = apply_rope(k, rope_angles).to(v.dtype)
        out = self.backend(q, k, v)
        return self.output_proj(out.flatten(-2))


ViewGroups = Sequence[tuple[int, slice | Tensor]]


def group_tokens_by_view(token_view: Tensor) -> list[tuple[int, slice | Tensor]]:
    """Group token positions by view index: [(view, slice or index tensor), ...].

    Contiguous runs become slices (no gather); anything else becomes a long index tensor.
    Works for any subset / order of tokens, e.g. one context-parallel shard.
    """
    tv = token_view.detach().to("cpu", torch.long)
    groups: list[tuple[int, slice | Tensor]] = []
    for view in torch.unique(tv).tolist():
        idx = torch.nonzero(tv == view).squeeze(1)
        lo, hi = int(idx[0]), int(idx[-1]) + 1
        if hi - lo == idx.numel():
            groups.append((view, slice(lo, hi)))
        else:
            groups.append((view, idx.to(token_view.device)))
    return groups


class CrossAttention(_Attention):
    """Per-view cross-attention: tokens of view v attend only to text chunk v."""

    def __init__(self, dim: int, context_dim: int, num_heads: int, eps: float = 1e-6) -> None:
        super().__init__(dim, context_dim, num_heads, dim // num_heads, eps)

    def forward(self, x: Tensor, context: Tensor, view_groups: ViewGroups, tokens_per_view: int) -> Tensor:
        """x (B, L, D); context (B, V * tokens_per_view, Dc); view_groups from `group_tokens_by_view`."""
        if context.shape[1] % tokens_per_view:
            raise ValueError(f"context length {context.shape[1]} is not a multiple of {tokens_per_view}")
        q = self.q_norm(self._heads(self.q_proj(x)))
        k = self.k_norm(self._heads(self.k_proj(context)))
        v = self._heads(self.v_proj(context))
        q = q.to(v.dtype)
        num_chunks = context.shape[1] // tokens_per_view
        if len(view_groups) == 1 and isinstance(view_groups[0][1], slice) and view_groups[0][1] == slice(0, x.shape[1]):
            view = view_groups[0][0]
            out = self._attend_chunk(q, k, v, view, tokens_per_view, num_chunks)
        else:
            out = q.new_empty(q.shape)
            for view, where in view_groups:
                out[:, where] = self._attend_chunk(q[:, where], k, v, view, tokens_per_view, num_chunks)
        return self.output_proj(out.flatten(-2))

    def _attend_chunk(self, q: Tensor, k: Tensor, v: Tensor, view: int, n: int, num_chunks: int) -> Tensor:
        if not 0 <= view < num_chunks:
            raise ValueError(f"token view {view} has no text chunk (context holds {num_chunks})")
        return self.backend(q, k[:, view * n : (view + 1) * n], v[:, view * n : (view + 1) * n])


def set_attention_backend(model: nn.Module, backend: AttentionBackend, *, self_attention_only: bool = True) -> int:
    """Install `backend` on every attention module of `model`; returns how many were set.

    With `self_attention_only` (the default) cross-attention keeps its backend: it is
    token-local and needs no context-parallel communication.
    """
    count = 0
    for module in model.modules():
        if isinstance(module, _Attention) and (module.is_self_attention or not self_attention_only):
            module.backend = backend
            count += 1
    return count


__all__ = [
    "AttentionBackend",
    "CrossAttention",
    "FlashAttnBackend",
    "RMSNorm",
    "SDPABackend",
    "SelfAttention",
    "group_tokens_by_view",
    "set_attention_backend",
]
