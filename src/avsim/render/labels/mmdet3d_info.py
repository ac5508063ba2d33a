"""An mmdetection3d info file (`.pkl`) for rendered or generated clips, from their label folders.

The layout is mmdetection3d 1.1+'s nuScenes info (`metainfo.info_version` "1.1": the dict that
`tools/dataset_converters/update_infos_to_v2.py` writes, with `cam_instances` as
`mmdet3d/datasets/convert_utils.get_nuscenes_2d_boxes` builds them), so `NuScenesDataset` and
the camera pipelines read it without a converter. avsim has no lidar; its "lidar" frame is the
ego frame (`lidar2ego` = identity), so `instances[*].bbox_3d` are ego-frame boxes. Per sample
(one labelled frame of one clip):

- `sample_idx`, `token` (the frame's sample token), `timestamp` (s), `ego2global` (4x4);
- `images[camera]`: `img_path` (the frame's image, relative to the info file's folder),
  `height`, `width`, `cam2img` (3x3: a pinhole's K, or an f-theta lens' pinhole at its principal
  point, `lanes.openlane_intrinsic`; the lens itself is `camera_model`), `cam2ego` (OpenCV camera
  axes), `lidar2cam` (= ego -> camera), `timestamp`, `sample_data_token`;
- `instances`: every agent: `bbox_3d` = (x, y, z, l, w, h, yaw) in the ego frame (gravity centre; yaw =
  `converter_yaw` of the box rotation, as the converter keeps pyquaternion's ``yaw_pitch_roll[0]``),
  `bbox_label` / `bbox_label_3d` (index into `metainfo.categories`; -1: avsim's Others, ignored),
  `velocity` (vx, vy), `num_lidar_pts` / `num_radar_pts` (1 / 0 when some camera shows the box, else
  0 / 0: mmdetection3d drops boxes without points) and `bbox_3d_isvalid`;
- `cam_instances[camera]`: the boxes that camera shows (at least one visible pixel), by the
  converter's rules applied to `cam2img`: `bbox` = the projected corners in front of the camera,
  clipped to the image (x1, y1, x2, y2); `bbox_3d` = (x, y, z, l, h, w, -yaw_pitch_roll[0]) in the
  camera frame (the box with its full rotation, as the converter uses nuScenes' box); `velocity` (vx, vz) of the world velocity without its z, in camera axes;
  `center_2d` and `depth` (`cam2img` of the centre); `attr_label` the index of the box's nuScenes
  attribute in the converter's `nus_attributes` (`boxes3d.json` `attribute_name`; 8, "None", for none).

Camera names: avsim's own by default. `camera_names="nuscenes"` (`--camera-names nuscenes`) writes
the six nuScenes names that stock nuScenes configs name (`CAM_FRONT`, `CAM_FRONT_RIGHT`, ...): each
camera of the clip's rig goes to the nuScenes camera whose heading is nearest its own
(`nuscenes_camera_map`; one camera per name, at most `NUSCENES_MAX_HEADING_DEG` off), and the
rig's other cameras are left out (a 6-view config reads every entry of `images`); a dict names
the map itself (`--camera-names camera_front_wide_120fov=CAM_FRONT,...`; unnamed cameras left out).

Images: `labels/images/<camera>/<frame>.<ext>` when the labels were written with `--images`;
otherwise each frame is decoded from the clip's video (rendered: `OUT/<video_clip>/<video_clip>.
<camera>.mp4`; generated: `GEN/<video_clip>.<camera>.mp4`) into `<info folder>/images/`.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.safe_files import contained_file
from avsim.core.safe_json import read_json
from avsim.core.transforms import quat_to_matrix
from avsim.render.labels import compact, compact_tables
from avsim.render.labels.lanes import openlane_intrinsic
from avsim.render.labels.records import CV_TO_OPENLANE_CAM

MMDET3D_LAYOUT = "mmdetection3d 1.1+ nuScenes info (info_version 1.1)"
NUSCENES_CLASSES = ("car", "truck", "trailer", "bus", "construction_vehicle", "bicycle", "motorcycle", "pedestrian",
                    "traffic_cone", "barrier")  # fmt: skip
AVSIM_TO_NUSCENES = {"Car": "car", "Truck": "truck", "Pedestrian": "pedestrian", "Cyclist": "bicycle"}  # Others: ignored (-1)
# mmdetection3d's convert_utils.nus_attributes, in its order (attr_label is an index into it)
NUS_ATTRIBUTES = ("cycle.with_rider", "cycle.without_rider", "pedestrian.moving", "pedestrian.standing", "pedestrian.sitting_lying_down",
                  "vehicle.moving", "vehicle.parked", "vehicle.stopped", "None")  # fmt: skip
ATTR_NONE = NUS_ATTRIBUTES.index("None")
# nuScenes cameras and their nominal headings on the ego (deg, counter-clockwise from forward)
NUSCENES_CAMERAS = {"CAM_FRONT": 0.0, "CAM_FRONT_RIGHT": -55.0, "CAM_FRONT_LEFT": 55.0, "CAM_BACK": 180.0, "CAM_BACK_LEFT": 110.0,
                    "CAM_BACK_RIGHT": -110.0}  # fmt: skip
NUSCENES_MAX_HEADING_DEG = 45.0
_SIGNS = np.array([[i, j, k] for i in (1, -1) for j in (1, -1) for k in (1, -1)], np.float64) / 2.0


@dataclass(frozen=True)
class ClipBoxes:
    """One labelled frame's agents (K boxes) in the ego frame: ids, classes, centres (K, 3), sizes l, w, h (K, 3),
    rotations ego_R_object (K, 4) w, x, y, z, velocities (K, 3) and the cameras that show each."""

    track_id: list[str]
    object_class: list[str]
    center_m: np.ndarray
    size_lwh_m: np.ndarray
    rotation_wxyz: np.ndarray
    velocity_mps: np.ndarray
    cameras: list[list[str]]
    attributes: list[str]


def _json_box_rows(folder: Path, index: dict[str, Any]) -> dict[int, list[tuple[Any, ...]]]:
    """`boxes3d.json`'s boxes by frame, each field checked (the file and the box named)."""
    path = folder / "boxes3d.json"
    doc = read_json(path, "boxes3d")
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, dict):
        raise AvsimInputError(path, "results", "must be an object of sample token -> boxes")
    frame_of = {f["sample_token"]: f["frame_index"] for f in index["frames"]}
    rows: dict[int, list[tuple[Any, ...]]] = {f["frame_index"]: [] for f in index["frames"]}
    for token, boxes in results.items():
        if token not in frame_of or not isinstance(boxes, list):
            raise AvsimInputError(path, f"results.{str(token)[:60]}", "not a sample token of index.json, or not a list of boxes")
        for k, b in enumerate(boxes):
            where = f"results.{token}[{k}]"
            if not isinstance(b, dict) or any(key not in b for key in _JSON_BOX_FIELDS):
                raise AvsimInputError(path, where, f"must be an object with {', '.join(_JSON_BOX_FIELDS)}")
            cams = b["cameras"]
            if not isinstance(cams, list) or not all(isinstance(c, str) for c in cams):
                raise AvsimInputError(path, f"{where}.cameras", "must be a list of camera names")
            rows[frame_of[token]].append((*(b[key] for key in _JSON_BOX_FIELDS), b.get("attribute_name") or ""))
    return rows


_JSON_BOX_FIELDS = ("track_id", "class", "center_ego_m", "size_lwh_m", "rotation", "velocity_ego_mps", "cameras")


def _frame_boxes(folder: Path, index: dict[str, Any]) -> dict[int, ClipBoxes]:
    """Every frame's boxes, from `boxes3d.parquet` (compact) or `boxes3d.json` (standard), checked."""
    if compact.is_compact(folder):
        source = folder / compact.BOXES3D
        rows: dict[int, list[tuple[Any, ...]]] = {f["frame_index"]: [] for f in index["frames"]}
        for r in compact_tables.read_table(folder, compact.BOXES3D, index).iter_rows(named=True):
            rows[r["frame_index"]].append((r["track_id"], r["class"], r["center_ego_m"], r["size_lwh_m"], r["rotation_ego_wxyz"],
                                           r["velocity_ego_mps"], r["cameras"], r.get("attribute_name") or ""))  # fmt: skip
    else:
        source, rows = folder / "boxes3d.json", _json_box_rows(folder, index)
    out = {}
    for f, rs in rows.items():
        cols: list[Any] = list(zip(*rs)) if rs else [()] * 8
        try:
            arrays = [np.asarray(cols[i], np.float64).reshape(-1, n) for i, n in ((2, 3), (3, 3), (4, 4), (5, 3))]
        except (TypeError, ValueError):
            raise AvsimInputError(source, f"frame {f}", "box centres, sizes, rotations and velocities must be 3, 3, 4 and 3 numbers") from None
        norms = np.linalg.norm(arrays[2], axis=1)
        if not all(np.isfinite(a).all() for a in arrays) or (arrays[1] <= 0).any() or (norms < 1e-6).any():
            raise AvsimInputError(source, f"frame {f}", "a box with a NaN or infinite value, a size <= 0 or a zero rotation")
        center, size, rotation, velocity = arrays
        out[f] = ClipBoxes([str(t) for t in cols[0]], [str(c) for c in cols[1]], center, size, rotation, velocity, [list(c) for c in cols[6]],
                           [str(x) for x in cols[7]])  # fmt: skip
    return out


def _camera_poses(folder: Path, index: dict[str, Any]) -> dict[tuple[str, int], np.ndarray]:
    """(camera, frame) -> 4x4 ego_T_camera (OpenCV axes) of every camera-frame: the compact table, or the OpenLane files' extrinsics."""
    out = {}
    if compact.is_compact(folder):
        for r in compact_tables.read_table(folder, compact.CAMERA_POSES, index).iter_rows(named=True):
            T = np.eye(4)
            T[:3] = np.asarray(r["ego_SE3_camera"], np.float64).reshape(3, 4)
            out[str(r["camera"]), r["frame_index"]] = T
        source = folder / compact.CAMERA_POSES
    else:
        for cam in index["cameras"]:
            for f in index["frames"]:
                path = folder / "openlane" / cam / f"{f['frame_index']:06d}.json"
                doc = read_json(path, "openlane")
                try:
                    if not isinstance(doc, dict):
                        raise TypeError
                    # layout 3: `extrinsic` is the camera's own ground frame, `ego_extrinsic` its mounting
                    ext = np.asarray(doc.get("ego_extrinsic", doc["extrinsic"]), np.float64).reshape(4, 4)
                except (KeyError, TypeError, ValueError):
                    raise AvsimInputError(path, "extrinsic", "must be a 4x4 matrix of numbers") from None
                if not np.isfinite(ext).all():
                    raise AvsimInputError(path, "extrinsic", "NaN or infinite values")
                T = np.eye(4)
                T[:3, :3], T[:3, 3] = ext[:3, :3] @ CV_TO_OPENLANE_CAM, ext[:3, 3]  # back to OpenCV axes
                out[cam, f["frame_index"]] = T
        source = folder / "openlane"
    missing = next(((c, f["frame_index"]) for c in index["cameras"] for f in index["frames"] if (c, f["frame_index"]) not in out), None)
    if missing is not None:
        raise AvsimInputError(source, "camera", f"no pose of {missing[0]} at frame {missing[1]}")
    return out


def _image_paths(folder: Path, index: dict[str, Any], info_dir: Path) -> dict[tuple[str, int], Path]:
    """(camera, frame) -> image file: the labels' own images, else frames decoded from the clip's videos."""
    out: dict[tuple[str, int], Path] = {}
    own = {(c, f["frame_index"]): folder / "images" / c for c in index["cameras"] for f in index["frames"]}
    for (cam, f), d in own.items():
        hits = sorted(d.glob(f"{f:06d}.*")) if d.is_dir() else []
        if hits:  # an image (or its folder) that is a link out of the label folder is refused, not listed
            out[cam, f] = contained_file(folder, hits[0].relative_to(folder).as_posix(), hits[0], "images")
    missing = [k for k in own if k not in out]
    if missing:
        out.update(_decode_frames(folder, index, info_dir, missing))
    return out


def _decode_frames(folder: Path, index: dict[str, Any], info_dir: Path, wanted: list[tuple[str, int]]) -> dict[tuple[str, int], Path]:
    """Decode the wanted frames from the clip's videos into `info_dir/images/<clip>/<camera>/<frame>.jpg`."""
    from avsim.core.video import read_video
    from avsim.render.labels.records import encode_image

    frame_of = {f["frame_index"]: f for f in index["frames"]}
    clip = folder.resolve().parent.name
    out = {}
    for cam in sorted({c for c, _ in wanted}):
        by_video: dict[str, list[int]] = {}
        for c, f in wanted:
            if c == cam:
                by_video.setdefault(frame_of[f]["video_clip"], []).append(f)
        for vclip, frames in by_video.items():
            cands = [folder.parent.parent / vclip / f"{vclip}.{cam}.mp4", folder.parent / f"{vclip}.{cam}.mp4"]  # rendered, generated
            video = next((p for p in cands if p.is_file()), None)
            if video is None:
                raise AvsimInputError(folder / "index.json", "frames", f"no image of {cam} frame {frames[0]}: neither labels/images/ nor "
                                      f"a video {cands[0].name} beside the labels (render with --images, or keep the videos)")  # fmt: skip
            decoded = read_video(video)
            for f in frames:
                path = info_dir / "images" / clip / cam / f"{f:06d}.jpg"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(encode_image(decoded[frame_of[f]["video_frame"]], "jpg"))
                out[cam, f] = path
    return out


def converter_yaw(R: np.ndarray) -> float:
    """pyquaternion's ``yaw_pitch_roll[0]`` of a rotation matrix (z-y'-x'' angles of R = Rx Ry Rz): atan2(-R[0, 1], R[0, 0]).

    The one angle mmdetection3d's nuScenes converter keeps of a box rotation, in the lidar frame
    (`instances`) and, negated, in the camera frame (`cam_instances`).

    Args:
        R: (3, 3) frame_R_object.

    Returns:
        The angle (rad).
    """
    return float(np.arctan2(-R[0, 1], R[0, 0]))


def _label(cls: str) -> int:
    name = AVSIM_TO_NUSCENES.get(cls)
    return NUSCENES_CLASSES.index(name) if name else -1


def _cam_instances(boxes: ClipBoxes, camera: str, ego_T_cam: np.ndarray, world_R_ego: np.ndarray, K: np.ndarray,
                   size_px: tuple[int, int]) -> list[dict[str, Any]]:  # fmt: skip
    """The converter's camera records of the boxes `camera` shows (see the module docstring)."""
    from shapely.geometry import MultiPoint
    from shapely.geometry import box as canvas_box

    cam_T_ego = np.linalg.inv(ego_T_cam)
    out = []
    for k in [j for j, cams in enumerate(boxes.cameras) if camera in cams]:
        R_eo = quat_to_matrix(boxes.rotation_wxyz[k] / np.linalg.norm(boxes.rotation_wxyz[k]))
        centre = cam_T_ego[:3, :3] @ boxes.center_m[k] + cam_T_ego[:3, 3]
        R_co = cam_T_ego[:3, :3] @ R_eo  # camera_R_object
        corners = (_SIGNS * boxes.size_lwh_m[k]) @ R_co.T + centre
        front = corners[corners[:, 2] > 0]
        if centre[2] <= 0 or not len(front):
            continue
        uv = (front @ K.T)[:, :2] / front[:, 2:]
        hull = MultiPoint([tuple(p) for p in uv]).convex_hull.intersection(canvas_box(0, 0, size_px[0], size_px[1]))
        if hull.is_empty or hull.geom_type != "Polygon":
            continue
        x1, y1, x2, y2 = (float(v) for v in hull.bounds)
        yaw_cam = converter_yaw(R_co)
        v_world = world_R_ego @ boxes.velocity_mps[k]
        v_cam = cam_T_ego[:3, :3] @ world_R_ego.T @ np.array([v_world[0], v_world[1], 0.0])
        c2d = K @ centre
        label = _label(boxes.object_class[k])
        l, w, h = (float(v) for v in boxes.size_lwh_m[k])
        out.append({"bbox_label": label, "bbox_label_3d": label, "bbox": [x1, y1, x2, y2], "bbox_3d_isvalid": True,
                    "bbox_3d": [*centre.tolist(), l, h, w, -yaw_cam], "velocity": [float(v_cam[0]), float(v_cam[2])],
                    "center_2d": (c2d[:2] / c2d[2]).tolist(), "depth": float(c2d[2]),
                    "attr_label": NUS_ATTRIBUTES.index(boxes.attributes[k]) if boxes.attributes[k] in NUS_ATTRIBUTES else ATTR_NONE})  # fmt: skip
    return out


def nuscenes_camera_map(ego_T_camera: dict[str, np.ndarray]) -> dict[str, str]:
    """avsim camera -> nuScenes camera name, by heading (module docstring): the assignment with the smallest total
    heading difference, each pair at most NUSCENES_MAX_HEADING_DEG apart; ties go to the camera first in rig order.

    Args:
        ego_T_camera: each camera's mounting (OpenCV axes: column 2 is the optical axis), in rig order.

    Returns:
        The map (cameras without a nuScenes counterpart are not in it).
    """
    from scipy.optimize import linear_sum_assignment

    cams, slots = list(ego_T_camera), list(NUSCENES_CAMERAS)
    heading = np.array([np.degrees(np.arctan2(T[1, 2], T[0, 2])) for T in ego_T_camera.values()])
    diff = np.abs((heading[:, None] - np.array(list(NUSCENES_CAMERAS.values()))[None, :] + 180.0) % 360.0 - 180.0)
    cost = np.where(diff <= NUSCENES_MAX_HEADING_DEG, diff, 1e6) + 1e-6 * np.arange(len(cams))[:, None]  # ties: rig order
    rows, cols = linear_sum_assignment(cost)
    return {cams[r]: slots[c] for r, c in zip(rows, cols) if diff[r, c] <= NUSCENES_MAX_HEADING_DEG}


def _camera_names(index: dict[str, Any], poses: dict[tuple[str, int], np.ndarray], names: str | dict[str, str] | None) -> dict[str, str]:
    """avsim camera -> the name written (`camera_names`: None keeps avsim's, "nuscenes" or a dict maps and leaves the others out)."""
    cams = list(index["cameras"])
    if names is None:
        return {c: c for c in cams}
    if isinstance(names, dict):
        unknown = sorted(set(names) - set(cams))
        if unknown:
            raise AvsimInputError("--camera-names", unknown[0], f"no such camera in the clip (cameras: {', '.join(cams)})")
        return {c: names[c] for c in cams if c in names}
    if names != "nuscenes":
        raise AvsimInputError("--camera-names", "value", f"expected nuscenes or CAMERA=NAME,..., got {names!r}")
    if all(c in NUSCENES_CAMERAS for c in cams):  # a nuScenes rig already
        return {c: c for c in cams}
    first = index["frames"][0]["frame_index"] if index["frames"] else 0
    return nuscenes_camera_map({c: poses[c, first] for c in cams if (c, first) in poses})


def clip_infos(folder: Path, info_dir: Path, first_idx: int = 0, camera_names: str | dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The `data_list` entries of one label folder (one per labelled frame).

    Args:
        folder: a label folder (compact or standard layout).
        info_dir: the folder of the info file (image paths are relative to it; decoded frames go under it).
        first_idx: `sample_idx` of the first entry.
        camera_names: None (avsim's names), "nuscenes", or avsim camera -> name (module docstring).

    Returns:
        The entries, in frame order.
    """
    index = compact.read_index(folder)
    boxes, poses = _frame_boxes(folder, index), _camera_poses(folder, index)
    rename = _camera_names(index, poses, camera_names)
    index = {**index, "cameras": [c for c in index["cameras"] if c in rename]}
    images = _image_paths(folder, index, info_dir)
    models = {c: compact.camera_model(folder, index, c) for c in index["cameras"]}
    out = []
    for k, f in enumerate(index["frames"]):
        fi, b = f["frame_index"], boxes[f["frame_index"]]
        world_T_ego = np.asarray(f["world_SE3_ego"], np.float64)
        entry: dict[str, Any] = {"sample_idx": first_idx + k, "token": f["sample_token"], "timestamp": f["timestamp_ns"] / 1e9,
                                 "ego2global": world_T_ego.tolist(), "images": {}, "cam_instances": {},
                                 "lidar_points": {"lidar2ego": np.eye(4).tolist()}}  # fmt: skip
        for cam, model in models.items():
            K, kind = openlane_intrinsic(model)
            ego_T_cam = poses[cam, fi]
            entry["images"][rename[cam]] = {
                "img_path": Path(images[cam, fi]).resolve().relative_to(info_dir.resolve()).as_posix()
                if Path(images[cam, fi]).resolve().is_relative_to(info_dir.resolve()) else str(Path(images[cam, fi]).resolve()),
                "height": model.height_px, "width": model.width_px, "cam2img": K.tolist(), "cam2ego": ego_T_cam.tolist(),
                "lidar2cam": np.linalg.inv(ego_T_cam).tolist(), "timestamp": f["timestamp_ns"] / 1e9,
                "sample_data_token": f"{f['sample_token']}:{rename[cam]}", **({"camera_model": model.to_dict()} if kind != "pinhole" else {}),
            }  # fmt: skip
            entry["cam_instances"][rename[cam]] = _cam_instances(b, cam, ego_T_cam, world_T_ego[:3, :3], K, (model.width_px, model.height_px))
        yaws = [converter_yaw(quat_to_matrix(q / np.linalg.norm(q))) for q in b.rotation_wxyz]
        entry["instances"] = [{
            "bbox_3d": [*b.center_m[j].tolist(), *b.size_lwh_m[j].tolist(), yaws[j]], "bbox_label": _label(b.object_class[j]),
            "bbox_label_3d": _label(b.object_class[j]), "velocity": b.velocity_mps[j, :2].tolist(),
            "num_lidar_pts": int(bool(b.cameras[j])), "num_radar_pts": 0, "bbox_3d_isvalid": bool(b.cameras[j]),
            "track_id": b.track_id[j],
        } for j in range(len(b.track_id))]  # fmt: skip
        out.append(entry)
    return out


def write_mmdet3d_info(label_folders: list[Path], out: Path, camera_names: str | dict[str, str] | None = None) -> int:
    """Write one mmdetection3d info file for the clips of `label_folders` (atomic).

    Args:
        label_folders: label folders (`OUT/<clip>/labels`, `GEN/labels`).
        out: the `.pkl` to write; image paths are relative to its folder.
        camera_names: None (avsim's names), "nuscenes", or avsim camera -> name (module docstring).

    Returns:
        The number of samples written.
    """
    data_list: list[dict[str, Any]] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    for folder in label_folders:
        if not (folder / "index.json").is_file():
            raise AvsimInputError(folder, "index.json", "not an avsim label folder")
        data_list += clip_infos(folder, out.parent, len(data_list), camera_names)
    categories = {name: i for i, name in enumerate(NUSCENES_CLASSES)} | {"other": -1}
    info = {"metainfo": {"categories": categories, "dataset": "nuscenes", "version": "avsim", "info_version": "1.1",
                         "layout": MMDET3D_LAYOUT}, "data_list": data_list}  # fmt: skip
    with atomic_output_path(out) as tmp:
        Path(tmp).write_bytes(pickle.dumps(info, protocol=4))
    return len(data_list)
