"""One camera's primitives from the world-frame objects of a frame.

`camera_primitives` moves a frame's `FrameObjects` (map segments and triangles, sign and light
cuboids, agent boxes, all in the world frame) into one camera: world -> camera transform,
exact near/far clipping, conservative view-cone culling, one batched adaptive subdivision of
every segment and polygon boundary (curved f-theta projections), pixel bounds and row spans,
and returns the `Primitives` the raster kernels draw, in draw order (see `avsim.render.geometry.scene`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from avsim.core.cameras import Camera
from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayBool, NDArrayByte, NDArrayFloat, NDArrayInt
from avsim.render import style
from avsim.render.geometry import projection as geo
from avsim.render.geometry.kernels import clip_cull_planars, planar_bounds
from avsim.render.geometry.projector import Projector
from avsim.render.geometry.strokes import stroke_capsules
from avsim.render.raster.draw import rasterize
from avsim.render.raster.primitives import Capsules, Planars, Primitives, ray_map
from avsim.render.raster.spans import planar_row_spans

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


@dataclass
class _SegmentGroup:
    """Camera-frame segments waiting for subdivision, with per-segment draw attributes."""

    p0: NDArrayFloat  # (S, 3)
    p1: NDArrayFloat  # (S, 3)
    rgb: NDArrayFloat  # (S, 3)
    width_px: NDArrayFloat  # (S,)
    zbias: NDArrayFloat  # (S,)
    obj: NDArrayInt  # (S,) int32 labelled object (box index in the frame), -1 for none
    src: NDArrayInt  # (S,) index of each kept segment in the group's input


@dataclass
class _PlanarGroup:
    """Camera-frame planar primitives that survived clipping and culling (triangles padded to 4 corners)."""

    verts: NDArrayFloat  # (N, 4, 3) unclipped corners (a triangle repeats its third)
    rgb4: NDArrayFloat  # (N, 4, 3)
    is_tri: NDArrayBool  # (N,)
    zscale: NDArrayFloat  # (N,)
    zbias: NDArrayFloat  # (N,)
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
    return _SegmentGroup(q0[idx], q1[idx], np.asarray(rgb, float)[idx], np.asarray(width_px, float)[idx], zb[idx], ob[idx], idx)


def _planar_group(
    cone_rad: float, verts: NDArrayFloat, rgb4: NDArrayFloat, is_tri: NDArrayBool, zscale: NDArrayFloat, zbias: NDArrayFloat,
    obj: NDArrayInt,
) -> _PlanarGroup:
    """Clip and cull planars (verts (N, 4, 3); rows with `is_tri` are triangles padded with their third corner)."""
    compiled = clip_cull_planars(verts, np.where(is_tri, 3, 4), cone_rad, style.NEAR_M, style.MAX_DEPTH_M)
    if compiled is not None:
        idx, edges = compiled[0], compiled[1:]
        return _PlanarGroup(verts[idx], rgb4[idx], is_tri[idx], zscale[idx], zbias[idx], edges, obj[idx].astype(np.int32))
    z = verts[..., 2]
    idx = np.flatnonzero((z.max(axis=1) >= style.NEAR_M) & (z.min(axis=1) <= style.MAX_DEPTH_M))
    rings, counts = geo.clip_polygons(verts[idx], counts=np.where(is_tri[idx], 3, 4))
    live = counts >= 3
    idx, rings, counts = idx[live], rings[live], counts[live]
    if idx.size:
        vis = geo.cone_visible(rings, counts, cone_rad)
        idx, rings, counts = idx[vis], rings[vis], counts[vis]
    edges = geo.ring_edges(rings, counts)
    return _PlanarGroup(verts[idx], rgb4[idx], is_tri[idx], zscale[idx], zbias[idx], edges, obj[idx].astype(np.int32))


def _planars(
    camera: Camera, group: _PlanarGroup, owner: NDArrayInt, ua: NDArrayFloat, ub: NDArrayFloat, approx: NDArrayBool
) -> Primitives:
    """Planar primitives of one group from the projected (subdivided) boundary chords of each
    (owner (C,), pixel ends ua, ub (C, 2), approx (C,) = chord kept unsplit outside the cone)."""
    w, h = camera.width_px, camera.height_px
    n_all = len(group.verts)
    compiled = planar_bounds(n_all, owner, ua, ub, approx, (w, h), geo.PIXEL_CENTRE_OFFSET)
    if compiled is not None:
        boxes, exact = compiled
    else:
        boxes = geo.pixel_bounds(n_all, np.concatenate([owner, owner]), np.concatenate([ua, ub]), w, h)
        exact = np.ones(n_all, bool)
        exact[owner[approx]] = False
    on = (boxes[:, 2] >= boxes[:, 0]) & (boxes[:, 3] >= boxes[:, 1])
    # renumber owners to the kept planars for the row spans
    new_index = np.cumsum(on) - 1
    keep_chord = on[owner]
    row_start, row_span = planar_row_spans(
        boxes[on], new_index[owner[keep_chord]], ua[keep_chord], ub[keep_chord], exact[on]
    )
    v = group.verts[on]
    n = len(v)
    return Primitives(w, h, planars=Planars(
        origin=v[:, 0], e1=v[:, 1] - v[:, 0], e2=np.where(group.is_tri[on][:, None], v[:, 2], v[:, 3]) - v[:, 0],
        is_tri=group.is_tri[on], rgb=group.rgb4[on], bbox=boxes[on], zscale=group.zscale[on], zbias=group.zbias[on],
        order=np.arange(n, dtype=np.int64), row_start=row_start, row_span=row_span, obj=group.obj[on],
    ))  # fmt: skip


def camera_primitives(
    camera: Camera, cone_rad: float, cam_SE3_world: SE3, objects: FrameObjects, box_obj: NDArrayInt | None = None
) -> Primitives:
    """All primitives of one camera image in draw order (see module docstring): strokes (map lines
    and box edges) clipped, culled, subdivided and turned into capsules in one pass, clipped
    polygon boundaries subdivided in one batched call.

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
    static_cam, box_cam = geo.to_camera(objects.static_corners, R, t), geo.to_camera(objects.box_corners, R, t)
    box_obj = np.arange(len(box_cam)) if box_obj is None else np.asarray(box_obj)
    both = np.concatenate([static_cam, box_cam])
    both_facing = geo.front_facing(both) if len(both) else np.zeros((0, 6), bool)  # signs and lights, then boxes
    static_facing, facing = both_facing[: len(static_cam)], both_facing[len(static_cam) :]
    strokes, n_lines = _line_and_edge_inputs(objects, R, t, box_cam, facing, box_obj)
    caps = _compiled_strokes(camera, cone_rad, strokes)
    planars = _planar_group(cone_rad, *_planar_inputs(objects, R, t, (static_cam, static_facing), (box_cam, facing), box_obj))
    group = _segment_group(cone_rad, strokes.p0, strokes.p1, strokes.rgb, strokes.width_px, strokes.zbias, strokes.obj) \
        if caps is None else _SegmentGroup(*(np.zeros((0, 3)),) * 2, *(np.zeros(0),) * 3, *(np.zeros(0, np.int64),) * 2)
    # one batched subdivision of the numpy path's strokes (none with the compiled pass) and the polygon boundaries
    n_seg = len(group.p0)
    a, b, ua, ub, src, approx = geo.subdivide_segments(
        camera, np.concatenate([group.p0, planars.edges[0]]), np.concatenate([group.p1, planars.edges[1]]),
        cone_rad=cone_rad, keep_outside=np.arange(n_seg + len(planars.edges[0])) >= n_seg, return_approx=True,
    )  # fmt: skip
    cut = int(np.searchsorted(src, n_seg))
    if caps is None:
        caps = _numpy_capsules(camera, group, a[:cut], b[:cut], ua[:cut], ub[:cut], src[:cut])
    pl = _planars(camera, planars, planars.edges[2][src[cut:] - n_seg], ua[cut:], ub[cut:], approx[cut:])
    return _assemble(camera, strokes, caps, int(np.searchsorted(caps[3], n_lines)), pl)


def _assemble(
    camera: Camera, strokes: _SegmentGroup, caps: tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayInt], n_lines: int,
    pl: Primitives,
) -> Primitives:  # fmt: skip
    """The primitives in draw order: capsules of the map lines, planars, capsules of the box edges
    (`caps`: xy, inv_depth, radius, stroke index; the first `n_lines` are map lines)."""
    xy, inv_depth, radius, src = caps
    n_caps, n_pl = len(src), pl.n_planars
    cap_order = np.arange(n_caps + n_pl, dtype=np.int64)
    cap_order[n_lines:] += n_pl
    capsules = Capsules(xy, inv_depth, radius, strokes.rgb[src], np.ones(n_caps), strokes.zbias[src], cap_order[:n_caps],
                        strokes.obj[src])  # fmt: skip
    planars = replace(pl.planars, order=np.arange(n_lines, n_lines + n_pl, dtype=np.int64))
    return Primitives(pl.width_px, pl.height_px, capsules, planars)


def _compiled_strokes(
    camera: Camera, cone_rad: float, strokes: _SegmentGroup
) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayInt] | None:
    """Capsules of unclipped camera-frame strokes in one compiled pass (`stroke_kernels.stroke_capsules`):
    xy (M, 4), inv_depth (M, 2), radius (M,), stroke index (M,); None where it does not apply
    (no numba, or not an f-theta camera)."""
    if geo.is_straight_projection(camera):
        return None
    (x0, x1), (y0, y1) = geo.image_extent_px(camera.width_px), geo.image_extent_px(camera.height_px)
    return stroke_capsules(Projector(camera), strokes.p0, strokes.p1, strokes.width_px, cone_rad, (style.NEAR_M, style.MAX_DEPTH_M),
                           (x0, x1, y0, y1), (style.MIN_LINE_RADIUS_PX, style.MAX_DEPTH_M, 0.0), geo.SUBDIVISION_TOL_PX,
                           geo.MAX_SUBDIVISION_LEVELS)  # fmt: skip


def _numpy_capsules(
    camera: Camera, group: _SegmentGroup, a: NDArrayFloat, b: NDArrayFloat, ua: NDArrayFloat, ub: NDArrayFloat, sub: NDArrayInt
) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayInt]:
    """`_compiled_strokes` from the numpy steps: the subdivided chords (a, b, ua, ub, index `sub` into
    the clipped and culled `group`) kept where their capsule's pixel box meets the image."""
    (x0, x1), (y0, y1) = geo.image_extent_px(camera.width_px), geo.image_extent_px(camera.height_px)
    d0, d1 = a[:, 2], b[:, 2]
    radius = np.maximum(style.MIN_LINE_RADIUS_PX, 0.5 * group.width_px[sub] * geo.fade(0.5 * (d0 + d1)))
    lo, hi = np.minimum(ua, ub) - radius[:, None], np.maximum(ua, ub) + radius[:, None]
    on = (hi[:, 0] >= x0) & (lo[:, 0] <= x1) & (hi[:, 1] >= y0) & (lo[:, 1] <= y1) & np.isfinite(lo).all(1)
    return (np.concatenate([ua[on], ub[on]], 1), np.stack([1.0 / d0[on], 1.0 / d1[on]], 1), radius[on],
            group.src[sub[on]])  # fmt: skip


def _line_and_edge_inputs(
    objects: FrameObjects, R: NDArrayFloat, t: NDArrayFloat, box_cam: NDArrayFloat, facing: NDArrayBool, box_obj: NDArrayInt
) -> tuple[_SegmentGroup, int]:
    """Map lines then the edges of the boxes' front-facing faces in the camera frame, unclipped
    (`src` unused), with the number of map lines (they come first)."""
    box_idx, edge_idx = np.nonzero(facing[:, geo.CUBOID_EDGE_FACES].any(axis=2)) if len(box_cam) else (np.zeros(0, int),) * 2
    ends = geo.CUBOID_EDGES[edge_idx]
    n_map, n_edges = len(objects.seg_p0), len(box_idx)
    group = _SegmentGroup(
        np.concatenate([geo.to_camera(objects.seg_p0, R, t), box_cam[box_idx, ends[:, 0]]]),
        np.concatenate([geo.to_camera(objects.seg_p1, R, t), box_cam[box_idx, ends[:, 1]]]),
        np.concatenate([objects.seg_rgb, np.tile(np.asarray(style.BOX_EDGE_RGB, float), (n_edges, 1))]),
        np.concatenate([objects.seg_width_px, np.full(n_edges, style.BOX_EDGE_WIDTH_PX)]),
        np.concatenate([np.zeros(n_map), -np.clip(0.25 * objects.box_min_size_m[box_idx], 0.05, 0.5)]),
        np.concatenate([np.full(n_map, -1), box_obj[box_idx]]).astype(np.int32),
        np.zeros(0, np.int64),
    )  # fmt: skip
    return group, n_map


def _planar_inputs(
    objects: FrameObjects, R: NDArrayFloat, t: NDArrayFloat, statics: tuple[NDArrayFloat, NDArrayBool],
    boxes: tuple[NDArrayFloat, NDArrayBool], box_obj: NDArrayInt,
) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayBool, NDArrayFloat, NDArrayFloat, NDArrayInt]:  # fmt: skip
    """Map triangles (padded to 4 corners), front faces of signs and lights (flat colour), front
    faces of the boxes (A -> B gradient), in draw order: corners, colours, is_tri, zscale, zbias, object."""
    tri = geo.to_camera(objects.tri, R, t)
    tri4 = np.concatenate([tri, tri[:, 2:3]], axis=1)
    tri_rgb4 = np.repeat(objects.tri_rgb[:, None], 4, axis=1)
    (static_cam, static_facing), (box_cam, facing) = statics, boxes
    static_rgb4 = np.repeat(objects.static_rgb[:, None], 6 * 4, axis=1).reshape(-1, 6, 4, 3)[static_facing]
    corner_rgb = geo.cuboid_corner_colours(objects.box_rgb_front, objects.box_rgb_back) if len(box_cam) else np.zeros((0, 8, 3))
    verts = [tri4, static_cam[:, geo.CUBOID_FACES][static_facing], box_cam[:, geo.CUBOID_FACES][facing]]
    rgb4 = [tri_rgb4, static_rgb4, corner_rgb[:, geo.CUBOID_FACES][facing]]
    n_tri, n_quad = len(tri4), len(verts[1]) + len(verts[2])
    return (
        np.concatenate(verts), np.concatenate(rgb4), np.arange(n_tri + n_quad) < n_tri,
        np.concatenate([np.full(n_tri, SURFACE_ZSCALE), np.ones(n_quad)]),
        np.concatenate([np.full(n_tri, SURFACE_ZBIAS_M), np.zeros(n_quad)]),
        np.concatenate([np.full(n_tri + len(verts[1]), -1), box_obj[np.nonzero(facing)[0]]]),
    )  # fmt: skip


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

