"""`avsim labels SCENARIO OUT`, and the option parsing that `avsim render` shares with it.

This module only parses the command line and calls the library entry points
(`avsim.render.run.labels.run_labels`; the `render` command lives in `avsim.edit.cli`, the
lowest layer that also renders the variants of an `avsim edit` output, and calls
`avsim.render.run.runner.run_render`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.progress import progress_bar
from avsim.render import style
from avsim.render.run.plan import FrameSelectionError, RenderOptions, RenderPlan, rig_choices
from avsim.scenario import Scenario

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

SIZE_HELP = "Output frame size WxH."
WAIT_HELP = "When another avsim process is writing OUT/<clip>, wait for it (default: stop with one line)."
RIG_HELP = f"Camera rig: the scenario's own (scenario), or a named rig on the same ego ({', '.join(rig_choices()[1:])})."
_OPTION_NAMES = {"chunk_frames": "--chunk", "max_memory_mib": "--max-memory-mib"}  # other fields: --<field> with dashes


def parse_size(value: str) -> tuple[int, int]:
    """`--size WxH` -> (width_px, height_px); a malformed value is a usage error.

    Args:
        value: e.g. "1280x720".

    Returns:
        (width_px, height_px).
    """
    try:
        w, h = (int(v) for v in value.lower().split("x"))
    except ValueError:
        raise typer.BadParameter(f"--size: expected WxH such as 1280x720, got {value!r}") from None
    return w, h


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
        name = str(exc).split(":", 1)[0]
        raise typer.BadParameter(f"{_OPTION_NAMES.get(name, '--' + name.replace('_', '-'))}: {str(exc).split(':', 1)[-1].strip()}") from None


def resolve_plan(scenario: Scenario, opts: RenderOptions) -> RenderPlan:
    """`RenderPlan.resolve` for the command line: a bad frame selection is a usage error."""
    try:
        return RenderPlan.resolve(scenario, opts)
    except FrameSelectionError as exc:
        raise typer.BadParameter(str(exc)) from None


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
    size: str = typer.Option(f"{style.DEFAULT_WIDTH_PX}x{style.DEFAULT_HEIGHT_PX}", "--size", help=SIZE_HELP),
    rig: str = typer.Option("scenario", "--rig", help=RIG_HELP),
    wait: bool = typer.Option(False, "--wait", help=WAIT_HELP),
) -> None:
    """Write labels (COCO 2-D boxes + masks, nuScenes-style 3-D boxes, OpenLane lanes) of a scenario's frames."""
    from avsim.render.run.labels import run_labels
    from avsim.scenario.io import load_scenario

    width, height = parse_size(size)
    opts = render_options(out=out, cameras=cameras, start_s=start, end_s=end, frames=frames, fps=fps, width_px=width,
                          height_px=height, rig=rig, labels=True, wait=wait)  # fmt: skip
    scen = load_scenario(scenario)
    plan = resolve_plan(scen, opts)
    check_output(out)
    with progress_bar("render", unit="frames") as bar:
        task = bar.add_task("labels", total=len(plan.cameras) * plan.n_frames)
        folder = run_labels(scen, opts, progress=lambda n: bar.advance(task, n))
    typer.echo(f"labelled {plan.n_frames} frames x {len(plan.cameras)} cameras -> {folder}", err=True)
