"""A synthetic mmdetection3d nuScenes info (v1.1 or the legacy 0.x box convention), built in numpy.

The reference 2-D labels (``cam_instances``) are computed here directly from the world boxes and
the camera-time ego pose, independently of avsim's importer, so a round trip through the
importer and `avsim check-projection` must reproduce them to float precision.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

LOG = "n000-2020-01-01-00-00-00+0000"
K = np.array([[1266.4, 0.0, 816.3], [0.0, 1266.4, 491.5], [0.0, 0.0, 1.0]])
SIZE_PX = (1600, 900)
T0_US = 1_577_836_800_000_000
CAM_DELAY_US = 30_000  # the camera fires 30 ms before the lidar sample
SIGNS = np.array([[i, j, k] for i in (1, -1) for j in (1, -1) for k in (1, -1)], dtype=np.float64)
# world boxes: centre (gravity), l, w, h, world heading, class; relative to the first ego pose
BOXES = [
    ((15.0, 2.0, 0.8), (4.5, 1.9, 1.6), 0.3, "car"),
    ((9.0, -1.5, 0.9), (0.7, 0.6, 1.75), -1.0, "pedestrian"),
    ((25.0, -4.0, 1.0), (4.2, 1.8, 1.5), 1.2, "car"),
    ((-12.0, 0.0, 0.8), (4.5, 1.9, 1.6), 0.0, "car"),  # behind the ego: in no image
]


def rz(yaw: float) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def se3(R: np.ndarray, t: object) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, np.asarray(t, dtype=np.float64)
    return T


def ego_pose(t_us: int) -> np.ndarray:
    """world_T_ego of a gently turning ego at 8 m/s."""
    dt = (t_us - T0_US) / 1e6
    return se3(rz(0.1 + 0.05 * dt), (100.0 + 8.0 * dt, 50.0 + 0.4 * dt, 0.0))


EGO_T_LIDAR = se3(rz(-np.pi / 2), (0.94, 0.0, 1.84))
TILT_RAD = np.radians(2.19)  # the lidar's tilt in the world on real nuScenes scene-0061 (issue 41)


def rx(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def ego_T_lidar(tilted: bool) -> np.ndarray:
    """The lidar mounting: yaw only, or rolled and pitched by about TILT_RAD (as a real mounting on a sloped road)."""
    if not tilted:
        return EGO_T_LIDAR
    pitch = 0.6 * TILT_RAD
    ry = np.array([[np.cos(pitch), 0.0, np.sin(pitch)], [0.0, 1.0, 0.0], [-np.sin(pitch), 0.0, np.cos(pitch)]])
    return se3(rx(0.8 * TILT_RAD) @ ry @ EGO_T_LIDAR[:3, :3], EGO_T_LIDAR[:3, 3])


def converter_yaw(lidar_R_world: np.ndarray, world_yaw: float) -> float:
    """The yaw mmdet3d's nuScenes converter writes: pyquaternion's ``yaw_pitch_roll[0]`` of the box rotation in the lidar frame."""
    from pyquaternion import Quaternion

    return float(Quaternion(matrix=lidar_R_world @ rz(world_yaw), atol=1e-9).yaw_pitch_roll[0])
EGO_T_CAM = se3(rz(0.05) @ np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]), (1.70, 0.02, 1.51))


def world_boxes() -> tuple[np.ndarray, np.ndarray]:
    """The world centres (B, 3) and headings (B,) of BOXES (upright, as nuScenes boxes are)."""
    T = ego_pose(T0_US)
    return np.array([T[:3, :3] @ np.array(c0) + T[:3, 3] for c0, _, _, _ in BOXES]), np.array([b[2] + 0.1 for b in BOXES])


def _cam_instances(world_T_cam: np.ndarray) -> list[dict]:
    cam_T_world = np.linalg.inv(world_T_cam)
    x_heading = np.arctan2(world_T_cam[1, 0], world_T_cam[0, 0])  # the camera's x axis in the world
    out = []
    for c0, lwh, yaw, cls in BOXES:
        c_world = ego_pose(T0_US)[:3, :3] @ np.array(c0) + ego_pose(T0_US)[:3, 3]
        yaw_w = yaw + 0.1
        corners = c_world + (SIGNS * np.array(lwh) / 2) @ rz(yaw_w).T
        pc = corners @ cam_T_world[:3, :3].T + cam_T_world[:3, 3]
        cc = cam_T_world[:3, :3] @ c_world + cam_T_world[:3, 3]
        if np.any(pc[:, 2] <= 0):
            continue
        uv = (pc @ K.T)[:, :2] / pc[:, 2:]
        ctr = (K @ cc)[:2] / cc[2]
        out.append({
            "bbox_label": ["car", "pedestrian"].index(cls), "bbox_label_3d": ["car", "pedestrian"].index(cls),
            "bbox": [float(uv[:, 0].min()), float(uv[:, 1].min()), float(uv[:, 0].max()), float(uv[:, 1].max())],
            "bbox_3d_isvalid": True, "bbox_3d": [*cc.tolist(), lwh[0], lwh[2], lwh[1], -(yaw_w - x_heading)],
            "velocity": [0.0, 0.0], "center_2d": ctr.tolist(), "depth": float(cc[2]), "attr_label": 0,
        })  # fmt: skip
    return out


def _sample(k: int, legacy: bool, tilted: bool = False) -> dict:
    t_us = T0_US + 500_000 * k
    cam_us = t_us - CAM_DELAY_US
    world_T_ego, world_T_ego_cam = ego_pose(t_us), ego_pose(cam_us)
    lidar_mount = ego_T_lidar(tilted)
    world_T_lidar = world_T_ego @ lidar_mount
    lidar_T_world = np.linalg.inv(world_T_lidar)
    instances = []
    for c0, lwh, yaw, cls in BOXES:
        c_world = ego_pose(T0_US)[:3, :3] @ np.array(c0) + ego_pose(T0_US)[:3, 3]
        c_l = lidar_T_world[:3, :3] @ c_world + lidar_T_world[:3, 3]
        yaw_l = converter_yaw(lidar_T_world[:3, :3], yaw + 0.1)
        box = [*c_l.tolist(), lwh[1], lwh[0], lwh[2], -yaw_l - np.pi / 2] if legacy else [*c_l.tolist(), *lwh, yaw_l]
        label = ["car", "pedestrian"].index(cls)
        instances.append({"bbox_3d": box, "bbox_label": label, "bbox_label_3d": label, "velocity": [0.0, 0.0],
                          "num_lidar_pts": 10, "num_radar_pts": 0, "bbox_3d_isvalid": True})  # fmt: skip
    cam_T_lidar = np.linalg.inv(EGO_T_CAM) @ np.linalg.inv(world_T_ego_cam) @ world_T_lidar
    image = {
        "img_path": f"{LOG}__CAM_FRONT__{cam_us}.jpg", "cam2img": K.tolist(), "sample_data_token": f"cam{k}",
        "timestamp": cam_us / 1e6, "cam2ego": EGO_T_CAM.tolist(), "lidar2cam": cam_T_lidar.tolist(),
    }  # fmt: skip
    sample = {
        "sample_idx": k, "token": f"sample{k}", "timestamp": t_us / 1e6, "ego2global": world_T_ego.tolist(),
        "lidar_points": {"num_pts_feats": 5, "lidar_path": f"{LOG}__LIDAR_TOP__{t_us}.pcd.bin", "lidar2ego": lidar_mount.tolist()},
        "images": {"CAM_FRONT": image}, "instances": instances,
    }  # fmt: skip
    if not legacy:
        sample["cam_instances"] = {"CAM_FRONT": _cam_instances(world_T_ego_cam @ EGO_T_CAM)}
    return sample


def info_dict(legacy: bool = False, tilted: bool = False) -> dict:
    """The info as mmdet3d writes it (v1.1, or legacy with ``CLASSES`` and 0.x boxes); `tilted`: a rolled and pitched lidar."""
    if legacy:
        meta = {"CLASSES": ("car", "pedestrian"), "DATASET": "Nuscenes", "version": "v1.0-mini"}
    else:
        meta = {"categories": {"car": 0, "pedestrian": 1}, "dataset": "nuscenes", "version": "v1.0-mini", "info_version": "1.1"}
    return {"metainfo": meta, "data_list": [_sample(1, legacy, tilted), _sample(0, legacy, tilted)]}  # unsorted on purpose


def write_info(folder: Path, legacy: bool = False, image: bool = True, info: dict | None = None, tilted: bool = False) -> Path:
    """Write the info (and a black CAM_FRONT image per sample) under `folder`; returns the .pkl."""
    folder.mkdir(parents=True, exist_ok=True)
    info = info if info is not None else info_dict(legacy, tilted)
    path = folder / ("nus_legacy.pkl" if legacy else "nus_infos_v11.pkl")
    path.write_bytes(pickle.dumps(info, protocol=4))
    if image:
        import cv2

        for sample in info["data_list"]:
            img = folder / "samples" / "CAM_FRONT" / sample["images"]["CAM_FRONT"]["img_path"]
            img.parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(img), np.full((SIZE_PX[1], SIZE_PX[0], 3), 40, dtype=np.uint8))
    return path


def mono3d_doc(legacy: bool = False) -> dict:
    """A mono3d COCO document of sample 0's CAM_FRONT (current converter, or the older one)."""
    from avsim.core.transforms import matrix_to_quat

    cam_us = T0_US - CAM_DELAY_US
    world_T_ego = ego_pose(cam_us)
    anns = []
    for k, inst in enumerate(_cam_instances(world_T_ego @ EGO_T_CAM)):
        x, y, z, l, h, w, r = inst["bbox_3d"]
        box = [x, y, z, w, l, h, -r] if legacy else [x, y, z, l, h, w, r]
        x0, y0, x1, y1 = inst["bbox"]
        anns.append({"image_id": "im0", "id": k, "category_name": "car", "bbox": [x0, y0, x1 - x0, y1 - y0],
                     "bbox_cam3d": box, "center2d": [*inst["center_2d"], inst["depth"]]})  # fmt: skip
    image = {
        "file_name": f"samples/CAM_FRONT/{LOG}__CAM_FRONT__{cam_us}.jpg", "id": "im0", "token": "sample0",
        "cam2ego_rotation": matrix_to_quat(EGO_T_CAM[:3, :3]).tolist(), "cam2ego_translation": EGO_T_CAM[:3, 3].tolist(),
        "ego2global_rotation": matrix_to_quat(world_T_ego[:3, :3]).tolist(), "ego2global_translation": world_T_ego[:3, 3].tolist(),
        "cam_intrinsic": K.tolist(), "width": SIZE_PX[0], "height": SIZE_PX[1],
    }  # fmt: skip
    return {"images": [image], "annotations": anns, "categories": [{"id": 0, "name": "car"}]}
