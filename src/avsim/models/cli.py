"""`avsim generate`: multi-view Cosmos-Transfer2.5 generation from world-scenario control videos.

Only option parsing; the run itself is `avsim.models.generate.run_generate`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from avsim.models.defaults import GENERATION, SAMPLER_NAMES

app = typer.Typer(add_completion=False)
STARTING = "start (import torch)"  # the first progress step: importing the model code takes seconds


def _check_stand_ins(zero_text_clash: bool, random_vae_clash: bool) -> None:
    """Usage errors of the debug-chain stand-ins (--zero-text, --random-vae) given with what they replace."""
    if zero_text_clash:
        raise typer.BadParameter("give one of --zero-text, --embeddings, --prompt with --text-encoder", param_hint="--zero-text")
    if random_vae_clash:
        raise typer.BadParameter("the random VAE replaces --vae (and --random-weights has its own)", param_hint="--random-vae")


def _check_text_and_weights(prompt: str | None, text_encoder: Path | None, embeddings: Path | None, zero_text: bool,
                            checkpoint: Path | None, vae: Path | None, random_weights: bool, random_vae: bool) -> None:  # fmt: skip
    """Usage errors: one source of text, one source of weights."""
    _check_stand_ins(zero_text and (embeddings, prompt, text_encoder) != (None, None, None),
                     random_vae and (vae is not None or random_weights))
    if embeddings is not None and (prompt is not None or text_encoder is not None):
        raise typer.BadParameter("give either --embeddings or --prompt with --text-encoder", param_hint="--embeddings")
    if (prompt is None) != (text_encoder is None):
        raise typer.BadParameter("--prompt and --text-encoder go together", param_hint="--prompt")
    if random_weights and (checkpoint is not None or vae is not None):
        given = " and ".join(name for name, value in (("--checkpoint", checkpoint), ("--vae", vae)) if value is not None)
        raise typer.BadParameter(f"random weights replace the weight files: drop {given} or --random-weights",
                                 param_hint="--random-weights")


@app.command("generate")
def generate(
    control_dir: Annotated[Path, typer.Argument(help="control videos: <dir>/<clip>/<clip>.<camera>.mp4 (avsim render output)")],
    out: Annotated[Path, typer.Argument(help="output folder: one mp4 per view, a grid mp4, settings.json")],
    checkpoint: Annotated[Path | None, typer.Option(help="DiT + control checkpoint (net.* keys; .pt or .safetensors)")] = None,
    vae: Annotated[Path | None, typer.Option(help="Wan2.1 VAE weights (tokenizer.pth)")] = None,
    prompt: Annotated[str | None, typer.Option(help="caption (needs --text-encoder)")] = None,
    negative_prompt: Annotated[str | None, typer.Option(help="negative prompt for guidance (with --text-encoder)")] = None,
    text_encoder: Annotated[Path | None, typer.Option(help="local Cosmos-Reason1-7B folder")] = None,
    embeddings: Annotated[Path | None, typer.Option(help="precomputed embeddings (python -m avsim.models.text)")] = None,
    text_cache_dir: Annotated[Path | None, typer.Option(help="cache of prompt embeddings")] = None,
    views: Annotated[list[str] | None, typer.Option("--views", help="cameras to generate (repeat or comma-separate); default all")] = None,
    clip: Annotated[str | None, typer.Option(help="clip id when the folder holds several")] = None,
    steps: Annotated[int | None, typer.Option(min=1, help=f"sampling steps (default {GENERATION.steps}; the debug config: its own)")] = None,
    guidance: Annotated[float | None, typer.Option(help=f"classifier-free guidance (default {GENERATION.guidance:g})")] = None,
    seed: Annotated[int, typer.Option()] = GENERATION.seed,
    control_weight: Annotated[float, typer.Option(min=0.0, max=1.0)] = GENERATION.control_weight,
    sampler: Annotated[str, typer.Option(help=" or ".join(SAMPLER_NAMES))] = GENERATION.sampler,
    input_videos: Annotated[Path | None, typer.Option(help="RGB videos whose first frames condition chunk 0")] = None,
    num_conditional_frames: Annotated[int, typer.Option(min=0, help="pixel frames: 0, 1, 5, ...")] = GENERATION.num_conditional_frames,
    chunks: Annotated[int, typer.Option(min=1, help="autoregressive chunks of 29 frames")] = GENERATION.chunks,
    overlap: Annotated[int, typer.Option(min=0, help="pixel frames shared by consecutive chunks")] = GENERATION.overlap,
    config: Annotated[str, typer.Option(help="transfer25_2b_multiview, transfer25_2b_single_view or debug")] = GENERATION.config,
    random_weights: Annotated[bool, typer.Option(help="random DiT and VAE: output is NOISE (smoke tests)")] = False,
    random_vae: Annotated[bool, typer.Option(help="with --checkpoint: the random VAE of `avsim train encode --random-vae` (output is NOISE; debug chain)")] = False,
    zero_text: Annotated[bool, typer.Option(help="zero text embeddings (unconditional, as text dropout; no text encoder)")] = False,
    device: Annotated[str | None, typer.Option(help="cuda, cuda:1, cpu (default: cuda if present)")] = None,
    offload: Annotated[bool, typer.Option(help="VAE on the CPU between uses; text encoder on the CPU")] = False,
    vae_tile: Annotated[int | None, typer.Option(help="VAE spatial tile size in pixels (saves memory)")] = None,
    overwrite: Annotated[bool, typer.Option(help="replace a non-empty OUT")] = False,
) -> None:
    """Generate photoreal multi-view video from world-scenario control videos."""
    from avsim.core.progress import report_step, step_bars

    with step_bars("generate") as progress:
        report_step(progress, STARTING, 0, 1)
        from avsim.models.config import get_config
        from avsim.models.generate import GenerateRequest, run_generate, sampling_options, split_views

        report_step(progress, STARTING, 1, 1)
        try:
            cfg = get_config(config)
        except KeyError as exc:
            raise typer.BadParameter(str(exc), param_hint="--config") from exc
        if sampler not in SAMPLER_NAMES:
            raise typer.BadParameter(f"choose {' or '.join(SAMPLER_NAMES)}", param_hint="--sampler")
        _check_text_and_weights(prompt, text_encoder, embeddings, zero_text, checkpoint, vae, random_weights, random_vae)
        options = sampling_options(cfg, steps=steps, guidance=guidance, seed=seed, control_weight=control_weight,
                                   sampler=sampler, num_conditional_frames=num_conditional_frames, chunks=chunks, overlap=overlap)
        text = {"negative_prompt": negative_prompt} if negative_prompt is not None else {}
        run_generate(GenerateRequest(
            control_dir=control_dir, out=out, config=config, checkpoint=checkpoint, vae=vae, prompt=prompt,
            text_encoder=text_encoder, embeddings=embeddings, text_cache_dir=text_cache_dir, views=split_views(views),
            clip=clip, input_videos=input_videos, random_weights=random_weights, random_vae=random_vae, zero_text=zero_text,
            device=device, offload=offload, vae_tile_px=vae_tile, overwrite=overwrite, options=options, **text,
        ), progress=progress)
