"""One camera's primitives from the world-frame objects of a frame.

`camera_primitives` moves a frame's `FrameObjects` (map segments and triangles, sign and light
cuboids, agent boxes, all in the world frame) into one camera: world -> camera transform,
exact near/far clipping, conservative view-cone culling, one batched adaptive subdivision of
every segment and polygon boundary (curved f-theta projections), pixel bounds and row spans,
and returns the `Primitives` the raster kernels draw, in draw order (see `avsim.render.frame`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from avsim.core.cameras import Camera
from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayBool, NDArrayByte, NDArrayFloat, NDArrayInt
from avsim.render import geometry as geo
from avsim.render import style
from avsim.render.raster import Primitives, planar_row_spans, rasterize, ray_map

__all__ = ["FrameObjects", "camera_primitives", "render_objects"]

SURFACE_ZSCALE, SURFACE_ZBIAS_M = 1.25, 0.5  # see raster module: lines win over surfaces


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


    def take(self, seg: NDArrayInt, tri: NDArrayInt, static: NDArrayInt, box: NDArrayInt) -> FrameObjects:
        """A subset of the objects (every part keeps its order).

        Args:
            seg: (S',) indices of the kept segments.
            tri: (T',) indices of the kept triangles.
            static: (C',) indices of the kept sign and light cuboids.
            box: (N',) indices of the kept boxes.

        Returns:
            The objects at those indices.
        """
        return FrameObjects(
            self.seg_p0[seg], self.seg_p1[seg], self.seg_rgb[seg], self.seg_width_px[seg], self.tri[tri], self.tri_rgb[tri],
            self.static_corners[static], self.static_rgb[static], self.box_corners[box], self.box_rgb_front[box],
            self.box_rgb_back[box], self.box_min_size_m[box],
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


def camera_primitives(
    camera: Camera, cone_rad: float, cam_SE3_world: SE3, objects: FrameObjects, box_obj: NDArrayInt | None = None
) -> Primitives:
    """All primitives of one camera image in draw order (see module docstring); every segment and
    clipped polygon boundary is subdivided in one batched call (few camera-model evaluations).

    Args:
        camera: the camera (already at the output size).
        cone_rad: its view-cone half-angle (`geometry.cone_half_angle_rad`).
        cam_SE3_world: world -> camera transform (one SE3).
        objects: the world-frame objects of the frame.
        box_obj: (N,) object id of each box (default: its index), when `objects` holds a subset of
            a frame's boxes.

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
    box_obj = np.arange(len(box_cam)) if box_obj is None else np.asarray(box_obj)
    faces = _planar_group(cone_rad, box_cam[:, geo.CUBOID_FACES][facing], corner_rgb[:, geo.CUBOID_FACES][facing], False,
                          1.0, 0.0, box_obj[np.nonzero(facing)[0]])  # fmt: skip
    box_idx, edge_idx = np.nonzero(facing[:, geo.CUBOID_EDGE_FACES].any(axis=2)) if len(box_cam) else (np.zeros(0, int),) * 2
    ends = geo.CUBOID_EDGES[edge_idx]
    edges = _segment_group(
        cone_rad, box_cam[box_idx, ends[:, 0]], box_cam[box_idx, ends[:, 1]],
        np.tile(np.asarray(style.BOX_EDGE_RGB, float), (len(box_idx), 1)), np.full(len(box_idx), style.BOX_EDGE_WIDTH_PX),
        -np.clip(0.25 * objects.box_min_size_m[box_idx], 0.05, 0.5), box_obj[box_idx],
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


def render_objects(camera: Camera, world_SE3_camera: SE3, objects: FrameObjects, backend: str = "numba") -> NDArrayByte:
    """Render world-frame objects through one camera.

    For one-off images (tests, previews); `SceneRenderer` caches the ray map across frames.

    Args:
        camera: the camera.
        world_SE3_camera: the camera pose (one SE3).
        objects: world-frame objects.
        backend: "numba" or "torch".

    Returns:
        (H, W, 3) uint8 RGB.
    """
    prims = camera_primitives(camera, geo.cone_half_angle_rad(camera), world_SE3_camera.inverse(), objects)
    return rasterize(prims, ray_map(camera), backend)

