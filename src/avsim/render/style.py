"""The look of a world-scenario control video: frame defaults plus the shared style table.

The palette, stroke widths, lane-line patterns and the lane-type table live in
`avsim.maps.style` (one table for the renderer, the bird's-eye raster and the edit preview) and
are re-exported here, so ``style.LANE_STYLES`` and friends read as before. Every number is a row
of ``shared/specs/world_scenario_render.md`` (the contract with the released multi-view
Cosmos-Transfer2.5 model); change them only together with the spec.
"""

from __future__ import annotations

from avsim.maps.style import (
    BOX_EDGE_RGB,
    BOX_EDGE_WIDTH_PX,
    BOX_RGB,
    CROSSWALK_RGB,
    DEFAULT_FPS,
    DEFAULT_LANE_TYPE,
    DOT_DASH,
    DOTTED,
    DOUBLE_LINE_OFFSET_M,
    LANE_LINE_WIDTH_PX,
    LANE_STYLES,
    LONG_DASH,
    OTHER_LANE_RGB,
    OTHER_LANE_STYLE,
    POLE_RGB,
    POLE_WIDTH_PX,
    RGB,
    ROAD_BOUNDARY_RGB,
    ROAD_BOUNDARY_WIDTH_PX,
    ROAD_MARKING_RGB,
    SHORT_DASH,
    SOLID,
    TRAFFIC_LIGHT_RGB,
    TRAFFIC_SIGN_RGB,
    WAIT_LINE_RGB,
    WAIT_LINE_WIDTH_PX,
    WHITE_RGB,
    YELLOW_RGB,
    DashPattern,
    LaneStyle,
    lane_style,
)

__all__ = [
    "BOX_EDGE_RGB",
    "BOX_EDGE_WIDTH_PX",
    "BOX_RGB",
    "CROSSWALK_RGB",
    "DEFAULT_FPS",
    "DEFAULT_HEIGHT_PX",
    "DEFAULT_LANE_TYPE",
    "DEFAULT_WIDTH_PX",
    "DOTTED",
    "DOT_DASH",
    "DOUBLE_LINE_OFFSET_M",
    "LANE_LINE_WIDTH_PX",
    "LANE_STYLES",
    "LONG_DASH",
    "MAX_DEPTH_M",
    "MIN_LINE_RADIUS_PX",
    "NEAR_M",
    "OTHER_LANE_RGB",
    "OTHER_LANE_STYLE",
    "POLE_RGB",
    "POLE_WIDTH_PX",
    "RGB",
    "ROAD_BOUNDARY_RGB",
    "ROAD_BOUNDARY_WIDTH_PX",
    "ROAD_MARKING_RGB",
    "SHORT_DASH",
    "SOLID",
    "TRAFFIC_LIGHT_RGB",
    "TRAFFIC_SIGN_RGB",
    "WAIT_LINE_RGB",
    "WAIT_LINE_WIDTH_PX",
    "WHITE_RGB",
    "YELLOW_RGB",
    "DashPattern",
    "LaneStyle",
    "lane_style",
]

# ---- frame ------------------------------------------------------------------------------
DEFAULT_WIDTH_PX = 1280
DEFAULT_HEIGHT_PX = 720
MAX_DEPTH_M = 200.0  # visible range (0, 200] m; colour and width fade linearly to 0 here
NEAR_M = 0.1  # exact clipping plane for segments and polygons (camera z)
MIN_LINE_RADIUS_PX = 0.5  # a faded line never gets thinner than one pixel (keeps it connected)
