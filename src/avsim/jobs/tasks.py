"""The unit of a dataset job: an item task, how it ended, and its record's name.

`ItemTask` is what a worker needs for one item; `ItemResult` (with an `ItemStatus`) is how it
ended. The runners of every kind (`avsim.jobs.items`, `avsim.jobs.model_items`) share these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avsim.core.errors import AvsimError
from avsim.core.typing import StrEnum
from avsim.jobs.dataset import JobKind

JOB_JSON = "job.json"
JOB_FORMAT = "avsim-job-item-v1"
REASON_CHARS = 300


@dataclass(frozen=True)
class ItemTask:
    """What a worker needs for one item: kind, name, input path, item output folder, options."""

    kind: JobKind
    name: str
    source: Path
    out_dir: Path
    options: dict[str, Any] = field(default_factory=dict)


class ItemStatus(StrEnum):
    """How an item ended: run now, skipped because its outputs are current, or failed (one-line reason).

    The value is what `job_report.json` and the final table show.
    """

    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True)
class ItemResult:
    """How one item ended: `done`, `skipped` (current) or `failed` (with a one-line `reason`)."""

    name: str
    status: ItemStatus
    reason: str = ""
    seconds: float = 0.0
    digest: str = ""


def one_line(exc: BaseException) -> str:
    """An exception as one line: avsim errors as they print, others prefixed by their type.

    Args:
        exc: the exception.

    Returns:
        At most `REASON_CHARS` characters, no newline.
    """
    text = str(exc) if isinstance(exc, AvsimError) else f"{type(exc).__name__}: {exc}"
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 3] + "..."
