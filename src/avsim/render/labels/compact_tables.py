"""Reading a compact label folder's tables checked: one line naming the file and column for anything wrong.

Each table is read through `avsim.core.safe_parquet` (a regular file inside the label folder;
rows and decoded bytes counted from its pages before decoding, `LABEL_TABLE_LIMITS`), then its
columns are checked against `SCHEMAS` (present, of their type, no nulls, finite and in range)
and its keys against `index.json` (every camera one the index lists, every frame one it has).
The index itself is read by `avsim.core.label_folders.read_index`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl

from avsim.core.errors import AvsimInputError
from avsim.core.label_folders import read_index
from avsim.core.safe_parquet import Column, TableLimits, check_frame, read_frame
from avsim.render.labels.records import COCO_CATEGORIES

# the COCO extras of an annotation, stored as float64 arrays of these lengths (NaN where undefined)
ANNOTATION_ARRAYS = {"center_camera_m": 3, "size_lwh_m": 3, "rotation_camera_wxyz": 4, "center_px": 2, "corners_px": 16,
                     "box2d_full_px": 4}  # fmt: skip
ANNOTATION_SCALARS = ("center_depth_m", "visible_fraction", "truncation")
BOXES3D, ANNOTATIONS, LANES, CAMERA_POSES = "boxes3d.parquet", "annotations.parquet", "lanes.parquet", "camera_poses.parquet"
COMPACT_FILES = {"boxes3d": BOXES3D, "annotations": ANNOTATIONS, "lanes": LANES, "camera_poses": CAMERA_POSES}
MAX_LABEL_TABLE_ROWS = 10_000_000  # a 20 s clip of 7 cameras at 30 fps has about 200,000 annotations
MAX_LABEL_TABLE_BYTES = 1 << 30  # decoded (the sample's annotations table: about 40 MB)
LABEL_TABLE_LIMITS = TableLimits(MAX_LABEL_TABLE_ROWS, MAX_LABEL_TABLE_BYTES)
_WORLD_M = 1e8  # as scenario positions (`avsim.scenario.io_schema.MAX_WORLD_COORD_M`)
_FRAME = Column("int", low=0)
_XYZ = Column("floats", 3, -_WORLD_M, _WORLD_M)
SCHEMAS: dict[str, dict[str, Column]] = {
    BOXES3D: {
        "frame_index": _FRAME, "timestamp_ns": Column("int"), "track_id": Column("str"), "class": Column("str"),
        "source_class": Column("str"), "detection_name": Column("str"), "center_ego_m": _XYZ,
        "size_lwh_m": Column("floats", 3, 0.0, 1e4), "rotation_ego_wxyz": Column("floats", 4, -1.0001, 1.0001),
        "velocity_ego_mps": Column("floats", 3, -1e4, 1e4), "yaw_ego_rad": Column("float", low=-7.0, high=7.0),
        "cameras": Column("strs"), "attribute_name": Column("str"), "center_world_m": _XYZ,
        "rotation_world_wxyz": Column("floats", 4, -1.0001, 1.0001), "velocity_world_mps": Column("floats", 3, -1e4, 1e4),
    },
    ANNOTATIONS: {
        "camera": Column("str"), "image_id": _FRAME, "track_id": Column("str"), "source_class": Column("str"),
        "category_id": Column("int", low=1, high=len(COCO_CATEGORIES)), "bbox": Column("floats", 4, -1e6, 1e6), "area": Column("float", low=0.0),
        "counts": Column("str"), "visible_px": Column("int", low=0), "unoccluded_px": Column("int", low=0),
        **{k: Column("floats", n, finite=False) for k, n in ANNOTATION_ARRAYS.items()},
        **{k: Column("float", finite=False) for k in ANNOTATION_SCALARS},
    },
    LANES: {"line": _FRAME, "category": Column("int", low=-1, high=1000), **{f"{a}_m": Column("floats", None, -_WORLD_M, _WORLD_M) for a in "xyz"}},
    CAMERA_POSES: {"camera": Column("str"), "frame_index": _FRAME, "ego_SE3_camera": Column("floats", 12, -_WORLD_M, _WORLD_M)},
}  # fmt: skip


def has_table(folder: Path, name: str) -> bool:
    """Whether the label folder has table `name` in any form (a link or a FIFO counts: reading it names what it is).

    Args:
        folder: the label folder.
        name: the table's file name.

    Returns:
        True when something is at `folder/name`.
    """
    return os.path.lexists(Path(folder) / name)


def read_table(folder: Path, name: str, index: dict[str, Any] | None = None, columns: list[str] | None = None) -> pl.DataFrame:
    """One compact table, checked (module docstring).

    Args:
        folder: the label folder.
        name: the table's file name (a key of `SCHEMAS`).
        index: the folder's index (read when None), for the key checks.
        columns: the columns to read (None: every column `SCHEMAS` lists for it).

    Returns:
        The frame.
    """
    folder = Path(folder)
    path = folder / name
    schema = SCHEMAS[name]
    wanted = list(schema) if columns is None else columns
    df = read_frame(path, LABEL_TABLE_LIMITS, wanted, root=folder)
    check_frame(df, path, {c: schema[c] for c in wanted if c in schema})
    index = read_index(folder) if index is None else index
    if "camera" in df.columns:
        _check_keys(df["camera"].cast(pl.String), set(index["cameras"]), path, "camera", "a camera index.json does not list")
    for key in ("frame_index", "image_id"):
        if key in df.columns:
            _check_keys(df[key], {f["frame_index"] for f in index["frames"]}, path, key, "a frame index.json does not list")
    return df


def _check_keys(values: pl.Series, known: set[Any], path: Path, column: str, what: str) -> None:
    bad = ~values.is_in(list(known))
    if len(values) and bool(bad.any()):
        row = int(bad.arg_max() or 0)
        raise AvsimInputError(path, column, f"row {row}: {str(values[row])[:60]!r} is {what}")
