"""The lane graph: successors and predecessors, lane conflicts, intersection lanes and junctions.

avsim's map contract has lanes but no lane graph and no intersection polygons; they are derived
here from the lanes' geometry (`avsim.maps.lane_geometry.LaneGeometry`):

- successors: the named ones where the source gives them (`named`, {lane id: [lane id, ...]},
  the scenario's `metadata['lane_successors']`), else the lanes whose centre line starts within
  `JOIN_TOL_M` of a lane's end;
- corridors: each centre line buffered by `CORRIDOR_HALF_WIDTH_M` (a car's half width, the band
  nuPlan's IDM agents check along their path); two lanes that are not each other's successor and
  whose corridors overlap *conflict* over an arc-length interval on each (crossings, merges,
  diverges);
- intersection lanes: lanes with a crossing conflict (at more than `CROSSING_DEG` degrees);
  *junctions*, the groups of intersection lanes that cross one another (connected components).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import shapely
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt, NDArrayObject
from avsim.maps.lane_geometry import SAMPLE_STEP_M, LaneGeometry

JOIN_TOL_M = 1.0
JUNCTION_SPAN_M = 15.0  # how far along a lane beyond its crossings its junction reaches
CORRIDOR_HALF_WIDTH_M = 1.0
CROSSING_DEG = 30.0
MIN_CONFLICT_AREA_M2 = 0.05


def geometric_successors(centres: list[NDArrayFloat], join_tol_m: float = JOIN_TOL_M) -> list[list[int]]:
    """For each lane, the lanes whose centre line starts within `join_tol_m` of its end (sorted).

    Args:
        centres: the lanes' centre lines, each (n, 2+).
        join_tol_m: how near a start must be to an end.

    Returns:
        Successor indices per lane.
    """
    n = len(centres)
    valid = np.array([len(c) >= 2 for c in centres], bool)
    starts = np.array([np.asarray(c)[0, :2] if len(c) else (np.nan, np.nan) for c in centres], np.float64).reshape(-1, 2)
    ends = np.array([np.asarray(c)[-1, :2] if len(c) else (np.nan, np.nan) for c in centres], np.float64).reshape(-1, 2)
    out: list[list[int]] = [[] for _ in range(n)]
    ok = np.flatnonzero(valid)
    if not len(ok):
        return out
    tree = cKDTree(starts[ok])
    for k, near in zip(np.flatnonzero(np.isfinite(ends[:, 0])).tolist(), tree.query_ball_point(ends[np.isfinite(ends[:, 0])], join_tol_m)):
        out[k] = sorted(int(ok[j]) for j in near if int(ok[j]) != k)
    return out


@dataclass(frozen=True, eq=False)
class Conflicts:
    """Lane conflicts, padded per lane (K lanes, C slots): on lane a, [s0, s1] conflicts with
    lane `other[a, c]` over [t0, t1] there; cos (K, C) of the angle between the lanes there;
    valid (K, C)."""

    other: NDArrayInt
    s0: NDArrayFloat
    s1: NDArrayFloat
    t0: NDArrayFloat
    t1: NDArrayFloat
    cos: NDArrayFloat
    valid: NDArrayBool


class LaneGraph:
    """The lane graph of a map's lanes (see the module docstring).

    Args:
        lanes: the lane geometry.
        named: {lane id: [successor lane id, ...]} from the source (None: none); a lane it names
            takes exactly those successors, every other lane the geometric ones.
    """

    def __init__(self, lanes: LaneGeometry, named: dict[str, Any] | None = None) -> None:
        self.lanes = lanes
        self.n_lanes = lanes.n_lanes
        self.successors = self._successors(named if isinstance(named, dict) else {})
        self.predecessors: list[list[int]] = [[] for _ in range(self.n_lanes)]
        for k, succ in enumerate(self.successors):
            for j in succ:
                self.predecessors[j].append(k)

    def _successors(self, named: dict[str, Any]) -> list[list[int]]:
        s = self.lanes.samples
        geometric = geometric_successors([s.lane_xy(k) for k in range(self.n_lanes)], JOIN_TOL_M)
        index = self.lanes.index
        out = []
        for k in range(self.n_lanes):
            lid = str(self.lanes.ids[k])
            if lid in named:
                out.append(sorted({index[str(x)] for x in (named[lid] or []) if str(x) in index} - {k}))
            else:
                out.append([j for j in geometric[k] if s.length_m[j] > 0])
        return out

    # ------------------------------------------------------------------ conflicts and junctions
    @cached_property
    def corridors(self) -> NDArrayObject:
        """(K,) each resampled centre line buffered by `CORRIDOR_HALF_WIDTH_M` (flat caps)."""
        return np.array([shapely.buffer(g, CORRIDOR_HALF_WIDTH_M, cap_style="flat") for g in self.lanes.sample_lines], dtype=object)

    @cached_property
    def _conflicts_and_crossing(self) -> tuple[Conflicts, NDArrayBool]:
        k = self.n_lanes
        rows: list[list[tuple[int, float, float, float, float, float]]] = [[] for _ in range(k)]
        crossing = np.zeros(k, bool)
        if k:
            corridors = self.corridors
            a_idx, b_idx = shapely.STRtree(corridors).query(corridors, predicate="intersects")
            for a, b in zip(a_idx.tolist(), b_idx.tolist()):
                if a == b or b in self.successors[a] or a in self.successors[b]:
                    continue
                overlap = shapely.intersection(corridors[a], corridors[b])
                if overlap.area < MIN_CONFLICT_AREA_M2:
                    continue
                sa, ya = self._interval(a, overlap)
                sb, yb = self._interval(b, overlap)
                cos = float(np.cos(ya - yb))
                rows[a].append((b, sa[0], sa[1], sb[0], sb[1], cos))
                if cos < np.cos(np.deg2rad(CROSSING_DEG)):
                    crossing[a] = True
        width = max((len(r) for r in rows), default=0)
        arr = np.zeros((k, width, 6))
        valid = np.zeros((k, width), bool)
        for a, r in enumerate(rows):
            if r:
                arr[a, : len(r)] = r
                valid[a, : len(r)] = True
        return Conflicts(arr[..., 0].astype(np.int64), arr[..., 1], arr[..., 2], arr[..., 3], arr[..., 4], arr[..., 5], valid), crossing

    @property
    def conflicts(self) -> Conflicts:
        """Every lane's conflicts (see the module docstring)."""
        return self._conflicts_and_crossing[0]

    @property
    def is_intersection_lane(self) -> NDArrayBool:
        """(K,) lanes with a crossing conflict."""
        return self._conflicts_and_crossing[1]

    @cached_property
    def junctions(self) -> list[NDArrayInt]:
        """Groups of intersection lanes that cross one another (each sorted)."""
        lanes = np.flatnonzero(self.is_intersection_lane)
        if not len(lanes):
            return []
        c = self.conflicts
        a = np.repeat(np.arange(self.n_lanes), c.other.shape[1]).reshape(c.other.shape)
        crossing = c.valid & (c.cos < np.cos(np.deg2rad(CROSSING_DEG)))
        graph = coo_matrix((np.ones(int(crossing.sum())), (a[crossing], c.other[crossing])), shape=(self.n_lanes, self.n_lanes))
        _, label = connected_components(graph, directed=False)
        groups: dict[int, list[int]] = {}
        for k in lanes.tolist():
            groups.setdefault(int(label[k]), []).append(k)
        return [np.asarray(sorted(g), np.int64) for _, g in sorted(groups.items(), key=lambda kv: min(kv[1]))]

    @cached_property
    def crossing_spans(self) -> dict[int, tuple[float, float]]:
        """Per intersection lane, the arc-length span [s0, s1] of its crossing conflicts widened by
        `JUNCTION_SPAN_M` (the part of the lane inside its junction: a lane that runs on past it
        is not all junction)."""
        c = self.conflicts
        crossing = c.valid & (c.cos < np.cos(np.deg2rad(CROSSING_DEG)))
        out = {}
        for k in np.flatnonzero(crossing.any(axis=1)).tolist():
            sel = crossing[k]
            out[k] = (float(c.s0[k, sel].min()) - JUNCTION_SPAN_M, float(c.s1[k, sel].max()) + JUNCTION_SPAN_M)
        return out

    def _interval(self, lane: int, region: shapely.Geometry) -> tuple[tuple[float, float], float]:
        """[s0, s1] of a lane's samples within the region's reach of its centre line and the
        lane heading at the middle of it."""
        s = self.lanes.samples
        lo, hi = int(s.start[lane]), int(s.start[lane + 1])
        inside = shapely.contains_xy(shapely.buffer(region, 1e-6), s.xy[lo:hi, 0], s.xy[lo:hi, 1])
        dist = shapely.distance(region, shapely.points(s.xy[lo:hi]))
        near = inside | (dist <= CORRIDOR_HALF_WIDTH_M + 1e-6)
        idx = np.flatnonzero(near) if near.any() else np.array([int(np.argmin(dist))])
        s0, s1 = float(s.s_m[lo + idx[0]]), float(s.s_m[lo + idx[-1]])
        mid = lo + idx[len(idx) // 2]
        return (s0, s1), float(s.yaw[mid])

    # ------------------------------------------------------------------ queries
    def nearest_lanes(self, xy: NDArrayFloat, yaw: NDArrayFloat, max_lateral_m: float, max_heading_rad: float) -> tuple[NDArrayInt, NDArrayFloat]:
        """For each point, the lane whose centre line passes nearest within `max_lateral_m`, running
        within `max_heading_rad` of `yaw` (nuPlan's `get_starting_segment`: closest heading among
        the lanes that hold the point).

        Args:
            xy: (n, 2) points.
            yaw: (n,) headings.
            max_lateral_m: farthest centre line counted.
            max_heading_rad: largest heading difference.

        Returns:
            (lane (n,) index or -1, s_m (n,) arc length along it).
        """
        n = len(xy)
        s = self.lanes.samples
        lane, s_out = np.full(n, -1, np.int64), np.zeros(n)
        if not n or not len(s.xy):
            return lane, s_out
        hits = s.tree.query_ball_point(xy, max_lateral_m + SAMPLE_STEP_M)
        for i, cand in enumerate(hits):
            if not cand:
                continue
            c = np.asarray(cand)
            dyaw = np.abs(np.arctan2(np.sin(s.yaw[c] - yaw[i]), np.cos(s.yaw[c] - yaw[i])))
            ok = dyaw <= max_heading_rad
            if not ok.any():
                continue
            c, dyaw = c[ok], dyaw[ok]
            dist = np.linalg.norm(s.xy[c] - xy[i], axis=1)
            best = int(np.lexsort((dist, np.round(dyaw, 2)))[0])
            lane[i] = int(s.lane[c[best]])
            s_out[i] = float(s.s_m[c[best]])
        return lane, s_out

    def straightest(self, options: list[int]) -> int:
        """The option whose centre line starts most nearly straight on (nuPlan: lowest curvature at its start)."""
        s = self.lanes.samples
        turn = []
        for j in options:
            lo, hi = int(s.start[j]), int(s.start[j + 1])
            head = s.yaw[lo : min(lo + 4, hi)]
            turn.append(abs(float(np.arctan2(np.sin(head[-1] - head[0]), np.cos(head[-1] - head[0])))) / max(len(head) - 1, 1))
        return options[int(np.argmin(turn))]

    def turn_rad(self, lane: int) -> float:
        """Heading change (rad, left positive) from the start to the end of a lane's centre line."""
        s = self.lanes.samples
        yaw = s.yaw[s.start[lane] : s.start[lane + 1]]
        if len(yaw) < 2:
            return 0.0
        return float(np.sum(np.arctan2(np.sin(np.diff(yaw)), np.cos(np.diff(yaw)))))
