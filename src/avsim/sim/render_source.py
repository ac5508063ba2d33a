"""Camera frames of the simulated world: the rig's world-scenario control frames, rendered in memory.

`RenderedControlSource` keeps one `avsim.render.geometry.scene.SceneRenderer` for the episode's
scenario (its static world of painted map segments, triangles and sign/light cuboids, the rig at
the requested size, the cameras' ray maps) and, at every step, builds the frame's objects from the
simulated state instead of the log: the map within reach of the simulated ego, lights coloured by
their state at the step, and the simulated boxes (not the ego's own) in the spec's class colours.
Each camera is placed on the simulated ego pose (every camera at the step time: the rig's capture
offsets are not applied), culled and rasterised by the renderer's public functions, the numba or
torch backend; cameras run on a thread pool (the numba kernels release the GIL). Nothing is encoded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from avsim.core.agents import box_corners
from avsim.core.cameras import Camera
from avsim.core.rig import CameraRig
from avsim.core.transforms import SE3, yaw_to_quat
from avsim.core.typing import NDArrayByte, NDArrayFloat, NDArrayFloat32
from avsim.render import style
from avsim.render.geometry import cull
from avsim.render.geometry import projection as geo
from avsim.render.geometry.camera import FrameObjects, camera_primitives
from avsim.render.geometry.scene import MAP_REACH_M, SceneRenderer
from avsim.render.geometry.static_world import StaticWorld
from avsim.render.raster.draw import rasterize
from avsim.render.run.plan import RenderPlan
from avsim.sim.boxes import Boxes
from avsim.sim.geometry import point_in_boxes
from avsim.sim.observation import EpisodeInfo, FrameState


class RenderedControlSource:
    """Control frames of the requested cameras at every step (see the module docstring).

    Args:
        cameras: camera names of the scenario's rig (None: all).
        size: (width, height) of every image.
        backend: "numba" or "torch".
        antialias: 4x MSAA on edges (the render default).
        workers: threads rasterising cameras in parallel.
    """

    def __init__(self, cameras: tuple[str, ...] | None = None, size: tuple[int, int] = (1280, 720), backend: str = "numba",
                 antialias: bool = True, workers: int = 2) -> None:  # fmt: skip
        self.requested, self.size, self.backend, self.antialias = cameras, size, backend, antialias
        self.workers = max(int(workers), 1)
        self.camera_names: tuple[str, ...] = cameras or ()
        self._renderer: SceneRenderer | None = None
        self._pool: ThreadPoolExecutor | None = None

    def reset(self, episode: EpisodeInfo) -> None:
        if self._renderer is None or self._renderer.scenario is not episode.scenario:
            plan = RenderPlan.for_sensors(episode.scenario, self.requested, self.size)  # a render's cameras and sizes
            self._renderer = SceneRenderer(episode.scenario, rig=plan.rig, cameras=plan.cameras, sizes=plan.sizes_px,
                                           backend=self.backend, antialias=self.antialias)  # fmt: skip
            self._renderer.prepare_rays(self._renderer.camera_names)
            self._cones = [geo.cone_half_angle_rad(c) for c in self._renderer.rig.cameras]
            self._static_spheres = static_spheres(self._renderer.static)
        self.camera_names = self._renderer.camera_names
        if self._pool is None and self.workers > 1 and self.backend == "numba":
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="avsim-sim-render")

    @property
    def rig(self) -> CameraRig:
        """The rendered cameras at the image size (after `reset`)."""
        assert self._renderer is not None, "call reset() first"
        return self._renderer.rig

    def objects(self, state: FrameState) -> tuple[FrameObjects, cull.Spheres, tuple[int, ...]]:
        """The step's world-frame objects, their bounding spheres and where each kind starts among them."""
        assert self._renderer is not None
        centre = state.world_SE3_ego.translation[:2]
        boxes = _drawn(state.boxes.sorted(), centre)
        corners = box_corners(boxes.center_m, boxes.size_m, yaw_to_quat(boxes.yaw_rad)) if len(boxes) else np.zeros((0, 8, 3))
        front = np.array([style.BOX_RGB[c][0] for c in boxes.object_class], float).reshape(-1, 3)
        back = np.array([style.BOX_RGB[c][1] for c in boxes.object_class], float).reshape(-1, 3)
        min_size = boxes.size_m.min(axis=1) if len(boxes) else np.zeros(0)
        return world_objects(self._renderer.static, self._static_spheres, centre, lambda ids: [state.lights.get(str(i), "unknown") for i in ids],
                             corners, front, back, min_size)  # fmt: skip

    def _camera(self, i: int, pose: SE3, objects: FrameObjects, spheres: cull.Spheres, starts: tuple[int, ...]) -> NDArrayByte:
        assert self._renderer is not None
        r = self._renderer
        return camera_image(r.rig.cameras[i], self._cones[i], r.rays(i), pose.compose(r.rig.ego_SE3_camera[i]), objects, spheres, starts,
                            self.backend, self.antialias)  # fmt: skip

    def frames(self, state: FrameState) -> dict[str, NDArrayByte]:
        """Every requested camera's control image of the step."""
        assert self._renderer is not None
        objects, spheres, starts = self.objects(state)
        n = len(self._renderer.rig)
        if self._pool is not None:
            images = list(self._pool.map(lambda i: self._camera(i, state.world_SE3_ego, objects, spheres, starts), range(n)))
        else:
            images = [self._camera(i, state.world_SE3_ego, objects, spheres, starts) for i in range(n)]
        return dict(zip(self._renderer.camera_names, images))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


StaticSpheres = tuple[cull.Spheres, cull.Spheres, cull.Spheres]


def static_spheres(static: StaticWorld) -> StaticSpheres:
    """Bounding spheres of a static world's segments, triangles and cuboids (computed once per scene)."""
    return (cull.bounding_spheres(np.stack([static.seg_p0, static.seg_p1], 1)), cull.bounding_spheres(static.tri),
            cull.bounding_spheres(static.cub_corners))  # fmt: skip


def world_objects(static: StaticWorld, spheres: StaticSpheres, centre_xy: NDArrayFloat, light_states: Callable[[np.ndarray], Sequence[str]],
                  corners: NDArrayFloat, front: NDArrayFloat, back: NDArrayFloat, min_size: NDArrayFloat,
                  ) -> tuple[FrameObjects, cull.Spheres, tuple[int, ...]]:  # fmt: skip
    """One frame's world-frame objects, as `SceneRenderer` gathers them, for any boxes and light states.

    Args:
        static: the scene's painted map, triangles and sign/light cuboids.
        spheres: their bounding spheres (`static_spheres`).
        centre_xy: (2,) where the map is cut around (`MAP_REACH_M`).
        light_states: light ids (L,) -> their states.
        corners: (N, 8, 3) the drawn boxes' corners, in draw (track-id) order.
        front, back: (N, 3) their class colours.
        min_size: (N,) their smallest dimension.

    Returns:
        The objects, their bounding spheres, and where segments, triangles, cuboids and boxes start among the spheres.
    """
    seg_on, tri_on, cub_on = static.near(centre_xy, MAP_REACH_M)
    light_ids = static.cub_light_id[cub_on]
    rgb = static.cub_rgb[cub_on].copy()
    lit = light_ids != ""
    if lit.any():
        rgb[lit] = geo.traffic_light_rgb(list(light_states(light_ids[lit])))
    objects = FrameObjects(static.seg_p0[seg_on], static.seg_p1[seg_on], static.seg_rgb[seg_on], static.seg_width_px[seg_on], static.tri[tri_on],
                           static.tri_rgb[tri_on], static.cub_corners[cub_on], rgb, corners, front, back, min_size)  # fmt: skip
    seg_sph, tri_sph, cub_sph = spheres
    parts = [seg_sph.take(seg_on), tri_sph.take(tri_on), cub_sph.take(cub_on), cull.bounding_spheres(corners)]
    starts = tuple(int(x) for x in np.cumsum([0] + [len(p.radius_m) for p in parts]))
    return objects, cull.Spheres(np.concatenate([p.centre_m for p in parts]), np.concatenate([p.radius_m for p in parts])), starts


def camera_image(camera: Camera, cone_rad: float, rays: NDArrayFloat32, world_SE3_cam: SE3, objects: FrameObjects, spheres: cull.Spheres,
                 starts: tuple[int, ...], backend: str = "numba", antialias: bool = True) -> NDArrayByte:  # fmt: skip
    """One camera's control image of a frame's objects (culled to its view cone, rasterised).

    Args:
        camera: the camera model.
        cone_rad: its view cone's half angle (`projection.cone_half_angle_rad`).
        rays: its ray map (`raster.primitives.ray_map`).
        world_SE3_cam: where it is.
        objects, spheres, starts: the frame (`world_objects`).
        backend: numba or torch.
        antialias: 4x MSAA on edges.

    Returns:
        (H, W, 3) uint8 RGB.
    """
    kept = np.flatnonzero(cull.sphere_in_view(spheres, world_SE3_cam, cone_rad))
    cut = np.searchsorted(kept, starts)
    seg, tri, cub, box = (kept[cut[k] : cut[k + 1]] - starts[k] for k in range(4))
    prims = camera_primitives(camera, cone_rad, world_SE3_cam.inverse(), objects.take(seg, tri, cub, box), box)
    return rasterize(prims, rays, backend, antialias)


def _drawn(boxes: Boxes, centre_xy: np.ndarray) -> Boxes:
    """The boxes a frame draws: within reach, not holding the ego's position (as the renderer's `drawn_rows`)."""
    if not len(boxes):
        return boxes
    holds = point_in_boxes(centre_xy[None], boxes.center_m[:, :2], boxes.yaw_rad, boxes.size_m[:, 0], boxes.size_m[:, 1])
    reach = np.linalg.norm(boxes.center_m[:, :2] - centre_xy, axis=1) <= MAP_REACH_M + boxes.size_m.max(axis=1)
    return boxes.select(~holds & reach)
