"""NVIDIA world-scenario parquet clips ("ClipGT", cosmos-transfer2.5) -> `Scenario`.

Source: a folder of ``<clip_id>.<table>.parquet`` files (``FOLDER::clip_id`` picks a clip when
there are several). Schemas and conventions: `clipgt_schema` (cosmos-transfer2.5
``docs/world_scenario_parquet.md`` and its ``clipgt_loader.py``; the code wins where they
differ). What each table becomes:

- ``egomotion_estimate``: ``key.timestamp_micros`` + ``location`` / ``orientation`` (x, y, z, w)
  -> ego poses, kept at their own times and rate (the loader, and avsim's renderer, resample them
  to the render rate with linear positions and SLERP rotations from the first pose);
- ``calibration_estimate``: the first row's ``rig_json`` -> the camera rig (`clipgt_rig`);
- ``obstacle``: rows grouped by ``trackline_id`` -> agent tracks; as in the loader, ``labelstore:``
  tracks, rows with a zero quaternion and tracks left with fewer than two rows or with a NaN are
  dropped; the class is the loader's for the first observation's ``category``; a repeated time
  within a track keeps its first row; tracks are drawn at most 0.5 s beyond their ends;
- ``lane``: ``left_rail`` / ``right_rail`` -> lanes (centre = mean of the rails resampled by arc
  length), ``speed_limit`` (mph) -> ``metadata["lane_speed_limits_mps"]``;
- ``lane_line``: ``line_rail`` (or ``path``) with per-point ``colors`` / ``styles`` -> typed lane
  lines, the drawn type being the most frequent pair (the loader's rule; empty strings read as
  WHITE / SOLID_SINGLE, unknown names draw as OTHER);
- ``road_boundary``, ``wait_line``, ``pole`` (a one-point pole stands 3 m tall), ``crosswalk``,
  ``road_marking``: ``location`` -> polylines / polygons;
- ``traffic_light``, ``traffic_sign``: ``center``, ``dimensions`` (loader defaults 0.6 x 0.6 x 1.0
  and 0.8 x 0.3 x 0.8 m), ``orientation`` -> cuboids. The format has no light states: every light
  is unknown, as NVIDIA's renderer draws them.

Map elements with a NaN vertex or too few vertices are left out, as the loader does (counted in
``metadata["skipped"]``); element ids are ``key.map_id`` when every row has a distinct one, else
the loader's (``lane_line_<row>``, ...).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.agents import collapse_class
from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.clipgt_rig import rig_from_json
from avsim.scenario.importers.clipgt_schema import (
    CALIBRATION,
    DEFAULT_LINE_COLOR,
    DEFAULT_LINE_STYLE,
    EGOMOTION,
    MAP_TABLES,
    MAX_CAMERA_TIMESTAMPS_BYTES,
    MPS_PER_MPH,
    OBSTACLE,
    SKIPPED_TRACK_PREFIX,
    UNREAD_TABLES,
    camera_timestamps_path,
    loader_class,
    table_path,
)
from avsim.scenario.importers.clipgt_tables import Fields, count_rows, read_table, table_present
from avsim.scenario.importers.common import MapBuilder, TrackBuilder, build_scenario, split_selector

if TYPE_CHECKING:
    from avsim.core.agents import AgentTracks
    from avsim.core.transforms import SE3
    from avsim.scenario.types import Scenario

US_TO_NS = 1000
POLE_HEIGHT_M = 3.0  # the loader's height for a pole given by its base point only
DEFAULT_DIMENSIONS_M = {"traffic_light": (0.6, 0.6, 1.0), "traffic_sign": (0.8, 0.3, 0.8)}
_LOADER_IDS = {table: f"{table}_" for table in MAP_TABLES} | {"lane": ""}


def clip_ids(folder: Path) -> list[str]:
    """Clips in a folder: ids with both a calibration and an egomotion table, sorted.

    Args:
        folder: the folder.

    Returns:
        The clip ids (the folder's own name first when it is one, as the loader looks).
    """
    suffix = f".{CALIBRATION}.parquet"
    ids = sorted(p.name[: -len(suffix)] for p in folder.glob(f"*{suffix}"))
    ids = [c for c in ids if os.path.lexists(table_path(folder, c, EGOMOTION))]  # a FIFO or a link is named when read
    return sorted(ids, key=lambda c: c != folder.name)


def find_clip_id(folder: Path, selector: str | None) -> str:
    """The clip to read: `selector`, the folder's name, or the folder's only clip.

    Args:
        folder: the clip folder.
        selector: a clip id from ``FOLDER::clip_id``, or None.

    Returns:
        The clip id.
    """
    ids = clip_ids(folder)
    if selector is not None:
        if selector not in ids:
            raise AvsimInputError(folder, "clip", f"no clip {selector!r} (calibration and egomotion tables); found {ids}")
        return selector
    if not ids:
        raise AvsimInputError(folder, "clip", f"no <clip_id>.{CALIBRATION}.parquet with its .{EGOMOTION}.parquet")
    if ids[0] != folder.name and len(ids) > 1:
        raise AvsimInputError(folder, "clip", f"{len(ids)} clips; select one with FOLDER::clip_id")
    return ids[0]


# ---- ego, obstacles --------------------------------------------------------------------------
def _unit_quats(q_xyzw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(w, x, y, z) unit quaternions of (x, y, z, w) rows, and which rows had a usable norm."""
    norm = np.linalg.norm(q_xyzw, axis=-1)
    ok = np.isfinite(norm) & (norm > 1e-6)
    q = np.where(ok[:, None], q_xyzw / np.where(ok, norm, 1.0)[:, None], [0.0, 0.0, 0.0, 1.0])
    return q[:, [3, 0, 1, 2]], ok


def read_ego(path: Path) -> tuple[np.ndarray, SE3]:
    """Ego poses of an ``egomotion_estimate`` table, sorted by time.

    Args:
        path: the table.

    Returns:
        timestamps (T,) int64 ns and world_SE3_ego (T,).
    """
    from avsim.core.transforms import SE3

    f = Fields(read_table(path), path)
    t_us = f.ints("key.timestamp_micros")
    position = f.vectors("egomotion_estimate.location")
    q, ok = _unit_quats(f.vectors("egomotion_estimate.orientation", "xyzw"))
    if not len(t_us):
        raise AvsimInputError(path, EGOMOTION, "no rows (the clip needs ego poses)")
    bad = np.flatnonzero(~np.all(np.isfinite(position), axis=1) | ~ok)
    if bad.size:
        raise AvsimInputError(path, "egomotion_estimate", f"row {bad[0]}: NaN location or zero / NaN orientation")
    order = np.argsort(t_us, kind="stable")
    t_sorted = t_us[order]
    repeated = np.flatnonzero(t_sorted[1:] == t_sorted[:-1])
    if repeated.size:
        raise AvsimInputError(path, "key.timestamp_micros", f"time {t_sorted[repeated[0]]} us repeats")
    return t_sorted * US_TO_NS, SE3.from_quat(q[order], position[order])


def _track_rows(ids: np.ndarray, t_us: np.ndarray) -> list[np.ndarray]:
    """Row indices of each track, sorted by time (file order among equal times)."""
    order = np.lexsort((np.arange(len(ids)), t_us, ids))
    if not len(order):
        return []
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    return np.split(order, starts[1:])


def read_obstacles(path: Path) -> tuple[AgentTracks, dict[str, Any]]:
    """Agent tracks of an ``obstacle`` table, selected as the loader selects them.

    Args:
        path: the table.

    Returns:
        The tracks and notes (dropped tracks and rows, remapped categories).
    """
    f = Fields(read_table(path), path)
    ids = np.asarray(f.strings("obstacle.trackline_id"), dtype=str)
    t_us = f.ints("key.timestamp_micros")
    centre, size = f.vectors("obstacle.center"), f.vectors("obstacle.size")
    q_xyzw = f.vectors("obstacle.orientation", "xyzw")
    categories = np.asarray(f.strings("obstacle.category", "unknown"), dtype=str)
    q, q_ok = _unit_quats(q_xyzw)
    tracks = TrackBuilder()
    dropped = {"labelstore": 0, "short_or_nan": 0, "repeated_times": 0, "zero_quaternion": 0}
    remapped: dict[str, str] = {}
    for rows in _track_rows(ids, t_us):
        if ids[rows[0]].startswith(SKIPPED_TRACK_PREFIX):
            dropped["labelstore"] += 1
            continue
        dropped["zero_quaternion"] += int((~q_ok[rows] & ~np.isnan(q_xyzw[rows]).any(axis=1)).sum())
        keep = rows[q_ok[rows]]
        first = np.r_[True, t_us[keep][1:] != t_us[keep][:-1]]
        dropped["repeated_times"] += int((~first).sum())
        keep = keep[first]
        if len(keep) < 2 or np.isnan(q_xyzw[rows]).any() or not np.isfinite(centre[keep]).all() or not np.isfinite(size[keep]).all():
            dropped["short_or_nan"] += 1
            continue
        category = categories[rows[0]]
        cls = loader_class(category)
        source = category if collapse_class(category) == cls else cls
        if source != category:
            remapped[category] = cls
        tracks.add(ids[rows[0]], source, t_us[keep] * US_TO_NS, centre[keep], size[keep], q[keep])
    agents = tracks.build(path)
    notes = {
        "tracks_dropped": {k: dropped[k] for k in ("labelstore", "short_or_nan") if dropped[k]},
        "rows_dropped": {k: dropped[k] for k in ("repeated_times", "zero_quaternion") if dropped[k]}
        | ({"zero_size": tracks.dropped_unsized} if tracks.dropped_unsized else {}),
        "categories_remapped": remapped,
    }
    return agents, notes


# ---- map -------------------------------------------------------------------------------------
def _element_ids(f: Fields, table: str) -> list[str]:
    """``key.map_id`` when every row has a distinct non-empty one, else the loader's ids."""
    given = f.strings("key.map_id")
    if all(given) and len(set(given)) == len(given):
        return given
    return [f"{_LOADER_IDS[table]}{k}" for k in range(len(f))]


def _geometry(f: Fields, field: str) -> list[np.ndarray]:
    offsets, points = f.point_lists(field)
    return [points[offsets[k] : offsets[k + 1]] for k in range(len(offsets) - 1)]


def _usable(points: np.ndarray, min_points: int) -> bool:
    return len(points) >= min_points and bool(np.isfinite(points).all())


def _line_types(points: np.ndarray, colors: list[str], styles: list[str]) -> list[tuple[str, str]]:
    """Per-vertex (colour, style); the loader's single most frequent pair when the lists do not match the points."""
    pairs = [(c.upper() or DEFAULT_LINE_COLOR, s.upper() or DEFAULT_LINE_STYLE) for c, s in zip(colors, styles)]
    if len(colors) == len(styles) == len(points):
        return pairs
    if colors and styles:  # the loader zips the lists and takes the most frequent pair
        raw = Counter(zip(colors, styles)).most_common(1)[0][0]
        return [(raw[0].upper() or DEFAULT_LINE_COLOR, raw[1].upper() or DEFAULT_LINE_STYLE)] * len(points)
    return [(DEFAULT_LINE_COLOR, DEFAULT_LINE_STYLE)] * len(points)


def _read_lane_lines(mb: MapBuilder, f: Fields, skipped: Counter[str]) -> None:
    field = "lane_line.line_rail" if f.has("lane_line.line_rail") else "lane_line.path"
    colors, styles = f.string_lists("lane_line.colors"), f.string_lists("lane_line.styles")
    for eid, pts, c, s in zip(_element_ids(f, "lane_line"), _geometry(f, field), colors, styles):
        if not _usable(pts, 2):
            skipped["lane_line"] += 1
            continue
        mb.add_lane_line(eid, pts, _line_types(pts, c, s))  # type: ignore[arg-type]


def _read_lanes(mb: MapBuilder, f: Fields, skipped: Counter[str], speed_limits: dict[str, float]) -> None:
    from avsim.scenario.importers.av2 import _resample

    limits = f.floats("lane.speed_limit") if f.has("lane.speed_limit") else np.full(len(f), np.nan)
    for eid, left, right, mph in zip(_element_ids(f, "lane"), _geometry(f, "lane.left_rail"), _geometry(f, "lane.right_rail"), limits):
        if not (_usable(left, 2) and _usable(right, 2)):
            skipped["lane"] += 1
            continue
        n = max(len(left), len(right))
        mb.add_lane(eid, left, right, (_resample(left, n) + _resample(right, n)) / 2.0)
        if np.isfinite(mph) and mph > 0:
            speed_limits[eid] = float(mph) * MPS_PER_MPH


def _read_shapes(mb: MapBuilder, table: str, f: Fields, skipped: Counter[str]) -> None:
    target = {"road_boundary": mb.road_boundaries, "wait_line": mb.wait_lines, "pole": mb.poles,
              "crosswalk": mb.crosswalks, "road_marking": mb.road_markings}[table]  # fmt: skip
    min_points = 3 if table in ("crosswalk", "road_marking") else 2
    for eid, pts in zip(_element_ids(f, table), _geometry(f, f"{table}.location")):
        if table == "pole" and len(pts) == 1 and np.isfinite(pts).all():
            pts = np.concatenate([pts, pts + [0.0, 0.0, POLE_HEIGHT_M]])
        if not _usable(pts, min_points):
            skipped[table] += 1
            continue
        target.add(eid, pts)


def _read_cuboids(mb: MapBuilder, table: str, f: Fields, skipped: Counter[str]) -> None:
    centre = f.vectors(f"{table}.center")
    size = f.vectors(f"{table}.dimensions") if f.has(f"{table}.dimensions") else np.full((len(f), 3), np.nan)
    size = np.where(np.isnan(size).any(axis=1, keepdims=True), DEFAULT_DIMENSIONS_M[table], size)
    q_xyzw = f.vectors(f"{table}.orientation", "xyzw")
    q, ok = _unit_quats(q_xyzw)
    target = mb.traffic_lights if table == "traffic_light" else mb.traffic_signs
    for k, eid in enumerate(_element_ids(f, table)):
        if np.isnan(centre[k]).any() or np.isnan(q_xyzw[k]).any():
            skipped[table] += 1
            continue
        if not ok[k] or not np.isfinite(centre[k]).all() or not (size[k] > 0).all():
            raise AvsimInputError(f.path, f"{table}[{k}]", "zero orientation, infinite centre or non-positive dimensions")
        target.add(eid, centre[k], size[k], q[k])


def read_map(folder: Path, clip_id: str, metadata: dict[str, Any]) -> MapBuilder:
    """Every map table of a clip that exists, into one `MapBuilder` (notes go to `metadata`).

    Args:
        folder: the clip folder.
        clip_id: the clip id.
        metadata: the scenario metadata, extended with skipped counts and lane speed limits.

    Returns:
        The builder.
    """
    mb, skipped, speed_limits = MapBuilder(), Counter[str](), dict[str, float]()
    for table in MAP_TABLES:
        path = table_path(folder, clip_id, table)
        if not table_present(path):
            metadata["missing_tables"].append(table)
            continue
        f = Fields(read_table(path), path)
        if table == "lane_line":
            _read_lane_lines(mb, f, skipped)
        elif table == "lane":
            _read_lanes(mb, f, skipped, speed_limits)
        elif table in ("traffic_light", "traffic_sign"):
            _read_cuboids(mb, table, f, skipped)
        else:
            _read_shapes(mb, table, f, skipped)
    metadata["skipped"] = dict(sorted(skipped.items()))
    if speed_limits:
        metadata["lane_speed_limits_mps"] = speed_limits
    return mb


# ---- the clip --------------------------------------------------------------------------------
def _notes(folder: Path, clip_id: str) -> dict[str, Any]:
    unread = {t: count_rows(p) for t in UNREAD_TABLES if table_present(p := table_path(folder, clip_id, t))}
    return {
        "source_format": "clipgt", "clip_id": clip_id, "ego_orientation": "full",
        "world_frame": "as stored in the egomotion table (the loader does not move it)",
        "traffic_light_states": "not in the format: every light is unknown, as NVIDIA's renderer draws them",
        "missing_tables": [], "unread_tables": unread,
        "camera_timestamps_file": camera_timestamps_path(folder, clip_id).is_file(),
    }  # fmt: skip


def read_frame_origin(folder: Path, clip_id: str, ego_t_ns: np.ndarray, metadata: dict[str, Any]) -> int | None:
    """Frame 0 from the loader's frame-time file (``<clip_id>.camera_front_wide_120fov.json``), if any.

    NVIDIA's loader renders at those times when the file exists; its first time is frame 0. It
    becomes `Scenario.frame_origin_ns` when it lies within the ego poses (else it is only noted:
    the loader extrapolates poses there, avsim's frames start at the first pose).

    Args:
        folder: the clip folder.
        clip_id: the clip id.
        ego_t_ns: (N,) ego times, ns, increasing.
        metadata: the scenario metadata (``camera_timestamps_start_us`` is added).

    Returns:
        The frame origin in ns, or None.
    """
    from avsim.core.safe_json import read_json

    path = camera_timestamps_path(folder, clip_id)
    if not path.is_file():
        return None
    frames = read_json(path, "frames", max_bytes=MAX_CAMERA_TIMESTAMPS_BYTES)
    if not isinstance(frames, list) or not frames or not isinstance(frames[0], dict):
        raise AvsimInputError(path, "frames", "expected a non-empty list of {\"timestamp\": microseconds}")
    first = frames[0].get("timestamp")
    if isinstance(first, bool) or not isinstance(first, int):
        raise AvsimInputError(path, "[0].timestamp", f"expected integer microseconds, got {first!r}")
    metadata["camera_timestamps_start_us"] = first
    origin_ns = first * US_TO_NS
    return origin_ns if int(ego_t_ns[0]) <= origin_ns <= int(ego_t_ns[-1]) else None


def load_clipgt(src: str | os.PathLike[str], rig_name: str | None = None) -> Scenario:
    """Convert one ClipGT clip (``FOLDER`` or ``FOLDER::clip_id``) into a `Scenario`.

    Args:
        src: the clip folder, optionally with ``::clip_id``.
        rig_name: a named rig replacing the clip's calibration (None: the clip's cameras).

    Returns:
        The scenario (id = the clip id).
    """
    from avsim.core.lights import TrafficLightStates
    from avsim.core.rig import named_rig

    folder, selector = split_selector(src)
    if not folder.is_dir():
        raise AvsimInputError(folder, "source", "not found or not a folder")
    clip_id = find_clip_id(folder, selector)
    metadata = _notes(folder, clip_id)
    ego_t, world_SE3_ego = read_ego(table_path(folder, clip_id, EGOMOTION))
    metadata["source_rate_hz"] = round(float(1e9 / np.median(np.diff(ego_t))), 3) if len(ego_t) > 1 else 0.0
    calibration = table_path(folder, clip_id, CALIBRATION)
    rig_json = Fields(read_table(calibration), calibration).strings("calibration_estimate.rig_json")
    if not rig_json:
        raise AvsimInputError(calibration, "calibration_estimate", "no rows")
    rig, rig_notes = rig_from_json(rig_json[0], calibration)
    metadata.update(camera_models=rig_notes["models"], cameras_skipped=rig_notes["skipped"],
                    camera_corrections_ignored=rig_notes["corrections_ignored"])  # fmt: skip
    if rig_name is not None:
        rig, metadata["rig"] = named_rig(rig_name), rig_name
    obstacles = table_path(folder, clip_id, OBSTACLE)
    if table_present(obstacles):
        agents, track_notes = read_obstacles(obstacles)
        metadata.update(track_notes)
    else:
        from avsim.core.agents import AgentTracks

        agents = AgentTracks.empty()
        metadata["missing_tables"].append(OBSTACLE)
    hd_map = read_map(folder, clip_id, metadata).build()
    origin_ns = read_frame_origin(folder, clip_id, ego_t, metadata)
    return build_scenario(
        folder, scenario_id=clip_id, rig=rig, ego_timestamps_ns=ego_t, world_SE3_ego=world_SE3_ego,
        agents=agents, hd_map=hd_map, lights=TrafficLightStates.empty(), metadata=metadata, frame_origin_ns=origin_ns,
    )  # fmt: skip


__all__ = ["clip_ids", "find_clip_id", "load_clipgt", "read_ego", "read_frame_origin", "read_map", "read_obstacles"]
