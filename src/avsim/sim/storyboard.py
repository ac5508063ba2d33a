"""Traffic driven by an OpenSCENARIO storyboard around a policy's ego (`avsim sim --agents storyboard`).

A scenario converted from OpenSCENARIO (`avsim convert --from openscenario`) carries its scenario
files; here its storyboard runs again, step for step with the simulator, with the ego entity
driven from outside: before each step the ego entity takes the simulator's ego (its box's rear
axle, heading and speed), the storyboard's conditions read it like any entity (a car that cuts in
when the ego is 20 m behind cuts in when the policy's ego is), its actions on the ego are not run,
and every other entity moves as the storyboard says. The entities' boxes are the simulator's
agents; they do not react beyond what the storyboard's triggers make them do.
"""

from __future__ import annotations

import math

import numpy as np

from avsim.core.agents import collapse_class
from avsim.scenario import Scenario
from avsim.scenario.openscenario.load import load_from_metadata
from avsim.scenario.openscenario.record import rotation, source_class
from avsim.sim.boxes import Boxes


class StoryboardTraffic:
    """The storyboard's entities as the simulator's agents (see the module docstring).

    Args:
        scenario: a scenario converted from OpenSCENARIO.
        dt_s: the simulator's step.
        rear_axle_to_center_m: how far the simulator's ego box centre lies ahead of its rear axle.
    """

    def __init__(self, scenario: Scenario, dt_s: float, rear_axle_to_center_m: float) -> None:
        loaded, _ = load_from_metadata(scenario.metadata, scenario.scenario_id)
        self.engine = loaded.engine(external_ego=True)
        self.ego = loaded.ego
        self.dt_s = dt_s
        self.rear_axle_to_center_m = rear_axle_to_center_m
        self.rear_axle_x = loaded.doc.entity(loaded.ego).rear_axle_x  # type: ignore[union-attr]
        self.engine.reset()
        self._boxes = self._make_boxes()

    def boxes(self, step: int) -> Boxes:
        """Every entity on the scene but the ego, now."""
        return self._boxes

    def step(self, step: int, ego: Boxes, lights: dict[str, str]) -> None:
        """Advance the storyboard one step with the ego where the simulator has it.

        Args:
            step: the current step index.
            ego: the ego's box (one row; centre ahead of the rear axle by the vehicle's offset).
            lights: light states (the storyboard has no traffic-signal actions).
        """
        st = self.engine.states[self.ego]
        yaw = float(ego.yaw_rad[0])
        heading = np.array([math.cos(yaw), math.sin(yaw)])
        ref = ego.center_m[0, :2] - (self.rear_axle_to_center_m + self.rear_axle_x) * heading
        self.engine.set_external(float(ref[0]), float(ref[1]), st.z, yaw, float(ego.velocity_mps[0] @ heading))
        self.engine.step(self.dt_s)
        self._boxes = self._make_boxes()

    def _make_boxes(self) -> Boxes:
        rows = [st for st in self.engine.states.values() if st.active and st.placed and st.name != self.ego]
        if not rows:
            return Boxes.empty()
        h, p, r = (np.array([getattr(st, k) for st in rows]) for k in ("h", "p", "r"))
        rot = rotation(h, p, r)
        ref = np.array([[st.x, st.y, st.z] for st in rows])
        center = ref + np.einsum("nij,nj->ni", rot, np.array([st.entity.bbox.center for st in rows]))
        classes = np.array([source_class(st.entity) for st in rows])
        size = np.array([[st.entity.bbox.length, st.entity.bbox.width, st.entity.bbox.height] for st in rows])
        vel = np.array([[st.vx, st.vy] for st in rows])
        return Boxes(np.array([st.name for st in rows]), classes, np.array([collapse_class(c) for c in classes]), center, size, h, vel)
