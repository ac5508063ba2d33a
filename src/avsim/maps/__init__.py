"""HD-map model: lane lines, lanes, boundaries, polygons, cuboids (`elements`), spatial queries
(`queries`), the style table (`style`) and the bird's-eye raster (`raster`)."""

from avsim.maps.elements import (
    MAP_ELEMENT_TYPES,
    Cuboids,
    HDMap,
    LaneLines,
    Lanes,
    Polygons,
    Polylines,
    element_bounds_xy,
)
from avsim.maps.style import LaneStyle, lane_style

__all__ = [
    "MAP_ELEMENT_TYPES",
    "Cuboids",
    "HDMap",
    "LaneLines",
    "LaneStyle",
    "Lanes",
    "Polygons",
    "Polylines",
    "element_bounds_xy",
    "lane_style",
]
