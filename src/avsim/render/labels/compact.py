"""Compact label folders: a clip's labels as four parquet tables (zstd) beside `index.json` (docs/labels.md).

The standard files repeat what changes little: OpenLane writes every map lane line again in every
camera-frame's camera coordinates (two thirds of the bytes), COCO and `boxes3d.json` spell every
float as text. A compact folder stores

- `boxes3d.parquet`: one row per (frame, agent): the box in the world and ego frames, velocities,
  class names, nuScenes attribute and the cameras showing it, float64 (the numbers `boxes3d.json`
  is written from);
- `annotations.parquet`: one row per COCO annotation of every camera: the COCO fields (`bbox`,
  `area`, RLE `counts`) and the extras as float64 (the values the COCO files hold);
- `lanes.parquet`: the map's lane lines within `LANE_RADIUS_M` of any labelled ego pose, once, in
  the world frame (float64: the OpenLane documents are rebuilt byte for byte);
- `camera_poses.parquet`: each camera-frame's ego_SE3_camera (float64; the camera at its capture
  time in the ego frame of the frame time), with `index.json["camera_models"]` (each camera at its
  image size) and `index.json["frames"][*]["world_SE3_ego"]`.

`avsim.render.labels.standard` writes the standard files back from them, byte for byte the files
`--label-files standard` writes (layout version 3; version 2 stored the floats as float32).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from avsim.core import label_folders
from avsim.core.atomic import atomic_output_path
from avsim.core.cameras import Camera, camera_from_dict
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.typing import NDArrayFloat
from avsim.render.labels.boxes import FrameBoxes3D
from avsim.render.labels.compact_tables import (
    ANNOTATION_ARRAYS,
    ANNOTATION_SCALARS,
    ANNOTATIONS,
    BOXES3D,
    CAMERA_POSES,
    COMPACT_FILES,
    LANES,
    has_table,
    read_table,
)
from avsim.render.labels.lanes import LaneTable, lane_table, near_lines
from avsim.render.labels.records import (
    ANNOTATION_DECIMALS,
    ANNOTATION_FLOATS,
    LANE_RADIUS_M,
    NUSCENES_NAME,
    ImageAnnotations,
    encoded_records,
)
from avsim.scenario import Scenario

DECIMALS = dict(zip(ANNOTATION_FLOATS, ANNOTATION_DECIMALS))  # as the standard COCO files round them
BOX_ARRAYS = {"center_ego_m": 3, "size_lwh_m": 3, "rotation_ego_wxyz": 4, "velocity_ego_mps": 3, "center_world_m": 3,
              "rotation_world_wxyz": 4, "velocity_world_mps": 3}  # fmt: skip


# zstd level of the tables. On the sample's 4 s x 7 cameras at 1280x720: level 19 took 1.48 s of CPU for annotations.parquet
# (about 1.8 ms per camera-frame on a loaded machine, 8 points of the labels' CPU overhead) and 0.27 s for boxes3d.parquet; level 9 takes 0.07 s
# and 0.015 s for 6.3 % and 5.4 % more bytes (docs/labels.md, "Compact layout" and "Cost").
COMPRESSION_LEVEL = 9


def _write(df: pl.DataFrame, path: Path) -> None:
    with atomic_output_path(path) as tmp:
        df.write_parquet(tmp, compression="zstd", compression_level=COMPRESSION_LEVEL, statistics=False)


def _f64(rows: list[Any] | np.ndarray, n: int) -> pl.Series:
    a = np.asarray(rows, np.float64).reshape(-1, n)
    return pl.Series(a, dtype=pl.Array(pl.Float64, n))


ANNOTATION_COLUMNS = ("camera", "image_id", "track_id", "source_class", "category_id", "bbox", "area", "counts", "visible_px",
                      "unoccluded_px", *ANNOTATION_ARRAYS, *ANNOTATION_SCALARS)  # fmt: skip (the table's columns, in order)


def annotations_frame(camera: str, records: Iterable[dict[str, Any]]) -> pl.DataFrame:
    """The `annotations.parquet` rows of one camera's records, in record order.

    From the annotations' values and float arrays when every record holds them (`records.ImageAnnotations` with
    `values`: a worker's segment), else from their COCO annotation texts (a part file's); the same rows. The
    names are plain strings here (a worker's part); `write_annotations` makes them categorical once the parts
    are concatenated.

    Args:
        camera: the camera.
        records: its camera-frame records, "annotations" an `ImageAnnotations` or its texts (`records.encoded_records`).

    Returns:
        The rows, one per annotation.
    """
    records = list(records)
    if records and all(isinstance(r["annotations"], ImageAnnotations) and r["annotations"].values is not None for r in records):
        cols = _columns_of_values(records)
    else:
        cols = _columns_of_texts(encoded_records(records))
    n = len(cols["counts"])
    return pl.DataFrame({
        "camera": pl.Series([camera] * n, dtype=pl.String), "image_id": pl.Series(cols["image_id"], dtype=pl.Int32),
        "track_id": pl.Series(cols["track_id"], dtype=pl.String), "source_class": pl.Series(cols["source_class"], dtype=pl.String),
        "category_id": pl.Series(cols["category_id"], dtype=pl.Int8),
        "bbox": pl.Series(np.asarray(cols["bbox"], np.int32).reshape(-1, 4), dtype=pl.Array(pl.Int32, 4)),
        "area": pl.Series(cols["area"], dtype=pl.Int32), "counts": pl.Series(cols["counts"], dtype=pl.String),
        "visible_px": pl.Series(cols["visible_px"], dtype=pl.Int32), "unoccluded_px": pl.Series(cols["unoccluded_px"], dtype=pl.Int32),
        **{k: _f64(cols[k], n) for k, n in ANNOTATION_ARRAYS.items()},
        **{k: pl.Series(np.asarray(cols[k], np.float64).reshape(-1), dtype=pl.Float64) for k in ANNOTATION_SCALARS},
    })  # fmt: skip


def _columns_of_texts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """`annotations_frame`'s columns parsed from the records' COCO annotation texts (null floats: NaN)."""
    cols: dict[str, list[Any]] = {k: [] for k in ANNOTATION_COLUMNS}
    for r in records:
        for text in r["annotations"]:
            a = json.loads("{" + text)
            cols["image_id"].append(int(r["frame_index"]))
            cols["counts"].append(a["segmentation"]["counts"])
            for k in ("track_id", "source_class", "category_id", "bbox", "area", "visible_px", "unoccluded_px"):
                cols[k].append(a[k])
            for k in ANNOTATION_SCALARS:
                cols[k].append(np.nan if a[k] is None else a[k])
            for k, n in ANNOTATION_ARRAYS.items():
                cols[k].append(np.asarray(a[k], np.float64).reshape(-1) if a[k] is not None else np.full(n, np.nan))
    return cols


def _columns_of_values(records: list[dict[str, Any]]) -> dict[str, Any]:
    """`annotations_frame`'s columns from the records' `ImageAnnotations` values: the floats rounded as their COCO
    text writes them (`records.ANNOTATION_DECIMALS`, non-finite: NaN), so the numbers the text reads back as."""
    images: list[ImageAnnotations] = [r["annotations"] for r in records]
    values = [im.values for im in images if im.values is not None]
    cat = lambda key: [x for v in values for x in getattr(v, key)]  # noqa: E731
    cols: dict[str, Any] = {
        "image_id": np.repeat([int(r["frame_index"]) for r in records], [len(im.head) for im in images]),
        "counts": cat("rle"), "track_id": cat("track_id"), "source_class": cat("source_class"),
        "category_id": np.concatenate([v.category_id for v in values]), "bbox": np.concatenate([v.bbox.reshape(-1, 4) for v in values]),
        "visible_px": np.concatenate([v.visible_px for v in values]), "unoccluded_px": np.concatenate([v.unoccluded_px for v in values]),
    }  # fmt: skip
    cols["area"] = cols["visible_px"]  # the COCO area is the mask's pixel count
    for c, (key, nd) in enumerate(zip(ANNOTATION_FLOATS, ANNOTATION_DECIMALS)):
        r = np.round(np.concatenate([np.asarray(im.floats[c], np.float64) for im in images]), nd)
        cols[key] = np.where(np.isfinite(r), r, np.nan).reshape(len(r), int(np.prod(r.shape[1:], dtype=np.int64)))
    return cols


def write_annotations_part(path: Path, camera: str, records: Iterable[dict[str, Any]]) -> None:
    """One render segment's `annotations.parquet` rows as a part file (written by the worker that rendered it).

    A scratch file for the merge: fast compression (lz4), atomic.

    Args:
        path: the part file.
        camera: the segment's camera.
        records: its records in frame order (`annotations_frame`).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(path) as tmp:
        annotations_frame(camera, records).write_parquet(tmp, compression="lz4", statistics=False)


def write_annotations(path: Path, parts: Iterable[Path]) -> None:
    """`annotations.parquet`: the segments' part files (`write_annotations_part`) concatenated, in the order given
    (camera by camera in rig order, each camera's segments in frame order).

    Args:
        path: the file.
        parts: the part files.
    """
    frames = [pl.read_parquet(p) for p in parts]
    df = pl.concat(frames, how="vertical") if frames else annotations_frame("", [])
    _write(df.with_columns(pl.col("camera").cast(pl.Categorical), pl.col("source_class").cast(pl.Categorical)), path)


def boxes_rows(frame: int, boxes: FrameBoxes3D, cameras_of: dict[str, list[str]], attributes: list[str]) -> dict[str, Any]:
    """One frame's `boxes3d.parquet` columns (K rows).

    Args:
        frame: the frame index.
        boxes: the frame's boxes.
        cameras_of: track id -> the cameras that show it.
        attributes: the boxes' nuScenes attributes (`labels.attributes`).

    Returns:
        Column name -> K values (arrays for the box columns).
    """
    k = len(boxes.track_id)
    ids = [str(t) for t in boxes.track_id.tolist()]
    return {
        "frame_index": [frame] * k, "timestamp_ns": [int(boxes.timestamp_ns)] * k, "track_id": ids,
        "class": boxes.object_class.tolist(), "source_class": boxes.source_class.tolist(),
        "detection_name": [NUSCENES_NAME.get(str(c), "barrier") for c in boxes.object_class.tolist()],
        "attribute_name": list(attributes), **{k: getattr(boxes, k) for k in BOX_ARRAYS}, "yaw_ego_rad": boxes.yaw_ego_rad,
        "cameras": [cameras_of.get(t, []) for t in ids],
    }  # fmt: skip


def write_boxes3d(path: Path, blocks: Iterable[dict[str, Any]]) -> None:
    """`boxes3d.parquet` from `boxes_rows` of every frame.

    Args:
        path: the file.
        blocks: `boxes_rows` of each frame, in frame order.
    """
    cols: dict[str, list[Any]] = {}
    for rows in blocks:
        for key, v in rows.items():
            cols.setdefault(key, []).append(v)
    if not cols:
        cols = {k: [] for k in ("frame_index", "timestamp_ns", "track_id", "class", "source_class", "detection_name",
                                "attribute_name", "yaw_ego_rad", "cameras", *BOX_ARRAYS)}  # fmt: skip
    flat = {k: [x for part in v for x in part] if k not in BOX_ARRAYS and k != "yaw_ego_rad" else v for k, v in cols.items()}
    df = pl.DataFrame({
        "frame_index": pl.Series(flat["frame_index"], dtype=pl.Int32), "timestamp_ns": pl.Series(flat["timestamp_ns"], dtype=pl.Int64),
        "track_id": pl.Series(flat["track_id"], dtype=pl.String), "class": pl.Series(flat["class"], dtype=pl.Categorical),
        "source_class": pl.Series(flat["source_class"], dtype=pl.Categorical),
        "detection_name": pl.Series(flat["detection_name"], dtype=pl.Categorical),
        "attribute_name": pl.Series(flat["attribute_name"], dtype=pl.Categorical),
        **{k: _f64(np.concatenate(cols[k]) if cols[k] else np.zeros((0, n)), n) for k, n in BOX_ARRAYS.items()},
        "yaw_ego_rad": pl.Series(np.concatenate(cols["yaw_ego_rad"]) if cols["yaw_ego_rad"] else np.zeros(0), dtype=pl.Float64),
        "cameras": _lists_of_names(flat["cameras"]),
    })  # fmt: skip
    _write(df, path)


def _lists_of_names(lists: list[list[str]]) -> pl.Series:
    """`pl.Series(lists, dtype=pl.List(pl.Categorical))`, each distinct list built once and gathered (a clip's boxes
    share a few camera sets; polars builds nested lists from Python objects one by one)."""
    first: dict[tuple[str, ...], int] = {}
    rows = np.fromiter((first.setdefault(tuple(names), len(first)) for names in lists), np.int64, len(lists))
    return pl.Series([list(k) for k in first], dtype=pl.List(pl.Categorical)).gather(rows)


def write_lanes(path: Path, scenario: Scenario, ego_xy_m: np.ndarray) -> None:
    """`lanes.parquet`: the map's lane lines within LANE_RADIUS_M of any of the ego positions, world frame.

    Args:
        path: the file.
        scenario: the scenario.
        ego_xy_m: (F, 2) the labelled frames' ego positions.
    """
    table = lane_table(scenario.map.lane_lines)
    keep = np.unique(np.concatenate([near_lines(table, p, LANE_RADIUS_M) for p in np.asarray(ego_xy_m)] or [np.zeros(0, np.int64)]))
    pts = [table.points_m[table.offsets[k] : table.offsets[k + 1]] for k in keep.tolist()]
    df = pl.DataFrame({
        "line": pl.Series(keep, dtype=pl.Int32), "category": pl.Series(table.category[keep], dtype=pl.Int16),
        **{f"{a}_m": pl.Series([p[:, i] for p in pts], dtype=pl.List(pl.Float64)) for i, a in enumerate("xyz")},
    })  # fmt: skip
    _write(df, path)


def write_camera_poses(path: Path, heads: list[dict[str, Any]]) -> None:
    """`camera_poses.parquet`: each camera-frame's ego_SE3_camera (3x4 rows, float64) from the records' heads.

    Args:
        path: the file.
        heads: the records' heads ("frame_index", "camera", "ego_SE3_camera").
    """
    rows = sorted(heads, key=lambda h: (h["camera"], h["frame_index"]))
    pose = np.asarray([h["ego_SE3_camera"] for h in rows], np.float64).reshape(-1, 12)
    df = pl.DataFrame({
        "camera": pl.Series([h["camera"] for h in rows], dtype=pl.Categorical),
        "frame_index": pl.Series([h["frame_index"] for h in rows], dtype=pl.Int32),
        "ego_SE3_camera": pl.Series(pose, dtype=pl.Array(pl.Float64, 12)),
    })  # fmt: skip
    _write(df, path)


# ---- readers -----------------------------------------------------------------------------------
def read_index(folder: Path) -> dict[str, Any]:
    """A label folder's `index.json`, checked (`avsim.core.label_folders.read_index`).

    Args:
        folder: the label folder.

    Returns:
        The index document.
    """
    return label_folders.read_index(Path(folder))


def is_compact(folder: Path) -> bool:
    """Whether `folder` is a label folder with the compact tables.

    Args:
        folder: a path.

    Returns:
        True when it holds `index.json` whose `layout` is compact or both (an index without one: when
        `lanes.parquet` is there in any form). A compact folder whose table is missing, truncated or
        not a regular file is then reported naming that table, never read as the standard layout.
    """
    if not (Path(folder) / "index.json").is_file():
        return False
    layout = read_index(folder).get("layout")
    return layout in ("compact", "both") if layout is not None else has_table(Path(folder), LANES)


def read_lane_lines(folder: Path, index: dict[str, Any] | None = None) -> tuple[LaneTable, np.ndarray]:
    """`lanes.parquet` (checked, `compact_tables.read_table`) as a lane table and each line's index in the map (the OpenLane `track_id`)."""
    df = read_table(folder, LANES, index)
    counts = df["x_m"].list.len().to_numpy().astype(np.int64)
    for axis in "yz":
        other = df[f"{axis}_m"].list.len().to_numpy()
        if len(df) and (other != counts).any():
            row = int(np.argmax(other != counts))
            raise AvsimInputError(Path(folder) / LANES, f"{axis}_m", f"row {row}: {other[row]} values, x_m has {counts[row]}")
    if len(df) and (counts < 1).any():
        raise AvsimInputError(Path(folder) / LANES, "x_m", f"row {int(np.argmax(counts < 1))}: a lane line without points")
    offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
    pts = np.column_stack([df[f"{a}_m"].explode().to_numpy().astype(np.float64) for a in "xyz"]) if len(df) else np.zeros((0, 3))
    lo = np.minimum.reduceat(pts[:, :2], offsets[:-1]) if len(df) else np.zeros((0, 2))
    hi = np.maximum.reduceat(pts[:, :2], offsets[:-1]) if len(df) else np.zeros((0, 2))
    table = LaneTable(df["category"].to_numpy().astype(np.int64), np.c_[lo, hi], offsets, pts.reshape(-1, 3))
    return table, df["line"].to_numpy().astype(np.int64)


def camera_model(folder: Path, index: dict[str, Any], camera: str) -> Camera:
    """A camera of the label folder as `index.json["camera_models"]` stores it (one line when it is not one).

    Args:
        folder: the label folder.
        index: its index.
        camera: the camera.

    Returns:
        The camera model.
    """
    path = Path(folder) / "index.json"
    models = index.get("camera_models")
    if not isinstance(models, dict) or camera not in models:
        raise AvsimInputError(path, "camera_models", f"no model of camera {camera!r}")
    try:
        return camera_from_dict(models[camera])
    except (AvsimValueError, KeyError, TypeError, ValueError) as exc:
        raise AvsimInputError(path, f"camera_models.{camera}", f"not a camera model: {exc}") from None


def camera_poses(folder: Path, index: dict[str, Any] | None = None) -> dict[tuple[str, int], NDArrayFloat]:
    """Every camera-frame's ego_SE3_camera (the camera's mounting at its capture time) from `camera_poses.parquet`.

    Args:
        folder: the label folder.
        index: its index (read when None).

    Returns:
        (camera, frame index) -> (4, 4) float64.
    """
    rows = read_table(folder, CAMERA_POSES, index)
    mats = np.zeros((len(rows), 4, 4))
    mats[:, :3] = np.asarray(rows["ego_SE3_camera"].to_numpy(), np.float64).reshape(-1, 3, 4)
    mats[:, 3, 3] = 1.0
    keys = zip(rows["camera"].cast(pl.String).to_list(), rows["frame_index"].to_list())
    return {(str(c), int(f)): m for (c, f), m in zip(keys, mats)}


def camera_pose(folder: Path, camera: str, frame_index: int) -> NDArrayFloat:
    """One camera-frame's ego_SE3_camera from `camera_poses.parquet` (see `camera_poses`).

    Args:
        folder: the label folder.
        camera: the camera.
        frame_index: the frame.

    Returns:
        (4, 4) float64; AvsimInputError when the table has no such camera-frame.
    """
    pose = camera_poses(folder).get((camera, int(frame_index)))
    if pose is None:
        raise AvsimInputError(Path(folder) / CAMERA_POSES, "camera", f"no pose of {camera} at frame {frame_index}")
    return pose


__all__ = [
    "ANNOTATIONS", "BOXES3D", "CAMERA_POSES", "COMPACT_FILES", "LANES", "annotations_frame", "boxes_rows", "camera_model", "camera_pose",
    "camera_poses", "is_compact", "read_index", "read_lane_lines", "write_annotations", "write_annotations_part", "write_boxes3d",
    "write_camera_poses", "write_lanes",
]  # fmt: skip
