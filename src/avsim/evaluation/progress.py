"""Progress of long evaluation steps: a callback the metric code calls, a rich bar the CLI shows.

Library functions take `progress: StepProgress | None` and call it as
`progress(step, done, total)` (e.g. `("FID features real", 12, 64)`) after each unit of work;
they never print. The CLI passes `rich_steps(console)`, which keeps one bar per step name on
stderr, so stdout stays the table (and JSON when asked).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from avsim.core.progress import progress_bar

if TYPE_CHECKING:
    from rich.console import Console

StepProgress = Callable[[str, int, int], None]
"""`(step name, units done, units in the step)`; called after each unit."""


def report_step(progress: StepProgress | None, step: str, done: int, total: int) -> None:
    """Call `progress` when there is one (a no-op for library use without a bar)."""
    if progress is not None:
        progress(step, done, total)


@contextmanager
def rich_steps(console: Console | None = None) -> Iterator[StepProgress]:
    """A rich progress display with one bar per step name, on stderr by default.

    Args:
        console: where to draw (default: a stderr console).

    Returns:
        (as a context manager) the `StepProgress` callback to hand to the metric code.
    """
    from rich.progress import TaskID

    bar = progress_bar("eval", console=console, eta=False)
    tasks: dict[str, TaskID] = {}

    def update(step: str, done: int, total: int) -> None:
        if step not in tasks:
            tasks[step] = bar.add_task(step, total=total)
        bar.update(tasks[step], completed=done, total=total)

    with bar:
        yield update
