"""Edge-adaptive 4x MSAA for the numba raster backend (the torch twin is in `avsim.render.raster_torch`).

The single-sample pass (`avsim.render.raster_kernels`) draws every pixel at its centre and
records the draw order of the fragment that won it. A pixel is an *edge pixel* when one of its
8 neighbours was won by another primitive (or by the background). Only edge pixels get
sub-samples: 4 in the rotated-grid pattern `SAMPLES_XY_PX` (the D3D / OpenGL standard 4x MSAA
positions), each with its own coverage test, depth and z-test (the same key and draw-order
rules as the centre pass), and, as in MSAA, one colour per fragment shaded at the pixel centre
(depth fade and cuboid-side gradient evaluated there; a fragment whose plane the centre ray
does not meet in range is shaded at its first covered sub-sample). The pixel's colour is the
mean of its 4 sub-sample colours, ``(sum + 2) // 4`` per channel; uncovered sub-samples are
black (background). So a pixel whose sub-samples are all won by one primitive keeps exactly
the centre pass's colour, interior pixels are never touched, and the cost is proportional to
the edge pixels. Sub-sample rays are bilinear in the per-pixel ray map (exact for pinholes).
"""

from __future__ import annotations

import numpy as np

from avsim.core.typing import NDArrayBool, NDArrayByte, NDArrayFloat, NDArrayFloat32, NDArrayInt, NDArrayInt32
from avsim.render import style
from avsim.render.geometry import PIXEL_CENTRE_OFFSET
from avsim.render.raster_kernels import INV_MAX_DEPTH, PARAM_EPS, _njit

# 4x rotated grid, offsets (dx, dy) in px from the pixel centre (multiples of 1/8: exact in float)
SAMPLES_XY_PX: tuple[tuple[float, float], ...] = ((-0.125, -0.375), (0.375, -0.125), (-0.375, 0.125), (0.125, 0.375))
SAMPLE_REACH_PX = 0.4  # > the farthest sub-sample from the centre (0.395 px): widens loop bounds only

if _njit is not None:

    @_njit
    def _edge_pixels(win: NDArrayInt32) -> tuple[NDArrayInt, NDArrayInt]:
        # row_ptr (H + 1,), xs (E,): the edge pixels of row y are xs[row_ptr[y]:row_ptr[y + 1]], sorted
        h, w = win.shape
        flag = np.zeros((h, w), np.bool_)
        for y in range(h):
            for x in range(w):
                v = win[y, x]
                if x + 1 < w and win[y, x + 1] != v:
                    flag[y, x] = True
                    flag[y, x + 1] = True
                if y + 1 < h:
                    if win[y + 1, x] != v:
                        flag[y, x] = True
                        flag[y + 1, x] = True
                    if x + 1 < w and win[y + 1, x + 1] != v:
                        flag[y, x] = True
                        flag[y + 1, x + 1] = True
                    if x > 0 and win[y + 1, x - 1] != v:
                        flag[y, x] = True
                        flag[y + 1, x - 1] = True
        row_ptr = np.zeros(h + 1, np.int64)
        for y in range(h):
            row_ptr[y + 1] = row_ptr[y] + np.sum(flag[y])
        xs = np.empty(row_ptr[h], np.int64)
        for y in range(h):
            k = row_ptr[y]
            for x in range(w):
                if flag[y, x]:
                    xs[k] = x
                    k += 1
        return row_ptr, xs

    @_njit
    def _sample_rays(rays: NDArrayFloat32, row_ptr: NDArrayInt, xs: NDArrayInt, offs: NDArrayFloat) -> NDArrayFloat:
        # (E, 4, 2) rays of the sub-samples, bilinear between the pixel and its neighbours towards them
        h, w = rays.shape[0], rays.shape[1]
        out = np.empty((len(xs), len(offs), 2))
        for y in range(h):
            for k in range(row_ptr[y], row_ptr[y + 1]):
                x = xs[k]
                for j in range(len(offs)):
                    sx = 1 if offs[j, 0] > 0 else -1
                    sy = 1 if offs[j, 1] > 0 else -1
                    sx = sx if 0 <= x + sx < w else (-sx if 0 <= x - sx < w else 0)
                    sy = sy if 0 <= y + sy < h else (-sy if 0 <= y - sy < h else 0)
                    fx, fy = offs[j, 0] * sx, offs[j, 1] * sy
                    for c in range(2):
                        r00 = np.float64(rays[y, x, c])
                        r10 = np.float64(rays[y, x + sx, c])
                        r01 = np.float64(rays[y + sy, x, c])
                        r11 = np.float64(rays[y + sy, x + sx, c])
                        out[k, j, c] = r00 + fx * (r10 - r00) + fy * (r01 - r00) + fx * fy * (r11 - r10 - r01 + r00)
        return out

    @_njit
    def _aa_capsules(skey: NDArrayFloat32, scol: NDArrayByte, row_ptr: NDArrayInt, xs: NDArrayInt,
                     xy: NDArrayFloat, inv_depth: NDArrayFloat, radius: NDArrayFloat, rgb: NDArrayFloat,
                     zscale: NDArrayFloat, zbias: NDArrayFloat, start: int, stop: int, c: float,
                     offs: NDArrayFloat, reach: float) -> None:  # fmt: skip
        h = len(row_ptr) - 1
        for s in range(start, stop):
            ax, ay, bx, by = xy[s, 0], xy[s, 1], xy[s, 2], xy[s, 3]
            r = radius[s]
            r2, rr = r * r, r + reach
            dx, dy = bx - ax, by - ay
            l2 = dx * dx + dy * dy
            i0, i1 = inv_depth[s, 0], inv_depth[s, 1]
            for y in range(max(0, int(np.floor(min(ay, by) - rr - c))), min(h - 1, int(np.ceil(max(ay, by) + rr - c))) + 1):
                ka, kb = row_ptr[y], row_ptr[y + 1]
                if ka == kb:
                    continue
                py = y + c
                if abs(dy) > 1e-12:
                    ta, tb = (py - rr - ay) / dy, (py + rr - ay) / dy
                    ta, tb = max(min(ta, tb), 0.0), min(max(ta, tb), 1.0)
                    if ta > tb:
                        continue
                    xa, xb = ax + ta * dx, ax + tb * dx
                    xlo, xhi = min(xa, xb) - rr, max(xa, xb) + rr
                else:
                    xlo, xhi = min(ax, bx) - rr, max(ax, bx) + rr
                k = ka + np.searchsorted(xs[ka:kb], int(np.floor(xlo - c)))
                while k < kb and xs[k] <= xhi - c:
                    px = xs[k] + c
                    t = min(max(((px - ax) * dx + (py - ay) * dy) / l2, 0.0), 1.0) if l2 > 0.0 else 0.0
                    depth = 1.0 / (i0 + t * (i1 - i0))
                    f = max(1.0 - depth * INV_MAX_DEPTH, 0.0)
                    qr, qg, qb = int(rgb[s, 0] * f + 0.5), int(rgb[s, 1] * f + 0.5), int(rgb[s, 2] * f + 0.5)
                    for j in range(len(offs)):
                        sx, sy = px + offs[j, 0], py + offs[j, 1]
                        t = min(max(((sx - ax) * dx + (sy - ay) * dy) / l2, 0.0), 1.0) if l2 > 0.0 else 0.0
                        qx, qy = ax + t * dx - sx, ay + t * dy - sy
                        if qx * qx + qy * qy > r2:
                            continue
                        depth = 1.0 / (i0 + t * (i1 - i0))
                        key = np.float32(zscale[s] * depth + zbias[s] + 1.0)
                        if key < skey[k, j]:
                            skey[k, j] = key
                            scol[k, j, 0], scol[k, j, 1], scol[k, j, 2] = qr, qg, qb
                    k += 1

    @_njit
    def _plane_at(plane: NDArrayFloat, p: int, rx: float, ry: float) -> tuple[float, float, float, float]:
        # (n . r, depth, a, b) of planar p along the ray (rx, ry, 1); depth 0 where n . r = 0
        den = plane[p, 0] * rx + plane[p, 1] * ry + plane[p, 2]
        if den == 0.0:
            return den, 0.0, 0.0, 0.0
        depth = plane[p, 3] / den
        a = depth * (plane[p, 4] * rx + plane[p, 5] * ry + plane[p, 6]) - plane[p, 7]
        b = depth * (plane[p, 8] * rx + plane[p, 9] * ry + plane[p, 10]) - plane[p, 11]
        return den, depth, a, b

    @_njit
    def _plane_colour(rgb: NDArrayFloat, p: int, tri: bool, depth: float, a: float, b: float) -> tuple[int, int, int]:
        # the colour the centre pass gives planar p at (depth, a, b), rounded as `_put` does
        f = max(1.0 - depth * INV_MAX_DEPTH, 0.0)
        if tri:
            return int(rgb[p, 0, 0] * f + 0.5), int(rgb[p, 0, 1] * f + 0.5), int(rgb[p, 0, 2] * f + 0.5)
        a, b = min(max(a, 0.0), 1.0), min(max(b, 0.0), 1.0)
        w0, w1, w2, w3 = (1 - a) * (1 - b), a * (1 - b), a * b, (1 - a) * b
        cr = w0 * rgb[p, 0, 0] + w1 * rgb[p, 1, 0] + w2 * rgb[p, 2, 0] + w3 * rgb[p, 3, 0]
        cg = w0 * rgb[p, 0, 1] + w1 * rgb[p, 1, 1] + w2 * rgb[p, 2, 1] + w3 * rgb[p, 3, 1]
        cb = w0 * rgb[p, 0, 2] + w1 * rgb[p, 1, 2] + w2 * rgb[p, 2, 2] + w3 * rgb[p, 3, 2]
        return int(cr * f + 0.5), int(cg * f + 0.5), int(cb * f + 0.5)

    @_njit
    def _aa_planar_pixel(skey: NDArrayFloat32, scol: NDArrayByte, k: int, rx: float, ry: float, srays: NDArrayFloat,
                         plane: NDArrayFloat, p: int, tri: bool, rgb: NDArrayFloat, zs: float, zb: float,
                         near: float, far: float, eps: float) -> None:  # fmt: skip
        den, depth, a, b = _plane_at(plane, p, rx, ry)
        have = den != 0.0 and depth > near and depth <= far
        qr, qg, qb = _plane_colour(rgb, p, tri, depth, a, b) if have else (0, 0, 0)
        for j in range(srays.shape[1]):
            den, depth, a, b = _plane_at(plane, p, srays[k, j, 0], srays[k, j, 1])
            if den == 0.0 or not (depth > near and depth <= far) or a < -eps or b < -eps:
                continue
            if (a + b > 1.0 + eps) if tri else (a > 1.0 + eps or b > 1.0 + eps):
                continue
            if not have:  # the centre ray misses the plane's range: shade at this first covered sub-sample
                qr, qg, qb = _plane_colour(rgb, p, tri, depth, a, b)
                have = True
            key = np.float32(zs * depth + zb + 1.0)
            if key < skey[k, j]:
                skey[k, j] = key
                scol[k, j, 0], scol[k, j, 1], scol[k, j, 2] = qr, qg, qb

    @_njit
    def _aa_planars(skey: NDArrayFloat32, scol: NDArrayByte, row_ptr: NDArrayInt, xs: NDArrayInt,
                    rays: NDArrayFloat32, srays: NDArrayFloat, plane: NDArrayFloat, is_tri: NDArrayBool,
                    rgb: NDArrayFloat, bbox: NDArrayInt, zscale: NDArrayFloat, zbias: NDArrayFloat,
                    use_spans: bool, row_start: NDArrayInt, row_span: NDArrayInt, start: int, stop: int,
                    near: float, far: float, eps: float) -> None:  # fmt: skip
        h = len(row_ptr) - 1
        for p in range(start, stop):
            y0, y1 = bbox[p, 1], bbox[p, 3]
            for y in range(max(0, y0 - 1), min(h - 1, y1 + 1) + 1):
                ka, kb = row_ptr[y], row_ptr[y + 1]
                if ka == kb:
                    continue
                lo, hi = bbox[p, 0], bbox[p, 2]
                if use_spans:  # sub-samples reach 0.4 px: the spans of rows y - 1 .. y + 1, 1 px wider
                    lo2, hi2 = np.iinfo(np.int64).max // 2, -1
                    for yy in range(max(y - 1, y0), min(y + 1, y1) + 1):
                        lo2 = min(lo2, row_span[row_start[p] + yy - y0, 0])
                        hi2 = max(hi2, row_span[row_start[p] + yy - y0, 1])
                    lo, hi = max(lo, lo2), min(hi, hi2)
                k = ka + np.searchsorted(xs[ka:kb], lo - 1)
                while k < kb and xs[k] <= hi + 1:
                    x = xs[k]
                    _aa_planar_pixel(skey, scol, k, np.float64(rays[y, x, 0]), np.float64(rays[y, x, 1]), srays,
                                     plane, p, is_tri[p], rgb, zscale[p], zbias[p], near, far, eps)  # fmt: skip
                    k += 1

    @_njit
    def _resolve(img: NDArrayByte, row_ptr: NDArrayInt, xs: NDArrayInt, scol: NDArrayByte) -> None:
        n = scol.shape[1]
        for y in range(len(row_ptr) - 1):
            for k in range(row_ptr[y], row_ptr[y + 1]):
                for ch in range(3):
                    total = 0
                    for j in range(n):
                        total += np.int64(scol[k, j, ch])
                    img[y, xs[k], ch] = np.uint8((total + n // 2) // n)


def sample_offsets_px() -> NDArrayFloat:
    """The sub-sample offsets from the pixel centre.

    Returns:
        (4, 2) float64 (dx, dy) in px (`SAMPLES_XY_PX`).
    """
    return np.array(SAMPLES_XY_PX, dtype=np.float64)


def antialias_numba(
    img: NDArrayByte, win: NDArrayInt32, rays: NDArrayFloat32, cap: tuple, pl: tuple, runs: list[tuple[int, int, int]]
) -> int:
    """Re-resolve the edge pixels of a centre-sampled image from 4 sub-samples each (in place).

    Args:
        img: (H, W, 3) uint8 image of the centre pass (edge pixels are overwritten).
        win: (H, W) int32 draw order of the fragment that won each pixel centre, -1 background.
        rays: (H, W, 2) float32 ray map.
        cap: the capsule arrays as `rasterize_numba` passes them to the centre kernel
            (xy, inv_depth, radius, rgb, zscale, zbias).
        pl: the planar arrays likewise (plane, is_tri, rgb, bbox, zscale, zbias, use_spans,
            row_start, row_span).
        runs: the draw sequence (kind, start, stop) of the centre pass.

    Returns:
        Number of edge pixels resolved from sub-samples.
    """
    row_ptr, xs = _edge_pixels(win)
    if not len(xs):
        return 0
    offs = sample_offsets_px()
    srays = _sample_rays(rays, row_ptr, xs, offs)
    skey = np.full((len(xs), len(offs)), np.inf, np.float32)
    scol = np.zeros((len(xs), len(offs), 3), np.uint8)
    for kind, start, stop in runs:
        if kind == 0:
            _aa_capsules(skey, scol, row_ptr, xs, *cap, start, stop, PIXEL_CENTRE_OFFSET, offs, SAMPLE_REACH_PX)
        else:
            _aa_planars(skey, scol, row_ptr, xs, rays, srays, *pl, start, stop, style.NEAR_M, style.MAX_DEPTH_M, PARAM_EPS)
    _resolve(img, row_ptr, xs, scol)
    return len(xs)
