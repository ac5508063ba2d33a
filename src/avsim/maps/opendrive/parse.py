"""Read an ASAM OpenDRIVE file (.xodr, 1.4-1.8) into `avsim.maps.opendrive.model` records.

The XML is untrusted: `avsim.core.safe_xml` parses it (no DTD, no entities, bounded size and
depth). Every value is checked as it is read; a bad one is `AvsimInputError(file, element path,
reason)`, e.g. ``map.xodr: road[id=3]/planView/geometry[2]@length: expected a number > 0, got '-1'``.
Elements avsim does not use (userData, lateral shapes, lane heights, materials, ...) are skipped.
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.safe_xml import MAX_XML_BYTES, parse_xml, read_xml
from avsim.maps.opendrive.model import (
    Connection,
    ContactPoint,
    Corner,
    Cubic,
    GeometryKind,
    Header,
    Junction,
    Lane,
    LaneLink,
    LaneSection,
    LinkType,
    OpenDriveFile,
    Outline,
    PlanGeometry,
    Road,
    RoadLink,
    RoadMark,
    RoadObject,
    Signal,
    SpeedRecord,
    TrafficRule,
    Validity,
)

MAX_ROADS = 1_000_000
_SPEED_UNITS = {"m/s": 1.0, "km/h": 1 / 3.6, "mph": 0.44704}
_MISSING = object()


class Reader:
    """Typed attribute access that names the file and the element path in every error."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def fail(self, where: str, reason: str) -> AvsimInputError:
        return AvsimInputError(self.path, where, reason)

    def num(self, elem: ET.Element, name: str, where: str, default: object = _MISSING, *, positive: bool = False,
            nonneg: bool = False) -> float:
        """A finite float attribute (`default` when absent, an error when absent without one)."""
        raw = elem.get(name)
        if raw is None:
            if default is _MISSING:
                raise self.fail(f"{where}@{name}", "missing")
            return default  # type: ignore[return-value]
        try:
            value = float(raw)
        except ValueError:
            raise self.fail(f"{where}@{name}", f"expected a number, got {raw[:40]!r}") from None
        if not math.isfinite(value):
            raise self.fail(f"{where}@{name}", f"expected a finite number, got {raw[:40]!r}")
        if positive and value <= 0:
            raise self.fail(f"{where}@{name}", f"expected a number > 0, got {raw[:40]!r}")
        if nonneg and value < 0:
            raise self.fail(f"{where}@{name}", f"expected a number >= 0, got {raw[:40]!r}")
        return value

    def opt(self, elem: ET.Element, name: str, where: str) -> float | None:
        """An optional finite float attribute (None when absent)."""
        return None if elem.get(name) is None else self.num(elem, name, where)

    def int_(self, elem: ET.Element, name: str, where: str) -> int:
        raw = elem.get(name)
        if raw is None:
            raise self.fail(f"{where}@{name}", "missing")
        try:
            return int(float(raw)) if float(raw).is_integer() else int(raw)
        except ValueError:
            raise self.fail(f"{where}@{name}", f"expected an integer, got {raw[:40]!r}") from None

    def text(self, elem: ET.Element, name: str, where: str, default: str | None = None) -> str:
        raw = elem.get(name)
        if raw is None:
            if default is None:
                raise self.fail(f"{where}@{name}", "missing")
            return default
        return raw

    def cubic(self, elems: list[ET.Element], s_name: str, where: str, *, base: float = 0.0) -> Cubic:
        """Records (s, a, b, c, d) as a Cubic, sorted by s (ties: the later record wins)."""
        if not elems:
            return Cubic.empty()
        rows = []
        for k, e in enumerate(elems):
            w = f"{where}[{k}]"
            rows.append([base + self.num(e, s_name, w), *(self.num(e, c, w, 0.0) for c in "abcd")])
        arr = np.array(rows, np.float64)
        order = np.argsort(arr[:, 0], kind="stable")
        arr = arr[order]
        keep = np.r_[arr[1:, 0] > arr[:-1, 0], True]  # duplicate s: the last record of that s
        return Cubic(arr[keep, 0].copy(), arr[keep, 1:].copy())


def _geometry(r: Reader, g: ET.Element, where: str) -> PlanGeometry:
    s, x, y = r.num(g, "s", where), r.num(g, "x", where), r.num(g, "y", where)
    hdg, length = r.num(g, "hdg", where), r.num(g, "length", where, nonneg=True)
    kinds = [c for c in g if c.tag in {k.value for k in GeometryKind}]
    if len(kinds) != 1:
        raise r.fail(where, f"expected one of line, arc, spiral, poly3, paramPoly3, got {[c.tag for c in g] or 'nothing'}")
    c = kinds[0]
    w = f"{where}/{c.tag}"
    kind = GeometryKind(c.tag)
    params: tuple[float, ...] = ()
    if kind is GeometryKind.ARC:
        params = (r.num(c, "curvature", w),)
    elif kind is GeometryKind.SPIRAL:
        params = (r.num(c, "curvStart", w), r.num(c, "curvEnd", w))
    elif kind is GeometryKind.POLY3:
        params = tuple(r.num(c, k, w, 0.0) for k in "abcd")
    elif kind is GeometryKind.PARAM_POLY3:
        prange = c.get("pRange", "normalized")
        if prange not in ("normalized", "arcLength"):
            raise r.fail(f"{w}@pRange", f"expected normalized or arcLength, got {prange[:40]!r}")
        params = (*(r.num(c, k, w, 0.0) for k in ("aU", "bU", "cU", "dU", "aV", "bV", "cV", "dV")), float(prange == "normalized"))
    return PlanGeometry(s, x, y, hdg, length, kind, params)


def _link(r: Reader, e: ET.Element | None, where: str) -> RoadLink | None:
    if e is None:
        return None
    etype = r.text(e, "elementType", where, "road")
    if etype not in ("road", "junction"):
        raise r.fail(f"{where}@elementType", f"expected road or junction, got {etype[:40]!r}")
    cp = e.get("contactPoint")
    if cp is not None and cp not in ("start", "end"):
        raise r.fail(f"{where}@contactPoint", f"expected start or end, got {cp[:40]!r}")
    return RoadLink(LinkType(etype), r.text(e, "elementId", where), ContactPoint(cp) if cp else None)


def _speed(r: Reader, e: ET.Element, where: str, s: float) -> SpeedRecord:
    raw = e.get("max")
    if raw is None or raw in ("no limit", "undefined"):
        return SpeedRecord(s, None)
    unit = e.get("unit", "m/s")
    if unit not in _SPEED_UNITS:
        raise r.fail(f"{where}@unit", f"expected m/s, km/h or mph, got {unit[:40]!r}")
    return SpeedRecord(s, r.num(e, "max", where, nonneg=True) * _SPEED_UNITS[unit])


def _lane(r: Reader, e: ET.Element, where: str) -> Lane:
    lane_id = r.int_(e, "id", where)
    w = f"{where[:where.rfind('[')]}[id={lane_id}]"
    marks = []
    for k, m in enumerate(e.findall("roadMark")):
        mw = f"{w}/roadMark[{k}]"
        line = m.find("type/line")
        dash = r.opt(line, "length", f"{mw}/type/line") if line is not None else None
        marks.append(RoadMark(r.num(m, "sOffset", mw, 0.0, nonneg=True), m.get("type", "none"), m.get("color", "standard"),
                              m.get("weight", "standard"), r.opt(m, "width", mw), m.get("laneChange"), dash))  # fmt: skip
    link = e.find("link")
    preds = tuple(r.int_(p, "id", f"{w}/link/predecessor") for p in link.findall("predecessor")) if link is not None else ()
    succs = tuple(r.int_(p, "id", f"{w}/link/successor") for p in link.findall("successor")) if link is not None else ()
    speeds = tuple(_speed(r, sp, f"{w}/speed[{k}]", r.num(sp, "sOffset", f"{w}/speed[{k}]", 0.0)) for k, sp in enumerate(e.findall("speed")))
    return Lane(
        lane_id, e.get("type", "none"), e.get("level", "false") in ("true", "1"),
        r.cubic(e.findall("width"), "sOffset", f"{w}/width"), r.cubic(e.findall("border"), "sOffset", f"{w}/border"),
        tuple(sorted(marks, key=lambda m: m.s_offset)), preds, succs, speeds, e.get("direction"),
    )  # fmt: skip


def _sections(r: Reader, road: ET.Element, where: str, length: float) -> tuple[LaneSection, ...]:
    lanes_el = road.find("lanes")
    if lanes_el is None:
        raise r.fail(f"{where}/lanes", "missing")
    raw = []
    for k, sec in enumerate(lanes_el.findall("laneSection")):
        w = f"{where}/lanes/laneSection[{k}]"
        s = r.num(sec, "s", w, nonneg=True)
        lanes: list[Lane] = []
        for side in ("left", "center", "right"):
            side_el = sec.find(side)
            if side_el is not None:
                lanes += [_lane(r, e, f"{w}/{side}/lane[{j}]") for j, e in enumerate(side_el.findall("lane"))]
        ids = [lane.id for lane in lanes]
        if len(set(ids)) != len(ids):
            raise r.fail(w, f"lane ids repeat: {sorted(ids)}")
        if 0 not in ids:
            lanes.append(Lane(0, "none"))
        raw.append((s, tuple(sorted(lanes, key=lambda lane: -lane.id)), sec.get("singleSide", "false") == "true"))
    if not raw:
        raise r.fail(f"{where}/lanes", "no laneSection")
    raw.sort(key=lambda x: x[0])
    out = []
    for k, (s, ordered, single) in enumerate(raw):
        end = raw[k + 1][0] if k + 1 < len(raw) else length
        out.append(LaneSection(s, max(end, s), ordered, single))
    return tuple(out)


def _outline(r: Reader, o: ET.Element, where: str) -> Outline | None:
    road_c = o.findall("cornerRoad")
    local_c = o.findall("cornerLocal")
    if road_c:
        corners = tuple(Corner(r.num(c, "s", f"{where}/cornerRoad[{k}]"), r.num(c, "t", f"{where}/cornerRoad[{k}]"),
                               r.num(c, "dz", f"{where}/cornerRoad[{k}]", 0.0), r.num(c, "height", f"{where}/cornerRoad[{k}]", 0.0))
                        for k, c in enumerate(road_c))  # fmt: skip
        return Outline(corners, False, o.get("closed", "true") == "true")
    if local_c:
        corners = tuple(Corner(r.num(c, "u", f"{where}/cornerLocal[{k}]"), r.num(c, "v", f"{where}/cornerLocal[{k}]"),
                               r.num(c, "z", f"{where}/cornerLocal[{k}]", 0.0), r.num(c, "height", f"{where}/cornerLocal[{k}]", 0.0))
                        for k, c in enumerate(local_c))  # fmt: skip
        return Outline(corners, True, o.get("closed", "true") == "true")
    return None


def _objects(r: Reader, road: ET.Element, where: str) -> tuple[RoadObject, ...]:
    out = []
    objs = road.find("objects")
    for k, o in enumerate(objs.findall("object") if objs is not None else []):
        w = f"{where}/objects/object[{k}]"
        outlines = [_outline(r, ol, f"{w}/outline[{j}]") for j, ol in enumerate(o.findall("outline"))]
        group = o.find("outlines")
        if group is not None:
            outlines += [_outline(r, ol, f"{w}/outlines/outline[{j}]") for j, ol in enumerate(group.findall("outline"))]
        out.append(RoadObject(
            r.text(o, "id", w), o.get("type", "none"), o.get("name", ""), r.num(o, "s", w), r.num(o, "t", w),
            r.num(o, "zOffset", w, 0.0), r.num(o, "hdg", w, 0.0), r.num(o, "pitch", w, 0.0), r.num(o, "roll", w, 0.0),
            r.opt(o, "length", w), r.opt(o, "width", w), r.opt(o, "height", w), r.opt(o, "radius", w),
            o.get("orientation", "none"), o.get("subtype", ""), tuple(x for x in outlines if x is not None),
        ))  # fmt: skip
    return tuple(out)


def _validities(r: Reader, e: ET.Element, where: str) -> tuple[Validity, ...]:
    return tuple(Validity(r.int_(v, "fromLane", f"{where}/validity[{k}]"), r.int_(v, "toLane", f"{where}/validity[{k}]"))
                 for k, v in enumerate(e.findall("validity")))  # fmt: skip


def _signals(r: Reader, road: ET.Element, where: str) -> tuple[Signal, ...]:
    out = []
    sigs = road.find("signals")
    if sigs is None:
        return ()
    for k, e in enumerate(sigs.findall("signal")):
        w = f"{where}/signals/signal[{k}]"
        value = e.get("value")
        out.append(Signal(
            r.text(e, "id", w), r.num(e, "s", w), r.num(e, "t", w), e.get("orientation", "none"), e.get("name", ""),
            e.get("dynamic", "no") in ("yes", "true"), e.get("country", ""), e.get("type", ""), e.get("subtype", ""),
            r.num(e, "value", w) if value not in (None, "") else None, e.get("unit", ""), r.num(e, "zOffset", w, 0.0),
            r.num(e, "hOffset", w, 0.0), r.num(e, "pitch", w, 0.0), r.num(e, "roll", w, 0.0), r.opt(e, "height", w),
            r.opt(e, "width", w), _validities(r, e, w),
        ))  # fmt: skip
    for k, e in enumerate(sigs.findall("signalReference")):
        w = f"{where}/signals/signalReference[{k}]"
        ref = r.text(e, "id", w)
        out.append(Signal(f"{ref}@{where}#{k}", r.num(e, "s", w), r.num(e, "t", w), e.get("orientation", "none"),
                          validities=_validities(r, e, w), reference_of=ref))  # fmt: skip
    return tuple(out)


def _road(r: Reader, e: ET.Element, index: int) -> Road:
    road_id = r.text(e, "id", f"road[{index}]")
    where = f"road[id={road_id}]"
    length = r.num(e, "length", where, nonneg=True)
    pv = e.find("planView")
    if pv is None:
        raise r.fail(f"{where}/planView", "missing")
    geoms = tuple(sorted((_geometry(r, g, f"{where}/planView/geometry[{k}]") for k, g in enumerate(pv.findall("geometry"))), key=lambda g: g.s))
    if not geoms:
        raise r.fail(f"{where}/planView", "no geometry")
    link = e.find("link")
    elev = e.find("elevationProfile")
    lat = e.find("lateralProfile")
    lanes_el = e.find("lanes")
    speeds = []
    for k, t in enumerate(e.findall("type")):
        sp = t.find("speed")
        if sp is not None:
            speeds.append(_speed(r, sp, f"{where}/type[{k}]/speed", r.num(t, "s", f"{where}/type[{k}]")))
    rule = e.get("rule", "RHT")
    if rule not in ("RHT", "LHT"):
        raise r.fail(f"{where}@rule", f"expected RHT or LHT, got {rule[:40]!r}")
    return Road(
        road_id, length, e.get("junction", "-1"), geoms, _sections(r, e, where, length), e.get("name", ""),
        _link(r, link.find("predecessor") if link is not None else None, f"{where}/link/predecessor"),
        _link(r, link.find("successor") if link is not None else None, f"{where}/link/successor"),
        r.cubic(elev.findall("elevation") if elev is not None else [], "s", f"{where}/elevationProfile/elevation"),
        r.cubic(lat.findall("superelevation") if lat is not None else [], "s", f"{where}/lateralProfile/superelevation"),
        r.cubic(lanes_el.findall("laneOffset") if lanes_el is not None else [], "s", f"{where}/lanes/laneOffset"),
        _objects(r, e, where), _signals(r, e, where), tuple(speeds), TrafficRule(rule),
    )  # fmt: skip


def _junction(r: Reader, e: ET.Element, index: int) -> Junction:
    jid = r.text(e, "id", f"junction[{index}]")
    where = f"junction[id={jid}]"
    conns = []
    for k, c in enumerate(e.findall("connection")):
        w = f"{where}/connection[{k}]"
        cp = c.get("contactPoint", "start")
        if cp not in ("start", "end"):
            raise r.fail(f"{w}@contactPoint", f"expected start or end, got {cp[:40]!r}")
        links = tuple(LaneLink(r.int_(ll, "from", f"{w}/laneLink[{j}]"), r.int_(ll, "to", f"{w}/laneLink[{j}]"))
                      for j, ll in enumerate(c.findall("laneLink")))  # fmt: skip
        incoming = c.get("incomingRoad")
        connecting = c.get("connectingRoad", c.get("linkedRoad"))
        if incoming is None or connecting is None:
            continue  # a virtual/direct junction connection without roads: nothing to link
        conns.append(Connection(c.get("id", str(k)), incoming, connecting, ContactPoint(cp), links))
    return Junction(jid, e.get("name", ""), e.get("type", "default"), tuple(conns))


def _header(r: Reader, root: ET.Element) -> Header:
    h = root.find("header")
    if h is None:
        return Header()
    geo = h.find("geoReference")
    off = h.find("offset")
    offset = None
    if off is not None:
        offset = tuple(r.num(off, k, "header/offset", 0.0) for k in ("x", "y", "z", "hdg"))
    return Header(
        int(r.num(h, "revMajor", "header", 1)), int(r.num(h, "revMinor", "header", 4)), h.get("name", ""),
        h.get("vendor", ""), h.get("date", ""), r.opt(h, "north", "header"), r.opt(h, "south", "header"),
        r.opt(h, "east", "header"), r.opt(h, "west", "header"),
        "".join(geo.itertext()).strip() if geo is not None else "", offset,  # type: ignore[arg-type]
    )  # fmt: skip


def read_opendrive(path: str | os.PathLike[str]) -> OpenDriveFile:
    """Parse an OpenDRIVE file.

    Args:
        path: the .xodr file.

    Returns:
        The file's header, roads and junctions.
    """
    return opendrive_from_root(read_xml(path, "xodr"), path)


def parse_opendrive(data: bytes, source: str | os.PathLike[str]) -> OpenDriveFile:
    """Parse an OpenDRIVE document held in memory (an OpenSCENARIO scenario's embedded road network).

    Args:
        data: the document's bytes.
        source: the name errors give for it.

    Returns:
        The file's header, roads and junctions.
    """
    if len(data) > MAX_XML_BYTES:
        raise AvsimInputError(source, "xodr", f"{len(data)} bytes is over the {MAX_XML_BYTES}-byte limit for XML files")
    return opendrive_from_root(parse_xml(data, source), source)


def opendrive_from_root(root: ET.Element, source: str | os.PathLike[str]) -> OpenDriveFile:
    """The parsed network of an `<OpenDRIVE>` element tree (`read_opendrive`, `parse_opendrive`)."""
    r = Reader(source)
    if root.tag != "OpenDRIVE":
        raise r.fail("root", f"expected an <OpenDRIVE> document, got <{root.tag[:40]}>")
    roads: dict[str, Road] = {}
    for k, e in enumerate(root.findall("road")):
        if k >= MAX_ROADS:
            raise r.fail("road", f"more than {MAX_ROADS} roads")
        road = _road(r, e, k)
        if road.id in roads:
            raise r.fail(f"road[id={road.id}]", "duplicate road id")
        roads[road.id] = road
    if not roads:
        raise r.fail("road", "the file has no road")
    junctions = {}
    for k, e in enumerate(root.findall("junction")):
        j = _junction(r, e, k)
        junctions[j.id] = j
    return OpenDriveFile(_header(r, root), roads, junctions)
