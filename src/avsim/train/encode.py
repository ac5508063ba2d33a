"""Pre-encoding (`avsim train encode`): raw layout -> latent cache, so training never runs the
VAE or the text encoder.

Cache layout::

    <cache>/index.json                 clip spec, views, latent shape, sample list (written last)
    <cache>/blank_text.safetensors     {"text": (N, C)} embedding of " " (views 1..V-1)
    <cache>/<clip>_<k>.safetensors     {"video": (16, V*T, h, w), "control": same,
                                         "text": (N, C) caption embedding}

Views are encoded one at a time (never mixed), exactly as generation does. Every file is
written atomically; re-running skips clips whose file already exists (resumable).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

import torch
from torch import Tensor

from avsim.core.atomic import atomic_output_path
from avsim.models.layout import pack_views
from avsim.train.data import BLANK_FILE, INDEX_FILE, ClipRecord, ClipSpec, probe_clips, read_clip, scan_layout


class TextEncoderLike(Protocol):
    def encode(self, prompts: Sequence[str]) -> Tensor:
        """(len(prompts), N, C) embeddings."""
        ...


class VideoEncoderLike(Protocol):
    def encode(self, video: Tensor) -> Tensor:
        """(B, 3, T, H, W) in [-1, 1] -> (B, 16, T_lat, h, w) normalised latents."""
        ...


def save_tensors(path: Path, tensors: dict[str, Tensor], metadata: dict[str, str] | None = None) -> None:
    from safetensors.torch import save_file

    with atomic_output_path(path) as tmp:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata=metadata)


def write_index(cache_dir: Path, spec: ClipSpec, views: Sequence[str], samples: list[str], extra: dict) -> None:
    index = {
        "clip": asdict(spec),
        "views": list(views),
        "num_views": len(views),
        "latent_frames": spec.latent_frames,
        "samples": samples,
        **extra,
    }
    with atomic_output_path(cache_dir / INDEX_FILE) as tmp:
        tmp.write_text(json.dumps(index, indent=2), encoding="utf-8")


@torch.no_grad()
def encode_views(vae: VideoEncoderLike, paths: Sequence[Path], start: int, stride: int, spec: ClipSpec,
                 device: torch.device, dtype: torch.dtype) -> Tensor:
    """Encode one clip window of every view -> (16, V*T_lat, h, w), views in order."""
    latents = []
    for path in paths:
        pixels = read_clip(path, start, stride, spec)[None].to(device=device, dtype=dtype)
        latents.append(vae.encode(pixels).float().cpu())
    return pack_views(latents)[0]


def encode_dataset(
    raw_root: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str],
    vae: VideoEncoderLike,
    text_encoder: TextEncoderLike,
    spec: ClipSpec,
    *,
    max_clips_per_video: int | None = None,
    device: torch.device | str = "cpu",
    vae_dtype: torch.dtype = torch.float32,
    store_dtype: torch.dtype = torch.bfloat16,
    progress: Callable[[str], None] | None = None,
    extra_index: dict | None = None,
) -> list[str]:
    """Encode every clip of the raw layout; returns the sample file names of the cache.

    ``store_dtype``: latents and embeddings are stored in it (bf16 halves the cache; the model
    computes in bf16 anyway). The blank-prompt embedding is computed once.
    """
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    device = torch.device(device)
    records: list[ClipRecord] = scan_layout(raw_root)
    views = records[0].views
    if not (cache / BLANK_FILE).is_file():
        save_tensors(cache / BLANK_FILE, {"text": text_encoder.encode([" "])[0].to(store_dtype)})
    samples: list[str] = []
    for record in records:
        stride, starts = probe_clips(record, spec, max_clips_per_video)
        caption_emb: Tensor | None = None
        for k, start in enumerate(starts):
            name = f"{record.name}_{k:03d}.safetensors"
            samples.append(name)
            if (cache / name).is_file():
                continue
            if caption_emb is None:
                caption_emb = text_encoder.encode([record.caption])[0].to(store_dtype)
            video = encode_views(vae, record.videos, start, stride, spec, device, vae_dtype)
            control = encode_views(vae, record.controls, start, stride, spec, device, vae_dtype)
            meta = {"clip": record.name, "start_frame": str(start), "stride": str(stride), "caption": record.caption}
            save_tensors(
                cache / name,
                {"video": video.to(store_dtype), "control": control.to(store_dtype), "text": caption_emb},
                meta,
            )
            if progress is not None:
                progress(name)
    if not samples:
        raise ValueError(f"no clip of {spec.frames} frames fits in the videos of {raw_root}")
    write_index(cache, spec, views, samples, extra_index or {})
    return samples
