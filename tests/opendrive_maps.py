"""OpenDRIVE test maps written by scenariogeneration 0.16.7 (a third-party OpenDRIVE writer).

- `geometry_map`: one road per reference-line kind scenariogeneration writes (line, arc, spiral,
  paramPoly3 with pRange arcLength and normalized) and a mixed road chaining all of them, with an
  elevation profile, superelevation and a lane offset;
- `sections_map`: a road with three lane sections (a lane appears with a cubic width, widths change
  linearly, road marks of several types and colours);
- `junction_map`: a 4-way junction (CommonJunctionCreator) of 2+2-lane roads.

poly3 (deprecated since 1.6) has no scenariogeneration class: `poly3_map` writes it by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scenariogeneration import xodr
from scipy.integrate import quad
from scipy.optimize import brentq


def _lanes(widths: tuple[float, ...] = (3.5,), left: bool = True) -> xodr.Lanes:
    centre = xodr.Lane(a=0)
    centre.add_roadmark(xodr.RoadMark(xodr.RoadMarkType.solid, color=xodr.RoadMarkColor.yellow))
    section = xodr.LaneSection(0, centre)
    for w in widths:
        right = xodr.Lane(a=w)
        right.add_roadmark(xodr.RoadMark(xodr.RoadMarkType.broken))
        section.add_right_lane(right)
        if left:
            lft = xodr.Lane(a=w)
            lft.add_roadmark(xodr.RoadMark(xodr.RoadMarkType.broken))
            section.add_left_lane(lft)
    lanes = xodr.Lanes()
    lanes.add_lanesection(section)
    return lanes


GEOMETRIES = {
    "line": lambda: [xodr.Line(60.0)],
    "arc": lambda: [xodr.Arc(0.025, length=70.0)],
    "spiral": lambda: [xodr.Spiral(0.0, 0.04, length=50.0)],
    "spiral_general": lambda: [xodr.Spiral(0.015, -0.03, length=60.0)],
    "parampoly3_arclength": lambda: [xodr.ParamPoly3(0, _arclength_bu(60.0), 0, 0, 0, 0, 0.004, -2e-5, prange="arcLength", length=60.0)],
    "parampoly3_normalized": lambda: [xodr.ParamPoly3(0, 60, -4, 0, 0, 2, 9, -3, prange="normalized")],
    "mixed": lambda: [xodr.Line(20.0), xodr.Spiral(0.0, 0.03, length=30.0), xodr.Arc(0.03, length=25.0),
                      xodr.Spiral(0.03, -0.02, length=40.0), xodr.ParamPoly3(0, 40, 0, 0, 0, 0, 6, -2, prange="normalized")],
}  # fmt: skip


def _arclength_bu(length: float, cv: float = 0.004, dv: float = -2e-5) -> float:
    """bU making u = bU p, v = cv p^2 + dv p^3 exactly `length` long over p in [0, length] (pRange
    arcLength asks the curve's length to equal the geometry's, as ASAM's checker verifies)."""

    def excess(bu: float) -> float:
        return quad(lambda p: np.hypot(bu, 2 * cv * p + 3 * dv * p * p), 0.0, length, epsabs=1e-13, epsrel=1e-13)[0] - length

    return float(brentq(excess, 0.5, 1.0, xtol=1e-15))


def geometry_map(path: Path) -> Path:
    """One road per geometry kind, side by side (see the module docstring)."""
    odr = xodr.OpenDrive("geometries")
    for k, (name, make) in enumerate(GEOMETRIES.items()):
        pv = xodr.PlanView(x_start=0.0, y_start=80.0 * k, h_start=0.1 * k)
        for g in make():
            pv.add_geometry(g)
        lanes = _lanes((3.5, 3.0))
        if name == "mixed":
            lanes.add_laneoffset(xodr.LaneOffset(0.0, 0.2, 0.01, 0.0, 0.0))
        road = xodr.Road(k + 1, pv, lanes, name=name)
        if name == "mixed":
            road.add_elevation(0.0, 1.0, 0.02, 1e-4, -1e-6)
            road.add_superelevation(0.0, 0.0, 0.001, 0.0, 0.0)
        odr.add_road(road)
    odr.adjust_roads_and_lanes()
    odr.write_xml(str(path))
    return path


def sections_map(path: Path) -> Path:
    """A road with three lane sections, a lane that opens with a cubic width, width ramps."""
    pv = xodr.PlanView(0.0, 0.0, 0.0)
    pv.add_geometry(xodr.Line(30.0))
    pv.add_geometry(xodr.Arc(0.01, length=60.0))
    pv.add_geometry(xodr.Line(40.0))
    lanes = xodr.Lanes()
    for s, opening in ((0.0, False), (40.0, True), (90.0, False)):
        centre = xodr.Lane(a=0)
        centre.add_roadmark(xodr.RoadMark(xodr.RoadMarkType.solid_solid, color=xodr.RoadMarkColor.yellow))
        sec = xodr.LaneSection(s, centre)
        r1 = xodr.Lane(a=3.5, b=0.01 if s == 0.0 else 0.0)
        r1.add_roadmark(xodr.RoadMark(xodr.RoadMarkType.broken))
        sec.add_right_lane(r1)
        if s > 0:
            w = 3.0 if not opening else 0.0
            r2 = xodr.Lane(a=w, b=0.0, c=3 * 3.0 / 50.0**2 if opening else 0.0, d=-2 * 3.0 / 50.0**3 if opening else 0.0)
            r2.add_roadmark(xodr.RoadMark(xodr.RoadMarkType.solid))
            sec.add_right_lane(r2)
        l1 = xodr.Lane(a=3.4, b=-0.004 if s == 40.0 else 0.0)
        l1.add_roadmark(xodr.RoadMark(xodr.RoadMarkType.solid_broken, color=xodr.RoadMarkColor.white))
        sec.add_left_lane(l1)
        lanes.add_lanesection(sec)
    odr = xodr.OpenDrive("sections")
    odr.add_road(xodr.Road(1, pv, lanes, name="sections"))
    odr.adjust_roads_and_lanes()
    odr.write_xml(str(path))
    return path


def junction_map(path: Path) -> Path:
    """A 4-way junction of 2+2-lane roads (scenariogeneration's CommonJunctionCreator)."""
    roads = [xodr.create_road(xodr.Line(60.0), k + 1, left_lanes=2, right_lanes=2, lane_width=3.5) for k in range(4)]
    jc = xodr.CommonJunctionCreator(100, "junction", startnum=100)
    for k, road in enumerate(roads):
        jc.add_incoming_road_circular_geometry(road, 20.0, np.deg2rad(90.0 * k), "successor")
    for a in range(4):
        for b in range(4):
            if a < b:
                jc.add_connection(a + 1, b + 1)
    odr = xodr.OpenDrive("junction")
    for road in roads:
        odr.add_road(road)
    odr.add_junction_creator(jc)
    odr.adjust_roads_and_lanes()
    odr.write_xml(str(path))
    return path


POLY3_XODR = """<?xml version="1.0" encoding="UTF-8"?>
<OpenDRIVE>
  <header revMajor="1" revMinor="4" name="poly3"/>
  <road name="poly3" length="{length:.12f}" id="1" junction="-1">
    <planView>
      <geometry s="0" x="5" y="-3" hdg="0.3" length="{length:.12f}">
        <poly3 a="0.2" b="0.05" c="0.004" d="-0.00005"/>
      </geometry>
    </planView>
    <lanes>
      <laneSection s="0">
        <center><lane id="0" type="none" level="false"/></center>
        <right><lane id="-1" type="driving" level="false"><width sOffset="0" a="3.5" b="0" c="0" d="0"/></lane></right>
      </laneSection>
    </lanes>
  </road>
</OpenDRIVE>
"""
POLY3_U_END = 55.0  # the curve runs u in [0, 55]; its length is the arc length of v(u) over that range


def poly3_map(path: Path, length: float) -> Path:
    """A hand-written poly3 road of the given length (the test computes it from POLY3_U_END)."""
    path.write_text(POLY3_XODR.format(length=length))
    return path
