"""Bird's-eye raster of the map around a pose (OpenCV drawing, no plotting libraries)."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayByte, NDArrayFloat, NDArrayInt32
from avsim.maps import style
from avsim.maps.elements import HDMap
from avsim.maps.queries import within_patch

BEV_DRIVABLE_RGB: style.RGB = (40, 40, 40)  # the top view only: the camera renderer draws no drivable area
# element type -> fill / stroke colour of the top view (the spec palette of `avsim.maps.style`)
BEV_COLORS: dict[str, style.RGB] = {
    "drivable_areas": BEV_DRIVABLE_RGB,
    "crosswalks": style.CROSSWALK_RGB,
    "road_markings": style.ROAD_MARKING_RGB,
    "road_boundaries": style.ROAD_BOUNDARY_RGB,
    "wait_lines": style.WAIT_LINE_RGB,
    "poles": style.POLE_RGB,
    "traffic_signs": style.TRAFFIC_SIGN_RGB,
    "traffic_lights": style.TRAFFIC_LIGHT_RGB["unknown"],
}


def world_to_bev_px(points_world: npt.ArrayLike, world_SE3_ego: SE3, size_px: int, resolution_m_per_px: float) -> NDArrayFloat:
    """Map world points to top-view pixels: ego at the centre, ego +x (forward) up.

    Args:
        points_world: (N, 3) world points in metres.
        world_SE3_ego: the ego pose (one SE3).
        size_px: image side in pixels.
        resolution_m_per_px: metres per pixel.

    Returns:
        (N, 2) continuous pixel coordinates (x right, y down).
    """
    ego = world_SE3_ego.inverse().apply(np.asarray(points_world, dtype=np.float64).reshape(-1, 3))
    centre = size_px / 2.0
    return np.stack([centre - ego[:, 1] / resolution_m_per_px, centre - ego[:, 0] / resolution_m_per_px], -1)


def _fixed(px: NDArrayFloat) -> NDArrayInt32:
    return np.round(px * 16).astype(np.int32)  # 4 fractional bits for cv2 shift=4


def bev_raster(hd_map: HDMap, world_SE3_ego: SE3, size_px: int = 512, resolution_m_per_px: float = 0.2) -> NDArrayByte:
    """A top view of the map around a pose, in the spec palette (`avsim.maps.style`).

    Args:
        hd_map: the map.
        world_SE3_ego: the ego pose (one SE3).
        size_px: image side in pixels.
        resolution_m_per_px: metres per pixel.

    Returns:
        (size_px, size_px, 3) uint8 RGB, ego forward up.
    """
    image = np.zeros((size_px, size_px, 3), np.uint8)
    half_extent = size_px * resolution_m_per_px * 0.75
    local = within_patch(hd_map, world_SE3_ego, 2 * half_extent, 2 * half_extent)

    def to_px(points: NDArrayFloat) -> NDArrayInt32:
        return _fixed(world_to_bev_px(points, world_SE3_ego, size_px, resolution_m_per_px))

    for name in ("drivable_areas", "crosswalks", "road_markings"):
        polys = getattr(local, name)
        if len(polys):
            cv2.fillPoly(image, [to_px(p) for p in polys], BEV_COLORS[name], cv2.LINE_AA, 4)
    for name in ("road_boundaries", "wait_lines", "poles"):
        for line in getattr(local, name):
            cv2.polylines(image, [to_px(line)], False, BEV_COLORS[name], 2, cv2.LINE_AA, 4)
    for k in range(len(local.lane_lines)):
        rgb = style.lane_style(local.lane_lines.lane_type(k)).rgb
        cv2.polylines(image, [to_px(local.lane_lines.lines[k])], False, rgb, 1, cv2.LINE_AA, 4)
    for name in ("traffic_signs", "traffic_lights"):
        boxes = getattr(local, name)
        if len(boxes):
            cv2.fillPoly(image, [to_px(c[:4]) for c in boxes.corners_m()], BEV_COLORS[name], cv2.LINE_AA, 4)
    return image


def surface_mask(hd_map: HDMap, width_px: int, height_px: int, resolution_m_per_px: float = 0.1,
                 origin_xy: tuple[float, float] = (0.0, 0.0)) -> NDArrayByte:  # fmt: skip
    """A north-up top view of the road surface (`queries.road_surface_rings`): 255 on it, 0 elsewhere.

    The layout of nuScenes' semantic-prior map masks: pixel column = (x - x0) / resolution, row =
    height_px - (y - y0) / resolution (world +y up the image), so (x0, y0) is the image's
    bottom-left corner.

    Args:
        hd_map: the map.
        width_px, height_px: the image size.
        resolution_m_per_px: metres per pixel.
        origin_xy: the world x, y of the bottom-left corner.

    Returns:
        (height_px, width_px) uint8.
    """
    from avsim.maps.queries import road_surface_rings

    image = np.zeros((int(height_px), int(width_px)), np.uint8)
    rings = road_surface_rings(hd_map)
    if rings:
        x0, y0 = origin_xy
        px = [_fixed(np.stack([(r[:, 0] - x0) / resolution_m_per_px, height_px - (r[:, 1] - y0) / resolution_m_per_px], -1))
              for r in rings]  # fmt: skip
        for ring in px:  # one fill per ring: overlapping rings (lanes over a drivable area) stay filled
            cv2.fillPoly(image, [ring], (255,), cv2.LINE_8, 4)
    return image
