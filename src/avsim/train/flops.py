"""Hand-derived FLOP count of a DiT training step (matmuls only; 1 multiply-add = 2 FLOPs).

Forward, per sample, with width D, tokens L (all views), text tokens per view N, views V,
text width Dc, raw text width Dt (100352), K control blocks:

    per block, per token   self-attention q, k, v, out projections   8 D^2
                           cross-attention q, out projections        4 D^2
                           MLP D -> 4D -> D                          16 D^2
                           cross-attention scores QK^T, PV            4 N D
    per block              self-attention scores QK^T, PV            4 L^2 D
    per block, per sample  cross-attention k, v of V*N text tokens    4 V N Dc D
    once                   crossattn_proj                             2 V N Dt Dc
                           x_embedder (100 -> D), final (D -> 64)     2 L (100 D + 64 D)
    control branch         K blocks as above; control_embedder (772 -> D) 2 L 772 D;
                           hint block 7 x 2 L D^2; before_proj + K after_proj 2 L (K+1) D^2

Backward = a multiple of each term's forward: 2x for a matmul whose weight and input both
need gradients, 1x when only one does (a frozen layer inside the gradient path; a trained
layer fed by data), 0x when neither. In control training (base frozen) the gradient reaches
base blocks after the first injection only; base blocks up to the first injection, the
embedders and crossattn_proj need no backward. Attention scores have no weights: 2x when q,
k and v all need gradients, 1x in cross-attention when the (frozen) text does not.
Recomputation under activation checkpointing is not counted (model FLOPs, not hardware FLOPs).
`tests/test_train_loop.py` checks this against torch's FlopCounterMode on the debug model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from avsim.models.config import DiTConfig


@dataclass(frozen=True)
class Term:
    """One group of matmuls: forward FLOPs per sample, backward multiples per training mode."""

    forward: float
    backward_control: float
    backward_full: float


@dataclass(frozen=True)
class StepFlops:
    terms: dict[str, Term]
    tokens: int  # tokens per sample

    @property
    def base_forward(self) -> float:
        return sum(t.forward for k, t in self.terms.items() if not k.startswith("control"))

    @property
    def control_forward(self) -> float:
        return sum(t.forward for k, t in self.terms.items() if k.startswith("control"))

    def training(self, train_mode: str) -> float:
        """FLOPs of one forward + backward per sample."""
        if train_mode not in ("control", "full"):
            raise ValueError(f"train_mode must be control or full, got {train_mode!r}")
        full = train_mode == "full"
        return sum(t.forward * (1 + (t.backward_full if full else t.backward_control)) for t in self.terms.values())


def dit_flops(cfg: DiTConfig, num_views: int, latent_frames: int, latent_h: int, latent_w: int) -> StepFlops:
    """Forward FLOPs (and backward multiples) of the base and the control branch, one sample."""
    d, n, dc = cfg.model_channels, cfg.text_tokens_per_view, cfg.crossattn_emb_channels
    p = cfg.patch_spatial
    tokens = num_views * (latent_frames // cfg.patch_temporal) * (latent_h // p) * (latent_w // p)
    self_scores = 4.0 * tokens * tokens * d
    token_linear = tokens * 28.0 * d * d
    cross_scores = tokens * 4.0 * n * d
    context_kv = 4.0 * num_views * n * dc * d
    nb, k = cfg.num_blocks, cfg.num_control_blocks
    # base blocks that see a gradient in control training: those after the first injection
    live = nb - (cfg.control_block_ids[0] + 1) if k else 0
    out_features = cfg.patch_volume * cfg.latent_channels

    def blocks(count: int, live_count: int) -> dict[str, Term]:
        frac = live_count / count if count else 0.0
        return {
            "self_scores": Term(count * self_scores, 2.0 * frac, 2.0),
            "token_linear": Term(count * token_linear, 1.0 * frac, 2.0),
            "cross_scores": Term(count * cross_scores, 1.0 * frac, 2.0),
            "context_kv": Term(count * context_kv, 0.0, 2.0),
        }

    terms = {f"base_{name}": t for name, t in blocks(nb, live).items()}
    terms["base_text_proj"] = Term(2.0 * num_views * n * cfg.crossattn_proj_in_channels * dc, 0.0, 1.0)
    terms["base_x_embedder"] = Term(2.0 * tokens * cfg.x_embedder_in_features * d, 0.0, 1.0)
    terms["base_final"] = Term(2.0 * tokens * d * out_features, 1.0, 2.0)
    if k:
        control = {
            "self_scores": Term(k * self_scores, 2.0, 2.0),
            "token_linear": Term(k * token_linear, 2.0, 2.0),
            "cross_scores": Term(k * cross_scores, 1.0, 2.0),
            "context_kv": Term(k * context_kv, 1.0, 2.0),
        }
        terms.update({f"control_{name}": t for name, t in control.items()})
        terms["control_embedder"] = Term(2.0 * tokens * cfg.control_embedder_in_features * d, 1.0, 1.0)
        terms["control_hint"] = Term(2.0 * tokens * cfg.hint_block_layers * d * d, 2.0, 2.0)
        terms["control_projections"] = Term(2.0 * tokens * (k + 1) * d * d, 2.0, 2.0)
    return StepFlops(terms=terms, tokens=tokens)


# Dense bf16 tensor-core peaks (FLOP/s) from the vendors' data sheets (SXM parts).
PEAK_BF16 = {
    "H100": 989e12,
    "H200": 989e12,
    "A100": 312e12,
    "L40S": 362e12,
    "B200": 2250e12,
}


def peak_flops(device_name: str) -> float | None:
    """Peak dense bf16 FLOP/s of a CUDA device name (None when unknown).

    ``AVSIM_PEAK_TFLOPS`` in the environment overrides the table.
    """
    override = os.environ.get("AVSIM_PEAK_TFLOPS")
    if override:
        return float(override) * 1e12
    for key, value in PEAK_BF16.items():
        if key in device_name:
            return value
    return None
