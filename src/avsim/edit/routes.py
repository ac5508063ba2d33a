"""Paths for edited agents and the ego: lane-following routes, waypoints and speed profiles.

All positions are in the world frame (FLU, metres); times are seconds relative to the
scenario start (the ego's first timestamp) unless a name says `_ns`.

A route is a dense 3-D polyline (N, 3) built by chaining the map's lane centre lines along the
road model's lane graph (`avsim.maps.road.RoadModel`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.transforms import wrap_angle
from avsim.maps import HDMap
from avsim.maps.road import RoadModel

ROUTE_STEP_M = 0.5
TURN_THRESHOLD_RAD = np.deg2rad(30.0)


# ----------------------------------------------------------------------------- polylines
def arc_length_m(points: np.ndarray) -> np.ndarray:
    """Cumulative arc length (N,) of a polyline (N, D), starting at 0."""
    seg = np.linalg.norm(np.diff(points, axis=0), axis=1)
    return np.concatenate([[0.0], np.cumsum(seg)])


def dedupe_polyline(points: np.ndarray, min_step_m: float = 1e-6) -> np.ndarray:
    """Drop consecutive (near-)duplicate vertices so arc length is strictly increasing."""
    points = np.asarray(points, dtype=np.float64)
    if len(points) < 2:
        return points.copy()
    keep = np.concatenate([[True], np.linalg.norm(np.diff(points[:, :2], axis=0), axis=1) > min_step_m])
    return points[keep].copy()


def interp_polyline(points: np.ndarray, s_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points and headings at arc lengths `s_m` (K,) along `points` (N, 3), N >= 2.

    Beyond either end the polyline is extended straight along its end segment, so any `s_m`
    gives a finite point. Returns (xyz (K, 3), yaw_rad (K,)) in the polyline's frame.
    """
    points = dedupe_polyline(points)
    if len(points) < 2:
        raise AvsimValueError("route: needs at least two distinct points")
    s_nodes = arc_length_m(points[:, :2])
    s_m = np.asarray(s_m, dtype=np.float64)
    seg = np.clip(np.searchsorted(s_nodes, s_m, side="right") - 1, 0, len(points) - 2)
    s0, s1 = s_nodes[seg], s_nodes[seg + 1]
    alpha = (s_m - s0) / (s1 - s0)  # unclipped: linear extension at both ends
    p0, p1 = points[seg], points[seg + 1]
    xyz = p0 + alpha[:, None] * (p1 - p0)
    d = p1 - p0
    yaw = np.arctan2(d[:, 1], d[:, 0])
    return xyz, yaw


def path_yaw_rad(xy: np.ndarray, fallback_rad: float = 0.0) -> np.ndarray:
    """Heading (N,) of a sampled path (N, 2) from central differences.

    Where the path stands still the last valid heading is held, so a stopped car keeps its
    heading instead of snapping to `fallback_rad`.
    """
    n = len(xy)
    if n < 2:
        return np.full(n, fallback_rad)
    d = np.gradient(xy, axis=0)
    moving = np.linalg.norm(d, axis=1) > 1e-6
    yaw = np.arctan2(d[:, 1], d[:, 0])
    if not moving.any():
        return np.full(n, fallback_rad)
    idx = np.where(moving, np.arange(n), -1)
    idx = np.maximum.accumulate(idx)
    first = int(np.argmax(moving))
    idx[idx < 0] = first  # before the first motion: use the first moving heading
    return yaw[idx]


# ----------------------------------------------------------------------------- speed profiles
@dataclass(frozen=True)
class SpeedProfile:
    """Piecewise-linear speed over time: `speeds_mps[k]` at `times_s[k]`, held outside.

    `times_s` (K,) is relative to the moment the path starts; K >= 1.
    """

    times_s: np.ndarray
    speeds_mps: np.ndarray

    def __post_init__(self) -> None:
        t = np.array(self.times_s, dtype=np.float64).reshape(-1)
        v = np.array(self.speeds_mps, dtype=np.float64).reshape(-1)
        if len(t) == 0 or t.shape != v.shape:
            raise AvsimValueError("speed_profile: times_s and speeds_mps need the same non-zero length")
        if not (np.isfinite(t).all() and np.isfinite(v).all()):
            raise AvsimValueError("speed_profile: values must be finite")
        if np.any(np.diff(t) <= 0):
            raise AvsimValueError("speed_profile.times_s: must be strictly increasing")
        if np.any(v < 0):
            raise AvsimValueError("speed_profile.speeds_mps: must be >= 0")
        t.setflags(write=False)
        v.setflags(write=False)
        object.__setattr__(self, "times_s", t)
        object.__setattr__(self, "speeds_mps", v)

    @classmethod
    def constant(cls, speed_mps: float) -> SpeedProfile:
        return cls(np.array([0.0]), np.array([float(speed_mps)]))

    def speed_at(self, t_s: np.ndarray) -> np.ndarray:
        return np.interp(t_s, self.times_s, self.speeds_mps)

    def distance_m(self, t_s: np.ndarray) -> np.ndarray:
        """Distance travelled (K,) from t = 0 to each `t_s` (K,) (negative before 0)."""
        t_s = np.asarray(t_s, dtype=np.float64)
        # knots: 0, the profile's knots, and the query times; exact trapezoid integral
        knots = np.unique(np.concatenate([[0.0], self.times_s, t_s]))
        v = self.speed_at(knots)
        cum = np.concatenate([[0.0], np.cumsum(0.5 * (v[1:] + v[:-1]) * np.diff(knots))])
        cum -= cum[np.searchsorted(knots, 0.0)]
        return cum[np.searchsorted(knots, t_s)]


# ----------------------------------------------------------------------------- lane routes
def _lane_centres(hdmap: HDMap) -> list[np.ndarray]:
    centre = hdmap.lanes.centre
    return [dedupe_polyline(np.asarray(centre[k], dtype=np.float64)) for k in range(len(centre))]


def _nearest_on_polyline(points: np.ndarray, xy: np.ndarray) -> tuple[float, float, float]:
    """(distance_m, arc length s_m, segment yaw) of the point of `points` nearest to `xy`."""
    p0, p1 = points[:-1, :2], points[1:, :2]
    d = p1 - p0
    len2 = np.maximum((d * d).sum(axis=1), 1e-12)
    u = np.clip(((xy - p0) * d).sum(axis=1) / len2, 0.0, 1.0)
    proj = p0 + u[:, None] * d
    dist = np.linalg.norm(proj - xy, axis=1)
    k = int(np.argmin(dist))
    s_nodes = arc_length_m(points[:, :2])
    return float(dist[k]), float(s_nodes[k] + u[k] * np.sqrt(len2[k])), float(np.arctan2(d[k, 1], d[k, 0]))


def nearest_lane(
    hdmap: HDMap, xy: np.ndarray, heading_rad: float | None = None, max_heading_diff_rad: float = np.pi / 3
) -> tuple[int, float, float] | None:
    """Index, distance_m and arc length s_m of the lane centre nearest to `xy` (2,).

    When `heading_rad` is given only lanes running within `max_heading_diff_rad` of it (at the
    nearest segment) count. Returns None when the map has no (matching) lane.
    """
    centre = hdmap.lanes.centre
    if not len(centre):
        return None
    pts = np.asarray(centre.points_m)[:, :2]
    lane = centre.element_index
    seg = np.flatnonzero(lane[1:] == lane[:-1])  # segments inside one lane
    p0, p1 = pts[seg], pts[seg + 1]
    d = p1 - p0
    len2 = (d * d).sum(axis=1)
    ok = len2 > 1e-12
    seg, p0, d, len2 = seg[ok], p0[ok], d[ok], len2[ok]
    u = np.clip(((np.asarray(xy, dtype=np.float64)[:2] - p0) * d).sum(axis=1) / len2, 0.0, 1.0)
    dist = np.linalg.norm(p0 + u[:, None] * d - xy[:2], axis=1)
    if heading_rad is not None:
        dist = np.where(np.abs(wrap_angle(np.arctan2(d[:, 1], d[:, 0]) - heading_rad)) <= max_heading_diff_rad, dist, np.inf)
    k = int(np.argmin(dist))
    if not np.isfinite(dist[k]):
        return None
    li = int(lane[seg[k]])
    # arc length along the lane: cumulative length of its earlier segments plus the fraction
    first = int(centre.offsets[li])
    s_nodes = arc_length_m(pts[first : int(centre.offsets[li + 1])])
    return li, float(dist[k]), float(s_nodes[seg[k] - first] + u[k] * np.sqrt(len2[k]))


def _turn_of(points: np.ndarray) -> float:
    """Signed heading change (rad) from the start to the end of a lane centre (left > 0)."""
    d0 = points[min(1, len(points) - 1)] - points[0]
    d1 = points[-1] - points[max(len(points) - 2, 0)]
    return float(wrap_angle(np.arctan2(d1[1], d1[0]) - np.arctan2(d0[1], d0[0])))


def _choose(centres: list[np.ndarray], options: list[int], turn: str) -> int:
    turns = np.array([_turn_of(centres[j]) for j in options])
    if turn == "left" and (turns > TURN_THRESHOLD_RAD).any():
        return options[int(np.argmax(turns))]
    if turn == "right" and (turns < -TURN_THRESHOLD_RAD).any():
        return options[int(np.argmin(turns))]
    return options[int(np.argmin(np.abs(turns)))]


def lane_route(
    road: RoadModel,
    start_xy: np.ndarray,
    length_m: float,
    heading_rad: float | None = None,
    turns: tuple[str, ...] = (),
) -> np.ndarray:
    """A route (N, 3) of `length_m` following lane centres from the lane nearest `start_xy`.

    At each junction the next entry of `turns` ("straight" | "left" | "right") picks the
    successor among the road model's (`avsim.maps.lane_graph`: the source's named successors,
    e.g. the sample's `metadata["lane_successors"]`, else the lanes starting at a lane's end);
    when `turns` runs out, the straightest successor is taken. Where no successor exists the
    route continues straight along the last lane's end direction, so the route always has the
    requested length. Points are spaced ROUTE_STEP_M apart.
    """
    hdmap = road.map
    for turn in turns:
        if turn not in ("straight", "left", "right"):
            raise AvsimValueError(f"route.turns: unknown turn {turn!r} (straight, left, right)")
    if len(hdmap.lanes.centre) == 0:
        raise AvsimValueError("route: the map has no lanes to follow")
    found = nearest_lane(hdmap, np.asarray(start_xy, dtype=np.float64)[:2], heading_rad)
    if found is None:
        raise AvsimValueError("route: no lane runs in the requested heading near the start point")
    centres = _lane_centres(hdmap)
    k, _, s_start = found
    pieces = [centres[k]]
    total = arc_length_m(centres[k][:, :2])[-1] - s_start
    turn_iter = iter(turns)
    visited = {k}
    while total < length_m:
        options = [j for j in road.successors[k] if j not in visited]
        if not options:
            break
        k = _choose(centres, options, next(turn_iter, "straight"))
        visited.add(k)
        pieces.append(centres[k][1:])
        total += arc_length_m(centres[k][:, :2])[-1]
    chain = dedupe_polyline(np.concatenate(pieces, axis=0))
    s = s_start + np.arange(0.0, float(length_m) + 1e-9, ROUTE_STEP_M)
    if s[-1] < s_start + length_m:
        s = np.append(s, s_start + length_m)
    xyz, _ = interp_polyline(chain, s)
    return xyz


def follow_path(
    route_xyz: np.ndarray, t_s: np.ndarray, profile: SpeedProfile, start_s: float = 0.0, s0_m: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Drive along `route_xyz` (N, 3) with `profile`, starting at `start_s`, `s0_m` into the route.

    Returns (xyz (T, 3), yaw_rad (T,)) at times `t_s` (T,). Before `start_s` the agent waits at
    its start point; past the route's end it continues straight.
    """
    rel = np.maximum(np.asarray(t_s, dtype=np.float64) - start_s, 0.0)
    s = s0_m + profile.distance_m(rel)
    xyz, seg_yaw = interp_polyline(route_xyz, s)
    yaw = path_yaw_rad(xyz[:, :2], fallback_rad=float(seg_yaw[0]))
    return xyz, yaw


def waypoint_path(times_s: np.ndarray, xyz: np.ndarray, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linear interpolation of waypoints (K, 3) at `times_s` (K,) onto `t_s` (T,).

    Returns (mask (T,) of times inside the waypoints' span, xyz (T', 3), yaw_rad (T',)) for
    the masked times; heading follows the path tangent.
    """
    times_s = np.asarray(times_s, dtype=np.float64)
    xyz = np.asarray(xyz, dtype=np.float64)
    if len(times_s) < 2 or np.any(np.diff(times_s) <= 0):
        raise AvsimValueError("waypoints.t_s: need at least two strictly increasing times")
    t_s = np.asarray(t_s, dtype=np.float64)
    mask = (t_s >= times_s[0] - 1e-9) & (t_s <= times_s[-1] + 1e-9)
    tt = t_s[mask]
    out = np.stack([np.interp(tt, times_s, xyz[:, i]) for i in range(3)], axis=1)
    d = np.diff(xyz[:, :2], axis=0)
    seg_yaw = np.arctan2(d[:, 1], d[:, 0])
    yaw = path_yaw_rad(out[:, :2], fallback_rad=float(seg_yaw[0]))
    return mask, out, yaw


def smootherstep(u: np.ndarray) -> np.ndarray:
    """Quintic 0 -> 1 ramp on [0, 1] with zero first and second derivatives at both ends."""
    u = np.clip(u, 0.0, 1.0)
    return u * u * u * (u * (6 * u - 15) + 10)


def frenet_to_world(ref_xy: np.ndarray, s_m: np.ndarray, d_m: np.ndarray) -> np.ndarray:
    """World xy (K, 2) of points `s_m` along and `d_m` left of the reference path (N, 2)."""
    ref = np.concatenate([ref_xy, np.zeros((len(ref_xy), 1))], axis=1)
    xyz, yaw = interp_polyline(ref, s_m)
    normal = np.stack([-np.sin(yaw), np.cos(yaw)], axis=1)
    return xyz[:, :2] + np.asarray(d_m)[:, None] * normal


def world_to_frenet(ref_xy: np.ndarray, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Arc length s (K,) and signed left offset d (K,) of points (K, 2) w.r.t. a path (N, 2)."""
    p0, p1 = ref_xy[:-1], ref_xy[1:]
    d = p1 - p0
    len2 = np.maximum((d * d).sum(axis=1), 1e-12)
    s_nodes = arc_length_m(ref_xy)
    s_out = np.empty(len(xy))
    d_out = np.empty(len(xy))
    for i, q in enumerate(np.asarray(xy, dtype=np.float64)):
        u = np.clip(((q - p0) * d).sum(axis=1) / len2, 0.0, 1.0)
        proj = p0 + u[:, None] * d
        k = int(np.argmin(np.linalg.norm(proj - q, axis=1)))
        cross = d[k, 0] * (q[1] - p0[k, 1]) - d[k, 1] * (q[0] - p0[k, 0])
        s_out[i] = s_nodes[k] + u[k] * np.sqrt(len2[k])
        d_out[i] = np.sign(cross) * np.linalg.norm(proj[k] - q)
    return s_out, d_out
