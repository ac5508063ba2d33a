"""One progress-bar factory for every command (rich, on stderr; stdout stays the command's result).

    with progress_bar("render", unit="frames") as bar:
        task = bar.add_task("clip", total=n)
        bar.advance(task, 1)

Library code never draws: it takes a callback (`progress(n)` or a `StepProgress`) and the
command-line layer hands it one made from this bar.
"""

from __future__ import annotations

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
        Progress,
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

    class _Progress(Progress):
        def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
            if exc_type is None:
                super().__exit__(exc_type, *rest)  # type: ignore[arg-type]
            elif not self.disable:  # an error leaves its one line: no half-full bar, no trailing newline
                self.live.transient = True
                self.live.stop()

    return _Progress(*columns, console=console, transient=transient, disable=disable)
