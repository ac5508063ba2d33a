"""The model options: which Transfer model runs, with which weights and which text.

`ModelOptions` is the one declaration of `--config`, `--checkpoint`, `--vae`, `--random-weights`,
`--embeddings` and `--zero-text`: a field per option, its help in the field's metadata (`HELP`).
`avsim.models.cli.model_options` turns the fields into the options of every command that loads
the model (`avsim generate`, `avsim sim`, `avsim serve sensorsim`, `avsim run generate`), so a
new model option is one field here. Plain Python (no torch): a command reads the options
without loading the model. Whether the options fit together (random weights or weight files,
one source of text) is checked where the model is loaded (`avsim.models.generate.check_request`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avsim.core.errors import AvsimValueError
from avsim.models.config import CONFIGS
from avsim.models.defaults import GENERATION

HELP = "help"  # the metadata key of a field's help text

__all__ = ["HELP", "ModelOptions"]


@dataclass(frozen=True)
class ModelOptions:
    """Which Transfer model runs and what it reads: the config, the weights (checkpoint and VAE,
    or random for a smoke test) and the text (precomputed embeddings, or zero text).

    Attributes:
        config: a named model config (`avsim.models.config.CONFIGS`).
        checkpoint: the DiT + control checkpoint (None: none given).
        vae: the Wan2.1 VAE weights (None: none given).
        random_weights: random DiT and VAE instead of weight files (the output is noise).
        embeddings: precomputed prompt embeddings (None: none given).
        zero_text: all-zero text embeddings instead of a text source.
    """

    config: str = field(default=GENERATION.config, metadata={HELP: f"Model config: {', '.join(CONFIGS)}."})
    checkpoint: Path | None = field(default=None, metadata={HELP: "DiT + control checkpoint (net.* keys; .pt or .safetensors)."})
    vae: Path | None = field(default=None, metadata={HELP: "Wan2.1 VAE weights (tokenizer.pth)."})
    random_weights: bool = field(default=False, metadata={HELP: "Random DiT and VAE: the output is NOISE (smoke tests)."})
    embeddings: Path | None = field(default=None, metadata={HELP: "Precomputed prompt embeddings (python -m avsim.models.text)."})
    zero_text: bool = field(default=False, metadata={HELP: "Zero text embeddings (unconditional, as text dropout; no text encoder)."})

    def __post_init__(self) -> None:
        if not isinstance(self.config, str) or not self.config:
            raise AvsimValueError(f"config: expected a config name, got {self.config!r}")
        for name in ("checkpoint", "vae", "embeddings"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (str, Path)):
                raise AvsimValueError(f"{name}: expected a path or None, got {value!r}")
            object.__setattr__(self, name, None if value is None else Path(value))
        for name in ("random_weights", "zero_text"):
            if not isinstance(getattr(self, name), bool):
                raise AvsimValueError(f"{name}: expected True or False, got {getattr(self, name)!r}")

    def model_kwargs(self) -> dict[str, Any]:
        """The model options by field name (keyword arguments of `GenerateRequest` and of
        `avsim.sim.generated.options.GenerationOptions`); only `ModelOptions`'s own fields."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(ModelOptions)}
