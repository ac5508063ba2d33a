"""Action elements: the private actions avsim runs (speed, lane change, lane offset, follow
trajectory, assign route, teleport) and the entity actions (add, delete); every other action is
refused by name (`XoscReader.unsupported`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from avsim.scenario.openscenario.model import (
    AbsoluteSpeed,
    Action,
    AddEntityAction,
    AssignRouteAction,
    DeleteEntityAction,
    DynamicsDimension,
    DynamicsShape,
    FollowTrajectoryAction,
    LaneChangeAction,
    LaneOffsetAction,
    RelativeSpeed,
    Route,
    SpeedAction,
    TeleportAction,
    Timing,
    Trajectory,
    TransitionDynamics,
    Vertex,
    Waypoint,
)
from avsim.scenario.openscenario.parse_positions import position
from avsim.scenario.openscenario.reader import XoscReader

MAX_VERTICES = 200_000


def dynamics(r: XoscReader, e: ET.Element) -> TransitionDynamics:
    """A `TransitionDynamics` element (`followingMode` is read and has no effect: avsim's entities
    follow the shape exactly)."""
    with r.at(e):
        shape = r.enum(e, "dynamicsShape", DynamicsShape)
        dim = r.enum(e, "dynamicsDimension", DynamicsDimension)
        value = r.num(e, "value", nonneg=True)
        if dim is DynamicsDimension.RATE and shape is not DynamicsShape.STEP and value <= 0:
            raise r.fail("a rate must be > 0", "@value")
        return TransitionDynamics(shape, dim, value)


def _speed(r: XoscReader, e: ET.Element) -> SpeedAction:
    r.only(e, {"SpeedActionDynamics", "SpeedActionTarget"})
    dyn = dynamics(r, r.need(e, "SpeedActionDynamics"))
    target_el = r.need(e, "SpeedActionTarget")
    with r.at(target_el):
        t = r.choice(target_el)
        with r.at(t):
            if t.tag == "AbsoluteTargetSpeed":
                return SpeedAction(dyn, AbsoluteSpeed(r.num(t, "value")))
            if t.tag == "RelativeTargetSpeed":
                kind = r.text(t, "speedTargetValueType")
                if kind not in ("delta", "factor"):
                    raise r.fail(f"expected delta or factor, got {kind[:40]!r}", "@speedTargetValueType")
                return SpeedAction(dyn, RelativeSpeed(r.text(t, "entityRef"), r.num(t, "value"), kind == "factor", r.flag(t, "continuous")))
            raise r.unsupported(t)


def _lane_change(r: XoscReader, e: ET.Element) -> LaneChangeAction:
    r.only(e, {"LaneChangeActionDynamics", "LaneChangeTarget"})
    dyn = dynamics(r, r.need(e, "LaneChangeActionDynamics"))
    offset = r.num(e, "targetLaneOffset", 0.0)
    target_el = r.need(e, "LaneChangeTarget")
    with r.at(target_el):
        t = r.choice(target_el)
        with r.at(t):
            if t.tag == "AbsoluteTargetLane":
                lane = r.int_(t, "value")
                if lane == 0:
                    raise r.fail("lane 0 is the centre lane, not a lane to change to", "@value")
                return LaneChangeAction(dyn, lane=lane, target_offset=offset)
            if t.tag == "RelativeTargetLane":
                return LaneChangeAction(dyn, entity=r.text(t, "entityRef"), relative=r.int_(t, "value"), target_offset=offset)
            raise r.unsupported(t)


def _lane_offset(r: XoscReader, e: ET.Element) -> LaneOffsetAction:
    r.only(e, {"LaneOffsetActionDynamics", "LaneOffsetTarget"})
    d = r.need(e, "LaneOffsetActionDynamics")
    with r.at(d):
        shape = r.enum(d, "dynamicsShape", DynamicsShape)
        acc = r.opt_num(d, "maxLateralAcc")
        if acc is not None and acc <= 0:
            raise r.fail("must be > 0", "@maxLateralAcc")
    continuous = r.flag(e, "continuous")
    target_el = r.need(e, "LaneOffsetTarget")
    with r.at(target_el):
        t = r.choice(target_el)
        with r.at(t):
            if t.tag == "AbsoluteTargetLaneOffset":
                return LaneOffsetAction(shape, r.num(t, "value"), continuous, acc)
            if t.tag == "RelativeTargetLaneOffset":
                return LaneOffsetAction(shape, r.num(t, "value"), continuous, acc, r.text(t, "entityRef"))
            raise r.unsupported(t)


def trajectory(r: XoscReader, e: ET.Element, rev_minor: int) -> Trajectory:
    """A `Trajectory` with a `Polyline` shape (other shapes are refused by name)."""
    with r.at(e), r.scope(e.find("ParameterDeclarations")):
        r.only(e, {"ParameterDeclarations", "Shape"})
        shape = r.need(e, "Shape")
        with r.at(shape):
            s = r.choice(shape)
            if s.tag != "Polyline":
                raise r.unsupported(s)
            with r.at(s):
                r.only(s, {"Vertex"})
                vertices = s.findall("Vertex")
                if not 2 <= len(vertices) <= MAX_VERTICES:
                    raise r.fail(f"expected 2 to {MAX_VERTICES} vertices, got {len(vertices)}")
                out = []
                for k, v in enumerate(vertices):
                    with r.at(v, str(k)):
                        out.append(Vertex(position(r, v, rev_minor), r.opt_num(v, "time")))
        timed = [v.time is not None for v in out]
        if any(timed) and not all(timed):
            raise r.fail("either every vertex has a time or none has", "Shape/Polyline/Vertex")
        times = [v.time for v in out if v.time is not None]
        if any(b < a for a, b in zip(times, times[1:])):
            raise r.fail("vertex times must not decrease", "Shape/Polyline/Vertex")
        return Trajectory(r.text(e, "name"), r.flag(e, "closed"), tuple(out))


def _catalog_or_inline(r: XoscReader, holder: ET.Element, tag: str) -> tuple[ET.Element, dict[str, str] | None]:
    """The inline element `tag` of `holder`, or the catalog entry its `CatalogReference` names."""
    inline = holder.find(tag)
    if inline is not None:
        return inline, None
    ref = holder.find("CatalogReference")
    if ref is None:
        raise r.fail(f"missing element <{tag}> or <CatalogReference>")
    with r.at(ref):
        element, assigned, _ = r.catalog_entry(ref)
    if element.tag != tag:
        raise r.fail(f"the catalog entry is a <{element.tag}>, expected a <{tag}>", "CatalogReference")
    return element, assigned


def _follow_trajectory(r: XoscReader, e: ET.Element, rev_minor: int) -> FollowTrajectoryAction:
    r.only(e, {"Trajectory", "CatalogReference", "TimeReference", "TrajectoryFollowingMode", "TrajectoryRef"})
    ref = e.find("TrajectoryRef")
    holder = ref if ref is not None else e
    element, assigned = _catalog_or_inline(r, holder, "Trajectory")
    if assigned is None:
        traj = trajectory(r, element, rev_minor)
    else:
        with r.scope(element.find("ParameterDeclarations"), assigned):
            traj = trajectory(r, element, rev_minor)
    ref = r.need(e, "TimeReference")
    with r.at(ref):
        choice = r.choice(ref)
        timing = None
        if choice.tag == "Timing":
            with r.at(choice):
                domain = r.text(choice, "domainAbsoluteRelative")
                if domain not in ("absolute", "relative"):
                    raise r.fail(f"expected absolute or relative, got {domain[:40]!r}", "@domainAbsoluteRelative")
                timing = Timing(domain == "absolute", r.num(choice, "scale", positive=True), r.num(choice, "offset"))
            if traj.vertices[0].time is None:
                raise r.fail("Timing needs vertex times")
        elif choice.tag != "None":
            raise r.unsupported(choice)
    mode_el = r.need(e, "TrajectoryFollowingMode")
    with r.at(mode_el):
        mode = r.text(mode_el, "followingMode")
        if mode not in ("position", "follow"):
            raise r.fail(f"expected position or follow, got {mode[:40]!r}", "@followingMode")
    return FollowTrajectoryAction(traj, timing, mode, r.num(e, "initialDistanceOffset", 0.0, nonneg=True))


def route(r: XoscReader, e: ET.Element, rev_minor: int) -> Route:
    """A `Route` (waypoints and their strategies)."""
    with r.at(e), r.scope(e.find("ParameterDeclarations")):
        r.only(e, {"ParameterDeclarations", "Waypoint"})
        points = []
        for k, w in enumerate(e.findall("Waypoint")):
            with r.at(w, str(k)):
                strategy = r.text(w, "routeStrategy")
                if strategy not in ("fastest", "shortest", "leastIntersections", "random"):
                    raise r.fail(f"unknown route strategy {strategy[:40]!r}", "@routeStrategy")
                points.append(Waypoint(position(r, w, rev_minor), strategy))
        if len(points) < 2:
            raise r.fail("a route needs at least two waypoints")
        return Route(r.text(e, "name"), r.flag(e, "closed"), tuple(points))


def _assign_route(r: XoscReader, e: ET.Element, rev_minor: int) -> AssignRouteAction:
    r.only(e, {"Route", "CatalogReference"})
    element, assigned = _catalog_or_inline(r, e, "Route")
    if assigned is None:
        return AssignRouteAction(route(r, element, rev_minor))
    with r.scope(None, assigned):
        return AssignRouteAction(route(r, element, rev_minor))


def private_action(r: XoscReader, e: ET.Element, rev_minor: int) -> Action:
    """A `PrivateAction` element's action."""
    with r.at(e):
        group = r.choice(e)
        with r.at(group):
            if group.tag == "TeleportAction":
                r.only(group, {"Position"})
                return TeleportAction(position(r, group, rev_minor))
            if group.tag not in ("LongitudinalAction", "LateralAction", "RoutingAction"):
                raise r.unsupported(group)
            a = r.choice(group)
            with r.at(a):
                if a.tag == "SpeedAction":
                    return _speed(r, a)
                if a.tag == "LaneChangeAction":
                    return _lane_change(r, a)
                if a.tag == "LaneOffsetAction":
                    return _lane_offset(r, a)
                if a.tag == "FollowTrajectoryAction":
                    return _follow_trajectory(r, a, rev_minor)
                if a.tag == "AssignRouteAction":
                    return _assign_route(r, a, rev_minor)
                raise r.unsupported(a)


def global_action(r: XoscReader, e: ET.Element, rev_minor: int) -> Action:
    """A `GlobalAction` element's action (entity actions only)."""
    with r.at(e):
        group = r.choice(e)
        with r.at(group):
            if group.tag != "EntityAction":
                raise r.unsupported(group)
            name = r.text(group, "entityRef")
            a = r.choice(group)
            with r.at(a):
                if a.tag == "AddEntityAction":
                    return AddEntityAction(name, position(r, a, rev_minor))
                if a.tag == "DeleteEntityAction":
                    return DeleteEntityAction(name)
                raise r.unsupported(a)
