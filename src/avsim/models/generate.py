"""`avsim generate` as a library call: files in, files out.

`run_generate(GenerateRequest)` resolves the views, plans the clip (`plan_clip`: the control
frames at the model rate, chosen by time from a render of any rate, and the labels pairing,
all before any weights load), builds the text contexts, the VAE and the DiT (`load_models`),
reads the frames, runs `TransferPipeline.generate` and writes one mp4 per view, a grid mp4 and
settings.json into the output folder (atomically); when the control render wrote labels, the
generated frames' labels go beside the videos (`avsim.models.labels_pairing`).
`run_generate_clips` does the same for every clip of a control folder with the models loaded
once (`avsim run generate`). Long steps (weights, text, reading, VAE per view, sampling,
writing) report to a `StepProgress` callback; the CLI draws it.
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

import numpy as np
import torch
from torch import Tensor

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.names import join_names
from avsim.core.progress import StepProgress, report_step
from avsim.core.video import video_info
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
from avsim.models.video_io import (
    find_view_videos,
    frame_times_s,
    grid_frames,
    read_frames,
    resolve_camera,
    select_frames,
    view_clips,
    write_video,
)

NOISE_BANNER = (
    "!" * 78 + "\n!!  RANDOM WEIGHTS: the generated videos are NOISE, not a model output.      !!\n"
    "!!  Use --checkpoint and --vae with the released weights for real results.  !!\n" + "!" * 78
)
RANDOM_VAE_SEED = 0  # `avsim train encode --random-vae` and `avsim generate --random-vae` build the same VAE
RANDOM_VAE_BANNER = (
    "!" * 78 + "\n!!  RANDOM VAE (--random-vae): an untrained tokenizer decodes these videos, !!\n"
    "!!  so they are NOISE. For smoke tests only; use --vae for real results.    !!\n" + "!" * 78
)


def _quiet(_: str) -> None:
    pass


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


def _encode_prompts(req: GenerateRequest, device: torch.device, progress: StepProgress | None) -> list[Tensor]:
    """Embeddings of the prompt, the blank prompt and the negative prompt with the text encoder (then released)."""
    assert req.text_encoder is not None and req.prompt is not None
    # The encoder never shares the device with the DiT: it runs first and is released;
    # with --offload it runs on the CPU and never touches GPU memory.
    text_device = "cpu" if req.offload else str(device)
    report_step(progress, "load text encoder", 0, 1)
    enc = TextEncoder.from_pretrained(req.text_encoder, text_device, cache_dir=req.text_cache_dir)
    report_step(progress, "load text encoder", 1, 1)
    prompts = [req.prompt, " ", req.negative_prompt]
    report_step(progress, "text embedding", 0, len(prompts))
    emb = []
    for i, prompt in enumerate(prompts):  # one at a time, as `TextEncoder.encode` does a list
        emb.append(enc.encode([prompt])[0])
        report_step(progress, "text embedding", i + 1, len(prompts))
    enc.release()  # before the DiT is placed on the device
    return emb


def _text_contexts(req: GenerateRequest, cfg: TransferConfig, cameras: list[str], device: torch.device, log: Log,
                   progress: StepProgress | None = None) -> tuple[Tensor, Tensor | None]:  # fmt: skip
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
        emb = _encode_prompts(req, device, progress)
        return (multiview_context(emb[0], emb[1], v_count, prompt_view),
                multiview_context(emb[2], emb[1], v_count, prompt_view))
    if req.random_weights:
        return _zero_contexts(cfg, v_count)
    raise AvsimInputError("--prompt", "text", "give --prompt with --text-encoder, --embeddings, or --zero-text")


def check_request(req: GenerateRequest, log: Log = _quiet) -> None:
    """Refuse conflicting weight and text sources (one-line input errors); log the noise banners."""
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


def _check_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise AvsimInputError(out, "out", "exists and is not a folder")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise AvsimInputError(out, "out", "exists and is not empty (use --overwrite)")


def _resolve_views(req: GenerateRequest, cfg: TransferConfig) -> tuple[list[str], Tensor]:
    """The cameras to generate and their view-embedding indices (V,)."""
    known = cfg.cameras if cfg.dit.is_multiview else MULTIVIEW_CAMERAS  # single view: any one camera
    cameras = [resolve_camera(v, known) for v in req.views] or list(cfg.cameras)
    if len(set(cameras)) != len(cameras):
        raise AvsimInputError("--views", ",".join(req.views), "a view is listed twice")
    if not cfg.dit.is_multiview and len(cameras) != 1:
        raise AvsimInputError("--views", ",".join(cameras), "the single-view config takes exactly one view")
    return cameras, torch.tensor([known.index(c) for c in cameras])


@dataclass(frozen=True)
class ClipPlan:
    """One clip to generate, checked before any weights load.

    clip: the control clip id; control: camera -> control video; control_frames: camera ->
    (T,) control video frames at the model rate (chosen by time); source_fps: the control
    videos' rate; conditioning: camera -> RGB video (None: no conditioning frames);
    conditioning_frames: camera -> (n,) its frames; pairing: the control labels (None: none).
    """

    clip: str
    control: dict[str, Path]
    control_frames: dict[str, np.ndarray]
    source_fps: float
    conditioning: dict[str, Path] | None = None
    conditioning_frames: dict[str, np.ndarray] | None = None
    pairing: LabelsPairing | None = None


def _span(cfg: TransferConfig, opts: SamplingOptions) -> int:
    """Model-rate frames the chunks cover: F + (chunks - 1) (F - overlap)."""
    return cfg.frames_per_chunk + (opts.chunks - 1) * (cfg.frames_per_chunk - opts.overlap)


def _select(paths: dict[str, Path], count: int, fps: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(camera -> frame times, camera -> the `count` frames at `fps`) of each video."""
    times = {c: frame_times_s(p) for c, p in paths.items()}
    return times, {c: select_frames(times[c], fps, count, source=paths[c]) for c in paths}


def plan_clip(req: GenerateRequest, cfg: TransferConfig, cameras: list[str], clip: str | None = None) -> ClipPlan:
    """Find the clip's videos, choose their frames at the model rate by time and pair the labels; reads no frame.

    Args:
        req: the request (control folder, options, conditioning videos).
        cfg: the model config (rate, size, chunk length).
        cameras: the views.
        clip: the clip id (default: `req.clip`, or the folder's only clip).

    Returns:
        The plan.
    """
    opts = req.options
    clip, paths = find_view_videos(req.control_dir, cameras, clip or req.clip, kind="control")
    times, frames = _select(paths, _span(cfg, opts), cfg.model_fps)
    first = cameras[0]
    source_fps = float(video_info(paths[first])["fps"])
    cond_paths = cond_frames = None
    if opts.num_conditional_frames:
        if req.input_videos is None:
            raise AvsimInputError("--num-conditional-frames", str(opts.num_conditional_frames), "needs --input-videos")
        _, cond_paths = find_view_videos(req.input_videos, cameras, clip, kind="rgb")
        cond_frames = _select(cond_paths, opts.num_conditional_frames, cfg.model_fps)[1]
    folder = find_control_labels(req.control_dir, clip)
    pairing = None
    if folder is not None:
        pairing = check_pairing(folder, clip, frames[first].tolist(), times[first], cfg.model_fps, (cfg.width_px, cfg.height_px),
                                cameras)
    return ClipPlan(clip, paths, frames, source_fps, cond_paths, cond_frames, pairing)


def read_clip(plan: ClipPlan, cfg: TransferConfig, cameras: list[str],
              progress: StepProgress | None = None) -> tuple[list[Tensor], list[Tensor] | None]:  # fmt: skip
    """Per-view control frames and conditioning frames (or None), (T, 3, H, W) uint8 at the model size."""
    def read(step: str, paths: dict[str, Path], frames: dict[str, np.ndarray]) -> list[Tensor]:
        out = []
        report_step(progress, step, 0, len(cameras))
        for i, cam in enumerate(cameras):
            out.append(read_frames(paths[cam], frames[cam], cfg.height_px, cfg.width_px))
            report_step(progress, step, i + 1, len(cameras))
        return out

    control = read("read control videos", plan.control, plan.control_frames)
    if plan.conditioning is None or plan.conditioning_frames is None:
        return control, None
    return control, read("read conditioning videos", plan.conditioning, plan.conditioning_frames)


@dataclass
class GenerationModels:
    """What `load_models` built once for any number of clips: the pipeline, the text contexts and the views."""

    pipe: TransferPipeline
    context: Tensor
    negative: Tensor | None
    cameras: list[str]
    view_indices: Tensor


def load_models(req: GenerateRequest, cfg: TransferConfig, cameras: list[str], view_indices: Tensor, log: Log = _quiet,
                progress: StepProgress | None = None) -> GenerationModels:  # fmt: skip
    """Text contexts (the encoder runs first and is released), the VAE and the DiT, placed on the device.

    Args:
        req: the request (weights, text, device, seeds).
        cfg: the model config.
        cameras, view_indices: the views and their view-embedding indices (V,).
        log: one-line messages.
        progress: steps "load text encoder", "text embedding", "load VAE", "load DiT", then the pipeline's.

    Returns:
        The loaded models.
    """
    opts = req.options
    device = torch.device(req.device) if req.device else default_device()
    dtype = default_dtype(device)
    context, negative = _text_contexts(req, cfg, cameras, device, log, progress)
    vae_seed = RANDOM_VAE_SEED if req.random_vae else opts.seed
    report_step(progress, "load VAE", 0, 1)
    vae = build_vae(cfg, req.vae, torch.device("cpu") if req.offload else device, dtype, vae_seed)
    report_step(progress, "load VAE", 1, 1)
    report_step(progress, "load DiT", 0, 1)
    dit = build_dit(cfg, req.checkpoint, device, dtype, opts.seed)
    report_step(progress, "load DiT", 1, 1)
    pipe = TransferPipeline(cfg, dit, vae, device, offload_vae=req.offload, vae_tile_px=req.vae_tile_px, log=log,
                            progress=progress)  # fmt: skip
    return GenerationModels(pipe, context, negative, cameras, view_indices)


def _settings_json(req: GenerateRequest, cfg: TransferConfig, plan: ClipPlan, cameras: list[str], frames: int) -> dict[str, Any]:
    """Resolved settings; no timings, so the same run writes the same bytes."""
    req_dict = dataclasses.asdict(req)
    return {
        "clip": plan.clip,
        "views": cameras,
        "output_is_noise": req.random_weights or req.random_vae,
        "request": json.loads(json.dumps(req_dict, default=str)),
        "config": cfg.to_dict(),
        "frames_per_view": frames,
        "fps": cfg.model_fps,
        "control_frames": {"fps": plan.source_fps, "video_frames": plan.control_frames[cameras[0]].tolist()},
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
    }


def _write_outputs(out: Path, plan: ClipPlan, cameras: list[str], videos: list[Tensor], fps: float, settings: dict[str, Any],
                   progress: StepProgress | None = None) -> dict[str, Any]:  # fmt: skip
    """One mp4 per view, the grid mp4, the control labels (if any) and settings.json, written atomically into `out`."""
    clip = plan.clip
    with atomic_output_path(out, is_dir=True) as tmp:
        report_step(progress, "write videos", 0, len(cameras) + 1)
        for i, (cam, video) in enumerate(zip(cameras, videos, strict=True)):
            write_video(join_names(tmp, f"{clip}.{cam}.mp4"), video, fps)
            report_step(progress, "write videos", i + 1, len(cameras) + 1)
        write_video(join_names(tmp, f"{clip}.grid.mp4"), grid_frames(dict(zip(cameras, videos, strict=True))), fps)
        report_step(progress, "write videos", len(cameras) + 1, len(cameras) + 1)
        if plan.pairing is not None:
            settings = {**settings, "labels": place_labels(plan.pairing, tmp, out, int(videos[0].shape[0]), cameras)}
        (tmp / "settings.json").write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    return settings


def generate_clip(models: GenerationModels, plan: ClipPlan, req: GenerateRequest, cfg: TransferConfig, out: Path,
                  progress: StepProgress | None = None) -> dict[str, Any]:  # fmt: skip
    """Read one planned clip, generate it and write it into `out`; returns its settings.json."""
    control, conditioning = read_clip(plan, cfg, models.cameras, progress)
    videos = models.pipe.generate(control, models.context, models.negative, models.view_indices, req.options, conditioning)
    settings = _settings_json(dataclasses.replace(req, out=out, clip=plan.clip), cfg, plan, models.cameras,
                              int(videos[0].shape[0]))  # fmt: skip
    return _write_outputs(out, plan, models.cameras, videos, cfg.model_fps, settings, progress)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def run_generate(req: GenerateRequest, log: Log = _stderr, progress: StepProgress | None = None) -> dict[str, Any]:
    """Run one generation from files to files; returns the settings written to settings.json.

    Args:
        req: the request.
        log: one-line messages (banners, the clip, the result).
        progress: the long steps (`avsim.core.progress.StepProgress`); None reports nothing.

    Returns:
        The settings written to `req.out/settings.json`.
    """
    start_time = time.perf_counter()
    cfg = get_config(req.config)
    check_request(req, log)
    _check_out(req.out, req.overwrite)
    cameras, view_indices = _resolve_views(req, cfg)
    plan = plan_clip(req, cfg, cameras)  # before any weights are loaded: a mismatch fails fast
    _log_plan(plan, cfg, cameras, log)
    models = load_models(req, cfg, cameras, view_indices, log, progress)
    settings = generate_clip(models, plan, req, cfg, req.out, progress)
    if req.random_weights or req.random_vae:
        log(NOISE_BANNER if req.random_weights else RANDOM_VAE_BANNER)
    log(f"wrote {len(cameras)} views + grid to {req.out} in {time.perf_counter() - start_time:.1f} s")
    return settings


def _log_plan(plan: ClipPlan, cfg: TransferConfig, cameras: list[str], log: Log) -> None:
    frames = plan.control_frames[cameras[0]]
    log(f"clip {plan.clip}: {len(cameras)} views, {frames.size} frames at {cfg.model_fps:g} fps, {cfg.width_px}x{cfg.height_px} "
        f"(control frames {frames[0]}..{frames[-1]} of {plan.source_fps:g} fps)")


def run_generate_clips(req: GenerateRequest, out_root: Path, log: Log = _quiet,
                       progress: StepProgress | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Generate every clip of `req.control_dir` (or only `req.clip`) into `out_root/<clip>/`, the models loaded once.

    Every clip is planned (frames and labels checked) before any weights load.

    Args:
        req: the request; its `out` is ignored (each clip writes `out_root/<clip>`).
        out_root: the folder of the clips' output folders.
        log: one-line messages.
        progress: the long steps.

    Returns:
        The settings of each clip, in clip order.
    """
    cfg = get_config(req.config)
    check_request(req, log)
    cameras, view_indices = _resolve_views(req, cfg)
    clips = [req.clip] if req.clip else list(view_clips(req.control_dir, cameras, kind="control"))
    if not clips:
        find_view_videos(req.control_dir, cameras, kind="control")  # raises naming what is there
    plans = [plan_clip(req, cfg, cameras, clip) for clip in clips]
    for plan in plans:
        _check_out(out_root / plan.clip, req.overwrite)
    models = load_models(req, cfg, cameras, view_indices, log, progress)
    return [generate_clip(models, plan, req, cfg, out_root / plan.clip, progress) for plan in plans]


__all__ = [
    "NOISE_BANNER", "RANDOM_VAE_BANNER", "RANDOM_VAE_SEED", "ClipPlan", "check_request", "GenerateRequest", "GenerationModels", "generate_clip",
    "load_models", "plan_clip", "read_clip", "run_generate", "run_generate_clips", "sampling_options", "split_views",
]
