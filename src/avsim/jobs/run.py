"""`avsim run KIND DATASET OUT`: plan one task per item, run them on an engine with a progress
bar, and end with a table (done / skipped / failed with the one-line reason) and
`OUT/job_report.json`. A failed item never stops the others; `JobReport.failed` tells the CLI
to exit 1.

Every kind runs through its entry in `avsim.jobs.kinds.KINDS`, with no branch per kind here: the
entry plans the tasks (eval and detect: each side; sim: each seed), runs an item, gathers the
items' outputs before the report (pair: the shared post-training layout; encode: the latent
cache's index) and merges them after it (eval: `OUT/fid.json` or `fvd.json` with the bootstrap
interval over clips; detect: the folder `avsim eval detect` writes; sim: `OUT/sim_summary.csv`
and a table of scores). Kinds that read weight files (generate, encode) digest them once per job,
under a spinner.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avsim.core.atomic import atomic_output_path, output_errors
from avsim.core.errors import AvsimInputError
from avsim.core.locks import output_lock
from avsim.jobs.dataset import JobKind
from avsim.jobs.engines import Engine, EngineConfig, JobObserver, import_ray, run_tasks
from avsim.jobs.kinds import KINDS, JobRequest, plan_tasks, shown
from avsim.jobs.progress import JobDisplay
from avsim.jobs.tasks import ItemResult, ItemStatus, ItemTask, JobReport

if TYPE_CHECKING:
    from rich.console import Console

    from avsim.jobs.fid import ClipBootstrap

__all__ = ["JOB_REPORT_JSON", "JobReport", "execute", "print_table", "run_job", "write_job_report"]

JOB_REPORT_JSON = "job_report.json"
RAY_LOG = "ray.log"  # the ray engine's own log lines (the driver's descriptor 2 while Ray runs)
LISTED_ITEMS = 30  # the final table lists every item up to this many, else only the failed ones


def execute(kind: str, tasks: list[ItemTask], config: EngineConfig, console: Console | None) -> list[ItemResult]:
    """Run `tasks` under the job's display: every running item's stage and counts, the job's ETA
    from work done (`avsim.jobs.progress.JobDisplay`).

    Args:
        kind: the job kind (the display's label).
        tasks: the item tasks.
        config: the engine.
        console: where the display goes (None: nothing shown, no progress channel).

    Returns:
        The results in task order.
    """
    if console is None:
        return run_tasks(tasks, config)
    with JobDisplay(f"run {KINDS[JobKind(kind)].command}", [t.name for t in tasks], console) as display:
        observer = JobObserver(on_result=display.finished, on_update=display.update, on_tick=display.tick, console=console)
        return run_tasks(tasks, config, observer)


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

    table = Table(title=f"avsim run {KINDS[JobKind(report.kind)].command}")
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
    """Run a dataset job end to end: plan, execute, gather, report, merge (each as the kind's entry says).

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
    job = JobRequest(JobKind(kind), dataset, out, options, real=real, generated=generated, seeds=seeds, bootstrap=bootstrap)
    spec = KINDS[job.kind]
    with shown(console, f"run {spec.command}: listing the items" + (", hashing the weight files" if spec.weights else "")):
        tasks = plan_tasks(job)  # a checkpoint takes seconds to hash, thousands of items a moment to list
    if config.engine == Engine.RAY and config.ray_log is None:
        config = dataclasses.replace(config, ray_log=out / RAY_LOG)  # Ray's own log lines: in the job folder, not the terminal
    with output_errors(out), output_lock(out, wait=wait):  # one job per OUT at a time
        results = execute(kind, tasks, config, console)
        if spec.gather is not None:
            with shown(console, f"run {spec.command}: joining the outputs of {len(tasks)} items"):  # pair: seconds of links
                results = spec.gather(out, tasks, results)
        report = JobReport(kind, results)
        write_job_report(out, kind, dataset, config, report)
        if console is not None:
            print_table(console, report)
        if spec.merge is not None:
            report = spec.merge(job, tasks, report, console)
    return report
