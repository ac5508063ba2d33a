"""Shared helpers for edit operations: the scenario clock and rebuilding agent tables.

Edit times are seconds relative to the scenario start, which is the ego's first timestamp.
Every helper here returns freshly allocated arrays: an edited scenario never shares a
writable buffer with the scenario it came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from avsim.core.agents import AgentTracks, collapse_class
from avsim.core.errors import AvsimValueError
from avsim.core.transforms import yaw_to_quat
from avsim.scenario import Scenario

AGENT_FIELDS = ("track_id", "source_class", "timestamps_ns", "center_m", "size_m", "orientation")

# Sizes (length, width, height) used when an edit adds an agent without giving one.
DEFAULT_SIZE_M: dict[str, tuple[float, float, float]] = {
    "Car": (4.6, 1.9, 1.6),
    "Truck": (9.0, 2.5, 3.4),
    "Pedestrian": (0.6, 0.6, 1.75),
    "Cyclist": (1.8, 0.7, 1.7),
    "Others": (1.0, 1.0, 1.0),
}


EGO_SIZE_M = (4.8, 2.0, 1.6)
EGO_REAR_AXLE_TO_CENTRE_M = 1.4


def ego_box(scenario: Scenario) -> tuple[tuple[float, float, float], float]:
    """The ego's box size (l, w, h) and rear-axle-to-centre distance: from the scenario's
    metadata (`ego_size_m`, `ego_rear_axle_to_center_m`) when given, else a typical car."""
    meta = scenario.metadata
    size = meta.get("ego_size_m")
    size = tuple(float(v) for v in size) if isinstance(size, (list, tuple)) and len(size) == 3 else EGO_SIZE_M
    offset = meta.get("ego_rear_axle_to_center_m")
    offset = float(offset) if isinstance(offset, (int, float)) and not isinstance(offset, bool) else EGO_REAR_AXLE_TO_CENTRE_M
    return size, offset


def start_ns(scenario: Scenario) -> int:
    """The scenario clock's origin: the ego's first timestamp (int ns)."""
    return int(scenario.ego.timestamps_ns[0])


def end_s(scenario: Scenario) -> float:
    """Scenario length in seconds on the edit clock (last ego timestamp)."""
    return (int(scenario.ego.timestamps_ns[-1]) - start_ns(scenario)) / 1e9


def to_ns(scenario: Scenario, t_s: np.ndarray | float) -> np.ndarray:
    """Edit-clock seconds -> absolute int64 nanoseconds."""
    return start_ns(scenario) + np.round(np.asarray(t_s, dtype=np.float64) * 1e9).astype(np.int64)


def to_s(scenario: Scenario, timestamps_ns: np.ndarray) -> np.ndarray:
    """Absolute int64 nanoseconds -> edit-clock seconds (float64)."""
    return (np.asarray(timestamps_ns, dtype=np.int64) - start_ns(scenario)).astype(np.float64) / 1e9


def check_time(scenario: Scenario, t_s: float, name: str, allow_end: bool = True) -> None:
    """Raise if `t_s` lies outside [0, scenario end]."""
    end = end_s(scenario)
    if not (0.0 <= t_s <= end + 1e-9) or (not allow_end and t_s >= end):
        raise AvsimValueError(f"{name}: {t_s:g} s is outside the scenario (0 to {end:g} s)")


def check_waypoints(scenario: Scenario, times_s: Sequence[float], xy_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Waypoint times (K,) inside the clip and positions (K, 2|3), as float64 arrays."""
    times = np.asarray(times_s, dtype=np.float64)
    for i, t in enumerate(times):
        check_time(scenario, float(t), f"waypoints[{i}].t_s")
    xy = np.asarray(xy_m, dtype=np.float64)
    if xy.ndim != 2 or xy.shape[1] not in (2, 3) or len(xy) != len(times):
        raise AvsimValueError("waypoints: need (K, 2) or (K, 3) positions, one per time")
    return times, xy


def columns(agents: AgentTracks) -> dict[str, np.ndarray]:
    """A private, writable copy of every column of `agents`."""
    return {f: np.array(getattr(agents, f), copy=True) for f in AGENT_FIELDS}


def build_agents(cols: dict[str, np.ndarray]) -> AgentTracks:
    """AgentTracks from columns, sorted by (track_id, timestamp) as the contract requires."""
    return AgentTracks.from_unsorted(*(cols[f] for f in AGENT_FIELDS))


def concat_columns(parts: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Row-wise concatenation of column dicts (all fields present in each)."""
    parts = [p for p in parts if len(p["timestamps_ns"])]
    if not parts:
        return empty_columns()
    out = {}
    for f in AGENT_FIELDS:
        arrays = [np.asarray(p[f]) for p in parts]
        if f in ("track_id", "source_class"):
            arrays = [a.astype(str) for a in arrays]
        out[f] = np.concatenate(arrays, axis=0)
    return out


def empty_columns() -> dict[str, np.ndarray]:
    return {
        "track_id": np.zeros(0, dtype="<U1"),
        "source_class": np.zeros(0, dtype="<U1"),
        "timestamps_ns": np.zeros(0, dtype=np.int64),
        "center_m": np.zeros((0, 3)),
        "size_m": np.zeros((0, 3)),
        "orientation": np.zeros((0, 4)),
    }


def track_columns(
    track_id: str,
    source_class: str,
    timestamps_ns: np.ndarray,
    center_m: np.ndarray,
    size_m: Sequence[float],
    yaw_rad: np.ndarray,
) -> dict[str, np.ndarray]:
    """Columns of one track (T rows) with a constant size and yaw-only orientation."""
    n = len(timestamps_ns)
    return {
        "track_id": np.full(n, str(track_id)),
        "source_class": np.full(n, str(source_class)),
        "timestamps_ns": np.asarray(timestamps_ns, dtype=np.int64).copy(),
        "center_m": np.asarray(center_m, dtype=np.float64).reshape(n, 3).copy(),
        "size_m": np.tile(np.asarray(size_m, dtype=np.float64).reshape(1, 3), (n, 1)),
        "orientation": yaw_to_quat(np.asarray(yaw_rad, dtype=np.float64)).reshape(n, 4),
    }


def existing_ids(scenario: Scenario) -> set[str]:
    return set(np.unique(np.asarray(scenario.agents.track_id)).astype(str).tolist())


def require_ids(scenario: Scenario, track_ids: Iterable[str], name: str = "track_id") -> list[str]:
    """Return `track_ids` as a list, raising if any is not in the scenario."""
    ids = [str(t) for t in track_ids]
    have = existing_ids(scenario)
    missing = [t for t in ids if t not in have]
    if missing:
        raise AvsimValueError(f"{name}: unknown track id {missing[0]!r}")
    return ids


def size_for(source_class: str, size_m: Sequence[float] | None) -> tuple[float, float, float]:
    """Explicit size, else a typical size for the collapsed class."""
    if size_m is not None:
        size = tuple(float(v) for v in size_m)
        if len(size) != 3 or min(size) <= 0:
            raise AvsimValueError("size_m: needs three positive numbers (length, width, height)")
        return size
    return DEFAULT_SIZE_M[collapse_class(source_class)]
