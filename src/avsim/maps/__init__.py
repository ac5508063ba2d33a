"""HD-map model: lane lines, lanes, boundaries, polygons, cuboids, spatial queries."""

from avsim.maps.elements import (
    DEFAULT_LANE_COLOR,
    DEFAULT_LANE_STYLE,
    LANE_TYPE_STYLES,
    MAP_ELEMENT_TYPES,
    OTHER_LANE_STYLE,
    Cuboids,
    HDMap,
    LaneLines,
    Lanes,
    Polygons,
    Polylines,
    element_bounds_xy,
    lane_style,
)

__all__ = [
    "DEFAULT_LANE_COLOR",
    "DEFAULT_LANE_STYLE",
    "LANE_TYPE_STYLES",
    "MAP_ELEMENT_TYPES",
    "OTHER_LANE_STYLE",
    "Cuboids",
    "HDMap",
    "LaneLines",
    "Lanes",
    "Polygons",
    "Polylines",
    "element_bounds_xy",
    "lane_style",
]
