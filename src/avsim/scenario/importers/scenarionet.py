"""ScenarioNet scenario-description pickles (nuScenes, Waymo and more through ScenarioNet).

A ScenarioNet pickle is a dict: ``tracks`` (per object: ``type``, ``state`` arrays over the
scenario's T steps with a ``valid`` mask, ``metadata``), ``map_features`` (typed polylines and
polygons), ``dynamic_map_states`` (traffic-light states per step) and ``metadata`` (``ts`` in
seconds, ``sdc_id`` = the ego track, ``dataset``). It is read with the restricted unpickler.

What maps where:
- ego: the ``sdc_id`` track; pose = (x, y, ground z, heading). Waymo positions are box centres,
  so the ego origin is the box's bottom centre (the rear axle is not in the file).
- agents: every other track at its valid steps; source class = the dataset's own class
  (``metadata.type``, e.g. nuScenes ``vehicle.car``), else ScenarioNet's ``type``.
- map: ``ROAD_LINE_*`` -> lane lines through `line_types`; ScenarioNet's nuScenes converter
  writes the drivable-area outline as ``ROAD_LINE_SOLID_SINGLE_WHITE`` with ids ``boundary_<k>``,
  a stand-in that is imported as a road boundary; ``ROAD_EDGE_*`` -> road boundaries;
  ``CROSSWALK`` -> crosswalks; ``SPEED_BUMP`` -> road markings; ``DRIVEWAY`` -> drivable areas;
  lanes with a ``width`` column (Waymo) -> lanes with rails offset from the centre line; lanes
  with a surface ``polygon`` (nuScenes) -> rails at the polygon's edge along each vertex's
  normal; lanes with neither (nuScenes connectors) -> rails at a nominal 1.75 m; ``STOP_SIGN`` ->
  a traffic-sign cuboid of nominal size at its position.
- lights: ``LANE_STATE_*`` per step -> red / yellow / green / unknown state changes. ScenarioNet
  has no light geometry; each light's stop point goes to ``metadata['traffic_light_stop_points_m']``.
- rig: none in the file; a named default rig (nuScenes-derived -> ``nuscenes``, Waymo -> ``waymo``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.common import (
    MapBuilder,
    TrackBuilder,
    as_points,
    build_scenario,
    check_finite,
    check_increasing,
    seconds_to_ns,
)
from avsim.scenario.importers.line_types import lane_line_type
from avsim.scenario.importers.safe_pickle import load_pickle

if TYPE_CHECKING:
    from avsim.core.agents import AgentTracks
    from avsim.core.lights import TrafficLightStates
    from avsim.core.transforms import SE3
    from avsim.scenario.types import Scenario

# Waymo map_pb2.TrafficSignalLaneState names (ScenarioNet keeps them as strings).
LIGHT_STATE_MAP: dict[str, str] = {
    "LANE_STATE_UNKNOWN": "unknown",
    "LANE_STATE_ARROW_STOP": "red",
    "LANE_STATE_ARROW_CAUTION": "yellow",
    "LANE_STATE_ARROW_GO": "green",
    "LANE_STATE_STOP": "red",
    "LANE_STATE_CAUTION": "yellow",
    "LANE_STATE_GO": "green",
    "LANE_STATE_FLASHING_STOP": "red",
    "LANE_STATE_FLASHING_CAUTION": "yellow",
}
# A stop sign's position only; size is a nominal regulatory sign (0.75 m octagon, 5 cm plate).
STOP_SIGN_SIZE_M = (0.05, 0.75, 0.75)
DEFAULT_RIGS = {"nuscenes": "nuscenes", "waymo": "waymo"}


def _require(d: dict, key: str, path: Path, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise AvsimInputError(path, f"{where}.{key}" if where else key, "missing")
    return d[key]


def _column(state: dict, key: str, n: int, path: Path, where: str) -> np.ndarray:
    try:
        arr = np.asarray(_require(state, key, path, where), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise AvsimInputError(path, f"{where}.{key}", f"not a numeric array: {exc}") from None
    if arr.ndim == 0 or arr.shape[0] != n:
        raise AvsimInputError(path, f"{where}.{key}", f"expected {n} steps, got shape {arr.shape}")
    return arr.reshape(n, -1)


def light_state_changes(states: list[str], t_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-step state names -> (timestamps, states) at the steps where the state changes."""
    mapped = np.asarray([LIGHT_STATE_MAP.get(str(s).upper(), "unknown") for s in states], dtype=str)
    if len(mapped) == 0:
        return np.zeros(0, np.int64), np.zeros(0, str)
    change = np.concatenate([[True], mapped[1:] != mapped[:-1]])
    return t_ns[: len(mapped)][change], mapped[change]


def _timestamps(scenario: dict, path: Path) -> np.ndarray:
    meta = _require(scenario, "metadata", path, "")
    length = int(_require(scenario, "length", path, ""))
    if "ts" in meta:
        ts = np.asarray(meta["ts"], dtype=np.float64).reshape(-1)
    else:
        ts = np.arange(length) * float(_require(meta, "sample_rate", path, "metadata"))
    if len(ts) != length:
        raise AvsimInputError(path, "metadata.ts", f"{len(ts)} timestamps for a scenario of length {length}")
    check_finite(ts, path, "metadata.ts")
    return check_increasing(seconds_to_ns(ts), path, "metadata.ts")


def _track_arrays(track: dict, n: int, path: Path, where: str, dataset: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """valid mask, centre (n,3), size lwh (n,3), heading (n,) of one ScenarioNet track."""
    state = _require(track, "state", path, where)
    valid = np.asarray(_require(state, "valid", path, f"{where}.state")).reshape(-1).astype(bool)
    if valid.shape[0] != n:
        raise AvsimInputError(path, f"{where}.state.valid", f"expected {n} steps, got {valid.shape[0]}")
    pos = _column(state, "position", n, path, f"{where}.state")
    if pos.shape[1] == 2:
        pos = np.concatenate([pos, np.zeros((n, 1))], axis=1)
    heading = _column(state, "heading", n, path, f"{where}.state")[:, 0]
    size = np.concatenate([_column(state, k, n, path, f"{where}.state")[:, :1] for k in ("length", "width", "height")], axis=1)
    for arr, what in ((pos[valid], "position"), (heading[valid], "heading"), (size[valid], "size")):
        check_finite(arr, path, f"{where}.state.{what}")
    return valid, pos[:, :3], size, heading


def _ego(scenario: dict, t_ns: np.ndarray, path: Path, dataset: str) -> tuple[str, np.ndarray, SE3]:
    from avsim.core.transforms import SE3

    meta = scenario["metadata"]
    sdc_id = str(_require(meta, "sdc_id", path, "metadata"))
    tracks = scenario["tracks"]
    if sdc_id not in tracks:
        raise AvsimInputError(path, "metadata.sdc_id", f"ego track {sdc_id!r} not in tracks")
    valid, pos, size, heading = _track_arrays(tracks[sdc_id], len(t_ns), path, f"tracks[{sdc_id}]", dataset)
    if valid.sum() < 2:
        raise AvsimInputError(path, f"tracks[{sdc_id}].state.valid", "the ego needs at least 2 valid steps")
    ground = pos.copy()
    if dataset != "nuscenes":  # box centre -> bottom centre (nuScenes ego poses are on the ground)
        ground[:, 2] -= size[:, 2] / 2.0
    world_SE3_ego = SE3.from_yaw(heading[valid], ground[valid])
    return sdc_id, t_ns[valid], world_SE3_ego


def _agents(scenario: dict, sdc_id: str, t_ns: np.ndarray, path: Path, dataset: str) -> AgentTracks:
    from avsim.core.transforms import yaw_to_quat

    builder = TrackBuilder()
    for track_id, track in scenario["tracks"].items():
        if str(track_id) == sdc_id:
            continue
        where = f"tracks[{track_id}]"
        valid, pos, size, heading = _track_arrays(track, len(t_ns), path, where, dataset)
        if not valid.any():
            continue
        meta = track.get("metadata") or {}
        source_class = str(meta.get("type") or track.get("type") or "UNKNOWN")
        builder.add(str(track_id), source_class, t_ns[valid], pos[valid], size[valid], yaw_to_quat(heading[valid]))
    return builder.build(path)


def _lane_rails(centre: np.ndarray, width: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left / right rails offset from a centre line by per-vertex half widths (left, right)."""
    tangent = np.gradient(centre[:, :2], axis=0) if len(centre) > 1 else np.array([[1.0, 0.0]])
    norm = np.linalg.norm(tangent, axis=1, keepdims=True)
    tangent = np.where(norm > 1e-9, tangent / np.maximum(norm, 1e-12), np.array([1.0, 0.0]))
    normal = np.stack([-tangent[:, 1], tangent[:, 0], np.zeros(len(centre))], axis=1)
    return centre + normal * width[:, :1], centre - normal * width[:, 1:2]


NOMINAL_HALF_WIDTH_M = 1.75  # where a lane polygon gives no edge along a vertex's normal
MAX_HALF_WIDTH_M = 5.0  # search distance for the lane polygon's edge


def _half_widths_from_polygon(centre: np.ndarray, polygon_xy: np.ndarray) -> np.ndarray:
    """Per-vertex (left, right) half widths (N, 2) of a lane from its surface polygon.

    ScenarioNet's nuScenes lanes carry the lane surface polygon instead of widths: cast a ray
    from each centre vertex along its left and right normals and take the distance to the
    polygon's boundary (nominal half width where the ray meets no edge, e.g. at lane ends).
    """
    import shapely

    ring = shapely.LineString(np.vstack([polygon_xy, polygon_xy[:1]]))
    tangent = np.gradient(centre[:, :2], axis=0)
    tangent /= np.maximum(np.linalg.norm(tangent, axis=1, keepdims=True), 1e-12)
    normal = np.stack([-tangent[:, 1], tangent[:, 0]], axis=1)
    widths = np.full((len(centre), 2), NOMINAL_HALF_WIDTH_M)
    for side, sign in enumerate((1.0, -1.0)):
        ends = centre[:, :2] + sign * MAX_HALF_WIDTH_M * normal
        rays = shapely.linestrings(np.stack([centre[:, :2], ends], axis=1))
        hits = shapely.intersection(rays, ring)
        for k, hit in enumerate(hits):
            if not hit.is_empty:
                widths[k, side] = shapely.distance(shapely.Point(centre[k, :2]), hit)
    return np.clip(widths, 0.1, MAX_HALF_WIDTH_M)


MPS_PER_MPH = 0.44704  # exact: 1 mile = 1609.344 m


def lane_speed_limits_mps(features: dict, path: Path) -> dict[str, float]:
    """{lane id: limit in m/s} from the lanes' `speed_limit_mph` (Waymo, ScenarioNet).

    A lane without the field, or with 0 (Waymo's "unknown"), has no limit; a negative or
    non-finite value is bad input.

    Args:
        features: ScenarioNet ``map_features`` (id -> feature dict).
        path: the source file, for error messages.

    Returns:
        Limits of the lanes that have one (m/s), by lane id.
    """
    limits: dict[str, float] = {}
    for fid, feat in features.items():
        mph = feat.get("speed_limit_mph") if str(feat.get("type", "")).upper().startswith("LANE") else None
        if mph is None:
            continue
        value = float(mph)
        if not np.isfinite(value) or value < 0:
            raise AvsimInputError(path, f"map_features[{fid}].speed_limit_mph", f"expected a limit >= 0, got {mph!r}")
        if value > 0:
            limits[str(fid)] = value * MPS_PER_MPH
    return limits


def map_from_description(scenario: dict, path: Path, dataset: str) -> tuple[MapBuilder, list[str]]:
    from avsim.core.transforms import yaw_to_quat

    mb = MapBuilder()
    lanes: dict[str, np.ndarray] = {}
    stop_signs: list[tuple[str, np.ndarray, list]] = []
    skipped: list[str] = []
    for fid, feat in scenario["map_features"].items():
        fid = str(fid)
        where = f"map_features[{fid}]"
        ftype = str(_require(feat, "type", path, where)).upper()
        if ftype.startswith(("ROAD_LINE", "ROAD_EDGE")):
            pts = as_points(_require(feat, "polyline", path, where), path, f"{where}.polyline", min_points=1)
            if len(pts) < 2:
                skipped.append(fid)  # a single vertex draws nothing (the real Waymo file has some)
            elif ftype.startswith("ROAD_EDGE"):
                mb.road_boundaries.add(fid, pts)
            elif dataset == "nuscenes" and fid.startswith("boundary_"):
                mb.road_boundaries.add(fid, pts)  # ScenarioNet's stand-in for the drivable-area outline
            else:
                mb.add_lane_line(fid, pts, lane_line_type("scenarionet", ftype))
        elif ftype in ("CROSSWALK", "SPEED_BUMP", "DRIVEWAY"):
            pts = as_points(_require(feat, "polygon", path, where), path, f"{where}.polygon", min_points=3)
            if len(pts) > 3 and np.allclose(pts[0], pts[-1]):
                pts = pts[:-1]  # rings are stored unclosed
            {"CROSSWALK": mb.crosswalks, "SPEED_BUMP": mb.road_markings, "DRIVEWAY": mb.drivable_areas}[ftype].add(fid, pts)
        elif ftype.startswith("LANE"):
            raw = as_points(_require(feat, "polyline", path, where), path, f"{where}.polyline", dims=(2, 3))
            if dataset == "nuscenes" and raw.ndim == 2 and raw.shape[1] == 3:
                raw = raw[:, :2]  # ScenarioNet's nuScenes lanes carry yaw, not z, in column 3
            centre = as_points(raw, path, f"{where}.polyline", min_points=1)
            lanes[fid] = centre
            if "width" in feat and len(centre) >= 2:
                width = np.asarray(feat["width"], dtype=np.float64).reshape(len(centre), -1)
                if width.shape[1] == 2 and np.all(np.isfinite(width)):
                    left, right = _lane_rails(centre, width)
                    mb.add_lane(fid, left, right, centre)
            elif len(centre) >= 2:  # nuScenes: rails from the surface polygon, or nominal (connectors)
                half_widths = np.full((len(centre), 2), NOMINAL_HALF_WIDTH_M)
                if "polygon" in feat:
                    polygon = as_points(feat["polygon"], path, f"{where}.polygon", dims=(2, 3), min_points=3)[:, :2]
                    half_widths = _half_widths_from_polygon(centre, polygon)
                left, right = _lane_rails(centre, half_widths)
                mb.add_lane(fid, left, right, centre)
        elif ftype == "STOP_SIGN":
            pos = check_finite(np.asarray(_require(feat, "position", path, where), dtype=np.float64).reshape(3), path, f"{where}.position")
            stop_signs.append((fid, pos, list(feat.get("lane") or [])))
    for fid, pos, lane_ids in stop_signs:
        yaw = 0.0
        for lane_id in lane_ids:  # the sign faces the traffic of the lane it controls
            line = lanes.get(str(lane_id))
            if line is not None and len(line) >= 2:
                k = int(np.argmin(np.linalg.norm(line[:, :2] - pos[:2], axis=1)))
                a, b = line[max(k - 1, 0)], line[min(k + 1, len(line) - 1)]
                yaw = float(np.arctan2(b[1] - a[1], b[0] - a[0]))
                break
        mb.traffic_signs.add(fid, pos, STOP_SIGN_SIZE_M, yaw_to_quat(np.array(yaw)))
    return mb, skipped


def _lights(scenario: dict, t_ns: np.ndarray, path: Path) -> tuple[TrafficLightStates, dict[str, list[float]]]:
    from avsim.core.lights import TrafficLightStates

    ids, times, states, stop_points = [], [], [], {}
    for light_id, light in (scenario.get("dynamic_map_states") or {}).items():
        where = f"dynamic_map_states[{light_id}]"
        seq = _require(_require(light, "state", path, where), "object_state", path, f"{where}.state")
        if len(seq) > len(t_ns):
            raise AvsimInputError(path, f"{where}.state.object_state", f"{len(seq)} states for {len(t_ns)} steps")
        t, s = light_state_changes(list(seq), t_ns)
        ids.extend([str(light_id)] * len(t))
        times.append(t)
        states.append(s)
        if "stop_point" in light:
            point = np.asarray(light["stop_point"], dtype=np.float64).reshape(-1)
            if point.size >= 2 and np.all(np.isfinite(point)):
                stop_points[str(light_id)] = [float(v) for v in point[:3]]
    if not ids:
        return TrafficLightStates.empty(), stop_points
    return TrafficLightStates.from_unsorted(np.asarray(ids), np.concatenate(times), np.concatenate(states)), stop_points


def load_scenarionet(path: str | os.PathLike[str], rig_name: str | None = None) -> Scenario:
    """Convert one ScenarioNet scenario pickle into an `avsim.scenario.Scenario`.

    `rig_name` picks the named default rig to attach (ScenarioNet files carry none); default
    ``nuscenes`` for nuScenes-derived files, ``waymo`` for Waymo, ``cosmos`` otherwise.
    """
    path = Path(path)
    scenario = load_pickle(path)
    if not isinstance(scenario, dict):
        raise AvsimInputError(path, "pickle", f"expected a ScenarioNet dict, got {type(scenario).__name__}")
    return convert_description(scenario, path, rig_name=rig_name, source_format="scenarionet")


def convert_description(scenario: dict, path: Path, *, rig_name: str | None, source_format: str) -> Scenario:
    """A ScenarioNet-shaped scenario dict (also built by the Waymo importer) -> `Scenario`."""
    from avsim.core.rig import named_rig

    for key in ("tracks", "map_features", "metadata", "length"):
        _require(scenario, key, path, "")
    meta = scenario["metadata"]
    dataset = str(meta.get("dataset", "unknown")).lower()
    t_ns = _timestamps(scenario, path)
    sdc_id, ego_t, world_SE3_ego = _ego(scenario, t_ns, path, dataset)
    agents = _agents(scenario, sdc_id, t_ns, path, dataset)
    mb, skipped = map_from_description(scenario, path, dataset)
    lights, stop_points = _lights(scenario, t_ns, path)
    rig_name = rig_name or DEFAULT_RIGS.get(dataset, "cosmos")
    metadata = {
        "source_format": source_format,
        "source_file": path.name,
        "dataset": dataset,
        "source_version": str(scenario.get("version", "")),
        "map_name": str(meta.get("map", "")),
        "source_rate_hz": round(float(1e9 / np.median(np.diff(t_ns))), 3),
        "rig": rig_name,
        "rig_source": "named default (the source has no camera calibration)",
        "traffic_light_stop_points_m": stop_points,
        "lane_speed_limits_mps": lane_speed_limits_mps(scenario["map_features"], path),
        "skipped_map_features": skipped,
        "ego_orientation": "yaw_only",  # tracks hold a heading only: roll and pitch unknown (zero)
    }
    return build_scenario(
        path,
        scenario_id=str(scenario.get("id", path.stem)),
        rig=named_rig(rig_name),
        ego_timestamps_ns=ego_t,
        world_SE3_ego=world_SE3_ego,
        agents=agents,
        hd_map=mb.build(),
        lights=lights,
        metadata=metadata,
    )
