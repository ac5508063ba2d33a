"""Bird's-eye raster of the map around a pose (OpenCV drawing, no plotting libraries)."""

from __future__ import annotations

import cv2
import numpy as np

from avsim.core.transforms import SE3
from avsim.maps.elements import HDMap, lane_style

BEV_COLORS = {
    "drivable_areas": (40, 40, 40),
    "crosswalks": (139, 93, 255),
    "road_markings": (20, 254, 185),
    "road_boundaries": (253, 1, 232),
    "wait_lines": (108, 179, 59),
    "poles": (183, 69, 177),
    "traffic_signs": (8, 2, 255),
    "traffic_lights": (100, 100, 100),
}


def world_to_bev_px(points_world: np.ndarray, world_SE3_ego: SE3, size_px: int, resolution_m_per_px: float) -> np.ndarray:
    """World points (N, 3) -> BEV pixels (N, 2): ego at the centre, ego +x (forward) up."""
    ego = world_SE3_ego.inverse().apply(np.asarray(points_world, dtype=np.float64).reshape(-1, 3))
    centre = size_px / 2.0
    return np.stack([centre - ego[:, 1] / resolution_m_per_px, centre - ego[:, 0] / resolution_m_per_px], -1)


def _fixed(px: np.ndarray) -> np.ndarray:
    return np.round(px * 16).astype(np.int32)  # 4 fractional bits for cv2 shift=4


def bev_raster(hd_map: HDMap, world_SE3_ego: SE3, size_px: int = 512, resolution_m_per_px: float = 0.2) -> np.ndarray:
    """An (H, W, 3) uint8 RGB top view of the map around `world_SE3_ego` (forward is up)."""
    image = np.zeros((size_px, size_px, 3), np.uint8)
    half_extent = size_px * resolution_m_per_px * 0.75
    local = hd_map.within_patch(world_SE3_ego, 2 * half_extent, 2 * half_extent)

    def to_px(points):
        return _fixed(world_to_bev_px(points, world_SE3_ego, size_px, resolution_m_per_px))

    for name in ("drivable_areas", "crosswalks", "road_markings"):
        polys = getattr(local, name)
        if len(polys):
            cv2.fillPoly(image, [to_px(p) for p in polys], BEV_COLORS[name], cv2.LINE_AA, 4)
    for name in ("road_boundaries", "wait_lines", "poles"):
        for line in getattr(local, name):
            cv2.polylines(image, [to_px(line)], False, BEV_COLORS[name], 2, cv2.LINE_AA, 4)
    for k in range(len(local.lane_lines)):
        rgb, _ = lane_style(local.lane_lines.lane_type(k))
        cv2.polylines(image, [to_px(local.lane_lines.lines[k])], False, rgb, 1, cv2.LINE_AA, 4)
    for name in ("traffic_signs", "traffic_lights"):
        boxes = getattr(local, name)
        if len(boxes):
            cv2.fillPoly(image, [to_px(c[:4]) for c in boxes.corners_m()], BEV_COLORS[name], cv2.LINE_AA, 4)
    return image
