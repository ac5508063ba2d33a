"""Distances, headways and times to collision between entities, as esmini measures them
(`Object::Distance`, `FreeSpaceDistance`, `CollisionAndRelativeDistLatLong`, `Position::Distance`,
`Object::TimeToCollision`).

- entity frame (and every euclidean distance), reference points: the distance between the
  reference points, negative when the other lies behind (x < 0 in the measuring entity's frame);
  lateral / longitudinal: y / x in that frame;
- freespace: between the bounding boxes (0 when they overlap), signed by the longitudinal gap;
  in the entity frame lateral / longitudinal are the gaps between the boxes' projections on the
  measuring entity's axes;
- road (and lane) frame: ds along the roads in the measuring entity's travel direction and dt
  between the t coordinates; freespace: the smallest ds / dt between the boxes' corners, 0 where
  their ranges overlap. No road path between them: undefined.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from avsim.core.typing import NDArrayFloat
from avsim.scenario.openscenario.model import CoordinateSystem, DistanceType
from avsim.scenario.openscenario.roads import Roads
from avsim.scenario.openscenario.world import EntityState

SMALL = 1e-6


def corners(st: EntityState) -> NDArrayFloat:
    """(4, 2) world corners of the entity's bounding box (front left, rear left, rear right, front right)."""
    b = st.entity.bbox
    local = np.array([[b.length / 2, b.width / 2], [-b.length / 2, b.width / 2], [-b.length / 2, -b.width / 2], [b.length / 2, -b.width / 2]])
    local = local + [b.center[0], b.center[1]]
    c, s = math.cos(st.h), math.sin(st.h)
    return np.stack([st.x + c * local[:, 0] - s * local[:, 1], st.y + s * local[:, 0] + c * local[:, 1]], axis=1)


def _in_frame(st: EntityState, x: float, y: float) -> tuple[float, float]:
    dx, dy = x - st.x, y - st.y
    c, s = math.cos(st.h), math.sin(st.h)
    return dx * c + dy * s, -dx * s + dy * c


def _gaps(a: NDArrayFloat, b: NDArrayFloat, heading: float) -> tuple[float, float]:
    """(longitudinal, lateral) signed gaps between two corner sets along `heading`'s axes (0: overlap)."""
    out = []
    for axis in ((math.cos(heading), math.sin(heading)), (-math.sin(heading), math.cos(heading))):
        pa, pb = a @ axis, b @ axis
        if pb.min() > pa.max() + SMALL:
            out.append(float(pb.min() - pa.max()))
        elif pb.max() < pa.min() - SMALL:
            out.append(float(pb.max() - pa.min()))
        else:
            out.append(0.0)
    return out[0], out[1]


def _polygon_distance(a: NDArrayFloat, b: NDArrayFloat) -> float:
    """Smallest vertex-to-edge distance between two convex quadrilaterals (0 when they overlap)."""
    if _overlap(a, b):
        return 0.0
    best = math.inf
    for p, q in ((a, b), (b, a)):
        for v in p:
            for k in range(4):
                e0, e1 = q[k], q[(k + 1) % 4]
                d = e1 - e0
                u = float(np.clip(np.dot(v - e0, d) / max(float(np.dot(d, d)), 1e-12), 0.0, 1.0))
                best = min(best, float(np.linalg.norm(v - (e0 + u * d))))
    return best


def _overlap(a: NDArrayFloat, b: NDArrayFloat) -> bool:
    """Separating-axis test of two rectangles."""
    for poly in (a, b):
        for k in range(2):
            edge = poly[k + 1] - poly[k]
            axis = np.array([-edge[1], edge[0]])
            pa, pb = a @ axis, b @ axis
            if pa.max() < pb.min() - SMALL or pb.max() < pa.min() - SMALL:
                return False
    return True


def _frame_coords(roads: Roads, st: EntityState, pts: NDArrayFloat) -> list[tuple[str, float, float]] | None:
    """(road, s, t) of world points near entity `st`, in the road frame at its lane coordinate
    (linearised: the points are within a box length of it); None off the roads."""
    c = st.coord
    if c is None:
        return None
    frame = roads.net.road(c.road).frame(np.array([c.s]))
    e_s, e_t = frame.e_s[0, :2], frame.e_t[0, :2]
    e_s, e_t = e_s / np.linalg.norm(e_s), e_t / np.linalg.norm(e_t)
    t0 = roads.centre_t(c.road, c.lane, c.s) + c.offset
    d = pts - [st.x, st.y]
    return [(c.road, c.s + float(v @ e_s), t0 + float(v @ e_t)) for v in d]


def _point_coord(roads: Roads, x: float, y: float) -> tuple[str, float, float] | None:
    found = roads.locate(x, y)
    return None if found.coord is None else (found.coord.road, found.coord.s, found.t)


def _road_deltas(roads: Roads, a: EntityState, own: list[tuple[str, float, float]], other: list[tuple[str, float, float]],
                 dtype: DistanceType) -> NDArrayFloat | None:  # fmt: skip
    """ds (in `a`'s travel direction) or dt between every pair of points (None: no road path)."""
    assert a.coord is not None
    out = np.zeros((len(own), len(other)))
    for i, (road_i, s_i, t_i) in enumerate(own):
        for j, (road_j, s_j, t_j) in enumerate(other):
            if dtype is DistanceType.LONGITUDINAL:
                ds = roads.road_distance(replace(a.coord, road=road_i, s=s_i), road_j, s_j)
                if ds is None:
                    return None
                out[i, j] = ds
            else:
                if road_i != road_j:
                    return None
                out[i, j] = t_j - t_i
    return out


def _road_frame(roads: Roads, a: EntityState, own_pts: NDArrayFloat, other: list[tuple[str, float, float]] | None,
                dtype: DistanceType) -> float | None:  # fmt: skip
    """The smallest signed ds / dt between `a`'s points and `other`, 0 where they straddle."""
    own = _frame_coords(roads, a, own_pts)
    if own is None or other is None:
        return None
    d = _road_deltas(roads, a, own, other, dtype)
    if d is None:
        return None
    best = float(d.flat[int(np.argmin(np.abs(d)))])
    straddle = any(len({bool(v >= 0) for v in row}) > 1 for row in d)
    return 0.0 if straddle else best


def distance(roads: Roads, a: EntityState, b: EntityState, cs: CoordinateSystem, dtype: DistanceType, freespace: bool) -> float | None:
    """The distance from entity `a` to entity `b` (see the module docstring); None: undefined."""
    road_frame = cs in (CoordinateSystem.ROAD, CoordinateSystem.LANE) and dtype is not DistanceType.EUCLIDEAN
    if road_frame:
        if freespace:
            return _road_frame(roads, a, corners(a), _frame_coords(roads, b, corners(b)), dtype)
        return _road_frame(roads, a, np.array([[a.x, a.y]]), _frame_coords(roads, b, np.array([[b.x, b.y]])), dtype)
    if freespace:
        ca, cb = corners(a), corners(b)
        long, lat = _gaps(ca, cb, a.h)
        if cs is CoordinateSystem.ENTITY and dtype is DistanceType.LONGITUDINAL:
            return long
        if cs is CoordinateSystem.ENTITY and dtype is DistanceType.LATERAL:
            return lat
        return _polygon_distance(ca, cb) * (1.0 if long >= 0 else -1.0)
    return distance_to_point(roads, a, b.x, b.y, cs, dtype, False)


def distance_to_point(roads: Roads, a: EntityState, x: float, y: float, cs: CoordinateSystem, dtype: DistanceType, freespace: bool) -> float | None:
    """The distance from entity `a` to a world point (see the module docstring); None: undefined."""
    road_frame = cs in (CoordinateSystem.ROAD, CoordinateSystem.LANE) and dtype is not DistanceType.EUCLIDEAN
    if road_frame:
        target = _point_coord(roads, x, y)
        own = corners(a) if freespace else np.array([[a.x, a.y]])
        return _road_frame(roads, a, own, None if target is None else [target], dtype)
    if freespace:
        box = corners(a)
        long, lat = _gaps(box, np.array([[x, y]]), a.h)
        if cs is CoordinateSystem.ENTITY and dtype is DistanceType.LONGITUDINAL:
            return long
        if cs is CoordinateSystem.ENTITY and dtype is DistanceType.LATERAL:
            return lat
        inside = long == 0.0 and lat == 0.0
        d = 0.0 if inside else min(_point_edge(np.array([x, y]), box[k], box[(k + 1) % 4]) for k in range(4))
        return d * (1.0 if long >= 0 else -1.0)
    fx, fy = _in_frame(a, x, y)
    if dtype is DistanceType.LONGITUDINAL:
        return fx
    if dtype is DistanceType.LATERAL:
        return fy
    return math.hypot(fx, fy) * (1.0 if fx > 0 else -1.0)


def _point_edge(v: NDArrayFloat, e0: NDArrayFloat, e1: NDArrayFloat) -> float:
    d = e1 - e0
    u = float(np.clip(np.dot(v - e0, d) / max(float(np.dot(d, d)), 1e-12), 0.0, 1.0))
    return float(np.linalg.norm(v - (e0 + u * d)))


def time_headway(rel_dist: float | None, speed: float) -> float | None:
    """Headway time to a target `rel_dist` ahead at `speed` (undefined behind or standing still)."""
    if rel_dist is None or rel_dist < 0 or speed < SMALL:
        return None
    return abs(rel_dist / speed)


def time_to_collision(rel_dist: float | None, a: EntityState, b: EntityState | None) -> float | None:
    """Time for `a` to close `rel_dist` on `b` (a position when `b` is None) at the current
    velocities (esmini's relative speed along `b`'s velocity); undefined when not closing."""
    if rel_dist is None:
        return None
    if b is None or (abs(b.vx) < SMALL and abs(b.vy) < SMALL):
        rel_speed = a.speed
    else:
        norm = math.hypot(b.vx, b.vy)
        proj = (a.vx * b.vx + a.vy * b.vy) / norm
        rel_speed = (1.0 if a.speed >= 0 else -1.0) * (1.0 if proj >= 0 else -1.0) * (proj - abs(b.speed))
    if abs(rel_dist) < SMALL or abs(rel_speed) < SMALL:
        return None
    ttc = rel_dist / rel_speed
    return ttc if ttc >= 0 else None
