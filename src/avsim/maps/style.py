"""The style convention of every avsim map drawing: palette, stroke widths, lane-line patterns.

One table for the camera renderer (`avsim.render`, which re-exports it as `avsim.render.style`),
the bird's-eye map raster (`avsim.maps.raster`), the map's lane-type table
(`avsim.maps.LANE_TYPE_STYLES`) and the edit preview (`avsim.edit.preview`). Every number is a row
of ``shared/specs/world_scenario_render.md`` (the contract with the released multi-view
Cosmos-Transfer2.5 model); change them only together with the spec. Widths are camera-image
pixels (before the depth fade); patterns are metres of 3-D arc length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from avsim.core.typing import NDArrayBool, NDArrayFloat

DEFAULT_FPS = 30.0  # the render rate (`avsim render --fps` default); `avsim info` reports frames at it

RGB = tuple[int, int, int]

# ---- static map elements (spec table "Static map elements") ------------------------------
ROAD_BOUNDARY_RGB: RGB = (253, 1, 232)
WAIT_LINE_RGB: RGB = (108, 179, 59)
POLE_RGB: RGB = (183, 69, 177)
CROSSWALK_RGB: RGB = (139, 93, 255)
ROAD_MARKING_RGB: RGB = (20, 254, 185)
TRAFFIC_SIGN_RGB: RGB = (8, 2, 255)
LANE_LINE_WIDTH_PX = 12.0
ROAD_BOUNDARY_WIDTH_PX = 12.0
WAIT_LINE_WIDTH_PX = 12.0
POLE_WIDTH_PX = 5.0

TRAFFIC_LIGHT_RGB: dict[str, RGB] = {
    "red": (240, 50, 50),
    "yellow": (255, 200, 0),
    "green": (130, 240, 132),
    "unknown": (100, 100, 100),
}

# ---- dynamic objects (spec table "Dynamic objects") ---------------------------------------
BOX_EDGE_RGB: RGB = (200, 200, 200)
BOX_EDGE_WIDTH_PX = 4.0
# class -> (front colour A on corners {0,1,4,5}, back colour B on corners {2,3,6,7})
BOX_RGB: dict[str, tuple[RGB, RGB]] = {
    "Car": ((0, 46, 136), (126, 206, 255)),
    "Truck": ((204, 55, 0), (255, 192, 64)),
    "Pedestrian": ((148, 0, 62), (255, 124, 171)),
    "Cyclist": ((0, 80, 66), (102, 208, 198)),
    "Others": ((53, 26, 20), (166, 136, 125)),
}

# ---- lane-line patterns (spec "Lane-line types"), in metres of arc length -----------------


@dataclass(frozen=True)
class DashPattern:
    """A periodic paint pattern: ``(painted_m, gap_m)`` pairs repeated from arc length 0.

    ``None`` pairs (``SOLID``) mean the whole line is painted.
    """

    name: str
    pairs: tuple[tuple[float, float], ...] | None

    @property
    def period_m(self) -> float:
        """Length of one period in metres (0 for SOLID)."""
        return sum(a + b for a, b in self.pairs) if self.pairs else 0.0

    def is_painted(self, arc_m: NDArrayFloat) -> NDArrayBool:
        """Whether each arc length lies on paint.

        Args:
            arc_m: (N,) arc lengths in metres from the start of the line.

        Returns:
            (N,) bool, True where the pattern is painted (everywhere for SOLID).
        """
        arc = np.asarray(arc_m, dtype=np.float64)
        if not self.pairs:
            return np.ones(arc.shape, dtype=bool)
        phase = np.mod(arc, self.period_m)
        painted = np.zeros(arc.shape, dtype=bool)
        start = 0.0
        for on, off in self.pairs:
            painted |= (phase >= start) & (phase < start + on)
            start += on + off
        return painted


SOLID = DashPattern("solid", None)
LONG_DASH = DashPattern("long_dash", ((3.0, 9.0),))
SHORT_DASH = DashPattern("short_dash", ((1.5, 1.5),))
DOTTED = DashPattern("dotted", ((0.05, 0.45),))


def _dot_dash_pairs() -> tuple[tuple[float, float], ...]:
    # Each 0.9144 m window is cut into 0.05 m pieces and every third piece is kept (pieces
    # 0, 3, ..., 15: six dots), then a 2.7432 m gap: one period is 3.6576 m (12 ft).
    window_m, piece_m, gap_m = 0.9144, 0.05, 2.7432
    starts = [i * piece_m for i in range(0, int(window_m / piece_m), 3)]
    pairs = [(piece_m, starts[i + 1] - starts[i] - piece_m) for i in range(len(starts) - 1)]
    pairs.append((piece_m, window_m - starts[-1] - piece_m + gap_m))
    return tuple(pairs)


DOT_DASH = DashPattern("dot_dash", _dot_dash_pairs())

WHITE_RGB: RGB = (255, 255, 255)
YELLOW_RGB: RGB = (255, 255, 0)
OTHER_LANE_RGB: RGB = (181, 164, 71)
DOUBLE_LINE_OFFSET_M = 0.10  # each copy of a double line sits this far from the centre line


@dataclass(frozen=True)
class LaneStyle:
    """Colour and pattern(s) of one lane-line type; two patterns = a double line.

    For a double line the first pattern is the left copy (offset +perpendicular, i.e.
    counter-clockwise from the direction of travel in the ground plane).
    """

    rgb: RGB
    patterns: tuple[DashPattern, ...]


LANE_STYLES: dict[str, LaneStyle] = {
    "WHITE SOLID_SINGLE": LaneStyle(WHITE_RGB, (SOLID,)),
    "WHITE LONG_DASHED_SINGLE": LaneStyle(WHITE_RGB, (LONG_DASH,)),
    "WHITE SHORT_DASHED_SINGLE": LaneStyle(WHITE_RGB, (SHORT_DASH,)),
    "WHITE DOT_DASHED_SINGLE": LaneStyle(WHITE_RGB, (DOT_DASH,)),
    "WHITE SOLID_GROUP": LaneStyle(WHITE_RGB, (SOLID, SOLID)),
    "YELLOW SOLID_SINGLE": LaneStyle(YELLOW_RGB, (SOLID,)),
    "YELLOW LONG_DASHED_SINGLE": LaneStyle(YELLOW_RGB, (LONG_DASH,)),
    "YELLOW SOLID_GROUP": LaneStyle(YELLOW_RGB, (SOLID, SOLID)),
    "YELLOW DASHED_SOLID": LaneStyle(YELLOW_RGB, (SOLID, LONG_DASH)),
    "YELLOW SOLID_DASHED": LaneStyle(YELLOW_RGB, (LONG_DASH, SOLID)),
    "YELLOW DOT_SOLID_SINGLE": LaneStyle(YELLOW_RGB, (DOTTED,)),
    "YELLOW DOT_SOLID_GROUP": LaneStyle(YELLOW_RGB, (DOTTED, DOTTED)),
}
OTHER_LANE_STYLE = LaneStyle(OTHER_LANE_RGB, (SOLID,))
DEFAULT_LANE_TYPE = "WHITE SOLID_SINGLE"


def lane_style(lane_type: str) -> LaneStyle:
    """The style of a lane-line type.

    Args:
        lane_type: ``"<COLOR> <STYLE>"`` (case and repeated spaces do not matter; empty means
            DEFAULT_LANE_TYPE).

    Returns:
        Its colour and pattern(s); types not in LANE_STYLES draw as OTHER (solid).
    """
    key = " ".join(str(lane_type).upper().split()) or DEFAULT_LANE_TYPE
    return LANE_STYLES.get(key, OTHER_LANE_STYLE)

# OpenLane lane categories of lane-line types (white/yellow x single/double x dash/solid):
# the labels writer and the lane metrics' scenario ground truth share this table.
LANE_TYPE_TO_OPENLANE = {
    "WHITE LONG_DASHED_SINGLE": 1, "WHITE SHORT_DASHED_SINGLE": 1, "WHITE DOT_DASHED_SINGLE": 1,
    "WHITE SOLID_SINGLE": 2, "WHITE SOLID_GROUP": 4, "WHITE DASHED_SOLID": 5, "WHITE SOLID_DASHED": 6,
    "YELLOW LONG_DASHED_SINGLE": 7, "YELLOW SHORT_DASHED_SINGLE": 7, "YELLOW DOT_DASHED_SINGLE": 7,
    "YELLOW DOT_SOLID_SINGLE": 7, "YELLOW SOLID_SINGLE": 8, "YELLOW DOT_SOLID_GROUP": 9,
    "YELLOW SOLID_GROUP": 10, "YELLOW DASHED_SOLID": 11, "YELLOW SOLID_DASHED": 12,
}  # fmt: skip
