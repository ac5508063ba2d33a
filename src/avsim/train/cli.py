"""`avsim train ...`: pair, encode, run, export, smoke (option parsing; the work is in `avsim.train.jobs`)."""

from __future__ import annotations

from pathlib import Path

import typer

from avsim.train.jobs import RANDOM_VAE_NOTE, STORE_DTYPES, ZeroText

app = typer.Typer(help="Post-train the multi-view Transfer model (FSDP2 + Ulysses CP).", no_args_is_help=True)
STARTING = "start (import torch)"  # the first progress step: importing the model code takes seconds


@app.command()
def pair(
    controls: Path = typer.Argument(..., help="Folder of one clip's control videos <clip>.<camera>.mp4 (`avsim render` output)."),
    videos: Path = typer.Argument(..., help="Folder of the same drive's real camera videos <clip>.<camera>.mp4."),
    out: Path = typer.Argument(..., help="Post-training layout root to add the clip to."),
    caption: str = typer.Option(..., "--caption", help="Caption of the front-wide view."),
    clip: str = typer.Option(None, "--clip", help="Clip name (default: the control folder's name)."),
) -> None:
    """Add one clip (controls + real videos + caption) to a post-training layout."""
    from avsim.train.jobs import pair_clip

    name = pair_clip(controls, videos, out, caption, clip)
    typer.echo(f"added {name} to {out}")


@app.command()
def encode(
    raw: Path = typer.Argument(..., help="Post-training layout root (videos/, control_input_hdmap_bbox/, captions/)."),
    cache: Path = typer.Argument(..., help="Output latent cache folder."),
    model: str = typer.Option("transfer25_2b_multiview", "--model", help="Model config (sets the VAE and the clip size)."),
    vae: Path = typer.Option(None, "--vae", help="Wan2.1 VAE weights (tokenizer.pth)."),
    random_vae: bool = typer.Option(False, "--random-vae", help="An untrained VAE instead of --vae (debug chain; what it encodes is noise to any real model)."),
    text_encoder: Path = typer.Option(None, "--text-encoder", help="Local Cosmos-Reason1-7B folder."),
    zero_text: bool = typer.Option(False, "--zero-text", help="Store zero text embeddings (no text encoder; unconditional training, smoke tests)."),
    max_clips: int = typer.Option(None, "--max-clips-per-video", help="Clips (windows of 29 frames at 10 fps) taken per video."),
    device: str = typer.Option(None, "--device", help="cuda or cpu (default: cuda when present)."),
    store_dtype: str = typer.Option("bfloat16", "--store-dtype", help="bfloat16 or float32."),
) -> None:
    """Cache VAE latents of videos and controls plus text embeddings (safetensors)."""
    from avsim.core.progress import report_step, step_bars

    if store_dtype not in STORE_DTYPES:
        raise typer.BadParameter(f"--store-dtype must be one of {STORE_DTYPES}")
    if random_vae and vae is not None:
        raise typer.BadParameter("give --vae FILE or --random-vae, not both", param_hint="--random-vae")
    if random_vae:
        typer.echo(f"warning: {RANDOM_VAE_NOTE}", err=True)
    with step_bars("encode") as progress:
        report_step(progress, STARTING, 0, 1)
        from avsim.train.jobs import EncodeSettings, encode_cache

        report_step(progress, STARTING, 1, 1)
        settings = EncodeSettings(model=model, vae=vae, random_vae=random_vae, text_encoder=text_encoder, zero_text=zero_text,
                                  max_clips_per_video=max_clips, device=device, store_dtype=store_dtype)  # fmt: skip
        count = encode_cache(raw, cache, settings, progress)
    typer.echo(f"{count} clips in {cache}" + (f" ({RANDOM_VAE_NOTE})" if random_vae else ""))


@app.command()
def run(
    config: str = typer.Argument(..., help="Recipe (debug, posttrain_2b) or a .py file defining config()."),
    overrides: list[str] = typer.Option([], "--set", help="Override a field: --set parallel.cp=2 (repeatable)."),
    cache: Path = typer.Option(None, "--cache", help="Latent cache (sets data.cache_dir)."),
    out: Path = typer.Option(None, "--out", help="Run folder (sets out_dir); an existing run resumes."),
    steps: int = typer.Option(None, "--steps", help="Total steps (sets steps)."),
    nproc: int = typer.Option(1, "--nproc", help="CPU processes to launch here (gloo); use torchrun for GPUs."),
) -> None:
    """Train (or resume) a run. On GPUs launch with torchrun -m avsim.train instead."""
    from avsim.train.jobs import run_config, run_training

    try:
        cfg = run_config(config, overrides, cache=cache, out=out, steps=steps)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    run_training(cfg, nproc)


@app.command()
def export(
    run_dir: Path = typer.Argument(..., help="A run folder (holds config.json and checkpoints/)."),
    out: Path = typer.Argument(..., help="Output net.* file (.pt or .safetensors) for `avsim generate --checkpoint`."),
    step: int = typer.Option(None, "--step", help="Checkpoint step (default: the newest)."),
    ema: bool = typer.Option(True, "--ema/--no-ema", help="Export the EMA weights (default) or the raw ones."),
) -> None:
    """Write a single-file bf16 `net.*` state dict from a checkpoint."""
    from avsim.train.jobs import export_run

    typer.echo(f"wrote {export_run(run_dir, out, step=step, ema=ema)}")


@app.command()
def smoke(
    out: Path = typer.Argument(..., help="Output folder (absent or empty); every step writes inside it."),
    steps: int = typer.Option(20, "--steps", min=1, help="Training steps (checkpoints every 10 and at the end)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sample scenario, the training run and the sampler."),
) -> None:
    """CPU smoke chain, debug model, RANDOM weights (output is noise): sample -> render -> pair -> encode -> train
    (2 processes, cp 2) -> export -> generate."""
    from avsim.train.smoke import run_smoke

    run_smoke(out, steps=steps, seed=seed, log=typer.echo, progress=lambda line: typer.echo(line, err=True))


__all__ = ["STORE_DTYPES", "ZeroText", "app"]
