"""`avsim view SCENARIO [RENDER_DIR]`: the scenario, its edits and videos in the rerun viewer.

This module only parses the command line; `avsim.view.run.run_view` does the work. rerun-sdk
is imported only when the command runs (the `view` extra; one line names it when missing).
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def _port(value: int) -> int:
    if not 0 < value < 65536:
        raise typer.BadParameter(f"a port is 1..65535, got {value}")
    return value


@app.command("view")
def view_command(
    scenario: Path = typer.Argument(..., help="Scenario folder (avsim sample / convert / edit output)."),
    render_dir: Path | None = typer.Argument(None, help="Control videos: OUT of `avsim render` (<clip>/<clip>.<camera>.mp4)."),
    generated: Path | None = typer.Option(None, "--generated", help="Generated videos: OUT of `avsim generate` (<clip>.<camera>.mp4)."),
    real: Path | None = typer.Option(None, "--real", help="Real videos: <camera>.mp4 or <clip>.<camera>.mp4 per camera."),
    before: Path | None = typer.Option(None, "--before", help="Scenario to compare with (the source of an edit), shown beside it."),
    save: Path | None = typer.Option(None, "--save", help="Write the recording to FILE.rrd instead of opening a viewer."),
    serve: bool = typer.Option(False, "--serve", help="Serve the web viewer on this machine (open the printed URL; forward both ports from a remote machine)."),
    web_port: int = typer.Option(9090, "--web-port", callback=_port, help="Port of the web viewer (with --serve)."),
    grpc_port: int = typer.Option(9876, "--grpc-port", callback=_port, help="Port of the data server (with --serve)."),
    rate_hz: float = typer.Option(30.0, "--rate", help="Agent boxes per second (the render fps)."),
    video_start_s: float = typer.Option(0.0, "--video-start", help="Scenario time of the videos' first frame, s (a render with --start)."),
) -> None:
    """Show SCENARIO (HD map, agents, ego, camera frustums, traffic lights) and its control,
    generated and real videos per camera, on one timeline `scenario_time` (from the first ego pose)."""
    from rich.console import Console

    from avsim.view.run import ViewOptions, run_view

    if save is not None and serve:
        raise typer.BadParameter("--save and --serve: give one")
    if not 0 < rate_hz <= 1000:
        raise typer.BadParameter(f"--rate: must be in (0, 1000], got {rate_hz}")
    console = Console(stderr=True)
    opts = ViewOptions(
        scenario, render_dir, generated, real, before, save, serve, web_port, grpc_port, rate_hz, video_start_s,
    )  # fmt: skip
    summary = run_view(opts, progress=lambda line: console.print(f"view: {line}", highlight=False))
    where = f"-> {summary.saved}" if summary.saved else (summary.url or "in the viewer")
    console.print(f"viewed {summary.scenario_id} with {sum(map(len, summary.videos.values()))} videos in {summary.seconds:.1f} s {where}", highlight=False)
