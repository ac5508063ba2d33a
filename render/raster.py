"""Raster stage: z-buffered rasterisation of screen-space strokes and planar 3-D primitives.

Two primitive kinds cover everything the spec draws:

* capsules: a projected (sub-)segment drawn as a thick stroke with round caps; depth along it
  is perspective-correct (1/z interpolated in screen space); colour = RGB * fade(depth).
* planars: a 3-D parallelogram (cuboid face) or triangle (piece of a concave map polygon).
  Each covered pixel casts its own camera ray (a per-camera ray map, so pinhole, distorted
  pinhole and f-theta are all exact), intersects the plane, and tests the barycentric
  coordinates; depth is exact, and the corner colours are interpolated bilinearly across the
  face (front colour A to back colour B on a cuboid's sides).

Occlusion: every fragment has a comparison key ``zscale * depth + zbias + 1`` rounded to
float32, and each pixel keeps the fragment with the smallest (key, order) pair, where `order`
is the primitive's draw-order rank (static lines, static polygons, lights and signs, boxes).
Colours always use the true depth; the key only decides who wins. Painted map surfaces use
``1.25 * depth + 0.5`` so that coplanar lane lines, drawn as screen-space strokes whose depth
is the centre-line depth, are not cut in half by the surface they lie on; box edges use a
small negative bias so that an edge wins over its own faces (hidden edges are culled before).

Backends: ``numba`` (CPU, the default; compiled kernels cached on disk, one pass per
primitive over the pixels it may cover) and ``torch`` (fragments generated per bounding box
and resolved with a scatter-min on the packed 64-bit (key, order); runs batched over many
images on a GPU). Both are deterministic and give identical frames up to floating-point ties.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from avsim.core.cameras import Camera
from avsim.core.typing import NDArrayBool, NDArrayByte, NDArrayFloat, NDArrayFloat32, NDArrayInt, NDArrayInt32
from avsim.render import style
from avsim.render.geometry import PIXEL_CENTRE_OFFSET
from avsim.render.raster_spans import planar_row_spans as planar_row_spans  # re-exported

_njit: Any  # numba.njit with the kernels' options, or None without numba
try:  # numba is the fast CPU path; without it the torch backend still works
    import numba

    _njit = numba.njit(cache=True, nogil=True, fastmath=False, boundscheck=False)
except ImportError:  # pragma: no cover - exercised only where numba is missing
    _njit = None

BACKENDS = ("numba", "torch")
INV_MAX_DEPTH = 1.0 / style.MAX_DEPTH_M  # fade = 1 - depth * INV_MAX_DEPTH in both backends
KEY_OFFSET = 1.0  # keeps every comparison key positive (packed float32 bits sort as ints)
PARAM_EPS = 1e-9  # barycentric slack so shared edges leave no cracks


@dataclass
class Primitives:
    """Everything one camera image shows, in camera coordinates and pixels.

    Capsules (S): ``cap_xy (S, 4)`` pixel ends (x0, y0, x1, y1); ``cap_inv_depth (S, 2)`` 1/z at
    the ends; ``cap_radius_px (S,)``; ``cap_rgb (S, 3)`` float in [0, 255]; ``cap_zscale``,
    ``cap_zbias (S,)``; ``cap_order (S,)`` int64 draw-order rank.
    Planars (P): ``pl_origin (P, 3)``, ``pl_e1``, ``pl_e2 (P, 3)`` (corner c0 and the edges to
    c1 and c3 in the camera frame); ``pl_is_tri (P,)`` (True: triangle c0, c0+e1, c0+e2);
    ``pl_rgb (P, 4, 3)`` colours at c0, c1, c2 = c0+e1+e2, c3 (triangles use the first);
    ``pl_bbox (P, 4)`` int64 inclusive pixel box (x0, y0, x1, y1); ``pl_zscale``, ``pl_zbias``,
    ``pl_order (P,)``. Optional row spans (a loop bound only; coverage is decided per pixel):
    ``pl_row_start (P,)`` and ``pl_row_span (R, 2)``: row y of planar p (y0 <= y <= y1 of its
    box) is scanned over x in ``pl_row_span[pl_row_start[p] + y - y0]`` (inclusive); empty
    ``pl_row_start`` means whole box rows. Object ids (labels only): ``cap_obj (S,)``,
    ``pl_obj (P,)`` int32, the labelled object each primitive belongs to (-1: none); empty when
    not given (every primitive then counts as -1).
    """

    width_px: int
    height_px: int
    cap_xy: NDArrayFloat = field(default_factory=lambda: np.zeros((0, 4)))
    cap_inv_depth: NDArrayFloat = field(default_factory=lambda: np.zeros((0, 2)))
    cap_radius_px: NDArrayFloat = field(default_factory=lambda: np.zeros(0))
    cap_rgb: NDArrayFloat = field(default_factory=lambda: np.zeros((0, 3)))
    cap_zscale: NDArrayFloat = field(default_factory=lambda: np.zeros(0))
    cap_zbias: NDArrayFloat = field(default_factory=lambda: np.zeros(0))
    cap_order: NDArrayInt = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pl_origin: NDArrayFloat = field(default_factory=lambda: np.zeros((0, 3)))
    pl_e1: NDArrayFloat = field(default_factory=lambda: np.zeros((0, 3)))
    pl_e2: NDArrayFloat = field(default_factory=lambda: np.zeros((0, 3)))
    pl_is_tri: NDArrayBool = field(default_factory=lambda: np.zeros(0, dtype=bool))
    pl_rgb: NDArrayFloat = field(default_factory=lambda: np.zeros((0, 4, 3)))
    pl_bbox: NDArrayInt = field(default_factory=lambda: np.zeros((0, 4), dtype=np.int64))
    pl_zscale: NDArrayFloat = field(default_factory=lambda: np.zeros(0))
    pl_zbias: NDArrayFloat = field(default_factory=lambda: np.zeros(0))
    pl_order: NDArrayInt = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pl_row_start: NDArrayInt = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pl_row_span: NDArrayInt = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    cap_obj: NDArrayInt = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    pl_obj: NDArrayInt = field(default_factory=lambda: np.zeros(0, dtype=np.int32))

    @property
    def n_capsules(self) -> int:
        """Number of capsules S."""
        return len(self.cap_order)

    @property
    def n_planars(self) -> int:
        """Number of planars P."""
        return len(self.pl_order)

    @staticmethod
    def concat(width_px: int, height_px: int, parts: list[Primitives]) -> Primitives:
        """Join primitive sets (orders are kept as given).

        Args:
            width_px: image width.
            height_px: image height.
            parts: the sets, in order.

        Returns:
            One set holding every part's primitives (row spans kept only when every part with planars has them).
        """
        out = Primitives(width_px, height_px)
        with_spans = [p for p in parts if p.n_planars]
        if with_spans and all(len(p.pl_row_start) == p.n_planars for p in with_spans):
            shift = np.cumsum([0] + [len(p.pl_row_span) for p in with_spans])
            out.pl_row_start = np.concatenate([p.pl_row_start + s for p, s in zip(with_spans, shift)])
            out.pl_row_span = np.concatenate([p.pl_row_span for p in with_spans])
        for name in Primitives.__dataclass_fields__:
            if name in ("width_px", "height_px", "pl_row_start", "pl_row_span"):
                continue
            arrays = [getattr(p, name) for p in parts]
            if arrays:
                setattr(out, name, np.concatenate([getattr(out, name)[:0]] + arrays))
        return out


# ---- ray maps ----------------------------------------------------------------------------
def ray_map(camera: Camera) -> NDArrayFloat32:
    """Per-pixel camera rays scaled to z = 1, at pixel centres (pixel (i, j) at (i, j) + PIXEL_CENTRE_OFFSET).

    Pixels whose ray does not point forward (theta >= 90 deg) hold NaN and are never drawn.

    Args:
        camera: the camera.

    Returns:
        (H, W, 2) float32 (x/z, y/z).
    """
    h, w = camera.height_px, camera.width_px
    ys, xs = np.mgrid[0:h, 0:w]
    uv = np.stack([xs.ravel(), ys.ravel()], -1).astype(np.float64) + PIXEL_CENTRE_OFFSET
    rays = camera.pixel_to_ray(uv)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(rays[:, 2] > 1e-6, rays[:, 2], np.nan)
        out = np.stack([rays[:, 0] / z, rays[:, 1] / z], -1)
    return out.reshape(h, w, 2).astype(np.float32)


def _plane_params(prims: Primitives) -> NDArrayFloat:
    """Per planar primitive (P, 12): normal n (3), n . c0, then the barycentric rows A (3), a0,
    B (3), b0 such that for the camera ray r = (x/z, y/z, 1) hitting the plane at depth
    d = (n . c0) / (n . r) the barycentric coordinates are a = d (A . r) - a0, b = d (B . r) - b0.
    """
    o, e1, e2 = prims.pl_origin, prims.pl_e1, prims.pl_e2
    normal = np.cross(e1, e2)
    nd = np.einsum("pk,pk->p", normal, o)
    g00, g01, g11 = (e1 * e1).sum(-1), (e1 * e2).sum(-1), (e2 * e2).sum(-1)
    det = g00 * g11 - g01 * g01
    with np.errstate(divide="ignore", invalid="ignore"):
        i00, i01, i11 = g11 / det, -g01 / det, g00 / det
    A = i00[:, None] * e1 + i01[:, None] * e2
    B = i01[:, None] * e1 + i11[:, None] * e2
    a0 = np.einsum("pk,pk->p", A, o)
    b0 = np.einsum("pk,pk->p", B, o)
    out = np.concatenate([normal, nd[:, None], A, a0[:, None], B, b0[:, None]], axis=1)
    return np.ascontiguousarray(np.where(np.isfinite(out), out, 0.0))


def _runs(prims: Primitives) -> list[tuple[int, int, int]]:
    """Draw sequence as runs (kind 0 = capsules / 1 = planars, start, stop) in (order) order."""
    if (prims.n_capsules > 1 and np.any(np.diff(prims.cap_order) <= 0)) or (
        prims.n_planars > 1 and np.any(np.diff(prims.pl_order) <= 0)
    ):
        raise ValueError("primitive orders must be strictly increasing within each kind")
    kinds = np.concatenate([np.zeros(prims.n_capsules, np.int64), np.ones(prims.n_planars, np.int64)])
    seq_kinds = kinds[np.argsort(np.concatenate([prims.cap_order, prims.pl_order]), kind="stable")]
    if not len(seq_kinds):
        return []
    breaks = np.flatnonzero(np.diff(seq_kinds)) + 1
    starts, stops = np.r_[0, breaks], np.r_[breaks, len(seq_kinds)]
    runs, counters = [], [0, 0]
    for a, b in zip(starts, stops):
        kind = int(seq_kinds[a])
        runs.append((kind, counters[kind], counters[kind] + int(b - a)))
        counters[kind] += int(b - a)
    return runs


# ---- numba backend -------------------------------------------------------------------------
if _njit is not None:

    @_njit
    def _ztest(zbuf: NDArrayFloat32, y: int, x: int, depth: float, zscale: float, zbias: float) -> bool:
        # strict: among equal keys the primitive drawn first (lower order) wins
        key = np.float32(zscale * depth + zbias + 1.0)
        if key < zbuf[y, x]:
            zbuf[y, x] = key
            return True
        return False

    @_njit
    def _put(img: NDArrayByte, y: int, x: int, depth: float, r: float, g: float, b: float) -> None:
        f = 1.0 - depth * INV_MAX_DEPTH
        f = max(f, 0.0)
        img[y, x, 0] = np.uint8(int(r * f + 0.5))
        img[y, x, 1] = np.uint8(int(g * f + 0.5))
        img[y, x, 2] = np.uint8(int(b * f + 0.5))

    @_njit
    def _draw_capsules(img: NDArrayByte, zbuf: NDArrayFloat32, xy: NDArrayFloat, inv_depth: NDArrayFloat,
                       radius: NDArrayFloat, rgb: NDArrayFloat, zscale: NDArrayFloat, zbias: NDArrayFloat,
                       start: int, stop: int, c: float, ids: NDArrayInt, obj: NDArrayInt, with_ids: bool) -> None:  # fmt: skip
        # c: PIXEL_CENTRE_OFFSET, an argument so that the on-disk kernel cache never holds a stale one
        h, w = zbuf.shape
        for s in range(start, stop):
            ax, ay, bx, by = xy[s, 0], xy[s, 1], xy[s, 2], xy[s, 3]
            r = radius[s]
            r2 = r * r
            dx, dy = bx - ax, by - ay
            l2 = dx * dx + dy * dy
            i0, i1 = inv_depth[s, 0], inv_depth[s, 1]
            zs, zb = zscale[s], zbias[s]
            cr, cg, cb = rgb[s, 0], rgb[s, 1], rgb[s, 2]
            ylo = max(0, int(np.floor(min(ay, by) - r - c)))
            yhi = min(h - 1, int(np.ceil(max(ay, by) + r - c)))
            for y in range(ylo, yhi + 1):
                py = y + c
                # conservative x-interval of this row: centre-line points within r of the row
                if abs(dy) > 1e-12:
                    ta = (py - r - ay) / dy
                    tb = (py + r - ay) / dy
                    if ta > tb:
                        ta, tb = tb, ta
                    ta = max(ta, 0.0)
                    tb = min(tb, 1.0)
                    if ta > tb:
                        continue
                    xa, xb = ax + ta * dx, ax + tb * dx
                    xlo, xhi = min(xa, xb) - r, max(xa, xb) + r
                else:
                    xlo, xhi = min(ax, bx) - r, max(ax, bx) + r
                x0 = max(0, int(np.floor(xlo - c)))
                x1 = min(w - 1, int(np.ceil(xhi - c)))
                for x in range(x0, x1 + 1):
                    px = x + c
                    t = 0.0
                    if l2 > 0.0:
                        t = ((px - ax) * dx + (py - ay) * dy) / l2
                        t = min(max(t, 0.0), 1.0)
                    qx = ax + t * dx - px
                    qy = ay + t * dy - py
                    if qx * qx + qy * qy > r2:
                        continue
                    depth = 1.0 / (i0 + t * (i1 - i0))
                    if _ztest(zbuf, y, x, depth, zs, zb):
                        _put(img, y, x, depth, cr, cg, cb)
                        if with_ids:
                            ids[y, x] = obj[s]

    @_njit
    def _draw_planars(img: NDArrayByte, zbuf: NDArrayFloat32, rays: NDArrayFloat32, plane: NDArrayFloat,
                      is_tri: NDArrayBool, rgb: NDArrayFloat, bbox: NDArrayInt, zscale: NDArrayFloat,
                      zbias: NDArrayFloat, use_spans: bool, row_start: NDArrayInt, row_span: NDArrayInt,
                      start: int, stop: int, near: float, far: float, eps: float,
                      ids: NDArrayInt, obj: NDArrayInt, with_ids: bool) -> None:  # fmt: skip
        for p in range(start, stop):
            n0, n1, n2, nd = plane[p, 0], plane[p, 1], plane[p, 2], plane[p, 3]
            A0, A1, A2, a0 = plane[p, 4], plane[p, 5], plane[p, 6], plane[p, 7]
            B0, B1, B2, b0 = plane[p, 8], plane[p, 9], plane[p, 10], plane[p, 11]
            tri = is_tri[p]
            zs, zb = zscale[p], zbias[p]
            r0, g0, c0 = rgb[p, 0, 0], rgb[p, 0, 1], rgb[p, 0, 2]
            r1, g1, c1 = rgb[p, 1, 0], rgb[p, 1, 1], rgb[p, 1, 2]
            r2, g2, c2 = rgb[p, 2, 0], rgb[p, 2, 1], rgb[p, 2, 2]
            r3, g3, c3 = rgb[p, 3, 0], rgb[p, 3, 1], rgb[p, 3, 2]
            for y in range(bbox[p, 1], bbox[p, 3] + 1):
                xs, xe = bbox[p, 0], bbox[p, 2]
                if use_spans:
                    k = row_start[p] + y - bbox[p, 1]
                    xs, xe = max(xs, row_span[k, 0]), min(xe, row_span[k, 1])
                for x in range(xs, xe + 1):
                    rx = np.float64(rays[y, x, 0])
                    ry = np.float64(rays[y, x, 1])
                    den = n0 * rx + n1 * ry + n2
                    if den == 0.0:
                        continue
                    depth = nd / den
                    if not (depth > near and depth <= far):
                        continue
                    a = depth * (A0 * rx + A1 * ry + A2) - a0
                    b = depth * (B0 * rx + B1 * ry + B2) - b0
                    if a < -eps or b < -eps:
                        continue
                    if tri:
                        if a + b > 1.0 + eps:
                            continue
                        if _ztest(zbuf, y, x, depth, zs, zb):
                            _put(img, y, x, depth, r0, g0, c0)
                            if with_ids:
                                ids[y, x] = obj[p]
                    else:
                        if a > 1.0 + eps or b > 1.0 + eps:
                            continue
                        if not _ztest(zbuf, y, x, depth, zs, zb):
                            continue
                        if with_ids:
                            ids[y, x] = obj[p]
                        a = min(max(a, 0.0), 1.0)
                        b = min(max(b, 0.0), 1.0)
                        w0, w1, w2, w3 = (1 - a) * (1 - b), a * (1 - b), a * b, (1 - a) * b
                        cr = w0 * r0 + w1 * r1 + w2 * r2 + w3 * r3
                        cg = w0 * g0 + w1 * g1 + w2 * g2 + w3 * g3
                        cb = w0 * c0 + w1 * c1 + w2 * c2 + w3 * c3
                        _put(img, y, x, depth, cr, cg, cb)


def _f64(a: NDArrayFloat) -> NDArrayFloat:
    return np.ascontiguousarray(a, dtype=np.float64)


def _obj_ids(obj: NDArrayInt, n: int) -> NDArrayInt:
    """(n,) int32 object ids, all -1 when none were given."""
    return np.ascontiguousarray(obj, np.int32) if len(obj) == n else np.full(n, -1, np.int32)


def rasterize_numba(
    prims: Primitives, rays: NDArrayFloat32, out: NDArrayByte | None = None, ids_out: NDArrayInt32 | None = None
) -> NDArrayByte:
    """Rasterise one image on the CPU with the compiled kernels.

    Args:
        prims: the image's primitives.
        rays: (H, W, 2) float32 ray map (`ray_map`).
        out: (H, W, 3) uint8 buffer to draw into (cleared first), or None for a new one.
        ids_out: (H, W) int32 buffer (or None): filled (after a reset to -1) with the object id
            (`cap_obj` / `pl_obj`) of the fragment that won each pixel's z-test, -1 where none or
            background. The colours do not depend on it.

    Returns:
        (H, W, 3) uint8 RGB (`out` when given).
    """
    if _njit is None:
        raise RuntimeError("the numba backend needs the `numba` package (pip install numba)")
    h, w = prims.height_px, prims.width_px
    if rays.shape != (h, w, 2):
        raise ValueError(f"ray map must be ({h}, {w}, 2), got {rays.shape}")
    if out is None:
        img = np.zeros((h, w, 3), np.uint8)
    else:
        img = out
        img[...] = 0
    zbuf = np.full((h, w), np.inf, np.float32)
    with_ids = ids_out is not None
    if ids_out is not None:
        if ids_out.shape != (h, w) or ids_out.dtype != np.int32:
            raise ValueError(f"ids_out must be ({h}, {w}) int32, got {ids_out.shape} {ids_out.dtype}")
        ids_out[...] = -1
    ids = ids_out if ids_out is not None else np.zeros((1, 1), np.int32)
    cap_obj = _obj_ids(prims.cap_obj, prims.n_capsules) if with_ids else np.zeros(0, np.int32)
    pl_obj = _obj_ids(prims.pl_obj, prims.n_planars) if with_ids else np.zeros(0, np.int32)
    cap = (_f64(prims.cap_xy), _f64(prims.cap_inv_depth), _f64(prims.cap_radius_px), _f64(prims.cap_rgb),
           _f64(prims.cap_zscale), _f64(prims.cap_zbias))
    use_spans = len(prims.pl_row_start) == prims.n_planars and prims.n_planars > 0
    spans = (use_spans, np.ascontiguousarray(prims.pl_row_start, dtype=np.int64),
             np.ascontiguousarray(prims.pl_row_span, dtype=np.int64).reshape(-1, 2))
    pl = (_plane_params(prims), np.ascontiguousarray(prims.pl_is_tri, dtype=np.bool_), _f64(prims.pl_rgb),
          np.ascontiguousarray(prims.pl_bbox, dtype=np.int64), _f64(prims.pl_zscale), _f64(prims.pl_zbias), *spans)
    for kind, start, stop in _runs(prims):
        if kind == 0:
            _draw_capsules(img, zbuf, *cap, start, stop, PIXEL_CENTRE_OFFSET, ids, cap_obj, with_ids)
        else:
            _draw_planars(img, zbuf, rays, *pl, start, stop, style.NEAR_M, style.MAX_DEPTH_M, PARAM_EPS, ids, pl_obj, with_ids)
    return img


def object_coverage_px(prims: Primitives, rays: NDArrayFloat32, n_objects: int) -> NDArrayInt:
    """Pixels each object covers when drawn alone (its own primitives only, the same kernels).

    The primitives of object k are drawn into cleared buffers, counted within the region they can
    reach, and that region is cleared again, so the cost is the objects' own area.

    Args:
        prims: the image's primitives with `cap_obj` / `pl_obj`.
        rays: (H, W, 2) the camera's ray map.
        n_objects: number of objects N (ids 0..N-1).

    Returns:
        (N,) int64 pixel counts.
    """
    h, w = prims.height_px, prims.width_px
    cap_obj, pl_obj = _obj_ids(prims.cap_obj, prims.n_capsules), _obj_ids(prims.pl_obj, prims.n_planars)
    cs, ps = (np.flatnonzero((o >= 0) & (o < n_objects)) for o in (cap_obj, pl_obj))
    cs, ps = cs[np.argsort(cap_obj[cs], kind="stable")], ps[np.argsort(pl_obj[ps], kind="stable")]
    sub = Primitives(w, h, pl_origin=prims.pl_origin[ps], pl_e1=prims.pl_e1[ps], pl_e2=prims.pl_e2[ps])
    spans = len(prims.pl_row_start) == prims.n_planars and prims.n_planars > 0
    pl = (_plane_params(sub), np.ascontiguousarray(prims.pl_is_tri[ps]), _f64(prims.pl_rgb[ps]),
          np.ascontiguousarray(prims.pl_bbox[ps], np.int64), _f64(prims.pl_zscale[ps]), _f64(prims.pl_zbias[ps]), spans,
          np.ascontiguousarray(prims.pl_row_start[ps] if spans else np.zeros(0), np.int64),
          np.ascontiguousarray(prims.pl_row_span, np.int64).reshape(-1, 2))  # fmt: skip
    cap = tuple(_f64(getattr(prims, f)[cs]) for f in ("cap_xy", "cap_inv_depth", "cap_radius_px", "cap_rgb", "cap_zscale", "cap_zbias"))
    r, xy = prims.cap_radius_px[cs, None], prims.cap_xy[cs]
    lo = np.concatenate([np.floor(np.minimum(xy[:, :2], xy[:, 2:]) - r - PIXEL_CENTRE_OFFSET), prims.pl_bbox[ps, :2]])
    hi = np.concatenate([np.ceil(np.maximum(xy[:, :2], xy[:, 2:]) + r - PIXEL_CENTRE_OFFSET), prims.pl_bbox[ps, 2:]])
    owner = np.concatenate([cap_obj[cs], pl_obj[ps]])
    cb, pb = np.searchsorted(cap_obj[cs], np.arange(n_objects + 1)), np.searchsorted(pl_obj[ps], np.arange(n_objects + 1))
    img, zbuf, ids = np.zeros((h, w, 3), np.uint8), np.full((h, w), np.inf, np.float32), np.full((h, w), -1, np.int32)
    zeros, out = np.zeros(max(len(cs), len(ps)), np.int32), np.zeros(n_objects, np.int64)
    for k in np.unique(owner):
        if pb[k + 1] > pb[k]:
            _draw_planars(img, zbuf, rays, *pl, pb[k], pb[k + 1], style.NEAR_M, style.MAX_DEPTH_M, PARAM_EPS, ids, zeros, True)
        if cb[k + 1] > cb[k]:
            _draw_capsules(img, zbuf, *cap, cb[k], cb[k + 1], PIXEL_CENTRE_OFFSET, ids, zeros, True)
        mine = owner == k
        x0, y0 = max(int(lo[mine, 0].min()), 0), max(int(lo[mine, 1].min()), 0)
        x1, y1 = min(int(hi[mine, 0].max()), w - 1), min(int(hi[mine, 1].max()), h - 1)
        if x1 >= x0 and y1 >= y0:
            region = ids[y0 : y1 + 1, x0 : x1 + 1]
            out[k] = int((region >= 0).sum())
            region[...] = -1
            zbuf[y0 : y1 + 1, x0 : x1 + 1] = np.inf
    return out


# ---- torch backend ---------------------------------------------------------------------------
def _bbox_fragments(torch: Any, boxes: Any, max_fragments: int) -> Iterator[tuple[Any, Any, Any]]:
    """Yield (prim index, y, x) tensors for all pixels of the inclusive boxes (P, 4), in chunks."""
    widths = (boxes[:, 2] - boxes[:, 0] + 1).clamp(min=0)
    heights = (boxes[:, 3] - boxes[:, 1] + 1).clamp(min=0)
    counts = widths * heights
    start = 0
    n = len(boxes)
    while start < n:
        csum = torch.cumsum(counts[start:], 0)
        stop = start + max(1, int(torch.searchsorted(csum, torch.tensor(max_fragments, device=csum.device)).item()))
        stop = min(stop, n)
        c = counts[start:stop]
        total = int(c.sum().item())
        if total:
            prim = torch.repeat_interleave(torch.arange(start, stop, device=boxes.device), c)
            first = torch.cumsum(c, 0) - c
            local = torch.arange(total, device=boxes.device) - torch.repeat_interleave(first, c)
            wid = widths[prim]
            yield prim, boxes[prim, 1] + local // wid, boxes[prim, 0] + local % wid
        start = stop


def _capsule_boxes(torch: Any, xy: Any, radius: Any, w: int, h: int) -> Any:
    c = PIXEL_CENTRE_OFFSET
    lo_x = torch.floor(torch.minimum(xy[:, 0], xy[:, 2]) - radius - c).clamp(min=0)
    lo_y = torch.floor(torch.minimum(xy[:, 1], xy[:, 3]) - radius - c).clamp(min=0)
    hi_x = torch.ceil(torch.maximum(xy[:, 0], xy[:, 2]) + radius - c).clamp(max=w - 1)
    hi_y = torch.ceil(torch.maximum(xy[:, 1], xy[:, 3]) + radius - c).clamp(max=h - 1)
    return torch.stack([lo_x, lo_y, hi_x, hi_y], -1).long()


def _pack_keys(torch: Any, key32: Any, order: Any) -> Any:
    # key32 > 0: its IEEE bits are monotone as int32; the order (< 2^31) breaks ties
    bits = key32.view(torch.int32).to(torch.int64)
    return (bits << 32) | order


class _TorchTarget:
    """The z-buffer (packed (key, order) per pixel) and colours of a batch of B images on one device."""

    def __init__(self, torch: Any, n_images: int, n_pix: int, device: Any) -> None:
        self.torch = torch
        self.best = torch.full((n_images * n_pix,), torch.iinfo(torch.int64).max, dtype=torch.int64, device=device)
        self.colour = torch.zeros((n_images * n_pix, 3), dtype=torch.uint8, device=device)

    def resolve(self, flat_pix: Any, depth: Any, zscale: Any, zbias: Any, order: Any, rgb: Any) -> None:
        """Scatter-min fragments (F,) at flat pixel indices; the winners write their faded colour (F, 3)."""
        torch = self.torch
        key32 = (zscale * depth + zbias + KEY_OFFSET).to(torch.float32)
        packed = _pack_keys(torch, key32, order)
        self.best.scatter_reduce_(0, flat_pix, packed, reduce="amin")
        win = self.best[flat_pix] == packed
        f = (1.0 - depth * INV_MAX_DEPTH).clamp(min=0.0)
        col = torch.floor(rgb * f[:, None] + 0.5).to(torch.uint8)
        self.colour[flat_pix[win]] = col[win]


def _torch_capsules(torch: Any, target: _TorchTarget, prims: Primitives, base: int, dev: Any, max_fragments: int) -> None:
    f64 = torch.float64
    w, h = prims.width_px, prims.height_px
    xy = torch.as_tensor(prims.cap_xy, device=dev, dtype=f64)
    inv = torch.as_tensor(prims.cap_inv_depth, device=dev, dtype=f64)
    rad = torch.as_tensor(prims.cap_radius_px, device=dev, dtype=f64)
    rgb = torch.as_tensor(prims.cap_rgb, device=dev, dtype=f64)
    zs = torch.as_tensor(prims.cap_zscale, device=dev, dtype=f64)
    zb = torch.as_tensor(prims.cap_zbias, device=dev, dtype=f64)
    order = torch.as_tensor(prims.cap_order, device=dev, dtype=torch.int64)
    boxes = _capsule_boxes(torch, xy, rad, w, h)
    for s, y, x in _bbox_fragments(torch, boxes, max_fragments):
        px, py = x.to(f64) + PIXEL_CENTRE_OFFSET, y.to(f64) + PIXEL_CENTRE_OFFSET
        ax, ay, bx, by = xy[s, 0], xy[s, 1], xy[s, 2], xy[s, 3]
        dx, dy = bx - ax, by - ay
        l2 = dx * dx + dy * dy
        t = torch.where(l2 > 0, ((px - ax) * dx + (py - ay) * dy) / torch.where(l2 > 0, l2, 1.0), 0.0)
        t = t.clamp(0.0, 1.0)
        qx, qy = ax + t * dx - px, ay + t * dy - py
        inside = qx * qx + qy * qy <= rad[s] * rad[s]
        s, y, x, t = s[inside], y[inside], x[inside], t[inside]
        i0, i1 = inv[s, 0], inv[s, 1]
        depth = 1.0 / (i0 + t * (i1 - i0))
        target.resolve(base + y * w + x, depth, zs[s], zb[s], order[s], rgb[s])


def _torch_planars(torch: Any, target: _TorchTarget, prims: Primitives, rays: Any, base: int, dev: Any, max_fragments: int) -> None:
    f64 = torch.float64
    w = prims.width_px
    plane = torch.as_tensor(_plane_params(prims), device=dev, dtype=f64)
    is_tri = torch.as_tensor(prims.pl_is_tri, device=dev, dtype=torch.bool)
    prgb = torch.as_tensor(prims.pl_rgb, device=dev, dtype=f64)
    zs = torch.as_tensor(prims.pl_zscale, device=dev, dtype=f64)
    zb = torch.as_tensor(prims.pl_zbias, device=dev, dtype=f64)
    order = torch.as_tensor(prims.pl_order, device=dev, dtype=torch.int64)
    boxes = torch.as_tensor(prims.pl_bbox, device=dev, dtype=torch.int64)
    for p, y, x in _bbox_fragments(torch, boxes, max_fragments):
        rx, ry = rays[y, x, 0], rays[y, x, 1]
        q = plane[p]
        den = q[:, 0] * rx + q[:, 1] * ry + q[:, 2]
        depth = q[:, 3] / torch.where(den != 0, den, 1.0)
        ok = (den != 0) & (depth > style.NEAR_M) & (depth <= style.MAX_DEPTH_M)
        a = depth * (q[:, 4] * rx + q[:, 5] * ry + q[:, 6]) - q[:, 7]
        bb = depth * (q[:, 8] * rx + q[:, 9] * ry + q[:, 10]) - q[:, 11]
        tri = is_tri[p]
        ok &= (a >= -PARAM_EPS) & (bb >= -PARAM_EPS)
        ok &= torch.where(tri, a + bb <= 1.0 + PARAM_EPS, (a <= 1.0 + PARAM_EPS) & (bb <= 1.0 + PARAM_EPS))
        p, y, x, depth, a, bb, tri = p[ok], y[ok], x[ok], depth[ok], a[ok], bb[ok], tri[ok]
        a, bb = a.clamp(0.0, 1.0), bb.clamp(0.0, 1.0)
        c = prgb[p]
        w0, w1, w2, w3 = (1 - a) * (1 - bb), a * (1 - bb), a * bb, (1 - a) * bb
        quad = w0[:, None] * c[:, 0] + w1[:, None] * c[:, 1] + w2[:, None] * c[:, 2] + w3[:, None] * c[:, 3]
        rgb = torch.where(tri[:, None], c[:, 0], quad)
        target.resolve(base + y * w + x, depth, zs[p], zb[p], order[p], rgb)


def rasterize_torch(
    prims_batch: list[Primitives], rays_batch: Sequence[NDArrayFloat32], device: str | None = None, max_fragments: int = 1 << 21
) -> NDArrayByte:
    """Rasterise a batch of images with torch (any device).

    All images must share one size. Fragments are generated per primitive bounding box in
    chunks of at most `max_fragments` and resolved by a deterministic scatter-min on the packed
    (float32 key, draw order) pair, so the result does not depend on the device or chunking.

    Args:
        prims_batch: B primitive sets, one per image.
        rays_batch: B ray maps (H, W, 2) float32 (`ray_map`).
        device: torch device (default: cuda when available, else cpu).
        max_fragments: fragments generated at a time.

    Returns:
        (B, H, W, 3) uint8 RGB.
    """
    import torch

    if not prims_batch:
        raise ValueError("empty batch")
    h, w = prims_batch[0].height_px, prims_batch[0].width_px
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    n_pix = h * w
    target = _TorchTarget(torch, len(prims_batch), n_pix, dev)
    for b, (prims, rays_np) in enumerate(zip(prims_batch, rays_batch)):
        if (prims.height_px, prims.width_px) != (h, w):
            raise ValueError("all images of a batch must have the same size")
        base = b * n_pix
        rays = torch.as_tensor(np.asarray(rays_np), device=dev).to(torch.float64)
        if prims.n_capsules:
            _torch_capsules(torch, target, prims, base, dev, max_fragments)
        if prims.n_planars:
            _torch_planars(torch, target, prims, rays, base, dev, max_fragments)
    out: NDArrayByte = target.colour.reshape(len(prims_batch), h, w, 3).cpu().numpy()
    return out


def rasterize(prims: Primitives, rays: NDArrayFloat32, backend: str = "numba") -> NDArrayByte:
    """Rasterise one image on a black background.

    Args:
        prims: the image's primitives.
        rays: (H, W, 2) float32 ray map (`ray_map`).
        backend: "numba" (CPU) or "torch".

    Returns:
        (H, W, 3) uint8 RGB.
    """
    if backend == "numba":
        return rasterize_numba(prims, rays)
    if backend == "torch":
        return rasterize_torch([prims], [rays])[0]
    raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
