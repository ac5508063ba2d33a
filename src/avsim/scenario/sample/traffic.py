"""Traffic of the embedded sample: the 10 Hz microsimulation (the stepper).

Every road user follows a fixed route (a dense centre line through the lanes of
`avsim.scenario.sample.roads`, or a sidewalk/crosswalk walking line) and only chooses its acceleration,
with the Intelligent Driver Model (Treiber et al. 2000) towards the nearest obstacle ahead:

- the body of any road user that lies in the corridor ahead of it (car following, queues,
  crossing traffic physically in the way);
- the predicted bodies (5 s ahead, 6 s for pedestrians, along their own routes, accelerating
  towards their desired speed but never past where they must stop) of road users with right
  of way: pedestrians on a crosswalk, then whoever entered the intersection first, then
  through traffic, pedestrians at the curb on their walk signal, right turns, permissive left
  turns. Yielding happens behind the own stop line (or before a crosswalk), never inside the
  intersection, and nobody enters it without room to clear it;
- the stop line while its signal is red, or yellow and a comfortable stop is still possible;
  the curb while pedestrians have no walk signal.

Boxes are checked for overlap afterwards (`find_overlaps`); `avsim.scenario.sample` re-simulates
without the offending road user in the rare case the rules above do not prevent one.

The simulation starts `WARMUP_S` before the clip so queues and platoons exist at its start.
Everything is numpy on struct-of-arrays state; the result is deterministic for a seed.

The signal plan lives in `avsim.scenario.sample.signals`, the routes in `.routes`, the cast in
`.agents` and the overlap check in `.overlaps`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from avsim.scenario.sample.agents import WARMUP_S, Cast
from avsim.scenario.sample.routes import KIND_BIKE, KIND_PED, Route, RouteTable
from avsim.scenario.sample.signals import SignalPlan

SIM_RATE_HZ = 10.0
SIM_DT_S = 1.0 / SIM_RATE_HZ
YELLOW_STOP_DECEL_MPS2 = 3.0  # stop on yellow only if this deceleration suffices
STOP_LINE_GAP_M = 0.6  # vehicles stop this far before the stop line
MAX_DECEL_MPS2 = 8.0

TAUS_S = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
HORIZON_S = (5.0, 5.0, 6.0)  # prediction horizon by kind: pedestrians on a 17 m crosswalk
# are seen early enough by vehicles turning into it
BODY_SPACING_M = 0.8
SAME_DIRECTION_RAD = np.deg2rad(35.0)
# extra lateral clearance (m) between the bodies of two road users, by kind (vehicle, bike,
# pedestrian): pedestrians pass each other closely, everyone keeps more room from them
MARGIN_M = np.array([[0.35, 0.5, 0.5], [0.5, 0.5, 0.5], [0.5, 0.5, 0.2]])
# right of way before the intersection: through > pedestrians (at the curb, on their walk
# signal, over the turning traffic that must yield to them) > right turns > left turns
PRIORITY = {"straight": 3.0, "walk": 2.5, "right": 2.0, "left": 1.0}


@dataclass(frozen=True)
class SimResult:
    """Recorded states at `SIM_RATE_HZ` over the clip, one row per (agent, time), sorted by
    agent then time; agent indices refer to the `Cast` (0 = ego)."""

    agent: np.ndarray  # (N,) int64
    time_s: np.ndarray  # (N,) float64, multiples of SIM_DT_S
    center_xy: np.ndarray  # (N, 2)
    yaw_rad: np.ndarray  # (N,)
    speed_mps: np.ndarray  # (N,)
    # the ego's exact kinematics along its route at every step (constant acceleration within
    # a step), so its poses can be evaluated at any rate without interpolation error
    ego_time_s: np.ndarray  # (K,)
    ego_s_m: np.ndarray  # (K,)
    ego_v_mps: np.ndarray  # (K,)
    ego_a_mps2: np.ndarray  # (K,)


@dataclass(frozen=True)
class _Fleet:
    """Per-agent constants of a simulation (struct of arrays over the cast)."""

    route: np.ndarray
    length: np.ndarray
    width: np.ndarray
    v0: np.ndarray
    acc_max: np.ndarray
    dec: np.ndarray
    headway: np.ndarray
    jam: np.ndarray
    spawn: np.ndarray
    inflow: np.ndarray
    is_ped: np.ndarray
    s_stop: np.ndarray
    s_cross_end: np.ndarray
    phase: np.ndarray
    route_len: np.ndarray
    base_prio: np.ndarray
    lookahead: np.ndarray
    corr_step: np.ndarray
    body_count: np.ndarray
    kind: np.ndarray
    crosswalk_entry: np.ndarray  # (n, 4), padded with inf
    n_tau: np.ndarray  # prediction samples (TAUS_S[:n_tau])

    @classmethod
    def from_cast(cls, routes: list[Route], cast: Cast) -> _Fleet:
        size = np.asarray(cast.size, dtype=np.float64)
        length, width = size[:, 0], size[:, 1]
        kind = np.array([routes[r].kind for r in cast.route])
        is_ped = kind == KIND_PED
        return cls(
            route=np.asarray(cast.route, dtype=np.int64), length=length, width=width,
            v0=np.asarray(cast.v0), acc_max=np.asarray(cast.a), dec=np.asarray(cast.b),
            headway=np.asarray(cast.headway), jam=np.asarray(cast.jam),
            spawn=np.asarray(cast.spawn_s), inflow=np.asarray(cast.inflow), is_ped=is_ped,
            s_stop=np.array([routes[r].s_stop_m for r in cast.route]),
            s_cross_end=np.array([routes[r].s_cross_end_m for r in cast.route]),
            phase=np.array([routes[r].phase for r in cast.route]),
            route_len=np.array([routes[r].length_m for r in cast.route]),
            base_prio=np.array([PRIORITY[routes[r].movement] for r in cast.route]),
            # pedestrians look across the whole crosswalk before stepping off the curb
            lookahead=np.where(is_ped, 18.0, np.where(kind == KIND_BIKE, 20.0, 45.0)),
            corr_step=np.where(is_ped, 0.4, np.where(kind == KIND_BIKE, 0.5, 1.0)),
            body_count=np.maximum(1, np.ceil((length - width) / BODY_SPACING_M).astype(int) + 1),
            kind=kind,
            n_tau=np.searchsorted(TAUS_S, np.array(HORIZON_S)[kind], side="right"),
            crosswalk_entry=np.array([(routes[r].crosswalk_entry_m + (np.inf,) * 4)[:4]
                                      for r in cast.route]),
        )


def _idm(v: np.ndarray, v0: np.ndarray, a: np.ndarray, b: np.ndarray, headway: np.ndarray,
         jam: np.ndarray, gap: np.ndarray, dv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intelligent Driver Model terms (free-road, interaction) over agents, all arrays (n,)."""
    free = a * (1.0 - (v / np.maximum(v0, 0.1)) ** 4)
    s_star = jam + np.maximum(0.0, v * headway + v * dv / (2.0 * np.sqrt(a * b)))
    return np.maximum(free, -3.0), -a * (s_star / np.maximum(gap, 0.05)) ** 2


@dataclass
class _State:
    """Mutable per-agent state of a running simulation (arrays (n,) over the cast)."""

    s: np.ndarray  # arc length on the route (m)
    v: np.ndarray  # speed (m/s)
    status: np.ndarray  # 0 pending, 1 active, 2 gone
    committed: np.ndarray  # passing a yellow light it can no longer stop for
    entry_s: np.ndarray  # time the front crossed the stop line / curb
    s_cap: np.ndarray  # where each agent will stop at most (for predictions)

    @classmethod
    def start(cls, cast: Cast, exclude: frozenset[int]) -> _State:
        n = len(cast)
        status = np.zeros(n, dtype=np.int8)
        status[list(exclude)] = 2
        return cls(
            s=np.asarray(cast.s0_m, dtype=np.float64).copy(),
            v=np.asarray(cast.v_init, dtype=np.float64).copy(),
            status=status,
            committed=np.zeros(n, dtype=bool),
            entry_s=np.full(n, np.inf),
            s_cap=np.full(n, np.inf),
        )


def simulate(routes: list[Route], cast: Cast, plan: SignalPlan, duration_s: float,
             exclude: frozenset[int] = frozenset()) -> SimResult:
    """Run the microsimulation from -WARMUP_S to `duration_s`; record the clip at 10 Hz."""
    table = RouteTable(routes)
    fleet = _Fleet.from_cast(routes, cast)
    state = _State.start(cast, exclude)
    records: list[tuple[np.ndarray, ...]] = []
    ego_rows: list[tuple[float, float, float, float]] = []
    steps = int(np.floor((duration_s + WARMUP_S) * SIM_RATE_HZ + 1e-6))
    for k in range(steps + 1):
        t = -WARMUP_S + k * SIM_DT_S
        _spawn(table, t, fleet, state.s, state.status)
        act = np.flatnonzero(state.status == 1)
        if act.size == 0:
            continue
        xy, d = table.lookup(fleet.route[act], state.s[act])
        if t >= -1e-9:
            records.append((act, np.full(act.size, round(t, 6)), xy, np.arctan2(d[:, 1], d[:, 0]),
                            state.v[act].copy()))
        accel, stop_within = _accelerations(table, fleet, plan, state, act, d, t)
        if act[0] == 0 and t >= -1e-9:
            ego_rows.append((round(t, 6), float(state.s[0]), float(state.v[0]), float(accel[0])))
        _advance(fleet, state, act, accel, stop_within)
    return _stack_records(records, np.array(ego_rows).reshape(-1, 4))


def _ranks(fleet: _Fleet, state: _State, act: np.ndarray, front: np.ndarray, t: float) -> np.ndarray:
    """Right-of-way rank (n,) of every agent (higher goes first); records intersection entries."""
    s, length, s_stop, entry_s = state.s, fleet.length, fleet.s_stop, state.entry_s
    rear = s[act] - 0.5 * length[act]
    entered = np.isinf(entry_s[act]) & (front > s_stop[act])
    entry_s[act[entered]] = t
    inside = (front > s_stop[act]) & (rear < fleet.s_cross_end[act])
    rank = np.zeros(len(s))
    # who goes first: pedestrians on a crosswalk, then whoever entered the intersection
    # first, then through > right > left; the ego wins ties (lowest index)
    rank[act] = np.where(inside & fleet.is_ped[act], 3e6,
                         np.where(inside, 2e6 - 1e3 * entry_s[act],
                                  1e3 * fleet.base_prio[act])) - act
    return rank


def _accelerations(table: RouteTable, fleet: _Fleet, plan: SignalPlan, state: _State,
                   act: np.ndarray, d: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
    """Accelerations (over `act`) of one step and how far ahead each agent will stop at most."""
    s, v = state.s, state.v
    route, is_ped = fleet.route, fleet.is_ped
    v0, acc_max, dec, headway, jam = fleet.v0, fleet.acc_max, fleet.dec, fleet.headway, fleet.jam
    front = s[act] + 0.5 * fleet.length[act]
    rank = _ranks(fleet, state, act, front, t)
    heading = np.zeros((len(s), 2))
    heading[act] = d
    gap, v_obst, phys_gap, at_line = _obstacles(table, fleet, act, s, v, rank, heading,
                                                state.s_cap)
    stop_jam = np.where(is_ped[act], 0.1, STOP_LINE_GAP_M)
    # waiting at the own line for someone else's path is a stop-line stop too
    obst_jam = np.where(at_line, stop_jam, jam[act])
    obst_headway = np.where(at_line, np.minimum(headway[act], 0.6), headway[act])
    a_free, a_obst = _idm(v[act], np.minimum(v0[act], table.allowed_speed(route[act],
                                                                             s[act])),
                          acc_max[act], dec[act], obst_headway, obst_jam, gap,
                          v[act] - v_obst)
    stop_gap = _signal_gaps(plan, fleet, state, act, front, t)
    # a stop line is approached more decisively than a car ahead (whose braking must be
    # anticipated): a short time gap keeps IDM from crawling the last metres
    _, a_stop = _idm(v[act], v0[act], acc_max[act], dec[act], np.minimum(headway[act], 0.6),
                     stop_jam, stop_gap, v[act])
    accel = np.clip(a_free + np.minimum(a_obst, a_stop), -MAX_DECEL_MPS2, acc_max[act])
    # IDM only approaches standstill asymptotically; real drivers stop: creeping the last
    # decimetres becomes a full stop within this step
    near = np.minimum(gap - obst_jam, stop_gap - stop_jam) < 0.25
    creep = near & (v[act] < 0.3) & (accel < 0.0)
    accel = np.where(creep, -v[act] / SIM_DT_S, accel)
    # ... and, once standing close behind a standing obstacle, do not creep up to it
    hold = (v[act] < 0.01) & ((stop_gap < stop_jam + 2.0)
                              | ((gap < obst_jam + 1.5) & (v_obst < 0.1)))
    accel = np.where(hold, np.minimum(accel, 0.0), accel)
    return accel, np.minimum(phys_gap, stop_gap)


def _signal_gaps(plan: SignalPlan, fleet: _Fleet, state: _State, act: np.ndarray,
                 front: np.ndarray, t: float) -> np.ndarray:
    """Gap (over `act`) to the stop line (vehicles, bikes) or curb (pedestrians) to stop at; inf
    where the signal lets the agent go. Updates who is committed to passing a yellow light."""
    s_stop, is_ped, v, committed = fleet.s_stop, fleet.is_ped, state.v, state.committed
    stop_gap = np.full(act.size, np.inf)
    for m, i in enumerate(act):
        if fleet.phase[i] < 0:
            continue
        if is_ped[i]:
            line = s_stop[i]
            if front[m] < line - 0.05 and not plan.walk(int(fleet.phase[i]), t):
                stop_gap[m] = line - front[m]
            continue
        to_line = s_stop[i] - front[m]
        if to_line < -0.05:
            committed[i] = False
            continue
        state_now = plan.state(int(fleet.phase[i]), t)
        if state_now == "green" or committed[i]:
            continue
        if state_now == "yellow" and v[i] ** 2 > 2.0 * YELLOW_STOP_DECEL_MPS2 * max(to_line, 0.01):
            committed[i] = True
            continue
        stop_gap[m] = to_line
    return stop_gap


def _advance(fleet: _Fleet, state: _State, act: np.ndarray, accel: np.ndarray,
             stop_within: np.ndarray) -> None:
    """Integrate one step (constant acceleration, no reversing); agents past their route end go."""
    s, v, length = state.s, state.v, fleet.length
    state.s_cap[act] = s[act] + stop_within
    v_new = np.maximum(v[act] + accel * SIM_DT_S, 0.0)
    stopped = (v_new == 0.0) & (accel < 0.0)
    ds = np.where(stopped, v[act] ** 2 / (2.0 * np.maximum(-accel, 1e-6)),
                  0.5 * (v[act] + v_new) * SIM_DT_S)
    s[act] += ds
    v[act] = v_new
    state.status[act[s[act] + 0.5 * length[act] > fleet.route_len[act]]] = 2


def _spawn(table: RouteTable, t: float, fleet: _Fleet, s: np.ndarray,
           status: np.ndarray) -> None:
    """Activate agents whose time has come; inflowing ones wait until their entry is clear."""
    due = np.flatnonzero((status == 0) & (fleet.spawn <= t + 1e-9))
    for i in due:
        if fleet.inflow[i]:
            act = np.flatnonzero(status == 1)
            if act.size:
                xy_i, _ = table.lookup(fleet.route[i:i + 1], s[i:i + 1])
                xy, _ = table.lookup(fleet.route[act], s[act])
                dist = np.linalg.norm(xy - xy_i, axis=1)
                if np.any(dist < 0.5 * (fleet.length[act] + fleet.length[i]) + 6.0):
                    continue
        status[i] = 1


def _obstacles(table: RouteTable, fleet: _Fleet, act: np.ndarray, s: np.ndarray,
               v: np.ndarray, rank: np.ndarray, heading: np.ndarray, s_cap: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Nearest obstacle ahead of every active agent (arrays over `act`): gap (m), obstacle
    speed along the agent's heading, gap to the nearest standing physical obstacle, and
    whether the gap is to the agent's own stop line (waiting there for someone).

    Bodies are sampled along each agent's axis (spacing <= 0.8 m) now and at the prediction
    horizons TAUS_S; corridors are sampled along each agent's route ahead of its front.
    """
    gap = np.full(act.size, np.inf)
    v_obst = np.zeros(act.size)
    at_line = np.zeros(act.size, dtype=bool)
    pairs = _blocking_pairs(table, fleet, act, s, v, rank, heading, s_cap)
    if pairs is None:
        return gap, v_obst, gap.copy(), at_line
    me, other, g, physical, cos_h, to_own_line = _pair_gaps(fleet, s, v, *pairs)
    # where each agent will stop at most, for the others' predictions: physical obstacles only
    # (an agent waiting for someone's predicted path is expected to go once it is clear),
    # and only standing ones: a moving obstacle will have moved on
    phys_gap = np.full(act.size, np.inf)
    standing = physical & (v[other] < 0.3)
    np.minimum.at(phys_gap, np.searchsorted(act, me[standing]), g[standing])
    order = np.lexsort((g, me))
    me, other, g, physical, cos_h, to_own_line = (
        x[order] for x in (me, other, g, physical, cos_h, to_own_line))
    first = np.concatenate([[True], me[1:] != me[:-1]])
    slot = np.searchsorted(act, me[first])
    gap[slot] = g[first]
    follows = physical[first] & (cos_h[first] >= np.cos(SAME_DIRECTION_RAD))
    v_obst[slot] = np.where(follows, v[other[first]] * cos_h[first], 0.0)
    at_line[slot] = to_own_line[first]
    return gap, v_obst, phys_gap, at_line


def _bodies(table: RouteTable, fleet: _Fleet, act: np.ndarray, s: np.ndarray, v: np.ndarray,
            s_cap: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Body samples of the active agents now and at their prediction horizons: owner (B,),
    horizon (B,) in s, unit direction (B, 2) and position (B, 2)."""
    route, length, width = fleet.route, fleet.length, fleet.width
    acc_max, v0 = fleet.acc_max, fleet.v0
    # (standing agents only if nothing holds them: they are about to go)
    free = (v[act] > 0.05) | (s_cap[act] - s[act] > 0.5)
    n_tau = np.where(free, fleet.n_tau[act], 1)
    owner = np.repeat(act, n_tau)
    tau = TAUS_S[_within_group(n_tau)]
    # predicted along the own route, but never past where the agent is about to stop
    # (accelerating towards the desired speed: a car waiting at a green light is about to go)
    advance = np.minimum(v[owner] * tau + 0.5 * acc_max[owner] * tau**2, v0[owner] * tau)
    s_pred = np.where(tau > 0.0, np.minimum(s[owner] + advance,
                                            np.maximum(s_cap[owner], s[owner])), s[owner])
    centre, direction = table.lookup(route[owner], s_pred)
    reps = fleet.body_count[owner]
    b_owner = np.repeat(owner, reps)
    b_tau = np.repeat(tau, reps)
    rep_b = np.repeat(reps, reps)
    local = np.where(rep_b > 1, _within_group(reps) / np.maximum(rep_b - 1, 1) - 0.5, 0.0)
    extent = (length[b_owner] - width[b_owner])
    b_dir = np.repeat(direction, reps, axis=0)
    b_xy = np.repeat(centre, reps, axis=0) + (local * extent)[:, None] * b_dir
    return b_owner, b_tau, b_dir, b_xy


def _blocking_pairs(table: RouteTable, fleet: _Fleet, act: np.ndarray, s: np.ndarray,
                    v: np.ndarray, rank: np.ndarray, heading: np.ndarray, s_cap: np.ndarray
                    ) -> tuple[np.ndarray, ...] | None:
    """(agent, obstacle agent, corridor distance, physical?, cos of the heading difference) of
    every body sample in an agent's corridor that blocks it, arrays (P,); None when none does."""
    route, length, width = fleet.route, fleet.length, fleet.width
    b_owner, b_tau, b_dir, b_xy = _bodies(table, fleet, act, s, v, s_cap)
    # corridors
    counts = np.floor(fleet.lookahead[act] / fleet.corr_step[act]).astype(int) + 1
    c_owner = np.repeat(act, counts)
    c_dist = _within_group(counts) * np.repeat(fleet.corr_step[act], counts)
    c_xy, c_dir = table.lookup(route[c_owner], s[c_owner] + 0.5 * length[c_owner] + c_dist)
    pairs = cKDTree(c_xy).sparse_distance_matrix(cKDTree(b_xy), 3.3, output_type="ndarray")
    if pairs.size == 0:
        return None
    ci, bj, dist = pairs["i"], pairs["j"], pairs["v"]
    me, other = c_owner[ci], b_owner[bj]
    thr = 0.5 * (width[me] + width[other]) + MARGIN_M[fleet.kind[me], fleet.kind[other]]
    cos_h = np.sum(heading[me] * heading[other], axis=1)
    # do the two paths cross where they meet? (judged there, not on the current headings: a
    # car about to turn across a bike lane is still parallel to the cyclist beside it)
    crossing = np.sum(c_dir[ci] * b_dir[bj], axis=1) < np.cos(SAME_DIRECTION_RAD)
    physical = b_tau[bj] == 0.0
    keep = (me != other) & (dist < thr) & (physical | (crossing & (rank[other] > rank[me])))
    me, other, cd, physical, cos_h = me[keep], other[keep], c_dist[ci[keep]], physical[keep], \
        cos_h[keep]
    if me.size == 0:
        return None
    # mutual physical blocking: the higher-ranked of the two goes first
    n_all = len(v)
    mutual = physical & np.isin(other * n_all + me, (me * n_all + other)[physical]) & (
        rank[me] > rank[other])
    return tuple(x[~mutual] for x in (me, other, cd, physical, cos_h))


def _pair_gaps(fleet: _Fleet, s: np.ndarray, v: np.ndarray, me: np.ndarray, other: np.ndarray,
               cd: np.ndarray, physical: np.ndarray, cos_h: np.ndarray) -> tuple[np.ndarray, ...]:
    """The gap each blocking pair leaves, moved back to before a crosswalk or to the own stop
    line where the agent must wait there; returns the pairs with gap and to-own-line flag."""
    length, width = fleet.length, fleet.width
    to_line = np.where(np.isfinite(fleet.s_stop), fleet.s_stop - s - 0.5 * length, -1.0)
    clear_dist = np.where(fleet.is_ped, -np.inf, fleet.s_cross_end - s + 0.5 * length + 1.0)
    g = np.maximum(cd - 0.5 * width[other], 0.05)
    # pedestrians are given way to before the crosswalk, not on it (where the waiting vehicle
    # would stand in their way)
    front = s[me] + 0.5 * length[me]
    entry = fleet.crosswalk_entry[me]
    ahead = (entry <= (front + cd)[:, None]) & (entry > front[:, None] - 0.1)
    before_cw = np.where(ahead, entry, -np.inf).max(axis=1) - front
    g = np.where(fleet.is_ped[other] & np.isfinite(before_cw),
                 np.minimum(g, np.maximum(before_cw, 0.05)), g)
    # wait behind the own stop line, not inside the intersection where waiting blocks others,
    # when yielding to someone's predicted path, or when a slow or standing obstacle leaves no
    # room to clear the intersection ("don't block the box")
    line = to_line[me]
    blocks_box = physical & (cd < clear_dist[me]) & (v[other] * np.maximum(cos_h, 0.0) < 2.0)
    to_own_line = (~physical | blocks_box) & (line > 0.0) & (line < g)
    g = np.where(to_own_line, line, g)
    return me, other, g, physical, cos_h, to_own_line


def _within_group(counts: np.ndarray) -> np.ndarray:
    """[0..c0-1, 0..c1-1, ...] for group sizes `counts`."""
    starts = np.cumsum(counts) - counts
    return np.arange(int(counts.sum())) - np.repeat(starts, counts)


def _stack_records(records: list[tuple[np.ndarray, ...]], ego: np.ndarray) -> SimResult:
    agent = np.concatenate([r[0] for r in records]).astype(np.int64)
    time_s = np.concatenate([r[1] for r in records])
    xy = np.concatenate([r[2] for r in records])
    yaw = np.concatenate([r[3] for r in records])
    speed = np.concatenate([r[4] for r in records])
    order = np.lexsort((time_s, agent))
    return SimResult(agent[order], time_s[order], xy[order], yaw[order], speed[order],
                     *ego.T.copy())


def ego_arc_length(result: SimResult, time_s: np.ndarray) -> np.ndarray:
    """The ego's arc length along its route at any times within the recorded steps."""
    k = np.clip(np.searchsorted(result.ego_time_s, time_s + 1e-9, side="right") - 1, 0,
                len(result.ego_time_s) - 1)
    tau = np.maximum(time_s - result.ego_time_s[k], 0.0)
    v, a = result.ego_v_mps[k], result.ego_a_mps2[k]
    # the integrator stops a braking vehicle at v = 0 instead of reversing
    t_stop = np.where(a < 0.0, v / np.maximum(-a, 1e-9), np.inf)
    tau = np.minimum(tau, t_stop)
    return result.ego_s_m[k] + v * tau + 0.5 * a * tau**2
