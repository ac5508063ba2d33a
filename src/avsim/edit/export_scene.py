"""`avsim export-scene`: a scenario as a glTF 2.0 binary (GLB) scene, written with trimesh.

Axes: glTF is +Y up, right-handed, in metres; avsim's world frame is x, y on the ground and
z up. Every vertex is rotated into glTF axes as ``(X, Y, Z) = (x, z, -y)`` (a -90 degree turn
about x), so the scene opens upright in glTF viewers; Blender's importer turns it back into
x, y, z exactly. Positions stay in the world frame: vertices are float32 relative to a
rounded origin near the ego's start, and the root node `avsim_world` carries that origin as
its (float64, JSON) translation, so world coordinates far from 0 keep millimetre precision.

Content (one node per element, named by path): `map/<type>/<id>` for lane lines, road
boundaries, wait (stop) lines and poles (line segments), crosswalks, road markings and
drivable areas (triangulated, crosswalks also with an `/outline` child), traffic signs
(boxes); per time step `agents/<track_id>` (boxes, the class's front colour on the front
corners and its back colour on the back, as the render spec does), `lights/<id>` (boxes in
their state's colour), `ego/box`, `cameras/<name>` (frustums at the rig mounting,
FRUSTUM_DEPTH_M along each corner ray); and `ego/path`. With several time steps the
per-time nodes sit under `t=<seconds>s/` groups. glTF animation is not written (trimesh does
not export it): every step is visible at once, hide the groups by name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.agents import AgentTracks, box_corners
from avsim.core.atomic import atomic_output_path, output_errors
from avsim.core.errors import AvsimValueError
from avsim.core.transforms import matrix_to_quat
from avsim.maps import HDMap, style
from avsim.render.geometry.static_world import triangulate_polygon
from avsim.render.style import DEFAULT_FPS
from avsim.scenario import Scenario

from .common import ego_box
from .preview import DRIVABLE, EGO_RGB

# glTF (X, Y, Z) = avsim world (x, z, -y): rows map world coordinates to glTF ones
GLTF_R_WORLD = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])
AXES_NOTE = "glTF +Y up, right-handed, metres; glTF (X, Y, Z) = avsim world (x, z, -y)"
FRUSTUM_DEPTH_M = 3.0
FRUSTUM_RGB = (235, 235, 235)
# small lifts (metres) against z-fighting of coplanar layers: fills, then lines on top
FILL_LIFT_M = {"drivable_areas": 0.0, "road_markings": 0.003, "crosswalks": 0.003}
LINE_LIFT_M = 0.006
# triangles of a box in the corner order of `avsim.core.agents.box_corners`, facing outward
BOX_FACES = ((0, 3, 2), (0, 2, 1), (4, 5, 6), (4, 6, 7), (0, 1, 5), (0, 5, 4),
             (2, 3, 7), (2, 7, 6), (1, 2, 6), (1, 6, 5), (3, 0, 4), (3, 4, 7))  # fmt: skip
LINE_TYPES = ("road_boundaries", "wait_lines", "poles")
LINE_RGB = {"road_boundaries": style.ROAD_BOUNDARY_RGB, "wait_lines": style.WAIT_LINE_RGB, "poles": style.POLE_RGB}
FILL_RGB = {"drivable_areas": DRIVABLE, "road_markings": style.ROAD_MARKING_RGB, "crosswalks": style.CROSSWALK_RGB}


@dataclass(frozen=True)
class ExportSummary:
    """What `export_scene` wrote: time steps (seconds from the scenario start) and node counts."""

    times_s: tuple[float, ...]
    map_nodes: int
    agent_nodes: int
    camera_nodes: int
    size_bytes: int


def to_gltf_axes(points_world_m: np.ndarray) -> np.ndarray:
    """World points in glTF axes.

    Args:
        points_world_m: (N, 3) avsim world points (x, y, z up), metres.

    Returns:
        (N, 3) float64 glTF points (X, Y up, Z) = (x, z, -y).
    """
    return np.asarray(points_world_m, dtype=np.float64).reshape(-1, 3) @ GLTF_R_WORLD.T


def select_times_s(scenario: Scenario, time_s: float | None = None, frames: tuple[int, int] | None = None,
                   every: int = 1) -> list[float]:  # fmt: skip
    """The export's time steps, seconds from the scenario start.

    Args:
        scenario: the scenario.
        time_s: one time (static scene); default 0 when `frames` is not given.
        frames: render frame indices [A, B) at DEFAULT_FPS (30), B exclusive.
        every: keep every N-th frame of `frames`.

    Returns:
        The times (K,), increasing.
    """
    end_s = (scenario.end_ns - scenario.start_ns) / 1e9
    if time_s is not None and frames is not None:
        raise AvsimValueError("--time/--frames: give one of them")
    if every < 1:
        raise AvsimValueError(f"--every: expected an integer >= 1, got {every}")
    if frames is None:
        t = 0.0 if time_s is None else float(time_s)
        if not (np.isfinite(t) and 0.0 <= t <= end_s + 1e-9):
            raise AvsimValueError(f"--time: {t:g} s is outside the scenario (0 to {end_s:g} s)")
        return [t]
    n_frames = len(scenario.frame_times(DEFAULT_FPS))
    a, b = frames
    if not (0 <= a < b <= n_frames):
        raise AvsimValueError(f"--frames: {a}:{b} is not a non-empty range of the {n_frames} frames at {DEFAULT_FPS:g} fps (0:{n_frames})")
    return [k / DEFAULT_FPS for k in range(a, b, every)]


def _rgba(rgb: Sequence[int], n: int) -> np.ndarray:
    return np.tile(np.r_[np.asarray(rgb[:3], dtype=np.uint8), 255].astype(np.uint8), (n, 1))


def _lines(polylines: Sequence[np.ndarray], rgb: Sequence[int], origin_m: np.ndarray) -> Any:
    """A trimesh Path3D (exported as GL_LINES) of world polylines (each (n, 3)) in one colour."""
    import trimesh
    from trimesh.path.entities import Line

    vertices, entities, start = [], [], 0
    for pts in polylines:
        vertices.append(to_gltf_axes(np.asarray(pts) - origin_m))
        entities.append(Line(np.arange(start, start + len(pts))))
        start += len(pts)
    return trimesh.path.Path3D(entities=entities, vertices=np.concatenate(vertices), colors=_rgba(rgb, len(entities)), process=False)


def _mesh(vertices_world_m: np.ndarray, faces: np.ndarray, vertex_rgb: np.ndarray, origin_m: np.ndarray) -> Any:
    """A trimesh Trimesh from world vertices (N, 3), faces (F, 3) and vertex colours (N, 3)."""
    import trimesh

    colors = np.concatenate([np.asarray(vertex_rgb, np.uint8), np.full((len(vertex_rgb), 1), 255, np.uint8)], axis=1)
    return trimesh.Trimesh(vertices=to_gltf_axes(vertices_world_m - origin_m), faces=np.asarray(faces, np.int64),
                           vertex_colors=colors, process=False)  # fmt: skip


def _box_mesh(corners_m: np.ndarray, front_rgb: Sequence[int], back_rgb: Sequence[int], origin_m: np.ndarray) -> Any:
    """A box from its 8 corners (8, 3) (`box_corners` order): front colour on 0, 1, 4, 5."""
    colors = np.array([front_rgb if k in (0, 1, 4, 5) else back_rgb for k in range(8)], dtype=np.uint8)
    return _mesh(corners_m, np.array(BOX_FACES), colors, origin_m)


class _SceneBuilder:
    """Adds named nodes (unique, path-like names) to a trimesh Scene under `avsim_world`."""

    def __init__(self, origin_m: np.ndarray) -> None:
        import trimesh

        self.scene = trimesh.Scene()
        self.origin_m = origin_m
        root = np.eye(4)
        root[:3, 3] = to_gltf_axes(origin_m)[0]
        self.scene.graph.update(frame_to="avsim_world", frame_from=self.scene.graph.base_frame, matrix=root)
        self.names: set[str] = {"avsim_world"}

    def group(self, name: str) -> str:
        """Ensure group node `name` (and its parents, split on '/') exists; returns it."""
        if name not in self.names:
            parent = name.rsplit("/", 1)[0] if "/" in name else "avsim_world"
            self.scene.graph.update(frame_to=name, frame_from=self.group(parent) if "/" in name else parent)
            self.names.add(name)
        return name

    def add(self, name: str, geometry: Any) -> str:
        """Add `geometry` as node `name` (suffix `#k` when taken); returns the node name."""
        unique, k = name, 1
        while unique in self.names:
            unique, k = f"{name}#{k}", k + 1
        parent = unique.rsplit("/", 1)[0]
        parent = self.group(parent) if "/" in unique else "avsim_world"
        self.scene.add_geometry(geometry, node_name=unique, geom_name=unique, parent_node_name=parent)
        self.names.add(unique)
        return unique


def _add_map(b: _SceneBuilder, hdmap: HDMap) -> int:
    """Map elements as nodes `map/<type>/<id>`; returns the number of element nodes."""
    lift = np.array([0.0, 0.0, LINE_LIFT_M])
    n = 0
    ll = hdmap.lane_lines
    for k in range(len(ll)):
        b.add(f"map/lane_lines/{ll.ids[k]}", _lines([ll.lines[k] + lift], style.lane_style(ll.lane_type(k)).rgb, b.origin_m))
        n += 1
    for kind in LINE_TYPES:
        elements = getattr(hdmap, kind)
        for k in range(len(elements)):
            b.add(f"map/{kind}/{elements.ids[k]}", _lines([elements[k] + lift], LINE_RGB[kind], b.origin_m))
            n += 1
    for kind in ("drivable_areas", "road_markings", "crosswalks"):
        elements = getattr(hdmap, kind)
        for k in range(len(elements)):
            ring = np.asarray(elements[k]) + np.array([0.0, 0.0, FILL_LIFT_M[kind]])
            tris = triangulate_polygon(ring)
            if not len(tris):
                continue
            verts = tris.reshape(-1, 3)
            node = b.add(f"map/{kind}/{elements.ids[k]}", _mesh(verts, np.arange(len(verts)).reshape(-1, 3), _rgba(FILL_RGB[kind], len(verts))[:, :3], b.origin_m))
            n += 1
            if kind == "crosswalks":
                b.add(f"{node}/outline", _lines([np.r_[elements[k], elements[k][:1]] + lift], FILL_RGB[kind], b.origin_m))
    signs = hdmap.traffic_signs
    for k, corners in enumerate(signs.corners_m() if len(signs) else []):
        b.add(f"map/traffic_signs/{signs.ids[k]}", _box_mesh(corners, style.TRAFFIC_SIGN_RGB, style.TRAFFIC_SIGN_RGB, b.origin_m))
        n += 1
    return n


def _agents_at(scenario: Scenario, times_ns: np.ndarray) -> list[AgentTracks]:
    """The agents' rows at each time (K,) (linear interpolation within each track, no extrapolation)."""
    if not len(scenario.agents):
        return [scenario.agents for _ in times_ns]
    rows = scenario.agents.resample(np.asarray(times_ns, dtype=np.int64), max_extrapolation_s=0.0)
    return [rows.select(rows.timestamps_ns == t) for t in times_ns]


def frustum_corners_m(scenario: Scenario, t_ns: int) -> np.ndarray:
    """Camera frustums at the rig mounting in the world frame.

    Args:
        scenario: the scenario (rig and ego trajectory).
        t_ns: absolute time, int ns.

    Returns:
        (V, 5, 3) per camera: its centre, then the points FRUSTUM_DEPTH_M along the rays of
        the image corners (0, 0), (w, 0), (w, h), (0, h).
    """
    world_SE3_ego = scenario.ego.pose_at(np.array([t_ns]))[0]
    out = np.zeros((len(scenario.rig), 5, 3))
    for v, cam in enumerate(scenario.rig.cameras):
        w, h = float(cam.width_px), float(cam.height_px)
        rays = np.asarray(cam.pixel_to_ray(np.array([[0.0, 0.0], [w, 0.0], [w, h], [0.0, h]])), dtype=np.float64)
        if not np.all(np.isfinite(rays)):  # corners outside a fisheye model: a pinhole of its horizontal fov
            half = np.tan(min(float(cam.horizontal_fov_rad), np.deg2rad(170.0)) / 2)
            rays = np.array([[-half, -half * h / w, 1.0], [half, -half * h / w, 1.0], [half, half * h / w, 1.0], [-half, half * h / w, 1.0]])
        rays = rays / np.linalg.norm(rays, axis=1, keepdims=True) * FRUSTUM_DEPTH_M
        world_SE3_camera = world_SE3_ego.compose(scenario.rig.ego_SE3_camera[v])
        out[v] = world_SE3_camera.apply(np.r_[np.zeros((1, 3)), rays])
    return out


def ego_box_corners_m(scenario: Scenario, t_ns: int) -> np.ndarray:
    """The ego's box corners (8, 3) in the world frame at `t_ns` (`box_corners` order)."""
    size, offset = ego_box(scenario)
    pose = scenario.ego.pose_at(np.array([t_ns]))[0]
    centre = pose.apply(np.array([offset, 0.0, size[2] / 2]))
    return box_corners(centre[None], np.array([size]), matrix_to_quat(pose.rotation)[None])[0]


def _add_time_step(b: _SceneBuilder, scenario: Scenario, t_ns: int, agents: AgentTracks, prefix: str) -> tuple[int, int]:
    """Agents (their rows at `t_ns`), lights, ego box and camera frustums under `prefix`; returns (agents, cameras)."""
    classes = np.asarray(agents.object_class)
    for i, corners in enumerate(agents.corners_m() if len(agents) else []):
        front, back = style.BOX_RGB.get(str(classes[i]), style.BOX_RGB["Others"])
        b.add(f"{prefix}agents/{agents.track_id[i]}", _box_mesh(corners, front, back, b.origin_m))
    lights = scenario.map.traffic_lights
    if len(lights):
        states = scenario.lights.state_at(np.asarray(lights.ids), t_ns)
        for k, corners in enumerate(lights.corners_m()):
            rgb = style.TRAFFIC_LIGHT_RGB.get(str(states[k]), style.TRAFFIC_LIGHT_RGB["unknown"])
            b.add(f"{prefix}lights/{lights.ids[k]}", _box_mesh(corners, rgb, rgb, b.origin_m))
    b.add(f"{prefix}ego/box", _box_mesh(ego_box_corners_m(scenario, t_ns), EGO_RGB, EGO_RGB, b.origin_m))
    frusta = frustum_corners_m(scenario, t_ns)
    for name, f in zip(scenario.rig.names, frusta):
        strips = [f[[0, 1]], f[[0, 2]], f[[0, 3]], f[[0, 4]], f[[1, 2, 3, 4, 1]]]
        b.add(f"{prefix}cameras/{name}", _lines(strips, FRUSTUM_RGB, b.origin_m))
    return len(agents), len(frusta)


def build_scene(scenario: Scenario, times_s: Sequence[float],
                progress: Callable[[int, int], None] | None = None) -> tuple[Any, ExportSummary]:  # fmt: skip
    """The trimesh Scene of a scenario at the given times (see the module docstring).

    Args:
        scenario: the scenario.
        times_s: (K,) seconds from the scenario start; one time gives unprefixed per-time nodes.
        progress: called with (steps done, K) after each time step.

    Returns:
        The scene and its summary (size_bytes 0: not exported yet).
    """
    origin_m = np.r_[np.round(np.asarray(scenario.ego.world_SE3_ego.translation)[0, :2]), 0.0]
    b = _SceneBuilder(origin_m)
    map_nodes = _add_map(b, scenario.map)
    ego_xyz = np.asarray(scenario.ego.world_SE3_ego.translation)
    if len(ego_xyz) >= 2:
        b.add("ego/path", _lines([ego_xyz], EGO_RGB, origin_m))
    agent_nodes = camera_nodes = 0
    times_ns = np.array([scenario.start_ns + int(round(t_s * 1e9)) for t_s in times_s], dtype=np.int64)
    for i, (t_s, t_ns, agents) in enumerate(zip(times_s, times_ns, _agents_at(scenario, times_ns))):
        prefix = "" if len(times_s) == 1 else f"t={t_s:.2f}s/"
        n_agents, n_cameras = _add_time_step(b, scenario, int(t_ns), agents, prefix)
        agent_nodes, camera_nodes = agent_nodes + n_agents, camera_nodes + n_cameras
        if progress is not None:
            progress(i + 1, len(times_s))
    return b.scene, ExportSummary(tuple(float(t) for t in times_s), map_nodes, agent_nodes, camera_nodes, 0)


def glb_bytes(scene: Any, extras: dict[str, Any]) -> bytes:
    """The GLB (glTF 2.0 binary) of a trimesh scene with `extras` in `asset.extras`.

    Args:
        scene: a trimesh Scene.
        extras: JSON-serialisable values stored as ``asset.extras``.

    Returns:
        The file's bytes (same scene and extras -> same bytes).
    """
    from trimesh.exchange.gltf import export_glb

    def add_extras(tree: dict[str, Any]) -> None:
        tree["asset"]["extras"] = extras

    return bytes(export_glb(scene, include_normals=False, tree_postprocessor=add_extras))


def export_scene(scenario: Scenario, out: str | os.PathLike[str], times_s: Sequence[float],
                 progress: Callable[[int, int], None] | None = None) -> ExportSummary:  # fmt: skip
    """Write the scenario's GLB atomically (see the module docstring for its content).

    Args:
        scenario: the scenario.
        out: the .glb path.
        times_s: (K,) seconds from the scenario start (`select_times_s`).
        progress: called with (steps done, K) after each time step.

    Returns:
        The summary, with the file size.
    """
    scene, summary = build_scene(scenario, times_s, progress)
    extras = {"avsim": {"scenario_id": scenario.scenario_id, "axes": AXES_NOTE, "units": "m",
                        "times_s": [round(t, 6) for t in summary.times_s],
                        "time_origin": "seconds from the scenario start (the ego's first timestamp)",
                        "root_translation": "avsim_world holds the world origin of the float32 vertices"}}  # fmt: skip
    data = glb_bytes(scene, extras)
    with output_errors(Path(out).parent), atomic_output_path(out) as tmp:  # a read-only or full folder: one line
        tmp.write_bytes(data)
    return ExportSummary(summary.times_s, summary.map_nodes, summary.agent_nodes, summary.camera_nodes, len(data))
