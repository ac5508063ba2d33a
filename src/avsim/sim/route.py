"""The ego's route: the lanes the logged ego drives through and the centre line along them.

NAVSIM scores progress along a centre line built from the scenario's route (its metric cache's
`centerline`, `route_lane_ids`); avsim's scenarios carry no route, so it is read from the log:
the logged ego's path is map-matched onto the lane graph over its whole length at once
(`avsim.maps.lane_matching`: a hidden Markov model over lane candidates, Viterbi), and the centre
line follows the matched lanes: each lane from where the path entered it to where it left (a
successor chain whole, the lanes it skipped between two poses included), over a lane change the
logged path from `LANE_CHANGE_M` before to `LANE_CHANGE_M` after it, and where the path left the
lanes (a car park, a link the map lacks) the logged path itself; vertices closer than
`MIN_VERTEX_GAP_M` of the last kept one or behind it (where a piece starts behind the previous
one's end) are dropped. Past the log the last lane is
followed to its end and on by the straightest successors for `EXTEND_M`. Where the map has no
lane under the logged ego at all, the route is the logged path (no route lanes).

The on-route lane set (NAVSIM's `route_lane_ids`, nuPlan's roadblocks) adds to the route lanes
the lanes running beside them in the same direction (corridors within `NEIGHBOUR_GAP_M`, headings
within `SAME_DIRECTION_DEG`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import shapely
from scipy.spatial import cKDTree

from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt
from avsim.maps.lane_geometry import SAMPLE_STEP_M
from avsim.maps.lane_matching import LaneMatcher, Move
from avsim.maps.road import RoadModel

EXTEND_M = 200.0
MIN_VERTEX_GAP_M = 0.05
NEIGHBOUR_GAP_M = 2.0
SAME_DIRECTION_DEG = 30.0


def _forward_only(p: NDArrayFloat) -> NDArrayFloat:
    """The polyline without vertices within `MIN_VERTEX_GAP_M` of the last kept one or behind it
    (along the last kept segment's direction): seams where a piece starts behind the previous
    piece's end."""
    if not len(p):
        return p
    keep = [0]
    direction = None
    for i in range(1, len(p)):
        step = p[i] - p[keep[-1]]
        gap = float(np.hypot(step[0], step[1]))
        if gap <= MIN_VERTEX_GAP_M or (direction is not None and float(step @ direction) <= 0.0):
            continue
        direction = step / gap
        keep.append(i)
    return p[keep]


@dataclass(frozen=True, eq=False)
class Path:
    """A polyline with arc length: xy (P, 2), s_m (P,) from 0, yaw (P,) per vertex (segment heading)."""

    xy: NDArrayFloat
    s_m: NDArrayFloat
    yaw: NDArrayFloat

    @classmethod
    def of(cls, xy: NDArrayFloat) -> Path:
        """A path through points (n, 2) (vertices near or behind the last kept one dropped, `_forward_only`).

        Args:
            xy: (n, 2) points.

        Returns:
            The path.
        """
        p = _forward_only(np.asarray(xy, np.float64)[:, :2])
        if len(p) < 2:
            p = np.vstack([p[:1], p[:1] + [1e-3, 0.0]])
        d = np.diff(p, axis=0)
        yaw = np.arctan2(d[:, 1], d[:, 0])
        return cls(p, np.r_[0.0, np.cumsum(np.linalg.norm(d, axis=1))], np.r_[yaw, yaw[-1]])

    @property
    def length_m(self) -> float:
        return float(self.s_m[-1])

    @cached_property
    def line(self) -> shapely.LineString:
        line = shapely.LineString(self.xy)
        shapely.prepare(line)
        return line

    @cached_property
    def tree(self) -> cKDTree:
        return cKDTree(self.xy)

    def locate(self, xy: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
        """Arc length (n,) of the nearest point of the path to each point and the distance (n,) to it.

        The nearest vertex is found first and the point projected onto the segments on either side
        of it (exact where the path does not come back within its vertex spacing of itself, as
        dense centre lines do not).

        Args:
            xy: (n, 2) points.

        Returns:
            (arc length in [0, length], distance).
        """
        p = np.asarray(xy, np.float64).reshape(-1, 2)
        _, i = self.tree.query(p)
        best_s, best_d = np.zeros(len(p)), np.full(len(p), np.inf)
        for lo in (np.maximum(i - 1, 0), np.minimum(i, len(self.xy) - 2)):
            a, b = self.xy[lo], self.xy[lo + 1]
            ab = b - a
            f = np.clip(np.einsum("ij,ij->i", p - a, ab) / np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-24), 0.0, 1.0)
            d = np.linalg.norm(a + f[:, None] * ab - p, axis=1)
            better = d < best_d
            best_d = np.where(better, d, best_d)
            best_s = np.where(better, self.s_m[lo] + f * (self.s_m[lo + 1] - self.s_m[lo]), best_s)
        return best_s, best_d

    def project(self, xy: NDArrayFloat) -> NDArrayFloat:
        """Arc length (n,) of the nearest point of the path to each point (`PDMPath.project`)."""
        return self.locate(xy)[0]

    def distance(self, xy: NDArrayFloat) -> NDArrayFloat:
        """Distance (n,) of each point to the path."""
        return self.locate(xy)[1]

    def pose_at(self, s_m: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
        """Points (n, 2) and headings (n,) at arc lengths (clamped to the path)."""
        s = np.clip(np.asarray(s_m, np.float64), 0.0, self.length_m)
        i = np.clip(np.searchsorted(self.s_m, s, side="right") - 1, 0, len(self.s_m) - 2)
        f = (s - self.s_m[i]) / np.maximum(self.s_m[i + 1] - self.s_m[i], 1e-12)
        return self.xy[i] + f[:, None] * (self.xy[i + 1] - self.xy[i]), self.yaw[i]


@dataclass(frozen=True, eq=False)
class Route:
    """lanes (R,) lane indices in driving order (empty: no lane under the log); centerline: the
    path along them (or the logged path); on_route (K,) bool: NAVSIM's route lane set."""

    lanes: NDArrayInt
    centerline: Path
    on_route: NDArrayBool

    def summary(self, road: RoadModel, xy: NDArrayFloat) -> dict[str, Any]:
        """The route as `sim_metrics.json` reports it, with how a driven path (box centres (T, 2), the
        log) goes along it: lane ids, centre-line length, the path's driven length and its progress
        along the centre line (first to last pose), the largest distance from it."""
        s_m, d_m = self.centerline.locate(xy)
        driven = float(np.linalg.norm(np.diff(xy, axis=0), axis=1).sum()) if len(xy) > 1 else 0.0
        return {"lanes": [str(road.lane_ids[k]) for k in self.lanes.tolist()], "length_m": round(self.centerline.length_m, 3),
                "log_driven_m": round(driven, 3), "log_progress_m": round(float(s_m[-1] - s_m[0]), 3) if len(s_m) else 0.0,
                "log_max_offset_m": round(float(d_m.max()), 3) if len(d_m) else 0.0}  # fmt: skip


def match_route(road: RoadModel, xy: NDArrayFloat, yaw: NDArrayFloat) -> tuple[list[Segment], list[int]]:
    """The pieces of a driven path's route and the lanes it passes (see the module docstring).

    Args:
        road: the road model.
        xy: (T, 2) positions (box centres).
        yaw: (T,) headings.

    Returns:
        (segments in driving order, the route's lanes in order without repeats).
    """
    matched = LaneMatcher(road.graph).match(xy, yaw)
    length = road.samples.length_m
    travel = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(xy, axis=0), axis=1))]
    segments: list[Segment] = []
    for t in range(len(xy)):
        lane, s_t, move = int(matched.lane[t]), float(matched.s_m[t]), int(matched.move[t])
        last = segments[-1] if segments else None
        if lane < 0:  # off the lanes: the logged path
            if last is not None and last.lane < 0:
                last.points.append(xy[t])
            else:
                if last is not None:
                    last.s1 = max(last.s1, float(matched.s_m[t - 1])) if matched.lane[t - 1] == last.lane else last.s1
                segments.append(Segment(-1, 0.0, 0.0, [xy[max(t - 1, 0)], xy[t]]))
            continue
        if last is None:
            segments.append(Segment(lane, 0.0, s_t))
        elif move == Move.SAME and last.lane == lane:
            last.s1 = max(last.s1, s_t)
        elif move == Move.SUCCESSOR:
            last.s1 = float(length[last.lane])
            segments.extend(Segment(k, 0.0, float(length[k])) for k in matched.hops[t])
            segments.append(Segment(lane, 0.0, s_t))
        elif move == Move.LANE_CHANGE:  # the logged path from LANE_CHANGE_M before the change to LANE_CHANGE_M after it
            t0 = int(np.searchsorted(travel, travel[t] - LANE_CHANGE_M, side="right")) - 1
            t1 = min(int(np.searchsorted(travel, travel[t] + LANE_CHANGE_M)), len(xy) - 1)
            t0 = max(t0, 0)
            last.s1 = max(last.s0, _locate(road, last.lane, xy[t0]))
            segments.append(Segment(-1, 0.0, 0.0, list(xy[t0 : t1 + 1])))
            start = _locate(road, lane, xy[t1])
            segments.append(Segment(lane, start, start))
        else:  # a gap: from where the path left the lanes, along the logged path, onto the new lane
            if last.lane >= 0:
                last.s1 = max(last.s1, float(matched.s_m[t - 1]))
                segments.append(Segment(-1, 0.0, 0.0, [xy[t - 1], xy[t]]))
            segments.append(Segment(lane, s_t, s_t))
    lanes = list(dict.fromkeys(seg.lane for seg in segments if seg.lane >= 0))
    return segments, lanes


LANE_CHANGE_M = 8.0


def _locate(road: RoadModel, lane: int, xy: NDArrayFloat) -> float:
    """Arc length of a point's projection onto a lane's resampled centre line."""
    return float(shapely.line_locate_point(road.centre_lines[lane], shapely.Point(xy)))


class Segment:
    """A piece of a route: lane `lane` from arc s0 to s1, or (lane -1) a path through `points`."""

    def __init__(self, lane: int, s0: float, s1: float, points: list[NDArrayFloat] | None = None) -> None:
        self.lane, self.s0, self.s1 = lane, s0, s1
        self.points = points if points is not None else []

    def polyline(self, road: RoadModel) -> NDArrayFloat:
        """(n, 2) the piece's points."""
        if self.lane < 0:  # the logged path, a vertex every SAMPLE_STEP_M of travel (slow driving jitters)
            p = np.asarray(self.points, np.float64).reshape(-1, 2)
            travel = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))]
            marks = np.unique(np.searchsorted(travel, np.arange(0.0, travel[-1], SAMPLE_STEP_M)))
            return p[np.r_[marks, len(p) - 1]]
        s = np.r_[np.arange(self.s0, self.s1, SAMPLE_STEP_M), self.s1]
        xy, _ = road.samples.pose_at(np.full(len(s), self.lane), s)
        return xy


def extend(road: RoadModel, lanes: list[int], length_m: float) -> list[int]:
    """`lanes` followed by straightest successors until they add `length_m` (or the map ends)."""
    out, added = list(lanes), 0.0
    while added < length_m:
        options = [j for j in road.successors[out[-1]] if j not in out]
        if not options:
            break
        out.append(road.straightest(options))
        added += float(road.samples.length_m[out[-1]])
    return out


def build_route(road: RoadModel, xy: NDArrayFloat, yaw: NDArrayFloat) -> Route:
    """The route of a logged ego path (box centres).

    Args:
        road: the road model.
        xy: (T, 2) logged box centres.
        yaw: (T,) logged headings.

    Returns:
        The route.
    """
    segments, lanes = match_route(road, xy, yaw) if road.n_lanes else ([], [])
    on_route = np.zeros(road.n_lanes, bool)
    if not lanes:
        return Route(np.zeros(0, np.int64), Path.of(xy), on_route)
    if segments[-1].lane >= 0:
        segments[-1].s1 = float(road.samples.length_m[segments[-1].lane])
        ahead = extend(road, [segments[-1].lane], EXTEND_M)[1:]
        segments.extend(Segment(k, 0.0, float(road.samples.length_m[k])) for k in ahead)
        lanes = list(dict.fromkeys([*lanes, *ahead]))
    chain = np.concatenate([seg.polyline(road) for seg in segments])
    on_route[lanes] = True
    on_route |= _same_direction_neighbours(road, on_route)
    return Route(np.asarray(lanes, np.int64), Path.of(chain), on_route)


def _same_direction_neighbours(road: RoadModel, on_route: NDArrayBool) -> NDArrayBool:
    """Lanes beside an on-route lane, running the same way (nuPlan's roadblock siblings)."""
    out = np.zeros(road.n_lanes, bool)
    route = np.flatnonzero(on_route)
    polys = road.lane_polygons
    tree = shapely.STRtree(polys)
    heading = _mean_heading(road)
    for r in route.tolist():
        near = tree.query(shapely.buffer(polys[r], NEIGHBOUR_GAP_M), predicate="intersects")
        for k in near.tolist():
            if not on_route[k] and abs(np.arctan2(np.sin(heading[k] - heading[r]), np.cos(heading[k] - heading[r]))) < np.deg2rad(SAME_DIRECTION_DEG):
                out[k] = True
    return out


def _mean_heading(road: RoadModel) -> NDArrayFloat:
    """Heading (K,) from each lane's first to its last sample."""
    s = road.samples
    first, last = s.start[:-1], np.maximum(s.start[1:] - 1, s.start[:-1])
    d = s.xy[last] - s.xy[first]
    return np.arctan2(d[:, 1], d[:, 0])
