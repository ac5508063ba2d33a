"""A ClipGT clip written by hand from cosmos-transfer2.5's ``docs/world_scenario_parquet.md``.

Every table of the document (and one the loader also reads, ``intersection_area``), written the
way the document's own example does it: Python dicts in the documented layout handed to the
parquet writer, which infers the schema (as ``pd.DataFrame(...).to_parquet`` does). Nothing here
comes from avsim's exporter. The clip holds the cases the loader treats specially: f-theta
cameras with a ``pixeldistance-to-angle`` polynomial (the document's own numbers), a ``bw-poly``
with five coefficients, a forward ``angle-to-pixeldistance`` polynomial, a hand-written pinhole
camera, a non-camera sensor and a camera without intrinsics; 10 Hz ego poses in a world frame
whose origin is not the first pose; ``labelstore:`` duplicates, one-row, NaN, repeated-time and
zero-quaternion tracks; a ``VIRTUAL`` lane line; a one-point pole; a light with null dimensions
(the loader then takes its default size; a null ``dimensions`` struct itself makes it fail).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

CLIP_ID = "b1d3c0de-0000-4000-8000-00000000cafe"
T0_US = 1_700_000_000_000_000
EGO_HZ, EGO_POSES = 10, 21  # 2 s
WORLD_ORIGIN = np.array([1000.0, -500.0, 5.0])  # where the first pose stands (not the origin)
HEADING_RAD = np.radians(30.0)
SPEED_MPS = 10.0
YAW_RATE = 0.05  # rad/s


def ego_pose(t_s: float) -> tuple[np.ndarray, float]:
    """Position (3,) and heading (rad) of the hand-made ego at `t_s` seconds (a gentle left arc)."""
    yaw = HEADING_RAD + YAW_RATE * t_s
    # integral of SPEED * (cos, sin)(HEADING + YAW_RATE t)
    x = SPEED_MPS / YAW_RATE * (np.sin(yaw) - np.sin(HEADING_RAD))
    y = -SPEED_MPS / YAW_RATE * (np.cos(yaw) - np.cos(HEADING_RAD))
    return WORLD_ORIGIN + np.array([x, y, 0.0]), float(yaw)


def _xyz(p) -> dict:
    return {"x": float(p[0]), "y": float(p[1]), "z": float(p[2])}


def _yaw_quat(yaw: float) -> dict:
    return {"x": 0.0, "y": 0.0, "z": float(np.sin(yaw / 2)), "w": float(np.cos(yaw / 2))}


def _sensor(name: str, properties: dict, t: list, rpy: list) -> dict:
    return {
        "name": name, "properties": properties, "nominalSensor2Rig_FLU": {"t": t, "roll-pitch-yaw": rpy},
        "correction_sensor_R_FLU": {"roll-pitch-yaw": [-0.150, -0.014, 0.231]}, "correction_rig_T": [0.080, 0.009, 0.009],
        "car-mask": "unused", "parameter": "unused", "protocol": "camera.gmsl",
    }  # fmt: skip


RIG = {
    "rig": {
        "sensors": [
            _sensor("camera:front:wide:120fov", {  # the document's example, verbatim
                "Model": "ftheta", "cx": "1919.420", "cy": "1078.106", "width": "3848", "height": "2168",
                "polynomial": "0 0.000538 2.356e-09 1.907e-12 1.204e-16", "polynomial-type": "pixeldistance-to-angle",
                "linear-c": "1.000000", "linear-d": "0.000000", "linear-e": "0.000000"},
                [1.697, -0.010, 1.443], [0.130, 0.468, -0.714]),
            _sensor("camera:cross:left:120fov", {  # DriveWorks' older key, no polynomial-type, no linear terms
                "Model": "ftheta", "cx": "960", "cy": "604", "width": "1920", "height": "1208",
                "bw-poly": "0.0 0.000545421498827636 -1.6216719633103e-10 -4.64720492990289e-12 2.85224527762934e-16"},
                [2.0, 0.9, 1.0], [0.0, 0.0, 90.0]),
            _sensor("camera:front:tele:30fov", {  # a forward (angle -> pixel) polynomial
                "Model": "ftheta", "cx": "960.5", "cy": "540.25", "width": "1920", "height": "1080",
                "polynomial": "0 3600 0 -50 0 0", "polynomial-type": "angle-to-pixeldistance",
                "linear-c": "1.0005", "linear-d": "0.0002", "linear-e": "-0.0001"},
                [1.7, 0.0, 1.5], [0.0, 2.0, 0.0]),
            _sensor("camera:rear:tele:30fov", {  # a pinhole camera, written by hand (no polynomial)
                "Model": "pinhole", "fx": "2000", "fy": "1990", "cx": "640", "cy": "360", "width": "1280",
                "height": "720", "distortion": "-0.05 0.01 0.0005 -0.0003 0.0"},
                [-1.0, 0.0, 1.6], [0.0, 1.0, 180.0]),
            _sensor("camera:rear:left:70fov", {"Model": "ftheta", "cx": "960", "cy": "540", "width": "1920", "height": "1080"},
                    [1.0, 1.0, 1.0], [0.0, 0.0, 150.0]),  # no polynomial: the loader skips it
            {"name": "imu:chassis", "properties": {}, "nominalSensor2Rig_FLU": {"t": [0, 0, 0], "roll-pitch-yaw": [0, 0, 0]}},
        ],
        "vehicle": {"valid": True, "value": {}},
    },
    "version": 7,
}  # fmt: skip


def ego_rows() -> list[dict]:
    rows = []
    for k in range(EGO_POSES):
        p, yaw = ego_pose(k / EGO_HZ)
        rows.append({"key": {"clip_id": CLIP_ID, "timestamp_micros": T0_US + k * 100_000},
                     "egomotion_estimate": {"name": "egomotion_deepmap", "location": _xyz(p), "orientation": _yaw_quat(yaw)},
                     "version": 3})  # fmt: skip
    return rows


def _obstacle(track: str, k: int, centre, size=(4.5, 1.9, 1.6), yaw=0.3, category="automobile", quat=None) -> dict:
    return {"key": {"clip_id": CLIP_ID, "timestamp_micros": T0_US + k * 100_000, "label_class_id": "v1"},
            "obstacle": {"trackline_id": track, "center": _xyz(centre), "size": _xyz(size),
                         "orientation": quat or _yaw_quat(yaw), "category": category},
            "version": 3}  # fmt: skip


def obstacle_rows() -> list[dict]:
    front = WORLD_ORIGIN + [15.0, 8.0, 0.8]
    rows = [_obstacle("101", k, front + [0.9 * k, 0.5 * k, 0.0]) for k in range(21)]
    rows += [_obstacle("labelstore:101", k, front) for k in range(3)]  # duplicate sighting: dropped
    rows += [_obstacle("102", k, front + [-3.0, 2.0 + 0.1 * k, 0.0], (0.6, 0.6, 1.7), 1.2, "person") for k in range(6)]
    rows.append(_obstacle("102", 2, front + [50.0, 50.0, 0.0], (0.6, 0.6, 1.7), 1.2, "person"))  # repeated time: the first row wins
    rows.append(_obstacle("103", 4, front + [10.0, 0.0, 0.0]))  # one row: dropped
    rows += [_obstacle("104", k, front + [k, -5.0, 0.0]) for k in range(4)]
    rows[-1]["obstacle"]["center"]["y"] = float("nan")  # a NaN: the track is dropped
    rows += [_obstacle("105", k, front + [20.0, -3.0, 1.0], (11.0, 2.5, 3.2), 0.0, "school_bus") for k in range(5)]
    rows += [_obstacle("106", k, front + [5.0, -2.0 + 0.4 * k, 0.0], (1.8, 0.6, 1.7), 1.5, "rider") for k in range(5)]
    rows[-2]["obstacle"]["orientation"] = {"x": 0.0, "y": 0.0, "z": 0.0, "w": 0.0}  # zero quaternion: the row is dropped
    rows += [_obstacle("107", k, front + [-8.0, 4.0, 1.5], (12.0, 2.6, 4.0), 0.1, "TRAILER") for k in range(0, 21, 5)]
    return rows


def _map_key(k: int) -> dict:
    return {"clip_id": CLIP_ID, "label_class_id": "map", "map_id": "", "map_id_version": "1"}


def _pts(*points) -> list[dict]:
    return [_xyz(WORLD_ORIGIN + np.asarray(p, float)) for p in points]


def map_tables() -> dict[str, list[dict]]:
    lane = [
        {"left_rail": _pts((0, 2, 0), (20, 3, 0), (40, 5, 0)), "right_rail": _pts((0, -2, 0), (40, 1, 0)),
         "left_edge_styles": ["SOLID"], "right_edge_styles": ["DASHED"], "left_edge_colors": ["WHITE"],
         "right_edge_colors": ["WHITE"], "lane_direction": "STRAIGHT", "speed_limit": 25.0, "vehicle_types": ["CAR"]},
        {"left_rail": _pts((0, 6, 0), (40, 9, 0)), "right_rail": _pts((0, 2, 0), (40, 5, 0)),
         "left_edge_styles": [], "right_edge_styles": [], "left_edge_colors": [], "right_edge_colors": [],
         "lane_direction": "LEFT_TURN", "speed_limit": None, "vehicle_types": []},
    ]  # fmt: skip
    lane_line = [
        {"line_rail": _pts((0, 2, 0), (10, 2.5, 0), (20, 3, 0), (30, 4, 0)), "colors": ["YELLOW", "YELLOW", "YELLOW", "WHITE"],
         "styles": ["SOLID_GROUP", "SOLID_GROUP", "SOLID_GROUP", "DASHED_SINGLE"], "left_driving_direction": "", "right_driving_direction": ""},
        {"line_rail": _pts((0, -2, 0), (40, 1, 0)), "colors": ["WHITE", "WHITE"], "styles": ["VIRTUAL", "VIRTUAL"],
         "left_driving_direction": "", "right_driving_direction": ""},
        {"line_rail": _pts((0, 6, 0), (20, 7, 0), (40, 9, 0)), "colors": ["white"], "styles": ["long_dashed_single"],
         "left_driving_direction": "", "right_driving_direction": ""},
        {"line_rail": _pts((0, 9, 0)), "colors": [], "styles": [], "left_driving_direction": "", "right_driving_direction": ""},
    ]  # fmt: skip
    return {
        "lane": lane, "lane_line": lane_line,
        "road_boundary": [{"category": "tall_curb", "location": _pts((0, -4, 0), (20, -3, 0), (40, -1, 0))},
                          {"category": "wall", "location": _pts((-50, -22, 0), (-10, -7, 0))}],  # behind, on the left
        "crosswalk": [{"category": "PEDESTRIAN", "location": _pts((45, -4, 0), (49, -4, 0), (49, 12, 0), (45, 12, 0))}],
        "pole": [{"category": "LIGHT", "location": _pts((44, -6, 0), (44, -6, 6))}, {"category": "TREE", "location": _pts((30, -7, 0))}],
        "road_marking": [{"category": "ROI_POLYGON_DIRECTION_PAINT_FORWARD", "location": _pts((20, 0, 0), (22, 0, 0), (22, 1, 0))}],
        "wait_line": [{"category": "STOP", "location": _pts((44, -2, 0), (44, 9, 0)), "is_implicit": False, "intersection_subtype": "ENTRY"}],
        "traffic_light": [
            {"center": _xyz(WORLD_ORIGIN + [46, -6, 5]), "dimensions": {"x": 0.4, "y": 0.4, "z": 1.1},
             "orientation": _yaw_quat(np.pi), "category": "traffic_light"},
            {"center": _xyz(WORLD_ORIGIN + [46, 10, 5]), "dimensions": {"x": None, "y": None, "z": None}, "orientation": _yaw_quat(np.pi), "category": "traffic_light"},
        ],
        "traffic_sign": [{"center": _xyz(WORLD_ORIGIN + [43, -7, 2.5]), "dimensions": {"x": 0.05, "y": 0.75, "z": 0.75},
                          "orientation": _yaw_quat(np.pi), "category": "TRAFFIC_SIGN_REGULATORY_R1_STOP"}],
        "intersection_area": [{"location": _pts((44, -4, 0), (60, -4, 0), (60, 12, 0))}],
    }  # fmt: skip


def write_handmade_clip(folder: Path) -> Path:
    """Write the clip into `folder` (created); returns `folder`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    tables = {
        "egomotion_estimate": ego_rows(),
        "calibration_estimate": [{"key": {"clip_id": CLIP_ID, "timestamp_micros": -1},
                                  "calibration_estimate": {"name": "CUSTOM_RIG", "rig_json": json.dumps(RIG)}, "version": 3}],
        "obstacle": obstacle_rows(),
    }  # fmt: skip
    for name, rows in map_tables().items():
        tables[name] = [{"key": _map_key(k), name: row, "version": 3} for k, row in enumerate(rows)]
    for name, rows in tables.items():
        pq.write_table(pa.Table.from_pylist(rows), folder / f"{CLIP_ID}.{name}.parquet")
    return folder
