"""`avsim run KIND DATASET OUT`: plan one task per item, run them on an engine with a progress
bar, and end with a table (done / skipped / failed with the one-line reason) and
`OUT/job_report.json`. A failed item never stops the others; `JobReport.failed` tells the CLI
to exit 1.

`eval` runs FID feature tasks for the clips of both sides (`OUT/generated/<clip>/`,
`OUT/real/<clip>/`) and, when every clip succeeded, merges them on the driver into
`OUT/fid.json` (or `OUT/fvd.json`; avsim.jobs.fid), with the bootstrap interval over clips
that `avsim eval report` gives (`avsim.jobs.fid.clip_intervals`) unless turned off.
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
from avsim.jobs.dataset import read_items
from avsim.jobs.engines import EngineConfig, import_ray, run_tasks
from avsim.jobs.items import ItemResult, ItemTask
from avsim.jobs.options import OPTION_TYPES, coerce_options, render_options

if TYPE_CHECKING:
    from rich.console import Console

    from avsim.jobs.fid import ClipBootstrap

JOB_REPORT_JSON = "job_report.json"
LISTED_ITEMS = 30  # the final table lists every item up to this many, else only the failed ones


@dataclass(frozen=True)
class JobReport:
    """What a job did: its results in item order and, for eval, the FID / FVD document."""

    kind: str
    results: list[ItemResult]
    frechet: dict[str, Any] | None = None

    def count(self, status: str) -> int:
        """Items that ended with `status` ("done", "skipped", "failed")."""
        return sum(r.status == status for r in self.results)

    @property
    def failed(self) -> bool:
        """Whether any item failed."""
        return self.count("failed") > 0


def plan_tasks(kind: str, dataset: Path, out: Path, options: Mapping[str, Any]) -> list[ItemTask]:
    """One task per item of `dataset`: item options override the command's.

    Args:
        kind: render, labels, convert or eval.
        dataset: a dataset folder or manifest.
        out: the job's output folder; an item writes `out/<name>/`.
        options: the command's options (see `avsim.jobs.options.OPTION_TYPES`).

    Returns:
        The tasks, sorted by item name.
    """
    base = coerce_options(kind, options, "options")
    if kind in ("render", "labels"):
        render_options(base, out, labels_only=kind == "labels")  # bad options fail here, once
    if kind == "eval" and base.get("metric", "fid") not in ("fid", "fvd"):
        raise AvsimInputError("options", "metric", f"expected fid or fvd, got {base['metric']!r}")
    items = read_items(dataset, kind, tuple(OPTION_TYPES[kind]))
    root = out.resolve()
    return [ItemTask(kind, item.name, item.path.resolve(), root / item.name,
                     {**base, **coerce_options(kind, item.options, item.path)}) for item in items]  # fmt: skip


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
    with _progress(console, kind) as bar:
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
    doc = {"format": "avsim-job-report-v1", "kind": kind, "dataset": str(dataset), "engine": config.engine,
           "counts": {s: report.count(s) for s in ("done", "skipped", "failed")},
           "items": [{"name": r.name, "status": r.status, "reason": r.reason} for r in report.results]}  # fmt: skip
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

    table = Table(title=f"avsim run {report.kind}")
    for column in ("item", "status", "seconds", "reason"):
        table.add_column(column, overflow="fold")
    listed = report.results if len(report.results) <= LISTED_ITEMS else [r for r in report.results if r.status == "failed"]
    for r in listed:
        table.add_row(r.name, r.status, f"{r.seconds:.1f}", r.reason)
    console.print(table)
    console.print(f"{report.count('done')} done, {report.count('skipped')} skipped, {report.count('failed')} failed")


def run_job(kind: str, dataset: Path, out: Path, options: Mapping[str, Any], config: EngineConfig,
            real: Path | None = None, console: Console | None = None,
            bootstrap: ClipBootstrap | None = None, wait: bool = False) -> JobReport:  # fmt: skip
    """Run a dataset job end to end (plan, execute, report; eval: merge FID).

    Args:
        kind: render, labels, convert or eval.
        dataset: the dataset (eval: the generated clips).
        out: the job's output folder.
        options: the command's options.
        config: the engine.
        real: eval only: the real clips (a folder of clips or a manifest).
        console: progress bar and table (None: silent).
        bootstrap: eval only: the bootstrap over clips written beside the distance (None: none).
        wait: wait for another process running a job into `out` (else one line; avsim.core.locks).

    Returns:
        The report (also written to `out/job_report.json`).
    """
    if out.exists() and not out.is_dir():
        raise AvsimInputError(out, "OUT", "exists and is not a folder")
    if config.engine == "ray":
        import_ray()  # a missing extra fails here, in one line, before anything is written
    if kind == "eval":
        if real is None:
            raise AvsimInputError(dataset, "--real", "`avsim run eval` needs the real clips (--real)")
        tasks = plan_tasks(kind, dataset, out / "generated", options) + plan_tasks(kind, real, out / "real", options)
        tasks = [ItemTask(t.kind, f"{t.out_dir.parent.name}/{t.name}", t.source, t.out_dir, t.options) for t in tasks]
    else:
        tasks = plan_tasks(kind, dataset, out, options)
    with output_errors(out), output_lock(out, wait=wait):  # one job per OUT at a time
        report = JobReport(kind, execute(kind, tasks, config, console))
        write_job_report(out, kind, dataset, config, report)
        if console is not None:
            print_table(console, report)
        if kind == "eval" and not report.failed:
            report = JobReport(kind, report.results, merge_eval(out, tasks, console, bootstrap))
    return report


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
    from avsim.evaluation.jobs import write_json
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
