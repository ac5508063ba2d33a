"""Traffic-light edits: set a light's state timeline, shift timelines, hold a state longer.

A light's timeline is a step function: each row is a state change at a time. Times are
seconds on the edit clock (0 = the ego's first timestamp).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from avsim.core.errors import AvsimValueError
from avsim.core.lights import LIGHT_STATES, TrafficLightStates
from avsim.scenario import Scenario

from .common import check_time, to_ns


def _known_lights(scenario: Scenario) -> set[str]:
    ids = set(np.asarray(scenario.lights.light_id).astype(str).tolist())
    ids |= set(np.asarray(scenario.map.traffic_lights.ids).astype(str).tolist())
    return ids


def _require_lights(scenario: Scenario, light_ids: Sequence[str]) -> list[str]:
    ids = [str(i) for i in light_ids]
    known = _known_lights(scenario)
    for i in ids:
        if i not in known:
            raise AvsimValueError(f"light_id: unknown traffic light {i!r}")
    return ids


def _rebuild(scenario: Scenario, keep: np.ndarray, light_id: ArrayLike, timestamps_ns: ArrayLike, state: ArrayLike) -> Scenario:
    lights = scenario.lights
    return scenario.replace(
        lights=TrafficLightStates.from_unsorted(
            np.concatenate([np.asarray(lights.light_id)[keep].astype(str), np.asarray(light_id, dtype=str)]),
            np.concatenate([np.asarray(lights.timestamps_ns)[keep], np.asarray(timestamps_ns, dtype=np.int64)]),
            np.concatenate([np.asarray(lights.state)[keep].astype(str), np.asarray(state, dtype=str)]),
        )
    )


def _compact(ts: np.ndarray, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop rows that repeat the previous state (the step function is unchanged)."""
    if len(ts) < 2:
        return ts, states
    keep = np.r_[True, states[1:] != states[:-1]]
    return ts[keep], states[keep]


def set_light_states(scenario: Scenario, light_ids: Sequence[str], timeline: Sequence[tuple[float, str]]) -> Scenario:
    """Replace the state timeline of each light with `timeline` [(t_s, state), ...] (sorted by time)."""
    ids = _require_lights(scenario, light_ids)
    if not timeline:
        raise AvsimValueError("timeline: needs at least one (t_s, state) entry")
    times = np.array([float(t) for t, _ in timeline])
    states = np.array([str(s) for _, s in timeline])
    for i, (t, s) in enumerate(zip(times, states)):
        check_time(scenario, float(t), f"timeline[{i}].t_s")
        if s not in LIGHT_STATES:
            raise AvsimValueError(f"timeline[{i}].state: {s!r} is not one of {LIGHT_STATES}")
    if np.any(np.diff(times) <= 0):
        raise AvsimValueError("timeline: times must be strictly increasing")
    ts = to_ns(scenario, times)
    keep = ~np.isin(np.asarray(scenario.lights.light_id).astype(str), ids)
    rows = [(i, t, s) for i in ids for t, s in zip(ts, states)]
    return _rebuild(scenario, keep, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])


def shift_lights(scenario: Scenario, light_ids: Sequence[str], dt_s: float) -> Scenario:
    """Delay (dt_s > 0) or advance each light's whole timeline by `dt_s` seconds.

    The state a light had at the scenario start is kept from the start on, so a delayed light
    is never 'unknown' at the beginning.
    """
    ids = _require_lights(scenario, light_ids)
    lights = scenario.lights
    lid = np.asarray(lights.light_id).astype(str)
    t0 = int(to_ns(scenario, 0.0))
    out_id, out_ts, out_state = [], [], []
    for i in ids:
        sel = lid == i
        ts = np.asarray(lights.timestamps_ns)[sel] + np.int64(round(dt_s * 1e9))
        st = np.asarray(lights.state)[sel].astype(str)
        if not len(ts):
            continue
        if ts[0] > t0 and dt_s > 0:
            ts, st = np.concatenate([[t0], ts]), np.concatenate([st[:1], st])
        ts, st = _compact(ts, st)
        out_id += [i] * len(ts)
        out_ts += ts.tolist()
        out_state += st.tolist()
    keep = ~np.isin(lid, ids)
    return _rebuild(scenario, keep, out_id, out_ts, out_state)


def extend_light_state(scenario: Scenario, light_ids: Sequence[str], state: str, at_s: float, extra_s: float) -> Scenario:
    """Hold `state` `extra_s` seconds longer in the phase of that state in effect at (or next
    after) `at_s`; every later change of the light moves back by `extra_s` ("red held longer")."""
    if state not in LIGHT_STATES:
        raise AvsimValueError(f"state: {state!r} is not one of {LIGHT_STATES}")
    if extra_s <= 0:
        raise AvsimValueError("extra_s: must be > 0")
    check_time(scenario, at_s, "at_s")
    ids = _require_lights(scenario, light_ids)
    lights = scenario.lights
    lid = np.asarray(lights.light_id).astype(str)
    t_at = int(to_ns(scenario, at_s))
    shift = np.int64(round(extra_s * 1e9))
    out_id, out_ts, out_state = [], [], []
    for i in ids:
        sel = lid == i
        ts = np.asarray(lights.timestamps_ns)[sel].copy()
        st = np.asarray(lights.state)[sel].astype(str)
        # the phase: the last `state` row at or before t_at if it is still in effect, else the next one
        current = np.flatnonzero(ts <= t_at)
        if len(current) and st[current[-1]] == state:
            k = int(current[-1])
        else:
            later = np.flatnonzero((ts > t_at) & (st == state))
            if not len(later):
                raise AvsimValueError(f"state: light {i!r} shows no {state!r} at or after {at_s:g} s")
            k = int(later[0])
        ts[k + 1 :] += shift
        out_id += [i] * len(ts)
        out_ts += ts.tolist()
        out_state += st.tolist()
    keep = ~np.isin(lid, ids)
    return _rebuild(scenario, keep, out_id, out_ts, out_state)
