"""Benchmark what `--labels` adds to a render: labels on and off, interleaved camera-frame by camera-frame in one process.

The development machine is shared and its speed drifts by tens of percent within a minute, so
two whole renders one after the other (`bench/render.py --modes encode_w1,encode_w1_labels`)
differ by more than the labels cost, and even alternating 15-frame segments leaves +-5 points.
Here one process renders every camera-frame of the clip twice, in the render pass's own two
code paths, back to back (which goes first alternates with the frame): without labels
(`render_camera`, the camera's x264 encoder) and with them (`labels_run.labelled_frames`: the
rasterisation with ids, the records, the segment's label part and OpenLane files, its own
encoder). Segments of `SEGMENT_FRAMES` frames get fresh encoders as in a render. The CPU
time of each is summed; the labels' merge into the clip's label files
(`labels_run.merge_parts`) runs once at the end and counts in the overhead.

    python bench/labels.py                   # sample, 20 s, 7 cameras, 1280x720 (about 6 min on 2 cores)
    python bench/labels.py --clip-s 4
    python bench/labels.py --clip-s 4 --whole-process 2

`--whole-process N` also times the whole `avsim render` command, with and without `--labels`, on the
same scenario (the sample cut to `--clip-s`): each pair is started together (the first to start
alternates), and each process's CPU seconds (user + system, from `os.wait4`) are summed over the N
pairs; both renders of a pair meet the same phase of a shared machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path


def load_case(case: str, clip_s: float):
    """The sample scenario (seed 0, 30 fps) cut to `clip_s` seconds (as `bench/render.py`'s sample case)."""
    from avsim.scenario.sample import make_sample_scenario

    assert case == "sample", case
    return make_sample_scenario(seed=0, duration_s=clip_s, fps=30.0)


def _versions() -> str:
    import platform

    import av
    import numba
    import numpy

    return f"python {platform.python_version()}, numpy {numpy.__version__}, numba {numba.__version__}, PyAV {av.__version__}"


def _encoders(stack, cameras, folder: Path, start: int) -> dict:
    """A fresh x264 encoder per camera for one segment (the render's preset and rate)."""
    from avsim.core.video import MP4Writer
    from avsim.render import style
    from avsim.render.run.plan import DEFAULT_PRESET

    folder.mkdir(parents=True, exist_ok=True)
    return {c: stack.enter_context(MP4Writer(folder / f"{c}.{start:06d}.mp4", style.DEFAULT_WIDTH_PX, style.DEFAULT_HEIGHT_PX,
                                             style.DEFAULT_FPS, preset=str(DEFAULT_PRESET))) for c in cameras}  # fmt: skip


def _segment(renderer, out: Path, start: int, stop: int, cpu: dict[bool, float], records: list) -> None:
    """Frames [start, stop) of every camera, with and without labels, alternating; CPU seconds added to `cpu`."""
    from contextlib import ExitStack

    from avsim.render.run import labels as labels_run
    from avsim.render.run.plan import Stream, StreamKind, safe_name
    from avsim.render.run.units import StreamSegment

    cameras, clock = renderer.rig.names, time.process_time
    clip_id = safe_name(renderer.scenario.scenario_id)
    with ExitStack() as stack:
        enc = {on: _encoders(stack, cameras, out / str(on), start) for on in (False, True)}
        parts = {c: StreamSegment(Stream(StreamKind.CAMERA, c), start, stop, out / f"{c}.{start:06d}.mp4") for c in cameras}
        labeller = labels_run.Labeller.of(renderer, "compact")  # what a default render labels: compact tables
        labelled = {c: labels_run.labelled_frames(labeller, parts[c], labels_run.part_path(out, clip_id, parts[c])) for c in cameras}
        for f in range(start, stop):
            for i, c in enumerate(cameras):
                for on in (False, True) if (f + i) % 2 == 0 else (True, False):
                    t = clock()
                    enc[on][c].write(next(labelled[c]) if on else renderer.render_camera(f, i))
                    cpu[on] += clock() - t
        t = clock()
        for c in cameras:
            next(labelled[c], None)  # the segment's label part and OpenLane files
        cpu[True] += clock() - t
        records += parts.values()
        t = clock()
    cpu[False] += (clock() - t) / 2  # both encoders' flush on close (about equal)
    cpu[True] += (clock() - t) / 2


def run(clip_s: float) -> dict:
    """Labels on / off CPU seconds and the merge's, for the sample cut to `clip_s`."""
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.render.run import labels as labels_run
    from avsim.render.run.plan import RenderOptions, RenderPlan
    from avsim.render.run.units import SEGMENT_FRAMES

    scenario = load_case("sample", clip_s)
    renderer = SceneRenderer(scenario, size=(1280, 720), antialias=True)
    n, cameras = renderer.n_frames, renderer.rig.names
    cpu, segments = {False: 0.0, True: 0.0}, []
    with tempfile.TemporaryDirectory() as tmp:
        _segment(renderer, Path(tmp) / "warm", 0, 1, {False: 0.0, True: 0.0}, [])  # JIT caches and imports of both paths
        for a in range(0, n, SEGMENT_FRAMES):
            _segment(renderer, Path(tmp), a, min(a + SEGMENT_FRAMES, n), cpu, segments)
            print(f"  frames {a}-{min(a + SEGMENT_FRAMES, n)}: off {cpu[False]:.1f} s, on {cpu[True]:.1f} s", file=sys.stderr)
        t = time.process_time()
        opts = RenderOptions(out=Path(tmp), cameras=tuple(cameras), labels=True)
        labels_run.merge_parts(scenario, opts, RenderPlan.resolve(scenario, opts), segments)
        merge = time.process_time() - t
    return {"camera_frames": n * len(cameras), "off": cpu[False], "on": cpu[True], "merge_s": merge}


def whole_process(clip_s: float, pairs: int) -> dict[str, float]:
    """CPU seconds of `avsim render` without and with `--labels` (the default compact tables), `pairs` pairs
    started together, on the sample cut to `clip_s` (one warm-up render with labels first: the compiled kernels' cache)."""
    import os
    import shutil
    import subprocess

    avsim = shutil.which("avsim", path=str(Path(sys.executable).parent)) or "avsim"
    cpu = {"off": 0.0, "on": 0.0}
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "s"
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run([avsim, "sample", str(scenario), "--duration-s", f"{clip_s:g}"], check=True, **quiet)
        subprocess.run([avsim, "render", str(scenario), str(Path(tmp) / "warm"), "--frames", "2", "--labels"], check=True, **quiet)
        for k in range(pairs):
            runs = {on: [avsim, "render", str(scenario), str(Path(tmp) / f"{on}{k}"), *(["--labels"] if on == "on" else [])]
                    for on in (("off", "on") if k % 2 == 0 else ("on", "off"))}  # fmt: skip
            procs = {on: subprocess.Popen(cmd, **quiet) for on, cmd in runs.items()}
            for on, proc in procs.items():
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                if proc.returncode != 0:
                    raise SystemExit(f"avsim render ({on}) exited {proc.returncode}")
                cpu[on] += usage.ru_utime + usage.ru_stime
            print(f"  pair {k + 1}: off {cpu['off']:.1f} s, on {cpu['on']:.1f} s (summed)", file=sys.stderr)
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clip-s", type=float, default=20.0)
    parser.add_argument("--whole-process", type=int, default=0, metavar="N", help="also time N whole `avsim render` pairs")
    args = parser.parse_args()
    r = run(args.clip_s)
    off, on, cf = r["off"], r["on"], r["camera_frames"]
    print(f"\nversions: {_versions()}; sample {args.clip_s:g} s at 30 fps, 7 cameras, 1280x720, AA on; "
          f"labels on / off interleaved camera-frame by camera-frame in one process\n")  # fmt: skip
    print("| camera-frames | CPU ms per camera-frame, off (render, encode) | on (render, labels, encode, parts) | merge | labels overhead |")
    print("|---|---|---|---|---|")
    print(f"| {cf} | {1e3 * off / cf:.2f} | {1e3 * on / cf:.2f} | {1e3 * r['merge_s'] / cf:.2f} | {100.0 * ((on + r['merge_s']) / off - 1.0):+.1f} % |")
    if args.whole_process > 0:
        w = whole_process(args.clip_s, args.whole_process)
        print(f"\nwhole `avsim render` processes, {args.whole_process} pair(s) started together, CPU seconds summed (os.wait4)\n")
        print("| pairs | CPU s without --labels | with --labels | labels overhead |")
        print("|---|---|---|---|")
        print(f"| {args.whole_process} | {w['off']:.2f} | {w['on']:.2f} | {100.0 * (w['on'] / w['off'] - 1.0):+.1f} % |")


if __name__ == "__main__":
    main()
