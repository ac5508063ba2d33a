"""`Position` elements: world, road, lane, and relative to an entity (world, object, road, lane).

An `Orientation` without `type` is absolute in files of revision 1.0-1.2 and relative from 1.3 on
(the standard's change, as esmini reads it); a missing `h` on a road or lane position is always
relative to the lane's driving direction (0).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from avsim.scenario.openscenario.model import (
    LanePosition,
    Orientation,
    Position,
    RelativeLanePosition,
    RelativeObjectPosition,
    RelativeRoadPosition,
    RelativeWorldPosition,
    RoadPosition,
    WorldPosition,
)
from avsim.scenario.openscenario.reader import XoscReader


def orientation(r: XoscReader, parent: ET.Element, rev_minor: int) -> Orientation | None:
    """The `Orientation` child of a position, or None."""
    e = parent.find("Orientation")
    if e is None:
        return None
    with r.at(e):
        kind = r.text(e, "type", "")
        if kind not in ("", "relative", "absolute"):
            raise r.fail(f"expected relative or absolute, got {kind[:40]!r}", "@type")
        relative = kind == "relative" or (kind == "" and rev_minor >= 3)
        return Orientation(r.opt_num(e, "h"), r.opt_num(e, "p"), r.opt_num(e, "r"), relative)


def position(r: XoscReader, parent: ET.Element, rev_minor: int) -> Position:
    """The position held by `parent` (a `Position` element, or an element whose child is one)."""
    e = parent if parent.tag == "Position" else r.need(parent, "Position")
    with r.at(e):
        p = r.choice(e)
        with r.at(p):
            return _one(r, p, rev_minor)


def _one(r: XoscReader, p: ET.Element, rev_minor: int) -> Position:
    o = orientation(r, p, rev_minor)
    r.only(p, {"Orientation"})
    if p.tag == "WorldPosition":
        return WorldPosition(r.num(p, "x"), r.num(p, "y"), r.opt_num(p, "z"), r.opt_num(p, "h"), r.opt_num(p, "p"), r.opt_num(p, "r"))
    if p.tag == "LanePosition":
        return LanePosition(r.text(p, "roadId"), _lane_id(r, p, "laneId"), r.num(p, "s"), r.num(p, "offset", 0.0), o)
    if p.tag == "RoadPosition":
        return RoadPosition(r.text(p, "roadId"), r.num(p, "s"), r.num(p, "t"), o)
    if p.tag == "RelativeWorldPosition":
        return RelativeWorldPosition(r.text(p, "entityRef"), r.num(p, "dx"), r.num(p, "dy"), r.opt_num(p, "dz"), o)
    if p.tag == "RelativeObjectPosition":
        return RelativeObjectPosition(r.text(p, "entityRef"), r.num(p, "dx"), r.num(p, "dy"), r.opt_num(p, "dz"), o)
    if p.tag == "RelativeRoadPosition":
        return RelativeRoadPosition(r.text(p, "entityRef"), r.num(p, "ds"), r.num(p, "dt"), o)
    if p.tag == "RelativeLanePosition":
        ds, ds_lane = r.opt_num(p, "ds"), r.opt_num(p, "dsLane")
        if ds is not None and ds_lane is not None:
            raise r.fail("give ds or dsLane, not both")
        return RelativeLanePosition(r.text(p, "entityRef"), r.int_(p, "dLane"), ds, ds_lane, r.num(p, "offset", 0.0), o)
    raise r.unsupported(p)


def _lane_id(r: XoscReader, p: ET.Element, attr: str) -> int:
    lane = r.int_(p, attr)
    if lane == 0:
        raise r.fail("lane 0 is the centre lane (a reference line), not a lane to stand in", f"@{attr}")
    return lane
