"""An IDM ego (and reactive traffic) for a map that came without a log (OpenDRIVE, Lanelet2).

`avsim.scenario.bare_map` gives an imported map a route ego and seeded cars as a "log"; here the
closed-loop simulator drives it: the ego by the lane-following IDM planner (`avsim sim --policy
idm`: PDM-Closed's proposals along the route the logged ego's lanes make), the cars either as
nuPlan's reactive IDM agents (`--agents idm`, the default) or replayed. The rollout (10 Hz ego,
the agents as they drove) is the scenario written; its metadata says how it was driven
(`metadata["sim"]`, as `avsim sim` records it). Same map, options and seed: the same rollout.
"""

from __future__ import annotations

from collections.abc import Callable

from avsim.scenario import Scenario
from avsim.sim.episode import run_episode
from avsim.sim.observation import NoCameras
from avsim.sim.policies import load_policy
from avsim.sim.recorder import rollout_scenario
from avsim.sim.stepper import AgentMode, Controller, SimConfig, Simulator

POLICY = "idm"


def drive_bare_map(scenario: Scenario, reactive: bool = True, seed: int = 0,
                   on_step: Callable[[int, int], None] | None = None) -> Scenario:  # fmt: skip
    """The IDM planner's drive of a bare-map scenario's route (see the module docstring).

    Args:
        scenario: a scenario from `avsim.scenario.bare_map.bare_map_scenario`.
        reactive: traffic as IDM agents (True) or replayed (False).
        seed: the episode's seed.
        on_step: progress, called with (steps done, steps planned).

    Returns:
        The rollout, with the source's id, rig, map, lights and metadata (plus `sim`).
    """
    config = SimConfig(agents=AgentMode.IDM if reactive else AgentMode.LOG, controller=Controller.LQR, seed=seed)
    sim = Simulator(scenario, config, NoCameras())
    policy = load_policy(POLICY)
    result = run_episode(sim, policy, on_step=None if on_step is None else lambda k: on_step(k, sim.n_steps))
    assert sim.recorder is not None
    meta = {"policy": POLICY, "agents": config.agents.value, "controller": config.controller.value, "seed": int(seed),
            "rate_hz": config.rate_hz, "steps_planned": int(sim.n_steps), "steps_run": int(result.steps),
            "status": result.status, "end_reason": result.end_reason}  # fmt: skip
    rollout = rollout_scenario(scenario, sim.recorder, sim.step_times_ns, meta, scenario.scenario_id)
    bare = dict(rollout.metadata.get("bare_map") or {})
    bare["ego"] = "idm planner along the route (avsim sim --policy idm)"
    bare["traffic_mode"] = "idm agents" if reactive else "replayed"
    return rollout.replace(metadata={**rollout.metadata, "bare_map": bare})
