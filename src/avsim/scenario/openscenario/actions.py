"""Running actions on entities, restated from esmini (`OSCPrivateAction.cpp`, `OSCGlobalAction.cpp`).

- SpeedAction: from the current speed to the target along the transition (a distance becomes the
  time 2 d / |v0 + v1|); the target is capped at the entity's maximum speed and the shape slowed
  so the rate never exceeds its maximum acceleration / deceleration (esmini's `SetMaxRate`);
  each step the speed is the shape at the step's end, an acceleration beyond the limits clamped;
  after the transition it holds the target (a relative `continuous` target keeps following).
- LaneChangeAction: the entity moves to the target lane at once and its offset from that lane's
  centre goes from where it stands to `targetLaneOffset` along the shape: over time, the lateral
  step is rate x dt and the longitudinal step sqrt(step^2 - lateral^2) (the speed is the speed of
  travel, not along the lane); over distance, the shape runs on the distance along the lane. Its
  heading turns with the lateral rate; the action ends at the shape's end.
- LaneOffsetAction: the offset follows the shape over the time implied by the maximum lateral
  acceleration (0.5 m/s^2 when absent); the entity keeps its speed along the lane.
- FollowTrajectoryAction: the entity is placed on the polyline (vertices resolved when it starts):
  by time (absolute: simulation time; relative: from the start) scaled and offset by `Timing`, or
  moved along it by its own speed (`TimeReference/None`); it ends at the end of the trajectory. An
  entity added with an absolutely timed trajectory whose first vertex lies since the previous step
  is recorded from that vertex (it appeared between steps).
- AssignRouteAction: the roads through the waypoints (shortest lane paths between them) guide the
  entity's choices at junctions. TeleportAction: placed at once. Add/DeleteEntityAction: the entity
  appears at the position / disappears.

Offsets are handled "left of travel" (offset along +t times the travel direction), so they keep
their meaning where a road continues into one drawn the other way (esmini's lane-sign-agnostic values).
"""

from __future__ import annotations

import heapq
import math
from typing import Protocol

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.maps.opendrive.network import LaneKey
from avsim.scenario.openscenario.dynamics import SMALL, Transition
from avsim.scenario.openscenario.model import (
    AbsoluteSpeed,
    AddEntityAction,
    AssignRouteAction,
    DeleteEntityAction,
    DynamicsDimension,
    DynamicsShape,
    FollowTrajectoryAction,
    LaneChangeAction,
    LaneOffsetAction,
    Position,
    RelativeSpeed,
    SpeedAction,
    TeleportAction,
    Vertex,
)
from avsim.scenario.openscenario.roads import LaneCoord, Roads, wrap
from avsim.scenario.openscenario.world import EntityState, Mover, Placement

DEFAULT_MAX_LATERAL_ACC = 0.5  # esmini's default for LaneOffsetAction
SAME_TIME_S = 2.5e-10  # recordings are timed in whole nanoseconds: a vertex this close to a step is that step's time


class Context(Protocol):
    roads: Roads
    mover: Mover

    def state(self, name: str) -> EntityState: ...

    def resolve(self, position: Position) -> Placement: ...

    def placed(self, st: EntityState) -> None: ...

    def record(self, st: EntityState, time: float, where: Placement) -> None: ...

    @property
    def previous_time(self) -> float: ...


class RuntimeAction:
    """One action on one entity (or a global one): `start`, then `step` until `done`."""

    long = False  # the control domains it takes (a new action on a domain ends the one running there;
    lat = False  # esmini's domain masks: speed longitudinal, lane change and offset lateral, trajectory and teleport both)

    def __init__(self, ctx: Context, actor: EntityState | None) -> None:
        self.ctx = ctx
        self.actor = actor
        self.done = False
        self.in_tree = False  # started by a storyboard event (False: an Init action)
        self.samples: list[tuple[float, Placement]] = []  # poses inside the last step (timed trajectories)

    def start(self, time: float) -> None:
        return None

    def step(self, time: float, dt: float) -> None:
        self.done = True

    @property
    def st(self) -> EntityState:
        assert self.actor is not None
        return self.actor


class Speed(RuntimeAction):
    long = True

    def __init__(self, ctx: Context, actor: EntityState, action: SpeedAction) -> None:
        super().__init__(ctx, actor)
        self.action = action
        d = action.dynamics
        self.tr = Transition(d.shape, d.dimension, d.value)
        self.reached = False

    def target(self) -> float:
        t = self.action.target
        if isinstance(t, AbsoluteSpeed):
            value = t.value
        else:
            ref = self.ctx.state(t.entity).speed
            value = ref * t.value if t.factor else ref + t.value
        limit = self.st.entity.performance.max_speed
        return max(-limit, min(limit, value))

    def start(self, time: float) -> None:
        st, tr = self.st, self.tr
        v0, v1 = st.speed, self.target()
        if tr.dimension is DynamicsDimension.DISTANCE:
            dist = tr.value
            if abs(v1 - v0) < SMALL:
                tr.range = 0.0
            elif abs(v0) > SMALL and abs(v1) > SMALL and (v0 < 0) != (v1 < 0):
                d0 = abs(v0**2 / (v0**2 + v1**2)) * dist
                tr.range = 2 * d0 / abs(v0) + 2 * (dist - d0) / abs(v1)
            else:
                tr.range = 2 * dist / abs(v0 + v1)
            tr.dimension = DynamicsDimension.TIME
        tr.set_values(v0, v1)
        perf = st.entity.performance
        tr.limit_slope(perf.max_acceleration if v1 > v0 else perf.max_deceleration)
        st.speed = tr.value_at()

    def step(self, time: float, dt: float) -> None:
        st, tr, perf = self.st, self.tr, self.st.entity.performance
        target = self.target()
        if isinstance(self.action.target, RelativeSpeed):
            tr.target = target
        if tr.range > 0 and tr.param > tr.range - SMALL:
            acc = (target - st.speed) / dt if dt > SMALL else 0.0
            new = st.speed + max(-perf.max_deceleration, min(perf.max_acceleration, acc)) * dt
        else:
            tr.step(dt)
            new = tr.value_at()
            need = (new - st.speed) / dt if dt > SMALL else 0.0
            if need > perf.max_acceleration + SMALL or need < -(perf.max_deceleration + SMALL):
                acc = max(-perf.max_deceleration, min(perf.max_acceleration, need))
                new = st.speed + acc * dt
                tr.step(-(dt - (new - st.speed) / need))
        new = max(-perf.max_speed, min(perf.max_speed, new))
        if tr.param > tr.range - SMALL and abs(new - tr.target) < SMALL:
            self.reached = True
            new = target
        st.speed = new
        t = self.action.target
        if self.reached and not (isinstance(t, RelativeSpeed) and t.continuous):
            self.done = True


class LaneChange(RuntimeAction):
    lat = True

    def __init__(self, ctx: Context, actor: EntityState, action: LaneChangeAction) -> None:
        super().__init__(ctx, actor)
        self.action = action
        d = action.dynamics
        self.tr = Transition(d.shape, d.dimension, d.value)

    def _target_lane(self, coord: LaneCoord) -> int:
        a = self.action
        if a.lane is not None:
            return a.lane
        assert a.entity is not None
        ref = self.ctx.state(a.entity)
        if ref.coord is None:
            raise AvsimValueError(f"LaneChangeAction: the reference entity {ref.name} is not on a lane")
        forward = math.cos(ref.h - self.ctx.roads.road_heading(ref.coord.road, ref.coord.s)) >= 0
        lane = ref.coord.lane + a.relative * (1 if forward else -1)
        if lane == 0 or (lane > 0) != (ref.coord.lane > 0):
            lane = (1 if lane - ref.coord.lane >= 0 else -1) * (abs(lane) + 1)
        return lane

    def start(self, time: float) -> None:
        st, roads = self.st, self.ctx.roads
        if st.coord is None:
            raise AvsimValueError(f"LaneChangeAction: {st.name} is not on a lane")
        c = st.coord
        lane = self._target_lane(c)
        if not roads.has_lane(c.road, lane, c.s):
            raise AvsimValueError(f"LaneChangeAction: road {c.road} has no lane {lane} at s={c.s:.2f} for {st.name}")
        t_now = roads.centre_t(c.road, c.lane, c.s) + c.offset
        self.coord = LaneCoord(c.road, lane, c.s, t_now - roads.centre_t(c.road, lane, c.s), c.sdir)
        st.coord, st.h_rel = self.coord, 0.0
        self.tr.set_values(self.coord.offset * c.sdir, self.action.target_offset * c.sdir)

    def step(self, time: float, dt: float) -> None:
        st, tr = self.st, self.tr
        st.moved_lat = st.moved_long = True
        if abs(st.speed) < SMALL or dt <= 0:
            return
        rate = tr.slope()
        step_len = abs(st.speed) * dt
        sign_v = 1.0 if st.speed >= 0 else -1.0
        sign_rate = 1.0 if rate >= 0 else -1.0
        if tr.dimension is DynamicsDimension.DISTANCE:
            delta_long = math.sqrt(step_len**2 / (1.0 + rate**2))
            tr.step(delta_long)
            lateral, heading = tr.value_at(), math.atan(rate)
        else:
            delta_lat = dt * abs(rate)
            delta_long = math.sqrt(step_len**2 - min(delta_lat, step_len) ** 2)
            if delta_lat < step_len + SMALL:
                tr.step(dt)
                lateral, heading = tr.value_at(), math.atan2(sign_v * sign_rate * delta_lat, delta_long)
            else:
                tr.step(step_len * tr.range / max(abs(tr.delta), 1e-12))
                lateral, heading = tr.value_at(DynamicsShape.LINEAR), sign_v * sign_rate * (math.pi / 2 - SMALL)
        if tr.is_step:
            delta_long = step_len
        c = st.coord or self.coord
        here = LaneCoord(c.road, c.lane, c.s, lateral * c.sdir, c.sdir)
        moved, ended = self.ctx.roads.advance(here, sign_v * delta_long, st.route)
        st.end_of_road = ended
        passed = tr.param > 0 and (lateral - tr.target >= 0) != (tr.start - tr.target >= 0)
        self.done = tr.done or abs(lateral - tr.target) < SMALL or passed or ended
        self.ctx.mover.set_lane(st, moved, 0.0 if self.done else wrap(heading))


class LaneOffset(RuntimeAction):
    lat = True

    def __init__(self, ctx: Context, actor: EntityState, action: LaneOffsetAction) -> None:
        super().__init__(ctx, actor)
        self.action = action
        self.tr = Transition(action.shape, DynamicsDimension.TIME, 0.0)

    def _target(self, c: LaneCoord) -> float:
        """The target offset, left of travel."""
        a = self.action
        if a.entity is None:
            return a.value * c.sdir
        ref = self.ctx.state(a.entity)
        if ref.coord is None:
            raise AvsimValueError(f"LaneOffsetAction: the reference entity {ref.name} is not on a lane")
        roads = self.ctx.roads
        forward = math.cos(ref.h - roads.road_heading(ref.coord.road, ref.coord.s)) >= 0
        t_ref = roads.centre_t(ref.coord.road, ref.coord.lane, ref.coord.s) + ref.coord.offset + a.value * (1 if forward else -1)
        return (t_ref - roads.centre_t(c.road, c.lane, c.s)) * c.sdir

    def start(self, time: float) -> None:
        c = self.st.coord
        if c is None:
            raise AvsimValueError(f"LaneOffsetAction: {self.st.name} is not on a lane")
        tr = self.tr
        tr.set_values(c.offset * c.sdir, self._target(c))
        tr.range = tr.range_for_peak_second(self.action.max_lateral_acc or DEFAULT_MAX_LATERAL_ACC)

    def step(self, time: float, dt: float) -> None:
        st, tr = self.st, self.tr
        c = st.coord
        if c is None:
            self.done = True
            return
        st.moved_lat = True
        lateral = tr.value_at()
        finished = tr.done or abs(lateral - tr.target) < SMALL or (tr.param > 0 and (lateral - tr.target >= 0) != (tr.start - tr.target >= 0))
        if finished:
            self.ctx.mover.set_lane(st, LaneCoord(c.road, c.lane, c.s, tr.target * c.sdir, c.sdir), 0.0)
            self.done = not self.action.continuous
        else:
            angle = math.atan(tr.slope() / (st.speed if abs(st.speed) > SMALL else SMALL))
            self.ctx.mover.set_lane(st, LaneCoord(c.road, c.lane, c.s, lateral * c.sdir, c.sdir), angle)
        tr.step(dt)


class Teleport(RuntimeAction):
    lat = long = True

    def __init__(self, ctx: Context, actor: EntityState, action: TeleportAction) -> None:
        super().__init__(ctx, actor)
        self.action = action

    def start(self, time: float) -> None:
        self.ctx.mover.place(self.st, self.ctx.resolve(self.action.position))
        self.st.moved_lat = self.st.moved_long = True
        self.ctx.placed(self.st)


class AssignRoute(RuntimeAction):
    def __init__(self, ctx: Context, actor: EntityState, action: AssignRouteAction) -> None:
        super().__init__(ctx, actor)
        self.action = action

    def start(self, time: float) -> None:
        roads = self.ctx.roads
        keys: list[LaneKey] = []
        for w in self.action.route.waypoints:
            p = self.ctx.resolve(w.position)
            if p.coord is None:
                raise AvsimValueError(f"AssignRouteAction {self.action.route.name}: a waypoint at ({p.x:.1f}, {p.y:.1f}) is on no lane")
            keys.append(roads.key(p.coord.road, p.coord.lane, p.coord.s))
        path = [keys[0]]
        for a, b in zip(keys, keys[1:]):
            path += shortest_lane_path(roads, a, b)[1:]
        out: list[str] = []
        for k in path:
            if not out or out[-1] != k.road:
                out.append(k.road)
        self.st.route = out


def shortest_lane_path(roads: Roads, a: LaneKey, b: LaneKey) -> list[LaneKey]:
    """Lanes from `a` to `b` along successors and changes to a neighbouring lane of the same
    section (Dijkstra on lane-section lengths; a change costs 1 m). AvsimValueError when unreachable."""
    net = roads.net

    def length(k: LaneKey) -> float:
        sec = net.roads[k.road].sections[k.section]
        return sec.end_s - sec.s

    dist: dict[LaneKey, float] = {a: 0.0}
    prev: dict[LaneKey, LaneKey] = {}
    heap: list[tuple[float, LaneKey]] = [(0.0, a)]
    while heap:
        d, k = heapq.heappop(heap)
        if k == b:
            break
        if d > dist.get(k, math.inf):
            continue
        sec = net.roads[k.road].sections[k.section]
        side = [LaneKey(k.road, k.section, j) for j in (k.lane - 1, k.lane + 1) if j != 0 and (j > 0) == (k.lane > 0) and sec.lane(j) is not None]
        for n, cost in [(n, length(k)) for n in net.successors(k)] + [(n, 1.0) for n in side]:
            if d + cost < dist.get(n, math.inf):
                dist[n], prev[n] = d + cost, k
                heapq.heappush(heap, (d + cost, n))
    if b not in dist:
        raise AvsimValueError(f"AssignRouteAction: no lane path from road {a.road} lane {a.lane} to road {b.road} lane {b.lane}")
    path = [b]
    while path[-1] != a:
        path.append(prev[path[-1]])
    return path[::-1]


class AddEntity(RuntimeAction):
    def __init__(self, ctx: Context, action: AddEntityAction) -> None:
        super().__init__(ctx, ctx.state(action.entity))
        self.action = action

    def start(self, time: float) -> None:
        self.st.active, self.st.added_at = True, time
        self.ctx.mover.place(self.st, self.ctx.resolve(self.action.position))
        self.st.moved_lat = self.st.moved_long = True
        self.ctx.placed(self.st)


class DeleteEntity(RuntimeAction):
    def __init__(self, ctx: Context, action: DeleteEntityAction) -> None:
        super().__init__(ctx, ctx.state(action.entity))

    def start(self, time: float) -> None:
        self.st.active = False


def _vertex_time(v: Vertex) -> float:
    return 0.0 if v.time is None else v.time


class FollowTrajectory(RuntimeAction):
    lat = long = True

    def __init__(self, ctx: Context, actor: EntityState, action: FollowTrajectoryAction) -> None:
        super().__init__(ctx, actor)
        self.action = action

    def start(self, time: float) -> None:
        """Freeze the polyline: resolve its vertices now (relative ones against the entities' poses)."""
        places = [self.ctx.resolve(v.position) for v in self.action.trajectory.vertices]
        self.xyz = np.array([[p.x, p.y, p.z] for p in places])
        explicit = [_explicit_h(v.position) for v in self.action.trajectory.vertices]
        self.h = np.array([p.h if e else math.nan for p, e in zip(places, explicit)])
        self.p = np.array([p.p for p in places])
        self.r = np.array([p.r for p in places])
        seg = np.linalg.norm(np.diff(self.xyz[:, :2], axis=0), axis=1)
        self.s = np.r_[0.0, np.cumsum(seg)]
        self.times = np.array([_vertex_time(v) for v in self.action.trajectory.vertices])
        self.start_time = time
        timing = self.action.timing
        self.traj_time = float(self.times[0])
        self.s_now = self.action.initial_distance_offset
        if timing is not None and timing.absolute:
            self.traj_time = time * timing.scale
        self._place(self._at_s(self.s_now) if timing is None else self._at_time(self.traj_time + (timing.offset if timing else 0.0)))
        self.ctx.placed(self.st)
        if timing is not None and timing.absolute and self.st.added_at == time:
            self._appeared_between_steps(time, timing.scale, timing.offset)

    def _appeared_between_steps(self, time: float, scale: float, offset: float) -> None:
        """An entity added together with an absolutely timed trajectory whose first vertex falls since the
        previous step appeared at that vertex's time: its vertices up to now are recorded (as the
        vertices a trajectory passes between steps are)."""
        since = self.ctx.previous_time
        for tau in self.times:
            at = (float(tau) - offset) / scale
            if since + SAME_TIME_S < at < time - SAME_TIME_S:
                self.ctx.record(self.st, at, self._at_time(float(tau)))

    # ---- the polyline ------------------------------------------------------------------------
    def _at_s(self, s: float) -> Placement:
        s = min(max(s, 0.0), float(self.s[-1]))
        k = int(np.clip(np.searchsorted(self.s, s, side="right") - 1, 0, len(self.s) - 2))
        u = (s - self.s[k]) / max(float(self.s[k + 1] - self.s[k]), 1e-12)
        return self._blend(k, u)

    def _at_time(self, tau: float) -> Placement:
        tau = min(max(tau, float(self.times[0])), float(self.times[-1]))
        k = int(np.clip(np.searchsorted(self.times, tau, side="right") - 1, 0, len(self.times) - 2))
        span = float(self.times[k + 1] - self.times[k])
        u = (tau - self.times[k]) / span if span > 1e-12 else 1.0
        return self._blend(k, u)

    def _blend(self, k: int, u: float) -> Placement:
        p = self.xyz[k] + u * (self.xyz[k + 1] - self.xyz[k])
        if not (math.isnan(self.h[k]) or math.isnan(self.h[k + 1])):
            h = self.h[k] + u * wrap(float(self.h[k + 1] - self.h[k]))
        else:
            d = self.xyz[k + 1, :2] - self.xyz[k, :2]
            h = math.atan2(d[1], d[0]) if np.hypot(*d) > 1e-9 else self.st.h
        pitch = self.p[k] + u * wrap(float(self.p[k + 1] - self.p[k]))
        roll = self.r[k] + u * wrap(float(self.r[k + 1] - self.r[k]))
        return Placement(float(p[0]), float(p[1]), float(p[2]), wrap(float(h)), float(pitch), float(roll))

    def _place(self, p: Placement) -> None:
        self.ctx.mover.set_free(self.st, p.x, p.y, p.z, p.h, p.p, p.r)

    # ---- stepping ----------------------------------------------------------------------------
    def step(self, time: float, dt: float) -> None:
        st = self.st
        st.moved_lat = st.moved_long = True
        timing = self.action.timing
        self.samples = []
        if timing is None:
            self.s_now += st.speed * dt
            self._place(self._at_s(self.s_now))
            self.done = dt > 0 and not self.action.trajectory.closed and self.s_now >= float(self.s[-1]) - SMALL
            return
        old = self.traj_time
        self.traj_time = (time + dt) * timing.scale if timing.absolute else self.traj_time + timing.scale * dt
        tau0, tau1 = old + timing.offset, self.traj_time + timing.offset
        for tau in self.times[(self.times > tau0 + SAME_TIME_S * timing.scale) & (self.times < tau1 - SAME_TIME_S * timing.scale)]:
            self.samples.append((time + (float(tau) - tau0) / timing.scale, self._at_time(float(tau))))
        here = self._at_time(tau1)
        if dt > SMALL and tau1 <= self.times[-1] + SMALL:
            st.speed = math.hypot(here.x - st.x, here.y - st.y) / dt
        self._place(here)
        self.done = tau1 > float(self.times[-1]) - SMALL


def _explicit_h(pos: Position) -> bool:
    from avsim.scenario.openscenario.model import WorldPosition

    if isinstance(pos, WorldPosition):
        return pos.h is not None
    o = getattr(pos, "orientation", None)
    return o is not None and o.h is not None


def make_action(ctx: Context, action: object, actor: EntityState | None) -> RuntimeAction:
    """The runtime action for a parsed one (on `actor`; None for global actions)."""
    if isinstance(action, AddEntityAction):
        return AddEntity(ctx, action)
    if isinstance(action, DeleteEntityAction):
        return DeleteEntity(ctx, action)
    assert actor is not None
    table: dict[type, type] = {SpeedAction: Speed, LaneChangeAction: LaneChange, LaneOffsetAction: LaneOffset, TeleportAction: Teleport,
                               AssignRouteAction: AssignRoute, FollowTrajectoryAction: FollowTrajectory}  # fmt: skip
    return table[type(action)](ctx, actor, action)
