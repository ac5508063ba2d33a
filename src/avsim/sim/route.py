"""The ego's route: the lanes the logged ego drives through and the centre line along them.

NAVSIM scores progress along a centre line built from the scenario's route (its metric cache's
`centerline`, `route_lane_ids`); avsim's scenarios carry no route, so it is read from the log:
the logged ego's poses are matched onto lanes as NAVSIM's `extract_centerline_for_agent` does for
traffic agents (start on the lane nearest in heading, then at each pose the nearest of the current
lane and its successors; where none of them is within `MATCH_LATERAL_M` and `MATCH_HEADING_RAD` of
the pose, a map without that link, the lane nearest in heading anywhere), the lane sequence is extended past the log by the straightest
successors (`EXTEND_M`), and the centre line is the chained centre lines of those lanes. Where the
map has no lane under the logged ego, the route is the logged path itself (no route lanes).

The on-route lane set (NAVSIM's `route_lane_ids`, nuPlan's roadblocks) adds to the route lanes
the lanes running beside them in the same direction (corridors within `NEIGHBOUR_GAP_M`, headings
within `SAME_DIRECTION_DEG`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import shapely
from scipy.spatial import cKDTree

from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt
from avsim.maps.road import RoadModel

EXTEND_M = 200.0
MATCH_LATERAL_M = 2.5
MATCH_HEADING_RAD = np.deg2rad(60.0)
NEIGHBOUR_GAP_M = 2.0
SAME_DIRECTION_DEG = 30.0


@dataclass(frozen=True, eq=False)
class Path:
    """A polyline with arc length: xy (P, 2), s_m (P,) from 0, yaw (P,) per vertex (segment heading)."""

    xy: NDArrayFloat
    s_m: NDArrayFloat
    yaw: NDArrayFloat

    @classmethod
    def of(cls, xy: NDArrayFloat) -> Path:
        """A path through points (n, 2) (consecutive duplicates dropped; n >= 2 distinct points).

        Args:
            xy: (n, 2) points.

        Returns:
            The path.
        """
        p = np.asarray(xy, np.float64)[:, :2]
        keep = np.r_[True, np.linalg.norm(np.diff(p, axis=0), axis=1) > 1e-6]
        p = p[keep]
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


def match_lanes(road: RoadModel, xy: NDArrayFloat, yaw: NDArrayFloat) -> list[int]:
    """The lane sequence of a driven path (see the module docstring).

    Args:
        road: the road graph.
        xy: (T, 2) positions (box centres).
        yaw: (T,) headings.

    Returns:
        Lane indices in order, without repeats (empty when the path starts on no lane).
    """
    first, _ = road.nearest_lanes(xy[:1], yaw[:1], MATCH_LATERAL_M, MATCH_HEADING_RAD)
    if first[0] < 0:
        return []
    lanes = [int(first[0])]
    points = shapely.points(xy)
    centres = road.centre_lines
    for t in range(1, len(xy)):
        current = lanes[-1]
        candidates = [current, *road.successors[current]]
        dist = shapely.distance(centres[candidates], points[t])
        s_near = shapely.line_locate_point(centres[candidates], points[t])
        tangent = _tangent(road, np.asarray(candidates), s_near)
        turn = np.abs(np.arctan2(np.sin(tangent - yaw[t]), np.cos(tangent - yaw[t])))
        pick = int(np.lexsort((turn, np.round(dist, 1)))[0])
        best = candidates[pick]
        if dist[pick] > MATCH_LATERAL_M or turn[pick] > MATCH_HEADING_RAD:
            # off every lane the graph leads to (a missing link): match this pose afresh
            found, _ = road.nearest_lanes(xy[t : t + 1], yaw[t : t + 1], MATCH_LATERAL_M, MATCH_HEADING_RAD)
            best = int(found[0]) if found[0] >= 0 else current
        if best != current and best not in lanes[-3:]:
            lanes.append(best)
    return lanes


def _tangent(road: RoadModel, lanes: NDArrayInt, s_m: NDArrayFloat) -> NDArrayFloat:
    """Lane heading (n,) at arc lengths along lanes."""
    _, yaw = road.samples.pose_at(lanes, np.asarray(s_m, np.float64))
    return yaw


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
        road: the road graph.
        xy: (T, 2) logged box centres.
        yaw: (T,) logged headings.

    Returns:
        The route.
    """
    lanes = match_lanes(road, xy, yaw) if road.n_lanes else []
    on_route = np.zeros(road.n_lanes, bool)
    if not lanes:
        return Route(np.zeros(0, np.int64), Path.of(xy), on_route)
    lanes = extend(road, lanes, EXTEND_M)
    s = road.samples
    chain = np.concatenate([s.xy[s.start[k] : s.start[k + 1]] for k in lanes])
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
