"""Reactive traffic: nuPlan's IDM agents (`nuplan/planning/simulation/observation/idm/`), vectorised.

Each vehicle of a reactive class (Car, Truck) is snapped onto the lane under it (nuPlan's
`get_starting_segment`: the lane nearest in heading) and then only chooses its acceleration along
its lane centre lines with the Intelligent Driver Model (`IDMPolicy.idm_model`, forward Euler as
`solve_forward_euler_idm_policy`):

    s* = s0 + v T + v (v - v_lead) / (2 sqrt(a b)),  dv/dt = a (1 - (v / v0)^4 - (s* / s_alpha)^2)

with s_alpha = max(gap - l_r, s0), the step's acceleration clipped to [-b, a] and the speed to >= 0.
Parameters (`IDMConfig`) are nuPlan's `idm_agents_observation.yaml`: v0 = 10 m/s (the lane's
speed limit where the map has one), s0 = 1 m, T = 1.5 s, a = 1 m/s^2, b = 2 m/s^2, minimum path
20 m. The route grows as nuPlan's `IDMAgent.plan_route`: when less than `min_path + v0 T` is
left, the straightest successor is appended, a light-controlled one only while its light is
green; a red controlled lane on the route puts a stop line at its start.

The leading object is the nearest one in the agent's path ahead: any object whose box reaches
within `CORRIDOR_HALF_WIDTH_M` of a centre line on the agent's route (the ego's box, replayed
boxes, other IDM agents' projected footprints, i.e. their box plus `v T` ahead, red stop lines),
its gap measured from the agent's own projected footprint as nuPlan's occupancy map does, its
velocity projected onto the agent's heading. Objects are placed on lanes by arc-length intervals:
IDM agents on their own lanes and, through the road graph's conflicts, on the lanes crossing,
merging or diverging there; other boxes by the lane samples they cover.

Departures from nuPlan (docs/closed_loop.md): vehicles that enter the log after the start join
when they first appear (if their snapped box is free), not only those present at the start; a
vehicle under no lane is replayed from the log instead of dropped; an agent whose path ends where
the map ends drives off it instead of stopping; lights in state `unknown` do not stop agents;
no radius filter unless `IDMConfig.radius_m` is set (nuPlan: 100 m); with `spread` > 0 each
agent's v0 and T are scaled by a factor drawn from the seed (0: nuPlan's uniform parameters).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from avsim.core.typing import NDArrayFloat, NDArrayInt
from avsim.maps.lane_geometry import SAMPLE_STEP_M
from avsim.maps.lane_graph import CORRIDOR_HALF_WIDTH_M
from avsim.maps.road import RoadModel
from avsim.sim.boxes import Boxes, LogTable
from avsim.sim.geometry import boxes_overlap

ROUTE_SLOTS = 4  # current lane and up to three ahead
SNAP_LATERAL_M = 1.75
SNAP_HEADING_RAD = np.deg2rad(60.0)
STOP_LINE_DEPTH_M = 0.5
FREE_ROAD_M = 1e3
OWNER_EGO, OWNER_OTHER, OWNER_STOP = -2, -1, -3


@dataclass(frozen=True)
class IDMConfig:
    """nuPlan's IDM agent parameters (`idm_agents_observation.yaml`) and avsim's additions."""

    target_velocity_mps: float = 10.0
    min_gap_m: float = 1.0
    headway_s: float = 1.5
    accel_max_mps2: float = 1.0
    decel_max_mps2: float = 2.0
    minimum_path_length_m: float = 20.0
    radius_m: float | None = None
    reactive_classes: tuple[str, ...] = ("Car", "Truck")
    spread: float = 0.1


@dataclass
class Occupancy:
    """Objects placed on lanes, sorted by lane: lane, a, b (arc-length interval), v (velocity
    along the lane), owner (IDM agent index, or OWNER_*); start (K+1,) row offsets per lane."""

    lane: NDArrayInt
    a: NDArrayFloat
    b: NDArrayFloat
    v: NDArrayFloat
    owner: NDArrayInt
    start: NDArrayInt


Rows = tuple[NDArrayInt, NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayInt]  # lane, a, b, v, owner


def _no_rows() -> Rows:
    z = np.zeros(0)
    return np.zeros(0, np.int64), z, z, z, np.zeros(0, np.int64)


def place_boxes(road: RoadModel, boxes: Boxes, owner: NDArrayInt) -> tuple[Rows, NDArrayInt]:
    """Intervals of the lanes whose corridor each box reaches (by the lane samples it covers).

    Args:
        road: the road graph.
        boxes: the boxes.
        owner: (N,) owner code of each box.

    Returns:
        (lane, a, b, v along the lane, owner) rows and the box (N,) index of each row.
    """
    s = road.samples
    if not len(boxes) or not len(s.xy):
        return _no_rows(), np.zeros(0, np.int64)
    length, width = boxes.size_m[:, 0], boxes.size_m[:, 1]
    reach = np.hypot(length, width) / 2 + CORRIDOR_HALF_WIDTH_M + SAMPLE_STEP_M
    hits = s.tree.query_ball_point(boxes.center_m[:, :2], reach)
    counts = np.fromiter((len(h) for h in hits), np.int64, len(hits))
    if not counts.sum():
        return _no_rows(), np.zeros(0, np.int64)
    idx = np.concatenate([np.asarray(h, np.int64) for h in hits if h])
    obj = np.repeat(np.arange(len(boxes)), counts)
    rel = s.xy[idx] - boxes.center_m[obj, :2]
    c, sn = np.cos(boxes.yaw_rad[obj]), np.sin(boxes.yaw_rad[obj])
    lon, lat = np.abs(rel[:, 0] * c + rel[:, 1] * sn) - length[obj] / 2, np.abs(-rel[:, 0] * sn + rel[:, 1] * c) - width[obj] / 2
    covered = np.hypot(np.maximum(lon, 0.0), np.maximum(lat, 0.0)) < CORRIDOR_HALF_WIDTH_M
    idx, obj = idx[covered], obj[covered]
    if not len(idx):
        return _no_rows(), np.zeros(0, np.int64)
    key = obj * road.n_lanes + s.lane[idx]
    order = np.lexsort((s.s_m[idx], key))
    key, idx, obj = key[order], idx[order], obj[order]
    first = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    last = np.append(first[1:], len(key)) - 1
    lane = s.lane[idx[first]]
    half = SAMPLE_STEP_M / 2
    yaw_lane = s.yaw[idx[first]]
    vel = boxes.velocity_mps[obj[first]]
    v_along = vel[:, 0] * np.cos(yaw_lane) + vel[:, 1] * np.sin(yaw_lane)
    return (lane, s.s_m[idx[first]] - half, s.s_m[idx[last]] + half, v_along, owner[obj[first]]), obj[first]


class IDMTraffic:
    """Vehicles as IDM agents, everything else replayed from the log (see the module docstring).

    Args:
        road: the road graph.
        log: the logged agents on the sim's clock.
        config: IDM parameters.
        dt_s: the sim step.
        rng: draws the per-agent parameter factors (`config.spread`).
    """

    def __init__(self, road: RoadModel, log: LogTable, config: IDMConfig, dt_s: float, rng: np.random.Generator) -> None:
        self.road, self.log, self.config, self.dt_s = road, log, config, float(dt_s)
        self._init_agents(rng)

    # ------------------------------------------------------------------ set-up
    def _init_agents(self, rng: np.random.Generator) -> None:
        """Candidate IDM agents: every reactive-class track, at its first logged box, snapped to a lane."""
        cfg, rows = self.config, self.log.rows
        first_row: dict[str, int] = {}
        for i, tid in enumerate(rows.track_id.tolist()):  # rows run by step: a track's first row is its entry
            first_row.setdefault(tid, i)
        reactive = np.isin(rows.object_class, cfg.reactive_classes)
        ids = sorted(t for t, i in first_row.items() if reactive[i])
        pick = np.array([first_row[t] for t in ids], np.int64)
        box = rows.select(pick) if len(pick) else Boxes.empty()
        lane, s = self.road.nearest_lanes(box.center_m[:, :2], box.yaw_rad, SNAP_LATERAL_M, SNAP_HEADING_RAD)
        keep = lane >= 0
        n = int(keep.sum())
        self.track_id = np.asarray(ids, dtype=str)[keep] if n else np.zeros(0, "<U1")
        self.replayed_ids = set(np.asarray(ids, dtype=str)[~keep].tolist()) if len(ids) else set()
        box = box.select(keep)
        self.box = box
        self.enter_step = self.log.step[pick[keep]] if n else np.zeros(0, np.int64)
        self.route = np.full((n, ROUTE_SLOTS), -1, np.int64)
        self.route[:, 0] = lane[keep]
        self.prev_lane = np.full(n, -1, np.int64)
        self.s = s[keep].copy()
        self.v = box.speed_mps.copy()
        self.length, self.width = box.size_m[:, 0].copy(), box.size_m[:, 1].copy()
        factor = 1.0 + cfg.spread * rng.uniform(-1.0, 1.0, size=(n, 2)) if cfg.spread > 0 else np.ones((n, 2))
        self.v0_factor, self.headway = factor[:, 0], cfg.headway_s * factor[:, 1]
        self.v0 = np.zeros(n)  # set from the route at every step (`_target_velocity`)
        self.state = np.zeros(n, np.int8)  # 0 waiting, 1 active, 2 gone
        self.stop_at_end = np.zeros(n, bool)
        self.map_end = np.zeros(n, bool)  # the route reached a lane without successors: never extended again
        self.blocked_at = np.full(n, -1, np.int64)  # the lights' version under which a stop was last planned
        self._lights_seen: tuple[str, ...] = ()
        self._lights_version = 0
        self._boxes: Boxes | None = None  # `_agent_boxes` of the current state
        self._active: tuple[NDArrayInt, Boxes] = (np.zeros(0, np.int64), Boxes.empty())  # the active set and its fixed fields
        self._red: tuple[int, NDArrayInt] = (-1, np.zeros(0, np.int64))  # the red lit lanes under a lights version
        last_row = {tid: i for i, tid in enumerate(rows.track_id.tolist())}
        self.exit_step = np.array([self.log.step[last_row[t]] for t in self.track_id.tolist()], np.int64)
        self.replay = self.log.subset(~np.isin(rows.track_id, self.track_id)) if n else self.log
        placed, obj = place_boxes(self.road, self.replay.rows, np.full(len(self.replay.rows), OWNER_OTHER, np.int64))
        order = np.argsort(self.replay.step[obj], kind="stable")
        self._replay_rows = tuple(c[order] for c in placed)
        self._replay_bounds = np.searchsorted(self.replay.step[obj][order], np.arange(self.log.n_steps + 1))
        lit = np.flatnonzero(self.road.light_of_lane != "") if self.road.n_lanes else np.zeros(0, np.int64)
        self._lit_lanes, self._lit_ids = lit, [str(x) for x in self.road.light_of_lane[lit]]

    # ------------------------------------------------------------------ public
    def boxes(self, step: int) -> Boxes:
        """Every object at `step`: the active IDM agents, then the replayed boxes."""
        return Boxes.concat([self._agent_boxes(), self._replayed(step)])

    def _replayed(self, step: int) -> Boxes:
        """The logged boxes at `step` that are not IDM agents (waiting, active or gone)."""
        return self.replay.at(step)

    def _replay_placed(self, step: int) -> Rows:
        """The lane intervals of the replayed boxes at `step` (placed once for the whole log)."""
        if not 0 <= step < self.log.n_steps:
            return _no_rows()
        lo, hi = int(self._replay_bounds[step]), int(self._replay_bounds[step + 1])
        return tuple(c[lo:hi] for c in self._replay_rows)  # type: ignore[return-value]

    def _agent_boxes(self) -> Boxes:
        """The active agents' boxes now (kept until the agents next move or join)."""
        if self._boxes is None:
            self._boxes = self._make_agent_boxes()
        return self._boxes

    def _make_agent_boxes(self) -> Boxes:
        on = np.flatnonzero(self.state == 1)
        if not len(on):
            return Boxes.empty()
        xy, yaw = self.road.samples.pose_at(self.route[on, 0], self.s[on])
        if not np.array_equal(self._active[0], on):  # the ids, classes and sizes change only when agents join or leave
            self._active = (on, self.box.select(on))
        b = self._active[1]
        center = np.concatenate([xy, b.center_m[:, 2:]], axis=1)
        vel = self.v[on, None] * np.stack([np.cos(yaw), np.sin(yaw)], axis=1)
        return Boxes(b.track_id, b.source_class, b.object_class, center, b.size_m, yaw, vel)

    def step(self, step: int, ego: Boxes, lights: dict[str, str]) -> None:
        """Advance the agents from `step` to `step + 1` (they see the ego and the log at `step`).

        Args:
            step: the current step index.
            ego: the ego's box (one row).
            lights: light id -> state at `step`.
        """
        self.spawn(step, ego)
        if self.config.radius_m is not None:
            self._drop_far(ego)
        on = np.flatnonzero(self.state == 1)
        if not len(on):
            return
        self._plan_routes(on, lights)  # with the v0 of the last step, as nuPlan's `plan_route`
        self.v0[on] = self._target_velocity(on)
        route = self.route[on]
        seg = np.where(route >= 0, self.road.samples.length_m[np.maximum(route, 0)], 0.0)
        occ = self._occupancy(on, route, step, ego, lights)
        gap, v_lead, l_rear = self._leads(on, route, seg, occ)
        self._propagate(on, gap, v_lead, l_rear)

    # ------------------------------------------------------------------ steps
    def spawn(self, step: int, ego: Boxes) -> None:
        """Agents whose log starts by now join when their snapped box is free (nuPlan's initial collision check).

        Args:
            step: the current step.
            ego: the ego's box.
        """
        self.state[(self.state == 0) & (self.exit_step < step)] = 2  # its log ended before it found room
        wait = np.flatnonzero((self.state == 0) & (self.enter_step <= step))
        if not len(wait):
            return
        others = Boxes.concat([ego, self._agent_boxes(), self._replayed(step)])
        xy, yaw = self.road.samples.pose_at(self.route[wait, 0], self.s[wait])
        length, width = self.length[wait], self.width[wait]
        free = np.ones(len(wait), bool)
        if len(others):
            reach = np.hypot(length, width)[:, None] / 2 + np.hypot(others.size_m[:, 0], others.size_m[:, 1])[None] / 2
            wi, oi = np.nonzero(((xy[:, None] - others.center_m[None, :, :2]) ** 2).sum(-1) <= reach**2)  # bounding circles first
            hit = boxes_overlap(xy[wi], yaw[wi], length[wi], width[wi], others.center_m[oi, :2], others.yaw_rad[oi], others.size_m[oi, 0],
                                others.size_m[oi, 1])  # fmt: skip
            free[wi[hit]] = False
        cand = np.flatnonzero(free)
        if len(cand) > 1:  # two newcomers must not overlap each other either: the earlier in track order wins
            pair = boxes_overlap(xy[cand, None], yaw[cand, None], length[cand, None], width[cand, None], xy[None, cand],
                                 yaw[None, cand], length[None, cand], width[None, cand])  # fmt: skip
            if np.tril(pair, -1).any():  # an earlier newcomer in the way (usually none is)
                keep: list[int] = []
                for j in range(len(cand)):
                    if not any(pair[j, k] for k in keep):
                        keep.append(j)
                cand = cand[keep]
        self.state[wait[cand]] = 1
        self._boxes = None

    def _drop_far(self, ego: Boxes) -> None:
        on = np.flatnonzero(self.state == 1)
        xy, _ = self.road.samples.pose_at(self.route[on, 0], self.s[on])
        far = np.linalg.norm(xy - ego.center_m[0, :2], axis=1) > float(self.config.radius_m)  # type: ignore[arg-type]
        self.state[on[far]] = 2
        self._boxes = None

    def _target_velocity(self, on: NDArrayInt) -> NDArrayFloat:
        """v0 of each agent: the speed limit of the last lane of its route where the map has one
        (nuPlan: its route's end segment), else `target_velocity_mps`, times its factor."""
        last = self.route[on, np.maximum((self.route[on] >= 0).sum(axis=1) - 1, 0)]
        limit = self.road.speed_limit_mps[last]
        base = np.where(np.isfinite(limit) & (limit > 0), limit, self.config.target_velocity_mps)
        return base * self.v0_factor[on]

    def _plan_routes(self, on: NDArrayInt, lights: dict[str, str]) -> None:
        """nuPlan's `plan_route` for the agents whose path to go is shorter than they need."""
        lengths = self.road.samples.length_m
        route = self.route[on]
        togo = np.where(route >= 0, lengths[np.maximum(route, 0)], 0.0).sum(axis=1) - self.s[on]
        v0 = self.v0[on]
        first = v0 <= 0
        if first.any():  # an agent's first step: its route's
            v0[first] = self._target_velocity(on[first])
        need = self.config.minimum_path_length_m + v0 * self.headway[on]
        states = tuple(lights.values())
        if states != self._lights_seen:
            self._lights_seen, self._lights_version = states, self._lights_version + 1
        version = self._lights_version
        retry = ~self.stop_at_end[on] | (self.blocked_at[on] != version)  # a stop is re-planned when a light changes
        # a full route cannot grow (and a full route is never a planned stop: `_extend` would only clear it again)
        short = (togo < need) & ~self.map_end[on] & retry & (route[:, -1] < 0)
        for i, want in zip(on[short].tolist(), need[short].tolist()):
            self._extend(i, lights, want)
            if self.stop_at_end[i]:
                self.blocked_at[i] = version

    def _extend(self, i: int, lights: dict[str, str], need: float) -> None:
        road, route = self.road, self.route[i]
        lengths = road.samples.length_m
        filled = int((route >= 0).sum())
        togo = float(lengths[route[:filled]].sum()) - float(self.s[i])
        while togo < need and filled < ROUTE_SLOTS:
            options = road.successors[int(route[filled - 1])]
            allowed = [j for j in options if _may_enter(road.light_of_lane[j], lights)]
            if not allowed:
                self.stop_at_end[i] = bool(options)  # no successor at all: the map ends, drive off
                self.map_end[i] = not options
                return
            route[filled] = road.straightest(allowed)
            togo += float(lengths[route[filled]])
            filled += 1
        self.stop_at_end[i] = False

    def _occupancy(self, on: NDArrayInt, route: NDArrayInt, step: int, ego: Boxes, lights: dict[str, str]) -> Occupancy:
        """Every object placed on lanes (see the module docstring)."""
        road, lengths = self.road, self.road.samples.length_m
        lane0, s, half, v = route[:, 0], self.s[on], self.length[on] / 2, self.v[on]
        a, b = s - half, s + half + v * self.headway[on]
        parts = [(lane0, a, np.minimum(b, lengths[lane0]), v, on)]
        nxt = route[:, 1]
        spill = (b > lengths[lane0]) & (nxt >= 0)
        parts.append((nxt[spill], np.zeros(int(spill.sum())), (b - lengths[lane0])[spill], v[spill], on[spill]))
        back = (a < 0) & (self.prev_lane[on] >= 0)
        pl = self.prev_lane[on][back]
        parts.append((pl, lengths[pl] + a[back], lengths[pl], v[back], on[back]))
        own = [np.concatenate(c) for c in zip(*parts)]
        parts.append(_conflict_rows(road, *own))
        parts.append(self._replay_placed(step))
        parts.append(place_boxes(road, ego, np.array([OWNER_EGO], np.int64))[0])
        red = self._red_lanes(lights)
        parts.append((red, np.zeros(len(red)), np.full(len(red), STOP_LINE_DEPTH_M), np.zeros(len(red)), np.full(len(red), OWNER_STOP)))
        lane, a_all, b_all, v_all, owner = (np.concatenate(c) for c in zip(*parts))
        order = np.argsort(lane, kind="stable")
        start = np.searchsorted(lane[order], np.arange(road.n_lanes + 1))
        return Occupancy(lane[order], a_all[order], b_all[order], v_all[order], owner[order].astype(np.int64), start)

    def _red_lanes(self, lights: dict[str, str]) -> NDArrayInt:
        """The lit lanes whose light is red (found again only when the lights change: `_plan_routes` counts the versions)."""
        if self._red[0] != self._lights_version:
            red = self._lit_lanes[np.array([lights.get(lid) == "red" for lid in self._lit_ids], bool)] if self._lit_ids else self._lit_lanes
            self._red = (self._lights_version, red)
        return self._red[1]

    def _leads(self, on: NDArrayInt, route: NDArrayInt, seg: NDArrayFloat, occ: Occupancy) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat]:
        """Gap to, velocity of and rear length of each agent's leading object (free road: path end).

        Args:
            on: (n,) the active agents.
            route: (n, R) their routes; seg: (n, R) the routes' lane lengths (0 past the end).
            occ: the objects on lanes.

        Returns:
            (gap (n,), lead velocity (n,), rear length (n,)) for the IDM step.
        """
        n, n_slots = route.shape
        offset = np.concatenate([np.zeros((n, 1)), np.cumsum(seg, axis=1)[:, :-1]], axis=1) - self.s[on, None]
        lane_q = np.maximum(route, 0)
        count = np.where(route >= 0, occ.start[lane_q + 1] - occ.start[lane_q], 0).ravel()
        # one entry per (agent, route slot, object on that slot's lane), agent-major: only the objects there
        pair = np.repeat(np.arange(n * n_slots), count)
        rows = occ.start[lane_q].ravel()[pair] + np.arange(len(pair)) - np.repeat(np.cumsum(count) - count, count)
        agent = pair // n_slots
        off = offset.ravel()[pair]
        valid = np.flatnonzero((off + occ.b[rows] > 0) & (occ.owner[rows] != on[agent]))
        front = self.length[on] / 2 + self.v[on] * self.headway[on]
        lead_gap, lead_row = np.full(n, np.inf), np.zeros(n, np.int64)
        if len(valid):  # per agent, the first nearest (the order a row-major argmin over slots and objects keeps)
            ag = agent[valid]
            gap = np.maximum(off[valid] + occ.a[rows[valid]] - front[ag], 0.0)
            starts = np.flatnonzero(np.concatenate(([True], ag[1:] != ag[:-1])))
            group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(ag))))
            hit = np.flatnonzero(gap == np.minimum.reduceat(gap, starts)[group])
            first = hit[np.concatenate(([True], group[hit][1:] != group[hit][:-1]))]
            lead_gap[ag[first]], lead_row[ag[first]] = gap[first], rows[valid[first]]
        lead_v = occ.v[lead_row]
        found = np.isfinite(lead_gap)
        togo = seg.sum(axis=1) - self.s[on]
        end_gap = np.where(self.stop_at_end[on], togo, FREE_ROAD_M)
        gap_out = np.where(found, lead_gap, end_gap)
        return gap_out, np.where(found, lead_v, 0.0), np.where(found, 0.0, self.length[on] / 2)

    def _propagate(self, on: NDArrayInt, gap: NDArrayFloat, v_lead: NDArrayFloat, l_rear: NDArrayFloat) -> None:
        """nuPlan's IDM forward-Euler step, then the agents move along their routes."""
        cfg, dt = self.config, self.dt_s
        v = self.v[on]
        v0 = self.v0[on]
        s_star = cfg.min_gap_m + v * self.headway[on] + v * (v - v_lead) / (2 * np.sqrt(cfg.accel_max_mps2 * cfg.decel_max_mps2))
        s_alpha = np.maximum(gap - l_rear, cfg.min_gap_m)
        dv = cfg.accel_max_mps2 * (1 - (v / v0) ** 4 - (s_star / s_alpha) ** 2)
        self.s[on] += dt * v
        self.v[on] = np.maximum(v + dt * np.clip(dv, -cfg.decel_max_mps2, cfg.accel_max_mps2), 0.0)
        self._advance_lanes(on)
        self._boxes = None

    def _advance_lanes(self, on: NDArrayInt) -> None:
        lengths = self.road.samples.length_m
        for _ in range(ROUTE_SLOTS):
            cur = self.route[on, 0]
            over = self.s[on] > lengths[cur]
            move = on[over & (self.route[on, 1] >= 0)]
            if not len(move):
                break
            self.s[move] -= lengths[self.route[move, 0]]
            self.prev_lane[move] = self.route[move, 0]
            self.route[move, :-1] = self.route[move, 1:]
            self.route[move, -1] = -1
        end = on[self.s[on] > lengths[self.route[on, 0]]]
        stop = end[self.stop_at_end[end]]
        self.s[stop] = lengths[self.route[stop, 0]]
        self.v[stop] = 0.0
        off = end[~self.stop_at_end[end] & (self.s[end] - self.length[end] / 2 > lengths[self.route[end, 0]])]
        self.state[off] = 2


def _may_enter(light: str, lights: dict[str, str]) -> bool:
    """nuPlan's rule for adding a lane to a route: unlit lanes always; lit ones while green (unknown: as unlit)."""
    return not light or lights.get(light, "unknown") in ("green", "unknown")


def _conflict_rows(road: RoadModel, lane: NDArrayInt, a: NDArrayFloat, b: NDArrayFloat, v: NDArrayFloat,
                   owner: NDArrayInt) -> Rows:  # fmt: skip
    """Intervals on conflicting lanes of the rows that reach into a conflict zone."""
    c = road.conflicts
    if not c.valid.shape[1] or not len(lane):
        return _no_rows()
    sel = np.flatnonzero(c.valid.any(axis=1)[lane])  # the rows on lanes with a conflict at all (in order)
    ls = lane[sel]
    hit = c.valid[ls] & (a[sel, None] <= c.s1[ls]) & (b[sel, None] >= c.s0[ls])
    r, k = np.nonzero(hit)
    r = sel[r]
    ln = lane[r]
    return c.other[ln, k], c.t0[ln, k], c.t1[ln, k], v[r] * c.cos[ln, k], owner[r]
