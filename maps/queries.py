"""Spatial queries over an HDMap: elements within a radius or an oriented patch of a pose.

Each element's ground-plane geometry (polyline, polygon ring or box footprint) goes into a
shapely STRtree; a query returns the elements whose geometry intersects the query region.
"""

from __future__ import annotations

import numpy as np
import shapely
from shapely import STRtree

from avsim.transforms import SE3
from avsim.maps.elements import Cuboids, HDMap, Lanes, LaneLines, MAP_ELEMENT_TYPES, Polygons, Polylines


def element_geometries(elements) -> np.ndarray:
    """Shapely geometries (K,) of the xy footprint of each element."""
    if isinstance(elements, LaneLines):
        return element_geometries(elements.lines)
    if isinstance(elements, Lanes):
        left, right = element_geometries(elements.left), element_geometries(elements.right)
        return np.array([shapely.union(a, b) for a, b in zip(left, right)], dtype=object)
    if isinstance(elements, Cuboids):
        corners = elements.corners_m()[:, :4, :2]
        return shapely.polygons(corners) if len(elements) else np.zeros(0, dtype=object)
    if isinstance(elements, (Polylines, Polygons)):
        if not len(elements):
            return np.zeros(0, dtype=object)
        xy = elements.points_m[:, :2]
        idx = elements.element_index
        if isinstance(elements, Polygons):
            # rings may self-touch after projection to the plane; the ring's line is enough
            closed = [np.vstack([xy[idx == k], xy[idx == k][:1]]) for k in range(len(elements))]
            return np.array([shapely.linearrings(c) if len(c) >= 4 else shapely.linestrings(c) for c in closed], dtype=object)
        return shapely.linestrings(xy, indices=idx)
    raise TypeError(f"unsupported element container {type(elements).__name__}")


def _select_intersecting(hd_map: HDMap, region) -> HDMap:
    masks = {}
    for name in MAP_ELEMENT_TYPES:
        elements = getattr(hd_map, name)
        mask = np.zeros(len(elements), bool)
        if len(elements):
            geoms = element_geometries(elements)
            tree = STRtree(geoms)
            hits = tree.query(region, predicate="intersects")
            mask[hits] = True
            if isinstance(elements, Polygons):  # a region fully inside a polygon also counts
                mask |= shapely.contains(_filled(elements), region)
        masks[name] = mask
    return hd_map.select(masks)


def _filled(polygons: Polygons) -> np.ndarray:
    xy = polygons.points_m[:, :2]
    return np.array([shapely.Polygon(xy[polygons.offsets[k] : polygons.offsets[k + 1]]) for k in range(len(polygons))], dtype=object)


def within_radius(hd_map: HDMap, center_xy, radius_m: float) -> HDMap:
    """Elements whose xy footprint comes within `radius_m` of `center_xy`."""
    region = shapely.Point(float(center_xy[0]), float(center_xy[1])).buffer(float(radius_m), quad_segs=32)
    return _select_intersecting(hd_map, region)


def within_patch(hd_map: HDMap, world_SE3_ego: SE3, length_m: float, width_m: float) -> HDMap:
    """Elements intersecting a length x width rectangle centred on the ego, aligned with its heading."""
    half = np.array([[1, 1], [1, -1], [-1, -1], [-1, 1]], float) * [length_m / 2.0, width_m / 2.0]
    corners = world_SE3_ego.apply(np.c_[half, np.zeros(4)])[:, :2]
    return _select_intersecting(hd_map, shapely.Polygon(corners))
