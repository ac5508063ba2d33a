"""The road as the simulator reads it: lanes as uniformly sampled centre lines, their successors,
conflicts, traffic-light control, intersections and the drivable area.

avsim's map contract has lanes (left rail, right rail, centre line) but no lane graph, no
intersection polygons and no lane-to-light table; they are derived here, once per scenario:

- successors: `metadata['lane_successors']` where the scenario has it (the sample), else the
  lanes whose centre line starts within `JOIN_TOL_M` of a lane's end (`avsim.edit.routes.successors`);
- corridors: each centre line buffered by `CORRIDOR_HALF_WIDTH_M` (a car's half width, the band
  nuPlan's IDM agents check along their path); two lanes that are not each other's successor and
  whose corridors overlap *conflict* over an arc-length interval on each (crossings, merges,
  diverges);
- intersections: lanes with a crossing conflict (at more than `CROSSING_DEG` degrees); their
  polygons stand for nuPlan's intersection layer;
- light control: `avsim.edit.validate.light_lanes` names the lane a light controls (the lane that
  ends at its stop point); entering its successors is controlled (nuPlan's lane connectors with
  traffic lights) or, for a controlled lane without successors (Waymo: the lane through the
  junction), the lane itself;
- drivable area: the union of the map's drivable areas and the lane polygons.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import shapely
from scipy.spatial import cKDTree

from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt, NDArrayObject
from avsim.edit.routes import successors as geometric_successors
from avsim.edit.rules import LaneGeometry
from avsim.edit.validate import drivable_area, light_lanes
from avsim.scenario import Scenario

SAMPLE_STEP_M = 0.5  # centre lines are resampled at most this far apart
JOIN_TOL_M = 1.0
CORRIDOR_HALF_WIDTH_M = 1.0
CROSSING_DEG = 30.0
MIN_CONFLICT_AREA_M2 = 0.05


@dataclass(frozen=True, eq=False)
class LaneSamples:
    """Every lane's centre line resampled uniformly (K lanes, P samples).

    start (K+1,) sample offsets; length_m, step_m (K,); xy (P, 2); yaw (P,) heading of the
    segment from each sample to the next (the last repeats); s_m (P,) arc length in its lane;
    lane (P,) lane index of each sample.
    """

    start: NDArrayInt
    length_m: NDArrayFloat
    step_m: NDArrayFloat
    xy: NDArrayFloat
    yaw: NDArrayFloat
    s_m: NDArrayFloat
    lane: NDArrayInt

    @classmethod
    def of(cls, centres: list[NDArrayFloat]) -> LaneSamples:
        """Samples of centre lines (each (n, 2+), n >= 2 distinct points; degenerate lanes get one sample).

        Args:
            centres: the lanes' centre lines.

        Returns:
            The samples.
        """
        xs, yaws, ss, lengths, steps, counts = [], [], [], [], [], []
        for pts in centres:
            p = np.asarray(pts, np.float64)[:, :2]
            seg = np.linalg.norm(np.diff(p, axis=0), axis=1) if len(p) > 1 else np.zeros(0)
            keep = np.r_[True, seg > 1e-6] if len(p) else np.zeros(0, bool)
            p = p[keep]
            node_s = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))]
            total = float(node_s[-1])
            n = max(int(np.ceil(total / SAMPLE_STEP_M)), 1) + 1 if total > 0 else 1
            s = np.linspace(0.0, total, n)
            xy = np.stack([np.interp(s, node_s, p[:, 0]), np.interp(s, node_s, p[:, 1])], axis=1) if total > 0 else p[:1]
            d = np.diff(xy, axis=0)
            yaw = np.arctan2(d[:, 1], d[:, 0]) if len(d) else np.zeros(0)
            yaw = np.r_[yaw, yaw[-1] if len(yaw) else 0.0]
            xs.append(xy)
            yaws.append(yaw)
            ss.append(s)
            lengths.append(total)
            steps.append(total / max(n - 1, 1))
            counts.append(len(s))
        start = np.r_[0, np.cumsum(counts)].astype(np.int64)
        return cls(start, np.asarray(lengths), np.asarray(steps), np.concatenate(xs) if xs else np.zeros((0, 2)),
                   np.concatenate(yaws) if yaws else np.zeros(0), np.concatenate(ss) if ss else np.zeros(0),
                   np.repeat(np.arange(len(counts)), counts).astype(np.int64))  # fmt: skip

    def pose_at(self, lane: NDArrayInt, s_m: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
        """Points and headings at arc lengths along lanes (linear beyond either end).

        Args:
            lane: (n,) lane indices.
            s_m: (n,) arc lengths in those lanes.

        Returns:
            (xy (n, 2), yaw (n,)).
        """
        count = self.start[lane + 1] - self.start[lane]
        step = np.maximum(self.step_m[lane], 1e-9)
        k = np.clip(np.floor(s_m / step).astype(np.int64), 0, np.maximum(count - 2, 0))
        i = self.start[lane] + k
        j = np.minimum(i + 1, self.start[lane + 1] - 1)
        frac = np.where(j > i, s_m / step - k, 0.0)
        xy = self.xy[i] + frac[:, None] * (self.xy[j] - self.xy[i])
        beyond = (count < 2) | (frac != frac)
        if beyond.any():  # a one-sample lane: its point
            xy[beyond] = self.xy[i[beyond]]
        return xy, self.yaw[i]

    @cached_property
    def tree(self) -> cKDTree:
        """k-d tree over the sample points."""
        return cKDTree(self.xy if len(self.xy) else np.zeros((0, 2)))


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


def polygonal(geom: shapely.Geometry) -> shapely.Geometry:
    """The areal parts of a geometry as one (Multi)Polygon: a GeometryCollection (what unions of
    repaired polygons can give) has no fast prepared point test."""
    parts = [p for p in shapely.get_parts(shapely.get_parts(geom)) if p.geom_type == "Polygon" and not p.is_empty]
    if not parts:
        return shapely.Polygon()
    merged = shapely.union_all(parts)
    if merged.geom_type in ("Polygon", "MultiPolygon"):
        return merged
    return shapely.MultiPolygon([p for p in shapely.get_parts(merged) if p.geom_type == "Polygon"])


class RoadGraph:
    """The derived road of a scenario (see the module docstring).

    Args:
        scenario: the scenario (its map, lights and metadata).
    """

    def __init__(self, scenario: Scenario) -> None:
        self.geometry = LaneGeometry.of(scenario.map)
        self.lane_ids = self.geometry.ids
        self.lane_polygons = np.array([polygonal(p) for p in self.geometry.polygons], dtype=object)
        centres = [np.asarray(c)[:, :2] for c in scenario.map.lanes.centre]
        self.samples = LaneSamples.of(centres)
        self.n_lanes = len(centres)
        self.successors = self._successors(centres, scenario.metadata.get("lane_successors"))
        self.predecessors: list[list[int]] = [[] for _ in range(self.n_lanes)]
        for k, succ in enumerate(self.successors):
            for j in succ:
                self.predecessors[j].append(k)
        self.corridors = self._corridors()
        self.conflicts, crossing = self._conflicts()
        self.is_intersection_lane = crossing
        self.light_of_lane = self._lit_lanes(scenario)
        limits = scenario.metadata.get("lane_speed_limits_mps") or {}
        self.speed_limit_mps = np.array([float(limits.get(str(i), np.nan)) for i in self.lane_ids], np.float64)
        self.drivable = polygonal(self._drivable(scenario))
        self.intersection = polygonal(shapely.union_all(self.lane_polygons[crossing])) if crossing.any() else shapely.Polygon()
        shapely.prepare(self.drivable)
        shapely.prepare(self.intersection)
        for poly in self.lane_polygons:
            shapely.prepare(poly)
        self.lane_bounds = shapely.bounds(self.lane_polygons).reshape(-1, 4) if self.n_lanes else np.zeros((0, 4))

    # ------------------------------------------------------------------ graph
    def _successors(self, centres: list[NDArrayFloat], named: object) -> list[list[int]]:
        index = {str(lid): k for k, lid in enumerate(self.lane_ids)}
        out = []
        for k in range(self.n_lanes):
            if isinstance(named, dict) and str(self.lane_ids[k]) in named:
                out.append(sorted(index[str(x)] for x in named[str(self.lane_ids[k])] if str(x) in index))
            else:
                out.append([j for j in geometric_successors(centres, k, JOIN_TOL_M) if self.samples.length_m[j] > 0])
        return out

    @cached_property
    def centre_lines(self) -> NDArrayObject:
        """(K,) shapely lines of the resampled centre lines (a point for a one-sample lane)."""
        s = self.samples
        return np.array([shapely.LineString(s.xy[s.start[k]:s.start[k + 1]]) if s.start[k + 1] - s.start[k] > 1
                         else shapely.Point(s.xy[s.start[k]]) for k in range(self.n_lanes)], dtype=object)  # fmt: skip

    def _corridors(self) -> NDArrayObject:
        return np.array([shapely.buffer(g, CORRIDOR_HALF_WIDTH_M, cap_style="flat") for g in self.centre_lines], dtype=object)

    def _conflicts(self) -> tuple[Conflicts, NDArrayBool]:
        """Overlapping corridors of lanes that are not consecutive (see the module docstring)."""
        k = self.n_lanes
        rows: list[list[tuple[int, float, float, float, float, float]]] = [[] for _ in range(k)]
        crossing = np.zeros(k, bool)
        if k:
            tree = shapely.STRtree(self.corridors)
            a_idx, b_idx = tree.query(self.corridors, predicate="intersects")
            for a, b in zip(a_idx.tolist(), b_idx.tolist()):
                if a == b or b in self.successors[a] or a in self.successors[b]:
                    continue
                overlap = shapely.intersection(self.corridors[a], self.corridors[b])
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
        conflicts = Conflicts(arr[..., 0].astype(np.int64), arr[..., 1], arr[..., 2], arr[..., 3], arr[..., 4], arr[..., 5], valid)
        return conflicts, crossing

    def _interval(self, lane: int, region: shapely.Geometry) -> tuple[tuple[float, float], float]:
        """[s0, s1] of a lane's samples within the region's reach of its centre line and the
        lane heading at the middle of it."""
        s = self.samples
        lo, hi = int(s.start[lane]), int(s.start[lane + 1])
        inside = shapely.contains_xy(shapely.buffer(region, 1e-6), s.xy[lo:hi, 0], s.xy[lo:hi, 1])
        dist = shapely.distance(region, shapely.points(s.xy[lo:hi]))
        near = inside | (dist <= CORRIDOR_HALF_WIDTH_M + 1e-6)
        idx = np.flatnonzero(near) if near.any() else np.array([int(np.argmin(dist))])
        s0, s1 = float(s.s_m[lo + idx[0]]), float(s.s_m[lo + idx[-1]])
        mid = lo + idx[len(idx) // 2]
        return (s0, s1), float(s.yaw[mid])

    def _lit_lanes(self, scenario: Scenario) -> NDArrayObject:
        """Light id (or "") controlling entry into each lane."""
        out = np.full(self.n_lanes, "", dtype=object)
        for light, lanes in sorted(light_lanes(scenario).items()):
            for lane in lanes:
                for target in (self.successors[lane] or [lane]):
                    if not out[target]:
                        out[target] = light
        return out

    def _drivable(self, scenario: Scenario) -> shapely.Geometry:
        area = drivable_area(scenario.map)
        parts = [p for p in [area, *self.lane_polygons] if p is not None and not p.is_empty]
        return shapely.union_all(parts) if parts else shapely.Polygon()

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
        lane, s_out = np.full(n, -1, np.int64), np.zeros(n)
        if not n or not len(self.samples.xy):
            return lane, s_out
        hits = self.samples.tree.query_ball_point(xy, max_lateral_m + SAMPLE_STEP_M)
        for i, cand in enumerate(hits):
            if not cand:
                continue
            c = np.asarray(cand)
            dyaw = np.abs(np.arctan2(np.sin(self.samples.yaw[c] - yaw[i]), np.cos(self.samples.yaw[c] - yaw[i])))
            ok = dyaw <= max_heading_rad
            if not ok.any():
                continue
            c, dyaw = c[ok], dyaw[ok]
            dist = np.linalg.norm(self.samples.xy[c] - xy[i], axis=1)
            best = int(np.lexsort((dist, np.round(dyaw, 2)))[0])
            lane[i] = int(self.samples.lane[c[best]])
            s_out[i] = float(self.samples.s_m[c[best]])
        return lane, s_out

    def straightest(self, options: list[int]) -> int:
        """The option whose centre line starts most nearly straight on (nuPlan: lowest curvature at its start)."""
        s = self.samples
        turn = []
        for j in options:
            lo, hi = int(s.start[j]), int(s.start[j + 1])
            head = s.yaw[lo : min(lo + 4, hi)]
            turn.append(abs(float(np.arctan2(np.sin(head[-1] - head[0]), np.cos(head[-1] - head[0])))) / max(len(head) - 1, 1))
        return options[int(np.argmin(turn))]

    def in_intersection(self, xy: NDArrayFloat) -> NDArrayBool:
        """(n,) whether points lie in an intersection (see the module docstring)."""
        if self.intersection.is_empty or not len(xy):
            return np.zeros(len(xy), bool)
        return shapely.contains_xy(self.intersection, xy[:, 0], xy[:, 1])
