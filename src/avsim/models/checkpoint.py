"""Checkpoint loading and saving with strict key matching.

The released DiT file is one flat dict with keys ``net.<module path>`` (bf16 EMA weights);
TransformerEngine ``*._extra_state`` entries, RoPE bookkeeping buffers (``pos_embedder*.seq``
etc.) and the reference network's four training-statistics counters at its top level
(``accum_video_sample_counter``, ``accum_image_sample_counter``, ``accum_iteration``,
``accum_train_in_hours``: buffers of ``WeightTrainingStat``, cosmos-transfer2.5
cosmos_transfer2/_src/predict2/networks/model_weights_stats.py) carry no learned values and are
dropped; everything else must match. The VAE file has no prefix. Files are untrusted:
``torch.load(weights_only=True)`` or safetensors only.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch
from torch import Tensor, nn

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError

TRAINING_STAT_BUFFERS = (
    "accum_video_sample_counter",
    "accum_image_sample_counter",
    "accum_iteration",
    "accum_train_in_hours",
)
"""Top-level counters of the reference network's state dict (no learned values; dropped)."""

_IGNORED = re.compile(
    r"(^|\.)_extra_state$|^pos_embedder[^.]*(\.[^.]+)*\.(seq|dim_spatial_range|dim_temporal_range)$"
    rf"|^({'|'.join(TRAINING_STAT_BUFFERS)})$"
)


class CheckpointMismatchError(AvsimInputError):
    """The checkpoint's keys or shapes do not match the model; the message lists them."""


def read_state_dict(path: str | os.PathLike[str]) -> dict[str, Tensor]:
    """Read a flat tensor dict from safetensors or a torch.save file (weights_only)."""
    path = Path(path)
    if not path.is_file():
        raise AvsimInputError(path, "file", "checkpoint not found")
    if path.suffix == ".safetensors":
        from avsim.core.safe_tensors import load_safetensors

        data: object = load_safetensors(path)
    else:
        try:
            try:  # memory-mapped: a 2B checkpoint is not copied into RAM twice
                data = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError:  # legacy (non-zip) format cannot be memory-mapped
                data = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # unpickling refused or corrupt file
            raise AvsimInputError(path, "contents", f"cannot read as a weights-only torch file: {exc}") from exc
    if isinstance(data, dict) and "state_dict" in data and isinstance(data["state_dict"], dict):
        data = data["state_dict"]
    if not isinstance(data, dict):
        raise AvsimInputError(path, "contents", f"expected a flat dict of tensors, got {type(data).__name__}")
    return {k: v for k, v in data.items() if isinstance(v, Tensor)}


def clean_state_dict(state: dict[str, Tensor], prefix: str = "net.") -> dict[str, Tensor]:
    """Strip `prefix` and drop `_extra_state`, RoPE bookkeeping and `TRAINING_STAT_BUFFERS` entries."""
    out = {}
    for key, value in state.items():
        if prefix and key.startswith(prefix):
            key = key[len(prefix) :]
        if _IGNORED.search(key):
            continue
        out[key] = value
    return out


def load_dit_state_dict(path: str | os.PathLike[str]) -> dict[str, Tensor]:
    """The DiT (+ control branch) weights of a `net.*` checkpoint with the prefix stripped."""
    return clean_state_dict(read_state_dict(path), "net.")


def load_vae_state_dict(path: str | os.PathLike[str]) -> dict[str, Tensor]:
    """The Wan2.1 VAE weights (`tokenizer.pth` / `Wan2.1_VAE.pth`, no prefix)."""
    return clean_state_dict(read_state_dict(path), "")


def describe_mismatch(model: nn.Module, state: dict[str, Tensor]) -> tuple[list[str], list[str], list[str]]:
    """(missing, unexpected, shape-mismatched) keys of `state` against `model.state_dict()`."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = sorted(
        f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
        for k in set(expected) & set(state)
        if tuple(state[k].shape) != tuple(expected[k].shape)
    )
    return missing, unexpected, shapes


def _summary(name: str, items: list[str], limit: int = 20) -> str:
    shown = ", ".join(items[:limit]) + (f", ... (+{len(items) - limit} more)" if len(items) > limit else "")
    return f"{len(items)} {name} [{shown}]"


def load_into(model: nn.Module, state_dict: dict[str, Tensor], strict: bool = True, source: str = "checkpoint") -> None:
    """Copy `state_dict` into `model` (dtype converted to the model's); with `strict`, every key
    and shape must match, otherwise `CheckpointMismatchError` lists missing, unexpected and
    shape-mismatched keys. Non-strict loads still refuse shape mismatches."""
    missing, unexpected, shapes = describe_mismatch(model, state_dict)
    if shapes or (strict and (missing or unexpected)):
        parts = [_summary("missing", missing), _summary("unexpected", unexpected), _summary("shape mismatches", shapes)]
        raise CheckpointMismatchError(source, "keys", "; ".join(parts))
    expected = model.state_dict()
    converted = {k: v.to(expected[k].dtype) for k, v in state_dict.items() if k in expected}
    assign = any(t.device.type == "meta" for t in expected.values())
    model.load_state_dict(converted, strict=strict, assign=assign)


def save_net_state_dict(model: nn.Module, path: str | os.PathLike[str], dtype: torch.dtype | None = torch.bfloat16) -> None:
    """Write the single-file `net.*` format (safetensors if the name ends so, else torch.save)."""
    state = {f"net.{k}": (v.to(dtype) if dtype is not None and v.is_floating_point() else v).detach().cpu().contiguous()
             for k, v in model.state_dict().items()}
    path = Path(path)
    with atomic_output_path(path) as tmp:
        if path.suffix == ".safetensors":
            from safetensors.torch import save_file

            save_file(state, str(tmp))
        else:
            torch.save(state, tmp)


__all__ = [
    "TRAINING_STAT_BUFFERS",
    "CheckpointMismatchError",
    "clean_state_dict",
    "describe_mismatch",
    "load_dit_state_dict",
    "load_into",
    "load_vae_state_dict",
    "read_state_dict",
    "save_net_state_dict",
]
