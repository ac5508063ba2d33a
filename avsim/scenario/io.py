"""Native on-disk scenario format: a folder with `scenario.json` and polars-written parquet tables.

Layout (schema version 1, documented field by field in docs/format.md)::

    <folder>/scenario.json            format, schema_version, scenario_id, rig, tables, metadata
    <folder>/ego.parquet              one row per ego pose (world_SE3_ego as a 3x3 matrix + t)
    <folder>/agents.parquet           one row per (track, timestamp) observation
    <folder>/lights.parquet           one row per (light, timestamp) state change
    <folder>/map_<element>.parquet    one row per map element; ragged geometry as list columns

Rotations of the ego are stored as matrices (not quaternions) so a save/load round trip is
bit-exact: `SE3` holds matrices and a quaternion detour would change the last bits.
Every table is always written (possibly with zero rows) so a missing file is always an error.
Loading validates everything and raises `AvsimInputError(file, field, reason)`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

import avsim
from avsim.core.agents import AgentTracks
from avsim.core.atomic import atomic_output_path
from avsim.core.cameras import camera_from_dict
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.lights import LIGHT_STATES, TrafficLightStates
from avsim.core.rig import CameraRig
from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3
from avsim.maps import Cuboids, HDMap, LaneLines, Lanes, Polygons, Polylines
from avsim.scenario import Scenario

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

_F64 = pl.Float64
_I64 = pl.Int64
_STR = pl.String
_LIST_F64 = pl.List(pl.Float64)
_LIST_STR = pl.List(pl.String)

_ROTATION_COLUMNS = tuple(f"r{i}{j}" for i in range(3) for j in range(3))
_QUAT_COLUMNS = ("qw", "qx", "qy", "qz")
_XYZ_LIST = ("x_m", "y_m", "z_m")

EGO_COLUMNS: dict[str, pl.DataType] = {
    "timestamp_ns": _I64,
    "tx_m": _F64,
    "ty_m": _F64,
    "tz_m": _F64,
    **{c: _F64 for c in _ROTATION_COLUMNS},
}
_BOX_COLUMNS: dict[str, pl.DataType] = {
    "center_x_m": _F64,
    "center_y_m": _F64,
    "center_z_m": _F64,
    "length_m": _F64,
    "width_m": _F64,
    "height_m": _F64,
    **{c: _F64 for c in _QUAT_COLUMNS},
}
AGENT_COLUMNS: dict[str, pl.DataType] = {
    "track_id": _STR,
    "source_class": _STR,
    "timestamp_ns": _I64,
    **_BOX_COLUMNS,
}
LIGHT_COLUMNS: dict[str, pl.DataType] = {"light_id": _STR, "timestamp_ns": _I64, "state": _STR}
POLYLINE_COLUMNS: dict[str, pl.DataType] = {"id": _STR, **{c: _LIST_F64 for c in _XYZ_LIST}}
LANE_LINE_COLUMNS: dict[str, pl.DataType] = {
    "id": _STR,
    "color": _STR,
    "style": _STR,
    **{c: _LIST_F64 for c in _XYZ_LIST},
    "vertex_color": _LIST_STR,
    "vertex_style": _LIST_STR,
}
LANE_COLUMNS: dict[str, pl.DataType] = {
    "id": _STR,
    **{
        col: dtype
        for side in ("left", "right", "centre")
        for col, dtype in ((f"{side}_id", _STR), *((f"{side}_{c}", _LIST_F64) for c in _XYZ_LIST))
    },
}
CUBOID_COLUMNS: dict[str, pl.DataType] = {"id": _STR, **_BOX_COLUMNS}

# HDMap field -> (element kind, columns). The file is f"map_{field}.parquet".
MAP_ELEMENTS: dict[str, tuple[str, dict[str, pl.DataType]]] = {
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
_NULLABLE = {"vertex_color", "vertex_style"}


def map_file(element: str) -> str:
    return f"map_{element}.parquet"


TABLE_FILES: tuple[str, ...] = (EGO_FILE, AGENTS_FILE, LIGHTS_FILE, *(map_file(e) for e in MAP_ELEMENTS))
TABLE_COLUMNS: dict[str, dict[str, pl.DataType]] = {
    EGO_FILE: EGO_COLUMNS,
    AGENTS_FILE: AGENT_COLUMNS,
    LIGHTS_FILE: LIGHT_COLUMNS,
    **{map_file(e): cols for e, (_, cols) in MAP_ELEMENTS.items()},
}

ProgressFn = Callable[[str], None]


# ==========================================================================================
# writing
# ==========================================================================================
def save_scenario(
    scenario: Scenario,
    folder: str | Path,
    *,
    allow_empty_map: bool = False,
    progress: ProgressFn | None = None,
) -> Path:
    """Write `scenario` to `folder` atomically (temp folder beside it, renamed on success).

    An existing `folder` is replaced only when it is empty or an avsim scenario folder, so a
    mistyped path never deletes unrelated data. `progress(file_name)` is called after each file.
    Raises `AvsimValueError` for an empty map (unless `allow_empty_map`) or non-JSON metadata,
    `AvsimInputError` for an unusable target. Same scenario -> same bytes.
    """
    folder = Path(folder)
    check_output_folder(folder)
    if scenario.map.is_empty() and not allow_empty_map:
        raise AvsimValueError(f"map: scenario {scenario.scenario_id!r} has no map elements (an empty map is not a usable scenario)")
    tables = _tables(scenario)
    header = _header(scenario, {name: df.height for name, df in tables.items()})  # checks metadata
    with atomic_output_path(folder, is_dir=True) as tmp:
        for name, df in tables.items():
            df.write_parquet(tmp / name, compression="zstd", statistics=True)
            if progress is not None:
                progress(name)
        (tmp / SCENARIO_JSON).write_text(header, encoding="utf-8")
        if progress is not None:
            progress(SCENARIO_JSON)
    return folder


def check_output_folder(folder: str | Path) -> None:
    """Raise AvsimInputError unless `folder` is absent, empty or an avsim scenario (safe to replace)."""
    folder = Path(folder)
    if not folder.exists():
        return
    if not folder.is_dir():
        raise AvsimInputError(folder, "output", "exists and is not a folder; refusing to replace it")
    if (folder / SCENARIO_JSON).is_file() or not any(folder.iterdir()):
        return
    raise AvsimInputError(folder, "output", "exists, is not empty and is not an avsim scenario folder; refusing to replace it")


def _header(scenario: Scenario, rows: dict[str, int]) -> str:
    if not isinstance(scenario.scenario_id, str) or not scenario.scenario_id:
        raise AvsimValueError(f"scenario_id: must be a non-empty string, got {scenario.scenario_id!r}")
    metadata = dict(scenario.metadata)
    _check_json_value(metadata, "metadata")
    doc = {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "written_by": f"avsim {avsim.__version__}",
        "scenario_id": scenario.scenario_id,
        "rig": _rig_to_json(scenario.rig),
        "tables": {name: {"rows": n} for name, n in rows.items()},
        "metadata": metadata,
    }
    return _pretty_json(doc) + "\n"


def _pretty_json(value: Any, indent: str = "") -> str:
    """JSON with objects one key per line and lists of scalars on one line (readable rigs)."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {_pretty_json(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(inner + _pretty_json(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value, allow_nan=False, ensure_ascii=False)


def _check_json_value(value: Any, where: str) -> None:
    """Metadata must survive JSON unchanged: str keys, lists (not tuples), finite floats."""
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int) and type(value) is int:
        return
    if isinstance(value, float) and type(value) is float:
        if not math.isfinite(value):
            raise AvsimValueError(f"{where}: {value} is not finite; JSON cannot hold it")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json_value(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise AvsimValueError(f"{where}: key {key!r} is not a string; JSON keys are strings")
            _check_json_value(item, f"{where}.{key}")
        return
    hint = " (use a list)" if isinstance(value, tuple) else " (convert it to int, float, str, bool, None, list or dict)"
    raise AvsimValueError(f"{where}: {type(value).__name__} does not round-trip through JSON{hint}")


def _rig_to_json(rig: CameraRig) -> dict[str, Any]:
    cameras = []
    for k, (name, camera) in enumerate(zip(rig.names, rig.cameras)):
        pose = rig.ego_SE3_camera[k]
        entry = {"name": name, **camera.to_dict()}
        entry["ego_SE3_camera"] = {
            "rotation": [[float(v) for v in row] for row in np.asarray(pose.rotation)],
            "translation_m": [float(v) for v in np.asarray(pose.translation)],
        }
        cameras.append(entry)
    return {"cameras": cameras}


def _tables(scenario: Scenario) -> dict[str, pl.DataFrame]:
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
    return pl.Series(name, [str(v) for v in np.asarray(values).tolist()], dtype=_STR)


def _f64_series(name: str, values: np.ndarray) -> pl.Series:
    return pl.Series(name, np.ascontiguousarray(values, dtype=np.float64), dtype=_F64)


def _ego_frame(ego: EgoTrajectory) -> pl.DataFrame:
    R = np.asarray(ego.world_SE3_ego.rotation, dtype=np.float64).reshape(-1, 3, 3)
    t = np.asarray(ego.world_SE3_ego.translation, dtype=np.float64).reshape(-1, 3)
    columns = [pl.Series("timestamp_ns", np.asarray(ego.timestamps_ns, dtype=np.int64), dtype=_I64)]
    columns += [_f64_series(c, t[:, i]) for i, c in enumerate(("tx_m", "ty_m", "tz_m"))]
    columns += [_f64_series(f"r{i}{j}", R[:, i, j]) for i in range(3) for j in range(3)]
    return pl.DataFrame(columns)


def _box_series(center_m: np.ndarray, size_m: np.ndarray, orientation: np.ndarray) -> list[pl.Series]:
    center_m = np.asarray(center_m, dtype=np.float64).reshape(-1, 3)
    size_m = np.asarray(size_m, dtype=np.float64).reshape(-1, 3)
    orientation = np.asarray(orientation, dtype=np.float64).reshape(-1, 4)
    out = [_f64_series(c, center_m[:, i]) for i, c in enumerate(("center_x_m", "center_y_m", "center_z_m"))]
    out += [_f64_series(c, size_m[:, i]) for i, c in enumerate(("length_m", "width_m", "height_m"))]
    out += [_f64_series(c, orientation[:, i]) for i, c in enumerate(_QUAT_COLUMNS)]
    return out


def _agents_frame(agents: AgentTracks) -> pl.DataFrame:
    return pl.DataFrame(
        [
            _str_series("track_id", agents.track_id),
            _str_series("source_class", agents.source_class),
            pl.Series("timestamp_ns", np.asarray(agents.timestamps_ns, dtype=np.int64), dtype=_I64),
            *_box_series(agents.center_m, agents.size_m, agents.orientation),
        ]
    )


def _lights_frame(lights: TrafficLightStates) -> pl.DataFrame:
    return pl.DataFrame(
        [
            _str_series("light_id", lights.light_id),
            pl.Series("timestamp_ns", np.asarray(lights.timestamps_ns, dtype=np.int64), dtype=_I64),
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
        pl.Series(f"{prefix}{c}", _split(np.ascontiguousarray(points_m[:, i]), offsets), dtype=_LIST_F64).cast(_LIST_F64)
        for i, c in enumerate(_XYZ_LIST)
    ]


def _polylines_frame(lines: Polylines | Polygons) -> pl.DataFrame:
    return pl.DataFrame([_str_series("id", lines.ids), *_xyz_lists("", lines.points_m, lines.offsets)])


def _vertex_attr(name: str, values: np.ndarray | None, offsets: np.ndarray, n: int) -> pl.Series:
    if values is None:
        return pl.Series(name, [None] * n, dtype=_LIST_STR)
    parts = _split(np.asarray(values), offsets)
    return pl.Series(name, [[str(v) for v in p.tolist()] for p in parts], dtype=_LIST_STR).cast(_LIST_STR)


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
def load_scenario(folder: str | Path, *, allow_empty_map: bool = False) -> Scenario:
    """Read and validate a scenario folder written by `save_scenario`.

    Every problem raises `AvsimInputError(file, field, reason)` with a one-line message: a
    missing or truncated file, a wrong schema version, NaN/inf values, non-unit quaternions,
    non-rotation matrices, timestamps that do not strictly increase, a camera with zero focal
    length, or (unless `allow_empty_map`) a map without any element.
    """
    folder = Path(folder)
    if not folder.exists():
        raise AvsimInputError(folder, "scenario", "not found")
    if not folder.is_dir():
        raise AvsimInputError(folder, "scenario", "not a folder (a scenario is a folder holding scenario.json)")
    header_path = folder / SCENARIO_JSON
    header = _read_header(header_path)
    rig = _read_rig(header_path, header["rig"])
    expected_rows = _read_table_index(header_path, header.get("tables"))
    frames = {name: _read_table(folder / name, expected_rows[name]) for name in TABLE_FILES}

    ego = _build(folder / EGO_FILE, "EgoTrajectory", lambda: _ego_from(folder / EGO_FILE, frames[EGO_FILE]))
    agents = _build(folder / AGENTS_FILE, "AgentTracks", lambda: _agents_from(folder / AGENTS_FILE, frames[AGENTS_FILE]))
    lights = _build(folder / LIGHTS_FILE, "TrafficLightStates", lambda: _lights_from(folder / LIGHTS_FILE, frames[LIGHTS_FILE]))
    elements = {}
    for element, (kind, _) in MAP_ELEMENTS.items():
        path = folder / map_file(element)
        elements[element] = _build(path, element, lambda path=path, kind=kind: _MAP_READERS[kind](path, frames[path.name]))
    hd_map = _build(folder, "map", lambda: HDMap(**elements))
    if hd_map.is_empty() and not allow_empty_map:
        raise AvsimInputError(folder, "map", "every map_*.parquet table is empty; a scenario needs a map")
    return _build(
        header_path,
        "scenario",
        lambda: Scenario(
            scenario_id=header["scenario_id"],
            rig=rig,
            ego=ego,
            agents=agents,
            map=hd_map,
            lights=lights,
            metadata=header["metadata"],
        ),
    )


def _build(path: Path, field: str, make: Callable[[], Any]) -> Any:
    """Run a core constructor; its AvsimValueError becomes an input error naming the file."""
    try:
        return make()
    except AvsimInputError:
        raise
    except AvsimValueError as exc:
        raise AvsimInputError(path, field, str(exc)) from exc


def _reject_constant(token: str) -> float:
    raise ValueError(f"{token} is not valid JSON")


def _read_header(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise AvsimInputError(path, "file", "missing (not an avsim scenario folder?)")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise AvsimInputError(path, "json", f"not UTF-8 text ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise AvsimInputError(path, "json", f"truncated or invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except ValueError as exc:
        raise AvsimInputError(path, "json", str(exc)) from exc
    if not isinstance(doc, dict):
        raise AvsimInputError(path, "json", f"top level must be an object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT_NAME:
        raise AvsimInputError(path, "format", f"expected {FORMAT_NAME!r}, got {doc.get('format')!r}")
    version = doc.get("schema_version")
    if type(version) is not int:
        raise AvsimInputError(path, "schema_version", f"must be an integer, got {version!r}")
    if version != SCHEMA_VERSION:
        newer = "a newer" if version > SCHEMA_VERSION else "an older"
        raise AvsimInputError(
            path, "schema_version", f"is {version}, written by {newer} avsim; this avsim reads schema {SCHEMA_VERSION} only"
        )
    for key, kind in (("scenario_id", str), ("rig", dict), ("metadata", dict)):
        if key not in doc:
            raise AvsimInputError(path, key, "missing")
        if not isinstance(doc[key], kind):
            raise AvsimInputError(path, key, f"must be a JSON {kind.__name__.replace('str', 'string').replace('dict', 'object')}")
    if not doc["scenario_id"]:
        raise AvsimInputError(path, "scenario_id", "is empty")
    return doc


def _json_number(path: Path, field: str, value: Any) -> float:
    if type(value) not in (int, float):
        raise AvsimInputError(path, field, f"must be a number, got {value!r}")
    if not math.isfinite(value):
        raise AvsimInputError(path, field, f"must be finite, got {value!r}")
    return float(value)


def _json_numbers(path: Path, field: str, value: Any, n: int) -> list[float]:
    if not isinstance(value, list) or len(value) != n:
        raise AvsimInputError(path, field, f"must be a list of {n} numbers, got {value!r}")
    return [_json_number(path, f"{field}[{i}]", v) for i, v in enumerate(value)]


def _json_int(path: Path, field: str, value: Any) -> int:
    if type(value) is not int or value <= 0:
        raise AvsimInputError(path, field, f"must be a positive integer, got {value!r}")
    return value


def _read_camera(path: Path, where: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Type-check one camera entry; returns the dict for `camera_from_dict`."""
    model = entry.get("model")
    if model not in ("pinhole", "ftheta"):
        raise AvsimInputError(path, f"{where}.model", f"must be 'pinhole' or 'ftheta', got {model!r}")
    d: dict[str, Any] = {"model": model}
    for key in ("width_px", "height_px"):
        d[key] = _json_int(path, f"{where}.{key}", entry.get(key))
    for key in ("cx_px", "cy_px"):
        d[key] = _json_number(path, f"{where}.{key}", entry.get(key))
    if model == "pinhole":
        for key in ("fx_px", "fy_px"):
            d[key] = _json_number(path, f"{where}.{key}", entry.get(key))
            if d[key] <= 0:
                raise AvsimInputError(path, f"{where}.{key}", f"focal length must be > 0, got {d[key]!r}")
        d["distortion"] = _json_numbers(path, f"{where}.distortion", entry.get("distortion"), 5)
    else:
        d["poly"] = _json_numbers(path, f"{where}.poly", entry.get("poly"), 6)
        if d["poly"][1] == 0.0:
            raise AvsimInputError(path, f"{where}.poly[1]", "zero focal length (the linear coefficient must not be 0)")
        if type(entry.get("is_backward_poly")) is not bool:
            raise AvsimInputError(path, f"{where}.is_backward_poly", f"must be true or false, got {entry.get('is_backward_poly')!r}")
        d["is_backward_poly"] = entry["is_backward_poly"]
        d["linear_cde"] = _json_numbers(path, f"{where}.linear_cde", entry.get("linear_cde"), 3)
    return d


def _read_pose(path: Path, where: str, value: Any) -> SE3:
    if not isinstance(value, dict):
        raise AvsimInputError(path, where, "must be an object with 'rotation' (3x3) and 'translation_m' (3)")
    rows = value.get("rotation")
    if not isinstance(rows, list) or len(rows) != 3:
        raise AvsimInputError(path, f"{where}.rotation", "must be a 3x3 list of numbers")
    R = np.array([_json_numbers(path, f"{where}.rotation[{i}]", r, 3) for i, r in enumerate(rows)])
    t = np.array(_json_numbers(path, f"{where}.translation_m", value.get("translation_m"), 3))
    _check_rotations(path, f"{where}.rotation", R[None], None)
    return SE3(R, t)


def _read_rig(path: Path, rig: dict[str, Any]) -> CameraRig:
    cameras_json = rig.get("cameras")
    if not isinstance(cameras_json, list) or not cameras_json:
        raise AvsimInputError(path, "rig.cameras", "must be a non-empty list of cameras")
    names, cameras, rotations, translations = [], [], [], []
    for k, entry in enumerate(cameras_json):
        where = f"rig.cameras[{k}]"
        if not isinstance(entry, dict):
            raise AvsimInputError(path, where, "must be an object")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise AvsimInputError(path, f"{where}.name", f"must be a non-empty string, got {name!r}")
        if name in names:
            raise AvsimInputError(path, f"{where}.name", f"duplicate camera name {name!r}")
        where = f"rig.cameras[{k}] ({name})"
        camera_dict = _read_camera(path, where, entry)
        cameras.append(_build(path, where, lambda d=camera_dict: camera_from_dict(d)))
        pose = _read_pose(path, f"{where}.ego_SE3_camera", entry.get("ego_SE3_camera"))
        names.append(name)
        rotations.append(pose.rotation)
        translations.append(pose.translation)
    return _build(
        path,
        "rig",
        lambda: CameraRig(tuple(names), tuple(cameras), SE3(np.stack(rotations), np.stack(translations))),
    )


def _read_table_index(path: Path, tables: Any) -> dict[str, int]:
    if not isinstance(tables, dict):
        raise AvsimInputError(path, "tables", "missing or not an object")
    rows = {}
    for name in TABLE_FILES:
        entry = tables.get(name)
        if not isinstance(entry, dict) or type(entry.get("rows")) is not int or entry["rows"] < 0:
            raise AvsimInputError(path, f"tables.{name}.rows", f"missing or not a non-negative integer, got {entry!r}")
        rows[name] = entry["rows"]
    unknown = sorted(set(tables) - set(TABLE_FILES))
    if unknown:
        raise AvsimInputError(path, "tables", f"unknown table {unknown[0]!r} for schema {SCHEMA_VERSION}")
    return rows


def _read_table(path: Path, expected_rows: int) -> pl.DataFrame:
    """Read one parquet table and check its columns, dtypes, nulls and row count."""
    if not path.is_file():
        raise AvsimInputError(path, "file", "missing")
    try:
        df = pl.read_parquet(path)
    except Exception as exc:  # polars raises ComputeError/OSError variants for damaged files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AvsimInputError(path, "file", f"unreadable parquet (truncated or corrupt): {first}") from exc
    columns = TABLE_COLUMNS[path.name]
    for name, dtype in columns.items():
        if name not in df.columns:
            raise AvsimInputError(path, name, "missing column")
        if df.schema[name] != dtype:
            raise AvsimInputError(path, name, f"has dtype {df.schema[name]}, expected {dtype}")
        if name in _NULLABLE:
            continue  # its reader (`_vertex_attr_from`) checks the nulls row by row
        if df[name].null_count():
            row = int(df[name].is_null().arg_max())
            raise AvsimInputError(path, name, f"row {row} is null")
        if dtype in (_LIST_F64, _LIST_STR) and df[name].explode(empty_as_null=False).null_count():
            raise AvsimInputError(path, name, "a list holds a null value")
    extra = [c for c in df.columns if c not in columns]
    if extra:
        raise AvsimInputError(path, extra[0], f"unexpected column (schema {SCHEMA_VERSION} has: {', '.join(columns)})")
    if df.height != expected_rows:
        raise AvsimInputError(path, "rows", f"has {df.height} rows, scenario.json says {expected_rows} (truncated or replaced?)")
    return df


# ---- value checks -------------------------------------------------------------------------
def _row_label(ids: np.ndarray | None, row: int, id_name: str = "id") -> str:
    return f"row {row}" if ids is None else f"row {row} ({id_name} {str(ids[row])!r})"


def _check_finite(path: Path, df: pl.DataFrame, ids: np.ndarray | None = None) -> None:
    for name, dtype in TABLE_COLUMNS[path.name].items():
        if dtype == _F64:
            values = df[name].to_numpy()
            bad = ~np.isfinite(values)
            if bad.any():
                row = int(np.argmax(bad))
                raise AvsimInputError(path, name, f"{_row_label(ids, row)} is {values[row]} (must be finite)")
        elif dtype == _LIST_F64:
            lengths = df[name].list.len().to_numpy().astype(np.int64)
            values = df[name].explode(empty_as_null=False).to_numpy()
            bad = ~np.isfinite(values)
            if bad.any():
                offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
                flat = int(np.argmax(bad))
                row = int(np.searchsorted(offsets, flat, side="right") - 1)
                raise AvsimInputError(
                    path, name, f"{_row_label(ids, row)} vertex {flat - offsets[row]} is {values[flat]} (must be finite)"
                )


def _check_unit_quats(path: Path, df: pl.DataFrame, ids: np.ndarray | None) -> np.ndarray:
    q = np.stack([df[c].to_numpy() for c in _QUAT_COLUMNS], axis=-1).astype(np.float64, copy=False).reshape(-1, 4)
    err = np.abs(np.linalg.norm(q, axis=-1) - 1.0)
    if (err > UNIT_QUAT_TOLERANCE).any():
        row = int(np.argmax(err > UNIT_QUAT_TOLERANCE))
        raise AvsimInputError(
            path, "qw..qz", f"{_row_label(ids, row)} is not a unit quaternion (norm {np.linalg.norm(q[row]):.6g})"
        )
    return q


def _check_rotations(path: Path, field: str, R: np.ndarray, ids: np.ndarray | None) -> None:
    err = np.abs(R @ np.swapaxes(R, -1, -2) - np.eye(3)).max(axis=(-2, -1)) if len(R) else np.zeros(0)
    det = np.linalg.det(R) if len(R) else np.zeros(0)
    bad = (err > ROTATION_TOLERANCE) | (det < 0)
    if bad.any():
        row = int(np.argmax(bad))
        raise AvsimInputError(
            path, field, f"{_row_label(ids, row)} is not a rotation matrix (|R R^T - I| = {err[row]:.2e}, det = {det[row]:.6g})"
        )


def _check_sorted_times(path: Path, ids: np.ndarray, times: np.ndarray, id_name: str) -> None:
    """Rows must be sorted by (id, timestamp) with strictly increasing time within each id."""
    if len(ids) < 2:
        return
    same = ids[1:] == ids[:-1]
    unordered = ids[1:] < ids[:-1]
    if unordered.any():
        row = int(np.argmax(unordered)) + 1
        raise AvsimInputError(path, id_name, f"{_row_label(ids, row, id_name)}: rows must be sorted by ({id_name}, timestamp_ns)")
    stuck = same & (times[1:] <= times[:-1])
    if stuck.any():
        row = int(np.argmax(stuck)) + 1
        raise AvsimInputError(
            path,
            "timestamp_ns",
            f"{_row_label(ids, row, id_name)}: not strictly increasing ({times[row]} after {times[row - 1]})",
        )


def _strings(df: pl.DataFrame, name: str) -> np.ndarray:
    return np.asarray(df[name].to_list(), dtype=str)


def _ego_from(path: Path, df: pl.DataFrame) -> EgoTrajectory:
    if df.height == 0:
        raise AvsimInputError(path, "rows", "no ego poses; a scenario needs at least one")
    _check_finite(path, df)
    t_ns = df["timestamp_ns"].to_numpy().astype(np.int64, copy=False)
    back = t_ns[1:] <= t_ns[:-1]  # compared, not np.diff: a difference of int64 ns can overflow
    if back.any():
        row = int(np.argmax(back)) + 1
        raise AvsimInputError(path, "timestamp_ns", f"row {row}: not strictly increasing ({t_ns[row]} after {t_ns[row - 1]})")
    R = np.stack([df[c].to_numpy() for c in _ROTATION_COLUMNS], axis=-1).reshape(-1, 3, 3)
    _check_rotations(path, "r00..r22", R, None)
    t = np.stack([df[c].to_numpy() for c in ("tx_m", "ty_m", "tz_m")], axis=-1)
    return EgoTrajectory(timestamps_ns=t_ns.copy(), world_SE3_ego=SE3(np.ascontiguousarray(R), t))


def _box_arrays(path: Path, df: pl.DataFrame, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    _check_finite(path, df, ids)
    center = np.stack([df[c].to_numpy() for c in ("center_x_m", "center_y_m", "center_z_m")], axis=-1).reshape(-1, 3)
    size = np.stack([df[c].to_numpy() for c in ("length_m", "width_m", "height_m")], axis=-1).reshape(-1, 3)
    not_positive = (size <= 0).any(axis=-1)
    if not_positive.any():
        row = int(np.argmax(not_positive))
        raise AvsimInputError(path, "length_m/width_m/height_m", f"{_row_label(ids, row)} has a size <= 0: {size[row].tolist()}")
    q = _check_unit_quats(path, df, ids)
    return center, size, q


def _agents_from(path: Path, df: pl.DataFrame) -> AgentTracks:
    track_id = _strings(df, "track_id")
    t_ns = df["timestamp_ns"].to_numpy().astype(np.int64, copy=False).copy()
    _check_sorted_times(path, track_id, t_ns, "track_id")
    center, size, q = _box_arrays(path, df, track_id)
    return AgentTracks(
        track_id=track_id,
        source_class=_strings(df, "source_class"),
        timestamps_ns=t_ns,
        center_m=center,
        size_m=size,
        orientation=q,
    )


def _lights_from(path: Path, df: pl.DataFrame) -> TrafficLightStates:
    light_id = _strings(df, "light_id")
    t_ns = df["timestamp_ns"].to_numpy().astype(np.int64, copy=False).copy()
    _check_sorted_times(path, light_id, t_ns, "light_id")
    state = _strings(df, "state")
    unknown = ~np.isin(state, np.array(LIGHT_STATES))
    if unknown.any():
        row = int(np.argmax(unknown))
        raise AvsimInputError(
            path, "state", f"{_row_label(light_id, row, 'light_id')} is {state[row]!r}, expected one of {', '.join(LIGHT_STATES)}"
        )
    return TrafficLightStates(light_id=light_id, timestamps_ns=t_ns, state=state)


def _ragged_points(path: Path, df: pl.DataFrame, prefix: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x/y/z list columns -> (points_m (M,3), offsets (K+1,)); the three lists must agree."""
    lengths = [df[f"{prefix}{c}"].list.len().to_numpy().astype(np.int64) for c in _XYZ_LIST]
    for c, other in zip(_XYZ_LIST[1:], lengths[1:]):
        differ = other != lengths[0]
        if differ.any():
            row = int(np.argmax(differ))
            raise AvsimInputError(
                path, f"{prefix}{c}", f"{_row_label(ids, row)} has {other[row]} values but {prefix}x_m has {lengths[0][row]}"
            )
    offsets = np.concatenate([[0], np.cumsum(lengths[0])]).astype(np.int64)
    points = np.stack(
        [df[f"{prefix}{c}"].explode(empty_as_null=False).to_numpy().astype(np.float64, copy=False) for c in _XYZ_LIST],
        axis=-1,
    ).reshape(-1, 3)
    return np.ascontiguousarray(points), offsets


def _polylines_from(path: Path, df: pl.DataFrame, cls: type = Polylines) -> Polylines | Polygons:
    ids = _strings(df, "id")
    _check_finite(path, df, ids)
    points, offsets = _ragged_points(path, df, "", ids)
    return cls(ids=ids, points_m=points, offsets=offsets)


def _vertex_attr_from(path: Path, df: pl.DataFrame, name: str, ids: np.ndarray, offsets: np.ndarray) -> np.ndarray | None:
    s = df[name]
    nulls = s.null_count()
    if nulls == len(s):
        return None
    if nulls:
        row = int(s.is_null().arg_max())
        raise AvsimInputError(path, name, f"{_row_label(ids, row)} is null but other rows have per-vertex values (all or none)")
    lengths = s.list.len().to_numpy().astype(np.int64)
    differ = lengths != np.diff(offsets)
    if differ.any():
        row = int(np.argmax(differ))
        raise AvsimInputError(path, name, f"{_row_label(ids, row)} has {lengths[row]} values for {np.diff(offsets)[row]} vertices")
    inner = s.explode(empty_as_null=False)
    if inner.null_count():
        raise AvsimInputError(path, name, "a list holds a null value")
    return np.asarray(inner.to_list(), dtype=str)


def _lane_lines_from(path: Path, df: pl.DataFrame) -> LaneLines:
    ids = _strings(df, "id")
    _check_finite(path, df, ids)
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
    _check_finite(path, df, ids)
    sides = {}
    for side in ("left", "right", "centre"):
        points, offsets = _ragged_points(path, df, f"{side}_", ids)
        sides[side] = Polylines(ids=_strings(df, f"{side}_id"), points_m=points, offsets=offsets)
    return Lanes(ids=ids, **sides)


def _cuboids_from(path: Path, df: pl.DataFrame) -> Cuboids:
    ids = _strings(df, "id")
    center, size, q = _box_arrays(path, df, ids)
    return Cuboids(ids=ids, center_m=center, size_m=size, orientation=q)


_MAP_READERS: dict[str, Callable[[Path, pl.DataFrame], Any]] = {
    "lane_lines": _lane_lines_from,
    "lanes": _lanes_from,
    "polylines": _polylines_from,
    "polygons": lambda path, df: _polylines_from(path, df, Polygons),
    "cuboids": _cuboids_from,
}


# ==========================================================================================
# comparison
# ==========================================================================================
def scenario_differences(a: Any, b: Any, where: str = "scenario", limit: int = 20) -> list[str]:
    """Where two scenarios (or any nested core values) differ, bit for bit; [] when identical.

    Arrays compare by shape, kind and exact values (NaN equals NaN); dataclasses field by field
    (fields with compare=False are skipped); dicts, lists and tuples element-wise.
    """
    out: list[str] = []
    _diff(a, b, where, out, limit)
    return out


def _diff(a: Any, b: Any, where: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        if a_arr.shape != b_arr.shape or a_arr.dtype.kind != b_arr.dtype.kind:
            out.append(f"{where}: {a_arr.dtype}{a_arr.shape} != {b_arr.dtype}{b_arr.shape}")
        elif not np.array_equal(a_arr, b_arr, equal_nan=a_arr.dtype.kind in "fc"):
            out.append(f"{where}: values differ")
        return
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        if type(a) is not type(b):
            out.append(f"{where}: {type(a).__name__} != {type(b).__name__}")
            return
        for f in dataclasses.fields(a):
            if f.compare:
                _diff(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}", out, limit)
        return
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if list(a) != list(b):
            out.append(f"{where}: keys {list(a)} != {list(b)}")
            return
        for key in a:
            _diff(a[key], b[key], f"{where}[{key!r}]", out, limit)
        return
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b):
        if len(a) != len(b):
            out.append(f"{where}: length {len(a)} != {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", out, limit)
        return
    if type(a) is not type(b) or (a != b and not (isinstance(a, float) and math.isnan(a) and math.isnan(b))):
        out.append(f"{where}: {a!r} != {b!r}")


__all__ = [
    "SCHEMA_VERSION",
    "FORMAT_NAME",
    "SCENARIO_JSON",
    "TABLE_FILES",
    "TABLE_COLUMNS",
    "MAP_ELEMENTS",
    "save_scenario",
    "check_output_folder",
    "load_scenario",
    "scenario_differences",
]
