"""Training checkpoints with torch.distributed.checkpoint (DCP), atomic, plus `net.*` export.

Layout of ``<out_dir>/checkpoints``::

    step_00000002/            one complete checkpoint: DCP shards + .metadata,
        rng_rank<r>.pt        every rank's RNG states,
        meta.json             written last, before the rename; marks it complete
    .step_00000004.partial/   a save in progress (or one killed mid-way): ignored, removed later

A save writes into the ``.partial`` folder and renames it only once every rank has finished,
so a crash at any point leaves the previous checkpoint as the newest loadable one.
Saved state: model (sharded, incl. the frozen base), optimiser, EMA, step, data-loader position
and RNG states. Loading reshards, so a run may resume on another world size.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.checkpoint.stateful import Stateful

from avsim.core.errors import AvsimInputError
from avsim.core.safe_json import read_json
from avsim.train.ema import EMA
from avsim.train.safe_dcp import load_dcp

STEP_DIR = re.compile(r"^step_(\d{8})$")
MAX_META_BYTES = 16 * 1024**2  # a checkpoint's meta.json holds a few counters
# integer meta.json fields: (lowest, highest); a resume reads them back as run state
META_LIMITS: dict[str, tuple[int, int]] = {
    "step": (0, 99_999_999),  # the folder name has 8 digits
    "world_size": (1, 1 << 20),
    "loader_batch": (0, 1 << 40),
}
MAX_META_TEXT_CHARS = 4096  # a string field (the model's name)


class _ModelOptim(Stateful):
    """Model + optimiser through the DCP state-dict helpers (FSDP2-aware, resharding)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> None:
        self.model, self.optimizer = model, optimizer

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"model": get_model_state_dict(self.model)}
        if self.optimizer is not None:  # None: load the weights only (export)
            state["optim"] = get_optimizer_state_dict(self.model, self.optimizer)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        set_model_state_dict(self.model, state["model"])
        if self.optimizer is not None:
            set_optimizer_state_dict(self.model, self.optimizer, state["optim"])


class _EMAState(Stateful):
    def __init__(self, ema: EMA) -> None:
        self.ema = ema

    def state_dict(self) -> dict[str, Any]:
        return self.ema.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ema.load_state_dict(state)


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def rng_state() -> dict[str, torch.Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, torch.Tensor]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, text: str) -> None:
    """Write `text` and fsync it, so a rename after it never publishes an empty file."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


class CheckpointManager:
    """Save, find and load checkpoints of one run (all ranks call every method)."""

    def __init__(self, folder: str | os.PathLike[str], keep: int = 3) -> None:
        self.folder = Path(folder)
        self.keep = keep

    def path(self, step: int) -> Path:
        return self.folder / f"step_{step:08d}"

    def _recover(self) -> None:
        """A re-save killed between its two renames left the step only as `.step_X.old`: restore it."""
        for old in self.folder.glob(".step_*.old"):
            final = self.folder / old.name[1 : -len(".old")]
            if final.exists():
                shutil.rmtree(old, ignore_errors=True)
            elif (old / "meta.json").is_file() and (old / ".metadata").is_file():
                os.replace(old, final)

    def complete_steps(self) -> list[int]:
        """Steps of the complete checkpoints, oldest first."""
        if not self.folder.is_dir():
            return []
        if _rank() == 0:
            self._recover()
        steps = []
        for p in self.folder.iterdir():
            m = STEP_DIR.match(p.name)
            if m and (p / "meta.json").is_file() and (p / ".metadata").is_file():
                steps.append(int(m.group(1)))
        return sorted(steps)

    def latest(self) -> int | None:
        steps = self.complete_steps()
        return steps[-1] if steps else None

    def save(
        self,
        step: int,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        ema: EMA | None,
        extra: dict[str, Any],
    ) -> Path:
        """Write checkpoint `step` atomically; ``extra``: small JSON-able run state."""
        final = self.path(step)
        partial = self.folder / f".{final.name}.partial"
        if _rank() == 0:
            self.folder.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(partial, ignore_errors=True)  # leftovers of a killed save
            partial.mkdir()
        _barrier()
        state: dict[str, Any] = {"app": _ModelOptim(model, optimizer)}
        if ema is not None:
            state["ema"] = _EMAState(ema)
        dcp.save(state, checkpoint_id=str(partial))
        torch.save(rng_state(), partial / f"rng_rank{_rank()}.pt")
        _barrier()
        if _rank() == 0:
            meta = {"step": step, "world_size": dist.get_world_size() if dist.is_initialized() else 1, **extra}
            _write_synced(partial / "meta.json", json.dumps(meta, indent=2))
            _fsync_dir(partial)
            old = self.folder / f".{final.name}.old"
            if final.exists():  # re-saving a step after a resume: the old copy stays until the new is in place
                shutil.rmtree(old, ignore_errors=True)
                os.replace(final, old)
                _fsync_dir(self.folder)
            os.replace(partial, final)
            _fsync_dir(self.folder)
            shutil.rmtree(old, ignore_errors=True)
            self._prune()
        _barrier()
        return final

    def _prune(self) -> None:
        steps = self.complete_steps()
        for s in steps[: max(0, len(steps) - self.keep)]:
            shutil.rmtree(self.path(s), ignore_errors=True)
        for p in self.folder.glob(".step_*.partial"):
            shutil.rmtree(p, ignore_errors=True)

    def load(
        self,
        step: int,
        model: nn.Module,
        optimizer: torch.optim.Optimizer | None,
        ema: EMA | None,
    ) -> dict[str, Any]:
        """Restore checkpoint `step` in place; returns its meta.json (incl. `extra`).

        ``optimizer`` / ``ema`` None: those parts are not read (DCP loads only what is asked).
        """
        path = self.path(step)
        meta_path = path / "meta.json"
        if not meta_path.is_file():
            raise AvsimInputError(path, "checkpoint", "missing or incomplete")
        state: dict[str, Any] = {"app": _ModelOptim(model, optimizer)}
        if ema is not None:
            state["ema"] = _EMAState(ema)
        meta = _read_meta(meta_path, step)
        load_dcp(state, path)  # never unpickles what the folder holds (avsim.train.safe_dcp)
        rng_path = path / f"rng_rank{_rank()}.pt"
        if meta.get("world_size") == (dist.get_world_size() if dist.is_initialized() else 1) and rng_path.is_file():
            set_rng_state(_read_rng(rng_path))
        return meta


def _read_meta(path: Path, step: int) -> dict[str, Any]:
    """meta.json of checkpoint `step`: a bounded JSON object whose counters are in range, else one line.

    Args:
        path: the file.
        step: the step its folder name says (the `step` field must equal it).

    Returns:
        the document.
    """
    meta = read_json(path, "json", MAX_META_BYTES)
    if not isinstance(meta, dict) or type(meta.get("step")) is not int:
        raise AvsimInputError(path, "step", "meta.json must be an object with an integer step")
    for key, value in meta.items():
        limit = META_LIMITS.get(key)
        if limit is not None and not (type(value) is int and limit[0] <= value <= limit[1]):
            raise AvsimInputError(path, key, f"must be an integer from {limit[0]} to {limit[1]}, got {str(value)[:40]}")
        if isinstance(value, str) and len(value) > MAX_META_TEXT_CHARS:
            raise AvsimInputError(path, key, f"a string of {len(value)} characters, more than {MAX_META_TEXT_CHARS}")
    if meta["step"] != step:
        raise AvsimInputError(path, "step", f"is {meta['step']} in the folder of step {step}")
    return meta


def _read_rng(path: Path) -> dict[str, torch.Tensor]:
    """A rank's saved RNG states, weights-only (no code), as a dict of uint8 tensors."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # refused globals, truncated archives: one line naming the file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AvsimInputError(path, "rng", f"not a weights-only RNG state: {first}") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise AvsimInputError(path, "rng", "must hold a dict of tensors")
    return state


def load_full_model_state_dict(model: nn.Module, state: dict[str, torch.Tensor], *, strict: bool = True) -> None:
    """Load an unsharded state dict held by rank 0 (others pass {}) into a sharded model."""
    distributed = dist.is_initialized() and dist.get_world_size() > 1
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=distributed, strict=strict)
    set_model_state_dict(model, dict(state), options=options)
