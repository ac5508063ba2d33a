"""Waymo Open Motion Dataset ``Scenario`` TFRecords.

The TFRecord framing is read by hand (`avsim.scenario.importers.waymo_records`). Each record is a ``waymo_open_dataset.protos.scenario_pb2.Scenario``;
the protobuf classes come from the ``waymo`` extra (``pip install --no-deps
waymo-open-dataset-tf-2-12-0``, which needs only ``protobuf``).

The proto is turned into the ScenarioNet-shaped description that `scenarionet` converts, so the
two share one mapping: tracks (box centre, lwh, heading, valid) at ``timestamps_seconds``; the
SDC track is the ego; typed road lines -> lane lines (`line_types`, Waymo table); road edges ->
road boundaries; crosswalks; speed bumps -> road markings; driveways -> drivable areas; stop
signs -> nominal sign cuboids; lane signal states -> traffic-light state changes (a lane missing
from a step's ``lane_states`` is ``unknown`` at that step), stop points in metadata.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.waymo_records import iter_tfrecord, payload_is_frame

if TYPE_CHECKING:
    from avsim.scenario.types import Scenario

def _scenario_pb2() -> Any:
    try:
        from waymo_open_dataset.protos import scenario_pb2
    except ImportError as exc:
        raise AvsimInputError(
            "waymo_open_dataset",
            "import",
            f"Waymo protobuf classes unavailable ({exc}); install with "
            "`pip install protobuf && pip install --no-deps waymo-open-dataset-tf-2-12-0`",
        ) from None
    return scenario_pb2


def parse_scenarios(path: str | os.PathLike[str]) -> list:
    """All ``Scenario`` protos of a TFRecord file."""
    from google.protobuf.message import DecodeError

    scenario_pb2 = _scenario_pb2()
    out = []
    for k, payload in enumerate(iter_tfrecord(path)):
        msg = scenario_pb2.Scenario()
        try:
            msg.ParseFromString(payload)
        except DecodeError as exc:
            if payload_is_frame(payload):
                raise AvsimInputError(path, f"record {k}", "a Waymo perception Frame, not a motion Scenario: use --from waymo-frame") from None
            raise AvsimInputError(path, f"record {k}", f"not a Waymo Scenario protobuf: {exc}") from None
        out.append(msg)
    if not out:
        raise AvsimInputError(path, "records", "the TFRecord file holds no records")
    return out


def _points(pts: Any) -> np.ndarray:
    return np.array([[p.x, p.y, p.z] for p in pts], dtype=np.float64).reshape(-1, 3)


def scenario_to_description(msg: Any) -> dict[str, Any]:
    """A Waymo ``Scenario`` proto -> the ScenarioNet-shaped dict that `scenarionet` converts."""
    scenario_pb2 = _scenario_pb2()
    from waymo_open_dataset.protos import map_pb2

    n = len(msg.timestamps_seconds)
    tracks = _tracks(msg, scenario_pb2)
    features = map_features(msg, map_pb2)
    lights = _lane_lights(msg, map_pb2)
    if not 0 <= msg.sdc_track_index < len(msg.tracks):
        raise ValueError(f"sdc_track_index {msg.sdc_track_index} out of range")
    return {
        "id": msg.scenario_id,
        "version": "waymo_open_motion",
        "length": n,
        "tracks": tracks,
        "map_features": features,
        "dynamic_map_states": lights,
        "metadata": {
            "dataset": "waymo",
            "ts": np.asarray(msg.timestamps_seconds, dtype=np.float64),
            "sdc_id": str(msg.tracks[msg.sdc_track_index].id),
        },
    }


def _tracks(msg: Any, scenario_pb2: Any) -> dict[str, Any]:
    """ScenarioNet-shaped tracks of a ``Scenario`` proto, by track id."""
    n = len(msg.timestamps_seconds)
    tracks: dict[str, Any] = {}
    for track in msg.tracks:
        cols = np.array(
            [[s.center_x, s.center_y, s.center_z, s.length, s.width, s.height, s.heading, float(s.valid)] for s in track.states],
            dtype=np.float64,
        ).reshape(-1, 8)
        if len(cols) != n:
            raise ValueError(f"track {track.id}: {len(cols)} states for {n} timestamps")
        name = scenario_pb2.Track.ObjectType.Name(track.object_type)
        tracks[str(track.id)] = {
            "type": name,
            "metadata": {"type": name},
            "state": {
                "position": cols[:, 0:3], "length": cols[:, 3], "width": cols[:, 4], "height": cols[:, 5],
                "heading": cols[:, 6], "valid": cols[:, 7] > 0.5,
            },
        }  # fmt: skip
    return tracks


def map_features(msg: Any, map_pb2: Any) -> dict[str, Any]:
    """ScenarioNet-shaped map features of a ``Scenario`` proto, by feature id."""
    features: dict[str, Any] = {}
    for f in msg.map_features:
        kind = f.WhichOneof("feature_data")
        fid = str(f.id)
        if kind == "road_line":
            name = map_pb2.RoadLine.RoadLineType.Name(f.road_line.type).replace("TYPE_", "ROAD_LINE_", 1)
            features[fid] = {"type": name, "polyline": _points(f.road_line.polyline)}
        elif kind == "road_edge":
            name = map_pb2.RoadEdge.RoadEdgeType.Name(f.road_edge.type).replace("TYPE_ROAD_EDGE_", "ROAD_EDGE_", 1)
            features[fid] = {"type": name, "polyline": _points(f.road_edge.polyline)}
        elif kind == "lane":
            features[fid] = {"type": "LANE_" + map_pb2.LaneCenter.LaneType.Name(f.lane.type).replace("TYPE_", ""),
                             "polyline": _points(f.lane.polyline), "speed_limit_mph": float(f.lane.speed_limit_mph)}  # fmt: skip
        elif kind in ("crosswalk", "speed_bump", "driveway"):
            features[fid] = {"type": kind.upper(), "polygon": _points(getattr(f, kind).polygon)}
        elif kind == "stop_sign":
            p = f.stop_sign.position
            features[fid] = {"type": "STOP_SIGN", "position": np.array([p.x, p.y, p.z]), "lane": list(f.stop_sign.lane)}
    return features


def _lane_lights(msg: Any, map_pb2: Any) -> dict[str, Any]:
    """Per-lane traffic-signal state sequences (ScenarioNet ``dynamic_map_states``), by lane id."""
    lanes = sorted({int(s.lane) for step in msg.dynamic_map_states for s in step.lane_states})
    lights: dict[str, Any] = {}
    for lane in lanes:
        seq, stop = [], None
        for step in msg.dynamic_map_states:
            match = [s for s in step.lane_states if s.lane == lane]
            seq.append(map_pb2.TrafficSignalLaneState.State.Name(match[0].state) if match else "LANE_STATE_UNKNOWN")
            if match and stop is None:
                stop = [match[0].stop_point.x, match[0].stop_point.y, match[0].stop_point.z]
        lights[str(lane)] = {"type": "TRAFFIC_LIGHT", "state": {"object_state": seq}, "stop_point": np.array(stop)}
    return lights


def load_waymo(path: str | os.PathLike[str], rig_name: str | None = None, index: int = 0) -> Scenario:
    """Convert the `index`-th ``Scenario`` of a Waymo Open Motion TFRecord to a `Scenario`."""
    from avsim.scenario.importers.scenarionet import convert_description

    path = Path(path)
    scenarios = parse_scenarios(path)
    if not 0 <= index < len(scenarios):
        raise AvsimInputError(path, "records", f"scenario index {index} out of range (file has {len(scenarios)})")
    try:
        desc = scenario_to_description(scenarios[index])
    except ValueError as exc:
        raise AvsimInputError(path, f"record {index}", str(exc)) from None
    scenario = convert_description(desc, path, rig_name=rig_name or "waymo", source_format="waymo")
    meta = dict(scenario.metadata, waymo_records_in_file=len(scenarios), waymo_record_index=index)
    return scenario.replace(metadata=meta)
