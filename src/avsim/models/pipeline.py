"""Multi-view generation pipeline: control videos -> VAE latents -> DiT sampling -> videos.

Placement on one GPU: the text encoder (if used) runs first and is released; views are
encoded and decoded one at a time; the VAE can stay on the CPU between uses (`offload_vae`);
the DiT runs in bf16 on CUDA (float32 on CPU). The prompt's projection to 1024 channels is
computed once per run.

Two layers:
- `TransferPipeline` (here): tensors in, tensors out (`generate`).
- `avsim.models.generate.run_generate(GenerateRequest)`: files in, files out (what
  `avsim generate` calls).

Latents use the view-packed layout of `avsim.models.layout`; option defaults come from
`avsim.models.defaults.GENERATION`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from avsim.core.errors import AvsimInputError
from avsim.core.progress import StepProgress, report_step
from avsim.models import samplers
from avsim.models.checkpoint import load_dit_state_dict, load_into, load_vae_state_dict
from avsim.models.config import TransferConfig
from avsim.models.control import TransferDiT
from avsim.models.defaults import GENERATION
from avsim.models.dit import DiT
from avsim.models.layout import first_frames_mask, frames_per_view, pack_views, place_first_frames, unpack_views
from avsim.models.vae import WanVAE
from avsim.models.video_io import to_model_range, to_uint8

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def default_dtype(device: torch.device) -> torch.dtype:
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def build_dit(config: TransferConfig, checkpoint: Path | None, device: torch.device, dtype: torch.dtype, seed: int = 0) -> DiT:
    """The TransferDiT from a `net.*` checkpoint (strict), or randomly initialised if None.

    Random weights also give the zero-initialised control projections small random values so
    that the control path visibly acts (smoke tests only).
    """
    cls = TransferDiT if config.dit.control_block_ids else DiT
    if checkpoint is None:
        torch.manual_seed(seed)
        model = cls(config.dit)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "before_proj" in name or "after_proj" in name:
                    p.normal_(0.0, 0.02)
        return model.to(device=device, dtype=dtype).eval()
    with torch.device("meta"):
        model = cls(config.dit)
    model = model.to(dtype)
    load_into(model, load_dit_state_dict(checkpoint), strict=True, source=str(checkpoint))
    return model.to(device).eval()


def build_vae(config: TransferConfig, checkpoint: Path | None, device: torch.device, dtype: torch.dtype, seed: int = 0) -> WanVAE:
    if checkpoint is None:
        torch.manual_seed(seed + 1)
        return WanVAE(config.vae).to(device=device, dtype=dtype).eval()
    with torch.device("meta"):
        model = WanVAE(config.vae)
    model = model.to(dtype)
    load_into(model, load_vae_state_dict(checkpoint), strict=True, source=str(checkpoint))
    return model.to(device).eval()


@dataclass
class SamplingOptions:
    """How to sample: steps, CFG guidance, seed, sampler (`SAMPLER_NAMES`), chunking, shift."""

    steps: int = GENERATION.steps
    guidance: float = GENERATION.guidance
    seed: int = GENERATION.seed
    control_weight: float = GENERATION.control_weight
    sampler: str = GENERATION.sampler
    num_conditional_frames: int = GENERATION.num_conditional_frames
    chunks: int = GENERATION.chunks
    overlap: int = GENERATION.overlap
    shift: float = GENERATION.shift


class TransferPipeline:
    """Tensor-level multi-view generation with a TransferDiT and a Wan2.1 VAE."""

    def __init__(
        self,
        config: TransferConfig,
        dit: DiT,
        vae: WanVAE,
        device: torch.device | None = None,
        offload_vae: bool = False,
        vae_chunk_frames: int = 4,
        vae_tile_px: int | None = None,
        log: Log = _quiet,
        progress: StepProgress | None = None,
    ) -> None:
        """Args:
        config, dit, vae: the model.
        device: where the DiT runs (default: its parameters' device).
        offload_vae: keep the VAE on the CPU between uses.
        vae_chunk_frames, vae_tile_px: VAE time chunk and spatial tile (memory).
        log: one-line messages (per sampling step when there is no `progress`).
        progress: per view of each VAE encode / decode and per sampling step (`avsim.core.progress.StepProgress`).
        """
        self.config, self.dit, self.vae = config, dit, vae
        self.device = device or next(dit.parameters()).device
        self.offload_vae = offload_vae
        self.vae_chunk_frames, self.vae_tile_px = vae_chunk_frames, vae_tile_px
        self.log = log
        self.progress = progress

    # ---- VAE, one view at a time ----
    def _vae_on(self) -> WanVAE:
        return self.vae.to(self.device) if self.offload_vae else self.vae

    def _vae_off(self) -> None:
        if self.offload_vae:
            self.vae.to("cpu")
            if self.device.type == "cuda":
                torch.cuda.empty_cache()

    def encode_views(self, views: list[Tensor], step: str = "VAE encode") -> Tensor:
        """Per-view (T, 3, H, W) uint8 -> (1, 16, V*T_lat, h, w) float32, encoded one by one (progress per view under `step`)."""
        vae = self._vae_on()
        lat = []
        report_step(self.progress, step, 0, len(views))
        for i, v in enumerate(views):
            lat.append(vae.encode(to_model_range(v).to(self.device), self.vae_chunk_frames, self.vae_tile_px).float())
            report_step(self.progress, step, i + 1, len(views))
        self._vae_off()
        return pack_views(lat)

    def decode_views(self, latent: Tensor, num_views: int, step: str = "VAE decode") -> list[Tensor]:
        """(1, 16, V*T_lat, h, w) -> per-view (T, 3, H, W) uint8, decoded one by one (progress per view under `step`)."""
        vae = self._vae_on()
        out = []
        report_step(self.progress, step, 0, num_views)
        for i, z in enumerate(unpack_views(latent, num_views)):
            out.append(to_uint8(vae.decode(z).cpu()))
            report_step(self.progress, step, i + 1, num_views)
        self._vae_off()
        return out

    # ---- sampling ----
    def project_context(self, context: Tensor) -> Tensor:
        """(V*N, C) raw or projected text -> (1, V*N, 1024) on the device, projected once."""
        with torch.no_grad():
            return self.dit.project_text(context[None].to(self.device))

    @torch.no_grad()
    def sample_latents(
        self,
        control_latent: Tensor,
        context: Tensor,
        negative_context: Tensor | None,
        clean: Tensor | None,
        num_cond_latent: int,
        num_views: int,
        view_indices: Tensor,
        opts: SamplingOptions,
        seed: int,
        step_name: str = "sampling",
    ) -> Tensor:
        """One chunk: (1, 16, V*T_lat, h, w) float32 clean latents sampled from seeded noise (progress per step under `step_name`)."""
        shape = control_latent.shape
        tl = frames_per_view(control_latent, num_views)
        noise = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32).to(self.device)
        frame_mask = first_frames_mask(torch.tensor([num_cond_latent]), num_views, tl).to(self.device)
        cond_mask = frame_mask.expand(1, 1, shape[2], shape[3], shape[4])
        dtype = self.dit.param_dtype
        ctrl = control_latent.to(self.device, dtype)

        def net(ctx: Tensor) -> samplers.VelocityFn:
            def fn(x: Tensor, sigma: float, t: int) -> Tensor:
                ts = torch.full((1,), float(t), device=self.device)
                return self.dit(x.to(dtype), ts, ctx, condition_mask=cond_mask.to(dtype), num_views=num_views,
                                view_indices=view_indices, control_latent=ctrl, control_weight=opts.control_weight).float()

            return fn

        uncond = net(negative_context) if negative_context is not None else None
        velocity = samplers.guided_velocity(net(context), uncond, opts.guidance)
        if num_cond_latent > 0 and clean is not None:
            velocity = samplers.conditioned_velocity(velocity, clean.to(self.device), noise, frame_mask)
        sigmas = samplers.sigma_grid(opts.steps, opts.shift)
        step = [0]
        report_step(self.progress, step_name, 0, opts.steps)

        def logged(x: Tensor, sigma: float, t: int) -> Tensor:
            step[0] += 1
            start = time.perf_counter()
            v = velocity(x, sigma, t)
            if self.progress is None:
                self.log(f"  step {step[0]}/{opts.steps} sigma={sigma:.4f} t={t} ({time.perf_counter() - start:.2f} s)")
            report_step(self.progress, step_name, step[0], opts.steps)
            return v

        x0 = samplers.sample(opts.sampler, logged, noise, sigmas)
        if num_cond_latent > 0 and clean is not None:
            x0 = samplers.replace_frames(x0, clean.to(self.device), frame_mask)
        return x0

    def generate(
        self,
        control: list[Tensor],
        context: Tensor,
        negative_context: Tensor | None,
        view_indices: Tensor,
        opts: SamplingOptions,
        conditioning: list[Tensor] | None = None,
    ) -> list[Tensor]:
        """Generate every view.

        control: per view (T_total, 3, H, W) uint8 at the model rate, T_total >= the chunks' span;
        context / negative_context: (V*N, C) text; conditioning: per view (n, 3, H, W) uint8
        first frames (n = opts.num_conditional_frames) or None.
        Returns per view (T_out, 3, H, W) uint8, T_out = F + (chunks - 1) (F - overlap).
        """
        cfg = self.config
        v_count = len(control)
        f = cfg.frames_per_chunk
        tf = cfg.vae.temporal_factor
        for n, what in ((opts.num_conditional_frames, "num_conditional_frames"), (opts.overlap, "overlap")):
            if n and (n - 1) % tf:
                raise AvsimInputError(what, str(n), f"must be 0 or 1 + {tf}k pixel frames")
        starts = samplers.chunk_starts(min(c.shape[0] for c in control), f, opts.overlap if opts.chunks > 1 else 0, opts.chunks)
        ctx = self.project_context(context)
        neg = self.project_context(negative_context) if negative_context is not None and opts.guidance != 0 else None
        outputs: list[list[Tensor]] = [[] for _ in range(v_count)]
        previous: list[Tensor] | None = None
        for k, start in enumerate(starts):
            self.log(f"chunk {k + 1}/{len(starts)}: frames {start}..{start + f - 1}")
            which = f" (chunk {k + 1}/{len(starts)})" if len(starts) > 1 else ""
            control_latent = self.encode_views([c[start : start + f] for c in control], f"VAE encode control{which}")
            if k == 0:
                cond_frames = [c[: opts.num_conditional_frames] for c in conditioning] if conditioning and opts.num_conditional_frames else None
            else:
                cond_frames = [p[f - opts.overlap :] for p in previous] if opts.overlap and previous else None
            clean, n_lat = None, 0
            if cond_frames is not None:
                n_lat = samplers.pixel_to_latent_frames(cond_frames[0].shape[0], tf)
                clean = place_first_frames(self.encode_views(cond_frames, f"VAE encode conditioning{which}"), v_count,
                                           frames_per_view(control_latent, v_count))  # fmt: skip
            latent = self.sample_latents(control_latent, ctx, neg, clean, n_lat, v_count, view_indices, opts, opts.seed + k,
                                         f"sampling{which}")  # fmt: skip
            videos = self.decode_views(latent, v_count, f"VAE decode{which}")
            for v in range(v_count):
                outputs[v].append(videos[v] if k == 0 else videos[v][opts.overlap :])
            previous = videos
        return [torch.cat(o, dim=0) for o in outputs]


__all__ = [
    "Log",
    "SamplingOptions",
    "TransferPipeline",
    "build_dit",
    "build_vae",
    "default_device",
    "default_dtype",
]
