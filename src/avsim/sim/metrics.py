"""Scores of an episode: NAVSIM's metrics over every 4 s window and their mean (the episode's
headline), the whole rollout as one proposal, the human-filtered EPDMS, and avsim's own
traffic-rule checks.

- Windows: the window of `WINDOW_S` (NAVSIM's 4 s) starting at each step whose window fits in
  the rollout, scored as NAVSIM v2 scores a frame (`avsim.sim.scoring`), with the 1.5 s of the
  rollout before it as history (HC; without its last 0.1 s, as NAVSIM samples the past
  trajectory, `history_time_us[:-1]`); EP is normalised by the larger of the window's own
  admissible progress and the logged ego's progress over the same window masked by the logged
  ego's multiplicative metrics there (NAVSIM normalises by PDM-Closed's proposal, masked by its
  own: avsim's reference is the log, which every scenario has); EC compares the plan of the
  window's first step with the plan 0.5 s before (NAVSIM's two-frame extended comfort), and a
  window without that pair (the first 0.5 s, a policy that returns controls) has no EC (EPDMS
  over 14 instead of 16).
- Episode (the headline, `sim_metrics.json`'s `episode`): the mean of each score over the
  windows, as NAVSIM reports a split by the mean over its frames; an episode shorter than one
  window is scored as one window over what it has.
- Rollout: the whole rollout scored as one proposal (a diagnostic: over 20 s DAC is "never left
  the road", NC "never hit anything"); its EC is the share of plan pairs within the bounds.
- Human filter (NAVSIM's `human_penalty_filter`, EPDMS only): a sub-score the logged ego itself
  fails (0) over the same window, driving among the logged agents, is set to 1 for the policy.
  NAVSIM scores the human without its history, so its HC is 1 and HC is never filtered.
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


FILTERED = ("no_at_fault_collisions", "drivable_area_compliance", "driving_direction_compliance", "traffic_light_compliance",
            "time_to_collision_within_bound", "lane_keeping")  # HC: NAVSIM's human has no history (HC 1), never filtered


def human_filtered(agent: Metrics, human: Metrics) -> Metrics:
    """`agent` with every sub-score the human fails (0) set to 1 (NAVSIM's human penalty filter)."""
    fields = {}
    for name in Metrics.__dataclass_fields__:
        value = getattr(agent, name)
        if name in FILTERED:
            value = np.where(getattr(human, name) == 0, 1.0, value)
        fields[name] = value
    return Metrics(**fields)


def multiplicative(m: Metrics) -> NDArrayFloat:
    """(B,) NC * DAC * DDC * TLC."""
    return m.no_at_fault_collisions * m.drivable_area_compliance * m.driving_direction_compliance * m.traffic_light_compliance


def window_progress(m: Metrics, log: Metrics, config: ScorerConfig) -> NDArrayFloat:
    """(B,) EP over a window: progress normalised by the largest admissible one among the sequences
    and the log's, each masked by its own multiplicative metrics (NAVSIM's `_aggregate_pdm_scores`
    with the log in PDM-Closed's place: a log that fails NC, DAC, DDC or TLC there does not count).

    Args:
        m: the sequences' metrics over the window.
        log: the logged ego's metrics over the same window (one sequence).
        config: the 5 m threshold.

    Returns:
        EP in [0, 1].
    """
    reference = float(log.progress_m[0] * multiplicative(log)[0])
    return normalized_progress(m.progress_m, multiplicative(m), reference, config)


def simulate_plans(plans: list[Plan], sim: Simulator) -> dict[int, NDArrayFloat]:
    """Each plan driven open loop from its step (NAVSIM's `PDMSimulator`: LQR tracking, the bicycle
    model with NAVSIM's limits), plans of one length in one batch.

    Returns:
        Plan step -> (M+1, 11) states.
    """
    tracker = LQRTracker(sim.vehicle.wheel_base_m, sim.dt_s, sim.config.tracker)
    model = KinematicBicycle(sim.vehicle, VehicleLimits.navsim())
    by_length: dict[int, list[Plan]] = {}
    for p in plans:
        by_length.setdefault(len(p.reference), []).append(p)
    out: dict[int, NDArrayFloat] = {}
    for n, group in by_length.items():
        ref = np.stack([p.reference for p in group])
        profiles = velocity_curvature_profiles(ref, sim.dt_s, sim.config.tracker)
        states = np.zeros((len(group), n, len(group[0].state)))
        states[:, 0] = np.stack([p.state for p in group])
        for i in range(1, n):
            cmd = tracker.commands(states[:, i - 1], ref, index=i - 1, profiles=profiles)
            states[:, i] = model.propagate(states[:, i - 1], cmd, sim.dt_s)
        out.update({p.step: states[k] for k, p in enumerate(group)})
    return out


def extended_comfort(plans: list[Plan], sim: Simulator) -> dict[int, float]:
    """EC of each plan against the plan `EC_INTERVAL_S` earlier (keyed by the later plan's step)."""
    stride = max(int(round(EC_INTERVAL_S / sim.dt_s)), 1)
    steps = {p.step for p in plans}
    driven = simulate_plans(plans, sim)
    out: dict[int, float] = {}
    for k in sorted(steps):
        if k - stride not in steps:
            continue
        now, before = driven[k], driven[k - stride]
        n = min(len(now) - stride, len(before) - stride)
        if n < 3:
            continue
        ok = two_frame_extended_comfort(now[None, :n], before[None, stride : stride + n], np.arange(n) * sim.dt_s)
        out[k] = float(ok[0])
    return out


def score_window(scene: Scene, human: Scene, t0: int, t1: int, history_steps: int, ec: float | None,
                 config: ScorerConfig) -> tuple[dict[str, Any], Metrics]:  # fmt: skip
    """NAVSIM's scores of the window [t0, t1] of a driven sequence (see the module docstring).

    Args:
        scene: the driven sequence (one) in its world.
        human: the logged ego (one sequence) in the logged world.
        t0, t1: the window.
        history_steps: how many states before t0 count as history (HC).
        ec: the window's extended comfort (None: not scored).
        config: NAVSIM's thresholds.

    Returns:
        (the scores as plain values, with the human-filtered EPDMS, the sub-scores the human fails,
        the log's progress and multiplicative metrics; the raw metrics).
    """
    lo = max(t0 - history_steps, 0)
    hist = scene.states[:, lo : max(t0 - 1, lo)] if history_steps else None  # NAVSIM pads without the last 0.1 s
    m, mh = scene.metrics(t0, t1, hist), human.metrics(t0, t1, None)
    ep = window_progress(m, mh, config)
    ec_arr = None if ec is None else np.array([ec])
    raw = metrics_dict(m, 0, float(ep[0]), aggregate(m, ep, config, ec_arr), ec)
    raw["epdms_human_filtered"] = float(aggregate(human_filtered(m, mh), ep, config, ec_arr)["epdms"][0])
    raw["human_failed"] = [name for name in FILTERED if float(getattr(mh, name)[0]) == 0.0]
    raw["log_progress_m"], raw["log_multiplicative_metrics_prod"] = float(mh.progress_m[0]), float(multiplicative(mh)[0])
    return raw, m


class EpisodeScorer:
    """Scores of one finished episode (see the module docstring).

    Args:
        sim: the simulator after the episode.
        plans: the policy's trajectories, one per step (empty: EC not scored).
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
        self.window_steps = int(round(WINDOW_S / sim.dt_s))
        self.history_steps = int(round(HISTORY_S / sim.dt_s))

    def window(self, t0: int, t1: int, history_steps: int, ec: float | None) -> tuple[dict[str, Any], Metrics]:
        """Scores of the window [t0, t1] (`score_window`)."""
        return score_window(self.scene, self.human, t0, t1, history_steps, ec, self.config)

    def rollout(self) -> dict[str, Any]:
        """The whole rollout as one proposal (its EC the share of plan pairs within the bounds)."""
        if self.n < 2:
            return {}
        ec = (float(np.mean(list(self.ec.values()))) if self.ec else 1.0) if self.has_plans else None
        out, m = self.window(0, self.n - 1, 0, ec)
        out["first_at_fault_collision_s"] = _seconds(float(m.collision_index[0]), self.sim.dt_s)
        out["first_ttc_infraction_s"] = _seconds(float(m.ttc_index[0]), self.sim.dt_s)
        return out

    def per_step(self) -> list[dict[str, Any]]:
        """NAVSIM's scores of the 4 s window from each step (empty where the window does not fit)."""
        rows: list[dict[str, Any]] = []
        for t0 in range(self.n):
            if t0 + self.window_steps <= self.n - 1:
                rows.append(self.window(t0, t0 + self.window_steps, self.history_steps, self.ec.get(t0) if self.has_plans else None)[0])
            else:
                rows.append({})
        return rows

    def episode(self, windows: list[dict[str, Any]], rollout: dict[str, Any]) -> dict[str, Any]:
        """The headline: each score's mean over the scored windows (see the module docstring).

        Args:
            windows: `per_step()`'s rows.
            rollout: `rollout()`.

        Returns:
            The mean of every score, `windows_scored`, `aggregation` ("window_mean", or "rollout" for an
            episode shorter than one window, scored as one window over what it has), the rollout's first
            at-fault collision and TTC infraction times, and per sub-score the windows the human failed.
        """
        scored = [w for w in windows if w]
        base = {k: rollout.get(k) for k in ("first_at_fault_collision_s", "first_ttc_infraction_s")}
        if not scored:
            whole = {k: v for k, v in rollout.items() if k != "human_failed"}
            return {**whole, **base, "aggregation": "rollout", "windows_scored": 0,
                    "human_failed_windows": {k: int(k in rollout.get("human_failed", [])) for k in FILTERED}}  # fmt: skip
        out: dict[str, Any] = {}
        for key, value in scored[0].items():
            if isinstance(value, float) or value is None:
                vals = [w[key] for w in scored if w.get(key) is not None]
                out[key] = float(np.mean(vals)) if vals else None
        out.update(base)
        out["aggregation"], out["windows_scored"] = "window_mean", len(scored)
        out["human_failed_windows"] = {k: sum(k in w["human_failed"] for w in scored) for k in FILTERED}
        return out

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
