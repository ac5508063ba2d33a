"""mmdetection3d box conventions, and what the mmdet3d importers share (matrices, image sizes).

Lidar-frame ``instances[*].bbox_3d`` (centre = gravity centre in every version):

- info_version 1.x (``metainfo`` has ``info_version`` or ``categories``): (x, y, z, l, w, h, yaw),
  yaw = the nuScenes heading in the lidar frame (mmdet3d >= 1.0 ``nuscenes_converter``);
- legacy (mmdet3d 0.x "SECOND" format, ``metainfo`` with ``CLASSES``): (x, y, z, w, l, h, r) with
  r = -yaw - pi/2.

Camera-frame mono3d boxes (``bbox_cam3d`` / ``cam_instances[*].bbox_3d``): (x, y, z) the gravity
centre in the OpenCV camera frame, then sizes and one angle r = -+yaw_pitch_roll[0] of the box's
camera-frame quaternion, i.e. r = -+(world heading - heading of the camera's x axis) for an
upright box. Current converters write sizes (l, h, w) and r = -yaw; older ones wrote (w, l, h)
and r = +yaw. `cam_boxes_to_world` rebuilds the upright world box, so corners project exactly.
docs/importers.md ("mmdetection3d infos") has the measurements behind these statements.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.transforms import SE3, matrix_to_quat, quat_to_matrix

if TYPE_CHECKING:
    from avsim.maps import HDMap

DEFAULT_IMAGE_SIZE_PX = (1600, 900)  # nuScenes camera images
CAM_CONVENTIONS = ("lhw_neg_yaw", "wlh_pos_yaw")  # current mmdet3d, older converters
# unit-cube corner signs (x forward/length, y left/width, z up/height)
_SIGNS = np.array([[i, j, k] for i in (1, -1) for j in (1, -1) for k in (1, -1)], dtype=np.float64)


def as_matrix(value: object, path: str | os.PathLike[str], what: str, shape: tuple[int, int] = (4, 4)) -> np.ndarray:
    """A finite float64 matrix of `shape` from a nested list / array.

    Args:
        value: the file's value.
        path: file named in errors.
        what: field named in errors.
        shape: expected shape.

    Returns:
        (rows, cols) float64 array.
    """
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise AvsimInputError(path, what, f"not a {shape[0]}x{shape[1]} matrix") from None
    if arr.shape == (3, 4) and shape == (3, 3):
        arr = arr[:, :3]
    if arr.shape == (4, 4) and shape == (3, 3):
        arr = arr[:3, :3]
    if arr.shape != shape:
        raise AvsimInputError(path, what, f"expected a {shape[0]}x{shape[1]} matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise AvsimInputError(path, what, "contains NaN or infinite values")
    return arr


def rigid(T: np.ndarray, path: str | os.PathLike[str], what: str) -> SE3:
    """An `SE3` from a 4x4 rigid transform, its rotation re-orthonormalised (files store float32).

    Args:
        T: (4, 4) matrix.
        path: file named in errors.
        what: field named in errors.

    Returns:
        Unbatched SE3.
    """
    R = T[:3, :3]
    if abs(np.linalg.det(R) - 1.0) > 1e-3 or not np.allclose(R @ R.T, np.eye(3), atol=1e-3):
        raise AvsimInputError(path, what, "rotation part is not a rotation matrix")
    return SE3(quat_to_matrix(matrix_to_quat(R)), T[:3, 3].copy())


def yaw_matrix(yaw_rad: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rotations about +z by `yaw_rad` (N,)."""
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    R = np.zeros((len(yaw_rad), 3, 3))
    R[:, 0, 0], R[:, 0, 1], R[:, 1, 0], R[:, 1, 1], R[:, 2, 2] = c, -s, s, c, 1.0
    return R


def lidar_boxes(bbox_3d: np.ndarray, legacy: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lidar-frame mmdet3d boxes -> (centre (N, 3), size l, w, h (N, 3), heading yaw (N,)).

    Args:
        bbox_3d: (N, >=7) boxes as the info stores them.
        legacy: mmdet3d 0.x boxes (w, l, h, -yaw - pi/2) instead of 1.x (l, w, h, yaw).

    Returns:
        Gravity centres, sizes (length along the heading), headings in the lidar frame.
    """
    b = np.asarray(bbox_3d, dtype=np.float64)
    if legacy:
        return b[:, :3].copy(), b[:, [4, 3, 5]].copy(), -b[:, 6] - np.pi / 2
    return b[:, :3].copy(), b[:, 3:6].copy(), b[:, 6].copy()


def upright_world_yaw(world_R_lidar: np.ndarray, yaw_lidar_rad: np.ndarray) -> np.ndarray:
    """World headings of the upright boxes whose lidar-frame yaw mmdet3d's converter wrote.

    nuScenes boxes are upright in the world (rotation about the world z only, heading psi). The
    converter moves each into the lidar frame and keeps one angle, pyquaternion's
    ``yaw_pitch_roll[0]`` of the rotation R = lidar_R_world Rz(psi): atan2(-R[0, 1], R[0, 0]) (its
    z-y'-x'' angles of R = Rx(roll) Ry(pitch) Rz(yaw)). With (a, b) the first row of
    lidar_R_world, R[0, 0] = a cos psi + b sin psi and -R[0, 1] = a sin psi - b cos psi, so that
    angle is exactly psi - atan2(b, a), the lidar's roll and pitch included: psi = yaw + the heading
    of the lidar's x axis in the world (atan2(world_R_lidar[1, 0], world_R_lidar[0, 0])). The box
    is rebuilt upright with that heading; carried through the tilted lidar pose it would be tilted.

    Args:
        world_R_lidar: (3, 3) rotation of the lidar in the world at the sample time.
        yaw_lidar_rad: (N,) the info's lidar-frame yaws.

    Returns:
        (N,) world headings (rad), about the world z axis, counter-clockwise from x.
    """
    return np.asarray(yaw_lidar_rad, np.float64) + np.arctan2(world_R_lidar[1, 0], world_R_lidar[0, 0])


def cam_boxes_to_world(
    boxes_cam: np.ndarray, world_SE3_camera: SE3, convention: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Camera-frame mono3d boxes -> upright world boxes.

    Args:
        boxes_cam: (N, >=7) x, y, z (gravity centre, camera frame), three sizes, angle r.
        world_SE3_camera: unbatched camera pose of the image.
        convention: one of `CAM_CONVENTIONS`.

    Returns:
        World centres (N, 3), sizes l, w, h (N, 3), world headings (N,).
    """
    b = np.asarray(boxes_cam, dtype=np.float64)
    camera_x_in_world = world_SE3_camera.rotation[:, 0]
    x_heading = np.arctan2(camera_x_in_world[1], camera_x_in_world[0])
    if convention == "lhw_neg_yaw":
        lwh, yaw = b[:, [3, 5, 4]], -b[:, 6] + x_heading
    else:
        lwh, yaw = b[:, [4, 3, 5]], b[:, 6] + x_heading
    return world_SE3_camera.apply(b[:, :3]), lwh.copy(), yaw


def corners_world(center_m: np.ndarray, lwh_m: np.ndarray, yaw_rad: np.ndarray) -> np.ndarray:
    """(N, 8, 3) corners of upright boxes."""
    local = _SIGNS[None] * (lwh_m[:, None, :] / 2.0)
    return np.einsum("nij,nkj->nki", yaw_matrix(yaw_rad), local) + center_m[:, None, :]


def rect_of_projection(corners_cam: np.ndarray, K: np.ndarray) -> np.ndarray:
    """(N, 4) x0, y0, x1, y1 of the projected corners (N, 8, 3); NaN where a corner is behind."""
    z = corners_cam[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (K[0, 0] * corners_cam[..., 0] + K[0, 1] * corners_cam[..., 1]) / z + K[0, 2]
        v = (K[1, 1] * corners_cam[..., 1]) / z + K[1, 2]
    rect = np.stack([u.min(-1), v.min(-1), u.max(-1), v.max(-1)], -1)
    rect[np.any(z <= 0, axis=-1)] = np.nan
    return rect


def is_clipped(box_px: np.ndarray, width_px: int, height_px: int, tol_px: float = 1e-3) -> bool:
    """Whether a source rectangle x0, y0, x1, y1 touches the image border (was clipped to it)."""
    x0, y0, x1, y1 = (float(v) for v in box_px)
    return x0 <= tol_px or y0 <= tol_px or x1 >= width_px - tol_px or y1 >= height_px - tol_px


def record_size(record: dict, path: str | os.PathLike[str], where: str) -> tuple[int, int] | None:
    """(width, height) from a record's ``width`` / ``height``, None when absent."""
    if not record.get("width") or not record.get("height"):
        return None
    try:
        size = int(record["width"]), int(record["height"])
    except (TypeError, ValueError):
        raise AvsimInputError(path, f"{where}.width", "width / height must be integers") from None
    if min(size) <= 0:
        raise AvsimInputError(path, f"{where}.width", f"image size must be positive, got {size}")
    return size


def image_size(path: Path) -> tuple[int, int] | None:
    """(width, height) from the image file's header, or None if there is no readable image."""
    if not path.is_file():
        return None
    try:
        from PIL import Image

        with Image.open(path) as img:
            return int(img.size[0]), int(img.size[1])
    except (OSError, ValueError, SyntaxError):
        return None


PLACEHOLDER_MARGIN_M = 30.0
PLACEHOLDER_NOTE = (
    "none in the source: one placeholder drivable-area rectangle (ego path bounding box + 30 m, "
    "id mmdet3d-placeholder-area) so the scenario is usable; it is not real road geometry"
)


def placeholder_map(ego_positions_m: np.ndarray) -> HDMap:
    """An HDMap holding only a drivable-area rectangle around the ego path (infos have no map).

    Args:
        ego_positions_m: (T, 3) ego positions in the world frame.

    Returns:
        HDMap with one drivable area at the median ego height.
    """
    from avsim.scenario.importers.common import MapBuilder

    lo = ego_positions_m[:, :2].min(axis=0) - PLACEHOLDER_MARGIN_M
    hi = ego_positions_m[:, :2].max(axis=0) + PLACEHOLDER_MARGIN_M
    z = float(np.median(ego_positions_m[:, 2]))
    ring = np.array([[lo[0], lo[1], z], [hi[0], lo[1], z], [hi[0], hi[1], z], [lo[0], hi[1], z]])
    mb = MapBuilder()
    mb.drivable_areas.add("mmdet3d-placeholder-area", ring)
    return mb.build()
