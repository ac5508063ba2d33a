"""The geometry NAVSIM's scorer reads, for a batch of ego state sequences (B, T) at once.

- ego boxes: NAVSIM's `state_array_to_coords_array` (corners front-left, rear-left, rear-right,
  front-right and the centre, from the rear-axle state and the vehicle's box);
- ego areas (`_calculate_ego_area`): *multiple lanes* (corners in more than one lane polygon and
  no lane holding all four), *non-drivable* (a corner outside every drivable polygon), *oncoming*
  (the centre in no on-route lane polygon), and whether the centre (and the rear axle) lies in an
  intersection;
- contacts: every (proposal, time, object) whose boxes intersect, with the ego box moved ahead at
  constant velocity by a time offset (TTC's projections) and the objects of the later time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely

from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt
from avsim.maps.road import RoadModel
from avsim.sim.boxes import Boxes, footprint
from avsim.sim.geometry import boxes_overlap
from avsim.sim.route import Route
from avsim.sim.vehicle import StateIndex, VehicleParameters


@dataclass(frozen=True, eq=False)
class EgoGeometry:
    """Ego boxes and areas of states (B, T): corners (B, T, 4, 2) in NAVSIM's order, center (B, T, 2),
    yaw, speed (B, T); multiple_lanes, non_drivable, oncoming, center_in_intersection,
    rear_axle_in_intersection (B, T) bool."""

    corners: NDArrayFloat
    center: NDArrayFloat
    yaw: NDArrayFloat
    speed: NDArrayFloat
    rear_axle: NDArrayFloat
    multiple_lanes: NDArrayBool
    non_drivable: NDArrayBool
    oncoming: NDArrayBool
    center_in_intersection: NDArrayBool
    rear_axle_in_intersection: NDArrayBool


def ego_geometry(states: NDArrayFloat, vehicle: VehicleParameters, road: RoadModel, route: Route) -> EgoGeometry:
    """Boxes and areas of ego states (see the module docstring).

    Args:
        states: (B, T, 11) rear-axle states.
        vehicle: the ego's box.
        road: the road graph (lanes, drivable area, intersections).
        route: the route (its on-route lanes).

    Returns:
        The geometry.
    """
    yaw = states[..., StateIndex.HEADING]
    rear = states[..., : StateIndex.Y + 1]
    center = rear + vehicle.rear_axle_to_center_m * np.stack([np.cos(yaw), np.sin(yaw)], axis=-1)
    corners = footprint(center, yaw, vehicle.length_m, vehicle.width_m)
    speed = np.hypot(states[..., StateIndex.VELOCITY_X], states[..., StateIndex.VELOCITY_Y])
    b, t = yaw.shape
    pts = corners.reshape(-1, 2)
    lanes_of_corner = road.geometry.holding(pts).reshape(b, t, 4, -1)  # (B, T, 4, K)
    per_lane = lanes_of_corner.sum(axis=2)  # corners per lane
    multiple = ((per_lane > 0).sum(axis=-1) > 1) & np.all(per_lane != 4, axis=-1)
    if road.drivable.is_empty:
        non_drivable = np.ones((b, t), bool)
    else:
        inside = shapely.contains_xy(road.drivable, pts[:, 0], pts[:, 1]).reshape(b, t, 4)
        non_drivable = inside.sum(axis=-1) < 4
    centre_lanes = road.geometry.holding(center.reshape(-1, 2)).reshape(b, t, -1)
    if route.on_route.any():
        oncoming = ~(centre_lanes & route.on_route[None, None, :]).any(axis=-1)
    else:
        oncoming = np.zeros((b, t), bool)  # no route lanes: driving direction is not scored
    in_x = road.in_intersection(center.reshape(-1, 2)).reshape(b, t)
    rear_in_x = road.in_intersection(rear.reshape(-1, 2)).reshape(b, t)
    return EgoGeometry(corners, center, yaw, speed, rear.copy(), multiple, non_drivable, oncoming, in_x, rear_in_x)


@dataclass(frozen=True, eq=False)
class Contacts:
    """Box intersections: b, t (ego proposal and time), obj (row into the flattened world at time
    t + offset), for one time offset."""

    b: NDArrayInt
    t: NDArrayInt
    obj: NDArrayInt


class FlatWorld:
    """The objects of every time index in one table (rows of time t at start[t]:start[t+1]).

    Args:
        boxes: one `Boxes` per time index.
    """

    def __init__(self, boxes: list[Boxes]) -> None:
        self.boxes = Boxes.concat(list(boxes))
        counts = np.array([len(b) for b in boxes], np.int64)
        self.start = np.r_[0, np.cumsum(counts)].astype(np.int64)
        self.time = np.repeat(np.arange(len(boxes)), counts)
        self.n_times = len(boxes)

    def contacts(self, geo: EgoGeometry, vehicle: VehicleParameters, offset_steps: int, shift_s: float) -> Contacts:
        """Every (b, t, object) where the ego box at t, moved ahead by `shift_s` at its speed and
        heading, intersects an object of time t + offset_steps.

        Args:
            geo: the ego geometry (B, T).
            vehicle: the ego's box.
            offset_steps: the objects' time offset.
            shift_s: how far ahead in time the ego box is moved.

        Returns:
            The contacts, ordered by (t, b, object row).
        """
        b_n, t_n = geo.yaw.shape
        t_obj = np.arange(t_n) + offset_steps
        ok = t_obj < self.n_times
        t_ego = np.arange(t_n)[ok]
        lo, hi = self.start[t_obj[ok]], self.start[t_obj[ok] + 1]
        counts = hi - lo
        if not counts.sum():
            z = np.zeros(0, np.int64)
            return Contacts(z, z, z)
        rows = np.concatenate([np.arange(a, c) for a, c in zip(lo, hi)])
        tt = np.repeat(t_ego, counts)
        bb = np.repeat(np.arange(b_n), len(rows))
        rows, tt = np.tile(rows, b_n), np.tile(tt, b_n)
        direction = np.stack([np.cos(geo.yaw[bb, tt]), np.sin(geo.yaw[bb, tt])], axis=-1)
        ego_xy = geo.center[bb, tt] + direction * (geo.speed[bb, tt] * shift_s)[:, None]
        box = self.boxes
        reach = np.hypot(vehicle.length_m, vehicle.width_m) / 2 + np.hypot(box.size_m[rows, 0], box.size_m[rows, 1]) / 2
        near = np.flatnonzero(np.hypot(*(ego_xy - box.center_m[rows, :2]).T) <= reach)  # bounding circles first
        bb, tt, rows, ego_xy = bb[near], tt[near], rows[near], ego_xy[near]
        hit = boxes_overlap(ego_xy, geo.yaw[bb, tt], vehicle.length_m, vehicle.width_m,
                            box.center_m[rows, :2], box.yaw_rad[rows], box.size_m[rows, 0], box.size_m[rows, 1])  # fmt: skip
        order = np.lexsort((rows[hit], bb[hit], tt[hit]))
        return Contacts(bb[hit][order], tt[hit][order], rows[hit][order])


def relative_angle(ego_xy: NDArrayFloat, ego_yaw: NDArrayFloat, agent_xy: NDArrayFloat) -> NDArrayFloat:
    """nuPlan's `get_agent_relative_angle`: angle between the ego's heading and the direction to the agent."""
    v = agent_xy - ego_xy
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = v / np.linalg.norm(v, axis=-1, keepdims=True)
        dot = np.cos(ego_yaw) * unit[..., 0] + np.sin(ego_yaw) * unit[..., 1]
        return np.arccos(dot)


def is_agent_ahead(ego_xy: NDArrayFloat, ego_yaw: NDArrayFloat, agent_xy: NDArrayFloat, tolerance_deg: float = 30.0) -> NDArrayBool:
    """nuPlan's `is_agent_ahead` (angle below 30 degrees; NaN at zero distance counts as not)."""
    return relative_angle(ego_xy, ego_yaw, agent_xy) < np.deg2rad(tolerance_deg)


def is_agent_behind(ego_xy: NDArrayFloat, ego_yaw: NDArrayFloat, agent_xy: NDArrayFloat, tolerance_deg: float = 150.0) -> NDArrayBool:
    """nuPlan's `is_agent_behind` (angle above 150 degrees)."""
    return relative_angle(ego_xy, ego_yaw, agent_xy) > np.deg2rad(tolerance_deg)
