"""Typed training configurations and the recipes (`posttrain_2b`, `debug`).

A run is described by one frozen :class:`TrainConfig`. ``avsim train run CONFIG`` takes a
recipe name (``debug``, ``posttrain_2b``) or a Python file defining ``config() -> TrainConfig``,
plus ``--set section.field=value`` overrides (parsed with the field's type).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from avsim.core.errors import AvsimInputError
from avsim.train.ema import EMAConfig
from avsim.train.objective import ObjectiveConfig


@dataclass(frozen=True)
class DataConfig:
    """``cache_dir``: output of ``avsim train encode``; ``batch_size`` is per data-parallel rank."""

    cache_dir: str = ""
    batch_size: int = 1
    num_workers: int = 2


@dataclass(frozen=True)
class OptimConfig:
    """AdamW, a learning-rate schedule (`avsim.train.schedule`) and gradient-norm clipping.

    ``schedule``: ``lambda_linear`` (the released recipe: warm-up from ``lr_start_factor`` to
    ``lr_max_factor`` over ``warmup_steps``, then linear decay to ``lr_min_factor`` at
    ``cycle_steps``, then constant) or ``warmup_constant`` (avsim's earlier schedule: linear
    warm-up to 1 over ``warmup_steps``, then constant; the ``lr_*_factor`` and ``cycle_steps``
    fields are ignored); ``grad_clip``: max gradient norm (0 disables).
    """

    # lr, weight_decay, betas, the scheduler factors, warm-up and cycle: values from
    # cosmos-transfer2.5 cosmos_transfer2/_src/transfer2_multiview/configs/vid2vid_transfer/
    # experiment/buttercup_reason1_rfupdates_v2_layer4.py (the experiment of the released
    # auto/multiview checkpoint, packages/cosmos-oss/cosmos_oss/checkpoints_transfer2.py);
    # lr_start_factor: f_start of cosmos_transfer2/_src/imaginaire/configs/lr_scheduler.py;
    # eps: cosmos_transfer2/_src/predict2/configs/common/defaults/optimizer.py (fusedadamw)
    lr: float = 8.63e-5
    weight_decay: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    schedule: Literal["lambda_linear", "warmup_constant"] = "lambda_linear"
    warmup_steps: int = 1000
    lr_start_factor: float = 1e-6
    lr_max_factor: float = 0.5
    lr_min_factor: float = 0.2
    cycle_steps: int = 100_000
    grad_clip: float = 0.1  # trainer.callbacks.grad_clip.clip_norm of the same experiment

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.warmup_steps < 0:
            raise ValueError("lr must be positive and warmup_steps >= 0")
        if min(self.lr_start_factor, self.lr_max_factor, self.lr_min_factor) < 0:
            raise ValueError("the lr_*_factor fields must be >= 0")
        if self.schedule == "lambda_linear" and self.cycle_steps <= self.warmup_steps:
            raise ValueError(f"cycle_steps ({self.cycle_steps}) must exceed warmup_steps ({self.warmup_steps})")


@dataclass(frozen=True)
class ParallelConfig:
    """How the model is spread over ``world = dp_replicate x dp_shard x cp`` ranks.

    ``cp``: Ulysses context-parallel degree (divides the head count);
    ``cp_min_tokens``: shorter sequences (images, small clips) run without CP;
    ``activation_checkpointing``: none, full (recompute each block) or selective (keep matmul
    and attention outputs, recompute the cheap element-wise ops);
    ``param_dtype``: auto = bf16 on CUDA, fp32 on CPU (gloo has no bf16 reductions everywhere);
    gradients are always reduced in fp32.
    """

    dp_replicate: int = 1
    cp: int = 1
    cp_min_tokens: int = 16384
    activation_checkpointing: Literal["none", "full", "selective"] = "full"
    compile: bool = False
    param_dtype: Literal["auto", "bfloat16", "float32"] = "auto"
    attention: Literal["sdpa", "flash"] = "sdpa"
    reshard_after_forward: bool = True


@dataclass(frozen=True)
class CheckpointConfig:
    """``interval``: save every N steps (0 = only at the end); ``keep``: newest kept;
    ``init_from``: a net.* state dict (torch or safetensors) to start from."""

    interval: int = 500
    keep: int = 3
    init_from: str = ""


@dataclass(frozen=True)
class TrainConfig:
    """One training run. ``model``: name of an `avsim.models.config` configuration;
    ``train_mode``: control (base frozen, the released recipe) or full fine-tuning;
    ``ema``: the averaged weights that exports use (`avsim.train.ema`)."""

    out_dir: str = "runs/posttrain"
    model: str = "transfer25_2b_multiview"
    train_mode: Literal["control", "full"] = "control"
    steps: int = 10_000
    seed: int = 0
    log_every: int = 10
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    ema: EMAConfig = field(default_factory=EMAConfig)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True, default=str)


def posttrain_2b(cache_dir: str = "", out_dir: str = "runs/posttrain_2b") -> TrainConfig:
    """The released multi-view post-training recipe: control branch, 720p, 7 views.

    Every objective, optimiser, schedule and EMA default follows cosmos-transfer2.5's
    multi-view training step and experiment config (docs/training.md, "Recipe"); the field
    comments name the source files.
    """
    return TrainConfig(out_dir=out_dir, data=DataConfig(cache_dir=cache_dir))


def debug(cache_dir: str = "", out_dir: str = "runs/debug") -> TrainConfig:
    """Tiny model (`avsim.models.config.debug`), 20 steps, CPU friendly; same code paths."""
    return TrainConfig(
        out_dir=out_dir,
        model="debug",
        steps=20,
        log_every=1,
        data=DataConfig(cache_dir=cache_dir, batch_size=1, num_workers=0),
        optim=OptimConfig(lr=1e-3, warmup_steps=2, cycle_steps=20, grad_clip=1.0),
        parallel=ParallelConfig(cp_min_tokens=0, activation_checkpointing="none"),
        checkpoint=CheckpointConfig(interval=10, keep=2),
    )


RECIPES = {"posttrain_2b": posttrain_2b, "debug": debug}


def load_config(spec: str) -> TrainConfig:
    """A recipe name, or a Python file whose ``config()`` returns a TrainConfig."""
    if spec in RECIPES:
        return RECIPES[spec]()
    path = Path(spec)
    if path.suffix != ".py" or not path.is_file():
        raise AvsimInputError(spec, "config", f"neither a recipe ({', '.join(RECIPES)}) nor a .py file")
    module_spec = importlib.util.spec_from_file_location(f"avsim_train_config_{path.stem}", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    make = getattr(module, "config", None)
    cfg = make() if callable(make) else None
    if not isinstance(cfg, TrainConfig):
        raise AvsimInputError(path, "config", "must define config() returning avsim.train.config.TrainConfig")
    return cfg


def _coerce(text: str, typ: Any, where: str) -> Any:
    origin = typing.get_origin(typ)
    if typ is bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{where}: expected a boolean, got {text!r}")
    if typ in (int, float, str):
        return typ(text)
    if origin is Literal:
        if text not in typing.get_args(typ):
            raise ValueError(f"{where}: expected one of {typing.get_args(typ)}, got {text!r}")
        return text
    if origin in (tuple, dict) or typ is dict:
        value = json.loads(text if origin is dict else text.replace("(", "[").replace(")", "]"))
        if origin is dict:  # JSON object keys are strings; the config's dicts are keyed by int
            key_t, val_t = typing.get_args(typ)
            return {key_t(k): val_t(v) for k, v in value.items()}
        return tuple(value)
    if origin in (typing.Union, types.UnionType):
        raise ValueError(f"{where}: union-typed fields cannot be set from the command line")
    raise ValueError(f"{where}: unsupported field type {typ}")


def apply_overrides(cfg: TrainConfig, overrides: list[str]) -> TrainConfig:
    """Apply ``section.field=value`` (or ``field=value``) overrides; returns a new config."""
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} is not key=value")
        parts = key.strip().split(".")
        cfg = _replace_path(cfg, parts, text, key)
    return cfg


def _replace_path(obj: Any, parts: list[str], text: str, key: str) -> Any:
    hints = typing.get_type_hints(type(obj))
    name = parts[0]
    if name not in hints:
        raise ValueError(f"{key}: {type(obj).__name__} has no field {name!r}")
    if len(parts) == 1:
        return dataclasses.replace(obj, **{name: _coerce(text, hints[name], key)})
    return dataclasses.replace(obj, **{name: _replace_path(getattr(obj, name), parts[1:], text, key)})


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """Inverse of ``dataclasses.asdict`` (e.g. a run's saved config.json)."""
    return _from_dict(TrainConfig, data)


def _from_dict(cls: Any, data: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value, typ = data[f.name], hints[f.name]
        if dataclasses.is_dataclass(typ):
            value = _from_dict(typ, value)
        elif typing.get_origin(typ) is tuple:
            value = tuple(value)
        elif typing.get_origin(typ) is dict:
            key_t, val_t = typing.get_args(typ)
            value = {key_t(k): val_t(v) for k, v in value.items()}
        kwargs[f.name] = value
    return cls(**kwargs)


def load_run_config(run_dir: str | Path) -> TrainConfig:
    """The config a run saved in ``<out_dir>/config.json``."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise AvsimInputError(path, "file", "not a training run folder (no config.json)")
    from avsim.core.safe_json import read_json

    doc = read_json(path)
    if not isinstance(doc, dict):
        raise AvsimInputError(path, "json", "top level must be an object")
    return config_from_dict(doc)
