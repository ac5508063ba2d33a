"""The kinds of `avsim run`: one declarative entry each in `KINDS` (docs/jobs.md, "Adding a kind").

An entry (`KindSpec`) holds everything the job machinery needs of a kind:

- `command`: the words after `avsim run`; `options`: the option names and types that the command
  and a manifest's columns give (a `Path` option is a file or folder);
- `items`: the items of a DATASET folder (a lister of `avsim.jobs.dataset`); a manifest is read
  the same way for every kind (`manifest_options`: whether it may hold option columns;
  `no_manifest`: why it is refused);
- `check`: refuses bad command options once, on the driver, before any task starts;
- `item_options`: what an item adds to the command's options (pair: its real videos);
  `weights`: the options name weight files, digested once per job into every item's options;
- `plan`: where the items go (default: one task per item in `OUT/<item>/`; eval and detect plan
  each side, sim each seed);
- `run`: one item, in a worker, into its temporary folder (called by `avsim.jobs.items.run_item`);
  `digest_inputs`: the files an item's input digest covers (default: its source's);
- `gather`: the driver joins the items' outputs before the job report (pair's shared layout,
  encode's index), failing items that cannot join;
- `merge`: the driver merges them after the report (eval's distance, detect's folders, sim's
  score table).

`avsim.jobs.run` runs every kind through its entry, with no branch per kind. A new kind is a
`JobKind` member, an entry here (its functions beside it or in its own module) and its command
in `avsim.jobs.cli`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avsim.core.errors import AvsimInputError
from avsim.jobs import dataset as listers
from avsim.jobs.dataset import MANIFEST_SUFFIXES, Item, JobKind, checked_items, manifest_items
from avsim.jobs.detect import DETECT_CLIPS, check_detect_options, detect_item, with_evaluated_cameras
from avsim.jobs.fid import ClipBootstrap
from avsim.jobs.model_items import (
    PAIR_CLIPS,
    WEIGHT_OPTIONS,
    check_generate_options,
    encode_inputs,
    encode_item,
    encode_item_options,
    encode_settings,
    generate_item,
    merge_cache,
    merge_layout,
    pair_inputs,
    pair_item,
    pair_item_options,
    render_item_inputs,
    warn_labels_for_generation,
    weight_digests,
)
from avsim.jobs.nuscenes_items import NUSCENES_SCENES, check_nuscenes_options, nuscenes_item, nuscenes_item_options
from avsim.jobs.options import coerce_options, render_options, sim_options
from avsim.jobs.progress import current_item
from avsim.jobs.tasks import ItemResult, ItemTask, JobReport

if TYPE_CHECKING:
    from rich.console import Console


@dataclass(frozen=True)
class JobRequest:
    """What `avsim run` was asked: the kind, its dataset and output folder, the command's options,
    and what some kinds take besides.

    Attributes:
        kind: the job kind.
        dataset: a dataset folder or manifest (eval: the generated clips; detect: the real clip folders).
        out: the job's output folder.
        options: the command's options (names and types: the kind's `KindSpec.options`).
        real: eval: the real clips (a folder of clips or a manifest).
        generated: detect: the generated clip folders, detected into `out/generated`.
        seeds: sim: the seeds every scenario runs with.
        bootstrap: eval: the bootstrap over clips written beside the distance (None: none).
    """

    kind: JobKind
    dataset: Path
    out: Path
    options: Mapping[str, Any]
    real: Path | None = None
    generated: Path | None = None
    seeds: tuple[int, ...] = (0,)
    bootstrap: ClipBootstrap | None = None


PlanItems = Callable[[Path, Path], list[ItemTask]]
"""(dataset, folder) -> one task per item of the dataset, in `folder/<item>/` (options merged, checked)."""
Inputs = tuple[list[Path], Path, dict[str, Any]]  # an item's digested files, their root, options replaced by digests


def plan_whole(job: JobRequest, plan_items: PlanItems) -> list[ItemTask]:
    """The default plan: one task per item of the dataset, in `OUT/<item>/`."""
    return plan_items(job.dataset, job.out)


@dataclass(frozen=True)
class KindSpec:
    """One kind of `avsim run`: its options, items, per-item run and driver-side merge (the module docstring)."""

    command: str
    options: Mapping[str, type]
    items: Callable[[Path, str], list[Item]]
    run: Callable[[ItemTask, Path], None]
    check: Callable[[Mapping[str, Any], Path], object] | None = None
    manifest_options: bool = True
    no_manifest: str = ""
    item_options: Callable[[Mapping[str, Any], Item, Path], dict[str, Any]] | None = None
    weights: bool = False
    plan: Callable[[JobRequest, PlanItems], list[ItemTask]] = plan_whole
    digest_inputs: Callable[[ItemTask], Inputs] | None = None
    gather: Callable[[Path, list[ItemTask], list[ItemResult]], list[ItemResult]] | None = None
    merge: Callable[[JobRequest, list[ItemTask], JobReport, Console | None], JobReport] | None = None


# ---- planning -----------------------------------------------------------------------------------
def read_items(dataset: Path, kind: str) -> list[Item]:
    """The items of `dataset` for a job of `kind`, sorted by name.

    Args:
        dataset: a dataset folder or a `.csv` / `.parquet` manifest (`avsim.jobs.dataset`).
        kind: a `JobKind`.

    Returns:
        The items (at least one, names unique).
    """
    if kind not in KINDS:
        raise AvsimInputError(dataset, "kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")
    spec = KINDS[JobKind(kind)]
    if dataset.is_file() and dataset.suffix.lower() in MANIFEST_SUFFIXES:
        if spec.no_manifest:
            raise AvsimInputError(dataset, "DATASET", spec.no_manifest)
        items = manifest_items(dataset, spec.options if spec.manifest_options else {})
    elif dataset.is_dir():
        items = spec.items(dataset, str(kind))
    else:
        raise AvsimInputError(dataset, "DATASET", f"expected a folder or a manifest ({', '.join(MANIFEST_SUFFIXES)})")
    return checked_items(dataset, items, spec.command)


def kind_options(kind: str, options: Mapping[str, Any], source: object) -> dict[str, Any]:
    """`options` typed as `kind` declares them (`avsim.jobs.options.coerce_options`)."""
    return coerce_options(KINDS[JobKind(kind)].options, options, source, str(kind))


def plan_tasks(job: JobRequest) -> list[ItemTask]:
    """The job's tasks: its kind's plan over the items (item options override the command's).

    Args:
        job: the request.

    Returns:
        The tasks, in item order (per side, then per seed, where the kind plans those).
    """
    spec = KINDS[job.kind]
    return spec.plan(job, functools.partial(_item_tasks, spec, job))


def _item_tasks(spec: KindSpec, job: JobRequest, dataset: Path, folder: Path) -> list[ItemTask]:
    """One task per item of `dataset` into `folder/<item>/` (see `PlanItems`)."""
    base = coerce_options(spec.options, job.options, "options", job.kind)
    if spec.check is not None:
        spec.check(base, folder)  # bad options fail here, once
    items = read_items(dataset, job.kind)
    root = folder.resolve()
    digests: dict[str, dict[str, str]] = {}  # weight files digested once per job, however many items name them
    tasks = []
    for item in items:
        opts = {**base, **coerce_options(spec.options, item.options, item.path, job.kind)}
        if spec.item_options is not None:
            opts.update(spec.item_options(base, item, dataset))
        if spec.weights:
            key = json.dumps({k: opts.get(k) for k in WEIGHT_OPTIONS}, sort_keys=True)
            if key not in digests:
                digests[key] = weight_digests(opts)
            opts.update(digests[key])
        tasks.append(ItemTask(job.kind, item.name, item.path.resolve(), root / item.name, opts))
    return tasks


def plan_sides(sides: Mapping[str, Path], out: Path, plan_items: PlanItems, under: str = "") -> list[ItemTask]:
    """The tasks of each side's dataset, in `out/<side>[/under]/<item>`, named `<side>/<item>`, sides in order."""
    return [dataclasses.replace(t, name=f"{side}/{t.name}")
            for side, data in sides.items() for t in plan_items(data, out / side / under if under else out / side)]  # fmt: skip


@contextlib.contextmanager
def shown(console: Console | None, text: str) -> Iterator[None]:
    """A spinner with `text` on `console` while the block runs (None: nothing shown)."""
    if console is None:
        yield
        return
    with console.status(text):
        yield


# ---- render, labels, convert ----------------------------------------------------------------------
def _render(task: ItemTask, tmp: Path) -> None:
    from avsim.edit.render_variants import is_variants_folder, read_variants, run_render_variants
    from avsim.render.run.plan import RenderPlan
    from avsim.render.run.runner import run_render
    from avsim.scenario.io import load_scenario

    item = current_item()
    opts = render_options(task.options, tmp, source=task.source)
    if is_variants_folder(task.source):
        count = len(read_variants(task.source))
        frames: list[Callable[[int], None]] = []

        def variant(i: int, v: Any, scenario: Any) -> None:
            frames[:] = [item.counter(f"render {v.name} ({i + 1}/{count})", RenderPlan.resolve(scenario, opts).progress_units, "frames")]

        run_render_variants(task.source, opts, progress=lambda n: frames[0](n), on_variant=variant)
    else:
        item("loading the scenario")
        scenario = load_scenario(task.source)
        run_render(scenario, opts, progress=item.counter("render", RenderPlan.resolve(scenario, opts).progress_units, "frames"))


def _check_render(options: Mapping[str, Any], folder: Path) -> None:
    """The render options, and a warning when their labels could feed no model (`warn_labels_for_generation`)."""
    render_options(options, folder)
    warn_labels_for_generation(options)


def _labels(task: ItemTask, tmp: Path) -> None:
    from avsim.render.run.labels import run_labels
    from avsim.render.run.plan import RenderPlan
    from avsim.scenario.io import load_scenario

    item = current_item()
    item("loading the scenario")
    scenario = load_scenario(task.source)
    opts = render_options(task.options, tmp, labels_only=True, source=task.source)
    plan = RenderPlan.resolve(scenario, opts)
    run_labels(scenario, opts, progress=item.counter("labels", len(plan.cameras) * (plan.stop - plan.first), "camera-frames"))


def _convert(task: ItemTask, tmp: Path) -> None:
    from avsim.scenario.workflows import convert_to_folder

    current_item()("converting")
    convert_to_folder(task.source, tmp, fmt=task.options.get("format"), rig_name=task.options.get("rig"))


_RENDER_OPTIONS: dict[str, type] = {
    "cameras": str, "start": float, "end": float, "frames": str, "fps": float, "size": str, "chunk": int,
    "rig": str, "backend": str, "preset": str, "layout": str, "labels": bool, "mosaic": bool, "png": bool,
    "label_files": str, "images": str,
}  # fmt: skip
_LABELS_OPTIONS = {k: _RENDER_OPTIONS[k] for k in ("cameras", "start", "end", "frames", "fps", "size", "rig", "label_files", "images")}


# ---- eval fid / fvd, eval detect --------------------------------------------------------------------
def _check_eval(options: Mapping[str, Any], folder: Path) -> None:
    if options.get("metric", "fid") not in ("fid", "fvd"):
        raise AvsimInputError("options", "metric", f"expected fid or fvd, got {options['metric']!r}")


def _eval(task: ItemTask, tmp: Path) -> None:
    from avsim.jobs.fid import write_clip_features

    write_clip_features(task.source, tmp, task.options)


def _plan_eval(job: JobRequest, plan_items: PlanItems) -> list[ItemTask]:
    """Both sides' clips: `OUT/generated/<clip>/`, `OUT/real/<clip>/`."""
    if job.real is None:
        raise AvsimInputError(job.dataset, "--real", "`avsim run eval` needs the real clips (--real)")
    return plan_sides({"generated": job.dataset, "real": job.real}, job.out, plan_items)


def _merge_eval(job: JobRequest, tasks: list[ItemTask], report: JobReport, console: Console | None) -> JobReport:
    """When every clip is current: the distance over both sides, `OUT/fid.json` (`fvd.json`)."""
    from avsim.jobs.fid import merge_eval

    return report if report.failed else dataclasses.replace(report, frechet=merge_eval(job.out, tasks, console, job.bootstrap))


def _plan_detect(job: JobRequest, plan_items: PlanItems) -> list[ItemTask]:
    """The clips in `OUT/clips/<clip>/`, or with --generated each side's in `OUT/<side>/clips/<clip>/`."""
    if job.generated is None:
        return with_evaluated_cameras(plan_items(job.dataset, job.out / DETECT_CLIPS))
    return with_evaluated_cameras(plan_sides({"real": job.dataset, "generated": job.generated}, job.out, plan_items, DETECT_CLIPS))


def _merge_detect(job: JobRequest, tasks: list[ItemTask], report: JobReport, console: Console | None) -> JobReport:
    """When every clip is current: the clips' parts merged into the folder `avsim eval detect` writes."""
    from avsim.jobs.detect import merge_detect

    if report.failed:
        return report
    with shown(console, f"run eval detect: merging {len(tasks)} clips"):  # it reads every clip's tables
        return dataclasses.replace(report, detect=merge_detect(job.out, tasks, job.generated is not None))


# ---- export nuscenes (avsim.jobs.nuscenes_items) -----------------------------------------------------
def _plan_nuscenes(job: JobRequest, plan_items: PlanItems) -> list[ItemTask]:
    """The clips in `OUT/scenes/<clip>/` (one-scene dataroots); `OUT` itself is the joined dataroot (`merge`)."""
    return plan_items(job.dataset, job.out / NUSCENES_SCENES)


def _merge_nuscenes(job: JobRequest, tasks: list[ItemTask], report: JobReport, console: Console | None) -> JobReport:
    """When every clip is current: the clips' dataroots joined into the dataroot `OUT`."""
    from avsim.jobs.nuscenes_items import merge_nuscenes

    if report.failed:
        return report
    with shown(console, f"run export nuscenes: joining {len(tasks)} scenes"):  # it links every part's files
        return dataclasses.replace(report, nuscenes=merge_nuscenes(job.out, tasks))


_NUSCENES_OPTIONS: dict[str, type] = {"scenario": Path, "version": str, "lidar_beams": int, "lidar_elevations": str,
                                      "lidar_azimuth_deg": float, "lidar_range_m": float}  # fmt: skip


# ---- generate, pair, encode (avsim.jobs.model_items) -------------------------------------------------
def _plan_pair(job: JobRequest, plan_items: PlanItems) -> list[ItemTask]:
    """The items in `OUT/clips/<item>/`; `OUT/` itself is the shared layout (`gather`)."""
    return plan_items(job.dataset, job.out / PAIR_CLIPS)


def _gather_cache(out: Path, tasks: list[ItemTask], results: list[ItemResult]) -> list[ItemResult]:
    """The latent cache's index over the clips encoded (`merge_cache`); the results as they are."""
    merge_cache(out, tasks, results)
    return results


# ---- sim -----------------------------------------------------------------------------------------
def _sim(task: ItemTask, tmp: Path) -> None:
    from avsim.sim.run import run_sim

    item = current_item()
    run_sim(task.source, tmp, sim_options(task.options, task.source), on_step=lambda k, n: item("simulate", k, n, "steps"),
            on_phase=lambda phase: item(phase))  # fmt: skip


def _plan_sim(job: JobRequest, plan_items: PlanItems) -> list[ItemTask]:
    """Each scenario once per seed: `OUT/<item>/seed<N>/`, named `<item>/seed<N>`."""
    return [ItemTask(t.kind, f"{t.name}/seed{seed}", t.source, t.out_dir / f"seed{seed}", {**t.options, "seed": seed})
            for t in plan_items(job.dataset, job.out) for seed in job.seeds]  # fmt: skip


def _merge_sim(job: JobRequest, tasks: list[ItemTask], report: JobReport, console: Console | None) -> JobReport:
    """`OUT/sim_summary.csv` and the table of scores, whatever failed."""
    from avsim.jobs.sim_summary import print_sim_summary, write_sim_summary

    rows = write_sim_summary(job.out, tasks, report.results)
    if console is not None:
        print_sim_summary(console, rows)
    return dataclasses.replace(report, sim_rows=rows)


# ---- the table -------------------------------------------------------------------------------------
KINDS: dict[JobKind, KindSpec] = {
    JobKind.RENDER: KindSpec(
        "render", _RENDER_OPTIONS, listers.scenario_items, _render, check=lambda options, folder: _check_render(options, folder)),
    JobKind.LABELS: KindSpec(
        "labels", _LABELS_OPTIONS, listers.scenario_items, _labels,
        check=lambda options, folder: render_options(options, folder, labels_only=True)),
    JobKind.CONVERT: KindSpec("convert", {"format": str, "rig": str}, listers.entry_items, _convert),
    JobKind.EVAL: KindSpec(
        "eval", {"metric": str, "max_frames": int, "batch_size": int, "stride": int, "max_windows": int, "weights": str, "cache": str},
        listers.clip_items, _eval, check=_check_eval, plan=_plan_eval, merge=_merge_eval),
    JobKind.GENERATE: KindSpec(
        "generate",
        {"config": str, "checkpoint": Path, "vae": Path, "embeddings": Path, "prompt": str, "negative_prompt": str,
         "text_encoder": Path, "zero_text": bool, "random_weights": bool, "random_vae": bool, "views": str, "clip": str,
         "steps": int, "guidance": float, "seed": int, "control_weight": float, "sampler": str, "chunks": int,
         "overlap": int, "device": str, "offload": bool, "vae_tile": int},
        listers.folder_items, generate_item, check=lambda options, folder: check_generate_options(options), weights=True,
        digest_inputs=render_item_inputs),
    JobKind.PAIR: KindSpec(
        "pair", {"real": Path, "caption": str}, listers.folder_items, pair_item, item_options=pair_item_options, plan=_plan_pair,
        digest_inputs=pair_inputs, gather=merge_layout),
    JobKind.ENCODE: KindSpec(
        "encode",
        {"model": str, "vae": Path, "random_vae": bool, "text_encoder": Path, "zero_text": bool, "max_clips_per_video": int,
         "device": str, "store_dtype": str},
        listers.layout_items, encode_item, check=lambda options, folder: encode_settings(options),
        no_manifest="`avsim run encode` takes a post-training layout folder, not a manifest", item_options=encode_item_options,
        weights=True, digest_inputs=encode_inputs, gather=_gather_cache),
    JobKind.SIM: KindSpec(
        "sim",
        {"policy": str, "agents": str, "cameras": str, "size": str, "backend": str, "steps": int, "duration": float, "seed": int,
         "rate": float, "controller": str, "budget": float},
        listers.sim_scenario_items, _sim, check=lambda options, folder: sim_options(options), plan=_plan_sim, merge=_merge_sim),
    JobKind.DETECT: KindSpec(
        "eval detect", {"detector": str, "cameras": str, "gt_visibility": str}, listers.clip_folder_items, detect_item,
        check=lambda options, folder: check_detect_options(options),
        manifest_options=False,  # one detector per job: the merged detect.json names it
        plan=_plan_detect, merge=_merge_detect),
    JobKind.NUSCENES: KindSpec(
        "export nuscenes", _NUSCENES_OPTIONS, listers.clip_folder_items, nuscenes_item,
        check=lambda options, folder: check_nuscenes_options(options), item_options=nuscenes_item_options, plan=_plan_nuscenes,
        merge=_merge_nuscenes),
}  # fmt: skip
