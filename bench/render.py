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
    python bench/render.py --cases sample --modes raster_aa --raster-frames 30   # anti-aliasing on vs off
    python bench/render.py --cases sample --modes encode_w1,encode_w1_labels --clip-s 4   # labels on vs off
    python bench/render.py --main-job --before ../old   # the README main job (mosaic, 2 workers): an older checkout vs this one
    python bench/render.py --rows raster,agents,memory --raster-frames 30 --before ../old   # older checkout / this one
    python bench/render.py --rows aa --raster-frames 6 --repeats 3 --before ../old   # raster kernels vs AA pass CPU ms
    python bench/render.py --render-memory 1920x1080   # a whole render's peak RSS (mosaic, 2 workers), 4 s vs 20 s clip, budget vs none
    python bench/render.py --render-memory 1920x1080 --labels   # the same with labels

The `--rows` table runs an older checkout's code (`--before DIR`, with its own .venv) and this one's in
the same run, interleaved: raster only split into geometry and raster-kernel CPU time, AA off and on
(the README's 20 s sample and 20 s of AV2, frames spread over the clip), the raster kernels (AA off) and the anti-aliasing pass (AA on minus off) per camera-frame
(`aa`), the cost of 10x the agents (the sample's tracks and nine offset copies), and the peak RSS
of a 4 s and a 20 s clip at 1920x1080.
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


def tenfold_agents(scenario):
    """The scenario with ten times the agents: its tracks and nine copies offset in x, y (new ids)."""
    import numpy as np

    from avsim.core.agents import AgentTracks

    agents = scenario.agents
    offsets = [(dx, dy) for dx in (-24.0, 0.0, 24.0) for dy in (-12.0, 0.0, 12.0) if (dx, dy) != (0.0, 0.0)] + [(48.0, 0.0)]
    parts = [agents] + [
        AgentTracks(np.char.add(agents.track_id, f"~{k}"), agents.source_class, agents.timestamps_ns,
                    agents.center_m + np.array([dx, dy, 0.0]), agents.size_m, agents.orientation)
        for k, (dx, dy) in enumerate(offsets)
    ]  # fmt: skip
    return scenario.replace(agents=AgentTracks.concat(parts))


def run_geometry_split(case: str, clip_s: float, raster_frames: int, tenfold: bool, size: tuple[int, int]) -> dict:
    """Raster only, one process: CPU time of the geometry (primitives) and of the raster kernels apart
    (AA off, and AA on: the default look), and the pixels the boxes hold at the end (their drawn share)."""
    import numpy as np

    from avsim.render.geometry.scene import SceneRenderer
    from avsim.render.raster.draw import rasterize_numba

    scenario = load_case(case, clip_s)
    scenario = tenfold_agents(scenario) if tenfold else scenario
    renderer = SceneRenderer(scenario, size=size)
    renderer.render_frame(0)
    n = min(raster_frames, renderer.n_frames - 1)
    step = max(1, (renderer.n_frames - 1) // max(n, 1))
    geo_s = ras_s = aa_s = 0.0
    box_px = 0
    ids = np.empty((size[1], size[0]), np.int32)  # every camera is re-imaged to `size`
    for f in [1 + i * step for i in range(n)]:
        for i in range(len(renderer.rig)):
            t0 = time.process_time()
            prims = renderer.camera_primitives(f, i)
            t1 = time.process_time()
            rasterize_numba(prims, renderer.rays(i))
            t2 = time.process_time()
            rasterize_numba(prims, renderer.rays(i), antialias=True)
            geo_s, ras_s, aa_s = geo_s + t1 - t0, ras_s + t2 - t1, aa_s + time.process_time() - t2
            rasterize_numba(prims, renderer.rays(i), ids_out=ids)
            box_px += int((ids >= 0).sum())
    cf = n * len(renderer.rig)
    return {"case": case, "tenfold": tenfold, "camera_frames": cf, "geometry_ms": 1e3 * geo_s / cf, "raster_ms": 1e3 * ras_s / cf,
            "raster_aa_ms": 1e3 * aa_s / cf, "box_px": box_px / cf,
            "boxes": len(scenario.agents.track_ids)}  # fmt: skip


def run_clip_memory(case: str, clip_s: float, size: tuple[int, int], stride: int) -> dict:
    """Every `stride`-th frame of the whole clip, all cameras (the renderer's memory over a clip)."""
    from avsim.render.geometry.scene import SceneRenderer

    renderer = SceneRenderer(load_case(case, clip_s), size=size)
    for f in range(0, renderer.n_frames, stride):
        renderer.render_frame(f)
    own, _ = _peak_mib()
    return {"case": case, "clip_s": clip_s, "frames": renderer.n_frames, "peak_main_mib": own}


def run_render_memory(clip_s: float, size: tuple[int, int], max_memory_mib: int, labels: bool) -> dict:
    """The sample rendered whole (7 cameras, `--mosaic --workers 2`, `--max-memory-mib`, `--labels`): peak RSS of the main process and its largest child."""
    from avsim.render.run.plan import RenderOptions
    from avsim.render.run.runner import run_render

    scenario = load_case("sample", clip_s)
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        opts = RenderOptions(out=Path(tmp), workers=2, mosaic=True, width_px=size[0], height_px=size[1], max_memory_mib=max_memory_mib, labels=labels)
        run_render(scenario, opts)
    own, children = _peak_mib()
    return {"clip_s": clip_s, "wall_s": time.perf_counter() - wall, "peak_main_mib": own, "peak_worker_mib": children}


def render_memory_rows(size: str, labels: bool) -> None:
    """Print the whole-render memory of a 4 s and a 20 s sample clip at `size` (WxH), with the default budget and none, each in a fresh process."""
    from avsim.render.run.memory import DEFAULT_MAX_MEMORY_MIB

    print("| clip | frame | --max-memory-mib | wall s | peak RSS main / largest worker MiB |\n|---|---|---|---|---|")
    for clip_s in (4.0, 20.0):
        for budget in (DEFAULT_MAX_MEMORY_MIB, 0):
            r = _child(["--render-memory-one", str(clip_s), size, str(budget), str(int(labels))], before=False)
            row = f"| {clip_s:g} s | {size}{' --labels' if labels else ''} | {budget or 'none'} | {r['wall_s']:.0f} | {r['peak_main_mib']:.0f} / {r['peak_worker_mib']:.0f} |"
            print(row, flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end; {os.cpu_count()} CPUs; {_versions()}")


def run_one(case: str, mode: str, clip_s: float, raster_frames: int) -> dict:
    """One measurement (runs inside its own process)."""
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.render.run.plan import RenderOptions
    from avsim.render.run.runner import run_render

    if mode == "raster_aa":
        return run_raster_aa(case, clip_s, raster_frames)
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


def before_checkout() -> tuple[Path, Path]:
    """The "before" code of the before/after rows: a checkout (`--before DIR`) and its venv's python."""
    folder = Path(os.environ.get("AVSIM_BENCH_BEFORE", "")).resolve()
    python = folder / ".venv" / "bin" / "python"
    if not python.is_file():
        raise SystemExit("--rows / --main-job need --before DIR: a checkout of the older commit with its own .venv")
    return python, folder


def _child(argv: list[str], before: bool) -> dict:
    """Run this file's hidden measurement `argv` in a fresh process, on main's code or on this checkout's."""
    python, cwd = before_checkout() if before else (Path(sys.executable), REPO)
    out = subprocess.run([python, __file__, *argv], capture_output=True, text=True, cwd=cwd, check=False)
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _pairs(argv: list[str], repeats: int) -> tuple[list[dict], list[dict]]:
    """`repeats` before/after measurements, interleaved so the machine's load hits both alike."""
    before, after = [], []
    for _ in range(repeats):
        before.append(_child(argv, True))
        after.append(_child(argv, False))
    return before, after


def raster_row(case: str, frames: int, repeats: int) -> str:
    """Raster only (geometry + kernels, no encode) at 1280x720, camera-frames per CPU-second with AA on
    (the default look; AA off in brackets), before/after."""
    before, after = _pairs(["--split", case, "0", "1280", "720", str(frames)], repeats)

    def cell(rows: list[dict]) -> str:
        geo, off, on = (min(r[k] for r in rows) for k in ("geometry_ms", "raster_ms", "raster_aa_ms"))
        return f"{1e3 / (geo + on):.1f} cf/CPU-s ({1e3 / (geo + off):.1f} AA off; geometry {geo:.2f} + kernels {off:.2f} / AA {on:.2f} ms)"

    ratio = min(r["geometry_ms"] + r["raster_aa_ms"] for r in before) / min(r["geometry_ms"] + r["raster_aa_ms"] for r in after)
    return f"| raster only, {case}, 1280x720 | {cell(before)} | {cell(after)} | {ratio:.2f}x |"


def run_aa_split(case: str, clip_s: float, raster_frames: int, size: tuple[int, int]) -> dict:
    """Rasteriser alone, one process: CPU time per camera-frame of the centre-pass kernels (AA off) and of
    the anti-aliasing pass (AA on minus AA off), on the same primitives, interleaved camera by camera."""
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.render.raster.draw import rasterize_numba

    renderer = SceneRenderer(load_case(case, clip_s), size=size)
    renderer.render_frame(0)  # JIT cache load, ray maps: one-off costs
    n = min(raster_frames, renderer.n_frames - 1)
    step = max(1, (renderer.n_frames - 1) // max(n, 1))
    cpu = {False: 0.0, True: 0.0}
    for f in [1 + i * step for i in range(n)]:
        for i in range(len(renderer.rig)):
            prims, rays = renderer.camera_primitives(f, i), renderer.rays(i)
            for aa in (False, True):
                t0 = time.process_time()
                rasterize_numba(prims, rays, antialias=aa)
                cpu[aa] += time.process_time() - t0
    cf = n * len(renderer.rig)
    return {"case": case, "camera_frames": cf, "kernels_ms": 1e3 * cpu[False] / cf, "aa_ms": 1e3 * (cpu[True] - cpu[False]) / cf}


def aa_split_row(case: str, frames: int, repeats: int) -> str:
    """Kernels (AA off) and the AA pass (on - off) per camera-frame at 1280x720, before/after (same run)."""
    before, after = _pairs(["--aa-split", case, "1280", "720", str(frames)], repeats)
    kb, ka = (min(r["kernels_ms"] for r in rows) for rows in (before, after))
    ab, aa = (min(r["aa_ms"] for r in rows) for rows in (before, after))
    return (f"| raster kernels + AA pass, {case}, 1280x720 | kernels {kb:.2f} + AA {ab:.2f} = {kb + ab:.2f} ms | "
            f"kernels {ka:.2f} + AA {aa:.2f} = {ka + aa:.2f} ms | {(kb + ab) / (ka + aa):.2f}x (kernels {kb / ka:.2f}x, AA {ab / aa:.2f}x) |")  # fmt: skip


def agents_row(frames: int, repeats: int) -> str:
    """Cost per camera-frame of 10x the agents over the sample's own, before/after (same run), with AA off
    and on, next to the ratio of the pixels the boxes hold (what the agents draw)."""
    out = {}
    for tenfold in ("0", "1"):
        out[tenfold] = _pairs(["--split", "sample", tenfold, "1280", "720", str(frames)], repeats)

    def ratio(k: int, key: str) -> float:
        return min(r[key] for r in out["1"][k]) / min(r[key] for r in out["0"][k])

    def total(k: int, tenfold: str, raster: str) -> float:
        return min(r["geometry_ms"] + r[raster] for r in out[tenfold][k])

    cells = [f"{total(k, '1', 'raster_ms') / total(k, '0', 'raster_ms'):.2f}x AA off (geometry {ratio(k, 'geometry_ms'):.2f}x, "
             f"kernels {ratio(k, 'raster_ms'):.2f}x); {total(k, '1', 'raster_aa_ms') / total(k, '0', 'raster_aa_ms'):.2f}x AA on"
             for k in (0, 1)]  # fmt: skip
    return f"| 10x agents / 1x, sample, per camera-frame | {cells[0]} | {cells[1]} | box pixels {ratio(1, 'box_px'):.2f}x |"


def memory_row(stride: int) -> str:
    """Peak RSS of the renderer over a 4 s and a 20 s sample clip, 7 cameras at 1920x1080, before/after."""
    cells = []
    for before in (True, False):
        short, long_ = (_child(["--memory", "sample", str(c), "1920", "1080", str(stride)], before) for c in (4.0, 20.0))
        cells.append(f"{short['peak_main_mib']:.0f} / {long_['peak_main_mib']:.0f} MiB")
    return f"| peak RSS, 4 s / 20 s clip, 7 cameras 1920x1080 (every {stride}th frame) | {cells[0]} | {cells[1]} | |"


def compare(rows: list[str], frames: int, repeats: int, stride: int) -> None:
    """Print the before (main) / after (this checkout) table of the chosen rows, all measured in this run."""
    print("| row | main | this branch | ratio |\n|---|---|---|---|")
    for row in rows:
        if row == "raster":
            print(raster_row("sample", frames, repeats), flush=True)
            if AV2_LOG.is_dir():
                print(raster_row("av2", frames, repeats), flush=True)
        elif row == "aa":
            print(aa_split_row("sample", frames, repeats), flush=True)
        elif row == "agents":
            print(agents_row(frames, repeats), flush=True)
        elif row == "memory":
            print(memory_row(stride), flush=True)
        else:
            raise SystemExit(f"unknown row {row!r}")
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} at the end; {os.cpu_count()} CPUs; {_versions()}")


def run_raster_aa(case: str, clip_s: float, raster_frames: int) -> dict:
    """Raster only (geometry + rasterisation, numba, 1 process) with anti-aliasing off and on, interleaved
    camera by camera on the same frames so that both see the same machine load; also the rasteriser
    alone (the same primitives, AA off vs on). Row cf_* numbers are AA on; aa_* fields compare."""
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.render.raster.draw import rasterize_numba

    scenario = load_case(case, clip_s)
    renderers = {aa: SceneRenderer(scenario, antialias=aa) for aa in (False, True)}
    for r in renderers.values():
        r.render_frame(0)  # JIT cache load, ray maps: one-off costs
    n_frames = renderers[True].n_frames
    n = min(raster_frames, n_frames - 1)
    step = max(1, (n_frames - 1) // max(n, 1))
    cpu, wall, raster_cpu = {False: 0.0, True: 0.0}, {False: 0.0, True: 0.0}, {False: 0.0, True: 0.0}
    n_cams = len(renderers[True].rig)
    for f in [1 + i * step for i in range(n)]:
        for i in range(n_cams):
            for aa, r in renderers.items():
                w0, c0 = time.perf_counter(), _cpu_s()
                r.render_camera(f, i)
                wall[aa], cpu[aa] = wall[aa] + time.perf_counter() - w0, cpu[aa] + _cpu_s() - c0
            prims, rays = renderers[True].camera_primitives(f, i), renderers[True].rays(i)
            for aa in (False, True):
                c0 = _cpu_s()
                rasterize_numba(prims, rays, antialias=aa)
                raster_cpu[aa] += _cpu_s() - c0
    cam_frames = n * n_cams
    own, children = _peak_mib()
    return {"case": case, "mode": "raster_aa", "workers": 1, "camera_frames": cam_frames, "wall_s": wall[True], "cpu_s": cpu[True],
            "cf_per_s": cam_frames / wall[True], "cf_per_cpu_s": cam_frames / cpu[True], "peak_main_mib": own, "peak_worker_mib": children,
            "aa_off_cf_per_cpu_s": cam_frames / cpu[False], "aa_cost_ratio": cpu[True] / cpu[False],
            "raster_alone_aa_cost_ratio": raster_cpu[True] / raster_cpu[False]}  # fmt: skip


def _print_aa_rows(rows: list[dict]) -> None:
    """The AA on / off comparison of the raster_aa rows (ratios measured in the same process)."""
    for r in (r for r in rows if r["mode"] == "raster_aa"):
        print(f"\n{r['case']} raster_aa: AA on {r['cf_per_cpu_s']:.1f} / AA off {r['aa_off_cf_per_cpu_s']:.1f} camera-frames "
              f"per CPU-second (geometry + raster); AA on costs x{r['aa_cost_ratio']:.2f} (rasteriser alone x{r['raster_alone_aa_cost_ratio']:.2f})")  # fmt: skip


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
_MAIN_JOB_SCRIPT = """
import json, resource, sys, tempfile, time
from pathlib import Path
from avsim.render.run.plan import RenderOptions
from avsim.render.run.runner import run_render
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


def encode_floor_s(run: dict, cores: int = 2) -> float | None:
    """The wall time the run's video encoding alone needs on `cores` cores: its encoders' CPU seconds
    (x264 and the RGB -> YUV conversion of every camera, mosaic and overlay frame, from the render
    summary of the same run) spread over the cores. Nothing can finish faster at these x264 settings.

    Args:
        run: one `run_main_job` result.
        cores: cores of the machine the job ran on.

    Returns:
        Seconds, or None when the code that ran does not report its encode CPU time.
    """
    encode = run.get("encode_cpu_s")
    return None if encode is None else encode / cores


def main_job_rows(clip_s: float, repeats: int) -> None:
    """Print the main-job table: before (main's checkout) and after (this one), alternated, ratio in one run.

    Args:
        clip_s: clip length.
        repeats: before/after pairs.
    """
    before_python, before_dir = before_checkout()
    rows = []
    for k in range(repeats):
        for label, python, cwd in (("before", before_python, before_dir), ("after", Path(sys.executable), REPO)):
            rows.append((label, run_main_job(python, cwd, clip_s)))
            print(f"  done {label} {k + 1}/{repeats}: {rows[-1][1]['wall_s']:.1f} s", file=sys.stderr)
    print(f"\nREADME main job: sample {clip_s:g} s, 7 cameras, 1280x720, --mosaic --workers 2; load {os.getloadavg()[0]:.1f} at the end\n")
    print("| code | wall s | CPU s | camera-frames/s | render CPU s | encode CPU s | composite CPU s | encode floor s | wall / floor | peak RSS main / worker MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, r in rows:
        stages = [f"{r[k]:.1f}" if r.get(k) is not None else "-" for k in ("render_cpu_s", "encode_cpu_s", "composite_cpu_s")]
        rss = f"{r['peak_main_mib']:.0f} / {r['peak_worker_mib']:.0f}"
        floor = encode_floor_s(r)
        floor_cols = f"{floor:.1f} | {r['wall_s'] / floor:.2f}" if floor else "- | -"
        print(f"| {label} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['camera_frames_per_s']:.1f} | {' | '.join(stages)} | {floor_cols} | {rss} |")
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
    parser.add_argument("--one", nargs=2, metavar=("CASE", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--rows", help="before (main) / after rows instead: raster,aa,agents,memory")
    parser.add_argument("--repeats", type=int, default=2, help="before/after pairs per row (--rows, --main-job)")
    parser.add_argument("--before", help="checkout of the older commit (with its .venv) for --rows / --main-job")
    parser.add_argument("--stride", type=int, default=5, help="frame stride of the memory row")
    parser.add_argument("--split", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--memory", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--aa-split", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--render-memory", metavar="WxH", help="whole-render peak RSS (mosaic, 2 workers), 4 s vs 20 s")
    parser.add_argument("--render-memory-one", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--labels", action="store_true", help="--render-memory with labels on")
    args = parser.parse_args()
    if args.before:
        os.environ["AVSIM_BENCH_BEFORE"] = args.before
    if _run_hidden_child(args):
        return
    if args.render_memory:
        render_memory_rows(args.render_memory, args.labels)
        return
    if args.quick:
        args.clip_s, args.raster_frames = 4.0, 60
    if args.rows:
        compare(args.rows.split(","), args.raster_frames, args.repeats, args.stride)
        return
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
    _print_table(rows, args.clip_s)


def _run_hidden_child(args: argparse.Namespace) -> bool:
    """Run one of the hidden per-process measurements named in `args` (printing its JSON); False when none is."""
    result = None
    if args.split:
        case, tenfold, w, h, n = args.split
        result = run_geometry_split(case, 20.0, int(n), tenfold == "1", (int(w), int(h)))
    elif args.aa_split:
        case, w, h, n = args.aa_split
        result = run_aa_split(case, 20.0, int(n), (int(w), int(h)))
    elif args.memory:
        case, clip, w, h, stride = args.memory
        result = run_clip_memory(case, float(clip), (int(w), int(h)), int(stride))
    elif args.render_memory_one:
        w, h = (int(v) for v in args.render_memory_one[1].split("x"))
        clip_s, budget, labels = float(args.render_memory_one[0]), int(args.render_memory_one[2]), args.render_memory_one[3] == "1"
        result = run_render_memory(clip_s, (w, h), budget, labels)
    if result is not None:
        print(json.dumps(result))
    return result is not None


def _print_table(rows: list[dict], clip_s: float) -> None:
    """The measurements of this run as a markdown table, then the AA and labels comparisons."""
    load = os.getloadavg()
    print(f"\nmachine: {platform.platform()}, {os.cpu_count()} CPUs, load average {load[0]:.1f} at the end")
    print(f"versions: {_versions()}; frame 1280x720; clip {clip_s:g} s at 30 fps for the encode modes\n")
    print("| case | mode | workers | camera-frames | wall s | camera-frames/s | per CPU-second | peak RSS main / worker MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        per_cpu = f"{r['cf_per_cpu_s']:.1f}"
        print(f"| {r['case']} | {r['mode']} | {r['workers']} | {r['camera_frames']} | {r['wall_s']:.1f} | "
              f"{r['cf_per_s']:.1f} | {per_cpu} | {r['peak_main_mib']:.0f} / {r['peak_worker_mib']:.0f} |")  # fmt: skip
    _print_aa_rows(rows)
    overhead = labels_overhead(rows)
    if overhead:
        print("\n| case | labels overhead | workers | wall per camera-frame | CPU per camera-frame |")
        print("|---|---|---|---|---|")
        print("\n".join(overhead))


def labels_overhead(rows: list[dict]) -> list[str]:
    """Labels' extra wall and CPU time in %: the k-th `encode_wN_labels` run of a case against its k-th `encode_wN` run.

    With several pairs (e.g. `--modes encode_w1,encode_w1_labels,encode_w1,encode_w1_labels`), a last
    line per case gives the ratio of the sums over all its pairs (steadier on a loaded machine).

    Args:
        rows: the measurements of this run (`run_one` dicts).

    Returns:
        Markdown table rows `| case | labels overhead | workers | wall % | CPU % |`.
    """
    out = []
    for case, mode in sorted({(r["case"], r["mode"]) for r in rows if r["mode"].endswith("_labels")}):
        on = [r for r in rows if r["case"] == case and r["mode"] == mode]
        off = [r for r in rows if r["case"] == case and r["mode"] == mode.removesuffix("_labels")]
        pairs = list(zip(on, off))
        for k, (a, b) in enumerate(pairs):
            out.append(_overhead_line(f"{case} | labels overhead ({mode} vs {b['mode']}, pair {k + 1})", [a], [b]))
        if len(pairs) > 1:
            out.append(_overhead_line(f"{case} | labels overhead, all {len(pairs)} pairs (ratio of sums)", on[: len(pairs)], off[: len(pairs)]))
    return out


def _overhead_line(label: str, on: list[dict], off: list[dict]) -> str:
    """One `| label | workers | wall % | CPU % |` row: per camera-frame time of the `on` runs over the `off` runs."""

    def per_cf(rs: list[dict], key: str) -> float:
        return sum(r[key] for r in rs) / sum(r["camera_frames"] for r in rs)

    wall = 100.0 * per_cf(on, "wall_s") / per_cf(off, "wall_s") - 100.0
    cpu = 100.0 * per_cf(on, "cpu_s") / per_cf(off, "cpu_s") - 100.0
    return f"| {label} | {on[0]['workers']} | {wall:+.1f} % | {cpu:+.1f} % |"


if __name__ == "__main__":
    main()
