"""`avsim train smoke OUT`: the whole post-training chain on the CPU with the debug model.

`run_smoke` runs, into the empty folder OUT and nowhere else:

    OUT/scenario/        avsim sample (1.5 s)
    OUT/render/<clip>/   avsim render --rig cosmos at the debug size (13 frames at 30 fps)
    OUT/real/            synthetic "real" camera videos (moving colour gradients)
    OUT/layout/          avsim train pair
    OUT/cache/           avsim train encode --model debug --random-vae --zero-text
    OUT/run/             avsim train run debug --nproc 2 --set parallel.cp=2 (2 gloo processes)
    OUT/net.pt           avsim train export
    OUT/generate/        avsim generate --config debug --checkpoint net.pt --random-vae --zero-text
    OUT/smoke.json       what each step produced and took (written last: the run finished)

No recordings of the sample scenario exist and no released weights are used: the VAE is
untrained (the same one, `RANDOM_VAE_SEED`, encodes and decodes) and the DiT starts from a
random init, so the generated videos are NOISE. The chain checks the data path, the shapes,
the distributed training code and the file formats, not what a model learns.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Log = Callable[[str], None]

SMOKE_FRAMES_30FPS = 13  # 5 model frames at 10 fps (source frames 0, 3, ..., 12): one debug chunk
SMOKE_VIEWS = ("front_wide", "cross_right")  # generated views: two keep the (CPU-slow) decoder short
SMOKE_CAPTION = "the sample town"
SMOKE_NPROC = 2
SMOKE_NOTE = (
    "debug model with RANDOM weights (untrained VAE, DiT from a random init trained a few steps on synthetic "
    "videos): the generated videos are NOISE; this checks the chain, not a model"
)


@dataclass
class SmokeStep:
    """One finished step: its name, what it produced (one line) and its wall time."""

    name: str
    produced: str
    seconds: float


@dataclass
class SmokeResult:
    """What `run_smoke` wrote (paths inside `out`) and each step's line."""

    out: Path
    clip: str = ""
    steps: list[SmokeStep] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        """Total wall time of the steps."""
        return sum(s.seconds for s in self.steps)


def write_synthetic_video(path: Path, seed: int, kind: str, frames: int, width_px: int, height_px: int) -> None:
    """A small mp4 at 30 fps standing in for a recording: a moving colour gradient ("rgb") or lines.

    Args:
        path: output .mp4 file.
        seed: picks the colours and offsets.
        kind: "rgb" (a camera stand-in) or "control" (white stripes and a red column).
        frames: number of frames.
        width_px: frame width.
        height_px: frame height.
    """
    import numpy as np

    from avsim.core.video import MP4Writer

    yy, xx = np.mgrid[0:height_px, 0:width_px].astype(np.float32)
    base = np.random.default_rng(seed).uniform(0, 255, size=3)
    with MP4Writer(path, width_px, height_px, fps=30.0) as out:
        for t in range(frames):
            if kind == "rgb":
                img = np.stack([(xx * 2 + t * 4 + base[c]) % 256 for c in range(3)], -1)
            else:
                img = np.zeros((height_px, width_px, 3), np.float32)
                img[(yy.astype(int) + t) % 16 < 2] = (255, 255, 255)
                img[:, (int(base[0]) + 3 * t) % width_px] = (255, 0, 0)
            out.write(img.astype(np.uint8))


def check_smoke_out(out: Path) -> None:
    """Raise AvsimInputError unless `out` is absent or an empty folder."""
    from avsim.core.errors import AvsimInputError

    if out.exists() and not out.is_dir():
        raise AvsimInputError(out, "out", "exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        raise AvsimInputError(out, "out", "exists and is not empty; the smoke chain needs an empty or new folder")


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _mib(path: Path) -> str:
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size
    return f"{size / 2**20:.2f} MiB"


def _sample(out: Path, seed: int) -> str:
    from avsim.scenario.workflows import write_sample

    scenario = write_sample(out / "scenario", seed=seed, duration_s=1.5)
    return f"{out / 'scenario'}: sample scenario {scenario.scenario_id}, {scenario.duration_s:.1f} s ({_mib(out / 'scenario')})"


def _render(out: Path, progress: Log) -> tuple[str, str]:
    """Control videos of the 7 model cameras at the debug size; returns (clip, line)."""
    from avsim.models.config import debug
    from avsim.render.run.plan import FrameRange, RenderOptions
    from avsim.render.run.runner import run_render
    from avsim.scenario.io import load_scenario

    mc = debug()
    opts = RenderOptions(out=out / "render", frames=FrameRange(0, SMOKE_FRAMES_30FPS), width_px=mc.width_px,
                         height_px=mc.height_px, rig="cosmos")
    progress(f"rendering {len(mc.cameras)} cameras x {SMOKE_FRAMES_30FPS} frames ...")
    summary = run_render(load_scenario(out / "scenario"), opts)
    clip_dir = out / "render" / summary.clip_id
    return summary.clip_id, (f"{clip_dir}: {len(summary.cameras)} control videos, {summary.frames} frames at "
                             f"{mc.width_px}x{mc.height_px} ({_mib(clip_dir)})")


def _real_videos(out: Path, clip: str) -> str:
    from avsim.core.rig import COSMOS_VIEW_NAMES
    from avsim.models.config import debug

    mc = debug()
    (out / "real").mkdir()
    for j, cam in enumerate(COSMOS_VIEW_NAMES):
        write_synthetic_video(out / "real" / f"{clip}.{cam}.mp4", j, "rgb", SMOKE_FRAMES_30FPS, mc.width_px, mc.height_px)
    return (f"{out / 'real'}: {len(COSMOS_VIEW_NAMES)} synthetic camera videos (moving gradients; the sample has "
            f"no recordings), {SMOKE_FRAMES_30FPS} frames ({_mib(out / 'real')})")


def _pair(out: Path, clip: str) -> str:
    from avsim.train.data import scan_layout
    from avsim.train.jobs import pair_clip

    pair_clip(out / "render" / clip, out / "real", out / "layout", SMOKE_CAPTION, clip)
    records = scan_layout(out / "layout")
    return f"{out / 'layout'}: {len(records)} clip, {len(records[0].views)} views, caption {SMOKE_CAPTION!r}"


def _encode(out: Path, progress: Log) -> str:
    from avsim.train.data import LatentClipDataset
    from avsim.train.encode import CLIPS_STEP
    from avsim.train.jobs import EncodeSettings, encode_cache

    def encoded(step: str, done: int, total: int) -> None:  # every unit: loading the encoders, each view (seconds each)
        progress(f"encoded {done}/{total} clips" if step == CLIPS_STEP else f"encode: {step} {done}/{total}")

    settings = EncodeSettings(model="debug", random_vae=True, zero_text=True, device="cpu", store_dtype="float32")
    count = encode_cache(out / "layout", out / "cache", settings, encoded)
    video = LatentClipDataset(out / "cache")[0]["video"]
    shape = tuple(getattr(video, "shape", ()))
    return f"{out / 'cache'}: {count} clip, video and control latents {shape}, zero text, RANDOM VAE ({_mib(out / 'cache')})"


def _train(out: Path, steps: int, seed: int) -> str:
    from avsim.train.jobs import run_config, run_training

    cfg = run_config("debug", [f"parallel.cp={SMOKE_NPROC}", f"seed={seed}"], cache=out / "cache", out=out / "run", steps=steps)
    run_training(cfg, SMOKE_NPROC)
    log = [json.loads(line) for line in (out / "run" / "log.jsonl").read_text(encoding="utf-8").splitlines()]
    ckpts = sorted(p.name for p in (out / "run" / "checkpoints").iterdir())
    return (f"{out / 'run'}: {len(log)} steps on {SMOKE_NPROC} gloo processes (cp {SMOKE_NPROC}), loss "
            f"{log[0]['loss']:.4f} -> {log[-1]['loss']:.4f}, {log[-1]['tokens_per_s']:.0f} tokens/s, "
            f"checkpoints {', '.join(ckpts)}")


def _export(out: Path) -> str:
    from avsim.models.checkpoint import load_dit_state_dict
    from avsim.train.jobs import export_run

    with warnings.catch_warnings():  # DCP's "assuming the intent is to load in a single process": it is
        warnings.filterwarnings("ignore", message=".*single process", category=UserWarning)
        net = export_run(out / "run", out / "net.pt")
    state = load_dit_state_dict(net)
    params = sum(v.numel() for v in state.values())
    return f"{net}: {len(state)} tensors, {params:,} parameters, bf16 EMA weights ({_mib(net)})"


def _generate(out: Path, seed: int, progress: Log) -> str:
    from avsim.models.config import debug
    from avsim.models.generate import GenerateRequest, run_generate, sampling_options

    options = sampling_options(debug(), steps=2, seed=seed)
    request = GenerateRequest(control_dir=out / "render", out=out / "generate", config="debug", checkpoint=out / "net.pt",
                              views=list(SMOKE_VIEWS), random_vae=True, zero_text=True, device="cpu", options=options)
    settings = run_generate(request, log=progress)
    videos = sorted(p.name for p in (out / "generate").glob("*.mp4"))
    return (f"{out / 'generate'}: {len(videos)} videos ({len(settings['views'])} views + grid), "
            f"{settings['frames_per_view']} frames each, settings.json output_is_noise="
            f"{str(settings['output_is_noise']).lower()} ({_mib(out / 'generate')})")


def _write_summary(result: SmokeResult, steps: int, seed: int) -> None:
    from avsim.core.atomic import atomic_output_path

    doc: dict[str, Any] = {
        "note": SMOKE_NOTE, "output_is_noise": True, "clip": result.clip, "train_steps": steps, "seed": seed,
        "nproc": SMOKE_NPROC, "cp": SMOKE_NPROC, "seconds": round(result.seconds, 2),
        "steps": [{"name": s.name, "produced": s.produced, "seconds": round(s.seconds, 2)} for s in result.steps],
    }
    with atomic_output_path(result.out / "smoke.json") as tmp:
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def run_smoke(out: Path, *, steps: int = 20, seed: int = 0, log: Log = print, progress: Log = _stderr) -> SmokeResult:
    """Run sample -> render -> pair -> encode -> train (2 processes, cp 2) -> export -> generate into `out`.

    Args:
        out: an absent or empty folder; everything is written inside it.
        steps: training steps (checkpoints every 10 and at the end).
        seed: seed of the sample scenario, the training run and the sampler.
        log: receives one line per finished step (what it produced, its time).
        progress: receives progress lines while a step runs.

    Returns:
        The steps' lines and times; OUT/smoke.json holds the same, written last.
    """
    from avsim.core.errors import AvsimInputError

    if steps < 1:
        raise AvsimInputError("--steps", str(steps), "must be at least 1")
    check_smoke_out(out)
    out.mkdir(parents=True, exist_ok=True)
    result = SmokeResult(out)
    log(f"avsim train smoke: {SMOKE_NOTE}")

    def render() -> str:
        result.clip, line = _render(out, progress)
        return line

    plan: list[tuple[str, Callable[[], str]]] = [
        ("sample", lambda: _sample(out, seed)),
        ("render", render),
        ("real videos", lambda: _real_videos(out, result.clip)),
        ("pair", lambda: _pair(out, result.clip)),
        ("encode", lambda: _encode(out, progress)),
        ("train", lambda: _train(out, steps, seed)),
        ("export", lambda: _export(out)),
        ("generate", lambda: _generate(out, seed, progress)),
    ]
    for k, (name, fn) in enumerate(plan, 1):
        t0 = time.perf_counter()
        line = fn()
        step = SmokeStep(name, line, time.perf_counter() - t0)
        result.steps.append(step)
        log(f"[{k}/{len(plan)}] {name} ({step.seconds:.1f} s): {line}")
    _write_summary(result, steps, seed)
    log(f"smoke chain done in {result.seconds:.1f} s: {out / 'smoke.json'} (the generated videos are NOISE: random weights)")
    return result


__all__ = ["SMOKE_NOTE", "SmokeResult", "SmokeStep", "check_smoke_out", "run_smoke", "write_synthetic_video"]
