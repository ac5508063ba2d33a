"""`avsim run render|labels|convert|eval DATASET OUT`: dataset-scale jobs (option parsing only;
the work is in `avsim.jobs.run`). See docs/jobs.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from avsim.jobs.engines import EngineConfig
from avsim.jobs.fid import ClipBootstrap

app = typer.Typer(help="Run a command over a dataset: one task per item, on a local process pool or on Ray.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)  # fmt: skip

DATASET_HELP = "A folder of items or a manifest (.csv / .parquet with a column `path`, optional `name` and option columns)."
ENGINE_HELP = "local (a process pool) or ray (pip install 'avsim[ray]')."
ADDRESS_HELP = "ray: join this cluster (auto, ray://head:10001); default: start a local Ray instance."
WORKERS_HELP = "local: worker processes; ray without --address: CPUs of the local instance (default: all cores)."


def _engine(engine: str, address: str | None, cpus_per_task: float, workers: int | None, max_retries: int) -> EngineConfig:
    if engine not in ("local", "ray"):
        raise typer.BadParameter(f"--engine: expected local or ray, got {engine!r}")
    if address and engine != "ray":
        raise typer.BadParameter("--address needs --engine ray")
    if (workers is not None and workers < 1) or cpus_per_task <= 0 or max_retries < 0:
        raise typer.BadParameter("--workers must be >= 1, --cpus-per-task > 0, --max-retries >= 0")
    return EngineConfig(engine, workers, address, cpus_per_task, 0.0, max_retries)


def _with_interval(value: float, interval: dict[str, Any] | None) -> str:
    """`12.3 [10.1, 14.5]`, `12.3 [n/a (1 clip)]`, or the bare value without a bootstrap."""
    if interval is None:
        return f"{value:.6g}"
    if interval.get("note"):
        return f"{value:.6g} [{interval['note']}]"
    return f"{value:.6g} [{interval['ci_low']:.6g}, {interval['ci_high']:.6g}]"


def _run(kind: str, dataset: Path, out: Path, options: dict[str, Any], config: EngineConfig, real: Path | None = None,
         bootstrap: ClipBootstrap | None = None, wait: bool = False) -> None:  # fmt: skip
    from rich.console import Console

    from avsim.jobs.run import run_job

    report = run_job(kind, dataset, out, options, config, real=real, console=Console(stderr=True), bootstrap=bootstrap, wait=wait)
    if report.frechet is not None:
        metric = "fvd" if "fvd" in report.frechet else "fid"
        value, ivs = report.frechet[metric], report.frechet.get("bootstrap", {})
        n_1, by_n = (_with_interval(value[n], ivs.get(n)) for n in ("unbiased_n_minus_1", "biased_n"))
        how = f"; {bootstrap.level:.0%} interval over clips, {min(bootstrap.n_resamples, 200)} resamples" if bootstrap else ""
        typer.echo(f"{metric.upper()} {n_1} (N-1), {by_n} (/N){how} -> {out / f'{metric}.json'}")
    if report.failed:
        raise typer.Exit(1)


ENGINE = typer.Option("local", "--engine", help=ENGINE_HELP)
ADDRESS = typer.Option(None, "--address", help=ADDRESS_HELP)
CPUS = typer.Option(1.0, "--cpus-per-task", help="CPUs each task requests (ray).")
WORKERS = typer.Option(None, "--workers", help=WORKERS_HELP)
RETRIES = typer.Option(3, "--max-retries", help="ray: retries of a task whose worker died.")
WAIT = typer.Option(False, "--wait", help="When another avsim process is running a job into OUT, wait for it (default: stop with one line).")


@app.command("render")
def render(
    dataset: Path = typer.Argument(..., help=f"Scenario folders (or `avsim edit` variants folders). {DATASET_HELP}"),
    out: Path = typer.Argument(..., help="Output folder: OUT/<item>/<clip>/<clip>.<camera>.mp4 (as `avsim render`)."),
    cameras: str = typer.Option(None, "--cameras", help="Comma-separated camera names."),
    start: float = typer.Option(None, "--start", help="First time, seconds from the clip start."),
    end: float = typer.Option(None, "--end", help="Last time, seconds from the clip start."),
    frames: str = typer.Option(None, "--frames", help="N (the first N) or A:B."),
    fps: float = typer.Option(None, "--fps", help="Render rate (default 30)."),
    size: str = typer.Option(None, "--size", help="Frame size WxH (default 1280x720)."),
    chunk: int = typer.Option(None, "--chunk", help="Chunk length in frames (0: one video)."),
    rig: str = typer.Option(None, "--rig", help="scenario, cosmos, nuscenes, av2, waymo."),
    backend: str = typer.Option(None, "--backend", help="numba or torch."),
    preset: str = typer.Option(None, "--preset", help="libx264 preset."),
    layout: str = typer.Option(None, "--layout", help="default, posttrain or both."),
    labels: bool = typer.Option(False, "--labels", help="Also write labels."),
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, workers: int = WORKERS, max_retries: int = RETRIES,
    wait: bool = WAIT,
) -> None:  # fmt: skip
    """Render every scenario of DATASET (`avsim render` per item)."""
    options = {"cameras": cameras, "start": start, "end": end, "frames": frames, "fps": fps, "size": size, "chunk": chunk,
               "rig": rig, "backend": backend, "preset": preset, "layout": layout, "labels": labels or None}  # fmt: skip
    _run("render", dataset, out, options, _engine(engine, address, cpus_per_task, workers, max_retries), wait=wait)


@app.command("labels")
def labels(
    dataset: Path = typer.Argument(..., help=f"Scenario folders. {DATASET_HELP}"),
    out: Path = typer.Argument(..., help="Output folder: OUT/<item>/<clip>/labels/ (as `avsim labels`)."),
    cameras: str = typer.Option(None, "--cameras", help="Comma-separated camera names."),
    start: float = typer.Option(None, "--start", help="First time, seconds from the clip start."),
    end: float = typer.Option(None, "--end", help="Last time, seconds from the clip start."),
    frames: str = typer.Option(None, "--frames", help="N (the first N) or A:B."),
    fps: float = typer.Option(None, "--fps", help="Frame rate (default 30)."),
    size: str = typer.Option(None, "--size", help="Image size WxH."),
    rig: str = typer.Option(None, "--rig", help="scenario, cosmos, nuscenes, av2, waymo."),
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, workers: int = WORKERS, max_retries: int = RETRIES,
    wait: bool = WAIT,
) -> None:  # fmt: skip
    """Write the labels of every scenario of DATASET (`avsim labels` per item)."""
    options = {"cameras": cameras, "start": start, "end": end, "frames": frames, "fps": fps, "size": size, "rig": rig}
    _run("labels", dataset, out, options, _engine(engine, address, cpus_per_task, workers, max_retries), wait=wait)


@app.command("convert")
def convert(
    dataset: Path = typer.Argument(..., help=f"Source files or folders, one scene each. {DATASET_HELP}"),
    out: Path = typer.Argument(..., help="Output folder: one scenario folder OUT/<item>/ per source."),
    from_format: str = typer.Option(None, "--from", help="Source format (default: detected per item)."),
    rig: str = typer.Option(None, "--rig", help="Replace each source's camera rig by this named rig."),
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, workers: int = WORKERS, max_retries: int = RETRIES,
    wait: bool = WAIT,
) -> None:  # fmt: skip
    """Convert every source of DATASET (`avsim convert` per item)."""
    _run("convert", dataset, out, {"format": from_format, "rig": rig}, _engine(engine, address, cpus_per_task, workers, max_retries), wait=wait)


@app.command("eval")
def evaluate(
    dataset: Path = typer.Argument(..., help=f"Generated clips (videos or frame folders). {DATASET_HELP}"),
    out: Path = typer.Argument(..., help="Output folder: per-clip features OUT/generated|real/<clip>/ and OUT/fid.json (fvd.json)."),
    real: Path = typer.Option(..., "--real", help="Real clips: a folder of clips or a manifest."),
    metric: str = typer.Option("fid", "--metric", help="fid (Inception frames) or fvd (I3D 16-frame windows)."),
    weights: Path = typer.Option(None, "--weights", help="Inception (fid) or I3D (fvd) weights (default: the installed ones)."),
    max_frames: int = typer.Option(None, "--max-frames", help="fid: frames per clip (default: all)."),
    batch_size: int = typer.Option(None, "--batch-size", help="fid: frames per network batch (default 16)."),
    stride: int = typer.Option(None, "--stride", help="fvd: frames between window starts (default 16)."),
    max_windows: int = typer.Option(None, "--max-windows", help="fvd: windows per clip (default: all)."),
    cache: Path = typer.Option(None, "--cache", help="Feature cache folder (shared with `avsim eval fid|fvd --cache`)."),
    n_resamples: int = typer.Option(1000, "--n-resamples", help="Bootstrap resamples over clips (at most 200 drawn, as `avsim eval report`)."),
    level: float = typer.Option(0.95, "--level", help="The bootstrap interval's level."),
    seed: int = typer.Option(0, "--seed", help="The bootstrap's seed."),
    no_bootstrap: bool = typer.Option(False, "--no-bootstrap", help="Skip the bootstrap interval over clips."),
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, workers: int = WORKERS, max_retries: int = RETRIES,
    wait: bool = WAIT,
) -> None:  # fmt: skip
    """FID (or FVD) of DATASET against --real: per-clip features in tasks, statistics merged on the driver,
    and the bootstrap interval over clips that `avsim eval report` gives."""
    if metric not in ("fid", "fvd"):
        raise typer.BadParameter(f"--metric: expected fid or fvd, got {metric!r}")
    options = {"metric": metric, "weights": str(weights.resolve()) if weights else None, "max_frames": max_frames,
               "batch_size": batch_size, "stride": stride, "max_windows": max_windows,
               "cache": str(cache.resolve()) if cache else None}  # fmt: skip
    bootstrap = None if no_bootstrap else ClipBootstrap(n_resamples, level, seed)
    _run("eval", dataset, out, options, _engine(engine, address, cpus_per_task, workers, max_retries), real=real, bootstrap=bootstrap, wait=wait)
