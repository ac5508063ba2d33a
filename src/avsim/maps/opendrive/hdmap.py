"""An OpenDRIVE network as an avsim HD map: lanes, lane lines, road boundaries, drivable areas,
the lane graph and speed limits (objects and signals: `avsim.maps.opendrive.features`).

- **Lanes**: every lane of a drivable type (`marks.DRIVABLE_LANE_TYPES`) of every lane section,
  id ``road:section:lane`` (`LaneKey.name`), sampled on the section's grid
  (`sampling.section_grid`, chord tolerance `TOLERANCE_M`), oriented in its driving direction
  (right lanes along +s in right-hand traffic, left lanes against it; `@direction` and the
  road's rule respected); left and right rails are its borders as seen in that direction, the
  centre the line halfway between them in t. Lanes narrower than `MIN_LANE_WIDTH_M` everywhere
  are left out.
- **Lane lines**: every painted `<roadMark>` on the border it describes (a lane's outer border;
  the centre lane's: the lane-offset line), from its sOffset to the next mark's, in +s
  direction, typed by `marks.road_mark_type`.
- **Road boundaries**: curb / grass / edge road marks (a junction's corner curbs included), and on
  roads outside junctions each side's outermost drivable border where the lane beyond it is a sidewalk, border, curb, median,
  restricted or walking lane (a painted edge or a shoulder is not a boundary).
- **Drivable areas**: one polygon per lane section spanning its drivable lanes.
- **Lane graph**: `RoadNetwork.successors` between the lanes kept (metadata `lane_successors`).
- **Speed limits**: the lane's `<speed>` or else the road type's, at the section start (m/s).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from avsim.core.typing import NDArrayFloat
from avsim.maps import HDMap, LaneLines, Lanes, Polygons, Polylines
from avsim.maps.opendrive.features import FeatureSet, road_features
from avsim.maps.opendrive.marks import DRIVABLE_LANE_TYPES, MarkKind, mark_kind, road_mark_type
from avsim.maps.opendrive.model import Direction, Road
from avsim.maps.opendrive.network import LaneKey, RoadNetwork
from avsim.maps.opendrive.road import Frame, RoadEval
from avsim.maps.opendrive.sampling import MAX_STEP_M, TOLERANCE_M, section_grid

MIN_LANE_WIDTH_M = 0.05
KERB_LANE_TYPES = frozenset({"sidewalk", "border", "curb", "median", "restricted", "walking"})
"""Lane types beyond a drivable lane that make its edge a road boundary."""


@dataclass
class OpenDriveMap:
    """An HDMap built from a network, with what the map contract has no field for.

    hdmap: the elements; lane_keys: lane id -> its LaneKey; lane_successors: lane id -> lane ids;
    speed_limits_mps: lane id -> m/s; light_lanes: light id -> ids of the lanes it controls;
    counts: what was read and what was skipped (by reason); tolerance_m: the sampling tolerance.
    """

    hdmap: HDMap
    lane_keys: dict[str, LaneKey]
    lane_successors: dict[str, list[str]]
    speed_limits_mps: dict[str, float]
    light_lanes: dict[str, list[str]]
    counts: dict[str, int]
    tolerance_m: float


@dataclass
class _Section:
    """One lane section sampled: its grid s (N,), frames and border t values."""

    ev: RoadEval
    index: int
    s: NDArrayFloat
    frame: Frame
    borders: dict[int, NDArrayFloat]

    def inner_outer(self, lane_id: int) -> tuple[NDArrayFloat, NDArrayFloat]:
        return self.borders[lane_id - 1 if lane_id > 0 else lane_id + 1], self.borders[lane_id]

    def drivable(self) -> list[int]:
        sec = self.ev.road.sections[self.index]
        return [lane.id for lane in sec.lanes if lane.id != 0 and lane.type in DRIVABLE_LANE_TYPES]


@dataclass
class _Acc:
    """Accumulated elements."""

    lane_ids: list[str] = field(default_factory=list)
    lanes: list[tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat]] = field(default_factory=list)
    line_ids: list[str] = field(default_factory=list)
    lines: list[NDArrayFloat] = field(default_factory=list)
    line_types: list[tuple[str, str]] = field(default_factory=list)
    boundary_ids: list[str] = field(default_factory=list)
    boundaries: list[NDArrayFloat] = field(default_factory=list)
    area_ids: list[str] = field(default_factory=list)
    areas: list[NDArrayFloat] = field(default_factory=list)
    keys: dict[str, LaneKey] = field(default_factory=dict)
    speeds: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _sections(ev: RoadEval, tolerance_m: float, max_step_m: float) -> list[_Section]:
    out = []
    for k in range(len(ev.road.sections)):
        s = section_grid(ev, k, tolerance_m, max_step_m)
        if len(s) < 2:
            continue
        out.append(_Section(ev, k, s, ev.frame(s), ev.borders(k, s)))
    return out


def _add_lanes(sec: _Section, acc: _Acc) -> None:
    road = sec.ev.road
    for lane_id in sec.drivable():
        inner, outer = sec.inner_outer(lane_id)
        if np.max(np.abs(outer - inner)) < MIN_LANE_WIDTH_M:
            acc.skip("lane narrower than 5 cm")
            continue
        key = LaneKey(road.id, sec.index, lane_id)
        direction = sec.ev.lane_direction(sec.index, lane_id)
        d = -1.0 if direction is Direction.BACKWARD else 1.0
        left_t, right_t = (inner, outer) if np.mean((inner - outer) * d) > 0 else (outer, inner)
        rails = [sec.frame.point(left_t), sec.frame.point(right_t), sec.frame.point((inner + outer) / 2)]
        if d < 0:
            rails = [r[::-1] for r in rails]
        acc.lane_ids.append(key.name)
        acc.lanes.append((rails[0], rails[1], rails[2]))
        acc.keys[key.name] = key
        speed = _speed_limit(road, sec, lane_id)
        if speed is not None:
            acc.speeds[key.name] = speed


def _speed_limit(road: Road, sec: _Section, lane_id: int) -> float | None:
    lane = road.sections[sec.index].lane(lane_id)
    if lane is not None and lane.speeds and lane.speeds[0].max_mps is not None:
        return float(lane.speeds[0].max_mps)
    start = road.sections[sec.index].s
    valid = [r for r in road.speeds if r.s <= start + 1e-9] or list(road.speeds[:1])
    return None if not valid or valid[-1].max_mps is None else float(valid[-1].max_mps)


def _edge_lanes(sec: _Section) -> dict[int, int]:
    """side (+1 left, -1 right) -> the outermost drivable lane id on that side."""
    out: dict[int, int] = {}
    for lane_id in sec.drivable():
        side = 1 if lane_id > 0 else -1
        if abs(lane_id) > abs(out.get(side, 0)):
            out[side] = lane_id
    return out


def _span(sec: _Section, a: float, b: float, lane_id: int) -> NDArrayFloat:
    """Points of one border (lane 0: the offset line) between road s a and b."""
    s = np.unique(np.r_[a, sec.s[(sec.s > a) & (sec.s < b)], b])
    t = sec.ev.borders(sec.index, s)[lane_id]
    return sec.ev.frame(s).point(t)


def _add_marks(sec: _Section, acc: _Acc, edges: dict[int, int]) -> None:
    road = sec.ev.road
    section = road.sections[sec.index]
    for lane in section.lanes:
        marks = lane.road_marks
        for k, mark in enumerate(marks):
            kind = mark_kind(mark.type)
            if kind is MarkKind.NONE:
                continue
            a = section.s + mark.s_offset
            b = section.s + marks[k + 1].s_offset if k + 1 < len(marks) else sec.s[-1]
            if b - a < 1e-3:
                continue
            name = f"{road.id}:{sec.index}:{lane.id}:{k}"
            if kind is MarkKind.BOUNDARY:
                acc.boundary_ids.append(name)
                acc.boundaries.append(_span(sec, a, b, lane.id))
                continue
            acc.line_ids.append(name)
            acc.lines.append(_span(sec, a, b, lane.id))
            acc.line_types.append(road_mark_type(mark.type, mark.color, lane.id > 0, mark.line_length_m))


def _add_boundaries_and_area(sec: _Section, acc: _Acc, edges: dict[int, int]) -> None:
    road = sec.ev.road
    if not edges:
        return
    left_t = sec.borders[edges[1]] if 1 in edges else sec.borders[0]
    right_t = sec.borders[edges[-1]] if -1 in edges else sec.borders[0]
    left, right = sec.frame.point(left_t), sec.frame.point(right_t)
    section = road.sections[sec.index]
    if not road.in_junction:
        for side, pts in ((1, left), (-1, right)):
            edge = section.lane(edges[side]) if side in edges else None
            outward = section.lane(edges[side] + side) if side in edges else None
            curb = edge is not None and any(mark_kind(m.type) is MarkKind.BOUNDARY for m in edge.road_marks)
            if outward is not None and outward.type in KERB_LANE_TYPES and not curb:
                acc.boundary_ids.append(f"{road.id}:{sec.index}:{'left' if side > 0 else 'right'}")
                acc.boundaries.append(pts)
    if np.max(np.abs(left_t - right_t)) < MIN_LANE_WIDTH_M:
        return
    ring = np.concatenate([left, right[::-1]])
    acc.area_ids.append(f"{road.id}:{sec.index}")
    acc.areas.append(ring)


def _lane_graph(net: RoadNetwork, keys: dict[str, LaneKey]) -> dict[str, list[str]]:
    kept = {key: name for name, key in keys.items()}
    out = {}
    for name, key in keys.items():
        nxt = [kept[k] for k in net.successors(key) if k in kept]
        if nxt:
            out[name] = nxt
    return out


def _elements(acc: _Acc, feats: FeatureSet) -> HDMap:
    lanes = Lanes(np.asarray(acc.lane_ids, dtype=str) if acc.lane_ids else np.zeros(0, "<U1"),
                  Polylines.from_list(acc.lane_ids, [x[0] for x in acc.lanes]),
                  Polylines.from_list(acc.lane_ids, [x[1] for x in acc.lanes]),
                  Polylines.from_list(acc.lane_ids, [x[2] for x in acc.lanes]))  # fmt: skip
    lines = LaneLines(Polylines.from_list(acc.line_ids, acc.lines),
                      np.array([c for c, _ in acc.line_types], dtype=str), np.array([s for _, s in acc.line_types], dtype=str))  # fmt: skip
    return HDMap.build(
        lanes=lanes, lane_lines=lines, road_boundaries=Polylines.from_list(acc.boundary_ids, acc.boundaries),
        drivable_areas=Polygons.from_list(acc.area_ids, acc.areas), **feats.elements(),
    )  # fmt: skip


def build_hdmap(net: RoadNetwork, tolerance_m: float = TOLERANCE_M, max_step_m: float = MAX_STEP_M) -> OpenDriveMap:
    """Sample a network into an HD map (see the module docstring).

    Args:
        net: the network.
        tolerance_m: sampling chord tolerance.
        max_step_m: longest sampling step.

    Returns:
        The map and its lane graph, speed limits and light-to-lane table.
    """
    acc = _Acc()
    feats = FeatureSet()
    for ev in net.evals.values():
        for sec in _sections(ev, tolerance_m, max_step_m):
            edges = _edge_lanes(sec)
            _add_lanes(sec, acc)
            _add_marks(sec, acc, edges)
            _add_boundaries_and_area(sec, acc, edges)
        road_features(net, ev, feats)
    hdmap = _elements(acc, feats)
    kept = set(acc.keys)
    light_lanes = {lid: [n for n in names if n in kept] for lid, names in feats.light_lanes.items()}
    counts = {"roads": len(net.roads), "junctions": len(net.junctions), **{f"skipped: {k}": v for k, v in {**acc.skipped, **feats.skipped}.items()}}
    return OpenDriveMap(hdmap, acc.keys, _lane_graph(net, acc.keys), acc.speeds,
                        {k: v for k, v in light_lanes.items() if v}, counts, tolerance_m)  # fmt: skip
