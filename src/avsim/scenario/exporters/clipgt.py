"""avsim scenario -> NVIDIA world-scenario parquet clip ("ClipGT"), for cosmos-transfer2.5's loader.

`export_clipgt` writes `clipgt_view(scenario)` (see `clipgt_view` for what changes on the way)
as ``<out>/<clip_id>.<table>.parquet``, one file per table of the documented schema
(``docs/world_scenario_parquet.md``), every column the document lists filled:

- ``egomotion_estimate``: one row per ego pose, FLU, the clip frame (first pose at the origin);
- ``calibration_estimate``: one row, the DriveWorks rig JSON of the rig (`clipgt_rig.rig_to_json`);
- ``obstacle``: one row per box (``trackline_id`` = avsim track id, ``category`` from
  `clipgt_view.clipgt_category`);
- ``lane``, ``lane_line``, ``road_boundary``, ``crosswalk``, ``pole``, ``road_marking``,
  ``wait_line``, ``traffic_light``, ``traffic_sign``: one row per element, its avsim id in
  ``key.map_id`` (written even when empty, so the schema is always there).

When the scenario's frame 0 (`Scenario.frame_origin_ns`) is not its first ego pose, the clip also
holds ``<clip_id>.camera_front_wide_120fov.json``, the frame times (microseconds, 30 fps from frame
0) that NVIDIA's loader then renders at instead of its own 30 fps from the first pose; avsim's
reader takes its first time as the frame origin.

The folder is written atomically (a temporary folder renamed into place); an existing `out` is
replaced only when it is empty or holds nothing but ClipGT tables (and that frame-time file).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.cameras import FThetaCamera
from avsim.core.errors import AvsimInputError
from avsim.core.rig import CameraRig, named_rig
from avsim.core.transforms import matrix_to_quat
from avsim.scenario.exporters import clipgt_nvidia as nvidia
from avsim.scenario.exporters.clipgt_view import clipgt_category, clipgt_view, to_microseconds
from avsim.scenario.importers.clipgt_rig import rig_to_json
from avsim.scenario.importers.clipgt_schema import (
    CALIBRATION,
    CAMERA_TIMESTAMPS_CAMERA,
    EGOMOTION,
    LOADER_FPS,
    MPS_PER_MPH,
    OBSTACLE,
    TABLES,
    UNREAD_TABLES,
    VERSION,
    camera_timestamps_path,
)  # fmt: skip

if TYPE_CHECKING:
    import pyarrow as pa

    from avsim.scenario.types import Scenario

WRITER_NAME = "avsim"  # egomotion_estimate.name and calibration_estimate.name
_TABLE_FILE = re.compile(r"^.+\.((" + "|".join(TABLES + UNREAD_TABLES) + r")\.parquet|" + CAMERA_TIMESTAMPS_CAMERA + r"\.json)$")


@dataclass(frozen=True)
class ClipGTExport:
    """What `export_clipgt` wrote.

    Attributes:
        folder: the clip folder.
        clip_id: the file-name prefix (the scenario id made file-name safe).
        rows: table name -> rows written.
        refitted: camera -> what its written lens is: ``"pinhole"`` (its f-theta equivalent) or
            ``"forward"`` (a forward polynomial refitted backward); cameras written as they are
            are not listed.
        avsim_error_px: refitted camera -> largest distance, over a grid of its pixels, between
            the source camera and the written lens as avsim reads it (the exact inverse).
        nvidia_error_px: every camera -> the same distance as NVIDIA's loader (v1.5.0 and later)
            and renderer project it (their own forward-polynomial fit, `clipgt_nvidia.loader_lens`).
        nvidia_min_release: the oldest loader release that places every camera as v1.5.0 does
            (within 1 px): ``v1.4.0`` unless a camera has a linear term that v1.4.0 ignores.
        nvidia_cameras_option: the ``--cameras`` value `generate_control_videos.py` needs (None:
            its default renders the clip).
        nvidia_resized: camera -> (width, height) scale to NVIDIA's 1280 x 720 for cameras that
            are not 16:9 (drawn as another field of view; ``--rig cosmos`` avoids it).
        frame_times_us: the frame times written for the loader (empty: frame 0 is the first pose).
    """

    folder: Path
    clip_id: str
    rows: dict[str, int]
    refitted: dict[str, str] = field(default_factory=dict)
    avsim_error_px: dict[str, float] = field(default_factory=dict)
    nvidia_error_px: dict[str, float] = field(default_factory=dict)
    nvidia_min_release: str = nvidia.V1_4_0.name
    nvidia_cameras_option: str | None = None
    nvidia_resized: dict[str, tuple[float, float]] = field(default_factory=dict)
    frame_times_us: tuple[int, ...] = ()


# ---- schemas -------------------------------------------------------------------------------
def _schemas() -> dict[str, pa.Schema]:
    import pyarrow as pa

    f64, s = pa.float64(), pa.string()
    vec = pa.struct([("x", f64), ("y", f64), ("z", f64)])
    quat = pa.struct([("x", f64), ("y", f64), ("z", f64), ("w", f64)])
    points, strings = pa.list_(vec), pa.list_(s)
    timed = pa.struct([("clip_id", s), ("timestamp_micros", pa.int64())])
    labelled = pa.struct([("clip_id", s), ("timestamp_micros", pa.int64()), ("label_class_id", s)])
    map_key = pa.struct([("clip_id", s), ("label_class_id", s), ("map_id", s), ("map_id_version", s)])
    box = pa.struct([("center", vec), ("dimensions", vec), ("orientation", quat), ("category", s)])
    shape = pa.struct([("category", s), ("location", points)])
    elements = {
        CALIBRATION: (timed, pa.struct([("name", s), ("rig_json", s)])),
        EGOMOTION: (timed, pa.struct([("name", s), ("location", vec), ("orientation", quat)])),
        OBSTACLE: (labelled, pa.struct([("trackline_id", s), ("center", vec), ("size", vec), ("orientation", quat), ("category", s)])),
        "lane": (map_key, pa.struct([
            ("left_rail", points), ("right_rail", points), ("left_edge_styles", strings), ("right_edge_styles", strings),
            ("left_edge_colors", strings), ("right_edge_colors", strings), ("lane_direction", s),
            ("speed_limit", f64), ("vehicle_types", strings)])),
        "lane_line": (map_key, pa.struct([("line_rail", points), ("styles", strings), ("colors", strings),
                                          ("left_driving_direction", s), ("right_driving_direction", s)])),
        "road_boundary": (map_key, shape), "crosswalk": (map_key, shape), "pole": (map_key, shape),
        "road_marking": (map_key, shape),
        "wait_line": (map_key, pa.struct([("category", s), ("location", points), ("is_implicit", pa.bool_()),
                                          ("intersection_subtype", s)])),
        "traffic_light": (map_key, box), "traffic_sign": (map_key, box),
    }  # fmt: skip
    return {t: pa.schema([("key", k), (t, e), ("version", pa.uint64())]) for t, (k, e) in elements.items()}


# ---- columns of each table ----------------------------------------------------------------
def _column(type_: pa.DataType, columns: dict[str, Any]) -> pa.StructArray:
    """A struct column of `type_` from one array per field (nested structs as dicts of arrays)."""
    import pyarrow as pa

    arrays = [_column(f.type, columns[f.name]) if isinstance(columns[f.name], dict) else columns[f.name] for f in type_]
    return pa.StructArray.from_arrays(arrays, fields=list(type_))


def _floats(values: Any) -> pa.Array:
    import pyarrow as pa

    return pa.array(np.asarray(values, dtype=np.float64))


def _xyz(points: np.ndarray) -> dict[str, pa.Array]:
    return {k: _floats(points[:, i]) for i, k in enumerate("xyz")}


def _xyzw(q_wxyz: np.ndarray) -> dict[str, pa.Array]:
    return {k: _floats(q_wxyz[:, i]) for i, k in zip((1, 2, 3, 0), "xyzw")}


def _repeat(value: Any, n: int, type_: pa.DataType) -> pa.Array:
    import pyarrow as pa

    return pa.array([value] * n, type=type_)


def _lists(values: pa.Array, offsets: np.ndarray) -> pa.ListArray:
    import pyarrow as pa

    return pa.ListArray.from_arrays(pa.array(np.asarray(offsets, dtype=np.int32)), values)


def _polylines(points_m: np.ndarray, offsets: np.ndarray) -> pa.ListArray:
    """One list of {x, y, z} per element."""
    import pyarrow as pa

    vec = pa.struct([(k, pa.float64()) for k in "xyz"])
    return _lists(_column(vec, _xyz(np.asarray(points_m).reshape(-1, 3))), offsets)


def _empty_lists(n: int) -> pa.ListArray:
    import pyarrow as pa

    return _lists(pa.array([], type=pa.string()), np.zeros(n + 1, np.int64))


def _ego_columns(view: Scenario) -> tuple[dict[str, Any], dict[str, Any]]:
    import pyarrow as pa

    n = len(view.ego)
    key = {"timestamp_micros": pa.array(to_microseconds(view.ego.timestamps_ns))}
    element = {"name": _repeat(WRITER_NAME, n, pa.string()), "location": _xyz(view.ego.world_SE3_ego.translation),
               "orientation": _xyzw(matrix_to_quat(view.ego.world_SE3_ego.rotation))}  # fmt: skip
    return key, element


def _calibration_columns(view: Scenario) -> tuple[dict[str, Any], dict[str, Any]]:
    import pyarrow as pa

    rig_json = json.dumps(rig_to_json(view.rig), indent=1)
    return {"timestamp_micros": pa.array([-1], pa.int64())}, {"name": pa.array([WRITER_NAME]), "rig_json": pa.array([rig_json])}


def _obstacle_columns(view: Scenario) -> tuple[dict[str, Any], dict[str, Any]]:
    import pyarrow as pa

    a = view.agents
    categories = {c: clipgt_category(c) for c in np.unique(a.source_class)}
    key = {"timestamp_micros": pa.array(to_microseconds(a.timestamps_ns), pa.int64()),
           "label_class_id": _repeat("", len(a), pa.string())}  # fmt: skip
    element = {"trackline_id": pa.array(a.track_id.tolist(), pa.string()), "center": _xyz(a.center_m),
               "size": _xyz(a.size_m), "orientation": _xyzw(a.orientation),
               "category": pa.array([categories[c] for c in a.source_class], pa.string())}  # fmt: skip
    return key, element


def _lane_line_columns(view: Scenario) -> dict[str, Any]:
    import pyarrow as pa

    ll = view.map.lane_lines
    lengths = np.diff(ll.lines.offsets)
    colors = ll.vertex_color if ll.vertex_color is not None else np.repeat(ll.color, lengths)
    styles = ll.vertex_style if ll.vertex_style is not None else np.repeat(ll.style, lengths)
    return {"line_rail": _polylines(ll.lines.points_m, ll.lines.offsets),
            "styles": _lists(pa.array(styles.tolist(), pa.string()), ll.lines.offsets),
            "colors": _lists(pa.array(colors.tolist(), pa.string()), ll.lines.offsets),
            "left_driving_direction": _repeat("", len(ll), pa.string()),
            "right_driving_direction": _repeat("", len(ll), pa.string())}  # fmt: skip


def _lane_columns(view: Scenario) -> dict[str, Any]:
    import pyarrow as pa

    lanes, limits = view.map.lanes, view.metadata.get("lane_speed_limits_mps", {})
    n = len(lanes)
    mph = [limits[i] / MPS_PER_MPH if i in limits else None for i in lanes.ids]
    return {"left_rail": _polylines(lanes.left.points_m, lanes.left.offsets),
            "right_rail": _polylines(lanes.right.points_m, lanes.right.offsets),
            **{k: _empty_lists(n) for k in ("left_edge_styles", "right_edge_styles", "left_edge_colors", "right_edge_colors",
                                            "vehicle_types")},
            "lane_direction": _repeat("", n, pa.string()), "speed_limit": pa.array(mph, pa.float64())}  # fmt: skip


_SHAPES = {"road_boundary": ("road_boundaries", "road_boundary"), "crosswalk": ("crosswalks", "PEDESTRIAN"),
           "pole": ("poles", "UNKNOWN"), "road_marking": ("road_markings", "UNKNOWN"), "wait_line": ("wait_lines", "UNKNOWN")}
_BOXES = {"traffic_light": ("traffic_lights", "traffic_light"), "traffic_sign": ("traffic_signs", "UNKNOWN")}  # fmt: skip


def _map_columns(view: Scenario, table: str) -> tuple[np.ndarray, dict[str, Any]]:
    """(element ids, element columns) of one map table."""
    import pyarrow as pa

    if table == "lane_line":
        return view.map.lane_lines.ids, _lane_line_columns(view)
    if table == "lane":
        return view.map.lanes.ids, _lane_columns(view)
    if table in _BOXES:
        name, category = _BOXES[table]
        b = getattr(view.map, name)
        return b.ids, {"center": _xyz(b.center_m), "dimensions": _xyz(b.size_m), "orientation": _xyzw(b.orientation),
                       "category": _repeat(category, len(b), pa.string())}  # fmt: skip
    name, category = _SHAPES[table]
    e = getattr(view.map, name)
    columns = {"category": _repeat(category, len(e), pa.string()), "location": _polylines(e.points_m, e.offsets)}
    if table == "wait_line":
        columns |= {"is_implicit": _repeat(False, len(e), pa.bool_()), "intersection_subtype": _repeat("", len(e), pa.string())}
    return e.ids, columns


def build_table(view: Scenario, clip_id: str, table: str) -> pa.Table:
    """One table of the clip, in the documented schema (`version` filled in).

    Args:
        view: a `clipgt_view` of a scenario.
        clip_id: the clip id written into every key.
        table: a table of `avsim.scenario.importers.clipgt_schema.TABLES`.

    Returns:
        The pyarrow table (one row per pose, box, element; one for the calibration).
    """
    import pyarrow as pa

    timed = {EGOMOTION: _ego_columns, CALIBRATION: _calibration_columns, OBSTACLE: _obstacle_columns}
    if table in timed:
        key, element = timed[table](view)
    else:
        ids, element = _map_columns(view, table)
        key = {"label_class_id": _repeat("", len(ids), pa.string()), "map_id": pa.array(ids.tolist(), pa.string()),
               "map_id_version": _repeat("", len(ids), pa.string())}  # fmt: skip
    schema = _schemas()[table]
    n = len(next(iter(key.values())))
    key["clip_id"] = _repeat(clip_id, n, pa.string())
    columns = [_column(schema.field("key").type, key), _column(schema.field(table).type, element),
               pa.array(np.full(n, VERSION, np.uint64))]  # fmt: skip
    return pa.Table.from_arrays(columns, schema=schema)


# ---- the clip ------------------------------------------------------------------------------
def check_clip_folder(out: Path) -> None:
    """Refuse an output folder that holds anything but ClipGT tables (it would be replaced).

    Args:
        out: the output folder.
    """
    if not out.exists():
        return
    if not out.is_dir():
        raise AvsimInputError(out, "output", "exists and is not a folder; refusing to replace it")
    foreign = [p.name for p in out.iterdir() if not (p.is_file() and _TABLE_FILE.match(p.name))]
    if foreign:
        raise AvsimInputError(out, "output", f"holds {foreign[0]!r}, which is not a ClipGT table; refusing to replace it")


def _lens_notes(source: CameraRig, names: tuple[str, ...]) -> dict[str, Any]:
    """`ClipGTExport`'s lens fields for the source rig (cameras named as written)."""
    rig = CameraRig(names, source.cameras, source.ego_SE3_camera)
    refitted = {n: ("pinhole" if c.model == "pinhole" else "forward") for n, c in zip(names, source.cameras)
                if not (isinstance(c, FThetaCamera) and c.is_backward_poly)}  # fmt: skip
    avsim = {n: e for n, e in nvidia.avsim_errors_px(rig).items() if n in refitted}
    return {"refitted": refitted, "avsim_error_px": avsim, "nvidia_error_px": nvidia.loader_errors_px(rig),
            "nvidia_min_release": nvidia.oldest_release(rig).name,
            "nvidia_cameras_option": nvidia.renderer_cameras_option(rig), "nvidia_resized": nvidia.resized_cameras(rig)}  # fmt: skip


def frame_times_us(view: Scenario) -> np.ndarray:
    """The frame times written for NVIDIA's loader: 30 fps from the view's frame 0, microseconds.

    Args:
        view: a `clipgt_view`.

    Returns:
        (K,) int64 microseconds; empty when frame 0 is the first ego pose (the loader's own frames).
    """
    if view.frame_origin_ns is None:
        return np.zeros(0, np.int64)
    return to_microseconds(view.frame_timestamps(float(LOADER_FPS)))


def export_clipgt(
    scenario: Scenario, out: str | os.PathLike[str], *, rig_name: str | None = None, clip_id: str | None = None
) -> ClipGTExport:
    """Write a scenario as a ClipGT clip folder.

    Args:
        scenario: any avsim scenario.
        out: the clip folder to write (absent, empty, or holding only ClipGT tables, which are replaced).
        rig_name: a named rig replacing the scenario's first (``cosmos`` gives NVIDIA's 7 cameras).
        clip_id: the clip id (file-name prefix, made file-name safe); default the scenario id.

    Returns:
        What was written.
    """
    import pyarrow.parquet as pq

    out = Path(out)
    check_clip_folder(out)
    view = clipgt_view(scenario if clip_id is None else scenario.replace(scenario_id=clip_id), rig_name)
    clip_id = view.scenario_id
    rows = {}
    times_us = frame_times_us(view)
    with atomic_output_path(out, is_dir=True) as tmp:
        for table in TABLES:
            data = build_table(view, clip_id, table)
            pq.write_table(data, tmp / f"{clip_id}.{table}.parquet", compression="zstd")
            rows[table] = data.num_rows
        if len(times_us):
            frames = [{"timestamp": int(t)} for t in times_us]
            camera_timestamps_path(tmp, clip_id).write_text(json.dumps(frames, separators=(",", ":")) + "\n")
    source = scenario.rig if rig_name is None else named_rig(rig_name)
    notes = _lens_notes(source, view.rig.names)
    return ClipGTExport(out, clip_id, rows, frame_times_us=tuple(int(t) for t in times_us), **notes)


__all__ = ["ClipGTExport", "WRITER_NAME", "build_table", "check_clip_folder", "export_clipgt", "frame_times_us"]
