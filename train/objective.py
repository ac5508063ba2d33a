"""Rectified-flow training objective: sigma sampling, conditioning frames, text dropout, loss.

Convention (transfer_model.md sections 7-8): ``x_sigma = (1 - sigma) x0 + sigma eps``, the
network predicts ``v = eps - x0``, the loss is the MSE between predicted and true velocity.
Latents are ``(B, C, V*T, H, W)``: views concatenated along time, ``T`` latent frames each
(`avsim.models.layout`). The sigma shift and the sigma -> timestep map come from
`avsim.models.flow` (``shift_sigma`` and ``timestep_of_sigma`` are re-exported here).

Every random draw takes an explicit ``torch.Generator`` so a training step is a pure function
of (seed, step, data-parallel rank): resuming reproduces it bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from avsim.models.flow import DEFAULT_SIGMA_SHIFT, shift_sigma
from avsim.models.flow import timestep_tensor as timestep_of_sigma
from avsim.models.layout import first_frames_mask, frames_per_view


@dataclass(frozen=True)
class ObjectiveConfig:
    """The released post-training recipe's objective (section 8).

    ``sigma_shift``: shift of the logit-normal sampler (5 at 720p);
    ``high_noise_fraction``: share of samples drawn uniformly from ``high_noise_range``;
    ``condition_frame_probs``: probability of k clean latent frames per view (k -> p);
    ``text_dropout``: probability that a sample's text embedding is replaced by zeros.
    """

    sigma_shift: float = DEFAULT_SIGMA_SHIFT
    logit_mean: float = 0.0
    logit_std: float = 1.0
    high_noise_fraction: float = 0.05
    high_noise_range: tuple[float, float] = (0.98, 1.0)
    condition_frame_probs: dict[int, float] = field(default_factory=lambda: {0: 0.5, 1: 0.25, 2: 0.25})
    text_dropout: float = 0.2

    def __post_init__(self) -> None:
        if self.sigma_shift <= 0 or self.logit_std <= 0:
            raise ValueError("sigma_shift and logit_std must be positive")
        if not 0.0 <= self.high_noise_fraction <= 1.0 or not 0.0 <= self.text_dropout <= 1.0:
            raise ValueError("high_noise_fraction and text_dropout must lie in [0, 1]")
        lo, hi = self.high_noise_range
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"high_noise_range must satisfy 0 <= lo <= hi <= 1, got {self.high_noise_range}")
        probs = self.condition_frame_probs
        if not probs or min(probs) < 0 or min(probs.values()) < 0 or abs(sum(probs.values()) - 1) > 1e-6:
            raise ValueError(f"condition_frame_probs must be a distribution over k >= 0, got {probs}")


def sample_sigma(batch: int, cfg: ObjectiveConfig, generator: torch.Generator) -> Tensor:
    """Noise levels (batch,) float32 in [0, 1]: shifted logit-normal, plus the high-noise slice."""
    normal = torch.randn(batch, generator=generator, dtype=torch.float64)
    sigma = shift_sigma(torch.sigmoid(cfg.logit_mean + cfg.logit_std * normal), cfg.sigma_shift)
    lo, hi = cfg.high_noise_range
    uniform = lo + (hi - lo) * torch.rand(batch, generator=generator, dtype=torch.float64)
    pick_high = torch.rand(batch, generator=generator, dtype=torch.float64) < cfg.high_noise_fraction
    return torch.where(pick_high, uniform, sigma).float()


def sample_condition_frames(batch: int, cfg: ObjectiveConfig, generator: torch.Generator) -> Tensor:
    """Number of clean (conditioning) latent frames per sample and view, (batch,) int64."""
    ks = sorted(cfg.condition_frame_probs)
    probs = torch.tensor([cfg.condition_frame_probs[k] for k in ks], dtype=torch.float64)
    draw = torch.multinomial(probs, batch, replacement=True, generator=generator)
    return torch.tensor(ks, dtype=torch.long)[draw]


def sample_text_keep(batch: int, cfg: ObjectiveConfig, generator: torch.Generator) -> Tensor:
    """(batch,) bool: False where the sample's text embedding is dropped (set to zeros)."""
    return torch.rand(batch, generator=generator, dtype=torch.float64) >= cfg.text_dropout


def condition_mask(num_frames: Tensor, num_views: int, frames: int) -> Tensor:
    """(B,) clean frames per view -> mask (B, 1, V*T, 1, 1) float32, 1 on conditioning frames.

    At most T - 1 frames are clean: a sample always has a frame left to learn from.
    """
    return first_frames_mask(num_frames.clamp(max=frames - 1), num_views, frames)


def noised(x0: Tensor, eps: Tensor, sigma: Tensor, cond: Tensor) -> Tensor:
    """x_sigma with the conditioning frames clean: (B, C, V*T, H, W)."""
    s = sigma.to(x0.dtype).view(-1, 1, 1, 1, 1)
    x = (1 - s) * x0 + s * eps
    return torch.where(cond.bool(), x0, x)


def flow_matching_loss(v_pred: Tensor, x0: Tensor, eps: Tensor, cond: Tensor) -> Tensor:
    """Velocity MSE over the non-conditioning frames, fp32.

    Averaged per sample (over its own generated elements), then over the batch, so equal
    per-rank batches average exactly under data parallelism.
    """
    target = (eps - x0).float()
    weight = (1.0 - cond).expand_as(target)
    err = (v_pred.float() - target).square() * weight
    per_sample = err.flatten(1).sum(1) / weight.flatten(1).sum(1).clamp_min(1.0)
    return per_sample.mean()


@dataclass(frozen=True)
class NoisedBatch:
    """Everything one training step feeds the network and the loss."""

    x_sigma: Tensor  # (B, C, V*T, H, W)
    x0: Tensor
    eps: Tensor
    sigma: Tensor  # (B,) float32
    timestep: Tensor  # (B,) float32, int(1000 * sigma)
    cond: Tensor  # (B, 1, V*T, 1, 1) float32
    text_keep: Tensor  # (B,) bool


def sample_generator(seed: int, step: int, sample: int) -> torch.Generator:
    """The CPU generator of one sample of one step; `sample` = index in the global batch.

    Keyed by the global sample index, so the draws do not depend on how the global batch is
    split over data-parallel ranks (CP ranks of one group draw the same).
    """
    g = torch.Generator()
    g.manual_seed(((seed * 1_000_003 + step) * 65_537 + sample) % (2**63))
    return g


def prepare_batch(
    x0: Tensor, num_views: int, cfg: ObjectiveConfig, *, seed: int, step: int, first_sample: int
) -> NoisedBatch:
    """Draw noise, sigma, conditioning frames and text dropout for a latent batch x0.

    Sample i of the batch uses ``sample_generator(seed, step, first_sample + i)``; draws
    happen on the CPU in a fixed order, then move to x0's device, so a batch is identical on
    CPU and GPU, on every CP rank, and under any data-parallel split.
    """
    frames = frames_per_view(x0, num_views)
    b = x0.shape[0]
    sigma, k, keep, eps = [], [], [], []
    for i in range(b):
        g = sample_generator(seed, step, first_sample + i)
        sigma.append(sample_sigma(1, cfg, g))
        k.append(sample_condition_frames(1, cfg, g))
        keep.append(sample_text_keep(1, cfg, g))
        eps.append(torch.randn(x0.shape[1:], generator=g, dtype=torch.float32))
    sigma_t = torch.cat(sigma).to(x0.device)
    cond = condition_mask(torch.cat(k), num_views, frames).to(x0.device)
    eps_t = torch.stack(eps).to(x0.device, x0.dtype)
    return NoisedBatch(
        x_sigma=noised(x0, eps_t, sigma_t, cond),
        x0=x0,
        eps=eps_t,
        sigma=sigma_t,
        timestep=timestep_of_sigma(sigma_t),
        cond=cond,
        text_keep=torch.cat(keep).to(x0.device),
    )


__all__ = [
    "NoisedBatch",
    "ObjectiveConfig",
    "condition_mask",
    "flow_matching_loss",
    "noised",
    "prepare_batch",
    "sample_condition_frames",
    "sample_generator",
    "sample_sigma",
    "sample_text_keep",
    "shift_sigma",
    "timestep_of_sigma",
]
