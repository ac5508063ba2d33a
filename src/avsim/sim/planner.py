"""The lane-following IDM planner: PDM-Closed (Dauner et al., 2023; NAVSIM's `pdm_planner`), restated.

Every step the planner

1. takes the route's centre line from the ego's position and two parallels at `lateral_offsets_m`
   (PDM-Closed's proposal paths);
2. forecasts every object at constant velocity over the 4 s horizon (`PDMObservation`), and puts a
   stop at the entry of every red light-controlled lane on the route;
3. unrolls an IDM longitudinal policy along each path for each target speed (`speed_fractions` of
   the lane's speed limit, or of `fallback_target_velocity_mps`), the leading object being the
   nearest forecast object in the path's corridor ahead (`PDMGenerator._update_leading_agents`);
4. drives every proposal through the tracker and the ego's model (`PDMSimulator`);
5. scores them with NAVSIM's scorer (`avsim.sim.scoring`) against the forecast and returns the
   best one's poses (PDM-Closed's `argmax` of the score; ties keep the first), starting from the
   path's point at the ego's progress as PDM-Closed's do (`Trajectory.start`: the tracker corrects
   the ego's offset from the path);
6. brakes instead (PDM-Closed's `PDMEmergencyBrake`) when the best proposal has an at-fault
   collision or a TTC infraction (`brake_on_ttc`; PDM-Closed checks one of the two, collision by
   default) within `brake_time_to_collision_s` and the ego is at most `brake_max_speed_mps` fast:
   a crossing object's first contact is with the ego's side (not at fault, so no collision
   brake), and a side-swipe becomes at fault once the ego's front is in it (nus-0757).

Simplifications: the proposal paths are recomputed every step from the route (PDM-Closed keeps
the first step's), and an object is in a path's way where a corner of its box comes within the
ego's half width plus `CORRIDOR_MARGIN_M` of the path (or its box straddles the path), from its
nearest corner along it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from avsim.core.typing import NDArrayFloat, NDArrayInt
from avsim.sim.actions import Trajectory
from avsim.sim.boxes import Boxes, footprint
from avsim.sim.observation import EpisodeInfo, Observation
from avsim.sim.route import Path
from avsim.sim.scoring import Scene, ScorerConfig, aggregate, normalized_progress
from avsim.sim.tracker import LQRTracker, velocity_curvature_profiles
from avsim.sim.vehicle import KinematicBicycle, StateIndex, VehicleLimits, to_ego_frame

CORRIDOR_MARGIN_M = 0.3  # beyond the ego's half width: an object this close to the path is in the way


@dataclass(frozen=True)
class PlannerConfig:
    """PDM-Closed's proposal parameters (its BatchIDMPolicy and lateral offsets)."""

    speed_fractions: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0)
    fallback_target_velocity_mps: float = 15.0
    lateral_offsets_m: tuple[float, ...] = (-1.0, 1.0)
    min_gap_m: float = 1.0
    headway_s: float = 1.5
    accel_max_mps2: float = 1.5
    decel_max_mps2: float = 3.0
    horizon_s: float = 4.0
    map_radius_m: float = 60.0
    brake_time_to_collision_s: float = 2.0  # PDM-Closed's emergency brake (PDMEmergencyBrake)
    brake_max_speed_mps: float = 5.0
    brake_on_ttc: bool = True  # also brake on a TTC infraction (PDM-Closed's infraction="ttc"), not only a collision
    brake_accel_mps2: tuple[float, float] = (-4.05, 2.40)


class IDMPlannerPolicy:
    """The planner as a policy (see the module docstring)."""

    name = "idm"

    def __init__(self, config: PlannerConfig | None = None) -> None:
        self.config = config or PlannerConfig()

    def reset(self, episode: EpisodeInfo) -> None:
        self.episode = episode
        self.steps = int(round(self.config.horizon_s / episode.dt_s))
        self.tracker = LQRTracker(episode.vehicle.wheel_base_m, episode.dt_s)
        self.model = KinematicBicycle(episode.vehicle, VehicleLimits())
        self.scorer = ScorerConfig()

    def __call__(self, observation: Observation) -> Trajectory:
        ep, cfg = self.episode, self.config
        state = observation.ego_state
        paths, s0 = self._paths(state)
        boxes = _near(observation.boxes, state, cfg.map_radius_m)
        forecast = [_moved(boxes, j * ep.dt_s) for j in range(self.steps + 1)]
        red = self._red_lanes(observation.lights)
        targets = self._targets()
        poses = self._unroll(paths, s0, state, forecast, red, targets)  # (B, H+1, 3)
        driven = self._drive(state, poses)
        scene = Scene(driven, forecast, [red] * (self.steps + 1), ep.road, ep.route, ep.vehicle, ep.dt_s, self.scorer)
        m = scene.metrics(0, self.steps)
        multi = m.no_at_fault_collisions * m.drivable_area_compliance * m.driving_direction_compliance * m.traffic_light_compliance
        score = aggregate(m, normalized_progress(m.progress_m, multi, None, self.scorer), self.scorer)["epdms"]
        best = int(np.argmax(score))
        infraction = min(m.collision_index[best], m.ttc_index[best]) if cfg.brake_on_ttc else m.collision_index[best]
        if infraction * ep.dt_s <= cfg.brake_time_to_collision_s and state[StateIndex.VELOCITY_X] <= cfg.brake_max_speed_mps:
            return self._brake(state)
        return Trajectory(to_ego_frame(poses[best, 1:], state), ep.dt_s, to_ego_frame(poses[best, :1], state)[0])

    def _brake(self, state: NDArrayFloat) -> Trajectory:
        """PDM-Closed's emergency brake (`PDMEmergencyBrake._generate_trajectory`): straight ahead at a
        corrective speed from a PD law on the current speed and acceleration."""
        cfg, v, a = self.config, float(state[StateIndex.VELOCITY_X]), float(state[StateIndex.ACCELERATION_X])
        lo, hi = cfg.brake_accel_mps2
        if v > 0.2:
            speed = 11 / 10 * (v + max(min(10.0 * -v, hi), lo))
        else:
            speed = max(min(4.0 * -v + 1.0 * -a, hi), lo)
        t = np.arange(1, self.steps + 1) * self.episode.dt_s
        return Trajectory(np.stack([speed * t, np.zeros_like(t), np.zeros_like(t)], axis=1), self.episode.dt_s)

    # ------------------------------------------------------------------ proposals
    def _paths(self, state: NDArrayFloat) -> tuple[list[Path], float]:
        """The centre line ahead and its parallels, each starting 5 m behind the ego (its rear-axle progress)."""
        route = self.episode.route.centerline
        s_now = float(route.project(state[None, : StateIndex.Y + 1])[0])
        length = self.config.fallback_target_velocity_mps * self.config.horizon_s + 40.0
        s = np.arange(max(s_now - 5.0, 0.0), min(s_now + length, route.length_m) + 1e-9, 0.5)
        xy, yaw = route.pose_at(s)
        normal = np.stack([-np.sin(yaw), np.cos(yaw)], axis=1)
        paths = [Path.of(xy)] + [Path.of(xy + d * normal) for d in self.config.lateral_offsets_m]
        return paths, s_now - s[0]

    def _targets(self) -> NDArrayFloat:
        """Target speeds: fractions of the current lane's limit (else the fallback)."""
        road, route = self.episode.road, self.episode.route
        limit = np.nan
        if len(route.lanes):
            limits = road.speed_limit_mps[route.lanes]
            known = limits[np.isfinite(limits) & (limits > 0)]
            limit = float(known[0]) if len(known) else np.nan
        base = limit if np.isfinite(limit) else self.config.fallback_target_velocity_mps
        return np.asarray(self.config.speed_fractions) * base

    def _red_lanes(self, lights: dict[str, str]) -> NDArrayInt:
        road, on = self.episode.road, self.episode.route.on_route
        return np.flatnonzero([on[k] and bool(road.light_of_lane[k]) and lights.get(str(road.light_of_lane[k])) == "red"
                               for k in range(road.n_lanes)]).astype(np.int64)  # fmt: skip

    def _obstacles(self, path: Path, forecast: list[Boxes], red: NDArrayInt) -> tuple[NDArrayFloat, NDArrayFloat]:
        """(near edge progress (H+1, N), velocity along the path (H+1, N)) of the objects in the path's
        corridor at each time (inf where not in it); red stops are objects of speed 0."""
        ep = self.episode
        half_w = ep.vehicle.width_m / 2
        n = max(len(forecast[0]), 1)
        near = np.full((len(forecast), n + len(red)), np.inf)
        vel = np.zeros_like(near)
        if len(forecast[0]):
            b = Boxes.concat(forecast)
            corners = footprint(b.center_m[:, :2], b.yaw_rad, b.size_m[:, 0], b.size_m[:, 1]).reshape(-1, 2)
            s_c, d_c = path.locate(corners)
            xy, yaw = path.pose_at(s_c)
            rel = corners - xy
            lat = (-np.sin(yaw) * rel[:, 0] + np.cos(yaw) * rel[:, 1]).reshape(-1, 4)
            s_c = s_c.reshape(-1, 4)
            # in the corridor: a corner within it, or corners on both sides of the path (the box straddles it)
            reach = half_w + CORRIDOR_MARGIN_M
            inside = (np.abs(lat) < reach).any(axis=1) | ((lat.min(axis=1) < 0) & (lat.max(axis=1) > 0) & (np.abs(lat).min(axis=1) < reach + 5.0))
            inside &= (s_c.max(axis=1) > 0) & (s_c.min(axis=1) < path.length_m)
            near[:, :n] = np.where(inside, s_c.min(axis=1), np.inf).reshape(len(forecast), n)
            _, yaw_c = path.pose_at(s_c.mean(axis=1))
            vel[:, :n] = (b.velocity_mps[:, 0] * np.cos(yaw_c) + b.velocity_mps[:, 1] * np.sin(yaw_c)).reshape(len(forecast), n)
        if len(red):
            s = ep.road.samples
            entry = s.xy[s.start[red]]
            near[:, n:] = path.project(entry)[None, :]
        return near, vel

    def _unroll(self, paths: list[Path], s0: float, state: NDArrayFloat, forecast: list[Boxes], red: NDArrayInt,
                targets: NDArrayFloat) -> NDArrayFloat:  # fmt: skip
        """IDM along each path for each target speed: poses (B, H+1, 3) of the rear axle."""
        cfg, dt, veh = self.config, self.episode.dt_s, self.episode.vehicle
        front = veh.rear_axle_to_center_m + veh.half_length_m
        out = []
        for path in paths:
            near, vel = self._obstacles(path, forecast, red)
            x = np.full(len(targets), s0)
            v = np.full(len(targets), max(float(state[StateIndex.VELOCITY_X]), 0.0))
            xs = [x.copy()]
            for j in range(1, self.steps + 1):
                ahead = near[j][None, :] > x[:, None] + front - 0.5
                gap = np.where(ahead, near[j][None, :] - (x[:, None] + front), np.inf)
                k = np.argmin(gap, axis=1)
                g = gap[np.arange(len(x)), k]
                free = ~np.isfinite(g)
                g = np.where(free, path.length_m - x, g)
                v_lead = np.where(free, 0.0, vel[j][k])
                l_rear = np.where(free, veh.half_length_m, 0.0)
                s_star = cfg.min_gap_m + v * cfg.headway_s + v * (v - v_lead) / (2 * np.sqrt(cfg.accel_max_mps2 * cfg.decel_max_mps2))
                s_alpha = np.maximum(g - l_rear, cfg.min_gap_m)
                dv = cfg.accel_max_mps2 * (1 - (v / targets) ** 4 - (s_star / s_alpha) ** 2)
                x = x + dt * v
                v = np.maximum(v + dt * np.clip(dv, -cfg.decel_max_mps2, cfg.accel_max_mps2), 0.0)
                xs.append(x.copy())
            prog = np.stack(xs, axis=1)
            xy, yaw = path.pose_at(prog.reshape(-1))
            out.append(np.concatenate([xy, np.unwrap(yaw.reshape(prog.shape), axis=1).reshape(-1, 1)], axis=1).reshape(*prog.shape, 3))
        poses = np.concatenate(out, axis=0)  # pose 0 is the path's point at the ego's progress, as PDM-Closed's
        poses[:, :, 2] = state[StateIndex.HEADING] + np.unwrap(poses[:, :, 2] - state[StateIndex.HEADING], axis=1)
        poses[:, :, 2] -= 2 * np.pi * np.round((poses[:, :1, 2] - state[StateIndex.HEADING]) / (2 * np.pi))
        return poses

    def _drive(self, state: NDArrayFloat, poses: NDArrayFloat) -> NDArrayFloat:
        """Every proposal driven by the tracker and the model from the current state: (B, H+1, 11)."""
        b = len(poses)
        profiles = velocity_curvature_profiles(poses, self.episode.dt_s, self.tracker.config)
        out = np.zeros((b, poses.shape[1], len(state)))
        out[:, 0] = state
        for i in range(1, poses.shape[1]):
            cmd = self.tracker.commands(out[:, i - 1], poses, index=i - 1, profiles=profiles)
            out[:, i] = self.model.propagate(out[:, i - 1], cmd, self.episode.dt_s)
        return out


def _near(boxes: Boxes, state: NDArrayFloat, radius_m: float) -> Boxes:
    d = np.hypot(boxes.center_m[:, 0] - state[StateIndex.X], boxes.center_m[:, 1] - state[StateIndex.Y])
    return boxes.select(d <= radius_m)


def _moved(boxes: Boxes, dt_s: float) -> Boxes:
    """Boxes after `dt_s` at constant velocity."""
    center = boxes.center_m.copy()
    center[:, :2] += boxes.velocity_mps * dt_s
    return Boxes(boxes.track_id, boxes.source_class, boxes.object_class, center, boxes.size_m, boxes.yaw_rad, boxes.velocity_mps)
