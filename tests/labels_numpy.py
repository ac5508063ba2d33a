"""Plain numpy definitions of the compiled label geometry in `avsim.render.labels.boxes` (tests only).

`camera_box_labels` computes these in compiled passes; tests/test_labels.py checks it equals them
(bit for bit where the operations are the same).
"""

from __future__ import annotations

import numpy as np

from avsim.core.cameras import Camera
from avsim.render import style
from avsim.render.geometry import projection as geo
from avsim.render.labels.boxes import EDGE_SAMPLES
from avsim.render.raster.draw import Primitives, object_coverage_px


def unoccluded_pixels(prims: Primitives, rays: np.ndarray, n_objects: int) -> np.ndarray:
    """(N,) pixels each object covers when rendered alone (`raster.object_coverage_px`)."""
    return object_coverage_px(prims, rays, n_objects)


def edge_points(corners_cam: np.ndarray) -> np.ndarray:
    """(M, 12 * EDGE_SAMPLES, 3) points along the 12 edges of each cuboid (M, 8, 3)."""
    a, b = corners_cam[:, geo.CUBOID_EDGES[:, 0]], corners_cam[:, geo.CUBOID_EDGES[:, 1]]  # (M, 12, 3)
    t = np.linspace(0.0, 1.0, EDGE_SAMPLES)[None, None, :, None]
    return (a[:, :, None] + t * (b - a)[:, :, None]).reshape(len(corners_cam), 12 * EDGE_SAMPLES, 3)


def edge_box(uv: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """(M, 4) bounds of projected edge points uv (M, P, 2), ignoring points pts (M, P, 3) not in front."""
    uv = uv.copy()
    uv[pts[..., 2] <= style.NEAR_M] = np.nan
    with np.errstate(all="ignore"), np.testing.suppress_warnings() as sup:
        sup.filter(RuntimeWarning)
        return np.concatenate([np.nanmin(uv, 1), np.nanmax(uv, 1)], 1)


def projected_boxes(camera: Camera, corners_cam: np.ndarray) -> np.ndarray:
    """(M, 4) x0, y0, x1, y1 of projected cuboids (points along every edge, in front), not clipped (NaN: wholly behind)."""
    pts = edge_points(corners_cam)
    uv = camera.project(pts.reshape(-1, 3))[0].reshape(len(corners_cam), -1, 2)
    return edge_box(uv, pts)


def truncation(box_px: np.ndarray, width_px: int, height_px: int) -> np.ndarray:
    """(M,) 1 - (area of each box inside the image) / (its area), in [0, 1]; the image spans [-0.5, W - 0.5] x [-0.5, H - 0.5]."""
    (ix0, ix1), (iy0, iy1) = geo.image_extent_px(width_px), geo.image_extent_px(height_px)
    w = np.clip(box_px[:, 2], ix0, ix1) - np.clip(box_px[:, 0], ix0, ix1)
    h = np.clip(box_px[:, 3], iy0, iy1) - np.clip(box_px[:, 1], iy0, iy1)
    area = (box_px[:, 2] - box_px[:, 0]) * (box_px[:, 3] - box_px[:, 1])
    with np.errstate(all="ignore"):
        frac = np.where(area > 0, np.maximum(w, 0) * np.maximum(h, 0) / area, 0.0)
    return np.clip(1.0 - np.nan_to_num(frac, nan=0.0), 0.0, 1.0)
