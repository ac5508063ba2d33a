"""`Storyboard`: Init actions, stories, acts, maneuver groups, maneuvers, events, actions and the
stop trigger. A maneuver group's `CatalogReference` maneuvers come from the maneuver catalogs.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from avsim.scenario.openscenario.model import (
    Act,
    ActionElement,
    Event,
    InitAction,
    Maneuver,
    ManeuverGroup,
    Priority,
    Story,
    Storyboard,
)
from avsim.scenario.openscenario.parse_actions import global_action, private_action
from avsim.scenario.openscenario.parse_conditions import trigger
from avsim.scenario.openscenario.reader import XoscReader

MAX_EXECUTIONS = 10_000


def _init(r: XoscReader, e: ET.Element, rev_minor: int) -> tuple[InitAction, ...]:
    actions = r.need(e, "Actions")
    out: list[InitAction] = []
    with r.at(e), r.at(actions):
        r.only(actions, {"GlobalAction", "Private"})
        for g in actions.findall("GlobalAction"):
            out.append(InitAction(None, global_action(r, g, rev_minor)))
        for p in actions.findall("Private"):
            with r.at(p, p.get("entityRef")):
                r.only(p, {"PrivateAction"})
                name = r.text(p, "entityRef")
                out += [InitAction(name, private_action(r, a, rev_minor)) for a in p.findall("PrivateAction")]
    return tuple(out)


def _event(r: XoscReader, e: ET.Element, rev_minor: int) -> Event:
    with r.at(e):
        r.only(e, {"Action", "StartTrigger"})
        priority = r.enum(e, "priority", Priority, aliases={"overwrite": "override"})
        actions = []
        for a in e.findall("Action"):
            with r.at(a):
                kind = r.choice(a)
                if kind.tag == "PrivateAction":
                    action = private_action(r, kind, rev_minor)
                elif kind.tag == "GlobalAction":
                    action = global_action(r, kind, rev_minor)
                else:
                    raise r.unsupported(kind)
                actions.append(ActionElement(r.text(a, "name", ""), action))
        if not actions:
            raise r.fail("an event needs at least one action")
        count = r.int_(e, "maximumExecutionCount", 1)
        if not 1 <= count <= MAX_EXECUTIONS:
            raise r.fail(f"expected 1 to {MAX_EXECUTIONS}", "@maximumExecutionCount")
        return Event(r.text(e, "name"), priority, tuple(actions), trigger(r, e.find("StartTrigger"), True, rev_minor), count)


def _maneuver(r: XoscReader, e: ET.Element, rev_minor: int) -> Maneuver:
    with r.at(e), r.scope(e.find("ParameterDeclarations")):
        r.only(e, {"ParameterDeclarations", "Event"})
        events = tuple(_event(r, ev, rev_minor) for ev in e.findall("Event"))
        if not events:
            raise r.fail("a maneuver needs at least one event")
        return Maneuver(r.text(e, "name"), events)


def _group(r: XoscReader, e: ET.Element, rev_minor: int) -> ManeuverGroup:
    with r.at(e):
        r.only(e, {"Actors", "CatalogReference", "Maneuver"})
        actors_el = r.need(e, "Actors")
        with r.at(actors_el):
            actors = tuple(r.text(a, "entityRef") for a in actors_el.findall("EntityRef"))
            select = r.flag(actors_el, "selectTriggeringEntities", False)
        maneuvers = []
        for m in e:
            if m.tag == "Maneuver":
                maneuvers.append(_maneuver(r, m, rev_minor))
            elif m.tag == "CatalogReference":
                with r.at(m):
                    element, assigned, _ = r.catalog_entry(m)
                    if element.tag != "Maneuver":
                        raise r.fail(f"the catalog entry is a <{element.tag}>, expected a <Maneuver>")
                    with r.scope(None, assigned):
                        maneuvers.append(_maneuver(r, element, rev_minor))
        count = r.int_(e, "maximumExecutionCount", 1)
        if not 1 <= count <= MAX_EXECUTIONS:
            raise r.fail(f"expected 1 to {MAX_EXECUTIONS}", "@maximumExecutionCount")
        return ManeuverGroup(r.text(e, "name"), count, actors, select, tuple(maneuvers))


def _act(r: XoscReader, e: ET.Element, rev_minor: int) -> Act:
    with r.at(e):
        r.only(e, {"ManeuverGroup", "StartTrigger", "StopTrigger"})
        groups = tuple(_group(r, g, rev_minor) for g in e.findall("ManeuverGroup"))
        return Act(r.text(e, "name"), groups, trigger(r, e.find("StartTrigger"), True, rev_minor),
                   trigger(r, e.find("StopTrigger"), False, rev_minor))  # fmt: skip


def storyboard(r: XoscReader, e: ET.Element, rev_minor: int) -> Storyboard:
    """The `Storyboard` element."""
    with r.at(e):
        r.only(e, {"Init", "Story", "StopTrigger"})
        init = _init(r, r.need(e, "Init"), rev_minor)
        stories = []
        for s in e.findall("Story"):
            with r.at(s), r.scope(s.find("ParameterDeclarations")):
                r.only(s, {"ParameterDeclarations", "Act"})
                stories.append(Story(r.text(s, "name"), tuple(_act(r, a, rev_minor) for a in s.findall("Act"))))
        return Storyboard(init, tuple(stories), trigger(r, e.find("StopTrigger"), False, rev_minor))
