"""Benchmark the control-video renderer: camera-frames per second and peak memory.

Cases: (a) the embedded sample (`avsim.scenario.sample`, 20 s at 30 fps, 7 model cameras, 1280x720) and
(b) the real Argoverse 2 sensor log in ../shared/data (its own 7 ring cameras, 1280x720), each
(1) raster only (geometry + rasterisation, no encoding), single process; (2) raster + H.264
encode of the whole clip with 1 worker and (3) with 2 workers. Every measurement runs in a
fresh process, so peak memory (max RSS of the main process and of its largest worker) is its
own. `--clip-s` shortens the clips (e.g. to show that memory does not grow with clip length).

    python bench/render.py                   # everything (several minutes on 2 cores)
    python bench/render.py --quick           # 60 raster frames, 4 s clips
    python bench/render.py --cases sample --modes raster
    python bench/render.py --modes raster_torch --raster-frames 30   # torch backend (GPU if present)
    python bench/render.py --cases sample --modes encode_w1,encode_w1_labels --clip-s 4   # labels on vs off
    python bench/render.py --main-job        # the README main job (mosaic, 2 workers): /work/main's code vs this one
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AV2_LOG = REPO.parent / "shared" / "data" / "av2" / "sensor" / "adcf7d18-0510-35b0-a2fa-b4cea13a6d76"


def load_case(case: str, clip_s: float):
    """The scenario of a benchmark case, cut to its first `clip_s` seconds."""
    if case == "sample":
        from avsim.scenario.sample import make_sample_scenario

        return make_sample_scenario(seed=0, duration_s=clip_s, fps=30.0)
    if case == "av2":
        from avsim.scenario.importers.registry import convert

        if not AV2_LOG.is_dir():
            raise SystemExit(f"AV2 log not found at {AV2_LOG}")
        scenario = convert(str(AV2_LOG))
        start = scenario.start_ns
        return scenario.replace(ego=scenario.ego.crop(start, start + int(clip_s * 1e9)))
    raise SystemExit(f"unknown case {case!r}")


def _peak_mib() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, children


def run_one(case: str, mode: str, clip_s: float, raster_frames: int) -> dict:
    """One measurement (runs inside its own process)."""
    from avsim.render.frame import SceneRenderer
    from avsim.render.runner import RenderOptions, run_render

    scenario = load_case(case, clip_s)
    if mode in ("raster", "raster_torch"):
        renderer = SceneRenderer(scenario, backend="torch" if mode == "raster_torch" else "numba")
        renderer.render_frame(0)  # JIT cache load, ray maps, CUDA context: one-off costs
        n = min(raster_frames, renderer.n_frames - 1)
        step = max(1, (renderer.n_frames - 1) // max(n, 1))
        frames = [1 + i * step for i in range(n)]
        wall, cpu = time.perf_counter(), _cpu_s()
        for f in frames:
            if mode == "raster_torch":
                renderer.render_frame(f)  # all cameras of the frame as one batch
            else:
                for i in range(len(renderer.rig)):
                    renderer.render_camera(f, i)
        wall, cpu = time.perf_counter() - wall, _cpu_s() - cpu
        cam_frames = n * len(renderer.rig)
        own, children = _peak_mib()
        return {"case": case, "mode": mode, "workers": 1, "camera_frames": cam_frames, "wall_s": wall, "cpu_s": cpu,
                "cf_per_s": cam_frames / wall, "cf_per_cpu_s": cam_frames / cpu, "peak_main_mib": own, "peak_worker_mib": children}  # fmt: skip
    labels = mode.endswith("_labels")  # encode_w1_labels: the same render with `--labels`
    workers = int(mode.removeprefix("encode_w").removesuffix("_labels"))
    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu = time.perf_counter(), _cpu_s()
        summary = run_render(scenario, RenderOptions(out=Path(tmp), workers=workers, labels=labels))
        wall, cpu = time.perf_counter() - wall, _cpu_s() - cpu
    own, children = _peak_mib()
    cam_frames = summary.camera_frames_rendered
    return {"case": case, "mode": mode, "workers": workers, "camera_frames": cam_frames, "wall_s": wall, "cpu_s": cpu,
            "cf_per_s": cam_frames / wall, "cf_per_cpu_s": cam_frames / cpu, "peak_main_mib": own, "peak_worker_mib": children}  # fmt: skip


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its finished children (the workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _versions() -> str:
    import av
    import numpy

    try:
        import numba

        nb = numba.__version__
    except ImportError:
        nb = "absent"
    return f"python {platform.python_version()}, numpy {numpy.__version__}, numba {nb}, PyAV {av.__version__}"


# ---- the README main job: the render pool (mosaic in the pool) vs main's code ---------------------------
MAIN_CHECKOUT = Path("/work/main")  # the code before the pool (read only: run with its own venv)
_MAIN_JOB_SCRIPT = """
import json, resource, sys, tempfile, time
from pathlib import Path
from avsim.render.runner import RenderOptions, run_render
from avsim.scenario.sample import make_sample_scenario
scenario = make_sample_scenario(seed=0, duration_s=float(sys.argv[1]), fps=30.0)
with tempfile.TemporaryDirectory() as tmp:
    t = time.perf_counter()
    summary = run_render(scenario, RenderOptions(out=Path(tmp), mosaic=True, workers=2))
    wall = time.perf_counter() - t
own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
doc = summary.to_json()
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_main_mib": own.ru_maxrss / 1024, "peak_worker_mib": kids.ru_maxrss / 1024, **{k: doc.get(k) for k in (
    "camera_frames_rendered", "mosaic_frames_rendered", "render_cpu_s", "encode_cpu_s", "composite_cpu_s", "camera_frames_per_s")}}))
"""


def run_main_job(python: Path, cwd: Path, clip_s: float) -> dict:
    """One run of the README main job (sample, 7 cameras, 1280x720, `--mosaic --workers 2`) in a fresh process.

    Args:
        python: the interpreter (its venv decides which avsim runs).
        cwd: the checkout to run in.
        clip_s: clip length (20 s: the README job).

    Returns:
        wall_s, cpu_s (process + workers) and the summary's counts and per-stage CPU seconds (None on main's code).
    """
    out = subprocess.run([str(python), "-c", _MAIN_JOB_SCRIPT, str(clip_s)], capture_output=True, text=True, cwd=cwd, check=False)
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main_job_rows(clip_s: float, repeats: int) -> None:
    """Print the main-job table: before (main's checkout) and after (this one), alternated, ratio in one run.

    Args:
        clip_s: clip length.
        repeats: before/after pairs.
    """
    before_python = MAIN_CHECKOUT / ".venv" / "bin" / "python"
    rows = []
    for k in range(repeats):
        for label, python, cwd in (("before (main)", before_python, MAIN_CHECKOUT), ("after (pool)", Path(sys.executable), REPO)):
            rows.append((label, run_main_job(python, cwd, clip_s)))
            print(f"  done {label} {k + 1}/{repeats}: {rows[-1][1]['wall_s']:.1f} s", file=sys.stderr)
    print(f"\nREADME main job: sample {clip_s:g} s, 7 cameras, 1280x720, --mosaic --workers 2; load {os.getloadavg()[0]:.1f} at the end\n")
    print("| code | wall s | CPU s | camera-frames/s | render CPU s | encode CPU s | composite CPU s | peak RSS main / worker MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for label, r in rows:
        stages = [f"{r[k]:.1f}" if r.get(k) is not None else "-" for k in ("render_cpu_s", "encode_cpu_s", "composite_cpu_s")]
        rss = f"{r['peak_main_mib']:.0f} / {r['peak_worker_mib']:.0f}"
        print(f"| {label} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['camera_frames_per_s']:.1f} | {' | '.join(stages)} | {rss} |")
    before = [r["wall_s"] for label, r in rows if label.startswith("before")]
    after = [r["wall_s"] for label, r in rows if label.startswith("after")]
    print(f"\nwall-time ratio after / before: {sum(after) / sum(before):.2f} (sums over {repeats} pair(s))")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="sample,av2")
    parser.add_argument("--modes", default="raster,encode_w1,encode_w2")
    parser.add_argument("--clip-s", type=float, default=20.0, help="clip length for the encode modes")
    parser.add_argument("--raster-frames", type=int, default=150, help="frames (x all cameras) for raster only")
    parser.add_argument("--quick", action="store_true", help="60 raster frames, 4 s clips")
    parser.add_argument("--main-job", action="store_true", help="the README main job, main's code vs this one")
    parser.add_argument("--repeats", type=int, default=1, help="before/after pairs for --main-job")
    parser.add_argument("--one", nargs=2, metavar=("CASE", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.clip_s, args.raster_frames = 4.0, 60
    if args.main_job:
        main_job_rows(args.clip_s, args.repeats)
        return
    if args.one:
        print(json.dumps(run_one(args.one[0], args.one[1], args.clip_s, args.raster_frames)))
        return
    rows = []
    for case in args.cases.split(","):
        for mode in args.modes.split(","):
            cmd = [sys.executable, __file__, "--one", case, mode, "--clip-s", str(args.clip_s), "--raster-frames", str(args.raster_frames)]
            out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
            if out.returncode:
                print(out.stderr[-2000:], file=sys.stderr)
                continue
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(f"  done {case} {mode}: {r['cf_per_s']:.1f} camera-frames/s", file=sys.stderr)
    load = os.getloadavg()
    print(f"\nmachine: {platform.platform()}, {os.cpu_count()} CPUs, load average {load[0]:.1f} at the end")
    print(f"versions: {_versions()}; frame 1280x720; clip {args.clip_s:g} s at 30 fps for the encode modes\n")
    print("| case | mode | workers | camera-frames | wall s | camera-frames/s | per CPU-second | peak RSS main / worker MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        per_cpu = f"{r['cf_per_cpu_s']:.1f}"
        print(f"| {r['case']} | {r['mode']} | {r['workers']} | {r['camera_frames']} | {r['wall_s']:.1f} | "
              f"{r['cf_per_s']:.1f} | {per_cpu} | {r['peak_main_mib']:.0f} / {r['peak_worker_mib']:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
