"""`avsim serve sensorsim --generated`: the Transfer model's images instead of the control images.

Each render call's images of one scene (one `render_rgb`, or the cameras of a `render_aggregated`)
are generated together as one multi-view, one-frame chunk (the model's image mode): the control
images are resized to the model's size, generated with the cameras' view embeddings, and resized
back to the requested resolution. The frames of successive calls are generated independently (no
conditioning on earlier frames: a sensor simulator does not know the next pose); the closed loop
with temporal conditioning is `avsim sim --observe generated`. Every camera must be one of the
model's views; the same request gives the same image (a fixed seed).
"""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np

from avsim.core.typing import NDArrayByte
from avsim.sim.alpasim.frames import SpecError
from avsim.sim.alpasim.scenes import LoadedScene
from avsim.sim.generated.generator import ChunkGenerator
from avsim.sim.generated.options import GenerationOptions

__all__ = ["GeneratedImages"]


class GeneratedImages:
    """The `generated` hook of `SensorsimServer` (see the module docstring).

    Args:
        options: the model (its chunk settings are replaced: one frame, no overlap).
        seed: the sampling seed of every call.
    """

    def __init__(self, options: GenerationOptions, seed: int = 0) -> None:
        self.options = dataclasses.replace(options, chunk_frames=1, overlap=0)
        self.seed = int(seed)
        self.known = self.options.model_config().cameras
        self._generators: dict[tuple[str, ...], ChunkGenerator] = {}

    def _generator(self, cameras: tuple[str, ...]) -> ChunkGenerator:
        if cameras not in self._generators:
            self._generators[cameras] = ChunkGenerator(self.options, cameras)
        return self._generators[cameras]

    def __call__(self, scene: LoadedScene, views: list[tuple[str, NDArrayByte]]) -> list[NDArrayByte]:
        names = tuple(name for name, _ in views)
        unknown = [n for n in names if n not in self.known]
        if unknown or len(set(names)) != len(names):
            raise SpecError(f"camera_intrinsics.logical_id: {', '.join(unknown) or 'a camera twice'}: --generated needs distinct model views ({', '.join(self.known)})")
        gen = self._generator(names)
        w, h = gen.size
        control: list[NDArrayByte] = [np.asarray(cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA), np.uint8)[None] for _, img in views]
        out = gen.generate(control, None, self.seed)
        return [np.ascontiguousarray(cv2.resize(v[0], (img.shape[1], img.shape[0]), interpolation=cv2.INTER_LINEAR)) for v, (_, img) in zip(out, views)]
