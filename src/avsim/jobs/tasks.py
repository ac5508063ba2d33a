"""The unit of a dataset job: an item task, how it ended, and its record's name; how the job ended.

`ItemTask` is what a worker needs for one item; `ItemResult` (with an `ItemStatus`) is how it
ended; `JobReport` is every item's result and what the driver merged. The runners of every kind
(`avsim.jobs.kinds`, `avsim.jobs.model_items`, ...) share these.
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


@dataclass(frozen=True)
class JobReport:
    """What a job did: its results in item order and, for eval, the FID / FVD document (detect: the
    merged sides, as `avsim.evaluation.detect.detect_sides` returns them; sim: the score rows)."""

    kind: str
    results: list[ItemResult]
    frechet: dict[str, Any] | None = None
    sim_rows: list[dict[str, Any]] | None = None
    detect: dict[str, Any] | None = None
    nuscenes: dict[str, int] | None = None  # export nuscenes: records per table of the joined dataroot

    def count(self, status: ItemStatus) -> int:
        """Items that ended with `status`."""
        return sum(r.status == status for r in self.results)

    @property
    def failed(self) -> bool:
        """Whether any item failed."""
        return self.count(ItemStatus.FAILED) > 0


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
