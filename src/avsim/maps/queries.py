"""Spatial queries over an HDMap: elements within a radius or an oriented patch of a pose.

Each element's ground-plane geometry (polyline, polygon ring or box footprint) goes into a
shapely STRtree; a query returns the elements whose geometry intersects the query region.
"""

from __future__ import annotations

import weakref

import numpy as np
import numpy.typing as npt
import shapely
from shapely import STRtree

from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayBool, NDArrayObject
from avsim.maps.elements import MAP_ELEMENT_TYPES, Cuboids, HDMap, LaneLines, Lanes, MapElements, Polygons, Polylines


def element_geometries(elements: MapElements) -> NDArrayObject:
    """Shapely geometries of the xy footprint of each element.

    Args:
        elements: an element container of an HDMap.

    Returns:
        (K,) object array: line strings (polylines, lane lines, lane rails), linear rings
        (polygons: the ring, not the filled area) or polygons (box footprints).
    """
    if isinstance(elements, LaneLines):
        return element_geometries(elements.lines)
    if isinstance(elements, Lanes):
        left, right = element_geometries(elements.left), element_geometries(elements.right)
        return shapely.union(left, right) if len(elements) else np.zeros(0, dtype=object)
    if isinstance(elements, Cuboids):
        corners = elements.corners_m()[:, :4, :2]
        return shapely.polygons(corners) if len(elements) else np.zeros(0, dtype=object)
    if isinstance(elements, Polygons):
        # the ring's line (not the filled polygon): rings may self-touch once flattened to xy
        return np.array([shapely.LinearRing(ring[:, :2]) for ring in elements], dtype=object)
    if isinstance(elements, Polylines):
        if not len(elements):
            return np.zeros(0, dtype=object)
        return shapely.linestrings(elements.points_m[:, :2], indices=elements.element_index)
    raise TypeError(f"unsupported element container {type(elements).__name__}")


# One STRtree per (map, element type), built on first query: maps are immutable, and a viewer
# that queries around every frame must not rebuild the index each time.
_INDEXES: weakref.WeakKeyDictionary[HDMap, dict[str, tuple[STRtree, NDArrayObject | None]]] = weakref.WeakKeyDictionary()


def _spatial_index(hd_map: HDMap) -> dict[str, tuple[STRtree, NDArrayObject | None]]:
    if hd_map not in _INDEXES:
        index = {}
        for name in MAP_ELEMENT_TYPES:
            elements = getattr(hd_map, name)
            if len(elements):
                filled = _filled(elements) if isinstance(elements, Polygons) else None
                index[name] = (STRtree(element_geometries(elements)), filled)
        _INDEXES[hd_map] = index
    return _INDEXES[hd_map]


def _select_intersecting(hd_map: HDMap, region: shapely.Geometry) -> HDMap:
    masks: dict[str, npt.ArrayLike] = {}
    index = _spatial_index(hd_map)
    for name in MAP_ELEMENT_TYPES:
        mask: NDArrayBool = np.zeros(len(getattr(hd_map, name)), bool)
        if name in index:
            tree, filled = index[name]
            mask[tree.query(region, predicate="intersects")] = True
            if filled is not None:  # a region fully inside a polygon also counts
                mask |= shapely.contains(filled, region)
        masks[name] = mask
    return hd_map.select(masks)


def _filled(polygons: Polygons) -> NDArrayObject:
    return np.array([shapely.Polygon(ring[:, :2]) for ring in polygons], dtype=object)


def within_radius(hd_map: HDMap, center_xy: npt.ArrayLike, radius_m: float) -> HDMap:
    """Elements whose xy footprint comes within `radius_m` of `center_xy`.

    Args:
        hd_map: the map.
        center_xy: (2,) world x, y in metres.
        radius_m: radius in metres.

    Returns:
        The map of those elements (every type).
    """
    center_xy = np.asarray(center_xy, dtype=np.float64)
    region = shapely.Point(float(center_xy[0]), float(center_xy[1])).buffer(float(radius_m), quad_segs=32)
    return _select_intersecting(hd_map, region)


def within_patch(hd_map: HDMap, world_SE3_ego: SE3, length_m: float, width_m: float) -> HDMap:
    """Elements intersecting a length x width rectangle centred on the ego, aligned with its heading.

    Args:
        hd_map: the map.
        world_SE3_ego: the ego pose (one SE3).
        length_m: extent along the ego heading.
        width_m: extent across it.

    Returns:
        The map of those elements (every type).
    """
    half = np.array([[1, 1], [1, -1], [-1, -1], [-1, 1]], float) * [length_m / 2.0, width_m / 2.0]
    corners = world_SE3_ego.apply(np.c_[half, np.zeros(4)])[:, :2]
    return _select_intersecting(hd_map, shapely.Polygon(corners))


def within_box(hd_map: HDMap, box_xy: npt.ArrayLike) -> HDMap:
    """Elements intersecting an axis-aligned box of the world's x, y.

    Args:
        hd_map: the map.
        box_xy: (4,) x_min, y_min, x_max, y_max in metres.

    Returns:
        The map of those elements (every type).
    """
    x0, y0, x1, y1 = (float(v) for v in np.asarray(box_xy, np.float64).reshape(4))
    return _select_intersecting(hd_map, shapely.box(x0, y0, x1, y1))


def road_surface_rings(hd_map: HDMap) -> list[np.ndarray]:
    """The map's road surface as polygon rings: drivable areas, each lane's surface between its rails
    (the left rail, then the right one reversed), crosswalks.

    Maps that carry only lanes (no drivable-area polygons) still have a surface.

    Args:
        hd_map: the map.

    Returns:
        (n, 3) rings, world frame, each at least 3 vertices.
    """
    rings = [np.asarray(r, np.float64) for r in hd_map.drivable_areas]
    lanes = hd_map.lanes
    for k in range(len(lanes)):
        left, right = lanes.left[k], lanes.right[k]
        if len(left) >= 2 and len(right) >= 2:
            rings.append(np.concatenate([left, right[::-1]]))
    rings += [np.asarray(r, np.float64) for r in hd_map.crosswalks]
    return [r for r in rings if len(r) >= 3]
