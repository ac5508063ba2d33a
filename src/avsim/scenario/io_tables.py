"""Table codec of the native scenario format: core types <-> polars frames (one per parquet file).

Writers turn the ego trajectory, agent tracks, light states and each HDMap element into a frame
with exactly the columns of `avsim.scenario.io_schema.TABLE_COLUMNS`; readers check one frame
(columns, dtypes, nulls, row count, values) and build the core type back, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from avsim.core.agents import AgentTracks
from avsim.core.errors import AvsimInputError
from avsim.core.lights import LIGHT_STATES, TrafficLightStates
from avsim.core.safe_files import regular_file
from avsim.core.safe_parquet import TableLimits, measure
from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3
from avsim.maps import Cuboids, LaneLines, Lanes, Polygons, Polylines
from avsim.scenario.io_checks import check_finite, check_rotations, check_sorted_times, check_unit_quats, row_label
from avsim.scenario.io_schema import (
    AGENTS_FILE,
    EGO_FILE,
    F64,
    I64,
    LIGHTS_FILE,
    LIST_F64,
    LIST_STR,
    MAP_ELEMENTS,
    MAX_TABLE_DECODED_BYTES,
    MAX_TABLE_ROWS,
    NULLABLE_COLUMNS,
    QUAT_COLUMNS,
    ROTATION_COLUMNS,
    SCHEMA_VERSION,
    STR,
    TABLE_COLUMNS,
    XYZ_COLUMNS,
    map_file,
)
from avsim.scenario.types import Scenario


# ==========================================================================================
# writing
# ==========================================================================================
def scenario_tables(scenario: Scenario) -> dict[str, pl.DataFrame]:
    tables = {
        EGO_FILE: _ego_frame(scenario.ego),
        AGENTS_FILE: _agents_frame(scenario.agents),
        LIGHTS_FILE: _lights_frame(scenario.lights),
    }
    for element, (kind, _) in MAP_ELEMENTS.items():
        tables[map_file(element)] = _MAP_WRITERS[kind](getattr(scenario.map, element))
    for name, df in tables.items():
        if dict(df.schema) != TABLE_COLUMNS[name]:  # a writer bug, never user input
            raise AssertionError(f"{name}: wrote schema {dict(df.schema)}")
    return tables


def _str_series(name: str, values: np.ndarray) -> pl.Series:
    return pl.Series(name, [str(v) for v in np.asarray(values).tolist()], dtype=STR)


def _f64_series(name: str, values: np.ndarray) -> pl.Series:
    return pl.Series(name, np.ascontiguousarray(values, dtype=np.float64), dtype=F64)


def _ego_frame(ego: EgoTrajectory) -> pl.DataFrame:
    R = np.asarray(ego.world_SE3_ego.rotation, dtype=np.float64).reshape(-1, 3, 3)
    t = np.asarray(ego.world_SE3_ego.translation, dtype=np.float64).reshape(-1, 3)
    columns = [pl.Series("timestamp_ns", np.asarray(ego.timestamps_ns, dtype=np.int64), dtype=I64)]
    columns += [_f64_series(c, t[:, i]) for i, c in enumerate(("tx_m", "ty_m", "tz_m"))]
    columns += [_f64_series(f"r{i}{j}", R[:, i, j]) for i in range(3) for j in range(3)]
    return pl.DataFrame(columns)


def _box_series(center_m: np.ndarray, size_m: np.ndarray, orientation: np.ndarray) -> list[pl.Series]:
    center_m = np.asarray(center_m, dtype=np.float64).reshape(-1, 3)
    size_m = np.asarray(size_m, dtype=np.float64).reshape(-1, 3)
    orientation = np.asarray(orientation, dtype=np.float64).reshape(-1, 4)
    out = [_f64_series(c, center_m[:, i]) for i, c in enumerate(("center_x_m", "center_y_m", "center_z_m"))]
    out += [_f64_series(c, size_m[:, i]) for i, c in enumerate(("length_m", "width_m", "height_m"))]
    out += [_f64_series(c, orientation[:, i]) for i, c in enumerate(QUAT_COLUMNS)]
    return out


def _agents_frame(agents: AgentTracks) -> pl.DataFrame:
    return pl.DataFrame(
        [
            _str_series("track_id", agents.track_id),
            _str_series("source_class", agents.source_class),
            pl.Series("timestamp_ns", np.asarray(agents.timestamps_ns, dtype=np.int64), dtype=I64),
            *_box_series(agents.center_m, agents.size_m, agents.orientation),
        ]
    )


def _lights_frame(lights: TrafficLightStates) -> pl.DataFrame:
    return pl.DataFrame(
        [
            _str_series("light_id", lights.light_id),
            pl.Series("timestamp_ns", np.asarray(lights.timestamps_ns, dtype=np.int64), dtype=I64),
            _str_series("state", lights.state),
        ]
    )


def _split(values: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    offsets = np.asarray(offsets, dtype=np.int64)
    return [values[offsets[k] : offsets[k + 1]] for k in range(len(offsets) - 1)]


def _xyz_lists(prefix: str, points_m: np.ndarray, offsets: np.ndarray) -> list[pl.Series]:
    points_m = np.asarray(points_m, dtype=np.float64).reshape(-1, 3)
    return [
        # polars makes an Array column when all lists happen to have one length; cast back.
        pl.Series(f"{prefix}{c}", _split(np.ascontiguousarray(points_m[:, i]), offsets), dtype=LIST_F64).cast(LIST_F64)
        for i, c in enumerate(XYZ_COLUMNS)
    ]


def _polylines_frame(lines: Polylines | Polygons) -> pl.DataFrame:
    return pl.DataFrame([_str_series("id", lines.ids), *_xyz_lists("", lines.points_m, lines.offsets)])


def _vertex_attr(name: str, values: np.ndarray | None, offsets: np.ndarray, n: int) -> pl.Series:
    if values is None:
        return pl.Series(name, [None] * n, dtype=LIST_STR)
    parts = _split(np.asarray(values), offsets)
    return pl.Series(name, [[str(v) for v in p.tolist()] for p in parts], dtype=LIST_STR).cast(LIST_STR)


def _lane_lines_frame(lane_lines: LaneLines) -> pl.DataFrame:
    lines = lane_lines.lines
    n = len(lines.ids)
    return pl.DataFrame(
        [
            _str_series("id", lines.ids),
            _str_series("color", lane_lines.color),
            _str_series("style", lane_lines.style),
            *_xyz_lists("", lines.points_m, lines.offsets),
            _vertex_attr("vertex_color", lane_lines.vertex_color, lines.offsets, n),
            _vertex_attr("vertex_style", lane_lines.vertex_style, lines.offsets, n),
        ]
    )


def _lanes_frame(lanes: Lanes) -> pl.DataFrame:
    columns = [_str_series("id", lanes.ids)]
    for side in ("left", "right", "centre"):
        lines = getattr(lanes, side)
        columns.append(_str_series(f"{side}_id", lines.ids))
        columns += _xyz_lists(f"{side}_", lines.points_m, lines.offsets)
    return pl.DataFrame(columns)


def _cuboids_frame(cuboids: Cuboids) -> pl.DataFrame:
    return pl.DataFrame([_str_series("id", cuboids.ids), *_box_series(cuboids.center_m, cuboids.size_m, cuboids.orientation)])


_MAP_WRITERS: dict[str, Callable[[Any], pl.DataFrame]] = {
    "lane_lines": _lane_lines_frame,
    "lanes": _lanes_frame,
    "polylines": _polylines_frame,
    "polygons": _polylines_frame,
    "cuboids": _cuboids_frame,
}


# ==========================================================================================
# reading
# ==========================================================================================
def check_table_size(path: Path, expected_rows: int) -> None:
    """Refuse a table before decoding it: rows above `MAX_TABLE_ROWS` or other than scenario.json says,
    or values decoding to more than `MAX_TABLE_DECODED_BYTES` (both counted from its page headers,
    `avsim.core.safe_parquet.measure`: the footer's claims are not trusted).

    Args:
        path: the parquet file.
        expected_rows: the row count scenario.json records.
    """
    size = measure(path, TableLimits(MAX_TABLE_ROWS, MAX_TABLE_DECODED_BYTES))  # every column: an extra one is refused after
    if size.rows != expected_rows:
        raise AvsimInputError(path, "rows", f"has {size.rows} rows, scenario.json says {expected_rows} (truncated or replaced?)")


def read_table(path: Path, expected_rows: int) -> pl.DataFrame:
    """Read one parquet table and check its size (before decoding), columns, dtypes, nulls and row count."""
    regular_file(path, "file")
    try:
        check_table_size(path, expected_rows)
        df = pl.read_parquet(path)
    except AvsimInputError:
        raise
    except Exception as exc:  # polars raises ComputeError/OSError variants for damaged files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AvsimInputError(path, "file", f"unreadable parquet (truncated or corrupt): {first}") from exc
    columns = TABLE_COLUMNS[path.name]
    for name, dtype in columns.items():
        if name not in df.columns:
            raise AvsimInputError(path, name, "missing column")
        if df.schema[name] != dtype:
            raise AvsimInputError(path, name, f"has dtype {df.schema[name]}, expected {dtype}")
        if name in NULLABLE_COLUMNS:
            continue  # its reader (`_vertex_attr_from`) checks the nulls row by row
        if df[name].null_count():
            row = int(df[name].is_null().arg_max() or 0)
            raise AvsimInputError(path, name, f"row {row} is null")
        if dtype in (LIST_F64, LIST_STR) and df[name].explode(empty_as_null=False).null_count():
            raise AvsimInputError(path, name, "a list holds a null value")
    extra = [c for c in df.columns if c not in columns]
    if extra:
        raise AvsimInputError(path, extra[0], f"unexpected column (schema {SCHEMA_VERSION} has: {', '.join(columns)})")
    if df.height != expected_rows:
        raise AvsimInputError(path, "rows", f"has {df.height} rows, scenario.json says {expected_rows} (truncated or replaced?)")
    return df


def _strings(df: pl.DataFrame, name: str) -> np.ndarray:
    return np.asarray(df[name].to_list(), dtype=str)


def ego_from(path: Path, df: pl.DataFrame) -> EgoTrajectory:
    if df.height == 0:
        raise AvsimInputError(path, "rows", "no ego poses; a scenario needs at least one")
    check_finite(path, df)
    t_ns = df["timestamp_ns"].to_numpy().astype(np.int64, copy=False)
    back = t_ns[1:] <= t_ns[:-1]  # compared, not np.diff: a difference of int64 ns can overflow
    if back.any():
        row = int(np.argmax(back)) + 1
        raise AvsimInputError(path, "timestamp_ns", f"row {row}: not strictly increasing ({t_ns[row]} after {t_ns[row - 1]})")
    R = np.stack([df[c].to_numpy() for c in ROTATION_COLUMNS], axis=-1).reshape(-1, 3, 3)
    check_rotations(path, "r00..r22", R, None)
    t = np.stack([df[c].to_numpy() for c in ("tx_m", "ty_m", "tz_m")], axis=-1)
    return EgoTrajectory(timestamps_ns=t_ns.copy(), world_SE3_ego=SE3(np.ascontiguousarray(R), t))


def _box_arrays(path: Path, df: pl.DataFrame, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    check_finite(path, df, ids)
    center = np.stack([df[c].to_numpy() for c in ("center_x_m", "center_y_m", "center_z_m")], axis=-1).reshape(-1, 3)
    size = np.stack([df[c].to_numpy() for c in ("length_m", "width_m", "height_m")], axis=-1).reshape(-1, 3)
    not_positive = (size <= 0).any(axis=-1)
    if not_positive.any():
        row = int(np.argmax(not_positive))
        raise AvsimInputError(path, "length_m/width_m/height_m", f"{row_label(ids, row)} has a size <= 0: {size[row].tolist()}")
    q = check_unit_quats(path, df, ids)
    return center, size, q


def agents_from(path: Path, df: pl.DataFrame) -> AgentTracks:
    track_id = _strings(df, "track_id")
    t_ns = df["timestamp_ns"].to_numpy().astype(np.int64, copy=False).copy()
    check_sorted_times(path, track_id, t_ns, "track_id")
    center, size, q = _box_arrays(path, df, track_id)
    return AgentTracks(
        track_id=track_id,
        source_class=_strings(df, "source_class"),
        timestamps_ns=t_ns,
        center_m=center,
        size_m=size,
        orientation=q,
    )


def lights_from(path: Path, df: pl.DataFrame) -> TrafficLightStates:
    light_id = _strings(df, "light_id")
    t_ns = df["timestamp_ns"].to_numpy().astype(np.int64, copy=False).copy()
    check_sorted_times(path, light_id, t_ns, "light_id")
    state = _strings(df, "state")
    unknown = ~np.isin(state, np.array(LIGHT_STATES))
    if unknown.any():
        row = int(np.argmax(unknown))
        raise AvsimInputError(
            path, "state", f"{row_label(light_id, row, 'light_id')} is {state[row]!r}, expected one of {', '.join(LIGHT_STATES)}"
        )
    return TrafficLightStates(light_id=light_id, timestamps_ns=t_ns, state=state)


def _ragged_points(path: Path, df: pl.DataFrame, prefix: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x/y/z list columns -> (points_m (M,3), offsets (K+1,)); the three lists must agree."""
    lengths = [df[f"{prefix}{c}"].list.len().to_numpy().astype(np.int64) for c in XYZ_COLUMNS]
    for c, other in zip(XYZ_COLUMNS[1:], lengths[1:]):
        differ = other != lengths[0]
        if differ.any():
            row = int(np.argmax(differ))
            raise AvsimInputError(
                path, f"{prefix}{c}", f"{row_label(ids, row)} has {other[row]} values but {prefix}x_m has {lengths[0][row]}"
            )
    offsets = np.concatenate([[0], np.cumsum(lengths[0])]).astype(np.int64)
    points = np.stack(
        [df[f"{prefix}{c}"].explode(empty_as_null=False).to_numpy().astype(np.float64, copy=False) for c in XYZ_COLUMNS],
        axis=-1,
    ).reshape(-1, 3)
    return np.ascontiguousarray(points), offsets


def _polylines_from(path: Path, df: pl.DataFrame, cls: type = Polylines) -> Polylines | Polygons:
    ids = _strings(df, "id")
    check_finite(path, df, ids)
    points, offsets = _ragged_points(path, df, "", ids)
    return cls(ids=ids, points_m=points, offsets=offsets)


def _vertex_attr_from(path: Path, df: pl.DataFrame, name: str, ids: np.ndarray, offsets: np.ndarray) -> np.ndarray | None:
    s = df[name]
    nulls = s.null_count()
    if nulls == len(s):
        return None
    if nulls:
        row = int(s.is_null().arg_max() or 0)
        raise AvsimInputError(path, name, f"{row_label(ids, row)} is null but other rows have per-vertex values (all or none)")
    lengths = s.list.len().to_numpy().astype(np.int64)
    differ = lengths != np.diff(offsets)
    if differ.any():
        row = int(np.argmax(differ))
        raise AvsimInputError(path, name, f"{row_label(ids, row)} has {lengths[row]} values for {np.diff(offsets)[row]} vertices")
    inner = s.explode(empty_as_null=False)
    if inner.null_count():
        raise AvsimInputError(path, name, "a list holds a null value")
    return np.asarray(inner.to_list(), dtype=str)


def _lane_lines_from(path: Path, df: pl.DataFrame) -> LaneLines:
    ids = _strings(df, "id")
    check_finite(path, df, ids)
    points, offsets = _ragged_points(path, df, "", ids)
    return LaneLines(
        lines=Polylines(ids=ids, points_m=points, offsets=offsets),
        color=_strings(df, "color"),
        style=_strings(df, "style"),
        vertex_color=_vertex_attr_from(path, df, "vertex_color", ids, offsets),
        vertex_style=_vertex_attr_from(path, df, "vertex_style", ids, offsets),
    )


def _lanes_from(path: Path, df: pl.DataFrame) -> Lanes:
    ids = _strings(df, "id")
    check_finite(path, df, ids)
    sides = {}
    for side in ("left", "right", "centre"):
        points, offsets = _ragged_points(path, df, f"{side}_", ids)
        sides[side] = Polylines(ids=_strings(df, f"{side}_id"), points_m=points, offsets=offsets)
    return Lanes(ids=ids, **sides)


def _cuboids_from(path: Path, df: pl.DataFrame) -> Cuboids:
    ids = _strings(df, "id")
    center, size, q = _box_arrays(path, df, ids)
    return Cuboids(ids=ids, center_m=center, size_m=size, orientation=q)


MAP_READERS: dict[str, Callable[[Path, pl.DataFrame], Any]] = {
    "lane_lines": _lane_lines_from,
    "lanes": _lanes_from,
    "polylines": _polylines_from,
    "polygons": partial(_polylines_from, cls=Polygons),
    "cuboids": _cuboids_from,
}
