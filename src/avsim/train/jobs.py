"""The `avsim train` subcommands as library calls (train/cli.py only parses options).

`pair_clip` adds a clip to a post-training layout (after `avsim.train.pairing.check_pair`),
`encode_cache` writes the latent cache with the encoders `build_cache_encoder` loads from
`EncodeSettings` (also what `avsim run encode` runs per clip),
`run_config` resolves a recipe with overrides, `run_training` trains (or resumes) it here or in `nproc` local gloo processes, and
`export_run` writes a `net.*` file from a run's checkpoint. Heavy imports happen inside.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

    from avsim.core.progress import StepProgress
    from avsim.models.config import TransferConfig
    from avsim.train.config import TrainConfig
    from avsim.train.encode import CacheEncoder, TextEncoderLike

STORE_DTYPES = ("bfloat16", "float32")
RANDOM_VAE_NOTE = "RANDOM VAE (untrained, --random-vae): latents no released model can use; for smoke tests only"


class ZeroText:
    """All-zero text embeddings (what text dropout feeds), for captionless training and tests."""

    def __init__(self, tokens: int, channels: int) -> None:
        self.tokens, self.channels = tokens, channels

    def encode(self, prompts: Sequence[str]) -> Tensor:
        import torch

        return torch.zeros(len(prompts), self.tokens, self.channels)


def pair_clip(controls: Path, videos: Path, out: Path, caption: str, clip: str | None = None) -> str:
    """Add one clip (controls + real videos + caption, and the render's labels if any) to the layout at `out`.

    The real videos are checked against the controls first (`avsim.train.pairing`: rate,
    duration, aspect, not noise); a refused clip writes nothing.

    Args:
        controls: the clip's control folder (`<clip>.<camera>.mp4`, `avsim render` output).
        videos: the folder of the same drive's real videos `<clip>.<camera>.mp4`.
        out: the post-training layout root.
        caption: the front-wide view's caption.
        clip: the clip name (default: the control folder's name).

    Returns:
        The clip's name in the layout.
    """
    from avsim.core.errors import AvsimInputError
    from avsim.core.rig import COSMOS_VIEW_NAMES
    from avsim.train.data import assemble_layout, carry_labels, find_camera_videos
    from avsim.train.pairing import check_pair

    name = clip or controls.name
    ctrl = find_camera_videos(controls, name)
    rgb = find_camera_videos(videos, name)
    if not ctrl:
        raise AvsimInputError(controls, "videos", f"no {name}.<camera>.mp4 files")
    for folder, found, what in ((controls, ctrl, "control"), (videos, rgb, "real")):
        missing = [v for v in COSMOS_VIEW_NAMES if v not in found]
        if missing:
            raise AvsimInputError(folder, "videos", f"no {what} video {name}.<camera>.mp4 for {', '.join(missing)}")
    check_pair(ctrl, rgb, COSMOS_VIEW_NAMES)
    assemble_layout(out, name, ctrl, rgb, caption)
    carry_labels(controls, out, name)  # <out>/labels/<name>/ when the render wrote labels
    return name


def _text_encoder(cfg: TransferConfig, folder: Path | None, device: str) -> TextEncoderLike:
    """Cosmos-Reason1 from `folder`, or zero embeddings when it is None."""
    if folder is None:
        return ZeroText(cfg.dit.text_tokens_per_view, cfg.dit.crossattn_proj_in_channels)
    from avsim.models.text import TextEncoder

    return TextEncoder.from_pretrained(folder, device)


@dataclasses.dataclass(frozen=True)
class EncodeSettings:
    """What `avsim train encode` (and `avsim run encode`) encode with.

    model: model config name (sets the VAE and the clip size); vae: Wan2.1 VAE weights, exactly
    one of it and `random_vae` (the untrained VAE `avsim generate --random-vae` decodes with;
    smoke tests); text_encoder: local Cosmos-Reason1-7B folder, exactly one of it and
    `zero_text` (zero text embeddings); max_clips_per_video: windows per video (None: all);
    device: cuda or cpu (None: cuda when present); store_dtype: one of `STORE_DTYPES`.
    """

    model: str = "transfer25_2b_multiview"
    vae: Path | None = None
    random_vae: bool = False
    text_encoder: Path | None = None
    zero_text: bool = False
    max_clips_per_video: int | None = None
    device: str | None = None
    store_dtype: str = "bfloat16"

    def __post_init__(self) -> None:
        from avsim.core.errors import AvsimInputError

        if self.store_dtype not in STORE_DTYPES:
            raise ValueError(f"--store-dtype must be one of {STORE_DTYPES}")
        if (self.text_encoder is None) == (not self.zero_text):
            raise AvsimInputError("--text-encoder", "text", "give exactly one of --text-encoder DIR and --zero-text")
        if (self.vae is None) == (not self.random_vae):
            raise AvsimInputError("--vae", "weights", "give exactly one of --vae FILE and --random-vae")

    def index_record(self) -> dict[str, object]:
        """What the cache's index.json records of these settings."""
        return {"model": self.model, "vae": RANDOM_VAE_NOTE if self.random_vae else str(self.vae),
                "random_vae": self.random_vae, "text": "zeros" if self.zero_text else str(self.text_encoder)}  # fmt: skip


def build_cache_encoder(settings: EncodeSettings, progress: StepProgress | None = None) -> CacheEncoder:
    """Load the VAE and the text encoder of `settings` (progress: "load VAE", "load text encoder").

    Args:
        settings: the encode settings.
        progress: the long steps.

    Returns:
        The encoder (its progress reports each encoded view).
    """
    import torch

    from avsim.core.progress import report_step
    from avsim.models.config import get_config
    from avsim.models.generate import RANDOM_VAE_SEED
    from avsim.models.pipeline import build_vae
    from avsim.train.data import ClipSpec
    from avsim.train.encode import CacheEncoder

    cfg = get_config(settings.model)
    dev = torch.device(settings.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    report_step(progress, "load VAE", 0, 1)
    video_model = build_vae(cfg, settings.vae, dev, dtype, seed=RANDOM_VAE_SEED)
    report_step(progress, "load VAE", 1, 1)
    report_step(progress, "load text encoder", 0, 1)
    text = _text_encoder(cfg, settings.text_encoder, str(dev))
    report_step(progress, "load text encoder", 1, 1)
    spec = ClipSpec(frames=cfg.frames_per_chunk, fps=cfg.model_fps, height_px=cfg.height_px, width_px=cfg.width_px)
    return CacheEncoder(video_model, text, spec, dev, dtype, getattr(torch, settings.store_dtype),
                        settings.max_clips_per_video, progress)  # fmt: skip


def encode_cache(raw: Path, cache: Path, settings: EncodeSettings, progress: StepProgress | None = None) -> int:
    """Cache VAE latents of videos and controls plus text embeddings (`avsim train encode`).

    Args:
        raw: post-training layout root.
        cache: output cache folder (re-running skips finished clips).
        settings: the encoders and storage.
        progress: loading, each clip and each encoded view (`avsim.core.progress.StepProgress`).

    Returns:
        The number of clips in the cache.
    """
    from avsim.train.encode import encode_dataset

    encoder = build_cache_encoder(settings, progress)
    return len(encode_dataset(raw, cache, encoder, extra_index=settings.index_record()))


def run_config(
    config: str,
    overrides: Sequence[str] = (),
    *,
    cache: Path | None = None,
    out: Path | None = None,
    steps: int | None = None,
) -> TrainConfig:
    """Recipe `config` (name or .py file) with the shortcuts and ``--set`` style overrides.

    Raises ValueError for a bad override.
    """
    from avsim.train.config import apply_overrides, load_config

    cfg = load_config(config)
    extra = [f"data.cache_dir={cache}"] if cache else []
    extra += [f"out_dir={out}"] if out else []
    extra += [f"steps={steps}"] if steps is not None else []
    return apply_overrides(cfg, [*extra, *overrides])


def run_training(cfg: TrainConfig, nproc: int = 1) -> None:
    """Train (or resume) `cfg` here, or in `nproc` local CPU (gloo) processes outside torchrun."""
    if nproc > 1 and "WORLD_SIZE" not in os.environ:
        from avsim.train.dist import launch_local
        from avsim.train.loop import train_entry

        launch_local(train_entry, nproc, cfg)
    else:
        from avsim.train.loop import train

        train(cfg)


def export_run(run_dir: Path, out: Path, *, step: int | None = None, ema: bool = True) -> Path:
    """Write a single-file bf16 `net.*` state dict from a checkpoint of the run in `run_dir`."""
    from avsim.train.config import load_run_config
    from avsim.train.loop import export_net

    cfg = dataclasses.replace(load_run_config(run_dir), out_dir=str(run_dir))
    return export_net(cfg, out, use_ema=ema, step=step)


__all__ = [
    "RANDOM_VAE_NOTE", "STORE_DTYPES", "EncodeSettings", "ZeroText", "build_cache_encoder", "encode_cache", "export_run",
    "pair_clip", "run_config", "run_training",
]
