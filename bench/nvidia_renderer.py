"""avsim's renderer against NVIDIA's on the same ClipGT export and cameras: camera-frames per second.

NVIDIA's renderer is cosmos-transfer2.5's ``scripts/generate_control_videos.py``, run unmodified
from a checkout (``--checkout``, default ``$AVSIM_COSMOS_TRANSFER25``) by an interpreter that has
its pinned dependencies and NVIDIA's ``cosmos-cuda`` stub package installed (``--python``, default
``$AVSIM_COSMOS_PYTHON``; docs/importers.md, "NVIDIA's renderer on an export", says how to build
it). Without a GPU it draws through Mesa's llvmpipe (EGL) and torch runs on the CPU.

One run: the clip is exported once (``avsim export clipgt --rig cosmos``, its seven cameras at
1280x720), then each repeat renders it with both, alternating, every command in a fresh process:
NVIDIA's script (load, 4x MSAA OpenGL, H.264 crf 18 ``slow``) and ``avsim render`` of the same clip
read back (load, anti-aliased raster, H.264 crf 18 ``superfast``), one worker. Each writes one video
per camera of every frame. Wall time and CPU time (user + system of the command's processes) per
camera-frame; the ratio is avsim's rate over NVIDIA's.

    python bench/nvidia_renderer.py                       # the sample, 2 s, 2 repeats
    python bench/nvidia_renderer.py --case av2 --clip-s 1 # the AV2 log in ../shared/data
"""

from __future__ import annotations

import argparse
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
WAYMO = REPO.parent / "shared" / "data" / "waymo" / "motion_data_one_scenario.tfrecord"


def write_case(case: str, clip_s: float, folder: Path) -> Path:
    """The case's scenario folder (its first `clip_s` seconds)."""
    from avsim.edit.ops_time import crop
    from avsim.scenario.io import save_scenario

    if case == "sample":
        from avsim.scenario.sample import make_sample_scenario

        scenario = make_sample_scenario(seed=0, duration_s=clip_s, fps=30.0)
    else:
        from avsim.scenario.importers.registry import convert

        source = {"av2": AV2_LOG, "waymo": WAYMO}[case]
        if not source.exists():
            raise SystemExit(f"{source} not found")
        scenario = crop(convert(str(source)), 0.0, clip_s)
    save_scenario(scenario, folder)
    return folder


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall s, CPU s of the command and its children) of one command; exits on failure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{command[:2]} failed:\n{result.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=("sample", "av2", "waymo"), default="sample")
    parser.add_argument("--clip-s", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--checkout", default=os.environ.get("AVSIM_COSMOS_TRANSFER25"))
    parser.add_argument("--python", default=os.environ.get("AVSIM_COSMOS_PYTHON"))
    args = parser.parse_args()
    if not args.checkout or not args.python:
        raise SystemExit("need --checkout and --python (or AVSIM_COSMOS_TRANSFER25 and AVSIM_COSMOS_PYTHON)")
    checkout = Path(args.checkout).resolve()
    script = checkout / "scripts" / "generate_control_videos.py"
    avsim = [sys.executable, "-c", "import sys; from avsim.cli import main; sys.exit(main(sys.argv[1:]))"]
    nvidia_env = {**os.environ, "PYTHONPATH": str(checkout), "LOGURU_LEVEL": "WARNING"}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        write_case(args.case, args.clip_s, tmp / "s")
        subprocess.run([*avsim, "export", "clipgt", str(tmp / "s"), str(tmp / "clip"), "--rig", "cosmos"], check=True, capture_output=True)
        subprocess.run([*avsim, "convert", str(tmp / "clip"), str(tmp / "back")], check=True, capture_output=True)
        from avsim.scenario.io import load_scenario

        back = load_scenario(tmp / "back")
        camera_frames = len(back.frame_timestamps(30.0)) * len(back.rig)
        runs: dict[str, list[tuple[float, float]]] = {"NVIDIA generate_control_videos.py": [], "avsim render": []}
        for k in range(args.repeats):
            runs["NVIDIA generate_control_videos.py"].append(
                timed([args.python, str(script), "-i", str(tmp / "clip"), "-o", str(tmp / f"nv{k}")], nvidia_env))
            runs["avsim render"].append(timed([*avsim, "render", str(tmp / "back"), str(tmp / f"av{k}"), "--workers", "1"]))
            for name in runs:
                print(f"  repeat {k}: {name}: {runs[name][-1][0]:.1f} s wall, {runs[name][-1][1]:.1f} CPU s", flush=True)
    print(f"\n{args.case}, {args.clip_s:g} s, cosmos rig (7 cameras, 1280x720), {camera_frames} camera-frames per render; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
          f"Python {platform.python_version()}, NVIDIA checkout {checkout.name}")  # fmt: skip
    print("| renderer | best wall s | camera-frames/s (wall) | CPU s | camera-frames per CPU-second |")
    print("|---|---|---|---|---|")
    best = {name: (min(w for w, _ in r), min(c for _, c in r)) for name, r in runs.items()}
    for name, (wall, cpu) in best.items():
        print(f"| {name} | {wall:.1f} | {camera_frames / wall:.2f} | {cpu:.1f} | {camera_frames / cpu:.2f} |")
    (nv_wall, nv_cpu), (av_wall, av_cpu) = best.values()
    print(f"\nspeed ratio avsim / NVIDIA: {nv_wall / av_wall:.1f}x per wall second, {nv_cpu / av_cpu:.1f}x per CPU-second")


if __name__ == "__main__":
    main()
