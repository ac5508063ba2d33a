"""The closed-loop stepper: one scenario, a fixed rate, the ego moved by its actions, the world around it.

Each step k -> k + 1 (`Simulator.step`):

1. the action becomes commands: a `Control` directly; a `Trajectory` is moved into the world,
   interpolated at the step and tracked by the LQR tracker (`avsim.sim.tracker`);
2. the ego moves through the kinematic bicycle model with its limits (`avsim.sim.vehicle`);
3. the agents move: replayed from the log (`AgentMode.LOG`, non-reactive) or as IDM agents that
   see the ego and the log at step k (`AgentMode.IDM`, `avsim.sim.traffic`);
4. lights take their state at the new time from the scenario's light timeline;
5. the observation of step k + 1 is built, its camera frames from the episode's `ObservationSource`.

The ego starts on the logged pose and motion at the scenario's first timestamp. Everything is a
function of the scenario, the actions and the seed (which draws the IDM agents' parameter factors
and is handed to the policy): the same inputs give the same rollout, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.trajectory import NS_PER_S, EgoTrajectory
from avsim.core.typing import NDArrayFloat, NDArrayInt
from avsim.scenario import Scenario
from avsim.scenario.ego_motion import plausible_ego
from avsim.scenario.road import road_model
from avsim.sim.actions import Action, Control, Trajectory, reference_poses
from avsim.sim.boxes import Boxes, LogTable
from avsim.sim.observation import EpisodeInfo, FrameState, NoCameras, Observation, ObservationSource
from avsim.sim.recorder import Plan, Recorder
from avsim.sim.route import build_route
from avsim.sim.storyboard import StoryboardTraffic
from avsim.sim.tracker import LQRConfig, LQRTracker
from avsim.sim.traffic import IDMConfig, IDMTraffic
from avsim.sim.vehicle import KinematicBicycle, StateIndex, VehicleLimits, VehicleParameters, initial_state

EGO_TRACK_ID = "ego"


class Controller(str, Enum):
    """How a trajectory moves the ego: tracked by the LQR tracker through the bicycle model (NAVSIM's
    `PDMSimulator`), or followed exactly (nuPlan's `PerfectTrackingController`, what log replay uses)."""

    LQR = "lqr"
    PERFECT = "perfect"


class AgentMode(str, Enum):
    """How the other road users move: replayed from the log, IDM agents that react, or the
    scenario's OpenSCENARIO storyboard around the ego (`avsim.sim.storyboard`)."""

    LOG = "log"
    IDM = "idm"
    STORYBOARD = "storyboard"


MAX_SIM_STEPS = 36_000  # one hour at 10 Hz: the per-step tables (lights, log boxes, states, scores) grow with it
MAX_RATE_HZ = 100.0


@dataclass(frozen=True)
class SimConfig:
    """rate_hz: steps per second (10: nuPlan's and NAVSIM's); agents: log or idm; controller: how
    trajectories are followed (lqr or perfect); steps: episode
    length in steps (None: the scenario's span); the models' parameters; seed: see the module docstring."""

    rate_hz: float = 10.0
    agents: AgentMode = AgentMode.LOG
    controller: Controller = Controller.LQR
    steps: int | None = None
    seed: int = 0
    idm: IDMConfig = field(default_factory=IDMConfig)
    limits: VehicleLimits = field(default_factory=VehicleLimits)
    tracker: LQRConfig = field(default_factory=LQRConfig)

    def __post_init__(self) -> None:
        if not (np.isfinite(self.rate_hz) and 0 < self.rate_hz <= MAX_RATE_HZ):
            raise AvsimValueError(f"SimConfig.rate_hz: expected a rate in (0, {MAX_RATE_HZ:g}] Hz, got {self.rate_hz!r}")
        if self.steps is not None and not 1 <= self.steps <= MAX_SIM_STEPS:
            raise AvsimValueError(f"SimConfig.steps: expected 1 to {MAX_SIM_STEPS}, got {self.steps}")
        if not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise AvsimValueError(f"SimConfig.seed: expected an integer >= 0, got {self.seed!r}")
        object.__setattr__(self, "agents", AgentMode(self.agents))
        object.__setattr__(self, "controller", Controller(self.controller))


class LightSchedule:
    """The scenario's light states at every step (a step function per light, held after its last change)."""

    def __init__(self, scenario: Scenario, step_times_ns: NDArrayInt) -> None:
        lights = scenario.lights
        self.ids = lights.light_ids.astype(str)
        self._id_list: list[str] = self.ids.tolist()
        self._last: tuple[int, dict[str, str]] = (-1, {})  # the last step asked for (each is asked for twice)
        self.states = np.full((len(step_times_ns), len(self.ids)), "unknown", dtype="<U7")
        for j, lid in enumerate(self.ids.tolist()):
            rows = lights.light_id == lid
            t, st = lights.timestamps_ns[rows], lights.state[rows]
            k = np.searchsorted(t, step_times_ns, side="right") - 1
            self.states[:, j] = np.where(k >= 0, st[np.maximum(k, 0)], "unknown")

    def at(self, step: int) -> dict[str, str]:
        """Light id -> state at `step` (a new dict: the caller may keep or change it)."""
        if self._last[0] != step:
            self._last = (step, dict(zip(self._id_list, self.states[step].tolist())))
        return dict(self._last[1])


class LogTraffic:
    """Non-reactive agents: every box from the log."""

    def __init__(self, log: LogTable) -> None:
        self.log = log

    def boxes(self, step: int) -> Boxes:
        return self.log.at(step)

    def step(self, step: int, ego: Boxes, lights: dict[str, str]) -> None:
        return None


class Simulator:
    """Closed-loop episodes on one scenario (see the module docstring).

    Args:
        scenario: any scenario (sample, converted, edited).
        config: the rate, agent mode, length and model parameters.
        source: the camera frames' source (None: no cameras).
    """

    def __init__(self, scenario: Scenario, config: SimConfig | None = None, source: ObservationSource | None = None) -> None:
        self.scenario, self.config = scenario, config or SimConfig()
        self.source: ObservationSource = source if source is not None else NoCameras()
        self.dt_s = 1.0 / self.config.rate_hz
        start, end = scenario.start_ns, scenario.end_ns
        span = int(np.floor((end - start) / NS_PER_S * self.config.rate_hz + 1e-6))
        n_steps = self.config.steps if self.config.steps is not None else max(span, 1)
        if n_steps > MAX_SIM_STEPS:  # the scenario's own span (a long log): refused before the per-step tables are made
            raise AvsimValueError(f"--steps: the scenario's span of {(end - start) / NS_PER_S:g} s is {n_steps} steps at "
                                  f"{self.config.rate_hz:g} Hz, more than the {MAX_SIM_STEPS} an episode may have; pass --steps or --duration")  # fmt: skip
        self.step_times_ns = start + np.round(np.arange(n_steps + 1) * (NS_PER_S / self.config.rate_hz)).astype(np.int64)
        self.vehicle = VehicleParameters.from_metadata(scenario.metadata)
        self.model = KinematicBicycle(self.vehicle, self.config.limits)
        self.tracker = LQRTracker(self.vehicle.wheel_base_m, self.dt_s, self.config.tracker)
        self.road = road_model(scenario)
        # the parts the scorer, the planner and the traffic read, built now: not inside a policy's timed call
        _ = self.road.drivable, self.road.intersection, self.road.light_of_lane, self.road.conflicts
        self.log = LogTable(scenario.agents, self.step_times_ns)
        self.lights = LightSchedule(scenario, self.step_times_ns)
        self.log_ego = plausible_ego(scenario.ego)  # the log without implausible source poses (avsim.scenario.ego_motion)
        self.log_states = logged_ego_states(self.log_ego, self.step_times_ns, self.vehicle)
        centers = self.log_states[:, :2] + self.vehicle.rear_axle_to_center_m * np.stack(
            [np.cos(self.log_states[:, 2]), np.sin(self.log_states[:, 2])], axis=1)  # fmt: skip
        self.log_centers = centers[self.step_times_ns <= end]  # the logged box centres within the log, the route's source
        self.route = build_route(self.road, self.log_centers, self.log_states[self.step_times_ns <= end, 2])
        self.ego_z_m = scenario.ego.pose_at(np.clip(self.step_times_ns, start, end)).translation[:, 2]
        self.n_steps = n_steps
        self.reference: NDArrayFloat | None = None  # the last trajectory's world reference (FrameState.plan_world)
        self.episode: EpisodeInfo | None = None
        self.recorder: Recorder | None = None

    # ------------------------------------------------------------------ episode
    def reset(self, seed: int | None = None) -> Observation:
        """Start an episode at the scenario's first timestamp.

        Args:
            seed: the episode's seed (None: the config's).

        Returns:
            The observation of step 0.
        """
        seed = self.config.seed if seed is None else int(seed)
        rng = np.random.default_rng(seed)
        self.episode = EpisodeInfo(self.scenario, self.road, self.route, self.vehicle, self.dt_s, self.step_times_ns, seed,
                                   np.random.default_rng([seed, 1]), self.log_ego)  # fmt: skip
        self.k = 0
        self.state = self.log_states[0].copy()
        self.reference = None
        if self.config.agents is AgentMode.IDM:
            self.traffic: IDMTraffic | LogTraffic | StoryboardTraffic = IDMTraffic(self.road, self.log, self.config.idm, self.dt_s, rng)
            self.traffic.spawn(0, self.ego_box())
        elif self.config.agents is AgentMode.STORYBOARD:
            self.traffic = StoryboardTraffic(self.scenario, self.dt_s, self.vehicle.rear_axle_to_center_m)
        else:
            self.traffic = LogTraffic(self.log)
        self.source.reset(self.episode)
        self.recorder = Recorder(self.n_steps)
        return self._observe()

    @property
    def done(self) -> bool:
        """Whether the episode has run all its steps."""
        return self.k >= self.n_steps

    def ego_box(self, state: NDArrayFloat | None = None) -> Boxes:
        """The ego as one box row (centre ahead of the rear axle, on the ground)."""
        st = self.state if state is None else state
        v = self.vehicle
        h = float(st[StateIndex.HEADING])
        c = np.array([[st[StateIndex.X] + v.rear_axle_to_center_m * np.cos(h), st[StateIndex.Y] + v.rear_axle_to_center_m * np.sin(h),
                       v.height_m / 2]])  # fmt: skip
        speed = float(st[StateIndex.VELOCITY_X])
        return Boxes(np.array([EGO_TRACK_ID]), np.array(["ego"]), np.array(["Car"]), c, np.array([[v.length_m, v.width_m, v.height_m]]),
                     np.array([h]), np.array([[speed * np.cos(h), speed * np.sin(h)]]))  # fmt: skip

    def advance(self, action: Action) -> tuple[NDArrayFloat, NDArrayFloat]:
        """The ego's next state under `action` and the (acceleration, steering rate) applied.

        Args:
            action: a parsed action.

        Returns:
            ((11,) next state, (2,) commands; for perfect tracking the acceleration and steering
            rate the new state implies).
        """
        st = self.state
        self.reference = None
        if isinstance(action, Control):
            cmd = np.array([action.accel_mps2, action.steering_rate_radps])
            return self.model.propagate(st[None], cmd[None], self.dt_s)[0], cmd
        assert isinstance(action, Trajectory)
        ref = reference_poses(action, (st[StateIndex.X], st[StateIndex.Y], st[StateIndex.HEADING]), self.dt_s)
        ref = pad_reference(ref, self.config.tracker.tracking_horizon + 2)
        self.reference = ref
        if self.recorder is not None:  # every step's plan: NAVSIM's two-frame comfort compares each frame with 0.5 s before
            self.recorder.record_plan(Plan(self.k, st.copy(), ref))
        if self.config.controller is Controller.PERFECT:
            new = perfect_tracking(st, ref, self.dt_s, self.vehicle.wheel_base_m)
            return new, np.array([new[StateIndex.ACCELERATION_X], new[StateIndex.STEERING_RATE]])
        cmd = self.tracker.commands(st[None], ref[None])[0]
        return self.model.propagate(st[None], cmd[None], self.dt_s)[0], cmd

    def step(self, action: Action) -> Observation:
        """Advance one step under `action` (see the module docstring).

        Args:
            action: a parsed action (`avsim.sim.actions.parse_action`).

        Returns:
            The observation of the next step.
        """
        if self.episode is None or self.recorder is None:
            raise AvsimValueError("Simulator.step: call reset() first")
        if self.done:
            raise AvsimValueError("Simulator.step: the episode is over")
        ego_now = self.ego_box()
        self.state, cmd = self.advance(action)
        self.recorder.record_command(self.k, cmd)
        self.traffic.step(self.k, ego_now, self.lights.at(self.k))
        self.k += 1
        return self._observe()

    def frame_state(self) -> FrameState:
        """The world at the current step."""
        boxes = self.traffic.boxes(self.k)
        t_ns = int(self.step_times_ns[self.k])
        return FrameState(self.k, t_ns, self.state.copy(), float(self.ego_z_m[self.k]), boxes, self.lights.at(self.k),
                          self.reference)  # fmt: skip

    def _observe(self) -> Observation:
        assert self.episode is not None and self.recorder is not None
        fs = self.frame_state()
        frames = self.source.frames(fs)
        self.recorder.record_state(self.k, self.state, fs.boxes)
        return Observation(self.k, fs.timestamp_ns, (fs.timestamp_ns - self.scenario.start_ns) / NS_PER_S, fs.ego_state, fs, frames,
                           self.episode)  # fmt: skip


def perfect_tracking(state: NDArrayFloat, ref: NDArrayFloat, dt_s: float, wheel_base_m: float) -> NDArrayFloat:
    """The state one step along a reference followed exactly (nuPlan's perfect tracking).

    The pose is the reference's next pose; speed, acceleration and yaw rate are the central
    differences of the reference around it (as `logged_ego_states` computes them from the log, so
    replaying the log gives back the logged states), the steering angle the one they imply.

    Args:
        state: (11,) current state.
        ref: (M+1, 3) world reference from the current pose, M >= 3.
        dt_s: the step.
        wheel_base_m: for the steering angle.

    Returns:
        (11,) next state.
    """
    heading = np.unwrap(np.r_[state[StateIndex.HEADING], ref[1:4, 2]])
    direction = np.stack([np.cos(heading[1:3]), np.sin(heading[1:3])], axis=1)
    v1 = float(direction[0] @ (ref[2, :2] - ref[0, :2])) / (2 * dt_s)
    v2 = float(direction[1] @ (ref[3, :2] - ref[1, :2])) / (2 * dt_s)
    accel = (v2 - float(state[StateIndex.VELOCITY_X])) / (2 * dt_s)
    yaw_rate = (heading[2] - heading[0]) / (2 * dt_s)
    new = initial_state(float(ref[1, 0]), float(ref[1, 1]), float(ref[1, 2]), v1, accel, yaw_rate, wheel_base_m)
    new[StateIndex.HEADING] = (new[StateIndex.HEADING] + np.pi) % (2 * np.pi) - np.pi
    return new


def pad_reference(ref: NDArrayFloat, min_poses: int) -> NDArrayFloat:
    """A reference of at least `min_poses` poses: a short one continues along its last step
    (a single pose: stays there)."""
    if len(ref) >= min_poses:
        return ref
    step = ref[-1] - ref[-2] if len(ref) >= 2 else np.zeros(3)
    extra = ref[-1] + np.arange(1, min_poses - len(ref) + 1)[:, None] * step
    return np.vstack([ref, extra])


def logged_ego_states(ego: EgoTrajectory, step_times_ns: NDArrayInt, vehicle: VehicleParameters) -> NDArrayFloat:
    """The logged ego as state rows (T, 11) at the step times: rear-axle pose, speed, acceleration,
    yaw rate and the steering angle they imply (finite differences on the step grid).

    Args:
        ego: the logged ego (the simulator's: `plausible_ego` of the scenario's).
        step_times_ns: (T,) times.
        vehicle: the ego (wheel base).

    Returns:
        (T, 11) states (constant-velocity extrapolation past the log).
    """
    pose = ego.pose_at(step_times_ns)
    xy, yaw = pose.translation[:, :2], np.unwrap(np.asarray(pose.yaw_rad).reshape(-1))
    t = (step_times_ns - step_times_ns[0]) / NS_PER_S
    if len(t) < 2:
        return initial_state(float(xy[0, 0]), float(xy[0, 1]), float(yaw[0]), 0.0, wheel_base_m=vehicle.wheel_base_m)[None]
    vel = np.gradient(xy, t, axis=0)
    speed = np.einsum("ij,ij->i", vel, np.stack([np.cos(yaw), np.sin(yaw)], axis=1))
    accel = np.gradient(speed, t)
    yaw_rate = np.gradient(yaw, t)
    out = np.stack([initial_state(float(xy[i, 0]), float(xy[i, 1]), float(yaw[i]), float(speed[i]), float(accel[i]), float(yaw_rate[i]),
                                  vehicle.wheel_base_m) for i in range(len(t))])  # fmt: skip
    out[:, StateIndex.HEADING] = (out[:, StateIndex.HEADING] + np.pi) % (2 * np.pi) - np.pi
    return out
