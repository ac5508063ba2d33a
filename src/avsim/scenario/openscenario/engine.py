"""The storyboard runner: an OpenSCENARIO scenario stepped at a fixed rate on its road network.

Each step from t to t + dt follows esmini's `ScenarioEngine::step`: the triggers are evaluated at
t on the state at t (starting and stopping elements; an action that starts takes effect at once:
a teleport places its entity, a speed action sets its start speed), then every running action
steps (init actions first), the time advances, and every entity that no action moved travels its
speed x dt along its lane (the default controller). `reset` is esmini's first frame: the Init
actions start and step with dt = 0 and the triggers see t = 0, before anything moves.

One entity may be driven from outside (`external`: a policy's ego in `avsim sim`): actions on it are
not run, the default controller leaves it, and its pose and speed are set before each step
(`set_external`); every condition still reads it.

The run is recorded: every placed, active entity's pose and speed after each step, plus the
vertices a timed trajectory passes inside a step (so a recorded track written as a trajectory
comes back with every one of its samples), and the storyboard's state changes with their times. An
entity that an action places as it starts (a teleport, an AddEntityAction, a trajectory's start) is
recorded there at the time the action started (`placed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from avsim.core.errors import AvsimValueError
from avsim.maps.opendrive.network import RoadNetwork
from avsim.scenario.openscenario.actions import SAME_TIME_S, RuntimeAction, make_action
from avsim.scenario.openscenario.conditions import RuntimeCondition, RuntimeTrigger
from avsim.scenario.openscenario.model import (
    Act,
    ElementState,
    ElementType,
    Event,
    ManeuverGroup,
    Position,
    ScenarioDocument,
    StoryboardElementStateCondition,
    Trigger,
)
from avsim.scenario.openscenario.positions import resolve_position
from avsim.scenario.openscenario.roads import Roads
from avsim.scenario.openscenario.storyboard import Element, end_conflicting
from avsim.scenario.openscenario.world import EntityState, Mover, Placement

SMALL = 1e-6


@dataclass(frozen=True)
class Sample:
    """An entity's recorded pose (reference point) and speed at `time` seconds."""

    time: float
    name: str
    x: float
    y: float
    z: float
    h: float
    p: float
    r: float
    speed: float


@dataclass(frozen=True)
class StateChange:
    time: float
    element: str
    kind: str
    state: str


class StoryboardEngine:
    """Runs a scenario's storyboard (see the module docstring).

    Args:
        doc: the parsed scenario.
        net: its road network.
        external: the entity driven from outside, or None.
    """

    def __init__(self, doc: ScenarioDocument, net: RoadNetwork, external: str | None = None) -> None:
        self.doc = doc
        self.roads = Roads(net)
        self.mover = Mover(self.roads)
        self.states = {e.name: EntityState(e) for e in doc.entities}
        if external is not None and external not in self.states:
            raise AvsimValueError(f"no entity named {external!r} to drive from outside")
        self.external = external
        if external is not None:
            self.states[external].external = True
        self.time = 0.0
        self._previous = -math.inf
        self.samples: list[Sample] = []
        self.changes: list[StateChange] = []
        self.running: list[RuntimeAction] = []
        self.watchers: dict[int, list[RuntimeCondition]] = {}
        self.elements: list[Element] = []
        self.root = Element(None, "storyboard", None, self._changed, stop=self._trigger(doc.storyboard.stop_trigger))
        self._build()
        self._watch()

    # ---- context for actions, conditions, positions ------------------------------------------
    def state(self, name: str) -> EntityState:
        try:
            return self.states[name]
        except KeyError:
            raise AvsimValueError(f"no entity named {name!r}") from None

    def resolve(self, position: Position) -> Placement:
        return resolve_position(self.roads, position, self.state)

    # ---- building ----------------------------------------------------------------------------
    def _trigger(self, trigger: Trigger | None) -> RuntimeTrigger | None:
        return None if trigger is None else RuntimeTrigger(trigger, self)

    def _changed(self, element: Element, state: ElementState, transition: ElementState | None) -> None:
        self.changes.append(StateChange(round(self.time, 9), element.path, str(element.kind), str(state)))
        for c in self.watchers.get(id(element), ()):
            c.changes.append((state, transition))

    def _element(self, kind: ElementType, name: str, parent: Element, start: Trigger | None = None, stop: Trigger | None = None,
                 max_executions: int = 1) -> Element:  # fmt: skip
        e = Element(kind, name, parent, self._changed, self._trigger(start), self._trigger(stop), max_executions)
        self.elements.append(e)
        return e

    def _build(self) -> None:
        for story in self.doc.storyboard.stories:
            s = self._element(ElementType.STORY, story.name, self.root)
            for act in story.acts:
                self._build_act(act, s)
        self.init_actions = [(ia.entity, ia.action) for ia in self.doc.storyboard.init]

    def _build_act(self, act: Act, story: Element) -> None:
        a = self._element(ElementType.ACT, act.name, story, act.start_trigger, act.stop_trigger)
        for group in act.groups:
            g = self._element(ElementType.MANEUVER_GROUP, group.name, a, max_executions=group.max_executions)
            for maneuver in group.maneuvers:
                m = self._element(ElementType.MANEUVER, maneuver.name, g)
                for event in maneuver.events:
                    self._build_event(event, group, m)

    def _build_event(self, event: Event, group: ManeuverGroup, maneuver: Element) -> None:
        ev = self._element(ElementType.EVENT, event.name, maneuver, event.start_trigger, max_executions=event.max_executions)
        ev.priority = event.priority
        for action in event.actions:
            el = self._element(ElementType.ACTION, action.name, ev)
            el.make_actions = self._factory(action.action, group.actors)

    def _factory(self, action: object, actors: tuple[str, ...]):  # type: ignore[no-untyped-def]
        from avsim.scenario.openscenario.model import AddEntityAction, DeleteEntityAction

        def make() -> list[RuntimeAction]:
            if isinstance(action, (AddEntityAction, DeleteEntityAction)):
                made = [make_action(self, action, None)]
            else:
                made = [make_action(self, action, self.state(n)) for n in actors if not self.state(n).external]
            for a in made:
                a.in_tree = True
                end_conflicting(self.running, a)
                self.running.append(a)
            return made

        return make

    def _watch(self) -> None:
        """Register each StoryboardElementStateCondition with the element it names."""
        triggers = [self.root.stop_trigger] + [t for e in self.elements for t in (e.start_trigger, e.stop_trigger)]
        for trig in triggers:
            for c in trig.conditions if trig is not None else ():
                kind = c.condition.kind
                if isinstance(kind, StoryboardElementStateCondition):
                    target = self.find_element(kind.element_type, kind.element)
                    self.watchers.setdefault(id(target), []).append(c)

    def find_element(self, kind: ElementType, ref: str) -> Element:
        """The element a StoryboardElementStateCondition names (a name, or a `::` path ending in one)."""
        parts = ref.split("::")
        found = [e for e in self.elements if e.kind is kind and e.path.split("::")[-len(parts):] == parts]
        if len(found) != 1:
            why = "no" if not found else f"{len(found)}"
            raise AvsimValueError(f"StoryboardElementStateCondition: {why} {kind} named {ref!r} (give its path a::b::c when names repeat)")
        return found[0]

    # ---- running -----------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        """The stop trigger fired; without one (or with an empty one), every story has completed (esmini would run on)."""
        if self.root.state == ElementState.COMPLETE:
            return True
        stories = self.root.children
        stop = self.root.stop_trigger
        return (stop is None or not stop.groups) and bool(stories) and all(s.state == ElementState.COMPLETE for s in stories)

    def reset(self) -> None:
        """esmini's first frame (see the module docstring)."""
        self.time = 0.0
        for st in self.states.values():
            st.begin_step()
        for entity, action in self.init_actions:
            actor = None if entity is None else self.state(entity)
            if actor is not None and actor.external:
                continue
            a = make_action(self, action, actor)
            end_conflicting(self.running, a)
            self.running.append(a)
            a.start(0.0)
        self.root.start(0.0)
        self._step_actions(0.0, 0.0)
        for st in self.states.values():
            st.end_step(0.0)
        self._record([])

    def set_external(self, x: float, y: float, z: float, h: float, speed: float) -> None:
        """Pose and speed of the externally driven entity for the coming step."""
        assert self.external is not None
        st = self.states[self.external]
        self.mover.set_free(st, x, y, z, h, st.p, st.r)
        st.speed, st.placed, st.active = speed, True, True

    def step(self, dt: float) -> bool:
        """One step of `dt` seconds (see the module docstring); False (and nothing moved) when the
        storyboard's stop trigger fired at the step's start, as esmini stops there."""
        t = self.time
        for st in self.states.values():
            st.begin_step()
        self.root.eval_triggers(t)
        if self.root.state == ElementState.COMPLETE:
            return False
        timed = self._step_actions(t, dt)
        self._previous, self.time = t, t + dt
        for st in self.states.values():
            if st.active and st.placed and not st.external and not st.moved_long and abs(st.speed) > SMALL:
                self.mover.move(st, st.speed * dt)
        for st in self.states.values():
            st.end_step(dt)
        self._record(timed)
        return True

    def _step_actions(self, t: float, dt: float) -> list[RuntimeAction]:
        """Step every running action; the ones that recorded poses inside the step (timed trajectories)."""
        init = [a for a in self.running if not a.done and not a.in_tree]
        for a in init:
            a.samples = []
            if a.actor is None or a.actor.active:
                a.step(t, dt)
        for a in self.running:
            if a not in init:
                a.samples = []
        self.root.step(t, dt)
        timed = [a for a in self.running if a.samples]
        self.running = [a for a in self.running if not a.done]
        return timed

    @property
    def previous_time(self) -> float:
        """The time of the previous step (-inf before the first)."""
        return self._previous

    def record(self, st: EntityState, time: float, where: Placement) -> None:
        """Record `st` at pose `where` at `time` (a moment between steps)."""
        self.samples.append(Sample(time, st.name, where.x, where.y, where.z, where.h, where.p, where.r, st.speed))

    def placed(self, st: EntityState) -> None:
        """Record `st` where an action that just started put it (a teleport, an AddEntityAction, a
        trajectory's start at time t put the entity there at t)."""
        if st.active and st.placed:
            self.samples.append(Sample(self.time, st.name, st.x, st.y, st.z, st.h, st.p, st.r, st.speed))

    def _record(self, timed: list[RuntimeAction]) -> None:
        for a in timed:
            for time, p in a.samples:
                if a.actor is not None and time < self.time - SAME_TIME_S:
                    self.samples.append(Sample(time, a.actor.name, p.x, p.y, p.z, p.h, p.p, p.r, a.actor.speed))
        for st in self.states.values():
            if st.active and st.placed:
                self.samples.append(Sample(self.time, st.name, st.x, st.y, st.z, st.h, st.p, st.r, st.speed))

    def run(self, rate_hz: float, max_duration_s: float, on_step: object = None) -> None:
        """Reset, then step at `rate_hz` until the storyboard finishes or `max_duration_s` passes.

        Args:
            rate_hz: steps per second.
            max_duration_s: the longest run.
            on_step: called with (steps done, steps at most) after each step.
        """
        n_max = int(math.floor(max_duration_s * rate_hz + 1e-9))
        self.reset()
        for k in range(1, n_max + 1):
            if self.finished or not self.step(k / rate_hz - self.time):
                break
            if callable(on_step):
                on_step(k, n_max)
