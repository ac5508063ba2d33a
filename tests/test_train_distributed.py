"""Distributed training on 2 CPU processes (gloo): FSDP2 + Ulysses CP equality, kill and resume.

Tolerances: the 2-rank runs are fp32 (gloo on the CPU); they differ from one process only in
summation order (gradient reduce-scatter, the CP split of attention and of the loss gradient),
so losses agree to rtol 1e-5 (measured 1e-7, 0 since the issue-16 recipe) and weights after 3
AdamW steps to atol 5e-5 (measured 1e-5 at a constant lr 1e-3, 6e-7 with the debug recipe's
warm-up from 1e-6 x lr; AdamW's first steps move every weight by about lr whatever the gradient's
size, so 5e-5 is 5 % of one step at 1e-3). Resume is compared bit for bit (power EMA included).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from pathlib import Path

import pytest
import torch
from test_train_loop import synth_cache

from avsim.train.config import CheckpointConfig, ParallelConfig, TrainConfig, debug
from avsim.train.dist import launch_local


def _config(tmp: Path, cache: Path, name: str, **parallel) -> TrainConfig:  # type: ignore[no-untyped-def]
    cfg = debug(cache_dir=str(cache), out_dir=str(tmp / name))
    parallel = {"activation_checkpointing": "none", "param_dtype": "float32", **parallel}
    par = ParallelConfig(cp_min_tokens=0, **parallel)
    return dataclasses.replace(cfg, parallel=par, train_mode="full")


def _train_worker(cfg: TrainConfig, result: str, kill_at: int) -> None:
    from avsim.train.loop import train

    def maybe_die(step: int, record: dict) -> None:
        if step == kill_at:  # both ranks: a node lost mid-run, after the step-2 checkpoint
            os.kill(os.getpid(), signal.SIGKILL)

    records = train(cfg, callbacks=[maybe_die])
    if torch.distributed.get_rank() == 0:
        Path(result).write_text(json.dumps(records))


def _run(cfg: TrainConfig, nprocs: int, kill_at: int = -1) -> list[dict]:
    result = Path(cfg.out_dir) / "records.json"
    launch_local(_train_worker, nprocs, cfg, str(result), kill_at)
    return json.loads(result.read_text())


def _weights(cfg: TrainConfig, tmp: Path, ema: bool = False) -> dict[str, torch.Tensor]:
    from avsim.models.checkpoint import load_dit_state_dict
    from avsim.train.loop import export_net

    path = export_net(cfg, tmp / f"{Path(cfg.out_dir).name}_{ema}.pt", use_ema=ema, dtype=torch.float32)
    return load_dit_state_dict(path)


@pytest.mark.slow
@pytest.mark.timeout(720)
def test_fsdp_and_context_parallel_match_one_process(tmp_path: Path) -> None:
    from avsim.models.checkpoint import save_net_state_dict
    from avsim.models.config import debug as debug_model
    from avsim.models.pipeline import build_dit
    from avsim.train.loop import train

    cache = synth_cache(tmp_path / "cache", n=4)
    # start from a net.* file whose control projections are non-zero, so that every parameter
    # gets a gradient from step 1 (and the meta-device + broadcast initialisation is exercised)
    init = tmp_path / "init.pt"
    save_net_state_dict(build_dit(debug_model(), None, torch.device("cpu"), torch.float32, seed=5), init, dtype=None)
    start = CheckpointConfig(interval=0, init_from=str(init))
    single = dataclasses.replace(_config(tmp_path, cache, "single"), steps=3, checkpoint=start)
    ref = train(single)
    ref_w = _weights(single, tmp_path)
    # 2 ranks: FSDP shards over both, Ulysses CP splits each sample's sequence over both, and
    # selective activation checkpointing recomputes blocks (all-to-alls included) in backward
    par = _config(tmp_path, cache, "fsdp_cp", cp=2, activation_checkpointing="selective")
    par = dataclasses.replace(par, steps=3, checkpoint=start)
    got = _run(par, 2)
    got_w = _weights(par, tmp_path)
    from avsim.models.checkpoint import load_dit_state_dict

    initial = load_dit_state_dict(init)
    assert [r["step"] for r in got] == [1, 2, 3]
    print("loss rel. diff:", [abs(b["loss"] / a["loss"] - 1) for a, b in zip(ref, got, strict=True)])
    print("max weight diff:", max(float((got_w[k] - w).abs().max()) for k, w in ref_w.items()))
    for a, b in zip(ref, got, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)
    moved = 0
    for name, w in ref_w.items():
        torch.testing.assert_close(got_w[name], w, rtol=0, atol=5e-5, msg=name)
        moved += int(not torch.equal(w, initial[name]))
    assert moved == len(ref_w)  # the steps really trained every tensor
    ref_ema, got_ema = _weights(single, tmp_path, ema=True), _weights(par, tmp_path, ema=True)
    for name, w in ref_ema.items():  # the EMA, saved as FSDP shards, exported unsharded
        torch.testing.assert_close(got_ema[name], w, rtol=0, atol=5e-5, msg=name)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_kill_and_resume_is_bit_exact(tmp_path: Path) -> None:
    cache = synth_cache(tmp_path / "cache", n=5)
    # data parallel over 2 ranks (different samples per rank), checkpoints every 2 steps
    ckpt = CheckpointConfig(interval=2, keep=2)
    # control training (the default: frozen base and trained branch share FSDP units) with
    # bf16 parameters (the GPU setting; fp32 master weights, optimiser state and reductions)
    straight = _config(tmp_path, cache, "straight", param_dtype="bfloat16")
    straight = dataclasses.replace(straight, steps=4, checkpoint=ckpt, train_mode="control")
    reference = _run(straight, 2)
    broken = dataclasses.replace(straight, out_dir=str(tmp_path / "broken"))
    with pytest.raises(Exception, match="signal|SIGKILL|exited"):
        _run(broken, 2, kill_at=3)
    assert sorted(p.name for p in (tmp_path / "broken" / "checkpoints").iterdir()) == ["step_00000002"]
    resumed = _run(broken, 2)
    assert [r["step"] for r in resumed] == [3, 4]
    for a, b in zip(reference[2:], resumed, strict=True):
        assert a["loss"] == b["loss"] and a["grad_norm"] == b["grad_norm"]
    logged = [json.loads(line)["step"] for line in (tmp_path / "broken" / "log.jsonl").read_text().splitlines()]
    assert logged == [1, 2, 3, 4]  # the killed run's step 3 was dropped on resume
    w_ref, w_res = _weights(straight, tmp_path), _weights(broken, tmp_path)
    for name, w in w_ref.items():
        assert torch.equal(w, w_res[name]), name
    for rank in (0, 1):  # the RNG saved after the resume equals the uninterrupted run's
        rng = [torch.load(tmp_path / run / "checkpoints" / "step_00000004" / f"rng_rank{rank}.pt", weights_only=True)
               for run in ("straight", "broken")]  # fmt: skip
        assert all(torch.equal(rng[0][k], rng[1][k]) for k in rng[0]), rank
