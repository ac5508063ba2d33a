"""The checks behind `bench/gpu_check.py`: each yields table rows (see that script for targets).

A check is a generator of :class:`Row`; it builds what its rows share (a renderer, a model)
once, and wraps each measurement in :meth:`Context.attempt`, so one failing row is reported
as FAIL with its one-line error while the check's other rows still run. Every figure comes
from the library's own code paths (the scene renderer and both raster backends, the
TransferPipeline, `avsim.train` setup / train_step / FSDP2 / Ulysses) or from the sibling
benchmark scripts (bench/render.py, bench/generate.py, bench/train_step.py).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import gc
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

GIB = 2**30
H100_GIB = 80.0  # generation and the VAE must fit an H100 80 GB, the smaller of the two targets
PARITY_MAX = 1e-2  # bf16 vs fp32 relative error (measured 4e-3 on the CPU at the reduced size)
FLASH_MAX = 1e-2  # flash-attn vs SDPA output, both bf16
RENDER_MAX_FRACTION = 1e-3  # pixels allowed to differ: tests/test_render_raster.py's tolerance
DIST_OUT_MAX, DIST_GRAD_MAX = 1e-5, 1e-4  # FSDP2 + CP (world 1, fp32) vs one plain process
MFU_FLOOR, MFU_GOAL = 0.25, 0.40
RECOMPUTE = 1.35  # full activation checkpointing: hardware FLOPs / model FLOPs, for time estimates
FULL_MODEL = "transfer25_2b_multiview"

TARGETS: dict[str, tuple[str, str]] = {  # row -> (target on a GPU, target of --dry)
    "render.torch": ("torch CUDA camera-frames/s >= numba CPU rate (same run)", "runs (dry: no speed target)"),
    "render.equal": (f"< {RENDER_MAX_FRACTION:.1%} of pixels differ, frames not blank",) * 2,
    "parity.dit_forward": (f"relative error < {PARITY_MAX:g}",) * 2,
    "parity.sampler_step": (f"relative error < {PARITY_MAX:g}",) * 2,
    "dist.fsdp2_cp": (f"output diff < {DIST_OUT_MAX:g}, gradients < {DIST_GRAD_MAX:g} (relative)",) * 2,
    "gen.vae_encode": (f"peak < {H100_GIB:g} GiB (fits an H100 80 GB)", "runs"),
    "gen.vae_decode": (f"peak < {H100_GIB:g} GiB (fits an H100 80 GB)", "runs"),
    "gen.dit_sdpa": (f"peak < {H100_GIB:g} GiB (fits an H100 80 GB)", "runs"),
    "gen.dit_flash": (f"peak < {H100_GIB:g} GiB, output within {FLASH_MAX:g} of SDPA", "CUDA only"),
    "train.step": (f"MFU >= {MFU_FLOOR:.0%} (floor; goal {MFU_GOAL:.0%}), peak < GPU memory", "runs (dry: no MFU)"),
    "sim.closed_loop_chunk": (f"peak < {H100_GIB:g} GiB (fits an H100 80 GB)", "runs"),
}
CLOSED_LOOP_STEPS = 1  # sampling steps of the measured closed-loop chunk on a GPU (the figure projects the config's)


@dataclass
class Row:
    """One line of the table: status is PASS, FAIL or SKIP; `note` says why (FAIL / SKIP)."""

    name: str
    figure: str
    target: str
    status: str
    note: str = ""
    seconds: float = 0.0


@dataclass
class Context:
    """What every check reads: the mode, the budget and the figures earlier checks left."""

    dry: bool
    budget_s: float
    force_fail: frozenset[str] = frozenset()
    force_error: frozenset[str] = frozenset()
    train_frames: int = 29
    render_frames: int = 30
    started: float = field(default_factory=time.perf_counter)
    shared: dict[str, float] = field(default_factory=dict)

    @property
    def device(self) -> torch.device:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def left(self) -> float:
        """Seconds of the global budget still unspent."""
        return self.budget_s - (time.perf_counter() - self.started)

    def target(self, name: str) -> str:
        return TARGETS[name][1 if self.dry else 0]

    def judge(self, name: str, figure: str, ok: bool, note: str = "") -> Row:
        """PASS or FAIL against the row's target; `--force-fail NAME` makes the target impossible."""
        if name in self.force_fail:
            return Row(name, figure, self.target(name) + " [made impossible]", "FAIL", "forced by --force-fail")
        return Row(name, figure, self.target(name), "PASS" if ok else "FAIL", note if not ok else "")

    def skip(self, name: str, reason: str) -> Row:
        return Row(name, "-", self.target(name), "SKIP", reason)

    def fail(self, name: str, error: BaseException) -> Row:
        return Row(name, "-", self.target(name), "FAIL", one_line(error))

    def attempt(self, name: str, measure: Callable[[], Row]) -> Row:
        """Run one row's measurement; an exception (OOM included) becomes a FAIL row."""
        try:
            if name in self.force_error:
                raise RuntimeError("forced error (--force-error)")
            return measure()
        except Exception as exc:  # every row must report, whatever broke
            row = self.fail(name, exc)
        free_memory()
        return row

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()

    def peak(self) -> str:
        return f"peak {torch.cuda.max_memory_allocated() / GIB:.1f} GiB" if self.cuda else "peak n/a (CPU)"

    def fits(self, limit_gib: float) -> bool:
        return not self.cuda or torch.cuda.max_memory_allocated() / GIB < limit_gib


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}".rstrip(": ")


def free_memory() -> None:
    """Give the GPU back what the last row held (a no-op on the CPU, where it only costs time)."""
    if torch.cuda.is_available():
        gc.collect()
        torch.cuda.empty_cache()


def rel_error(got: Tensor, ref: Tensor) -> float:
    """||got - ref|| / ||ref|| in float64."""
    ref64 = ref.detach().double()
    return float((got.detach().double() - ref64).norm() / ref64.norm().clamp_min(1e-30))


def _timed(ctx: Context, fn: Callable[[], Any]) -> tuple[Any, float]:
    ctx.sync()
    t0 = time.perf_counter()
    out = fn()
    ctx.sync()
    return out, time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------
# render: torch backend (CUDA) vs numba (CPU), speed and pixels


def check_render(ctx: Context) -> Iterator[Row]:
    """The sample's 7 cameras at 1280x720 (dry: 320x180, 2 frames), both backends, same frames."""
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.render.raster.draw import rasterize_torch
    from bench.render import load_case

    size, n = ((320, 180), 2) if ctx.dry else ((1280, 720), ctx.render_frames)
    renderer = SceneRenderer(load_case("sample", 2.0 if ctx.dry else 4.0), size=size)
    cams = range(len(renderer.rig))
    rays = [renderer.rays(i) for i in cams]
    dev = str(ctx.device)
    for i in cams:  # numba kernels from the disk cache (compiled on a machine's first run)
        renderer.render_camera(0, i)
    rasterize_torch(renderer.primitives(0), rays, device=dev, antialias=renderer.antialias)  # CUDA context and kernels
    step = max(1, (renderer.n_frames - 1) // n)
    frames = [1 + i * step for i in range(n)]
    ref, numba_s = _timed(ctx, lambda: np.stack([renderer.render_camera(f, i) for f in frames for i in cams]))
    geometry_s, parts = 0.0, []
    t0 = time.perf_counter()
    for f in frames:
        g0 = time.perf_counter()
        prims = renderer.primitives(f)
        geometry_s += time.perf_counter() - g0
        parts.append(rasterize_torch(prims, rays, device=dev, antialias=renderer.antialias))
    torch_s = time.perf_counter() - t0
    got = np.concatenate(parts)
    count = len(frames) * len(cams)
    rate, numba_rate = count / torch_s, count / numba_s
    figure = (f"{rate:.1f} camera-frames/s, torch on {dev} ({100 * geometry_s / torch_s:.0f} % CPU geometry); "
              f"numba CPU {numba_rate:.1f}; {len(cams)} cameras x {len(frames)} frames at {size[0]}x{size[1]}")  # fmt: skip
    yield ctx.judge("render.torch", figure, ctx.dry or rate >= numba_rate, "torch slower than numba")
    differs = (ref != got).any(axis=-1)
    lit = float(ref.any(axis=-1).mean())
    max_diff = int(np.abs(ref.astype(np.int16) - got.astype(np.int16)).max())
    figure = f"{differs.mean():.4%} of pixels differ ({int(differs.sum())}), max abs diff {max_diff}; {lit:.0%} lit"
    yield ctx.judge("render.equal", figure, differs.mean() < RENDER_MAX_FRACTION and lit > 0.01)


# ---------------------------------------------------------------------------------------------
# bf16 vs fp32 parity on a reduced network


def _reduced_config(ctx: Context) -> Any:
    """The 2B config's widths with 4 blocks and 2 control blocks (dry: the debug config)."""
    from avsim.models.config import debug, transfer25_2b_multiview

    if ctx.dry:
        return debug()
    full = transfer25_2b_multiview()
    return dataclasses.replace(full, dit=dataclasses.replace(full.dit, num_blocks=4, control_block_ids=(0, 2)))


def check_parity(ctx: Context) -> Iterator[Row]:
    """The DiT forward and one guided UniPC step (TransferPipeline), bf16 against fp32."""
    from avsim.models.config import debug
    from avsim.models.pipeline import SamplingOptions, TransferPipeline, build_dit, build_vae

    torch.backends.cuda.matmul.allow_tf32 = False  # the reference is true fp32
    cfg, dev = _reduced_config(ctx), ctx.device
    views, t, h, w = (2, 2, 8, 14) if ctx.dry else (2, 3, 16, 24)
    dit32 = build_dit(cfg, None, dev, torch.float32, seed=0)
    dit16 = copy.deepcopy(dit32).to(torch.bfloat16)
    g = torch.Generator().manual_seed(0)
    x, ctrl = (torch.randn(1, 16, views * t, h, w, generator=g) for _ in range(2))
    text, negative = (torch.randn(views * cfg.dit.text_tokens_per_view, cfg.dit.crossattn_proj_in_channels, generator=g)
                      for _ in range(2))  # fmt: skip
    d = cfg.dit
    size = f"{d.model_channels} wide, {d.num_blocks}+{d.num_control_blocks} blocks, {views * t * h * w // 4} tokens"

    def forward() -> Row:
        outs = []
        with torch.no_grad():
            for model, dtype in ((dit32, torch.float32), (dit16, torch.bfloat16)):
                outs.append(model(x.to(dev, dtype), torch.tensor([500.0], device=dev), text[None].to(dev, dtype),
                                  num_views=views, control_latent=ctrl.to(dev, dtype)).float())  # fmt: skip
        err = rel_error(outs[1], outs[0])
        return ctx.judge("parity.dit_forward", f"relative error {err:.1e} ({size})", err < PARITY_MAX)

    def sampler_step() -> Row:
        vae = build_vae(debug(), None, dev, torch.float32)  # unused by sample_latents
        opts = SamplingOptions(steps=1, seed=0)
        outs = []
        for model in (dit32, dit16):
            pipe = TransferPipeline(cfg, model, vae, dev)
            outs.append(pipe.sample_latents(ctrl, pipe.project_context(text), pipe.project_context(negative), None, 0,
                                            views, torch.arange(views), opts, seed=0))  # fmt: skip
        err = rel_error(outs[1], outs[0])
        figure = f"relative error {err:.1e} ({opts.sampler}, guidance {opts.guidance:g}, {size})"
        return ctx.judge("parity.sampler_step", figure, err < PARITY_MAX)

    yield ctx.attempt("parity.dit_forward", forward)
    yield ctx.attempt("parity.sampler_step", sampler_step)


# ---------------------------------------------------------------------------------------------
# FSDP2 + Ulysses CP on a process group of one (NCCL on a GPU, gloo on the CPU)


@contextlib.contextmanager
def _world_of_one(backend: str | None) -> Iterator[Any]:
    """A default process group of one process, destroyed (and its port forgotten) afterwards."""
    import torch.distributed as dist

    from avsim.train.dist import init_distributed

    had_port = "MASTER_PORT" in os.environ
    try:
        yield init_distributed(backend=backend)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        if not had_port:
            os.environ.pop("MASTER_PORT", None)


def _forced_cp(group: Any) -> Any:
    """A ContextParallel that splits even at world size 1, so the all-to-all path really runs."""
    from avsim.train.ulysses import ContextParallel, SequenceSplit, plan_sequence_split

    class WorldOfOne(ContextParallel):
        def plan(self, num_views: int, frames: int, tokens_per_frame: int) -> SequenceSplit | None:
            return plan_sequence_split(num_views, frames, tokens_per_frame, self.size)

    return WorldOfOne(group)


def _grad_error(ref: torch.nn.Module, par: torch.nn.Module) -> float:
    """Largest relative gradient difference over the parameters (FSDP2 DTensors gathered)."""
    got = dict(par.named_parameters())
    worst = 0.0
    for name, p in ref.named_parameters():
        q = got[name].grad
        if (p.grad is None) != (q is None):
            raise RuntimeError(f"{name}: gradient present in only one of the two models")
        if p.grad is not None and q is not None and p.grad.abs().sum() > 0:
            worst = max(worst, rel_error(q.full_tensor() if hasattr(q, "full_tensor") else q, p.grad))
    return worst


def check_dist(ctx: Context) -> Iterator[Row]:
    """The debug TransferDiT under FSDP2 + forced Ulysses CP + full AC vs a plain copy, fp32."""
    from avsim.models.attention import SDPABackend
    from avsim.models.config import debug
    from avsim.models.pipeline import build_dit
    from avsim.train.dist import build_meshes
    from avsim.train.parallelize import apply_activation_checkpointing, apply_context_parallel, apply_fsdp, iter_blocks

    cfg = debug()
    views, t, h, w = 2, 4, 4, 6
    g = torch.Generator().manual_seed(1)
    x, ctrl = (torch.randn(1, 16, views * t, h, w, generator=g) for _ in range(2))
    text = torch.randn(1, views * cfg.dit.text_tokens_per_view, cfg.dit.crossattn_proj_in_channels, generator=g)
    with _world_of_one(None if ctx.cuda else "gloo") as world:
        import torch.distributed as dist

        dev = world.device
        meshes = build_meshes(dev.type, 1, 1)
        ref, par = (build_dit(cfg, None, dev, torch.float32, seed=0) for _ in range(2))
        cp = _forced_cp(meshes.cp_group)
        apply_context_parallel(par, cp, SDPABackend())
        for block in iter_blocks(par):
            apply_activation_checkpointing(block, "full")
        apply_fsdp(par, meshes, torch.float32, reshard_after_forward=True)
        outs = []
        for model in (ref, par):
            model.train()
            out = model(x.to(dev), torch.tensor([700.0], device=dev), text.to(dev), num_views=views, control_latent=ctrl.to(dev))
            (out * torch.linspace(-1, 1, out.numel(), device=dev).view_as(out)).sum().backward()
            outs.append(out.detach())
        if not cp.active or outs[1].device != dev:
            raise RuntimeError(f"the CP split did not run (active={cp.active}) or the output left {dev}")
        grad_err = _grad_error(ref, par)
        out_err = rel_error(outs[1], outs[0])
        backend = dist.get_backend()
    figure = f"{backend} on {dev}, world 1, FSDP2 + Ulysses CP + full AC: output {out_err:.1e}, gradients {grad_err:.1e}"
    yield ctx.judge("dist.fsdp2_cp", figure, out_err < DIST_OUT_MAX and grad_err < DIST_GRAD_MAX)


# ---------------------------------------------------------------------------------------------
# generation at the real size: the Wan2.1 VAE per view, the DiT forward with SDPA / flash-attn


def _vae_rows(ctx: Context, cfg: Any, vae: Any) -> Iterator[Row]:
    from avsim.models.video_io import to_model_range, to_uint8

    f, hgt, wid = cfg.frames_per_chunk, cfg.height_px, cfg.width_px
    view = torch.randint(0, 256, (f, 3, hgt, wid), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    vae.decode(vae.encode(to_model_range(view[:1, :, :64, :64]).to(ctx.device)))  # warm-up at a tiny size
    where = f"one view, {f} frames at {wid}x{hgt}, {vae.dtype}"
    latent: list[Tensor] = []

    def encode() -> Row:
        ctx.reset_peak()
        z, s = _timed(ctx, lambda: vae.encode(to_model_range(view).to(ctx.device)))
        latent.append(z)
        return ctx.judge("gen.vae_encode", f"{s:.2f} s per view, {ctx.peak()} ({where})", ctx.fits(H100_GIB))

    def decode() -> Row:
        ctx.reset_peak()
        z = latent[0] if latent else torch.randn(1, 16, cfg.latent_frames_per_chunk, hgt // 8, wid // 8, device=ctx.device)
        _, s = _timed(ctx, lambda: to_uint8(vae.decode(z).cpu()))
        return ctx.judge("gen.vae_decode", f"{s:.2f} s per view, {ctx.peak()} ({where})", ctx.fits(H100_GIB))

    yield ctx.attempt("gen.vae_encode", encode)
    yield ctx.attempt("gen.vae_decode", decode)


def _forward_flops(cfg: Any, views: int) -> float:
    """Model FLOPs of one DiT forward with projected text (avsim.train.flops)."""
    from avsim.train.flops import dit_flops

    f = dit_flops(cfg.dit, views, cfg.latent_frames_per_chunk, cfg.height_px // 8, cfg.width_px // 8)
    return f.base_forward + f.control_forward - f.terms["base_text_proj"].forward


def _dit_step(ctx: Context, pipe: Any, cfg: Any, views: int) -> Callable[[int], Tensor]:
    """One DiT forward through TransferPipeline.sample_latents (1 step, no CFG) on `n` views."""
    from avsim.models.pipeline import SamplingOptions

    g = torch.Generator().manual_seed(0)
    shape = (1, 16, views * cfg.latent_frames_per_chunk, cfg.height_px // 8, cfg.width_px // 8)
    control = torch.randn(shape, generator=g)
    text = torch.randn(views * cfg.dit.text_tokens_per_view, cfg.dit.crossattn_emb_channels, generator=g)
    context = pipe.project_context(text)
    opts = SamplingOptions(steps=1, guidance=0.0, seed=0)
    n_text = cfg.dit.text_tokens_per_view

    def run(n: int) -> Tensor:
        if n == views:
            return pipe.sample_latents(control, context, None, None, 0, n, torch.arange(n), opts, seed=0)
        small = control[:, :, :1]  # one view, one latent frame: warms kernels up cheaply
        return pipe.sample_latents(small, context[:, :n_text], None, None, 0, 1, torch.arange(1), opts, seed=0)

    return run


def _rate(flop_per_s: float) -> str:
    return f"{flop_per_s / 1e12:.1f} TFLOP/s" if flop_per_s >= 1e11 else f"{flop_per_s / 1e9:.2f} GFLOP/s"


def _dit_rows(ctx: Context, cfg: Any, pipe: Any) -> Iterator[Row]:
    from avsim.models.attention import FlashAttnBackend, SDPABackend, set_attention_backend

    views = len(cfg.cameras)
    run = _dit_step(ctx, pipe, cfg, views)
    flops = _forward_flops(cfg, views)
    tokens = views * cfg.latent_frames_per_chunk * (cfg.height_px // 16) * (cfg.width_px // 16)
    where = f"{views} views x {cfg.frames_per_chunk} frames at {cfg.width_px}x{cfg.height_px}, {tokens:,} tokens"
    sdpa: list[Tensor] = []

    def measure(name: str, backend: Any) -> Row:
        set_attention_backend(pipe.dit, backend, self_attention_only=False)
        run(1)
        ctx.reset_peak()
        out, s = _timed(ctx, lambda: run(views))
        ctx.shared.setdefault("forward_flop_per_s", flops / s)
        extra, ok = "", ctx.fits(H100_GIB)
        if name == "gen.dit_flash" and sdpa:
            err = rel_error(out, sdpa[0])
            extra, ok = f", {err:.1e} from SDPA", ok and err < FLASH_MAX
        else:
            sdpa.append(out)
        figure = (f"{s:.2f} s per forward ({2 * s:.2f} s per CFG step), {_rate(flops / s)}, "
                  f"{ctx.peak()}{extra} ({where})")  # fmt: skip
        return ctx.judge(name, figure, ok)

    yield ctx.attempt("gen.dit_sdpa", lambda: measure("gen.dit_sdpa", SDPABackend()))
    flash = FlashAttnBackend()
    if not ctx.cuda:
        yield ctx.skip("gen.dit_flash", "flash-attn runs on CUDA only (dry run on the CPU)")
    elif not flash.available:
        yield ctx.skip("gen.dit_flash", "flash-attn not installed (pip install -e '.[flash]')")
    else:
        yield ctx.attempt("gen.dit_flash", lambda: measure("gen.dit_flash", flash))
    set_attention_backend(pipe.dit, SDPABackend(), self_attention_only=False)


def check_generate(ctx: Context) -> Iterator[Row]:
    """The 2B TransferDiT and the Wan2.1 VAE, random weights, bf16 (dry: debug config, fp32)."""
    from avsim.models.config import get_config
    from avsim.models.control import TransferDiT
    from avsim.models.pipeline import TransferPipeline, default_dtype
    from avsim.models.vae import WanVAE
    from bench.generate import _random_model

    cfg = get_config("debug" if ctx.dry else FULL_MODEL)
    dtype = default_dtype(ctx.device)
    vae = _random_model(WanVAE, cfg.vae, ctx.device, dtype)
    yield from _vae_rows(ctx, cfg, vae)
    dit = _random_model(TransferDiT, cfg.dit, ctx.device, dtype)
    yield from _dit_rows(ctx, cfg, TransferPipeline(cfg, dit, vae, ctx.device))


# ---------------------------------------------------------------------------------------------
# one training step of the 2B config: control branch trained, base frozen, full AC


def train_seconds(ctx: Context) -> tuple[float, float]:
    """(set-up seconds, seconds per step) expected, from the forward rate `check_generate` saw."""
    if ctx.dry:
        return 5.0, 5.0
    from avsim.models.config import get_config
    from avsim.train.flops import dit_flops

    cfg = get_config(FULL_MODEL)
    t_lat = 1 + (ctx.train_frames - 1) // 4
    flops = dit_flops(cfg.dit, len(cfg.cameras), t_lat, 90, 160).training("control")
    return 45.0, flops * RECOMPUTE / ctx.shared.get("forward_flop_per_s", 400e12)


def _train_verdict(ctx: Context, mfu: float | None, fits: bool) -> tuple[bool, str]:
    if ctx.dry:
        return True, ""
    if mfu is None:
        return False, "unknown GPU peak FLOP/s: set AVSIM_PEAK_TFLOPS"
    problems = ([f"MFU below the {MFU_FLOOR:.0%} floor"] if mfu < MFU_FLOOR else []) + ([] if fits else ["peak over GPU memory"])
    return not problems, "; ".join(problems)


def check_train(ctx: Context) -> Iterator[Row]:
    """bench/train_step.py's set-up and timed steps (FSDP2 on one GPU), figures by avsim.train.flops."""
    from avsim.train.flops import dit_flops, peak_flops
    from avsim.train.loop import setup
    from bench.train_step import _config, _random_batch, _time_steps

    args = argparse.Namespace(model=FULL_MODEL, train_mode="control", cp=1, ac="full", attention="sdpa",
                              compile=False, cpu_smoke=ctx.dry)  # fmt: skip
    cfg = _config(args)
    setup_s, step_s = train_seconds(ctx)
    steps = 2 if ctx.left() > setup_s + 2.2 * step_s else 1
    with _world_of_one(None) if ctx.cuda else contextlib.nullcontext():
        s = setup(cfg)  # on CUDA: FSDP2 over the process group of one, bf16 parameters
        mc = s.model_cfg
        frames, height, width = (mc.frames_per_chunk, mc.height_px, mc.width_px) if ctx.dry else (ctx.train_frames, 720, 1280)
        views, t_lat, h_lat, w_lat = len(mc.cameras), 1 + (frames - 1) // 4, height // 8, width // 8
        batch = _random_batch(s, 1, views, t_lat, h_lat, w_lat)
        ctx.reset_peak()
        times = _time_steps(s, cfg, batch, views, 0, steps)
        peak = ctx.peak()
        fits = not ctx.cuda or torch.cuda.max_memory_allocated() < torch.cuda.get_device_properties(0).total_memory
        peak_flop_s = peak_flops(torch.cuda.get_device_name()) if ctx.cuda else None
        del s, batch
    flops = dit_flops(mc.dit, views, t_lat, h_lat, w_lat)
    dt = times[-1]
    mfu = flops.training("control") / dt / peak_flop_s if peak_flop_s else None
    mfu_text = f"MFU {mfu:.1%} of {peak_flop_s / 1e12:.0f} TFLOP/s" if mfu is not None and peak_flop_s else "MFU n/a"
    which = "second step" if steps > 1 else "first step, one-off costs included"
    figure = (f"{dt:.2f} s/step ({which}), {flops.tokens / dt:,.0f} tokens/s, {mfu_text}, {peak} "
              f"({views} views x {frames} frames at {width}x{height}, {flops.tokens:,} tokens, control, full AC)")  # fmt: skip
    ok, note = _train_verdict(ctx, mfu, fits)
    yield ctx.judge("train.step", figure, ok, note)


# ---------------------------------------------------------------------------------------------
# one closed-loop chunk: the generated world of `avsim sim --observe generated`


def check_closed_loop(ctx: Context) -> Iterator[Row]:
    """bench/closed_loop.py's chunk budget: one chunk of 7 views at 720p, 2B config, random weights (dry: 2 views, debug)."""
    from avsim.models.config import get_config
    from bench.closed_loop import VIEWS7, chunk_budget

    def measure() -> Row:
        ctx.reset_peak()
        name, views = ("debug", VIEWS7[:2]) if ctx.dry else (FULL_MODEL, VIEWS7)
        steps = None if ctx.dry else CLOSED_LOOP_STEPS
        b = chunk_budget(name, views, str(ctx.device), steps, chunks=1, policy="constant-velocity")
        full = get_config(name).default_steps
        done = steps or full
        projected = b["chunk_s"] + b["sampling_s"] * (full / done - 1)
        figure = (f"{b['chunk_s']:.1f} s per chunk at {done} sampling step(s): render {b['render_s']:.1f}, VAE encode {b['vae_encode_s']:.1f}, "
                  f"sampling {b['sampling_s']:.1f}, VAE decode {b['vae_decode_s']:.1f}, drift {b['drift_s']:.1f} s; {projected:.0f} s at {full} steps; "
                  f"{ctx.peak()} ({len(views)} views x {b['frames']} frames at {b['size'][0]}x{b['size'][1]}, load {b['load_s']:.0f} s)")  # fmt: skip
        return ctx.judge("sim.closed_loop_chunk", figure, ctx.fits(H100_GIB))

    yield ctx.attempt("sim.closed_loop_chunk", measure)


# ---------------------------------------------------------------------------------------------
# the list the script runs, in order


@dataclass(frozen=True)
class Check:
    """A group of rows sharing one set-up; `need_s` is the budget it must find left to start."""

    name: str
    rows: tuple[str, ...]
    run: Callable[[Context], Iterator[Row]]
    need_s: Callable[[Context], float]


def _need(full: float, dry: float = 1.0) -> Callable[[Context], float]:
    return lambda ctx: dry if ctx.dry else full


CHECKS: tuple[Check, ...] = (
    Check("render", ("render.torch", "render.equal"), check_render, _need(45)),
    Check("parity", ("parity.dit_forward", "parity.sampler_step"), check_parity, _need(45)),
    Check("dist", ("dist.fsdp2_cp",), check_dist, _need(25)),
    Check("generate", ("gen.vae_encode", "gen.vae_decode", "gen.dit_sdpa", "gen.dit_flash"), check_generate, _need(120)),
    Check("train", ("train.step",), check_train, lambda ctx: sum(train_seconds(ctx))),
    Check("closed_loop", ("sim.closed_loop_chunk",), check_closed_loop, _need(240, 2.0)),
)
