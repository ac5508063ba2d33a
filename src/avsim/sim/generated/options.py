"""What `avsim sim --observe generated` generates with: the model, its weights and text (the
model options, `avsim.models.options.ModelOptions`), the sampling and the chunks.

Plain Python (the model configs, no torch): `avsim sim` reads the options without loading the model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from avsim.core.errors import AvsimInputError
from avsim.models.config import TransferConfig, get_config
from avsim.models.defaults import GENERATION
from avsim.models.options import ModelOptions

__all__ = ["GenerationOptions"]


@dataclass(frozen=True)
class GenerationOptions(ModelOptions):
    """The model of `avsim sim --observe generated`: the model options (config name, weights:
    checkpoint and VAE, or random for a smoke test; text: precomputed embeddings or zero text,
    random weights need none), then sampling steps and guidance (None: the config's), frames per
    chunk (None: the config's; fewer must be 1 + 4k), overlap frames (0 or 1 + 4k), device, VAE offload."""

    steps: int | None = None
    guidance: float | None = None
    chunk_frames: int | None = None
    overlap: int = GENERATION.overlap
    device: str | None = None
    offload: bool = False

    def model_config(self) -> TransferConfig:
        """The model config with this run's frames per chunk (checked)."""
        try:
            cfg = get_config(self.config)
        except KeyError as exc:
            raise AvsimInputError("--config", "config", str(exc.args[0])) from None
        tf = cfg.vae.temporal_factor
        frames = cfg.frames_per_chunk if self.chunk_frames is None else int(self.chunk_frames)
        if frames > cfg.frames_per_chunk or frames < 1 or (frames - 1) % tf:
            raise AvsimInputError("--chunk-frames", "frames", f"must be 1 + {tf}k and at most {cfg.frames_per_chunk} ({cfg.name}), got {frames}")
        if self.overlap < 0 or (self.overlap and (self.overlap - 1) % tf) or self.overlap >= frames:
            raise AvsimInputError("--overlap", "frames", f"must be 0 or 1 + {tf}k and fewer than the chunk's {frames} frames, got {self.overlap}")
        return dataclasses.replace(cfg, frames_per_chunk=frames)
