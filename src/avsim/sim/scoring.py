"""NAVSIM's PDM scorer (`navsim/planning/simulation/planner/pdm_planner/scoring/pdm_scorer.py`), restated.

`Scene` takes a batch of ego state sequences (B, T) and the world they drove in (the objects and
the red on-route light zones at every time index) and computes, once, the geometry every metric
reads (`avsim.sim.scene_geometry`). `Scene.metrics(t0, t1)` then scores the window [t0, t1] of every
sequence as NAVSIM scores a proposal of t1 - t0 steps:

- NC, no at-fault collision (`_calculate_no_at_fault_collision`): each contact from t0 on (NAVSIM v2
  scores against the traffic policy's tracks, which clears the list of objects touching at the
  start) is classified (`get_collision_type`): ego stopped (speed
  <= 0.05 m/s) -> not at fault; object stopped (<= 0.05 m/s as first seen in the window, NAVSIM's
  `unique_objects`, or a static object) -> at fault;
  object behind the ego (angle > 150 degrees from its heading) -> not at fault; the ego's front
  edge touches it -> at fault; else lateral, at fault when the ego is in several lanes or off the
  drivable area. At fault: 0 for agents (Car, Truck, Pedestrian, Cyclist), 0.5 for static objects
  (Others); a contact not at fault ignores that object from then on.
- DAC (`_calculate_drivable_area_compliance`): 0 when a corner leaves the drivable area at any time.
- DDC (`_calculate_driving_direction_compliance`): the centre's travel while in no on-route lane and
  outside intersections, summed over 1 s windows; max < 2 m -> 1, < 6 m -> 0.5, else 0.
- TLC (`_calculate_traffic_light_compliance`): 0 when the ego box touches a red on-route controlled
  lane (NAVSIM: the lane connector behind a red light) at any time of the window, the first
  included, with the lights of each time (NAVSIM v2's metric cache holds them per time).
- EP (`_calculate_progress`): progress of the box centre along the route's centre line, >= 0;
  normalised in `aggregate` by the largest progress of an admissible candidate (multiplicative
  metrics > 0), 1 when that is below 5 m.
- TTC (`_calculate_ttc`): at times t up to t1 - 0.9 s, the ego box moved ahead at constant velocity
  by 0, 0.3, 0.6, 0.9 s against the objects of t + 0, 3, 6, 9 steps; a contact (ego moving faster
  than 5e-3 m/s) with an object ahead (within 30 degrees), or not behind while the ego is in several
  lanes, off the drivable area or with its rear axle in an intersection -> 0; other contacts ignore
  that object from then on.
- LK (`_calculate_lane_keeping`): 0 when the centre stays more than 0.5 m from the centre line for
  2 s in a row (times in an intersection are skipped).
- HC / C (`_calculate_history_comfort`, `pdm_comfort_metrics`): the comfort bounds over the window,
  HC with the states before it (history) prepended (1 without a history, as NAVSIM), C (NAVSIM v1)
  without.

Departures (docs/closed_loop.md): the ego box is the scenario's ego, not nuPlan's Pacifica.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely

from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt
from avsim.maps.road import RoadModel
from avsim.sim.boxes import Boxes
from avsim.sim.comfort import ego_is_comfortable
from avsim.sim.geometry import segment_hits_box
from avsim.sim.route import Route
from avsim.sim.scene_geometry import Contacts, EgoGeometry, FlatWorld, ego_geometry, is_agent_ahead, is_agent_behind
from avsim.sim.vehicle import VehicleParameters

AGENT_CLASSES = ("Car", "Truck", "Pedestrian", "Cyclist")
METRIC_NAMES = ("no_at_fault_collisions", "drivable_area_compliance", "driving_direction_compliance", "traffic_light_compliance",
                "ego_progress", "time_to_collision_within_bound", "lane_keeping", "history_comfort")  # fmt: skip


@dataclass(frozen=True)
class ScorerConfig:
    """NAVSIM's `PDMScorerConfig` (weights and thresholds), plus `get_collision_type`'s stop speed."""

    progress_weight: float = 5.0
    ttc_weight: float = 5.0
    lane_keeping_weight: float = 2.0
    history_comfort_weight: float = 2.0
    two_frame_extended_comfort_weight: float = 2.0
    comfort_weight: float = 2.0  # NAVSIM v1's PDMS
    driving_direction_horizon_s: float = 1.0
    driving_direction_compliance_threshold_m: float = 2.0
    driving_direction_violation_threshold_m: float = 6.0
    stopped_speed_threshold_mps: float = 5e-3
    collision_stopped_speed_mps: float = 5e-2
    future_collision_horizon_window_s: float = 1.0
    ttc_step_s: float = 0.3
    progress_distance_threshold_m: float = 5.0
    lane_keeping_deviation_limit_m: float = 0.5
    lane_keeping_horizon_window_s: float = 2.0


@dataclass(frozen=True)
class Metrics:
    """NAVSIM's sub-scores of each of B sequences over one window (each (B,)), EP unnormalised,
    and when the first at-fault collision and TTC infraction happened (index into the window, inf: none)."""

    no_at_fault_collisions: NDArrayFloat
    drivable_area_compliance: NDArrayFloat
    driving_direction_compliance: NDArrayFloat
    traffic_light_compliance: NDArrayFloat
    progress_m: NDArrayFloat
    time_to_collision_within_bound: NDArrayFloat
    lane_keeping: NDArrayFloat
    history_comfort: NDArrayFloat
    comfort: NDArrayFloat
    collision_index: NDArrayFloat
    ttc_index: NDArrayFloat


class Scene:
    """Sequences of ego states in a world, prepared for scoring (see the module docstring).

    Args:
        states: (B, T, 11) ego states at the sim's step.
        boxes: T `Boxes`, the objects at each time index.
        red_lanes: T arrays of lane indices whose light is red at that time.
        road: the road graph; route: the route.
        vehicle: the ego; dt_s: the time step; config: NAVSIM's thresholds.
    """

    def __init__(self, states: NDArrayFloat, boxes: list[Boxes], red_lanes: list[NDArrayInt], road: RoadModel, route: Route,
                 vehicle: VehicleParameters, dt_s: float, config: ScorerConfig | None = None) -> None:  # fmt: skip
        self.states, self.road, self.route, self.vehicle, self.dt_s = states, road, route, vehicle, float(dt_s)
        self.config = config or ScorerConfig()
        self.geo: EgoGeometry = ego_geometry(states, vehicle, road, route)
        self.world = FlatWorld(boxes)
        self.progress_s = route.centerline.project(self.geo.center.reshape(-1, 2)).reshape(self.geo.yaw.shape)
        self.deviation_m = route.centerline.distance(self.geo.center.reshape(-1, 2)).reshape(self.geo.yaw.shape)
        self.collisions = self.world.contacts(self.geo, vehicle, 0, 0.0)
        self.at_fault = self._classify(self.collisions)
        step = max(int(round(self.config.ttc_step_s / self.dt_s)), 1)
        self.ttc_offsets = np.arange(0, int(round(self.config.future_collision_horizon_window_s / self.dt_s)), step)
        self.ttc_contacts = [self.world.contacts(self.geo, vehicle, int(f), float(f) * self.dt_s) for f in self.ttc_offsets]
        self.red_touch = self._red_touch(red_lanes)

    # ------------------------------------------------------------------ precomputation
    def _classify(self, c: Contacts, speed_mps: NDArrayFloat | None = None) -> tuple[NDArrayBool, NDArrayFloat]:
        """(at fault, score if at fault) of each contact (NAVSIM's `get_collision_type` and its use);
        `speed_mps` (per contact): the object's speed that decides whether it is stopped (None: at the contact)."""
        g, box, cfg = self.geo, self.world.boxes, self.config
        if not len(c.b):
            return np.zeros(0, bool), np.zeros(0)
        is_agent = np.isin(box.object_class[c.obj], AGENT_CLASSES)
        ego_stopped = g.speed[c.b, c.t] <= cfg.collision_stopped_speed_mps
        speed = box.speed_mps[c.obj] if speed_mps is None else speed_mps
        track_stopped = ~is_agent | (speed <= cfg.collision_stopped_speed_mps)
        behind = is_agent_behind(g.rear_axle[c.b, c.t], g.yaw[c.b, c.t], box.center_m[c.obj, :2])
        corners = g.corners[c.b, c.t]
        front = segment_hits_box(corners[:, 0], corners[:, 3], box.center_m[c.obj, :2], box.yaw_rad[c.obj], box.size_m[c.obj, 0],
                                 box.size_m[c.obj, 1])  # fmt: skip
        stopped_track = ~ego_stopped & track_stopped
        active_front = ~ego_stopped & ~track_stopped & ~behind & front
        lateral = ~ego_stopped & ~track_stopped & ~behind & ~front
        risky = g.multiple_lanes[c.b, c.t] | g.non_drivable[c.b, c.t]
        fault = stopped_track | active_front | (risky & lateral)
        return fault, np.where(is_agent, 0.0, 0.5)

    def _red_touch(self, red_lanes: list[NDArrayInt]) -> NDArrayBool:
        """(B, T, Z) whether the ego box touches each red-light zone (an on-route lane whose entry a light gates)."""
        b, t = self.geo.yaw.shape
        zones = np.flatnonzero(self.route.on_route & (self.road.light_of_lane != "")) if self.road.n_lanes else np.zeros(0, np.int64)
        self.zone_lanes = zones
        self.red = np.zeros((t, len(zones)), bool)
        for k, lanes in enumerate(red_lanes):
            self.red[k] = np.isin(zones, lanes)
        self.touch = np.zeros((b, t, len(zones)), bool)
        if len(zones):
            polys = shapely.polygons(self.geo.corners)
            for j, z in enumerate(zones.tolist()):
                self.touch[:, :, j] = shapely.intersects(polys, self.road.lane_polygons[z])
        return self.touch

    # ------------------------------------------------------------------ metrics
    def metrics(self, t0: int, t1: int, history: NDArrayFloat | None = None) -> Metrics:
        """NAVSIM's sub-scores of every sequence over the window [t0, t1] (see the module docstring).

        Args:
            t0: first time index.
            t1: last time index (t1 > t0).
            history: (B, H, 11) states before t0 for history comfort (None: none).

        Returns:
            The metrics.
        """
        b = self.geo.yaw.shape[0]
        nc, collision_index = self._nc(t0, t1)
        ttc, ttc_index = self._ttc(t0, t1)
        window = self.states[:, t0 : t1 + 1]
        time_s = np.arange(t1 - t0 + 1) * self.dt_s
        comfort = ego_is_comfortable(window, time_s, self.vehicle.rear_axle_to_center_m).all(axis=-1).astype(float)
        if history is not None and history.shape[1]:
            padded = np.concatenate([history, window], axis=1)
            hc = ego_is_comfortable(padded, np.arange(padded.shape[1]) * self.dt_s, self.vehicle.rear_axle_to_center_m).all(axis=-1)
        else:  # NAVSIM: no past trajectory, every proposal history-comfortable
            hc = np.ones(len(window), bool)
        return Metrics(
            nc, np.where(self.geo.non_drivable[:, t0 : t1 + 1].any(axis=1), 0.0, 1.0), self._ddc(t0, t1), self._tlc(t0, t1),
            np.clip(self.progress_s[:, t1] - self.progress_s[:, t0], 0.0, None), ttc, self._lk(t0, t1), hc.astype(float), comfort,
            collision_index, ttc_index,
        ) if b else _empty_metrics()  # fmt: skip

    def _first_speed(self, t0: int, t1: int, obj: NDArrayInt) -> NDArrayFloat:
        """Speed (per row of `obj`) of that row's track at its first time in [t0, t1] (NAVSIM's
        `unique_objects`: a track is the object as first seen in the window's observation)."""
        box, w = self.world.boxes, self.world
        rows = np.arange(w.start[t0], w.start[min(t1, w.n_times - 1) + 1])
        tracks, first = np.unique(box.track_id[rows], return_index=True)
        speed = dict(zip(tracks.tolist(), box.speed_mps[rows[first]].tolist()))
        return np.array([speed.get(t, s) for t, s in zip(box.track_id[obj].tolist(), box.speed_mps[obj].tolist())], np.float64)

    def _nc(self, t0: int, t1: int) -> tuple[NDArrayFloat, NDArrayFloat]:
        c = self.collisions
        sel = np.flatnonzero((c.t >= t0) & (c.t <= t1))
        window = Contacts(c.b[sel], c.t[sel], c.obj[sel])
        fault, value = self._classify(window, self._first_speed(t0, t1, window.obj))
        track = self.world.boxes.track_id
        b_n = self.geo.yaw.shape[0]
        score, when = np.ones(b_n), np.full(b_n, np.inf)
        ignored: list[set[str]] = [set() for _ in range(b_n)]
        for i in range(len(window.b)):
            b, token = int(window.b[i]), str(track[window.obj[i]])
            if token in ignored[b]:
                continue
            if fault[i]:
                score[b] = min(score[b], value[i])
                when[b] = min(when[b], window.t[i] - t0)
            else:
                ignored[b].add(token)
        return score, when

    def _ttc(self, t0: int, t1: int) -> tuple[NDArrayFloat, NDArrayFloat]:
        g, cfg, track = self.geo, self.config, self.world.boxes.track_id
        b_n = g.yaw.shape[0]
        score, when = np.ones(b_n), np.full(b_n, np.inf)
        ignored: list[set[str]] = [set() for _ in range(b_n)]
        last = t0 + (t1 - t0) - int(self.ttc_offsets.max(initial=0))
        parts = []
        for k, c in enumerate(self.ttc_contacts):
            sel = np.flatnonzero((c.t >= t0) & (c.t <= last))
            parts.append(np.stack([c.t[sel], np.full(len(sel), k), c.b[sel], c.obj[sel]], axis=1))
        ev = np.concatenate(parts) if parts else np.zeros((0, 4), np.int64)
        ev = ev[np.lexsort((ev[:, 3], ev[:, 2], ev[:, 1], ev[:, 0]))]  # NAVSIM's loop order: time, offset, proposal
        t_e, b_e, o_e = ev[:, 0], ev[:, 2], ev[:, 3]
        pos = self.world.boxes.center_m[o_e, :2]
        ahead = is_agent_ahead(g.rear_axle[b_e, t_e], g.yaw[b_e, t_e], pos)
        behind = is_agent_behind(g.rear_axle[b_e, t_e], g.yaw[b_e, t_e], pos)
        risky = g.multiple_lanes[b_e, t_e] | g.non_drivable[b_e, t_e] | g.rear_axle_in_intersection[b_e, t_e]
        infraction = ahead | (risky & ~behind)
        moving = g.speed[b_e, t_e] >= cfg.stopped_speed_threshold_mps
        tokens = track[o_e]
        for i in np.flatnonzero(moving).tolist():
            b, token = int(b_e[i]), str(tokens[i])
            if token in ignored[b]:
                continue
            if infraction[i]:
                score[b] = 0.0
                when[b] = min(when[b], int(t_e[i]) - t0)
            else:
                ignored[b].add(token)
        return score, when

    def _ddc(self, t0: int, t1: int) -> NDArrayFloat:
        cfg, g = self.config, self.geo
        step = np.zeros(g.yaw[:, t0 : t1 + 1].shape)
        step[:, 1:] = np.linalg.norm(np.diff(g.center[:, t0 : t1 + 1], axis=1), axis=-1)
        step[~g.oncoming[:, t0 : t1 + 1] | g.center_in_intersection[:, t0 : t1 + 1]] = 0.0
        horizon = int(cfg.driving_direction_horizon_s / self.dt_s)
        csum = np.concatenate([np.zeros((len(step), 1)), np.cumsum(step, axis=1)], axis=1)
        idx = np.arange(step.shape[1])
        windowed = csum[:, idx + 1] - csum[:, np.maximum(idx - horizon, 0)]
        worst = windowed.max(axis=1)
        return np.where(worst < cfg.driving_direction_compliance_threshold_m, 1.0,
                        np.where(worst < cfg.driving_direction_violation_threshold_m, 0.5, 0.0))  # fmt: skip

    def _tlc(self, t0: int, t1: int) -> NDArrayFloat:
        """0 where the ego box touches a zone while it is red at any time of [t0, t1], the first included
        (NAVSIM v2's metric cache has the lights of every time; a window that starts in a red zone fails)."""
        hit = (self.touch[:, t0 : t1 + 1] & self.red[None, t0 : t1 + 1]).any(axis=(1, 2))
        return np.where(hit, 0.0, 1.0)

    def _lk(self, t0: int, t1: int) -> NDArrayFloat:
        cfg, g = self.config, self.geo
        need = int(np.ceil(cfg.lane_keeping_horizon_window_s / self.dt_s))
        out = np.ones(g.yaw.shape[0])
        for b in range(len(out)):
            run = 0
            for t in range(t0, t1 + 1):
                if g.center_in_intersection[b, t]:
                    continue
                run = run + 1 if self.deviation_m[b, t] > cfg.lane_keeping_deviation_limit_m else 0
                if run >= need:
                    out[b] = 0.0
                    break
        return out


def _empty_metrics() -> Metrics:
    z = np.zeros(0)
    return Metrics(z, z, z, z, z, z, z, z, z, z, z)


def normalized_progress(progress_m: NDArrayFloat, multiplier: NDArrayFloat, reference_m: float | None, config: ScorerConfig) -> NDArrayFloat:
    """NAVSIM's EP normalisation (`_aggregate_pdm_scores`): by the largest progress of the candidates
    times their multiplicative metrics (and of the reference), 1 for every one when that is <= 5 m.

    Args:
        progress_m: (B,) raw progress.
        multiplier: (B,) product of the multiplicative metrics.
        reference_m: a reference's progress counted as admissible (NAVSIM: PDM-Closed's; avsim: the log's), or None.
        config: the threshold.

    Returns:
        (B,) EP in [0, 1].
    """
    masked = progress_m * multiplier
    norm = max(float(masked.max(initial=0.0)), reference_m or 0.0)
    if norm > config.progress_distance_threshold_m:
        return np.clip(progress_m / norm, 0.0, 1.0)
    return np.ones(len(progress_m))


def aggregate(m: Metrics, ep: NDArrayFloat, config: ScorerConfig, extended_comfort: NDArrayFloat | None = None) -> dict[str, NDArrayFloat]:
    """PDMS (NAVSIM v1) and EPDMS (v2) of each sequence.

    PDMS = NC * DAC * (5 EP + 5 TTC + 2 C) / 12;
    EPDMS = NC * DAC * DDC * TLC * (5 EP + 5 TTC + 2 LK + 2 HC + 2 EC) / 16 (EC left out, / 14, where
    there is none: a policy that returns controls has no plans to compare).

    Args:
        m: the metrics.
        ep: (B,) normalised progress.
        config: the weights.
        extended_comfort: (B,) EC, or None.

    Returns:
        pdms, epdms, multiplicative (each (B,)).
    """
    c = config
    pdms = m.no_at_fault_collisions * m.drivable_area_compliance * (
        (c.progress_weight * ep + c.ttc_weight * m.time_to_collision_within_bound + c.comfort_weight * m.comfort)
        / (c.progress_weight + c.ttc_weight + c.comfort_weight))
    multi = m.no_at_fault_collisions * m.drivable_area_compliance * m.driving_direction_compliance * m.traffic_light_compliance
    weighted = c.progress_weight * ep + c.ttc_weight * m.time_to_collision_within_bound + c.lane_keeping_weight * m.lane_keeping \
        + c.history_comfort_weight * m.history_comfort
    total = c.progress_weight + c.ttc_weight + c.lane_keeping_weight + c.history_comfort_weight
    if extended_comfort is not None:
        weighted = weighted + c.two_frame_extended_comfort_weight * extended_comfort
        total += c.two_frame_extended_comfort_weight
    return {"pdms": pdms, "epdms": multi * weighted / total, "multiplicative": multi}
