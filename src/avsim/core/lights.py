"""Traffic-light states over time (a step function per light)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape
from avsim.core.trajectory import check_grouped_times

LIGHT_STATES: tuple[str, ...] = ("red", "yellow", "green", "unknown")


@dataclass(frozen=True, eq=False)
class TrafficLightStates:
    """State changes: light_id (N,) str, timestamps_ns (N,) int64, state (N,) in LIGHT_STATES.

    Rows are sorted by (light_id, timestamp); a light keeps a state until its next row.
    """

    light_id: np.ndarray
    timestamps_ns: np.ndarray
    state: np.ndarray

    def __post_init__(self) -> None:
        ts = np.asarray(self.timestamps_ns)
        if ts.ndim != 1 or (ts.size and not np.issubdtype(ts.dtype, np.integer)):
            raise AvsimValueError(f"lights.timestamps_ns: expected (N,) integer nanoseconds, got {ts.shape} {ts.dtype}")
        n = len(ts)
        ids = np.asarray(self.light_id).astype(str) if n else np.zeros(0, "<U1")
        state = np.asarray(self.state).astype(str) if n else np.zeros(0, "<U7")
        for name, arr in (("light_id", ids), ("state", state)):
            check_shape(arr, (n,), f"lights.{name}")
        bad = ~np.isin(state, LIGHT_STATES)
        if bad.any():
            raise AvsimValueError(f"lights.state: unknown state {state[bad][0]!r}; expected one of {LIGHT_STATES}")
        ts = ts.astype(np.int64)
        check_grouped_times(ids, ts, "lights", "light_id")
        for name, arr in (("light_id", ids), ("timestamps_ns", ts), ("state", state)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @classmethod
    def empty(cls) -> TrafficLightStates:
        """States with no rows.

        Returns:
            TrafficLightStates of length 0.
        """
        return cls(np.zeros(0, "<U1"), np.zeros(0, np.int64), np.zeros(0, "<U7"))

    @classmethod
    def from_unsorted(cls, light_id: npt.ArrayLike, timestamps_ns: npt.ArrayLike, state: npt.ArrayLike) -> TrafficLightStates:
        """Build from rows in any order (sorted here by light id, then time).

        Args:
            light_id: (N,) light ids.
            timestamps_ns: (N,) int64 times of the state changes.
            state: (N,) states (`LIGHT_STATES`).

        Returns:
            The sorted, validated states.
        """
        light_id = np.asarray(light_id).astype(str)
        timestamps_ns = np.asarray(timestamps_ns, dtype=np.int64)
        order = np.lexsort((timestamps_ns, light_id))
        return cls(light_id[order], timestamps_ns[order], np.asarray(state).astype(str)[order])

    def __len__(self) -> int:
        return len(self.timestamps_ns)

    @property
    def light_ids(self) -> np.ndarray:
        """Sorted unique ids (K,) of the lights with at least one state row."""
        return np.unique(self.light_id)

    def state_at(self, light_ids: np.ndarray, timestamp_ns: int) -> np.ndarray:
        """State (K,) of each light at `timestamp_ns`: its last change at or before that time,
        'unknown' before its first observation.

        Args:
            light_ids: (K,) light ids (lights without rows are 'unknown').
            timestamp_ns: time in int nanoseconds.

        Returns:
            (K,) '<U7' states.
        """
        light_ids = np.asarray(light_ids).astype(str).reshape(-1)
        out = np.full(len(light_ids), "unknown", dtype="<U7")
        if not len(self):
            return out
        seen = self.timestamps_ns <= int(timestamp_ns)
        ids, states = self.light_id[seen], self.state[seen]
        if not len(ids):
            return out
        # rows are sorted by (id, t): the last row of each id among `seen` is the current state
        last = np.r_[ids[1:] != ids[:-1], True]
        current = dict(zip(ids[last], states[last]))
        return np.array([current.get(i, "unknown") for i in light_ids], dtype="<U7")
