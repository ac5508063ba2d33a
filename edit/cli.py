"""`avsim edit`, `avsim validate`, `avsim diff`, `avsim preview`.

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
    scenario: Path = typer.Argument(..., help="Scenario folder."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when there is any finding."),
    as_json: bool = typer.Option(False, "--json", help="Print findings as JSON."),
) -> None:
    """Check SCENARIO: loading (format) errors, then overlaps, off-road vehicles, speed and
    acceleration limits, track gaps and conflicting lights.

    Findings print one per line (time, kind, ids, reason); --strict exits 1 when there are any.
    """
    from .validate import findings_document, validate_scenario

    scn = _load(scenario)
    findings = validate_scenario(scn)
    if as_json:
        typer.echo(json.dumps(findings_document(scn, findings), indent=2))
    else:
        for f in findings:
            typer.echo(str(f))
        typer.echo(f"{scn.scenario_id}: {len(findings)} finding(s)")
    if strict and findings:
        # an error rather than typer.Exit: `avsim.cli.main` runs typer with standalone_mode=False
        raise AvsimInputError(scenario, "validation", f"{len(findings)} finding(s) with --strict")


@app.command("diff")
def diff_command(
    a: Path = typer.Argument(..., help="First scenario folder."),
    b: Path = typer.Argument(..., help="Second scenario folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the difference as JSON."),
) -> None:
    """What changed from A to B: agents, map elements, light timelines, ego, time span."""
    from .diff import diff_scenarios, format_diff

    d = diff_scenarios(_load(a), _load(b))
    typer.echo(json.dumps(d, indent=2) if as_json else format_diff(d))


@app.command("preview")
def preview_command(
    scenario: Path = typer.Argument(..., help="Scenario folder."),
    out: Path = typer.Argument(..., help="Output .mp4"),
    before: Path = typer.Option(None, "--before", help="Another scenario shown on the left (before | after)."),
    fps: float = typer.Option(10.0, "--fps", help="Preview frame rate."),
    size_px: int = typer.Option(640, "--size", help="Height (and width per panel) in pixels."),
    extent_m: float = typer.Option(0.0, "--extent-m", help="Side of the square view in metres (0: fit the ego path)."),
) -> None:
    """Bird's-eye preview video: map, agents with ids and headings, ego, time stamp."""
    from .preview import write_preview

    if out.suffix.lower() != ".mp4":
        raise typer.BadParameter("OUT must end in .mp4")
    if fps <= 0 or size_px < 64:
        raise typer.BadParameter("--fps must be > 0 and --size >= 64")
    after = _load(scenario)
    prior = _load(before) if before is not None else None
    n = write_preview(after, out, before=prior, fps=fps, size_px=size_px, extent_m=extent_m or None)
    typer.echo(f"wrote {out} ({n} frames)", err=True)
