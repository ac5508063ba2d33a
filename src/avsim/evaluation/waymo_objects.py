"""Waymo `metrics_pb2.Objects` files (ground truth and predictions) as LET inputs.

The binary format Waymo's own tools and challenge submissions use: one serialised
`waymo_open_dataset.protos.metrics_pb2.Objects` message, each `Object` holding a
`label_pb2.Label` (box in the vehicle frame: centre, length along heading, width, height,
heading in rad), a score (predictions), `context_name`, `frame_timestamp_micros` and
`camera_name`. What is read follows Waymo's reference tool for the camera-only challenge
(`src/waymo_open_dataset/metrics/tools/compute_detection_let_metrics_main.cc`):

- ground truth keeps only objects with `num_top_lidar_points_in_box > 0` and a non-empty
  `most_visible_camera_name`, and is evaluated on its `camera_synced_box`;
- predictions are evaluated on `box`;
- a frame is `(context_name + "_" + camera_name, frame_timestamp_micros)`; avsim's frame key
  is the string `"<context>_<camera>@<micros>"`;
- the one difficulty the tool reports is LEVEL_2, which holds every kept object, so no
  difficulty filter is applied.

Types map to LET classes (TYPE_VEHICLE -> vehicle, TYPE_PEDESTRIAN -> pedestrian, TYPE_SIGN ->
sign, TYPE_CYCLIST -> cyclist); TYPE_UNKNOWN or any other value is an error naming the file and
the object. The protobuf classes come from `pip install --no-deps waymo-open-dataset-tf-2-12-0`
(the README's install command); parsing a protobuf never runs code, and a file larger than
protobuf's 2 GiB message limit is refused before it is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.safe_files import file_kind, regular_file
from avsim.evaluation.let_ap import Boxes3D

WAYMO_TYPE_TO_LET = {1: "vehicle", 2: "pedestrian", 3: "sign", 4: "cyclist"}
LET_TO_WAYMO_TYPE = {v: k for k, v in WAYMO_TYPE_TO_LET.items()}
MAX_OBJECTS_FILE_BYTES = 2**31 - 1  # protobuf's limit on one serialised message
_BOX_FIELDS = ("center_x", "center_y", "center_z", "length", "width", "height", "heading")


@dataclass(frozen=True)
class ObjectsRead:
    """Boxes read from an Objects file and what the reference rules left out.

    `boxes`: the kept boxes; `dropped`: reason -> count (ground truth only).
    """

    boxes: Boxes3D
    dropped: dict[str, int]


def _metrics_pb2(path: Path) -> Any:
    try:
        from waymo_open_dataset.protos import metrics_pb2
    except ImportError as exc:
        raise AvsimInputError(
            path, "import",
            f"Waymo protobuf classes unavailable ({exc}); install with "
            "`pip install protobuf && pip install --no-deps waymo-open-dataset-tf-2-12-0`",
        ) from None  # fmt: skip
    return metrics_pb2


def _parse(path: Path) -> Any:
    from google.protobuf.message import DecodeError

    metrics_pb2 = _metrics_pb2(path)
    if file_kind(path) == "missing":
        raise AvsimInputError(path, "file", "not found")
    regular_file(path, "file")  # a FIFO or a device is named, never read
    if path.stat().st_size > MAX_OBJECTS_FILE_BYTES:
        raise AvsimInputError(path, "file", f"larger than protobuf's 2 GiB message limit ({path.stat().st_size} bytes)")
    objects = metrics_pb2.Objects()
    try:
        objects.ParseFromString(path.read_bytes())
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise AvsimInputError(path, "objects", f"not a Waymo metrics_pb2.Objects file: {exc}") from None
    return objects


def _drop_reason(label: Any) -> str | None:
    """Why the reference tool leaves a ground-truth object out (None: it is kept)."""
    if label.num_top_lidar_points_in_box <= 0:
        return "num_top_lidar_points_in_box <= 0"
    if not label.most_visible_camera_name:
        return "no most_visible_camera_name"
    return None


def read_waymo_objects(path: str | os.PathLike[str], ground_truth: bool) -> ObjectsRead:
    """Boxes of a Waymo `metrics_pb2.Objects` file, by the reference tool's rules.

    Args:
        path: the serialised Objects file (`.bin`).
        ground_truth: True for labels (filtered, `camera_synced_box`, score 1), False for
            predictions (`box`, `score`).

    Returns:
        `ObjectsRead`: boxes (N, 7) in the vehicle frame with frame keys
        `"<context>_<camera>@<micros>"`, and the ground-truth objects left out, by reason.
    """
    p = Path(path)
    objects = _parse(p)
    frames: list[str] = []
    labels: list[str] = []
    rows: list[list[float]] = []
    scores: list[float] = []
    dropped: dict[str, int] = {}
    for i, obj in enumerate(objects.objects):
        label = obj.object
        if label.type not in WAYMO_TYPE_TO_LET:
            raise AvsimInputError(p, f"objects[{i}].object.type", f"{label.type} is not a LET type "
                                  "(TYPE_VEHICLE 1, TYPE_PEDESTRIAN 2, TYPE_SIGN 3, TYPE_CYCLIST 4)")  # fmt: skip
        reason = _drop_reason(label) if ground_truth else None
        if reason is not None:
            dropped[reason] = dropped.get(reason, 0) + 1
            continue
        box = label.camera_synced_box if ground_truth else label.box
        frames.append(f"{obj.context_name}_{obj.camera_name}@{obj.frame_timestamp_micros}")
        labels.append(WAYMO_TYPE_TO_LET[label.type])
        rows.append([float(getattr(box, f)) for f in _BOX_FIELDS])
        scores.append(1.0 if ground_truth else float(obj.score))
    return ObjectsRead(_boxes(p, frames, labels, rows, scores), dropped)


def _boxes(path: Path, frames: list[str], labels: list[str], rows: list[list[float]], scores: list[float]) -> Boxes3D:
    if not rows:
        return Boxes3D(np.zeros(0, dtype=str), np.zeros(0, dtype=str), np.zeros((0, 7)), np.zeros(0))
    box = np.asarray(rows, np.float64)
    bad = np.flatnonzero(~np.isfinite(box).all(axis=1) | (box[:, 3:6] <= 0).any(axis=1) | ~np.isfinite(scores))
    if bad.size:
        raise AvsimInputError(path, f"object {int(bad[0])}", "box values must be finite with length, width, height > 0")
    return Boxes3D(np.asarray(frames), np.asarray(labels), box, np.asarray(scores, np.float64))


def write_waymo_objects(
    boxes: Boxes3D, path: str | os.PathLike[str], context_name: str = "avsim", ground_truth: bool = False
) -> None:
    """Write boxes as a Waymo `metrics_pb2.Objects` file (atomic).

    Args:
        boxes: boxes (N, 7) in the vehicle frame with LET labels; integer frame keys become
            `frame_timestamp_micros`.
        path: output `.bin` file.
        context_name: the context (segment) name written on every object.
        ground_truth: also fill what the reference tool needs of labels (`camera_synced_box`,
            `num_top_lidar_points_in_box` 1, `most_visible_camera_name` "FRONT").

    Returns:
        None.
    """
    from avsim.core.atomic import atomic_output_path

    p = Path(path)
    objects = _metrics_pb2(p).Objects()
    for frame, label, row, score in zip(boxes.frame, boxes.label, boxes.boxes, boxes.score, strict=True):
        if str(label) not in LET_TO_WAYMO_TYPE:
            raise AvsimInputError(p, "label", f"{label!r} has no Waymo type ({', '.join(LET_TO_WAYMO_TYPE)})")
        obj = objects.objects.add()
        obj.context_name, obj.frame_timestamp_micros, obj.score = context_name, int(frame), float(score)
        obj.object.type = LET_TO_WAYMO_TYPE[str(label)]
        targets = [obj.object.box] + ([obj.object.camera_synced_box] if ground_truth else [])
        for box in targets:
            for name, value in zip(_BOX_FIELDS, row, strict=True):
                setattr(box, name, float(value))
        if ground_truth:
            obj.object.num_top_lidar_points_in_box = 1
            obj.object.most_visible_camera_name = "FRONT"
    with atomic_output_path(p) as tmp:
        tmp.write_bytes(objects.SerializeToString())
