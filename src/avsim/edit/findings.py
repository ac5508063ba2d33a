"""What validation reports: the `Finding` record and the helpers the checks share.

`avsim.edit.validate` (geometry, kinematics, gaps, lights) and `avsim.edit.rules` (traffic
rules) both build findings; this module holds what they have in common so neither imports the
other at load time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

EGO_ID = "ego"


@dataclass(frozen=True)
class Finding:
    """One problem: `kind`, edit-clock `time_s`, the `ids` involved, a one-line `reason`.

    `end_s` is the end of the time span the finding covers (None: an instant, or a check that
    reports only its first time). Rule findings (`avsim.edit.rules`) have ids (road user,
    map element).
    """

    kind: str
    time_s: float
    ids: tuple[str, ...]
    reason: str
    end_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`avsim validate --json`).

        Returns:
            kind, time_s (rounded to ms), ids (a list), reason, and end_s when the finding has one.
        """
        d = asdict(self)
        d["ids"] = list(self.ids)
        d["time_s"] = round(self.time_s, 3)
        if self.end_s is None:
            del d["end_s"]
        else:
            d["end_s"] = round(self.end_s, 3)
        return d

    def __str__(self) -> str:
        return f"{self.time_s:8.2f} s  {self.kind:<14} {', '.join(self.ids)}: {self.reason}"

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        """What the finding is about, without when (to compare findings before and after an edit)."""
        return self.kind, self.ids


def time_runs(ti: np.ndarray) -> list[tuple[int, int]]:
    """Contiguous runs of a sorted array of time indices.

    Args:
        ti: (N,) sorted int time indices.

    Returns:
        [(first, last)] time index of each run of consecutive indices.
    """
    if not len(ti):
        return []
    breaks = np.flatnonzero(np.diff(ti) > 1)
    starts = np.r_[0, breaks + 1]
    ends = np.r_[breaks, len(ti) - 1]
    return [(int(ti[s]), int(ti[e])) for s, e in zip(starts, ends)]
