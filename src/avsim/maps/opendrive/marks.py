"""OpenDRIVE road marks and lane types in avsim's vocabulary (the render spec's lane-line types).

A `<roadMark>` maps to a lane line ``(colour, style)``, to a road boundary (curb, grass, edge:
not paint but the limit of the road), or to nothing (none). Colours: standard and white ->
WHITE, yellow -> YELLOW, any other colour -> OTHER (drawn in the spec's OTHER colour, its
pattern kept). Weight and width do not change the type (avsim's lines have no width).

Double marks ("solid broken", "broken solid") are listed by the standard from the inside of the
lane to the outside. avsim names a double line from its left to its right along the polyline,
which is drawn in the +s direction: the inside of a right lane (and of the centre lane) is the
left, of a left lane the right, so a left lane's double marks are mirrored. White double lines
with one dashed side have no twin in the spec table and become WHITE SOLID_GROUP (as
`avsim.scenario.importers.line_types` does for Argoverse 2).
"""

from __future__ import annotations

from avsim.core.typing import StrEnum

LaneType = tuple[str, str]

DRIVABLE_LANE_TYPES = frozenset({
    "driving", "entry", "exit", "onRamp", "offRamp", "connectingRamp", "bidirectional", "slipLane",
    "mwyEntry", "mwyExit", "onramp", "offramp",
})  # fmt: skip
"""Lane types that become avsim lanes (vehicles drive on them); 1.4's names included."""


class MarkKind(StrEnum):
    LINE = "line"
    BOUNDARY = "boundary"
    NONE = "none"


_BOUNDARY_TYPES = frozenset({"curb", "grass", "edge"})
_STYLES: dict[str, str] = {
    "solid": "SOLID_SINGLE",
    "broken": "LONG_DASHED_SINGLE",
    "solid solid": "SOLID_GROUP",
    "broken broken": "LONG_DASHED_SINGLE",  # nearest
    "solid broken": "SOLID_DASHED",  # left solid, right dashed (inside = left)
    "broken solid": "DASHED_SOLID",
    "botts dots": "DOT_DASHED_SINGLE",  # nearest: raised dots
}
_MIRROR = {"SOLID_DASHED": "DASHED_SOLID", "DASHED_SOLID": "SOLID_DASHED"}
SHORT_DASH_M = 2.0  # a broken mark whose `<type><line length>` is shorter is a short-dashed line


def _colour(color: str) -> str:
    c = color.lower()
    if c in ("standard", "white", ""):
        return "WHITE"
    if c == "yellow":
        return "YELLOW"
    return "OTHER"


def mark_kind(mark_type: str) -> MarkKind:
    """Whether a road-mark type is paint (a lane line), a road boundary or nothing.

    Args:
        mark_type: the `<roadMark>` type.

    Returns:
        The kind (unknown types: a line, drawn as OTHER).
    """
    t = mark_type.strip().lower()
    if t in ("none", ""):
        return MarkKind.NONE
    if t in _BOUNDARY_TYPES:
        return MarkKind.BOUNDARY
    return MarkKind.LINE


def road_mark_type(mark_type: str, color: str, left_lane: bool, dash_m: float | None = None) -> LaneType:
    """The avsim lane-line type of a painted road mark.

    Args:
        mark_type: the `<roadMark>` type.
        color: its colour.
        left_lane: whether it belongs to a left lane (id > 0): double marks are mirrored.
        dash_m: the dash length its `<type><line>` gives, if any: a broken line with dashes
            shorter than `SHORT_DASH_M` is SHORT_DASHED_SINGLE.

    Returns:
        (colour, style).
    """
    t = mark_type.strip().lower()
    colour = _colour(color)
    style = _STYLES.get(t)
    if style is None:
        return ("OTHER", "SOLID_SINGLE")
    if left_lane:
        style = _MIRROR.get(style, style)
    if colour == "WHITE" and style in _MIRROR:
        style = "SOLID_GROUP"  # nearest: a white double line
    if style == "LONG_DASHED_SINGLE" and t == "broken" and dash_m is not None and 0 < dash_m < SHORT_DASH_M:
        style = "SHORT_DASHED_SINGLE"
    if colour == "YELLOW" and t == "botts dots":
        style = "LONG_DASHED_SINGLE"  # nearest: the spec has no yellow dotted single line
    return (colour, style)
