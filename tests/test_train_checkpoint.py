"""Checkpoint atomicity and round trips (single process; DCP needs no process group)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from avsim.train.checkpoint import CheckpointManager
from avsim.train.ema import EMA, EMAConfig


def _model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))


def _step(model: nn.Module, opt: torch.optim.Optimizer, ema: EMA | None, x: torch.Tensor | None = None) -> None:
    loss = model(torch.randn(3, 4) if x is None else x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if ema is not None:
        ema.update(model)


@pytest.mark.parametrize("ema_cfg", [EMAConfig(), EMAConfig(kind="constant", decay=0.9)], ids=["power", "constant"])
def test_round_trip_continues_bit_exactly(tmp_path: Path, ema_cfg: EMAConfig) -> None:
    model = _model(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ema = EMA(model, ema_cfg)
    for _ in range(2):
        _step(model, opt, ema)
    manager = CheckpointManager(tmp_path, keep=2)
    manager.save(2, model, opt, ema, {"loader_batch": 2})
    _step(model, opt, ema)  # step 3: draws its input from the (saved) RNG state

    other = _model(1)
    other_opt = torch.optim.AdamW(other.parameters(), lr=1e-2)
    other_ema = EMA(other, ema_cfg)
    _step(other, other_opt, other_ema)  # optimiser state exists and must be overwritten
    meta = manager.load(2, other, other_opt, other_ema)
    assert meta["step"] == 2 and meta["loader_batch"] == 2 and other_ema.step == 2
    assert other_ema.current_decay() == ema.beta(2)  # the decay follows the restored count
    _step(other, other_opt, other_ema)
    for a, b in zip(model.parameters(), other.parameters(), strict=True):
        assert torch.equal(a, b)
    for k, v in ema.shadow.items():
        assert torch.equal(v, other_ema.shadow[k])


def test_keep_prunes_oldest(tmp_path: Path) -> None:
    model = _model(0)
    opt = torch.optim.AdamW(model.parameters())
    manager = CheckpointManager(tmp_path, keep=2)
    for step in (1, 2, 3):
        manager.save(step, model, opt, None, {})
    assert manager.complete_steps() == [2, 3]
    assert manager.latest() == 3


KILLED_SAVE = textwrap.dedent(
    """
    import os, signal, sys
    import torch
    from torch import nn
    import torch.distributed.checkpoint.filesystem as fs
    from avsim.train.checkpoint import CheckpointManager
    from avsim.train.ema import EMA

    folder, where = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ema = EMA(model)
    manager = CheckpointManager(folder)
    manager.save(1, model, opt, ema, {})
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    if where == "write":  # shards written, metadata not yet
        fs.FileSystemWriter.finish = die
    else:  # everything written, killed at the commit rename
        os.replace = die
    manager.save(2, model, opt, ema, {})
    print("not reached")
    """
)


@pytest.mark.subprocess
@pytest.mark.timeout(360)
@pytest.mark.parametrize("where", ["write", "rename"])
def test_killed_save_leaves_previous_checkpoint_loadable(tmp_path: Path, where: str) -> None:
    script = tmp_path / "killed_save.py"
    script.write_text(KILLED_SAVE)
    folder = tmp_path / "ckpt"
    proc = subprocess.run([sys.executable, str(script), str(folder), where], capture_output=True, text=True, timeout=360)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "not reached" not in proc.stdout
    assert (folder / ".step_00000002.partial").is_dir()  # the killed save's debris
    manager = CheckpointManager(folder)
    assert manager.latest() == 1
    torch.manual_seed(0)
    reference = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    model = _model(5)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    manager.load(1, model, opt, EMA(model))
    for a, b in zip(reference.parameters(), model.parameters(), strict=True):
        assert torch.equal(a, b)
    manager.save(2, model, opt, None, {})  # a later save clears the debris
    assert manager.complete_steps() == [1, 2]
    assert not (folder / ".step_00000002.partial").exists()
