"""Conditions and triggers while the storyboard runs, restated from esmini (`OSCCondition.cpp`).

- A trigger is true when any condition group is; a group when all its conditions are (once one
  is false, only conditions with a delay are still evaluated, so their timers keep running).
- Rules compare with esmini's tolerance of 1e-6 (`greaterThan`: a > b + 1e-6, `equalTo`: |a - b| < 1e-6).
- Edges: `none` is the value; `rising` / `falling` / `risingOrFalling` compare with the value of
  the previous evaluation and are false at a condition's first evaluation (and at the first after
  its trigger fired, which re-arms every condition of the trigger).
- Delays: the value a condition reports at time t is its edge value at t - delay; a true value
  registered in the window since the last evaluation is not lost (esmini's `ConditionDelay`).
- Entity conditions hold for `any` or `all` triggering entities; inactive entities are skipped; a
  headway or time to collision that is undefined (behind, standing, not closing) is false, an
  undefined distance is 1e10.
"""

from __future__ import annotations

import math
from typing import Protocol

from avsim.scenario.openscenario.measures import distance, distance_to_point, time_headway, time_to_collision
from avsim.scenario.openscenario.model import (
    ByEntity,
    Condition,
    ConditionEdge,
    DistanceCondition,
    ElementState,
    EntityConditionKind,
    Position,
    ReachPositionCondition,
    RelativeDistanceCondition,
    Rule,
    SimulationTimeCondition,
    SpeedCondition,
    SpeedDirection,
    StoryboardElementStateCondition,
    TimeHeadwayCondition,
    TimeToCollisionCondition,
    Trigger,
    TriggeringRule,
)
from avsim.scenario.openscenario.roads import Roads
from avsim.scenario.openscenario.world import EntityState, Placement

SMALL = 1e-6
LARGE = 1e10


class Context(Protocol):
    """What conditions read from the running engine."""

    roads: Roads

    def state(self, name: str) -> EntityState: ...

    def resolve(self, position: Position) -> Placement: ...


def compare(a: float, b: float, rule: Rule) -> bool:
    """esmini's `EvaluateRule` for numbers."""
    if rule is Rule.GREATER_THAN:
        return a > b + SMALL
    if rule is Rule.GREATER_OR_EQUAL:
        return a >= b - SMALL
    if rule is Rule.LESS_THAN:
        return a < b - SMALL
    if rule is Rule.LESS_OR_EQUAL:
        return a <= b + SMALL
    near = a == b or (b - SMALL < a < b + SMALL)
    return near if rule is Rule.EQUAL_TO else not near


class DelayHistory:
    """esmini's `ConditionDelay` for a simulation whose time never goes back."""

    def __init__(self) -> None:
        self.values: list[tuple[float, bool]] = []
        self.index = 0

    def register(self, time: float, value: bool) -> None:
        if not self.values:
            self.values.append((time, value))
        elif time < self.values[-1][0] + SMALL:
            if value != self.values[-1][1]:
                if len(self.values) == 1:
                    self.values[0] = (self.values[0][0], value)
                else:
                    self.values.pop()
                    self.index = min(self.index, len(self.values))
        elif value != self.values[-1][1]:
            self.values.append((time, value))

    def value_at(self, time: float) -> bool:
        if not self.values:
            return False
        if self.index >= len(self.values):
            return self.values[-1][1]
        if time > self.values[self.index][0] - SMALL:
            out = False
            while self.index < len(self.values) and time > self.values[self.index][0] - SMALL:
                out |= self.values[self.index][1]
                self.index += 1
            return out
        return self.values[self.index - 1][1] if self.index > 0 else False

    def reset(self) -> None:
        self.values.clear()
        self.index = 0


class RuntimeCondition:
    """One condition: its check, edge state and delay (see the module docstring).

    Args:
        condition: the parsed condition.
        ctx: the engine.
    """

    def __init__(self, condition: Condition, ctx: Context) -> None:
        self.condition = condition
        self.ctx = ctx
        self.last_result = False
        self.armed = False  # evaluated at least once since the trigger last fired (esmini: state >= EVALUATED)
        self.value = False
        self.history = DelayHistory()
        self.changes: list[tuple[ElementState, ElementState | None]] = []  # (state, transition) of a watched element
        self.latest: tuple[ElementState | None, ElementState | None] = (None, None)

    def evaluate(self, time: float) -> bool:
        result = self.check(time)
        edge = self.condition.edge
        if edge is ConditionEdge.NONE:
            current = result
        elif not self.armed:
            current = False
        elif edge is ConditionEdge.RISING:
            current = result and not self.last_result
        elif edge is ConditionEdge.FALLING:
            current = self.last_result and not result
        else:
            current = result != self.last_result
        self.last_result, self.armed = result, True
        self.history.register(time, current)
        self.value = self.history.value_at(time - self.condition.delay)
        return self.value

    def reset(self) -> None:
        """esmini's `OSCCondition::Reset` (a maneuver group or event about to run again)."""
        self.history.reset()
        self.value = False

    # ---- checks ------------------------------------------------------------------------------
    def check(self, time: float) -> bool:
        kind = self.condition.kind
        if isinstance(kind, SimulationTimeCondition):
            return compare(time, kind.value, kind.rule)
        if isinstance(kind, StoryboardElementStateCondition):
            return self._element_state(kind.state)
        return self._by_entity(kind)

    def _element_state(self, target: ElementState) -> bool:
        state, _ = self.latest
        self.latest = (state, None)  # a transition holds for one evaluation only
        if not self.changes:
            return _matches(self.latest, target)
        result = any(_matches(c, target) for c in self.changes)
        self.latest = self.changes[-1]
        self.changes.clear()
        return result

    def _by_entity(self, kind: ByEntity) -> bool:
        result = False
        for name in kind.entities:
            st = self.ctx.state(name)
            result = False
            if not st.active:
                continue
            measured = self._measure(st, kind.condition)
            if measured is None:
                continue
            result = measured
            if (not result and kind.rule is TriggeringRule.ALL) or (result and kind.rule is TriggeringRule.ANY):
                break
        return result

    def _measure(self, st: EntityState, c: EntityConditionKind) -> bool | None:
        """The condition for one triggering entity (None: undefined, skipped)."""
        roads = self.ctx.roads
        if isinstance(c, SpeedCondition):
            long, lat = st.velocity_long_lat
            value = {None: st.speed, SpeedDirection.LONGITUDINAL: long, SpeedDirection.LATERAL: lat, SpeedDirection.VERTICAL: st.vz}[c.direction]
            return compare(value, c.value, c.rule)
        if isinstance(c, ReachPositionCondition):
            p = self.ctx.resolve(c.position)
            return math.hypot(p.x - st.x, p.y - st.y) < c.tolerance
        if isinstance(c, DistanceCondition):
            p = self.ctx.resolve(c.position)
            d = distance_to_point(roads, st, p.x, p.y, c.coordinate_system, c.distance_type, c.freespace)
            return compare(LARGE if d is None else abs(d), c.value, c.rule)
        if isinstance(c, RelativeDistanceCondition):
            other = self.ctx.state(c.entity)
            if not other.active:
                return None
            d = distance(roads, st, other, c.coordinate_system, c.distance_type, c.freespace)
            return compare(LARGE if d is None else abs(d), c.value, c.rule)
        if isinstance(c, TimeHeadwayCondition):
            other = self.ctx.state(c.entity)
            if not other.active:
                return None
            hwt = time_headway(distance(roads, st, other, c.coordinate_system, c.distance_type, c.freespace), st.speed)
            return None if hwt is None else compare(hwt, c.value, c.rule)
        assert isinstance(c, TimeToCollisionCondition)
        return self._ttc(st, c)

    def _ttc(self, st: EntityState, c: TimeToCollisionCondition) -> bool | None:
        roads = self.ctx.roads
        if c.entity is not None:
            other = self.ctx.state(c.entity)
            if not other.active:
                return None
            ttc = time_to_collision(distance(roads, st, other, c.coordinate_system, c.distance_type, c.freespace), st, other)
        else:
            assert c.position is not None
            p = self.ctx.resolve(c.position)
            ttc = time_to_collision(distance_to_point(roads, st, p.x, p.y, c.coordinate_system, c.distance_type, c.freespace), st, None)
        return None if ttc is None else compare(ttc, c.value, c.rule)


def _matches(change: tuple[ElementState | None, ElementState | None], target: ElementState) -> bool:
    state, transition = change
    if target in (ElementState.STANDBY, ElementState.RUNNING, ElementState.COMPLETE):
        return state is target
    return transition is target


class RuntimeTrigger:
    """A start or stop trigger (see the module docstring).

    Args:
        trigger: the parsed trigger.
        ctx: the engine.
    """

    def __init__(self, trigger: Trigger, ctx: Context) -> None:
        self.default = trigger.default
        self.groups = [[RuntimeCondition(c, ctx) for c in g] for g in trigger.groups]

    @property
    def conditions(self) -> list[RuntimeCondition]:
        return [c for g in self.groups for c in g]

    def evaluate(self, time: float) -> bool:
        if not self.groups:
            return self.default
        result = False
        for group in self.groups:
            ok = True
            for c in group:
                if ok or c.condition.delay > 0:
                    ok &= c.evaluate(time)
            result |= ok
        if result:
            for c in self.conditions:
                c.armed = False
        return result

    def reset(self) -> None:
        for c in self.conditions:
            c.reset()
