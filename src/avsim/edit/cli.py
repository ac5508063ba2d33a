"""`avsim edit`, `avsim validate`, `avsim diff`, `avsim preview`, `avsim export-scene`, `avsim render`.

Each command parses its options and calls the library (`editfile`, `output`, `validate`,
`diff`, `preview`). Bad input raises AvsimInputError (one line, exit 1). `validate --strict`
and `edit --strict` exit 1 when there are findings; nothing is written when `edit` fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from avsim.core.errors import AvsimInputError
from avsim.core.typing import StrEnum
from avsim.render import cli as render_cli
from avsim.render import style
from avsim.render.run.plan import DEFAULT_MAX_MEMORY_MIB, DEFAULT_PRESET, Backend, FrameSelectionError, Layout, Preset
from avsim.scenario import Scenario

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


class AntiAliasing(StrEnum):
    """`avsim render --aa`."""

    ON = "on"
    OFF = "off"


def _load(path: Path) -> Scenario:
    from avsim.scenario.io import load_scenario

    return load_scenario(path)


@app.command("edit")
def edit_command(
    scenario: Path = typer.Argument(..., help="Input scenario folder."),
    edits: Path = typer.Argument(..., help="Edit file (YAML or JSON)."),
    out: Path = typer.Argument(..., help="Output folder: one scenario folder per variant + manifest.json."),
    strict: bool = typer.Option(False, "--strict", help="Fail (write nothing) if an edit introduces validation findings."),
    no_validate: bool = typer.Option(False, "--no-validate", help="Skip validation after each op."),
) -> None:
    """Apply an edit file to SCENARIO and write every variant to OUT."""
    from .editfile import VariantResult, apply_edit_file, load_edit_file
    from .output import check_edit_output, write_edit_output

    def progress(i: int, n: int, r: VariantResult) -> None:
        typer.echo(f"[{i + 1}/{n}] {r.name}: {len(r.new_findings)} new findings", err=True)

    check_edit_output(out)
    edit = load_edit_file(edits)
    source = _load(scenario)
    results = apply_edit_file(source, edit, validate=not no_validate, progress=progress)
    for r in results:
        for op_index, name in r.unchanged_ops:
            typer.echo(f"  {r.name} (op {op_index}): {name} changes nothing", err=True)
        for op_index, f in r.new_findings:
            typer.echo(f"  {r.name} (op {op_index}): {f}", err=True)
    if strict and any(r.new_findings for r in results):
        raise AvsimInputError(edits, "validation", "edits introduce findings (listed above); --strict writes nothing")
    write_edit_output(out, source, edit, results)
    typer.echo(f"wrote {len(results)} variant(s) to {out}", err=True)


@app.command("validate")
def validate_command(
    scenarios: list[Path] = typer.Argument(..., help="Scenario folder(s); an edit output's manifest.json is skipped, so `OUT/*` works."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when there is any finding."),
    as_json: bool = typer.Option(False, "--json", help="Print findings as JSON (one document; a list of them for several folders)."),
) -> None:
    """Check each SCENARIO: loading (format) errors, then overlaps, off-road vehicles, speed and
    acceleration limits, track gaps, conflicting lights and traffic rules (red_light, wrong_way,
    speed_limit, solid_line_crossing, stop_line, jaywalking).

    Each scenario prints a line with its name, finding count and folder, then its findings one
    per line under it (time, kind, ids, reason); several scenarios end with the total. --strict
    exits 1 when there are any.
    """
    from .output import scenario_folders
    from .validate import findings_document, validate_scenario

    docs, total = [], 0
    folders = scenario_folders(scenarios)
    for folder in folders:
        scn = _load(folder)
        findings = validate_scenario(scn)
        total += len(findings)
        docs.append(findings_document(scn, findings))
        if not as_json:  # each scenario's name first, its findings under it
            typer.echo(f"{scn.scenario_id}: {len(findings)} finding(s)  [{folder}]")
            for f in findings:
                typer.echo(f"  {f}")
    if as_json:
        typer.echo(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
    elif len(folders) > 1:
        typer.echo(f"{total} finding(s) in {len(folders)} scenarios")
    if strict and total:
        # an error rather than typer.Exit: `avsim.cli.main` runs typer with standalone_mode=False
        raise AvsimInputError(scenarios[0], "validation", f"{total} finding(s) with --strict")


@app.command("diff")
def diff_command(
    a: Path = typer.Argument(..., help="First scenario folder."),
    b: Path = typer.Argument(..., help="Second scenario folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the difference as JSON."),
    summary: bool = typer.Option(False, "--summary", help="Counts per kind only (agents, each map element type, lights)."),
) -> None:
    """What changed from A to B: time span, ego, every added, removed and changed agent, map
    element and light timeline, metadata keys.

    Tracks, map elements and lights present in only one of A and B are listed over their whole
    spans (also those a crop or time change removed); values of those in both are compared over
    the time both clips cover.
    """
    from .diff import diff_scenarios, diff_summary, format_diff

    d = diff_scenarios(_load(a), _load(b))
    if as_json:
        typer.echo(json.dumps(diff_summary(d) if summary else d, indent=2))
    else:
        typer.echo(format_diff(d, summary=summary))


@app.command("preview")
def preview_command(
    scenario: Path = typer.Argument(..., help="Scenario folder."),
    out: Path = typer.Argument(..., help="Output .mp4"),
    before: Path = typer.Option(None, "--before", help="Another scenario shown on the left (before | after)."),
    fps: float = typer.Option(10.0, "--fps", help="Preview frame rate."),
    size_px: int = typer.Option(640, "--size", help="Height (and width per panel) in pixels."),
    extent_m: float = typer.Option(0.0, "--extent-m", help="Side of the square view in metres (0: fit the ego path)."),
    overlay: bool = typer.Option(False, "--overlay", help="With --before: one panel, OTHER drawn as dashed ghosts under SCENARIO."),
) -> None:
    """Bird's-eye preview video: map, agents with ids and headings, ego, time stamp, legend."""
    from avsim.core.progress import progress_bar

    from .preview import preview_frame_count, write_preview

    if out.suffix.lower() != ".mp4":
        raise typer.BadParameter("OUT must end in .mp4")
    if fps <= 0 or size_px < 64:
        raise typer.BadParameter("--fps must be > 0 and --size >= 64")
    if overlay and before is None:
        raise typer.BadParameter("--overlay needs --before")
    after = _load(scenario)
    prior = _load(before) if before is not None else None
    with progress_bar("preview", unit="frames") as bar:
        task = bar.add_task(out.name, total=preview_frame_count(after, fps))
        n = write_preview(after, out, before=prior, fps=fps, size_px=size_px, extent_m=extent_m or None, overlay=overlay,
                          progress=lambda k: bar.advance(task, k))  # fmt: skip
    typer.echo(f"wrote {out} ({n} frames)", err=True)


def _frame_range(frames: str) -> tuple[int, int]:
    """`A:B` -> (A, B); a bad value is a one-line input error naming --frames."""
    a, sep, b = frames.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(a), int(b)
    except ValueError:
        raise AvsimInputError("--frames", "value", f"expected A:B (render frame indices, B exclusive), got {frames!r}") from None


@app.command("export-scene")
def export_scene_command(
    scenario: Path = typer.Argument(..., help="Scenario folder."),
    out: Path = typer.Argument(..., help="Output .glb (glTF 2.0 binary)."),
    time_s: float = typer.Option(None, "--time", help="One static scene at this time (seconds from the start; default 0)."),
    frames: str = typer.Option(None, "--frames", help="Render frames A:B at 30 fps (B exclusive): one node group per step."),
    every: int = typer.Option(1, "--every", help="With --frames, keep every N-th frame."),
) -> None:
    """3-D scene (glTF, +Y up, metres, world frame): map, agent boxes, ego box and path, camera frustums."""
    import time

    from avsim.core.errors import AvsimValueError

    from .export_scene import export_scene, select_times_s

    if out.suffix.lower() != ".glb":
        raise typer.BadParameter("OUT must end in .glb")
    scn = _load(scenario)
    try:
        times = select_times_s(scn, time_s=time_s, frames=_frame_range(frames) if frames else None, every=every)
    except AvsimValueError as exc:
        field, _, reason = str(exc).partition(": ")
        raise AvsimInputError(scenario, field, reason) from None
    start = time.monotonic()

    def progress(done: int, total: int) -> None:
        if time.monotonic() - start > 2.0 and (done == total or done % 10 == 0):
            typer.echo(f"export-scene: {done}/{total} time steps", err=True)

    summary = export_scene(scn, out, times, progress=progress)
    typer.echo(f"wrote {out} ({len(summary.times_s)} time step(s), {summary.map_nodes} map, {summary.agent_nodes} agent, "
               f"{summary.camera_nodes} camera nodes, {summary.size_bytes} bytes)", err=True)  # fmt: skip


# ---- avsim render ---------------------------------------------------------------------------------
# The command lives here, in the lowest layer that knows both a scenario and an `avsim edit` output
# (`avsim.edit.render_variants`); its options are parsed with `avsim.render.cli`'s helpers.
@app.command("render")
def render_command(
    scenario: Path = typer.Argument(..., help="Scenario folder (avsim native format, e.g. from `avsim sample` or `avsim convert`), or an `avsim edit` output folder (manifest.json): every variant is rendered."),
    out: Path = typer.Argument(..., help="Output folder; videos go to OUT/<clip>/<clip>.<camera>.mp4."),
    cameras: str = typer.Option(None, "--cameras", help="Comma-separated camera names (default: every camera of the rig)."),
    start: float = typer.Option(None, "--start", help="First time to render, seconds from the clip start."),
    end: float = typer.Option(None, "--end", help="Last time to render, seconds from the clip start (inclusive)."),
    frames: str = typer.Option(None, "--frames", help="Frames to render: N (the first N) or A:B (frames A..B-1)."),
    fps: float = typer.Option(style.DEFAULT_FPS, "--fps", help="Render rate in frames per second."),
    size: str = typer.Option(None, "--size", help=render_cli.SIZE_HELP),
    chunk: int = typer.Option(0, "--chunk", help="Split the clip into chunks of this many frames (e.g. 121), written as <clip>_<k>; 0 = one video."),
    workers: int = typer.Option(1, "--workers", help="Worker processes (work unit: 150 frames of every camera, mosaic and overlay)."),
    overlay: Path = typer.Option(None, "--overlay", help="Folder of real camera frames (<camera>.mp4 or <camera>/*.jpg) to blend the control frames on (paired by time, docs/render.md)."),
    overlay_offset: float = typer.Option(0.0, "--overlay-offset", help="Render time t shows real time t + S (real time 0: the first real frame)."),
    overlay_fps: float = typer.Option(None, "--overlay-fps", help="Rate of an image folder of real frames whose names carry no 16/19-digit timestamp."),
    mosaic: bool = typer.Option(False, "--mosaic", help="Also write a labelled mosaic video of all cameras."),
    png: bool = typer.Option(False, "--png", help="Also write every frame as PNG under OUT/<clip>/png/<camera>/."),
    layout: Layout = typer.Option(Layout.DEFAULT, "--layout", help="default: OUT/<clip>/<clip>.<camera>.mp4; posttrain: OUT/control_input_hdmap_bbox/ftheta_<camera>/<clip>.mp4; both; multiview: OUT/<clip>/world_scenario_videos/ws_<view>.mp4 (cosmos-transfer2.5's multiview example); omnidreams: OUT/hdmap/<camera>/<clip>.mp4. The last two need the model rig's cameras (--rig cosmos)."),
    rig: str = typer.Option("scenario", "--rig", help=render_cli.RIG_HELP),
    backend: Backend = typer.Option(Backend.NUMBA, "--backend", help="Rasteriser: numba (CPU) or torch (GPU when present)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Re-render videos that already exist (default: keep them, resume)."),
    preset: Preset = typer.Option(DEFAULT_PRESET, "--preset", metavar="PRESET", help="libx264 speed preset (crf 18 always): ultrafast, superfast, ... veryslow."),
    aa: AntiAliasing = typer.Option(AntiAliasing.ON, "--aa", help="Anti-aliasing: on (4x MSAA on edges, the look of the released model's training renders) or off (one sample per pixel, exact palette colours)."),
    max_memory: int = typer.Option(DEFAULT_MAX_MEMORY_MIB, "--max-memory-mib", help="Memory budget of one render process in MiB: a time segment whose encoders would pass it is written in several passes (same bytes; docs/render.md). 0: no budget."),
    labels: bool = typer.Option(False, "--labels", help="Also write labels (COCO 2-D boxes + masks, 3-D boxes, OpenLane lanes) to OUT/<clip>/labels/ from the same pass (docs/labels.md)."),
    label_files: str = typer.Option("compact", "--label-files", help=render_cli.LABEL_FILES_HELP),
    images: str = typer.Option(None, "--images", help=render_cli.IMAGES_HELP),
    wait: bool = typer.Option(False, "--wait", help=render_cli.WAIT_HELP),
) -> None:
    """Render a scenario into world-scenario control videos, one per camera.

    SCENARIO may also be the output folder of `avsim edit`: every variant it lists is rendered
    with the same options to OUT/<scenario_id>/..., and OUT/render_summary.json lists them all.
    """
    from avsim.edit.render_report import render_scenario_or_variants

    opts = render_cli.render_options(
        out=out, cameras=cameras, start_s=start, end_s=end, frames=frames, fps=fps, **render_cli.size_fields(size),
        chunk_frames=chunk, workers=workers, overlay=overlay, mosaic=mosaic, png=png, layout=layout, rig=rig,
        backend=backend, overwrite=overwrite, preset=preset, antialias=aa is AntiAliasing.ON, overlay_offset_s=overlay_offset,
        overlay_fps=overlay_fps, max_memory_mib=max_memory, wait=wait, **render_cli.label_fields(labels, label_files, images),
    )  # fmt: skip
    render_cli.check_output(out)  # bad input fails here, in one line, before the progress bar appears
    try:
        render_scenario_or_variants(scenario, opts)
    except FrameSelectionError as exc:
        raise typer.BadParameter(str(exc)) from None
