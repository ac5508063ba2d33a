"""Generation defaults: the one place that names the samplers and the default settings.

`avsim generate` (models/cli.py), `SamplingOptions` (models/pipeline.py) and the named model
configs (models/config.py) all read :data:`GENERATION`; the dispatch table in
`avsim.models.samplers` has exactly :data:`SAMPLER_NAMES` as keys. Plain Python, no torch, so
the CLI can show the defaults without importing the models.
"""

from __future__ import annotations

from dataclasses import dataclass

from avsim.models.flow import DEFAULT_SIGMA_SHIFT

SAMPLER_NAMES: tuple[str, ...] = ("unipc", "euler")
"""Sampler names, the default first."""


@dataclass(frozen=True)
class GenerationDefaults:
    """Defaults of one generation run (sampling options and the model config's name).

    ``steps`` / ``guidance`` / ``shift``: the released multi-view recipe (a model config may
    override steps and guidance, e.g. `debug` samples 4 steps); ``overlap``: pixel frames
    shared by consecutive autoregressive chunks.
    """

    config: str = "transfer25_2b_multiview"
    steps: int = 35
    guidance: float = 3.0
    shift: float = DEFAULT_SIGMA_SHIFT
    sampler: str = SAMPLER_NAMES[0]
    seed: int = 0
    control_weight: float = 1.0
    num_conditional_frames: int = 0
    chunks: int = 1
    overlap: int = 1


GENERATION = GenerationDefaults()

__all__ = ["GENERATION", "SAMPLER_NAMES", "GenerationDefaults"]
