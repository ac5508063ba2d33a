"""An ego and traffic for a map that comes without them (OpenDRIVE, Lanelet2): a scenario to drive.

- **Route**: from a start to a goal along the lanes, the shortest path in the lane graph
  (`metadata["lane_successors"]`, Dijkstra over centre-line lengths); the start and goal are lane
  ids or world points "x,y" (the lane nearest the point in the graph, the route starting or
  ending at the point's projection). Without a route the start is a seeded random lane and the
  route follows seeded random successors for `RouteOptions.length_m`.
- **Ego**: drives the route's centre line from rest (`START_SPEED_MPS`), at the lanes' speed
  limit or `RouteOptions.speed_mps`, at most `LATERAL_ACCEL_MPS2` in curves, accelerating at
  `ACCEL_MPS2` and braking at `DECEL_MPS2` to stop at the goal; poses at `RATE_HZ`. This is the
  "log" a closed-loop run starts from: `avsim.sim.bare_map` drives the IDM planner along it.
- **Traffic**: `RouteOptions.traffic` cars (4.6 x 1.9 x 1.6 m) on seeded random lanes at least
  `TRAFFIC_GAP_M` apart and from the ego, each driving seeded random successors at a seeded 60-90 %
  of the limit; with reactive traffic the simulator's IDM agents take over from their first pose.
- **Trajectory file**: instead of a route, the ego's poses from a CSV file with a header naming
  `t_s`, `x_m`, `y_m` and optionally `z_m`, `yaw_rad` (heading from the path when absent).

Same map, options and seed: the same scenario, byte for byte.
"""

from __future__ import annotations

import heapq
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.agents import AgentTracks
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.lights import TrafficLightStates
from avsim.core.rig import named_rig
from avsim.core.safe_files import regular_file
from avsim.core.trajectory import NS_PER_S, EgoTrajectory
from avsim.core.transforms import SE3, yaw_to_quat
from avsim.core.typing import NDArrayFloat
from avsim.maps import HDMap
from avsim.scenario.types import Scenario

RATE_HZ = 10.0
START_SPEED_MPS = 0.0
DEFAULT_SPEED_MPS = 11.0
LATERAL_ACCEL_MPS2 = 2.0
ACCEL_MPS2 = 1.5
DECEL_MPS2 = 2.0
TRAFFIC_GAP_M = 12.0
STEP_M = 0.5  # routes are resampled this finely before the speed profile
CAR_SIZE_M = (4.6, 1.9, 1.6)
MAX_TRAJECTORY_BYTES = 64 * 1024**2


@dataclass(frozen=True)
class RouteOptions:
    """What `bare_map_scenario` builds: start and goal (lane id or "x,y"; None: seeded random
    route of `length_m`), cruise speed (None: the lanes' limits, else `DEFAULT_SPEED_MPS`),
    duration (None: until the ego stops at the goal), traffic cars, seed."""

    start: str | None = None
    goal: str | None = None
    length_m: float = 250.0
    speed_mps: float | None = None
    duration_s: float | None = None
    traffic: int = 0
    seed: int = 0


@dataclass(frozen=True)
class MapOptions:
    """What a map-only import needs besides the map: the route options, or a trajectory file
    (`ego_csv`) for the ego; Lanelet2's projection origin (lat, lon[, ele] degrees / metres; None:
    the map's map_projector_info.yaml, else its first node)."""

    route: RouteOptions = RouteOptions()
    ego_csv: Path | None = None
    origin: tuple[float, ...] | None = None

    def ego_trajectory(self) -> EgoTrajectory | None:
        """The trajectory file's poses, or None without one."""
        return None if self.ego_csv is None else read_trajectory(self.ego_csv)


def _lengths(hdmap: HDMap) -> NDArrayFloat:
    return np.asarray(hdmap.lanes.centre.lengths_m)


def _graph(hdmap: HDMap, successors: dict[str, list[str]]) -> list[list[int]]:
    index = {str(lid): k for k, lid in enumerate(hdmap.lanes.ids)}
    return [[index[n] for n in successors.get(str(lid), []) if n in index] for lid in hdmap.lanes.ids]


def _resolve(hdmap: HDMap, spec: str, what: str) -> tuple[int, NDArrayFloat | None]:
    """A lane index, and the point when the spec was "x,y"."""
    ids = [str(i) for i in hdmap.lanes.ids]
    if spec in ids:
        return ids.index(spec), None
    try:
        xy = np.array([float(v) for v in spec.split(",")], np.float64)
    except ValueError:
        raise AvsimInputError(f"--{what}", what, f"{spec!r} is neither a lane id of the map nor a point x,y") from None
    if xy.shape != (2,) or not np.all(np.isfinite(xy)):
        raise AvsimInputError(f"--{what}", what, f"expected a lane id or x,y, got {spec!r}")
    pts = hdmap.lanes.centre.points_m[:, :2]
    k = int(hdmap.lanes.centre.element_index[int(np.argmin(np.linalg.norm(pts - xy, axis=1)))])
    return k, xy


def shortest_route(hdmap: HDMap, successors: dict[str, list[str]], start: int, goal: int) -> list[int]:
    """Lane indices of the shortest lane sequence from `start` to `goal` (Dijkstra on lengths).

    Args:
        hdmap: the map (its lanes).
        successors: lane id -> successor lane ids.
        start: start lane index.
        goal: goal lane index.

    Returns:
        The lane indices, start and goal included (AvsimValueError when the goal is unreachable).
    """
    graph, length = _graph(hdmap, successors), _lengths(hdmap)
    dist = {start: 0.0}
    prev: dict[int, int] = {}
    heap = [(0.0, start)]
    while heap:
        d, k = heapq.heappop(heap)
        if k == goal:
            break
        if d > dist.get(k, np.inf):
            continue
        for j in graph[k]:
            nd = d + float(length[k])
            if nd < dist.get(j, np.inf):
                dist[j], prev[j] = nd, k
                heapq.heappush(heap, (nd, j))
    if goal not in dist:
        ids = hdmap.lanes.ids
        raise AvsimValueError(f"route: no lane path from {ids[start]} to {ids[goal]} along the lane successors")
    path = [goal]
    while path[-1] != start:
        path.append(prev[path[-1]])
    return path[::-1]


def random_route(hdmap: HDMap, successors: dict[str, list[str]], rng: np.random.Generator, length_m: float,
                 start: int | None = None) -> list[int]:  # fmt: skip
    """A seeded random lane sequence of at least `length_m` (or until the graph ends)."""
    graph, length = _graph(hdmap, successors), _lengths(hdmap)
    if start is None:
        ok = np.flatnonzero(length > 5.0)
        start = int(rng.choice(ok if len(ok) else np.arange(len(length))))
    path, total = [start], float(length[start])
    while total < length_m and graph[path[-1]]:
        options = [j for j in graph[path[-1]] if j not in path] or graph[path[-1]]
        nxt = int(options[int(rng.integers(len(options)))])
        path.append(nxt)
        total += float(length[nxt])
    return path


def _chain(hdmap: HDMap, path: list[int]) -> NDArrayFloat:
    """The lanes' centre lines joined, resampled every `STEP_M` (their vertices kept)."""
    pieces = [hdmap.lanes.centre[k] for k in path]
    pts = np.concatenate([pieces[0]] + [p[1:] if np.linalg.norm(p[0] - q[-1]) < 0.5 else p for q, p in zip(pieces[:-1], pieces[1:])])
    keep = np.r_[True, np.linalg.norm(np.diff(pts[:, :2], axis=0), axis=1) > 1e-6]
    pts = np.asarray(pts[keep])
    out = [pts[:1]]
    for a, b in zip(pts[:-1], pts[1:]):
        n = max(int(np.ceil(np.linalg.norm(b[:2] - a[:2]) / STEP_M)), 1)
        out.append(a + (b - a) * (np.arange(1, n + 1) / n)[:, None])
    return np.concatenate(out)


def _limits(hdmap: HDMap, path: list[int], speeds: dict[str, float], default: float) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Cumulative route length at each lane's end and the speed limit of each lane."""
    ids = hdmap.lanes.ids
    lengths = _lengths(hdmap)[path]
    v = np.array([speeds.get(str(ids[k]), default) for k in path], np.float64)
    return np.cumsum(lengths), np.where(v > 0, v, default)


def speed_profile(pts: NDArrayFloat, v_max: NDArrayFloat, v0: float, stop_at_end: bool) -> NDArrayFloat:
    """Speeds (N,) along a polyline: curvature- and limit-capped, acceleration-limited both ways."""
    seg = np.linalg.norm(np.diff(pts[:, :2], axis=0), axis=1)
    heading = np.unwrap(np.arctan2(*np.diff(pts[:, :2], axis=0).T[::-1]))
    turn = np.abs(np.diff(heading)) / np.maximum((seg[1:] + seg[:-1]) / 2, 1e-6)
    kappa = np.r_[0.0, turn, 0.0]
    v = np.minimum(v_max, np.sqrt(LATERAL_ACCEL_MPS2 / np.maximum(kappa, 1e-9)))
    v[0] = min(v[0], v0)
    if stop_at_end:
        v[-1] = 0.0
    for i in range(1, len(v)):
        v[i] = min(v[i], np.sqrt(v[i - 1] ** 2 + 2 * ACCEL_MPS2 * seg[i - 1]))
    for i in range(len(v) - 2, -1, -1):
        v[i] = min(v[i], np.sqrt(v[i + 1] ** 2 + 2 * DECEL_MPS2 * seg[i]))
    return v


def drive(pts: NDArrayFloat, v: NDArrayFloat, times_s: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Positions (T, 3) and headings (T,) at `times_s` driving `pts` with node speeds `v`, at constant
    acceleration between nodes (held at the end)."""
    seg = np.linalg.norm(np.diff(pts[:, :2], axis=0), axis=1)
    s = np.r_[0.0, np.cumsum(seg)]
    v_mid = np.maximum((v[1:] + v[:-1]) / 2, 0.05)
    dt = seg / v_mid
    t_node = np.r_[0.0, np.cumsum(dt)]
    k = np.clip(np.searchsorted(t_node, times_s, side="right") - 1, 0, len(seg) - 1)
    tau = np.clip(times_s - t_node[k], 0.0, dt[k])
    va = np.where(v_mid[k] > 0.05, v[:-1][k], v_mid[k])
    acc = 2 * (seg[k] - va * dt[k]) / np.maximum(dt[k] ** 2, 1e-12)
    s_t = np.minimum(s[k] + va * tau + acc * tau * tau / 2, s[k + 1])
    xyz = np.stack([np.interp(s_t, s, pts[:, i]) for i in range(3)], 1)
    yaw_seg = np.arctan2(np.diff(pts[:, 1]), np.diff(pts[:, 0]))
    return xyz, yaw_seg[k]


def _times(t_end: float) -> NDArrayFloat:
    return np.arange(int(np.floor(t_end * RATE_HZ + 1e-9)) + 1) / RATE_HZ


def _route_time(pts: NDArrayFloat, v: NDArrayFloat) -> float:
    seg = np.linalg.norm(np.diff(pts[:, :2], axis=0), axis=1)
    return float(np.sum(seg / np.maximum((v[1:] + v[:-1]) / 2, 0.05)))


def ego_route(hdmap: HDMap, successors: dict[str, list[str]], speeds: dict[str, float], options: RouteOptions,
              rng: np.random.Generator) -> tuple[EgoTrajectory, list[int]]:  # fmt: skip
    """The ego's trajectory along its route, and the route's lane indices (see the module docstring)."""
    if not len(hdmap.lanes):
        raise AvsimValueError("route: the map has no lanes to drive")
    if (options.start is None) != (options.goal is None):
        raise AvsimValueError("route: give both a start and a goal, or neither")
    start_xy = goal_xy = None
    if options.start is not None and options.goal is not None:
        start, start_xy = _resolve(hdmap, options.start, "start")
        goal, goal_xy = _resolve(hdmap, options.goal, "goal")
        path = shortest_route(hdmap, successors, start, goal)
    else:
        path = random_route(hdmap, successors, rng, options.length_m)
    pts = _clip_to_points(_chain(hdmap, path), start_xy, goal_xy)
    default = options.speed_mps or DEFAULT_SPEED_MPS
    ends, limits = _limits(hdmap, path, {} if options.speed_mps else speeds, default)
    v = speed_profile(pts, limits[np.clip(np.searchsorted(ends, _arc(pts)), 0, len(limits) - 1)], START_SPEED_MPS, True)
    t_end = options.duration_s if options.duration_s is not None else _route_time(pts, v)
    t = _times(max(t_end, 1.0 / RATE_HZ))
    xyz, yaw = drive(pts, v, t)
    return EgoTrajectory((t * NS_PER_S).round().astype(np.int64), SE3.from_yaw(yaw, xyz)), path


def _arc(pts: NDArrayFloat) -> NDArrayFloat:
    return np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(pts[:, :2], axis=0), axis=1))]


def _cut(pts: NDArrayFloat, a: float, b: float) -> NDArrayFloat:
    """The polyline between arc lengths a < b."""
    s = _arc(pts)
    keep = (s > a) & (s < b)
    ends = np.stack([np.interp([a, b], s, pts[:, i]) for i in range(3)], 1)
    return np.concatenate([ends[:1], pts[keep], ends[1:]])


def _clip_to_points(pts: NDArrayFloat, start_xy: NDArrayFloat | None, goal_xy: NDArrayFloat | None) -> NDArrayFloat:
    """The route from the projection of `start_xy` to that of `goal_xy` (whole ends when None)."""
    s = _arc(pts)
    a = 0.0 if start_xy is None else float(s[int(np.argmin(np.linalg.norm(pts[:, :2] - start_xy, axis=1)))])
    b = float(s[-1]) if goal_xy is None else float(s[int(np.argmin(np.linalg.norm(pts[:, :2] - goal_xy, axis=1)))])
    if b - a < 1.0:
        raise AvsimValueError("route: the goal is not ahead of the start along the lanes")
    return _cut(pts, a, b)


def traffic(hdmap: HDMap, successors: dict[str, list[str]], speeds: dict[str, float], ego: EgoTrajectory, count: int,
            rng: np.random.Generator) -> AgentTracks:  # fmt: skip
    """`count` seeded cars on the lanes (see the module docstring); fewer where the map is full."""
    if count <= 0 or not len(hdmap.lanes):
        return AgentTracks.empty()
    times = (ego.timestamps_ns - ego.timestamps_ns[0]) / NS_PER_S
    taken = [np.asarray(ego.world_SE3_ego.translation)[0, :2]]
    lengths = _lengths(hdmap)
    rows: list[tuple[str, NDArrayFloat, NDArrayFloat]] = []
    for _attempt in range(count * 20):
        if len(rows) >= count:
            break
        k = int(rng.integers(len(lengths)))
        if lengths[k] < 8.0:
            continue
        path = random_route(hdmap, successors, rng, 400.0, start=k)
        full = _chain(hdmap, path)
        s0 = float(rng.uniform(0.0, lengths[k] - 4.0))
        pts = _cut(full, s0, float(_arc(full)[-1]))
        if min(np.linalg.norm(pts[0, :2] - p) for p in taken) < TRAFFIC_GAP_M:
            continue
        taken.append(pts[0, :2])
        ends, limits = _limits(hdmap, path, speeds, DEFAULT_SPEED_MPS)
        cruise = limits * float(rng.uniform(0.6, 0.9))
        v = speed_profile(pts, cruise[np.clip(np.searchsorted(ends, _arc(pts) + s0), 0, len(cruise) - 1)], float(cruise[0]), False)
        xyz, yaw = drive(pts, v, times)
        rows.append((f"car_{len(rows):03d}", xyz, yaw))
    if not rows:
        return AgentTracks.empty()
    n = len(times)
    ids = np.repeat([r[0] for r in rows], n)
    centre = np.concatenate([r[1] + [0.0, 0.0, CAR_SIZE_M[2] / 2] for r in rows])
    quat = np.asarray(yaw_to_quat(np.concatenate([r[2] for r in rows])))
    return AgentTracks.from_unsorted(ids, np.full(len(ids), "Car"), np.tile(ego.timestamps_ns, len(rows)), centre,
                                     np.tile(CAR_SIZE_M, (len(ids), 1)), quat)  # fmt: skip


def read_trajectory(path: str | os.PathLike[str]) -> EgoTrajectory:
    """Ego poses from a CSV file (header: t_s, x_m, y_m[, z_m][, yaw_rad]; see the module docstring).

    Args:
        path: the CSV file.

    Returns:
        The trajectory (times must increase strictly).
    """
    p = regular_file(path, "trajectory")
    if p.stat().st_size > MAX_TRAJECTORY_BYTES:
        raise AvsimInputError(p, "trajectory", f"over the {MAX_TRAJECTORY_BYTES}-byte limit")
    lines = [ln.strip() for ln in p.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip() and not ln.startswith("#")]
    if len(lines) < 3:
        raise AvsimInputError(p, "trajectory", "needs a header line and at least two poses")
    header = [h.strip() for h in lines[0].split(",")]
    missing = {"t_s", "x_m", "y_m"} - set(header)
    if missing:
        raise AvsimInputError(p, "header", f"missing column(s) {sorted(missing)}; expected t_s, x_m, y_m[, z_m][, yaw_rad]")
    try:
        table = np.array([[float(v) for v in ln.split(",")] for ln in lines[1:]], np.float64)
    except ValueError as exc:
        raise AvsimInputError(p, "rows", f"not a number: {exc}") from None
    if table.ndim != 2 or table.shape[1] != len(header) or not np.all(np.isfinite(table)):
        raise AvsimInputError(p, "rows", f"every row needs {len(header)} finite numbers")
    col = {h: table[:, header.index(h)] for h in header}
    t = col["t_s"]
    if np.any(np.diff(t) <= 0):
        raise AvsimInputError(p, "t_s", "times must increase strictly")
    xyz = np.stack([col["x_m"], col["y_m"], col.get("z_m", np.zeros_like(t))], 1)
    if "yaw_rad" in col:
        yaw = col["yaw_rad"]
    else:
        d = np.diff(xyz[:, :2], axis=0)
        yaw = np.r_[np.arctan2(d[:, 1], d[:, 0]), np.arctan2(d[-1, 1], d[-1, 0])]
    return EgoTrajectory(((t - t[0]) * NS_PER_S).round().astype(np.int64), SE3.from_yaw(yaw, xyz))


def bare_map_scenario(scenario_id: str, hdmap: HDMap, metadata: dict[str, Any], options: RouteOptions,
                      trajectory: EgoTrajectory | None = None, rig_name: str | None = None) -> Scenario:  # fmt: skip
    """A scenario on a map that has no ego: the route's (or the trajectory's) ego and seeded traffic.

    Args:
        scenario_id: the scenario's id.
        hdmap: the map.
        metadata: the importer's metadata; `lane_successors` and `lane_speed_limits_mps` are read.
        options: route, speed, duration, traffic and seed.
        trajectory: the ego's poses, replacing the route.
        rig_name: named camera rig (default cosmos).

    Returns:
        The scenario (no light states: map formats carry none).
    """
    rng = np.random.default_rng(options.seed)
    successors = metadata.get("lane_successors") or {}
    speeds = metadata.get("lane_speed_limits_mps") or {}
    meta = dict(metadata)
    if trajectory is None:
        ego, path = ego_route(hdmap, successors, speeds, options, rng)
        meta["ego_route_lanes"] = [str(hdmap.lanes.ids[k]) for k in path]
    else:
        ego = trajectory
    meta["bare_map"] = {"start": options.start, "goal": options.goal, "seed": options.seed, "traffic": options.traffic,
                        "speed_mps": options.speed_mps, "duration_s": options.duration_s,
                        "ego": "trajectory file" if trajectory is not None else "route"}  # fmt: skip
    agents = traffic(hdmap, successors, speeds, ego, options.traffic, rng)
    rig = named_rig(rig_name or "cosmos")
    meta["rig_source"] = f"named default {rig_name or 'cosmos'!r}"
    return Scenario(scenario_id, rig, ego, agents, hdmap, TrafficLightStates.empty(), meta)
