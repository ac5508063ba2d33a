"""Parallelism applied from outside the model (torchtitan style), in this order:

1. context parallelism (Ulysses): the DiT is given the :class:`ContextParallel` runtime
   (``model.set_sequence_parallel(cp)``), which it consults at its declared shard / gather
   points with its own ``num_views``, and every self-attention gets a
   :class:`UlyssesAttention` backend;
2. activation checkpointing per block (full, or selective: matmul/attention outputs kept),
   declared through each block's `checkpoint_fn`;
3. optional ``torch.compile`` per block;
4. FSDP2 ``fully_shard`` per block, then the root, on the (dp_replicate, dp_shard_cp) mesh with
   bf16 parameters and fp32 gradient reduction.

The model keeps its parameter names (nothing is wrapped), so state dicts stay `net.*`-compatible.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator
from typing import Any, cast

import torch
from torch import Tensor, nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from avsim.models.attention import FlashAttnBackend, SDPABackend, set_attention_backend
from avsim.models.dit import Block, DiT
from avsim.train.config import ParallelConfig
from avsim.train.dist import Meshes
from avsim.train.ulysses import AttentionFn, ContextParallel, UlyssesAttention


def iter_blocks(model: nn.Module) -> Iterator[Block]:
    """The transformer blocks: base `blocks`, then the control branch's `control_blocks`."""
    for name in ("blocks", "control_blocks"):
        container = getattr(model, name, None)
        if container is not None:
            yield from (cast(Block, block) for block in container)


def resolve_param_dtype(cfg: ParallelConfig, device: torch.device) -> torch.dtype:
    if cfg.param_dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, cfg.param_dtype)


# ---------------------------------------------------------------------------------------------
# context parallelism


def apply_context_parallel(model: DiT, cp: ContextParallel, inner: AttentionFn) -> None:
    """Make `model` run sequence-sharded over `cp`'s group (see module docstring).

    Declared, not patched: the model consults `cp` at its own shard / gather points
    (`DiT.set_sequence_parallel`) and every self-attention gets a Ulysses backend.
    """
    heads = model.config.num_heads
    if heads % cp.size:
        raise ValueError(f"cp={cp.size} must divide the {heads} attention heads")
    model.set_sequence_parallel(cp)
    set_attention_backend(model, UlyssesAttention(inner, cp), self_attention_only=True)


# ---------------------------------------------------------------------------------------------
# activation checkpointing

# ops whose outputs selective checkpointing keeps (the expensive ones); the rest is recomputed
_SAVE_OPS = {
    torch.ops.aten.mm.default,
    torch.ops.aten.addmm.default,
    torch.ops.aten.bmm.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
}


def _selective_policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in _SAVE_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def apply_activation_checkpointing(block: Block, mode: str) -> None:
    """Recompute `block`'s forward in backward: 'full' or 'selective' (op policy above).

    Declared through the block's `checkpoint_fn` (nothing is replaced on the instance).
    """
    if mode == "none":
        block.checkpoint_fn = None
        return
    if mode not in ("full", "selective"):
        raise ValueError(f"activation_checkpointing must be none, full or selective, got {mode!r}")
    context_fn = (
        functools.partial(create_selective_checkpoint_contexts, _selective_policy) if mode == "selective" else None
    )

    def run(fn: Callable[..., Tensor], *args: Any) -> Tensor:
        if context_fn is None:
            return checkpoint(fn, *args, use_reentrant=False)
        return checkpoint(fn, *args, use_reentrant=False, context_fn=context_fn)

    block.checkpoint_fn = run


# ---------------------------------------------------------------------------------------------
# FSDP2


def apply_fsdp(model: nn.Module, meshes: Meshes, param_dtype: torch.dtype, reshard_after_forward: bool) -> None:
    """fully_shard every block, then the root.

    Control blocks call their `before_proj` / `after_proj` outside their own forward (the
    branch's input and injection), so those get their own FSDP units and unshard on demand.
    """
    # The projections are nn.Linear, whose 3-D output is a view; FSDP2 warns about in-place ops
    # on it. The control branch only uses them out of place (checked in models/control.py).
    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module \(FSDPLinear\) returned a view tensor")
    # Blocks and root: cast_forward_inputs=False, since the model keeps timesteps, modulation
    # and the residual stream in fp32 on purpose and casts sub-layer inputs itself. The bare
    # projections have no such logic, so FSDP casts their inputs to the parameter dtype.
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32, cast_forward_inputs=False)
    mp_cast = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32, cast_forward_inputs=True)
    for block in iter_blocks(model):
        for name in ("before_proj", "after_proj"):
            sub = getattr(block, name, None)
            if sub is not None:
                fully_shard(sub, mesh=meshes.fsdp, mp_policy=mp_cast, reshard_after_forward=reshard_after_forward)
        fully_shard(block, mesh=meshes.fsdp, mp_policy=mp, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=meshes.fsdp, mp_policy=mp, reshard_after_forward=False)


def parallelize(
    model: DiT, cfg: ParallelConfig, meshes: Meshes | None, device: torch.device
) -> ContextParallel | None:
    """Apply CP, AC, compile and FSDP2 to `model` in place; returns the CP state (or None).

    ``meshes`` None: a single process without FSDP (what the equality tests compare against).
    """
    inner: AttentionFn = FlashAttnBackend() if cfg.attention == "flash" else SDPABackend()
    cp: ContextParallel | None = None
    if meshes is not None and meshes.cp_size > 1:
        cp = ContextParallel(meshes.cp_group, min_tokens=cfg.cp_min_tokens)
        apply_context_parallel(model, cp, inner)
    else:
        set_attention_backend(model, inner, self_attention_only=False)
    for block in iter_blocks(model):
        apply_activation_checkpointing(block, cfg.activation_checkpointing)
        if cfg.compile:
            block.compile()
    if meshes is not None:
        apply_fsdp(model, meshes, resolve_param_dtype(cfg, device), cfg.reshard_after_forward)
    return cp
