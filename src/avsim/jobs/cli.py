"""`avsim run render|labels|convert|generate|pair|encode|sim DATASET OUT`, `avsim run eval fid|fvd|detect
DATASET OUT` and `avsim run export nuscenes DATASET OUT`: dataset-scale jobs (option parsing only; the work is
in `avsim.jobs.run`). See docs/jobs.md."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from avsim.jobs.engines import ENGINES, Engine, EngineConfig
from avsim.jobs.fid import ClipBootstrap
from avsim.models.cli import MODEL, model_options
from avsim.models.options import ModelOptions

if TYPE_CHECKING:
    from avsim.jobs.run import JobReport

app = typer.Typer(help="Run a command over a dataset: one task per item, on a local process pool or on Ray.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)  # fmt: skip

DATASET_HELP = "A folder of items or a manifest (.csv / .parquet with a column `path`, optional `name` and option columns)."
ENGINE_HELP = "local (a process pool) or ray (pip install 'avsim[ray]')."
ADDRESS_HELP = "ray: join this cluster (auto, ray://head:10001); default: start a local Ray instance."
WORKERS_HELP = "local: worker processes; ray without --address: CPUs of the local instance (default: all cores)."


def _engine(engine: str, address: str | None, cpus_per_task: float, workers: int | None, max_retries: int,
            gpus_per_task: float | None = 0.0) -> EngineConfig:  # fmt: skip
    if engine not in ENGINES:
        raise typer.BadParameter(f"--engine: expected {' or '.join(ENGINES)}, got {engine!r}")
    if address and engine != Engine.RAY:
        raise typer.BadParameter("--address needs --engine ray")
    if (workers is not None and workers < 1) or cpus_per_task <= 0 or max_retries < 0 or (gpus_per_task or 0) < 0:
        raise typer.BadParameter("--workers must be >= 1, --cpus-per-task > 0, --gpus-per-task and --max-retries >= 0")
    return EngineConfig(Engine(engine), workers, address, cpus_per_task, gpus_per_task, max_retries)


def _resolved(path: Path | None) -> str | None:
    return str(path.resolve()) if path is not None else None


def _model_job_options(model: ModelOptions) -> dict[str, Any]:
    """The job options of the model options: the ones not at their defaults (a manifest column may
    set those per item), paths absolute, flags True."""
    default = ModelOptions()
    return {name: _resolved(value) if isinstance(value, Path) else value
            for name, value in model.model_kwargs().items() if value != getattr(default, name)}  # fmt: skip


def _with_interval(value: float, interval: dict[str, Any] | None) -> str:
    """`12.3 [10.1, 14.5]`, `12.3 [n/a (1 clip)]`, or the bare value without a bootstrap."""
    if interval is None:
        return f"{value:.6g}"
    if interval.get("note"):
        return f"{value:.6g} [{interval['note']}]"
    return f"{value:.6g} [{interval['ci_low']:.6g}, {interval['ci_high']:.6g}]"


def _run(kind: str, dataset: Path, out: Path, options: dict[str, Any], config: EngineConfig, real: Path | None = None,
         bootstrap: ClipBootstrap | None = None, seeds: tuple[int, ...] = (0,), wait: bool = False,
         generated: Path | None = None) -> JobReport:  # fmt: skip
    """Run the job; print eval's distance; exit 1 when an item failed."""
    from rich.console import Console

    from avsim.jobs.run import run_job

    wait = wait or _WAIT.get()  # `--wait` (every kind has it: `_shared_wait`)
    report = run_job(kind, dataset, out, options, config, real=real, console=Console(stderr=True), bootstrap=bootstrap, seeds=seeds,
                     wait=wait, generated=generated)  # fmt: skip
    if report.frechet is not None:
        metric = "fvd" if "fvd" in report.frechet else "fid"
        value, ivs = report.frechet[metric], report.frechet.get("bootstrap", {})
        n_1, by_n = (_with_interval(value[n], ivs.get(n)) for n in ("unbiased_n_minus_1", "biased_n"))
        how = f"; {bootstrap.level:.0%} interval over clips, {min(bootstrap.n_resamples, 200)} resamples" if bootstrap else ""
        typer.echo(f"{metric.upper()} {n_1} (N-1), {by_n} (/N){how} -> {out / f'{metric}.json'}")
    if report.failed:
        raise typer.Exit(1)
    return report


ENGINE = typer.Option("local", "--engine", help=ENGINE_HELP)
ADDRESS = typer.Option(None, "--address", help=ADDRESS_HELP)
CPUS = typer.Option(1.0, "--cpus-per-task", help="CPUs each task requests (ray).")
WORKERS = typer.Option(None, "--workers", help=WORKERS_HELP)
RETRIES = typer.Option(3, "--max-retries", help="ray: retries of a task whose worker died.")
GPUS = typer.Option(None, "--gpus-per-task", help="GPUs per task (ray: requested; local: each worker's own); default 1 when the engine has a GPU, else 0.")
LABEL_FILES = typer.Option(None, "--label-files", help="Label layout: compact (default), standard or both (docs/labels.md).")
IMAGES = typer.Option(None, "--images", help="Also write every labelled frame as a jpg or png file under labels/images/<camera>/.")
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
    size: str = typer.Option(None, "--size", help="Frame size WxH for every camera (default: each camera at its own aspect, 720 high)."),
    chunk: int = typer.Option(None, "--chunk", help="Chunk length in frames (0: one video)."),
    rig: str = typer.Option(None, "--rig", help="scenario, cosmos, nuscenes, av2, waymo."),
    backend: str = typer.Option(None, "--backend", help="numba or torch."),
    preset: str = typer.Option(None, "--preset", help="libx264 preset."),
    layout: str = typer.Option(None, "--layout", help="default, posttrain, both, multiview or omnidreams (see avsim render --help)."),
    labels: bool = typer.Option(False, "--labels", help="Also write labels."),
    label_files: str = LABEL_FILES, images: str = IMAGES,
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, workers: int = WORKERS, max_retries: int = RETRIES,
    wait: bool = WAIT,
) -> None:  # fmt: skip
    """Render every scenario of DATASET (`avsim render` per item)."""
    options = {"cameras": cameras, "start": start, "end": end, "frames": frames, "fps": fps, "size": size, "chunk": chunk,
               "rig": rig, "backend": backend, "preset": preset, "layout": layout, "labels": labels or None,
               "label_files": label_files, "images": images}  # fmt: skip
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
    size: str = typer.Option(None, "--size", help="Image size WxH for every camera (default: each camera at its own aspect, 720 high)."),
    rig: str = typer.Option(None, "--rig", help="scenario, cosmos, nuscenes, av2, waymo."),
    label_files: str = LABEL_FILES, images: str = IMAGES,
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, workers: int = WORKERS, max_retries: int = RETRIES,
    wait: bool = WAIT,
) -> None:  # fmt: skip
    """Write the labels of every scenario of DATASET (`avsim labels` per item)."""
    options = {"cameras": cameras, "start": start, "end": end, "frames": frames, "fps": fps, "size": size, "rig": rig,
               "label_files": label_files, "images": images}  # fmt: skip
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


OLD_EVAL_FORM = ("`avsim run eval` takes the metric first: `avsim run eval fid|fvd DATASET OUT --real REAL [...]` "
                 "(--metric is gone) or `avsim run eval detect DATASET OUT --detector MODULE:CALLABLE`")  # fmt: skip
_USAGE_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")  # typer's own click


class _EvalGroup(TyperGroup):
    """`avsim run eval`: a call in the old form (`avsim run eval DATASET OUT --metric ...`) is one line naming the new one."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            raise _USAGE_ERROR(f"{OLD_EVAL_FORM}; got {args[0]!r}")  # no context: click prints the one line
        return super().parse_args(ctx, args)


eval_app = typer.Typer(help="Metrics over a dataset: FID / FVD of generated against real clips, or a detector over clip folders.",
                       no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, cls=_EvalGroup)  # fmt: skip
app.add_typer(eval_app, name="eval")

REAL = typer.Option(..., "--real", help="Real clips: a folder of clips or a manifest.")
CACHE = typer.Option(None, "--cache", help="Feature cache folder (shared with `avsim eval fid|fvd --cache`).")
N_RESAMPLES = typer.Option(1000, "--n-resamples", help="Bootstrap resamples over clips (at most 200 drawn, as `avsim eval report`).")
LEVEL = typer.Option(0.95, "--level", help="The bootstrap interval's level.")
SEED = typer.Option(0, "--seed", help="The bootstrap's seed.")
NO_BOOTSTRAP = typer.Option(False, "--no-bootstrap", help="Skip the bootstrap interval over clips.")
CLIPS_HELP = f"Generated clips (videos or frame folders). {DATASET_HELP}"


def _frechet(metric: str, dataset: Path, out: Path, real: Path, options: dict[str, Any], weights: Path | None,
             cache: Path | None, bootstrap: ClipBootstrap | None, config: EngineConfig, wait: bool) -> None:  # fmt: skip
    """`avsim run eval fid|fvd`: the options as the job records them (the digests of the former `--metric` form)."""
    options = {"metric": metric, "weights": str(weights.resolve()) if weights else None, **options,
               "cache": str(cache.resolve()) if cache else None}  # fmt: skip
    _run("eval", dataset, out, options, config, real=real, bootstrap=bootstrap, wait=wait)


@eval_app.command("fid")
def eval_fid(
    dataset: Path = typer.Argument(..., help=CLIPS_HELP),
    out: Path = typer.Argument(..., help="Output folder: per-clip features OUT/generated|real/<clip>/ and OUT/fid.json."),
    real: Path = REAL,
    weights: Path = typer.Option(None, "--weights", help="Inception weights (default: the installed ones)."),
    max_frames: int = typer.Option(None, "--max-frames", help="Frames per clip (default: all)."),
    batch_size: int = typer.Option(None, "--batch-size", help="Frames per network batch (default 16)."),
    cache: Path = CACHE, n_resamples: int = N_RESAMPLES, level: float = LEVEL, seed: int = SEED, no_bootstrap: bool = NO_BOOTSTRAP,
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, workers: int = WORKERS, max_retries: int = RETRIES,
    wait: bool = WAIT,
) -> None:  # fmt: skip
    """FID (Inception frames) of DATASET against --real: per-clip features in tasks, statistics merged on the driver,
    and the bootstrap interval over clips that `avsim eval report` gives."""
    bootstrap = None if no_bootstrap else ClipBootstrap(n_resamples, level, seed)
    _frechet("fid", dataset, out, real, {"max_frames": max_frames, "batch_size": batch_size}, weights, cache, bootstrap,
             _engine(engine, address, cpus_per_task, workers, max_retries), wait)  # fmt: skip


@eval_app.command("fvd")
def eval_fvd(
    dataset: Path = typer.Argument(..., help=CLIPS_HELP),
    out: Path = typer.Argument(..., help="Output folder: per-clip features OUT/generated|real/<clip>/ and OUT/fvd.json."),
    real: Path = REAL,
    weights: Path = typer.Option(None, "--weights", help="I3D weights (default: the installed ones)."),
    stride: int = typer.Option(None, "--stride", help="Frames between 16-frame window starts (default 16)."),
    max_windows: int = typer.Option(None, "--max-windows", help="Windows per clip (default: all)."),
    cache: Path = CACHE, n_resamples: int = N_RESAMPLES, level: float = LEVEL, seed: int = SEED, no_bootstrap: bool = NO_BOOTSTRAP,
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, workers: int = WORKERS, max_retries: int = RETRIES,
    wait: bool = WAIT,
) -> None:  # fmt: skip
    """FVD (I3D 16-frame windows) of DATASET against --real: per-clip features in tasks, statistics merged on the
    driver, and the bootstrap interval over clips that `avsim eval report` gives."""
    bootstrap = None if no_bootstrap else ClipBootstrap(n_resamples, level, seed)
    _frechet("fvd", dataset, out, real, {"stride": stride, "max_windows": max_windows}, weights, cache, bootstrap,
             _engine(engine, address, cpus_per_task, workers, max_retries), wait)  # fmt: skip


@eval_app.command("detect")
def eval_detect(
    dataset: Path = typer.Argument(..., help=f"Clip folders (labels/index.json and the videos), or folders of them. {DATASET_HELP}"),
    out: Path = typer.Argument(..., help="Output folder: what `avsim eval detect` writes (with --generated: OUT/real/, OUT/generated/); items in clips/<clip>/."),
    detector: str = typer.Option(..., "--detector", help="MODULE:CALLABLE taking a FrameBatch, returning Detections (a class: one instance per clip)."),
    generated: Path = typer.Option(None, "--generated", help="Generated clip folders (as DATASET): detected too, into OUT/generated."),
    cameras: str = typer.Option(None, "--cameras", help="Evaluated cameras, comma-separated (default: with --generated the cameras both sides' clip has, else all)."),
    gt_visibility: str = typer.Option("visible", "--gt-visibility", help="Ground truth: visible (default), in-view or all (as `avsim eval detect`)."),
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS,
    gpus_per_task: float = typer.Option(0.0, "--gpus-per-task", help="GPUs per task for the detector (ray: requested; local: each worker's own)."),
    workers: int = WORKERS, max_retries: int = RETRIES, wait: bool = WAIT,
) -> None:  # fmt: skip
    """Run a detector over every clip folder of DATASET (`avsim eval detect` per clip), merged into the files
    `avsim eval let`, `eval lanes` and `eval report` read."""
    from avsim.evaluation.detect import summary_lines

    options = {"detector": detector, "cameras": cameras, "gt_visibility": gt_visibility}
    report = _run("detect", dataset, out, options, _engine(engine, address, cpus_per_task, workers, max_retries, gpus_per_task),
                  wait=wait, generated=generated)  # fmt: skip
    for line in summary_lines(report.detect, out) if report.detect is not None else []:  # (None: an item failed, exit 1 above)
        typer.echo(line)


@app.command("generate")
@model_options()
def generate(
    dataset: Path = typer.Argument(..., help=f"`avsim run render` output: one folder per item. {DATASET_HELP}"),
    out: Path = typer.Argument(..., help="Output folder: OUT/<item>/<clip>/ (as `avsim generate` of each clip, labels remapped)."),
    model: ModelOptions = MODEL,  # --config, --checkpoint, --vae, --random-weights, --embeddings, --zero-text
    prompt: str = typer.Option(None, "--prompt", help="Caption (with --text-encoder); a manifest column prompt sets it per item."),
    negative_prompt: str = typer.Option(None, "--negative-prompt", help="Negative prompt (with --text-encoder)."),
    text_encoder: Path = typer.Option(None, "--text-encoder", help="Local Cosmos-Reason1-7B folder."),
    random_vae: bool = typer.Option(False, "--random-vae", help="With --checkpoint: the random VAE (output is NOISE)."),
    views: str = typer.Option(None, "--views", help="Comma-separated cameras to generate (default: all of the config)."),
    clip: str = typer.Option(None, "--clip", help="Only this clip of each item (default: every clip)."),
    steps: int = typer.Option(None, "--steps", help="Sampling steps (default: the config's)."),
    guidance: float = typer.Option(None, "--guidance", help="Classifier-free guidance (default: the config's)."),
    seed: int = typer.Option(None, "--seed", help="Noise seed (default 0; every clip uses it)."),
    control_weight: float = typer.Option(None, "--control-weight", help="Scale of the control residuals (default 1)."),
    sampler: str = typer.Option(None, "--sampler", help="unipc or euler."),
    chunks: int = typer.Option(None, "--chunks", help="Autoregressive chunks of the model's frames (default 1)."),
    overlap: int = typer.Option(None, "--overlap", help="Frames shared by consecutive chunks (default 1)."),
    device: str = typer.Option(None, "--device", help="cuda or cpu inside each task (default: cuda when the task has a GPU)."),
    offload: bool = typer.Option(False, "--offload", help="VAE on the CPU between uses; text encoder on the CPU."),
    vae_tile: int = typer.Option(None, "--vae-tile", help="VAE spatial tile size in pixels."),
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, gpus_per_task: float = GPUS,
    workers: int = WORKERS, max_retries: int = RETRIES,
) -> None:  # fmt: skip
    """Generate every clip of every render item of DATASET (`avsim generate` per clip, models loaded once per item)."""
    options = {**_model_job_options(model), "prompt": prompt, "negative_prompt": negative_prompt,
               "text_encoder": _resolved(text_encoder), "random_vae": random_vae or None, "views": views, "clip": clip, "steps": steps, "guidance": guidance, "seed": seed,
               "control_weight": control_weight, "sampler": sampler, "chunks": chunks, "overlap": overlap, "device": device,
               "offload": offload or None, "vae_tile": vae_tile}  # fmt: skip
    if model.random_weights or random_vae:
        typer.echo("warning: random weights (--random-weights / --random-vae): the generated videos are NOISE; "
                   "settings.json says output_is_noise", err=True)  # fmt: skip
    _run("generate", dataset, out, options, _engine(engine, address, cpus_per_task, workers, max_retries, gpus_per_task))


@app.command("pair")
def pair(
    dataset: Path = typer.Argument(..., help=f"`avsim run render` output: one folder per item. {DATASET_HELP}"),
    out: Path = typer.Argument(..., help="Post-training layout: OUT/videos|control_input_hdmap_bbox|captions|labels/, items in OUT/clips/<item>/."),
    real: Path = typer.Option(None, "--real", help="Real recordings: REAL/<item>/<clip>.<camera>.mp4 (or a manifest column real: the item's folder)."),
    caption: str = typer.Option(None, "--caption", help="Caption of the front-wide view (or a manifest column caption)."),
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, workers: int = WORKERS, max_retries: int = RETRIES,
) -> None:  # fmt: skip
    """Pair every render item of DATASET with its real recordings into one post-training layout (`avsim train pair` per clip)."""
    options = {"real": _resolved(real), "caption": caption}
    _run("pair", dataset, out, options, _engine(engine, address, cpus_per_task, workers, max_retries))


@app.command("encode")
def encode(
    dataset: Path = typer.Argument(..., help="A post-training layout (`avsim run pair` output): one item per clip."),
    out: Path = typer.Argument(..., help="Latent cache: OUT/<clip>/<clip>_<k>.safetensors, OUT/index.json, OUT/blank_text.safetensors."),
    model: str = typer.Option(None, "--model", help="Model config (sets the VAE and the clip size; default transfer25_2b_multiview)."),
    vae: Path = typer.Option(None, "--vae", help="Wan2.1 VAE weights (tokenizer.pth)."),
    random_vae: bool = typer.Option(False, "--random-vae", help="An untrained VAE instead of --vae (debug chain)."),
    text_encoder: Path = typer.Option(None, "--text-encoder", help="Local Cosmos-Reason1-7B folder."),
    zero_text: bool = typer.Option(False, "--zero-text", help="Store zero text embeddings (no text encoder)."),
    max_clips: int = typer.Option(None, "--max-clips-per-video", help="Windows of the model's frames taken per video."),
    device: str = typer.Option(None, "--device", help="cuda or cpu inside each task (default: cuda when the task has a GPU)."),
    store_dtype: str = typer.Option(None, "--store-dtype", help="bfloat16 (default) or float32."),
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, gpus_per_task: float = GPUS,
    workers: int = WORKERS, max_retries: int = RETRIES,
) -> None:  # fmt: skip
    """Encode every clip of a post-training layout into one latent cache (`avsim train encode`, one task per clip)."""
    options = {"model": model, "vae": _resolved(vae), "random_vae": random_vae or None, "text_encoder": _resolved(text_encoder),
               "zero_text": zero_text or None, "max_clips_per_video": max_clips, "device": device, "store_dtype": store_dtype}  # fmt: skip
    _run("encode", dataset, out, options, _engine(engine, address, cpus_per_task, workers, max_retries, gpus_per_task))


MAX_SEEDS = 1000  # seeds a scenario runs with (every seed is an episode and a folder)


def _seeds(value: str) -> tuple[int, ...]:
    """`0,1,2` or `0:8` (a range) -> the seeds (at most `MAX_SEEDS`, counted before any is made)."""
    try:
        if ":" in value:
            lo, hi = (int(v) for v in value.split(":"))
            count = hi - lo
        else:
            parts = [v for v in value.split(",") if v.strip()]
            count = len(parts)
        if count > MAX_SEEDS:
            raise typer.BadParameter(f"--seeds: {count} seeds, more than the {MAX_SEEDS} a job may run each scenario with")
        seeds = tuple(range(lo, hi)) if ":" in value else tuple(int(v) for v in parts)
    except ValueError:
        raise typer.BadParameter(f"--seeds: expected 0,1,2 or A:B, got {value!r}") from None
    if not seeds or min(seeds) < 0 or max(seeds) >= 2**63 or len(set(seeds)) != len(seeds):
        raise typer.BadParameter(f"--seeds: expected distinct seeds in [0, 2**63), got {value!r}")
    return seeds


@app.command("sim")
def sim(
    dataset: Path = typer.Argument(..., help=f"Scenario folders. {DATASET_HELP}"),
    out: Path = typer.Argument(..., help="Output folder: OUT/<item>/seed<N>/ (as `avsim sim`), OUT/sim_summary.csv."),
    policy: str = typer.Option(None, "--policy", help="expert, constant-velocity, idm (default) or MODULE:CALLABLE."),
    agents: str = typer.Option(None, "--agents", help="log (default) or idm."),
    seeds: str = typer.Option("0", "--seeds", help="Seeds each scenario runs with: 0,1,2 or A:B."),
    cameras: str = typer.Option(None, "--cameras", help="Cameras rendered every step for the policy (comma-separated, or all)."),
    size: str = typer.Option(None, "--size", help="Camera image size WxH."),
    steps: int = typer.Option(None, "--steps", help="Episode length in steps (default: each scenario's span)."),
    duration: float = typer.Option(None, "--duration", help="Episode length in seconds."),
    controller: str = typer.Option(None, "--controller", help="auto (default), lqr or perfect."),
    budget: float = typer.Option(None, "--budget", help="CPU seconds each policy call may compute (default 1; over 10x that in wall time, at least 60 s: hung)."),
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, workers: int = WORKERS, max_retries: int = RETRIES,
) -> None:  # fmt: skip
    """Drive every scenario of DATASET with a policy for every seed (`avsim sim` per item and seed); a table of scores."""
    options = {"policy": policy, "agents": agents, "cameras": cameras, "size": size, "steps": steps, "duration": duration,
               "controller": controller, "budget": budget}  # fmt: skip
    _run("sim", dataset, out, options, _engine(engine, address, cpus_per_task, workers, max_retries), seeds=_seeds(seeds))


export_app = typer.Typer(help="Export a dataset of labelled clips in another tool's format (nuscenes: one nuScenes dataroot).",
                         no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)  # fmt: skip
app.add_typer(export_app, name="export")


@export_app.command("nuscenes")
def export_nuscenes(
    dataset: Path = typer.Argument(..., help=f"Clip folders (labels/ and their videos or images), or folders of them (`avsim run render --labels`, `avsim run generate` outputs). {DATASET_HELP}"),
    out: Path = typer.Argument(..., help="The dataroot: OUT/<version>/, samples/, sweeps/, maps/ (joined when every item is done); items in OUT/scenes/<item>/."),
    scenario: Path = typer.Option(..., "--scenario", help="The scenarios the labels were made from: a scenario folder or a folder of them (matched by id)."),
    version: str = typer.Option("v1.0-trainval", "--version", help="The table folder's name."),
    lidar_beams: int = typer.Option(None, "--lidar-beams", help="LiDAR beams (default 32)."),
    lidar_elevations: str = typer.Option(None, "--lidar-elevations", help="An explicit elevation table, comma-separated degrees."),
    lidar_azimuth_deg: float = typer.Option(None, "--lidar-azimuth-deg", help="LiDAR azimuth resolution (deg; default 1/3)."),
    lidar_range_m: float = typer.Option(None, "--lidar-range-m", help="LiDAR range (m; default 70)."),
    engine: str = ENGINE, address: str = ADDRESS, cpus_per_task: float = CPUS, workers: int = WORKERS, max_retries: int = RETRIES,
    wait: bool = WAIT,
) -> None:  # fmt: skip
    """Export every clip folder of DATASET as one scene (`avsim export nuscenes` per clip), joined into one nuScenes dataroot."""
    report = _run("nuscenes", dataset, out, {"scenario": _resolved(scenario), "version": version, "lidar_beams": lidar_beams,
                                             "lidar_elevations": lidar_elevations, "lidar_azimuth_deg": lidar_azimuth_deg,
                                             "lidar_range_m": lidar_range_m}, _engine(engine, address, cpus_per_task, workers, max_retries),
                  wait=wait)  # fmt: skip
    if report.nuscenes is not None:
        typer.echo(f"joined {report.nuscenes['scene']} scenes into {out} ({version}): {report.nuscenes['sample']} samples, "
                   f"{report.nuscenes['sample_data']} sample_data, {report.nuscenes['sample_annotation']} annotations")  # fmt: skip


# ---- options every kind has ------------------------------------------------------------------------
_WAIT: ContextVar[bool] = ContextVar("avsim_run_wait", default=False)


def _shared_wait(group: typer.Typer) -> None:
    """Give every command of `group` that has no `wait` parameter of its own the `--wait` option: its
    value reaches `_run` through `_WAIT` (so a new kind gets it without a line of its own)."""
    for info in group.registered_commands:
        callback = info.callback
        if callback is None or "wait" in inspect.signature(callback).parameters:
            continue
        info.callback = _with_wait(callback)


def _with_wait(callback: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(callback)
    option = inspect.Parameter("wait", inspect.Parameter.KEYWORD_ONLY, default=WAIT, annotation=bool)

    @functools.wraps(callback)
    def command(*args: Any, wait: bool = False, **kwargs: Any) -> Any:
        token = _WAIT.set(wait)
        try:
            return callback(*args, **kwargs)
        finally:
            _WAIT.reset(token)

    command.__signature__ = signature.replace(parameters=[*signature.parameters.values(), option])  # type: ignore[attr-defined]
    return command


_shared_wait(app)
_shared_wait(eval_app)
_shared_wait(export_app)
