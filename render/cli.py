"""`avsim render SCENARIO OUT`: world-scenario control videos, one per camera.

Work is split into segments (150 frames of one camera); each streams its frames into an H.264
encoder and lands atomically, then a camera's segments are remuxed into its video. A rerun
skips finished videos and segments (resumable); an interrupted run leaves no partial file.
`--workers N` renders segments in N processes; the bytes do not depend on N.

Given the output folder of `avsim edit` (a `manifest.json` of format `avsim-edit-manifest`
beside one scenario folder per variant), every variant is rendered with the same options to
`OUT/<scenario_id>/...`, and `OUT/render_summary.json` lists them all.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

import typer

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.rig import NAMED_RIGS, named_rig
from avsim.render import style, writer

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

RIG_CHOICES = ("scenario", *NAMED_RIGS)
# `avsim edit`'s manifest (edit/cli.py writes it; render sits below edit in the layering, so
# the two names are restated here rather than imported)
EDIT_MANIFEST_NAME = "manifest.json"
EDIT_MANIFEST_FORMAT = "avsim-edit-manifest"
VARIANTS_SUMMARY_FORMAT = "avsim-render-variants-summary"
X264_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")


@dataclass(frozen=True)
class RenderOptions:
    """Everything `avsim render` can be asked (see the command's help)."""

    out: Path
    cameras: tuple[str, ...] | None = None
    start_s: float | None = None
    end_s: float | None = None
    frames: str | None = None
    fps: float = style.DEFAULT_FPS
    width_px: int = style.DEFAULT_WIDTH_PX
    height_px: int = style.DEFAULT_HEIGHT_PX
    chunk_frames: int = 0
    workers: int = 1
    overlay: Path | None = None
    mosaic: bool = False
    png: bool = False
    layout: str = "default"
    rig: str = "scenario"
    backend: str = "numba"
    overwrite: bool = False
    preset: str = writer.DEFAULT_PRESET


@dataclass
class RenderSummary:
    clip_id: str
    cameras: list[str]
    frames: int
    camera_frames_rendered: int
    camera_frames_skipped: int
    seconds: float
    outputs: list[str] = field(default_factory=list)

    @property
    def camera_frames_per_s(self) -> float:
        return self.camera_frames_rendered / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict:
        return {**asdict(self), "camera_frames_per_s": round(self.camera_frames_per_s, 2)}


@dataclass(frozen=True)
class Variant:
    """One variant listed in an `avsim edit` manifest: its name and scenario folder."""

    name: str
    folder: Path


# ---- edit variants -------------------------------------------------------------------------------
def is_variants_folder(path: Path) -> bool:
    """True when `path` holds an `avsim edit` manifest (`manifest.json`, format avsim-edit-manifest)."""
    manifest = Path(path) / EDIT_MANIFEST_NAME
    if not manifest.is_file():
        return False
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == EDIT_MANIFEST_FORMAT


def read_variants(path: Path) -> list[Variant]:
    """The variants of an `avsim edit` output folder, in manifest order.

    Each `folder` must be a plain name inside `path` that exists (no separators, no `..`), and
    no two variants may share one; anything else is an AvsimInputError naming the field.
    """
    manifest = Path(path) / EDIT_MANIFEST_NAME
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AvsimInputError(manifest, "manifest", f"unreadable: {exc}") from None
    entries = doc.get("variants") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise AvsimInputError(manifest, "variants", "expected a non-empty list of variants")
    variants, seen = [], set()
    for i, entry in enumerate(entries):
        folder = entry.get("folder") if isinstance(entry, dict) else None
        field_name = f"variants[{i}].folder"
        if not isinstance(folder, str) or not folder or folder in (".", "..") or "/" in folder or "\\" in folder:
            raise AvsimInputError(manifest, field_name, f"expected a folder name inside {path}, got {folder!r}")
        if folder in seen:
            raise AvsimInputError(manifest, field_name, f"folder {folder!r} is listed twice")
        if not (Path(path) / folder).is_dir():
            raise AvsimInputError(manifest, field_name, f"no such variant folder {folder!r}")
        seen.add(folder)
        name = entry.get("name", folder)
        variants.append(Variant(str(name), Path(path) / folder))
    return variants


def variants_summary_document(variants: list[Variant], summaries: list[RenderSummary]) -> dict:
    """`OUT/render_summary.json` for a rendered set of edit variants (no paths of the inputs)."""
    return {
        "format": VARIANTS_SUMMARY_FORMAT,
        "variants": [{"name": v.name, **s.to_json()} for v, s in zip(variants, summaries)],
        "camera_frames_rendered": sum(s.camera_frames_rendered for s in summaries),
        "camera_frames_skipped": sum(s.camera_frames_skipped for s in summaries),
        "seconds": round(sum(s.seconds for s in summaries), 3),
    }


def run_render_variants(path: Path, opts: RenderOptions, progress=None, on_variant=None) -> list[RenderSummary]:
    """Render every variant of an `avsim edit` output folder with the same `opts`.

    Variants go to `opts.out/<scenario_id>/...` (ids differ per variant); each is resumable on
    its own, and `opts.out/render_summary.json` lists them all. `on_variant(i, variant,
    scenario)` is called before variant i renders (progress bars). Returns one summary per variant.
    """
    variants = read_variants(path)
    summaries: list[RenderSummary] = []
    clip_owner: dict[str, str] = {}
    for i, variant in enumerate(variants):
        scenario = _load(variant.folder)
        clip_id = writer.safe_name(scenario.scenario_id)
        if clip_id in clip_owner:
            raise AvsimInputError(
                variant.folder, "scenario_id", f"{scenario.scenario_id!r} is also the id of variant {clip_owner[clip_id]!r}"
            )
        clip_owner[clip_id] = variant.name
        if on_variant is not None:
            on_variant(i, variant, scenario)
        summaries.append(run_render(scenario, opts, progress=progress))
        del scenario
    doc = variants_summary_document(variants, summaries)
    with atomic_output_path(opts.out / "render_summary.json") as tmp:
        Path(tmp).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return summaries


# ---- planning ------------------------------------------------------------------------------------
def select_frames(n_frames: int, fps: float, start_s: float | None, end_s: float | None, frames: str | None) -> tuple[int, int]:
    """[first, stop) frame indices from --start/--end (seconds from the clip start, inclusive)
    or --frames ("N" = the first N frames, "A:B" = frames A..B-1)."""
    if frames is not None and (start_s is not None or end_s is not None):
        raise typer.BadParameter("use either --frames or --start/--end, not both")
    first, stop = 0, n_frames
    if frames is not None:
        try:
            if ":" in frames:
                a, b = frames.split(":", 1)
                first, stop = int(a or 0), int(b) if b else n_frames
            else:
                stop = int(frames)
        except ValueError:
            raise typer.BadParameter(f"--frames: expected N or A:B, got {frames!r}") from None
    if start_s is not None:
        first = math.ceil(start_s * fps - 1e-9)
    if end_s is not None:
        stop = math.floor(end_s * fps + 1e-9) + 1
    first, stop = max(first, 0), min(stop, n_frames)
    if stop <= first:
        raise typer.BadParameter(f"no frames selected (the clip has {n_frames} frames at {fps:g} fps)")
    return first, stop


def plan_jobs(clip_id: str, cameras: tuple[str, ...], first: int, stop: int, opts: RenderOptions) -> list[writer.CameraJob]:
    ranges = writer.chunk_ranges(stop - first, opts.chunk_frames)
    jobs = []
    for k, (a, b) in enumerate(ranges):
        cid = writer.chunk_clip_id(clip_id, k, len(ranges))
        for cam in cameras:
            outputs = tuple(writer.camera_video_paths(opts.out, cid, cam, opts.layout))
            png = writer.png_folder(opts.out, cid, cam) if opts.png else None
            jobs.append(writer.CameraJob(cam, cid, first + a, first + b, outputs, png))
    return jobs


def resolve_rig(scenario, name: str):
    """The rig `--rig name` asks for: the scenario's own, or a default one by name."""
    return scenario.rig if name == "scenario" else named_rig(name)


# ---- execution -------------------------------------------------------------------------------------
_WORKER: dict = {}


def _init_worker(scenario, opts: RenderOptions, queue) -> None:
    from avsim.render.frame import SceneRenderer

    rig = resolve_rig(scenario, opts.rig)
    _WORKER["renderer"] = SceneRenderer(
        scenario, rig=rig, cameras=opts.cameras, size=(opts.width_px, opts.height_px), fps=opts.fps, backend=opts.backend
    )
    _WORKER["opts"] = opts
    _WORKER["queue"] = queue


def _render_segment(segment: writer.Segment, on_frame=None) -> int:
    """Render and encode one segment with this process's renderer (see `_init_worker`)."""
    renderer = _WORKER["renderer"]
    opts: RenderOptions = _WORKER["opts"]
    cam_index = renderer.rig.index(segment.camera)
    frames = (renderer.render_camera(f, cam_index) for f in range(segment.start, segment.stop))
    return writer.write_segment(frames, segment, opts.width_px, opts.height_px, opts.fps, on_frame=on_frame, preset=opts.preset)


def _run_segment(segment: writer.Segment) -> int:
    queue = _WORKER["queue"]
    pending = [0]

    def tick() -> None:
        pending[0] += 1
        if queue is not None and pending[0] >= 10:
            queue.put(pending[0])
            pending[0] = 0

    n = _render_segment(segment, on_frame=tick)
    if queue is not None and pending[0]:
        queue.put(pending[0])
    return n


def run_render(scenario, opts: RenderOptions, progress=None) -> RenderSummary:
    """Render `scenario` per `opts`; returns the run summary. `progress(n)` is called as frames finish."""
    t0 = time.perf_counter()
    rig = resolve_rig(scenario, opts.rig)
    cameras = tuple(opts.cameras) if opts.cameras else rig.names
    for cam in cameras:
        if cam not in rig.names:
            raise AvsimInputError("--cameras", cam, f"no such camera; the rig has {', '.join(rig.names)}")
    n_total = len(scenario.frame_timestamps(opts.fps))
    first, stop = select_frames(n_total, opts.fps, opts.start_s, opts.end_s, opts.frames)
    clip_id = writer.safe_name(scenario.scenario_id)
    jobs = plan_jobs(clip_id, cameras, first, stop, opts)
    todo = [j for j in jobs if opts.overwrite or not j.done()]
    segments = [s for j in todo for s in j.segments() if opts.overwrite or not s.done()]
    total = sum(j.stop - j.start for j in jobs)
    rendered_planned = sum(s.stop - s.start for s in segments)
    if progress is not None and total > rendered_planned:
        progress(total - rendered_planned)
    opts = RenderOptions(**{**asdict(opts), "cameras": cameras})
    rendered = 0
    if segments and opts.workers <= 1:
        _init_worker(scenario, opts, None)
        try:
            on_frame = (lambda: progress(1)) if progress is not None else None
            for segment in segments:
                rendered += _render_segment(segment, on_frame)
        finally:
            _WORKER.clear()
    elif segments:
        rendered = _run_pool(scenario, opts, segments, progress)
    for job in todo:
        writer.assemble_job(job)
    outputs = [str(p) for j in jobs for p in j.outputs]
    if opts.mosaic:
        outputs += _write_mosaics(opts, jobs)
    if opts.overlay is not None:
        outputs += _write_overlays(opts, jobs)
    summary = RenderSummary(clip_id, list(cameras), stop - first, rendered, total - rendered, time.perf_counter() - t0, outputs)
    summary_path = opts.out / clip_id / "render_summary.json"
    with atomic_output_path(summary_path) as tmp:
        Path(tmp).write_text(json.dumps(summary.to_json(), indent=2) + "\n", encoding="utf-8")
    return summary


def _run_pool(scenario, opts: RenderOptions, segments: list[writer.Segment], progress) -> int:
    ctx = mp.get_context("spawn")  # no inherited state: safe with numba / torch / encoders
    manager = ctx.Manager()
    queue = manager.Queue()
    rendered = 0
    try:
        with ProcessPoolExecutor(opts.workers, mp_context=ctx, initializer=_init_worker, initargs=(scenario, opts, queue)) as pool:
            # longest first, so the pool's greedy scheduling ends evenly
            ordered = sorted(segments, key=lambda s: -(s.stop - s.start))
            pending = {pool.submit(_run_segment, s) for s in ordered}
            while pending:
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for f in done:
                    rendered += f.result()
                _drain(queue, progress)
            _drain(queue, progress)
    finally:
        manager.shutdown()
    return rendered


def _drain(queue, progress) -> None:
    while not queue.empty():
        n = queue.get()
        if progress is not None:
            progress(n)


def _write_mosaics(opts: RenderOptions, jobs: list[writer.CameraJob]) -> list[str]:
    out = []
    for clip_id in dict.fromkeys(j.clip_id for j in jobs):
        videos = {j.camera: j.outputs[0] for j in jobs if j.clip_id == clip_id}
        path = writer.mosaic_path(opts.out, clip_id)
        if opts.overwrite or not path.is_file():
            writer.write_mosaic(videos, path, opts.fps)
        out.append(str(path))
    return out


def _write_overlays(opts: RenderOptions, jobs: list[writer.CameraJob]) -> list[str]:
    assert opts.overlay is not None
    if not opts.overlay.is_dir():
        raise AvsimInputError(opts.overlay, "--overlay", "not a folder of real camera frames")
    out = []
    for job in jobs:
        path = writer.overlay_path(opts.out, job.clip_id, job.camera)
        if opts.overwrite or not path.is_file():
            real = writer.real_frames(opts.overlay, job.camera, job.clip_id)
            writer.write_overlay(job.outputs[0], real, path, opts.fps)
        out.append(str(path))
    return out


# ---- the command -------------------------------------------------------------------------------------
def _parse_size(value: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in value.lower().split("x"))
    except ValueError:
        raise typer.BadParameter(f"--size: expected WxH such as 1280x720, got {value!r}") from None
    if w <= 0 or h <= 0 or w % 2 or h % 2:
        raise typer.BadParameter(f"--size: width and height must be positive and even, got {value!r}")
    return w, h


def _load(path: Path):
    from avsim.scenario.io import load_scenario

    if not path.exists():
        raise AvsimInputError(path, "scenario", "no such scenario folder")
    return load_scenario(path)


@app.command("render")
def render_command(
    scenario: Path = typer.Argument(..., help="Scenario folder (avsim native format, e.g. from `avsim sample` or `avsim convert`), or an `avsim edit` output folder (manifest.json): every variant is rendered."),
    out: Path = typer.Argument(..., help="Output folder; videos go to OUT/<clip>/<clip>.<camera>.mp4."),
    cameras: str = typer.Option(None, "--cameras", help="Comma-separated camera names (default: every camera of the rig)."),
    start: float = typer.Option(None, "--start", help="First time to render, seconds from the clip start."),
    end: float = typer.Option(None, "--end", help="Last time to render, seconds from the clip start (inclusive)."),
    frames: str = typer.Option(None, "--frames", help="Frames to render: N (the first N) or A:B (frames A..B-1)."),
    fps: float = typer.Option(style.DEFAULT_FPS, "--fps", help="Render rate in frames per second."),
    size: str = typer.Option(f"{style.DEFAULT_WIDTH_PX}x{style.DEFAULT_HEIGHT_PX}", "--size", help="Output frame size WxH."),
    chunk: int = typer.Option(0, "--chunk", help="Split the clip into chunks of this many frames (e.g. 121), written as <clip>_<k>; 0 = one video."),
    workers: int = typer.Option(1, "--workers", help="Worker processes (work unit: 150 frames of one camera)."),
    overlay: Path = typer.Option(None, "--overlay", help="Folder of real camera frames (<camera>.mp4 or <camera>/*.jpg) to blend the control video on."),
    mosaic: bool = typer.Option(False, "--mosaic", help="Also write a labelled mosaic video of all cameras."),
    png: bool = typer.Option(False, "--png", help="Also write every frame as PNG under OUT/<clip>/png/<camera>/."),
    layout: str = typer.Option("default", "--layout", help="default: OUT/<clip>/<clip>.<camera>.mp4; posttrain: OUT/control_input_hdmap_bbox/ftheta_<camera>/<clip>.mp4; both."),
    rig: str = typer.Option("scenario", "--rig", help="Camera rig: the scenario's own (scenario), or cosmos (the 7-camera model rig on the same ego), nuscenes, av2, waymo."),
    backend: str = typer.Option("numba", "--backend", help="Rasteriser: numba (CPU) or torch (GPU when present)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Re-render videos that already exist (default: keep them, resume)."),
    preset: str = typer.Option(writer.DEFAULT_PRESET, "--preset", help="libx264 speed preset (crf 18 always): ultrafast ... veryslow."),
) -> None:
    """Render a scenario into world-scenario control videos, one per camera.

    SCENARIO may also be the output folder of `avsim edit`: every variant it lists is rendered
    with the same options to OUT/<scenario_id>/..., and OUT/render_summary.json lists them all.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    if layout not in writer.LAYOUTS:
        raise typer.BadParameter(f"--layout: expected one of {', '.join(writer.LAYOUTS)}, got {layout!r}")
    if rig not in RIG_CHOICES:
        raise typer.BadParameter(f"--rig: expected one of {', '.join(RIG_CHOICES)}, got {rig!r}")
    if backend not in ("numba", "torch"):
        raise typer.BadParameter(f"--backend: expected numba or torch, got {backend!r}")
    if not (math.isfinite(fps) and fps > 0):
        raise typer.BadParameter(f"--fps: must be > 0, got {fps}")
    if preset not in X264_PRESETS:
        raise typer.BadParameter(f"--preset: expected one of {', '.join(X264_PRESETS)}, got {preset!r}")
    if workers < 1 or chunk < 0:
        raise typer.BadParameter("--workers must be >= 1 and --chunk >= 0")
    width, height = _parse_size(size)
    opts = RenderOptions(
        out=out, cameras=tuple(c.strip() for c in cameras.split(",") if c.strip()) if cameras else None,
        start_s=start, end_s=end, frames=frames, fps=fps, width_px=width, height_px=height, chunk_frames=chunk,
        workers=min(workers, os.cpu_count() or 1) if workers > 1 else 1, overlay=overlay, mosaic=mosaic, png=png,
        layout=layout, rig=rig, backend=backend, overwrite=overwrite, preset=preset,
    )  # fmt: skip
    # bad input fails here, in one line, before the progress bar appears
    variants_mode = is_variants_folder(scenario)
    n_variants = len(read_variants(scenario)) if variants_mode else 0
    scen = None if variants_mode else _load(scenario)
    console = Console(stderr=True)
    with Progress(
        TextColumn("[bold]render"), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("camera-frames"), TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=False,
    ) as bar:  # fmt: skip
        task = bar.add_task("", total=None)

        def advance(n: int) -> None:
            bar.advance(task, n)

        def plan(scen, description: str = "") -> None:
            # the bar counts camera-frames of the scenario about to render (of each in turn for variants)
            n_cams = len(opts.cameras or resolve_rig(scen, rig).names)
            first, stop = select_frames(len(scen.frame_timestamps(fps)), fps, start, end, frames)
            bar.reset(task, total=n_cams * (stop - first), description=description)

        if variants_mode:
            summaries = run_render_variants(
                scenario, opts, progress=advance,
                on_variant=lambda i, v, scen: plan(scen, f"{i + 1}/{n_variants} {v.name}"),
            )  # fmt: skip
        else:
            plan(scen)
            summaries = [run_render(scen, opts, progress=advance)]
    for summary in summaries:
        console.print(
            f"rendered {summary.clip_id}: {summary.frames} frames x {len(summary.cameras)} cameras "
            f"({summary.camera_frames_rendered} camera-frames rendered, {summary.camera_frames_skipped} kept) "
            f"in {summary.seconds:.1f} s = {summary.camera_frames_per_s:.1f} camera-frames/s -> {out}"
        )
    if variants_mode:
        rendered = sum(x.camera_frames_rendered for x in summaries)
        kept = sum(x.camera_frames_skipped for x in summaries)
        console.print(
            f"rendered {len(summaries)} variants: {rendered} camera-frames rendered, {kept} kept "
            f"in {sum(x.seconds for x in summaries):.1f} s -> {out} (summary: {out / 'render_summary.json'})"
        )
