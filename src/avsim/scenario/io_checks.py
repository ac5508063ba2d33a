"""Value checks shared by the scenario readers: finite numbers, unit quaternions, rotations, sorted times.

Each check raises `AvsimInputError(file, column, reason)` naming the first bad row.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl

from avsim.core.errors import AvsimInputError
from avsim.scenario.io_schema import (
    F64,
    LIST_F64,
    MAX_BOX_SIZE_M,
    MAX_WORLD_COORD_M,
    QUAT_COLUMNS,
    ROTATION_TOLERANCE,
    TABLE_COLUMNS,
    UNIT_QUAT_TOLERANCE,
)


def row_label(ids: np.ndarray | None, row: int, id_name: str = "id") -> str:
    return f"row {row}" if ids is None else f"row {row} ({id_name} {str(ids[row])!r})"


_SIZE_COLUMNS = ("length_m", "width_m", "height_m")


def _limit(name: str) -> float:
    """The largest magnitude a metric column may hold: a box size, or a position in the world extent."""
    if name in _SIZE_COLUMNS:
        return MAX_BOX_SIZE_M
    return MAX_WORLD_COORD_M if name.endswith("_m") else math.inf


def _beyond(values: np.ndarray, limit: float) -> np.ndarray:
    """Not finite, or of a magnitude above `limit`."""
    finite = np.isfinite(values)
    return ~finite | (np.abs(np.where(finite, values, 0.0)) > limit)


def _bad_reason(value: float, limit: float) -> str:
    if not np.isfinite(value):
        return f"is {value} (must be finite)"
    return f"is {value:g}, beyond the {limit:g} m a scenario may hold (docs/hostile_inputs.md)"


def check_finite(path: Path, df: pl.DataFrame, ids: np.ndarray | None = None) -> None:
    """Every float is finite, and every metric one within its limit (`MAX_WORLD_COORD_M`, `MAX_BOX_SIZE_M`)."""
    for name, dtype in TABLE_COLUMNS[path.name].items():
        limit = _limit(name)
        if dtype == F64:
            values = df[name].to_numpy()
            bad = _beyond(values, limit)
            if bad.any():
                row = int(np.argmax(bad))
                raise AvsimInputError(path, name, f"{row_label(ids, row)} {_bad_reason(values[row], limit)}")
        elif dtype == LIST_F64:
            lengths = df[name].list.len().to_numpy().astype(np.int64)
            values = df[name].explode(empty_as_null=False).to_numpy()
            bad = _beyond(values, limit)
            if bad.any():
                offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
                flat = int(np.argmax(bad))
                row = int(np.searchsorted(offsets, flat, side="right") - 1)
                raise AvsimInputError(path, name, f"{row_label(ids, row)} vertex {flat - offsets[row]} {_bad_reason(values[flat], limit)}")


def check_unit_quats(path: Path, df: pl.DataFrame, ids: np.ndarray | None) -> np.ndarray:
    q = np.stack([df[c].to_numpy() for c in QUAT_COLUMNS], axis=-1).astype(np.float64, copy=False).reshape(-1, 4)
    err = np.abs(np.linalg.norm(q, axis=-1) - 1.0)
    if (err > UNIT_QUAT_TOLERANCE).any():
        row = int(np.argmax(err > UNIT_QUAT_TOLERANCE))
        raise AvsimInputError(
            path, "qw..qz", f"{row_label(ids, row)} is not a unit quaternion (norm {np.linalg.norm(q[row]):.6g})"
        )
    return q


def check_rotations(path: Path, field: str, R: np.ndarray, ids: np.ndarray | None) -> None:
    err = np.abs(R @ np.swapaxes(R, -1, -2) - np.eye(3)).max(axis=(-2, -1)) if len(R) else np.zeros(0)
    det = np.linalg.det(R) if len(R) else np.zeros(0)
    bad = (err > ROTATION_TOLERANCE) | (det < 0)
    if bad.any():
        row = int(np.argmax(bad))
        raise AvsimInputError(
            path, field, f"{row_label(ids, row)} is not a rotation matrix (|R R^T - I| = {err[row]:.2e}, det = {det[row]:.6g})"
        )


def check_sorted_times(path: Path, ids: np.ndarray, times: np.ndarray, id_name: str) -> None:
    """Rows must be sorted by (id, timestamp) with strictly increasing time within each id."""
    if len(ids) < 2:
        return
    same = ids[1:] == ids[:-1]
    unordered = ids[1:] < ids[:-1]
    if unordered.any():
        row = int(np.argmax(unordered)) + 1
        raise AvsimInputError(path, id_name, f"{row_label(ids, row, id_name)}: rows must be sorted by ({id_name}, timestamp_ns)")
    stuck = same & (times[1:] <= times[:-1])
    if stuck.any():
        row = int(np.argmax(stuck)) + 1
        raise AvsimInputError(
            path,
            "timestamp_ns",
            f"{row_label(ids, row, id_name)}: not strictly increasing ({times[row]} after {times[row - 1]})",
        )
