"""Ulysses context parallelism: sequence split/gather plans and all-to-all self-attention.

The DiT orders its tokens (view, t, h, w). Under context parallelism (CP) every CP rank holds a
slice of that sequence through the whole block stack; token-local layers (norms, MLP,
per-view cross-attention, modulation) need nothing more. Self-attention is global, so
:class:`UlyssesAttention` swaps the sharding around it: q, k, v arrive sequence-sharded
``(B, S/cp, H, D)``, one all-to-all makes them head-sharded ``(B, S, H/cp, D)``, the inner
backend attends over the whole sequence for its ``H/cp`` heads, and the inverse all-to-all
returns ``(B, S/cp, H, D)``.

Split (:func:`plan_sequence_split`): each rank takes the same latent-time range of every view
(``T/cp`` frames per view), so RoPE rows and view indices are split with the very same index.
When ``T`` is not divisible by ``cp`` each view's ``T*H*W`` tokens are split into ``cp``
contiguous chunks of ``ceil(T*H*W/cp)``, the last ones padded with copies of a real token.
Padded slots never act as keys (the Ulysses backend drops them before the inner attention) and
their outputs are dropped by :func:`gather_sequence`, so padding changes no result.

All collectives here are autograd functions, so the same code serves training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch
import torch.distributed as dist
from torch import Tensor


class AttentionFn(Protocol):
    def __call__(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor: ...


@dataclass(frozen=True)
class SequenceSplit:
    """How a ``(view, t, h, w)``-ordered sequence of ``L = V*T*P`` tokens maps onto CP ranks.

    Slots: the padded, rank-major concatenation of every rank's local sequence
    (``cp * local_len`` slots; rank ``r`` owns slots ``[r*local_len, (r+1)*local_len)``).
    ``slot_token[s]`` is the token a slot holds (pads hold a copy of a real token),
    ``slot_valid[s]`` marks real slots, ``token_slot[i]`` is the slot of token ``i``.
    """

    num_views: int
    frames: int
    tokens_per_frame: int
    cp_size: int
    mode: Literal["time", "flat"]
    local_len: int
    slot_token: Tensor = field(repr=False)
    slot_valid: Tensor = field(repr=False)
    token_slot: Tensor = field(repr=False)

    @property
    def num_tokens(self) -> int:
        return self.num_views * self.frames * self.tokens_per_frame

    @property
    def has_padding(self) -> bool:
        return self.cp_size * self.local_len != self.num_tokens

    def local_tokens(self, rank: int) -> Tensor:
        """Token indices (local_len,) held by `rank`, pads included."""
        return self.slot_token[rank * self.local_len : (rank + 1) * self.local_len]

    def valid_slots(self) -> Tensor:
        """Indices (num_tokens,) of the real slots, in slot order."""
        return torch.nonzero(self.slot_valid, as_tuple=False).flatten()


def plan_sequence_split(
    num_views: int, frames: int, tokens_per_frame: int, cp_size: int
) -> SequenceSplit:
    """Plan the CP split of a (view, t, h, w) sequence; see the module docstring."""
    if min(num_views, frames, tokens_per_frame, cp_size) < 1:
        raise ValueError(
            f"views, frames, tokens_per_frame, cp_size must be >= 1, got "
            f"{num_views}, {frames}, {tokens_per_frame}, {cp_size}"
        )
    per_view = frames * tokens_per_frame
    if frames % cp_size == 0:
        mode: Literal["time", "flat"] = "time"
        chunk = per_view // cp_size  # T/cp whole frames
    else:
        mode = "flat"
        chunk = math.ceil(per_view / cp_size)
    # offset[r, v, j] = position inside view v of the j-th token rank r holds for that view
    j = torch.arange(chunk)
    offset = torch.arange(cp_size)[:, None] * chunk + j[None, :]  # (cp, chunk)
    valid = offset < per_view
    offset = torch.where(valid, offset, torch.full_like(offset, per_view - 1))
    view_base = torch.arange(num_views) * per_view  # (V,)
    slot_token = (view_base[None, :, None] + offset[:, None, :]).reshape(-1)
    slot_valid = valid[:, None, :].expand(cp_size, num_views, chunk).reshape(-1)
    token_slot = torch.empty(num_views * per_view, dtype=torch.long)
    real = torch.nonzero(slot_valid, as_tuple=False).flatten()
    token_slot[slot_token[real]] = real
    return SequenceSplit(
        num_views=num_views,
        frames=frames,
        tokens_per_frame=tokens_per_frame,
        cp_size=cp_size,
        mode=mode,
        local_len=num_views * chunk,
        slot_token=slot_token,
        slot_valid=slot_valid,
        token_slot=token_slot,
    )


# ---------------------------------------------------------------------------------------------
# autograd collectives


class _AllToAll(torch.autograd.Function):
    """all_to_all_single over dim 0 with equal splits; it is its own inverse, so backward too."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, group: dist.ProcessGroup) -> Tensor:
        ctx.group = group
        x = x.contiguous()
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        grad = grad.contiguous()
        out = torch.empty_like(grad)
        dist.all_to_all_single(out, grad, group=ctx.group)
        return out, None


class _GatherReplicated(torch.autograd.Function):
    """All-gather along dim 1 for a computation that continues identically on every rank.

    Backward returns this rank's slice of the (identical) upstream gradient, without summing:
    the parameter gradients of the CP ranks are summed later by the data-parallel reduction.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, group: dist.ProcessGroup) -> Tensor:
        ctx.group = group
        ctx.local_len = x.shape[1]
        ctx.rank = dist.get_rank(group)
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=1)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        n = ctx.local_len
        return grad[:, ctx.rank * n : (ctx.rank + 1) * n].contiguous(), None


def shard_tokens(x: Tensor, split: SequenceSplit, rank: int, dim: int = 1) -> Tensor:
    """This rank's tokens of a full sequence: `x` (..., L, ...) -> (..., local_len, ...)."""
    if x.shape[dim] != split.num_tokens:
        raise ValueError(f"dim {dim} has {x.shape[dim]} tokens, the split expects {split.num_tokens}")
    return x.index_select(dim, split.local_tokens(rank).to(x.device))


def gather_sequence(x: Tensor, split: SequenceSplit, group: dist.ProcessGroup) -> Tensor:
    """Inverse of :func:`shard_tokens` along dim 1: (B, local_len, ...) -> (B, L, ...).

    Every rank gets the full sequence; see :class:`_GatherReplicated` for the gradient.
    """
    if x.shape[1] != split.local_len:
        raise ValueError(f"expected {split.local_len} local tokens, got {x.shape[1]}")
    slots = _GatherReplicated.apply(x, group)
    return slots.index_select(1, split.token_slot.to(x.device))


def sequence_to_heads(x: Tensor, group: dist.ProcessGroup) -> Tensor:
    """(B, S/cp, H, D) sequence-sharded -> (B, S, H/cp, D) head-sharded (slot order)."""
    cp = dist.get_world_size(group)
    b, s, h, d = x.shape
    if h % cp:
        raise ValueError(f"{h} heads cannot be split over {cp} context-parallel ranks")
    x = x.reshape(b, s, cp, h // cp, d).permute(2, 0, 1, 3, 4)  # (cp: head group, B, s, h/cp, D)
    x = _AllToAll.apply(x, group)  # dim 0 now indexes the source rank = sequence chunk
    return x.permute(1, 0, 2, 3, 4).reshape(b, cp * s, h // cp, d)


def heads_to_sequence(x: Tensor, group: dist.ProcessGroup) -> Tensor:
    """(B, S, H/cp, D) head-sharded -> (B, S/cp, H, D) sequence-sharded."""
    cp = dist.get_world_size(group)
    b, s_full, hc, d = x.shape
    s = s_full // cp
    x = x.reshape(b, cp, s, hc, d).permute(1, 0, 2, 3, 4)  # (cp: sequence chunk, B, s, h/cp, D)
    x = _AllToAll.apply(x, group)  # dim 0 now indexes the head group
    return x.permute(1, 2, 0, 3, 4).reshape(b, s, cp * hc, d)


# ---------------------------------------------------------------------------------------------
# runtime state shared by the model's shard / gather points and the attention backends


class ContextParallel:
    """One CP group's runtime state: the split of the current forward, or None when CP is off.

    It implements the DiT's `SequenceParallel` protocol (`begin`, `shard`, `gather`; installed
    with ``model.set_sequence_parallel(cp)``); :class:`UlyssesAttention` reads `split` to know
    whether (and how) the sequence is sharded.
    ``min_tokens``: sequences shorter than this (images, tiny clips) run unsplit on every rank.
    """

    def __init__(self, group: dist.ProcessGroup, *, min_tokens: int = 0) -> None:
        self.group = group
        self.size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.min_tokens = min_tokens
        self.split: SequenceSplit | None = None
        self._plans: dict[tuple[int, int, int], SequenceSplit] = {}

    @property
    def active(self) -> bool:
        """True when the last forward ran sequence-sharded."""
        return self.split is not None

    def plan(self, num_views: int, frames: int, tokens_per_frame: int) -> SequenceSplit | None:
        """Choose the split for a sequence, or None (CP off) for short or single-frame inputs."""
        total = num_views * frames * tokens_per_frame
        if self.size == 1 or frames == 1 or total < max(self.min_tokens, self.size):
            return None
        key = (num_views, frames, tokens_per_frame)
        if key not in self._plans:
            self._plans[key] = plan_sequence_split(num_views, frames, tokens_per_frame, self.size)
        return self._plans[key]

    def begin(self, num_views: int, frames: int, tokens_per_frame: int) -> None:
        """Set the split for the forward that is about to run."""
        self.split = self.plan(num_views, frames, tokens_per_frame)

    def shard(self, x: Tensor, dim: int) -> Tensor:
        """This rank's slice (pads included) of a full-sequence tensor along `dim`.

        The DiT's declared shard point (`avsim.models.dit.SequenceParallel`): tokens (B, L, D)
        on dim 1, RoPE (L, Dh) and view indices (L,) on dim 0. Identity when CP is off.
        """
        split = self.split
        if split is None:
            return x
        if x.shape[dim] != split.num_tokens:
            raise ValueError(
                f"sequence of {x.shape[dim]} tokens does not match the planned "
                f"{split.num_views}x{split.frames}x{split.tokens_per_frame}"
            )
        return shard_tokens(x, split, self.rank, dim=dim)

    def gather(self, x: Tensor) -> Tensor:
        """(B, local_len, D) -> (B, L, D), identical on every CP rank (identity when CP is off)."""
        if self.split is None:
            return x
        return gather_sequence(x, self.split, self.group)

    def shard_sequence(
        self, x: Tensor, rope: Tensor, token_view: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, L, D), rope (L, Dh), token_view (L,) -> this rank's slices (pads included)."""
        return self.shard(x, 1), self.shard(rope, 0), self.shard(token_view, 0)

    def gather_sequence(self, x: Tensor) -> Tensor:
        """Same as `gather`."""
        return self.gather(x)


class UlyssesAttention:
    """Attention backend: all-to-all around an inner backend (see module docstring).

    With CP off for the current forward (`cp.split is None`) it calls the inner backend as is.
    """

    def __init__(self, inner: AttentionFn, cp: ContextParallel) -> None:
        self.inner = inner
        self.cp = cp

    def __call__(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        split = self.cp.split
        if split is None:
            return self.inner(q, k, v)
        group = self.cp.group
        b = q.shape[0]
        # one all-to-all for q, k and v together (stacked along the batch dimension)
        q, k, v = sequence_to_heads(torch.cat([q, k, v], dim=0), group).split(b, dim=0)
        if not split.has_padding:
            return heads_to_sequence(self.inner(q, k, v), group)
        real = split.valid_slots().to(q.device)
        out_real = self.inner(q.index_select(1, real), k.index_select(1, real), v.index_select(1, real))
        out = out_real.new_zeros(q.shape[:2] + out_real.shape[2:])
        out = out.index_copy(1, real, out_real)
        return heads_to_sequence(out, group)

    def __repr__(self) -> str:
        return f"UlyssesAttention(cp={self.cp.size}, inner={self.inner!r})"
