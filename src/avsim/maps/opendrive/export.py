"""An avsim HD map as an ASAM OpenDRIVE 1.7 network (`avsim export opendrive`).

Every lane becomes one single-lane road (lane -1, type driving) whose reference line is the lane's
left rail (`fit.fit_lane`: paramPoly3 pieces within `fit.FIT_TOLERANCE_M`) and whose width reaches
its right rail (the right rail, lifted by a laneOffset, where the left rail's cross-sections fold:
`export_sections.outer_is_right`); a slanted link is a road holding both lanes and lanes that split
or merge meet in junctions (`export_plan.plan_roads`); lane lines
and road boundaries along the rails become road marks (`export_marks`); crosswalks become
crosswalk objects with a local outline. The lane graph is the scenario's `lane_successors`, else
the lanes whose rails start within `GEOMETRIC_LINK_M` of a lane's end. Roads are named after the
lanes they hold (a connecting road: ``entry#end>interior>exit#start``), so a re-import can be
compared lane by lane.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from avsim.maps import HDMap
from avsim.maps.opendrive.export_marks import SHORT_DASH_LINE_M, MarkMatcher, rail_samples
from avsim.maps.opendrive.export_plan import Plan, plan_roads
from avsim.maps.opendrive.export_sections import outer_is_right
from avsim.maps.opendrive.fit import EndState, FittedLane, end_states, fit_lane, project
from avsim.maps.opendrive.geometry import ReferenceLine
from avsim.maps.opendrive.model import Cubic, RoadMark

GEOMETRIC_LINK_M = 0.5
MIN_LANE_M = 0.5
ZERO_WIDTH_M = 1e-6  # ASAM's checker's threshold for a lane of zero width
REV_MAJOR, REV_MINOR = 1, 7


@dataclass
class ExportReport:
    """What the export wrote and changed."""

    roads: int = 0
    connecting_roads: int = 0
    junctions: int = 0
    geometries: int = 0
    crosswalks: int = 0
    max_move_m: float = 0.0  # the largest gap between linked lanes bridged inside a road (nothing is moved)
    lanes_skipped: int = 0
    unmatched_m: dict[str, float] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)


def _num(x: float) -> str:
    return repr(float(x))


def _successors(hdmap: HDMap, keep: list[int], named: dict[str, list[str]] | None) -> list[list[int]]:
    ids = [str(hdmap.lanes.ids[k]) for k in keep]
    index = {lid: j for j, lid in enumerate(ids)}
    if named:
        return [sorted({index[x] for x in named.get(lid, []) if x in index}) for lid in ids]
    out = []
    for k in keep:
        end_l, end_r = hdmap.lanes.left[k][-1], hdmap.lanes.right[k][-1]
        out.append([j for j, m in enumerate(keep) if m != k and np.linalg.norm(hdmap.lanes.left[m][0] - end_l) <= GEOMETRIC_LINK_M
                    and np.linalg.norm(hdmap.lanes.right[m][0] - end_r) <= GEOMETRIC_LINK_M])  # fmt: skip
    return out


def _cubic_rows(parent: ET.Element, tag: str, cubic: Cubic, s_name: str) -> None:
    for s, (a, b, c, d) in zip(cubic.starts, cubic.coeffs):
        ET.SubElement(parent, tag, {s_name: _num(s), "a": _num(a), "b": _num(b), "c": _num(c), "d": _num(d)})


def _marks(parent: ET.Element, marks: list[RoadMark]) -> None:
    for m in marks:
        attrs = {"sOffset": _num(m.s_offset), "type": m.type, "weight": "standard", "color": m.color if m.type != "none" else "standard"}
        mark = ET.SubElement(parent, "roadMark", attrs)
        if m.line_length_m is not None:  # a short-dashed line: its dash written out
            kind = ET.SubElement(mark, "type", {"name": "short dashed", "width": "0.15"})
            ET.SubElement(kind, "line", {"length": _num(SHORT_DASH_LINE_M[0]), "space": _num(SHORT_DASH_LINE_M[1]), "tOffset": "0.0",
                                         "sOffset": "0.0", "rule": "none", "width": "0.15"})  # fmt: skip


def _road_xml(root: ET.Element, rid: int, plan: Plan, k: int, fit: FittedLane, marks: tuple[list[RoadMark], list[RoadMark]], objects: list[ET.Element]) -> None:
    piece = plan.pieces[k]
    road = ET.SubElement(root, "road", {"name": piece.name, "length": _num(fit.length), "id": str(rid), "junction": piece.junction, "rule": "RHT"})
    link = ET.SubElement(road, "link")
    for tag, other, junction in (("predecessor", piece.predecessor, piece.pred_junction), ("successor", piece.successor, piece.succ_junction)):
        if other is not None:
            ET.SubElement(link, tag, {"elementType": "road", "elementId": str(other + 1), "contactPoint": "end" if tag == "predecessor" else "start"})
        elif junction is not None:
            ET.SubElement(link, tag, {"elementType": "junction", "elementId": junction})
    pv = ET.SubElement(road, "planView")
    for g in fit.geometries:
        geo = ET.SubElement(pv, "geometry", {"s": _num(g.s), "x": _num(g.x), "y": _num(g.y), "hdg": _num(g.hdg), "length": _num(g.length)})
        keys = ("aU", "bU", "cU", "dU", "aV", "bV", "cV", "dV")
        ET.SubElement(geo, "paramPoly3", {**{key: _num(v) for key, v in zip(keys, g.params[:8])}, "pRange": "normalized"})
    _cubic_rows(ET.SubElement(road, "elevationProfile"), "elevation", fit.elevation, "s")
    _cubic_rows(ET.SubElement(road, "lateralProfile"), "superelevation", fit.superelevation, "s")
    lanes = ET.SubElement(road, "lanes")
    if fit.on_right:  # the reference line is the right rail: lane 0 (the left rail) lifted by the width
        _cubic_rows(lanes, "laneOffset", fit.width, "s")
    section = ET.SubElement(lanes, "laneSection", {"s": "0.0"})
    centre = ET.SubElement(ET.SubElement(section, "center"), "lane", {"id": "0", "type": "none", "level": "false"})
    _marks(centre, marks[0])
    lane = ET.SubElement(ET.SubElement(section, "right"), "lane", {"id": "-1", "type": "driving", "level": "false"})
    # a lane of zero width at a linked end has no lane link there (ASAM: zero width at start/end)
    width = fit.width(np.array([0.0, fit.length]))
    links = [(tag, other) for tag, other, w in (("predecessor", piece.predecessor, width[0]), ("successor", piece.successor, width[1]))
             if other is not None and w >= ZERO_WIDTH_M]  # fmt: skip
    if links:
        lane_link = ET.SubElement(lane, "link")
        for tag, _ in links:
            ET.SubElement(lane_link, tag, {"id": "-1"})
    _cubic_rows(lane, "width", fit.width, "sOffset")
    _marks(lane, marks[1])
    if objects:
        holder = ET.SubElement(road, "objects")
        holder.extend(objects)


def _fit_order(plan: Plan) -> list[int]:
    """Roads outside junctions along their chains of direct links (chain heads first, then what
    is left: loops), then the connecting roads."""
    pieces = plan.pieces
    plain = [k for k, p in enumerate(pieces) if p.junction == "-1"]
    direct_pred = {k for k in plain if pieces[k].predecessor is not None and pieces[pieces[k].predecessor].junction == "-1"}  # type: ignore[index]
    order: list[int] = []
    seen: set[int] = set()
    for k in [k for k in plain if k not in direct_pred] + plain:
        while k not in seen:
            seen.add(k)
            order.append(k)
            nxt = pieces[k].successor
            if nxt is None or pieces[nxt].junction != "-1":
                break
            k = nxt
    return order + [k for k, p in enumerate(pieces) if p.junction != "-1"]


def _fit_all(plan: Plan) -> list[FittedLane]:
    """Fit every piece so that linked ends meet: in `_fit_order`, a road starts with the heading
    and width its predecessor ends with, and ends as its successor starts, wherever that
    neighbour is already fitted (a connecting road: both ends, as its incoming and outgoing roads)."""
    fits: dict[int, FittedLane] = {}
    ends: dict[int, tuple[EndState, EndState]] = {}
    for k in _fit_order(plan):
        p = plan.pieces[k]
        on_right = not p.transition and outer_is_right(p.left, p.right)  # a transition's fold is the lanes' kink where they meet
        start = ends[p.predecessor][1] if p.predecessor in ends else None
        end = ends[p.successor][0] if p.successor in ends else None
        fits[k] = fit_lane(p.left, p.right, start=start, end=end, on_right=on_right)
        ends[k] = end_states(fits[k])
    return [fits[k] for k in range(len(plan.pieces))]


def _crosswalk_objects(hdmap: HDMap, refs: list[tuple[ReferenceLine, float]], plan: Plan) -> dict[int, list[ET.Element]]:
    """Each crosswalk as an object on the nearest road outside junctions (cornerLocal outline)."""
    out: dict[int, list[ET.Element]] = {}
    candidates = [k for k, p in enumerate(plan.pieces) if p.junction == "-1"] or list(range(len(plan.pieces)))
    for j in range(len(hdmap.crosswalks)):
        poly = np.asarray(hdmap.crosswalks[j])
        c = poly.mean(0)
        best = None
        for k in candidates:
            ref, length = refs[k]
            s_at, t_at = project(ref, length, c[None])
            x, y, h_at = ref.xy_hdg(s_at)
            d = float(np.hypot(c[0] - x[0], c[1] - y[0]))
            if best is None or d < best[0]:
                best = (d, k, float(s_at[0]), float(t_at[0]), float(h_at[0]), np.array([x[0], y[0]]))
        if best is None:
            continue
        _, k, s, t, h, foot = best
        anchor = foot + t * np.array([-np.sin(h), np.cos(h)])
        obj = ET.Element("object", {"id": f"crosswalk_{j}", "name": str(hdmap.crosswalks.ids[j]), "type": "crosswalk", "s": _num(s), "t": _num(t),
                                    "zOffset": "0.0", "hdg": "0.0", "orientation": "none"})  # fmt: skip
        outline = ET.SubElement(obj, "outline", {"id": "0", "closed": "true"})
        cos, sin = np.cos(h), np.sin(h)
        for p in poly:
            dx, dy = p[0] - anchor[0], p[1] - anchor[1]
            ET.SubElement(outline, "cornerLocal", {"u": _num(cos * dx + sin * dy), "v": _num(-sin * dx + cos * dy), "z": _num(p[2]), "height": "0.0"})
        out.setdefault(k, []).append(obj)
    return out


def export_network(hdmap: HDMap, successors: dict[str, list[str]] | None = None, name: str = "avsim",
                   geo_reference: str | None = None) -> tuple[ET.Element, ExportReport]:  # fmt: skip
    """The OpenDRIVE document of a map (see the module docstring).

    Args:
        hdmap: the map.
        successors: lane id -> successor lane ids (None: geometric).
        name: the header's name.
        geo_reference: a PROJ string for `<geoReference>`, if the map has one.

    Returns:
        The `<OpenDRIVE>` element and the report.
    """
    report = ExportReport()
    lanes = hdmap.lanes
    keep = [k for k in range(len(lanes)) if min(float(np.linalg.norm(np.diff(r[:, :2], axis=0), axis=1).sum()) for r in (lanes.left[k], lanes.right[k])) >= MIN_LANE_M]
    report.lanes_skipped = len(lanes) - len(keep)
    plan = plan_roads([str(lanes.ids[k]) for k in keep], [(np.asarray(lanes.left[k]), np.asarray(lanes.right[k])) for k in keep], _successors(hdmap, keep, successors))
    fits = _fit_all(plan)
    refs = [(ReferenceLine(f.geometries), f.length) for f in fits]
    matcher = MarkMatcher(hdmap.lane_lines, hdmap.road_boundaries)
    order = sorted(range(len(plan.pieces)), key=lambda k: (plan.pieces[k].junction != "-1", k))
    marks: dict[int, tuple[list[RoadMark], list[RoadMark]]] = {}
    for k in order:
        ref, length = refs[k]
        both = []
        for rail in (plan.pieces[k].left, plan.pieces[k].right):
            s, _ = project(ref, length, rail_samples(rail))
            both.append(matcher.marks(rail, s))
        marks[k] = (both[0], both[1])
    root = _document(hdmap, name, geo_reference, fits)
    objects = _crosswalk_objects(hdmap, refs, plan)
    for k in range(len(plan.pieces)):
        _road_xml(root, k + 1, plan, k, fits[k], marks[k], objects.get(k, []))
    for jid, conns in sorted(plan.junctions.items()):
        junction = ET.SubElement(root, "junction", {"id": jid, "name": f"junction {jid}"})
        for c, (incoming, connecting) in enumerate(conns):
            conn = ET.SubElement(junction, "connection", {"id": str(c), "incomingRoad": str(incoming + 1), "connectingRoad": str(connecting + 1), "contactPoint": "start"})
            ET.SubElement(conn, "laneLink", {"from": "-1", "to": "-1"})
    report.roads = len(plan.pieces)
    report.connecting_roads = sum(p.junction != "-1" for p in plan.pieces)
    report.junctions = len(plan.junctions)
    report.geometries = sum(len(f.geometries) for f in fits)
    report.crosswalks = sum(len(v) for v in objects.values())
    report.max_move_m = plan.max_move_m
    report.unmatched_m = matcher.unmatched_m()
    report.dropped = {k: v for k, v in hdmap.element_counts().items() if v and k not in ("lanes", "lane_lines", "road_boundaries", "crosswalks")}
    return root, report


def _document(hdmap: HDMap, name: str, geo_reference: str | None, fits: list[FittedLane]) -> ET.Element:
    root = ET.Element("OpenDRIVE")
    xy = np.concatenate([np.array([[g.x, g.y] for g in f.geometries]) for f in fits]) if fits else np.zeros((1, 2))
    bounds = hdmap.bounds_xy()
    if bounds is None:
        bounds = np.r_[xy.min(0), xy.max(0)]
    header = ET.SubElement(root, "header", {"revMajor": str(REV_MAJOR), "revMinor": str(REV_MINOR), "name": name, "version": "1.0",
                                            "north": _num(bounds[3]), "south": _num(bounds[1]), "east": _num(bounds[2]),
                                            "west": _num(bounds[0]), "vendor": "avsim"})  # fmt: skip
    if geo_reference:
        ET.SubElement(header, "geoReference").text = geo_reference
    return root


def report_dict(report: ExportReport) -> dict[str, Any]:
    """The report as plain values (for JSON and the CLI line)."""
    return {k: getattr(report, k) for k in ExportReport.__dataclass_fields__}


