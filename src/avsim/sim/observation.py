"""What a policy sees each step, and the pluggable source of its camera frames.

`Observation` holds the ego state, its route ahead in the ego frame, the light states, every box
in the world (`Boxes`) and the camera frames the episode's `ObservationSource` made for this step.
`Observation.scene()` gives the privileged scene in the ego frame as the labels export it: the
boxes as `avsim.render.labels.boxes.FrameBoxes3D` (what `boxes3d.json` is written from) and the
map's lane lines near the ego (the `LaneTable` OpenLane labels are cut from), moved into the ego frame.

`ObservationSource` is the seam for camera frames: the stepper calls `frames(state)` once per
step with the world state and uses whatever images come back. `NoCameras` makes none;
`avsim.sim.render_source.RenderedControlSource` renders the rig's world-scenario control frames
in memory; `avsim.sim.generated.source.GeneratedSource` generates them chunk by chunk with the
Transfer model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

import numpy as np

from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3, matrix_to_quat, quat_to_matrix, yaw_to_quat
from avsim.core.typing import NDArrayByte, NDArrayFloat, NDArrayInt
from avsim.scenario import Scenario
from avsim.sim.boxes import Boxes
from avsim.sim.vehicle import StateIndex, VehicleParameters

if TYPE_CHECKING:
    from avsim.maps.road import RoadModel
    from avsim.render.labels.boxes import FrameBoxes3D
    from avsim.sim.route import Route

LANE_RADIUS_M = 150.0  # lane lines within this of the ego (as the OpenLane labels)
ROUTE_AHEAD_M = 100.0
ROUTE_STEP_M = 1.0


@dataclass(frozen=True, eq=False)
class EpisodeInfo:
    """What stays fixed over an episode: the scenario, its road and route, the ego, the clock, the
    seed, and the logged ego the episode replays (`log_ego`: the scenario's ego without its
    implausible poses, `avsim.scenario.ego_motion.plausible_ego`; None: the scenario's)."""

    scenario: Scenario
    road: RoadModel
    route: Route
    vehicle: VehicleParameters
    dt_s: float
    step_times_ns: NDArrayInt
    seed: int
    rng: np.random.Generator = field(repr=False)
    log_ego: EgoTrajectory | None = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class FrameState:
    """The world at one step, as an observation source needs it: the ego state row and its height
    (`world_SE3_ego` is built from them when read), the boxes, the lights, and the plan the ego
    followed into this step: `plan_world` (M+1, 3) world x, y, heading at the sim's step, row 0 the
    previous step's pose, row j the pose planned j steps after it (the tracker's reference; None at
    step 0 and after a `Control`). A source that shows the future (the generated video) forecasts
    the ego along it."""

    step: int
    timestamp_ns: int
    ego_state: NDArrayFloat
    ego_z_m: float
    boxes: Boxes
    lights: dict[str, str]
    plan_world: NDArrayFloat | None = None

    @cached_property
    def world_SE3_ego(self) -> SE3:
        return world_SE3_ego_of(self.ego_state, self.ego_z_m)


class ObservationSource(Protocol):
    """Makes the camera frames of each step (see the module docstring)."""

    camera_names: tuple[str, ...]

    def reset(self, episode: EpisodeInfo) -> None:
        """Prepare for an episode (called once before its first frame)."""

    def frames(self, state: FrameState) -> dict[str, NDArrayByte]:
        """Camera name -> (H, W, 3) uint8 image of the world at `state`."""
        ...

    def close(self) -> None:
        """Release what the source holds (called once after the episode)."""


class NoCameras:
    """An observation source that makes no frames (box-level stepping)."""

    camera_names: tuple[str, ...] = ()

    def reset(self, episode: EpisodeInfo) -> None:
        return None

    def frames(self, state: FrameState) -> dict[str, NDArrayByte]:
        return {}

    def close(self) -> None:
        return None


def world_SE3_ego_of(state: NDArrayFloat, z_m: float = 0.0) -> SE3:
    """The ego pose of a state row: rear axle at height `z_m` (the logged ego's), rotated by its heading."""
    x, y, h = state[StateIndex.X], state[StateIndex.Y], state[StateIndex.HEADING]
    return SE3.from_yaw(np.asarray(h), np.array([x, y, z_m]))


@dataclass(frozen=True, eq=False)
class Observation:
    """One step's observation.

    step, timestamp_ns, time_s: the clock; ego_state: (11,) `StateIndex` row (world frame, rear
    axle); world_SE3_ego: its pose (at the logged ego's height); lights: light id -> state; boxes: every road user in the world frame (not the ego);
    cameras: camera name -> (H, W, 3) uint8 frame (empty without cameras); episode: the episode's
    fixed information. `route_ego_xy` and `scene()` are computed when first read.
    """

    step: int
    timestamp_ns: int
    time_s: float
    ego_state: NDArrayFloat
    frame: FrameState = field(repr=False)
    cameras: dict[str, NDArrayByte]
    episode: EpisodeInfo = field(repr=False)

    @property
    def world_SE3_ego(self) -> SE3:
        return self.frame.world_SE3_ego

    @property
    def lights(self) -> dict[str, str]:
        return self.frame.lights

    @property
    def boxes(self) -> Boxes:
        return self.frame.boxes

    @cached_property
    def route_ego_xy(self) -> NDArrayFloat:
        """(M, 2) the route centre line ahead, every metre up to 100 m, in the ego frame."""
        return route_ahead(self.episode.route, self.ego_state)

    @property
    def speed_mps(self) -> float:
        return float(self.ego_state[StateIndex.VELOCITY_X])

    def scene(self) -> PrivilegedScene:
        """The privileged scene in the ego frame (computed on first use, then kept)."""
        return self._scene

    @cached_property
    def _scene(self) -> PrivilegedScene:
        return privileged_scene(self.episode.scenario, self.timestamp_ns, self.world_SE3_ego, self.boxes)


@dataclass(frozen=True, eq=False)
class PrivilegedScene:
    """boxes: every agent as the labels' `FrameBoxes3D` (ego frame fields included); lane_points_ego_m
    (P, 3) lane-line vertices within `LANE_RADIUS_M` in the ego frame, lane_offsets (L+1,) where each
    line starts, lane_category (L,) its OpenLane category (as `avsim labels` writes them)."""

    boxes: FrameBoxes3D
    lane_points_ego_m: NDArrayFloat
    lane_offsets: NDArrayInt
    lane_category: NDArrayInt


def privileged_scene(scenario: Scenario, timestamp_ns: int, world_SE3_ego: SE3, boxes: Boxes) -> PrivilegedScene:
    """The labels' records of one sim step (see `PrivilegedScene`).

    Args:
        scenario: the scenario (its map).
        timestamp_ns: the step time.
        world_SE3_ego: the ego pose.
        boxes: the road users in the world frame.

    Returns:
        The scene.
    """
    from avsim.render.labels.boxes import FrameBoxes3D
    from avsim.render.labels.lanes import lane_table, near_lines

    b = boxes.sorted()
    ego_SE3_world = world_SE3_ego.inverse()
    R_ew = ego_SE3_world.rotation
    rot_world = yaw_to_quat(b.yaw_rad) if len(b) else np.zeros((0, 4))
    world_R_object = quat_to_matrix(rot_world) if len(b) else np.zeros((0, 3, 3))
    vel_world = np.c_[b.velocity_mps, np.zeros(len(b))]
    frame = FrameBoxes3D(
        int(timestamp_ns), world_SE3_ego, b.track_id, b.source_class, b.object_class, b.center_m,
        ego_SE3_world.apply(b.center_m) if len(b) else b.center_m, b.size_m, rot_world,
        matrix_to_quat(R_ew[None] @ world_R_object) if len(b) else rot_world,
        _wrap(b.yaw_rad - float(world_SE3_ego.yaw_rad)), vel_world, vel_world @ R_ew.T,
    )  # fmt: skip
    table = lane_table(scenario.map.lane_lines)
    idx = near_lines(table, world_SE3_ego.translation[:2], LANE_RADIUS_M)
    counts = table.counts[idx]
    mask = np.zeros(len(table.category), bool)
    mask[idx] = True
    pts = table.points_m[np.repeat(mask, table.counts)] if len(idx) else np.zeros((0, 3))
    return PrivilegedScene(frame, ego_SE3_world.apply(pts) if len(pts) else pts, np.r_[0, np.cumsum(counts)].astype(np.int64),
                           table.category[idx])  # fmt: skip


def route_ahead(route: Route, state: NDArrayFloat) -> NDArrayFloat:
    """The route centre line ahead of the ego (every `ROUTE_STEP_M` for `ROUTE_AHEAD_M`) in the ego frame.

    Args:
        route: the episode's route.
        state: the ego state row.

    Returns:
        (M, 2) points, ego frame.
    """
    x, y, h = state[StateIndex.X], state[StateIndex.Y], state[StateIndex.HEADING]
    s0 = float(route.centerline.project(np.array([[x, y]]))[0])
    xy, _ = route.centerline.pose_at(s0 + np.arange(0.0, ROUTE_AHEAD_M + 1e-9, ROUTE_STEP_M))
    rel = xy - [x, y]
    c, s = np.cos(h), np.sin(h)
    return np.stack([rel[:, 0] * c + rel[:, 1] * s, -rel[:, 0] * s + rel[:, 1] * c], axis=1)


def _wrap(angle: NDArrayFloat) -> NDArrayFloat:
    return (angle + np.pi) % (2 * np.pi) - np.pi
