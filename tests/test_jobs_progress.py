"""Live progress of dataset jobs (issue 55): every running item's stage and counts, and an ETA from
work done (avsim.jobs.progress), through the local pool's and Ray's channels."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from job_hang import needs_ray
from rich.console import Console

from avsim.jobs.progress import PLAIN_EVERY_S, ItemReporter, ItemUpdate, JobDisplay, current_item, reporting
from avsim.jobs.tasks import ItemResult, ItemStatus


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _simulate(display: JobDisplay, clock: _Clock, n_items: int, workers: int, skipped: int, item_s: float, frames: int,
              check_every_s: float = 5.0) -> list[tuple[float, float | None]]:  # fmt: skip
    """Run a job of `n_items` on `workers` in simulated time: the first `skipped` items are current (0.1 s of
    hashing), the others take `item_s` rendering `frames` frames; returns (true time left, ETA) samples."""
    durations = [0.1 if i < skipped else item_s for i in range(n_items)]
    total_s = 0.0
    free = [0.0] * workers
    schedule = []  # (start, end, index): each item on the worker that frees first
    for i, d in enumerate(durations):
        w = min(range(workers), key=lambda k: free[k])
        schedule.append((free[w], free[w] + d, i))
        free[w] += d
    total_s = max(free)
    samples, t = [], 0.0
    finished: set[int] = set()
    while t <= total_s:
        clock.t = t
        for start, end, i in schedule:
            if end <= t and i not in finished:
                finished.add(i)
                display.finished(i, ItemResult(f"item{i:04d}", ItemStatus.SKIPPED if i < skipped else ItemStatus.DONE))
            elif start <= t < end:
                if i < skipped:
                    display.update(ItemUpdate(i, "hashing inputs", 1, 2, "MiB"))
                else:
                    display.update(ItemUpdate(i, "render", int(frames * (t - start) / (end - start)), frames, "frames"))
        display.tick()
        if t % check_every_s < 1e-9:
            samples.append((total_s - t, display.eta_s()))
        t = round(t + 0.5, 6)
    return samples


def test_a_1000_item_job_shows_each_running_item_and_an_honest_eta() -> None:
    """1,000 items on 4 workers, the first 300 already current: once a tenth of the work is done, the ETA
    is within 10 % of the time really left (an ETA from items finished would say 0:00:40 after the skips)."""
    clock = _Clock()
    out = io.StringIO()
    names = [f"item{i:04d}" for i in range(1000)]
    display = JobDisplay("run render", names, Console(file=out, width=200, force_terminal=False), clock)
    with display:
        samples = _simulate(display, clock, 1000, 4, 300, 2.0, 30)
    total = samples[0][0]
    late = [(left, eta) for left, eta in samples if left < 0.9 * total and left > 10]
    assert late and all(eta is not None and abs(eta - left) <= 0.1 * left for left, eta in late), late[:5]
    lines = out.getvalue().splitlines()
    assert len(lines) >= total / PLAIN_EVERY_S - 1  # off a terminal: a status line every PLAIN_EVERY_S
    line = next(x for x in lines if "frames" in x)
    assert re.search(r"run render: \d+/1000 items \(\d+ done, 300 skipped\), 4 running, ETA \d:\d\d:\d\d", line), line
    assert len(re.findall(r"item\d{4}: render \d+/30 frames \(0:00:0[0-2]\)", line)) == 4, line  # each running item
    assert lines[-1].startswith("run render: 1000/1000 items (700 done, 300 skipped), 0 running")


def test_rows_on_a_terminal_and_late_reports_of_finished_items() -> None:
    clock = _Clock()
    out = io.StringIO()
    display = JobDisplay("run generate", ["a", "b", "c"], Console(file=out, width=160, force_terminal=True), clock)
    with display:
        display.update(ItemUpdate(0, "hashing inputs", 3, 10, "MiB"))
        display.update(ItemUpdate(1, "clip0: sampling", 2, 35, "steps"))
        clock.t = 4.0
        display.update(ItemUpdate(0, "clip0: VAE decode", 1, 7))
        assert display.row_text(display.running[0]) == "a: clip0: VAE decode 1/7 (0:00:04)"
        display.finished(0, ItemResult("a", ItemStatus.DONE))
        display.update(ItemUpdate(0, "write videos", 3, 3))  # a report that arrives after the result is dropped
        assert sorted(display.running) == [1] and display.work_done() == pytest.approx(1 + 2 / 35)
    text = out.getvalue()
    assert "b: clip0: sampling" in text and "2/35 steps" in text and "1/3 items (1 done), 1 running" in text


def test_the_reporter_throttles_within_a_stage_and_always_sends_changes() -> None:
    sent: list[ItemUpdate] = []
    reporter = ItemReporter(7, sent.append, every_s=3600.0)
    with reporting(reporter):
        advance = current_item().counter("render", 10, "frames")
        for _ in range(10):
            advance(1)
        current_item()("write")
    assert [(u.index, u.stage, u.done, u.total) for u in sent] == [(7, "render", 0, 10), (7, "render", 10, 10), (7, "write", 0, 0)]
    current_item()("outside a job")  # a silent reporter: nothing to send, nothing raised


@pytest.mark.e2e
def test_local_engine_reports_hashing_and_render_frames_of_running_items(tmp_path: Path, session_sample_1s_dir: Path) -> None:
    """The pool workers' reports reach the driver: a row per running item with its stage and frames."""
    import shutil

    from avsim.jobs.engines import EngineConfig
    from avsim.jobs.run import run_job

    for name in ("a", "b"):
        shutil.copytree(session_sample_1s_dir, tmp_path / "scenes" / name)
    out = io.StringIO()
    options = {"frames": "20", "size": "96x54", "cameras": "camera_front_wide_120fov,camera_rear_tele_30fov"}
    report = run_job("render", tmp_path / "scenes", tmp_path / "out", options, EngineConfig(workers=2),
                     console=Console(file=out, width=160, force_terminal=True))  # fmt: skip
    assert [r.status for r in report.results] == ["done", "done"]
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out.getvalue())
    assert re.search(r"[ab]: render .* \d+/40 frames", text), text[-2000:]
    assert "2/2 items (2 done)" in text


@pytest.mark.distributed
@needs_ray
def test_ray_tasks_report_their_frames_through_the_queue_actor(tmp_path: Path, session_sample_1s_dir: Path, ray_hang_dir: Path) -> None:
    import shutil

    from avsim.jobs.engines import EngineConfig
    from avsim.jobs.run import run_job

    shutil.copytree(session_sample_1s_dir, tmp_path / "scenes" / "a")
    out = io.StringIO()
    options = {"frames": "31", "size": "96x54", "cameras": "camera_front_wide_120fov,camera_rear_tele_30fov"}
    report = run_job("render", tmp_path / "scenes", tmp_path / "out", options, EngineConfig("ray"),
                     console=Console(file=out, width=160, force_terminal=True))  # fmt: skip
    assert [r.status for r in report.results] == ["done"]
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out.getvalue())
    assert re.search(r"a: (hashing inputs|loading the scenario|render)", text), text[-2000:]
