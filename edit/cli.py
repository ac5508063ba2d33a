"""`avsim edit`, `avsim validate`, `avsim diff`, `avsim preview`.

Bad input raises AvsimInputError (one line, exit 1). `validate --strict` and `edit --strict`
exit 1 when there are findings; nothing is written when `edit` fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "avsim-edit-manifest"


def _load(path: Path):
    from avsim.scenario.io import load_scenario

    return load_scenario(path)


def _check_edit_output(out: Path) -> None:
    """Refuse to replace anything but an empty folder or an earlier `avsim edit` output."""
    if not out.exists():
        return
    if not out.is_dir():
        raise AvsimInputError(out, "output", "exists and is not a folder; refusing to replace it")
    if not any(out.iterdir()):
        return
    try:
        doc = json.loads((out / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = None
    if isinstance(doc, dict) and doc.get("format") == MANIFEST_FORMAT:  # valid JSON need not be an object
        return
    raise AvsimInputError(out, "output", "exists, is not empty and is not an avsim edit output; refusing to replace it")


def manifest_document(source, edit, results) -> dict:
    """The manifest written beside the variant folders (deterministic: no paths, no clock)."""
    return {
        "format": MANIFEST_FORMAT,
        "version": 1,
        "source_scenario_id": source.scenario_id,
        "edit_file": edit.path.name,
        "edit_file_sha256": edit.sha256,
        "variants": [
            {
                "name": r.name,
                "folder": r.name,
                "scenario_id": r.scenario.scenario_id,
                "params": r.params,
                "findings": [{"op_index": i, **f.to_dict()} for i, f in r.new_findings],
            }
            for r in results
        ],
    }


@app.command("edit")
def edit_command(
    scenario: Path = typer.Argument(..., help="Input scenario folder."),
    edits: Path = typer.Argument(..., help="Edit file (YAML or JSON)."),
    out: Path = typer.Argument(..., help="Output folder: one scenario folder per variant + manifest.json."),
    strict: bool = typer.Option(False, "--strict", help="Fail (write nothing) if an edit introduces validation findings."),
    no_validate: bool = typer.Option(False, "--no-validate", help="Skip validation after each op."),
) -> None:
    """Apply an edit file to SCENARIO and write every variant to OUT."""
    from avsim.scenario.io import save_scenario

    from .editfile import apply_variant, load_edit_file
    from .validate import validate_scenario

    _check_edit_output(out)
    edit = load_edit_file(edits)
    source = _load(scenario)
    base = [] if no_validate else validate_scenario(source)
    results = []
    for i, variant in enumerate(edit.variants):
        results.append(apply_variant(source, edit, variant, validate=not no_validate, base_findings=base))
        typer.echo(f"[{i + 1}/{len(edit.variants)}] {variant.name}: {len(results[-1].new_findings)} new findings", err=True)
    for r in results:
        for op_index, f in r.new_findings:
            typer.echo(f"  {r.name} (op {op_index}): {f}", err=True)
    if strict and any(r.new_findings for r in results):
        raise AvsimInputError(edits, "validation", "edits introduce findings (listed above); --strict writes nothing")
    doc = manifest_document(source, edit, results)
    allow_empty = source.map.is_empty()
    with atomic_output_path(out, is_dir=True) as tmp:
        for r in results:
            save_scenario(r.scenario, tmp / r.name, allow_empty_map=allow_empty)
        (tmp / MANIFEST_NAME).write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8")
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
    from .validate import validate_scenario

    scn = _load(scenario)
    findings = validate_scenario(scn)
    if as_json:
        counts: dict[str, int] = {}
        for f in findings:
            counts[f.kind] = counts.get(f.kind, 0) + 1
        doc = {"scenario_id": scn.scenario_id, "findings": [f.to_dict() for f in findings], "counts": counts}
        typer.echo(json.dumps(doc, indent=2))
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
