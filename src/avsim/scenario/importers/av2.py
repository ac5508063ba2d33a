"""Argoverse 2 sensor logs (and motion-forecasting scenarios), read with polars.

Sensor log folder ``<log_id>/``:
- ``city_SE3_egovehicle.feather``: ego poses (quaternion + translation) in the city frame;
- ``annotations.feather``: 3-D cuboids at 10 Hz in the *ego* frame at their timestamp
  (``egovehicle_SE3_object``), with ``track_uuid`` and ``category``; moved to the city frame
  with the ego pose of the same timestamp;
- ``calibration/egovehicle_SE3_sensor.feather`` + ``calibration/intrinsics.feather``: the 7 ring
  cameras (pinhole, radial k1 k2 k3; camera frame is OpenCV RDF as in av2-api) -> the rig;
- ``map/log_map_archive_*.json``: lane segments (left/right boundaries with lane-mark types),
  pedestrian crossings (two edges), drivable areas.

Map mapping: each painted lane boundary becomes one lane line typed through `line_types`
(AV2 table); a boundary shared by two neighbouring lanes is emitted once. ``NONE`` boundaries are
unpainted and skipped. Lane segments -> lanes (rails + centre line = mean of the rails
resampled by arc length). Crossings -> crosswalk polygons. Drivable areas -> drivable-area
polygons, and their outlines -> road boundaries (AV2 has no separate curb layer; the outline of
the drivable surface is what the renderer draws as road boundary).

Forecasting scenario folder (``scenario_<id>.parquet`` + ``log_map_archive_<id>.json``):
tracks at 10 Hz with position and heading only; the ego is track ``AV``. Boxes get nominal
sizes per object type (`FORECASTING_BOX_SIZE_M`) and z from the nearest map vertex, as the
file has neither; both facts are recorded in the metadata.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.safe_files import file_kind, regular_file
from avsim.core.safe_json import read_json
from avsim.core.safe_parquet import TableLimits, read_frame
from avsim.scenario.importers.common import (
    MapBuilder,
    TrackBuilder,
    as_points,
    build_scenario,
    check_finite,
    check_increasing,
)
from avsim.scenario.importers.line_types import lane_line_type

RING_CAMERAS: tuple[str, ...] = (
    "ring_front_center", "ring_front_left", "ring_front_right", "ring_side_left",
    "ring_side_right", "ring_rear_left", "ring_rear_right",
)  # fmt: skip

if TYPE_CHECKING:
    import polars as pl

    from avsim.core.agents import AgentTracks
    from avsim.core.rig import CameraRig
    from avsim.core.transforms import SE3
    from avsim.scenario.types import Scenario

# Nominal box sizes (l, w, h) for forecasting tracks, which carry no sizes.
FORECASTING_BOX_SIZE_M: dict[str, tuple[float, float, float]] = {
    "vehicle": (4.5, 1.9, 1.6),
    "bus": (12.0, 2.6, 3.2),
    "pedestrian": (0.6, 0.6, 1.7),
    "cyclist": (1.8, 0.6, 1.7),
    "motorcyclist": (2.0, 0.8, 1.6),
    "riderless_bicycle": (1.8, 0.6, 1.1),
    "static": (1.0, 1.0, 1.0),
    "background": (1.0, 1.0, 1.0),
    "construction": (0.5, 0.5, 1.0),
    "unknown": (1.0, 1.0, 1.0),
}

MAX_FEATHER_BYTES = 1 << 30  # an AV2 log's annotations.feather: about 10 MB
MAX_SCENARIO_ROWS = 10_000_000  # rows of a motion-forecasting scenario table (the real one: 58 tracks x 110 steps)


def _read_feather(path: Path, columns: tuple[str, ...]) -> pl.DataFrame:
    import polars as pl

    if file_kind(path) == "missing":
        raise AvsimInputError(path, "file", "not found")
    regular_file(path, "file")  # a FIFO or a device is named, never opened
    if path.stat().st_size > MAX_FEATHER_BYTES:
        raise AvsimInputError(path, "file", f"{path.stat().st_size} bytes, more than the {MAX_FEATHER_BYTES} a feather table may have")
    try:
        df = pl.read_ipc(path)
    except Exception as exc:
        raise AvsimInputError(path, "file", f"unreadable feather file: {exc}") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise AvsimInputError(path, missing[0], f"column missing (have {', '.join(df.columns)})")
    return df


def _quat_pose(df: pl.DataFrame, path: Path, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(N,4) quaternions (w, x, y, z) and (N,3) translations from qw..tz_m columns, validated."""
    q = check_finite(df.select(["qw", "qx", "qy", "qz"]).to_numpy().astype(np.float64), path, f"{what}.q")
    t = check_finite(df.select(["tx_m", "ty_m", "tz_m"]).to_numpy().astype(np.float64), path, f"{what}.t")
    norm = np.linalg.norm(q, axis=1)
    if np.any(np.abs(norm - 1.0) > 1e-3):
        i = int(np.flatnonzero(np.abs(norm - 1.0) > 1e-3)[0])
        raise AvsimInputError(path, f"{what}.q", f"row {i}: quaternion norm {norm[i]:.6f} is not 1")
    return q / norm[:, None], t


def read_ego(log: Path) -> tuple[np.ndarray, SE3]:
    """Ego timestamps (T,) and world_SE3_ego from ``city_SE3_egovehicle.feather``."""
    from avsim.core.transforms import SE3

    path = log / "city_SE3_egovehicle.feather"
    df = _read_feather(path, ("timestamp_ns", "qw", "qx", "qy", "qz", "tx_m", "ty_m", "tz_m")).sort("timestamp_ns")
    t = df["timestamp_ns"].to_numpy().astype(np.int64)
    check_increasing(t, path, "timestamp_ns")
    q, trans = _quat_pose(df, path, "city_SE3_egovehicle")
    return t, SE3.from_quat(q, trans)


def read_rig(log: Path) -> CameraRig:
    """The 7 ring cameras from ``calibration/`` as a `CameraRig`."""
    import polars as pl

    from avsim.core.cameras import PinholeCamera
    from avsim.core.errors import AvsimValueError
    from avsim.core.rig import CameraRig
    from avsim.core.transforms import SE3

    calib = log / "calibration"
    ext_path, int_path = calib / "egovehicle_SE3_sensor.feather", calib / "intrinsics.feather"
    ext = _read_feather(ext_path, ("sensor_name", "qw", "qx", "qy", "qz", "tx_m", "ty_m", "tz_m"))
    intr = _read_feather(int_path, ("sensor_name", "fx_px", "fy_px", "cx_px", "cy_px", "k1", "k2", "k3", "height_px", "width_px"))
    ext_rows = {r["sensor_name"]: r for r in ext.iter_rows(named=True)}
    int_rows = {r["sensor_name"]: r for r in intr.iter_rows(named=True)}
    cameras, poses = [], []
    for name in RING_CAMERAS:
        if name not in ext_rows:
            raise AvsimInputError(ext_path, name, "ring camera extrinsics missing")
        if name not in int_rows:
            raise AvsimInputError(int_path, name, "ring camera intrinsics missing")
        r = int_rows[name]
        distortion = (float(r["k1"]), float(r["k2"]), 0.0, 0.0, float(r["k3"]))  # radial only in AV2
        try:
            camera = PinholeCamera(
                int(r["width_px"]), int(r["height_px"]), float(r["fx_px"]), float(r["fy_px"]),
                float(r["cx_px"]), float(r["cy_px"]), distortion=distortion,
            )  # fmt: skip
        except AvsimValueError as exc:
            raise AvsimInputError(int_path, name, str(exc)) from None
        cameras.append(camera)
        q, t = _quat_pose(pl.DataFrame([ext_rows[name]]), ext_path, name)
        poses.append(SE3.from_quat(q[0], t[0]))
    return CameraRig(RING_CAMERAS, tuple(cameras), SE3.stack(poses))


def read_annotations(log: Path, ego_t: np.ndarray, world_SE3_ego: SE3) -> AgentTracks:
    """Cuboids moved from the ego frame at their timestamp into the city frame."""
    from avsim.core.transforms import SE3

    path = log / "annotations.feather"
    cols = ("timestamp_ns", "track_uuid", "category", "length_m", "width_m", "height_m", "qw", "qx", "qy", "qz", "tx_m", "ty_m", "tz_m")
    df = _read_feather(path, cols)
    t = df["timestamp_ns"].to_numpy().astype(np.int64)
    idx = np.searchsorted(ego_t, t)
    ok = (idx < len(ego_t)) & (ego_t[np.minimum(idx, len(ego_t) - 1)] == t)
    if not ok.all():
        bad = int(t[~ok][0])
        raise AvsimInputError(path, "timestamp_ns", f"annotation time {bad} has no ego pose in city_SE3_egovehicle.feather")
    q, trans = _quat_pose(df, path, "egovehicle_SE3_object")
    size = check_finite(df.select(["length_m", "width_m", "height_m"]).to_numpy().astype(np.float64), path, "size")
    world_SE3_object = world_SE3_ego[idx].compose(SE3.from_quat(q, trans))
    builder = TrackBuilder()
    builder.add(
        df["track_uuid"].to_numpy().astype(str), df["category"].to_numpy().astype(str), t,
        world_SE3_object.translation, size, world_SE3_object.quat,
    )  # fmt: skip
    return builder.build(path)


def _xyz(points: list[dict], path: Path, what: str) -> np.ndarray:
    try:
        arr = [[p["x"], p["y"], p.get("z", 0.0)] for p in points]
    except (TypeError, KeyError) as exc:
        raise AvsimInputError(path, what, f"expected a list of {{x, y, z}} points: {exc}") from None
    return as_points(arr, path, what, min_points=1)


def _resample(polyline: np.ndarray, n: int) -> np.ndarray:
    """`n` points evenly spaced by arc length along `polyline`."""
    if len(polyline) == 1:
        return np.repeat(polyline, n, axis=0)
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(polyline, axis=0), axis=1))])
    if s[-1] <= 0:
        return np.repeat(polyline[:1], n, axis=0)
    target = np.linspace(0.0, s[-1], n)
    return np.stack([np.interp(target, s, polyline[:, k]) for k in range(3)], axis=1)


def _boundary_key(points: np.ndarray) -> tuple:
    """Direction-independent key of a polyline at 1 cm resolution (dedupe shared boundaries)."""
    fwd = tuple(np.round(points * 100).astype(np.int64).ravel().tolist())
    rev = tuple(np.round(points[::-1] * 100).astype(np.int64).ravel().tolist())
    return min(fwd, rev)


def read_vector_map(map_path: Path) -> MapBuilder:
    """Lane marks, lanes, crosswalks and drivable areas of an AV2 ``log_map_archive_*.json``."""
    data = read_json(map_path, "file")
    if not isinstance(data, dict):
        raise AvsimInputError(map_path, "file", "map JSON must be an object")
    for key in ("lane_segments", "pedestrian_crossings", "drivable_areas"):
        if not isinstance(data.get(key), dict):
            raise AvsimInputError(map_path, key, "missing or not an object")
    mb = MapBuilder()
    seen: set[tuple] = set()
    for lane_id in sorted(data["lane_segments"], key=str):
        seg = data["lane_segments"][lane_id]
        where = f"lane_segments[{lane_id}]"
        rails = {}
        for side in ("left", "right"):
            pts = _xyz(seg.get(f"{side}_lane_boundary"), map_path, f"{where}.{side}_lane_boundary")
            rails[side] = pts
            mark = str(seg.get(f"{side}_lane_mark_type", "UNKNOWN"))
            lane_type = lane_line_type("av2", mark)
            boundary = _boundary_key(pts)
            if lane_type is None or len(pts) < 2 or boundary in seen:
                continue
            seen.add(boundary)
            mb.add_lane_line(f"{lane_id}_{side}", pts, lane_type)
        n = max(len(rails["left"]), len(rails["right"]), 2)
        centre = (_resample(rails["left"], n) + _resample(rails["right"], n)) / 2.0
        mb.add_lane(str(lane_id), rails["left"], rails["right"], centre)
    for cid in sorted(data["pedestrian_crossings"], key=str):
        cw = data["pedestrian_crossings"][cid]
        e1 = _xyz(cw.get("edge1"), map_path, f"pedestrian_crossings[{cid}].edge1")
        e2 = _xyz(cw.get("edge2"), map_path, f"pedestrian_crossings[{cid}].edge2")
        mb.crosswalks.add(str(cid), np.concatenate([e1, e2[::-1]]))
    for aid in sorted(data["drivable_areas"], key=str):
        ring = _xyz(data["drivable_areas"][aid].get("area_boundary"), map_path, f"drivable_areas[{aid}].area_boundary")
        if len(ring) > 3 and np.allclose(ring[0], ring[-1]):
            ring = ring[:-1]
        if len(ring) < 3:
            continue
        mb.drivable_areas.add(str(aid), ring)
        mb.road_boundaries.add(f"drivable_area_{aid}", np.concatenate([ring, ring[:1]]))  # closed outline
    return mb


def _find_one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if not found:
        raise AvsimInputError(folder, pattern, "no file matches")
    return found[0]


def is_sensor_log(path: Path) -> bool:
    return (path / "city_SE3_egovehicle.feather").exists()


def is_forecasting_scenario(path: Path) -> bool:
    return any(path.glob("scenario_*.parquet"))


def load_av2_sensor_log(path: str | os.PathLike[str], rig_name: str | None = None) -> Scenario:
    """Convert an AV2 sensor log folder into a `Scenario` (rig from its calibration)."""
    from avsim.core.lights import TrafficLightStates
    from avsim.core.rig import named_rig

    log = Path(path)
    if not log.is_dir():
        raise AvsimInputError(log, "folder", "not an Argoverse 2 log folder")
    ego_t, world_SE3_ego = read_ego(log)
    agents = read_annotations(log, ego_t, world_SE3_ego)
    has_calibration = (log / "calibration" / "intrinsics.feather").exists()
    rig = named_rig(rig_name) if rig_name else read_rig(log) if has_calibration else named_rig("av2")
    map_path = _find_one(log / "map", "log_map_archive_*.json")
    metadata = {
        "source_format": "av2",
        "source_kind": "sensor_log",
        "log_id": log.name,
        "city": map_path.stem.rsplit("____", 1)[-1],
        "source_rate_hz": 10.0,
        "rig": rig_name or ("av2 calibration" if has_calibration else "av2"),
        "rig_source": "named default" if rig_name or not has_calibration else "calibration/*.feather (7 ring cameras)",
        "ego_orientation": "full",  # city_SE3_egovehicle quaternions, roll and pitch kept
    }
    first_sweep = int(agents.timestamps_ns.min()) if len(agents) else None  # the first annotated lidar sweep
    if first_sweep is not None:
        metadata["frame_origin"] = "the first annotated lidar sweep (annotations.feather timestamp_ns)"
    return build_scenario(
        log, scenario_id=log.name, rig=rig, ego_timestamps_ns=ego_t, world_SE3_ego=world_SE3_ego,
        agents=agents, hd_map=read_vector_map(map_path).build(), lights=TrafficLightStates.empty(), metadata=metadata,
        frame_origin_ns=first_sweep,
    )  # fmt: skip


def load_av2_forecasting(path: str | os.PathLike[str], rig_name: str | None = None) -> Scenario:
    """Convert an AV2 motion-forecasting scenario folder into a `Scenario` (nominal box sizes)."""
    from scipy.spatial import cKDTree

    from avsim.core.lights import TrafficLightStates
    from avsim.core.rig import named_rig
    from avsim.core.transforms import SE3, yaw_to_quat

    folder = Path(path)
    pq = _find_one(folder, "scenario_*.parquet")
    df = read_frame(pq, TableLimits(MAX_SCENARIO_ROWS, 1 << 30), root=folder)
    cols = ("track_id", "object_type", "timestep", "position_x", "position_y", "heading", "start_timestamp", "num_timestamps", "end_timestamp")
    for c in cols:
        if c not in df.columns:
            raise AvsimInputError(pq, c, "column missing")
    mb = read_vector_map(_find_one(folder, "log_map_archive_*.json"))
    start_ns, end_ns, steps = int(df["start_timestamp"][0]), int(df["end_timestamp"][0]), int(df["num_timestamps"][0])
    dt_ns = (end_ns - start_ns) // max(steps - 1, 1)
    t = start_ns + df["timestep"].to_numpy().astype(np.int64) * dt_ns
    xy = check_finite(df.select(["position_x", "position_y"]).to_numpy().astype(np.float64), pq, "position")
    heading = check_finite(df["heading"].to_numpy().astype(np.float64), pq, "heading")
    map_pts = np.concatenate([np.zeros((0, 3)), *mb.lane_left.points, *mb.lane_right.points])
    z = map_pts[cKDTree(map_pts[:, :2]).query(xy)[1], 2] if len(map_pts) else np.zeros(len(xy))
    ids = df["track_id"].to_numpy().astype(str)
    otype = df["object_type"].to_numpy().astype(str)
    is_ego = ids == "AV"
    if is_ego.sum() < 2:
        raise AvsimInputError(pq, "track_id", "the ego track 'AV' needs at least 2 steps")
    order = np.argsort(t[is_ego])
    ego_t = t[is_ego][order]
    ego_pose = SE3.from_yaw(heading[is_ego][order], np.column_stack([xy[is_ego], z[is_ego]])[order])
    size = np.array([FORECASTING_BOX_SIZE_M.get(o, FORECASTING_BOX_SIZE_M["unknown"]) for o in otype]).reshape(-1, 3)
    centre = np.column_stack([xy, z + size[:, 2] / 2.0])
    builder = TrackBuilder()
    keep = ~is_ego
    builder.add(ids[keep], otype[keep], t[keep], centre[keep], size[keep], yaw_to_quat(heading[keep]))
    scenario_id = str(df["scenario_id"][0]) if "scenario_id" in df.columns else folder.name
    rig_name = rig_name or "av2"
    metadata = {
        "source_format": "av2",
        "source_kind": "forecasting_scenario",
        "city": str(df["city"][0]) if "city" in df.columns else "",
        "source_rate_hz": round(1e9 / dt_ns, 3),
        "rig": rig_name,
        "rig_source": "named default (forecasting scenarios have no calibration)",
        "box_sizes": "nominal per object_type (the file has none)",
        "z": "nearest lane-boundary vertex height (the file is 2-D)",
        "ego_orientation": "yaw_only",  # the file has heading only: roll and pitch unknown (zero)
    }
    return build_scenario(
        pq, scenario_id=scenario_id, rig=named_rig(rig_name), ego_timestamps_ns=ego_t, world_SE3_ego=ego_pose,
        agents=builder.build(pq), hd_map=mb.build(), lights=TrafficLightStates.empty(), metadata=metadata,
    )  # fmt: skip


def load_av2(path: str | os.PathLike[str], rig_name: str | None = None) -> Scenario:
    """An AV2 sensor-log folder or motion-forecasting scenario folder -> `Scenario`."""
    path = Path(path)
    if path.is_dir() and is_sensor_log(path):
        return load_av2_sensor_log(path, rig_name)
    if path.is_dir() and is_forecasting_scenario(path):
        return load_av2_forecasting(path, rig_name)
    raise AvsimInputError(path, "folder", "neither an AV2 sensor log (city_SE3_egovehicle.feather) nor a forecasting scenario (scenario_*.parquet)")
