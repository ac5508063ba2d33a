"""A restatement of mmdetection3d's nuScenes info converter, for the tests of `avsim export nuscenes`.

mmdetection3d (it needs mmcv's compiled ops and its own torch) does not install beside avsim, so the
steps its `tools/create_data.py nuscenes` takes are restated here from its code (open-mmlab/
mmdetection3d @ fe25f7a5): `tools/dataset_converters/nuscenes_converter.py` (`get_available_scenes`,
`_fill_trainval_infos`, `obtain_sensor2top`: the v1 info of every sample) and
`tools/dataset_converters/update_infos_to_v2.py` (`update_nuscenes_infos`: the 1.1 layout that
`NuScenesDataset` reads), with `mmdet3d/datasets/convert_utils.py` (`get_nuscenes_2d_boxes`,
`post_process_coords`, `NuScenesNameMapping`) for the camera instances. Same calls into
nuscenes-devkit and pyquaternion, same arithmetic, same fields; mmengine's file helpers are plain
Python here. Only the fields the tests compare are built. Checked once against the converter's own
files run with mmengine 0.10.7 and stand-ins for its compiled imports (mmcv, mmdet3d.structures):
the same infos on the sample's export, every field equal (camera centres within 2e-13 px).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

CAMERA_TYPES = ("CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_FRONT_LEFT", "CAM_BACK", "CAM_BACK_LEFT", "CAM_BACK_RIGHT")
CLASSES = ("car", "truck", "trailer", "bus", "construction_vehicle", "bicycle", "motorcycle", "pedestrian", "traffic_cone", "barrier")
ATTRIBUTES = ("cycle.with_rider", "cycle.without_rider", "pedestrian.moving", "pedestrian.standing", "pedestrian.sitting_lying_down",
              "vehicle.moving", "vehicle.parked", "vehicle.stopped", "None")  # fmt: skip
NAME_MAPPING = {
    "movable_object.barrier": "barrier", "vehicle.bicycle": "bicycle", "vehicle.bus.bendy": "bus", "vehicle.bus.rigid": "bus",
    "vehicle.car": "car", "vehicle.construction": "construction_vehicle", "vehicle.motorcycle": "motorcycle",
    "human.pedestrian.adult": "pedestrian", "human.pedestrian.child": "pedestrian",
    "human.pedestrian.construction_worker": "pedestrian", "human.pedestrian.police_officer": "pedestrian",
    "movable_object.trafficcone": "traffic_cone", "vehicle.trailer": "trailer", "vehicle.truck": "truck",
}  # fmt: skip


def available_scenes(nusc: Any) -> list[dict]:
    """The scenes whose first LiDAR file exists (the converter skips the others)."""
    out = []
    for scene in nusc.scene:
        sample = nusc.get("sample", scene["first_sample_token"])
        lidar_path, _, _ = nusc.get_sample_data(sample["data"]["LIDAR_TOP"])
        if Path(str(lidar_path)).is_file():
            out.append(scene)
    return out


def sensor_to_lidar(nusc: Any, token: str, l2e_t: Any, l2e_r_mat: np.ndarray, e2g_t: Any, e2g_r_mat: np.ndarray,
                    sensor_type: str) -> dict[str, Any]:  # fmt: skip
    """`obtain_sensor2top`: one sensor capture with its pose relative to the keyframe's top LiDAR."""
    from pyquaternion import Quaternion

    sd = nusc.get("sample_data", token)
    cs = nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
    pose = nusc.get("ego_pose", sd["ego_pose_token"])
    path = str(nusc.get_sample_data_path(sd["token"]))
    if os.getcwd() in path:
        path = path.split(f"{os.getcwd()}/")[-1]
    sweep = {"data_path": path, "type": sensor_type, "sample_data_token": sd["token"], "sensor2ego_translation": cs["translation"],
             "sensor2ego_rotation": cs["rotation"], "ego2global_translation": pose["translation"],
             "ego2global_rotation": pose["rotation"], "timestamp": sd["timestamp"]}  # fmt: skip
    s2e_r = Quaternion(sweep["sensor2ego_rotation"]).rotation_matrix
    e2g_r_s = Quaternion(sweep["ego2global_rotation"]).rotation_matrix
    inv = np.linalg.inv(e2g_r_mat).T @ np.linalg.inv(l2e_r_mat).T
    R = (s2e_r.T @ e2g_r_s.T) @ inv
    T = (np.asarray(sweep["sensor2ego_translation"]) @ e2g_r_s.T + np.asarray(sweep["ego2global_translation"])) @ inv
    T -= np.asarray(e2g_t) @ inv + np.asarray(l2e_t) @ np.linalg.inv(l2e_r_mat).T
    sweep["sensor2lidar_rotation"] = R.T
    sweep["sensor2lidar_translation"] = T
    return sweep


def v1_infos(nusc: Any, max_sweeps: int = 10) -> list[dict[str, Any]]:
    """`_fill_trainval_infos` over every sample (scenes outside nuScenes' splits all land in its val list)."""
    from pyquaternion import Quaternion

    assert available_scenes(nusc), "the converter finds no scene with its LiDAR files"
    infos = []
    for sample in nusc.sample:
        lidar_token = sample["data"]["LIDAR_TOP"]
        sd = nusc.get("sample_data", lidar_token)
        cs = nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
        pose = nusc.get("ego_pose", sd["ego_pose_token"])
        lidar_path, boxes, _ = nusc.get_sample_data(lidar_token)
        assert Path(str(lidar_path)).is_file()
        info: dict[str, Any] = {"lidar_path": lidar_path, "num_features": 5, "token": sample["token"], "sweeps": [], "cams": {},
                                "lidar2ego_translation": cs["translation"], "lidar2ego_rotation": cs["rotation"],
                                "ego2global_translation": pose["translation"], "ego2global_rotation": pose["rotation"],
                                "timestamp": sample["timestamp"]}  # fmt: skip
        l2e_r_mat = Quaternion(info["lidar2ego_rotation"]).rotation_matrix
        e2g_r_mat = Quaternion(info["ego2global_rotation"]).rotation_matrix
        for cam in CAMERA_TYPES:
            cam_token = sample["data"][cam]
            _, _, K = nusc.get_sample_data(cam_token)
            cam_info = sensor_to_lidar(nusc, cam_token, info["lidar2ego_translation"], l2e_r_mat, info["ego2global_translation"],
                                       e2g_r_mat, cam)  # fmt: skip
            cam_info["cam_intrinsic"] = K
            info["cams"][cam] = cam_info
        prev = nusc.get("sample_data", lidar_token)
        while len(info["sweeps"]) < max_sweeps and prev["prev"] != "":
            info["sweeps"].append(sensor_to_lidar(nusc, prev["prev"], info["lidar2ego_translation"], l2e_r_mat,
                                                  info["ego2global_translation"], e2g_r_mat, "lidar"))  # fmt: skip
            prev = nusc.get("sample_data", prev["prev"])
        anns = [nusc.get("sample_annotation", t) for t in sample["anns"]]
        locs = np.array([b.center for b in boxes]).reshape(-1, 3)
        dims = np.array([b.wlh for b in boxes]).reshape(-1, 3)
        rots = np.array([b.orientation.yaw_pitch_roll[0] for b in boxes]).reshape(-1, 1)
        velocity = np.array([nusc.box_velocity(t)[:2] for t in sample["anns"]]).reshape(-1, 2)
        for i in range(len(boxes)):
            v = np.array([*velocity[i], 0.0]) @ np.linalg.inv(e2g_r_mat).T @ np.linalg.inv(l2e_r_mat).T
            velocity[i] = v[:2]
        names = np.array([NAME_MAPPING.get(b.name, b.name) for b in boxes])
        info["gt_boxes"] = np.concatenate([locs, dims[:, [1, 0, 2]], rots], axis=1)
        info["gt_names"] = names
        info["gt_velocity"] = velocity
        info["num_lidar_pts"] = np.array([a["num_lidar_pts"] for a in anns])
        info["num_radar_pts"] = np.array([a["num_radar_pts"] for a in anns])
        info["valid_flag"] = np.array([(a["num_lidar_pts"] + a["num_radar_pts"]) > 0 for a in anns], dtype=bool).reshape(-1)
        infos.append(info)
    return infos


def _matrix(rotation: Any, translation: Any) -> list[list[float]]:
    """`convert_quaternion_to_matrix` (mmdet3d/datasets/utils.py): the 4x4 rounded to float32, as a list."""
    from pyquaternion import Quaternion

    T = np.eye(4)
    T[:3, :3] = Quaternion(rotation).rotation_matrix
    T[:3, 3] = translation
    return T.astype(np.float32).tolist()


def v2_info(info: dict[str, Any], index: int, nusc: Any) -> dict[str, Any]:
    """`update_nuscenes_infos` of one v1 info (its camera instances by `camera_boxes`)."""
    out: dict[str, Any] = {"sample_idx": index, "token": info["token"], "ego2global": _matrix(info["ego2global_rotation"],
                           info["ego2global_translation"]), "timestamp": info["timestamp"] / 1e6, "images": {}, "instances": [],
                           "lidar_points": {"num_pts_feats": info["num_features"], "lidar_path": Path(info["lidar_path"]).name,
                                            "lidar2ego": _matrix(info["lidar2ego_rotation"], info["lidar2ego_translation"])},
                           "lidar_sweeps": [sw["sample_data_token"] for sw in info["sweeps"]]}  # fmt: skip
    for cam, c in info["cams"].items():
        rot, trans = c["sensor2lidar_rotation"], c["sensor2lidar_translation"]
        lidar2cam = np.eye(4)
        lidar2cam[:3, :3] = rot.T
        lidar2cam[:3, 3:4] = -1 * np.matmul(rot.T, trans.reshape(3, 1))
        out["images"][cam] = {"img_path": Path(c["data_path"]).name, "cam2img": np.asarray(c["cam_intrinsic"]).tolist(),
                              "sample_data_token": c["sample_data_token"], "timestamp": c["timestamp"] / 1e6,
                              "cam2ego": _matrix(c["sensor2ego_rotation"], c["sensor2ego_translation"]),
                              "lidar2cam": lidar2cam.astype(np.float32).tolist(), "data_path": c["data_path"]}  # fmt: skip
    for i in range(info["gt_boxes"].shape[0]):
        name = info["gt_names"][i]
        label = CLASSES.index(name) if name in CLASSES else -1
        out["instances"].append({"bbox_3d": info["gt_boxes"][i, :].tolist(), "bbox_label": label, "bbox_label_3d": label,
                                 "velocity": info["gt_velocity"][i, :].tolist(), "num_lidar_pts": info["num_lidar_pts"][i],
                                 "num_radar_pts": info["num_radar_pts"][i], "bbox_3d_isvalid": info["valid_flag"][i]})  # fmt: skip
    out["cam_instances"] = {cam: camera_boxes(nusc, info["cams"][cam]["sample_data_token"]) for cam in CAMERA_TYPES}
    return out


def _canvas_box(corners: list[list[float]], size: tuple[int, int] = (1600, 900)) -> tuple[float, float, float, float] | None:
    """`post_process_coords`: the bounds of the corners' hull clipped to the (nuScenes-sized) canvas."""
    from shapely.geometry import MultiPoint, Polygon, box

    hull = MultiPoint(corners).convex_hull
    canvas = box(0, 0, size[0], size[1])
    if not hull.intersects(canvas):
        return None
    inter = hull.intersection(canvas)
    if not isinstance(inter, Polygon):
        return None
    xy = np.array(inter.exterior.coords)
    return float(min(xy[:, 0])), float(min(xy[:, 1])), float(max(xy[:, 0])), float(max(xy[:, 1]))


def camera_boxes(nusc: Any, token: str, visibilities: tuple[str, ...] = ("", "1", "2", "3", "4")) -> list[dict[str, Any]]:
    """`get_nuscenes_2d_boxes`: a camera keyframe's boxes (2-D box, camera-frame box, centre, depth, attribute)."""
    from nuscenes.utils.geometry_utils import view_points
    from pyquaternion import Quaternion

    sd = nusc.get("sample_data", token)
    assert sd["sensor_modality"] == "camera" and sd["is_key_frame"]
    sample = nusc.get("sample", sd["sample_token"])
    cs = nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
    pose = nusc.get("ego_pose", sd["ego_pose_token"])
    K = np.array(cs["camera_intrinsic"])
    out = []
    for ann in [nusc.get("sample_annotation", t) for t in sample["anns"]]:
        if ann["visibility_token"] not in visibilities:
            continue
        b = nusc.get_box(ann["token"])
        b.translate(-np.array(pose["translation"]))
        b.rotate(Quaternion(pose["rotation"]).inverse)
        b.translate(-np.array(cs["translation"]))
        b.rotate(Quaternion(cs["rotation"]).inverse)
        corners = b.corners()
        corners = corners[:, np.argwhere(corners[2, :] > 0).flatten()]
        coords = _canvas_box(view_points(corners, K, True).T[:, :2].tolist())
        if coords is None or ann["category_name"] not in NAME_MAPPING:
            continue
        label = CLASSES.index(NAME_MAPPING[ann["category_name"]])
        dim = b.wlh
        dim[[0, 1, 2]] = dim[[1, 2, 0]]
        velo = np.array([*nusc.box_velocity(b.token)[:2], 0.0]) @ np.linalg.inv(Quaternion(pose["rotation"]).rotation_matrix).T \
            @ np.linalg.inv(Quaternion(cs["rotation"]).rotation_matrix).T  # fmt: skip
        c = K @ b.center
        depth = float(c[2])
        if depth <= 0:
            continue
        attrs = ann["attribute_tokens"]
        attr = nusc.get("attribute", attrs[0])["name"] if attrs else "None"
        out.append({"bbox_label": label, "bbox_label_3d": label, "bbox": list(coords), "bbox_3d_isvalid": True,
                    "bbox_3d": b.center.tolist() + dim.tolist() + [-b.orientation.yaw_pitch_roll[0]], "velocity": velo[0::2].tolist(),
                    "center_2d": (c[:2] / depth).tolist(), "depth": depth, "attr_label": ATTRIBUTES.index(attr),
                    "annotation": ann["token"]})  # fmt: skip
    return out


def infos(nusc: Any) -> list[dict[str, Any]]:
    """The converter's 1.1 infos of every sample of a dataroot."""
    return [v2_info(info, i, nusc) for i, info in enumerate(v1_infos(nusc))]
