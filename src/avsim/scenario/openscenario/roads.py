"""Entities on the road network: lane coordinates, moving along lanes, lanes relative to lanes,
distances along roads.

A `LaneCoord` is where an entity stands on a lane: road, lane id, road s, offset from the lane
centre (towards +t) and `sdir`, the way it travels along s (+1 along the reference line, -1
against). `Roads.advance` moves it a distance along its lane as esmini's `MoveAlongS` does: the
road-s step is the distance divided by the stretch of the offset line (so the entity covers the
distance on its own line, in curves too), and at the end of a lane section or a road it enters
the linked lane (`RoadNetwork.successors` / `predecessors`): the one on its route, else the
straightest (esmini's default junction selector, angle 0), entering at the end nearest to it. A
lane with no link ends the road: the entity stays at its end (esmini's end of road).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace

import numpy as np

from avsim.core.transforms import wrap_angle
from avsim.maps.opendrive.model import Direction
from avsim.maps.opendrive.network import LaneKey, Pose, RoadNetwork

MAX_LINKS_PER_MOVE = 64  # lanes crossed in one step (a step never spans more)
ROAD_SEARCH_M = 1000.0  # distances along roads are searched this far (esmini: maxDist)


def wrap(angle: float) -> float:
    """An angle in [-pi, pi), as a float (`avsim.core.transforms.wrap_angle`)."""
    return float(wrap_angle(angle))


@dataclass(frozen=True)
class LaneCoord:
    road: str
    lane: int
    s: float
    offset: float = 0.0
    sdir: int = 1


@dataclass(frozen=True)
class Located:
    """A world point on the network: its lane coordinate and t (None off every lane)."""

    coord: LaneCoord | None
    t: float


class Roads:
    """Lane-coordinate queries and motion on one road network (see the module docstring).

    Args:
        net: the network.
    """

    def __init__(self, net: RoadNetwork) -> None:
        self.net = net

    # ---- lanes and poses ---------------------------------------------------------------------
    def key(self, road: str, lane: int, s: float) -> LaneKey:
        ev = self.net.road(road)
        return LaneKey(road, int(ev.section_index(np.array([s]))[0]), lane)

    def has_lane(self, road: str, lane: int, s: float) -> bool:
        ev = self.net.road(road)
        section = ev.road.sections[int(ev.section_index(np.array([s]))[0])]
        return section.lane(lane) is not None

    def centre_t(self, road: str, lane: int, s: float) -> float:
        return float(self.net.lane_centre_t(road, lane, s)[0])

    def pose(self, c: LaneCoord) -> Pose:
        """The pose at a lane coordinate, heading along the travel direction (pitch and roll turned with it)."""
        p = self.net.lane_pose(c.road, c.lane, c.s, c.offset)
        if c.sdir > 0:
            return p
        return Pose(p.x, p.y, p.z, wrap(p.heading + math.pi), -p.pitch, -p.roll)

    def road_heading(self, road: str, s: float) -> float:
        return float(self.net.road(road).heading(np.array([s]))[0])

    def driving_sdir(self, road: str, lane: int, s: float) -> int:
        """+1 when the lane is driven along +s (or both ways), -1 against."""
        return -1 if self.net.lane_direction(self.key(road, lane, s)) is Direction.BACKWARD else 1

    def locate(self, x: float, y: float, heading: float | None = None) -> Located:
        """The lane coordinate of a world point (travel direction from `heading`, else the lane's driving direction)."""
        rc = self.net.locate(x, y, heading)
        if rc is None or rc.lane is None or rc.distance_m > 1e-3:
            return Located(None, 0.0 if rc is None else rc.t)
        lane = rc.lane.lane
        offset = rc.t - self.centre_t(rc.road, lane, rc.s)
        if heading is None:
            sdir = self.driving_sdir(rc.road, lane, rc.s)
        else:
            sdir = 1 if math.cos(heading - self.road_heading(rc.road, rc.s)) >= 0 else -1
        return Located(LaneCoord(rc.road, lane, rc.s, offset, sdir), rc.t)

    def lane_at(self, road: str, s: float, t: float) -> int | None:
        """The id of the lane holding road point (s, t), or None outside every lane."""
        ev = self.net.road(road)
        section = int(ev.section_index(np.array([s]))[0])
        borders = ev.borders(section, np.array([s]))
        for lane_id, outer in borders.items():
            if lane_id == 0:
                continue
            inner = borders[lane_id - 1 if lane_id > 0 else lane_id + 1]
            lo, hi = sorted((float(inner[0]), float(outer[0])))
            if lo - 1e-9 <= t <= hi + 1e-9 and hi - lo > 1e-6:
                return lane_id
        return None

    def stretch(self, c: LaneCoord) -> float:
        """Metres of the entity's line per metre of road s at `c` (>= 0.05)."""
        ev = self.net.road(c.road)
        eps = 0.05
        lo, hi = max(c.s - eps, 0.0), min(c.s + eps, ev.length)
        if hi - lo < 1e-9:
            return 1.0
        t = self.net.lane_centre_t(c.road, c.lane, np.array([lo, hi])) + c.offset
        pts = ev.points(np.array([lo, hi]), t)
        return max(float(np.linalg.norm(pts[1, :2] - pts[0, :2])) / (hi - lo), 0.05)

    # ---- motion ------------------------------------------------------------------------------
    def advance(self, c: LaneCoord, distance: float, route: list[str] | None = None, actual: bool = True) -> tuple[LaneCoord, bool]:
        """Move `distance` metres along the entity's line in its travel direction (negative: backwards).

        Args:
            c: where it is.
            distance: how far.
            route: road ids of an assigned route, in order (junction choices follow it).
            actual: the distance is on the entity's line (False: in road s, as relative positions' ds).

        Returns:
            (the new coordinate, True when the road ended before the distance was covered).
        """
        remaining = abs(distance)
        sign = 1 if distance >= 0 else -1
        for _ in range(MAX_LINKS_PER_MOVE):
            ev = self.net.road(c.road)
            sec = ev.road.sections[int(ev.section_index(np.array([c.s]))[0])]
            step_dir = c.sdir * sign
            bound = sec.end_s if step_dir > 0 else sec.s
            if step_dir > 0 and sec.end_s >= ev.length - 1e-9:
                bound = ev.length
            stretch = self.stretch(c) if actual else 1.0
            ds = remaining / stretch
            room = (bound - c.s) * step_dir
            if ds <= room + 1e-12:
                return replace(c, s=c.s + step_dir * ds), False
            remaining -= max(room, 0.0) * stretch
            nxt = self._next_lane(c, sign, route)
            if nxt is None:
                return replace(c, s=bound), True
            c = nxt
        return c, True

    def _next_lane(self, c: LaneCoord, sign: int, route: list[str] | None) -> LaneCoord | None:
        """The lane entered past the end of `c`'s lane section in the direction of motion."""
        key = self.key(c.road, c.lane, c.s)
        along_driving = (c.sdir * sign) == self.driving_sdir(c.road, c.lane, c.s)
        if self.net.lane_direction(key) is Direction.BOTH:
            links = self.net.successors(key) + self.net.predecessors(key)
        else:
            links = self.net.successors(key) if along_driving else self.net.predecessors(key)
        here = self.net.lane_pose(c.road, c.lane, c.s, c.offset)
        travel = here.heading + (math.pi if c.sdir * sign < 0 else 0.0)
        best: tuple[float, LaneCoord] | None = None
        for k in links:
            if k.road == c.road and k.section == key.section:
                continue
            ev = self.net.road(k.road)
            sec = ev.road.sections[k.section]
            ends = [(sec.s, 1), (min(sec.end_s, ev.length), -1)]
            pts = [self.net.lane_pose(k.road, k.lane, min(max(s, 0.0), ev.length), 0.0) for s, _ in ends]
            j = int(np.argmin([math.hypot(p.x - here.x, p.y - here.y) for p in pts]))
            s_in, sdir_in = ends[j]
            pose_in = pts[j]
            heading_in = pose_in.heading + (math.pi if sdir_in < 0 else 0.0)
            score = abs(wrap(heading_in - travel))
            if route and k.road in route:
                score -= 10.0
            if best is None or score < best[0]:
                new_sdir = sdir_in * sign
                best = (score, LaneCoord(k.road, k.lane, s_in, c.offset * c.sdir * new_sdir, new_sdir))
        return None if best is None else best[1]

    # ---- relations ---------------------------------------------------------------------------
    @staticmethod
    def relative_lane(lane: int, d_lane: int) -> int:
        """The lane `d_lane` lanes from `lane` towards +t (centre lane 0 skipped)."""
        out = lane + d_lane
        if out == 0 or (out > 0) != (lane > 0):
            out += 1 if d_lane > 0 else -1
        return out

    def road_distance(self, a: LaneCoord, b_road: str, b_s: float) -> float | None:
        """Distance along roads from `a` to road s `b_s` on `b_road`, positive ahead of `a`'s travel
        direction (None when the roads are not connected within `ROAD_SEARCH_M`)."""
        if a.road == b_road:
            return (b_s - a.s) * a.sdir
        best: float | None = None
        for direction in (1, -1):
            d = self._search(a, b_road, b_s, direction)
            if d is not None and (best is None or abs(d) < abs(best)):
                best = d
        return best

    def _search(self, a: LaneCoord, b_road: str, b_s: float, direction: int) -> float | None:
        """Dijkstra over road links from `a`'s road end in `direction` (relative to `a`'s travel)."""
        start_dir = a.sdir * direction
        ev = self.net.road(a.road)
        first = (ev.length - a.s) if start_dir > 0 else a.s
        heap: list[tuple[float, str, int]] = [(first, a.road, start_dir)]
        seen: set[tuple[str, int]] = set()
        while heap:
            dist, road, sdir = heapq.heappop(heap)
            if dist > ROAD_SEARCH_M or (road, sdir) in seen:
                continue
            seen.add((road, sdir))
            link = self.net.roads[road].successor if sdir > 0 else self.net.roads[road].predecessor
            for nxt_road, enters_at_start in self._linked_roads(road, link):
                length = self.net.road(nxt_road).length
                if nxt_road == b_road:
                    return direction * (dist + (b_s if enters_at_start else length - b_s))
                heapq.heappush(heap, (dist + length, nxt_road, 1 if enters_at_start else -1))
        return None

    def _linked_roads(self, road: str, link: object) -> list[tuple[str, bool]]:
        from avsim.maps.opendrive.model import ContactPoint, LinkType, RoadLink

        if not isinstance(link, RoadLink):
            return []
        if link.element_type is LinkType.ROAD:
            return [(link.element_id, link.contact_point is not ContactPoint.END)] if link.element_id in self.net.roads else []
        junction = self.net.junctions.get(link.element_id)
        if junction is None:
            return []
        return [(c.connecting_road, c.contact_point is ContactPoint.START) for c in junction.connections
                if c.incoming_road == road and c.connecting_road in self.net.roads]  # fmt: skip
