"""`avsim export clipgt|opendrive SCENARIO OUT`, `avsim export nuscenes SOURCE... OUT`: parse options, call the exporters."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from avsim.scenario.exporters.clipgt import ClipGTExport

app = typer.Typer(
    add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True,
    help="Write a scenario in another tool's format (clipgt: NVIDIA's world-scenario parquet clips; opendrive: ASAM OpenDRIVE 1.7; openscenario: ASAM OpenSCENARIO 1.2 with its OpenDRIVE map; nuscenes: labelled clips as a nuScenes dataset).",
)  # fmt: skip


def export_notes(written: ClipGTExport) -> list[str]:
    """What the user of NVIDIA's tools needs to know about an export, one line each."""
    what = {"pinhole": "pinhole written as its f-theta equivalent", "forward": "forward polynomial written as its backward refit"}
    lines = [f"{camera}: {what[kind]} (max {written.avsim_error_px[camera]:.2f} px from the source lens as avsim reads it, "
             f"{written.nvidia_error_px[camera]:.2f} px as NVIDIA's loader and renderer project it)"
             for camera, kind in written.refitted.items()]  # fmt: skip
    if written.frame_times_us:
        lines.append(f"frame 0 kept: {len(written.frame_times_us)} frame times from {written.frame_times_us[0]} us written for NVIDIA's loader")
    lines.append(f"NVIDIA's loader: cosmos-transfer2.5 {written.nvidia_min_release} or later places every camera")
    if written.nvidia_cameras_option is not None:
        lines.append(f"NVIDIA's renderer: scripts/generate_control_videos.py -i {written.folder} -o VIDEOS "
                     f"--cameras {written.nvidia_cameras_option}  (its default is the seven cosmos cameras)")  # fmt: skip
    if written.nvidia_resized:
        scales = ", ".join(f"{c} {sw:.3f} x {sh:.3f}" for c, (sw, sh) in written.nvidia_resized.items())
        lines.append(f"not 16:9: NVIDIA's renderer resizes every camera to 1280x720 with one polynomial scale, so these "
                     f"draw another field of view than their image ({scales}); export with --rig cosmos to compare")  # fmt: skip
    return lines


@app.command("clipgt")
def clipgt_command(
    scenario: Path = typer.Argument(..., help="Scenario folder (holding scenario.json)."),
    out: Path = typer.Argument(..., help="Clip folder to write <clip_id>.<table>.parquet into (absent, empty, or holding only ClipGT tables, which are replaced)."),
    rig: str | None = typer.Option(None, "--rig", help="Replace the scenario's rig by a named rig first: cosmos (NVIDIA's 7 cameras, what generate_control_videos.py renders by default), nuscenes, av2, waymo."),
    clip_id: str | None = typer.Option(None, "--clip-id", help="File-name prefix of the tables; default the scenario id (made file-name safe)."),
) -> None:
    """Write SCENARIO as an NVIDIA world-scenario parquet clip (cosmos-transfer2.5's ClipGT loader reads it)."""
    from avsim.core.rig import NAMED_RIGS
    from avsim.scenario.exporters.clipgt import export_clipgt
    from avsim.scenario.io import load_scenario

    if rig is not None and rig not in NAMED_RIGS:
        raise typer.BadParameter(f"unknown rig {rig!r}; choose from {', '.join(NAMED_RIGS)}", param_hint="'--rig'")
    written = export_clipgt(load_scenario(scenario), out, rig_name=rig, clip_id=clip_id)
    rows = ", ".join(f"{table} {n}" for table, n in written.rows.items() if n)
    typer.echo(f"wrote {written.folder} (clip {written.clip_id}: {rows})", err=True)
    for line in export_notes(written):
        typer.echo(f"  {line}", err=True)


@app.command("opendrive")
def opendrive_command(
    scenario: Path = typer.Argument(..., help="Scenario folder (holding scenario.json)."),
    out: Path = typer.Argument(..., help="The .xodr file to write (replaced when it exists)."),
) -> None:
    """Write SCENARIO's lanes and lines as an ASAM OpenDRIVE 1.7 network (ASAM's checker accepts it; avsim convert --from opendrive reads it back)."""
    from avsim.scenario.exporters.opendrive import export_opendrive
    from avsim.scenario.io import load_scenario

    r = export_opendrive(load_scenario(scenario), out)
    typer.echo(f"wrote {out} ({r.roads} roads, {r.connecting_roads} of them in {r.junctions} junctions, {r.geometries} geometries, "
               f"{r.crosswalks} crosswalks; largest gap bridged between linked lanes {r.max_move_m * 100:.1f} cm)", err=True)  # fmt: skip
    unmatched = {k: v for k, v in r.unmatched_m.items() if v > 0}
    if unmatched or r.lanes_skipped or r.dropped:
        parts = [f"{v:.0f} m of {k} along no lane rail" for k, v in unmatched.items()]
        parts += [f"{r.lanes_skipped} lanes shorter than 0.5 m"] if r.lanes_skipped else []
        parts += [f"{n} {k}" for k, n in r.dropped.items()]
        typer.echo("  not written: " + ", ".join(parts), err=True)


@app.command("openscenario")
def openscenario_command(
    scenario: Path = typer.Argument(..., help="Scenario folder (holding scenario.json)."),
    out: Path = typer.Argument(..., help="Folder to write <id>.xosc and <id>.xodr into (absent, empty, or an earlier export, which is replaced)."),
) -> None:
    """Write SCENARIO as ASAM OpenSCENARIO 1.2: each track a FollowTrajectoryAction of its recorded poses, the map as OpenDRIVE (ASAM's checkers accept both; avsim convert reads them back)."""
    from avsim.scenario.exporters.openscenario import export_openscenario
    from avsim.scenario.io import load_scenario

    r = export_openscenario(load_scenario(scenario), out)
    kinds = ", ".join(f"{n} {k}" for k, n in r.entities.items())
    typer.echo(f"wrote {r.xosc} and {r.xodr.name} ({kinds}; {r.vertices} trajectory vertices)", err=True)


@app.command("nuscenes")
def nuscenes_command(
    paths: list[Path] = typer.Argument(..., metavar="SOURCE... OUT", help="SOURCE... OUT: label folders, or render / generate / `avsim run` outputs holding them (one scene each), then the dataroot to write (absent, empty, or an earlier export, which is replaced)."),
    scenario: Path = typer.Option(..., "--scenario", help="The scenario the labels were made from, or a folder of scenario folders (matched by scenario id)."),
    version: str = typer.Option("v1.0-trainval", "--version", help="The table folder's name (nuScenes' are v1.0-trainval, v1.0-mini, v1.0-test; mmdetection3d's converter takes only these)."),
    beams: int = typer.Option(32, "--lidar-beams", min=1, max=512, help="LiDAR beams, evenly spread over the HDL-32E's -30.67 to +10.67 deg."),
    elevations: str | None = typer.Option(None, "--lidar-elevations", help="An explicit elevation table, comma-separated degrees (overrides --lidar-beams)."),
    azimuth: float = typer.Option(1.0 / 3.0, "--lidar-azimuth-deg", help="LiDAR azimuth resolution (deg)."),
    max_range: float = typer.Option(70.0, "--lidar-range-m", help="LiDAR range (m)."),
) -> None:
    """Write labelled renders / generated clips as a nuScenes v1.0 dataset (tables, JPEGs, LiDAR sweeps, maps; docs/labels.md)."""
    from avsim.core.errors import AvsimInputError
    from avsim.core.label_folders import find_label_folders
    from avsim.core.progress import progress_bar
    from avsim.render.geometry.lidar import nuscenes_lidar
    from avsim.render.labels.nuscenes_export import ExportOptions, export_nuscenes, planned_files

    if len(paths) < 2:
        raise typer.BadParameter("give SOURCE... OUT (at least one source and the output)", param_hint="'PATHS'")
    *sources, out = paths
    found = find_label_folders(sources)
    if not found:
        raise AvsimInputError(sources[0], "labels", "no label folder (labels/index.json) found")
    table = None
    if elevations is not None:
        try:
            table = tuple(float(v) for v in elevations.split(",") if v.strip())
        except ValueError:
            raise typer.BadParameter(f"expected comma-separated degrees, got {elevations!r}", param_hint="'--lidar-elevations'") from None
    try:
        lidar = nuscenes_lidar(beams, table, azimuth, max_range)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--lidar-*'") from None
    options = ExportOptions(version, lidar)
    with progress_bar("export nuscenes", unit="files") as bar:
        task = bar.add_task("", total=planned_files(found))
        counts = export_nuscenes(found, scenario, out, options, lambda n: bar.advance(task, n))
    typer.echo(f"wrote {out} ({version}): {counts.scenes} scenes, {counts.samples} samples, {counts.camera_frames} camera frames, "
               f"{counts.lidar_sweeps} LiDAR sweeps, {counts.annotations} annotations", err=True)  # fmt: skip
    if counts.dropped_frames:
        typer.echo(f"  {counts.dropped_frames} frames after the scenes' last keyframes left out (a nuScenes scene ends on a keyframe)", err=True)
