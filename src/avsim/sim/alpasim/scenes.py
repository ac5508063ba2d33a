"""The scenes `avsim serve sensorsim` serves and how one frame of a scene is drawn for any camera.

`SceneCatalog` finds the scenario folders under SCENARIOS (the folder itself when it holds a
scenario.json, else its sub-folders that do), names each scene by its `scenario_id` and loads a
scene when it is first asked for, keeping the `max_loaded` most recent.

`LoadedScene.render` draws one control image as `avsim render` does (the same static world,
culling, primitives and rasteriser; `avsim.sim.render_source.world_objects` / `camera_image`),
for the camera the request describes, placed where the request puts it, with the request's boxes:

- each dynamic object is drawn as its track's box (size at the frame time, as `avsim render`
  interpolates it; class colour) at the request's pose (the box centre, local frame), in
  track-id order; a box holding the camera's position is not drawn (the ego's own);
- the map is cut around the camera and the lights take their states at the frame time;
- global shutter (or a zero exposure): the camera, the boxes and the lights at the exposure's
  middle (poses interpolated between the request's start and end poses: linear translation,
  SLERP rotation); rolling shutter: the image is composed of `bands` strips across the readout
  direction, each drawn at its own time in the exposure (a strip's rows or columns share one
  pose: an approximation of a per-row readout that is exact at the strip centres).

The server's threads share the scenes: drawing only reads a loaded scene, the catalog loads a
scene under a lock of its own, and the ray maps come from the caller (the server's
`avsim.sim.alpasim.scheduling.RayMapCache`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from avsim.core.agents import box_corners, collapse_class
from avsim.core.cameras import Camera
from avsim.core.errors import AvsimInputError
from avsim.core.safe_json import read_json
from avsim.core.transforms import SE3, matrix_to_quat, quat_slerp, quat_to_matrix
from avsim.core.typing import NDArrayByte, NDArrayFloat, NDArrayFloat32
from avsim.render import style
from avsim.render.geometry import projection as geo
from avsim.render.geometry.agents import AgentRows, drawn_rows
from avsim.render.geometry.scene import MAP_REACH_M
from avsim.render.geometry.static_world import build_static_world
from avsim.render.raster.primitives import ray_map
from avsim.scenario import Scenario
from avsim.sim.alpasim.frames import LocalFrame
from avsim.sim.render_source import camera_image, static_spheres, world_objects

__all__ = ["FrameRequest", "LoadedScene", "SceneCatalog", "Shutter", "UnknownScene"]

SCENARIO_JSON = "scenario.json"
MAX_SCENARIO_JSON_BYTES = 64 * 1024 * 1024


class UnknownScene(LookupError):
    """No scene of that id (`str()`: which, and what there is)."""


class OutOfRange(ValueError):
    """A time outside the scene's span (`str()`: which, and the span)."""


class Shutter:
    """The readout of a `FrameRequest`: global, or rolling along one of four directions (AlpaSim's `ShutterType` numbers)."""

    GLOBAL = 0
    TOP_TO_BOTTOM = 1
    LEFT_TO_RIGHT = 2
    BOTTOM_TO_TOP = 3
    RIGHT_TO_LEFT = 4


@dataclass(frozen=True)
class FrameRequest:
    """One image to draw: the camera model at its image size; its world pose at the exposure's start
    and end; the exposure (ns); the boxes as track ids with world poses at start and end; the readout."""

    camera: Camera
    start_pose: SE3
    end_pose: SE3
    start_ns: int
    end_ns: int
    track_ids: tuple[str, ...]
    box_start: tuple[SE3, ...]
    box_end: tuple[SE3, ...]
    shutter: int = Shutter.GLOBAL


def _still(req: FrameRequest) -> bool:
    """Whether nothing moves during the exposure (no time passes and the camera keeps its pose)."""
    return req.start_ns == req.end_ns and np.array_equal(req.start_pose.as_matrix(), req.end_pose.as_matrix())


def _lerp_pose(a: SE3, b: SE3, w: float) -> SE3:
    if w == 0.0:
        return a
    q = quat_slerp(matrix_to_quat(a.rotation), matrix_to_quat(b.rotation), w)
    return SE3(quat_to_matrix(q), a.translation + w * (b.translation - a.translation))


class LoadedScene:
    """One scenario ready to draw (see the module docstring).

    Args:
        scenario: the scenario.
        backend: numba or torch.
        antialias: 4x MSAA on edges (`avsim render`'s default).
        bands: strips of a rolling-shutter image.
    """

    def __init__(self, scenario: Scenario, backend: str = "numba", antialias: bool = True, bands: int = 8) -> None:
        self.scenario, self.backend, self.antialias, self.bands = scenario, backend, antialias, max(int(bands), 1)
        self.frame = LocalFrame.of(scenario)
        self.static = build_static_world(scenario.map)
        self.spheres = static_spheres(self.static)
        agents = scenario.agents
        ids = agents.track_id
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ids) else np.zeros(0, int)
        ends = np.r_[starts[1:], len(ids)]
        self.tracks = {str(ids[a]): (int(a), int(b)) for a, b in zip(starts, ends)}

    def check_time(self, t_ns: int, field: str) -> None:
        """OutOfRange unless the scene's span holds `t_ns`."""
        s = self.scenario
        if not s.start_ns <= t_ns <= s.end_ns:
            raise OutOfRange(f"{field}: {t_ns // 1000} us is outside scene {s.scenario_id!r} ({s.start_ns // 1000} to {s.end_ns // 1000} us)")

    def box_rows(self, track_ids: tuple[str, ...], poses: tuple[SE3, ...], t_ns: int) -> AgentRows:
        """AgentRows of the named tracks at `poses` (track-id order); KeyError naming an unknown track."""
        a = self.scenario.agents
        order = sorted(range(len(track_ids)), key=lambda i: track_ids[i])
        if not order:
            return AgentRows.empty()
        size, classes = np.zeros((len(order), 3)), []
        for j, i in enumerate(order):
            lo, hi = self.tracks[track_ids[i]]
            ts = a.timestamps_ns[lo:hi]
            size[j] = [np.interp(t_ns, ts, a.size_m[lo:hi, k]) for k in range(3)]  # clamped: sizes never extrapolated
            classes.append(collapse_class(str(a.source_class[lo])))
        centre = np.stack([poses[i].translation for i in order])
        quat = np.stack([matrix_to_quat(poses[i].rotation) for i in order])
        front = np.array([style.BOX_RGB[c][0] for c in classes], float)
        back = np.array([style.BOX_RGB[c][1] for c in classes], float)
        return AgentRows(np.full(len(order), t_ns, np.int64), box_corners(centre, size, quat), front, back, size.min(axis=1),
                         size.max(axis=1), centre[:, :2], np.array([track_ids[i] for i in order]))  # fmt: skip

    def _draw(self, req: FrameRequest, rays: NDArrayFloat32, w: float) -> NDArrayByte:
        """The whole image at the exposure fraction `w` (0: start, 1: end)."""
        t_ns = int(round(req.start_ns + w * (req.end_ns - req.start_ns)))
        world_SE3_cam = _lerp_pose(req.start_pose, req.end_pose, w)
        boxes = tuple(_lerp_pose(a, b, w) for a, b in zip(req.box_start, req.box_end))
        rows = self.box_rows(req.track_ids, boxes, t_ns)
        centre = world_SE3_cam.translation[:2]
        keep = drawn_rows(rows, centre, MAP_REACH_M) if len(rows.t) else np.zeros(0, bool)
        rows = AgentRows(*(getattr(rows, f.name)[keep] for f in fields(AgentRows)))
        objects, spheres, starts = world_objects(self.static, self.spheres, centre, lambda ids: self.scenario.lights.state_at(ids, t_ns).tolist(),
                                                 rows.corners, rows.front, rows.back, rows.min_size)  # fmt: skip
        cone = geo.cone_half_angle_rad(req.camera)
        return camera_image(req.camera, cone, rays, world_SE3_cam, objects, spheres, starts, self.backend, self.antialias)

    def is_rolling(self, req: FrameRequest) -> bool:
        """Whether the request's image is composed of strips (a rolling shutter over a moving exposure)."""
        return not (req.shutter == Shutter.GLOBAL or _still(req) or self.bands == 1)

    def render(self, req: FrameRequest, rays: NDArrayFloat32 | None = None, check: Callable[[], None] | None = None) -> NDArrayByte:
        """The request's control image (see the module docstring).

        Args:
            req: the camera, its poses, the exposure, the boxes, the readout.
            rays: the camera's ray map (`ray_map`; None: made here).
            check: called between strips (it may raise to stop the work).

        Returns:
            (H, W, 3) uint8 RGB.
        """
        rays = ray_map(req.camera) if rays is None else rays
        if not self.is_rolling(req):
            return self._draw(req, rays, 0.0 if _still(req) else 0.5)
        h, w = req.camera.height_px, req.camera.width_px
        across = h if req.shutter in (Shutter.TOP_TO_BOTTOM, Shutter.BOTTOM_TO_TOP) else w
        edges = np.linspace(0, across, min(self.bands, across) + 1).round().astype(int)
        out = np.zeros((h, w, 3), np.uint8)
        reverse = req.shutter in (Shutter.BOTTOM_TO_TOP, Shutter.RIGHT_TO_LEFT)
        for a, b in zip(edges[:-1], edges[1:]):
            if check is not None:
                check()
            frac = ((a + b) / 2) / across
            image = self._draw(req, rays, 1.0 - frac if reverse else frac)
            if req.shutter in (Shutter.TOP_TO_BOTTOM, Shutter.BOTTOM_TO_TOP):
                out[a:b] = image[a:b]
            else:
                out[:, a:b] = image[:, a:b]
        return out


class SceneCatalog:
    """The scenes under a folder, loaded on demand (see the module docstring).

    Args:
        root: a scenario folder, or a folder of scenario folders.
        max_loaded: scenes kept loaded at once.
        backend, antialias, bands: how scenes draw (`LoadedScene`).
    """

    def __init__(self, root: Path, max_loaded: int = 4, backend: str = "numba", antialias: bool = True, bands: int = 8) -> None:
        root = Path(root)
        if not root.is_dir():
            raise AvsimInputError(root, "SCENARIOS", "is not a folder")
        folders = [root] if (root / SCENARIO_JSON).is_file() else sorted(p for p in root.iterdir() if (p / SCENARIO_JSON).is_file())
        if not folders:
            raise AvsimInputError(root, "SCENARIOS", f"holds no scenario (a folder with {SCENARIO_JSON}, or sub-folders with one)")
        self.folders: dict[str, Path] = {}
        for folder in folders:
            doc = read_json(folder / SCENARIO_JSON, "scenario_id", MAX_SCENARIO_JSON_BYTES)
            sid = str(doc.get("scenario_id", "")) if isinstance(doc, dict) else ""
            if not sid:
                raise AvsimInputError(folder / SCENARIO_JSON, "scenario_id", "missing")
            if sid in self.folders:
                raise AvsimInputError(folder / SCENARIO_JSON, "scenario_id", f"{sid!r} is also the id of {self.folders[sid]}")
            self.folders[sid] = folder
        self.max_loaded, self.backend, self.antialias, self.bands = max(int(max_loaded), 1), backend, antialias, bands
        self._loaded: OrderedDict[str, LoadedScene] = OrderedDict()
        self._lock = threading.Lock()  # the loaded scenes' order; a scene loads under its own lock (`_loading`)
        self._loading: dict[str, threading.Lock] = {}

    @property
    def scene_ids(self) -> list[str]:
        return sorted(self.folders)

    @property
    def loaded_ids(self) -> list[str]:
        """The scenes loaded now, least recently used first."""
        with self._lock:
            return list(self._loaded)

    def scene(self, scene_id: str) -> LoadedScene:
        """The loaded scene (UnknownScene when there is none of that id). Thread-safe: a scene being
        loaded keeps the requests for it waiting, not those for other scenes."""
        if scene_id not in self.folders:
            shown = ", ".join(self.scene_ids[:5]) + (" ..." if len(self.folders) > 5 else "")
            raise UnknownScene(f"scene_id: no scene {scene_id[:200]!r} (scenes: {shown})")
        with self._lock:
            if scene_id in self._loaded:
                self._loaded.move_to_end(scene_id)
                return self._loaded[scene_id]
            loading = self._loading.setdefault(scene_id, threading.Lock())
        with loading:
            with self._lock:
                if scene_id in self._loaded:
                    return self._loaded[scene_id]
            from avsim.scenario.io import load_scenario

            scene = LoadedScene(load_scenario(self.folders[scene_id]), self.backend, self.antialias, self.bands)
            with self._lock:
                self._loaded[scene_id] = scene
                self._loading.pop(scene_id, None)
                while len(self._loaded) > self.max_loaded:
                    self._loaded.popitem(last=False)
        return scene


def local_poses(scene: LoadedScene) -> tuple[NDArrayFloat, SE3]:
    """The scene's logged ego as (timestamps (T,) ns, local->rig poses (T,))."""
    ego = scene.scenario.ego
    return ego.timestamps_ns, scene.frame.to_local(ego.pose_at(ego.timestamps_ns))
