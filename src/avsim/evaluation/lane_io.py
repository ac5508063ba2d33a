"""Lane inputs for the OpenLane metrics: OpenLane JSON, parquet tables, scenario HD maps.

All readers return a `LaneSet` in OpenLane's ground frame (x right, y forward, z up, metres).

- OpenLane ground truth JSON (one file per frame): `lane_lines[*].xyz` (3, N) in the camera
  frame, `visibility` (N,), `category`; the camera `extrinsic` (4x4) converts them exactly as
  OpenLane's evaluation does (rotation re-expressed in the ground frame, x/y translation
  zeroed). Frame key: `file_path` (or the JSON file name).
- Prediction JSON (one file per frame, OpenLane's result format): `lane_lines[*].xyz` as
  (N, 3) points already in the ground frame, optional `category`; same frame key rule. A
  prediction document that carries an `extrinsic` is in the ground-truth layout (avsim's labels
  of another clip, `LABELS/openlane/<camera>`): it is read as ground truth is, and only its
  visible points are kept (what a detector that sees exactly the image reports); the points
  kept are then taken as fully visible, as the reference takes every prediction.
- Table (parquet/csv): `frame, lane, x_m, y_m, z_m` and optional `visibility`, `category`;
  rows of a lane in order.
- Scenario: lane lines of the HD map near the ego, in the ego frame, turned into the ground
  frame (x = -y_ego, y = x_ego, z = z_ego) with the origin below the front camera, each one
  near-to-far (reversed where the map holds it the other way: the metrics count a lane only
  when its first point is the near end, as OpenLane's evaluator does).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from avsim.core.errors import AvsimInputError
from avsim.core.safe_json import read_json
from avsim.core.safe_parquet import Column, TableLimits, check_frame
from avsim.core.shapes import check_shape
from avsim.evaluation.lanes import LaneSet
from avsim.maps.style import LANE_TYPE_TO_OPENLANE

LEFT_CURB, RIGHT_CURB = 20, 21
LANE_TABLE_LIMITS = TableLimits(20_000_000, 2 << 30)  # points of a lane table (a 20 s clip: about 600,000)
_R_VG = np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
_R_GC = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])
# Waymo camera axes (x forward, y left, z up) from OpenCV-style camera axes (x right, y down, z forward).
_CAM_REPR = np.linalg.inv(np.array([[0, 0, 1, 0], [-1, 0, 0, 0], [0, -1, 0, 0], [0, 0, 0, 1]], dtype=np.float64))


def openlane_ground_from_camera(extrinsic: np.ndarray) -> np.ndarray:
    """The 4x4 transform OpenLane's evaluation applies to camera-frame GT lanes."""
    e = np.array(extrinsic, dtype=np.float64)
    check_shape(e, (4, 4), "extrinsic")
    e[:3, :3] = np.linalg.inv(_R_VG) @ e[:3, :3] @ _R_VG @ _R_GC
    e[0:2, 3] = 0.0
    return e @ _CAM_REPR


def _ground_from_camera(f: Path, extrinsic: Any) -> np.ndarray:
    try:
        e = np.asarray(extrinsic, dtype=np.float64)
    except (TypeError, ValueError):
        e = np.zeros(0)
    if e.shape != (4, 4) or not np.isfinite(e).all():
        raise AvsimInputError(f, "extrinsic", "must be a 4x4 matrix of finite numbers")
    return openlane_ground_from_camera(e)


def _json_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(path.rglob("*.json"))
        if files:
            return files
    raise AvsimInputError(path, "path", "no OpenLane JSON files found")


def _xyz(value: Any, where: str, p: Path) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise AvsimInputError(p, where, "expected xyz as (3, N) numbers") from None
    if a.ndim != 2 or a.shape[0] != 3:
        raise AvsimInputError(p, where, f"expected xyz as (3, N), got {a.shape}")
    if not np.isfinite(a).all():
        raise AvsimInputError(p, where, "NaN or infinite values")
    return a


def _result_xyz(value: Any, where: str, p: Path) -> np.ndarray:
    """A result's (N, 3) ground-frame points, as (3, N)."""
    try:
        pts = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise AvsimInputError(p, where, "expected (N, 3) ground-frame points") from None
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise AvsimInputError(p, where, f"expected (N, 3) ground-frame points, got {pts.shape}")
    if not np.isfinite(pts).all():
        raise AvsimInputError(p, where, "NaN or infinite values")
    return pts.T


def read_openlane_json(path: str | os.PathLike[str], ground_truth: bool) -> LaneSet:
    """Lanes from one OpenLane JSON file or a folder of them (see module docstring)."""
    return read_openlane_documents(((f, read_json(f)) for f in _json_files(Path(path))), ground_truth)


def read_openlane_documents(docs: Iterable[tuple[Path, Any]], ground_truth: bool) -> LaneSet:
    """Lanes from OpenLane documents already read (file, document), as `read_openlane_json` reads each file.

    Args:
        docs: (the file it came from, named in errors and as the fallback frame key; the parsed JSON).
        ground_truth: GT documents ((3, N) camera-frame points and an extrinsic) or results ((N, 3) ground frame).

    Returns:
        The lanes in the ground frame.
    """
    frames, lanes, cats, vis = [], [], [], []
    for f, doc in docs:
        if not isinstance(doc, dict):
            raise AvsimInputError(f, "json", f"top level must be an object, got {type(doc).__name__}")
        key = str(doc.get("file_path", f.stem))
        T = None
        if ground_truth and "extrinsic" not in doc:
            raise AvsimInputError(f, "extrinsic", "missing (needed to bring GT lanes to the ground frame)")
        if "extrinsic" in doc:  # a ground-truth document (OpenLane's, avsim's labels), as GT or as predictions
            T = _ground_from_camera(f, doc["extrinsic"])
        lane_lines = doc.get("lane_lines", [])
        if not isinstance(lane_lines, list) or not all(isinstance(lane, dict) for lane in lane_lines):
            raise AvsimInputError(f, "lane_lines", "must be a list of objects")
        for i, lane in enumerate(lane_lines):
            where = f"lane_lines[{i}]"
            if T is not None:  # GT: (3, N) camera-frame points
                xyz = _xyz(lane.get("xyz"), f"{where}.xyz", f)
                xyz = (T @ np.vstack([xyz, np.ones((1, xyz.shape[1]))]))[:3]
            else:  # results: (N, 3) ground-frame points
                xyz = _result_xyz(lane.get("xyz"), f"{where}.xyz", f)
            try:
                v = np.asarray(lane.get("visibility") or np.ones(xyz.shape[1]), dtype=np.float64)
                category = int(lane.get("category", -1))
            except (TypeError, ValueError):
                raise AvsimInputError(f, where, "visibility must be numbers and category an integer") from None
            if v.shape != (xyz.shape[1],):
                raise AvsimInputError(f, f"{where}.visibility", f"expected {xyz.shape[1]} values")
            if not ground_truth:
                if T is not None:  # a GT-layout document as predictions: the part the image shows
                    xyz = xyz[:, v > 0.5]
                v = np.ones(xyz.shape[1])  # the reference ignores prediction visibility
            frames.append(key)
            lanes.append(xyz.T)
            cats.append(category)
            vis.append(v)
    return LaneSet.from_lists(frames, lanes, cats, vis)


def read_lane_table(path: str | os.PathLike[str]) -> LaneSet:
    """Lanes from a parquet/csv table with columns frame, lane, x_m, y_m, z_m[, visibility, category]."""
    from avsim.evaluation.detections import read_table

    p = Path(path)
    df = read_table(p, limits=LANE_TABLE_LIMITS)
    for col in ("frame", "lane", "x_m", "y_m", "z_m"):
        if col not in df.columns:
            raise AvsimInputError(p, col, "missing column (need frame, lane, x_m, y_m, z_m)")
    spec = {c: Column("float", low=-1e8, high=1e8) for c in ("x_m", "y_m", "z_m")}
    spec.update({c: s for c, s in (("visibility", Column("float", low=0.0, high=1.0)), ("category", Column("int", low=-1, high=1000)))
                 if c in df.columns})  # fmt: skip
    check_frame(df, p, spec)
    if df.height == 0:
        return LaneSet.from_lists([], [], [])
    df = df.with_row_index("_row")
    frame = df["frame"].to_numpy()
    lane = df["lane"].to_numpy()
    # Group rows by (frame, lane) keeping file order within a lane.
    keys = np.array([f"{a}\0{b}" for a, b in zip(frame, lane)])
    _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    order = np.lexsort((np.arange(len(keys)), first[inv]))
    inv_sorted = inv[order]
    starts = np.flatnonzero(np.r_[True, inv_sorted[1:] != inv_sorted[:-1]])
    offsets = np.r_[starts, len(order)].astype(np.int64)
    pts = np.column_stack([df[c].cast(pl.Float64).to_numpy() for c in ("x_m", "y_m", "z_m")])[order]
    vis = df["visibility"].cast(pl.Float64).to_numpy()[order] if "visibility" in df.columns else None
    cat_col = df["category"].cast(pl.Int64).to_numpy()[order] if "category" in df.columns else None
    cats = cat_col[starts] if cat_col is not None else np.full(len(starts), -1)
    if not np.isfinite(pts).all():
        raise AvsimInputError(p, "x_m/y_m/z_m", "NaN or infinite values")
    return LaneSet(frame[order][starts], cats, pts, offsets, vis)


def write_lane_table(lanes: LaneSet, path: str | os.PathLike[str]) -> None:
    from avsim.core.atomic import atomic_output_path

    idx = lanes.lane_index
    assert lanes.visibility is not None  # LaneSet.__post_init__ always sets an array
    df = pl.DataFrame({
        "frame": lanes.frame[idx], "lane": idx, "x_m": lanes.points_m[:, 0], "y_m": lanes.points_m[:, 1],
        "z_m": lanes.points_m[:, 2], "visibility": lanes.visibility.astype(np.float64), "category": lanes.category[idx],
    })
    with atomic_output_path(path) as tmp:
        df.write_parquet(tmp)


def _front_camera_origin(scenario: Any) -> np.ndarray:
    rig = scenario.rig
    for name in rig.names:
        if "front" in name and "tele" not in name:
            t = np.asarray(rig.extrinsic(name).translation, np.float64)
            return np.array([t[0], t[1], 0.0])
    return np.zeros(3)


def lanes_from_scenario(
    scenario: Any,
    timestamps_ns: np.ndarray | None = None,
    rate_hz: float = 10.0,
    radius_m: float = 150.0,
    origin: str = "front_camera",
    include_road_boundaries: bool = False,
) -> LaneSet:
    """Ground-truth lanes from a scenario's HD map lane lines, per frame, in the ground frame.

    Frame keys are the timestamps (ns). `origin` "front_camera" puts the ground-frame origin
    under the front camera (as OpenLane does), "ego" keeps the ego origin. Lane lines get
    OpenLane categories from their colour/style; road boundaries (optional) become curbs.
    """
    ts = scenario.frame_timestamps(rate_hz) if timestamps_ns is None else np.asarray(timestamps_ns, np.int64)
    o = _front_camera_origin(scenario) if origin == "front_camera" else np.zeros(3)
    world_SE3_ego = scenario.ego.pose_at(ts)
    ll = scenario.map.lane_lines
    types = ll.lane_types() if len(ll) else np.zeros(0, str)
    cats_all = np.array([LANE_TYPE_TO_OPENLANE.get(t, 0) for t in types], dtype=np.int64)
    sources: list[tuple[Any, np.ndarray | None, Any]] = [(ll.lines, cats_all, ll.lines.bounds_xy())]
    if include_road_boundaries:
        rb = scenario.map.road_boundaries
        sources.append((rb, None, rb.bounds_xy()))
    frames, lanes, cats = [], [], []
    for i, t in enumerate(ts):
        pose = world_SE3_ego[i]
        centre = np.asarray(pose.translation)[:2]
        ego_SE3_world = pose.inverse()
        for lines, cat, b in sources:  # b: (K, 4) min_x, min_y, max_x, max_y
            if len(lines) == 0:
                continue
            near = (b[:, 0] - radius_m <= centre[0]) & (b[:, 2] + radius_m >= centre[0]) & \
                   (b[:, 1] - radius_m <= centre[1]) & (b[:, 3] + radius_m >= centre[1])
            for k in np.flatnonzero(near):
                pts = ego_SE3_world.apply(lines[k]) - o
                g = np.column_stack([-pts[:, 1], pts[:, 0], pts[:, 2]])
                g = g[::-1] if g[-1, 1] < g[0, 1] else g  # near-to-far, as OpenLane GT and model outputs run
                frames.append(int(t))
                lanes.append(g)
                if cat is None:
                    cats.append(LEFT_CURB if np.median(g[:, 0]) < 0 else RIGHT_CURB)
                else:
                    cats.append(int(cat[k]))
    return LaneSet.from_lists(frames, lanes, cats)


def read_label_lanes(labels: Path, camera: str, ground_truth: bool) -> LaneSet:
    """One camera's OpenLane lanes of an avsim label folder, in either layout.

    Args:
        labels: the label folder (holds index.json).
        camera: the camera.
        ground_truth: read as ground truth (visibility kept).

    Returns:
        The lanes: from `openlane/<camera>/` when the standard files are there, else the OpenLane
        documents rebuilt from the compact tables.
    """
    import json

    from avsim.render.labels import compact, standard

    folder = Path(labels) / "openlane" / camera
    if folder.exists() or not compact.is_compact(Path(labels)):
        return read_openlane_json(folder, ground_truth)
    if camera not in compact.read_index(Path(labels)).get("cameras", []):
        raise AvsimInputError(folder, "camera", f"no camera {camera!r} in {Path(labels) / 'index.json'}")
    docs = ((folder / f"{f:06d}.json", json.loads(text)) for f, text in standard.openlane_documents(Path(labels), camera))
    return read_openlane_documents(docs, ground_truth)

