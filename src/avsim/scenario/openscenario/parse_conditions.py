"""Triggers and conditions: condition groups, edges and delays; the value conditions
(simulation time, storyboard element state) and entity conditions (reach position, distance,
relative distance, time headway, time to collision, speed) avsim evaluates.

The distance conditions' defaults are esmini's when the file leaves them out: coordinate system
`entity`, distance type `euclidianDistance` (1.0's `alongRoute="true"` reads as the road system).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from avsim.scenario.openscenario.model import (
    ByEntity,
    Condition,
    ConditionEdge,
    CoordinateSystem,
    DistanceCondition,
    DistanceType,
    ElementState,
    ElementType,
    EntityConditionKind,
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
    ValueConditionKind,
)
from avsim.scenario.openscenario.parse_positions import position
from avsim.scenario.openscenario.reader import XoscReader

MAX_CONDITIONS = 10_000
_DISTANCE_ALIASES = {"cartesianDistance": "euclidianDistance"}


def trigger(r: XoscReader, e: ET.Element | None, default: bool, rev_minor: int) -> Trigger | None:
    """A `StartTrigger` / `StopTrigger` (None when absent)."""
    if e is None:
        return None
    with r.at(e):
        r.only(e, {"ConditionGroup"})
        groups = []
        for g in e.findall("ConditionGroup"):
            with r.at(g):
                r.only(g, {"Condition"})
                conditions = tuple(condition(r, c, rev_minor) for c in g.findall("Condition"))
                if not conditions:
                    raise r.fail("a condition group needs at least one condition")
                groups.append(conditions)
        if sum(len(g) for g in groups) > MAX_CONDITIONS:
            raise r.fail(f"more than {MAX_CONDITIONS} conditions")
        return Trigger(tuple(groups), default)


def condition(r: XoscReader, e: ET.Element, rev_minor: int) -> Condition:
    """A `Condition` element."""
    with r.at(e):
        name = r.text(e, "name", "")
        delay = r.num(e, "delay", 0.0, nonneg=True)
        edge = r.enum(e, "conditionEdge", ConditionEdge)
        kind_el = r.choice(e)
        with r.at(kind_el):
            if kind_el.tag == "ByValueCondition":
                kind: ByEntity | ValueConditionKind = _by_value(r, kind_el)
            elif kind_el.tag == "ByEntityCondition":
                kind = _by_entity(r, kind_el, rev_minor)
            else:
                raise r.unsupported(kind_el)
        return Condition(name, delay, edge, kind)


def _by_value(r: XoscReader, e: ET.Element) -> ValueConditionKind:
    c = r.choice(e)
    with r.at(c):
        if c.tag == "SimulationTimeCondition":
            return SimulationTimeCondition(r.enum(c, "rule", Rule), r.num(c, "value"))
        if c.tag == "StoryboardElementStateCondition":
            return StoryboardElementStateCondition(r.enum(c, "storyboardElementType", ElementType), r.text(c, "storyboardElementRef"),
                                                   r.enum(c, "state", ElementState))  # fmt: skip
        raise r.unsupported(c)


def _by_entity(r: XoscReader, e: ET.Element, rev_minor: int) -> ByEntity:
    r.only(e, {"TriggeringEntities", "EntityCondition"})
    te = r.need(e, "TriggeringEntities")
    with r.at(te):
        rule = r.enum(te, "triggeringEntitiesRule", TriggeringRule)
        names = tuple(r.text(ref, "entityRef") for ref in te.findall("EntityRef"))
        if not names:
            raise r.fail("no EntityRef")
    ec = r.need(e, "EntityCondition")
    with r.at(ec):
        c = r.choice(ec)
        with r.at(c):
            return ByEntity(names, rule, _entity_condition(r, c, rev_minor))


def _frame(r: XoscReader, c: ET.Element) -> tuple[CoordinateSystem, DistanceType]:
    """The coordinate system and distance type of a distance-like condition, with esmini's defaults."""
    cs = r.enum(c, "coordinateSystem", CoordinateSystem, None) if c.get("coordinateSystem") else None
    dt = r.enum(c, "relativeDistanceType", DistanceType, None, _DISTANCE_ALIASES) if c.get("relativeDistanceType") else None
    if cs is None and dt is None and c.get("alongRoute") is not None and r.flag(c, "alongRoute"):
        cs = CoordinateSystem.ROAD
    cs = cs or CoordinateSystem.ENTITY
    dt = dt or DistanceType.EUCLIDEAN
    if cs in (CoordinateSystem.TRAJECTORY, CoordinateSystem.WORLD) and dt is not DistanceType.EUCLIDEAN:
        raise r.fail(f"coordinateSystem {cs} is not supported for lateral or longitudinal distances", "@coordinateSystem")
    return cs, dt


def _entity_condition(r: XoscReader, c: ET.Element, rev_minor: int) -> EntityConditionKind:
    if c.tag == "SpeedCondition":
        direction = r.enum(c, "direction", SpeedDirection) if c.get("direction") else None
        return SpeedCondition(r.enum(c, "rule", Rule), r.num(c, "value"), direction)
    if c.tag == "ReachPositionCondition":
        return ReachPositionCondition(position(r, c, rev_minor), r.num(c, "tolerance", nonneg=True))
    if c.tag in ("TimeHeadwayCondition", "RelativeDistanceCondition", "DistanceCondition", "TimeToCollisionCondition"):
        cs, dt = _frame(r, c)
        rule, value, free = r.enum(c, "rule", Rule), r.num(c, "value"), r.flag(c, "freespace")
        if c.tag == "TimeHeadwayCondition":
            return TimeHeadwayCondition(r.text(c, "entityRef"), rule, value, free, cs, dt)
        if c.tag == "RelativeDistanceCondition":
            return RelativeDistanceCondition(r.text(c, "entityRef"), rule, value, free, cs, dt)
        if c.tag == "DistanceCondition":
            return DistanceCondition(position(r, c, rev_minor), rule, value, free, cs, dt)
        target = r.need(c, "TimeToCollisionConditionTarget")
        with r.at(target):
            t = r.choice(target)
            if t.tag == "EntityRef":
                return TimeToCollisionCondition(rule, value, free, entity=r.text(t, "entityRef"), coordinate_system=cs, distance_type=dt)
            if t.tag == "Position":
                return TimeToCollisionCondition(rule, value, free, position=position(r, t, rev_minor), coordinate_system=cs,
                                                distance_type=dt)  # fmt: skip
            raise r.unsupported(t)
    raise r.unsupported(c)
