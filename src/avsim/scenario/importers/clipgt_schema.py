"""NVIDIA's world-scenario parquet clips ("ClipGT"): table names, schemas and the loader's conventions.

One place for what avsim's reader (`avsim.scenario.importers.clipgt`) and writer
(`avsim.scenario.exporters.clipgt`) share. Sources: cosmos-transfer2.5
``docs/world_scenario_parquet.md`` (the schema) and the loader it documents,
``cosmos_transfer2/_src/imaginaire/auxiliary/world_scenario/dataloaders/clipgt_loader.py``;
where the two disagree, avsim does what the loader's code does:

* the obstacle table is optional (the loader needs only calibration and egomotion to detect and
  load a clip; the document calls all three required);
* world coordinates are used as stored (the document puts the world origin at the first ego
  pose; the loader does not move anything); avsim's writer does put it there;
* ``correction_sensor_R_FLU`` / ``correction_rig_T`` are not applied (the document says they
  are; the loader reads only ``nominalSensor2Rig_FLU``);
* lane-line style ``VIRTUAL`` is drawn (as an unknown type, i.e. OTHER), not skipped;
* obstacle categories map with the loader's own table (`LOADER_CLASSES`), which knows more
  names than the document lists.

Frames: world and ego are FLU (x forward, y left, z up), the ego origin is the rear axle on the
ground, quaternions are stored (x, y, z, w), times are integer microseconds. A camera's
``nominalSensor2Rig_FLU`` gives the sensor's FLU axes in the rig frame as roll-pitch-yaw in
degrees, composed as extrinsic x-y-z rotations (``Rotation.from_euler("xyz", ...)``); the
optical (OpenCV RDF) axes follow from the sensor's FLU axes by `CAMERA_RDF_IN_SENSOR_FLU`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.agents import OBJECT_CLASSES
from avsim.core.safe_parquet import TableLimits

CALIBRATION, EGOMOTION, OBSTACLE = "calibration_estimate", "egomotion_estimate", "obstacle"
REQUIRED_TABLES: tuple[str, ...] = (CALIBRATION, EGOMOTION)  # what the loader needs to find a clip
MAP_TABLES: tuple[str, ...] = (
    "lane", "lane_line", "road_boundary", "crosswalk", "pole", "road_marking", "wait_line", "traffic_light", "traffic_sign",
)  # fmt: skip
# Tables the loader also reads that have no avsim element (and which no renderer style draws).
UNREAD_TABLES: tuple[str, ...] = ("intersection_area", "road_island", "buffer_zone")
TABLES: tuple[str, ...] = (*REQUIRED_TABLES, OBSTACLE, *MAP_TABLES)

LOADER_FPS = 30  # the loader's `input_pose_fps`: poses are resampled to this rate from the first one
MAX_EXTRAPOLATION_US = 500_000  # a track is drawn at most 0.5 s beyond its first / last observation
SKIPPED_TRACK_PREFIX = "labelstore:"  # duplicated tracks the loader leaves out
VERSION = 1  # the `version` column (unused by the loader)
MPS_PER_MPH = 0.44704  # lane.speed_limit is in miles per hour

# Bounds of one table, checked before it is decoded (rows and decoded bytes counted from its pages).
MAX_TABLE_BYTES = 1 << 30  # file size
MAX_TABLE_ROWS = 2_000_000  # 100 obstacles for 11 minutes at 30 Hz (a clip is 20 s: 60,000 rows)
MAX_DECODED_BYTES = 512 << 20  # decoded (2,000,000 honest obstacle rows: 428 MB counted, 1.1 GB peak converting: bench/hostile_memory.py)
TABLE_LIMITS = TableLimits(MAX_TABLE_ROWS, MAX_DECODED_BYTES, MAX_TABLE_BYTES)

# Obstacle category (lower case) -> class: the loader's table, written in avsim's class names.
LOADER_CLASSES: dict[str, str] = {
    **dict.fromkeys(("automobile", "other_vehicle", "vehicle", "car"), "Car"),
    **dict.fromkeys(("pedestrian", "person"), "Pedestrian"),
    **dict.fromkeys(("bicycle", "cyclist", "motorcycle", "rider"), "Cyclist"),
    **dict.fromkeys(("bus", "truck", "heavy_truck", "train_or_tram_car", "trolley_bus", "trailer"), "Truck"),
}
# Class -> the category avsim writes when a source class would not map to it in the loader.
CLASS_CATEGORY: dict[str, str] = {
    "Car": "automobile", "Truck": "heavy_truck", "Pedestrian": "person", "Cyclist": "rider", "Others": "unknown",
}  # fmt: skip
assert set(CLASS_CATEGORY) == set(OBJECT_CLASSES)

# Lane-line defaults of the loader: a line without colours/styles (or with empty strings) is white solid.
DEFAULT_LINE_COLOR, DEFAULT_LINE_STYLE = "WHITE", "SOLID_SINGLE"

# Camera optical axes (OpenCV RDF) in the sensor's FLU frame: the columns are right, down, forward.
CAMERA_RDF_IN_SENSOR_FLU = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


# The loader's optional frame-time file: when present it renders at these times (microseconds),
# not at LOADER_FPS from the first pose. avsim writes it to keep a scenario's frame 0.
CAMERA_TIMESTAMPS_CAMERA = "camera_front_wide_120fov"
MAX_CAMERA_TIMESTAMPS_BYTES = 64 << 20  # ~1 M frames of {"timestamp": ...}


def camera_timestamps_path(folder: Path, clip_id: str) -> Path:
    """Where the loader looks for a clip's frame times: ``<clip_id>.camera_front_wide_120fov.json``.

    Args:
        folder: the clip folder.
        clip_id: the clip id.

    Returns:
        The path (a JSON list of ``{"timestamp": microseconds}``, one per frame).
    """
    return folder / f"{clip_id}.{CAMERA_TIMESTAMPS_CAMERA}.json"


def table_path(folder: Path, clip_id: str, table: str) -> Path:
    """Where one table of a clip lives.

    Args:
        folder: the clip folder.
        clip_id: the clip id (file-name prefix).
        table: table name, e.g. ``"obstacle"``.

    Returns:
        ``folder/<clip_id>.<table>.parquet``.
    """
    return folder / f"{clip_id}.{table}.parquet"


def loader_class(category: str) -> str:
    """The class the loader gives an obstacle category.

    Args:
        category: the ``obstacle.category`` string (any case).

    Returns:
        One of `avsim.core.agents.OBJECT_CLASSES` ("Others" for every unlisted name).
    """
    return LOADER_CLASSES.get(str(category).lower(), "Others")


def rpy_deg_to_matrix(rpy_deg: Any) -> np.ndarray:
    """Rotation of roll-pitch-yaw angles, as the loader composes them.

    Args:
        rpy_deg: (3,) roll, pitch, yaw in degrees.

    Returns:
        (3, 3) R = Rz(yaw) Ry(pitch) Rx(roll) (extrinsic x, y, z rotations).
    """
    r, p, y = np.radians(np.asarray(rpy_deg, dtype=np.float64).reshape(3))
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    Rx = np.array([[1.0, 0.0, 0.0], [0.0, cr, -sr], [0.0, sr, cr]])
    Ry = np.array([[cp, 0.0, sp], [0.0, 1.0, 0.0], [-sp, 0.0, cp]])
    Rz = np.array([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]])
    return Rz @ Ry @ Rx


def matrix_to_rpy_deg(R: np.ndarray) -> np.ndarray:
    """Inverse of `rpy_deg_to_matrix`.

    Args:
        R: (3, 3) rotation matrix.

    Returns:
        (3,) roll, pitch, yaw in degrees (pitch in [-90, 90]; at +-90 the yaw takes the whole
        rotation about the vertical and roll is 0).
    """
    R = np.asarray(R, dtype=np.float64)
    pitch = np.arcsin(np.clip(-R[2, 0], -1.0, 1.0))
    if abs(R[2, 0]) < 1.0 - 1e-12:
        roll, yaw = np.arctan2(R[2, 1], R[2, 2]), np.arctan2(R[1, 0], R[0, 0])
    else:  # gimbal lock: only roll - yaw (or roll + yaw) is defined
        roll, yaw = 0.0, np.arctan2(-R[0, 1], R[1, 1])
    return np.degrees(np.array([roll, pitch, yaw]))


def sensor_name(camera: str) -> str:
    """The rig-JSON sensor name of an avsim camera (the loader renders only ``camera:*`` sensors).

    Args:
        camera: avsim camera name, e.g. ``camera_front_wide_120fov`` or ``CAM_FRONT``.

    Returns:
        ``camera:`` + the name without a leading ``camera_``, underscores as colons
        (``camera:front:wide:120fov``, ``camera:CAM:FRONT``).
    """
    return "camera:" + camera.removeprefix("camera_").replace("_", ":")


def camera_name(sensor: str) -> str:
    """The camera name the loader gives a rig-JSON sensor (colons as underscores).

    Args:
        sensor: rig-JSON sensor name, e.g. ``camera:front:wide:120fov``.

    Returns:
        ``camera_front_wide_120fov``.
    """
    return sensor.replace(":", "_")


__all__ = [
    "CAMERA_TIMESTAMPS_CAMERA", "MAX_CAMERA_TIMESTAMPS_BYTES", "camera_timestamps_path",
    "CALIBRATION", "EGOMOTION", "OBSTACLE", "REQUIRED_TABLES", "MAP_TABLES", "UNREAD_TABLES", "TABLES",
    "LOADER_FPS", "MAX_EXTRAPOLATION_US", "MPS_PER_MPH", "SKIPPED_TRACK_PREFIX", "VERSION", "MAX_TABLE_BYTES", "MAX_TABLE_ROWS",
    "MAX_DECODED_BYTES", "TABLE_LIMITS", "LOADER_CLASSES", "CLASS_CATEGORY", "DEFAULT_LINE_COLOR", "DEFAULT_LINE_STYLE",
    "CAMERA_RDF_IN_SENSOR_FLU", "table_path", "loader_class", "rpy_deg_to_matrix", "matrix_to_rpy_deg",
    "sensor_name", "camera_name",
]  # fmt: skip
