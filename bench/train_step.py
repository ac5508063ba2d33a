"""Training-step throughput and MFU of the multi-view Transfer model (GPU benchmark).

One GPU, the 2B multi-view config at 720p, 7 views x 29 frames (201,600 tokens), bf16 with
fp32 master weights and reductions (FSDP2 mixed precision), SDPA or flash attention:

    python bench/train_step.py                       # 1 GPU, control training, full AC
    torchrun --nproc-per-node 2 bench/train_step.py --cp 2
    python bench/train_step.py --ac selective --attention flash --train-mode full

The FLOP count is derived by hand in `avsim.train.flops` (see docs/training.md, "FLOPs");
MFU = FLOPs per step / step time / (GPUs x dense bf16 peak). Random latents and text, random
weights: the timing does not depend on values. Without a GPU it says so and exits 0;
``--cpu-smoke`` runs the same code with the debug model on the CPU (no meaningful MFU).
``--cpu-cp-ratio`` times the debug model on the CPU at cp 1 (one gloo process) and cp 2 (two),
one thread per process, and prints tokens/s of both and their ratio (--height/--width/--frames
change the debug model's clip size):

    python bench/train_step.py --cpu-cp-ratio [--steps 10] [--frames 9 --height 128 --width 224]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from avsim.train.config import TrainConfig
    from avsim.train.flops import StepFlops
    from avsim.train.loop import Setup


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="transfer25_2b_multiview")
    p.add_argument("--views", type=int, default=7)
    p.add_argument("--frames", type=int, default=None, help="pixel frames per view, 1 + 4k (default 29; CPU: the debug model's)")
    p.add_argument("--height", type=int, default=None, help="default 720 (CPU: the debug model's)")
    p.add_argument("--width", type=int, default=None, help="default 1280 (CPU: the debug model's)")
    p.add_argument("--batch", type=int, default=1, help="samples per data-parallel rank")
    p.add_argument("--cp", type=int, default=1, help="Ulysses context-parallel degree (torchrun processes)")
    p.add_argument("--ac", default="full", choices=["none", "full", "selective"])
    p.add_argument("--attention", default="sdpa", choices=["sdpa", "flash"])
    p.add_argument("--train-mode", default="control", choices=["control", "full"])
    p.add_argument("--compile", action="store_true", help="torch.compile each block")
    p.add_argument("--steps", type=int, default=4, help="timed steps")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--cpu-smoke", action="store_true", help="debug model on the CPU (checks the script only)")
    p.add_argument("--cpu-cp-ratio", action="store_true", help="debug model on the CPU: tokens/s at cp 1 and cp 2, ratio")
    args = p.parse_args(argv)
    args.cpu_smoke = args.cpu_smoke or args.cpu_cp_ratio
    return args


def _config(args: argparse.Namespace) -> TrainConfig:
    from avsim.train.config import ParallelConfig, TrainConfig

    cfg = TrainConfig(
        model="debug" if args.cpu_smoke else args.model,
        train_mode=args.train_mode,
        parallel=ParallelConfig(
            cp=args.cp,
            activation_checkpointing=args.ac,
            attention=args.attention,
            compile=args.compile,
            cp_min_tokens=0,
        ),
    )
    return dataclasses.replace(cfg, optim=dataclasses.replace(cfg.optim, warmup_steps=1))


def _random_batch(s: Setup, batch: int, views: int, t_lat: int, h_lat: int, w_lat: int) -> dict[str, torch.Tensor]:
    """Random video / control latents (B, 16, V*T, h, w) and raw text (B, V*N, C)."""
    mc = s.model_cfg
    g = torch.Generator().manual_seed(0)
    shape = (batch, mc.dit.latent_channels, views * t_lat, h_lat, w_lat)
    text_shape = (batch, views * mc.dit.text_tokens_per_view, mc.dit.crossattn_proj_in_channels)
    return {
        "video": torch.randn(shape, generator=g).to(s.device),
        "control": torch.randn(shape, generator=g).to(s.device),
        "text": torch.randn(text_shape, generator=g).to(s.device, torch.bfloat16 if s.device.type == "cuda" else torch.float32),
    }


def _time_steps(s: Setup, cfg: TrainConfig, batch: dict[str, torch.Tensor], views: int, warmup: int, steps: int) -> list[float]:
    """Wall time of each timed step (after `warmup` untimed ones)."""
    from avsim.train.loop import train_step

    times = []
    for step in range(warmup + steps):
        if s.device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss, _ = train_step(s, cfg, batch, step, views)
        float(loss)  # waits for the step
        if s.device.type == "cuda":
            torch.cuda.synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def _report(s: Setup, args: argparse.Namespace, shape: tuple[int, int, int, int], flops: StepFlops, times: list[float]) -> None:
    from avsim.train.flops import peak_flops

    views, frames, height, width = shape
    dt = statistics.median(times)
    gpus = s.world_size
    global_batch = args.batch * s.dp_size
    step_flops = flops.training(args.train_mode) * global_batch
    name = torch.cuda.get_device_name() if s.device.type == "cuda" else platform.processor() or "cpu"
    peak = peak_flops(name) if s.device.type == "cuda" else None
    mem = torch.cuda.max_memory_allocated() / 2**30 if s.device.type == "cuda" else float("nan")
    rows = [
        ("device", f"{gpus} x {name}"),
        ("versions", f"torch {torch.__version__}, python {platform.python_version()}, "
                     f"cuda {torch.version.cuda}"),
        ("model / mode", f"{s.model_cfg.name} / {args.train_mode}"),
        ("shape", f"{views} views x {frames} frames x {height}x{width} -> {flops.tokens} tokens/sample"),
        ("parallel", f"cp {args.cp}, dp {s.dp_size}, AC {args.ac}, attention {args.attention}, "
                     f"compile {args.compile}, batch/rank {args.batch}"),
        (f"step time (median of {len(times)})", f"{dt:.3f} s"),
        ("tokens/s (all GPUs)", f"{flops.tokens * global_batch / dt:,.0f}"),
        ("model TFLOP per step", f"{step_flops / 1e12:,.1f}"),
        ("achieved TFLOP/s per GPU", f"{step_flops / dt / gpus / 1e12:,.1f}"),
        ("MFU", f"{100 * step_flops / dt / gpus / peak:.1f} % of {peak / 1e12:.0f} TFLOP/s" if peak else "n/a (unknown peak)"),
        ("peak memory per GPU", f"{mem:.1f} GiB"),
    ]
    width_col = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width_col}}  {v}")


def _measure(args: argparse.Namespace) -> tuple[Setup, tuple[int, int, int, int], StepFlops, list[float]]:
    """Set up the run of `args` (in this process group), time its steps.

    Returns:
        The setup, (views, frames, height, width), the FLOP count of one sample and the step times.
    """
    from avsim.train.flops import dit_flops
    from avsim.train.loop import setup

    cfg = _config(args)
    s = setup(cfg)
    mc = s.model_cfg
    gpu_shape = (720, 1280, 29) if not args.cpu_smoke else (mc.height_px, mc.width_px, mc.frames_per_chunk)
    height, width, frames = (given or default for given, default in zip((args.height, args.width, args.frames), gpu_shape))
    views = min(args.views, len(mc.cameras))
    t_lat, h_lat, w_lat = 1 + (frames - 1) // 4, height // 8, width // 8
    batch = _random_batch(s, args.batch, views, t_lat, h_lat, w_lat)
    times = _time_steps(s, cfg, batch, views, args.warmup, args.steps)
    return s, (views, frames, height, width), dit_flops(mc.dit, views, t_lat, h_lat, w_lat), times


def _cp_worker(args: argparse.Namespace, result: str) -> None:
    """One rank of a `--cpu-cp-ratio` run (under `launch_local`); rank 0 writes its figures to `result`."""
    s, shape, flops, times = _measure(args)
    if s.rank == 0:
        dt = statistics.median(times)
        Path(result).write_text(json.dumps({
            "cp": args.cp, "processes": s.world_size, "shape": shape, "tokens": flops.tokens, "step_s": dt,
            "tokens_per_s": flops.tokens * args.batch * s.dp_size / dt,
        }))


def _cpu_cp_ratio(args: argparse.Namespace) -> None:
    """Tokens/s of the debug model at cp 1 and cp 2 (1 and 2 gloo processes, 1 thread each) and the ratio."""
    from avsim.train.dist import launch_local

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for cp in (1, 2):
            result = Path(tmp) / f"cp{cp}.json"
            launch_local(_cp_worker, cp, argparse.Namespace(**{**vars(args), "cp": cp}), str(result))
            rows.append(json.loads(result.read_text()))
    views, frames, height, width = rows[0]["shape"]
    print(f"device    {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, 1 thread per process (gloo)")
    print(f"versions  torch {torch.__version__}, python {platform.python_version()}")
    print(f"shape     debug model, {views} views x {frames} frames x {height}x{width} -> {rows[0]['tokens']} tokens/sample, "
          f"{args.train_mode} training, AC {args.ac}, median of {args.steps} steps after {args.warmup}")
    for row in rows:
        print(f"cp {row['cp']}      {row['processes']} process(es): {row['step_s']:.3f} s/step, {row['tokens_per_s']:,.0f} tokens/s")
    print(f"ratio     tokens/s at cp 2 / cp 1 = {rows[1]['tokens_per_s'] / rows[0]['tokens_per_s']:.2f}")


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if not torch.cuda.is_available() and not args.cpu_smoke:
        print("bench/train_step.py needs a CUDA GPU (none found); nothing measured. "
              "Use --cpu-smoke to check the script itself on the CPU.")
        return 0
    if args.cpu_cp_ratio:
        _cpu_cp_ratio(args)
        return 0
    s, shape, flops, times = _measure(args)
    if s.rank == 0:
        _report(s, args, shape, flops, times)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    sys.exit(main())
