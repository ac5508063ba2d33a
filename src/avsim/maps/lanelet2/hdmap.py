"""A Lanelet2 map as an avsim HD map: lanes from lanelets, lines and boundaries from their ways,
lights, signs, stop lines, crosswalks, areas, the lane graph and speed limits.

- **Lanes**: lanelets vehicles drive (subtypes road, highway, play_street, bus_lane,
  emergency_lane, exit, or `participant:vehicle=yes`); their bounds oriented as `lanelet2_io`
  orients them (`geometry::align`: the left bound is turned if the right bound's middle point is not
  right of it, then the right bound likewise); left and right rails are the bounds, the centre the
  mean of both resampled at equal fractions of their lengths (or the lanelet's `centerline` member).
  A lanelet tagged `one_way=no` is also a lane the other way (id ``<lanelet>:reverse``).
- **Lane graph**: lane B follows lane A where A's bounds end at the nodes where B's begin (as
  Lanelet2's routing graph joins lanelets).
- **Lane lines**: ways of type line_thin / line_thick by subtype (solid, dashed, solid_solid,
  dashed_solid: dashed on the left and solid on the right along the way, solid_dashed, ...) and
  `color` (white by default); bike_marking and zig-zag as OTHER. **Road boundaries**: curbstone,
  road_border, guard_rail, wall, fence. **Wait lines**: stop_line ways.
- **Traffic lights / signs**: ways of type traffic_light / traffic_sign (the linestring is the
  object's lower edge, left to right as seen facing it): boxes over the way, `height` tall
  (default 1.0 m lights, 0.75 m signs), 0.3 / 0.05 m deep. A traffic_light regulatory element's
  lanelets are the lanes its lights control (metadata `traffic_light_lanes`, keyed by the light
  way's id); right_of_way elements are listed in metadata `lanelet2_right_of_way`.
- **Speed limits**: a speed_limit element's sign (German signs as `lanelet2_traffic_rules`'
  GermanTrafficRules: de274 30 km/h, de274-N N km/h, de274_1 30 km/h, de310 50 km/h; other
  types ending in a number: that many km/h), else the lanelet's `speed_limit` tag (km/h unless it
  names m/s or mph).
- **Crosswalks**: crosswalk lanelets (left bound + reversed right bound). **Drivable areas**:
  every vehicle lanelet's outline and multipolygon areas of subtype parking or freespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from avsim.core.transforms import yaw_to_quat
from avsim.core.typing import NDArrayFloat
from avsim.maps import Cuboids, HDMap, LaneLines, Lanes, Polygons, Polylines
from avsim.maps.lanelet2.osm import OsmMap, Relation

VEHICLE_SUBTYPES = frozenset({"road", "highway", "play_street", "bus_lane", "emergency_lane", "exit"})
BOUNDARY_TYPES = frozenset({"curbstone", "road_border", "guard_rail", "wall", "fence"})
LINE_STYLES = {"solid": "SOLID_SINGLE", "dashed": "LONG_DASHED_SINGLE", "solid_solid": "SOLID_GROUP",
               "dashed_dashed": "LONG_DASHED_SINGLE", "dashed_solid": "DASHED_SOLID", "solid_dashed": "SOLID_DASHED"}  # fmt: skip
GERMAN_SPEED_SIGNS_KMH = {"de274": 30.0, "de274_1": 30.0, "de310": 50.0}
CENTRE_STEP_M = 0.5
LIGHT_HEIGHT_M, SIGN_HEIGHT_M = 1.0, 0.75
LIGHT_DEPTH_M, SIGN_DEPTH_M = 0.3, 0.05


@dataclass
class Lanelet2Map:
    """An HDMap from a Lanelet2 map, with the lane graph, speed limits, light-to-lane table,
    right-of-way elements and counts of what was skipped."""

    hdmap: HDMap
    lane_successors: dict[str, list[str]]
    speed_limits_mps: dict[str, float]
    light_lanes: dict[str, list[str]]
    right_of_way: list[dict[str, Any]]
    counts: dict[str, int]


@dataclass
class _Lane:
    lid: str
    lanelet: int
    left_nodes: tuple[int, ...]
    right_nodes: tuple[int, ...]
    left: NDArrayFloat
    right: NDArrayFloat
    centre: NDArrayFloat


@dataclass
class _Acc:
    lanes: list[_Lane] = field(default_factory=list)
    polylines: dict[str, tuple[list[str], list[NDArrayFloat]]] = field(default_factory=dict)
    line_types: list[tuple[str, str]] = field(default_factory=list)
    boxes: dict[str, list[tuple[str, NDArrayFloat, tuple[float, float, float], float]]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, name: str, pts: NDArrayFloat) -> None:
        ids, arrays = self.polylines.setdefault(kind, ([], []))
        ids.append(name)
        arrays.append(pts)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _signed_distance(line: NDArrayFloat, p: NDArrayFloat) -> float:
    """Lanelet2's signedDistance (2-D): to the closest segment, positive left of it."""
    a, b = line[:-1, :2], line[1:, :2]
    d = b - a
    u = np.clip(((p[:2] - a) * d).sum(1) / np.maximum((d * d).sum(1), 1e-18), 0.0, 1.0)
    proj = a + u[:, None] * d
    k = int(np.argmin(np.linalg.norm(proj - p[:2], axis=1)))
    cross = d[k, 0] * (p[1] - a[k, 1]) - d[k, 1] * (p[0] - a[k, 0])
    dist = float(np.linalg.norm(proj[k] - p[:2]))
    return dist if cross > 0 else -dist


def _middle(line: NDArrayFloat) -> NDArrayFloat:
    return line[len(line) // 2] if len(line) > 2 else (line[0] + line[-1]) / 2


def align(left: NDArrayFloat, right: NDArrayFloat) -> tuple[bool, bool]:
    """Whether `lanelet2_io` inverts the left and the right bound (`geometry::align`)."""
    flip_left = len(left) > 1 and not _signed_distance(left, _middle(right)) < 0
    if flip_left:
        left = left[::-1]
    flip_right = len(right) > 1 and not _signed_distance(right, _middle(left)) > 0
    return flip_left, flip_right


def _resample(line: NDArrayFloat, n: int) -> NDArrayFloat:
    s = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(line, axis=0), axis=1))]
    f = np.linspace(0.0, 1.0, n) * s[-1]
    return np.stack([np.interp(f, s, line[:, i]) for i in range(3)], 1)


def centre_line(left: NDArrayFloat, right: NDArrayFloat) -> NDArrayFloat:
    """The mean of both bounds resampled at equal fractions of their lengths."""
    length = max(float(np.linalg.norm(np.diff(b, axis=0), axis=1).sum()) for b in (left, right))
    n = max(int(np.ceil(length / CENTRE_STEP_M)) + 1, 2)
    return (_resample(left, n) + _resample(right, n)) / 2


def _way_points(osm: OsmMap, xyz: dict[int, NDArrayFloat], wid: int) -> tuple[tuple[int, ...], NDArrayFloat] | None:
    way = osm.ways.get(wid)
    if way is None or any(n not in xyz for n in way.nodes) or len(way.nodes) < 2:
        return None
    return way.nodes, np.array([xyz[n] for n in way.nodes])


def _is_vehicle(rel: Relation) -> bool:
    return rel.tags.get("subtype", "road") in VEHICLE_SUBTYPES or rel.tags.get("participant:vehicle") == "yes"


def _bounds(osm: OsmMap, xyz: dict[int, NDArrayFloat], rid: int, rel: Relation, acc: _Acc) -> tuple[Any, Any] | None:
    lw, rw = rel.refs("left", "way"), rel.refs("right", "way")
    if len(lw) != 1 or len(rw) != 1:
        acc.skip("lanelet without exactly one left and one right way")
        return None
    left, right = _way_points(osm, xyz, lw[0]), _way_points(osm, xyz, rw[0])
    if left is None or right is None:
        acc.skip("lanelet bound with a missing node or under 2 nodes")
        return None
    flip_l, flip_r = align(left[1], right[1])
    left = (left[0][::-1], left[1][::-1]) if flip_l else left
    right = (right[0][::-1], right[1][::-1]) if flip_r else right
    return left, right


def _add_lanelets(osm: OsmMap, xyz: dict[int, NDArrayFloat], acc: _Acc) -> None:
    for rid, rel in osm.relations.items():
        if rel.tags.get("type") != "lanelet":
            continue
        bounds = _bounds(osm, xyz, rid, rel, acc)
        if bounds is None:
            continue
        (ln, lp), (rn, rp) = bounds
        if rel.tags.get("subtype") == "crosswalk":
            acc.add("crosswalks", str(rid), np.concatenate([lp, rp[::-1]]))
            continue
        if not _is_vehicle(rel):
            acc.skip(f"lanelet subtype {rel.tags.get('subtype', 'none')}")
            continue
        centre = centre_line(lp, rp)
        centre_ref = rel.refs("centerline", "way")
        if centre_ref and (c := _way_points(osm, xyz, centre_ref[0])) is not None:
            centre = c[1] if np.linalg.norm(c[1][0] - centre[0]) <= np.linalg.norm(c[1][-1] - centre[0]) else c[1][::-1]
        acc.lanes.append(_Lane(str(rid), rid, ln, rn, lp, rp, centre))
        acc.add("drivable_areas", str(rid), np.concatenate([lp, rp[::-1]]))
        if rel.tags.get("one_way", "yes") == "no":
            acc.lanes.append(_Lane(f"{rid}:reverse", rid, rn[::-1], ln[::-1], rp[::-1], lp[::-1], centre[::-1]))


def _line_type(tags: dict[str, str]) -> tuple[str, str] | None:
    kind = tags.get("type", "")
    if kind in ("bike_marking", "zig-zag"):
        return ("OTHER", "SOLID_SINGLE")
    if kind not in ("line_thin", "line_thick"):
        return None
    colour = {"white": "WHITE", "yellow": "YELLOW"}.get(tags.get("color", "white").lower(), "OTHER")
    style = LINE_STYLES.get(tags.get("subtype", "solid"), "SOLID_SINGLE")
    if colour == "WHITE" and style in ("DASHED_SOLID", "SOLID_DASHED"):
        style = "SOLID_GROUP"  # nearest: the spec has no white line dashed on one side
    return (colour, style)


def _box(pts: NDArrayFloat, height: float, depth: float) -> tuple[NDArrayFloat, tuple[float, float, float], float]:
    d = pts[-1] - pts[0]
    width = max(float(np.linalg.norm(d[:2])), 0.2)
    centre = (pts[0] + pts[-1]) / 2 + np.array([0.0, 0.0, height / 2])
    return centre, (depth, width, height), float(np.arctan2(d[1], d[0]) + np.pi / 2)


def _add_ways(osm: OsmMap, xyz: dict[int, NDArrayFloat], acc: _Acc) -> None:
    for wid, way in osm.ways.items():
        kind = way.tags.get("type", "")
        got = _way_points(osm, xyz, wid)
        if got is None or way.tags.get("area") == "yes":
            continue
        pts = got[1]
        line = _line_type(way.tags)
        if line is not None:
            acc.add("lane_lines", str(wid), pts)
            acc.line_types.append(line)
        elif kind in BOUNDARY_TYPES:
            acc.add("road_boundaries", str(wid), pts)
        elif kind == "stop_line":
            acc.add("wait_lines", str(wid), pts)
        elif kind in ("traffic_light", "traffic_sign"):
            light = kind == "traffic_light"
            try:
                height = float(way.tags.get("height", LIGHT_HEIGHT_M if light else SIGN_HEIGHT_M))
            except ValueError:
                height = LIGHT_HEIGHT_M if light else SIGN_HEIGHT_M
            centre, size, yaw = _box(pts, max(height, 0.05), LIGHT_DEPTH_M if light else SIGN_DEPTH_M)
            acc.boxes.setdefault("traffic_lights" if light else "traffic_signs", []).append((str(wid), centre, size, yaw))
        elif kind not in ("virtual", ""):
            acc.skip(f"way type {kind}")


def _ring(osm: OsmMap, xyz: dict[int, NDArrayFloat], ways: list[int]) -> NDArrayFloat | None:
    """Chain the outer ways of a multipolygon into one ring (None when they do not close)."""
    chains = [w for w in (_way_points(osm, xyz, w) for w in ways) if w is not None]
    if not chains:
        return None
    nodes, pts = list(chains[0][0]), [chains[0][1]]
    rest = chains[1:]
    while rest:
        hit = next(((k, False) for k, c in enumerate(rest) if c[0][0] == nodes[-1]), None) or next(
            ((k, True) for k, c in enumerate(rest) if c[0][-1] == nodes[-1]), None)  # fmt: skip
        if hit is None:
            return None
        c = rest.pop(hit[0])
        n, p = (c[0][::-1], c[1][::-1]) if hit[1] else c
        nodes += list(n[1:])
        pts.append(p[1:])
    ring = np.concatenate(pts)
    if nodes[0] == nodes[-1]:
        ring = ring[:-1]
    return ring if len(ring) >= 3 else None


def _add_areas(osm: OsmMap, xyz: dict[int, NDArrayFloat], acc: _Acc) -> None:
    for rid, rel in osm.relations.items():
        if rel.tags.get("type") != "multipolygon":
            continue
        subtype = rel.tags.get("subtype", "")
        if subtype not in ("parking", "freespace"):
            acc.skip(f"area subtype {subtype or 'none'}")
            continue
        ring = _ring(osm, xyz, rel.refs("outer", "way"))
        if ring is None:
            acc.skip("area whose outer ways do not close")
            continue
        acc.add("drivable_areas", f"area:{rid}", ring)


def speed_kmh(value: str) -> float | None:
    """A Lanelet2 speed value in km/h ("50", "50 km/h", "30 mph", "13.9 m/s"; None if unreadable)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(km/h|kmh|mph|m/s|mps)?\s*", value.lower())
    if m is None:
        return None
    v = float(m.group(1))
    return {None: v, "km/h": v, "kmh": v, "mph": v * 1.609344, "m/s": v * 3.6, "mps": v * 3.6}[m.group(2)]


def sign_speed_kmh(sign_type: str) -> float | None:
    """Speed of a speed-limit sign type (see the module docstring)."""
    if sign_type in GERMAN_SPEED_SIGNS_KMH:
        return GERMAN_SPEED_SIGNS_KMH[sign_type]
    m = re.search(r"[-_\[ ]([0-9]{1,3})\]?$", sign_type)
    return float(m.group(1)) if m else None


def _regulatory(osm: OsmMap, acc: _Acc) -> tuple[dict[str, list[str]], dict[str, float], list[dict[str, Any]]]:
    """Light -> lane ids, lane id -> speed limit (m/s), right-of-way elements."""
    lanes_of: dict[int, list[str]] = {}
    for lane in acc.lanes:
        lanes_of.setdefault(lane.lanelet, []).append(lane.lid)
    users: dict[int, list[int]] = {}
    for rid, rel in osm.relations.items():
        if rel.tags.get("type") == "lanelet":
            for reg in rel.refs("regulatory_element", "relation"):
                users.setdefault(reg, []).append(rid)
    light_lanes: dict[str, list[str]] = {}
    speeds: dict[str, float] = {}
    right_of_way: list[dict[str, Any]] = []
    for rid, rel in osm.relations.items():
        if rel.tags.get("type") != "regulatory_element":
            continue
        subtype = rel.tags.get("subtype", "")
        controlled = [lid for ll in users.get(rid, []) for lid in lanes_of.get(ll, [])]
        if subtype == "traffic_light":
            for way in rel.refs("refers", "way"):
                if osm.ways.get(way) is not None and osm.ways[way].tags.get("type") == "traffic_light":
                    light_lanes.setdefault(str(way), []).extend(x for x in controlled if x not in light_lanes.get(str(way), []))
        elif subtype == "speed_limit":
            signs = [osm.ways[w].tags.get("subtype", "") for w in rel.refs("refers", "way") if w in osm.ways]
            kmh = next((v for v in (sign_speed_kmh(s) for s in signs) if v is not None), None)
            if kmh is None and "sign_type" in rel.tags:
                kmh = sign_speed_kmh(rel.tags["sign_type"])
            if kmh is not None:
                speeds.update({lid: kmh / 3.6 for lid in controlled})
        elif subtype == "right_of_way":
            right_of_way.append({"id": str(rid), "right_of_way": [str(x) for x in rel.refs("right_of_way")],
                                 "yield": [str(x) for x in rel.refs("yield")], "stop_lines": [str(x) for x in rel.refs("ref_line")]})  # fmt: skip
    for lane in acc.lanes:
        tag = osm.relations[lane.lanelet].tags.get("speed_limit")
        if lane.lid not in speeds and tag is not None and (kmh := speed_kmh(tag)) is not None:
            speeds[lane.lid] = kmh / 3.6
    return light_lanes, speeds, right_of_way


def _graph(lanes: list[_Lane]) -> dict[str, list[str]]:
    starts: dict[tuple[int, int], list[str]] = {}
    for lane in lanes:
        starts.setdefault((lane.left_nodes[0], lane.right_nodes[0]), []).append(lane.lid)
    out = {}
    for lane in lanes:
        nxt = [x for x in starts.get((lane.left_nodes[-1], lane.right_nodes[-1]), []) if x.split(":")[0] != str(lane.lanelet)]
        if nxt:
            out[lane.lid] = sorted(nxt)
    return out


def _cuboids(rows: list[tuple[str, NDArrayFloat, tuple[float, float, float], float]]) -> Cuboids:
    if not rows:
        return Cuboids.empty()
    return Cuboids(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), np.array([r[2] for r in rows]),
                   np.asarray(yaw_to_quat(np.array([r[3] for r in rows]))))  # fmt: skip


def build_hdmap(osm: OsmMap, xyz: dict[int, NDArrayFloat]) -> Lanelet2Map:
    """The HD map of a parsed Lanelet2 map whose nodes are placed at `xyz` (see the module docstring).

    Args:
        osm: the parsed map.
        xyz: node id -> (3,) local position (`origin.place_nodes`).

    Returns:
        The map with its lane graph, speed limits, light-to-lane table and right-of-way elements.
    """
    acc = _Acc()
    _add_lanelets(osm, xyz, acc)
    _add_ways(osm, xyz, acc)
    _add_areas(osm, xyz, acc)
    light_lanes, speeds, right_of_way = _regulatory(osm, acc)
    ids = [lane.lid for lane in acc.lanes]
    lanes = Lanes(np.array(ids, dtype=str) if ids else np.zeros(0, "<U1"), Polylines.from_list(ids, [x.left for x in acc.lanes]),
                  Polylines.from_list(ids, [x.right for x in acc.lanes]), Polylines.from_list(ids, [x.centre for x in acc.lanes]))  # fmt: skip
    line_ids, line_pts = acc.polylines.get("lane_lines", ([], []))
    lines = LaneLines(Polylines.from_list(line_ids, line_pts), np.array([c for c, _ in acc.line_types], dtype=str),
                      np.array([s for _, s in acc.line_types], dtype=str))  # fmt: skip
    poly = {k: (Polygons if k in ("crosswalks", "drivable_areas") else Polylines).from_list(*acc.polylines.get(k, ([], [])))
            for k in ("road_boundaries", "wait_lines", "crosswalks", "drivable_areas")}  # fmt: skip
    hdmap = HDMap.build(lanes=lanes, lane_lines=lines, traffic_lights=_cuboids(acc.boxes.get("traffic_lights", [])),
                        traffic_signs=_cuboids(acc.boxes.get("traffic_signs", [])), **poly)  # fmt: skip
    counts = {"nodes": len(osm.nodes), "ways": len(osm.ways), "relations": len(osm.relations),
              **{f"skipped: {k}": v for k, v in sorted(acc.skipped.items())}}  # fmt: skip
    return Lanelet2Map(hdmap, _graph(acc.lanes), speeds, {k: v for k, v in light_lanes.items() if v}, right_of_way, counts)
