"""`avsim check-projection SOURCE`: parse options, call `avsim.scenario.projection_check`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command("check-projection")
def check_projection_command(
    source: str = typer.Argument(..., help="A source with its own 2-D box labels: mmdet3d info .pkl (FILE::LOG), mono3d .coco.json (FILE::TOKEN), a folder holding one, or Waymo frames when that reader is installed."),
    overlay_dir: Path | None = typer.Option(None, "--overlay-dir", help="Write one PNG per labelled camera image: the real image (if present) with the projected boxes."),
    out: str | None = typer.Option(None, "--out", help="Write the report as JSON to FILE, or to stdout with '-' (the per-camera lines then go to stderr)."),
    shutter: str | None = typer.Option(None, "--shutter", help="global|rolling: rolling projects with Waymo's rolling-shutter camera model (the default for sources with per-image shutter timing, i.e. Waymo frames); global as the renderer does."),
) -> None:
    """Project every labelled box through the imported rig and ego poses and compare with the source's 2-D labels."""
    from avsim.core.atomic import atomic_output_path
    from avsim.scenario import projection_check as pc

    ref = pc.reference_source(source)
    report = pc.check_projection(ref, source, shutter)
    to_stderr = out == "-"
    for line in pc.report_lines(report):
        typer.echo(line, err=to_stderr)
    if overlay_dir is not None:
        written = pc.write_overlays(ref, overlay_dir, report.shutter)
        typer.echo(f"wrote {len(written)} overlay PNGs to {overlay_dir}", err=True)
    if out is not None:
        text = json.dumps(pc.report_document(report), indent=2, sort_keys=True) + "\n"
        if to_stderr:
            typer.echo(text, nl=False)
        else:
            with atomic_output_path(out) as tmp:
                tmp.write_text(text)
