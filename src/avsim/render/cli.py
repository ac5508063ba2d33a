"""`avsim labels`, `avsim labels-convert`, `avsim labels-mmdet3d`, and the option parsing that `avsim render` shares with them.

This module only parses the command line and calls the library entry points
(`avsim.render.run.labels.run_labels`, `avsim.render.labels.standard.write_standard`,
`avsim.render.labels.mmdet3d_info.write_mmdet3d_info`; the
`render` command lives in `avsim.edit.cli`, the lowest layer that also renders the variants of an
`avsim edit` output, and calls `avsim.render.run.runner.run_render`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.progress import progress_bar
from avsim.render import style
from avsim.render.run.plan import MAX_SIDE_PX, FrameSelectionError, RenderOptions, RenderPlan, rig_choices
from avsim.scenario import Scenario

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

SIZE_HELP = ("WxH: every camera at exactly that size (a camera of another aspect is stretched, and a line says so); "
             "xH: each camera at its own aspect, H pixels high. Default: each camera at its own aspect, "
             f"{style.DEFAULT_HEIGHT_PX} high ({style.DEFAULT_WIDTH_PX}x{style.DEFAULT_HEIGHT_PX} for a 16:9 camera).")
WAIT_HELP = "When another avsim process is writing OUT/<clip>, wait for it (default: stop with one line)."
RIG_HELP = f"Camera rig: the scenario's own (scenario), or a named rig on the same ego ({', '.join(rig_choices()[1:])})."
LABEL_FILES_HELP = ("Label layout: compact (parquet tables beside index.json: 1/28.7 of the standard files' bytes, measured on "
                    "the sample's 20 s x 7 cameras; `avsim labels-convert` writes the standard files from them), standard (COCO, "
                    "nuScenes-style boxes3d.json, OpenLane files) or both (docs/labels.md).")
IMAGES_HELP = "Also write every labelled frame as an image file (jpg or png) under labels/images/<camera>/, named by the COCO files."
_OPTION_NAMES = {"chunk_frames": "--chunk", "max_memory_mib": "--max-memory-mib", "label_files": "--label-files"}  # else --<field>


def size_fields(value: str | None) -> dict[str, Any]:
    """`RenderOptions`' size fields of `--size`: WxH every camera exactly; xH (or nothing: 720) each at its own aspect.

    Args:
        value: e.g. "1280x720", "x540" or None.

    Returns:
        {"width_px", "height_px", "exact_size"}; a malformed value is a usage error.
    """
    if value is None:
        return {"width_px": style.DEFAULT_WIDTH_PX, "height_px": style.DEFAULT_HEIGHT_PX, "exact_size": False}
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
    return {"width_px": w, "height_px": h, "exact_size": exact}


def label_fields(labels: bool, label_files: str, images: str | None) -> dict[str, Any]:
    """`RenderOptions`' label fields: `--labels` (implied by `--images`), `--label-files` and `--images`."""
    return {"labels": labels or images is not None, "label_files": label_files, "label_images": images}


def render_options(**fields: Any) -> RenderOptions:
    """`RenderOptions(**fields)`; an invalid value is a usage error naming its option.

    Args:
        fields: the options' fields (`cameras` as the comma-separated text of `--cameras`).

    Returns:
        The checked options.
    """
    text = fields.get("cameras")
    if isinstance(text, str):
        fields["cameras"] = tuple(c.strip() for c in text.split(",") if c.strip()) or None
    if fields.get("workers", 1) > 1:
        fields["workers"] = min(fields["workers"], os.cpu_count() or 1)
    try:
        return RenderOptions(**fields)
    except (AvsimValueError, FrameSelectionError) as exc:
        name, _, reason = str(exc).partition(":")
        raise typer.BadParameter(f"{_OPTION_NAMES.get(name, '--' + name.replace('_', '-'))}: {reason.strip()}") from None


def resolve_plan(scenario: Scenario, opts: RenderOptions) -> RenderPlan:
    """`RenderPlan.resolve` for the command line: a bad frame selection is a usage error."""
    try:
        return RenderPlan.resolve(scenario, opts)
    except FrameSelectionError as exc:
        raise typer.BadParameter(str(exc)) from None


def stretch_note(plan: RenderPlan) -> str | None:
    """One line when an exact `--size` stretches some camera (`geometry.sizes.stretch_note`), else None."""
    from avsim.render.geometry.sizes import stretch_note as note

    return note(plan.rig.subset(list(plan.cameras)), plan.sizes_px)


def check_output(out: Path) -> None:
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
    rig: str = typer.Option("scenario", "--rig", help=RIG_HELP),
    label_files: str = typer.Option("compact", "--label-files", help=LABEL_FILES_HELP),
    images: str = typer.Option(None, "--images", help=IMAGES_HELP),
    wait: bool = typer.Option(False, "--wait", help=WAIT_HELP),
) -> None:
    """Write labels (COCO 2-D boxes + masks, nuScenes-style 3-D boxes, OpenLane lanes) of a scenario's frames."""
    from avsim.render.run.labels import run_labels
    from avsim.scenario.io import load_scenario

    opts = render_options(out=out, cameras=cameras, start_s=start, end_s=end, frames=frames, fps=fps, rig=rig,
                          wait=wait, **size_fields(size), **label_fields(True, label_files, images))  # fmt: skip
    scen = load_scenario(scenario)
    plan = resolve_plan(scen, opts)
    check_output(out)
    note = stretch_note(plan)
    if note:
        typer.echo(note, err=True)
    with progress_bar("render", unit="frames") as bar:
        task = bar.add_task("labels", total=len(plan.cameras) * plan.n_frames)
        folder = run_labels(scen, opts, progress=lambda n: bar.advance(task, n))
    typer.echo(f"labelled {plan.n_frames} frames x {len(plan.cameras)} cameras -> {folder}", err=True)


@app.command("labels-convert")
def labels_convert_command(
    folders: list[Path] = typer.Argument(..., help="Compact label folders, or render / generate / `avsim run` outputs holding them."),
    drop_compact: bool = typer.Option(False, "--drop-compact", help="Remove the compact tables once the standard files are written (layout standard; default: both)."),
) -> None:
    """Write the standard label files (COCO, boxes3d.json, OpenLane) of compact label folders, byte for byte the files
    `--label-files standard` writes (docs/labels.md)."""
    from avsim.core.label_folders import find_label_folders
    from avsim.render.labels.compact import read_index
    from avsim.render.labels.merge import LabelFiles
    from avsim.render.labels.standard import write_standard

    found = find_label_folders(folders)
    if not found:
        raise AvsimInputError(folders[0], "labels", "no label folder (labels/index.json) found")
    layout: LabelFiles = "standard" if drop_compact else "both"
    with progress_bar("labels-convert", unit="cameras") as bar:
        task = bar.add_task("standard files", total=sum(len(read_index(f).get("cameras", [])) for f in found))
        for folder in found:
            written = write_standard(folder, layout, progress=lambda _cam: bar.advance(task))
            typer.echo(f"{folder}: {len(written)} standard files and folders written (layout {layout})", err=True)


@app.command("labels-mmdet3d")
def labels_mmdet3d_command(
    out: Path = typer.Argument(..., help="The info file to write (.pkl); image paths in it are relative to its folder."),
    folders: list[Path] = typer.Argument(..., help="Label folders, or render / generate / `avsim run` outputs holding them."),
    camera_names: str = typer.Option(None, "--camera-names", help="nuscenes: the six nuScenes camera names (CAM_FRONT, ...) by heading, "
                                     "other cameras left out; or CAMERA=NAME,... (default: avsim's names)."),
) -> None:
    """Write an mmdetection3d 1.1+ nuScenes-style info file of labelled clips (docs/labels.md)."""
    from avsim.core.label_folders import find_label_folders
    from avsim.render.labels.mmdet3d_info import MMDET3D_LAYOUT, write_mmdet3d_info

    found = find_label_folders(folders)
    if not found:
        raise AvsimInputError(folders[0], "labels", "no label folder (labels/index.json) found")
    check_output(out.parent)
    names: str | dict[str, str] | None = camera_names
    if camera_names is not None and camera_names != "nuscenes":
        pairs = [p.partition("=") for p in camera_names.split(",") if p.strip()]
        if not pairs or any(not a.strip() or not b.strip() or not eq for a, eq, b in pairs):
            raise typer.BadParameter(f"expected nuscenes or CAMERA=NAME,..., got {camera_names!r}", param_hint="--camera-names")
        names = {a.strip(): b.strip() for a, _, b in pairs}
    n = write_mmdet3d_info(found, out, names)
    typer.echo(f"wrote {out}: {n} samples of {len(found)} clips ({MMDET3D_LAYOUT})", err=True)
