"""`avsim edit`, `avsim validate`, `avsim diff`, `avsim preview`, `avsim export-scene`.

Each command parses its options and calls the library (`editfile`, `output`, `validate`,
`diff`, `preview`). Bad input raises AvsimInputError (one line, exit 1). `validate --strict`
and `edit --strict` exit 1 when there are findings; nothing is written when `edit` fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from avsim.core.errors import AvsimInputError
from avsim.scenario import Scenario

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


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

    Findings print one per line (time, kind, ids, reason), then one count line per scenario;
    --strict exits 1 when there are any.
    """
    from .validate import findings_document, scenario_folders, validate_scenario

    docs, total = [], 0
    for folder in scenario_folders(scenarios):
        scn = _load(folder)
        findings = validate_scenario(scn)
        total += len(findings)
        docs.append(findings_document(scn, findings))
        if not as_json:
            for f in findings:
                typer.echo(str(f))
            typer.echo(f"{scn.scenario_id}: {len(findings)} finding(s)")
    if as_json:
        typer.echo(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
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
    from .preview import write_preview

    if out.suffix.lower() != ".mp4":
        raise typer.BadParameter("OUT must end in .mp4")
    if fps <= 0 or size_px < 64:
        raise typer.BadParameter("--fps must be > 0 and --size >= 64")
    if overlay and before is None:
        raise typer.BadParameter("--overlay needs --before")
    after = _load(scenario)
    prior = _load(before) if before is not None else None
    n = write_preview(after, out, before=prior, fps=fps, size_px=size_px, extent_m=extent_m or None, overlay=overlay)
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
