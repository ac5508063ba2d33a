"""What `avsim render` does around the library calls: one progress bar, and the lines it prints.

`render_scenario_or_variants` renders a scenario folder (`avsim.render.run.runner.run_render`)
or every variant of an `avsim edit` output (`avsim.edit.render_variants.run_render_variants`)
under one progress bar on stderr, then prints each clip's summary.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from avsim.core.progress import progress_bar
from avsim.edit.render_variants import is_variants_folder, read_variants, run_render_variants
from avsim.render.geometry.sizes import stretch_note
from avsim.render.run.plan import RenderOptions, RenderPlan
from avsim.render.run.runner import RenderSummary, plan_overlay, run_render
from avsim.scenario import Scenario
from avsim.scenario.io import load_scenario


def render_scenario_or_variants(path: Path, opts: RenderOptions, console: Console | None = None) -> list[RenderSummary]:
    """Render `path` (a scenario folder or an `avsim edit` output) per `opts`, with a progress bar and a report.

    Args:
        path: the SCENARIO argument.
        opts: the render options.
        console: where the bar and the report go (default: stderr).

    Returns:
        One summary per rendered clip.
    """
    console = console or Console(stderr=True)
    variants = read_variants(path) if is_variants_folder(path) else None
    scenario = None if variants is not None else load_scenario(path)
    if scenario is not None:
        plan = RenderPlan.resolve(scenario, opts)
        for real in plan_overlay(scenario, opts, plan).values():  # bad real frames fail here
            if real.message():
                console.print(real.message())
        note = stretch_note(plan.rig.subset(list(plan.cameras)), plan.sizes_px)  # once the render is known to go ahead
        if note:
            console.print(note, markup=False, highlight=False, soft_wrap=True)
    with progress_bar("render", unit="frames", console=console) as bar:
        task = bar.add_task("", total=None)

        def start(s: Scenario, description: str = "") -> None:
            bar.reset(task, total=RenderPlan.resolve(s, opts).progress_units, description=description)

        def advance(n: int) -> None:
            bar.advance(task, n)

        if scenario is None:
            n = len(variants or [])
            summaries = run_render_variants(path, opts, progress=advance, on_variant=lambda i, v, s: start(s, f"{i + 1}/{n} {v.name}"))
        else:
            start(scenario)
            summaries = [run_render(scenario, opts, progress=advance, source=path)]
    print_summaries(console, summaries, opts.out, variants is not None, opts.max_memory_mib)
    return summaries


def print_summaries(console: Console, summaries: list[RenderSummary], out: Path, variants_mode: bool, max_memory_mib: int = 0) -> None:
    """Print what each render did (and, for edit variants, the totals).

    Args:
        console: where to print.
        summaries: one per clip.
        out: the output folder.
        variants_mode: the clips are the variants of an `avsim edit` output.
        max_memory_mib: the budget asked for (a clip whose smallest unit is over it gets a note).
    """
    for summary in summaries:
        _line(console, f"rendered {summary.clip_id}: {summary.frames} frames x {len(summary.cameras)} cameras "
                       f"in {summary.seconds:.1f} s ({summary.camera_frames_per_s:.1f} camera-frames/s)")  # fmt: skip
        _line(console, f"  {summary.camera_frames_rendered} camera-frames rendered, {summary.camera_frames_skipped} kept")
        extra = [f"{n} {kind} frames" for n, kind in ((summary.mosaic_frames_rendered, "mosaic"), (summary.overlay_frames_rendered, "overlay")) if n]
        if summary.camera_frames_rendered or extra:
            _line(console, f"  {', '.join(extra) + '; ' if extra else ''}CPU s: render {summary.render_cpu_s:.1f}, "
                           f"encode {summary.encode_cpu_s:.1f}, composite {summary.composite_cpu_s:.1f}")  # fmt: skip
        _line(console, f"  -> {out}")
        if 0 < max_memory_mib < summary.peak_estimate_mib:
            console.print(f"note: {summary.clip_id}: a worker is estimated to need {summary.peak_estimate_mib:.0f} MiB, over "
                          f"--max-memory-mib {max_memory_mib}: one camera with its streams is the smallest unit (a smaller "
                          "--size, fewer --overlay cameras or a larger budget bring it under)")  # fmt: skip
    if variants_mode:
        rendered = sum(x.camera_frames_rendered for x in summaries)
        kept = sum(x.camera_frames_skipped for x in summaries)
        _line(console, f"rendered {len(summaries)} variants in {sum(x.seconds for x in summaries):.1f} s: "
                       f"{rendered} camera-frames rendered, {kept} kept")  # fmt: skip
        _line(console, f"  -> {out} (summary: {out / 'render_summary.json'})")


def _line(console: Console, text: str) -> None:
    """One summary line as written: no markup, no wrapping by rich (a number is never split; each line
    but the path's stays under 120 columns for clip names of up to 40 characters)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)
