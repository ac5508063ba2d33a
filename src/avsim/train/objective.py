"""Rectified-flow training objective: sigma sampling, conditioning frames, text dropout, loss.

Convention (transfer_model.md sections 7-8): ``x_sigma = (1 - sigma) x0 + sigma eps``, the
network predicts ``v = eps - x0``, the loss is the MSE between predicted and true velocity.
Latents are ``(B, C, V*T, H, W)``: views concatenated along time, ``T`` latent frames each
(`avsim.models.layout`). The sigma shift comes from `avsim.models.flow` (``shift_sigma`` and
the sampler's truncating ``timestep_of_sigma`` are re-exported here). Training feeds the
network t = 1000 sigma without rounding, as the reference's training step does; only its
sampler truncates to integers (``ObjectiveConfig.timesteps = "floor"`` brings the truncation
back for training).

Every random draw takes an explicit ``torch.Generator`` so a training step is a pure function
of (seed, step, data-parallel rank): resuming reproduces it bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor

from avsim.models.flow import DEFAULT_SIGMA_SHIFT, shift_sigma
from avsim.models.flow import timestep_tensor as timestep_of_sigma
from avsim.models.layout import first_frames_mask, frames_per_view

TimestepMode = Literal["continuous", "floor", "grid"]
LossNormalization = Literal["all_elements", "generated_elements"]


@dataclass(frozen=True)
class ObjectiveConfig:
    """The training objective; the defaults are the released multi-view recipe.

    ``sigma_shift``, ``logit_mean``, ``logit_std``: sigma = shift(sigmoid(mean + std z)), z ~ N(0, 1);
    ``high_noise_fraction``: share of samples drawn uniformly from ``high_noise_range`` instead
    (0 = off; avsim's earlier 0.05 from the project spec);
    ``timesteps``: ``continuous`` (t = 1000 sigma, sigma continuous), ``floor`` (avsim's earlier
    t = floor(1000 sigma)) or ``grid`` (sigma on the 1000-point grid shift(k / 1000), k = 1..1000,
    t = 1000 sigma: cosmos-transfer2.5's initial release);
    ``loss_normalization``: ``all_elements`` (mean over every latent element, conditioning
    frames contributing zero error) or ``generated_elements`` (avsim's earlier: mean over the
    non-conditioning elements, which weights a sample with k clean frames by T / (T - k));
    ``condition_frame_probs``: probability of k clean latent frames per view (k -> p);
    ``text_dropout``: probability that a sample's text embedding is replaced by zeros.
    """

    # shift 5, logit-normal(0, 1), uniform loss weight: values from cosmos-transfer2.5
    # cosmos_transfer2/_src/transfer2_multiview/configs/vid2vid_transfer/experiment/
    # buttercup_reason1_rfupdates_v2_layer4.py (shift=5, train_time_distribution="logitnormal",
    # conditional_frames_probs, text dropout_rate=0.2) and the sampler in
    # cosmos_transfer2/_src/predict2/schedulers/rectified_flow.py (sigmoid(randn), no location
    # or scale parameters).
    sigma_shift: float = DEFAULT_SIGMA_SHIFT
    logit_mean: float = 0.0
    logit_std: float = 1.0
    # No high-noise slice: training_step_multiview in cosmos_transfer2/_src/predict2_multiview/
    # models/multiview_vid2vid_model_rectified_flow.py has none (the single-view step's
    # use_high_sigma_strategy in predict2/models/text2world_model_rectified_flow.py is off by
    # default). The project spec (transfer_model.md section 8) asked for 0.05 in [0.98, 1].
    high_noise_fraction: float = 0.0
    high_noise_range: tuple[float, float] = (0.98, 1.0)
    # t = 1000 sigma, sigma = t / 1000 in float32, no rounding: get_discrete_timestamp and
    # get_sigmas of cosmos_transfer2/_src/predict2/schedulers/rectified_flow.py (release 1.4.2+)
    timesteps: TimestepMode = "continuous"
    # the prediction on conditioning frames is replaced by the true velocity and the MSE is a
    # mean over all elements: Video2WorldModelRectifiedFlow.denoise (denoise_replace_gt_frames)
    # in cosmos_transfer2/_src/predict2/models/video2world_model_rectified_flow.py and the loss
    # of training_step_multiview
    loss_normalization: LossNormalization = "all_elements"
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
        if self.timesteps not in ("continuous", "floor", "grid"):
            raise ValueError(f"timesteps must be continuous, floor or grid, got {self.timesteps!r}")
        if self.loss_normalization not in ("all_elements", "generated_elements"):
            raise ValueError(f"loss_normalization must be all_elements or generated_elements, got {self.loss_normalization!r}")
        probs = self.condition_frame_probs
        if not probs or min(probs) < 0 or min(probs.values()) < 0 or abs(sum(probs.values()) - 1) > 1e-6:
            raise ValueError(f"condition_frame_probs must be a distribution over k >= 0, got {probs}")


TRAIN_TIMESTEPS = 1000
"""Number of training timesteps: t = 1000 sigma (and the size of the ``grid`` mode's grid)."""


def sample_sigma_and_timestep(batch: int, cfg: ObjectiveConfig, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Noise levels and network timesteps, both (batch,) float32.

    Draws, in this order, from `generator`: z ~ N(0, 1) (float64), the high-noise slice's
    uniform value and its pick (drawn even when the slice is off, so every mode consumes
    the same stream). sigma = shift(sigmoid(mean + std z)) (float64), then by ``cfg.timesteps``:

    - continuous: t = float32(1000 sigma), sigma = t / 1000 (float32), as the reference;
    - floor: t = floor(1000 sigma), sigma unchanged;
    - grid: u = (1000 - floor(1000 u)) / 1000 before the shift, t = 1000 sigma.

    Args:
        batch: number of samples.
        cfg: the objective's sigma fields.
        generator: CPU generator.

    Returns:
        (sigma, t), each (batch,) float32; sigma in [0, 1], t in [0, 1000].
    """
    normal = torch.randn(batch, generator=generator, dtype=torch.float64)
    u = torch.sigmoid(cfg.logit_mean + cfg.logit_std * normal)
    if cfg.timesteps == "grid":
        # u indexes the scheduler's descending grid: FlowMatchEulerDiscreteScheduler(shift) in
        # cosmos-transfer2.5's initial commit of cosmos_transfer2/_src/predict2/schedulers/
        # rectified_flow.py (get_discrete_timestamp: index = int(1000 u), grid k / 1000, float32)
        u = (TRAIN_TIMESTEPS - (u * TRAIN_TIMESTEPS).floor()).float() / TRAIN_TIMESTEPS
        sigma = shift_sigma(u, cfg.sigma_shift).double()
    else:
        sigma = shift_sigma(u, cfg.sigma_shift)
    lo, hi = cfg.high_noise_range
    uniform = lo + (hi - lo) * torch.rand(batch, generator=generator, dtype=torch.float64)
    pick_high = torch.rand(batch, generator=generator, dtype=torch.float64) < cfg.high_noise_fraction
    sigma32 = torch.where(pick_high, uniform, sigma).float()
    if cfg.timesteps == "floor":
        return sigma32, timestep_of_sigma(sigma32)
    t = sigma32 * TRAIN_TIMESTEPS
    return (t / TRAIN_TIMESTEPS if cfg.timesteps == "continuous" else sigma32), t


def sample_sigma(batch: int, cfg: ObjectiveConfig, generator: torch.Generator) -> Tensor:
    """Noise levels (batch,) float32 in [0, 1] (`sample_sigma_and_timestep` without t)."""
    return sample_sigma_and_timestep(batch, cfg, generator)[0]


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


def flow_matching_loss(
    v_pred: Tensor, x0: Tensor, eps: Tensor, cond: Tensor, normalization: LossNormalization = "all_elements"
) -> Tensor:
    """Velocity MSE with zero error on the conditioning frames, fp32, averaged over the batch.

    Args:
        v_pred: predicted velocity (B, C, V*T, H, W).
        x0, eps: clean latents and noise, same shape.
        cond: (B, 1, V*T, 1, 1), 1 on conditioning frames.
        normalization: ``all_elements``: each sample's squared error summed over its
            generated elements and divided by all C*V*T*H*W elements (the reference replaces
            the prediction on conditioning frames by the true velocity, then takes the mean);
            ``generated_elements``: divided by the number of generated elements only.

    Returns:
        0-d fp32 loss: the mean over samples of the per-sample value, so equal per-rank
        batches average exactly under data parallelism.
    """
    target = (eps - x0).float()
    weight = (1.0 - cond).expand_as(target)
    err = (v_pred.float() - target).square() * weight
    if normalization == "all_elements":
        per_sample = err.flatten(1).mean(1)
    else:
        per_sample = err.flatten(1).sum(1) / weight.flatten(1).sum(1).clamp_min(1.0)
    return per_sample.mean()


@dataclass(frozen=True)
class NoisedBatch:
    """Everything one training step feeds the network and the loss."""

    x_sigma: Tensor  # (B, C, V*T, H, W)
    x0: Tensor
    eps: Tensor
    sigma: Tensor  # (B,) float32
    timestep: Tensor  # (B,) float32, 1000 sigma (ObjectiveConfig.timesteps)
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
    sigma, t, k, keep, eps = [], [], [], [], []
    for i in range(b):
        g = sample_generator(seed, step, first_sample + i)
        sigma_i, t_i = sample_sigma_and_timestep(1, cfg, g)
        sigma.append(sigma_i)
        t.append(t_i)
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
        timestep=torch.cat(t).to(x0.device),
        cond=cond,
        text_keep=torch.cat(keep).to(x0.device),
    )


__all__ = [
    "TRAIN_TIMESTEPS",
    "LossNormalization",
    "NoisedBatch",
    "ObjectiveConfig",
    "TimestepMode",
    "condition_mask",
    "flow_matching_loss",
    "noised",
    "prepare_batch",
    "sample_condition_frames",
    "sample_generator",
    "sample_sigma",
    "sample_sigma_and_timestep",
    "sample_text_keep",
    "shift_sigma",
    "timestep_of_sigma",
]
