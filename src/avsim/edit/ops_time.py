"""Time edits: crop the clip, resample it to a new rate, play it faster or slower.

Timestamps stay absolute (int64 ns); the edit clock (0 = the ego's first timestamp) of the
result starts at its own first ego pose. A scenario's frame origin (`Scenario.frame_origin_ns`,
the source's first sample) is kept where the result still spans it (scaled with the clock by
`retime`), else frames start at the first ego pose.
"""

from __future__ import annotations

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.lights import TrafficLightStates
from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3
from avsim.scenario import Scenario

from .common import build_agents, check_time, columns, start_ns, to_ns


def crop(scenario: Scenario, start_s: float = 0.0, stop_s: float | None = None) -> Scenario:
    """Keep [start_s, stop_s] of the clip: ego poses, agent rows and light changes in that window.

    Each light keeps the state it had at `start_s` as a change at the new start.
    """
    check_time(scenario, start_s, "start_s")
    if stop_s is not None:
        check_time(scenario, stop_s, "stop_s")
        if stop_s <= start_s:
            raise AvsimValueError("stop_s: must be after start_s")
    t_start = int(to_ns(scenario, start_s))
    t_stop = int(scenario.ego.timestamps_ns[-1]) if stop_s is None else int(to_ns(scenario, stop_s))
    ego = scenario.ego.crop(t_start, t_stop)
    lo, hi = int(ego.timestamps_ns[0]), int(ego.timestamps_ns[-1])
    cols = columns(scenario.agents)
    keep = (cols["timestamps_ns"] >= lo) & (cols["timestamps_ns"] <= hi)
    agents = build_agents({k: v[keep] for k, v in cols.items()})
    lights = scenario.lights
    ids = np.asarray(lights.light_ids).astype(str)
    at_start = lights.state_at(ids, lo)
    known = at_start != "unknown"
    ts = np.asarray(lights.timestamps_ns)
    inside = (ts > lo) & (ts <= hi)
    new_lights = TrafficLightStates.from_unsorted(
        np.concatenate([ids[known], np.asarray(lights.light_id)[inside].astype(str)]),
        np.concatenate([np.full(int(known.sum()), lo, dtype=np.int64), ts[inside]]),
        np.concatenate([at_start[known], np.asarray(lights.state)[inside].astype(str)]),
    )
    origin = scenario.frame_origin_ns  # frame 0 stays on the source's sample when the window keeps it
    return scenario.replace(ego=ego, agents=agents, lights=new_lights,
                            frame_origin_ns=origin if origin is not None and lo <= origin <= hi else None)


def resample(scenario: Scenario, rate_hz: float) -> Scenario:
    """Resample the ego and every track to `rate_hz` over the ego's span (the clip rate).

    Tracks are interpolated within their own spans only (no extrapolation), so no agent
    appears earlier or stays later than it did. Light timelines are step functions and keep
    their exact change times.
    """
    if not rate_hz > 0:
        raise AvsimValueError("rate_hz: must be > 0")
    ts = scenario.ego.uniform_timestamps(rate_hz)
    if len(ts) < 2:
        raise AvsimValueError(f"rate_hz: {rate_hz:g} Hz leaves fewer than two frames")
    ego = scenario.ego.resample(ts)
    agents = scenario.agents.resample(ts, max_extrapolation_s=0.0) if len(scenario.agents) else scenario.agents
    origin = scenario.frame_origin_ns
    keep = origin is not None and int(ts[0]) <= origin <= int(ts[-1])
    return scenario.replace(ego=ego, agents=build_agents(columns(agents)), frame_origin_ns=origin if keep else None)


def retime(scenario: Scenario, speed_factor: float) -> Scenario:
    """Play the whole scene `speed_factor` times faster (> 1) or slower (< 1).

    Every timestamp t becomes start + (t - start) / speed_factor, for the ego, agents and
    lights alike; so all speeds scale by `speed_factor` and the clip's length by its inverse.
    """
    if not speed_factor > 0:
        raise AvsimValueError("speed_factor: must be > 0")
    t0 = start_ns(scenario)

    def scale(ts: np.ndarray) -> np.ndarray:
        return t0 + np.round((np.asarray(ts, dtype=np.int64) - t0).astype(np.float64) / speed_factor).astype(np.int64)

    ego_ts = scale(scenario.ego.timestamps_ns)
    if np.any(np.diff(ego_ts) <= 0):
        raise AvsimValueError(f"speed_factor: {speed_factor:g} merges ego timestamps")
    pose = scenario.ego.world_SE3_ego
    ego = EgoTrajectory(ego_ts, SE3(np.array(pose.rotation), np.array(pose.translation)))
    cols = columns(scenario.agents)
    cols["timestamps_ns"] = scale(cols["timestamps_ns"])
    lights = scenario.lights
    new_lights = TrafficLightStates(
        np.array(lights.light_id, copy=True), scale(lights.timestamps_ns), np.array(lights.state, copy=True)
    )
    origin = None if scenario.frame_origin_ns is None else int(scale(np.array([scenario.frame_origin_ns]))[0])
    return scenario.replace(ego=ego, agents=build_agents(cols), lights=new_lights, frame_origin_ns=origin)
