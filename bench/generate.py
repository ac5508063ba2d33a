"""Benchmark multi-view generation: seconds per sampling step and peak memory.

With a GPU: the full 2B multi-view network and the real-size Wan2.1 VAE (random weights, bf16),
7 views x 29 frames at 720p by default, one GPU. Without one: the `debug` config on the CPU.

    python bench/generate.py                 # auto: GPU full size, else CPU debug
    python bench/generate.py --config debug  # force the tiny config
    python bench/generate.py --steps 3 --views 7 --frames 29

Random weights give the same cost as the released ones (timings only; the output is noise).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import time
from typing import Any, TypeVar

import torch
from torch import nn

from avsim.models.config import get_config
from avsim.models.control import TransferDiT
from avsim.models.defaults import GENERATION
from avsim.models.pipeline import SamplingOptions, TransferPipeline
from avsim.models.vae import WanVAE

ModelT = TypeVar("ModelT", bound=nn.Module)


def _random_model(cls: type[ModelT], cfg: Any, device: torch.device, dtype: torch.dtype) -> ModelT:
    """Build on the meta device and fill with random values in place (no 2.4B-float32 CPU copy)."""
    with torch.device("meta"):
        model = cls(cfg)
    model = model.to_empty(device=device).to(dtype)
    g = torch.Generator(device=device).manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02, generator=g)
    return model.eval()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=None, help="default: transfer25_2b_multiview on GPU, debug on CPU")
    parser.add_argument("--views", type=int, default=7)
    parser.add_argument("--frames", type=int, default=None, help="pixel frames per view (default: the config's chunk)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--guidance", type=float, default=GENERATION.guidance)
    parser.add_argument("--offload", action="store_true", help="keep the VAE on the CPU between uses")
    return parser.parse_args()


def _print_rows(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def _step_line(step_times: list[float]) -> str:
    if not step_times:
        return "n/a"
    return f"{sum(step_times[1:]) / max(1, len(step_times) - 1):.3f} s (first {step_times[0]:.3f} s)"


def main() -> None:
    args = _args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg = get_config(args.config or ("transfer25_2b_multiview" if device.type == "cuda" else "debug"))
    if args.frames:
        cfg = dataclasses.replace(cfg, frames_per_chunk=args.frames)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.set_grad_enabled(False)

    t0 = time.perf_counter()
    dit = _random_model(TransferDiT, cfg.dit, device, dtype)
    vae = _random_model(WanVAE, cfg.vae, torch.device("cpu") if args.offload else device, dtype)
    build_s = time.perf_counter() - t0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    step_times: list[float] = []

    # time the DiT calls by wrapping the sampler's velocity through the log hook
    def log(msg: str) -> None:
        if msg.strip().startswith("step"):
            step_times.append(float(msg.rsplit("(", 1)[1].split(" ")[0]))

    pipe = TransferPipeline(cfg, dit, vae, device, offload_vae=args.offload, log=log)
    g = torch.Generator().manual_seed(0)
    control = [torch.randint(0, 256, (cfg.frames_per_chunk, 3, cfg.height_px, cfg.width_px), generator=g, dtype=torch.uint8)
               for _ in range(args.views)]
    ctx = torch.randn(args.views * cfg.dit.text_tokens_per_view, cfg.dit.crossattn_emb_channels, generator=g)
    opts = SamplingOptions(steps=args.steps, guidance=args.guidance, seed=0)

    _sync(device)
    t1 = time.perf_counter()
    pipe.encode_views(control)
    _sync(device)
    encode_s = time.perf_counter() - t1
    out = pipe.generate(control, ctx, ctx.clone() if args.guidance else None, torch.arange(args.views), opts)
    _sync(device)
    total_s = time.perf_counter() - t1
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else float("nan")

    tokens = args.views * cfg.latent_frames_per_chunk * (cfg.height_px // 16) * (cfg.width_px // 16)
    _print_rows([
        ("machine", f"{platform.machine()} {os.cpu_count()} CPUs" + (f", {torch.cuda.get_device_name()}" if device.type == "cuda" else "")),
        ("versions", f"python {platform.python_version()}, torch {torch.__version__}"),
        ("config", f"{cfg.name}: {args.views} views x {cfg.frames_per_chunk} frames at {cfg.width_px}x{cfg.height_px}, {dtype}"),
        ("tokens", f"{tokens:,}"),
        ("build (random init)", f"{build_s:.2f} s"),
        ("VAE encode, all views", f"{encode_s:.2f} s"),
        ("DiT seconds / step" + (" (cond+uncond)" if args.guidance else ""), _step_line(step_times)),
        ("total (encode+sample+decode)", f"{total_s:.2f} s for {args.steps} steps"),
        ("peak GPU memory", f"{peak:.1f} GiB" if device.type == "cuda" else "n/a (CPU)"),
        ("output", f"{len(out)} views x {tuple(out[0].shape)}"),
    ])


if __name__ == "__main__":
    main()
