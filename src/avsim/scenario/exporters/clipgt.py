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

The folder is written atomically (a temporary folder renamed into place); an existing `out` is
replaced only when it is empty or holds nothing but ClipGT tables.
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
from avsim.core.cameras import PinholeCamera
from avsim.core.errors import AvsimInputError
from avsim.core.transforms import matrix_to_quat
from avsim.scenario.exporters.clipgt_view import clipgt_category, clipgt_view, to_microseconds
from avsim.scenario.importers.clipgt_rig import ftheta_equivalent, rig_to_json
from avsim.scenario.importers.clipgt_schema import (
    CALIBRATION,
    EGOMOTION,
    MPS_PER_MPH,
    OBSTACLE,
    TABLES,
    UNREAD_TABLES,
    VERSION,
)  # fmt: skip

if TYPE_CHECKING:
    import pyarrow as pa

    from avsim.scenario.types import Scenario

WRITER_NAME = "avsim"  # egomotion_estimate.name and calibration_estimate.name
_TABLE_FILE = re.compile(r"^.+\.(" + "|".join(TABLES + UNREAD_TABLES) + r")\.parquet$")


@dataclass(frozen=True)
class ClipGTExport:
    """What `export_clipgt` wrote.

    Attributes:
        folder: the clip folder.
        clip_id: the file-name prefix (the scenario id made file-name safe).
        rows: table name -> rows written.
        pinhole_max_error_px: pinhole camera -> largest distance, over a grid of its pixels,
            between the pinhole and its f-theta equivalent (what NVIDIA's loader renders).
    """

    folder: Path
    clip_id: str
    rows: dict[str, int]
    pinhole_max_error_px: dict[str, float] = field(default_factory=dict)


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


def _xyz(p: np.ndarray) -> dict[str, float]:
    return {"x": float(p[0]), "y": float(p[1]), "z": float(p[2])}


def _xyzw(q_wxyz: np.ndarray) -> dict[str, float]:
    return {"x": float(q_wxyz[1]), "y": float(q_wxyz[2]), "z": float(q_wxyz[3]), "w": float(q_wxyz[0])}


def _points(p: np.ndarray) -> list[dict[str, float]]:
    return [_xyz(v) for v in p]


# ---- rows of each table --------------------------------------------------------------------
def _ego_rows(view: Scenario, clip_id: str) -> list[dict[str, Any]]:
    t_us = to_microseconds(view.ego.timestamps_ns)
    q = matrix_to_quat(view.ego.world_SE3_ego.rotation)
    return [
        {"key": {"clip_id": clip_id, "timestamp_micros": int(t)},
         "egomotion_estimate": {"name": WRITER_NAME, "location": _xyz(p), "orientation": _xyzw(qk)}}
        for t, p, qk in zip(t_us, view.ego.world_SE3_ego.translation, q)
    ]  # fmt: skip


def _calibration_rows(view: Scenario, clip_id: str) -> list[dict[str, Any]]:
    rig_json = json.dumps(rig_to_json(view.rig), indent=1)
    return [{"key": {"clip_id": clip_id, "timestamp_micros": -1},
             "calibration_estimate": {"name": WRITER_NAME, "rig_json": rig_json}}]  # fmt: skip


def _obstacle_rows(view: Scenario, clip_id: str) -> list[dict[str, Any]]:
    a = view.agents
    categories = {c: clipgt_category(c) for c in np.unique(a.source_class)}
    return [
        {"key": {"clip_id": clip_id, "timestamp_micros": int(t), "label_class_id": ""},
         "obstacle": {"trackline_id": str(i), "center": _xyz(c), "size": _xyz(s), "orientation": _xyzw(q),
                      "category": categories[k]}}
        for i, k, t, c, s, q in zip(a.track_id, a.source_class, to_microseconds(a.timestamps_ns), a.center_m,
                                    a.size_m, a.orientation)
    ]  # fmt: skip


def _map_key(clip_id: str, element_id: str) -> dict[str, str]:
    return {"clip_id": clip_id, "label_class_id": "", "map_id": str(element_id), "map_id_version": ""}


def _lane_line_rows(view: Scenario, clip_id: str) -> list[dict[str, Any]]:
    ll = view.map.lane_lines
    rows = []
    for k, eid in enumerate(ll.ids):
        s = slice(ll.lines.offsets[k], ll.lines.offsets[k + 1])
        n = s.stop - s.start
        colors = list(ll.vertex_color[s]) if ll.vertex_color is not None else [ll.color[k]] * n
        styles = list(ll.vertex_style[s]) if ll.vertex_style is not None else [ll.style[k]] * n
        rows.append({"key": _map_key(clip_id, eid), "lane_line": {
            "line_rail": _points(ll.lines[k]), "styles": [str(v) for v in styles], "colors": [str(v) for v in colors],
            "left_driving_direction": "", "right_driving_direction": ""}})  # fmt: skip
    return rows


def _lane_rows(view: Scenario, clip_id: str) -> list[dict[str, Any]]:
    lanes, limits = view.map.lanes, view.metadata.get("lane_speed_limits_mps", {})
    return [
        {"key": _map_key(clip_id, eid), "lane": {
            "left_rail": _points(lanes.left[k]), "right_rail": _points(lanes.right[k]),
            "left_edge_styles": [], "right_edge_styles": [], "left_edge_colors": [], "right_edge_colors": [],
            "lane_direction": "", "speed_limit": limits[eid] / MPS_PER_MPH if eid in limits else None,
            "vehicle_types": []}}
        for k, eid in enumerate(lanes.ids)
    ]  # fmt: skip


_SHAPES = {"road_boundary": ("road_boundaries", "road_boundary"), "crosswalk": ("crosswalks", "PEDESTRIAN"),
           "pole": ("poles", "UNKNOWN"), "road_marking": ("road_markings", "UNKNOWN"), "wait_line": ("wait_lines", "UNKNOWN")}
_BOXES = {"traffic_light": ("traffic_lights", "traffic_light"), "traffic_sign": ("traffic_signs", "UNKNOWN")}  # fmt: skip


def _map_rows(view: Scenario, clip_id: str, table: str) -> list[dict[str, Any]]:
    if table == "lane_line":
        return _lane_line_rows(view, clip_id)
    if table == "lane":
        return _lane_rows(view, clip_id)
    if table in _BOXES:
        name, category = _BOXES[table]
        b = getattr(view.map, name)
        return [{"key": _map_key(clip_id, eid), table: {"center": _xyz(b.center_m[k]), "dimensions": _xyz(b.size_m[k]),
                 "orientation": _xyzw(b.orientation[k]), "category": category}} for k, eid in enumerate(b.ids)]  # fmt: skip
    name, category = _SHAPES[table]
    elements = getattr(view.map, name)
    extra = {"is_implicit": False, "intersection_subtype": ""} if table == "wait_line" else {}
    return [{"key": _map_key(clip_id, eid), table: {"category": category, "location": _points(elements[k]), **extra}}
            for k, eid in enumerate(elements.ids)]  # fmt: skip


def table_rows(view: Scenario, clip_id: str, table: str) -> list[dict[str, Any]]:
    """The rows of one table (dicts in the table's schema, ``version`` filled in).

    Args:
        view: a `clipgt_view` of a scenario.
        clip_id: the clip id written into every key.
        table: a table of `avsim.scenario.importers.clipgt_schema.TABLES`.

    Returns:
        One dict per row.
    """
    writers = {EGOMOTION: _ego_rows, CALIBRATION: _calibration_rows, OBSTACLE: _obstacle_rows}
    rows = writers[table](view, clip_id) if table in writers else _map_rows(view, clip_id, table)
    for row in rows:
        row["version"] = VERSION
    return rows


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


def _pinhole_errors(view: Scenario) -> dict[str, float]:
    """Largest pixel distance between each pinhole camera and its f-theta equivalent (33 x 33 grid)."""
    out = {}
    for name, cam in zip(view.rig.names, view.rig.cameras):
        if isinstance(cam, PinholeCamera):
            u, v = np.meshgrid(np.linspace(0, cam.width_px - 1, 33), np.linspace(0, cam.height_px - 1, 33))
            uv = np.stack([u.ravel(), v.ravel()], -1)
            back, _, _ = ftheta_equivalent(cam).project(cam.pixel_to_ray(uv))
            out[name] = float(np.linalg.norm(back - uv, axis=-1).max())
    return out


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
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out)
    check_clip_folder(out)
    view = clipgt_view(scenario if clip_id is None else scenario.replace(scenario_id=clip_id), rig_name)
    clip_id = view.scenario_id
    schemas, rows = _schemas(), {}
    with atomic_output_path(out, is_dir=True) as tmp:
        for table in TABLES:
            data = table_rows(view, clip_id, table)
            pq.write_table(pa.Table.from_pylist(data, schema=schemas[table]), tmp / f"{clip_id}.{table}.parquet", compression="zstd")
            rows[table] = len(data)
    return ClipGTExport(out, clip_id, rows, _pinhole_errors(view))


__all__ = ["ClipGTExport", "WRITER_NAME", "check_clip_folder", "export_clipgt", "table_rows"]
