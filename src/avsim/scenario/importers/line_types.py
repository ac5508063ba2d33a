"""The one table that maps every dataset's lane-line type onto the render spec's lane-line types.

The render spec (world_scenario_render.md, "Lane-line types") knows these types::

    WHITE SOLID_SINGLE, WHITE LONG_DASHED_SINGLE, WHITE SHORT_DASHED_SINGLE, WHITE DOT_DASHED_SINGLE,
    WHITE SOLID_GROUP, YELLOW SOLID_SINGLE, YELLOW LONG_DASHED_SINGLE, YELLOW SOLID_GROUP,
    YELLOW DASHED_SOLID, YELLOW SOLID_DASHED, YELLOW DOT_SOLID_SINGLE, YELLOW DOT_SOLID_GROUP,
    and anything else (OTHER, drawn solid in (181, 164, 71)).

A dataset type maps to ``(colour, style)`` or to ``None`` when it marks a *virtual* line (no
paint: nuScenes ``NIL``, AV2 ``NONE``, RDS-HQ ``VIRTUAL``); importers drop virtual vertices.
Where a dataset type has no exact twin in the spec table we keep the colour and take the nearest
pattern (e.g. double dashed -> long dashed single) rather than falling back to OTHER, because
colour carries the traffic meaning the model reads (yellow = opposing traffic). Each such
approximation is marked ``# nearest`` below.
"""

from __future__ import annotations

LaneType = tuple[str, str]  # (colour, style)

#: Types of the spec's lane-line table, as (colour, style).
SPEC_LANE_TYPES: frozenset[LaneType] = frozenset(
    {
        ("WHITE", "SOLID_SINGLE"), ("WHITE", "LONG_DASHED_SINGLE"), ("WHITE", "SHORT_DASHED_SINGLE"),
        ("WHITE", "DOT_DASHED_SINGLE"), ("WHITE", "SOLID_GROUP"), ("YELLOW", "SOLID_SINGLE"),
        ("YELLOW", "LONG_DASHED_SINGLE"), ("YELLOW", "SOLID_GROUP"), ("YELLOW", "DASHED_SOLID"),
        ("YELLOW", "SOLID_DASHED"), ("YELLOW", "DOT_SOLID_SINGLE"), ("YELLOW", "DOT_SOLID_GROUP"),
    }
)
OTHER: LaneType = ("OTHER", "SOLID_SINGLE")

# Waymo Open Motion map_pb2.RoadLine.RoadLineType; ScenarioNet uses the same names with a
# ROAD_LINE_ prefix (its nuScenes converter uses them as stand-ins, see scenarionet.py).
_WAYMO: dict[str, LaneType | None] = {
    "TYPE_UNKNOWN": OTHER,
    "TYPE_BROKEN_SINGLE_WHITE": ("WHITE", "LONG_DASHED_SINGLE"),
    "TYPE_SOLID_SINGLE_WHITE": ("WHITE", "SOLID_SINGLE"),
    "TYPE_SOLID_DOUBLE_WHITE": ("WHITE", "SOLID_GROUP"),
    "TYPE_BROKEN_SINGLE_YELLOW": ("YELLOW", "LONG_DASHED_SINGLE"),
    "TYPE_BROKEN_DOUBLE_YELLOW": ("YELLOW", "LONG_DASHED_SINGLE"),  # nearest
    "TYPE_SOLID_SINGLE_YELLOW": ("YELLOW", "SOLID_SINGLE"),
    "TYPE_SOLID_DOUBLE_YELLOW": ("YELLOW", "SOLID_GROUP"),
    # One solid and one broken line; Waymo does not say which side is which.
    "TYPE_PASSING_DOUBLE_YELLOW": ("YELLOW", "DASHED_SOLID"),  # nearest (side unknown)
}

_SCENARIONET: dict[str, LaneType | None] = {
    "ROAD_LINE_UNKNOWN": OTHER,
    "ROAD_LINE_BROKEN_SINGLE_WHITE": _WAYMO["TYPE_BROKEN_SINGLE_WHITE"],
    "ROAD_LINE_SOLID_SINGLE_WHITE": _WAYMO["TYPE_SOLID_SINGLE_WHITE"],
    "ROAD_LINE_SOLID_DOUBLE_WHITE": _WAYMO["TYPE_SOLID_DOUBLE_WHITE"],
    "ROAD_LINE_BROKEN_SINGLE_YELLOW": _WAYMO["TYPE_BROKEN_SINGLE_YELLOW"],
    "ROAD_LINE_BROKEN_DOUBLE_YELLOW": _WAYMO["TYPE_BROKEN_DOUBLE_YELLOW"],
    "ROAD_LINE_SOLID_SINGLE_YELLOW": _WAYMO["TYPE_SOLID_SINGLE_YELLOW"],
    "ROAD_LINE_SOLID_DOUBLE_YELLOW": _WAYMO["TYPE_SOLID_DOUBLE_YELLOW"],
    "ROAD_LINE_PASSING_DOUBLE_YELLOW": _WAYMO["TYPE_PASSING_DOUBLE_YELLOW"],
}

# Argoverse 2 LaneMarkType (av2.map.lane_segment). The spec names the first three explicitly.
_AV2: dict[str, LaneType | None] = {
    "DASHED_WHITE": ("WHITE", "LONG_DASHED_SINGLE"),
    "DOUBLE_SOLID_YELLOW": ("YELLOW", "SOLID_GROUP"),
    "DASH_SOLID_YELLOW": ("YELLOW", "DASHED_SOLID"),
    "SOLID_DASH_YELLOW": ("YELLOW", "SOLID_DASHED"),
    "DASHED_YELLOW": ("YELLOW", "LONG_DASHED_SINGLE"),
    "DOUBLE_DASH_YELLOW": ("YELLOW", "LONG_DASHED_SINGLE"),  # nearest
    "SOLID_YELLOW": ("YELLOW", "SOLID_SINGLE"),
    "SOLID_WHITE": ("WHITE", "SOLID_SINGLE"),
    "DOUBLE_SOLID_WHITE": ("WHITE", "SOLID_GROUP"),
    "DOUBLE_DASH_WHITE": ("WHITE", "LONG_DASHED_SINGLE"),  # nearest
    "DASH_SOLID_WHITE": ("WHITE", "SOLID_GROUP"),  # nearest: a white double line
    "SOLID_DASH_WHITE": ("WHITE", "SOLID_GROUP"),  # nearest: a white double line
    "SOLID_BLUE": OTHER,
    "UNKNOWN": OTHER,
    "NONE": None,  # lane boundary with no paint
}

# nuScenes map expansion v1.3 lane_divider_segments[*].segment_type (per node).
_NUSCENES: dict[str, LaneType | None] = {
    "NIL": None,  # no paint
    "SINGLE_SOLID_WHITE": ("WHITE", "SOLID_SINGLE"),
    "DOUBLE_SOLID_WHITE": ("WHITE", "SOLID_GROUP"),
    "DOUBLE_DASHED_WHITE": ("WHITE", "LONG_DASHED_SINGLE"),  # nearest
    "SINGLE_SOLID_YELLOW": ("YELLOW", "SOLID_SINGLE"),
    "SINGLE_ZIGZAG_WHITE": ("WHITE", "SOLID_SINGLE"),  # nearest: continuous paint
    # road_divider records carry no type; nuScenes road dividers separate opposing traffic.
    "ROAD_DIVIDER": ("YELLOW", "SOLID_SINGLE"),
}

# RDS-HQ per-vertex colours and styles already use the spec's vocabulary; only the non-paint
# and unknown values need a rule. Colours outside WHITE/YELLOW become OTHER.
_RDSHQ_VIRTUAL_STYLES = frozenset({"VIRTUAL", "NONE", "NO_LINE"})
_RDSHQ_COLORS = frozenset({"WHITE", "YELLOW"})

TABLES: dict[str, dict[str, LaneType | None]] = {
    "waymo": _WAYMO,
    "scenarionet": _SCENARIONET,
    "av2": _AV2,
    "nuscenes": _NUSCENES,
}


def lane_line_type(source: str, name: str) -> LaneType | None:
    """Map dataset `source`'s line type `name` to ``(colour, style)``; ``None`` = virtual line.

    `source` is one of ``waymo``, ``scenarionet``, ``av2``, ``nuscenes``, ``rdshq``. Unknown
    names of a known source map to ``OTHER`` (drawn, in the OTHER colour), never to an error,
    so a new dataset release does not break conversion.
    """
    if source == "rdshq":
        raise ValueError("use rdshq_lane_type(colour, style) for RDS-HQ per-vertex attributes")
    table = TABLES[source]
    key = name.upper()
    if source == "waymo" and not key.startswith("TYPE_"):
        key = "TYPE_" + key
    return table.get(key, OTHER)


def rdshq_lane_type(color: str, style: str) -> LaneType | None:
    """Map one RDS-HQ vertex's ``colors`` / ``styles`` enum pair onto the spec table."""
    color, style = color.upper(), style.upper()
    if style in _RDSHQ_VIRTUAL_STYLES:
        return None
    if color not in _RDSHQ_COLORS:
        color = "OTHER"
    if (color, style) in SPEC_LANE_TYPES:
        return (color, style)
    # A style the spec has for the other colour only (e.g. WHITE DASHED_SOLID): keep both
    # values; the renderer's table lookup draws it as OTHER, as the spec prescribes.
    return (color, style)
