"""Proof on one GPU, in one run of a few minutes: prints one table of figures against targets.

    python bench/gpu_check.py --out DIR      # on a CUDA GPU (H100 / H200); about 6-8 minutes
    python bench/gpu_check.py --dry          # the same code paths on the CPU, debug configs (~20 s)

Rows (target on a GPU; every figure comes from the library's own code paths):

  render.torch        torch raster backend on CUDA, camera-frames/s over the sample's 7 cameras
                      at 1280x720 (geometry on the CPU included), against numba's CPU rate
                      measured in the same run: torch CUDA >= numba CPU.
  render.equal        the same frames from both backends: fewer than 0.1 % of the pixels differ
                      (the tolerance of tests/test_render_raster.py: floating-point ties), and the
                      frames are not blank.
  parity.dit_forward  bf16 vs fp32 DiT + control branch forward at a reduced size (the 2B widths,
                      4 blocks, 2 control blocks, 576 tokens): relative error < 1e-2.
  parity.sampler_step one guided UniPC step through TransferPipeline.sample_latents, bf16 vs
                      fp32, same network: relative error < 1e-2.
  dist.fsdp2_cp       a process group of one (NCCL): the debug TransferDiT under FSDP2, Ulysses
                      CP (its all-to-alls forced on at world size 1) and full activation
                      checkpointing against a plain copy, fp32: output < 1e-5, gradients < 1e-4.
  gen.vae_encode /    the Wan2.1 VAE at the real config, random weights, bf16: one view of 29
  gen.vae_decode      frames at 1280x720, seconds and peak memory: peak < 80 GiB (an H100 fits).
  gen.dit_sdpa        the 2B multi-view TransferDiT, random weights, bf16: one forward of 7 views
                      x 29 frames at 720p (201,600 tokens) through the pipeline, seconds, TFLOP/s
                      (avsim.train.flops) and peak memory: peak < 80 GiB.
  gen.dit_flash       the same with flash-attn (SKIP when it is not installed), and its output
                      within 1e-2 of SDPA's.
  train.step          bench/train_step.py's step of the 2B config, control branch trained, base
                      frozen, full activation checkpointing, FSDP2 on one GPU: s/step, tokens/s,
                      MFU by avsim.train.flops (dense bf16 peak from its table) and peak memory:
                      MFU >= 25 % (a floor; the design goal is 40 %) and it fits the GPU.
  sim.closed_loop_chunk one chunk of `avsim sim --observe generated` (bench/closed_loop.py): the
                      2B config, random weights, bf16, 7 views x 29 frames at 720p, from the
                      forecast and control render to the drift figures, with 1 sampling step
                      (the figure projects the config's 35 from it), seconds per part and peak
                      memory: peak < 80 GiB. It comes last: `--only closed_loop` runs it alone.

Each row is PASS, FAIL or SKIP with a reason. A row that raises (an OOM too) is FAIL with its
one-line error and the rest still run; the exit status is 1 when any row failed. `--budget-s`
is the time the checks may start within (a check that would not fit is SKIP); past
`--hard-limit-s` the table so far is printed and the script exits 3. `--out DIR` writes the
table as gpu_check.md and gpu_check.json after every check (default: stdout only). `--dry`
hides CUDA and runs the same checks with the debug configs at tiny sizes on the CPU, with
no speed or memory targets (tests/test_gpu_check.py runs it); `--force-fail ROW` makes one
row's target impossible and `--force-error NAME` makes a whole check, or one of the rows
measured on their own (parity.*, gen.*), raise, to test the report. Budgets are per check:
a running CUDA kernel cannot be interrupted, so the hard limit is the backstop.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # `bench.*` (the sibling benchmark scripts) when run as a file

if TYPE_CHECKING:
    from bench.gpu_check_rows import Check, Context, Row


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry", action="store_true", help="CPU only, debug configs, tiny sizes (no speed targets)")
    p.add_argument("--out", type=Path, default=None, help="folder for gpu_check.md / gpu_check.json")
    p.add_argument("--budget-s", type=float, default=None, help="start no check past this (default 480; dry 300)")
    p.add_argument("--hard-limit-s", type=float, default=None, help="print what is done and exit 3 (default budget + 75)")
    p.add_argument("--only", default="", help="comma-separated check names (render,parity,dist,generate,train,closed_loop)")
    p.add_argument("--train-frames", type=int, default=29, help="pixel frames per view of the training step (1 + 4k)")
    p.add_argument("--render-frames", type=int, default=30, help="frames (x 7 cameras) per render backend")
    p.add_argument("--force-fail", default="", help="comma-separated rows whose target is made impossible")
    p.add_argument("--force-error", default="", help="comma-separated rows or checks that raise")
    return p.parse_args(argv)


def _names(text: str) -> frozenset[str]:
    return frozenset(n.strip() for n in text.split(",") if n.strip())


def environment(dry: bool) -> dict[str, str]:
    """Date, mode, machine and versions: the table's header."""
    import numpy
    import torch

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    gpu = "none"
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        gpu = f"{torch.cuda.device_count()} x {p.name} ({p.total_memory / 2**30:.1f} GiB, sm_{p.major}{p.minor})"
    cuda = "CUDA n/a"
    if torch.cuda.is_available():
        nccl = torch.cuda.nccl.version()
        nccl_text = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
        cuda = f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, NCCL {nccl_text}"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "dry (CPU, CUDA hidden, debug configs, tiny sizes)" if dry else "full",
        "machine": f"GPU {gpu}; {platform.machine()}, {os.cpu_count()} CPUs; {platform.platform()}",
        "versions": (f"python {platform.python_version()}, torch {torch.__version__}, {cuda}, flash-attn "
                     f"{version('flash-attn')}, numba {version('numba')}, numpy {numpy.__version__}, "
                     f"avsim {version('avsim')}"),  # fmt: skip
    }


class Report:
    """The rows so far; printed as a Markdown table and written to `out` after every check."""

    def __init__(self, header: dict[str, str], out: Path | None) -> None:
        self.header, self.out = header, out
        self.rows: list[Row] = []
        self.lock = threading.Lock()

    def markdown(self, elapsed_s: float) -> str:
        def cell(text: str) -> str:
            return text.replace("|", "\\|")

        lines = [f"{key}: {value}" for key, value in self.header.items()]
        lines += [f"elapsed: {elapsed_s:.0f} s", "", "| row | figure | target | result |", "|---|---|---|---|"]
        for r in self.rows:
            result = r.status + (f": {r.note}" if r.note else "")
            lines.append(f"| {r.name} | {cell(r.figure)} | {cell(r.target)} | {cell(result)} |")
        counts = {s: sum(r.status == s for r in self.rows) for s in ("PASS", "FAIL", "SKIP")}
        lines += ["", "rows: " + ", ".join(f"{n} {s}" for s, n in counts.items())]
        return "\n".join(lines)

    def write(self, elapsed_s: float) -> None:
        if self.out is None:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "gpu_check.md").write_text(self.markdown(elapsed_s) + "\n", encoding="utf-8")
        data = {**self.header, "elapsed_s": round(elapsed_s, 1), "rows": [asdict(r) for r in self.rows]}
        (self.out / "gpu_check.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

    @property
    def failed(self) -> bool:
        return any(r.status == "FAIL" for r in self.rows)


def _print_row(row: Row) -> None:
    note = f" ({row.note})" if row.note else ""
    print(f"    {row.status:<4} {row.name} [{row.seconds:.1f} s]: {row.figure}{note}", flush=True)


def run_check(ctx: Context, check: Check, report: Report) -> None:
    """Run one check's rows; a raise fails the rows it had not produced yet, and nothing else."""
    from bench.gpu_check_rows import free_memory

    pending = list(check.rows)
    need = check.need_s(ctx)
    if ctx.left() < need:
        rows = [ctx.skip(n, f"budget: {max(ctx.left(), 0):.0f} s left, needs about {need:.0f} s") for n in pending]
        with report.lock:
            report.rows += rows
        for row in rows:
            _print_row(row)
        return
    t0 = time.perf_counter()
    gen = check.run(ctx)
    try:
        if check.name in ctx.force_error:
            raise RuntimeError("forced error (--force-error)")
        for row in gen:
            row.seconds, t0 = time.perf_counter() - t0, time.perf_counter()
            pending.remove(row.name)
            with report.lock:
                report.rows.append(row)
            _print_row(row)
    except Exception as exc:  # report it and go on with the next check
        for name in pending:
            row = ctx.fail(name, exc)
            row.seconds = time.perf_counter() - t0
            with report.lock:
                report.rows.append(row)
            _print_row(row)
    finally:
        gen.close()
        del gen
        free_memory()


def _watchdog(ctx: Context, report: Report, limit_s: float, current: list[str]) -> threading.Timer:
    """After `limit_s`, print and write the table so far and end the process (exit 3)."""

    def fire() -> None:
        with report.lock:
            report.header["aborted"] = f"hard limit {limit_s:.0f} s hit during check {current[0]!r}"
            print("\n" + report.markdown(time.perf_counter() - ctx.started), flush=True)
            report.write(time.perf_counter() - ctx.started)
        os._exit(3)

    timer = threading.Timer(limit_s, fire)
    timer.daemon = True
    timer.start()
    return timer


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if args.dry:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch initialises CUDA: the dry run is CPU-only
    from bench.gpu_check_rows import CHECKS, Context

    budget = args.budget_s if args.budget_s is not None else (300.0 if args.dry else 480.0)
    ctx = Context(dry=args.dry, budget_s=budget, force_fail=_names(args.force_fail), force_error=_names(args.force_error),
                  train_frames=args.train_frames, render_frames=args.render_frames)  # fmt: skip
    try:
        header = environment(args.dry)
    except Exception as exc:  # the rows matter more than the header
        header = {"mode": "dry" if args.dry else "full", "environment": f"not read: {type(exc).__name__}: {exc}"}
    report = Report(header, args.out)
    only = _names(args.only)
    checks = [c for c in CHECKS if not only or c.name in only]
    unknown = only - {c.name for c in CHECKS}
    if unknown:
        raise SystemExit(f"unknown check(s) {sorted(unknown)}; choose from {[c.name for c in CHECKS]}")
    print("\n".join(f"{k}: {v}" for k, v in report.header.items()), flush=True)
    current = ["start"]
    timer = _watchdog(ctx, report, args.hard_limit_s or budget + 75.0, current)
    try:
        for i, check in enumerate(checks, 1):
            current[0] = check.name
            print(f"[{i}/{len(checks)}] {check.name} ({', '.join(check.rows)}) at "
                  f"{time.perf_counter() - ctx.started:.0f} s", flush=True)  # fmt: skip
            if not ctx.cuda and not args.dry:
                with report.lock:
                    report.rows += [ctx.skip(n, "no CUDA device (run with --dry for the CPU check)") for n in check.rows]
                continue
            run_check(ctx, check, report)
            report.write(time.perf_counter() - ctx.started)
    finally:
        timer.cancel()
    with report.lock:
        print("\n" + report.markdown(time.perf_counter() - ctx.started), flush=True)
        report.write(time.perf_counter() - ctx.started)
    return 1 if report.failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    sys.exit(main())
