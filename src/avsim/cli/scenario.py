"""Core `avsim` commands: `sample`, `convert`, `info`.

`avsim.cli` builds on `app` and mounts the other packages' command groups lazily. Commands
raise `AvsimInputError` for bad input (printed as one line, exit 1); typer/click report usage
errors (exit 2). Progress goes to stderr so `avsim info --json` keeps stdout clean.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import avsim
from avsim.core.errors import ALLOW_TRUNCATED_ENV
from avsim.core.progress import progress_bar
from avsim.scenario import Scenario
from avsim.scenario.io import SCENARIO_JSON, SCHEMA_VERSION, TABLE_FILES, ProgressFn, load_scenario
from avsim.scenario.summary import scenario_summary, summary_frame_line, summary_pose_lines

# typer >= 0.2x vendors click, so `click.UsageError` no longer matches what typer raises; find
# the class typer really uses (BadParameter derives from it in every typer version).
UsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


class _AvsimTyper(typer.Typer):
    """Typer that turns every usage error into its usage message and exit status 2.

    With `standalone_mode=False` (how `avsim.cli.main` runs the app) typer re-raises usage
    errors instead of printing them; this keeps the exit-code contract whatever the caller does.
    """

    lazy_commands: tuple[str, ...] = ()  # command groups mounted only when asked for (`avsim.cli.main`)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except UsageError as exc:
            _suggest_command(exc, self.lazy_commands)
            exc.show()  # type: ignore[attr-defined]
            raise typer.Exit(2) from exc


def _suggest_command(exc: Any, lazy_commands: tuple[str, ...]) -> None:
    """Add "Did you mean ...?" to an unknown top-level command: click suggests only among the groups
    mounted, and a typo mounts none of the lazy ones (`avsim rendr` -> 'render')."""
    import difflib

    ctx = getattr(exc, "ctx", None)
    message = str(getattr(exc, "message", ""))
    if ctx is None or ctx.parent is not None or not message.startswith("No such command ") or "Did you mean" in message:
        return
    typo = message.removeprefix("No such command ").rstrip(".").strip("'\"")
    matches = difflib.get_close_matches(typo, sorted(set(lazy_commands) | set(ctx.command.list_commands(ctx))))
    if matches:
        exc.message = f"{message.rstrip('.')}. Did you mean {', '.join(repr(m) for m in matches)}?"


app = _AvsimTyper(
    name="avsim",
    help="Driving scenarios -> multi-camera world-scenario control videos -> Cosmos-Transfer2.5 -> metrics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain click help: full option names at 80 columns, no `<bool>` on flags (typer's rich
    # panels truncate both); every mounted group inherits it
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"avsim {avsim.__version__} (scenario schema {SCHEMA_VERSION})")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
    allow_truncated: bool = typer.Option(False, "--allow-truncated", help="Read what a truncated video holds, with a warning naming the frame counts (default: a truncated video is an error)."),
) -> None:
    """avsim: world-scenario control videos, multi-view generation and evaluation for AV simulation."""
    # an environment variable, so that decoding threads, worker processes and Ray tasks see it too
    if allow_truncated:
        os.environ[ALLOW_TRUNCATED_ENV] = "1"
    else:
        os.environ.pop(ALLOW_TRUNCATED_ENV, None)


# ---- progress --------------------------------------------------------------------------------
def _stderr() -> Console:
    # Created per call so test capture and redirection see the current sys.stderr.
    return Console(stderr=True)


@contextmanager
def _progress() -> Iterator[Progress]:
    # transient: leaves stderr with nothing but the result or the one error line; no bar noise in logs and pipes
    with progress_bar("", console=_stderr(), eta=False, spinner=True, transient=True) as progress:
        yield progress


def _writing(progress: Progress, out: Path) -> Callable[[Scenario], ProgressFn]:
    """An `on_built` hook: mark the build step done, then show one bar step per file written."""

    def on_built(_scenario: Scenario) -> ProgressFn:
        for task in progress.task_ids:  # the build step, shown without a total until now
            progress.update(task, total=1, completed=1)
        task = progress.add_task(f"writing {out}", total=len(TABLE_FILES) + 1)
        return lambda _name: progress.advance(task)

    return on_built


def _positive(value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"must be a finite number > 0, got {value}")
    return value


# ---- sample ----------------------------------------------------------------------------------
@app.command()
def sample(
    out: Path = typer.Argument(..., help="Output scenario folder (created; an existing scenario folder is replaced)."),
    seed: int = typer.Option(0, "--seed", help="Random seed: the same seed gives the same bytes."),
    duration_s: float = typer.Option(20.0, "--duration-s", callback=_positive, help="Scenario length in seconds."),
    fps: float = typer.Option(30.0, "--fps", callback=_positive, help="Ego pose rate in Hz (agent boxes are always stored at 10 Hz, like real annotations)."),
) -> None:
    """Write the embedded, procedurally generated urban sample scenario to OUT."""
    from avsim.scenario.workflows import write_sample

    with _progress() as progress:
        progress.add_task("generating sample scenario", total=None)
        scenario = write_sample(out, seed=seed, duration_s=duration_s, fps=fps, on_built=_writing(progress, out))
    _stderr().print(f"wrote {out} ({scenario.scenario_id}, {scenario.duration_s:.1f} s)")


# ---- convert ---------------------------------------------------------------------------------
def _format_help() -> str:
    from avsim.scenario.importers.registry import FORMATS

    return "Source format, detected from SRC's layout when omitted: " + "; ".join(
        f"{name} = {info.source}" for name, info in FORMATS.items()
    )


def _source_path(src: str) -> Path:
    """SRC without a ``::scene`` selector (nuScenes and RDS-HQ roots hold several scenes)."""
    from avsim.scenario.importers.common import split_selector

    return split_selector(src)[0]


def _map_options(start: str | None, goal: str | None, trajectory: Path | None, traffic: int, seed: int, speed: float | None,
                 duration: float | None, origin: str | None) -> Any:  # fmt: skip
    """MapOptions from the command line, or None when no map option was given."""
    from avsim.scenario.bare_map import MapOptions, RouteOptions

    given = any(v is not None for v in (start, goal, trajectory, speed, duration, origin)) or traffic or seed
    if not given:
        return None
    if (start is None) != (goal is None):
        raise typer.BadParameter("give --start and --goal together", param_hint="'--start/--goal'")
    if trajectory is not None and start is not None:
        raise typer.BadParameter("give a route (--start/--goal) or --trajectory, not both", param_hint="'--trajectory'")
    if traffic < 0:
        raise typer.BadParameter(f"must be >= 0, got {traffic}", param_hint="'--traffic'")
    lat_lon = None
    if origin is not None:
        try:
            lat_lon = tuple(float(v) for v in origin.split(","))
        except ValueError:
            raise typer.BadParameter(f"expected LAT,LON[,ELE] in degrees (and metres), got {origin!r}", param_hint="'--origin'") from None
        if len(lat_lon) not in (2, 3) or not all(math.isfinite(v) for v in lat_lon) or abs(lat_lon[0]) > 90 or abs(lat_lon[1]) > 180:
            raise typer.BadParameter(f"expected LAT,LON[,ELE] in degrees (and metres), got {origin!r}", param_hint="'--origin'")
    route = RouteOptions(start=start, goal=goal, speed_mps=speed, duration_s=duration, traffic=traffic, seed=seed)
    return MapOptions(route, trajectory, lat_lon)


def _idm_drive(progress: Progress, seed: int) -> Callable[[Scenario], Scenario]:
    """The simulator's IDM drive of a bare map's route (a map format's scenario whose ego drives a
    route; others pass through), with a progress bar of its steps."""

    def drive(scenario: Scenario) -> Scenario:
        from avsim.sim.bare_map import drive_bare_map

        if (scenario.metadata.get("bare_map") or {}).get("ego") != "route":
            return scenario
        task = progress.add_task("driving the route (IDM ego, reactive traffic)", total=None)
        return drive_bare_map(scenario, reactive=True, seed=seed, on_step=lambda k, n: progress.update(task, completed=k, total=n))

    return drive


@app.command()
def convert(
    src: str = typer.Argument(..., help="Source file or folder; ROOT::name picks one scene/clip of a dataset root."),
    out: Path = typer.Argument(..., help="Output scenario folder (an existing scenario folder is replaced)."),
    from_format: str | None = typer.Option(None, "--from", help=_format_help()),
    rig: str | None = typer.Option(None, "--rig", help="Replace the source's camera rig by a named rig: cosmos, nuscenes, av2, waymo."),
    start: str | None = typer.Option(None, "--start", help="Map formats (opendrive, lanelet2): the ego's route starts here, a lane id of the converted map or a point X,Y (with --goal)."),
    goal: str | None = typer.Option(None, "--goal", help="Map formats: the route's goal, a lane id or a point X,Y; the route is the shortest along the lane successors. Default: a seeded random route."),
    trajectory: Path | None = typer.Option(None, "--trajectory", help="Map formats: the ego's poses from a CSV file (header t_s,x_m,y_m[,z_m][,yaw_rad]) instead of a route."),
    traffic: int = typer.Option(0, "--traffic", help="Map formats: this many seeded cars driving the lanes."),
    seed: int = typer.Option(0, "--seed", help="Map formats: seed of the random route and the traffic."),
    speed: float | None = typer.Option(None, "--speed", help="Map formats: the ego's cruise speed in m/s (default: the lanes' speed limits, else 11 m/s)."),
    duration: float | None = typer.Option(None, "--duration", help="Map formats: scenario length in seconds (default: until the ego stops at the goal)."),
    origin: str | None = typer.Option(None, "--origin", help="lanelet2: the projection origin LAT,LON[,ELE] (default: the map's map_projector_info.yaml, else its first node)."),
    drive: str = typer.Option("idm", "--drive", help="Map formats: idm = the simulator's IDM planner drives the route in closed loop among reactive IDM traffic (avsim sim --policy idm --agents idm); route = the ego follows the route's speed profile and the cars their lanes, open loop."),
    ego: str | None = typer.Option(None, "--ego", help="openscenario: the entity that is the ego (default: the one named Ego, hero or ego_vehicle, else the first vehicle)."),
    param: list[str] = typer.Option([], "--param", help="openscenario: set a global parameter, NAME=VALUE (repeatable)."),
    rate: float | None = typer.Option(None, "--rate", help="openscenario: storyboard steps per second (default 20)."),
    root: Path | None = typer.Option(None, "--root", help="openscenario: the folder the scenario's file references may reach into (default: the scenario's folder)."),
    map_file: Path | None = typer.Option(None, "--map", help="openscenario: an OpenDRIVE file replacing the scenario's RoadNetwork/LogicFile."),
) -> None:
    """Convert one real-dataset scene (ScenarioNet, nuScenes, Argoverse 2, Waymo, RDS-HQ, ...), a map (OpenDRIVE, Lanelet2) or an OpenSCENARIO scenario to OUT."""
    from avsim.core.rig import NAMED_RIGS
    from avsim.scenario.importers import registry
    from avsim.scenario.workflows import convert_to_folder

    if from_format is not None and from_format.lower() not in registry.FORMATS:
        raise typer.BadParameter(f"unknown format {from_format!r}; choose from {', '.join(registry.FORMATS)}", param_hint="'--from'")
    if rig is not None and rig not in NAMED_RIGS:
        raise typer.BadParameter(f"unknown rig {rig!r}; choose from {', '.join(NAMED_RIGS)}", param_hint="'--rig'")
    if out.resolve() == _source_path(src).resolve():
        raise typer.BadParameter("OUT must differ from SRC", param_hint="OUT")
    for name, value in (("--speed", speed), ("--duration", duration)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise typer.BadParameter(f"must be a finite number > 0, got {value}", param_hint=f"'{name}'")
    if drive not in ("idm", "route"):
        raise typer.BadParameter(f"expected idm or route, got {drive!r}", param_hint="'--drive'")
    is_xosc = (from_format or "").lower() == "openscenario" or (from_format is None and _source_path(src).suffix.lower() == ".xosc")
    if is_xosc:
        if any(v is not None for v in (start, goal, trajectory, speed, origin)) or traffic:
            raise typer.BadParameter("route, trajectory, speed, traffic and origin options apply to map formats, not to OpenSCENARIO", param_hint="'--from'")
        _convert_openscenario(src, out, rig, _scenario_options(ego, param, rate, duration, root, map_file))
        return
    if any(v is not None for v in (ego, rate, root, map_file)) or param:
        raise typer.BadParameter("--ego, --param, --rate, --root and --map apply to OpenSCENARIO files (.xosc)", param_hint="'--from'")
    options = _map_options(start, goal, trajectory, traffic, seed, speed, duration, origin)
    with _progress() as progress:
        progress.add_task(f"reading {src} ({from_format or 'auto-detected format'})", total=None)
        then = _idm_drive(progress, seed) if drive == "idm" else None
        scenario = convert_to_folder(src, out, fmt=from_format, rig_name=rig, on_built=_writing(progress, out), map_options=options, then=then)
    _stderr().print(f"wrote {out} ({scenario.scenario_id}, {scenario.duration_s:.1f} s)")


def _scenario_options(ego: str | None, params: list[str], rate: float | None, duration: float | None, root: Path | None,
                      map_file: Path | None) -> Any:  # fmt: skip
    """OpenScenarioOptions from the command line."""
    from avsim.scenario.importers.openscenario import OpenScenarioOptions
    from avsim.scenario.openscenario.load import DEFAULT_MAX_DURATION_S, DEFAULT_RATE_HZ, MAX_RATE_HZ, RunOptions

    values: dict[str, str] = {}
    for item in params:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="'--param'")
        values[name.strip().lstrip("$")] = value
    if rate is not None and not (math.isfinite(rate) and 0 < rate <= MAX_RATE_HZ):
        raise typer.BadParameter(f"expected a rate in (0, {MAX_RATE_HZ:g}] Hz, got {rate}", param_hint="'--rate'")
    run = RunOptions(ego, values, rate or DEFAULT_RATE_HZ, duration or DEFAULT_MAX_DURATION_S)
    return OpenScenarioOptions(run, root, map_file)


def _convert_openscenario(src: str, out: Path, rig: str | None, options: Any) -> None:
    """`avsim convert` of an .xosc file: one scenario, or a folder of variants for a parameter distribution."""
    from dataclasses import replace

    from avsim.scenario.importers.openscenario import is_distribution
    from avsim.scenario.workflows import convert_to_folder

    path = _source_path(src)
    with _progress() as progress:
        task = progress.add_task(f"running {path.name}'s storyboard", total=None)
        options = replace(options, on_step=lambda k, n: progress.update(task, completed=k, total=n))
        if path.is_file() and is_distribution(path, options):
            written = _write_distribution(path, out, rig, options, progress)
            _stderr().print(f"wrote {out} ({written} variants)")
            return
        scenario = convert_to_folder(src, out, fmt="openscenario", rig_name=rig, on_built=_writing(progress, out), scenario_options=options)
    _stderr().print(f"wrote {out} ({scenario.scenario_id}, {scenario.duration_s:.1f} s)")


def _write_distribution(path: Path, out: Path, rig: str | None, options: Any, progress: Progress) -> int:
    """Every parameter set of a distribution as a variant folder beside an `avsim edit` manifest."""
    import hashlib

    from avsim.edit.editfile import VariantResult
    from avsim.edit.output import check_edit_output, variants_manifest, write_variants_output
    from avsim.scenario.importers.openscenario import load_distribution

    check_edit_output(out)
    variants = progress.add_task("variants", total=None)
    made = load_distribution(path, rig, options, on_variant=lambda k, n, name: progress.update(variants, completed=k, total=n, description=name))
    results = [VariantResult(v.name, dict(v.parameters), s) for v, s in made]
    source_id = made[0][1].scenario_id.split("__")[0]
    manifest = variants_manifest(source_id, path.name, hashlib.sha256(path.read_bytes()).hexdigest(), results)
    write_variants_output(out, manifest, results)
    return len(results)


# ---- info ------------------------------------------------------------------------------------
def _count_table(key_column: str, count_column: str, counts: dict[str, int]) -> Table:
    table = Table()
    table.add_column(key_column)
    table.add_column(count_column, justify="right")
    for name, n in counts.items():
        table.add_row(name, str(n))
    return table


def _print_summary(s: dict[str, Any]) -> None:
    console = Console()
    rate = f"{s['ego_rate_hz']:.2f} Hz" if s["ego_rate_hz"] else "n/a"
    boxes = f", agent boxes {s['agent_rate_hz']:.2f} Hz" if s["agent_rate_hz"] else ""
    console.print(f"[bold]{s['scenario_id']}[/bold]  {s['duration_s']:.2f} s")
    console.print(f"native rates: ego {rate} ({s['ego_poses']} poses){boxes}")
    render = s["render"]
    console.print(f"render: {render['frames']} frames at {render['fps']:g} fps (poses, boxes interpolated)")
    console.print(summary_frame_line(s), markup=False, highlight=False)
    ext = s["extent"]
    console.print(
        f"extent x [{ext['x_min_m']:.1f}, {ext['x_max_m']:.1f}] m, y [{ext['y_min_m']:.1f}, {ext['y_max_m']:.1f}] m "
        f"({ext['size_x_m']:.0f} x {ext['size_y_m']:.0f} m); ego path {ext['ego_path_length_m']:.1f} m"
    )
    console.print(f"cameras: {len(s['cameras'])}")
    cams = Table()
    for col in ("name", "model", "size", "hfov"):
        cams.add_column(col)
    for c in s["cameras"]:
        cams.add_row(c["name"], c["model"], f"{c['width_px']}x{c['height_px']}", f"{c['horizontal_fov_deg']:.1f} deg")
    console.print(cams)
    for line in summary_pose_lines(s):
        console.print(line, markup=False, highlight=False)
    agents = s["agents"]
    console.print(f"agents: {agents['tracks']} tracks, {agents['observations']} boxes")
    console.print(_count_table("class", "tracks", agents["tracks_per_class"]))
    console.print(f"map: {sum(s['map'].values())} elements")
    console.print(_count_table("type", "count", s["map"]))
    tl = s["traffic_lights"]
    states = ", ".join(f"{k} {v}" for k, v in tl["states"].items()) or "none"
    console.print(f"traffic-light states: {tl['lights_with_states']} lights, {tl['state_rows']} rows ({states})")
    scalars = {k: v for k, v in s["metadata"].items() if isinstance(v, (str, int, float, bool))}
    if scalars:
        console.print("metadata: " + ", ".join(f"{k}={v}" for k, v in scalars.items()), markup=False, highlight=False)


@app.command()
def info(
    scenario: Path = typer.Argument(..., help=f"Scenario folder (holding {SCENARIO_JSON})."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
) -> None:
    """Summarise a scenario: duration, rate, cameras, agents per class, map elements, extent."""
    from avsim.maps.style import DEFAULT_FPS

    summary = scenario_summary(load_scenario(scenario), render_fps=DEFAULT_FPS)
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        _print_summary(summary)
