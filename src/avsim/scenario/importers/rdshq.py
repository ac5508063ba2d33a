"""NVIDIA RDS-HQ clips: one-sample webdataset tars per field, read in memory (`safe_tar`).

Source: a root folder with one sub-folder per field, each holding ``<clip_id>.tar``
(``ROOT::clip_id`` picks a clip when there are several):

- ``vehicle_pose/``: ``<frame:06d>.vehicle_pose.npy`` world_SE3_rig (4x4, FLU) at 30 Hz -> ego;
  the world frame is the rig frame at the clip's first frame (frame 0 is the identity);
- ``pose/``: ``<frame:06d>.pose.<camera>.npy`` world_SE3_camera (4x4, OpenCV RDF) at 30 Hz ->
  each camera's ego_SE3_camera = world_SE3_rig^-1 . world_SE3_camera (the median over frames;
  its spread is recorded in the metadata);
- ``ftheta_intrinsic/`` (``[cx, cy, w, h, p0..p5, is_bw_poly, (c, d, e)]``) and
  ``pinhole_intrinsic/`` (``[fx, fy, cx, cy, w, h]``) per camera -> the rig (f-theta when present;
  the pinhole vectors are also kept in ``metadata['pinhole_intrinsics']``);
- ``all_object_info/``: ``<frame:06d>.all_object_info.json`` = {tracking id: {object_to_world,
  object_lwh, object_is_moving, object_type}} (every 3rd frame, 10 Hz) -> agents;
- ``3d_<element>/``: ``<element>.json`` = {"labels": [...]} with ``shape3d`` polylines
  (``polyline3d``, ``polylines3d``), polygons (``surface``) or cuboids (``cuboid3d``, corners in
  the spec's corner order) in the clip's world frame: lanelines (per-vertex ``colors`` /
  ``styles`` -> `line_types`), lanes, road_boundaries, wait_lines, crosswalks, road_markings,
  poles, traffic_signs, traffic_lights;
- ``3d_traffic_lights_status/``: ``aggregated_states.json`` = {"traffic_light_states": {key:
  {"feature_id", "state": [one state per 30 Hz frame]}}} -> light state changes, matched to the
  light cuboids by ``feature_id``.

Missing fields are tolerated where the clip stays usable: without ``pose/`` the cameras keep
their real intrinsics but take the model rig's default mounting (``cosmos_rig``), and
``metadata['camera_extrinsics']`` says so; without ``all_object_info/`` there are no agents.
``vehicle_pose/`` is required.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.names import check_name
from avsim.scenario.importers.common import (
    MapBuilder,
    TrackBuilder,
    as_points,
    build_scenario,
    check_finite,
    split_selector,
)
from avsim.scenario.importers.line_types import rdshq_lane_type
from avsim.scenario.importers.safe_tar import read_sample

POSE_RATE_HZ = 30.0
CAMERA_NAMES: tuple[str, ...] = (
    "camera_front_wide_120fov", "camera_cross_right_120fov", "camera_rear_right_70fov", "camera_rear_tele_30fov",
    "camera_rear_left_70fov", "camera_cross_left_120fov", "camera_front_tele_30fov",
)  # fmt: skip  (model index order, see the render spec)

if TYPE_CHECKING:
    from avsim.core.agents import AgentTracks
    from avsim.core.cameras import Camera
    from avsim.core.lights import TrafficLightStates
    from avsim.core.rig import CameraRig
    from avsim.core.transforms import SE3
    from avsim.scenario.types import Scenario
MAP_FIELDS = ("lanelines", "lanes", "road_boundaries", "wait_lines", "crosswalks", "road_markings", "poles",
              "traffic_signs", "traffic_lights")  # fmt: skip
LIGHT_STATES = {"red": "red", "yellow": "yellow", "amber": "yellow", "green": "green", "unknown": "unknown",
                "off": "unknown", "none": "unknown", "": "unknown"}  # fmt: skip
_FRAME_KEY = re.compile(r"^(\d{6})\.(.+)$")


def _tar(root: Path, field: str, clip_id: str) -> Path:
    return root / field / f"{clip_id}.tar"


def find_clip_id(root: Path, clip_id: str | None) -> str:
    if clip_id:
        return clip_id
    folder = root / "vehicle_pose"
    if not folder.is_dir():
        raise AvsimInputError(root, "vehicle_pose", "folder missing (an RDS-HQ root has vehicle_pose/<clip_id>.tar)")
    clips = sorted(p.stem for p in folder.glob("*.tar"))
    if len(clips) != 1:
        raise AvsimInputError(folder, "clip", f"{len(clips)} clips; select one with ROOT::clip_id" if clips else "no <clip_id>.tar")
    return clips[0]


def _frames(sample: dict[str, Any], field: str, path: Path) -> dict[int, dict[str, Any]]:
    """``{frame: {rest-of-key: value}}`` for keys ``<frame:06d>.<field>...``."""
    out: dict[int, dict[str, Any]] = {}
    for key, value in sample.items():
        m = _FRAME_KEY.match(key)
        if not m or not m.group(2).startswith(field):
            continue
        out.setdefault(int(m.group(1)), {})[m.group(2)] = value
    if not out:
        raise AvsimInputError(path, field, "no per-frame members")
    return out


def _rigid(T: Any, path: Path, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(quaternion, translation) of a 4x4 rigid transform; near-rotations are re-orthonormalised."""
    from avsim.core.transforms import matrix_to_quat

    T = np.asarray(T, dtype=np.float64)
    if T.shape != (4, 4):
        raise AvsimInputError(path, what, f"expected a 4x4 matrix, got shape {T.shape}")
    check_finite(T, path, what)
    R = T[:3, :3]
    U, S, Vt = np.linalg.svd(R)
    if np.abs(S - 1).max() > 1e-2 or np.linalg.det(R) <= 0:
        raise AvsimInputError(path, what, f"not a rigid transform (singular values {np.round(S, 4).tolist()})")
    return matrix_to_quat(U @ Vt), T[:3, 3].copy()  # float32 sources are orthonormal only to ~1e-7


def _frame_times(start_us: int, frames: np.ndarray) -> np.ndarray:
    return start_us * 1000 + np.round(frames * (1e9 / POSE_RATE_HZ)).astype(np.int64)


def clip_start_us(clip_id: str) -> int:
    """RDS-HQ clip ids end in ``_<start_us>_<end_us>``; 0 when they do not."""
    parts = clip_id.rsplit("_", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 0


def read_vehicle_poses(path: Path) -> tuple[np.ndarray, SE3]:
    from avsim.core.transforms import SE3

    frames = _frames(read_sample(path), "vehicle_pose", path)
    idx = np.array(sorted(frames), dtype=np.int64)
    qt = [_rigid(next(iter(frames[i].values())), path, f"{i:06d}.vehicle_pose") for i in idx]
    return idx, SE3.from_quat(np.array([q for q, _ in qt]), np.array([t for _, t in qt]))


def read_intrinsics(root: Path, clip_id: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``{camera: f-theta vector}``, ``{camera: pinhole vector}`` (either may be empty)."""
    out = []
    for kind, sizes in (("ftheta_intrinsic", (10, 11, 14)), ("pinhole_intrinsic", (6,))):
        path = _tar(root, kind, clip_id)
        vectors: dict[str, np.ndarray] = {}
        if path.exists():
            for key, value in read_sample(path).items():
                if not key.startswith(kind + "."):
                    continue
                name = check_name(key[len(kind) + 1 :].removesuffix(".npy"), path, key)  # a camera name: file names later
                v = np.asarray(value, dtype=np.float64).reshape(-1)
                if v.size not in sizes or not np.all(np.isfinite(v)):
                    raise AvsimInputError(path, key, f"expected a finite vector of length {sizes}, got {v.size}")
                vectors[name] = v
        out.append(vectors)
    return out[0], out[1]


def _camera(name: str, ftheta: dict, pinhole: dict, root: Path, clip_id: str) -> Camera:
    from avsim.core.cameras import FThetaCamera, PinholeCamera
    from avsim.core.errors import AvsimValueError

    try:
        if name in ftheta:
            return FThetaCamera.from_intrinsic_vector(ftheta[name])
        fx, fy, cx, cy, w, h = pinhole[name]
        return PinholeCamera(int(w), int(h), fx, fy, cx, cy)
    except AvsimValueError as exc:
        kind = "ftheta_intrinsic" if name in ftheta else "pinhole_intrinsic"
        raise AvsimInputError(_tar(root, kind, clip_id), name, str(exc)) from None


def read_camera_extrinsics(path: Path, frame_idx: np.ndarray, world_SE3_rig: SE3) -> tuple[dict, dict[str, float]]:
    """``{camera: ego_SE3_camera}`` and the max deviation (m) of the per-frame estimates."""
    from avsim.core.transforms import SE3

    frames = _frames(read_sample(path), "pose", path)
    by_camera: dict[str, list[tuple[int, Any]]] = {}
    for i, entries in frames.items():
        for key, value in entries.items():
            by_camera.setdefault(key.removeprefix("pose.").removesuffix(".npy"), []).append((i, value))
    pos = {int(f): k for k, f in enumerate(frame_idx)}
    extrinsics, spread = {}, {}
    for name, items in sorted(by_camera.items()):
        quats, trans = [], []
        for i, T in items:
            if i not in pos:
                continue
            q, t = _rigid(T, path, f"{i:06d}.pose.{name}")
            ego = world_SE3_rig[pos[i]].inverse().compose(SE3.from_quat(q, t))
            quats.append(ego.quat)
            trans.append(ego.translation)
        if not quats:
            raise AvsimInputError(path, f"pose.{name}", "no frame shared with vehicle_pose")
        trans_arr = np.array(trans)
        k = int(np.argmin(np.linalg.norm(trans_arr - np.median(trans_arr, axis=0), axis=1)))  # the most central frame
        extrinsics[name] = SE3.from_quat(quats[k], trans_arr[k])
        spread[name] = round(float(np.linalg.norm(trans_arr - trans_arr[k], axis=1).max()), 6)
    return extrinsics, spread


def read_objects(path: Path, start_us: int) -> AgentTracks:
    frames = _frames(read_sample(path), "all_object_info", path)
    builder = TrackBuilder()
    for i in sorted(frames):
        objects = next(iter(frames[i].values()))
        if not isinstance(objects, dict):
            raise AvsimInputError(path, f"{i:06d}.all_object_info", "expected an object {tracking_id: info}")
        for tid in sorted(objects):
            info = objects[tid]
            where = f"{i:06d}.all_object_info[{tid}]"
            try:
                q, t = _rigid(info["object_to_world"], path, f"{where}.object_to_world")
                lwh = check_finite(np.asarray(info["object_lwh"], dtype=np.float64).reshape(3), path, f"{where}.object_lwh")
                source_class = str(info["object_type"])
            except (KeyError, TypeError, ValueError) as exc:
                raise AvsimInputError(path, where, f"malformed object entry: {exc}") from None
            builder.add(str(tid), source_class, _frame_times(start_us, np.array([i])), t, lwh, q)
    return builder.build(path)


def _attributes(label: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in label.get("labelData", {}).get("shape3d", {}).get("attributes", []) or []:
        value = next((v for k, v in a.items() if k != "name"), None)
        if isinstance(value, dict):  # {"enumsList": {"enumsList": [...]}} and {"textList": {...}}
            value = next(iter(value.values()), [])
        out[a.get("name")] = value
    return out


def _cuboid(corners: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """centre, size (l, w, h) and quaternion of 8 corners in the spec's corner order."""
    from avsim.core.transforms import matrix_to_quat

    centre = corners.mean(axis=0)
    ex, ey, ez = corners[0] - corners[3], corners[0] - corners[1], corners[0] - corners[4]
    size = np.maximum([np.linalg.norm(ex), np.linalg.norm(ey), np.linalg.norm(ez)], 1e-3)
    x = ex / size[0] if np.linalg.norm(ex) > 1e-6 else np.cross(ey, ez) / np.linalg.norm(np.cross(ey, ez))
    y = ey - (ey @ x) * x
    y = y / np.linalg.norm(y)
    z = np.cross(x, y)
    return centre, size, matrix_to_quat(np.stack([x, y, z], axis=1))


def _unique_ids(labels: list[dict]) -> list[str]:
    """``feature_id`` when unique in this element type, else the RDS-HQ ``labelId``."""
    fids = [str(_attributes(lab).get("feature_id") or lab.get("labelId", k)) for k, lab in enumerate(labels)]
    if len(set(fids)) == len(fids):
        return fids
    return [str(lab.get("labelId", f"label_{k}")) for k, lab in enumerate(labels)]


def read_map_field(mb: MapBuilder, field: str, path: Path) -> list[str]:
    """Add the labels of one ``3d_<field>`` tar to `mb`; returns the ids of traffic lights."""
    sample = read_sample(path)
    data = sample.get(f"{field}.json", sample.get(f"3d_{field}.json"))
    if not isinstance(data, dict) or not isinstance(data.get("labels"), list):
        raise AvsimInputError(path, f"{field}.json", "missing or has no 'labels' list")
    labels = [lab for lab in data["labels"] if not lab.get("labelData", {}).get("emptyLabel")]
    light_ids = []
    for lab, eid in zip(labels, _unique_ids(labels)):
        shape = lab.get("labelData", {}).get("shape3d", {})
        where = f"{field}.json[{eid}]"
        if "polyline3d" in shape:
            pts = as_points(shape["polyline3d"].get("vertices"), path, f"{where}.vertices", dims=(3,))
            if len(pts) < 2:
                continue
            if field == "lanelines":
                attrs = _attributes(lab)
                colors, styles = list(attrs.get("colors") or []), list(attrs.get("styles") or [])
                if len(colors) != len(pts) or len(styles) != len(pts):
                    types = [rdshq_lane_type("WHITE", "SOLID_SINGLE")] * len(pts)  # spec default
                else:
                    types = [rdshq_lane_type(str(c), str(s)) for c, s in zip(colors, styles)]
                mb.add_lane_line(eid, pts, types)
            else:
                {"road_boundaries": mb.road_boundaries, "wait_lines": mb.wait_lines, "poles": mb.poles}.get(
                    field, mb.road_boundaries
                ).add(eid, pts)
        elif "polylines3d" in shape and field == "lanes":
            rails = [as_points(p.get("vertices"), path, f"{where}.polylines", dims=(3,)) for p in shape["polylines3d"].get("polylines", [])]
            if len(rails) == 2 and min(len(r) for r in rails) >= 2:
                from avsim.scenario.importers.av2 import _resample

                n = max(len(rails[0]), len(rails[1]))
                mb.add_lane(eid, rails[0], rails[1], (_resample(rails[0], n) + _resample(rails[1], n)) / 2.0)
        elif "surface" in shape:
            pts = as_points(shape["surface"].get("vertices"), path, f"{where}.vertices", dims=(3,))
            if len(pts) > 3 and np.allclose(pts[0], pts[-1]):
                pts = pts[:-1]
            if len(pts) >= 3:
                (mb.crosswalks if field == "crosswalks" else mb.road_markings).add(eid, pts)
        elif "cuboid3d" in shape:
            corners = as_points(shape["cuboid3d"].get("vertices"), path, f"{where}.vertices", dims=(3,))
            if len(corners) != 8:
                raise AvsimInputError(path, f"{where}.vertices", f"a cuboid needs 8 corners, got {len(corners)}")
            centre, size, quat = _cuboid(corners)
            (mb.traffic_lights if field == "traffic_lights" else mb.traffic_signs).add(eid, centre, size, quat)
            if field == "traffic_lights":
                light_ids.append(eid)
    return light_ids


def read_light_states(path: Path, light_ids: list[str], start_us: int) -> tuple[TrafficLightStates, list[str]]:
    """Per-frame states of ``aggregated_states.json`` as state changes, keyed like the cuboids."""
    from avsim.core.lights import TrafficLightStates

    sample = read_sample(path)
    data = sample.get("aggregated_states.json")
    if not isinstance(data, dict) or not isinstance(data.get("traffic_light_states"), dict):
        raise AvsimInputError(path, "aggregated_states.json", "missing or has no 'traffic_light_states' object")
    ids, times, states = [], [], []
    for key, info in sorted(data["traffic_light_states"].items()):
        lid = str(info.get("feature_id", key))
        seq = info.get("state") or []
        if not isinstance(seq, list):
            raise AvsimInputError(path, f"traffic_light_states[{key}].state", "expected a list of per-frame states")
        mapped = []
        for f, s in enumerate(seq):
            name = str(s or "").strip().lower()
            if name not in LIGHT_STATES:
                raise AvsimInputError(path, f"traffic_light_states[{key}].state[{f}]", f"unknown state {s!r}")
            mapped.append(LIGHT_STATES[name])
        if not mapped:
            continue
        mapped_arr = np.asarray(mapped)
        change = np.concatenate([[True], mapped_arr[1:] != mapped_arr[:-1]])
        frames = np.flatnonzero(change)
        ids.extend([lid] * len(frames))
        times.append(_frame_times(start_us, frames))
        states.append(mapped_arr[change])
    if not ids:
        return TrafficLightStates.empty(), []
    unmatched = sorted(set(ids) - set(light_ids))
    return TrafficLightStates.from_unsorted(np.asarray(ids), np.concatenate(times), np.concatenate(states)), unmatched


def _clip_rig(root: Path, clip_id: str, rig_name: str | None, frame_idx: np.ndarray, world_SE3_rig: SE3,
              present: dict[str, bool], metadata: dict[str, Any]) -> CameraRig:
    """The clip's camera rig (or the named rig `rig_name`); notes its sources in `metadata`."""
    from avsim.core.rig import CameraRig, cosmos_rig, named_rig
    from avsim.core.transforms import SE3

    ftheta, pinhole = read_intrinsics(root, clip_id)
    metadata["pinhole_intrinsics"] = {k: [float(x) for x in v] for k, v in sorted(pinhole.items())}
    if rig_name:
        metadata["rig_source"] = f"named default {rig_name!r}"
        return named_rig(rig_name)
    names = [n for n in CAMERA_NAMES if n in ftheta or n in pinhole]
    names += sorted((set(ftheta) | set(pinhole)) - set(CAMERA_NAMES))
    if not names:
        raise AvsimInputError(root, "intrinsics", "no ftheta_intrinsic/ or pinhole_intrinsic/ tar for this clip (use --rig)")
    cameras = tuple(_camera(n, ftheta, pinhole, root, clip_id) for n in names)
    if present["pose"]:
        extrinsics, spread = read_camera_extrinsics(_tar(root, "pose", clip_id), frame_idx, world_SE3_rig)
        missing = [n for n in names if n not in extrinsics]
        if missing:
            raise AvsimInputError(_tar(root, "pose", clip_id), f"pose.{missing[0]}", "camera has intrinsics but no poses")
        poses = [extrinsics[n] for n in names]
        metadata["camera_extrinsics"] = "pose/ (world_SE3_rig^-1 . world_SE3_camera)"
        metadata["camera_extrinsics_spread_m"] = spread
    else:
        default = cosmos_rig()
        poses = [default.extrinsic(n) if n in default.names else SE3.identity() for n in names]
        metadata["camera_extrinsics"] = "cosmos_rig default mounting (pose/ missing from the clip)"
    metadata["rig_source"] = "ftheta_intrinsic/" if ftheta else "pinhole_intrinsic/"
    return CameraRig(tuple(names), cameras, SE3.stack(poses))


def load_rdshq(src: str | os.PathLike[str], rig_name: str | None = None) -> Scenario:
    """Convert one RDS-HQ clip (``ROOT`` or ``ROOT::clip_id``) into a `Scenario`."""
    from avsim.core.lights import TrafficLightStates

    root, clip = split_selector(src)
    if not root.is_dir():
        raise AvsimInputError(root, "root", "not found or not a folder")
    clip_id = find_clip_id(root, clip)
    start_us = clip_start_us(clip_id)
    vp = _tar(root, "vehicle_pose", clip_id)
    if not vp.exists():
        raise AvsimInputError(vp, "vehicle_pose", "missing (required: the ego trajectory)")
    frame_idx, world_SE3_rig = read_vehicle_poses(vp)
    ego_t = _frame_times(start_us, frame_idx)
    present = {f: _tar(root, f, clip_id).exists() for f in
               ("pose", "all_object_info", "ftheta_intrinsic", "pinhole_intrinsic", "3d_traffic_lights_status",
                *(f"3d_{m}" for m in MAP_FIELDS))}  # fmt: skip
    metadata: dict[str, Any] = {"source_format": "rdshq", "clip_id": clip_id, "source_rate_hz": POSE_RATE_HZ,
                                "ego_orientation": "full"}  # vehicle_pose is a full rigid transform
    rig = _clip_rig(root, clip_id, rig_name, frame_idx, world_SE3_rig, present, metadata)
    agents = read_objects(_tar(root, "all_object_info", clip_id), start_us) if present["all_object_info"] else None
    mb, light_ids = MapBuilder(), []
    for field in MAP_FIELDS:
        if present[f"3d_{field}"]:
            light_ids += read_map_field(mb, field, _tar(root, f"3d_{field}", clip_id))
    lights, unmatched = TrafficLightStates.empty(), list[str]()
    if present["3d_traffic_lights_status"]:
        lights, unmatched = read_light_states(_tar(root, "3d_traffic_lights_status", clip_id), light_ids, start_us)
    metadata["missing_fields"] = sorted(f for f, ok in present.items() if not ok)
    metadata["light_states_without_cuboid"] = unmatched
    if agents is None:
        from avsim.core.agents import AgentTracks

        agents = AgentTracks.empty()
    return build_scenario(
        root, scenario_id=clip_id, rig=rig, ego_timestamps_ns=ego_t, world_SE3_ego=world_SE3_rig,
        agents=agents, hd_map=mb.build(), lights=lights, metadata=metadata,
    )  # fmt: skip
