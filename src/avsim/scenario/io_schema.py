"""Schema constants of the native scenario format (version 1): file names, table columns and dtypes.

Shared by the table codec (`avsim.scenario.io_tables`), the `scenario.json` codec
(`avsim.scenario.io_header`) and the public API (`avsim.scenario.io`), which re-exports the
public names. Field-by-field documentation: docs/format.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import polars as pl

from avsim.core.errors import AvsimInputError, AvsimValueError

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

T = TypeVar("T")

SCHEMA_VERSION = 1
FORMAT_NAME = "avsim-scenario"
SCENARIO_JSON = "scenario.json"
EGO_FILE = "ego.parquet"
AGENTS_FILE = "agents.parquet"
LIGHTS_FILE = "lights.parquet"

# Quaternions further than this from unit norm are refused (same tolerance as the core types).
UNIT_QUAT_TOLERANCE = 1e-3
# Rotation matrices with |R R^T - I| above this are refused (same tolerance as SE3).
ROTATION_TOLERANCE = 1e-5

# Named limits of what a scenario folder may hold, checked before the values are decoded
# (docs/hostile_inputs.md). Real scenes are far below them: a 20 min nuPlan log at 20 Hz with
# 200 agents is 4.8 M agent rows (~0.6 GB decoded).
MAX_HEADER_BYTES = 64 * 1024**2  # scenario.json (a rig and metadata: a few kB)
MAX_ID_CHARS = 256  # scenario_id (the clip name made from it is `render.run.plan.safe_name`; camera names: `core.names`)
MAX_METADATA_TEXT_CHARS = 64 * 1024  # one string in scenario.json's metadata
MAX_TABLE_ROWS = 20_000_000  # rows of one table, counted from its pages (`core.safe_parquet`)
MAX_TABLE_DECODED_BYTES = 2 * 1024**3  # one table decoded: an upper bound counted from its pages before decoding
MAX_WORLD_COORD_M = 1e8  # |x|, |y|, |z| of every position (Earth-centred coordinates stay below 6.4e6 m)
MAX_BOX_SIZE_M = 1e4  # length, width, height of an agent or map box
MIN_FOCAL_PX, MAX_FOCAL_PX = 1e-2, 1e7  # a pinhole camera's fx_px / fy_px
MAX_CAMERA_SIDE_PX = 16384  # a rig camera's width_px / height_px

F64 = pl.Float64
I64 = pl.Int64
STR = pl.String
LIST_F64 = pl.List(pl.Float64)
LIST_STR = pl.List(pl.String)

ROTATION_COLUMNS = tuple(f"r{i}{j}" for i in range(3) for j in range(3))
QUAT_COLUMNS = ("qw", "qx", "qy", "qz")
XYZ_COLUMNS = ("x_m", "y_m", "z_m")

EGO_COLUMNS: dict[str, PolarsDataType] = {
    "timestamp_ns": I64,
    "tx_m": F64,
    "ty_m": F64,
    "tz_m": F64,
    **{c: F64 for c in ROTATION_COLUMNS},
}
_BOX_COLUMNS: dict[str, PolarsDataType] = {
    "center_x_m": F64,
    "center_y_m": F64,
    "center_z_m": F64,
    "length_m": F64,
    "width_m": F64,
    "height_m": F64,
    **{c: F64 for c in QUAT_COLUMNS},
}
AGENT_COLUMNS: dict[str, PolarsDataType] = {
    "track_id": STR,
    "source_class": STR,
    "timestamp_ns": I64,
    **_BOX_COLUMNS,
}
LIGHT_COLUMNS: dict[str, PolarsDataType] = {"light_id": STR, "timestamp_ns": I64, "state": STR}
POLYLINE_COLUMNS: dict[str, PolarsDataType] = {"id": STR, **{c: LIST_F64 for c in XYZ_COLUMNS}}
LANE_LINE_COLUMNS: dict[str, PolarsDataType] = {
    "id": STR,
    "color": STR,
    "style": STR,
    **{c: LIST_F64 for c in XYZ_COLUMNS},
    "vertex_color": LIST_STR,
    "vertex_style": LIST_STR,
}
LANE_COLUMNS: dict[str, PolarsDataType] = {"id": STR}
for _side in ("left", "right", "centre"):
    LANE_COLUMNS[f"{_side}_id"] = STR
    LANE_COLUMNS.update({f"{_side}_{c}": LIST_F64 for c in XYZ_COLUMNS})
del _side
CUBOID_COLUMNS: dict[str, PolarsDataType] = {"id": STR, **_BOX_COLUMNS}

# HDMap field -> (element kind, columns). The file is f"map_{field}.parquet".
MAP_ELEMENTS: dict[str, tuple[str, dict[str, PolarsDataType]]] = {
    "lane_lines": ("lane_lines", LANE_LINE_COLUMNS),
    "lanes": ("lanes", LANE_COLUMNS),
    "road_boundaries": ("polylines", POLYLINE_COLUMNS),
    "wait_lines": ("polylines", POLYLINE_COLUMNS),
    "poles": ("polylines", POLYLINE_COLUMNS),
    "crosswalks": ("polygons", POLYLINE_COLUMNS),
    "road_markings": ("polygons", POLYLINE_COLUMNS),
    "drivable_areas": ("polygons", POLYLINE_COLUMNS),
    "traffic_signs": ("cuboids", CUBOID_COLUMNS),
    "traffic_lights": ("cuboids", CUBOID_COLUMNS),
}
# Columns that may hold nulls (a lane line without per-vertex attributes).
NULLABLE_COLUMNS = {"vertex_color", "vertex_style"}


def map_file(element: str) -> str:
    """File name of the table holding HDMap field `element` (e.g. "map_lanes.parquet")."""
    return f"map_{element}.parquet"


TABLE_FILES: tuple[str, ...] = (EGO_FILE, AGENTS_FILE, LIGHTS_FILE, *(map_file(e) for e in MAP_ELEMENTS))
TABLE_COLUMNS: dict[str, dict[str, PolarsDataType]] = {
    EGO_FILE: EGO_COLUMNS,
    AGENTS_FILE: AGENT_COLUMNS,
    LIGHTS_FILE: LIGHT_COLUMNS,
    **{map_file(e): cols for e, (_, cols) in MAP_ELEMENTS.items()},
}


def build_checked(path: Path, field: str, make: Callable[[], T]) -> T:
    """Run a core constructor; its AvsimValueError becomes an input error naming the file.

    Args:
        path: file the values came from (named in the error).
        field: field or element being built (named in the error).
        make: zero-argument constructor call.

    Returns:
        What `make` returns.

    Raises:
        AvsimInputError: `make` raised an AvsimValueError (or an AvsimInputError, passed on).
    """
    try:
        return make()
    except AvsimInputError:
        raise
    except AvsimValueError as exc:
        raise AvsimInputError(path, field, str(exc)) from exc
