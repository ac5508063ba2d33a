"""Control branch of Cosmos-Transfer2.5 (world-scenario conditioning) on top of the base DiT.

The control video's latent (same VAE as RGB) is zero-padded to `control_latent_channels`,
given the condition mask, padding mask and view-embedding channels, patch-embedded by
`control_embedder`, and passed through `input_hint_block` (Linear + SiLU, repeated). Control
block 0's input is before_proj(hint) + the base patch-embedded tokens; control block k runs
right before its injection point (memory: only one control stream is alive) and after base
block `control_block_ids[k]` the base stream adds after_proj_k(control stream) * control_weight.
`before_proj` and every `after_proj` are zero-initialised, so a fresh branch changes nothing.
"""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from avsim.models.config import DiTConfig
from avsim.models.dit import Block, DiT, PatchEmbed, TokenStream, _island_dtype


class ControlBlock(Block):
    """A base-type block with zero-initialised output projection (and input projection for k = 0)."""

    def __init__(self, cfg: DiTConfig, has_before_proj: bool) -> None:
        super().__init__(cfg)
        d = cfg.model_channels
        self.before_proj: nn.Linear | None = nn.Linear(d, d) if has_before_proj else None
        self.after_proj = nn.Linear(d, d)
        self.zero_init_projections()

    def zero_init_projections(self) -> None:
        for layer in (self.before_proj, self.after_proj):
            if layer is not None and layer.weight.device.type != "meta":
                nn.init.zeros_(layer.weight)
                nn.init.zeros_(layer.bias)


class TransferDiT(DiT):
    """Base DiT + control branch; the released `auto/multiview` checkpoint is this network."""

    def __init__(self, config: DiTConfig) -> None:
        super().__init__(config)
        cfg = config
        if not cfg.control_block_ids:
            raise ValueError("TransferDiT needs control_block_ids; use DiT for a base network")
        d = cfg.model_channels
        self.control_embedder = PatchEmbed(cfg.control_embedder_in_features, d, cfg.patch_spatial, cfg.patch_temporal)
        hint: list[nn.Module] = []
        for _ in range(cfg.hint_block_layers):
            hint += [nn.Linear(d, d), nn.SiLU()]
        self.input_hint_block = nn.Sequential(*hint)
        self.control_blocks = nn.ModuleList(ControlBlock(cfg, k == 0) for k in range(cfg.num_control_blocks))
        self.init_control_from_base()

    @torch.no_grad()
    def init_control_from_base(self) -> None:
        """Control blocks start as copies of base blocks 0..K-1 (projections stay zero)."""
        for k in range(len(self.control_blocks)):
            block = self._control_block(k)
            src = self.blocks[k].state_dict()
            missing, unexpected = block.load_state_dict(src, strict=False, assign=False)
            assert not unexpected and all(m.endswith(("before_proj.weight", "before_proj.bias", "after_proj.weight", "after_proj.bias")) for m in missing)
            block.zero_init_projections()

    def _control_block(self, k: int) -> ControlBlock:
        return cast(ControlBlock, self.control_blocks[k])

    def embed_control(
        self,
        control_latent: Tensor | None,
        control_weight: float,
        condition_mask: Tensor | None,
        padding_mask: Tensor | None,
        num_views: int,
        view_indices: Tensor | None,
    ) -> Tensor | None:
        """(B, 16, V*T, H, W) control latent -> hint tokens (B, L, D) (unsharded); None when disabled."""
        if control_latent is None or float(control_weight) == 0.0:
            return None
        cfg = self.config
        if control_latent.ndim != 5 or control_latent.shape[1] > cfg.control_latent_channels:
            raise ValueError(f"control_latent must be (B, <={cfg.control_latent_channels}, V*T, H, W), got {tuple(control_latent.shape)}")
        padded = F.pad(control_latent, (0, 0, 0, 0, 0, 0, 0, cfg.control_latent_channels - control_latent.shape[1]))
        inp = self.input_channels(padded, condition_mask, padding_mask, num_views, view_indices)
        return self.input_hint_block(self.control_embedder(inp))

    def run_control_blocks(self, s: TokenStream, control: Tensor, control_weight: float) -> Tensor:
        """Base blocks with control residuals; `control` (B, L_local, D) is this rank's hint tokens."""
        hp = _island_dtype(self.param_dtype)
        x = s.tokens.to(hp)
        inject = {block_id: k for k, block_id in enumerate(self.config.control_block_ids)}
        first = self._control_block(0)
        assert first.before_proj is not None
        c = (first.before_proj(control) + s.tokens).to(hp)
        for i, block in enumerate(self.blocks):
            x = block(x, s.emb, s.lora, s.context, s.rope, s.view_groups)
            if i in inject:
                cblock = self._control_block(inject[i])
                c = cblock(c, s.emb, s.lora, s.context, s.rope, s.view_groups)
                residual = cblock.after_proj(c.to(cblock.after_proj.weight.dtype))
                x = x + residual.to(hp) * float(control_weight)
        return x

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
        """The base forward (`avsim.models.dit`) with the control stream sharded like the tokens."""
        s = self.embed(x, timesteps, text_context, condition_mask, padding_mask, num_views, view_indices)
        control = self.embed_control(control_latent, control_weight, condition_mask, padding_mask, num_views, view_indices)
        if control is None:
            return self.head(s, self.run_blocks(s))
        return self.head(s, self.run_control_blocks(s, self.shard_sequence(control, 1), control_weight))


__all__ = ["ControlBlock", "TransferDiT"]
