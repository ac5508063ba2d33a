"""Resuming from a checkpoint folder someone else wrote never runs its code: gadgets planted in
every file of a checkpoint (DCP .metadata, DCP data items, RNG states, meta.json) are refused
with one line naming the file, and no canary fires."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch import nn

from avsim.core.errors import AvsimInputError
from avsim.train.checkpoint import CheckpointManager, _EMAState, _ModelOptim
from avsim.train.ema import EMA, EMAConfig
from avsim.train.safe_dcp import read_dcp_metadata


class Gadget:
    """Unpickling this creates the canary file (what an attacker's pickle would do)."""

    def __init__(self, canary: Path) -> None:
        self.canary = canary

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.canary}",)


def _saved(tmp_path: Path) -> tuple[CheckpointManager, nn.Module, torch.optim.Optimizer, EMA, Path]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ema = EMA(model, EMAConfig())
    model(torch.randn(3, 4)).square().mean().backward()
    opt.step()
    ema.update(model)
    manager = CheckpointManager(tmp_path / "ckpt", keep=2)
    return manager, model, opt, ema, manager.save(1, model, opt, ema, {})


def _load(manager: CheckpointManager, model: nn.Module, opt: torch.optim.Optimizer, ema: EMA) -> None:
    manager.load(1, model, opt, ema)


def test_untouched_checkpoint_loads(tmp_path: Path) -> None:
    manager, model, opt, ema, path = _saved(tmp_path)
    _load(manager, model, opt, ema)
    assert read_dcp_metadata(path / ".metadata").state_dict_metadata


def test_gadget_in_dcp_metadata_is_refused(tmp_path: Path) -> None:
    manager, model, opt, ema, path = _saved(tmp_path)
    canary = tmp_path / "canary"
    (path / ".metadata").write_bytes(pickle.dumps(Gadget(canary)))
    with pytest.raises(AvsimInputError, match=r"\.metadata: global: posix\.system is not part of DCP"):
        _load(manager, model, opt, ema)
    assert not canary.exists()


def test_gadget_in_a_dcp_data_item_is_refused(tmp_path: Path) -> None:
    """A non-tensor item (the optimizer's learning rate) replaced by a gadget in the shards."""
    manager, model, opt, ema, path = _saved(tmp_path)
    canary = tmp_path / "canary"
    state = {"app": _ModelOptim(model, opt).state_dict(), "ema": _EMAState(ema).state_dict()}
    state["app"]["optim"]["param_groups"][0]["lr"] = Gadget(canary)
    for f in path.glob("*.distcp"):
        f.unlink()
    dcp.save(state, checkpoint_id=str(path))  # legitimate metadata, poisoned item
    assert not canary.exists()  # saving does not run it
    with pytest.raises(AvsimInputError, match="refused by the weights-only loader"):
        _load(manager, model, opt, ema)
    assert not canary.exists()


def test_gadget_in_rng_state_and_bad_meta_are_refused(tmp_path: Path) -> None:
    manager, model, opt, ema, path = _saved(tmp_path)
    canary = tmp_path / "canary"
    torch.save(Gadget(canary), path / "rng_rank0.pt")
    with pytest.raises(AvsimInputError, match=r"rng_rank0\.pt: rng: not a weights-only RNG state"):
        _load(manager, model, opt, ema)
    assert not canary.exists()
    (path / "meta.json").write_text("[" * 100_000)
    with pytest.raises(AvsimInputError, match=r"meta\.json: json"):
        _load(manager, model, opt, ema)


def test_corrupt_metadata_is_one_line(tmp_path: Path) -> None:
    manager, model, opt, ema, path = _saved(tmp_path)
    (path / ".metadata").write_bytes((path / ".metadata").read_bytes()[:40])
    with pytest.raises(AvsimInputError, match=r"\.metadata: metadata: cannot read DCP metadata"):
        _load(manager, model, opt, ema)


def test_resave_killed_between_renames_keeps_the_step(tmp_path: Path) -> None:
    """A re-save of step 1 killed after the old copy was moved aside (keep=1, the only
    checkpoint): the step is found again, complete, and loads."""
    manager, model, opt, ema, path = _saved(tmp_path)
    old = path.parent / f".{path.name}.old"
    os.replace(path, old)  # what a kill between `final -> .old` and `.partial -> final` leaves
    assert manager.complete_steps() == [1] and path.is_dir() and not old.exists()
    _load(manager, model, opt, ema)
    manager.keep = 1
    manager.save(1, model, opt, ema, {})  # a normal re-save replaces it and leaves no .old
    assert manager.complete_steps() == [1] and sorted(p.name for p in path.parent.iterdir()) == [path.name]


@pytest.mark.parametrize("loader", ["dit", "vae", "net", "embeddings"])
@pytest.mark.parametrize("kind", ["gadget.pt", "junk.safetensors", "empty.pt", "list.pt"])
def test_weight_files_for_generate_and_export_never_run_code(tmp_path: Path, loader: str, kind: str) -> None:
    """What `generate --checkpoint/--vae/--embeddings` and `train run --set checkpoint.init_from`
    read: a gadget, a corrupt safetensors header, an empty file, a non-dict: one line, no code."""
    from avsim.models.checkpoint import load_dit_state_dict, load_vae_state_dict
    from avsim.models.text import load_prompt_embeddings
    from avsim.train.loop import load_net_file

    canary = tmp_path / "canary"
    path = tmp_path / kind
    if kind == "gadget.pt":
        torch.save(Gadget(canary), path)
    elif kind == "junk.safetensors":
        path.write_bytes(b"\xff" * 100)
    elif kind == "empty.pt":
        path.write_bytes(b"")
    else:
        torch.save([1, 2, 3], path)
    load = {"dit": load_dit_state_dict, "vae": load_vae_state_dict, "net": load_net_file, "embeddings": load_prompt_embeddings}[loader]
    with pytest.raises(AvsimInputError, match=kind.replace(".", r"\.")):
        load(path)
    assert not canary.exists()
