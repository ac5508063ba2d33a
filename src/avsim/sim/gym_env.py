"""`AvsimDrivingEnv`: the closed-loop simulator as a `gymnasium.Env` (gymnasium 1.x, the `sim` extra).

Observation (`observation_space`, a `Dict`, float32 unless said):

- `ego`: (11,) the ego state (`avsim.sim.vehicle.StateIndex`: x, y, heading, vx, vy, ax, ay,
  steering angle and rate, yaw rate and acceleration), world frame, rear axle;
- `route`: (101, 2) the route's centre line ahead, every metre, ego frame;
- `objects`: (max_objects, 8) the nearest road users in the ego frame: x, y, heading, length,
  width, vx, vy, class (0 Car, 1 Truck, 2 Pedestrian, 3 Cyclist, 4 Others); `objects_mask`
  (max_objects,) int8, 1 where a row holds an object;
- `cameras` (with `cameras`): a `Dict` of (H, W, 3) uint8 control frames per camera.

Action (`action_space`): with `action="control"` a (2,) Box: acceleration (m/s^2) and steering rate
(rad/s) within the ego's limits; with `action="trajectory"` an (N, 3) Box of ego-frame poses
(x, y, heading) every `trajectory_interval_s` (NAVSIM's 8 poses at 0.5 s by default), tracked by
the LQR tracker.

Reward: the step's progress of the ego's box centre along the route (m). An episode terminates at
the first at-fault-free-or-not contact of the ego's box with another box or when a corner leaves
the drivable area (the scorer's definitions, judged step by step), and is truncated when the
scenario's steps are used up. `info` holds the step, time and the reason of a termination.
`reset(seed=...)` is deterministic: same seed, same episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import shapely
from gymnasium import spaces

from avsim.core.agents import OBJECT_CLASSES
from avsim.core.typing import NDArrayFloat
from avsim.maps.raster import bev_raster
from avsim.scenario import Scenario
from avsim.sim.actions import Control, PolicyError, Trajectory, parse_action
from avsim.sim.geometry import boxes_overlap
from avsim.sim.observation import ROUTE_AHEAD_M, ROUTE_STEP_M, NoCameras, Observation, ObservationSource
from avsim.sim.stepper import AgentMode, SimConfig, Simulator
from avsim.sim.vehicle import StateIndex, VehicleLimits

N_OBJECT_FEATURES = 8
BOUND = 1e7  # observation bounds (finite, beyond any map's coordinates)


class AvsimDrivingEnv(gymnasium.Env):
    """A scenario as a gymnasium environment (see the module docstring).

    Args:
        scenario: a Scenario or a scenario folder.
        agents: "log" or "idm".
        action: "control" or "trajectory".
        source: camera frames' source (None: no cameras).
        max_objects: rows of `objects`.
        steps: episode length (None: the scenario's span).
        trajectory_poses, trajectory_interval_s: the trajectory action's shape.
        limits: the ego's actuator limits (the control action's bounds).
        render_mode: None or "rgb_array" (a bird's-eye view of the map around the ego).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, scenario: Scenario | str | Path, agents: str = "log", action: str = "control", source: ObservationSource | None = None,
                 max_objects: int = 64, steps: int | None = None, trajectory_poses: int = 8, trajectory_interval_s: float = 0.5,
                 limits: VehicleLimits | None = None, render_mode: str | None = None) -> None:  # fmt: skip
        if not isinstance(scenario, Scenario):
            from avsim.scenario.io import load_scenario

            scenario = load_scenario(Path(scenario))
        if action not in ("control", "trajectory"):
            raise ValueError(f"action: expected control or trajectory, got {action!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode: expected None or rgb_array, got {render_mode!r}")
        self.limits = limits or VehicleLimits()
        self.sim = Simulator(scenario, SimConfig(agents=AgentMode(agents), steps=steps, limits=self.limits), source or NoCameras())
        self.action_kind, self.max_objects, self.render_mode = action, int(max_objects), render_mode
        self.trajectory_poses, self.trajectory_interval_s = int(trajectory_poses), float(trajectory_interval_s)
        self.observation_space = self._observation_space()
        self.action_space = self._action_space()
        self._obs: Observation | None = None
        self._progress_m = 0.0

    # ------------------------------------------------------------------ spaces
    def _observation_space(self) -> spaces.Dict:
        inf = BOUND
        parts: dict[str, spaces.Space] = {
            "ego": spaces.Box(-inf, inf, (len(StateIndex),), np.float32),
            "route": spaces.Box(-inf, inf, (int(ROUTE_AHEAD_M / ROUTE_STEP_M) + 1, 2), np.float32),
            "objects": spaces.Box(-inf, inf, (self.max_objects, N_OBJECT_FEATURES), np.float32),
            "objects_mask": spaces.Box(0, 1, (self.max_objects,), np.int8),
        }
        source = self.sim.source
        if source.camera_names or not isinstance(source, NoCameras):
            self.sim.reset(0)  # the source learns its cameras and sizes
            frames = self.sim.source.frames(self.sim.frame_state())
            parts["cameras"] = spaces.Dict({k: spaces.Box(0, 255, v.shape, np.uint8) for k, v in frames.items()})
        self._has_cameras = "cameras" in parts
        return spaces.Dict(parts)

    def _action_space(self) -> spaces.Box:
        lim = self.limits
        if self.action_kind == "control":
            rate = min(lim.max_steering_rate_radps, 10.0)
            return spaces.Box(np.array([-min(lim.max_decel_mps2, 20.0), -rate], np.float32),
                              np.array([min(lim.max_accel_mps2, 20.0), rate], np.float32), dtype=np.float32)  # fmt: skip
        n = self.trajectory_poses
        lo = np.tile(np.array([-50.0, -50.0, -np.pi], np.float32), (n, 1))
        hi = np.tile(np.array([150.0, 50.0, np.pi], np.float32), (n, 1))
        return spaces.Box(lo, hi, dtype=np.float32)

    # ------------------------------------------------------------------ episode
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        episode_seed = int(self.np_random.integers(0, 2**31 - 1)) if seed is None else int(seed)
        self._obs = self.sim.reset(episode_seed)
        self._progress_m = self._route_progress(self._obs.ego_state)
        return self._encode(self._obs), {"step": 0, "time_s": 0.0, "seed": episode_seed}

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        if self._obs is None:
            raise RuntimeError("call reset() first")
        act = np.asarray(action, np.float64)
        try:
            parsed = parse_action(act, self.sim.dt_s) if self.action_kind == "control" else Trajectory(act.reshape(-1, 3), self.trajectory_interval_s)
            parsed = parse_action(parsed, self.sim.dt_s)
        except PolicyError as exc:
            raise ValueError(str(exc)) from None
        assert isinstance(parsed, (Control, Trajectory))
        self._obs = self.sim.step(parsed)
        progress = self._route_progress(self._obs.ego_state)
        reward = float(progress - self._progress_m)
        self._progress_m = progress
        reason = self._termination(self._obs)
        info = {"step": self._obs.step, "time_s": self._obs.time_s, "termination": reason}
        return self._encode(self._obs), reward, reason is not None, self.sim.done and reason is None, info

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array" or self._obs is None:
            return None
        if self._obs.cameras:
            return next(iter(self._obs.cameras.values()))
        return bev_raster(self.sim.scenario.map, self._obs.world_SE3_ego, 256, 0.4)

    def close(self) -> None:
        self.sim.source.close()

    # ------------------------------------------------------------------ helpers
    def _route_progress(self, state: NDArrayFloat) -> float:
        v = self.sim.vehicle
        h = state[StateIndex.HEADING]
        c = state[:2] + v.rear_axle_to_center_m * np.array([np.cos(h), np.sin(h)])
        return float(self.sim.route.centerline.project(c[None])[0])

    def _termination(self, obs: Observation) -> str | None:
        ego = self.sim.ego_box(obs.ego_state)
        b = obs.boxes
        if len(b) and boxes_overlap(ego.center_m[0, :2], ego.yaw_rad[0], ego.size_m[0, 0], ego.size_m[0, 1], b.center_m[:, :2], b.yaw_rad,
                                    b.size_m[:, 0], b.size_m[:, 1]).any():  # fmt: skip
            return "collision"
        drivable = self.sim.road.drivable
        corners = ego.corners_xy()[0]
        if not drivable.is_empty and not shapely.contains_xy(drivable, corners[:, 0], corners[:, 1]).all():
            return "off_drivable_area"
        return None

    def _encode(self, obs: Observation) -> dict[str, Any]:
        st = obs.ego_state
        out: dict[str, Any] = {"ego": st.astype(np.float32), "route": obs.route_ego_xy.astype(np.float32)}
        feats, mask = np.zeros((self.max_objects, N_OBJECT_FEATURES), np.float32), np.zeros(self.max_objects, np.int8)
        b = obs.boxes
        if len(b):
            x, y, h = st[StateIndex.X], st[StateIndex.Y], st[StateIndex.HEADING]
            rel = b.center_m[:, :2] - [x, y]
            order = np.argsort(np.hypot(rel[:, 0], rel[:, 1]), kind="stable")[: self.max_objects]
            c, s = np.cos(h), np.sin(h)
            rot = lambda v: np.stack([c * v[:, 0] + s * v[:, 1], -s * v[:, 0] + c * v[:, 1]], axis=1)  # noqa: E731
            cls = np.array([OBJECT_CLASSES.index(k) if k in OBJECT_CLASSES else 4 for k in b.object_class[order]], np.float32)
            heading = (b.yaw_rad[order] - h + np.pi) % (2 * np.pi) - np.pi
            feats[: len(order)] = np.c_[rot(rel[order]), heading, b.size_m[order, :2], rot(b.velocity_mps[order]), cls]
            mask[: len(order)] = 1
        out["objects"], out["objects_mask"] = feats, mask
        if self._has_cameras:
            out["cameras"] = dict(obs.cameras)
        return out
