"""Log a scenario into a rerun recording: map, agents, ego, camera rig, traffic lights.

Entity paths and the timeline are those of `avsim.view.paths` (docs/viewer.md). Every function
takes the `rerun.RecordingStream` to log into, so users can add their own data to the same
recording. Colours are the style table's (`avsim.maps.style`); strokes are in metres.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from avsim.core.cameras import Camera, PinholeCamera
from avsim.core.rig import CameraRig
from avsim.core.transforms import matrix_to_quat
from avsim.core.typing import NDArrayFloat
from avsim.maps import HDMap, Polylines, style
from avsim.render.geometry.patterns import lane_line_segments
from avsim.render.geometry.static_world import triangulate_polygon
from avsim.scenario import Scenario
from avsim.view import paths
from avsim.view._rerun import require_rerun

# stroke radii in metres (the spec's widths are camera pixels; in 3-D a metric radius reads best)
STRIP_RADIUS_M: dict[str, float] = {
    "lane_lines": 0.08, "road_boundaries": 0.10, "wait_lines": 0.15, "poles": 0.06, "crosswalks": 0.05,
    "road_markings": 0.04, "drivable_areas": 0.04, "lanes": 0.03,
}  # fmt: skip
# drivable areas and lane centres are not drawn by the renderer: neutral greys, not spec colours
DRIVABLE_AREA_RGB: style.RGB = (110, 110, 110)
LANE_CENTRE_RGB: style.RGB = (70, 70, 70)
TRAJECTORY_RGB: style.RGB = (255, 140, 0)
FRUSTUM_PLANE_M = 0.8  # distance of the image plane drawn in each camera frustum
MAX_FRUSTUM_FOV_DEG = 170.0  # a wider lens (fisheye) draws as a pinhole of this field of view


def durations(timestamps_ns: Any, origin_ns: int) -> np.ndarray:
    """Scenario times as the `scenario_time` timeline's values.

    Args:
        timestamps_ns: (K,) int64 scenario timestamps (ns).
        origin_ns: the timeline's zero (the viewed scenario's `start_ns`).

    Returns:
        (K,) timedelta64[ns] since `origin_ns`.
    """
    return (np.asarray(timestamps_ns, dtype=np.int64) - int(origin_ns)).astype("timedelta64[ns]")


def xyzw(quat_wxyz: Any) -> NDArrayFloat:
    """avsim quaternions (w, x, y, z) in rerun's order (x, y, z, w).

    Args:
        quat_wxyz: (N, 4) quaternions.

    Returns:
        (N, 4) float32 quaternions (x, y, z, w).
    """
    q = np.asarray(quat_wxyz, dtype=np.float64).reshape(-1, 4)
    return np.ascontiguousarray(q[:, [1, 2, 3, 0]], dtype=np.float32)


def _outlines(rings: Polylines) -> list[NDArrayFloat]:
    """Closed outlines (n + 1, 3) of polygons (the first vertex repeated at the end)."""
    return [np.vstack([ring, ring[:1]]) for ring in rings]


def lane_line_strips(hd_map: HDMap) -> tuple[NDArrayFloat, np.ndarray]:
    """The painted pieces of every lane line, as the renderer paints them.

    Args:
        hd_map: the map.

    Returns:
        Strips (S, 2, 3) (start and end of each painted piece, metres) and colours (S, 3) uint8.
    """
    pieces: list[NDArrayFloat] = []
    colours: list[np.ndarray] = []
    lanes = hd_map.lane_lines
    for k in range(len(lanes)):
        a, b, rgb = lane_line_segments(lanes.lines[k], lanes.lane_type(k))
        pieces.append(np.stack([a, b], axis=1))
        colours.append(np.tile(np.asarray(rgb, np.uint8), (len(a), 1)))
    if not pieces:
        return np.zeros((0, 2, 3)), np.zeros((0, 3), np.uint8)
    return np.concatenate(pieces), np.concatenate(colours)


def map_strips(hd_map: HDMap) -> dict[str, tuple[list[NDArrayFloat] | NDArrayFloat, style.RGB | np.ndarray]]:
    """Every map line of `paths.MAP_STRIPS`: strips and colour(s), the empty kinds left out.

    Args:
        hd_map: the map.

    Returns:
        element -> (strips: a list of (n, 3) arrays or an (S, 2, 3) array, RGB or (S, 3) colours).
    """
    out: dict[str, tuple[list[NDArrayFloat] | NDArrayFloat, style.RGB | np.ndarray]] = {}
    strips, colours = lane_line_strips(hd_map)
    if len(strips):
        out["lane_lines"] = (strips, colours)
    lines = {"road_boundaries": style.ROAD_BOUNDARY_RGB, "wait_lines": style.WAIT_LINE_RGB, "poles": style.POLE_RGB}
    for name, rgb in lines.items():
        if len(getattr(hd_map, name)):
            out[name] = (list(getattr(hd_map, name)), rgb)
    rings = {"crosswalks": style.CROSSWALK_RGB, "road_markings": style.ROAD_MARKING_RGB, "drivable_areas": DRIVABLE_AREA_RGB}
    for name, rgb in rings.items():
        if len(getattr(hd_map, name)):
            out[name] = (_outlines(getattr(hd_map, name)), rgb)
    if len(hd_map.lanes):
        out["lanes"] = (list(hd_map.lanes.centre), LANE_CENTRE_RGB)
    return out


def log_map(hd_map: HDMap, recording: Any, prefix: str = "") -> int:
    """Log the HD map (static): line strips, filled polygons, sign and light boxes.

    Args:
        hd_map: the map (world frame, metres).
        recording: the `rerun.RecordingStream`.
        prefix: "" or `paths.BEFORE`.

    Returns:
        The number of line strips logged.
    """
    rr = require_rerun()
    n = 0
    for name, (strips, colours) in map_strips(hd_map).items():
        rr_strips = rr.LineStrips3D(strips, colors=colours, radii=STRIP_RADIUS_M[name])
        recording.log(paths.map_path(name, prefix), rr_strips, static=True)
        n += len(strips)
    for name, rgb in (("crosswalks", style.CROSSWALK_RGB), ("road_markings", style.ROAD_MARKING_RGB)):
        tris = [triangulate_polygon(ring) for ring in getattr(hd_map, name)]
        if tris and sum(len(t) for t in tris):
            vertices = np.concatenate(tris).reshape(-1, 3)
            mesh = rr.Mesh3D(vertex_positions=vertices, triangle_indices=np.arange(len(vertices)).reshape(-1, 3), albedo_factor=rgb)
            recording.log(paths.map_path(name, prefix) + "/fill", mesh, static=True)
    boxes = hd_map.traffic_signs
    if len(boxes):
        signs = rr.Boxes3D(centers=boxes.center_m, half_sizes=boxes.size_m / 2, quaternions=xyzw(boxes.orientation), colors=style.TRAFFIC_SIGN_RGB)
        recording.log(paths.map_path("traffic_signs", prefix), signs, static=True)
    return n


def log_lights(scenario: Scenario, recording: Any, origin_ns: int, prefix: str = "") -> int:
    """Log the traffic-light boxes (static) and their state colours at every state change.

    Args:
        scenario: the scenario (lights are the map's `traffic_lights` cuboids; states by id).
        recording: the `rerun.RecordingStream`.
        origin_ns: the timeline's zero.
        prefix: "" or `paths.BEFORE`.

    Returns:
        The number of state-change times logged.
    """
    rr = require_rerun()
    boxes = scenario.map.traffic_lights
    if not len(boxes):
        return 0
    path = paths.map_path("traffic_lights", prefix)
    recording.log(path, rr.Boxes3D(centers=boxes.center_m, half_sizes=boxes.size_m / 2, quaternions=xyzw(boxes.orientation)), static=True)
    times = np.unique(np.r_[np.int64(min(origin_ns, scenario.start_ns)), scenario.lights.timestamps_ns])
    states = np.stack([scenario.lights.state_at(boxes.ids, int(t)) for t in times])  # (K, L)
    colours = np.array([style.TRAFFIC_LIGHT_RGB[s] for s in states.reshape(-1)], dtype=np.uint8)
    labels = [f"{light}: {s}" for row in states for light, s in zip(boxes.ids, row)]
    columns = rr.Boxes3D.columns(colors=colours, labels=labels, show_labels=np.zeros(len(labels), bool)).partition(np.full(len(times), len(boxes.ids)))
    recording.send_columns(path, indexes=[rr.TimeColumn(paths.TIMELINE, duration=durations(times, origin_ns))], columns=columns)
    return len(times)


def log_agents(scenario: Scenario, recording: Any, origin_ns: int, rate_hz: float, prefix: str = "") -> int:
    """Log the agent boxes at `rate_hz` over the ego span (tracks resampled as the renderer does).

    Args:
        scenario: the scenario.
        recording: the `rerun.RecordingStream`.
        origin_ns: the timeline's zero.
        rate_hz: box rate (the render fps, so boxes move as in the control video).
        prefix: "" or `paths.BEFORE`.

    Returns:
        The number of boxes logged over all times.
    """
    rr = require_rerun()
    times = scenario.frame_timestamps(rate_hz)
    tracks = scenario.agents.resample(times)
    if not len(tracks):
        return 0
    order = np.argsort(tracks.timestamps_ns, kind="stable")  # by time (AgentTracks keeps (track, time) order)
    ts = tracks.timestamps_ns[order]
    counts = np.searchsorted(ts, times, side="right") - np.searchsorted(ts, times, side="left")
    classes = tracks.object_class[order]
    colours = np.array([style.BOX_RGB[c][0] for c in classes], dtype=np.uint8)
    labels = [f"{c} {t}" for c, t in zip(classes, tracks.track_id[order])]
    columns = rr.Boxes3D.columns(
        centers=tracks.center_m[order], half_sizes=tracks.size_m[order] / 2, quaternions=xyzw(tracks.orientation[order]),
        colors=colours, labels=labels,
    ).partition(counts)  # fmt: skip
    index = rr.TimeColumn(paths.TIMELINE, duration=durations(times, origin_ns))
    recording.send_columns(paths.prefixed(prefix, paths.AGENTS), indexes=[index], columns=columns)
    return len(order)


def log_ego(scenario: Scenario, recording: Any, origin_ns: int, prefix: str = "") -> int:
    """Log the ego pose (world_SE3_ego) at every pose time and the whole path (static).

    Args:
        scenario: the scenario.
        recording: the `rerun.RecordingStream`.
        origin_ns: the timeline's zero.
        prefix: "" or `paths.BEFORE`.

    Returns:
        The number of poses logged.
    """
    rr = require_rerun()
    pose = scenario.ego.world_SE3_ego
    index = rr.TimeColumn(paths.TIMELINE, duration=durations(scenario.ego.timestamps_ns, origin_ns))
    columns = rr.Transform3D.columns(translation=pose.translation, quaternion=xyzw(matrix_to_quat(pose.rotation)))
    recording.send_columns(paths.prefixed(prefix, paths.EGO), indexes=[index], columns=columns)
    recording.log(paths.prefixed(prefix, paths.EGO), rr.TransformAxes3D(2.0), static=True)
    path = rr.LineStrips3D([pose.translation], colors=TRAJECTORY_RGB, radii=0.1)
    recording.log(paths.prefixed(prefix, paths.EGO_TRAJECTORY), path, static=True)
    return len(scenario.ego)


def frustum_matrix(camera: Camera) -> NDArrayFloat:
    """The pinhole matrix K (3, 3) a camera's frustum is drawn with.

    Args:
        camera: a pinhole (its own K) or f-theta camera (the pinhole of the same horizontal field
            of view, at most `MAX_FRUSTUM_FOV_DEG`, about the same principal point).

    Returns:
        (3, 3) image_from_camera.
    """
    if isinstance(camera, PinholeCamera):
        return np.asarray(camera.K, dtype=np.float64)
    fov = min(camera.horizontal_fov_rad, np.deg2rad(MAX_FRUSTUM_FOV_DEG))
    f = camera.width_px / 2 / np.tan(fov / 2)
    cx, cy = getattr(camera, "cx_px", camera.width_px / 2), getattr(camera, "cy_px", camera.height_px / 2)
    return np.array([[f, 0.0, cx], [0.0, f, cy], [0.0, 0.0, 1.0]])


def log_rig(rig: CameraRig, recording: Any, prefix: str = "") -> int:
    """Log each camera as a frustum at its mounting (children of the ego, static).

    Args:
        rig: the camera rig (ego_SE3_camera, OpenCV RDF camera frames).
        recording: the `rerun.RecordingStream`.
        prefix: "" or `paths.BEFORE`.

    Returns:
        The number of cameras logged.
    """
    rr = require_rerun()
    quats = xyzw(matrix_to_quat(rig.ego_SE3_camera.rotation))
    for k, (name, camera) in enumerate(zip(rig.names, rig.cameras)):
        path = paths.camera_path(name, prefix)
        recording.log(path, rr.Transform3D(translation=rig.ego_SE3_camera.translation[k], quaternion=quats[k]), static=True)
        pinhole = rr.Pinhole(
            image_from_camera=frustum_matrix(camera), resolution=[camera.width_px, camera.height_px],
            camera_xyz=rr.ViewCoordinates.RDF, image_plane_distance=FRUSTUM_PLANE_M,
        )  # fmt: skip
        recording.log(path, pinhole, static=True)
    return len(rig)


def log_scenario(scenario: Scenario, recording: Any, *, origin_ns: int | None = None, rate_hz: float = 30.0, prefix: str = "") -> None:
    """Log a whole scenario: world axes, map, traffic lights, agents, ego and camera rig.

    Args:
        scenario: the scenario.
        recording: the `rerun.RecordingStream` to log into.
        origin_ns: the timeline's zero (default: the scenario's first ego pose).
        rate_hz: agent box rate (Hz).
        prefix: "" (the viewed scenario) or `paths.BEFORE` (the one it is compared with).
    """
    rr = require_rerun()
    origin = scenario.start_ns if origin_ns is None else int(origin_ns)
    recording.log(paths.prefixed(prefix, paths.WORLD), rr.ViewCoordinates.RIGHT_HAND_Z_UP, static=True)
    log_map(scenario.map, recording, prefix)
    log_lights(scenario, recording, origin, prefix)
    log_agents(scenario, recording, origin, rate_hz, prefix)
    log_ego(scenario, recording, origin, prefix)
    log_rig(scenario.rig, recording, prefix)
