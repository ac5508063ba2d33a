"""Multi-view generation pipeline: control videos -> VAE latents -> DiT sampling -> videos.

Placement on one GPU: the text encoder (if used) runs first and is released; views are
encoded and decoded one at a time; the VAE can stay on the CPU between uses (`offload_vae`);
the DiT runs in bf16 on CUDA (float32 on CPU). The prompt's projection to 1024 channels is
computed once per run.

Two layers:
- `TransferPipeline`: tensors in, tensors out (`generate`).
- `run_generate(GenerateRequest)`: files in, files out (what `avsim generate` calls).
"""

from __future__ import annotations

import dataclasses
import json
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.models import samplers
from avsim.models.checkpoint import load_dit_state_dict, load_into, load_vae_state_dict
from avsim.models.config import MULTIVIEW_CAMERAS, TransferConfig, get_config
from avsim.models.control import TransferDiT
from avsim.models.dit import DiT
from avsim.models.text import (
    DEFAULT_NEGATIVE_PROMPT,
    TextEncoder,
    load_prompt_embeddings,
    multiview_context,
)
from avsim.models.vae import WanVAE
from avsim.models.video_io import (
    find_view_videos,
    grid_frames,
    read_model_frames,
    resolve_camera,
    to_model_range,
    to_uint8,
    write_video,
)

NOISE_BANNER = (
    "!" * 78 + "\n!!  RANDOM WEIGHTS: the generated videos are NOISE, not a model output.      !!\n"
    "!!  Use --checkpoint and --vae with the released weights for real results.  !!\n" + "!" * 78
)

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
    steps: int = 35
    guidance: float = 3.0
    seed: int = 0
    control_weight: float = 1.0
    sampler: str = "unipc"
    num_conditional_frames: int = 0
    chunks: int = 1
    overlap: int = 1
    shift: float = 5.0


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
    ) -> None:
        self.config, self.dit, self.vae = config, dit, vae
        self.device = device or next(dit.parameters()).device
        self.offload_vae = offload_vae
        self.vae_chunk_frames, self.vae_tile_px = vae_chunk_frames, vae_tile_px
        self.log = log

    # ---- VAE, one view at a time ----
    def _vae_on(self) -> WanVAE:
        return self.vae.to(self.device) if self.offload_vae else self.vae

    def _vae_off(self) -> None:
        if self.offload_vae:
            self.vae.to("cpu")
            if self.device.type == "cuda":
                torch.cuda.empty_cache()

    def encode_views(self, views: list[Tensor]) -> Tensor:
        """Per-view (T, 3, H, W) uint8 -> (1, 16, V*T_lat, h, w) float32, encoded one by one."""
        vae = self._vae_on()
        lat = [vae.encode(to_model_range(v).to(self.device), self.vae_chunk_frames, self.vae_tile_px).float() for v in views]
        self._vae_off()
        return torch.cat(lat, dim=2)

    def decode_views(self, latent: Tensor, num_views: int) -> list[Tensor]:
        """(1, 16, V*T_lat, h, w) -> per-view (T, 3, H, W) uint8, decoded one by one."""
        vae = self._vae_on()
        out = [to_uint8(vae.decode(z).cpu()) for z in latent.chunk(num_views, dim=2)]
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
    ) -> Tensor:
        """One chunk: (1, 16, V*T_lat, h, w) float32 clean latents sampled from seeded noise."""
        shape = control_latent.shape
        tl = shape[2] // num_views
        noise = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32).to(self.device)
        frame_mask = torch.zeros(1, 1, shape[2], 1, 1, device=self.device)
        for v in range(num_views):
            frame_mask[:, :, v * tl : v * tl + num_cond_latent] = 1.0
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

        def logged(x: Tensor, sigma: float, t: int) -> Tensor:
            step[0] += 1
            start = time.perf_counter()
            v = velocity(x, sigma, t)
            self.log(f"  step {step[0]}/{opts.steps} sigma={sigma:.4f} t={t} ({time.perf_counter() - start:.2f} s)")
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
            control_latent = self.encode_views([c[start : start + f] for c in control])
            if k == 0:
                cond_frames = [c[: opts.num_conditional_frames] for c in conditioning] if conditioning and opts.num_conditional_frames else None
            else:
                cond_frames = [p[f - opts.overlap :] for p in previous] if opts.overlap and previous else None
            clean, n_lat = None, 0
            if cond_frames is not None:
                n_lat = samplers.pixel_to_latent_frames(cond_frames[0].shape[0], tf)
                enc = self.encode_views(cond_frames)
                clean = torch.zeros_like(control_latent)
                tl = control_latent.shape[2] // v_count
                for v in range(v_count):
                    clean[:, :, v * tl : v * tl + n_lat] = enc[:, :, v * n_lat : (v + 1) * n_lat]
            latent = self.sample_latents(control_latent, ctx, neg, clean, n_lat, v_count, view_indices, opts, opts.seed + k)
            videos = self.decode_views(latent, v_count)
            for v in range(v_count):
                outputs[v].append(videos[v] if k == 0 else videos[v][opts.overlap :])
            previous = videos
        return [torch.cat(o, dim=0) for o in outputs]


@dataclass
class GenerateRequest:
    """Resolved inputs of one `avsim generate` run (written to settings.json)."""

    control_dir: Path
    out: Path
    config: str = "transfer25_2b_multiview"
    checkpoint: Path | None = None
    vae: Path | None = None
    prompt: str | None = None
    negative_prompt: str = DEFAULT_NEGATIVE_PROMPT
    text_encoder: Path | None = None
    embeddings: Path | None = None
    text_cache_dir: Path | None = None
    views: list[str] = field(default_factory=list)
    clip: str | None = None
    input_videos: Path | None = None
    random_weights: bool = False
    device: str | None = None
    offload: bool = False
    vae_tile_px: int | None = None
    overwrite: bool = False
    options: SamplingOptions = field(default_factory=SamplingOptions)


def _text_contexts(
    req: GenerateRequest, cfg: TransferConfig, cameras: list[str], device: torch.device, log: Log
) -> tuple[Tensor, Tensor | None]:
    """(V*N, C) conditional and negative contexts from a file, the text encoder, or zeros."""
    v_count = len(cameras)
    front = cfg.cameras[0]
    prompt_view = cameras.index(front) if front in cameras else 0
    if front not in cameras and v_count > 1:
        log(f"warning: {front} is not among the views; the caption goes to {cameras[0]}")
    if req.embeddings is not None:
        data = load_prompt_embeddings(req.embeddings)
        width = data["prompt"].shape[-1]
        if width not in (cfg.dit.crossattn_proj_in_channels, cfg.dit.crossattn_emb_channels):
            raise AvsimInputError(req.embeddings, "prompt", f"channel width {width} fits neither the raw nor the projected text")
        try:
            ctx = multiview_context(data["prompt"], data.get("blank"), v_count, prompt_view)
            neg = data.get("negative")
            neg_ctx = multiview_context(neg, data.get("blank"), v_count, prompt_view) if neg is not None else None
        except ValueError as exc:
            raise AvsimInputError(req.embeddings, "prompt", str(exc)) from exc
        if neg_ctx is None and req.options.guidance != 0:
            log("warning: the embeddings file has no 'negative'; the unconditional branch uses zero text (as in text dropout)")
            neg_ctx = torch.zeros_like(ctx)
        return ctx.float(), None if neg_ctx is None else neg_ctx.float()
    if req.prompt is not None and req.text_encoder is not None:
        log(f"encoding the prompt with {req.text_encoder} ...")
        # The encoder never shares the device with the DiT: it runs first and is released;
        # with --offload it runs on the CPU and never touches GPU memory.
        text_device = "cpu" if req.offload else str(device)
        enc = TextEncoder.from_pretrained(req.text_encoder, text_device, cache_dir=req.text_cache_dir)
        emb = enc.encode([req.prompt, " ", req.negative_prompt])
        enc.release()  # before the DiT is placed on the device
        del enc
        return (multiview_context(emb[0], emb[1], v_count, prompt_view),
                multiview_context(emb[2], emb[1], v_count, prompt_view))
    if req.random_weights:
        n = cfg.dit.text_tokens_per_view
        zeros = torch.zeros(v_count * n, cfg.dit.crossattn_proj_in_channels)
        return zeros, zeros.clone()
    raise AvsimInputError("--prompt", "text", "give --prompt with --text-encoder, or --embeddings")


def _settings_json(req: GenerateRequest, cfg: TransferConfig, clip: str, cameras: list[str], frames: int) -> dict:
    """Resolved settings; no timings, so the same run writes the same bytes."""
    req_dict = dataclasses.asdict(req)
    return {
        "clip": clip,
        "views": cameras,
        "output_is_noise": req.random_weights,
        "request": json.loads(json.dumps(req_dict, default=str)),
        "config": cfg.to_dict(),
        "frames_per_view": frames,
        "fps": cfg.model_fps,
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
    }


def run_generate(req: GenerateRequest, log: Log = lambda m: print(m, file=sys.stderr)) -> dict:
    """Run one generation from files to files; returns the settings written to settings.json."""
    start_time = time.perf_counter()
    cfg = get_config(req.config)
    opts = req.options
    if req.random_weights:
        log(NOISE_BANNER)
    elif req.checkpoint is None or req.vae is None:
        raise AvsimInputError("--checkpoint", "weights", "give --checkpoint and --vae (or --random-weights for a smoke test)")
    if req.out.exists() and not req.out.is_dir():
        raise AvsimInputError(req.out, "out", "exists and is not a folder")
    if req.out.exists() and any(req.out.iterdir()) and not req.overwrite:
        raise AvsimInputError(req.out, "out", "exists and is not empty (use --overwrite)")
    known = cfg.cameras if cfg.dit.is_multiview else MULTIVIEW_CAMERAS  # single view: any one camera
    cameras = [resolve_camera(v, known) for v in req.views] or list(cfg.cameras)
    if len(set(cameras)) != len(cameras):
        raise AvsimInputError("--views", ",".join(req.views), "a view is listed twice")
    if not cfg.dit.is_multiview and len(cameras) != 1:
        raise AvsimInputError("--views", ",".join(cameras), "the single-view config takes exactly one view")
    view_indices = torch.tensor([known.index(c) for c in cameras])
    device = torch.device(req.device) if req.device else default_device()
    dtype = default_dtype(device)

    clip, paths = find_view_videos(req.control_dir, cameras, req.clip, kind="control")
    span = cfg.frames_per_chunk + (opts.chunks - 1) * (cfg.frames_per_chunk - opts.overlap)
    log(f"clip {clip}: {len(cameras)} views, {span} frames at {cfg.model_fps:g} fps, {cfg.width_px}x{cfg.height_px}")
    control = [read_model_frames(paths[c], span, cfg.height_px, cfg.width_px, cfg.model_fps) for c in cameras]
    conditioning = None
    if opts.num_conditional_frames:
        if req.input_videos is None:
            raise AvsimInputError("--num-conditional-frames", str(opts.num_conditional_frames), "needs --input-videos")
        _, rgb = find_view_videos(req.input_videos, cameras, req.clip, kind="rgb")
        conditioning = [read_model_frames(rgb[c], opts.num_conditional_frames, cfg.height_px, cfg.width_px, cfg.model_fps)
                        for c in cameras]

    context, negative = _text_contexts(req, cfg, cameras, device, log)
    vae = build_vae(cfg, req.vae, torch.device("cpu") if req.offload else device, dtype, opts.seed)
    dit = build_dit(cfg, req.checkpoint, device, dtype, opts.seed)
    pipe = TransferPipeline(cfg, dit, vae, device, offload_vae=req.offload, vae_tile_px=req.vae_tile_px, log=log)
    videos = pipe.generate(control, context, negative, view_indices, opts, conditioning)

    settings = _settings_json(req, cfg, clip, cameras, int(videos[0].shape[0]))
    with atomic_output_path(req.out, is_dir=True) as tmp:
        tmp.chmod(0o755)  # mkdtemp makes it private; the output folder is an ordinary one
        for cam, video in zip(cameras, videos, strict=True):
            write_video(tmp / f"{clip}.{cam}.mp4", video, cfg.model_fps)
        write_video(tmp / f"{clip}.grid.mp4", grid_frames(dict(zip(cameras, videos, strict=True))), cfg.model_fps)
        (tmp / "settings.json").write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    if req.random_weights:
        log(NOISE_BANNER)
    log(f"wrote {len(cameras)} views + grid to {req.out} in {time.perf_counter() - start_time:.1f} s")
    return settings


__all__ = [
    "NOISE_BANNER",
    "GenerateRequest",
    "SamplingOptions",
    "TransferPipeline",
    "build_dit",
    "build_vae",
    "run_generate",
]
