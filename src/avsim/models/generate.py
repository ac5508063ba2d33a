"""`avsim generate` as a library call: files in, files out.

`run_generate(GenerateRequest)` resolves the views, reads the control (and conditioning)
videos, builds the text contexts, the VAE and the DiT, runs `TransferPipeline.generate` and
writes one mp4 per view, a grid mp4 and settings.json into the output folder (atomically);
when the control render wrote labels, they go beside the videos (`avsim.models.labels_pairing`).
`sampling_options` applies a model config's defaults to options left unset; `split_views`
parses repeated / comma-separated view lists. models/cli.py only parses options into these.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.models.config import MULTIVIEW_CAMERAS, TransferConfig, get_config
from avsim.models.defaults import GENERATION
from avsim.models.labels_pairing import LabelsPairing, check_pairing, find_control_labels, place_labels
from avsim.models.pipeline import (
    Log,
    SamplingOptions,
    TransferPipeline,
    build_dit,
    build_vae,
    default_device,
    default_dtype,
)
from avsim.models.text import (
    DEFAULT_NEGATIVE_PROMPT,
    TextEncoder,
    load_prompt_embeddings,
    multiview_context,
)
from avsim.models.video_io import find_view_videos, grid_frames, read_model_frames, resolve_camera, write_video

NOISE_BANNER = (
    "!" * 78 + "\n!!  RANDOM WEIGHTS: the generated videos are NOISE, not a model output.      !!\n"
    "!!  Use --checkpoint and --vae with the released weights for real results.  !!\n" + "!" * 78
)
RANDOM_VAE_SEED = 0  # `avsim train encode --random-vae` and `avsim generate --random-vae` build the same VAE
RANDOM_VAE_BANNER = (
    "!" * 78 + "\n!!  RANDOM VAE (--random-vae): an untrained tokenizer decodes these videos, !!\n"
    "!!  so they are NOISE. For smoke tests only; use --vae for real results.    !!\n" + "!" * 78
)


@dataclass
class GenerateRequest:
    """Resolved inputs of one `avsim generate` run (written to settings.json)."""

    control_dir: Path
    out: Path
    config: str = GENERATION.config
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
    random_vae: bool = False
    zero_text: bool = False
    device: str | None = None
    offload: bool = False
    vae_tile_px: int | None = None
    overwrite: bool = False
    options: SamplingOptions = field(default_factory=SamplingOptions)


def sampling_options(
    cfg: TransferConfig, *, steps: int | None = None, guidance: float | None = None, **options: Any
) -> SamplingOptions:
    """SamplingOptions with the config's steps / guidance / shift where not given.

    ``options``: any other `SamplingOptions` field (seed, sampler, chunks, ...).
    """
    return SamplingOptions(
        steps=steps or cfg.default_steps,
        guidance=cfg.default_guidance if guidance is None else guidance,
        shift=cfg.sigma_shift,
        **options,
    )


def split_views(items: Sequence[str] | None) -> list[str]:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]`` (repeated and comma-separated, blanks dropped)."""
    return [v.strip() for item in (items or []) for v in item.split(",") if v.strip()]


def _embedding_contexts(
    path: Path, cfg: TransferConfig, v_count: int, prompt_view: int, guidance: float, log: Log
) -> tuple[Tensor, Tensor | None]:
    """(V*N, C) contexts from a precomputed embeddings file."""
    data = load_prompt_embeddings(path)
    width = data["prompt"].shape[-1]
    if width not in (cfg.dit.crossattn_proj_in_channels, cfg.dit.crossattn_emb_channels):
        raise AvsimInputError(path, "prompt", f"channel width {width} fits neither the raw nor the projected text")
    try:
        ctx = multiview_context(data["prompt"], data.get("blank"), v_count, prompt_view)
        neg = data.get("negative")
        neg_ctx = multiview_context(neg, data.get("blank"), v_count, prompt_view) if neg is not None else None
    except ValueError as exc:
        raise AvsimInputError(path, "prompt", str(exc)) from exc
    if neg_ctx is None and guidance != 0:
        log("warning: the embeddings file has no 'negative'; the unconditional branch uses zero text (as in text dropout)")
        neg_ctx = torch.zeros_like(ctx)
    return ctx.float(), None if neg_ctx is None else neg_ctx.float()


def _zero_contexts(cfg: TransferConfig, v_count: int) -> tuple[Tensor, Tensor]:
    """All-zero (V*N, C) conditional and negative contexts (what text dropout feeds)."""
    zeros = torch.zeros(v_count * cfg.dit.text_tokens_per_view, cfg.dit.crossattn_proj_in_channels)
    return zeros, zeros.clone()


def _text_contexts(
    req: GenerateRequest, cfg: TransferConfig, cameras: list[str], device: torch.device, log: Log
) -> tuple[Tensor, Tensor | None]:
    """(V*N, C) conditional and negative contexts from a file, the text encoder, or zeros."""
    v_count = len(cameras)
    front = cfg.cameras[0]
    prompt_view = cameras.index(front) if front in cameras else 0
    if front not in cameras and v_count > 1:
        log(f"warning: {front} is not among the views; the caption goes to {cameras[0]}")
    if req.zero_text:
        return _zero_contexts(cfg, v_count)
    if req.embeddings is not None:
        return _embedding_contexts(req.embeddings, cfg, v_count, prompt_view, req.options.guidance, log)
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
        return _zero_contexts(cfg, v_count)
    raise AvsimInputError("--prompt", "text", "give --prompt with --text-encoder, --embeddings, or --zero-text")


def _settings_json(req: GenerateRequest, cfg: TransferConfig, clip: str, cameras: list[str], frames: int) -> dict[str, Any]:
    """Resolved settings; no timings, so the same run writes the same bytes."""
    req_dict = dataclasses.asdict(req)
    return {
        "clip": clip,
        "views": cameras,
        "output_is_noise": req.random_weights or req.random_vae,
        "request": json.loads(json.dumps(req_dict, default=str)),
        "config": cfg.to_dict(),
        "frames_per_view": frames,
        "fps": cfg.model_fps,
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
    }


def _check_request(req: GenerateRequest, log: Log) -> None:
    if req.random_weights and (req.checkpoint is not None or req.vae is not None):
        raise AvsimInputError("--random-weights", "weights",
                              "random weights replace --checkpoint and --vae; give one or the other")
    if req.random_vae and (req.random_weights or req.vae is not None):
        raise AvsimInputError("--random-vae", "weights", "the random VAE replaces --vae (and --random-weights has its own)")
    if req.zero_text and (req.embeddings is not None or req.prompt is not None):
        raise AvsimInputError("--zero-text", "text", "zero text replaces --embeddings and --prompt; give one")
    if req.random_weights:
        log(NOISE_BANNER)
    elif req.checkpoint is None or (req.vae is None and not req.random_vae):
        raise AvsimInputError("--checkpoint", "weights", "give --checkpoint and --vae (or --random-weights for a smoke test)")
    if req.random_vae:
        log(RANDOM_VAE_BANNER)
    if req.out.exists() and not req.out.is_dir():
        raise AvsimInputError(req.out, "out", "exists and is not a folder")
    if req.out.exists() and any(req.out.iterdir()) and not req.overwrite:
        raise AvsimInputError(req.out, "out", "exists and is not empty (use --overwrite)")


def _resolve_views(req: GenerateRequest, cfg: TransferConfig) -> tuple[list[str], Tensor]:
    """The cameras to generate and their view-embedding indices (V,)."""
    known = cfg.cameras if cfg.dit.is_multiview else MULTIVIEW_CAMERAS  # single view: any one camera
    cameras = [resolve_camera(v, known) for v in req.views] or list(cfg.cameras)
    if len(set(cameras)) != len(cameras):
        raise AvsimInputError("--views", ",".join(req.views), "a view is listed twice")
    if not cfg.dit.is_multiview and len(cameras) != 1:
        raise AvsimInputError("--views", ",".join(cameras), "the single-view config takes exactly one view")
    return cameras, torch.tensor([known.index(c) for c in cameras])


def _read_videos(
    req: GenerateRequest, cfg: TransferConfig, cameras: list[str], log: Log
) -> tuple[str, list[Tensor], list[Tensor] | None]:
    """(clip, per-view control frames, per-view conditioning frames or None) at the model rate."""
    opts = req.options
    clip, paths = find_view_videos(req.control_dir, cameras, req.clip, kind="control")
    span = cfg.frames_per_chunk + (opts.chunks - 1) * (cfg.frames_per_chunk - opts.overlap)
    log(f"clip {clip}: {len(cameras)} views, {span} frames at {cfg.model_fps:g} fps, {cfg.width_px}x{cfg.height_px}")
    control = [read_model_frames(paths[c], span, cfg.height_px, cfg.width_px, cfg.model_fps) for c in cameras]
    if not opts.num_conditional_frames:
        return clip, control, None
    if req.input_videos is None:
        raise AvsimInputError("--num-conditional-frames", str(opts.num_conditional_frames), "needs --input-videos")
    _, rgb = find_view_videos(req.input_videos, cameras, req.clip, kind="rgb")
    conditioning = [read_model_frames(rgb[c], opts.num_conditional_frames, cfg.height_px, cfg.width_px, cfg.model_fps)
                    for c in cameras]
    return clip, control, conditioning


def _labels_pairing(req: GenerateRequest, cfg: TransferConfig, clip: str, cameras: list[str]) -> LabelsPairing | None:
    """The control render's labels when it wrote some, checked to index the generated frames unchanged."""
    folder = find_control_labels(req.control_dir, clip)
    if folder is None:
        return None
    _, paths = find_view_videos(req.control_dir, cameras[:1], clip, kind="control")
    span = cfg.frames_per_chunk + (req.options.chunks - 1) * (cfg.frames_per_chunk - req.options.overlap)
    return check_pairing(folder, clip, paths[cameras[0]], span, cfg.model_fps, (cfg.width_px, cfg.height_px))


def _write_outputs(out: Path, clip: str, cameras: list[str], videos: list[Tensor], fps: float, settings: dict[str, Any],
                   pairing: LabelsPairing | None = None) -> dict[str, Any]:  # fmt: skip
    """One mp4 per view, the grid mp4, the control labels (if any) and settings.json, written atomically into `out`."""
    with atomic_output_path(out, is_dir=True) as tmp:
        tmp.chmod(0o755)  # mkdtemp makes it private; the output folder is an ordinary one
        for cam, video in zip(cameras, videos, strict=True):
            write_video(tmp / f"{clip}.{cam}.mp4", video, fps)
        write_video(tmp / f"{clip}.grid.mp4", grid_frames(dict(zip(cameras, videos, strict=True))), fps)
        if pairing is not None:
            settings = {**settings, "labels": place_labels(pairing, tmp, out, int(videos[0].shape[0]))}
        (tmp / "settings.json").write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    return settings


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def run_generate(req: GenerateRequest, log: Log = _stderr) -> dict[str, Any]:
    """Run one generation from files to files; returns the settings written to settings.json."""
    start_time = time.perf_counter()
    cfg = get_config(req.config)
    opts = req.options
    _check_request(req, log)
    cameras, view_indices = _resolve_views(req, cfg)
    device = torch.device(req.device) if req.device else default_device()
    dtype = default_dtype(device)
    clip, control, conditioning = _read_videos(req, cfg, cameras, log)
    pairing = _labels_pairing(req, cfg, clip, cameras)  # before any weights are loaded: a mismatch fails fast

    context, negative = _text_contexts(req, cfg, cameras, device, log)
    vae_seed = RANDOM_VAE_SEED if req.random_vae else opts.seed
    vae = build_vae(cfg, req.vae, torch.device("cpu") if req.offload else device, dtype, vae_seed)
    dit = build_dit(cfg, req.checkpoint, device, dtype, opts.seed)
    pipe = TransferPipeline(cfg, dit, vae, device, offload_vae=req.offload, vae_tile_px=req.vae_tile_px, log=log)
    videos = pipe.generate(control, context, negative, view_indices, opts, conditioning)

    settings = _settings_json(req, cfg, clip, cameras, int(videos[0].shape[0]))
    settings = _write_outputs(req.out, clip, cameras, videos, cfg.model_fps, settings, pairing)
    if req.random_weights or req.random_vae:
        log(NOISE_BANNER if req.random_weights else RANDOM_VAE_BANNER)
    log(f"wrote {len(cameras)} views + grid to {req.out} in {time.perf_counter() - start_time:.1f} s")
    return settings


__all__ = [
    "NOISE_BANNER", "RANDOM_VAE_BANNER", "RANDOM_VAE_SEED", "GenerateRequest", "run_generate", "sampling_options", "split_views",
]
