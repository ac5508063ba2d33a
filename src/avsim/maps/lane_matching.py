"""Map matching: the lanes a driven path went along, found over the whole path at once.

A hidden Markov model over lane candidates (Newson and Krumm's map matching, on the lane graph):

- candidates: at each pose, every lane whose centre line passes within `CANDIDATE_RADIUS_M` and
  runs within `CANDIDATE_HEADING_RAD` of the pose's heading, at its nearest sample;
- emission cost: (d / `SIGMA_LATERAL_M`)^2 + (heading difference / `SIGMA_HEADING_RAD`)^2;
- transition cost from (lane a, arc s) to (lane b, arc t) over a step that moved the pose by
  `delta`: along the same lane or through successors (up to `MAX_HOPS` lanes on), the route
  distance D from s to t against `delta`, |D - delta| / `SIGMA_TRAVEL_M` (going backwards on a
  lane by more than `BACKTRACK_M` is not a route); a change to a lane beside a (same direction,
  `NEIGHBOUR_GAP_M` apart) costs `LANE_CHANGE_COST`; any other move is a *gap* (the path left
  the lane graph: a car park, a missing link) costing `GAP_COST`;
- a pose with no candidate has one "off lanes" state (cost `OFF_LANE_COST`) reachable from and
  leading to every state through a gap.

Viterbi gives the cheapest state sequence; `MatchedPath` holds each pose's lane (-1: off lanes),
arc length, and how it was reached (same lane, successor chain, lane change, gap).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property

import numpy as np
import shapely

from avsim.core.typing import NDArrayFloat, NDArrayInt
from avsim.maps.lane_geometry import SAMPLE_STEP_M
from avsim.maps.lane_graph import LaneGraph

CANDIDATE_RADIUS_M = 4.0
CANDIDATE_HEADING_RAD = np.deg2rad(60.0)
SIGMA_LATERAL_M = 1.0
SIGMA_HEADING_RAD = 0.35
SIGMA_TRAVEL_M = 1.0
BACKTRACK_M = 1.0
MAX_HOPS = 4
LANE_CHANGE_COST = 6.0
NEIGHBOUR_GAP_M = 1.0
SAME_DIRECTION_RAD = np.deg2rad(30.0)
GAP_COST = 60.0
OFF_LANE_COST = 25.0


class Move(IntEnum):
    """How a pose's lane was reached from the previous pose's."""

    START = 0
    SAME = 1
    SUCCESSOR = 2
    LANE_CHANGE = 3
    GAP = 4


@dataclass(frozen=True, eq=False)
class MatchedPath:
    """The matched lanes of T poses: lane (T,) index or -1 (off lanes), s_m (T,) arc length on it,
    move (T,) `Move` from the previous pose, hops (T,) lanes passed through on a successor move
    (the lanes between, in order; empty otherwise)."""

    lane: NDArrayInt
    s_m: NDArrayFloat
    move: NDArrayInt
    hops: list[list[int]]


class LaneMatcher:
    """Matches driven paths onto a lane graph (see the module docstring).

    Args:
        graph: the lane graph (its lane geometry included).
    """

    def __init__(self, graph: LaneGraph) -> None:
        self.graph = graph
        self.samples = graph.lanes.samples

    @cached_property
    def neighbours(self) -> list[set[int]]:
        """Per lane, the lanes running beside it the same way (their polygons within `NEIGHBOUR_GAP_M`)."""
        lanes = self.graph.lanes
        out: list[set[int]] = [set() for _ in range(lanes.n_lanes)]
        if not lanes.n_lanes:
            return out
        grown = shapely.buffer(lanes.polygons, NEIGHBOUR_GAP_M, quad_segs=1)
        a, b = lanes.tree.query(grown, predicate="intersects")
        s = self.samples
        for i, j in zip(a.tolist(), b.tolist()):
            if i == j or j in self.graph.successors[i] or i in self.graph.successors[j]:
                continue
            # headings where the lanes are nearest each other
            pi, pj = s.lane_xy(i), s.lane_xy(j)
            if not len(pi) or not len(pj):
                continue
            near_i = int(np.argmin(np.min(np.linalg.norm(pi[:, None] - pj[None, ::4], axis=-1), axis=1)))
            near_j = int(np.argmin(np.linalg.norm(pj - pi[near_i], axis=1)))
            yi, yj = s.yaw[s.start[i] + near_i], s.yaw[s.start[j] + near_j]
            if abs(np.arctan2(np.sin(yi - yj), np.cos(yi - yj))) < SAME_DIRECTION_RAD:
                out[i].add(j)
        return out

    def candidates(self, xy: NDArrayFloat, yaw: float) -> tuple[NDArrayInt, NDArrayFloat, NDArrayFloat]:
        """Candidate lanes of one pose: (lane (C,), arc length (C,), emission cost (C,))."""
        s = self.samples
        hits = s.tree.query_ball_point(xy, CANDIDATE_RADIUS_M + SAMPLE_STEP_M)
        if not hits:
            return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
        c = np.asarray(hits, np.int64)
        d = np.linalg.norm(s.xy[c] - xy, axis=1)
        dyaw = np.abs(np.arctan2(np.sin(s.yaw[c] - yaw), np.cos(s.yaw[c] - yaw)))
        ok = (d <= CANDIDATE_RADIUS_M) & (dyaw <= CANDIDATE_HEADING_RAD)
        c, d, dyaw = c[ok], d[ok], dyaw[ok]
        if not len(c):
            return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
        order = np.lexsort((d, s.lane[c]))
        c, d, dyaw = c[order], d[order], dyaw[order]
        first = np.r_[True, s.lane[c][1:] != s.lane[c][:-1]]  # the nearest sample of each lane
        c, d, dyaw = c[first], d[first], dyaw[first]
        cost = (d / SIGMA_LATERAL_M) ** 2 + (dyaw / SIGMA_HEADING_RAD) ** 2
        return s.lane[c].astype(np.int64), s.s_m[c], cost

    def _reach(self, a: int, s_a: float, limit_m: float) -> dict[int, tuple[float, list[int]]]:
        """Lanes reachable from (a, s_a) through successors within `limit_m`: lane -> (distance to its
        start, the lanes passed in between)."""
        out: dict[int, tuple[float, list[int]]] = {}
        frontier: list[tuple[float, int, list[int]]] = [(float(self.samples.length_m[a]) - s_a, a, [])]
        for _ in range(MAX_HOPS):
            nxt: list[tuple[float, int, list[int]]] = []
            for dist, lane, path in frontier:
                if dist > limit_m:
                    continue
                for b in self.graph.successors[lane]:
                    if b not in out or dist < out[b][0]:
                        out[b] = (dist, path)
                        nxt.append((dist + float(self.samples.length_m[b]), b, [*path, b]))
            frontier = nxt
        return out

    def match(self, xy: NDArrayFloat, yaw: NDArrayFloat) -> MatchedPath:
        """The cheapest lane sequence of a driven path (see the module docstring).

        Args:
            xy: (T, 2) positions (box centres).
            yaw: (T,) headings.

        Returns:
            The matched path.
        """
        t_n = len(xy)
        cands = [self.candidates(xy[t], float(yaw[t])) for t in range(t_n)]
        lanes = [np.r_[c[0], -1] for c in cands]  # every pose also has the off-lanes state
        arcs = [np.r_[c[1], 0.0] for c in cands]
        emit = [np.r_[c[2], OFF_LANE_COST] for c in cands]
        cost = emit[0].copy()
        back: list[NDArrayInt] = [np.zeros(len(cost), np.int64)]
        moves: list[NDArrayInt] = [np.full(len(cost), Move.START, np.int64)]
        hops: list[list[list[int]]] = [[[] for _ in cost]]
        for t in range(1, t_n):
            delta = float(np.linalg.norm(xy[t] - xy[t - 1]))
            trans, move, via = self._transitions(lanes[t - 1], arcs[t - 1], lanes[t], arcs[t], delta)
            total = cost[:, None] + trans
            best = np.argmin(total, axis=0)
            cost = total[best, np.arange(len(best))] + emit[t]
            back.append(best)
            moves.append(move[best, np.arange(len(best))])
            hops.append([via.get((int(i), j), []) for j, i in enumerate(best.tolist())])
        state = int(np.argmin(cost))
        lane, s_m, mv = np.zeros(t_n, np.int64), np.zeros(t_n), np.zeros(t_n, np.int64)
        hp: list[list[int]] = [[] for _ in range(t_n)]
        for t in range(t_n - 1, -1, -1):
            lane[t], s_m[t], mv[t], hp[t] = lanes[t][state], arcs[t][state], moves[t][state], hops[t][state]
            state = int(back[t][state])
        return MatchedPath(lane, s_m, mv, hp)

    def _transitions(self, la: NDArrayInt, sa: NDArrayFloat, lb: NDArrayInt, sb: NDArrayFloat,
                     delta: float) -> tuple[NDArrayFloat, NDArrayInt, dict[tuple[int, int], list[int]]]:  # fmt: skip
        """Transition costs (A, B), their moves and the successor lanes passed, from states (la, sa) to (lb, sb)."""
        trans = np.full((len(la), len(lb)), GAP_COST)
        move = np.full((len(la), len(lb)), Move.GAP, np.int64)
        via: dict[tuple[int, int], list[int]] = {}
        for i, (a, s_a) in enumerate(zip(la.tolist(), sa.tolist())):
            if a < 0:
                continue
            reach = self._reach(a, s_a, delta + 4 * SIGMA_TRAVEL_M + 2 * SAMPLE_STEP_M)
            for j, (b, s_b) in enumerate(zip(lb.tolist(), sb.tolist())):
                if b < 0:
                    continue
                if b == a and s_b >= s_a - BACKTRACK_M:
                    trans[i, j], move[i, j] = abs(max(s_b - s_a, 0.0) - delta) / SIGMA_TRAVEL_M, Move.SAME
                elif b in reach:
                    dist, path = reach[b]
                    trans[i, j], move[i, j] = abs(dist + s_b - delta) / SIGMA_TRAVEL_M + 0.1 * (len(path) + 1), Move.SUCCESSOR
                    via[(i, j)] = path
                elif b in self.neighbours[a]:
                    trans[i, j], move[i, j] = LANE_CHANGE_COST, Move.LANE_CHANGE
        return trans, move, via
