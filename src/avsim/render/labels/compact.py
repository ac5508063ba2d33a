"""Compact label folders: a clip's labels as four parquet tables (zstd) beside `index.json` (docs/labels.md).

The standard files repeat what changes little: OpenLane writes every map lane line again in every
camera-frame's camera coordinates (two thirds of the bytes), COCO and `boxes3d.json` spell every
float as text. A compact folder stores

- `boxes3d.parquet`: one row per (frame, agent): the `boxes3d.json` entry's ego-frame box, class
  names, velocity and the cameras showing it (world frame: through the frame's `world_SE3_ego`);
- `annotations.parquet`: one row per COCO annotation of every camera: the COCO fields (`bbox`,
  `area`, RLE `counts`) and the extras as float32;
- `lanes.parquet`: the map's lane lines within `LANE_RADIUS_M` of any labelled ego pose, once, in
  the world frame (float64: the OpenLane documents are rebuilt byte for byte);
- `camera_poses.parquet`: each camera-frame's ego_SE3_camera (float64; the camera at its capture
  time in the ego frame of the frame time), with `index.json["camera_models"]` (each camera at its
  image size) and `index.json["frames"][*]["world_SE3_ego"]`.

The readers below give the standard documents back: `openlane_documents` (the OpenLane files'
exact text), `coco_document` and `boxes3d_document` (the same JSON, floats stored as float32).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from avsim.core import label_folders
from avsim.core.atomic import atomic_output_path
from avsim.core.cameras import Camera, camera_from_dict
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.transforms import SE3
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
    COCO_CATEGORIES,
    LANE_RADIUS_M,
    NUSCENES_META,
    NUSCENES_NAME,
    openlane_text,
)
from avsim.scenario import Scenario

DECIMALS = dict(zip(ANNOTATION_FLOATS, ANNOTATION_DECIMALS))  # as the standard COCO files round them
BOX_ARRAYS = {"center_ego_m": 3, "size_lwh_m": 3, "rotation_ego_wxyz": 4, "velocity_ego_mps": 3}


def _write(df: pl.DataFrame, path: Path) -> None:
    with atomic_output_path(path) as tmp:
        df.write_parquet(tmp, compression="zstd", compression_level=19, statistics=False)


def _f32(rows: list[Any] | np.ndarray, n: int) -> pl.Series:
    a = np.asarray(rows, np.float32).reshape(-1, n)
    return pl.Series(a, dtype=pl.Array(pl.Float32, n))


def write_annotations(path: Path, cameras: tuple[str, ...], chunks: Callable[[str], Iterable[list[dict[str, Any]]]]) -> None:
    """`annotations.parquet` from every camera's records (their COCO annotation texts), camera by camera.

    Args:
        path: the file.
        cameras: the cameras, in rig order.
        chunks: each camera's records (with "annotations" texts) a segment at a time.
    """
    cols: dict[str, list[Any]] = {k: [] for k in ("camera", "image_id", "track_id", "source_class", "category_id", "bbox", "area", "counts",
                                                   "visible_px", "unoccluded_px", *ANNOTATION_ARRAYS, *ANNOTATION_SCALARS)}  # fmt: skip
    for cam in cameras:
        for chunk in chunks(cam):
            for r in chunk:
                for text in r["annotations"]:
                    a = json.loads("{" + text)
                    cols["camera"].append(cam)
                    cols["image_id"].append(int(r["frame_index"]))
                    cols["counts"].append(a["segmentation"]["counts"])
                    for k in ("track_id", "source_class", "category_id", "bbox", "area", "visible_px", "unoccluded_px", *ANNOTATION_SCALARS):
                        cols[k].append(a[k])
                    for k, n in ANNOTATION_ARRAYS.items():
                        cols[k].append(np.asarray(a[k], np.float64).reshape(-1) if a[k] is not None else np.full(n, np.nan))
    df = pl.DataFrame({
        "camera": pl.Series(cols["camera"], dtype=pl.Categorical), "image_id": pl.Series(cols["image_id"], dtype=pl.Int32),
        "track_id": pl.Series(cols["track_id"], dtype=pl.String), "source_class": pl.Series(cols["source_class"], dtype=pl.Categorical),
        "category_id": pl.Series(cols["category_id"], dtype=pl.Int8),
        "bbox": pl.Series(np.asarray(cols["bbox"], np.int32).reshape(-1, 4), dtype=pl.Array(pl.Int32, 4)),
        "area": pl.Series(cols["area"], dtype=pl.Int32), "counts": pl.Series(cols["counts"], dtype=pl.String),
        "visible_px": pl.Series(cols["visible_px"], dtype=pl.Int32), "unoccluded_px": pl.Series(cols["unoccluded_px"], dtype=pl.Int32),
        **{k: _f32(cols[k], n) for k, n in ANNOTATION_ARRAYS.items()},
        **{k: pl.Series(np.asarray([np.nan if v is None else v for v in cols[k]], np.float32)) for k in ANNOTATION_SCALARS},
    })  # fmt: skip
    _write(df, path)


def boxes_rows(frame: int, boxes: FrameBoxes3D, cameras_of: dict[str, list[str]]) -> dict[str, Any]:
    """One frame's `boxes3d.parquet` columns (K rows).

    Args:
        frame: the frame index.
        boxes: the frame's boxes.
        cameras_of: track id -> the cameras that show it.

    Returns:
        Column name -> K values (arrays for the box columns).
    """
    k = len(boxes.track_id)
    ids = [str(t) for t in boxes.track_id.tolist()]
    return {
        "frame_index": [frame] * k, "timestamp_ns": [int(boxes.timestamp_ns)] * k, "track_id": ids,
        "class": boxes.object_class.tolist(), "source_class": boxes.source_class.tolist(),
        "detection_name": [NUSCENES_NAME.get(str(c), "barrier") for c in boxes.object_class.tolist()],
        "center_ego_m": boxes.center_ego_m, "size_lwh_m": boxes.size_lwh_m, "rotation_ego_wxyz": boxes.rotation_ego_wxyz,
        "velocity_ego_mps": boxes.velocity_ego_mps, "yaw_ego_rad": boxes.yaw_ego_rad, "cameras": [cameras_of.get(t, []) for t in ids],
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
                                "yaw_ego_rad", "cameras", *BOX_ARRAYS)}  # fmt: skip
    flat = {k: [x for part in v for x in part] if k not in BOX_ARRAYS and k != "yaw_ego_rad" else v for k, v in cols.items()}
    df = pl.DataFrame({
        "frame_index": pl.Series(flat["frame_index"], dtype=pl.Int32), "timestamp_ns": pl.Series(flat["timestamp_ns"], dtype=pl.Int64),
        "track_id": pl.Series(flat["track_id"], dtype=pl.String), "class": pl.Series(flat["class"], dtype=pl.Categorical),
        "source_class": pl.Series(flat["source_class"], dtype=pl.Categorical),
        "detection_name": pl.Series(flat["detection_name"], dtype=pl.Categorical),
        **{k: _f32(np.concatenate(cols[k]) if cols[k] else np.zeros((0, n)), n) for k, n in BOX_ARRAYS.items()},
        "yaw_ego_rad": pl.Series(np.concatenate(cols["yaw_ego_rad"]) if cols["yaw_ego_rad"] else np.zeros(0), dtype=pl.Float32),
        "cameras": pl.Series(flat["cameras"], dtype=pl.List(pl.Categorical)),
    })  # fmt: skip
    _write(df, path)


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


def _lane_table(folder: Path, index: dict[str, Any]) -> tuple[LaneTable, np.ndarray]:
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


def openlane_documents(folder: Path, camera: str) -> Iterator[tuple[int, str]]:
    """The OpenLane documents of one camera, rebuilt from a compact folder (the standard files' exact text).

    Args:
        folder: the label folder.
        camera: the camera.

    Returns:
        (frame index, document text) in frame order.
    """
    index = read_index(folder)
    cam = camera_model(folder, index, camera)
    table, lines = _lane_table(folder, index)
    poses = read_table(folder, CAMERA_POSES, index).filter(pl.col("camera").cast(pl.String) == camera)
    by_frame = dict(zip(poses["frame_index"].to_list(), poses["ego_SE3_camera"].to_numpy()))
    for f in index["frames"]:
        if f["frame_index"] not in by_frame:
            continue
        T = np.asarray(by_frame[f["frame_index"]], np.float64).reshape(3, 4)
        W = np.asarray(f["world_SE3_ego"], np.float64)
        yield f["frame_index"], openlane_text(table, lines, cam, SE3(T[:, :3], T[:, 3]), SE3(W[:3, :3], W[:3, 3]), f["timestamp_ns"])


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


def _floats(a: np.ndarray, nd: int) -> list[Any]:
    out = np.round(np.asarray(a, np.float64), nd)
    return [None if not np.isfinite(v) else float(v) for v in out.reshape(-1)]


def coco_document(folder: Path, camera: str, file_names: dict[int, str] | None = None) -> dict[str, Any]:
    """The COCO instances document of one camera from a compact folder (floats as stored, float32).

    Args:
        folder: the label folder.
        camera: the camera.
        file_names: frame index -> image file name (default: the video and its frame).

    Returns:
        {"info", "images", "annotations", "categories"} as the standard `coco/<camera>.json`.
    """
    index = read_index(folder)
    if camera not in index.get("camera_sizes_px", {}):
        raise AvsimInputError(Path(folder) / "index.json", "camera_sizes_px", f"no size of camera {camera!r}")
    w, h = index["camera_sizes_px"][camera]
    images = [{"id": f["frame_index"], "file_name": (file_names or {}).get(f["frame_index"], f"{f['video_clip']}.{camera}.mp4"),
               "video_frame": f["video_frame"], "frame_index": f["frame_index"], "timestamp_ns": f["timestamp_ns"], "width": w,
               "height": h} for f in index["frames"]]  # fmt: skip
    df = read_table(folder, ANNOTATIONS, index).filter(pl.col("camera").cast(pl.String) == camera)
    anns = []
    for i, r in enumerate(df.iter_rows(named=True), 1):
        a = {"id": i, "image_id": r["image_id"], "category_id": r["category_id"], "bbox": list(r["bbox"]), "area": r["area"], "iscrowd": 0,
             "segmentation": {"size": [h, w], "counts": r["counts"]}, "track_id": r["track_id"],
             "class": COCO_CATEGORIES[r["category_id"] - 1], "source_class": r["source_class"]}  # fmt: skip
        for k in ANNOTATION_ARRAYS:
            v = _floats(r[k], DECIMALS[k])
            a[k] = [v[j : j + 2] for j in range(0, 16, 2)] if k == "corners_px" else v
        a.update({k: _floats(np.array([r[k]]), DECIMALS[k])[0] for k in ANNOTATION_SCALARS})
        a.update({"visible_px": r["visible_px"], "unoccluded_px": r["unoccluded_px"]})
        anns.append(a)
    cats = [{"id": i + 1, "name": c} for i, c in enumerate(COCO_CATEGORIES)]
    return {"info": {"format": "COCO instances (avsim labels)", "camera": camera}, "images": images, "annotations": anns, "categories": cats}


def boxes3d_document(folder: Path) -> dict[str, Any]:
    """`boxes3d.json`'s nuScenes results document (ego frame) from a compact folder (floats as stored, float32).

    Args:
        folder: the label folder.

    Returns:
        {"meta": the five nuScenes flags, "results": {sample_token: [box, ...]}}; each box has the
        results fields plus track_id, class, source_class, cameras.
    """
    index = read_index(folder)
    results: dict[str, list[dict[str, Any]]] = {f["sample_token"]: [] for f in index["frames"]}
    token = {f["frame_index"]: f["sample_token"] for f in index["frames"]}
    for r in read_table(folder, BOXES3D, index).iter_rows(named=True):
        lwh = _floats(r["size_lwh_m"], 6)
        results[token[r["frame_index"]]].append({
            "sample_token": token[r["frame_index"]], "translation": _floats(r["center_ego_m"], 6), "size": [lwh[1], lwh[0], lwh[2]],
            "rotation": _floats(r["rotation_ego_wxyz"], 9), "velocity": _floats(r["velocity_ego_mps"], 4)[:2],
            "detection_name": r["detection_name"], "detection_score": 1.0, "attribute_name": "", "track_id": r["track_id"],
            "class": r["class"], "source_class": r["source_class"], "cameras": list(r["cameras"]),
        })  # fmt: skip
    return {"meta": dict(NUSCENES_META), "results": results}


__all__ = [
    "ANNOTATIONS", "BOXES3D", "CAMERA_POSES", "COMPACT_FILES", "LANES", "boxes3d_document", "boxes_rows", "camera_model", "camera_pose",
    "camera_poses", "coco_document", "is_compact", "openlane_documents", "read_index", "write_annotations", "write_boxes3d", "write_camera_poses",
    "write_lanes",
]  # fmt: skip
