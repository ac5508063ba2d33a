"""`avsim render SCENARIO OUT`: world-scenario control videos, one per camera.

This module only parses the command line and calls the library entry point,
`avsim.render.run.runner` (`run_render`, `run_render_variants`), which plans, runs, resumes and
summarises the work. The names below from the runner stay importable from here too.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from avsim.core.errors import AvsimInputError
from avsim.render import style
from avsim.render.run import memory as memory_plan
from avsim.render.run import writer
from avsim.render.run.runner import (
    EDIT_MANIFEST_FORMAT,
    EDIT_MANIFEST_NAME,
    RIG_CHOICES,
    VARIANTS_SUMMARY_FORMAT,
    X264_PRESETS,
    FrameSelectionError,
    RenderOptions,
    RenderSummary,
    Variant,
    check_cameras,
    is_variants_folder,
    load_scenario_folder,
    plan_jobs,
    plan_overlay,
    progress_units,
    read_variants,
    render_sizes,
    resolve_rig,
    run_render,
    run_render_variants,
    select_frames,
    variants_summary_document,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from avsim.render.labels.merge import LabelFiles
    from avsim.scenario import Scenario

__all__ = [
    "EDIT_MANIFEST_FORMAT",
    "EDIT_MANIFEST_NAME",
    "RIG_CHOICES",
    "VARIANTS_SUMMARY_FORMAT",
    "X264_PRESETS",
    "RenderOptions",
    "RenderSummary",
    "Variant",
    "app",
    "is_variants_folder",
    "plan_jobs",
    "read_variants",
    "render_command",
    "resolve_rig",
    "run_render",
    "run_render_variants",
    "select_frames",
    "variants_summary_document",
]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


# ---- options -------------------------------------------------------------------------------------
MAX_SIDE_PX = 8192  # a frame side above 8K is no camera's; bounds memory (a 100000x100000 frame is 149 GiB)
MAX_FPS = 1000.0  # timestamps are built per frame: 1e9 fps would be 2e10 of them for 20 s


SIZE_HELP = ("WxH: every camera at exactly that size (a camera of another aspect is stretched, and a line says so); "
             "xH: each camera at its own aspect, H pixels high. Default: each camera at its own aspect, "
             f"{style.DEFAULT_HEIGHT_PX} high ({style.DEFAULT_WIDTH_PX}x{style.DEFAULT_HEIGHT_PX} for a 16:9 camera).")


def _parse_size(value: str | None) -> tuple[int, int, bool]:
    """(width, height, exact) of `--size`: WxH exact, xH (or nothing: 720) each camera's own aspect at that height."""
    if value is None:
        return style.DEFAULT_WIDTH_PX, style.DEFAULT_HEIGHT_PX, False
    exact = not value.lower().startswith("x")
    try:
        w, h = (int(v) for v in value.lower().split("x")) if exact else (0, int(value[1:]))
    except ValueError:
        raise typer.BadParameter(f"--size: expected WxH such as 1280x720, or xH such as x720, got {value!r}") from None
    w = w if exact else 2 * round(h * style.DEFAULT_WIDTH_PX / style.DEFAULT_HEIGHT_PX / 2)  # a 16:9 camera's width at H
    if w <= 0 or h <= 0 or w % 2 or h % 2:
        raise typer.BadParameter(f"--size: width and height must be positive and even, got {value!r}")
    if max(w, h) > MAX_SIDE_PX:
        raise typer.BadParameter(f"--size: each side at most {MAX_SIDE_PX} px, got {value!r}")
    return w, h, exact


LABEL_FILES_HELP = ("Label layout: compact (parquet tables beside index.json, about a tenth of the bytes), standard (COCO, "
                    "nuScenes-style boxes3d.json, OpenLane files) or both (docs/labels.md).")
IMAGES_HELP = "Also write every labelled frame as an image file (jpg or png) under labels/images/<camera>/, named by the COCO files."


LABEL_FILES_OPTION = typer.Option("compact", "--label-files", help=LABEL_FILES_HELP)
IMAGES_OPTION = typer.Option(None, "--images", help=IMAGES_HELP)


def _size_options(size: str | None) -> dict[str, Any]:
    """`RenderOptions`' size fields of `--size` (`_parse_size`)."""
    width, height, exact = _parse_size(size)
    return {"width_px": width, "height_px": height, "exact_size": exact}


def _label_options(labels: bool, label_files: str, images: str | None) -> dict[str, Any]:
    """`RenderOptions`' label fields: `--labels` (implied by `--images`), the checked `--label-files` and `--images`."""
    return {"labels": labels or images is not None, "label_files": _check_label_choices(label_files, images), "label_images": images}


def _check_label_choices(label_files: str, images: str | None) -> LabelFiles:
    """`--label-files` as its layout name, or a usage error (as `--images`)."""
    from avsim.render.labels.merge import LABEL_FILES
    from avsim.render.labels.records import IMAGE_FORMATS

    if images is not None and images not in IMAGE_FORMATS:
        raise typer.BadParameter(f"--images: expected one of {', '.join(IMAGE_FORMATS)}, got {images!r}")
    for name in LABEL_FILES:
        if label_files == name:
            return name
    raise typer.BadParameter(f"--label-files: expected one of {', '.join(LABEL_FILES)}, got {label_files!r}")


def _check_choices(layout: str, rig: str, backend: str, fps: float, preset: str, workers: int, chunk: int, aa: str = "on",
                   max_memory_mib: int = 0) -> None:  # fmt: skip
    if max_memory_mib < 0:
        raise typer.BadParameter(f"--max-memory-mib: must be >= 0 (0: no budget), got {max_memory_mib}")
    if aa not in ("on", "off"):
        raise typer.BadParameter(f"--aa: expected on or off, got {aa!r}")
    if layout not in writer.LAYOUTS:
        raise typer.BadParameter(f"--layout: expected one of {', '.join(writer.LAYOUTS)}, got {layout!r}")
    if rig not in RIG_CHOICES:
        raise typer.BadParameter(f"--rig: expected one of {', '.join(RIG_CHOICES)}, got {rig!r}")
    if backend not in ("numba", "torch"):
        raise typer.BadParameter(f"--backend: expected numba or torch, got {backend!r}")
    if not (math.isfinite(fps) and 0 < fps <= MAX_FPS):
        raise typer.BadParameter(f"--fps: must be > 0 and at most {MAX_FPS:g}, got {fps}")
    if preset not in X264_PRESETS:
        raise typer.BadParameter(f"--preset: expected one of {', '.join(X264_PRESETS)}, got {preset!r}")
    if workers < 1 or chunk < 0:
        raise typer.BadParameter("--workers must be >= 1 and --chunk >= 0")


def _selected_frames(scenario: Scenario, opts: RenderOptions) -> tuple[int, int]:
    """`select_frames` for the command line: a bad selection is a usage error."""
    try:
        return select_frames(len(scenario.frame_times(opts.fps)), opts.fps, opts.start_s, opts.end_s, opts.frames)
    except FrameSelectionError as exc:
        raise typer.BadParameter(str(exc)) from None


# ---- progress and report -------------------------------------------------------------------------
def _progress_bar(console: Console) -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]render"), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("frames"), TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=False,
    )  # fmt: skip


class _BarTask:
    """The bar's one task: counts stream-frames (camera videos, mosaic, overlays) of the scenario about to render."""

    def __init__(self, bar: Progress, opts: RenderOptions) -> None:
        self.bar, self.opts = bar, opts
        self.task = bar.add_task("", total=None)

    def advance(self, n: int) -> None:
        self.bar.advance(self.task, n)

    def plan(self, scenario: Scenario, description: str = "") -> None:
        n_cams = len(self.opts.cameras or resolve_rig(scenario, self.opts.rig).names)
        first, stop = _selected_frames(scenario, self.opts)
        self.bar.reset(self.task, total=progress_units(n_cams, stop - first, self.opts), description=description)


def _report(console: Console, summaries: list[RenderSummary], out: Path, variants_mode: bool, max_memory_mib: int = 0) -> None:
    for summary in summaries:
        console.print(
            f"rendered {summary.clip_id}: {summary.frames} frames x {len(summary.cameras)} cameras "
            f"({summary.camera_frames_rendered} camera-frames rendered, {summary.camera_frames_skipped} kept) "
            f"in {summary.seconds:.1f} s = {summary.camera_frames_per_s:.1f} camera-frames/s -> {out}"
        )
        extra = [f"{n} {kind} frames" for n, kind in ((summary.mosaic_frames_rendered, "mosaic"), (summary.overlay_frames_rendered, "overlay")) if n]
        if summary.camera_frames_rendered or extra:
            console.print(
                f"  {', '.join(extra) + '; ' if extra else ''}CPU s: render {summary.render_cpu_s:.1f}, "
                f"encode {summary.encode_cpu_s:.1f}, composite {summary.composite_cpu_s:.1f}"
            )
        if 0 < max_memory_mib < summary.peak_estimate_mib:
            console.print(f"note: {summary.clip_id}: a worker is estimated to need {summary.peak_estimate_mib:.0f} MiB, over "
                          f"--max-memory-mib {max_memory_mib}: one camera with its streams is the smallest unit (a smaller "
                          "--size, fewer --overlay cameras or a larger budget bring it under)")  # fmt: skip
    if variants_mode:
        rendered = sum(x.camera_frames_rendered for x in summaries)
        kept = sum(x.camera_frames_skipped for x in summaries)
        console.print(
            f"rendered {len(summaries)} variants: {rendered} camera-frames rendered, {kept} kept "
            f"in {sum(x.seconds for x in summaries):.1f} s -> {out} (summary: {out / 'render_summary.json'})"
        )


def _note_stretch(console: Console, scenario: Scenario, opts: RenderOptions) -> None:
    """One line when an exact `--size` stretches some camera (`geometry.sizes.stretch_note`)."""
    from avsim.render.geometry.sizes import stretch_note

    rig = resolve_rig(scenario, opts.rig)
    rig = rig.subset(list(opts.cameras or rig.names))
    note = stretch_note(rig, tuple(render_sizes(scenario, opts).values()))
    if note:
        console.print(note, markup=False, highlight=False, soft_wrap=True)


def _check_scenario(console: Console, scenario: Scenario, opts: RenderOptions) -> None:
    """Unknown cameras and real frames that do not fit fail here, in one line, before anything is written."""
    if opts.cameras:
        check_cameras(opts.cameras, resolve_rig(scenario, opts.rig))
    if opts.overlay_fps is not None and not (math.isfinite(opts.overlay_fps) and opts.overlay_fps > 0):
        raise typer.BadParameter(f"--overlay-fps: must be > 0, got {opts.overlay_fps}")
    for real in plan_overlay(scenario, opts).values():
        if real.message():
            console.print(real.message())
    _note_stretch(console, scenario, opts)  # once the render is known to go ahead


# ---- the command -------------------------------------------------------------------------------------
@app.command("render")
def render_command(
    scenario: Path = typer.Argument(..., help="Scenario folder (avsim native format, e.g. from `avsim sample` or `avsim convert`), or an `avsim edit` output folder (manifest.json): every variant is rendered."),
    out: Path = typer.Argument(..., help="Output folder; videos go to OUT/<clip>/<clip>.<camera>.mp4."),
    cameras: str = typer.Option(None, "--cameras", help="Comma-separated camera names (default: every camera of the rig)."),
    start: float = typer.Option(None, "--start", help="First time to render, seconds from the clip start."),
    end: float = typer.Option(None, "--end", help="Last time to render, seconds from the clip start (inclusive)."),
    frames: str = typer.Option(None, "--frames", help="Frames to render: N (the first N) or A:B (frames A..B-1)."),
    fps: float = typer.Option(style.DEFAULT_FPS, "--fps", help="Render rate in frames per second."),
    size: str = typer.Option(None, "--size", help=SIZE_HELP),
    chunk: int = typer.Option(0, "--chunk", help="Split the clip into chunks of this many frames (e.g. 121), written as <clip>_<k>; 0 = one video."),
    workers: int = typer.Option(1, "--workers", help="Worker processes (work unit: 150 frames of every camera, mosaic and overlay)."),
    overlay: Path = typer.Option(None, "--overlay", help="Folder of real camera frames (<camera>.mp4 or <camera>/*.jpg) to blend the control frames on (paired by time, docs/render.md)."),
    overlay_offset: float = typer.Option(0.0, "--overlay-offset", help="Render time t shows real time t + S (real time 0: the first real frame)."),
    overlay_fps: float = typer.Option(None, "--overlay-fps", help="Rate of an image folder of real frames whose names carry no 16/19-digit timestamp."),
    mosaic: bool = typer.Option(False, "--mosaic", help="Also write a labelled mosaic video of all cameras."),
    png: bool = typer.Option(False, "--png", help="Also write every frame as PNG under OUT/<clip>/png/<camera>/."),
    layout: str = typer.Option("default", "--layout", help="default: OUT/<clip>/<clip>.<camera>.mp4; posttrain: OUT/control_input_hdmap_bbox/ftheta_<camera>/<clip>.mp4; both."),
    rig: str = typer.Option("scenario", "--rig", help="Camera rig: the scenario's own (scenario), or cosmos (the 7-camera model rig on the same ego), nuscenes, av2, waymo."),
    backend: str = typer.Option("numba", "--backend", help="Rasteriser: numba (CPU) or torch (GPU when present)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Re-render videos that already exist (default: keep them, resume)."),
    preset: str = typer.Option(writer.DEFAULT_PRESET, "--preset", help="libx264 speed preset (crf 18 always): ultrafast ... veryslow."),
    aa: str = typer.Option("on", "--aa", help="Anti-aliasing: on (4x MSAA on edges, the look of the released model's training renders) or off (one sample per pixel, exact palette colours)."),
    max_memory: int = typer.Option(memory_plan.DEFAULT_MAX_MEMORY_MIB, "--max-memory-mib", help="Memory budget of one render process in MiB: a time segment whose encoders would pass it is written in several passes (same bytes; docs/render.md). 0: no budget."),
    labels: bool = typer.Option(False, "--labels", help="Also write labels (COCO 2-D boxes + masks, 3-D boxes, OpenLane lanes) to OUT/<clip>/labels/ from the same pass (docs/labels.md)."),
    label_files: str = LABEL_FILES_OPTION, images: str = IMAGES_OPTION,
) -> None:
    """Render a scenario into world-scenario control videos, one per camera.

    SCENARIO may also be the output folder of `avsim edit`: every variant it lists is rendered
    with the same options to OUT/<scenario_id>/..., and OUT/render_summary.json lists them all.
    """
    from rich.console import Console

    _check_choices(layout, rig, backend, fps, preset, workers, chunk, aa, max_memory)
    opts = RenderOptions(
        out=out, cameras=tuple(c.strip() for c in cameras.split(",") if c.strip()) if cameras else None,
        start_s=start, end_s=end, frames=frames, fps=fps, **_size_options(size), chunk_frames=chunk,
        workers=min(workers, os.cpu_count() or 1) if workers > 1 else 1, overlay=overlay, mosaic=mosaic, png=png,
        layout=layout, rig=rig, backend=backend, overwrite=overwrite, preset=preset, **_label_options(labels, label_files, images),
        antialias=aa == "on", overlay_offset_s=overlay_offset, overlay_fps=overlay_fps, max_memory_mib=max_memory,
    )  # fmt: skip
    _check_output(out)  # bad input fails here, in one line, before the progress bar appears
    variants_mode = is_variants_folder(scenario)
    n_variants = len(read_variants(scenario)) if variants_mode else 0
    scen = None if variants_mode else load_scenario_folder(scenario)
    console = Console(stderr=True)
    if scen is not None:
        _check_scenario(console, scen, opts)
    with _progress_bar(console) as bar:
        task = _BarTask(bar, opts)
        if scen is None:
            summaries = run_render_variants(
                scenario, opts, progress=task.advance,
                on_variant=lambda i, v, s: task.plan(s, f"{i + 1}/{n_variants} {v.name}"),
            )  # fmt: skip
        else:
            task.plan(scen)
            summaries = [run_render(scen, opts, progress=task.advance, source=scenario)]
    _report(console, summaries, out, variants_mode, opts.max_memory_mib)


# ---- avsim labels -----------------------------------------------------------------------------------
@app.command("labels")
def labels_command(
    scenario: Path = typer.Argument(..., help="Scenario folder (avsim native format)."),
    out: Path = typer.Argument(..., help="Output folder; labels go to OUT/<clip>/labels/ (as `avsim render --labels`)."),
    cameras: str = typer.Option(None, "--cameras", help="Comma-separated camera names (default: every camera of the rig)."),
    start: float = typer.Option(None, "--start", help="First time, seconds from the clip start."),
    end: float = typer.Option(None, "--end", help="Last time, seconds from the clip start (inclusive)."),
    frames: str = typer.Option(None, "--frames", help="Frames: N (the first N) or A:B (frames A..B-1)."),
    fps: float = typer.Option(style.DEFAULT_FPS, "--fps", help="Frame rate (as `avsim render --fps`)."),
    size: str = typer.Option(None, "--size", help=SIZE_HELP),
    rig: str = typer.Option("scenario", "--rig", help="Camera rig: scenario, cosmos, nuscenes, av2, waymo."),
    label_files: str = LABEL_FILES_OPTION, images: str = IMAGES_OPTION,
) -> None:
    """Write labels (COCO 2-D boxes + masks, nuScenes-style 3-D boxes, OpenLane lanes) of a scenario's frames."""
    from rich.console import Console

    _check_choices("default", rig, "numba", fps, writer.DEFAULT_PRESET, 1, 0)
    opts = RenderOptions(
        out=out, cameras=tuple(c.strip() for c in cameras.split(",") if c.strip()) if cameras else None,
        start_s=start, end_s=end, frames=frames, fps=fps, **_size_options(size), rig=rig, **_label_options(True, label_files, images),
    )  # fmt: skip
    scen = load_scenario_folder(scenario)
    first, stop = _selected_frames(scen, opts)
    n_cams = len(opts.cameras or resolve_rig(scen, rig).names)
    check_cameras(opts.cameras or (), resolve_rig(scen, rig))
    _check_output(out)
    from avsim.render.run.labels import run_labels

    console = Console(stderr=True)
    _note_stretch(console, scen, opts)
    with _progress_bar(console) as bar:
        task = bar.add_task("labels", total=n_cams * (stop - first))
        folder = run_labels(scen, opts, progress=lambda n: bar.advance(task, n))
    console.print(f"labelled {stop - first} frames x {n_cams} cameras -> {folder}")


@app.command("labels-mmdet3d")
def labels_mmdet3d_command(
    out: Path = typer.Argument(..., help="The info file to write (.pkl); image paths in it are relative to its folder."),
    folders: list[Path] = typer.Argument(..., help="Label folders, or render / generate / `avsim run` outputs holding them."),
) -> None:
    """Write an mmdetection3d 1.1+ nuScenes-style info file of labelled clips (docs/labels.md)."""
    from avsim.render.labels.mmdet3d_info import MMDET3D_LAYOUT, write_mmdet3d_info
    from avsim.render.run.labels import find_label_folders

    found = find_label_folders(folders)
    if not found:
        raise AvsimInputError(folders[0], "labels", "no label folder (labels/index.json) found")
    _check_output(out.parent)
    n = write_mmdet3d_info(found, out)
    typer.echo(f"wrote {out}: {n} samples of {len(found)} clips ({MMDET3D_LAYOUT})", err=True)


def _check_output(out: Path) -> None:
    """OUT must be a folder we can write (created if missing); else one line, before any work."""
    if out.exists() and not out.is_dir():
        raise AvsimInputError(out, "output", "exists and is not a folder; refusing to write into it")
    probe = out
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise AvsimInputError(out, "OUT", f"{probe} is not a folder")
    if not os.access(probe, os.W_OK):
        raise AvsimInputError(out, "OUT", f"{probe} is not writable")
