"""Edge-adaptive 4x MSAA for the numba raster backend (the torch twin is in `avsim.render.raster.torch_backend`).

The single-sample pass (`avsim.render.raster.kernels`) draws every pixel at its centre and
records which primitive won it (its code: capsule s, or n_capsules + planar p). A pixel is an
*edge pixel* when one of its 4 neighbours was won by another primitive (or by the background);
for a straight boundary this flags every pixel whose sub-samples the boundary can cross (a
sub-sample is at most 0.40 px from the centre, a 4-neighbour at least 0.71 px along any
direction). Only edge pixels get sub-samples: 4 in the rotated-grid pattern `SAMPLES_XY_PX`
(the standard D3D / OpenGL 4x MSAA positions). The candidates of an edge pixel are the
primitives that won its centre and its 4 neighbours' centres; each is tested at every
sub-sample (own coverage; own depth for planars, the centre-line depth at the pixel centre for
capsules, which are screen-space strokes; the centre pass's key and draw-order rule for the
z-test) and, as in MSAA, shaded once at the pixel centre (depth fade and cuboid-side gradient there; a
planar whose plane the centre ray does not meet in range is shaded at its first covered
sub-sample). The pixel is the mean of its 4 sub-sample colours, ``(sum + 2) // 4`` per
channel, black where no candidate covers a sub-sample. So a pixel whose sub-samples are all
won by one primitive keeps exactly the centre pass's colour, interior pixels are never touched,
and the cost is proportional to the edge pixels. What this leaves out: a primitive that covers
a sub-sample but wins none of the 5 centres (a sliver thinner than a pixel between centres) is
not a candidate there. Sub-sample rays: the pixel's ray plus the ray map's central-difference
Jacobian times the offset (exact for pinholes).
"""

from __future__ import annotations

import numpy as np

from avsim.core.jit import njit, njit_inline
from avsim.core.typing import NDArrayByte, NDArrayFloat, NDArrayFloat32, NDArrayInt, NDArrayInt32
from avsim.render import style
from avsim.render.raster.kernels import INV_MAX_DEPTH, PARAM_EPS
from avsim.render.raster.primitives import PIXEL_CENTRE_OFFSET, CapsuleArrays, PlanarArrays

# 4x rotated grid, offsets (dx, dy) in px from the pixel centre (multiples of 1/8: exact in float)
SAMPLES_XY_PX: tuple[tuple[float, float], ...] = ((-0.125, -0.375), (0.375, -0.125), (-0.375, 0.125), (0.125, 0.375))
SAFE_REACH_PX = 0.396  # > the farthest sub-sample from the centre (0.3953 px), with float slack


@njit_inline
def _ray_jacobian(rays: NDArrayFloat32, y: int, x: int) -> tuple[float, float, float, float]:
    # d(ray)/dx (jx0, jx1) and d(ray)/dy (jy0, jy1) by central (at the border one-sided) differences
    h, w = rays.shape[0], rays.shape[1]
    xa, xb = max(x - 1, 0), min(x + 1, w - 1)
    ya, yb = max(y - 1, 0), min(y + 1, h - 1)
    sx = 1.0 / (xb - xa) if xb > xa else 0.0
    sy = 1.0 / (yb - ya) if yb > ya else 0.0
    jx0 = (np.float64(rays[y, xb, 0]) - np.float64(rays[y, xa, 0])) * sx
    jx1 = (np.float64(rays[y, xb, 1]) - np.float64(rays[y, xa, 1])) * sx
    jy0 = (np.float64(rays[yb, x, 0]) - np.float64(rays[ya, x, 0])) * sy
    jy1 = (np.float64(rays[yb, x, 1]) - np.float64(rays[ya, x, 1])) * sy
    return float(jx0), float(jx1), float(jy0), float(jy1)

@njit_inline
def _capsule_eval(s: int, px: float, py: float, caps: CapsuleArrays, offs: NDArrayFloat,
                  keys: NDArrayFloat32, cols: NDArrayInt, i: int) -> None:  # fmt: skip
    # capsule s at the sub-samples of the pixel centred at (px, py): keys[i, j] (inf: not covered), cols[i];
    # one depth per fragment (the centre line's at the pixel centre), coverage per sub-sample
    xy, inv_depth, radius, rgb, zscale, zbias = caps
    ax, ay, bx, by = xy[s, 0], xy[s, 1], xy[s, 2], xy[s, 3]
    dx, dy = bx - ax, by - ay
    l2 = dx * dx + dy * dy
    r = radius[s]
    t = min(max(((px - ax) * dx + (py - ay) * dy) / l2, 0.0), 1.0) if l2 > 0.0 else 0.0
    qx, qy = ax + t * dx - px, ay + t * dy - py
    d2 = qx * qx + qy * qy  # distance to the centre line is 1-Lipschitz: far inside / outside decide all 4
    r_in, r_out = r - SAFE_REACH_PX, r + SAFE_REACH_PX
    inside, outside = r_in > 0.0 and d2 <= r_in * r_in, d2 >= r_out * r_out
    if outside:  # no sub-sample covered: the colour is never used
        for j in range(len(offs)):
            keys[i, j] = np.inf
        return
    depth = 1.0 / (inv_depth[s, 0] + t * (inv_depth[s, 1] - inv_depth[s, 0]))
    f = max(1.0 - depth * INV_MAX_DEPTH, 0.0)
    for ch in range(3):
        cols[i, ch] = int(rgb[s, ch] * f + 0.5)
    key = np.float32(zscale[s] * depth + zbias[s] + 1.0)
    for j in range(len(offs)):
        keys[i, j] = key if inside else np.inf
    if inside:
        return
    inv_l2 = 1.0 / l2 if l2 > 0.0 else 0.0
    for j in range(len(offs)):
        sx, sy = px + offs[j, 0], py + offs[j, 1]
        t = min(max(((sx - ax) * dx + (sy - ay) * dy) * inv_l2, 0.0), 1.0)
        qx, qy = ax + t * dx - sx, ay + t * dy - sy
        if qx * qx + qy * qy <= r * r:
            keys[i, j] = key

@njit_inline
def _plane_at(plane: NDArrayFloat, p: int, rx: float, ry: float) -> tuple[float, float, float, float]:
    # (n . r, depth, a, b) of planar p along the ray (rx, ry, 1); depth 0 where n . r = 0
    den = plane[p, 0] * rx + plane[p, 1] * ry + plane[p, 2]
    if den == 0.0:
        return den, 0.0, 0.0, 0.0
    depth = plane[p, 3] / den
    a = depth * (plane[p, 4] * rx + plane[p, 5] * ry + plane[p, 6]) - plane[p, 7]
    b = depth * (plane[p, 8] * rx + plane[p, 9] * ry + plane[p, 10]) - plane[p, 11]
    return den, depth, a, b

@njit_inline
def _plane_colour(rgb: NDArrayFloat, p: int, tri: bool, depth: float, a: float, b: float,
                  cols: NDArrayInt, i: int) -> None:  # fmt: skip
    # cols[i] = the colour the centre pass gives planar p at (depth, a, b), rounded as `_put` does
    f = max(1.0 - depth * INV_MAX_DEPTH, 0.0)
    a, b = min(max(a, 0.0), 1.0), min(max(b, 0.0), 1.0)
    w0, w1, w2, w3 = (1 - a) * (1 - b), a * (1 - b), a * b, (1 - a) * b
    for ch in range(3):
        c = rgb[p, 0, ch] if tri else w0 * rgb[p, 0, ch] + w1 * rgb[p, 1, ch] + w2 * rgb[p, 2, ch] + w3 * rgb[p, 3, ch]
        cols[i, ch] = int(c * f + 0.5)

@njit_inline
def _planar_eval(p: int, rx: float, ry: float, jac: tuple[float, float, float, float], pls: PlanarArrays,
                 offs: NDArrayFloat, near: float, far: float, eps: float,
                 keys: NDArrayFloat32, cols: NDArrayInt, i: int) -> None:  # fmt: skip
    # planar p at the sub-samples of the pixel whose centre ray is (rx, ry): keys[i, j], cols[i]
    plane, is_tri, rgb, zscale, zbias = pls.plane, pls.is_tri, pls.rgb, pls.zscale, pls.zbias
    tri = is_tri[p]
    den, depth, a, b = _plane_at(plane, p, rx, ry)
    have = den != 0.0 and depth > near and depth <= far
    if have:
        _plane_colour(rgb, p, tri, depth, a, b, cols, i)
    for j in range(len(offs)):
        ox, oy = offs[j, 0], offs[j, 1]
        den, depth, a, b = _plane_at(plane, p, rx + ox * jac[0] + oy * jac[2], ry + ox * jac[1] + oy * jac[3])
        keys[i, j] = np.inf
        if den == 0.0 or not (depth > near and depth <= far) or a < -eps or b < -eps:
            continue
        if (a + b > 1.0 + eps) if tri else (a > 1.0 + eps or b > 1.0 + eps):
            continue
        if not have:  # the centre ray misses the plane's range: shade at this first covered sub-sample
            _plane_colour(rgb, p, tri, depth, a, b, cols, i)
            have = True
        keys[i, j] = np.float32(zscale[p] * depth + zbias[p] + 1.0)

@njit_inline
def _candidates(win: NDArrayInt32, y: int, x: int, cand: NDArrayInt, top: bool, bottom: bool) -> int:
    # distinct winners (not background) of the pixel and its 4 neighbours into cand; returns how many
    # (top / bottom: row y of win is the image's first / last, so it has no neighbour above / below)
    w = win.shape[1]
    v0 = win[y, x]
    n = 0
    if v0 >= 0:
        cand[0] = v0
        n = 1
    for k in range(4):
        if k == 0:
            if x == 0:
                continue
            v = win[y, x - 1]
        elif k == 1:
            if x + 1 >= w:
                continue
            v = win[y, x + 1]
        elif k == 2:
            if top:
                continue
            v = win[y - 1, x]
        else:
            if bottom:
                continue
            v = win[y + 1, x]
        if v < 0:
            continue
        dup = False
        for m in range(n):
            dup = dup or cand[m] == v
        if not dup:
            cand[n] = v
            n += 1
    return n

@njit_inline
def _resolve_pixel(img: NDArrayByte, y: int, x: int, n: int, keys: NDArrayFloat32, cols: NDArrayInt,
                   cand: NDArrayInt, order: NDArrayInt) -> None:  # fmt: skip
    # each sub-sample shows the candidate with the smallest (key, draw order); the pixel is the mean of the 4
    m = keys.shape[1]
    t0, t1, t2 = 0, 0, 0
    for j in range(m):
        best, best_order, bi = np.float32(np.inf), 0, -1
        for i in range(n):
            k = keys[i, j]
            if k < best or (k == best and bi >= 0 and order[cand[i]] < best_order):
                best, best_order, bi = k, order[cand[i]], i
        if bi >= 0:
            t0, t1, t2 = t0 + cols[bi, 0], t1 + cols[bi, 1], t2 + cols[bi, 2]
    img[y, x, 0] = np.uint8((t0 + 2) >> 2)  # m = 4: (sum + 2) // 4
    img[y, x, 1] = np.uint8((t1 + 2) >> 2)
    img[y, x, 2] = np.uint8((t2 + 2) >> 2)

@njit_inline
def _edge_row(row: NDArrayInt32, up: NDArrayInt32, dn: NDArrayInt32, flags: NDArrayByte) -> None:
    # flags[x] = 1 where pixel x of `row` has a 4-neighbour (in it, or in the rows `up` and `dn` above and
    # below: the row itself at the image's border) won by another primitive (branch-free: vectorised)
    w = len(row)
    for x in range(1, w - 1):
        v = row[x]
        flags[x] = (row[x - 1] != v) | (row[x + 1] != v) | (up[x] != v) | (dn[x] != v)
    for x in (0, w - 1):
        v = row[x]
        flags[x] = (row[max(x - 1, 0)] != v) | (row[min(x + 1, w - 1)] != v) | (up[x] != v) | (dn[x] != v)

@njit
def aa_rows(img: NDArrayByte, win: NDArrayInt32, rays: NDArrayFloat32, order: NDArrayInt, caps: CapsuleArrays,
            pls: PlanarArrays, offs: NDArrayFloat, consts: tuple[float, float, float, float],
            rows: tuple[int, int, int]) -> int:  # fmt: skip
    # the edge pixels of image rows y0 <= y < y1 (rows = (y0, y1, oy)); img and win hold image row y at
    # row y - oy, and win also the rows next to them (y0 - 1 and y1 where the image has them); rays is
    # the whole image's; consts: (pixel centre offset, near, far, barycentric eps). Returns the number of edge pixels
    c, near, far, eps = consts
    n_caps = len(caps.xy)
    y0, y1, oy = rows
    h, w = rays.shape[0], win.shape[1]
    cand = np.empty(5, np.int64)
    keys = np.empty((5, len(offs)), np.float32)
    cols = np.zeros((5, 3), np.int64)
    flags = np.zeros(((w + 7) // 8) * 8, np.uint8)
    words = flags.view(np.uint64)  # 8 flags at a time: most words are 0
    xs = np.empty(len(flags), np.int64)  # the flagged columns of the row (flags past w stay 0)
    n_edge = 0
    for y in range(y0, y1):
        _edge_row(win[y - oy], win[max(y - 1, 0) - oy], win[min(y + 1, h - 1) - oy], flags)
        m = 0
        for word in range(len(words)):  # list the flagged columns, branch-free within a word
            if words[word] == 0:
                continue
            for x in range(word * 8, word * 8 + 8):
                xs[m] = x
                m += flags[x]
        n_edge += m
        for e in range(m):
            x = xs[e]
            n = _candidates(win, y - oy, x, cand, y == 0, y + 1 >= h)
            for i in range(n):
                k = cand[i]
                if k < n_caps:
                    _capsule_eval(k, x + c, y + c, caps, offs, keys, cols, i)
                else:
                    rx, ry = np.float64(rays[y, x, 0]), np.float64(rays[y, x, 1])
                    _planar_eval(k - n_caps, rx, ry, _ray_jacobian(rays, y, x), pls, offs, near, far, eps, keys, cols, i)
            _resolve_pixel(img, y - oy, x, n, keys, cols, cand, order)
    return n_edge


def sample_offsets_px() -> NDArrayFloat:
    """The sub-sample offsets from the pixel centre.

    Returns:
        (4, 2) float64 (dx, dy) in px (`SAMPLES_XY_PX`).
    """
    return np.array(SAMPLES_XY_PX, dtype=np.float64)


def antialias_numba(img: NDArrayByte, win: NDArrayInt32, rays: NDArrayFloat32, order: NDArrayInt, caps: CapsuleArrays,
                    pls: PlanarArrays) -> int:  # fmt: skip
    """Re-resolve the edge pixels of a centre-sampled image from 4 sub-samples each (in place).

    Args:
        img: (H, W, 3) uint8 image of the centre pass (edge pixels are overwritten).
        win: (H, W) int32 code of the primitive that won each pixel centre (capsule s, or
            n_capsules + planar p), -1 background.
        rays: (H, W, 2) float32 ray map.
        order: (S + P,) int64 draw order of each code (ties go to the lower).
        caps: the capsule arrays the centre pass drew.
        pls: the planar arrays likewise.

    Returns:
        Number of edge pixels resolved from sub-samples.
    """
    consts = (PIXEL_CENTRE_OFFSET, style.NEAR_M, style.MAX_DEPTH_M, PARAM_EPS)
    return int(aa_rows(img, win, rays, order, caps, pls, sample_offsets_px(), consts, (0, len(win), 0)))
