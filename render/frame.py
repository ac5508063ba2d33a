"""Scene + frame index -> one control image per camera.

`SceneRenderer` prepares everything that does not change over a clip once (map elements cut
into painted segments and triangles by `avsim.render.static_world`, per-camera ray maps and
view cones) and then, for each
frame, places each camera on the ego pose at its capture time (frame time + the rig's
`capture_offset_ns`; see `avsim.core.rig.world_SE3_camera_at`), gathers the map elements within reach, the agents and
the traffic-light states at that time, turns them into camera-space primitives
(`Primitives`) and rasterises them.

Draw order (ties only; occlusion is per pixel): static lines (lane lines, road boundaries,
wait lines, poles), static polygons (crosswalks, road markings), traffic lights and signs,
dynamic boxes in track-id order (faces, then edges).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from avsim.core.cameras import Camera
from avsim.core.rig import CameraRig, world_SE3_camera_at
from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayBool, NDArrayByte, NDArrayFloat, NDArrayFloat32, NDArrayInt, NDArrayInt32
from avsim.render import geometry as geo
from avsim.render import style
from avsim.render.raster import (
    Primitives,
    planar_row_spans,
    rasterize,
    rasterize_numba,
    rasterize_torch,
    ray_map,
)
from avsim.render.static_world import StaticWorld, build_static_world, triangulate_polygon
from avsim.scenario import Scenario

__all__ = [
    "AgentRows",
    "FrameObjects",
    "SceneRenderer",
    "StaticWorld",  # these three live in avsim.render.static_world
    "build_static_world",
    "camera_primitives",
    "render_objects",
    "triangulate_polygon",
]

MAP_REACH_M = style.MAX_DEPTH_M + 15.0  # cameras sit a few metres from the ego origin
SURFACE_ZSCALE, SURFACE_ZBIAS_M = 1.25, 0.5  # see raster module: lines win over surfaces
AGENT_BLOCK_FRAMES = 64  # agents are resampled this many frames at a time (bounded memory)


# ---- camera-space primitives ------------------------------------------------------------------
@dataclass
class FrameObjects:
    """What one frame shows, in the world frame (already culled to the ego's reach)."""

    seg_p0: NDArrayFloat  # (S, 3) map line segments
    seg_p1: NDArrayFloat  # (S, 3)
    seg_rgb: NDArrayFloat  # (S, 3)
    seg_width_px: NDArrayFloat  # (S,)
    tri: NDArrayFloat  # (T, 3, 3) map polygon triangles
    tri_rgb: NDArrayFloat  # (T, 3)
    static_corners: NDArrayFloat  # (C, 8, 3) signs and lights
    static_rgb: NDArrayFloat  # (C, 3) sign colour or light colour at this frame
    box_corners: NDArrayFloat  # (N, 8, 3) agents in track-id order
    box_rgb_front: NDArrayFloat  # (N, 3)
    box_rgb_back: NDArrayFloat  # (N, 3)
    box_min_size_m: NDArrayFloat  # (N,)

    @classmethod
    def build(
        cls,
        lines: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike, npt.ArrayLike] | None = None,
        triangles: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
        static_boxes: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
        boxes: tuple[npt.ArrayLike, Sequence[str]] | None = None,
    ) -> FrameObjects:
        """Objects from plain arrays (every part optional).

        Args:
            lines: (p0 (S, 3), p1 (S, 3), rgb (S, 3), width_px (S,)).
            triangles: (tri (T, 3, 3), rgb (T, 3)).
            static_boxes: (corners (C, 8, 3), rgb (C, 3)).
            boxes: (corners (N, 8, 3), class names (N,)), drawn with the spec's class colours.

        Returns:
            The objects, as float64 arrays.
        """
        p0, p1, rgb, width = lines if lines is not None else (np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0))
        tri, tri_rgb = triangles if triangles is not None else (np.zeros((0, 3, 3)), np.zeros((0, 3)))
        sc, srgb = static_boxes if static_boxes is not None else (np.zeros((0, 8, 3)), np.zeros((0, 3)))
        corners, classes = boxes if boxes is not None else (np.zeros((0, 8, 3)), [])
        front = np.array([style.BOX_RGB[c][0] for c in classes], float).reshape(-1, 3)
        back = np.array([style.BOX_RGB[c][1] for c in classes], float).reshape(-1, 3)
        bc = np.asarray(corners, float).reshape(-1, 8, 3)
        edge_len = np.linalg.norm(bc[:, [1, 3, 4]] - bc[:, [0, 0, 0]], axis=-1) if len(bc) else np.zeros((0, 3))

        def as_f(a: npt.ArrayLike, *shape: int) -> NDArrayFloat:
            return np.asarray(a, float).reshape(*shape)

        return cls(
            as_f(p0, -1, 3), as_f(p1, -1, 3), as_f(rgb, -1, 3), as_f(width, -1), as_f(tri, -1, 3, 3), as_f(tri_rgb, -1, 3),
            as_f(sc, -1, 8, 3), as_f(srgb, -1, 3), bc, front, back, edge_len.min(axis=1) if len(bc) else np.zeros(0),
        )  # fmt: skip


class _OrderCounter:
    def __init__(self) -> None:
        self.next = 0

    def take(self, n: int) -> NDArrayInt:
        out = np.arange(self.next, self.next + n, dtype=np.int64)
        self.next += n
        return out


@dataclass
class _SegmentGroup:
    """Camera-frame segments waiting for subdivision, with per-segment draw attributes."""

    p0: NDArrayFloat  # (S, 3)
    p1: NDArrayFloat  # (S, 3)
    rgb: NDArrayFloat  # (S, 3)
    width_px: NDArrayFloat  # (S,)
    zbias: NDArrayFloat  # (S,)
    obj: NDArrayInt  # (S,) int32 labelled object (box index in the frame), -1 for none


@dataclass
class _PlanarGroup:
    """Camera-frame planar primitives that survived clipping and culling."""

    verts: NDArrayFloat  # (N, 3 | 4, 3) unclipped corners
    rgb4: NDArrayFloat  # (N, 4, 3)
    is_tri: bool
    zscale: float
    zbias: float
    edges: tuple[NDArrayFloat, NDArrayFloat, NDArrayInt]  # clipped ring edges a, b, owner
    obj: NDArrayInt  # (N,) int32 labelled object (box index in the frame), -1 for none


def _obj_or_none(obj: NDArrayInt | None, n: int) -> NDArrayInt:
    return np.full(n, -1, np.int32) if obj is None else np.asarray(obj, np.int32)


def _segment_group(
    cone_rad: float, p0: NDArrayFloat, p1: NDArrayFloat, rgb: npt.ArrayLike, width_px: npt.ArrayLike, zbias: npt.ArrayLike,
    obj: NDArrayInt | None = None,
) -> _SegmentGroup:
    q0, q1, keep = geo.clip_segments(p0, p1)
    idx = np.flatnonzero(keep)
    if idx.size:
        idx = idx[geo.segment_cone_visible(q0[idx], q1[idx], cone_rad)]
    zb = np.broadcast_to(np.asarray(zbias, float), (len(p0),))
    ob = _obj_or_none(obj, len(p0))
    return _SegmentGroup(q0[idx], q1[idx], np.asarray(rgb, float)[idx], np.asarray(width_px, float)[idx], zb[idx], ob[idx])


def _planar_group(
    cone_rad: float, verts: NDArrayFloat, rgb4: npt.ArrayLike, is_tri: bool, zscale: float, zbias: float,
    obj: NDArrayInt | None = None,
) -> _PlanarGroup:
    z = verts[..., 2]
    idx = np.flatnonzero((z.max(axis=1) >= style.NEAR_M) & (z.min(axis=1) <= style.MAX_DEPTH_M))
    rings, counts = geo.clip_polygons(verts[idx])
    live = counts >= 3
    idx, rings, counts = idx[live], rings[live], counts[live]
    if idx.size:
        vis = geo.cone_visible(rings, counts, cone_rad)
        idx, rings, counts = idx[vis], rings[vis], counts[vis]
    ob = _obj_or_none(obj, len(verts))[idx]
    return _PlanarGroup(verts[idx], np.asarray(rgb4, float)[idx], is_tri, zscale, zbias, geo.ring_edges(rings, counts), ob)


def _capsules(
    camera: Camera, group: _SegmentGroup, a: NDArrayFloat, b: NDArrayFloat, ua: NDArrayFloat, ub: NDArrayFloat,
    src: NDArrayInt, orders: _OrderCounter,
) -> Primitives:  # fmt: skip
    """Stroke primitives from the subdivided chords of one segment group (src indexes the group)."""
    w, h = camera.width_px, camera.height_px
    d0, d1 = a[:, 2], b[:, 2]
    radius = np.maximum(style.MIN_LINE_RADIUS_PX, 0.5 * group.width_px[src] * geo.fade(0.5 * (d0 + d1)))
    lo, hi = np.minimum(ua, ub) - radius[:, None], np.maximum(ua, ub) + radius[:, None]
    (x0, x1), (y0, y1) = geo.image_extent_px(w), geo.image_extent_px(h)
    on = (hi[:, 0] >= x0) & (lo[:, 0] <= x1) & (hi[:, 1] >= y0) & (lo[:, 1] <= y1) & np.isfinite(lo).all(1)
    n = int(on.sum())
    return Primitives(
        w, h,
        cap_xy=np.concatenate([ua[on], ub[on]], 1),
        cap_inv_depth=np.stack([1.0 / d0[on], 1.0 / d1[on]], 1),
        cap_radius_px=radius[on],
        cap_rgb=group.rgb[src[on]],
        cap_zscale=np.ones(n),
        cap_zbias=group.zbias[src[on]],
        cap_order=orders.take(n),
        cap_obj=group.obj[src[on]],
    )  # fmt: skip


def _planars(
    camera: Camera, group: _PlanarGroup, owner: NDArrayInt, ua: NDArrayFloat, ub: NDArrayFloat, approx: NDArrayBool,
    orders: _OrderCounter,
) -> Primitives:  # fmt: skip
    """Planar primitives of one group from the projected (subdivided) boundary chords of each
    (owner (C,), pixel ends ua, ub (C, 2), approx (C,) = chord kept unsplit outside the cone)."""
    w, h = camera.width_px, camera.height_px
    n_all = len(group.verts)
    boxes = geo.pixel_bounds(n_all, np.concatenate([owner, owner]), np.concatenate([ua, ub]), w, h)
    on = (boxes[:, 2] >= boxes[:, 0]) & (boxes[:, 3] >= boxes[:, 1])
    exact = np.ones(n_all, bool)
    exact[owner[approx]] = False
    # renumber owners to the kept planars for the row spans
    new_index = np.cumsum(on) - 1
    keep_chord = on[owner]
    row_start, row_span = planar_row_spans(
        boxes[on], new_index[owner[keep_chord]], ua[keep_chord], ub[keep_chord], exact[on]
    )
    v = group.verts[on]
    n = len(v)
    return Primitives(
        w, h,
        pl_origin=v[:, 0], pl_e1=v[:, 1] - v[:, 0], pl_e2=v[:, 2 if group.is_tri else 3] - v[:, 0],
        pl_is_tri=np.full(n, group.is_tri), pl_rgb=group.rgb4[on], pl_bbox=boxes[on],
        pl_zscale=np.full(n, group.zscale), pl_zbias=np.full(n, group.zbias), pl_order=orders.take(n),
        pl_row_start=row_start, pl_row_span=row_span, pl_obj=group.obj[on],
    )  # fmt: skip


def camera_primitives(camera: Camera, cone_rad: float, cam_SE3_world: SE3, objects: FrameObjects) -> Primitives:
    """All primitives of one camera image in draw order (see module docstring); every segment and
    clipped polygon boundary is subdivided in one batched call (few camera-model evaluations).

    Args:
        camera: the camera (already at the output size).
        cone_rad: its view-cone half-angle (`geometry.cone_half_angle_rad`).
        cam_SE3_world: world -> camera transform (one SE3).
        objects: the world-frame objects of the frame.

    Returns:
        The camera-space primitives.
    """
    R, t = cam_SE3_world.rotation, cam_SE3_world.translation
    # map lines
    lines = _segment_group(cone_rad, geo.to_camera(objects.seg_p0, R, t), geo.to_camera(objects.seg_p1, R, t),
                           objects.seg_rgb, objects.seg_width_px, 0.0)  # fmt: skip
    # map polygons (their triangles: a true concave fill)
    tri_rgb4 = np.repeat(objects.tri_rgb[:, None], 4, axis=1)
    tris = _planar_group(cone_rad, geo.to_camera(objects.tri, R, t), tri_rgb4, True, SURFACE_ZSCALE, SURFACE_ZBIAS_M)
    # traffic lights and signs: front-facing faces, flat colour
    static_cam = geo.to_camera(objects.static_corners, R, t)
    static_facing = geo.front_facing(static_cam) if len(static_cam) else np.zeros((0, 6), bool)
    static_rgb4 = np.repeat(objects.static_rgb[:, None], 6 * 4, axis=1).reshape(-1, 6, 4, 3)[static_facing]
    statics = _planar_group(cone_rad, static_cam[:, geo.CUBOID_FACES][static_facing], static_rgb4, False, 1.0, 0.0)
    # dynamic boxes: front-facing faces with the A -> B gradient, then the edges of those faces
    box_cam = geo.to_camera(objects.box_corners, R, t)
    facing = geo.front_facing(box_cam) if len(box_cam) else np.zeros((0, 6), bool)
    corner_rgb = geo.cuboid_corner_colours(objects.box_rgb_front, objects.box_rgb_back) if len(box_cam) else np.zeros((0, 8, 3))
    faces = _planar_group(cone_rad, box_cam[:, geo.CUBOID_FACES][facing], corner_rgb[:, geo.CUBOID_FACES][facing], False,
                          1.0, 0.0, np.nonzero(facing)[0])  # fmt: skip
    box_idx, edge_idx = np.nonzero(facing[:, geo.CUBOID_EDGE_FACES].any(axis=2)) if len(box_cam) else (np.zeros(0, int),) * 2
    ends = geo.CUBOID_EDGES[edge_idx]
    edges = _segment_group(
        cone_rad, box_cam[box_idx, ends[:, 0]], box_cam[box_idx, ends[:, 1]],
        np.tile(np.asarray(style.BOX_EDGE_RGB, float), (len(box_idx), 1)), np.full(len(box_idx), style.BOX_EDGE_WIDTH_PX),
        -np.clip(0.25 * objects.box_min_size_m[box_idx], 0.05, 0.5), box_idx,
    )  # fmt: skip
    # one batched subdivision of everything
    seg_groups, planar_groups = [lines, edges], [tris, statics, faces]
    starts = np.cumsum([0] + [len(g.p0) for g in seg_groups] + [len(g.edges[0]) for g in planar_groups])
    keep_outside = np.arange(starts[-1]) >= starts[len(seg_groups)]  # polygon boundaries stay conservative
    a, b, ua, ub, src, approx = geo.subdivide_segments(
        camera,
        np.concatenate([g.p0 for g in seg_groups] + [g.edges[0] for g in planar_groups]),
        np.concatenate([g.p1 for g in seg_groups] + [g.edges[1] for g in planar_groups]),
        cone_rad=cone_rad,
        keep_outside=keep_outside,
        return_approx=True,
    )
    bounds = np.searchsorted(src, starts)
    piece = [slice(bounds[i], bounds[i + 1]) for i in range(len(starts) - 1)]
    orders = _OrderCounter()
    parts = [_capsules(camera, lines, a[piece[0]], b[piece[0]], ua[piece[0]], ub[piece[0]], src[piece[0]] - starts[0], orders)]
    for k, group in enumerate(planar_groups):
        s = piece[2 + k]
        owner = group.edges[2][src[s] - starts[2 + k]]
        parts.append(_planars(camera, group, owner, ua[s], ub[s], approx[s], orders))
    parts.append(_capsules(camera, edges, a[piece[1]], b[piece[1]], ua[piece[1]], ub[piece[1]], src[piece[1]] - starts[1], orders))
    return Primitives.concat(camera.width_px, camera.height_px, parts)


def render_objects(camera: Camera, world_SE3_camera: SE3, objects: FrameObjects, backend: str = "numba", antialias: bool = False) -> NDArrayByte:
    """Render world-frame objects through one camera.

    For one-off images (tests, previews); `SceneRenderer` caches the ray map across frames.

    Args:
        camera: the camera.
        world_SE3_camera: the camera pose (one SE3).
        objects: world-frame objects.
        backend: "numba" or "torch"; antialias: 4x MSAA on edges (default off: the exact palette).

    Returns:
        (H, W, 3) uint8 RGB.
    """
    prims = camera_primitives(camera, geo.cone_half_angle_rad(camera), world_SE3_camera.inverse(), objects)
    return rasterize(prims, ray_map(camera), backend, antialias)


# ---- the renderer ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class AgentRows:
    """Box arrays of agents, one row per (time, agent), sorted by time then track id.

    t (N,) int64 timestamps in ns; corners (N, 8, 3) world-frame box corners in the spec's
    order; front, back (N, 3) float RGB colours A and B of the class; min_size, max_size (N,)
    smallest and largest box dimension in metres; centre (N, 2) world x, y of the box centre;
    track_id (N,) str (labels name the boxes by it).
    """

    t: NDArrayInt
    corners: NDArrayFloat
    front: NDArrayFloat
    back: NDArrayFloat
    min_size: NDArrayFloat
    max_size: NDArrayFloat
    centre: NDArrayFloat
    track_id: npt.NDArray[np.str_]

    @classmethod
    def empty(cls) -> AgentRows:
        """No rows.

        Returns:
            AgentRows with N = 0.
        """
        return cls(np.zeros(0, np.int64), np.zeros((0, 8, 3)), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0),
                   np.zeros(0), np.zeros((0, 2)), np.zeros(0, str))  # fmt: skip

    def rows(self, lo: int, hi: int) -> AgentRows:
        """Rows lo..hi-1 of every field.

        Args:
            lo: first row.
            hi: one past the last row.

        Returns:
            The slice (views of these arrays).
        """
        return AgentRows(**{f.name: getattr(self, f.name)[lo:hi] for f in fields(self)})


class SceneRenderer:
    """Render a scenario's frames through a camera rig.

    rig: the scenario's own rig by default, or any other (e.g. `cosmos_rig()`) placed on the
    same ego; cameras: a subset of its names (default all); size: (width, height) every camera
    is re-imaged to; fps: render rate over the ego span; backend: ``numba`` or ``torch``; antialias: 4x MSAA on edges.
    """

    def __init__(
        self,
        scenario: Scenario,
        rig: CameraRig | None = None,
        cameras: list[str] | tuple[str, ...] | None = None,
        size: tuple[int, int] = (style.DEFAULT_WIDTH_PX, style.DEFAULT_HEIGHT_PX),
        fps: float = style.DEFAULT_FPS,
        backend: str = "numba", antialias: bool = True,
    ) -> None:
        rig = scenario.rig if rig is None else rig
        if cameras is not None:
            rig = rig.subset(list(cameras))
        self.scenario = scenario
        self.rig = rig.resize(int(size[0]), int(size[1]))
        self.fps = float(fps)
        self.backend, self.antialias = backend, antialias
        self.timestamps_ns = scenario.frame_times(self.fps)  # lazy: only the frames rendered are made
        self.static = build_static_world(scenario.map)
        self._rays: dict[int, NDArrayFloat32] = {}
        self._cones = [geo.cone_half_angle_rad(c) for c in self.rig.cameras]
        self._agent_block: tuple[int, AgentRows] | None = None
        self._objects: tuple[int, SE3, FrameObjects] | None = None

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
            self._agent_block = (block, self._resample_block(block))
        rows = self._agent_block[1]
        t = self.timestamps_ns[frame_index]
        lo, hi = np.searchsorted(rows.t, [t, t + 1])
        return rows.rows(int(lo), int(hi))

    def _resample_block(self, block: int) -> AgentRows:
        """The agents of frames block * AGENT_BLOCK_FRAMES ... (block + 1) * AGENT_BLOCK_FRAMES - 1."""
        ts = self.timestamps_ns[block * AGENT_BLOCK_FRAMES : (block + 1) * AGENT_BLOCK_FRAMES]
        agents = self.scenario.agents
        agents = agents.resample(ts) if len(agents) else agents
        if not len(agents):
            return AgentRows.empty()
        order = np.lexsort((agents.track_id, agents.timestamps_ns))
        classes = agents.object_class[order]
        table_front = {c: style.BOX_RGB[c][0] for c in np.unique(classes)}
        table_back = {c: style.BOX_RGB[c][1] for c in np.unique(classes)}
        size = agents.size_m[order]
        return AgentRows(
            t=agents.timestamps_ns[order],
            corners=agents.corners_m()[order],
            front=np.array([table_front[c] for c in classes], float).reshape(-1, 3),
            back=np.array([table_back[c] for c in classes], float).reshape(-1, 3),
            min_size=size.min(axis=1),
            max_size=size.max(axis=1),
            centre=agents.center_m[order, :2],
            track_id=agents.track_id[order],
        )

    def frame_objects(self, frame_index: int) -> tuple[SE3, FrameObjects]:
        """The ego pose and the world-frame objects of one frame (culled to the ego's reach).

        Args:
            frame_index: frame at the render rate.

        Returns:
            world_SE3_ego (one SE3) and the frame's objects.
        """
        t_ns = int(self.timestamps_ns[frame_index])
        world_SE3_ego = self.scenario.ego.pose_at(np.array([t_ns]))[0]
        centre = world_SE3_ego.translation[:2]
        seg_on, tri_on, cub_on = self.static.near(centre, MAP_REACH_M)
        s = self.static
        light_ids = s.cub_light_id[cub_on]
        static_rgb = s.cub_rgb[cub_on].copy()
        is_light = light_ids != ""
        if is_light.any():
            states = self.scenario.lights.state_at(light_ids[is_light], t_ns)
            static_rgb[is_light] = geo.traffic_light_rgb(states)
        rows, keep = self._kept_rows(frame_index, centre)
        objects = FrameObjects(
            s.seg_p0[seg_on], s.seg_p1[seg_on], s.seg_rgb[seg_on], s.seg_width_px[seg_on],
            s.tri[tri_on], s.tri_rgb[tri_on], s.cub_corners[cub_on], static_rgb,
            rows.corners[keep], rows.front[keep], rows.back[keep], rows.min_size[keep],
        )  # fmt: skip
        return world_SE3_ego, objects

    def _kept_rows(self, frame_index: int, centre: NDArrayFloat) -> tuple[AgentRows, NDArrayBool]:
        """The frame's agent rows and which of them are drawn (not the ego's own box, within reach)."""
        rows = self._agent_rows(frame_index)
        keep = ~_contains_xy(rows.corners, centre)  # the ego's own box, if a track holds it
        keep &= np.linalg.norm(rows.centre - centre, axis=-1) <= MAP_REACH_M + rows.max_size
        return rows, keep

    def box_track_ids(self, frame_index: int) -> npt.NDArray[np.str_]:
        """Track ids of the frame's drawn boxes: entry k is the object id k of `render_camera_ids`.

        Args:
            frame_index: frame at the render rate.

        Returns:
            (N,) str, in box (track-id) order.
        """
        t_ns = int(self.timestamps_ns[frame_index])
        centre = self.scenario.ego.pose_at(np.array([t_ns]))[0].translation[:2]
        rows, keep = self._kept_rows(frame_index, centre)
        return rows.track_id[keep]

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
        i = camera if isinstance(camera, int) else self.rig.index(camera)
        prims = self.camera_primitives(frame_index, i)
        cam = self.rig.cameras[i]
        ids = np.empty((cam.height_px, cam.width_px), np.int32)
        img = rasterize_numba(prims, self.rays(i), ids_out=ids, antialias=self.antialias)
        return img, ids, prims

    def _frame(self, frame_index: int) -> tuple[SE3, FrameObjects]:
        if self._objects is None or self._objects[0] != frame_index:
            self._objects = (frame_index, *self.frame_objects(frame_index))
        return self._objects[1], self._objects[2]

    def camera_primitives(self, frame_index: int, camera_index: int) -> Primitives:
        """Camera-space primitives of one camera at one frame.

        Args:
            frame_index: frame at the render rate.
            camera_index: index into the rig.

        Returns:
            The primitives in draw order.
        """
        world_SE3_ego, objects = self._frame(frame_index)
        if self.rig.has_capture_offsets:  # each camera at its own capture time; objects stay at the frame time
            world_SE3_cam = self.world_SE3_camera(frame_index, camera_index)
        else:
            world_SE3_cam = world_SE3_ego.compose(self.rig.ego_SE3_camera[camera_index])
        camera = self.rig.cameras[camera_index]
        return camera_primitives(camera, self._cones[camera_index], world_SE3_cam.inverse(), objects)

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
        """Camera-space primitives of every camera of one frame.

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
        """Every camera's image at one frame (torch backend: all cameras rasterised as one batch).

        Args:
            frame_index: frame at the render rate.

        Returns:
            Camera name -> (H, W, 3) uint8 RGB.
        """
        if self.backend == "torch":
            prims = self.primitives(frame_index)
            images = rasterize_torch(prims, [self.rays(i) for i in range(len(self.rig))], antialias=self.antialias)
            return dict(zip(self.rig.names, images))
        return {name: self.render_camera(frame_index, i) for i, name in enumerate(self.rig.names)}


def _contains_xy(corners: NDArrayFloat, point_xy: NDArrayFloat) -> NDArrayBool:
    """(N,) whether each box footprint (corners (N, 8, 3); top face 0..3 is a rectangle) holds a point."""
    c0, c1, c3 = corners[:, 0, :2], corners[:, 1, :2], corners[:, 3, :2]
    e1, e2 = c1 - c0, c3 - c0
    q = point_xy[None] - c0
    a = (q * e1).sum(-1) / np.maximum((e1 * e1).sum(-1), 1e-12)
    b = (q * e2).sum(-1) / np.maximum((e2 * e2).sum(-1), 1e-12)
    return (a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)
