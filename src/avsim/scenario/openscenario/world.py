"""The entities while the storyboard runs: their poses, speeds, lane coordinates and how the
default controller moves them.

An entity's pose is its reference point (vehicles: the rear axle on the ground) with heading,
pitch and roll. An entity on a lane also has a `LaneCoord` and a heading relative to its travel
direction (`h_rel`, non-zero while it changes lanes); an entity off every lane moves straight
along its heading. Each step, an entity that no action moved is moved by its speed along its
lane (esmini's default controller); velocities and accelerations are the finite differences of
the poses over the step (what the speed and distance conditions read).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from avsim.scenario.openscenario.model import Entity
from avsim.scenario.openscenario.roads import LaneCoord, Roads, wrap


@dataclass
class EntityState:
    """One entity at the current step (mutable; see the module docstring)."""

    entity: Entity
    active: bool = True
    placed: bool = False
    x: float = 0.0
    y: float = 0.0
    z: float = 0.0
    h: float = 0.0
    p: float = 0.0
    r: float = 0.0
    speed: float = 0.0
    lane: LaneCoord | None = None  # `coord`, once located
    h_rel: float = 0.0
    stale: bool = False  # placed by world pose: `coord` is found when first asked for
    locator: Callable[[EntityState], None] | None = field(default=None, repr=False)
    route: list[str] | None = None
    end_of_road: bool = False
    moved_long: bool = False
    moved_lat: bool = False
    external: bool = False  # driven from outside (a policy's ego): actions skip it
    added_at: float | None = None  # the time an AddEntityAction last put it on the scene
    vx: float = 0.0
    vy: float = 0.0
    vz: float = 0.0
    accel: float = 0.0
    last: tuple[float, float, float, float] = field(default=(0.0, 0.0, 0.0, 0.0))  # x, y, z, speed at the step's start

    @property
    def name(self) -> str:
        return self.entity.name

    @property
    def coord(self) -> LaneCoord | None:
        """The lane coordinate (None off every lane), found lazily after a world-pose placement."""
        if self.stale and self.locator is not None:
            self.locator(self)
        return self.lane

    @coord.setter
    def coord(self, value: LaneCoord | None) -> None:
        self.lane, self.stale = value, False

    def begin_step(self) -> None:
        """Remember the pose and speed at the step's start; no action has moved it yet."""
        self.last = (self.x, self.y, self.z, self.speed)
        self.moved_long = self.moved_lat = False

    def end_step(self, dt: float) -> None:
        """Velocity and acceleration over the step just taken."""
        if dt > 0:
            self.vx, self.vy, self.vz = (self.x - self.last[0]) / dt, (self.y - self.last[1]) / dt, (self.z - self.last[2]) / dt
            self.accel = (self.speed - self.last[3]) / dt

    @property
    def velocity_long_lat(self) -> tuple[float, float]:
        """Velocity along and across the entity's heading (m/s)."""
        c, s = math.cos(self.h), math.sin(self.h)
        return self.vx * c + self.vy * s, -self.vx * s + self.vy * c


@dataclass(frozen=True)
class Placement:
    """A resolved position: a world pose, and the lane coordinate when it lies on a lane."""

    x: float
    y: float
    z: float
    h: float
    p: float
    r: float
    coord: LaneCoord | None = None
    h_rel: float = 0.0
    lazy: bool = False  # a full world pose: its lane is found when first needed


class Mover:
    """Places entities and moves them along their lanes (see the module docstring).

    Args:
        roads: the road network's lane queries.
    """

    def __init__(self, roads: Roads) -> None:
        self.roads = roads

    def place(self, st: EntityState, where: Placement) -> None:
        """Put `st` at `where` (a teleport)."""
        if where.lazy:
            self.set_free(st, where.x, where.y, where.z, where.h, where.p, where.r)
            st.end_of_road = False
            return
        st.x, st.y, st.z, st.h, st.p, st.r = where.x, where.y, where.z, where.h, where.p, where.r
        st.coord, st.h_rel, st.placed, st.end_of_road = where.coord, where.h_rel, True, False

    def set_lane(self, st: EntityState, coord: LaneCoord, h_rel: float = 0.0) -> None:
        """Put `st` at a lane coordinate, heading `h_rel` from its travel direction."""
        pose = self.roads.pose(coord)
        st.x, st.y, st.z = pose.x, pose.y, pose.z
        st.h, st.p, st.r = wrap(pose.heading + h_rel), pose.pitch, pose.roll
        st.coord, st.h_rel = coord, h_rel

    def set_free(self, st: EntityState, x: float, y: float, z: float, h: float, p: float = 0.0, r: float = 0.0) -> None:
        """Put `st` at a world pose (trajectories); its lane is found when first needed (`locate`)."""
        st.x, st.y, st.z, st.h, st.p, st.r = x, y, z, wrap(h), p, r
        st.lane, st.h_rel, st.stale, st.locator, st.placed = None, 0.0, True, self.locate, True

    def locate(self, st: EntityState) -> None:
        """Find the lane under `st`'s pose (`EntityState.coord`)."""
        found = self.roads.locate(st.x, st.y, st.h).coord
        st.lane, st.stale = found, False
        st.h_rel = 0.0 if found is None else wrap(st.h - self.roads.pose(found).heading)

    def move(self, st: EntityState, distance: float) -> None:
        """Move `st` `distance` metres along its lane keeping its offset and relative heading (off
        lanes: along its heading)."""
        if abs(distance) < 1e-12:
            return
        if st.coord is None:
            st.x += distance * math.cos(st.h)
            st.y += distance * math.sin(st.h)
            return
        coord, ended = self.roads.advance(st.coord, distance * math.cos(st.h_rel), st.route)
        st.end_of_road = ended
        self.set_lane(st, coord, st.h_rel)
