"""`avsim train ...`: pair, encode, run, export."""

from __future__ import annotations

import os
from pathlib import Path

import typer

app = typer.Typer(help="Post-train the multi-view Transfer model (FSDP2 + Ulysses CP).", no_args_is_help=True)

STORE_DTYPES = ("bfloat16", "float32")


@app.command()
def pair(
    controls: Path = typer.Argument(..., help="Folder of one clip's control videos <clip>.<camera>.mp4 (`avsim render` output)."),
    videos: Path = typer.Argument(..., help="Folder of the same drive's real camera videos <clip>.<camera>.mp4."),
    out: Path = typer.Argument(..., help="Post-training layout root to add the clip to."),
    caption: str = typer.Option(..., "--caption", help="Caption of the front-wide view."),
    clip: str = typer.Option(None, "--clip", help="Clip name (default: the control folder's name)."),
) -> None:
    """Add one clip (controls + real videos + caption) to a post-training layout."""
    from avsim.core.errors import AvsimInputError
    from avsim.train.data import assemble_layout, find_camera_videos

    name = clip or controls.name
    ctrl = find_camera_videos(controls, name)
    rgb = find_camera_videos(videos, name)
    if not ctrl:
        raise AvsimInputError(controls, "videos", f"no {name}.<camera>.mp4 files")
    assemble_layout(out, name, ctrl, rgb, caption)
    typer.echo(f"added {name} to {out}")


@app.command()
def encode(
    raw: Path = typer.Argument(..., help="Post-training layout root (videos/, control_input_hdmap_bbox/, captions/)."),
    cache: Path = typer.Argument(..., help="Output latent cache folder."),
    model: str = typer.Option("transfer25_2b_multiview", "--model", help="Model config (sets the VAE and the clip size)."),
    vae: Path = typer.Option(..., "--vae", help="Wan2.1 VAE weights (tokenizer.pth)."),
    text_encoder: Path = typer.Option(None, "--text-encoder", help="Local Cosmos-Reason1-7B folder."),
    zero_text: bool = typer.Option(False, "--zero-text", help="Store zero text embeddings (no text encoder; unconditional training, smoke tests)."),
    max_clips: int = typer.Option(None, "--max-clips-per-video", help="Clips (windows of 29 frames at 10 fps) taken per video."),
    device: str = typer.Option(None, "--device", help="cuda or cpu (default: cuda when present)."),
    store_dtype: str = typer.Option("bfloat16", "--store-dtype", help="bfloat16 or float32."),
) -> None:
    """Cache VAE latents of videos and controls plus text embeddings (safetensors)."""
    import torch

    from avsim.core.errors import AvsimInputError
    from avsim.models.config import get_config
    from avsim.models.pipeline import build_vae
    from avsim.train.data import ClipSpec
    from avsim.train.encode import encode_dataset

    if store_dtype not in STORE_DTYPES:
        raise typer.BadParameter(f"--store-dtype must be one of {STORE_DTYPES}")
    if (text_encoder is None) == (not zero_text):
        raise AvsimInputError("--text-encoder", "text", "give exactly one of --text-encoder DIR and --zero-text")
    cfg = get_config(model)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    video_model = build_vae(cfg, vae, dev, dtype)
    if zero_text:
        text = ZeroText(cfg.dit.text_tokens_per_view, cfg.dit.crossattn_proj_in_channels)
    else:
        from avsim.models.text import TextEncoder

        text = TextEncoder.from_pretrained(text_encoder, str(dev))
    spec = ClipSpec(frames=cfg.frames_per_chunk, fps=cfg.model_fps, height_px=cfg.height_px, width_px=cfg.width_px)
    samples = encode_dataset(
        raw, cache, video_model, text, spec,
        max_clips_per_video=max_clips, device=dev, vae_dtype=dtype,
        store_dtype=getattr(torch, store_dtype),
        progress=lambda name: typer.echo(f"encoded {name}", err=True),
        extra_index={"model": model, "vae": str(vae), "text": "zeros" if zero_text else str(text_encoder)},
    )
    typer.echo(f"{len(samples)} clips in {cache}")


class ZeroText:
    """All-zero text embeddings (what text dropout feeds), for captionless training and tests."""

    def __init__(self, tokens: int, channels: int) -> None:
        self.tokens, self.channels = tokens, channels

    def encode(self, prompts):  # type: ignore[no-untyped-def]
        import torch

        return torch.zeros(len(prompts), self.tokens, self.channels)


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
    from avsim.train.config import apply_overrides, load_config

    cfg = load_config(config)
    extra = [f"data.cache_dir={cache}"] if cache else []
    extra += [f"out_dir={out}"] if out else []
    extra += [f"steps={steps}"] if steps is not None else []
    try:
        cfg = apply_overrides(cfg, [*extra, *overrides])
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if nproc > 1 and "WORLD_SIZE" not in os.environ:
        from avsim.train.dist import launch_local
        from avsim.train.loop import train_entry

        launch_local(train_entry, nproc, cfg)
    else:
        from avsim.train.loop import train

        train(cfg)


@app.command()
def export(
    run_dir: Path = typer.Argument(..., help="A run folder (holds config.json and checkpoints/)."),
    out: Path = typer.Argument(..., help="Output net.* file (.pt or .safetensors) for `avsim generate --checkpoint`."),
    step: int = typer.Option(None, "--step", help="Checkpoint step (default: the newest)."),
    ema: bool = typer.Option(True, "--ema/--no-ema", help="Export the EMA weights (default) or the raw ones."),
) -> None:
    """Write a single-file bf16 `net.*` state dict from a checkpoint."""
    from avsim.train.config import load_run_config
    from avsim.train.loop import export_net

    cfg = load_run_config(run_dir)
    import dataclasses

    cfg = dataclasses.replace(cfg, out_dir=str(run_dir))
    path = export_net(cfg, out, use_ema=ema, step=step)
    typer.echo(f"wrote {path}")
