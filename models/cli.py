"""`avsim generate`: multi-view Cosmos-Transfer2.5 generation from world-scenario control videos."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from avsim.core.errors import AvsimInputError

app = typer.Typer(add_completion=False)


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
    steps: Annotated[int | None, typer.Option(min=1, help="sampling steps (default 35)")] = None,
    guidance: Annotated[float | None, typer.Option(help="classifier-free guidance (default 3)")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    control_weight: Annotated[float, typer.Option(min=0.0, max=1.0)] = 1.0,
    sampler: Annotated[str, typer.Option(help="unipc or euler")] = "unipc",
    input_videos: Annotated[Path | None, typer.Option(help="RGB videos whose first frames condition chunk 0")] = None,
    num_conditional_frames: Annotated[int, typer.Option(min=0, help="pixel frames: 0, 1, 5, ...")] = 0,
    chunks: Annotated[int, typer.Option(min=1, help="autoregressive chunks of 29 frames")] = 1,
    overlap: Annotated[int, typer.Option(min=0, help="pixel frames shared by consecutive chunks")] = 1,
    config: Annotated[str, typer.Option(help="transfer25_2b_multiview, transfer25_2b_single_view or debug")] = "transfer25_2b_multiview",
    random_weights: Annotated[bool, typer.Option(help="random DiT and VAE: output is NOISE (smoke tests)")] = False,
    device: Annotated[str | None, typer.Option(help="cuda, cuda:1, cpu (default: cuda if present)")] = None,
    offload: Annotated[bool, typer.Option(help="VAE on the CPU between uses; text encoder on the CPU")] = False,
    vae_tile: Annotated[int | None, typer.Option(help="VAE spatial tile size in pixels (saves memory)")] = None,
    overwrite: Annotated[bool, typer.Option(help="replace a non-empty OUT")] = False,
) -> None:
    """Generate photoreal multi-view video from world-scenario control videos."""
    from avsim.models.config import get_config
    from avsim.models.pipeline import GenerateRequest, SamplingOptions, run_generate
    from avsim.models.text import DEFAULT_NEGATIVE_PROMPT

    try:
        cfg = get_config(config)
    except KeyError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    if sampler not in ("unipc", "euler"):
        raise typer.BadParameter("choose unipc or euler", param_hint="--sampler")
    if embeddings is not None and (prompt is not None or text_encoder is not None):
        raise typer.BadParameter("give either --embeddings or --prompt with --text-encoder", param_hint="--embeddings")
    if (prompt is None) != (text_encoder is None):
        raise typer.BadParameter("--prompt and --text-encoder go together", param_hint="--prompt")
    view_list = [v.strip() for item in (views or []) for v in item.split(",") if v.strip()]
    options = SamplingOptions(
        steps=steps or cfg.default_steps,
        guidance=cfg.default_guidance if guidance is None else guidance,
        seed=seed,
        control_weight=control_weight,
        sampler=sampler,
        num_conditional_frames=num_conditional_frames,
        chunks=chunks,
        overlap=overlap,
        shift=cfg.sigma_shift,
    )
    request = GenerateRequest(
        control_dir=control_dir,
        out=out,
        config=config,
        checkpoint=checkpoint,
        vae=vae,
        prompt=prompt,
        negative_prompt=negative_prompt if negative_prompt is not None else DEFAULT_NEGATIVE_PROMPT,
        text_encoder=text_encoder,
        embeddings=embeddings,
        text_cache_dir=text_cache_dir,
        views=view_list,
        clip=clip,
        input_videos=input_videos,
        random_weights=random_weights,
        device=device,
        offload=offload,
        vae_tile_px=vae_tile,
        overwrite=overwrite,
        options=options,
    )
    if not random_weights and (checkpoint is None or vae is None):
        raise AvsimInputError("--checkpoint", "weights", "give --checkpoint and --vae (or --random-weights for a smoke test)")
    run_generate(request)
