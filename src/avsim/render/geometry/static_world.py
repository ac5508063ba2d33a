"""The static world of a scene: the map cut once into painted segments, triangles and cuboids.

`build_static_world` runs once per scenario; `SceneRenderer` (`avsim.render.geometry.scene`, which
re-exports these names) then culls it to the ego's reach every frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import mapbox_earcut
import numpy as np
import numpy.typing as npt

from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayStr
from avsim.maps import HDMap, Polylines
from avsim.render import style
from avsim.render.geometry import projection as geo


@dataclass
class StaticWorld:
    """World-frame primitives of a map, built once per scenario.

    seg_* (S): painted line segments with colour and stroke width, in draw order;
    tri (T, 3, 3), tri_rgb (T, 3): triangles of the filled map polygons (true concave fill);
    cub_corners (C, 8, 3), cub_rgb (C, 3), cub_light_id (C,) ('' for signs): signs, lights.
    """

    seg_p0: NDArrayFloat
    seg_p1: NDArrayFloat
    seg_rgb: NDArrayFloat
    seg_width_px: NDArrayFloat
    tri: NDArrayFloat
    tri_rgb: NDArrayFloat
    cub_corners: NDArrayFloat
    cub_rgb: NDArrayFloat
    cub_light_id: NDArrayStr

    def near(self, centre_xy: NDArrayFloat, reach_m: float) -> tuple[NDArrayBool, NDArrayBool, NDArrayBool]:
        """Which elements may lie within reach of a point (bounding circles in x, y; computed once per map).

        Args:
            centre_xy: (2,) world x, y in metres.
            reach_m: reach in metres.

        Returns:
            Masks of the segments (S,), triangles (T,) and cuboids (C,).
        """
        if not hasattr(self, "_circles"):
            self._circles = [
                _bounding_circles(np.stack([self.seg_p0, self.seg_p1], 1)),
                _bounding_circles(self.tri),
                _bounding_circles(self.cub_corners),
            ]
        out = []
        for mid, radius in self._circles:
            d2 = ((mid - np.asarray(centre_xy, float)) ** 2).sum(axis=1)
            out.append(d2 <= (reach_m + radius) ** 2)
        return out[0], out[1], out[2]


def _bounding_circles(points: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Centre (N, 2) and radius (N,) of circles in x, y around each element's points (N, K, 3)."""
    if not len(points):
        return np.zeros((0, 2)), np.zeros(0)
    mid = points[..., :2].mean(axis=1)
    return mid, np.linalg.norm(points[..., :2] - mid[:, None], axis=-1).max(axis=1)


def _polyline_segments(lines: Polylines) -> tuple[NDArrayFloat, NDArrayFloat]:
    pts = lines.points_m
    if len(pts) < 2:
        return np.zeros((0, 3)), np.zeros((0, 3))
    same = np.diff(lines.element_index) == 0
    return pts[:-1][same], pts[1:][same]


def triangulate_polygon(ring: npt.ArrayLike) -> NDArrayFloat:
    """Ear-clipping triangulation (earcut on x, y) of a possibly concave 3-D ring.

    Args:
        ring: (n, 3) vertices; a closing duplicate vertex is ignored.

    Returns:
        (t, 3, 3) triangles that keep the ring's own z.
    """
    ring = np.asarray(ring, dtype=np.float64)
    if len(ring) > 3 and np.allclose(ring[0], ring[-1]):
        ring = ring[:-1]
    if len(ring) < 3:
        return np.zeros((0, 3, 3))
    idx = mapbox_earcut.triangulate_float64(np.ascontiguousarray(ring[:, :2]), np.array([len(ring)], dtype=np.uint32))
    return ring[np.asarray(idx, dtype=np.int64).reshape(-1, 3)]


def build_static_world(hd_map: HDMap) -> StaticWorld:
    """Cut the map into painted segments, polygon triangles and sign/light cuboids.

    Args:
        hd_map: the scenario's map (lane patterns are cut in metres of arc length, double
            lines offset by +/-0.10 m).

    Returns:
        The world-frame primitives, in draw order.
    """
    p0s: list[NDArrayFloat] = []
    p1s: list[NDArrayFloat] = []
    rgbs: list[NDArrayFloat] = []
    widths: list[NDArrayFloat] = []

    def add(p0: NDArrayFloat, p1: NDArrayFloat, rgb: tuple[int, int, int], width: float) -> None:
        p0s.append(p0)
        p1s.append(p1)
        rgbs.append(np.broadcast_to(np.asarray(rgb, float), (len(p0), 3)))
        widths.append(np.full(len(p0), width))

    lanes = hd_map.lane_lines
    for k in range(len(lanes)):
        a, b, rgb = geo.lane_line_segments(lanes.lines[k], lanes.lane_type(k))
        add(a, b, rgb, style.LANE_LINE_WIDTH_PX)
    for lines, rgb, width in (
        (hd_map.road_boundaries, style.ROAD_BOUNDARY_RGB, style.ROAD_BOUNDARY_WIDTH_PX),
        (hd_map.wait_lines, style.WAIT_LINE_RGB, style.WAIT_LINE_WIDTH_PX),
        (hd_map.poles, style.POLE_RGB, style.POLE_WIDTH_PX),
    ):
        add(*_polyline_segments(lines), rgb, width)
    tris: list[NDArrayFloat] = []
    tri_rgb: list[NDArrayFloat] = []
    for polygons, rgb in ((hd_map.crosswalks, style.CROSSWALK_RGB), (hd_map.road_markings, style.ROAD_MARKING_RGB)):
        for ring in polygons:
            t = triangulate_polygon(ring)
            tris.append(t)
            tri_rgb.append(np.broadcast_to(np.asarray(rgb, float), (len(t), 3)))
    signs, lights = hd_map.traffic_signs, hd_map.traffic_lights
    corners = [signs.corners_m() if len(signs) else np.zeros((0, 8, 3)), lights.corners_m() if len(lights) else np.zeros((0, 8, 3))]
    return StaticWorld(
        seg_p0=np.concatenate(p0s) if p0s else np.zeros((0, 3)),
        seg_p1=np.concatenate(p1s) if p1s else np.zeros((0, 3)),
        seg_rgb=np.concatenate(rgbs) if rgbs else np.zeros((0, 3)),
        seg_width_px=np.concatenate(widths) if widths else np.zeros(0),
        tri=np.concatenate(tris) if tris else np.zeros((0, 3, 3)),
        tri_rgb=np.concatenate(tri_rgb) if tri_rgb else np.zeros((0, 3)),
        cub_corners=np.concatenate(corners),
        cub_rgb=np.concatenate([np.tile(np.asarray(style.TRAFFIC_SIGN_RGB, float), (len(signs), 1)), np.zeros((len(lights), 3))]),
        cub_light_id=np.concatenate([np.full(len(signs), ""), np.asarray(lights.ids, dtype=str)]).astype(str),
    )
