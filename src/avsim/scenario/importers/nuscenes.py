"""nuScenes through nuscenes-devkit (tables) and its map expansion v1.3.

Source: a nuScenes dataroot holding one ``v1.0-*`` table folder and ``maps/expansion/*.json``;
``DATAROOT::scene-name`` picks a scene (required when the tables hold several).

- ego: the full (quaternion) ego poses of every LIDAR_TOP sample_data of the scene (keyframes
  and sweeps, about 20 Hz in full nuScenes), merged with the ego poses of the CAM_* sample_data
  inside that span (each has its own, at its capture time; equal times keep the LIDAR_TOP one);
  nuScenes ego poses have z = 0 by convention;
- rig: the six CAM_* channels' calibrated sensors (intrinsic K, sensor-to-ego pose; the
  nuScenes camera frame is OpenCV RDF), the image size of their sample_data and their capture
  offsets (median over the keyframes of camera sample_data time - sample time: the cameras
  fire as the lidar sweeps past them, e.g. CAM_FRONT about -36 ms);
- agents: the 2 Hz keyframe ``sample_annotation`` boxes as they are, one track per
  ``instance_token``, source class = ``category_name``; resampling to the render rate is
  `AgentTracks.resample`'s job;
- map (2-D; z = 0), limited to the ego path's bounding box plus `MAP_MARGIN_M`:
  lane dividers -> lane lines typed per vertex from ``lane_divider_segments[*].segment_type``
  (`line_types`, nuScenes table; ``NIL`` = unpainted, split out), road dividers -> yellow
  solid lane lines, drivable areas -> drivable-area polygons and their rings (outer and holes)
  -> road boundaries, pedestrian crossings -> crosswalks, stop lines -> wait lines (the long
  midline of the stop polygon's minimum rotated rectangle), traffic lights -> cuboids of
  nominal size at their pose, lanes -> lanes (divider-segment nodes as rails, the arcline path
  discretised at 0.5 m as centre line) when both rails exist;
- lights: nuScenes has no traffic-light states (empty).

A dataroot written by `avsim export nuscenes` has `avsim_export.json` (`AVSIM_MANIFEST`): its
logs' export-frame offsets and its scenes' time offsets are taken off again (the scenario comes
back in its source frame and times), its
cameras get their avsim names back (every camera sensor is read, in the source rig's order), and a
log past nuScenes' four locations has its map read from `maps/expansion/avsim-<log token>.json`.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.common import (
    MapBuilder,
    TrackBuilder,
    build_scenario,
    check_finite,
    check_increasing,
    split_selector,
)
from avsim.scenario.importers.line_types import lane_line_type

CAMERA_CHANNELS: tuple[str, ...] = (
    "CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK_RIGHT", "CAM_BACK", "CAM_BACK_LEFT", "CAM_FRONT_LEFT",
)  # fmt: skip

if TYPE_CHECKING:
    from avsim.core.agents import AgentTracks
    from avsim.core.rig import CameraRig
    from avsim.core.transforms import SE3
    from avsim.scenario.types import Scenario
MAP_MARGIN_M = 150.0  # map kept around the ego path's bounding box
AVSIM_MANIFEST = "avsim_export.json"  # written by `avsim export nuscenes` (avsim.render.labels.nuscenes_export)
LANE_RESOLUTION_M = 0.5
TRAFFIC_LIGHT_SIZE_M = (0.35, 0.35, 1.0)  # nominal housing (depth, width, height); not in the map


def _find_version(root: Path) -> tuple[Path, str]:
    """(dataroot, version) for a dataroot or a ``v1.0-*`` folder."""
    if (root / "scene.json").exists():
        return root.parent, root.name
    if not root.is_dir():
        raise AvsimInputError(root, "dataroot", "not found or not a folder")
    versions = sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "scene.json").exists())
    if not versions:
        raise AvsimInputError(root, "dataroot", "no v1.0-*/scene.json table folder inside")
    if len(versions) > 1:
        raise AvsimInputError(root, "dataroot", f"several table versions {versions}; point at one of them")
    return root, versions[0]


def open_nuscenes(dataroot: Path, version: str) -> Any:
    """`nuscenes.NuScenes` with its console chatter suppressed; table errors -> input errors."""
    from nuscenes.nuscenes import NuScenes

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return NuScenes(version=version, dataroot=str(dataroot), verbose=False)
    except (KeyError, ValueError, AssertionError, OSError, TypeError) as exc:
        raise AvsimInputError(dataroot / version, "tables", f"nuscenes-devkit cannot load the tables: {type(exc).__name__}: {exc}") from None


def _pick_scene(nusc: Any, scene_name: str | None, where: Path) -> dict:
    scenes = nusc.scene
    if scene_name is None:
        if len(scenes) != 1:
            names = ", ".join(s["name"] for s in scenes[:5])
            raise AvsimInputError(where, "scene", f"{len(scenes)} scenes ({names}, ...); select one with DATAROOT::scene-name")
        return scenes[0]
    for s in scenes:
        if s["name"] == scene_name or s["token"] == scene_name:
            return s
    raise AvsimInputError(where, "scene", f"no scene named {scene_name!r}")


def _scene_samples(nusc: Any, scene: dict) -> list[dict]:
    samples, token = [], scene["first_sample_token"]
    while token:
        sample = nusc.get("sample", token)
        samples.append(sample)
        token = sample["next"]
    return samples


def _channel_chain(nusc: Any, samples: list[dict], channel: str) -> list[dict]:
    """All sample_data of `channel` from the first to the last keyframe of the scene."""
    if channel not in samples[0]["data"]:
        return []
    records, token = [], samples[0]["data"][channel]
    last = nusc.get("sample_data", samples[-1]["data"][channel])["timestamp"] if channel in samples[-1]["data"] else None
    while token:
        sd = nusc.get("sample_data", token)
        if last is not None and sd["timestamp"] > last:
            break
        records.append(sd)
        token = sd["next"]
    return records


def _chain_poses(nusc: Any, chain: list[dict], where: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(timestamps ns (N,), unit quaternions wxyz (N, 4), translations (N, 3)) of the records' ego poses."""
    poses = [nusc.get("ego_pose", sd["ego_pose_token"]) for sd in chain]
    t_ns = np.array([p["timestamp"] for p in poses], dtype=np.int64).reshape(-1) * 1000
    q = check_finite(np.array([p["rotation"] for p in poses], dtype=np.float64).reshape(-1, 4), where, "ego_pose.rotation")
    t = check_finite(np.array([p["translation"] for p in poses], dtype=np.float64).reshape(-1, 3), where, "ego_pose.translation")
    norm = np.linalg.norm(q, axis=1)
    if np.any(np.abs(norm - 1) > 1e-3):
        raise AvsimInputError(where, "ego_pose.rotation", f"non-unit quaternion (norm {norm[np.argmax(np.abs(norm - 1))]:.4f})")
    return t_ns, q / norm[:, None], t


def _ego(nusc: Any, samples: list[dict], where: Path, channels: tuple[str, ...] = CAMERA_CHANNELS) -> tuple[np.ndarray, SE3, int]:
    """The scene's ego poses: every LIDAR_TOP (else CAM_FRONT) sample_data pose, plus the poses of
    the CAM_* sample_data inside that span (each camera record has its own ego pose, at its own
    capture time). Returns (timestamps ns, world_SE3_ego, number of camera poses added)."""
    from avsim.core.transforms import SE3

    chain = _channel_chain(nusc, samples, "LIDAR_TOP") or _channel_chain(nusc, samples, "CAM_FRONT")
    if len(chain) < 2:
        raise AvsimInputError(where, "ego_pose", "the scene needs at least 2 ego poses (LIDAR_TOP or CAM_FRONT sample_data)")
    t_ns, q, t = _chain_poses(nusc, chain, where)
    check_increasing(np.sort(t_ns, kind="stable"), where, "ego_pose.timestamp")  # the reference chain itself must not repeat a time
    lo, hi = t_ns.min(), t_ns.max()
    parts = [(t_ns, q, t)]
    for channel in channels:
        ct, cq, cp = _chain_poses(nusc, _channel_chain(nusc, samples, channel), where)
        inside = (ct >= lo) & (ct <= hi)  # the span (and so the frame times) stays the LIDAR_TOP one
        parts.append((ct[inside], cq[inside], cp[inside]))
    all_t = np.concatenate([p[0] for p in parts])
    order = np.argsort(all_t, kind="stable")  # the LIDAR_TOP pose comes first among equal times ...
    keep = np.r_[True, all_t[order][1:] != all_t[order][:-1]]  # ... and is the one kept
    order = order[keep]
    times = check_increasing(all_t[order], where, "ego_pose.timestamp")
    quats, positions = np.concatenate([p[1] for p in parts])[order], np.concatenate([p[2] for p in parts])[order]
    added = len(times) - len(t_ns)
    return times, SE3.from_quat(quats, positions), int(added)


def _source_rate_hz(nusc: Any, samples: list[dict]) -> float:
    """Median rate of the LIDAR_TOP (else CAM_FRONT) sample_data chain."""
    chain = _channel_chain(nusc, samples, "LIDAR_TOP") or _channel_chain(nusc, samples, "CAM_FRONT")
    t_ns = np.unique(np.array([int(sd["timestamp"]) for sd in chain], dtype=np.int64)) * 1000
    return round(float(1e9 / np.median(np.diff(t_ns))), 3) if len(t_ns) > 1 else 0.0


def _capture_offsets_ns(nusc: Any, samples: list[dict], channels: tuple[str, ...], where: Path) -> np.ndarray:
    """(V,) int64: per camera, the median over the keyframes of (camera sample_data time - sample time)."""
    from avsim.core.rig import MAX_CAPTURE_OFFSET_NS

    out = []
    for channel in channels:
        d_ns = [
            (int(nusc.get("sample_data", s["data"][channel])["timestamp"]) - int(s["timestamp"])) * 1000
            for s in samples if channel in s["data"]
        ]  # fmt: skip
        offset = int(np.round(np.median(np.array(d_ns, dtype=np.float64)))) if d_ns else 0
        if abs(offset) > MAX_CAPTURE_OFFSET_NS:
            raise AvsimInputError(where, f"sample_data[{channel}].timestamp", f"{offset / 1e6:.1f} ms from the sample time (more than 1 s)")
        out.append(offset)
    return np.array(out, dtype=np.int64)


def _rig(nusc: Any, samples: list[dict], where: Path, channels: tuple[str, ...] = CAMERA_CHANNELS,
         names_of: dict[str, str] | None = None) -> CameraRig:  # fmt: skip
    from avsim.core.cameras import PinholeCamera
    from avsim.core.errors import AvsimValueError
    from avsim.core.rig import CameraRig
    from avsim.core.transforms import SE3

    names, cameras, poses = [], [], []
    for channel in channels:
        if channel not in samples[0]["data"]:
            continue
        sd = nusc.get("sample_data", samples[0]["data"][channel])
        cs = nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
        K = np.asarray(cs.get("camera_intrinsic") or [], dtype=np.float64)
        if K.shape != (3, 3):
            raise AvsimInputError(where, f"calibrated_sensor[{cs['token']}].camera_intrinsic", f"expected 3x3, got {K.shape}")
        q = np.asarray(cs["rotation"], dtype=np.float64)
        if abs(np.linalg.norm(q) - 1) > 1e-3:
            raise AvsimInputError(where, f"calibrated_sensor[{cs['token']}].rotation", "non-unit quaternion")
        try:
            cameras.append(PinholeCamera(int(sd["width"]), int(sd["height"]), K[0, 0], K[1, 1], K[0, 2], K[1, 2]))
        except (AvsimValueError, KeyError, TypeError) as exc:
            raise AvsimInputError(where, f"calibrated_sensor[{cs['token']}]", f"bad camera: {exc}") from None
        poses.append(SE3.from_quat(q / np.linalg.norm(q), np.asarray(cs["translation"], dtype=np.float64)))
        names.append(channel)
    if not names:
        raise AvsimInputError(where, "calibrated_sensor", "no CAM_* channel in the scene's first sample")
    offsets = _capture_offsets_ns(nusc, samples, tuple(names), where)
    named = tuple((names_of or {}).get(n, n) for n in names)
    return CameraRig(named, tuple(cameras), SE3.stack(poses), capture_offset_ns=offsets)


def _agents(nusc: Any, samples: list[dict], where: Path) -> AgentTracks:
    builder = TrackBuilder()
    for sample in samples:
        anns = [nusc.get("sample_annotation", tok) for tok in sample["anns"]]
        if not anns:
            continue
        wlh = np.array([a["size"] for a in anns], dtype=np.float64)
        builder.add(
            np.array([a["instance_token"] for a in anns]),
            np.array([a["category_name"] for a in anns]),
            np.full(len(anns), int(sample["timestamp"]) * 1000, dtype=np.int64),
            np.array([a["translation"] for a in anns], dtype=np.float64),
            wlh[:, [1, 0, 2]],  # nuScenes sizes are (w, l, h)
            np.array([a["rotation"] for a in anns], dtype=np.float64),
        )
    return builder.build(where)


def _xyz(nodes: list[dict]) -> np.ndarray:
    return np.array([[n["x"], n["y"], 0.0] for n in nodes], dtype=np.float64).reshape(-1, 3)


def _ring(nmap: Any, polygon_token: str) -> tuple[np.ndarray, list[np.ndarray]]:
    poly = nmap.get("polygon", polygon_token)
    outer = _xyz([nmap.get("node", t) for t in poly["exterior_node_tokens"]])
    holes = [_xyz([nmap.get("node", t) for t in h["node_tokens"]]) for h in poly.get("holes", [])]
    return outer, holes


def _unclosed(ring: np.ndarray) -> np.ndarray:
    return ring[:-1] if len(ring) > 3 and np.allclose(ring[0], ring[-1]) else ring


def _closed(ring: np.ndarray) -> np.ndarray:
    ring = _unclosed(ring)
    return np.concatenate([ring, ring[:1]])


def _stop_line_midline(ring: np.ndarray) -> np.ndarray | None:
    """Long midline of the minimum rotated rectangle of a stop-line polygon."""
    from shapely.geometry import Polygon

    if len(ring) < 3:
        return None
    rect = np.asarray(Polygon(ring[:, :2]).minimum_rotated_rectangle.exterior.coords)[:4]
    if len(rect) < 4:
        return None
    e01, e12 = np.linalg.norm(rect[1] - rect[0]), np.linalg.norm(rect[2] - rect[1])
    if e01 >= e12:  # long sides 0-1 and 2-3
        a, b = (rect[0] + rect[3]) / 2, (rect[1] + rect[2]) / 2
    else:
        a, b = (rect[0] + rect[1]) / 2, (rect[3] + rect[2]) / 2
    return np.array([[a[0], a[1], 0.0], [b[0], b[1], 0.0]])


def open_map(dataroot: Path, map_name: str, extra_location: bool = False) -> Any:
    """`NuScenesMap` of one location; `extra_location`: a name outside the devkit's four (an avsim export's fifth
    scenario onwards), added to `map_api.locations` while it loads."""
    from nuscenes.map_expansion import map_api

    path = dataroot / "maps" / "expansion" / f"{map_name}.json"
    if not path.exists():
        raise AvsimInputError(path, "map", "map expansion JSON not found (install nuScenes-map-expansion-v1.3 into maps/expansion)")
    added = extra_location and map_name not in map_api.locations
    try:
        if added:
            map_api.locations.append(map_name)
        with contextlib.redirect_stdout(io.StringIO()):
            return map_api.NuScenesMap(dataroot=str(dataroot), map_name=map_name)
    except Exception as exc:
        raise AvsimInputError(path, "map", f"nuscenes-devkit cannot load the map: {exc}") from None
    finally:
        if added:
            map_api.locations.remove(map_name)


def read_map(nmap: Any, box: tuple[float, float, float, float]) -> MapBuilder:
    """The map expansion's records intersecting `box` (x_min, y_min, x_max, y_max)."""
    layers = ["lane_divider", "road_divider", "drivable_area", "ped_crossing", "stop_line", "traffic_light", "lane"]
    records = nmap.get_records_in_patch(box, layer_names=layers, mode="intersect")
    mb = MapBuilder()
    for token in records["lane_divider"]:
        rec = nmap.get("lane_divider", token)
        nodes = nmap.get("line", rec["line_token"])["node_tokens"]
        seg_type = {s["node_token"]: s.get("segment_type", "NIL") for s in rec.get("lane_divider_segments", [])}
        pts = _xyz([nmap.get("node", t) for t in nodes])
        types = [lane_line_type("nuscenes", seg_type.get(t, "NIL")) for t in nodes]
        mb.add_lane_line(token, pts, types)
    for token in records["road_divider"]:
        rec = nmap.get("road_divider", token)
        pts = _xyz([nmap.get("node", t) for t in nmap.get("line", rec["line_token"])["node_tokens"]])
        mb.add_lane_line(token, pts, lane_line_type("nuscenes", "ROAD_DIVIDER"))
    for token in records["drivable_area"]:
        for k, ptoken in enumerate(nmap.get("drivable_area", token)["polygon_tokens"]):
            outer, holes = _ring(nmap, ptoken)
            outer = _unclosed(outer)
            if len(outer) < 3:
                continue
            mb.drivable_areas.add(f"{token}#{k}", outer)
            mb.road_boundaries.add(f"{token}#{k}", _closed(outer))
            for h, hole in enumerate(holes):
                if len(_unclosed(hole)) >= 3:
                    mb.road_boundaries.add(f"{token}#{k}/hole{h}", _closed(hole))
    for token in records["ped_crossing"]:
        outer, _ = _ring(nmap, nmap.get("ped_crossing", token)["polygon_token"])
        if len(_unclosed(outer)) >= 3:
            mb.crosswalks.add(token, _unclosed(outer))
    for token in records["stop_line"]:
        outer, _ = _ring(nmap, nmap.get("stop_line", token)["polygon_token"])
        line = _stop_line_midline(_unclosed(outer))
        if line is not None:
            mb.wait_lines.add(token, line)
    for token in records["traffic_light"]:
        pose = nmap.get("traffic_light", token).get("pose") or {}
        from avsim.core.transforms import yaw_to_quat

        centre = np.array([pose.get("tx", 0.0), pose.get("ty", 0.0), pose.get("tz", 0.0)], dtype=np.float64)
        if np.all(np.isfinite(centre)):
            mb.traffic_lights.add(token, centre, TRAFFIC_LIGHT_SIZE_M, yaw_to_quat(np.array(float(pose.get("rz", 0.0)))))
    lane_tokens = records["lane"]
    centres = nmap.discretize_lanes(lane_tokens, LANE_RESOLUTION_M) if lane_tokens else {}
    for token in lane_tokens:
        rec = nmap.get("lane", token)
        left, right = _xyz(rec["left_lane_divider_segment_nodes"]), _xyz(rec["right_lane_divider_segment_nodes"])
        centre = np.array([[p[0], p[1], 0.0] for p in centres.get(token, [])], dtype=np.float64).reshape(-1, 3)
        if len(left) >= 2 and len(right) >= 2 and len(centre) >= 2:
            mb.add_lane(token, left, right, centre)
    return mb


def _avsim_export(dataroot: Path, scene: dict, log: dict) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """This scene's and its log's records in `avsim_export.json`, when the dataroot is an avsim export."""
    from avsim.core.safe_json import read_json

    path = dataroot / AVSIM_MANIFEST
    if not path.is_file():
        return None
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("format") != "avsim-nuscenes-export":
        raise AvsimInputError(path, "format", "not an avsim nuScenes export manifest")
    scene_rec, log_rec = doc.get("scenes", {}).get(scene["token"]), doc.get("logs", {}).get(log["token"])
    if not isinstance(scene_rec, dict) or not isinstance(log_rec, dict):
        raise AvsimInputError(path, "scenes", f"no record of scene {scene['name']!r} or of its log")
    offset = log_rec.get("world_offset_m")
    if not (isinstance(offset, list) and len(offset) == 3 and all(isinstance(v, (int, float)) and np.isfinite(v) for v in offset)):
        raise AvsimInputError(path, f"logs.{log['token']}.world_offset_m", "expected 3 finite numbers")
    if not isinstance(scene_rec.get("channels"), dict):
        raise AvsimInputError(path, f"scenes.{scene['token']}.channels", "expected camera -> channel")
    if not isinstance(scene_rec.get("time_offset_us", 0), int) or isinstance(scene_rec.get("time_offset_us"), bool):
        raise AvsimInputError(path, f"scenes.{scene['token']}.time_offset_us", "expected whole microseconds")
    return scene_rec, log_rec


def load_nuscenes(src: str | os.PathLike[str], rig_name: str | None = None) -> Scenario:
    """Convert one nuScenes scene (``DATAROOT`` or ``DATAROOT::scene-name``) into a `Scenario`."""
    from avsim.core.lights import TrafficLightStates
    from avsim.core.rig import named_rig

    root, scene_name = split_selector(src)
    dataroot, version = _find_version(root)
    nusc = open_nuscenes(dataroot, version)
    where = dataroot / version
    scene = _pick_scene(nusc, scene_name, where)
    log = nusc.get("log", scene["log_token"])
    avsim = _avsim_export(dataroot, scene, log)
    channels, names_of = CAMERA_CHANNELS, None
    if avsim is not None:  # every camera, in the source rig's order, under its avsim name
        names_of = {ch: cam for cam, ch in avsim[0]["channels"].items()}
        channels = tuple(avsim[0]["channels"].values())
    samples = _scene_samples(nusc, scene)
    ego_t, world_SE3_ego, camera_poses = _ego(nusc, samples, where, channels)
    rig = named_rig(rig_name) if rig_name else _rig(nusc, samples, where, channels, names_of)
    agents = _agents(nusc, samples, where)
    xy = world_SE3_ego.translation[:, :2]
    box = (*(xy.min(axis=0) - MAP_MARGIN_M), *(xy.max(axis=0) + MAP_MARGIN_M))
    nmap = open_map(dataroot, log["location"], extra_location=avsim is not None)
    hd_map = read_map(nmap, (float(box[0]), float(box[1]), float(box[2]), float(box[3]))).build()
    metadata = {
        "source_format": "nuscenes",
        "nuscenes_version": version,
        "scene_name": scene["name"],
        "scene_token": scene["token"],
        "log": log.get("logfile", ""),
        "map_name": log["location"],
        "source_rate_hz": _source_rate_hz(nusc, samples),
        "agents_rate_hz": 2.0,
        "rig": rig_name or "nuscenes calibration",
        "rig_source": "named default" if rig_name else "calibrated_sensor (CAM_*)",
        "ego_orientation": "full",
        "ego_pose_source": f"LIDAR_TOP sample_data ego poses, plus {camera_poses} CAM_* sample_data ego poses inside that span",
        "capture_offset_source": "named rig: none" if rig_name else
        "per camera, median over the keyframes of (camera sample_data timestamp - sample timestamp)",
    }
    keyframe_ns = int(samples[0]["timestamp"]) * 1000  # the LIDAR_TOP keyframe, which the ego span starts at
    inside = int(ego_t[0]) <= keyframe_ns <= int(ego_t[-1])
    metadata["frame_origin"] = "the scene's first sample (keyframe) timestamp" if inside else "the first ego pose"
    scenario = build_scenario(
        where, scenario_id=scene["name"], rig=rig, ego_timestamps_ns=ego_t, world_SE3_ego=world_SE3_ego,
        agents=agents, hd_map=hd_map, lights=TrafficLightStates.empty(), metadata=metadata,
        frame_origin_ns=keyframe_ns if inside else None,
    )  # fmt: skip
    if avsim is None:
        return scenario
    return _undo_export_frame(scenario, *avsim)


def _undo_export_frame(scenario: Scenario, scene_rec: dict[str, Any], log_rec: dict[str, Any]) -> Scenario:
    """An avsim export's scenario back in its source frame and times (the log's offset, the scene's time offset taken off)."""
    from avsim.core.transforms import SE3
    from avsim.scenario.frames import shift_times, transform_scenario

    offset = np.asarray(log_rec["world_offset_m"], np.float64)
    dt_us = int(scene_rec.get("time_offset_us", 0))
    moved = shift_times(transform_scenario(scenario, SE3(np.eye(3), -offset)), -dt_us * 1000)
    metadata = {**moved.metadata, "avsim_export": {"scenario_id": log_rec.get("scenario_id"), "world_offset_m": offset.tolist(),
                                                   "time_offset_us": dt_us},
                "ego_frame_note": "avsim export: the log's export-frame offset and the scene's time offset are taken off (avsim_export.json)"}  # fmt: skip
    return moved.replace(metadata=metadata)
