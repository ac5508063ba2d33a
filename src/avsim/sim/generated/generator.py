"""The Transfer model as a chunk generator for the closed loop: control frames in, generated frames out.

`ChunkGenerator` loads the text contexts, the VAE and the DiT once through the models layer
(`avsim.models.generate.load_models`, the same weights and text options as `avsim generate`)
and generates one chunk at a time with `TransferPipeline.generate`: the chunk's control frames
of every view, conditioned on the last generated frames of the previous chunk (the pipeline's
autoregressive overlap), one seed per chunk. Images are numpy (T, H, W, 3) uint8 at the
boundary; the model config's size and rate are the sim's image size and step rate.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from avsim.core.errors import AvsimInputError
from avsim.core.progress import StepProgress
from avsim.core.typing import NDArrayByte
from avsim.models.config import MULTIVIEW_CAMERAS
from avsim.models.generate import GenerateRequest, GenerationModels, check_request, load_models, sampling_options
from avsim.sim.generated.options import GenerationOptions

__all__ = ["ChunkGenerator"]


def _to_tensor(frames: NDArrayByte) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).contiguous()


class ChunkGenerator:
    """One chunk of multi-view video at a time (see the module docstring).

    Args:
        options: model, weights, text and sampling.
        cameras: the views to generate (None: the config's); each must be one of the model's views.
        log: one-line messages (the random-weights banner).
        progress: the long steps (loading, VAE per view, sampling steps).
    """

    def __init__(self, options: GenerationOptions, cameras: tuple[str, ...] | None = None, log: Callable[[str], None] | None = None,
                 progress: StepProgress | None = None) -> None:  # fmt: skip
        self.options = options
        self.config = options.model_config()
        known = self.config.cameras if self.config.dit.is_multiview else MULTIVIEW_CAMERAS
        self.cameras = tuple(cameras) if cameras else tuple(self.config.cameras)
        unknown = [c for c in self.cameras if c not in known]
        if unknown:
            raise AvsimInputError("--cameras", "cameras", f"{', '.join(unknown)} not among the model's views ({', '.join(known)})")
        if not self.config.dit.is_multiview and len(self.cameras) != 1:
            raise AvsimInputError("--cameras", "cameras", f"the single-view config {self.config.name} generates exactly one camera")
        self.view_indices = torch.tensor([known.index(c) for c in self.cameras])
        self.request = GenerateRequest(control_dir=Path("."), out=Path("."), **options.model_kwargs(), device=options.device,
                                       offload=options.offload)  # fmt: skip
        self._log = log or (lambda _m: None)
        self._progress = progress
        check_request(self.request, self._log)
        self._models: GenerationModels | None = None

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the generated (and control) frames."""
        return self.config.width_px, self.config.height_px

    @property
    def fps(self) -> float:
        """The model's frame rate (the sim's step rate)."""
        return float(self.config.model_fps)

    @property
    def output_is_noise(self) -> bool:
        return self.options.random_weights

    def load(self) -> None:
        """Load the text contexts, the VAE and the DiT (once)."""
        if self._models is None:
            self._models = load_models(self.request, self.config, list(self.cameras), self.view_indices, _quiet,
                                       self._progress)  # fmt: skip

    def generate(self, control: list[NDArrayByte], conditioning: list[NDArrayByte] | None, seed: int) -> list[NDArrayByte]:
        """One chunk of every view.

        Args:
            control: per view (F, H, W, 3) uint8 control frames (F: the chunk's frames).
            conditioning: per view (O, H, W, 3) uint8 generated frames the chunk starts from, or None.
            seed: the chunk's sampling seed.

        Returns:
            Per view (F, H, W, 3) uint8 generated frames (the first O are the conditioning's).
        """
        self.load()
        assert self._models is not None
        m, o = self._models, self.options
        n_cond = int(conditioning[0].shape[0]) if conditioning else 0
        opts = sampling_options(self.config, steps=o.steps, guidance=o.guidance, seed=int(seed), num_conditional_frames=n_cond,
                                chunks=1, overlap=0)  # fmt: skip
        cond = [_to_tensor(c) for c in conditioning] if conditioning else None
        videos = m.pipe.generate([_to_tensor(c) for c in control], m.context, m.negative, m.view_indices, opts, cond)
        return [v.permute(0, 2, 3, 1).contiguous().numpy() for v in videos]


def _quiet(_message: str) -> None:
    """The pipeline's per-chunk lines are not shown: the episode's progress says which chunk runs."""
