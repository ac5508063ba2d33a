"""Scene + frame index -> one control image per camera.

`SceneRenderer` prepares everything that does not change over a clip once (map elements cut
into painted segments and triangles by `avsim.render.geometry.static_world`, their bounding spheres,
per-camera ray maps and view cones) and then, for each frame, gathers once for all cameras
the map elements within reach of the ego, the agent boxes (`avsim.render.geometry.agents`)
and the traffic-light states at that time (`FrameObjects`). Each camera sits on the ego pose
at its capture time (frame time + the rig's `capture_offset_ns`; see
`avsim.core.rig.world_SE3_camera_at`), keeps the objects whose bounding spheres may reach its
view cone (`avsim.render.geometry.cull`), turns them into camera-space primitives
(`avsim.render.geometry.camera.camera_primitives`) and rasterises them.

Draw order (ties only; occlusion is per pixel): static lines (lane lines, road boundaries,
wait lines, poles), static polygons (crosswalks, road markings), traffic lights and signs,
dynamic boxes in track-id order (faces, then edges).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from avsim.core.memory import release_free_heap
from avsim.core.rig import CameraRig, world_SE3_camera_at
from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayByte, NDArrayFloat32, NDArrayInt, NDArrayInt32
from avsim.render import style
from avsim.render.geometry import cull
from avsim.render.geometry import projection as geo
from avsim.render.geometry.agents import AgentRows, drawn_rows, resample_rows
from avsim.render.geometry.camera import FrameObjects, camera_primitives, render_objects
from avsim.render.geometry.static_world import StaticWorld, build_static_world, triangulate_polygon
from avsim.render.raster.draw import new_id_stats, rasterize, rasterize_numba, rasterize_torch
from avsim.render.raster.primitives import Primitives, ray_map
from avsim.scenario import Scenario

__all__ = [
    "AgentRows",  # lives in avsim.render.geometry.agents
    "FrameObjects",  # these three live in avsim.render.geometry.camera
    "camera_primitives",
    "render_objects",
    "SceneRenderer",
    "StaticWorld",  # these three live in avsim.render.geometry.static_world
    "build_static_world",
    "triangulate_polygon",
]

MAP_REACH_M = style.MAX_DEPTH_M + 15.0  # cameras sit a few metres from the ego origin
AGENT_BLOCK_FRAMES = 64  # agents are resampled this many frames at a time (bounded memory)


@dataclass(frozen=True)
class _FrameWork:
    """The world-space work of one frame, shared by its cameras."""

    frame_index: int
    world_SE3_ego: SE3
    objects: FrameObjects
    spheres: cull.Spheres  # of the segments, triangles, cuboids, then boxes of `objects`
    starts: tuple[int, ...]  # (5,): where each of those four parts starts in `spheres`, then the end
    box_track_ids: npt.NDArray[np.str_]  # (N,) track ids of the drawn boxes (object ids 0..N-1)


class SceneRenderer:
    """Render a scenario's frames through a camera rig.

    rig: the scenario's own rig by default, or any other (e.g. `cosmos_rig()`) placed on the
    same ego; cameras: a subset of its names (default all); size: (width, height) every camera
    is re-imaged to, or sizes: one (width, height) per camera (in `cameras` order; `sizes.camera_sizes`),
    which wins over `size`; fps: render rate from the scenario's frame 0; backend: ``numba`` or ``torch``;
    antialias: 4x MSAA on edges.
    """

    def __init__(
        self,
        scenario: Scenario,
        rig: CameraRig | None = None,
        cameras: list[str] | tuple[str, ...] | None = None,
        size: tuple[int, int] = (style.DEFAULT_WIDTH_PX, style.DEFAULT_HEIGHT_PX),
        fps: float = style.DEFAULT_FPS,
        backend: str = "numba", antialias: bool = True, sizes: tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        rig = scenario.rig if rig is None else rig
        if cameras is not None:
            rig = rig.subset(list(cameras))
        self.scenario = scenario
        self.rig = rig.resize_each(sizes) if sizes is not None else rig.resize(int(size[0]), int(size[1]))
        self.fps = float(fps)
        self.backend, self.antialias = backend, antialias
        self.timestamps_ns = scenario.frame_times(self.fps)  # lazy: only the frames rendered are made
        self.static = build_static_world(scenario.map)
        s = self.static
        self._static_spheres = (cull.bounding_spheres(np.stack([s.seg_p0, s.seg_p1], 1)), cull.bounding_spheres(s.tri),
                                cull.bounding_spheres(s.cub_corners))  # fmt: skip
        self._rays: dict[int, NDArrayFloat32] = {}
        self._cones = [geo.cone_half_angle_rad(c) for c in self.rig.cameras]
        self._agent_block: tuple[int, AgentRows] | None = None
        self._ego_block: tuple[int, SE3] | None = None
        self._work: _FrameWork | None = None

    def rays(self, camera_index: int) -> NDArrayFloat32:
        """The camera's ray map (computed on first use, then kept).

        Args:
            camera_index: index into the rig.

        Returns:
            (H, W, 2) float32 (x/z, y/z) per pixel (see `raster.ray_map`).
        """
        if camera_index not in self._rays:
            self._rays[camera_index] = ray_map(self.rig.cameras[camera_index])
        return self._rays[camera_index]

    def prepare_rays(self, cameras: list[str] | tuple[str, ...]) -> None:
        """Build the ray maps of `cameras` now and hand their builders' freed temporaries back to the OS.

        A long-lived worker calls this before it opens encoders: the temporaries of a 1080p ray
        map (30-50 MB arrays) would otherwise stay resident beside them (`avsim.core.memory`).
        Maps already built are kept; then nothing is done.

        Args:
            cameras: camera names of the rig.
        """
        todo = [i for i in (self.rig.index(c) for c in cameras) if i not in self._rays]
        for i in todo:
            self.rays(i)
        if todo:
            release_free_heap()

    @property
    def camera_names(self) -> tuple[str, ...]:
        """Names of the rendered cameras, in rig order."""
        return self.rig.names

    @property
    def n_frames(self) -> int:
        """Frames of the clip at the render rate."""
        return len(self.timestamps_ns)

    def _agent_rows(self, frame_index: int) -> AgentRows:
        """Box arrays of the agents at one frame, in track-id order.

        Agents are resampled AGENT_BLOCK_FRAMES frames at a time and their corners and colours
        computed for the whole block at once (rows sorted by time, then track id), so a frame
        is a slice and memory does not grow with clip length.
        """
        block = frame_index // AGENT_BLOCK_FRAMES
        if self._agent_block is None or self._agent_block[0] != block:
            ts = self.timestamps_ns[block * AGENT_BLOCK_FRAMES : (block + 1) * AGENT_BLOCK_FRAMES]
            self._agent_block = (block, resample_rows(self.scenario.agents, ts))
        rows = self._agent_block[1]
        t = self.timestamps_ns[frame_index]
        lo, hi = np.searchsorted(rows.t, [t, t + 1])
        return rows.rows(int(lo), int(hi))

    def _world_SE3_ego(self, frame_index: int) -> SE3:
        """The ego pose at a frame: poses are interpolated AGENT_BLOCK_FRAMES frames at a time (one
        `pose_at` call per block instead of one per frame; the same values row by row)."""
        block = frame_index // AGENT_BLOCK_FRAMES
        if self._ego_block is None or self._ego_block[0] != block:
            ts = self.timestamps_ns[block * AGENT_BLOCK_FRAMES : (block + 1) * AGENT_BLOCK_FRAMES]
            self._ego_block = (block, self.scenario.ego.pose_at(np.asarray(ts)))
        return self._ego_block[1][frame_index - block * AGENT_BLOCK_FRAMES]

    def frame_objects(self, frame_index: int) -> tuple[SE3, FrameObjects]:
        """The ego pose and the world-frame objects of one frame (culled to the ego's reach).

        Args:
            frame_index: frame at the render rate.

        Returns:
            world_SE3_ego (one SE3) and the frame's objects.
        """
        work = self._frame_work(frame_index)
        return work.world_SE3_ego, work.objects

    def _frame_work(self, frame_index: int) -> _FrameWork:
        """The frame's world-space work (kept for the last frame asked for)."""
        if self._work is not None and self._work.frame_index == frame_index:
            return self._work
        t_ns = int(self.timestamps_ns[frame_index])
        world_SE3_ego = self._world_SE3_ego(frame_index)
        centre = world_SE3_ego.translation[:2]
        seg_on, tri_on, cub_on = self.static.near(centre, MAP_REACH_M)
        s = self.static
        light_ids = s.cub_light_id[cub_on]
        static_rgb = s.cub_rgb[cub_on].copy()
        is_light = light_ids != ""
        if is_light.any():
            states = self.scenario.lights.state_at(light_ids[is_light], t_ns)
            static_rgb[is_light] = geo.traffic_light_rgb(states)
        rows = self._agent_rows(frame_index)
        keep = drawn_rows(rows, centre, MAP_REACH_M)
        objects = FrameObjects(
            s.seg_p0[seg_on], s.seg_p1[seg_on], s.seg_rgb[seg_on], s.seg_width_px[seg_on],
            s.tri[tri_on], s.tri_rgb[tri_on], s.cub_corners[cub_on], static_rgb,
            rows.corners[keep], rows.front[keep], rows.back[keep], rows.min_size[keep],
        )  # fmt: skip
        seg_sph, tri_sph, cub_sph = self._static_spheres
        parts = [seg_sph.take(seg_on), tri_sph.take(tri_on), cub_sph.take(cub_on), cull.bounding_spheres(objects.box_corners)]
        starts = np.cumsum([0] + [len(p.radius_m) for p in parts])
        spheres = cull.Spheres(np.concatenate([p.centre_m for p in parts]), np.concatenate([p.radius_m for p in parts]))
        starts_t = tuple(int(x) for x in starts)
        self._work = _FrameWork(frame_index, world_SE3_ego, objects, spheres, starts_t, rows.track_id[keep])
        return self._work

    def box_track_ids(self, frame_index: int) -> npt.NDArray[np.str_]:
        """Track ids of the frame's drawn boxes: entry k is the object id k of `render_camera_ids`.

        Args:
            frame_index: frame at the render rate.

        Returns:
            (N,) str, in box (track-id) order (kept with the frame's shared world work).
        """
        return self._frame_work(frame_index).box_track_ids

    def render_camera_ids(self, frame_index: int, camera: str | int) -> tuple[NDArrayByte, NDArrayInt32, Primitives]:
        """One camera's image with its per-pixel object ids (numba backend only, whatever `backend` is).

        The image is byte-identical to `render_camera` with the numba backend.

        Args:
            frame_index: frame at the render rate.
            camera: camera name or index into the rig.

        Returns:
            (H, W, 3) uint8 RGB, (H, W) int32 object ids (index into `box_track_ids`, -1: no box)
            and the primitives they were rasterised from.
        """
        img, ids, prims, _ = self.render_camera_id_stats(frame_index, camera)
        return img, ids, prims

    def render_camera_id_stats(
        self, frame_index: int, camera: str | int, ids_out: NDArrayInt32 | None = None
    ) -> tuple[NDArrayByte, NDArrayInt32, Primitives, NDArrayInt]:
        """`render_camera_ids` and the id statistics of the same rasterisation (what labels read).

        Args:
            frame_index: frame at the render rate.
            camera: camera name or index into the rig.
            ids_out: optional (H, W) int32 buffer the ids are drawn into (a caller reusing one
                buffer for many images); None: a new one.

        Returns:
            As `render_camera_ids` (the ids in `ids_out` when given), then (N, 9) int64
            `raster.ID_STATS_COLUMNS` per object id (N = len(box_track_ids(frame_index))).
        """
        i = camera if isinstance(camera, int) else self.rig.index(camera)
        prims = self.camera_primitives(frame_index, i)
        cam = self.rig.cameras[i]
        ids = np.empty((cam.height_px, cam.width_px), np.int32) if ids_out is None else ids_out
        stats = new_id_stats(len(self.box_track_ids(frame_index)))
        img = rasterize_numba(prims, self.rays(i), ids_out=ids, antialias=self.antialias, id_stats_out=stats)
        return img, ids, prims, stats

    def camera_primitives(self, frame_index: int, camera_index: int) -> Primitives:
        """Camera-space primitives of one camera at one frame (the frame's world work is shared).

        Args:
            frame_index: frame at the render rate.
            camera_index: index into the rig.

        Returns:
            The primitives in draw order.
        """
        work = self._frame_work(frame_index)
        if self.rig.has_capture_offsets:  # each camera at its own capture time; objects stay at the frame time
            world_SE3_cam = self.world_SE3_camera(frame_index, camera_index)
        else:
            world_SE3_cam = work.world_SE3_ego.compose(self.rig.ego_SE3_camera[camera_index])
        cone = self._cones[camera_index]
        kept = np.flatnonzero(cull.sphere_in_view(work.spheres, world_SE3_cam, cone))
        cut = np.searchsorted(kept, work.starts)
        seg, tri, cub, box = (kept[cut[k] : cut[k + 1]] - work.starts[k] for k in range(4))
        objects = work.objects.take(seg, tri, cub, box)
        return camera_primitives(self.rig.cameras[camera_index], cone, world_SE3_cam.inverse(), objects, box)

    def world_SE3_camera(self, frame_index: int, camera_index: int) -> SE3:
        """Where camera `camera_index` is when it images frame `frame_index` (its capture time).

        Args:
            frame_index: frame at the render rate.
            camera_index: index into the rig.

        Returns:
            Unbatched SE3 camera -> world (`avsim.core.rig.world_SE3_camera_at`).
        """
        return world_SE3_camera_at(self.scenario.ego, self.rig, int(self.timestamps_ns[frame_index]), camera_index)

    def primitives(self, frame_index: int) -> list[Primitives]:
        """Camera-space primitives of every camera of one frame (its world work done once).

        Args:
            frame_index: frame at the render rate.

        Returns:
            One set of primitives per camera, in rig order.
        """
        return [self.camera_primitives(frame_index, i) for i in range(len(self.rig))]

    def render_camera(self, frame_index: int, camera: str | int) -> NDArrayByte:
        """One camera's image at one frame.

        Args:
            frame_index: frame at the render rate.
            camera: camera name or index into the rig.

        Returns:
            (H, W, 3) uint8 RGB.
        """
        i = camera if isinstance(camera, int) else self.rig.index(camera)
        return rasterize(self.camera_primitives(frame_index, i), self.rays(i), self.backend, self.antialias)

    def render_frame(self, frame_index: int) -> dict[str, NDArrayByte]:
        """Every camera's image at one frame, the frame's world-space work done once for all of them
        (torch backend: all cameras rasterised as one batch).

        Args:
            frame_index: frame at the render rate.

        Returns:
            Camera name -> (H, W, 3) uint8 RGB, byte-identical to `render_camera` for each camera.
        """
        prims = self.primitives(frame_index)
        if self.backend == "torch":
            images = rasterize_torch(prims, [self.rays(i) for i in range(len(self.rig))], antialias=self.antialias)
            return dict(zip(self.rig.names, images))
        return {name: rasterize(p, self.rays(i), self.backend, self.antialias) for i, (name, p) in enumerate(zip(self.rig.names, prims))}

    def render_frame_all(self, frame_index: int) -> dict[str, NDArrayByte]:
        """`render_frame` by the name the render pipeline's issue gives it (one frame, all cameras).

        Args:
            frame_index: frame at the render rate.

        Returns:
            Camera name -> (H, W, 3) uint8 RGB.
        """
        return self.render_frame(frame_index)
