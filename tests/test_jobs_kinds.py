"""The table of `avsim run` kinds (avsim.jobs.kinds): one entry per kind, and a job driven by its entry only."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest

from avsim.jobs import dataset as listers
from avsim.jobs import kinds, run
from avsim.jobs.dataset import JobKind
from avsim.jobs.engines import EngineConfig
from avsim.jobs.items import run_item
from avsim.jobs.kinds import KINDS, JobRequest, KindSpec, plan_tasks
from avsim.jobs.tasks import ItemResult, ItemStatus, ItemTask, JobReport


def test_every_kind_has_one_entry_in_enum_order() -> None:
    assert list(KINDS) == list(JobKind)
    commands = [spec.command for spec in KINDS.values()]
    assert len(set(commands)) == len(commands) and KINDS[JobKind.DETECT].command == "eval detect"
    for kind, spec in KINDS.items():
        assert spec.command.split()[-1] == str(kind), kind  # `avsim run eval detect`: the last word is the kind
        assert spec.options and all(t in (str, int, float, bool, Path) for t in spec.options.values()), kind


def test_run_has_no_branch_per_kind() -> None:
    """avsim.jobs.run compares no kind with a kind's name: every difference is in the kind's entry."""
    names = {str(k) for k in JobKind}
    tree = ast.parse(inspect.getsource(run))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            constants = [o for o in operands if isinstance(o, ast.Constant) and o.value in names]
            members = [o for o in operands if isinstance(o, ast.Attribute) and isinstance(o.value, ast.Name) and o.value.id == "JobKind"]
            assert not constants and not members, f"avsim/jobs/run.py:{node.lineno} branches on a kind"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "JobKind":
            pytest.fail(f"avsim/jobs/run.py:{node.lineno} names JobKind.{node.attr}")


def _write_word(task: ItemTask, tmp: Path) -> None:
    (tmp / "word.txt").write_text(f"{task.options['word']} {task.source.name}\n")


def _plan_in_parts(job: JobRequest, plan_items: kinds.PlanItems) -> list[ItemTask]:
    return plan_items(job.dataset, job.out / "parts")


def _gather(out: Path, tasks: list[ItemTask], results: list[ItemResult]) -> list[ItemResult]:
    return [r if r.name != "b" else dataclasses.replace(r, status=ItemStatus.FAILED, reason="b cannot join") for r in results]


def _merge(job: JobRequest, tasks: list[ItemTask], report: JobReport, console: Any) -> JobReport:
    words = [(t.out_dir / "word.txt").read_text() for t, r in zip(tasks, report.results) if r.status != ItemStatus.FAILED]
    return dataclasses.replace(report, detect={"words": words})


def test_a_kind_is_one_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind declared by its entry alone (options, items, check, plan, run, gather, merge) runs end to end."""
    checked: list[dict[str, Any]] = []
    spec = KindSpec("convert", {"word": str}, listers.entry_items, _write_word, check=lambda options, folder: checked.append(dict(options)),
                    plan=_plan_in_parts, gather=_gather, merge=_merge)  # fmt: skip
    monkeypatch.setitem(KINDS, JobKind.CONVERT, spec)
    monkeypatch.setattr(run, "execute", lambda kind, tasks, config, console: [run_item(t) for t in tasks])  # in this process
    data = tmp_path / "data"
    for name in ("a", "b", "c"):
        (data / name).mkdir(parents=True)
    manifest = tmp_path / "list.csv"
    manifest.write_text("path,word\ndata/a,\ndata/c,hej\n")

    report = run.run_job("convert", data, tmp_path / "out", {"word": "hello"}, EngineConfig())
    assert checked == [{"word": "hello"}]
    assert [(r.name, r.status) for r in report.results] == [("a", "done"), ("b", "failed"), ("c", "done")]
    assert report.detect == {"words": ["hello a\n", "hello c\n"]}
    assert (tmp_path / "out" / "parts" / "b" / "word.txt").is_file() and (tmp_path / "out" / "job_report.json").is_file()

    again = run.run_job("convert", manifest, tmp_path / "out", {"word": "hello"}, EngineConfig())  # a manifest column overrides
    assert [(r.name, r.status) for r in again.results] == [("a", "skipped"), ("c", "done")]
    assert again.detect == {"words": ["hello a\n", "hej c\n"]}
    with pytest.raises(Exception, match="not an option of `avsim run convert`"):
        plan_tasks(JobRequest(JobKind.CONVERT, data, tmp_path / "o2", {"colour": "red"}))
