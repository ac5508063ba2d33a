"""The 13 tables of a nuScenes v1.0 dataset, built from typed records and written as its JSON files.

`NuScenesTables` collects the records of one or more scenes (`add_log`, `add_sensor`, `add_scene`,
`add_channel`, `add_annotations`) with every token derived from content (`content_token`: the
first 32 hex digits of a SHA-256 of the record's identity), so the same input gives the same
tokens and the same bytes, and two exports of different inputs never share a token by chance. A
record added twice with the same token must be the same record (scenes of one scenario share its
log, sensors and calibrations); `merge` joins the tables of several exports the same way.

Units and frames are nuScenes': timestamps in whole microseconds, translations in metres in the
global (export) frame, rotations as (w, x, y, z) quaternions, box sizes (width, length, height),
`calibrated_sensor` = the sensor's pose in the ego frame, camera intrinsics 3x3 ([] for a LiDAR).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.transforms import SE3, matrix_to_quat
from avsim.core.typing import NDArrayFloat
from avsim.scenario.exporters.nuscenes_names import ATTRIBUTES, CATEGORIES, VISIBILITY_BINS

TABLE_NAMES: tuple[str, ...] = ("category", "attribute", "visibility", "instance", "sensor", "calibrated_sensor", "ego_pose",
                                "log", "scene", "sample", "sample_data", "sample_annotation", "map")  # fmt: skip


def content_token(*parts: object) -> str:
    """A nuScenes-style token (32 hex digits) of some identifying values.

    Args:
        *parts: JSON-ready values (the record's identity).

    Returns:
        The token.
    """
    return hashlib.sha256(json.dumps(parts, separators=(",", ":"), default=str).encode()).hexdigest()[:32]


def _pose(T: SE3) -> tuple[list[float], list[float]]:
    """(translation, rotation wxyz) lists of one pose."""
    return np.asarray(T.translation, np.float64).tolist(), matrix_to_quat(np.asarray(T.rotation, np.float64)).tolist()


@dataclass(frozen=True)
class SampleDataRecord:
    """One capture of one channel: time (us), the ego pose at it (export frame), the file (relative to
    the dataroot), whether it is the keyframe of its sample, the sample it belongs to (a keyframe's
    own sample; a sweep's next sample), image size (0 for a LiDAR)."""

    timestamp_us: int
    world_SE3_ego: SE3
    filename: str
    is_key_frame: bool
    sample_index: int
    width: int = 0
    height: int = 0


@dataclass(frozen=True)
class SampleBoxes:
    """One keyframe's annotations (K boxes, export frame): track ids, categories, attributes (None:
    none), visibility tokens, centres (K, 3), sizes (K, 3) length, width, height, rotations (K, 4)
    world_R_object wxyz, LiDAR point counts (K,)."""

    track_id: Sequence[str]
    category: Sequence[str]
    attribute: Sequence[str | None]
    visibility: Sequence[str]
    center_m: NDArrayFloat
    size_lwh_m: NDArrayFloat
    rotation_wxyz: NDArrayFloat
    num_lidar_pts: Sequence[int]


class NuScenesTables:
    """The records of the 13 tables, in insertion order (the static tables always complete)."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in TABLE_NAMES}
        for i, name in enumerate(CATEGORIES):
            self._put("category", {"token": content_token("category", name), "name": name,
                                   "description": f"nuScenes category {name}", "index": i})  # fmt: skip
        for name in ATTRIBUTES:
            self._put("attribute", {"token": content_token("attribute", name), "name": name, "description": f"nuScenes attribute {name}"})
        for tok, (level, lo) in VISIBILITY_BINS.items():
            hi = {"1": 40, "2": 60, "3": 80, "4": 100}[tok]
            self._put("visibility", {"token": tok, "level": level,
                                     "description": f"visibility of whole object is between {round(lo * 100)} and {hi}%"})  # fmt: skip

    def _put(self, table: str, record: dict[str, Any]) -> str:
        rows = self.tables[table]
        token = record["token"]
        if token in rows and rows[token] != record:
            raise AvsimInputError(table, token, "two different records with one token (two inputs with the same identity)")
        rows[token] = record
        return token

    def add_log(self, key: str, logfile: str, location: str, date_captured: str = "1970-01-01") -> str:
        """A log (one drive: one scenario) and its map record (mask `maps/<log token>.png`).

        Args:
            key: the log's identity (e.g. the scenario's digest).
            logfile, location, date_captured: its fields.

        Returns:
            The log token.
        """
        token = self._put("log", {"token": content_token("log", key), "logfile": logfile, "vehicle": "avsim",
                                  "date_captured": date_captured, "location": location})  # fmt: skip
        self._put("map", {"token": content_token("map", token), "log_tokens": [token], "category": "semantic_prior",
                          "filename": f"maps/{token}.png"})  # fmt: skip
        return token

    def add_sensor(self, channel: str, modality: str, ego_SE3_sensor: SE3, intrinsic: NDArrayFloat | None) -> str:
        """A sensor and one calibration of it.

        Args:
            channel: e.g. CAM_FRONT, LIDAR_TOP.
            modality: "camera" or "lidar".
            ego_SE3_sensor: the sensor in the ego frame (a camera: OpenCV axes).
            intrinsic: (3, 3) a camera's K; None for a LiDAR.

        Returns:
            The calibrated_sensor token.
        """
        sensor = self._put("sensor", {"token": content_token("sensor", channel), "channel": channel, "modality": modality})
        translation, rotation = _pose(ego_SE3_sensor)
        K = [] if intrinsic is None else np.asarray(intrinsic, np.float64).reshape(3, 3).tolist()
        return self._put("calibrated_sensor", {"token": content_token("calibrated_sensor", sensor, translation, rotation, K),
                                               "sensor_token": sensor, "translation": translation, "rotation": rotation,
                                               "camera_intrinsic": K})  # fmt: skip

    def add_scene(self, key: str, name: str, description: str, log_token: str, sample_times_us: Sequence[int]) -> list[str]:
        """A scene and its samples (keyframes), linked prev / next.

        Args:
            key: the scene's identity.
            name, description: its fields.
            log_token: its log.
            sample_times_us: the keyframe times, increasing.

        Returns:
            The sample tokens, in order.
        """
        scene = content_token("scene", key)
        tokens = [content_token("sample", scene, int(t)) for t in sample_times_us]
        for k, t in enumerate(sample_times_us):
            self._put("sample", {"token": tokens[k], "timestamp": int(t), "prev": tokens[k - 1] if k else "",
                                 "next": tokens[k + 1] if k + 1 < len(tokens) else "", "scene_token": scene})  # fmt: skip
        self._put("scene", {"token": scene, "log_token": log_token, "nbr_samples": len(tokens), "first_sample_token": tokens[0],
                            "last_sample_token": tokens[-1], "name": name, "description": description})  # fmt: skip
        return tokens

    def add_channel(self, scene_token: str, sample_tokens: Sequence[str], channel: str, calibrated_sensor: str,
                    records: Sequence[SampleDataRecord]) -> list[str]:  # fmt: skip
        """One channel's captures in a scene: sample_data (linked prev / next) and their ego poses.

        Args:
            scene_token: the scene (`sample_tokens[0]`'s scene).
            sample_tokens: the scene's samples.
            channel: the channel.
            calibrated_sensor: its calibration.
            records: the captures, in time order.

        Returns:
            The sample_data tokens, in order.
        """
        tokens = [content_token("sample_data", scene_token, channel, r.timestamp_us, r.filename) for r in records]
        for k, r in enumerate(records):
            translation, rotation = _pose(r.world_SE3_ego)
            self._put("ego_pose", {"token": tokens[k], "timestamp": r.timestamp_us, "rotation": rotation, "translation": translation})
            fileformat = "pcd" if r.filename.endswith(".pcd.bin") else Path(r.filename).suffix.lstrip(".")
            self._put("sample_data", {
                "token": tokens[k], "sample_token": sample_tokens[r.sample_index], "ego_pose_token": tokens[k],
                "calibrated_sensor_token": calibrated_sensor, "timestamp": r.timestamp_us, "fileformat": fileformat,
                "is_key_frame": bool(r.is_key_frame), "height": int(r.height), "width": int(r.width), "filename": r.filename,
                "prev": tokens[k - 1] if k else "", "next": tokens[k + 1] if k + 1 < len(tokens) else "",
            })  # fmt: skip
        return tokens

    def add_annotations(self, scene_token: str, sample_tokens: Sequence[str], boxes: Sequence[SampleBoxes]) -> int:
        """Every keyframe's boxes: one instance per track of the scene, annotations linked prev / next along it.

        Args:
            scene_token: the scene.
            sample_tokens: its samples.
            boxes: each sample's boxes (same order as `sample_tokens`).

        Returns:
            The number of annotations added.
        """
        by_track: dict[str, list[str]] = {}
        category_of: dict[str, str] = {}
        rows: list[dict[str, Any]] = []
        for sample, b in zip(sample_tokens, boxes):
            for j, track in enumerate(b.track_id):
                instance = content_token("instance", scene_token, track)
                token = content_token("sample_annotation", instance, sample)
                category_of.setdefault(instance, b.category[j])
                by_track.setdefault(instance, []).append(token)
                attr = b.attribute[j]
                l, w, h = (float(v) for v in b.size_lwh_m[j])
                rows.append({"token": token, "sample_token": sample, "instance_token": instance,
                             "visibility_token": b.visibility[j],
                             "attribute_tokens": [content_token("attribute", attr)] if attr else [],
                             "translation": np.asarray(b.center_m[j], np.float64).tolist(), "size": [w, l, h],
                             "rotation": np.asarray(b.rotation_wxyz[j], np.float64).tolist(), "prev": "", "next": "",
                             "num_lidar_pts": int(b.num_lidar_pts[j]), "num_radar_pts": 0})  # fmt: skip
        by_token = {r["token"]: r for r in rows}
        for anns in by_track.values():
            for a, b2 in zip(anns, anns[1:]):
                by_token[a]["next"], by_token[b2]["prev"] = b2, a
        for r in rows:
            self._put("sample_annotation", r)
        for instance, anns in by_track.items():
            self._put("instance", {"token": instance, "category_token": content_token("category", category_of[instance]),
                                   "nbr_annotations": len(anns), "first_annotation_token": anns[0],
                                   "last_annotation_token": anns[-1]})  # fmt: skip
        return len(rows)

    def set_location(self, log_token: str, location: str) -> None:
        """Change one log's location (the map expansion it is drawn in).

        Args:
            log_token: the log.
            location: the new location.
        """
        self.tables["log"][log_token]["location"] = location

    def merge(self, other: NuScenesTables) -> None:
        """Add another export's records (same-token records must be equal).

        Args:
            other: the tables to add.
        """
        for table, rows in other.tables.items():
            for record in rows.values():
                self._put(table, record)

    def counts(self) -> dict[str, int]:
        """Records per table."""
        return {name: len(rows) for name, rows in self.tables.items()}

    def documents(self) -> dict[str, str]:
        """Each table's JSON text (`<table>.json`): a list of records, in insertion order."""
        return {name: json.dumps(list(rows.values()), indent=0) + "\n" for name, rows in self.tables.items()}

    @classmethod
    def read(cls, folder: Path) -> NuScenesTables:
        """Tables written by `documents` (an earlier export, to merge).

        Args:
            folder: the `v1.0-*` folder.

        Returns:
            The tables.
        """
        from avsim.core.safe_json import read_json

        out = cls()
        for name in TABLE_NAMES:
            rows = read_json(folder / f"{name}.json")
            if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("token"), str) for r in rows):
                raise AvsimInputError(folder / f"{name}.json", "records", "expected a list of records with a token each")
            for r in rows:
                out._put(name, r)
        return out
