"""The Cosmos-Transfer2.5 DiT base network (multi-view and single-view layouts).

Forward contract (also used by `avsim.train`)::

    velocity = model(
        x,               # (B, 16, V*T, H, W) noisy latents, views concatenated along time
        timesteps,       # (B,) integer-valued t = int(1000 * sigma) in [0, 1000], any float dtype
        text_context,    # (B, V*512, 100352) raw embeddings, or (B, V*512, 1024) already projected
        condition_mask=None,   # (B, 1, V*T, H, W), 1 on conditioning (clean) latent frames; default 0
        num_views=1,           # V; T = x.shape[2] // V latent frames per view
        view_indices=None,     # (V,) view-embedding index of each input view; default 0..V-1
        control_latent=None,   # (B, 16, V*T, H, W) control-video latents (TransferDiT only)
        control_weight=1.0,    # scale of the control residuals in [0, 1]
        padding_mask=None,     # (B, 1, H, W); default zeros (as at inference)
    ) -> (B, 16, V*T, H, W) predicted velocity v = eps - x0, float32 (float64 for float64 weights)

Inside, after patch embedding the forward builds the token sequence (B, L, D) in
(view, t, h, w) order, the RoPE angle table (L, head_dim) and the per-token view index (L,),
then shards each through ``self.shard_sequence(t, dim)``; after the final layer (before
unpatchify) it calls ``self.gather_sequence(x)``. Both are identity unless a context-parallel
runtime is installed with ``model.set_sequence_parallel(sp)`` (a :class:`SequenceParallel`,
e.g. `avsim.train.ulysses.ContextParallel`): the forward then calls ``sp.begin(num_views,
frames, tokens_per_frame)`` with its own ``num_views`` argument, so the split never depends on
how the caller passed it. Everything between the shard and gather points is token-local except
self-attention, whose backend is swappable (`avsim.models.attention.set_attention_backend`).
The forward is ``embed`` (inputs -> :class:`TokenStream`) -> ``run_blocks`` -> ``head``;
`TransferDiT` adds the control stream between them.

Precision: parameters may be bf16; the time embedding, AdaLN modulation, the residual stream
and the final layer run in float32 (float64 if the parameters are float64); sub-layers run in
the parameter dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from avsim.models.attention import (
    CrossAttention,
    RMSNorm,
    SelfAttention,
    ViewGroups,
    group_tokens_by_view,
)
from avsim.models.config import DiTConfig
from avsim.models.layout import frames_per_view, repeat_per_view
from avsim.models.rope import multiview_rope_angles

CheckpointFn = Callable[..., Tensor]
"""``checkpoint_fn(fn, *args) -> fn(*args)``, recomputing fn in backward (see `Block`)."""


def _island_dtype(param_dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if param_dtype == torch.float64 else torch.float32


def _linear_hp(layer: nn.Linear, x: Tensor) -> Tensor:
    """A Linear evaluated in x's (high) precision whatever the parameter dtype."""
    bias = None if layer.bias is None else layer.bias.to(x.dtype)
    return F.linear(x, layer.weight.to(x.dtype), bias)


class Timesteps(nn.Module):
    """Sinusoidal embedding [cos, sin] of t * scale with freq_i = exp(-ln(1e4) i / (D/2))."""

    def __init__(self, num_channels: int, scale: float) -> None:
        super().__init__()
        self.num_channels, self.scale = num_channels, scale

    def forward(self, t: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        half = self.num_channels // 2
        exponent = -math.log(10000.0) * torch.arange(half, dtype=dtype, device=t.device) / half
        angles = (t.to(dtype) * self.scale)[:, None] * torch.exp(exponent)[None, :]
        return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


class TimestepEmbedding(nn.Module):
    """Linear -> SiLU -> Linear(D, 3D): the AdaLN-LoRA term shared by every modulator."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(dim, dim, bias=False)
        self.activation = nn.SiLU()
        self.linear_2 = nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, sinusoid: Tensor) -> Tensor:
        return _linear_hp(self.linear_2, self.activation(_linear_hp(self.linear_1, sinusoid)))


class Patchify(nn.Module):
    """(B, C, T, H, W) -> (B, T/pt * H/p * W/p, C*pt*p*p) with features ordered (c, pt, ph, pw)."""

    def __init__(self, spatial: int, temporal: int) -> None:
        super().__init__()
        self.p, self.pt = spatial, temporal

    def forward(self, x: Tensor) -> Tensor:
        b, c, t, h, w = x.shape
        p, pt = self.p, self.pt
        x = x.reshape(b, c, t // pt, pt, h // p, p, w // p, p)
        x = x.permute(0, 2, 4, 6, 1, 3, 5, 7)  # b, t, h, w, c, pt, ph, pw
        return x.reshape(b, (t // pt) * (h // p) * (w // p), c * pt * p * p)


class PatchEmbed(nn.Module):
    """`proj` = [Patchify, Linear(in, D, no bias)] (state-dict key `proj.1.weight`)."""

    def __init__(self, in_features: int, dim: int, spatial: int, temporal: int) -> None:
        super().__init__()
        self.proj = nn.Sequential(Patchify(spatial, temporal), nn.Linear(in_features, dim, bias=False))

    @property
    def proj_weight(self) -> Tensor:
        """The projection's (D, in) weight."""
        return cast(nn.Linear, self.proj[1]).weight

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x.to(self.proj_weight.dtype))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.layer1 = nn.Linear(dim, hidden, bias=False)
        self.activation = nn.GELU()
        self.layer2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.layer2(self.activation(self.layer1(x)))


def _adaln(dim: int, lora_dim: int, chunks: int) -> nn.Sequential:
    return nn.Sequential(nn.SiLU(), nn.Linear(dim, lora_dim, bias=False), nn.Linear(lora_dim, chunks * dim, bias=False))


def _modulation(adaln: nn.Sequential, emb: Tensor, lora: Tensor) -> Tensor:
    """AdaLN-LoRA modulation in emb's (high) precision: Linear(Linear(SiLU(emb))) + lora."""
    down, up = cast(nn.Linear, adaln[1]), cast(nn.Linear, adaln[2])
    return _linear_hp(up, _linear_hp(down, F.silu(emb))) + lora


class Block(nn.Module):
    """x += g1 SelfAttn(mod(LN x)); x += g2 CrossAttn(mod(LN x), text); x += g3 MLP(mod(LN x))."""

    def __init__(self, cfg: DiTConfig) -> None:
        super().__init__()
        d = cfg.model_channels
        self.tokens_per_view = cfg.text_tokens_per_view
        self.layer_norm_self_attn = nn.LayerNorm(d, elementwise_affine=False, eps=cfg.norm_eps)
        self.self_attn = SelfAttention(d, cfg.num_heads, cfg.norm_eps)
        self.layer_norm_cross_attn = nn.LayerNorm(d, elementwise_affine=False, eps=cfg.norm_eps)
        self.cross_attn = CrossAttention(d, cfg.crossattn_emb_channels, cfg.num_heads, cfg.norm_eps)
        self.layer_norm_mlp = nn.LayerNorm(d, elementwise_affine=False, eps=cfg.norm_eps)
        self.mlp = MLP(d, cfg.mlp_hidden)
        self.adaln_modulation_self_attn = _adaln(d, cfg.adaln_lora_dim, 3)
        self.adaln_modulation_cross_attn = _adaln(d, cfg.adaln_lora_dim, 3)
        self.adaln_modulation_mlp = _adaln(d, cfg.adaln_lora_dim, 3)
        # activation checkpointing, declared: `checkpoint_fn(fn, *args)` must return fn(*args)
        # (e.g. torch.utils.checkpoint.checkpoint); None runs `compute` directly
        self.checkpoint_fn: CheckpointFn | None = None

    def forward(
        self, x: Tensor, emb: Tensor, lora: Tensor, context: Tensor, rope: Tensor, view_groups: ViewGroups
    ) -> Tensor:
        """`compute`, through `checkpoint_fn` when one is set (activation checkpointing)."""
        if self.checkpoint_fn is not None:
            return self.checkpoint_fn(self.compute, x, emb, lora, context, rope, view_groups)
        return self.compute(x, emb, lora, context, rope, view_groups)

    def compute(
        self, x: Tensor, emb: Tensor, lora: Tensor, context: Tensor, rope: Tensor, view_groups: ViewGroups
    ) -> Tensor:
        """x (B, L, D) high precision; emb (B, 1, D), lora (B, 1, 3D); context (B, V*N, Dc)."""
        wdtype = self.mlp.layer1.weight.dtype
        sa = _modulation(self.adaln_modulation_self_attn, emb, lora).chunk(3, dim=-1)
        ca = _modulation(self.adaln_modulation_cross_attn, emb, lora).chunk(3, dim=-1)
        ml = _modulation(self.adaln_modulation_mlp, emb, lora).chunk(3, dim=-1)

        def mod(norm: nn.LayerNorm, shift: Tensor, scale: Tensor) -> Tensor:
            return (norm(x) * (1 + scale) + shift).to(wdtype)

        x = x + sa[2] * self.self_attn(mod(self.layer_norm_self_attn, sa[0], sa[1]), rope).to(x.dtype)
        h = self.cross_attn(mod(self.layer_norm_cross_attn, ca[0], ca[1]), context, view_groups, self.tokens_per_view)
        x = x + ca[2] * h.to(x.dtype)
        x = x + ml[2] * self.mlp(mod(self.layer_norm_mlp, ml[0], ml[1])).to(x.dtype)
        return x


class FinalLayer(nn.Module):
    """LN -> modulate (shift, scale) -> Linear(D, p*p*pt*C), all in high precision."""

    def __init__(self, cfg: DiTConfig) -> None:
        super().__init__()
        d = cfg.model_channels
        self.dim = d
        self.layer_norm = nn.LayerNorm(d, elementwise_affine=False, eps=cfg.norm_eps)
        self.linear = nn.Linear(d, cfg.patch_volume * cfg.latent_channels, bias=False)
        self.adaln_modulation = _adaln(d, cfg.adaln_lora_dim, 2)

    def forward(self, x: Tensor, emb: Tensor, lora: Tensor) -> Tensor:
        shift, scale = _modulation(self.adaln_modulation, emb, lora[..., : 2 * self.dim]).chunk(2, dim=-1)
        return _linear_hp(self.linear, self.layer_norm(x) * (1 + scale) + shift)


class SequenceParallel(Protocol):
    """A context-parallel runtime the DiT consults (`avsim.train.ulysses.ContextParallel`).

    The DiT calls `begin` once per forward with the token grid (``num_views`` by name, from
    the forward's own argument), then `shard` on every full-sequence tensor it builds (tokens
    (B, L, D) on dim 1; RoPE (L, Dh) and per-token view index (L,) on dim 0; the control
    stream), and `gather` on the final layer's output (B, L_local, C) -> (B, L, C).
    """

    def begin(self, num_views: int, frames: int, tokens_per_frame: int) -> None: ...

    def shard(self, x: Tensor, dim: int) -> Tensor: ...

    def gather(self, x: Tensor) -> Tensor: ...


@dataclass
class TokenStream:
    """The forward's state between patch embedding and the final layer (this rank's tokens).

    tokens (B, L_local, D) in the parameter dtype; rope (L_local, head_dim); emb (B, 1, D) and
    lora (B, 1, 3D) in high precision; context (B, V*N, Dc) projected text; grid the token
    grid (t, h, w) of the whole (unsharded) sequence.
    """

    tokens: Tensor
    rope: Tensor
    view_groups: ViewGroups
    emb: Tensor
    lora: Tensor
    context: Tensor
    grid: tuple[int, int, int]


class DiT(nn.Module):
    """Cosmos-Transfer2.5 base network. See the module docstring for the forward contract."""

    def __init__(self, config: DiTConfig) -> None:
        super().__init__()
        self.config = cfg = config
        d = cfg.model_channels
        self.x_embedder = PatchEmbed(cfg.x_embedder_in_features, d, cfg.patch_spatial, cfg.patch_temporal)
        self.t_embedder = nn.Sequential(Timesteps(d, cfg.timestep_scale), TimestepEmbedding(d))
        self.t_embedding_norm = RMSNorm(d, cfg.norm_eps)
        self.crossattn_proj = nn.Sequential(
            nn.Linear(cfg.crossattn_proj_in_channels, cfg.crossattn_emb_channels, bias=True), nn.GELU()
        )
        if cfg.is_multiview:
            self.view_embeddings = nn.Embedding(cfg.num_view_embeddings, cfg.view_condition_dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.num_blocks))
        self.final_layer = FinalLayer(cfg)
        self.sequence_parallel: SequenceParallel | None = None

    # ---- context parallelism: the declared shard / gather points ----
    def set_sequence_parallel(self, sp: SequenceParallel | None) -> None:
        """Run later forwards sequence-sharded through `sp` (None: unsharded, the default)."""
        self.sequence_parallel = sp

    def shard_sequence(self, x: Tensor, dim: int = 1) -> Tensor:
        """This rank's tokens of a full-sequence tensor (identity without sequence parallelism)."""
        return x if self.sequence_parallel is None else self.sequence_parallel.shard(x, dim)

    def gather_sequence(self, x: Tensor) -> Tensor:
        """Inverse of `shard_sequence` on (B, L_local, C) -> (B, L, C)."""
        return x if self.sequence_parallel is None else self.sequence_parallel.gather(x)

    # ---- pieces of the forward ----
    @property
    def param_dtype(self) -> torch.dtype:
        return self.x_embedder.proj_weight.dtype

    def input_channels(
        self,
        latent: Tensor,
        condition_mask: Tensor | None,
        padding_mask: Tensor | None,
        num_views: int,
        view_indices: Tensor | None,
    ) -> Tensor:
        """Concatenate [latent, condition mask, padding mask, view embedding] along channels."""
        b, _, vt, h, w = latent.shape
        parts = [latent]
        cond = latent.new_zeros(b, 1, vt, h, w) if condition_mask is None else condition_mask.to(latent.dtype)
        parts.append(cond)
        if self.config.concat_padding_mask:
            pad = latent.new_zeros(b, 1, h, w) if padding_mask is None else padding_mask.to(latent.dtype)
            parts.append(pad[:, :, None].expand(b, 1, vt, h, w))
        if self.config.is_multiview:
            emb = self.view_embeddings(self._view_indices(num_views, view_indices, latent.device))  # (V, Cv)
            per_frame = repeat_per_view(emb.to(latent.dtype), frames_per_view(latent, num_views))  # (V*T, Cv)
            parts.append(per_frame.T[None, :, :, None, None].expand(b, -1, vt, h, w))
        return torch.cat(parts, dim=1)

    def _view_indices(self, num_views: int, view_indices: Tensor | None, device: torch.device) -> Tensor:
        if view_indices is None:
            if num_views > self.config.num_view_embeddings:
                raise ValueError(f"{num_views} views but only {self.config.num_view_embeddings} view embeddings")
            return torch.arange(num_views, device=device)
        if view_indices.shape != (num_views,):
            raise ValueError(f"view_indices must have shape ({num_views},), got {tuple(view_indices.shape)}")
        return view_indices.to(device=device, dtype=torch.long)

    def project_text(self, text_context: Tensor) -> Tensor:
        """Raw (.., 100352) embeddings -> (.., 1024) through `crossattn_proj`; projected ones pass."""
        cfg = self.config
        if text_context.shape[-1] == cfg.crossattn_proj_in_channels:
            weight = cast(nn.Linear, self.crossattn_proj[0]).weight
            return self.crossattn_proj(text_context.to(weight.dtype))
        if text_context.shape[-1] == cfg.crossattn_emb_channels:
            return text_context.to(self.param_dtype)
        raise ValueError(
            f"text_context last dim {text_context.shape[-1]} is neither {cfg.crossattn_proj_in_channels} "
            f"(raw) nor {cfg.crossattn_emb_channels} (projected)"
        )

    def time_embedding(self, timesteps: Tensor) -> tuple[Tensor, Tensor]:
        """timesteps (B,) -> (emb (B, 1, D), adaln_lora (B, 1, 3D)) in high precision."""
        hp = _island_dtype(self.param_dtype)
        sinusoid = self.t_embedder[0](timesteps, dtype=hp)
        lora = self.t_embedder[1](sinusoid)
        emb = self.t_embedding_norm(sinusoid)
        return emb[:, None], lora[:, None]

    def unpatchify(self, x: Tensor, t: int, h: int, w: int) -> Tensor:
        """(B, t*h*w, p*p*pt*C) with features (ph, pw, pt, C) -> (B, C, t*pt, h*p, w*p)."""
        cfg = self.config
        p, pt, c = cfg.patch_spatial, cfg.patch_temporal, cfg.latent_channels
        b = x.shape[0]
        x = x.reshape(b, t, h, w, p, p, pt, c).permute(0, 7, 1, 6, 2, 4, 3, 5)
        return x.reshape(b, c, t * pt, h * p, w * p)

    def _check_inputs(self, x: Tensor, timesteps: Tensor, text_context: Tensor, num_views: int) -> None:
        cfg = self.config
        if x.ndim != 5 or x.shape[1] != cfg.latent_channels:
            raise ValueError(f"x must be (B, {cfg.latent_channels}, V*T, H, W), got {tuple(x.shape)}")
        if x.shape[2] % (num_views * cfg.patch_temporal):
            raise ValueError(f"latent frames {x.shape[2]} not divisible by num_views={num_views}")
        if x.shape[3] % cfg.patch_spatial or x.shape[4] % cfg.patch_spatial:
            raise ValueError(f"latent H, W {tuple(x.shape[3:])} not divisible by {cfg.patch_spatial}")
        if not cfg.is_multiview and num_views != 1:
            raise ValueError("single-view network got num_views != 1")
        if timesteps.shape != (x.shape[0],):
            raise ValueError(f"timesteps must be (B,) = ({x.shape[0]},), got {tuple(timesteps.shape)}")
        if text_context.ndim != 3 or text_context.shape[0] != x.shape[0]:
            raise ValueError(f"text_context must be (B, V*N, C), got {tuple(text_context.shape)}")

    def embed(
        self,
        x: Tensor,
        timesteps: Tensor,
        text_context: Tensor,
        condition_mask: Tensor | None,
        padding_mask: Tensor | None,
        num_views: int,
        view_indices: Tensor | None,
    ) -> TokenStream:
        """Check the inputs, plan the sequence split, patch-embed and shard (see module docstring)."""
        cfg = self.config
        self._check_inputs(x, timesteps, text_context, num_views)
        grid = (x.shape[2] // cfg.patch_temporal, x.shape[3] // cfg.patch_spatial, x.shape[4] // cfg.patch_spatial)
        frames = grid[0] // num_views
        if self.sequence_parallel is not None:
            self.sequence_parallel.begin(num_views, frames, grid[1] * grid[2])
        tokens = self.x_embedder(self.input_channels(x, condition_mask, padding_mask, num_views, view_indices))
        rope = multiview_rope_angles(cfg, num_views, frames, grid[1], grid[2], device=x.device)
        token_view = repeat_per_view(torch.arange(num_views, device=x.device), frames * grid[1] * grid[2])
        emb, lora = self.time_embedding(timesteps)
        return TokenStream(
            tokens=self.shard_sequence(tokens, 1),
            rope=self.shard_sequence(rope, 0),
            view_groups=group_tokens_by_view(self.shard_sequence(token_view, 0)),
            emb=emb,
            lora=lora,
            context=self.project_text(text_context),
            grid=grid,
        )

    def run_blocks(self, s: TokenStream) -> Tensor:
        """The residual stream through every base block, (B, L_local, D) high precision."""
        x = s.tokens.to(_island_dtype(self.param_dtype))
        for block in self.blocks:
            x = block(x, s.emb, s.lora, s.context, s.rope, s.view_groups)
        return x

    def head(self, s: TokenStream, h: Tensor) -> Tensor:
        """Final layer, gather the sequence, unpatchify: -> (B, 16, V*T, H, W) high precision."""
        hp = _island_dtype(self.param_dtype)
        out = self.gather_sequence(self.final_layer(h.to(hp), s.emb, s.lora))
        return self.unpatchify(out, *s.grid).to(hp)

    def forward(
        self,
        x: Tensor,
        timesteps: Tensor,
        text_context: Tensor,
        condition_mask: Tensor | None = None,
        num_views: int = 1,
        view_indices: Tensor | None = None,
        control_latent: Tensor | None = None,
        control_weight: float = 1.0,
        padding_mask: Tensor | None = None,
    ) -> Tensor:
        if control_latent is not None:
            raise ValueError("the base DiT has no control branch; build TransferDiT for control inputs")
        s = self.embed(x, timesteps, text_context, condition_mask, padding_mask, num_views, view_indices)
        return self.head(s, self.run_blocks(s))


__all__ = ["Block", "CheckpointFn", "DiT", "FinalLayer", "PatchEmbed", "SequenceParallel", "TokenStream"]
