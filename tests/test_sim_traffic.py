"""IDM agents (nuPlan's `idm_agents`): the model's step, following, stopping for the ego and at red."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sim_cases import DT_S, scenario

from avsim.core.agents import AgentTracks
from avsim.core.transforms import yaw_to_quat
from avsim.sim.actions import Control
from avsim.sim.stepper import AgentMode, SimConfig, Simulator
from avsim.sim.traffic import FREE_ROAD_M, IDMConfig, IDMTraffic


def _tracks(rows: list[tuple[str, float, float, float]], duration_s: float = 30.0) -> AgentTracks:
    """Cars (id, x, y, speed) logged driving east at constant speed."""
    t = np.arange(0.0, duration_s + 1e-9, DT_S)
    parts = []
    for tid, x, y, v in rows:
        n = len(t)
        parts.append((np.full(n, tid), np.full(n, "car"), np.round(t * 1e9).astype(np.int64), np.c_[x + v * t, np.full(n, y), np.full(n, 0.8)],
                      np.tile([4.5, 2.0, 1.6], (n, 1)), yaw_to_quat(np.zeros(n))))
    return AgentTracks.from_unsorted(*(np.concatenate(c) for c in zip(*parts)))


def _standing_ego(x: float, y: float = 0.0, n: int = 301, lights: list[tuple[float, str]] | None = None,
                  agents: AgentTracks | None = None) -> Simulator:  # fmt: skip
    sc = scenario(np.c_[np.full(n, x), np.full(n, y)], np.zeros(n), lights, agents)
    sim = Simulator(sc, SimConfig(agents=AgentMode.IDM, idm=IDMConfig(spread=0.0)))
    sim.reset()
    return sim


def _agent(sim: Simulator, tid: str) -> tuple[float, float]:
    """(x, speed) of an agent now."""
    b = sim.traffic.boxes(sim.k)
    i = int(np.flatnonzero(b.track_id == tid)[0])
    return float(b.center_m[i, 0]), float(b.speed_mps[i])


def test_free_road_step_is_nuplans_idm() -> None:
    sim = _standing_ego(-50.0, agents=_tracks([("car_a", 0.0, 3.5, 5.0)]))
    x0, v0 = _agent(sim, "car_a")
    sim.step(Control(0.0, 0.0))
    x1, v1 = _agent(sim, "car_a")
    cfg = IDMConfig()
    s_star = cfg.min_gap_m + v0 * cfg.headway_s + v0 * (v0 - 0.0) / (2 * np.sqrt(cfg.accel_max_mps2 * cfg.decel_max_mps2))
    s_alpha = max(FREE_ROAD_M - 4.5 / 2, cfg.min_gap_m)  # the map ends: free road, nothing to stop for
    dv = cfg.accel_max_mps2 * (1 - (v0 / cfg.target_velocity_mps) ** 4 - (s_star / s_alpha) ** 2)
    assert v1 == pytest.approx(v0 + DT_S * dv)
    assert x1 == pytest.approx(x0 + DT_S * v0)


def test_agent_stops_behind_the_ego() -> None:
    sim = _standing_ego(60.0, agents=_tracks([("car_a", 20.0, 0.0, 10.0)]))
    gaps = []
    while not sim.done:
        sim.step(Control(0.0, 0.0))
        x, v = _agent(sim, "car_a")
        gaps.append((60.0 + 1.4 - 2.4) - (x + 2.25))  # ego rear minus agent front
    assert min(gaps) > 0.5  # never touches the ego
    assert _agent(sim, "car_a")[1] < 0.05  # and comes to a stop


def test_agent_waits_at_red_and_goes_on_green() -> None:
    sim = _standing_ego(-50.0, y=3.5, lights=[(0.0, "red"), (15.0, "green")], agents=_tracks([("car_a", -40.0, 0.0, 8.0)]))
    fronts = {}
    while not sim.done:
        sim.step(Control(0.0, 0.0))
        fronts[round(sim.k * DT_S, 1)] = _agent(sim, "car_a")[0] + 2.25
    assert max(v for t, v in fronts.items() if t < 15.0) <= 0.05  # stops before the junction (x = 0) while red
    assert fronts[14.9] > -10.0
    assert fronts[30.0] > 20.0  # drives through once green


def test_same_seed_same_agents_and_spread_draws_per_seed() -> None:
    sc = scenario(np.c_[np.full(51, -50.0), np.zeros(51)], np.zeros(51), agents=_tracks([("car_a", 0.0, 3.5, 5.0), ("car_b", -30.0, 3.5, 5.0)], 5.0))

    def run(seed: int) -> np.ndarray:
        sim = Simulator(sc, SimConfig(agents=AgentMode.IDM, seed=seed))
        sim.reset()
        while not sim.done:
            sim.step(Control(0.0, 0.0))
        return sim.traffic.boxes(sim.k).center_m

    np.testing.assert_array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))


def _padded_leads(traffic: Any, on: np.ndarray, route: np.ndarray, seg: np.ndarray, occ: Any) -> tuple[np.ndarray, np.ndarray]:
    """The lead search as a row-major argmin over an (agent, route slot, widest lane) grid: the
    formulation `IDMTraffic._leads` replaced, restated as its reference (gap and lead velocity)."""
    offset = np.concatenate([np.zeros((len(on), 1)), np.cumsum(seg, axis=1)[:, :-1]], axis=1) - traffic.s[on, None]
    lane_q = np.maximum(route, 0)
    count = np.where(route >= 0, occ.start[lane_q + 1] - occ.start[lane_q], 0)
    col = np.arange(max(int(count.max()), 1))
    valid = col < count[..., None]
    rows = np.where(valid, occ.start[lane_q][..., None] + col, 0)
    near, far = offset[..., None] + occ.a[rows], offset[..., None] + occ.b[rows]
    valid &= (far > 0) & (occ.owner[rows] != on[:, None, None])
    front = (traffic.length[on] / 2 + traffic.v[on] * traffic.headway[on])[:, None, None]
    gap = np.where(valid, np.maximum(near - front, 0.0), np.inf).reshape(len(on), -1)
    best = np.argmin(gap, axis=1)
    lead_gap = gap[np.arange(len(on)), best]
    found = np.isfinite(lead_gap)
    togo = seg.sum(axis=1) - traffic.s[on]
    lead_v = occ.v[rows.reshape(len(on), -1)[np.arange(len(on)), best]]
    return np.where(found, lead_gap, np.where(traffic.stop_at_end[on], togo, FREE_ROAD_M)), np.where(found, lead_v, 0.0)


def test_lead_search_equals_the_padded_grid_argmin() -> None:
    """The per-object lead search picks, bit for bit, what an argmin over the padded grid picks (ties: the first)."""
    from avsim.scenario.sample import make_sample_scenario

    sim = Simulator(make_sample_scenario(seed=0, duration_s=6.0, fps=10.0), SimConfig(agents=AgentMode.IDM))
    sim.reset()
    traffic = sim.traffic
    assert isinstance(traffic, IDMTraffic)
    leads = traffic._leads
    checked = []

    def spy(on: np.ndarray, route: np.ndarray, seg: np.ndarray, occ: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out = leads(on, route, seg, occ)
        gap, v_lead = _padded_leads(traffic, on, route, seg, occ)
        assert np.array_equal(out[0], gap) and np.array_equal(out[1], v_lead)
        checked.append(int((out[2] == 0.0).sum()))  # agents with a lead (no rear length added)
        return out

    traffic._leads = spy  # type: ignore[method-assign]
    while not sim.done:
        sim.step(Control(0.0, 0.0))
    assert len(checked) == sim.k and sum(checked) > 0
