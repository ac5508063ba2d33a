"""The road network as queries: road and lane coordinates to world poses, world points to lanes,
lane successors in the driving direction (through lane sections, road links and junctions).

This is the API OpenSCENARIO positions are built on:

- `RoadNetwork.road_pose(road, s, t)` -- a RoadPosition;
- `RoadNetwork.lane_pose(road, lane, s, offset)` -- a LanePosition (offset: metres left of the
  lane centre, in the road's t direction);
- `RoadNetwork.locate(x, y)` -- the road, lane, s and t under a world point;
- `RoadNetwork.lane_change_offset(road, s, from_lane, to_lane)` -- the lateral distance between
  two lane centres (a lane change's target offset);
- `RoadNetwork.successors(key)` / `predecessors(key)` -- the lane graph.

Lanes are named by `LaneKey(road, section, lane)`; `LaneKey.name` ("road:section:lane") is the
lane id avsim maps carry.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.spatial import cKDTree

from avsim.core.errors import AvsimValueError
from avsim.core.typing import NDArrayFloat
from avsim.maps.opendrive.model import (
    ContactPoint,
    Direction,
    Junction,
    LinkType,
    OpenDriveFile,
    Road,
    RoadLink,
    Signal,
)
from avsim.maps.opendrive.parse import read_opendrive
from avsim.maps.opendrive.road import RoadEval

LOCATE_STEP_M = 1.0  # reference lines are sampled this finely for the nearest-road search


@dataclass(frozen=True, order=True)
class LaneKey:
    """A lane of a lane section of a road."""

    road: str
    section: int
    lane: int

    @property
    def name(self) -> str:
        """The avsim lane id, ``road:section:lane``."""
        return f"{self.road}:{self.section}:{self.lane}"


@dataclass(frozen=True)
class Pose:
    """A world pose: position (x, y, z) and heading, pitch, roll (rad)."""

    x: float
    y: float
    z: float
    heading: float
    pitch: float = 0.0
    roll: float = 0.0


@dataclass(frozen=True)
class RoadCoordinate:
    """Where a world point lies on the network: road, s, t, and the lane (section, id) holding it
    (lane None when it is outside every lane of the road); `distance_m` from the point to (s, t)."""

    road: str
    s: float
    t: float
    lane: LaneKey | None
    distance_m: float


class RoadNetwork:
    """A parsed OpenDRIVE file with its roads evaluated (see the module docstring).

    Args:
        odr: the parsed file (`read_opendrive`).
    """

    def __init__(self, odr: OpenDriveFile) -> None:
        self.file = odr
        self.roads: dict[str, Road] = odr.roads
        self.junctions: dict[str, Junction] = odr.junctions
        self.evals: dict[str, RoadEval] = {rid: RoadEval(road) for rid, road in odr.roads.items()}

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> RoadNetwork:
        """Read and evaluate an .xodr file.

        Args:
            path: the file.

        Returns:
            The network.
        """
        return cls(read_opendrive(path))

    def road(self, road_id: str) -> RoadEval:
        """The evaluated road `road_id` (AvsimValueError when there is none)."""
        try:
            return self.evals[str(road_id)]
        except KeyError:
            raise AvsimValueError(f"road {road_id!r}: no such road in the network") from None

    @cached_property
    def signals_by_id(self) -> dict[str, Signal]:
        """Every `<signal>` (not the references) by id; the first of a repeated id wins."""
        out: dict[str, Signal] = {}
        for road in self.roads.values():
            for sig in road.signals:
                if sig.reference_of is None:
                    out.setdefault(sig.id, sig)
        return out

    # ---- positions -------------------------------------------------------------------------
    def road_pose(self, road_id: str, s: float, t: float = 0.0, h: float = 0.0) -> Pose:
        """The world pose at road coordinates (a RoadPosition): heading, pitch and roll of the road frame."""
        ev = self.road(road_id)
        frame = ev.frame(np.array([s]))
        p = frame.point(np.array([t]), np.array([h]))[0]
        e_s, e_t = frame.e_s[0], frame.e_t[0]
        return Pose(float(p[0]), float(p[1]), float(p[2]), float(np.arctan2(e_s[1], e_s[0])),
                    float(-np.arcsin(np.clip(e_s[2], -1, 1))), float(np.arcsin(np.clip(e_t[2], -1, 1))))  # fmt: skip

    def lane_centre_t(self, road_id: str, lane_id: int, s: NDArrayFloat | float) -> NDArrayFloat:
        """t (N,) of a lane's centre at road s (the section at each s)."""
        ev = self.road(road_id)
        s = np.atleast_1d(np.asarray(s, np.float64))
        out = np.full(s.shape, np.nan)
        idx = ev.section_index(s)
        for k in np.unique(idx):
            sel = idx == k
            if ev.road.sections[k].lane(lane_id) is None:
                raise AvsimValueError(f"road {road_id!r}: lane {lane_id} does not exist at s={float(s[sel][0]):.3f}")
            inner, outer = ev.lane_t(int(k), lane_id, s[sel])
            out[sel] = (inner + outer) / 2
        return out

    def lane_width(self, road_id: str, lane_id: int, s: NDArrayFloat | float) -> NDArrayFloat:
        """Width (N,) of a lane at road s."""
        ev = self.road(road_id)
        s = np.atleast_1d(np.asarray(s, np.float64))
        out = np.zeros(s.shape)
        idx = ev.section_index(s)
        for k in np.unique(idx):
            sel = idx == k
            inner, outer = ev.lane_t(int(k), lane_id, s[sel])
            out[sel] = np.abs(outer - inner)
        return out

    def lane_pose(self, road_id: str, lane_id: int, s: float, offset: float = 0.0, h: float = 0.0) -> Pose:
        """The world pose on a lane (a LanePosition): `offset` metres from the lane centre towards
        +t; heading along the lane centre's tangent in the +s direction (add pi for a lane driven
        backwards: `lane_direction`)."""
        ev = self.road(road_id)
        t = float(self.lane_centre_t(road_id, lane_id, s)[0]) + offset
        pose = self.road_pose(road_id, s, t, h)
        eps = 1e-3
        lo, hi = max(s - eps, 0.0), min(s + eps, ev.length)
        if hi > lo:
            a = ev.points(np.array([lo]), self.lane_centre_t(road_id, lane_id, lo) + offset)[0]
            b = ev.points(np.array([hi]), self.lane_centre_t(road_id, lane_id, hi) + offset)[0]
            heading = float(np.arctan2(b[1] - a[1], b[0] - a[0]))
            return Pose(pose.x, pose.y, pose.z, heading, pose.pitch, pose.roll)
        return pose

    def lane_change_offset(self, road_id: str, s: float, from_lane: int, to_lane: int) -> float:
        """t of `to_lane`'s centre minus t of `from_lane`'s centre at road s (metres, +t = left of +s)."""
        return float(self.lane_centre_t(road_id, to_lane, s)[0] - self.lane_centre_t(road_id, from_lane, s)[0])

    def lane_direction(self, key: LaneKey) -> Direction:
        """Which way a lane is driven relative to its road's reference line."""
        return self.road(key.road).lane_direction(key.section, key.lane)

    # ---- world -> road ---------------------------------------------------------------------
    @cached_property
    def _samples(self) -> tuple[cKDTree, np.ndarray, np.ndarray, float]:
        xy, road_index, s_all = [], [], []
        ids = list(self.evals)
        reach = 0.0
        for k, rid in enumerate(ids):
            ev = self.evals[rid]
            s = np.linspace(0.0, ev.length, max(int(np.ceil(ev.length / LOCATE_STEP_M)), 1) + 1)
            x, y, _ = ev.ref.xy_hdg(s)
            xy.append(np.stack([x, y], 1))
            road_index.append(np.full(len(s), k))
            s_all.append(s)
            for j, sec in enumerate(ev.road.sections):
                b = ev.borders(j, np.linspace(sec.s, sec.end_s, 5))
                reach = max(reach, *(float(np.abs(v).max()) for v in b.values()))
        return cKDTree(np.concatenate(xy)), np.concatenate(road_index), np.concatenate(s_all), reach

    def _project(self, ev: RoadEval, x: float, y: float, s0: float) -> tuple[float, float, float]:
        """Foot of the point on a reference line near s0: (s, t, planar distance)."""
        s = s0
        for _ in range(20):
            px, py, hdg = ev.ref.xy_hdg(np.array([s]))
            d = np.array([x - px[0], y - py[0]])
            tangent = np.array([np.cos(hdg[0]), np.sin(hdg[0])])
            step = float(d @ tangent)
            s_new = float(np.clip(s + step, 0.0, ev.length))
            if abs(s_new - s) < 1e-9:
                break
            s = s_new
        px, py, hdg = ev.ref.xy_hdg(np.array([s]))
        d = np.array([x - px[0], y - py[0]])
        t = float(-d[0] * np.sin(hdg[0]) + d[1] * np.cos(hdg[0]))
        along = float(d[0] * np.cos(hdg[0]) + d[1] * np.sin(hdg[0]))
        if abs(along) < 1e-6:  # inside the road's s range: solve xy(s, t) = (x, y) with the road's 3-D frame
            s, t = self._refine(ev, x, y, s, t)
        return s, t, abs(along)

    @staticmethod
    def _refine(ev: RoadEval, x: float, y: float, s: float, t: float) -> tuple[float, float]:
        """Newton steps on (s, t) so that the planar position of road point (s, t, 0) is (x, y)."""
        eps = 1e-6
        for _ in range(8):
            ss = np.clip(np.array([s, s + eps, s]), 0.0, ev.length)
            p = ev.points(ss, np.array([t, t, t + eps]))[:, :2]
            jac = np.stack([(p[1] - p[0]) / max(ss[1] - ss[0], 1e-12), (p[2] - p[0]) / eps], axis=1)
            try:
                step = np.linalg.solve(jac, np.array([x, y]) - p[0])
            except np.linalg.LinAlgError:
                break
            s, t = float(np.clip(s + step[0], 0.0, ev.length)), t + float(step[1])
            if np.abs(step).max() < 1e-10:
                break
        return s, t

    def locate(self, x: float, y: float, heading: float | None = None) -> RoadCoordinate | None:
        """The road coordinate and lane under a world point: (s, t) whose road point (s, t, 0) has the
        point's x, y (elevation and superelevation included; h is the height above it).

        Candidate roads are those with a reference-line sample within their lanes' reach; the
        answer is a lane that holds the point, preferring (with `heading`) the lane whose driving
        direction is nearest that heading, else the nearest lane centre. None when no road is near.
        """
        tree, road_index, s_all, reach = self._samples
        ids = list(self.evals)
        hits = tree.query_ball_point([x, y], reach + LOCATE_STEP_M)
        best: tuple[float, RoadCoordinate] | None = None
        for k in np.unique(road_index[hits]) if hits else []:
            ev = self.evals[ids[int(k)]]
            mine = [h for h in hits if road_index[h] == k]
            s0 = float(s_all[mine][np.argmin(np.hypot(*(tree.data[mine] - [x, y]).T))])
            s, t, along = self._project(ev, x, y, s0)
            lane, score = self._lane_at(ev, s, t, heading)
            coord = RoadCoordinate(ev.road.id, s, t, lane, float(np.hypot(along, 0.0)))
            score += along * 10.0  # off the end of the road: a worse candidate
            if best is None or score < best[0]:
                best = (score, coord)
        return None if best is None else best[1]

    def _lane_at(self, ev: RoadEval, s: float, t: float, heading: float | None) -> tuple[LaneKey | None, float]:
        section = int(ev.section_index(np.array([s]))[0])
        borders = ev.borders(section, np.array([s]))
        for lane_id, outer in borders.items():
            if lane_id == 0:
                continue
            inner = borders[lane_id - 1 if lane_id > 0 else lane_id + 1]
            lo, hi = sorted((float(inner[0]), float(outer[0])))
            if lo - 1e-9 <= t <= hi + 1e-9 and hi - lo > 1e-6:
                key = LaneKey(ev.road.id, section, lane_id)
                score = abs(t - (lo + hi) / 2)
                if heading is not None:
                    road_h = float(ev.heading(np.array([s]))[0])
                    direction = ev.lane_direction(section, lane_id)
                    lane_h = road_h + (np.pi if direction is Direction.BACKWARD else 0.0)
                    score += 100.0 * (1 - np.cos(heading - lane_h)) * (direction is not Direction.BOTH)
                return key, score
        return None, 1e6 + abs(t)

    # ---- lane graph ------------------------------------------------------------------------
    def lane_keys(self) -> list[LaneKey]:
        """Every non-centre lane of every section, in file order."""
        return [LaneKey(rid, k, lane.id) for rid, road in self.roads.items() for k, sec in enumerate(road.sections)
                for lane in sec.lanes if lane.id != 0]  # fmt: skip

    def successors(self, key: LaneKey) -> list[LaneKey]:
        """The lanes a vehicle enters from `key` when it leaves it in its driving direction
        (both directions for a lane driven both ways)."""
        direction = self.lane_direction(key)
        out: list[LaneKey] = []
        if direction in (Direction.FORWARD, Direction.BOTH):
            out += self._across(key, forward=True)
        if direction in (Direction.BACKWARD, Direction.BOTH):
            out += self._across(key, forward=False)
        return sorted(set(out))

    def predecessors(self, key: LaneKey) -> list[LaneKey]:
        """The lanes whose successors include `key`."""
        return sorted(k for k in self._predecessor_index.get(key, ()))

    @cached_property
    def _predecessor_index(self) -> dict[LaneKey, set[LaneKey]]:
        index: dict[LaneKey, set[LaneKey]] = {}
        for key in self.lane_keys():
            for nxt in self.successors(key):
                index.setdefault(nxt, set()).add(key)
        return index

    def _across(self, key: LaneKey, forward: bool) -> list[LaneKey]:
        """Lanes linked at the end of `key` that lies in the +s (forward) or -s direction."""
        road = self.roads[key.road]
        sec = road.sections[key.section]
        lane = sec.lane(key.lane)
        if lane is None:
            return []
        linked = lane.successors if forward else lane.predecessors
        nxt_section = key.section + (1 if forward else -1)
        if 0 <= nxt_section < len(road.sections):
            ids = linked or ((key.lane,) if road.sections[nxt_section].lane(key.lane) is not None else ())
            return [LaneKey(road.id, nxt_section, i) for i in ids if road.sections[nxt_section].lane(i) is not None]
        link = road.successor if forward else road.predecessor
        if link is None:
            return []
        if link.element_type is LinkType.ROAD:
            return self._into_road(link, linked or (key.lane,))
        junction = self.junctions.get(link.element_id)
        if junction is None:
            return []
        out = []
        for conn in junction.connections:
            if conn.incoming_road != road.id or conn.connecting_road not in self.roads:
                continue
            target = RoadLink(LinkType.ROAD, conn.connecting_road, conn.contact_point)
            out += self._into_road(target, tuple(ll.to_lane for ll in conn.lane_links if ll.from_lane == key.lane))
        return out

    def _into_road(self, link: RoadLink, lane_ids: tuple[int, ...]) -> list[LaneKey]:
        road = self.roads.get(link.element_id)
        if road is None:
            return []
        section = 0 if link.contact_point in (ContactPoint.START, None) else len(road.sections) - 1
        return [LaneKey(road.id, section, i) for i in lane_ids if i != 0 and road.sections[section].lane(i) is not None]
