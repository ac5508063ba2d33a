"""The storyboard's element tree while it runs: states, transitions, triggers, priorities;
restated from esmini (`StoryboardElement.cpp`, `Storyboard.cpp`).

- Elements go init -> standby -> running -> complete (start, end, stop transitions). An element
  with a start trigger waits in standby for it; one without starts with its parent. Running
  elements start their children (events are the exception: they wait for their own trigger).
- Each step the triggers are evaluated top-down: a running element's stop trigger (stopping it and
  its children), a standby element's start trigger, then the running element's children.
- An element whose children are all complete ends. A maneuver group or event that has run fewer
  than `maximumExecutionCount` times goes back to standby instead (its triggers and children reset).
- Starting an event: `override` ends the maneuver's running events, `skip` is ignored while one
  runs, `parallel` runs beside them; each of its private actions ends the actions of the same
  entity running on a domain it takes (longitudinal, lateral).
- Every state change is reported (`on_change`), for StoryboardElementStateConditions and the log.
"""

from __future__ import annotations

from collections.abc import Callable

from avsim.scenario.openscenario.actions import RuntimeAction
from avsim.scenario.openscenario.conditions import RuntimeTrigger
from avsim.scenario.openscenario.model import ElementState, ElementType, Priority

INIT = "initState"  # before standby (not a state a condition can name)
OnChange = Callable[["Element", ElementState, ElementState | None], None]


class Element:
    """One storyboard element (see the module docstring).

    Args:
        kind: its type (None: the storyboard itself).
        name: its name.
        parent: the enclosing element.
        start: its start trigger; stop: its stop trigger.
        max_executions: how often a maneuver group or event may run.
        on_change: called with (element, new state, transition).
    """

    def __init__(self, kind: ElementType | None, name: str, parent: Element | None, on_change: OnChange,
                 start: RuntimeTrigger | None = None, stop: RuntimeTrigger | None = None, max_executions: int = 1) -> None:  # fmt: skip
        self.kind, self.name, self.parent = kind, name, parent
        self.children: list[Element] = []
        self.start_trigger, self.stop_trigger = start, stop
        self.max_executions, self.executions = max_executions, 0
        self.state: ElementState | str = INIT
        self.on_change = on_change
        self.priority = Priority.PARALLEL
        self.actions: list[RuntimeAction] = []  # an action element: one runtime action per actor
        self.make_actions: Callable[[], list[RuntimeAction]] | None = None
        if parent is not None:
            parent.children.append(self)

    @property
    def path(self) -> str:
        names: list[str] = []
        e: Element | None = self
        while e is not None and e.kind is not None:
            names.append(e.name)
            e = e.parent
        return "::".join(reversed(names))

    def _set(self, state: ElementState, transition: ElementState | None) -> None:
        if self.state != state:
            self.state = state
            self.on_change(self, state, transition)

    # ---- transitions -------------------------------------------------------------------------
    def enter(self) -> None:
        """The state part of a start: standby when a start trigger is to wait for, else running."""
        if self.state == INIT and self.start_trigger is not None:
            self._set(ElementState.STANDBY, None)
        elif self.state in (INIT, ElementState.STANDBY) or self.executions:
            self._set(ElementState.RUNNING, ElementState.START_TRANSITION)
            self.executions += 1

    def start(self, time: float) -> None:
        if self.kind is ElementType.EVENT:
            start_event(self, time)
            return
        self.enter()
        if self.state != ElementState.RUNNING:
            return
        if self.kind is ElementType.ACTION:
            self._start_actions(time)
            return
        for child in self.children:
            child.start(time)

    def _start_actions(self, time: float) -> None:
        assert self.make_actions is not None
        self.actions = self.make_actions()
        for a in self.actions:
            a.start(time)

    def stop(self) -> None:
        for child in self.children:
            child.stop()
        if self.state in (ElementState.STANDBY, ElementState.RUNNING):
            self._set(ElementState.COMPLETE, ElementState.STOP_TRANSITION)
            if self.parent is not None:
                self.parent.children_changed()

    def end(self) -> None:
        if self.state == ElementState.COMPLETE:
            return
        for child in self.children:
            if child.state == ElementState.RUNNING:
                child.end()
        if self.state == ElementState.COMPLETE:
            return
        if self.state in (ElementState.RUNNING, ElementState.STANDBY):
            again = self.kind in (ElementType.MANEUVER_GROUP, ElementType.EVENT) and self.executions < self.max_executions
            if again:
                for trig in (self.start_trigger, self.stop_trigger):
                    if trig is not None:
                        trig.reset()
                self._set(ElementState.STANDBY, ElementState.END_TRANSITION)
                for child in self.children:
                    child.reset()
            else:
                self._set(ElementState.COMPLETE, ElementState.END_TRANSITION)
        if self.parent is not None:
            self.parent.children_changed()

    def reset(self) -> None:
        """Back to init for another run of an enclosing maneuver group or event."""
        for child in self.children:
            child.reset()
        self.state, self.executions, self.actions = INIT, 0, []

    def children_changed(self) -> None:
        done = bool(self.children) and all(c.state == ElementState.COMPLETE for c in self.children)
        if self.kind is not None and self.state != ElementState.COMPLETE and done:
            self.end()

    # ---- each step ---------------------------------------------------------------------------
    def eval_triggers(self, time: float) -> None:
        if self.state == ElementState.RUNNING and self.stop_trigger is not None and self.stop_trigger.evaluate(time):
            self.stop()
        if self.state == ElementState.STANDBY and (self.start_trigger is None or self.start_trigger.evaluate(time)):
            self.start(time)
        if self.state == ElementState.RUNNING:
            for child in list(self.children):
                child.eval_triggers(time)

    def step(self, time: float, dt: float) -> None:
        if self.state != ElementState.RUNNING:
            return
        if self.kind is ElementType.ACTION:
            for a in self.actions:
                if not a.done:
                    a.step(time, dt)
            if all(a.done for a in self.actions):
                self.end()
            return
        for child in list(self.children):
            child.step(time, dt)


def start_event(event: Element, time: float) -> None:
    """Start an event by its priority (see the module docstring)."""
    maneuver = event.parent
    assert maneuver is not None
    running = [e for e in maneuver.children if e is not event and e.state == ElementState.RUNNING]
    if event.state == ElementState.RUNNING:
        return
    if event.priority is Priority.OVERRIDE:
        for other in running:
            other.end()
    elif event.priority is Priority.SKIP and running:
        return
    event.enter()
    if event.state != ElementState.RUNNING:
        return
    for action in event.children:
        action.start(time)


def end_conflicting(actions: list[RuntimeAction], new: RuntimeAction) -> None:
    """End the running actions of `new`'s entity that share a domain with it."""
    for a in actions:
        if a is not new and not a.done and a.actor is not None and a.actor is new.actor and ((a.long and new.long) or (a.lat and new.lat)):
            a.done = True
