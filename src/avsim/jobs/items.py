"""One dataset item run as one task: skip it when current, else run its kind's `run`
(`avsim.jobs.kinds.KINDS`) into a temporary folder and rename that onto `OUT/<name>/`
(avsim.core.atomic).

Each finished item holds `job.json`: kind, source, options and the input digest
(`avsim.core.digest` of the item's files and options) plus its outputs relative to the item
folder. A rerun skips the item when `job.json` records the digest it would record now and
every listed output exists; a changed input or option re-runs it as a whole.

A task never raises: a bad item comes back as `failed` with a one-line reason, so the other
items go on. The worker's death (killed, out of memory) is the engine's business (retries).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from avsim.core.atomic import atomic_output_path
from avsim.core.digest import folder_digest, folder_files, input_digest
from avsim.core.errors import AvsimError
from avsim.jobs.kinds import KINDS
from avsim.jobs.progress import HASHING, STARTING, ItemReporter, channel_sender, reporting
from avsim.jobs.tasks import JOB_FORMAT, JOB_JSON, ItemResult, ItemStatus, ItemTask, one_line

# test-only: a folder; a task whose `<folder>/<item>.hang` exists claims it (renames it to
# `<item>.pid`, holding the worker's pid) and sleeps with its outputs half-written
HANG_ENV = "AVSIM_JOBS_TEST_HANG_DIR"
MIB = 1 << 20


def task_digest(task: ItemTask, progress: Callable[[int, int], None] | None = None) -> str:
    """The input digest of `task`: its source's files (a folder's, or the one file) and options.

    A kind that names its `digest_inputs` (generate, pair, encode) digests the files those give.

    Args:
        task: the item task.
        progress: `(bytes hashed, bytes in all)` as the files are read (a large item takes seconds).

    Returns:
        64 hex characters.
    """
    options = {"kind": task.kind, **task.options}
    inputs = KINDS[task.kind].digest_inputs
    if inputs is not None:
        files, root, extra = inputs(task)
        return input_digest(files, root, {**options, **extra}, progress)
    if task.source.is_dir():
        return folder_digest(task.source, options, progress)
    return input_digest([task.source], task.source.parent, options, progress)


def is_current(out_dir: Path, digest: str) -> bool:
    """Whether `out_dir/job.json` records `digest` and every output it lists exists.

    Args:
        out_dir: an item output folder.
        digest: the digest a run would record now.

    Returns:
        True when the item can be skipped.
    """
    from avsim.core.safe_files import contained_file
    from avsim.core.safe_json import read_json

    record = out_dir / JOB_JSON
    if not record.is_file():
        return False
    try:
        doc = read_json(record, "job")
    except AvsimError:
        return False
    if not isinstance(doc, dict) or doc.get("input_digest") != digest or not isinstance(doc.get("outputs"), list):
        return False
    try:  # every output a regular file inside the item folder (a path leading out is never probed)
        return all(contained_file(out_dir, rel, record, "outputs") for rel in doc["outputs"])
    except AvsimError:
        return False


RECORDS_WITH_PATHS = ("render_summary.json", "settings.json")  # `run_render`'s summaries, `avsim generate`'s settings


def _relocate_summaries(tmp: Path, final: Path) -> None:
    """Point the paths `run_render` and `avsim generate` wrote into their records at the final folder, not the temporary."""
    old, new = json.dumps(str(tmp))[1:-1], json.dumps(str(final))[1:-1]
    for summary in sorted(p for name in RECORDS_WITH_PATHS for p in tmp.rglob(name) if not p.is_symlink()):
        text = summary.read_text(encoding="utf-8")
        if old in text:
            summary.write_text(text.replace(old, new), encoding="utf-8")


def _hang_for_test(name: str) -> None:
    folder = os.environ.get(HANG_ENV)
    if not folder:
        return
    claim, pid_file = Path(folder) / f"{name}.hang", Path(folder) / f"{name}.pid"
    try:
        os.replace(claim, pid_file)
    except FileNotFoundError:
        return  # not asked, or claimed by an earlier attempt
    pid_file.write_text(str(os.getpid()))
    time.sleep(600)


def _run(task: ItemTask, digest: str) -> None:
    runner = KINDS[task.kind].run
    with atomic_output_path(task.out_dir, is_dir=True) as tmp:
        tmp.mkdir(parents=True, exist_ok=True)
        runner(task, tmp)
        _relocate_summaries(tmp, task.out_dir)
        _hang_for_test(task.name)
        outputs = [p.relative_to(tmp).as_posix() for p in folder_files(tmp)]
        record = {"format": JOB_FORMAT, "kind": task.kind, "item": task.name, "source": str(task.source),
                  "options": task.options, "input_digest": digest, "outputs": outputs}  # fmt: skip
        (tmp / JOB_JSON).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def run_item(task: ItemTask, index: int = 0, channel: Any = None) -> ItemResult:
    """Run one item (the engines' task function): skip when current, else run it atomically.

    While it runs, its stages go to the driver (`avsim.jobs.progress`): hashing its inputs (bytes),
    then what its kind's runner reports through `current_item()`.

    Args:
        task: the item.
        index: its task index (named in its progress reports).
        channel: where the reports go (Ray's queue actor; None: the local pool worker's queue, or nowhere).

    Returns:
        Its result; never raises for a bad item (status `failed`, one-line reason).
    """
    t0 = time.perf_counter()
    with reporting(ItemReporter(index, channel_sender(channel))) as report:
        try:
            report(HASHING, 0, 0)
            digest = task_digest(task, lambda done, total: report(HASHING, done // MIB, max(1, -(-total // MIB)), "MiB"))
            if is_current(task.out_dir, digest):
                return ItemResult(task.name, ItemStatus.SKIPPED, seconds=time.perf_counter() - t0, digest=digest)
            report(STARTING, 0, 0)
            _run(task, digest)
        except Exception as exc:  # one bad item must not stop the others
            return ItemResult(task.name, ItemStatus.FAILED, one_line(exc), time.perf_counter() - t0)
    return ItemResult(task.name, ItemStatus.DONE, seconds=time.perf_counter() - t0, digest=digest)
