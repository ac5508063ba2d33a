"""Pre-encoding (`avsim train encode`): raw layout -> latent cache, so training never runs the
VAE or the text encoder.

Cache layout::

    <cache>/index.json                 clip spec, views, latent shape, sample list (written last)
    <cache>/blank_text.safetensors     {"text": (N, C)} embedding of " " (views 1..V-1)
    <cache>/<clip>_<k>.safetensors     {"video": (16, V*T, h, w), "control": same,
                                         "text": (N, C) caption embedding}

Views are encoded one at a time (never mixed), exactly as generation does. Every file is
written atomically; re-running skips clips whose file already exists (resumable).
`CacheEncoder.encode_record` encodes one clip (what `avsim run encode` runs per item, into
`<cache>/<clip>/`); `encode_dataset` runs it over a layout into the flat cache above.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import torch
from torch import Tensor

from avsim.core.atomic import atomic_output_path
from avsim.core.progress import StepProgress, report_step
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


VIEWS_STEP = "VAE encode views (video, control)"
CLIPS_STEP = "clips"


@torch.no_grad()
def encode_views(vae: VideoEncoderLike, paths: Sequence[Path], start: int, stride: int, spec: ClipSpec,
                 device: torch.device, dtype: torch.dtype, on_view: Callable[[int], None] | None = None) -> Tensor:  # fmt: skip
    """Encode one clip window of every view -> (16, V*T_lat, h, w), views in order (`on_view(views done)` after each)."""
    latents = []
    for i, path in enumerate(paths):
        pixels = read_clip(path, start, stride, spec)[None].to(device=device, dtype=dtype)
        latents.append(vae.encode(pixels).float().cpu())
        if on_view is not None:
            on_view(i + 1)
    return pack_views(latents)[0]


@dataclass(frozen=True)
class CacheEncoder:
    """The models and settings that turn clips of a raw layout into cache files.

    vae, text_encoder: the encoders; spec: the clip size and rate; device, vae_dtype: where the
    VAE runs; store_dtype: latents and embeddings are stored in it (bf16 halves the cache; the
    model computes in bf16 anyway); max_clips_per_video: windows taken per video (None: all);
    progress: `VIEWS_STEP` per view of each window.
    """

    vae: VideoEncoderLike
    text_encoder: TextEncoderLike
    spec: ClipSpec
    device: torch.device = torch.device("cpu")
    vae_dtype: torch.dtype = torch.float32
    store_dtype: torch.dtype = torch.bfloat16
    max_clips_per_video: int | None = None
    progress: StepProgress | None = None

    def write_blank(self, cache: Path) -> None:
        """`<cache>/blank_text.safetensors`: the embedding of " " (views 1..V-1), unless it exists."""
        if not (cache / BLANK_FILE).is_file():
            save_tensors(cache / BLANK_FILE, {"text": self.text_encoder.encode([" "])[0].to(self.store_dtype)})

    def encode_record(self, record: ClipRecord, out_dir: Path) -> list[str]:
        """Write `<out_dir>/<clip>_<k>.safetensors` for each window of a clip (existing files are kept).

        Args:
            record: the clip (`scan_layout`).
            out_dir: where its files go.

        Returns:
            The file names, relative to `out_dir`, in window order.
        """
        stride, starts = probe_clips(record, self.spec, self.max_clips_per_video)
        caption_emb: Tensor | None = None
        names = []
        views = len(record.views)
        for k, start in enumerate(starts):
            name = f"{record.name}_{k:03d}.safetensors"
            names.append(name)
            if (out_dir / name).is_file():
                continue
            if caption_emb is None:
                caption_emb = self.text_encoder.encode([record.caption])[0].to(self.store_dtype)
            report_step(self.progress, VIEWS_STEP, 0, 2 * views)
            video = encode_views(self.vae, record.videos, start, stride, self.spec, self.device, self.vae_dtype,
                                 lambda i: report_step(self.progress, VIEWS_STEP, i, 2 * views))  # fmt: skip
            control = encode_views(self.vae, record.controls, start, stride, self.spec, self.device, self.vae_dtype,
                                   lambda i: report_step(self.progress, VIEWS_STEP, views + i, 2 * views))  # fmt: skip
            meta = {"clip": record.name, "start_frame": str(start), "stride": str(stride), "caption": record.caption}
            tensors = {"video": video.to(self.store_dtype), "control": control.to(self.store_dtype), "text": caption_emb}
            save_tensors(out_dir / name, tensors, meta)
        return names


def encode_dataset(
    raw_root: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str],
    encoder: CacheEncoder,
    *,
    extra_index: dict | None = None,
) -> list[str]:
    """Encode every clip of the raw layout into the flat cache; returns the sample file names.

    Progress: `CLIPS_STEP` per clip, and the encoder's per view. The blank-prompt embedding is
    computed once.
    """
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    records: list[ClipRecord] = scan_layout(raw_root)
    encoder.write_blank(cache)
    samples: list[str] = []
    report_step(encoder.progress, CLIPS_STEP, 0, len(records))
    for i, record in enumerate(records):
        samples += encoder.encode_record(record, cache)
        report_step(encoder.progress, CLIPS_STEP, i + 1, len(records))
    if not samples:
        raise ValueError(f"no clip of {encoder.spec.frames} frames fits in the videos of {raw_root}")
    write_index(cache, encoder.spec, records[0].views, samples, extra_index or {})
    return samples
