"""Geometry stage of the renderer: vectorised numpy, with compiled f-theta paths (`geometry_kernels`).

World -> camera transforms, exact clipping of segments and convex polygons against the near
(z = NEAR_M) and far (z = MAX_DEPTH_M) planes, conservative view-cone culling, adaptive
subdivision of segments so curved projections (f-theta, distorted pinhole) stay within
`SUBDIVISION_TOL_PX` of the true image curve, lane-line patterns cut in metres of arc length,
cuboid faces and edges.

Frames: world/ego FLU, camera RDF (x right, y down, z forward). Depth is camera z in metres.
Pixel coordinates are those of the calibration (`avsim.core.cameras`), in the OpenCV convention: the
centre of pixel (i, j) is the continuous coordinate (i, j) + PIXEL_CENTRE_OFFSET, with
PIXEL_CENTRE_OFFSET = 0, and the pixel covers [i - 0.5, i + 0.5) x [j - 0.5, j + 0.5).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from avsim.core.cameras import Camera, PinholeCamera
from avsim.core.typing import NDArrayAny, NDArrayBool, NDArrayFloat, NDArrayInt
from avsim.render import style
from avsim.render.geometry.kernels import owner_min_max
from avsim.render.geometry.patterns import arc_lengths, lane_line_segments, offset_polyline, pattern_segments
from avsim.render.geometry.projector import Projector, project_px, subdivide_ftheta

# Continuous coordinate of pixel i's centre is i + PIXEL_CENTRE_OFFSET. 0.0 is the OpenCV
# convention, the one in which every calibration we read is expressed (OpenCV, nuScenes, AV2,
# Waymo, RDS-HQ: a point projecting to u = 100.0 sits on the centre of column 100), and the one
# of the public reference renderer, which draws with OpenCV at integer pixel centres. Both
# raster backends, the ray maps and the pixel boxes read this one constant (defined with the
# pixel grid in `avsim.render.raster.primitives`).
from avsim.render.raster.primitives import PIXEL_CENTRE_OFFSET

__all__ = [  # the lane-line pattern functions live in avsim.render.geometry.patterns; re-exported here
    "arc_lengths",
    "lane_line_segments",
    "offset_polyline",
    "pattern_segments",
]



def image_extent_px(size_px: int) -> tuple[float, float]:
    """The outer edges of an image axis in continuous pixel coordinates.

    Args:
        size_px: pixels along the axis.

    Returns:
        (first, last) edge coordinates.
    """
    return PIXEL_CENTRE_OFFSET - 0.5, size_px + PIXEL_CENTRE_OFFSET - 0.5


SUBDIVISION_TOL_PX = 0.25  # max distance of a projected chord from the true image curve
MAX_SUBDIVISION_LEVELS = 12  # a segment becomes at most 4096 chords

# ---- cuboids ---------------------------------------------------------------------------
# Corner order (spec): v0(+x,+y,+z) v1(+x,-y,+z) v2(-x,-y,+z) v3(-x,+y,+z)
#                      v4(+x,+y,-z) v5(+x,-y,-z) v6(-x,-y,-z) v7(-x,+y,-z)
# Faces as parallelograms (c0, c1, c2, c3) with c1 - c0 = e1, c3 - c0 = e2, c2 = c0 + e1 + e2.
CUBOID_FACES = np.array(
    [
        [0, 1, 5, 4],  # front (+x)
        [3, 2, 6, 7],  # back (-x)
        [0, 1, 2, 3],  # top (+z)
        [4, 5, 6, 7],  # bottom (-z)
        [0, 3, 7, 4],  # left (+y)
        [1, 2, 6, 5],  # right (-y)
    ],
    dtype=np.int64,
)
CUBOID_EDGES = np.array(
    [[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4], [0, 4], [1, 5], [2, 6], [3, 7]], dtype=np.int64
)
FRONT_CORNERS = (0, 1, 4, 5)  # colour A; the others (2, 3, 6, 7) get colour B


def _edge_faces() -> NDArrayInt:
    out = np.zeros((len(CUBOID_EDGES), 2), dtype=np.int64)
    for k, (a, b) in enumerate(CUBOID_EDGES):
        faces = [f for f in range(6) if a in CUBOID_FACES[f] and b in CUBOID_FACES[f]]
        out[k] = faces
    return out


CUBOID_EDGE_FACES = _edge_faces()  # (12, 2): the two faces that share each edge


def cuboid_corner_colours(rgb_front: npt.ArrayLike, rgb_back: npt.ArrayLike) -> NDArrayFloat:
    """Per-corner colours of boxes: front corners {0,1,4,5} get A, back corners B.

    Args:
        rgb_front: (N, 3) colour A per box.
        rgb_back: (N, 3) colour B per box.

    Returns:
        (N, 8, 3) float colours.
    """
    front = np.zeros(8, dtype=bool)
    front[list(FRONT_CORNERS)] = True
    return np.where(front[None, :, None], np.asarray(rgb_front, float)[:, None, :], np.asarray(rgb_back, float)[:, None, :])


def front_facing(corners_cam: NDArrayFloat) -> NDArrayBool:
    """Which faces of boxes are turned towards the camera.

    Exact for any central camera (the camera centre is the origin): a face is visible from
    the origin iff the origin lies on the outer side of the face plane.

    Args:
        corners_cam: (N, 8, 3) camera-frame corners in the spec's order.

    Returns:
        (N, 6) bool per face of CUBOID_FACES.
    """
    quads = corners_cam[:, CUBOID_FACES]  # (N, 6, 4, 3)
    normal = _cross(quads[:, :, 1] - quads[:, :, 0], quads[:, :, 3] - quads[:, :, 0])
    centre = corners_cam.mean(axis=1)[:, None, :]
    face_centre = quads.mean(axis=2)
    outward = np.sign(np.einsum("nfk,nfk->nf", normal, face_centre - centre))
    return np.einsum("nfk,nfk->nf", normal * outward[..., None], quads[:, :, 0]) < 0


def _cross(a: NDArrayFloat, b: NDArrayFloat) -> NDArrayFloat:
    """np.cross of (..., 3) vectors (the same products and differences, without its axis handling)."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    out[..., 1] = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    out[..., 2] = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return out


# ---- transforms, clipping and culling -----------------------------------------------------
def to_camera(points_world: NDArrayFloat, cam_R_world: NDArrayFloat, cam_t_world: NDArrayFloat) -> NDArrayFloat:
    """Transform world points into the camera frame (p_cam = R p_world + t).

    Args:
        points_world: (..., 3) world points.
        cam_R_world: (3, 3) rotation.
        cam_t_world: (3,) translation.

    Returns:
        (..., 3) camera-frame points.
    """
    out: NDArrayFloat = points_world @ cam_R_world.T + cam_t_world
    return out


def clip_segments(
    p0: NDArrayFloat, p1: NDArrayFloat, near_m: float = style.NEAR_M, far_m: float = style.MAX_DEPTH_M
) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayBool]:
    """Clip camera-frame segments to near_m <= z <= far_m exactly.

    Args:
        p0: (N, 3) segment starts.
        p1: (N, 3) segment ends.
        near_m: near plane (camera z).
        far_m: far plane (camera z).

    Returns:
        Clipped starts (N, 3), ends (N, 3) and a keep mask (N,); dropped rows hold meaningless values.
    """
    keep = np.ones(len(p0), dtype=bool)
    for plane, sign in ((near_m, 1.0), (far_m, -1.0)):
        p0, p1, keep = _clip_segments_halfspace(p0, p1, keep, plane, sign)
    return p0, p1, keep


def _clip_segments_halfspace(
    p0: NDArrayFloat, p1: NDArrayFloat, keep: NDArrayBool, plane: float, sign: float
) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayBool]:
    # Keep sign * (z - plane) >= 0.
    d0, d1 = sign * (p0[:, 2] - plane), sign * (p1[:, 2] - plane)
    keep = keep & ((d0 >= 0) | (d1 >= 0))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = d0 / (d0 - d1)
    t = np.clip(np.where(np.isfinite(t), t, 0.0), 0.0, 1.0)
    cut = p0 + (p1 - p0) * t[:, None]
    return np.where((d0 < 0)[:, None], cut, p0), np.where((d1 < 0)[:, None], cut, p1), keep


def clip_polygons(
    vertices: NDArrayFloat, near_m: float = style.NEAR_M, far_m: float = style.MAX_DEPTH_M, counts: NDArrayInt | None = None
) -> tuple[NDArrayFloat, NDArrayInt]:
    """Sutherland-Hodgman clip of convex camera-frame polygons to near <= z <= far.

    Args:
        vertices: (N, K, 3) convex rings.
        near_m: near plane (camera z).
        far_m: far plane (camera z).
        counts: (N,) vertices of each ring (default: all K); padding rows must repeat a vertex of
            the ring (they take part in the depth range test only).

    Returns:
        Vertices (N, K + 2, 3) and their counts (N,): the first `count` rows of each polygon
        are its clipped ring in order (count 0 = fully clipped away).
    """
    n, k, _ = vertices.shape
    ring = np.zeros((n, k + 2, 3))
    ring[:, :k] = vertices
    count = np.full(n, k, dtype=np.int64) if counts is None else np.array(counts, dtype=np.int64)
    z = vertices[..., 2]
    cut = np.flatnonzero((z.min(axis=1) < near_m) | (z.max(axis=1) > far_m))  # most need no clipping
    if cut.size:
        part, part_count = ring[cut, :k], count[cut]
        for plane, sign in ((near_m, 1.0), (far_m, -1.0)):
            part, part_count = _clip_ring_halfspace(part, part_count, plane, sign)
        ring[cut] = 0.0
        ring[cut, : part.shape[1]] = part[:, : k + 2]
        count[cut] = part_count
    return ring, count


def _clip_ring_halfspace(ring: NDArrayFloat, count: NDArrayInt, plane: float, sign: float) -> tuple[NDArrayFloat, NDArrayInt]:
    # Keep sign * (z - plane) >= 0. Vectorised over polygons with a ragged count.
    n, k, _ = ring.shape
    idx = np.arange(k)
    valid = idx[None, :] < count[:, None]
    nxt = np.where(idx[None, :] + 1 < count[:, None], idx[None, :] + 1, 0)
    a = ring
    b = np.take_along_axis(ring, nxt[..., None], axis=1)
    da, db = sign * (a[..., 2] - plane), sign * (b[..., 2] - plane)
    ina, inb = da >= 0, db >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = da / (da - db)
    t = np.clip(np.where(np.isfinite(t), t, 0.0), 0.0, 1.0)
    cross = a + (b - a) * t[..., None]
    emitted = np.concatenate([a[:, :, None], cross[:, :, None]], axis=2).reshape(n, 2 * k, 3)
    mask = np.stack([valid & ina, valid & (ina != inb)], axis=2).reshape(n, 2 * k)
    order = np.argsort(~mask, axis=1, kind="stable")
    out = np.take_along_axis(emitted, order[..., None], axis=1)
    new_count = mask.sum(axis=1)
    width = max(int(new_count.max(initial=0)), 1)
    return out[:, : max(width, k)], new_count


def cone_half_angle_rad(camera: Camera) -> float:
    """The half-angle of a camera's view cone.

    Args:
        camera: the camera.

    Returns:
        The largest angle (radians) between the optical axis and the ray of any pixel on the image border.
    """
    (x0, x1), (y0, y1) = image_extent_px(camera.width_px), image_extent_px(camera.height_px)
    xs, ys = np.linspace(x0, x1, 33), np.linspace(y0, y1, 19)
    border = np.concatenate(
        [np.stack([xs, np.full_like(xs, y0)], -1), np.stack([xs, np.full_like(xs, y1)], -1),
         np.stack([np.full_like(ys, x0), ys], -1), np.stack([np.full_like(ys, x1), ys], -1)]
    )
    rays = camera.pixel_to_ray(border)
    theta = np.arccos(np.clip(rays[:, 2] / np.linalg.norm(rays, axis=-1), -1.0, 1.0))
    return float(theta.max())


def _unit(v: NDArrayFloat) -> NDArrayFloat:
    out: NDArrayFloat = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-300)
    return out


def _angle_from_axis(u: NDArrayFloat) -> NDArrayFloat:
    return np.arctan2(np.hypot(u[..., 0], u[..., 1]), u[..., 2])


def cone_visible(vertices: NDArrayFloat, counts: NDArrayInt | None, cone_rad: float) -> NDArrayBool:
    """Conservative test that a convex set may enter the view cone.

    Every point p of the set has angle(axis, p) >= min_v angle(axis, v) - max_{v,w} angle(v, w)
    (triangle inequality on the sphere), so sets failing that bound are certainly invisible.
    Only meaningful for vertices in front of the camera (clip first).

    Args:
        vertices: (N, K, 3) camera-frame vertices spanning each set.
        counts: (N,) valid vertices per set (None: all K).
        cone_rad: the camera's cone half-angle.

    Returns:
        (N,) bool, False where the set is certainly invisible.
    """
    u = _unit(vertices)
    n, k, _ = u.shape
    valid = np.ones((n, k), bool) if counts is None else np.arange(k)[None] < counts[:, None]
    theta = np.where(valid, _angle_from_axis(u), np.inf)
    cosines = np.einsum("nik,njk->nij", u, u)
    pair_valid = valid[:, :, None] & valid[:, None, :]
    span = np.arccos(np.clip(np.where(pair_valid, cosines, 1.0), -1.0, 1.0)).max(axis=(1, 2))
    margin = np.radians(1.0)  # one degree of slack for the pixel-border sampling of the cone
    return theta.min(axis=1) - span <= cone_rad + margin


def segment_cone_visible(p0: NDArrayFloat, p1: NDArrayFloat, cone_rad: float) -> NDArrayBool:
    """`cone_visible` for segments: the two-vertex case without pair matrices.

    Args:
        p0: (N, 3) camera-frame segment starts.
        p1: (N, 3) camera-frame segment ends.
        cone_rad: the camera's cone half-angle.

    Returns:
        (N,) bool, False where the segment is certainly invisible.
    """
    l0 = np.sqrt(np.einsum("nk,nk->n", p0, p0))
    l1 = np.sqrt(np.einsum("nk,nk->n", p1, p1))
    with np.errstate(divide="ignore", invalid="ignore"):
        theta0 = np.arccos(np.clip(p0[:, 2] / l0, -1.0, 1.0))
        theta1 = np.arccos(np.clip(p1[:, 2] / l1, -1.0, 1.0))
        span = np.arccos(np.clip(np.einsum("nk,nk->n", p0, p1) / (l0 * l1), -1.0, 1.0))
    visible = np.minimum(theta0, theta1) - span <= cone_rad + np.radians(1.0)
    return visible | ~np.isfinite(span)


def is_straight_projection(camera: Camera) -> bool:
    """Whether 3-D straight lines stay straight in the image.

    Args:
        camera: the camera.

    Returns:
        True for a distortion-free pinhole.
    """
    return isinstance(camera, PinholeCamera) and not camera.has_distortion


def project_points(camera: Camera, points_cam: NDArrayFloat) -> NDArrayFloat:
    """Pixel coordinates of camera-frame points.

    Args:
        camera: the camera.
        points_cam: (N, 3) camera-frame points (z > 0 expected).

    Returns:
        (N, 2) pixels.
    """
    return project_px(camera, points_cam)  # == camera.project(points_cam)[0], compiled for f-theta


# chords being subdivided: ends a, b (M, 3), pixels ua, ub (M, 2), source (M,), key along it (M,), width (M,)
_Chords = tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayInt, NDArrayFloat, NDArrayFloat]
# finished chords: _Chords without the width, then the "kept unsplit outside the cone" flag
_Done = tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayInt, NDArrayFloat, NDArrayBool]


def subdivide_segments(
    camera: Camera,
    p0: NDArrayFloat,
    p1: NDArrayFloat,
    tol_px: float = SUBDIVISION_TOL_PX,
    cone_rad: float | None = None,
    keep_outside: npt.ArrayLike | None = None,
    return_approx: bool = False,
) -> tuple[NDArrayAny, ...]:
    """Adaptively split camera-frame segments until each projected chord is within `tol_px`.

    A chord is accepted when the projection of its 3-D midpoint lies within `tol_px` of the
    straight pixel chord (for a pinhole without distortion every chord is exact and none is split).

    With `cone_rad`, a chord that certainly lies outside the view cone (`cone_visible`) is not
    split further: it is dropped, or kept as it is where `keep_outside` (per input segment) is
    set (polygon boundaries, whose pixel box must stay conservative). This also stops lens
    models from being evaluated far outside their valid range (distortion polynomials fold).
    Output order is deterministic: by source segment, then along the segment. With
    `return_approx` a sixth array flags the chords kept unsplit outside the cone.

    Args:
        camera: the camera.
        p0: (N, 3) camera-frame segment starts (clipped to z >= NEAR_M).
        p1: (N, 3) camera-frame segment ends.
        tol_px: chord tolerance in pixels.
        cone_rad: the camera's cone half-angle, or None (no culling).
        keep_outside: (N,) bool per input segment (default: all True).
        return_approx: also return the approx flags.

    Returns:
        q0, q1 (M, 3) sub-segment ends in the camera frame, their pixels uv0, uv1 (M, 2), the
        index source (M,) of the input segment each came from [, approx (M,) bool].
    """
    n = len(p0)
    project = Projector(camera)  # == project_points(camera, .), prepared once
    uv0, uv1 = project(p0), project(p1)
    if n == 0 or is_straight_projection(camera):
        return (p0, p1, uv0, uv1, np.arange(n)) + ((np.zeros(n, bool),) if return_approx else ())
    keep = np.ones(n, bool) if keep_outside is None else np.asarray(keep_outside, bool)
    compiled = subdivide_ftheta(project, p0, p1, uv0, uv1, keep, tol_px, cone_rad, MAX_SUBDIVISION_LEVELS)
    if compiled is not None:  # f-theta with numba: one compiled depth-first pass, same chords
        return compiled if return_approx else compiled[:5]
    return _subdivide_levels(project, (p0, p1, uv0, uv1), keep, tol_px, cone_rad, return_approx)


def _subdivide_levels(
    project: Projector, ends: tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayFloat], keep: NDArrayBool,
    tol_px: float, cone_rad: float | None, return_approx: bool,
) -> tuple[NDArrayAny, ...]:  # fmt: skip
    """`subdivide_segments` level by level in numpy (every camera model; the reference of the compiled pass)."""
    p0, p1, uv0, uv1 = ends
    n = len(p0)
    # (source, position key) let us restore along-segment order after the level loop
    chords: _Chords = (p0, p1, uv0, uv1, np.arange(n), np.zeros(n, dtype=np.float64), np.ones(n, dtype=np.float64))
    done: list[_Done] = []
    for level in range(MAX_SUBDIVISION_LEVELS + 1):
        if cone_rad is not None and level > 0:  # level-0 input was culled by the caller
            outside = ~segment_cone_visible(chords[0], chords[1], cone_rad)
            if outside.any():
                done.append(_take(chords, outside & keep[chords[4]], True))
                chords = _select(chords, ~outside)
                if not len(chords[0]):
                    break
        a, b, ua, ub = chords[:4]
        m = 0.5 * (a + b)
        um = project(m)
        ok = (_midpoint_error_px(ua, ub, um) <= tol_px) | (level == MAX_SUBDIVISION_LEVELS)
        done.append(_take(chords, ok, False))
        if ok.all():
            break
        chords = _halve(chords, m, um, ~ok)
    return _in_source_order(done, return_approx)


def _select(chords: _Chords, mask: NDArrayBool) -> _Chords:
    a, b, ua, ub, src, key, width = chords
    return a[mask], b[mask], ua[mask], ub[mask], src[mask], key[mask], width[mask]


def _take(chords: _Chords, mask: NDArrayBool, approx: bool) -> _Done:
    a, b, ua, ub, src, key, _ = _select(chords, mask)
    return a, b, ua, ub, src, key, np.full(int(mask.sum()), approx, dtype=bool)


def _midpoint_error_px(ua: NDArrayFloat, ub: NDArrayFloat, um: NDArrayFloat) -> NDArrayFloat:
    """Distance (M,) of the projected midpoints um from the pixel chords ua -> ub (all (M, 2))."""
    chord = ub - ua
    length = np.hypot(chord[:, 0], chord[:, 1])
    rel = um - ua
    cross = np.abs(chord[:, 0] * rel[:, 1] - chord[:, 1] * rel[:, 0]) / np.maximum(length, 1e-12)
    return np.where(length > 1e-9, cross, np.hypot(rel[:, 0], rel[:, 1]))


def _halve(chords: _Chords, m: NDArrayFloat, um: NDArrayFloat, s: NDArrayBool) -> _Chords:
    """Split the chords where `s` at their midpoints m (M, 3) / um (M, 2): first halves, then second halves."""
    a, b, ua, ub, src, key, width = chords
    half = width[s] / 2
    return (
        np.concatenate([a[s], m[s]]), np.concatenate([m[s], b[s]]),
        np.concatenate([ua[s], um[s]]), np.concatenate([um[s], ub[s]]),
        np.concatenate([src[s], src[s]]), np.concatenate([key[s], key[s] + half]), np.concatenate([half, half]),
    )  # fmt: skip


def _in_source_order(done: list[_Done], return_approx: bool) -> tuple[NDArrayAny, ...]:
    """The finished chords of every level joined, by source segment then along it."""
    if not done:
        empty = (np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 2)), np.zeros((0, 2)), np.zeros(0, np.int64))
        return empty + (np.zeros(0, bool),) if return_approx else empty
    parts = [np.concatenate([d[i] for d in done]) for i in range(7)]
    order = np.lexsort((parts[5], parts[4])) if len(done) > 1 else np.arange(len(parts[4]))
    return tuple(p[order] for p in parts[:5]) + ((parts[6][order],) if return_approx else ())


def ring_edges(rings: NDArrayFloat, counts: NDArrayInt) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayInt]:
    """Edges of ragged polygon rings.

    Args:
        rings: (N, K, 3) vertices.
        counts: (N,) valid vertices per ring.

    Returns:
        Edge starts (E, 3), ends (E, 3) and owning ring (E,).
    """
    n, k, _ = rings.shape
    idx = np.arange(k)
    valid = idx[None] < counts[:, None]
    nxt = np.where(idx[None] + 1 < counts[:, None], idx[None] + 1, 0)
    a = rings[valid]
    b = np.take_along_axis(rings, nxt[..., None], axis=1)[valid]
    owner = np.broadcast_to(np.arange(n)[:, None], (n, k))[valid]
    return a, b, owner


def pixel_bounds(n: int, owner: NDArrayInt, uv: NDArrayFloat, width_px: int, height_px: int) -> NDArrayInt:
    """Inclusive integer pixel boxes around each owner's pixels, with one pixel of slack (chord tolerance).

    Args:
        n: number of owners.
        owner: (M,) owner of each pixel.
        uv: (M, 2) pixels.
        width_px: image width.
        height_px: image height.

    Returns:
        (n, 4) int64 boxes [x0, y0, x1, y1]; empty boxes are (0, 0, -1, -1).
    """
    lo, hi = owner_min_max(n, owner, uv)
    # pixel i has its centre at i + PIXEL_CENTRE_OFFSET
    c = PIXEL_CENTRE_OFFSET
    with np.errstate(invalid="ignore"):
        boxes = np.stack(
            [
                np.clip(np.floor(lo[:, 0] - c) - 1, 0, width_px),
                np.clip(np.floor(lo[:, 1] - c) - 1, 0, height_px),
                np.clip(np.ceil(hi[:, 0] - c) + 1, -1, width_px - 1),
                np.clip(np.ceil(hi[:, 1] - c) + 1, -1, height_px - 1),
            ],
            -1,
        )
    boxes = np.nan_to_num(boxes, nan=-1).astype(np.int64)
    empty = ~np.isfinite(lo).all(axis=1) | (boxes[:, 2] < boxes[:, 0]) | (boxes[:, 3] < boxes[:, 1])
    boxes[empty] = (0, 0, -1, -1)
    return boxes


# ---- traffic lights ------------------------------------------------------------------------
def traffic_light_rgb(states: npt.ArrayLike) -> NDArrayFloat:
    """Colours of traffic lights by state.

    Args:
        states: (K,) states ("red" / "yellow" / "green" / anything else: unknown).

    Returns:
        (K, 3) float RGB.
    """
    states = np.asarray(states)
    table = style.TRAFFIC_LIGHT_RGB
    return np.array([table.get(str(s).lower(), table["unknown"]) for s in states], dtype=np.float64).reshape(-1, 3)


def fade(depth_m: npt.ArrayLike) -> NDArrayFloat:
    """Depth fade clamp(1 - depth / 200, 0, 1).

    Args:
        depth_m: depths (any shape) in metres.

    Returns:
        The fade factors, same shape.
    """
    return np.clip(1.0 - np.asarray(depth_m, dtype=np.float64) / style.MAX_DEPTH_M, 0.0, 1.0)
