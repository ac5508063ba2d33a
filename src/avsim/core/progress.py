"""One progress-bar factory for every command (rich, on stderr; stdout stays the command's result).

    with progress_bar("render", unit="frames") as bar:
        task = bar.add_task("clip", total=n)
        bar.advance(task, 1)

Library code never draws: it takes a callback (`progress(n)` or a `StepProgress`) and the
command-line layer hands it one made from this bar (`step_bars` for named steps).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def progress_bar(label: str, unit: str = "", console: Console | None = None, *, eta: bool = True, spinner: bool = False,
                 transient: bool = False, extra_field: str | None = None, disable: bool | None = None) -> Progress:  # fmt: skip
    """A rich progress display with avsim's columns: label, description, bar, done/total [unit], elapsed [, remaining].

    Args:
        label: the bold word in front (the command: "render", "eval", ...).
        unit: what is counted ("frames", "items"), shown after done/total; "" for nothing.
        console: where to draw (default: a console on stderr).
        eta: also show the estimated time remaining.
        spinner: start with a spinner (steps whose total is not known at first).
        transient: clear the bar when it stops (commands whose stderr should hold only the result).
        extra_field: a task field shown after the columns (e.g. "info" for the training loss line).
        disable: True draws nothing; None draws only on a terminal when `transient`, else always.

    Returns:
        The (not yet started) `rich.progress.Progress`; use it as a context manager. A `with`
        block that ends in an exception clears the bar (as `transient` would), so that a failed
        command's stderr holds its one error line only.
    """
    from rich.console import Console as RichConsole
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = console or RichConsole(stderr=True)
    columns: list[ProgressColumn | str] = [SpinnerColumn()] if spinner else []
    columns += [TextColumn(f"[bold]{label}"), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
    columns += [TextColumn(unit)] if unit else []
    columns += [TimeElapsedColumn()] + ([TimeRemainingColumn()] if eta else [])
    columns += [TextColumn(f"{{task.fields[{extra_field}]}}")] if extra_field else []
    if disable is None:
        disable = transient and not console.is_terminal
    return bar_class()(*columns, console=console, transient=transient, disable=disable)


def bar_class() -> type[Progress]:
    """`rich.progress.Progress` that leaves nothing behind when its block ends with an exception.

    A step that fails (bad input, kill, Ctrl-C) then leaves only the command's one error line on
    stderr, not a half-drawn bar (in a pipe rich prints the bar's last state when it stops).
    """
    from rich.progress import Progress

    class _Bar(Progress):
        def __exit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                     exc_tb: TracebackType | None) -> None:  # fmt: skip
            if exc_type is not None:
                self.live.transient = True
                self.disable = True  # no closing newline either
                self.live.stop()
                return
            self.stop()

    return _Bar


StepProgress = Callable[[str, int, int], None]
"""`(step name, units done, units in the step)`: what library code calls after each unit of a long step
(`("VAE encode", 3, 7)`); `done == 0` announces a step before its first unit finishes."""


def report_step(progress: StepProgress | None, step: str, done: int, total: int) -> None:
    """Call `progress` when there is one (a no-op for library use without a display).

    Args:
        progress: the callback, or None.
        step: the step's name.
        done: units finished.
        total: units in the step.
    """
    if progress is not None:
        progress(step, done, total)


@contextmanager
def step_bars(label: str, console: Console | None = None) -> Iterator[StepProgress]:
    """One progress bar per step name (rich, on stderr by default), fed by a `StepProgress`.

    A step announced with `done == 0` shows its bar and elapsed time at once, so a step whose
    single unit takes long (loading weights) is visibly running.

    Args:
        label: the bold word in front of every bar (the command).
        console: where to draw (default: a stderr console).

    Returns:
        (as a context manager) the `StepProgress` callback.
    """
    from rich.progress import TaskID

    bar = progress_bar(label, console=console, eta=False)
    tasks: dict[str, TaskID] = {}

    def update(step: str, done: int, total: int) -> None:
        if step not in tasks:
            tasks[step] = bar.add_task(step, total=total)
        bar.update(tasks[step], completed=done, total=total)

    with bar:
        yield update
