"""Live progress of a dataset job: every running item's stage and counts, and an ETA from work done.

Worker side: `run_item` runs each item under an `ItemReporter` (`reporting`), which sends
`ItemUpdate`s (stage, units done of the stage's total) to the driver through the engine's channel
(a manager queue for the local pool, a queue actor on Ray), at most every `REPORT_EVERY_S` per item
and whenever the stage changes or completes. A kind's runner reports through `current_item()`
(render frames, generation steps per clip, encoded views, simulation steps, hashed bytes of a
skipped item, ...); a runner that says nothing still shows its stage ("running") and its time.

Driver side: `JobDisplay` shows one bar for the job and one row per running item (up to
`MAX_ROWS`; the rest counted). The job's bar counts finished items plus each running item's
fraction of its current stage, and its ETA is the work left over the rate of work done: items
that ran (not skipped ones: they finish in a moment and would make every later item look fast)
plus the running fractions, per second since the first item began real work (past hashing). On a terminal the rows redraw in
place; elsewhere (a log file, a pipe) a status line is printed every `PLAIN_EVERY_S`.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from avsim.jobs.tasks import ItemResult

REPORT_EVERY_S = 0.5  # an item's updates within a stage: at most this often
MAX_ROWS = 12  # running items shown one per row (the others counted on the job's row)
PLAIN_EVERY_S = 30.0  # off a terminal: one status line this often
STARTING = "starting"
HASHING = "hashing inputs"  # every item's first stage; an item whose outputs are current ends there (skipped)


@dataclass(frozen=True)
class ItemUpdate:
    """What a running item says: its task index, stage, and units done of the stage's total (0: unknown)."""

    index: int
    stage: str
    done: int = 0
    total: int = 0
    unit: str = ""

    @property
    def fraction(self) -> float:
        """The stage's part done (0 when its total is unknown)."""
        return min(1.0, self.done / self.total) if self.total > 0 else 0.0


Send = Callable[[ItemUpdate], None]


class ItemReporter:
    """Worker side of one item: sends its updates, throttled (stage changes and completions always go)."""

    def __init__(self, index: int, send: Send | None, every_s: float = REPORT_EVERY_S) -> None:
        self.index, self._send, self._every_s = index, send, every_s
        self._stage, self._last = "", 0.0

    def __call__(self, stage: str, done: int = 0, total: int = 0, unit: str = "") -> None:
        """Report `done` of `total` units of `stage` (the `avsim.core.progress.StepProgress` signature, plus a unit)."""
        if self._send is None:
            return
        now = time.monotonic()
        if stage == self._stage and now - self._last < self._every_s and not (total and done >= total):
            return
        self._stage, self._last = stage, now
        with contextlib.suppress(Exception):  # progress is best effort: a lost update never fails the item
            self._send(ItemUpdate(self.index, stage, int(done), int(total), unit))

    def counter(self, stage: str, total: int, unit: str = "") -> Callable[[int], None]:
        """An `advance(n)` callback counting units of `stage` (the render's and labels' progress callbacks)."""
        done = 0
        self(stage, 0, total, unit)

        def advance(n: int) -> None:
            nonlocal done
            done += int(n)
            self(stage, done, total, unit)

        return advance


_CURRENT: contextvars.ContextVar[ItemReporter | None] = contextvars.ContextVar("avsim_job_item", default=None)
# a local pool worker's channel, set once by the pool's initializer (a queue only inherits at process start)
_WORKER_CHANNEL: contextvars.ContextVar[Any] = contextvars.ContextVar("avsim_job_channel", default=None)
_SILENT = ItemReporter(-1, None)


def set_worker_channel(channel: Any) -> None:
    """The local engine's worker initializer: the queue this process's items report to."""
    _WORKER_CHANNEL.set(channel)


def channel_sender(channel: Any) -> Send | None:
    """How an item sends its updates: to the given channel (Ray's queue actor, fire and forget), else
    to this worker's (the local pool's queue); None: no channel, nothing is sent."""
    channel = channel if channel is not None else _WORKER_CHANNEL.get()
    if channel is None:
        return None
    actor = getattr(channel, "actor", None)  # ray.util.queue.Queue
    if actor is not None:
        return lambda update: actor.put_nowait.remote(update)
    return channel.put


def current_item() -> ItemReporter:
    """The reporter of the item running here (a silent one outside a job, e.g. in a test)."""
    return _CURRENT.get() or _SILENT


@contextlib.contextmanager
def reporting(reporter: ItemReporter) -> Iterator[ItemReporter]:
    """Make `reporter` the `current_item()` while the block runs (the worker runs one item in it)."""
    token = _CURRENT.set(reporter)
    try:
        yield reporter
    finally:
        _CURRENT.reset(token)


# ---- the driver ----------------------------------------------------------------------------------------
@dataclass
class _Running:
    name: str
    started: float
    update: ItemUpdate
    row: TaskID | None = None


@dataclass
class JobDisplay:
    """The driver's view of a job: feed it `update` (an item's report) and `finished` (its result).

    Attributes:
        label: the bold words in front (`run render`).
        names: the item names in task order.
        console: where to draw (None: nothing drawn; the state and `eta_s` still work).
        clock: seconds (monotonic); a test passes its own.
    """

    label: str
    names: Sequence[str]
    console: Console | None = None
    clock: Callable[[], float] = time.monotonic
    running: dict[int, _Running] = field(default_factory=dict)
    ended: set[int] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    ran: int = 0  # finished items that did work (done or failed), for the rate
    _t_work: float | None = None  # when the first item began real work (the rate's clock)
    _bar: Progress | None = None
    _main: TaskID | None = None
    _last_plain: float = 0.0

    def __post_init__(self) -> None:
        self._last_plain = self.clock()

    # -- state --
    @property
    def finished_count(self) -> int:
        """Items finished, whatever their status."""
        return sum(self.counts.values())

    def work_done(self) -> float:
        """Items finished plus the running items' fractions of their stage."""
        return self.finished_count + sum(r.update.fraction for r in self.running.values())

    def eta_s(self) -> float | None:
        """Seconds left at the rate of work done so far (None until there is a rate to go by)."""
        if self._t_work is None:
            return None
        elapsed = self.clock() - self._t_work
        ran = self.ran + sum(r.update.fraction for r in self.running.values() if r.update.stage != HASHING)
        if ran <= 0 or elapsed <= 0:
            return None
        left = len(self.names) - self.work_done()
        return max(0.0, left / (ran / elapsed))

    def update(self, u: ItemUpdate) -> None:
        """An item's report (the first one marks it running)."""
        if not 0 <= u.index < len(self.names) or u.index in self.ended:  # a late report of a finished item
            return
        run = self.running.get(u.index)
        if run is None:
            run = self.running[u.index] = _Running(self.names[u.index], self.clock(), u)
        run.update = u
        if u.stage != HASHING and self._t_work is None:
            self._t_work = self.clock()
        self._draw(run)

    def finished(self, index: int, result: ItemResult) -> None:
        """An item's result: it leaves the running rows and counts in the job's row."""
        self.ended.add(index)
        run = self.running.pop(index, None)
        if run is not None and run.row is not None and self._bar is not None:
            self._bar.remove_task(run.row)
        status = str(result.status)
        self.counts[status] = self.counts.get(status, 0) + 1
        self.ran += status != "skipped"
        if status != "skipped" and self._t_work is None:
            self._t_work = run.started if run is not None else self.clock()
        self._draw(None)

    def tick(self) -> None:
        """Redraw what time changes (the ETA; off a terminal, the periodic status line)."""
        self._draw(None)

    # -- drawing --
    def summary(self) -> str:
        """The job's row: items finished (by status), running, elapsed and ETA."""
        by = ", ".join(f"{n} {s}" for s, n in sorted(self.counts.items()))
        eta = self.eta_s()
        more = len(self.running) - sum(r.row is not None for r in self.running.values()) if self._bar is not None else 0
        parts = [f"{self.finished_count}/{len(self.names)} items" + (f" ({by})" if by else ""), f"{len(self.running)} running"]
        parts += [f"{more} not shown"] if more > 0 else []
        parts += [f"ETA {_clock(eta)}" if eta is not None else "ETA -:--:--"]
        return ", ".join(parts)

    def row_text(self, run: _Running) -> str:
        """One running item: its name, stage, counts and time on the item."""
        u = run.update
        unit = f" {u.unit}" if u.unit else ""
        counts = f" {u.done}/{u.total}{unit}" if u.total else (f" {u.done}{unit}" if u.done else "")
        return f"{run.name}: {u.stage}{counts} ({_clock(self.clock() - run.started)})"

    def __enter__(self) -> JobDisplay:
        if self.console is not None and self.console.is_terminal:
            from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

            from avsim.core.progress import bar_class

            columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[count]}"), TimeElapsedColumn(),
                       TextColumn("{task.fields[info]}"))  # fmt: skip
            self._bar = bar_class()(*columns, console=self.console)
            self._bar.__enter__()
            self._main = self._bar.add_task(f"[bold]{self.label}", total=len(self.names), count="", info="")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
            self._bar = None
        elif self.console is not None and exc[0] is None:
            self.console.print(f"{self.label}: {self.summary()}", markup=False, highlight=False, soft_wrap=True)

    def _draw(self, changed: _Running | None) -> None:
        if self.console is None:
            return
        if self._bar is None:
            self._plain()
            return
        if changed is not None:
            if changed.row is None and sum(r.row is not None for r in self.running.values()) < MAX_ROWS:
                changed.row = self._bar.add_task("", total=None, count="", info="")
            if changed.row is not None:
                u = changed.update
                unit = f" {u.unit}" if u.unit else ""
                count = f"{u.done}/{u.total}{unit}" if u.total else (f"{u.done}{unit}" if u.done else "")
                self._bar.update(changed.row, description=f"  {changed.name}: {u.stage}", completed=u.done, total=u.total or None,
                                 count=count)  # fmt: skip
        assert self._main is not None
        self._bar.update(self._main, completed=self.work_done(), info=self.summary())

    def _plain(self) -> None:
        """Off a terminal: a status line every PLAIN_EVERY_S (the job's row, then the running items)."""
        now = self.clock()
        if now - self._last_plain < PLAIN_EVERY_S or self.console is None:
            return
        self._last_plain = now
        rows = [self.row_text(r) for _, r in sorted(self.running.items())[:MAX_ROWS]]
        line = f"{self.label}: {self.summary()}" + ("; " + "; ".join(rows) if rows else "")
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
