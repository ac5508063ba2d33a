"""Detection inputs for LET-AP: ground truth from scenarios, predictions from files.

Everything becomes a `Boxes3D` in the ego/vehicle frame (x forward, y left, z up; box centre)
with LET class names ("vehicle", "pedestrian", "cyclist", "sign"; any other class in a file is
an error naming the file and the value). Frames are keyed by integer
timestamps in ns for scenario ground truth; prediction files must use the same keys (the
`frame` column, or the nuScenes `sample_token` mapped through `token_to_frame`).

Table format (parquet, or csv): one row per box with columns
`frame, class, x_m, y_m, z_m, length_m, width_m, height_m, heading_rad` and `score`
(predictions; ground truth may omit it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from avsim.core.errors import AvsimInputError
from avsim.core.safe_files import file_kind, regular_file
from avsim.core.safe_json import read_json
from avsim.core.safe_parquet import Column, TableLimits, check_frame, read_frame
from avsim.core.transforms import quat_to_yaw, wrap_angle
from avsim.evaluation.let_ap import LET_CLASSES, Boxes3D

TABLE_COLUMNS = ("frame", "class", "x_m", "y_m", "z_m", "length_m", "width_m", "height_m", "heading_rad")
# avsim collapsed classes -> LET classes (Waymo's vehicle / pedestrian / cyclist); Others dropped.
AVSIM_TO_LET = {"Car": "vehicle", "Truck": "vehicle", "Pedestrian": "pedestrian", "Cyclist": "cyclist"}
NUSCENES_TO_LET = {
    "car": "vehicle", "truck": "vehicle", "bus": "vehicle", "trailer": "vehicle", "construction_vehicle": "vehicle",
    "pedestrian": "pedestrian", "bicycle": "cyclist", "motorcycle": "cyclist",
}
# nuScenes detection classes that have no LET class: read and left out (documented, not unknown)
NUSCENES_DROPPED = ("barrier", "traffic_cone")


def boxes_from_scenario(
    scenario: Any,
    timestamps_ns: np.ndarray | None = None,
    rate_hz: float = 10.0,
    class_map: dict[str, str] | None = None,
) -> Boxes3D:
    """Ground-truth boxes of a scenario's agent tracks in the ego frame, per frame.

    Frames are `timestamps_ns` (default: the scenario's frame timestamps at `rate_hz`);
    tracks are resampled there (avsim's rules: linear, SLERP, <= 0.5 s extrapolation).
    Classes are collapsed (avsim.core.agents) then mapped with `class_map` (default
    AVSIM_TO_LET); unmapped classes are dropped.
    """
    cmap = AVSIM_TO_LET if class_map is None else class_map
    ts = scenario.frame_timestamps(rate_hz) if timestamps_ns is None else np.asarray(timestamps_ns, np.int64)
    agents = scenario.agents.resample(ts)
    if len(agents) == 0:
        return Boxes3D.empty()
    labels = np.array([cmap.get(c, "") for c in agents.object_class], dtype=str)
    keep = labels != ""
    agents = agents.select(keep)
    labels = labels[keep]
    t = agents.timestamps_ns
    uniq, inv = np.unique(t, return_inverse=True)
    world_SE3_ego = scenario.ego.pose_at(uniq)
    ego_SE3_world = world_SE3_ego.inverse()
    R = ego_SE3_world.rotation[inv]  # (N, 3, 3)
    tr = ego_SE3_world.translation[inv]
    center = np.einsum("nij,nj->ni", R, agents.center_m) + tr
    heading = wrap_angle(agents.yaw_rad - world_SE3_ego.yaw_rad[inv])
    boxes = np.column_stack([center, agents.size_m, heading])
    return Boxes3D(t.astype(np.int64), labels, boxes, np.ones(len(t)))


MAX_BOX_ROWS = 5_000_000  # boxes in one table (a 20 s clip at 10 Hz with 200 objects: 40,000); read: about 320 bytes a box
BOX_TABLE_LIMITS = TableLimits(MAX_BOX_ROWS, 2 << 30)
MAX_CSV_BYTES = 1 << 30
_BOX_SPEC = {**{c: Column("float", low=-1e8, high=1e8) for c in ("x_m", "y_m", "z_m")},
             **{c: Column("float", low=1e-9, high=1e4) for c in ("length_m", "width_m", "height_m")},
             "heading_rad": Column("float", low=-1e3, high=1e3), "score": Column("float", low=0.0, high=1.0)}  # fmt: skip


def read_table(path: Path, columns: list[str] | None = None, limits: TableLimits = BOX_TABLE_LIMITS) -> pl.DataFrame:
    """A parquet or csv table from anyone: a regular file, bounded before decoding (`avsim.core.safe_parquet`).

    Args:
        path: the file (``.csv``: text; anything else: parquet).
        columns: the columns to read (parquet; None: all).
        limits: rows and decoded bytes (default: a box table's).

    Returns:
        The frame.
    """
    if file_kind(path) == "missing":
        raise AvsimInputError(path, "file", "not found")
    if path.suffix.lower() != ".csv":
        return read_frame(path, limits, columns)
    regular_file(path, "file")
    size = path.stat().st_size
    if size > MAX_CSV_BYTES:
        raise AvsimInputError(path, "file", f"{size} bytes, more than the {MAX_CSV_BYTES} a csv table may have")
    try:
        df = pl.read_csv(path, n_rows=limits.max_rows + 1)
    except Exception as exc:  # polars' csv errors: one line
        raise AvsimInputError(path, "table", f"cannot read: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else exc}") from None
    if df.height > limits.max_rows:
        raise AvsimInputError(path, "rows", f"more than the {limits.max_rows} rows a table may have")
    return df


def read_box_table(path: str | os.PathLike[str], require_score: bool = True) -> Boxes3D:
    """Boxes from a parquet/csv table (columns in the module docstring): sizes in (0, 1e4] m, positions
    within 1e8 m, scores in [0, 1], every value finite; one line naming the column and row otherwise."""
    p = Path(path)
    df = read_table(p)
    needed = TABLE_COLUMNS + (("score",) if require_score else ())
    for col in needed:
        if col not in df.columns:
            raise AvsimInputError(p, col, f"missing column (need {', '.join(needed)})")
    for col, spec in _BOX_SPEC.items():
        if col in df.columns:
            try:
                check_frame(df, p, {col: spec})
            except AvsimInputError as exc:
                if col in ("length_m", "width_m", "height_m") and "outside" in exc.reason:
                    raise AvsimInputError(p, "length_m/width_m/height_m", f"sizes must be > 0 and at most 1e4 m ({col}: {exc.reason})") from None
                raise
    boxes = np.column_stack([df[c].cast(pl.Float64).to_numpy() for c in TABLE_COLUMNS[2:]])
    score = df["score"].cast(pl.Float64).to_numpy() if "score" in df.columns else np.ones(df.height)
    frame = df["frame"].to_numpy()
    labels = df["class"].cast(pl.String).to_numpy().astype(str)
    _check_let_classes(p, labels)
    return Boxes3D(frame, labels, boxes, score)


def _check_let_classes(path: Path, labels: np.ndarray) -> None:
    """Every label is a LET class; the first other value is named in the error."""
    unknown = sorted(set(labels.tolist()) - set(LET_CLASSES))
    if unknown:
        raise AvsimInputError(path, "class", f"unknown class {unknown[0]!r} (LET classes: {', '.join(LET_CLASSES)})")


def write_box_table(boxes: Boxes3D, path: str | os.PathLike[str]) -> None:
    """Write `boxes` as a parquet table (atomic)."""
    from avsim.core.atomic import atomic_output_path

    df = pl.DataFrame({
        "frame": boxes.frame, "class": boxes.label,
        **{c: boxes.boxes[:, i] for i, c in enumerate(TABLE_COLUMNS[2:])}, "score": boxes.score,
    })
    with atomic_output_path(path) as tmp:
        df.write_parquet(tmp)


def _nuscenes_label(path: Path, field: str, name: str, cmap: dict[str, str]) -> str:
    """The LET class of a nuScenes detection name ("" for a class left out); unknown: error."""
    if name in cmap:
        return cmap[name]
    if name in NUSCENES_DROPPED:
        return ""
    known = ", ".join([*cmap, *NUSCENES_DROPPED])
    raise AvsimInputError(path, field, f"unknown detection class {name!r} (nuScenes classes: {known})")


def read_nuscenes_submission(
    path: str | os.PathLike[str],
    world_SE3_ego: dict[str, np.ndarray] | None = None,
    token_to_frame: dict[str, Any] | None = None,
    class_map: dict[str, str] | None = None,
    doc: Any = None,
) -> Boxes3D:
    """Predictions from a nuScenes detection submission JSON (`{"results": {token: [...]}}`).

    nuScenes boxes are in the global frame with size (w, l, h): give `world_SE3_ego`
    (token -> 4x4 matrix) to bring them into the ego frame; without it the boxes are taken as
    already ego-frame. Frames are the sample tokens, or `token_to_frame[token]`. `doc`: the
    document already read (from `path` or, for avsim's compact labels, rebuilt from a table).
    """
    p = Path(path)
    doc = read_json(p) if doc is None else doc
    try:
        results = doc["results"]
    except (KeyError, TypeError) as exc:
        raise AvsimInputError(p, "results", f"not a nuScenes detection submission: {exc}") from exc
    cmap = NUSCENES_TO_LET if class_map is None else class_map
    rows: list[tuple[Any, str, list[float], float]] = []
    for token, dets in results.items():
        if world_SE3_ego is not None and token not in world_SE3_ego:
            raise AvsimInputError(p, f"results.{token}", "no ego pose given for this sample token")
        T = np.linalg.inv(np.asarray(world_SE3_ego[token], np.float64)) if world_SE3_ego is not None else np.eye(4)
        frame = token_to_frame.get(token, token) if token_to_frame is not None else token
        for i, d in enumerate(dets):
            try:
                label = _nuscenes_label(p, f"results.{token}[{i}].detection_name", str(d["detection_name"]), cmap)
                t = np.asarray(d["translation"], np.float64)
                w, l, h = (float(v) for v in d["size"])
                yaw_world = float(quat_to_yaw(np.asarray(d["rotation"], np.float64).reshape(1, 4))[0])
                score = float(d["detection_score"])
            except (KeyError, TypeError, ValueError) as exc:
                raise AvsimInputError(p, f"results.{token}[{i}]", f"bad detection: {exc}") from exc
            if not label:
                continue
            c = T[:3, :3] @ t + T[:3, 3]
            yaw = yaw_world + float(np.arctan2(T[1, 0], T[0, 0]))
            rows.append((frame, label, [*c, l, w, h, float(wrap_angle(yaw))], score))
    if not rows:
        return Boxes3D.empty()
    frames = np.array([r[0] for r in rows])
    return Boxes3D(frames, np.array([r[1] for r in rows]), np.array([r[2] for r in rows]), np.array([r[3] for r in rows]))
