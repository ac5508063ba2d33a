"""Agent edits: add, remove, replace, shift, scale speed, mirror, perturb, follow, cut in.

Every function takes a Scenario and returns a new one; the input is never modified. Times
(`*_s`) are seconds on the edit clock (0 = the ego's first timestamp); positions are world
metres. New agents are sampled on the ego's timestamps (the scenario clock).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.transforms import quat_slerp, quat_to_yaw, wrap_angle, yaw_to_quat
from avsim.scenario import Scenario
from avsim.scenario.road import road_model

from . import routes
from .common import (
    build_agents,
    check_time,
    check_waypoints,
    columns,
    concat_columns,
    ego_box,
    end_s,
    existing_ids,
    require_ids,
    size_for,
    to_ns,
    to_s,
    track_columns,
)


# ----------------------------------------------------------------------------- helpers
def _split(scenario: Scenario, track_ids: Sequence[str]) -> tuple[dict, list[dict]]:
    """(columns of the untouched tracks, [columns of each selected track])."""
    cols = columns(scenario.agents)
    sel = np.isin(cols["track_id"], np.asarray(list(track_ids), dtype=str))
    rest = {k: v[~sel] for k, v in cols.items()}
    per = [{k: v[cols["track_id"] == t] for k, v in cols.items()} for t in track_ids]
    return rest, per


def _with_tracks(scenario: Scenario, rest: dict[str, np.ndarray], tracks: Sequence[dict[str, np.ndarray]]) -> Scenario:
    return scenario.replace(agents=build_agents(concat_columns([rest, *tracks])))


def _ground_z(scenario: Scenario, xy: np.ndarray) -> np.ndarray:
    """Ground height (K,) under points (K, 2): z of the nearest ego pose (ego origin is on the ground)."""
    ego_xyz = np.asarray(scenario.ego.world_SE3_ego.translation)
    d = np.linalg.norm(ego_xyz[None, :, :2] - np.asarray(xy)[:, None, :2], axis=2)
    return ego_xyz[np.argmin(d, axis=1), 2]


def _sample_track(track: dict, query_ns: np.ndarray) -> dict:
    """Interpolate one track (rows sorted by time) at `query_ns`, keeping only times in its span."""
    ts = track["timestamps_ns"]
    inside = (query_ns >= ts[0]) & (query_ns <= ts[-1])
    q = query_ns[inside]
    n = len(q)
    out = {
        "track_id": np.full(n, track["track_id"][0]),
        "source_class": np.full(n, track["source_class"][0]),
        "timestamps_ns": np.zeros(n, dtype=np.int64),
    }
    if len(ts) == 1:
        idx = np.zeros(n, dtype=np.int64)
        out["center_m"] = track["center_m"][idx].copy()
        out["size_m"] = track["size_m"][idx].copy()
        out["orientation"] = track["orientation"][idx].copy()
        return out
    tf = (ts - ts[0]).astype(np.float64)
    qf = (q - ts[0]).astype(np.float64)
    out["center_m"] = np.stack([np.interp(qf, tf, track["center_m"][:, i]) for i in range(3)], axis=1)
    out["size_m"] = np.stack([np.interp(qf, tf, track["size_m"][:, i]) for i in range(3)], axis=1)
    k = np.clip(np.searchsorted(tf, qf, side="right") - 1, 0, len(tf) - 2)
    alpha = np.clip((qf - tf[k]) / (tf[k + 1] - tf[k]), 0.0, 1.0)
    out["orientation"] = quat_slerp(track["orientation"][k], track["orientation"][k + 1], alpha)
    return out


def _new_track_id(scenario: Scenario, track_id: str) -> str:
    if not track_id:
        raise AvsimValueError("track_id: must be a non-empty string")
    if track_id in existing_ids(scenario):
        raise AvsimValueError(f"track_id: {track_id!r} already exists")
    return track_id


# ----------------------------------------------------------------------------- add / remove
def add_agent_waypoints(
    scenario: Scenario,
    track_id: str,
    source_class: str,
    times_s: Sequence[float],
    xy_m: np.ndarray,
    size_m: Sequence[float] | None = None,
) -> Scenario:
    """Add an agent moving through waypoints `xy_m` (K, 2|3) at `times_s` (K,).

    The box centre sits half its height above the ground when only xy is given. The agent is
    sampled on the ego's timestamps within the waypoints' time span.
    """
    track_id = _new_track_id(scenario, track_id)
    size = size_for(source_class, size_m)
    t_wp, xy = check_waypoints(scenario, times_s, xy_m)
    if xy.shape[1] == 2:
        xy = np.concatenate([xy, (_ground_z(scenario, xy) + size[2] / 2)[:, None]], axis=1)
    t_all = to_s(scenario, scenario.ego.timestamps_ns)
    mask, xyz, yaw = routes.waypoint_path(t_wp, xy, t_all)
    if mask.sum() < 1:
        raise AvsimValueError("waypoints: their time span holds no scenario timestamp")
    ts = np.asarray(scenario.ego.timestamps_ns)[mask]
    rest = columns(scenario.agents)
    return _with_tracks(scenario, rest, [track_columns(track_id, source_class, ts, xyz, size, yaw)])


def add_agent_route(
    scenario: Scenario,
    track_id: str,
    source_class: str,
    start_xy_m: Sequence[float],
    speed: routes.SpeedProfile,
    heading_rad: float | None = None,
    turns: Sequence[str] = (),
    start_s: float = 0.0,
    stop_s: float | None = None,
    size_m: Sequence[float] | None = None,
) -> Scenario:
    """Add an agent that follows the map's lanes from `start_xy_m` with a speed profile.

    It appears at `start_s` (waiting at its start point until then is not modelled: it is
    absent before), drives the lane route picked by `turns`, and stays until `stop_s`
    (default: the scenario end). `speed` times are relative to `start_s`.
    """
    track_id = _new_track_id(scenario, track_id)
    size = size_for(source_class, size_m)
    check_time(scenario, start_s, "start_s")
    stop = end_s(scenario) if stop_s is None else float(stop_s)
    check_time(scenario, stop, "stop_s")
    if stop <= start_s:
        raise AvsimValueError("stop_s: must be after start_s")
    t_all = to_s(scenario, scenario.ego.timestamps_ns)
    mask = (t_all >= start_s - 1e-9) & (t_all <= stop + 1e-9)
    length = float(speed.distance_m(np.array([stop - start_s]))[0]) + 10.0
    route = routes.lane_route(road_model(scenario), np.asarray(start_xy_m, dtype=np.float64)[:2], length, heading_rad, tuple(turns))
    xyz, yaw = routes.follow_path(route, t_all[mask], speed, start_s=start_s)
    xyz = xyz.copy()
    xyz[:, 2] += size[2] / 2  # lane centres lie on the ground
    ts = np.asarray(scenario.ego.timestamps_ns)[mask]
    rest = columns(scenario.agents)
    return _with_tracks(scenario, rest, [track_columns(track_id, source_class, ts, xyz, size, yaw)])


def remove_agents(scenario: Scenario, track_ids: Sequence[str]) -> Scenario:
    """Remove every row of the given tracks."""
    ids = require_ids(scenario, track_ids)
    rest, _ = _split(scenario, ids)
    return _with_tracks(scenario, rest, [])


def replace_agents(
    scenario: Scenario, track_ids: Sequence[str], source_class: str | None = None, size_m: Sequence[float] | None = None
) -> Scenario:
    """Change class and/or size of tracks; the box bottom stays where it was."""
    ids = require_ids(scenario, track_ids)
    if source_class is None and size_m is None:
        raise AvsimValueError("replace_agents: give source_class and/or size_m")
    rest, tracks = _split(scenario, ids)
    for tr in tracks:
        if source_class is not None:
            tr["source_class"] = np.full(len(tr["source_class"]), str(source_class))
        if size_m is not None:
            new = np.asarray(size_for(source_class or str(tr["source_class"][0]), size_m))
            tr["center_m"][:, 2] += (new[2] - tr["size_m"][:, 2]) / 2
            tr["size_m"] = np.tile(new, (len(tr["size_m"]), 1))
    return _with_tracks(scenario, rest, tracks)


def shift_agents(
    scenario: Scenario,
    track_ids: Sequence[str],
    dx_m: float = 0.0,
    dy_m: float = 0.0,
    dz_m: float = 0.0,
    dt_s: float = 0.0,
    lateral_m: float = 0.0,
) -> Scenario:
    """Translate tracks in world xyz, sideways (`lateral_m`, left of each row's heading), and/or in time."""
    ids = require_ids(scenario, track_ids)
    rest, tracks = _split(scenario, ids)
    for tr in tracks:
        yaw = quat_to_yaw(tr["orientation"])
        tr["center_m"] += np.array([dx_m, dy_m, dz_m])
        tr["center_m"][:, 0] -= lateral_m * np.sin(yaw)
        tr["center_m"][:, 1] += lateral_m * np.cos(yaw)
        tr["timestamps_ns"] += np.int64(round(dt_s * 1e9))
    return _with_tracks(scenario, rest, tracks)


STATIONARY_M = 0.1  # a track (or a track's end) that moves less than this from its last position stands still


def _standing_from(center_m: np.ndarray) -> int:
    """Index of the first sample from which a track stays within `STATIONARY_M` of its last position."""
    moved = np.linalg.norm(center_m[:, :2] - center_m[-1, :2], axis=1) > STATIONARY_M
    return int(np.flatnonzero(moved)[-1]) + 1 if moved.any() else 0


def scale_speed(scenario: Scenario, track_ids: Sequence[str], factor: float, from_s: float = 0.0) -> Scenario:
    """Replay tracks `factor` times faster from `from_s` on, along the same path.

    A row at time t shows the pose the track had at t_a + factor * (t - t_a), where t_a is
    `from_s` (or the track start, if later). Rows whose source time falls past the track's end
    are dropped, so a faster agent leaves the scene earlier, unless the track stands still at its
    end (a car waiting at a light to the end of the clip): it then holds its last pose and keeps
    its time span. A track that never moves (a parked car) is left as it is.
    """
    if not factor > 0:
        raise AvsimValueError("factor: must be > 0")
    check_time(scenario, from_s, "from_s")
    ids = require_ids(scenario, track_ids)
    rest, tracks = _split(scenario, ids)
    out = []
    for tr in tracks:
        ts = tr["timestamps_ns"]
        standing = _standing_from(np.asarray(tr["center_m"]))
        if standing == 0:  # parked: speed x factor is still zero, and its time span stays
            out.append(tr)
            continue
        t_a = max(int(to_ns(scenario, from_s)), int(ts[0]))
        before = ts < t_a
        after_ts = ts[~before]
        src = t_a + np.round((after_ts - t_a).astype(np.float64) * factor).astype(np.int64)
        if standing < len(ts) - 1:  # stands still at its end: hold the last pose past the source's end
            src = np.minimum(src, ts[-1])
        moved = _sample_track(tr, src)
        keep = (src >= ts[0]) & (src <= ts[-1])
        moved["timestamps_ns"] = after_ts[keep]
        out += [{k: v[before] for k, v in tr.items()}, moved]
    return _with_tracks(scenario, rest, out)


def mirror_agents(scenario: Scenario, track_ids: Sequence[str]) -> Scenario:
    """Mirror each track's path across the line through its first position along its first heading.

    A left turn becomes a right turn of the same radius; the start pose is unchanged.
    """
    ids = require_ids(scenario, track_ids)
    rest, tracks = _split(scenario, ids)
    for tr in tracks:
        yaw = quat_to_yaw(tr["orientation"])
        p0, y0 = tr["center_m"][0, :2].copy(), float(yaw[0])
        u = np.array([np.cos(y0), np.sin(y0)])
        rel = tr["center_m"][:, :2] - p0
        along = rel @ u
        tr["center_m"][:, :2] = p0 + 2 * along[:, None] * u - rel
        tr["orientation"] = yaw_to_quat(wrap_angle(2 * y0 - yaw))
    return _with_tracks(scenario, rest, tracks)


def perturb_agents(
    scenario: Scenario, track_ids: Sequence[str], sigma_m: float = 0.3, seed: int = 0, correlation_s: float = 2.0
) -> Scenario:
    """Add smooth, seeded noise (std `sigma_m`) to tracks' positions, along and across heading.

    Noise knots every `correlation_s` are joined by cosine interpolation, so velocity stays
    continuous. Moving agents get their heading from the new path; still ones keep theirs.
    The same seed and track id always give the same noise.
    """
    if sigma_m < 0 or correlation_s <= 0:
        raise AvsimValueError("perturb: sigma_m must be >= 0 and correlation_s > 0")
    ids = require_ids(scenario, track_ids)
    rest, tracks = _split(scenario, ids)
    for tr in tracks:
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(str(tr["track_id"][0]).encode())])
        t = (tr["timestamps_ns"] - tr["timestamps_ns"][0]).astype(np.float64) / 1e9
        n_knots = int(np.floor(t[-1] / correlation_s)) + 2
        knots = rng.normal(0.0, sigma_m, size=(n_knots, 2))
        u = t / correlation_s
        k = np.minimum(np.floor(u).astype(int), n_knots - 2)
        w = (1 - np.cos(np.pi * (u - k))) / 2
        noise = knots[k] * (1 - w)[:, None] + knots[k + 1] * w[:, None]
        yaw = quat_to_yaw(tr["orientation"])
        fwd = np.stack([np.cos(yaw), np.sin(yaw)], axis=1)
        left = np.stack([-np.sin(yaw), np.cos(yaw)], axis=1)
        tr["center_m"][:, :2] += noise[:, :1] * fwd + noise[:, 1:] * left
        if len(t) >= 2:
            speed = np.linalg.norm(np.gradient(tr["center_m"][:, :2], axis=0), axis=1) / max(np.median(np.diff(t)), 1e-9)
            moving = speed > 1.0
            new_yaw = np.where(moving, routes.path_yaw_rad(tr["center_m"][:, :2], float(yaw[0])), yaw)
            tr["orientation"] = yaw_to_quat(new_yaw)
    return _with_tracks(scenario, rest, tracks)


def follow_agent(
    scenario: Scenario,
    track_id: str,
    leader_id: str,
    time_gap_s: float = 1.5,
    min_gap_m: float = 2.0,
    source_class: str | None = None,
    size_m: Sequence[float] | None = None,
) -> Scenario:
    """Make `track_id` drive the leader's path `time_gap_s` behind it.

    The follower's arc length along the leader's path is the leader's from `time_gap_s` earlier,
    capped so that at least `min_gap_m` stays between the boxes (a stopped leader gets a stopped
    follower, not a collision). An existing `track_id` is replaced; a new one copies the
    leader's class and size unless given.
    """
    (leader_id,) = require_ids(scenario, [leader_id], "leader_id")
    if time_gap_s < 0:
        raise AvsimValueError("time_gap_s: must be >= 0")
    if track_id == leader_id:
        raise AvsimValueError("track_id: a track cannot follow itself")
    replace = track_id in existing_ids(scenario)
    rest, (leader, *old) = _split(scenario, [leader_id] + ([track_id] if replace else []))
    cls = source_class or (str(old[0]["source_class"][0]) if old else str(leader["source_class"][0]))
    size = size_for(cls, size_m if size_m is not None else (old[0]["size_m"][0] if old else leader["size_m"][0]))
    ts = leader["timestamps_ns"]
    xy = leader["center_m"][:, :2]
    s_lead = routes.arc_length_m(xy)
    yaw0 = float(quat_to_yaw(leader["orientation"][0]))
    path = routes.dedupe_polyline(leader["center_m"])
    if len(path) < 2:  # a leader that never moves: extend a line along its heading
        p = leader["center_m"][0]
        path = np.stack([p, p + np.array([np.cos(yaw0), np.sin(yaw0), 0.0])])
    s_path = routes.arc_length_m(path[:, :2])
    # map the leader's cumulative distance onto the deduplicated path's arc length
    t = (ts - ts[0]).astype(np.float64) / 1e9
    s_delayed = np.interp(t - time_gap_s, t, s_lead, left=s_lead[0] - np.inf)
    v0 = (s_lead[1] - s_lead[0]) / max(t[1] - t[0], 1e-9) if len(t) > 1 else 0.0
    early = ~np.isfinite(s_delayed)
    s_delayed[early] = (t[early] - time_gap_s) * v0  # before the leader's start: its first speed
    standoff = min_gap_m + (float(leader["size_m"][0, 0]) + size[0]) / 2
    s_follow = np.minimum(s_delayed, s_lead - standoff)
    s_follow = np.minimum.accumulate(s_follow[::-1])[::-1]  # never drive backwards
    s_follow = np.clip(s_follow, -1e9, s_path[-1])
    xyz, _ = routes.interp_polyline(path, s_follow)
    yaw = routes.path_yaw_rad(xyz[:, :2], yaw0)
    xyz = xyz.copy()
    xyz[:, 2] += (size[2] - leader["size_m"][:, 2]) / 2
    follower = track_columns(track_id, cls, ts, xyz, size, yaw)
    return _with_tracks(scenario, rest, [leader, follower])


# ----------------------------------------------------------------------------- cut-in
def _ego_path(scenario: Scenario) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edit-clock times (T,), ego xy (T, 2), arc length along the ego path (T,))."""
    t = to_s(scenario, scenario.ego.timestamps_ns)
    xy = np.asarray(scenario.ego.world_SE3_ego.translation)[:, :2]
    return t, xy, routes.arc_length_m(xy)


def adjacent_lane_offset_m(scenario: Scenario, at_s: float, side: str) -> float | None:
    """Signed lateral offset (left > 0) from the ego's lane centre to the adjacent same-direction
    lane on `side` at time `at_s`, measured on the map's lanes; None if the map has none there."""
    if len(scenario.map.lanes.centre) == 0:
        return None
    pose = scenario.ego.pose_at(to_ns(scenario, np.array([at_s])))
    xy = np.asarray(pose.translation)[0, :2]
    yaw = float(np.asarray(pose.yaw_rad).reshape(-1)[0])
    own = routes.nearest_lane(scenario.map, xy, yaw, max_heading_diff_rad=np.deg2rad(30))
    if own is None:
        return None
    centres = routes._lane_centres(scenario.map)
    own_xy, _ = routes.interp_polyline(centres[own[0]], np.array([own[2]]))
    normal = np.array([-np.sin(yaw), np.cos(yaw)])
    best = None
    for k, pts in enumerate(centres):
        if k == own[0] or len(pts) < 2:
            continue
        dist, s, lane_yaw = routes._nearest_on_polyline(pts, own_xy[0, :2])
        if abs(wrap_angle(lane_yaw - yaw)) > np.deg2rad(20) or dist > 6.0:
            continue
        p, _ = routes.interp_polyline(pts, np.array([s]))
        d = float((p[0, :2] - own_xy[0, :2]) @ normal)
        if abs(d) < 2.0 or (d > 0) != (side == "left"):
            continue
        if best is None or abs(d) < abs(best):
            best = d
    return best


def _cut_in_lane_offset(scenario: Scenario, start_s: float, side: str, lane_offset_m: float | None) -> float:
    """The cut-in's signed start offset: given (its sign set by `side`), measured on the map's
    lanes, or 3.5 m on maps without lanes."""
    if lane_offset_m is None:
        found = adjacent_lane_offset_m(scenario, start_s, side)
        if found is None and len(scenario.map.lanes.centre):
            raise AvsimValueError(f"side: no lane runs beside the ego on the {side} at {start_s:g} s")
        return found if found is not None else (3.5 if side == "left" else -3.5)
    if (lane_offset_m > 0) != (side == "left"):
        return -lane_offset_m
    return lane_offset_m


def _within_lead(t: np.ndarray, start_s: float, end_s: float, lead_in_s: float | None, lead_out_s: float | None) -> np.ndarray:
    """Samples from `lead_in_s` before `start_s` to `lead_out_s` after `end_s` (None: unbounded)."""
    keep = np.ones(len(t), dtype=bool)
    if lead_in_s is not None:
        keep &= t >= start_s - lead_in_s - 1e-9
    if lead_out_s is not None:
        keep &= t <= end_s + lead_out_s + 1e-9
    return keep


def cut_in(
    scenario: Scenario,
    track_id: str,
    start_s: float,
    duration_s: float,
    side: str = "left",
    gap_m: float = 3.0,
    rel_speed_mps: float = 0.0,
    lane_offset_m: float | None = None,
    source_class: str = "Car",
    size_m: Sequence[float] | None = None,
    lead_in_s: float | None = None,
    lead_out_s: float | None = None,
) -> Scenario:
    """Add a vehicle that changes from the lane beside the ego into the ego's lane, ahead of it.

    The manoeuvre is laid out in the ego path's Frenet frame: the lateral offset moves from the
    adjacent lane (`side` of the ego, offset measured on the map's lanes unless
    `lane_offset_m` is given; 3.5 m on maps without lanes) to 0 between `start_s` and
    `start_s + duration_s` with a quintic ramp (no lateral jerk steps). Longitudinally its
    rear bumper is `gap_m` ahead of the ego's front bumper (ego size from the scenario's
    metadata, else a typical car) at the end of the manoeuvre, and it drives `rel_speed_mps`
    faster than the ego throughout. It is sampled on the
    ego's timestamps from `lead_in_s` before the manoeuvre to `lead_out_s` after it (None: from
    the clip start / to the clip end), so it can enter and leave busy real scenes.
    """
    track_id = _new_track_id(scenario, track_id)
    if side not in ("left", "right"):
        raise AvsimValueError(f"side: must be 'left' or 'right', got {side!r}")
    if duration_s <= 0:
        raise AvsimValueError("duration_s: must be > 0")
    if (lead_in_s is not None and lead_in_s < 0) or (lead_out_s is not None and lead_out_s < 0):
        raise AvsimValueError("lead_in_s: lead_in_s and lead_out_s must be >= 0")
    check_time(scenario, start_s, "start_s", allow_end=False)
    check_time(scenario, start_s + duration_s, "start_s + duration_s")
    size = size_for(source_class, size_m)
    lane_offset_m = _cut_in_lane_offset(scenario, start_s, side, lane_offset_m)
    t, ego_xy, ego_s = _ego_path(scenario)
    t_end = start_s + duration_s
    ego_size, ego_offset = ego_box(scenario)
    centre_gap = ego_offset + ego_size[0] / 2 + gap_m + size[0] / 2  # rear axle -> agent centre
    s = ego_s + centre_gap + rel_speed_mps * (t - t_end)
    d = lane_offset_m * (1.0 - routes.smootherstep((t - start_s) / duration_s))
    ref = routes.dedupe_polyline(ego_xy)
    if len(ref) < 2:
        raise AvsimValueError("cut_in: the ego does not move, so it has no lane direction")
    # arc length of the deduplicated reference equals the ego's cumulative distance
    xy = routes.frenet_to_world(ref, s, d)
    yaw = routes.path_yaw_rad(xy, float(np.asarray(scenario.ego.world_SE3_ego.yaw_rad)[0]))
    z = _ground_z(scenario, xy) + size[2] / 2
    xyz = np.concatenate([xy, z[:, None]], axis=1)
    keep = _within_lead(t, start_s, t_end, lead_in_s, lead_out_s)
    rest = columns(scenario.agents)
    ts = np.asarray(scenario.ego.timestamps_ns)[keep]
    return _with_tracks(scenario, rest, [track_columns(track_id, source_class, ts, xyz[keep], size, yaw[keep])])
