"""Positions resolved against the road network and the entities now (`resolve_position`).

Headings follow esmini's rules (`OSCPosition.cpp`, `Position::EvaluateRelation`): a lane
position faces its lane's driving direction plus a relative `h` (absolute `h` as given); a road
position faces the road's +s plus `h`; a world position without `h` faces the lane under it; a
relative world or object position takes the reference entity's heading plus `h` unless the
orientation is absolute. A relative lane position moves `ds` along the road's s and `dLane` lanes
towards +t, facing the road's +s; with `dsLane` it moves along the reference lane's driving
direction, `dLane` lanes (and the offset) to the left of it when the reference entity drives that
way, and faces the lane's driving direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from avsim.core.errors import AvsimValueError
from avsim.scenario.openscenario.model import (
    LanePosition,
    Orientation,
    Position,
    RelativeLanePosition,
    RelativeObjectPosition,
    RelativeRoadPosition,
    RelativeWorldPosition,
    RoadPosition,
    WorldPosition,
)
from avsim.scenario.openscenario.roads import LaneCoord, Roads, wrap
from avsim.scenario.openscenario.world import EntityState, Placement

EntityLookup = Callable[[str], EntityState]


def _on_lane(roads: Roads, coord: LaneCoord, h_rel: float, p: float | None = None, r: float | None = None) -> Placement:
    pose = roads.pose(coord)
    return Placement(pose.x, pose.y, pose.z, wrap(pose.heading + h_rel), pose.pitch if p is None else p, pose.roll if r is None else r,
                     coord, h_rel)  # fmt: skip


def _relative_h(o: Orientation | None, base: float) -> tuple[float, bool]:
    """(heading, absolute?) of an orientation relative to `base`."""
    if o is None or o.h is None:
        return base, False
    return (o.h, True) if not o.relative else (wrap(base + o.h), False)


def _lane(roads: Roads, pos: LanePosition) -> Placement:
    if not roads.has_lane(pos.road, pos.lane, pos.s):
        raise AvsimValueError(f"LanePosition: road {pos.road} has no lane {pos.lane} at s={pos.s:g}")
    sdir = roads.driving_sdir(pos.road, pos.lane, pos.s)
    coord = LaneCoord(pos.road, pos.lane, pos.s, pos.offset, sdir)
    o = pos.orientation
    if o is not None and o.h is not None and not o.relative:
        return _on_lane(roads, coord, wrap(o.h - roads.pose(coord).heading))
    return _on_lane(roads, coord, 0.0 if o is None or o.h is None else o.h)


def _road(roads: Roads, road: str, s: float, t: float, o: Orientation | None) -> Placement:
    base = roads.road_heading(road, s)
    h, _ = _relative_h(o, base)
    lane = roads.lane_at(road, s, t)
    p = roads.net.road_pose(road, s, t)
    if lane is None:
        return Placement(p.x, p.y, p.z, h, p.pitch, p.roll)
    sdir = 1 if math.cos(h - base) >= 0 else -1
    coord = LaneCoord(road, lane, s, t - roads.centre_t(road, lane, s), sdir)
    return Placement(p.x, p.y, p.z, h, p.pitch * sdir, p.roll * sdir, coord, wrap(h - roads.pose(coord).heading))


def _world(roads: Roads, pos: WorldPosition) -> Placement:
    if None not in (pos.z, pos.h, pos.p, pos.r):  # a full pose: the lane under it is found when needed
        return Placement(pos.x, pos.y, pos.z, wrap(pos.h), pos.p, pos.r, lazy=True)  # type: ignore[arg-type]
    found = roads.locate(pos.x, pos.y, pos.h).coord
    if found is None:
        return Placement(pos.x, pos.y, pos.z or 0.0, pos.h or 0.0, pos.p or 0.0, pos.r or 0.0)
    lane_pose = roads.pose(found)
    h = lane_pose.heading if pos.h is None else pos.h
    z = lane_pose.z if pos.z is None else pos.z
    return Placement(pos.x, pos.y, z, wrap(h), lane_pose.pitch if pos.p is None else pos.p, lane_pose.roll if pos.r is None else pos.r,
                     found, wrap(h - lane_pose.heading))  # fmt: skip


def _rotate(h: float, p: float, r: float, v: tuple[float, float, float]) -> tuple[float, float, float]:
    """v rotated by heading, pitch, roll (z-y-x, as esmini's RotateVec3d)."""
    ch, sh, cp, sp, cr, sr = math.cos(h), math.sin(h), math.cos(p), math.sin(p), math.cos(r), math.sin(r)
    x, y, z = v
    return (ch * cp * x + (ch * sp * sr - sh * cr) * y + (ch * sp * cr + sh * sr) * z,
            sh * cp * x + (sh * sp * sr + ch * cr) * y + (sh * sp * cr - ch * sr) * z,
            -sp * x + cp * sr * y + cp * cr * z)  # fmt: skip


def _relative_world(roads: Roads, ref: EntityState, pos: RelativeWorldPosition | RelativeObjectPosition) -> Placement:
    dz = pos.dz or 0.0
    if isinstance(pos, RelativeObjectPosition):
        d = _rotate(ref.h, ref.p, ref.r, (pos.dx, pos.dy, dz))
    else:
        d = (pos.dx, pos.dy, dz)
    h, _ = _relative_h(pos.orientation, ref.h)
    x, y = ref.x + d[0], ref.y + d[1]
    found = roads.locate(x, y, h).coord
    z = ref.z + d[2] if pos.dz is not None or found is None else roads.pose(found).z
    h_rel = 0.0 if found is None else wrap(h - roads.pose(found).heading)
    return Placement(x, y, z, h, ref.p, ref.r, found, h_rel)


def _ref_coord(ref: EntityState, what: str) -> LaneCoord:
    if ref.coord is None:
        raise AvsimValueError(f"{what}: the reference entity {ref.name} is not on a road")
    return ref.coord


def _relative_road(roads: Roads, ref: EntityState, pos: RelativeRoadPosition) -> Placement:
    c = _ref_coord(ref, "RelativeRoadPosition")
    moved, _ = roads.advance(LaneCoord(c.road, c.lane, c.s, c.offset, 1), pos.ds, actual=False)
    t = roads.centre_t(c.road, c.lane, c.s) + c.offset if moved.road == c.road else roads.centre_t(moved.road, moved.lane, moved.s) + moved.offset
    return _road(roads, moved.road, moved.s, t + pos.dt, pos.orientation)


def _relative_lane(roads: Roads, ref: EntityState, pos: RelativeLanePosition) -> Placement:
    c = _ref_coord(ref, "RelativeLanePosition")
    along_lane = pos.ds_lane is not None
    forward = math.cos(ref.h - roads.road_heading(c.road, c.s)) >= 0
    follows_rule = forward == (roads.driving_sdir(c.road, c.lane, c.s) > 0)
    if along_lane:
        start = LaneCoord(c.road, c.lane, c.s, c.offset, roads.driving_sdir(c.road, c.lane, c.s))
        moved, _ = roads.advance(start, pos.ds_lane or 0.0, actual=False)
    else:
        moved, _ = roads.advance(LaneCoord(c.road, c.lane, c.s, c.offset, 1), pos.ds or 0.0, actual=False)
    sign = 1 if (not along_lane or follows_rule) else -1
    lane = roads.relative_lane(moved.lane, sign * pos.d_lane)
    if not roads.has_lane(moved.road, lane, moved.s):
        raise AvsimValueError(f"RelativeLanePosition: road {moved.road} has no lane {lane} at s={moved.s:g}")
    sdir = roads.driving_sdir(moved.road, lane, moved.s) if along_lane else 1  # ds: facing the road's +s, as esmini
    coord = LaneCoord(moved.road, lane, moved.s, sign * pos.offset, sdir)
    o = pos.orientation
    if o is not None and o.h is not None and not o.relative:
        return _on_lane(roads, coord, wrap(o.h - roads.pose(coord).heading))
    return _on_lane(roads, coord, 0.0 if o is None or o.h is None else o.h)


def resolve_position(roads: Roads, pos: Position, entities: EntityLookup) -> Placement:
    """Where `pos` is now (see the module docstring).

    Args:
        roads: the network's lane queries.
        pos: the position.
        entities: the current state of an entity by name.

    Returns:
        The placement (AvsimValueError when a lane does not exist there or the reference entity is off the roads).
    """
    if isinstance(pos, WorldPosition):
        return _world(roads, pos)
    if isinstance(pos, LanePosition):
        return _lane(roads, pos)
    if isinstance(pos, RoadPosition):
        return _road(roads, pos.road, pos.s, pos.t, pos.orientation)
    ref = entities(pos.entity)
    if isinstance(pos, (RelativeWorldPosition, RelativeObjectPosition)):
        return _relative_world(roads, ref, pos)
    if isinstance(pos, RelativeRoadPosition):
        return _relative_road(roads, ref, pos)
    return _relative_lane(roads, ref, pos)
