"""`avsim run KIND DATASET OUT`: plan one task per item, run them on an engine with a progress
bar, and end with a table (done / skipped / failed with the one-line reason) and
`OUT/job_report.json`. A failed item never stops the others; `JobReport.failed` tells the CLI
to exit 1.

`eval` (`avsim run eval fid|fvd`) runs FID feature tasks for the clips of both sides (`OUT/generated/<clip>/`,
`OUT/real/<clip>/`) and, when every clip succeeded, merges them on the driver into
`OUT/fid.json` (or `OUT/fvd.json`; avsim.jobs.fid), with the bootstrap interval over clips
that `avsim eval report` gives (`avsim.jobs.fid.clip_intervals`) unless turned off.
`detect` (`avsim run eval detect`) runs one clip folder per task and, when every clip
succeeded, merges their parts into the folder `avsim eval detect` writes (avsim.jobs.detect).

`nuscenes` (`avsim run export nuscenes`) writes one-scene dataroots in `OUT/scenes/<item>/` and,
when every item succeeded, joins them into the dataroot `OUT` (avsim.jobs.nuscenes_items).

`pair` items go to `OUT/clips/<item>/` and are then linked into the shared layout at `OUT/`
(`model_items.merge_layout`); `encode` items go to `OUT/<clip>/` and the cache's index is
written over them (`model_items.merge_cache`). `generate` and `encode` digest their weight
files once per job (`model_items.weight_digests`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avsim.core.atomic import atomic_output_path, output_errors
from avsim.core.errors import AvsimInputError
from avsim.core.locks import output_lock
from avsim.core.progress import progress_bar
from avsim.jobs.dataset import JobKind, read_items
from avsim.jobs.detect import DETECT_CLIPS, check_detect_options
from avsim.jobs.engines import Engine, EngineConfig, import_ray, run_tasks
from avsim.jobs.model_items import (
    PAIR_CLIPS,
    WEIGHT_OPTIONS,
    check_generate_options,
    encode_settings,
    merge_cache,
    merge_layout,
    weight_digests,
)
from avsim.jobs.nuscenes_items import NUSCENES_SCENES, check_nuscenes_options, item_options
from avsim.jobs.options import OPTION_TYPES, coerce_options, render_options, sim_options
from avsim.jobs.tasks import ItemResult, ItemStatus, ItemTask

if TYPE_CHECKING:
    from rich.console import Console

    from avsim.jobs.fid import ClipBootstrap

JOB_REPORT_JSON = "job_report.json"
LISTED_ITEMS = 30  # the final table lists every item up to this many, else only the failed ones


@dataclass(frozen=True)
class JobReport:
    """What a job did: its results in item order and, for eval, the FID / FVD document (detect: the
    merged sides, as `avsim.evaluation.detect.detect_sides` returns them; sim: the score rows)."""

    kind: str
    results: list[ItemResult]
    frechet: dict[str, Any] | None = None
    sim_rows: list[dict[str, Any]] | None = None
    detect: dict[str, Any] | None = None
    nuscenes: dict[str, int] | None = None  # records per table of the joined dataroot

    def count(self, status: ItemStatus) -> int:
        """Items that ended with `status`."""
        return sum(r.status == status for r in self.results)

    @property
    def failed(self) -> bool:
        """Whether any item failed."""
        return self.count(ItemStatus.FAILED) > 0


def plan_tasks(kind: str, dataset: Path, out: Path, options: Mapping[str, Any], seeds: tuple[int, ...] = (0,)) -> list[ItemTask]:
    """One task per item of `dataset` (sim: per item and seed): item options override the command's.

    Args:
        kind: a `JobKind`.
        dataset: a dataset folder or manifest.
        out: the job's output folder; an item writes `out/<name>/` (sim: `out/<name>/seed<N>/`).
        options: the command's options (see `avsim.jobs.options.OPTION_TYPES`).
        seeds: sim only: the seeds every item runs with.

    Returns:
        The tasks, sorted by item name (then seed).
    """
    kind = JobKind(kind)
    base = coerce_options(kind, options, "options")
    if kind in ("render", "labels"):
        render_options(base, out, labels_only=kind == "labels")  # bad options fail here, once
    if kind == "sim":
        sim_options(base)
    if kind == "eval" and base.get("metric", "fid") not in ("fid", "fvd"):
        raise AvsimInputError("options", "metric", f"expected fid or fvd, got {base['metric']!r}")
    if kind == "encode":
        encode_settings(base)  # bad encoders fail here, once
    if kind == "generate":
        check_generate_options(base)
    if kind == "detect":
        check_detect_options(base)
    if kind == "nuscenes":
        check_nuscenes_options(base)
    # detect: one detector per job (the merged detect.json names it), so no manifest option columns
    items = read_items(dataset, kind, () if kind == JobKind.DETECT else tuple(OPTION_TYPES[kind]))
    root = out.resolve()
    digests: dict[str, dict[str, str]] = {}  # weight files digested once per job, however many items name them
    tasks = []
    for item in items:
        opts = {**base, **coerce_options(kind, item.options, item.path)}
        if kind == "pair":
            opts["real"] = _item_real(base, item.options, item.name, dataset)
        if kind == "nuscenes":
            opts = item_options(opts, item.path)
        if kind == "encode":
            opts["clip"] = item.name
        if kind in ("generate", "encode"):
            key = json.dumps({k: opts.get(k) for k in WEIGHT_OPTIONS}, sort_keys=True)
            opts.update(digests.setdefault(key, weight_digests(opts)))
        tasks.append(ItemTask(kind, item.name, item.path.resolve(), root / item.name, opts))
    if kind != JobKind.SIM:
        return tasks
    return [ItemTask(kind, f"{t.name}/seed{seed}", t.source, t.out_dir / f"seed{seed}", {**t.options, "seed": seed})
            for t in tasks for seed in seeds]  # fmt: skip


def _item_real(base: Mapping[str, Any], item_options: Mapping[str, Any], name: str, dataset: Path) -> str:
    """The folder of an item's real videos: its manifest column `real`, else `--real ROOT` / <item>."""
    if item_options.get("real"):
        return str(Path(str(item_options["real"])).resolve())
    if not base.get("real"):
        raise AvsimInputError(dataset, "--real", "`avsim run pair` needs the real videos (--real ROOT or a manifest column real)")
    return str((Path(str(base["real"])) / name).resolve())


def _progress(console: Console, kind: str) -> Any:
    return progress_bar(f"run {kind}", unit="items", console=console)


def execute(kind: str, tasks: list[ItemTask], config: EngineConfig, console: Console | None) -> list[ItemResult]:
    """Run `tasks` with one progress update per finished item.

    Args:
        kind: the job kind (the bar's label).
        tasks: the item tasks.
        config: the engine.
        console: where the bar goes (None: no bar).

    Returns:
        The results in task order.
    """
    if console is None:
        return run_tasks(tasks, config, lambda r: None)
    with _progress(console, JobKind(kind).command) as bar:
        task = bar.add_task("", total=len(tasks))
        return run_tasks(tasks, config, lambda r: bar.update(task, advance=1, description=f"{r.name}: {r.status}"))


def write_job_report(out: Path, kind: str, dataset: Path, config: EngineConfig, report: JobReport) -> Path:
    """`out/job_report.json`: counts and every item's status and reason (no timings: same input, same bytes).

    Args:
        out: the job's output folder.
        kind, dataset, config: what ran.
        report: the results.

    Returns:
        The file written.
    """
    doc = {"format": "avsim-job-report-v1", "kind": kind, "dataset": str(dataset), "engine": str(config.engine),
           "counts": {str(s): report.count(s) for s in ItemStatus},
           "items": [{"name": r.name, "status": str(r.status), "reason": r.reason} for r in report.results]}  # fmt: skip
    path = out / JOB_REPORT_JSON
    with atomic_output_path(path) as tmp:
        tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path


def print_table(console: Console, report: JobReport) -> None:
    """The final table: every item (or only the failed ones past `LISTED_ITEMS`), then the counts.

    Args:
        console: where to print.
        report: the results.
    """
    from rich.table import Table

    table = Table(title=f"avsim run {JobKind(report.kind).command}")
    for column in ("item", "status", "seconds", "reason"):
        table.add_column(column, overflow="fold")
    listed = report.results if len(report.results) <= LISTED_ITEMS else [r for r in report.results if r.status == ItemStatus.FAILED]
    for r in listed:
        table.add_row(r.name, str(r.status), f"{r.seconds:.1f}", r.reason)
    console.print(table)
    console.print(", ".join(f"{report.count(s)} {s}" for s in ItemStatus))


def run_job(kind: str, dataset: Path, out: Path, options: Mapping[str, Any], config: EngineConfig,
            real: Path | None = None, console: Console | None = None, bootstrap: ClipBootstrap | None = None,
            seeds: tuple[int, ...] = (0,), wait: bool = False, generated: Path | None = None) -> JobReport:  # fmt: skip
    """Run a dataset job end to end (plan, execute, report; eval: merge FID; detect: merge the clips).

    Args:
        kind: a `JobKind`.
        dataset: the dataset (eval: the generated clips; detect: the real clip folders).
        out: the job's output folder.
        options: the command's options.
        config: the engine.
        real: eval only: the real clips (a folder of clips or a manifest).
        console: progress bar and table (None: silent).
        bootstrap: eval only: the bootstrap over clips written beside the distance (None: none).
        seeds: sim only: the seeds every scenario runs with.
        wait: wait for another process running a job into `out` (else one line; avsim.core.locks).
        generated: detect only: the generated clip folders, detected into `out/generated` (the
            dataset then goes to `out/real`).

    Returns:
        The report (also written to `out/job_report.json`).
    """
    if out.exists() and not out.is_dir():
        raise AvsimInputError(out, "OUT", "exists and is not a folder")
    if config.engine == Engine.RAY:
        import_ray()  # a missing extra fails here, in one line, before anything is written
    tasks = _plan(kind, dataset, out, options, console, real=real, generated=generated, seeds=seeds)
    with output_errors(out), output_lock(out, wait=wait):  # one job per OUT at a time
        results = execute(kind, tasks, config, console)
        if kind == "pair":
            results = merge_layout(out, tasks, results)
        if kind == "encode":
            merge_cache(out, tasks, results)
        report = JobReport(kind, results)
        write_job_report(out, kind, dataset, config, report)
        if console is not None:
            print_table(console, report)
        if kind == "eval" and not report.failed:
            report = JobReport(kind, report.results, merge_eval(out, tasks, console, bootstrap))
        if kind == "detect" and not report.failed:
            report = JobReport(kind, report.results, detect=_merge_detect(out, tasks, generated is not None, console))
        if kind == "nuscenes" and not report.failed:
            report = JobReport(kind, report.results, nuscenes=_merge_nuscenes(out, tasks, console))
        if kind == "sim":
            from avsim.jobs.sim_summary import print_sim_summary, write_sim_summary

            rows = write_sim_summary(out, tasks, report.results)
            if console is not None:
                print_sim_summary(console, rows)
            report = JobReport(kind, report.results, sim_rows=rows)
    return report


def _side_tasks(kind: str, sides: Mapping[str, Path], out: Path, options: Mapping[str, Any], under: str = "") -> list[ItemTask]:
    """The tasks of each side's dataset, in `out/<side>[/under]/<item>`, named `<side>/<item>`, sides in order."""
    return [ItemTask(t.kind, f"{side}/{t.name}", t.source, t.out_dir, t.options)
            for side, data in sides.items() for t in plan_tasks(kind, data, out / side / under if under else out / side, options)]  # fmt: skip


def _plan(kind: str, dataset: Path, out: Path, options: Mapping[str, Any], console: Console | None, *,
          real: Path | None, generated: Path | None, seeds: tuple[int, ...]) -> list[ItemTask]:  # fmt: skip
    """`run_job`'s tasks: eval and detect per side, the others over `dataset`."""
    if kind == "eval":
        if real is None:
            raise AvsimInputError(dataset, "--real", "`avsim run eval` needs the real clips (--real)")
        return _side_tasks(kind, {"generated": dataset, "real": real}, out, options)
    if kind == "detect":
        if generated is None:
            return plan_tasks(kind, dataset, out / DETECT_CLIPS, options)
        return _side_tasks(kind, {"real": dataset, "generated": generated}, out, options, DETECT_CLIPS)
    if console is not None and kind in ("generate", "encode"):
        with console.status(f"run {kind}: listing the items, hashing the weight files"):  # a checkpoint takes seconds
            return plan_tasks(kind, dataset, out, options)
    under = {"pair": PAIR_CLIPS, "nuscenes": NUSCENES_SCENES}.get(kind)
    return plan_tasks(kind, dataset, out / under if under else out, options, seeds)


def _merge_detect(out: Path, tasks: list[ItemTask], generated: bool, console: Console | None) -> dict[str, Any]:
    """`avsim.jobs.detect.merge_detect` under a spinner (it reads every clip's tables)."""
    from avsim.jobs.detect import merge_detect

    if console is None:
        return merge_detect(out, tasks, generated)
    with console.status(f"run eval detect: merging {len(tasks)} clips"):
        return merge_detect(out, tasks, generated)


def _merge_nuscenes(out: Path, tasks: list[ItemTask], console: Console | None) -> dict[str, int]:
    """`avsim.jobs.nuscenes_items.merge_nuscenes` under a spinner (it links every part's files)."""
    from avsim.jobs.nuscenes_items import merge_nuscenes

    if console is None:
        return merge_nuscenes(out, tasks)
    with console.status(f"run export nuscenes: joining {len(tasks)} scenes"):
        return merge_nuscenes(out, tasks)


def merge_eval(out: Path, tasks: list[ItemTask], console: Console | None,
               bootstrap: ClipBootstrap | None = None) -> dict[str, Any]:  # fmt: skip
    """Merge the eval tasks' per-clip features on the driver and write `out/fid.json` (`fvd.json`).

    Args:
        out: the job's output folder.
        tasks: the eval tasks (all done or skipped).
        console: where the merge's progress bar goes (None: none).
        bootstrap: the interval over clips, under the document's "bootstrap" (None: none).

    Returns:
        The FID / FVD document.
    """
    from avsim.evaluation.results import write_json
    from avsim.jobs.fid import clip_intervals, frechet_document

    folders = {side: [t.out_dir for t in tasks if t.out_dir.parent.name == side] for side in ("real", "generated")}
    metric = str(tasks[0].options.get("metric", "fid"))
    if console is None:
        doc = frechet_document(folders["real"], folders["generated"], tasks[0].options)
    else:
        with _progress(console, f"eval: merge {metric} statistics") as bar:
            task = bar.add_task("", total=len(tasks))
            doc = frechet_document(folders["real"], folders["generated"], tasks[0].options, lambda: bar.advance(task))
    if bootstrap is not None:
        if console is None:
            doc["bootstrap"] = clip_intervals(folders["real"], folders["generated"], bootstrap)
        else:
            with console.status(f"eval: bootstrap over clips ({min(bootstrap.n_resamples, 200)} resamples)"):
                doc["bootstrap"] = clip_intervals(folders["real"], folders["generated"], bootstrap)
    write_json(doc, out / f"{metric}.json")
    return doc
