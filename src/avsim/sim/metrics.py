"""Scores of an episode: NAVSIM's metrics over the whole rollout and over every 4 s window, the
human-filtered EPDMS, and avsim's own traffic-rule checks.

- Episode: the rollout from its first to its last step scored as one NAVSIM proposal
  (`avsim.sim.scoring`); EP is normalised by the larger of the ego's admissible progress and the
  logged ego's progress over the same time (NAVSIM normalises by PDM-Closed's proposal: avsim's
  reference is the log, which every scenario has).
- Per step: the window of `WINDOW_S` (NAVSIM's 4 s) starting at each step whose window fits in the
  rollout, scored as NAVSIM scores a proposal, with the 1.5 s before it as history (HC).
- Human filter (NAVSIM's `human_penalty_filter`, EPDMS only): a sub-score the logged ego itself
  fails (0) over the same window, driving among the logged agents, is set to 1 for the policy.
- EC: the policy's plans (when it returns trajectories), each simulated open loop from its step
  by NAVSIM's tracker and model, compared every 0.5 s with the plan before (their overlap).
- Rules: `avsim validate`'s traffic-rule checks (red light, speed limit, wrong way, stop line) and
  its box overlaps on the rollout scenario, the ego's findings.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from avsim.core.typing import NDArrayFloat, NDArrayInt
from avsim.maps.road import RoadModel
from avsim.scenario import Scenario
from avsim.sim.comfort import two_frame_extended_comfort
from avsim.sim.recorder import Plan
from avsim.sim.scoring import METRIC_NAMES, Metrics, Scene, ScorerConfig, aggregate, normalized_progress
from avsim.sim.stepper import Simulator
from avsim.sim.tracker import LQRTracker, velocity_curvature_profiles
from avsim.sim.vehicle import KinematicBicycle, VehicleLimits

WINDOW_S = 4.0
HISTORY_S = 1.5
EC_INTERVAL_S = 0.5
RULE_KINDS = ("red_light", "speed_limit", "wrong_way", "stop_line")


def red_lanes(sim: Simulator, steps: int) -> list[NDArrayInt]:
    """Per step, the lanes whose controlling light is red."""
    lit = sim.road.light_of_lane
    out = []
    for k in range(steps):
        lights = sim.lights.at(k)
        out.append(np.flatnonzero([bool(lid) and lights.get(str(lid)) == "red" for lid in lit]).astype(np.int64))
    return out


def metrics_dict(m: Metrics, b: int, ep: float, agg: dict[str, NDArrayFloat], ec: float | None) -> dict[str, Any]:
    """One sequence's sub-scores and aggregates as plain floats."""
    out: dict[str, Any] = {name: float(getattr(m, name if name != "ego_progress" else "progress_m")[b]) for name in METRIC_NAMES}
    out["ego_progress_m"] = out.pop("ego_progress")
    out["ego_progress"] = float(ep)
    out["comfort"] = float(m.comfort[b])
    out["two_frame_extended_comfort"] = ec
    out["multiplicative_metrics_prod"] = float(agg["multiplicative"][b])
    out["pdms"], out["epdms"] = float(agg["pdms"][b]), float(agg["epdms"][b])
    return out


def human_filtered(agent: Metrics, human: Metrics) -> Metrics:
    """`agent` with every sub-score the human fails (0) set to 1 (NAVSIM's human penalty filter)."""
    fields = {}
    for name in Metrics.__dataclass_fields__:
        value = getattr(agent, name)
        if name in ("no_at_fault_collisions", "drivable_area_compliance", "driving_direction_compliance", "traffic_light_compliance",
                    "time_to_collision_within_bound", "lane_keeping", "history_comfort"):
            value = np.where(getattr(human, name) == 0, 1.0, value)
        fields[name] = value
    return Metrics(**fields)


def simulate_plan(plan: Plan, sim: Simulator) -> NDArrayFloat:
    """The plan driven open loop from its step (NAVSIM's `PDMSimulator`: LQR tracking, bicycle model).

    Returns:
        (M+1, 11) states.
    """
    tracker = LQRTracker(sim.vehicle.wheel_base_m, sim.dt_s, sim.config.tracker)
    model = KinematicBicycle(sim.vehicle, VehicleLimits.navsim())
    ref = plan.reference[None]
    profiles = velocity_curvature_profiles(ref, sim.dt_s, sim.config.tracker)
    out = np.zeros((len(plan.reference), len(plan.state)))
    out[0] = plan.state
    for i in range(1, len(out)):
        cmd = tracker.commands(out[i - 1 : i], ref, index=i - 1, profiles=profiles)
        out[i] = model.propagate(out[i - 1 : i], cmd, sim.dt_s)[0]
    return out


def extended_comfort(plans: list[Plan], sim: Simulator) -> dict[int, float]:
    """EC of each plan against the plan `EC_INTERVAL_S` earlier (keyed by the later plan's step)."""
    stride = max(int(round(EC_INTERVAL_S / sim.dt_s)), 1)
    by_step = {p.step: p for p in plans}
    driven = {}
    out: dict[int, float] = {}
    for p in plans:
        prev = by_step.get(p.step - stride)
        if prev is None:
            continue
        for q in (p, prev):
            if q.step not in driven:
                driven[q.step] = simulate_plan(q, sim)
        now, before = driven[p.step], driven[prev.step]
        n = min(len(now) - stride, len(before) - stride)
        if n < 3:
            continue
        ok = two_frame_extended_comfort(now[None, :n], before[None, stride : stride + n], np.arange(n) * sim.dt_s)
        out[p.step] = float(ok[0])
    return out


class EpisodeScorer:
    """Scores of one finished episode (see the module docstring).

    Args:
        sim: the simulator after the episode.
        plans: the policy's trajectories, every `EC_INTERVAL_S` (empty: EC not scored).
        config: NAVSIM's thresholds.
    """

    def __init__(self, sim: Simulator, plans: list[Plan], config: ScorerConfig | None = None) -> None:
        assert sim.recorder is not None
        self.sim, self.config = sim, config or ScorerConfig()
        n = sim.recorder.n_recorded
        self.n = n
        reds = red_lanes(sim, n)
        states = sim.recorder.ego_states()
        self.scene = Scene(states[None], sim.recorder.boxes[:n], reds, sim.road, sim.route, sim.vehicle, sim.dt_s, self.config)
        self.human = Scene(sim.log_states[None, :n], [sim.log.at(k) for k in range(n)], reds, sim.road, sim.route, sim.vehicle,
                           sim.dt_s, self.config)  # fmt: skip
        self.ec = extended_comfort(plans, sim) if plans else {}
        self.has_plans = bool(plans)

    def window(self, t0: int, t1: int, history_steps: int) -> tuple[dict[str, Any], Metrics]:
        """Scores of the window [t0, t1] (policy and human-filtered EPDMS)."""
        hist_lo = max(t0 - history_steps, 0)
        hist = self.scene.states[:, hist_lo:t0] if history_steps else None
        hist_h = self.human.states[:, hist_lo:t0] if history_steps else None
        m, mh = self.scene.metrics(t0, t1, hist), self.human.metrics(t0, t1, hist_h)
        ref = float(mh.progress_m[0])
        ep = normalized_progress(m.progress_m, m.no_at_fault_collisions * m.drivable_area_compliance * m.driving_direction_compliance
                                 * m.traffic_light_compliance, ref, self.config)  # fmt: skip
        ec_values = [v for k, v in self.ec.items() if t0 < k <= t1] if history_steps else list(self.ec.values())
        ec = (min(ec_values) if ec_values else 1.0) if self.has_plans else None
        ec_arr = None if ec is None else np.array([ec])
        raw = metrics_dict(m, 0, float(ep[0]), aggregate(m, ep, self.config, ec_arr), ec)
        filtered = human_filtered(m, mh)
        raw["epdms_human_filtered"] = float(aggregate(filtered, ep, self.config, ec_arr)["epdms"][0])
        raw["human_failed"] = [name for name in METRIC_NAMES if name != "ego_progress" and float(getattr(mh, name)[0]) == 0.0]
        return raw, m

    def episode(self) -> dict[str, Any]:
        """The whole rollout as one proposal."""
        out, m = self.window(0, max(self.n - 1, 1) if self.n > 1 else 0, 0) if self.n > 1 else ({}, None)
        if m is not None:
            out["first_at_fault_collision_s"] = _seconds(float(m.collision_index[0]), self.sim.dt_s)
            out["first_ttc_infraction_s"] = _seconds(float(m.ttc_index[0]), self.sim.dt_s)
        return out

    def per_step(self) -> list[dict[str, Any]]:
        """NAVSIM's scores of the 4 s window from each step (None where the window does not fit)."""
        h = int(round(WINDOW_S / self.sim.dt_s))
        hist = int(round(HISTORY_S / self.sim.dt_s))
        rows: list[dict[str, Any]] = []
        for t0 in range(self.n):
            rows.append(self.window(t0, t0 + h, hist)[0] if t0 + h <= self.n - 1 else {})
        return rows

    def step_flags(self) -> dict[str, NDArrayFloat]:
        """Per-step facts of the rollout (T,): at-fault contact, areas, red-zone touch, progress, deviation."""
        g, sc = self.scene.geo, self.scene
        c, (fault, _) = sc.collisions, sc.at_fault
        at_fault = np.zeros(self.n, bool)
        at_fault[c.t[fault]] = True
        contact = np.zeros(self.n, bool)
        contact[c.t] = True
        red = np.zeros(self.n, bool)
        if sc.touch.shape[-1]:
            red = (sc.touch[0] & sc.red).any(axis=-1)
        return {"contact": contact, "at_fault_contact": at_fault, "non_drivable": g.non_drivable[0], "multiple_lanes": g.multiple_lanes[0],
                "oncoming": g.oncoming[0], "in_intersection": g.center_in_intersection[0], "touches_red_zone": red,
                "route_progress_m": sc.progress_s[0], "centerline_deviation_m": sc.deviation_m[0]}  # fmt: skip


def _seconds(index: float, dt_s: float) -> float | None:
    return None if not np.isfinite(index) else round(index * dt_s, 3)


def rule_findings(rollout: Scenario, road: RoadModel | None = None) -> list[dict[str, Any]]:
    """The ego's findings of `avsim validate`'s rule checks and overlaps on the rollout (`road`: its road model)."""
    from avsim.edit.validate import EGO_ID, ValidationConfig, validate_scenario

    found = validate_scenario(rollout, ValidationConfig(rule_checks=RULE_KINDS), road)
    return [f.to_dict() for f in found if f.kind in (*RULE_KINDS, "overlap", "off_road") and EGO_ID in f.ids]
