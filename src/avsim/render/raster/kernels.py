"""Numba kernels of the single-sample raster pass (one sample per pixel, at its centre) and the
key floors both paths share (see `avsim.render.raster.draw` for the occlusion and colour rules);
`avsim.render.raster.aa` adds the sub-samples of edge pixels. Kernels read the primitives as the
named tuples of `avsim.render.raster.primitives` (`CapsuleArrays`, `PlanarArrays`, `DrawPlan`,
`FrameBuffers`, `IdBuffers`).
"""

from __future__ import annotations

import numpy as np

from avsim.core.jit import njit, njit_inline, njit_vec
from avsim.core.typing import NDArrayBool, NDArrayByte, NDArrayFloat, NDArrayFloat32, NDArrayInt
from avsim.render import style
from avsim.render.raster.primitives import (
    CapsuleArrays,
    Capsules,
    DrawPlan,
    FrameBuffers,
    IdBuffers,
    PlanarArrays,
    Planars,
)

INV_MAX_DEPTH = 1.0 / style.MAX_DEPTH_M  # fade = 1 - depth * INV_MAX_DEPTH in both backends
KEY_OFFSET = 1.0  # keeps every comparison key positive (packed float32 bits sort as ints)
PARAM_EPS = 1e-9  # barycentric slack so shared edges leave no cracks


def _round_down32(key: NDArrayFloat, grows: NDArrayBool) -> NDArrayFloat32:
    """float32 keys rounded down (never above `key`), -inf where not `grows` or not finite."""
    floor32 = key.astype(np.float32)
    floor32 = np.where(floor32.astype(np.float64) > key, np.nextafter(floor32, np.float32(-np.inf)), floor32)
    return np.ascontiguousarray(np.where(grows & np.isfinite(floor32), floor32, -np.inf), np.float32)


def capsule_key_floor(caps: Capsules) -> NDArrayFloat32:
    """A float32 lower bound of every comparison key each capsule can give a pixel (as `planar_key_floor`).

    Depth along a capsule is 1 / (interpolated 1/z), so none is nearer than 1 / the larger end's 1/z.

    Args:
        caps: the capsules.

    Returns:
        (S,) float32 bounds, rounded down; -inf where the key does not grow with depth.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        z_min = 1.0 / caps.inv_depth.max(axis=1, initial=-np.inf)
    z_min = z_min * (1.0 - 1e-6)
    key = caps.zscale * z_min + caps.zbias + KEY_OFFSET
    return _round_down32(key, (caps.zscale > 0) & (z_min > 0))


def planar_key_floor(planars: Planars, near_m: float) -> NDArrayFloat32:
    """A float32 lower bound of every comparison key each planar can give a pixel (its early z-reject).

    Depth is linear over a planar, so no pixel of it is nearer than its nearest corner (less a
    slack for the barycentric tolerance and rounding) nor than `near_m`; a pixel whose z-buffer
    key is at or below the bound cannot be won by the planar and is skipped before its ray is cast.

    Args:
        planars: the planars.
        near_m: the near plane (no fragment is nearer).

    Returns:
        (P,) float32 bounds, rounded down; -inf where the key does not grow with depth (zscale <= 0).
    """
    o, e1, e2 = planars.origin[:, 2], planars.e1[:, 2], planars.e2[:, 2]
    far = np.where(planars.is_tri, o, o + e1 + e2)  # the corner opposite c0 (c0 itself for triangles)
    z_min = np.minimum(np.minimum(o, o + e1), np.minimum(o + e2, far))
    z_min = z_min - 1e-6 * (np.abs(e1) + np.abs(e2) + np.abs(z_min) + 1.0)
    key = planars.zscale * np.maximum(z_min, near_m) + planars.zbias + KEY_OFFSET
    return _round_down32(key, planars.zscale > 0)


@njit
def _ztest(zbuf: NDArrayFloat32, zrank: NDArrayInt, y: int, x: int, depth: float, zscale: float, zbias: float,
           rank: int) -> bool:  # fmt: skip
    # the smallest (key, draw rank) pair wins whatever the sequence the primitives are drawn in; zrank is
    # only read where zbuf holds a key (never at +inf: keys are finite), so it needs no clearing
    key = np.float32(zscale * depth + zbias + 1.0)
    if key < zbuf[y, x] or (key == zbuf[y, x] and rank < zrank[y, x]):
        zbuf[y, x] = key
        zrank[y, x] = rank
        return True
    return False

@njit
def _put(img: NDArrayByte, y: int, x: int, depth: float, r: float, g: float, b: float) -> None:
    f = 1.0 - depth * INV_MAX_DEPTH
    f = max(f, 0.0)
    img[y, x, 0] = np.uint8(int(r * f + 0.5))
    img[y, x, 1] = np.uint8(int(g * f + 0.5))
    img[y, x, 2] = np.uint8(int(b * f + 0.5))

@njit
def _capsule_columns(ax: float, ay: float, bx: float, dx: float, dy: float, r: float, py: float,
                     c: float, w: int) -> tuple[int, int]:  # fmt: skip
    # conservative column range [x0, x1] of row centre py: centre-line points within r of the row
    # (x0 > x1: the row misses the capsule)
    if abs(dy) > 1e-12:
        ta = (py - r - ay) / dy
        tb = (py + r - ay) / dy
        if ta > tb:
            ta, tb = tb, ta
        ta = max(ta, 0.0)
        tb = min(tb, 1.0)
        if ta > tb:
            return 0, -1
        xa, xb = ax + ta * dx, ax + tb * dx
        xlo, xhi = min(xa, xb) - r, max(xa, xb) + r
    else:
        xlo, xhi = min(ax, bx) - r, max(ax, bx) + r
    return max(0, int(np.floor(xlo - c))), min(w - 1, int(np.ceil(xhi - c)))

@njit
def _capsule_param(ax: float, ay: float, dx: float, dy: float, l2: float, r2: float, px: float, py: float) -> float:
    # parameter t in [0, 1] of the centre-line point nearest (px, py), or -1 beyond the radius
    t = 0.0
    if l2 > 0.0:
        t = ((px - ax) * dx + (py - ay) * dy) / l2
        t = min(max(t, 0.0), 1.0)
    qx = ax + t * dx - px
    qy = ay + t * dy - py
    return -1.0 if qx * qx + qy * qy > r2 else t

@njit
def _planar_hit(plane: NDArrayFloat, p: int, rx: float, ry: float, tri: bool, near: float, far: float,
                eps: float) -> tuple[float, float, float]:  # fmt: skip
    # (depth, a, b) where the pixel ray (rx, ry, 1) meets planar p inside its triangle / quad;
    # depth -1 when it misses (parallel, outside [near, far] or outside the shape)
    den = plane[p, 0] * rx + plane[p, 1] * ry + plane[p, 2]
    if den == 0.0:
        return -1.0, 0.0, 0.0
    depth = plane[p, 3] / den
    if not (depth > near and depth <= far):
        return -1.0, 0.0, 0.0
    a = depth * (plane[p, 4] * rx + plane[p, 5] * ry + plane[p, 6]) - plane[p, 7]
    b = depth * (plane[p, 8] * rx + plane[p, 9] * ry + plane[p, 10]) - plane[p, 11]
    if a < -eps or b < -eps:
        return -1.0, a, b
    if (a + b > 1.0 + eps) if tri else (a > 1.0 + eps or b > 1.0 + eps):
        return -1.0, a, b
    return depth, a, b

@njit_inline
def note_claim(disp: int, many: bool, won: int, old: int, k: int) -> tuple[int, bool, int]:
    # a primitive of object k (none: k < 0) took a pixel whose id was `old`: the first object it displaced,
    # whether it displaced more than one, and how many pixels k newly holds
    if old != k:
        won += 1
        if old >= 0:
            if disp < 0:
                disp = old
            elif old != disp:
                many = True
    return disp, many, won

@njit_inline
def grow_box(stats: NDArrayInt, j: int, col: int, box: tuple[int, int, int, int]) -> None:
    # stats[j, col:col + 4] (an inclusive box x0, y0, x1, y1) grown by `box` unless it is empty
    if box[2] >= box[0]:
        stats[j, col], stats[j, col + 1] = min(stats[j, col], box[0]), min(stats[j, col + 1], box[1])
        stats[j, col + 2], stats[j, col + 3] = max(stats[j, col + 2], box[2]), max(stats[j, col + 3], box[3])

@njit_inline
def lose_overlap(stats: NDArrayInt, j: int, won: tuple[int, int, int, int]) -> None:
    # object j may have lost pixels of `won` (a primitive's won box) it held: where it meets j's won box
    box = (max(won[0], stats[j, 0]), max(won[1], stats[j, 1]), min(won[2], stats[j, 2]), min(won[3], stats[j, 3]))
    if box[3] >= box[1]:
        grow_box(stats, j, 4, box)

@njit_inline
def commit_claims(stats: NDArrayInt, k: int, disp: int, many: bool, won: tuple[int, int, int, int],
                  lost: tuple[int, int, int, int], n_won: int) -> None:  # fmt: skip
    # one primitive's id statistics (stats rows `raster.ID_STATS_COLUMNS`; the kernels' pixel loops keep
    # them in locals: a store to `stats` in those loops slows them down by half): the objects it displaced
    # lost pixels inside its won box, its own object won `won` (n_won pixels it did not hold) and lost `lost`
    if many:  # several objects displaced: each whose won box meets this primitive's
        for j in range(len(stats)):
            if j != k:
                lose_overlap(stats, j, won)
    elif disp >= 0:
        lose_overlap(stats, disp, won)
    if k >= 0:
        grow_box(stats, k, 0, won)
        grow_box(stats, k, 4, lost)
        stats[k, 8] += n_won

@njit
def draw_capsules(buf: FrameBuffers, caps: CapsuleArrays, draw: DrawPlan, idb: IdBuffers, c: float,
                  rows: tuple[int, int, int]) -> None:  # fmt: skip
    # c: PIXEL_CENTRE_OFFSET, an argument so that the on-disk kernel cache never holds a stale one;
    # idb.with_ids: ids follow every centre z-test, and for the `idb.track` capsules the id statistics too
    # (`note_claim`, `commit_claims`); an untracked primitive (no object id, drawn before every object) only writes ids;
    # draw.seq: the capsules to draw, in any sequence (the z-test is on (key, draw.rank)); draw.key_floor: as
    # draw_planars'; rows (y0, y1, oy): only image rows y0 .. y1 are drawn, and buf's arrays hold image row y at
    # row y - oy (ids and the statistics are in image rows)
    img, zbuf, zrank, win, with_win = buf
    xy, inv_depth, radius, rgb, zscale, zbias = caps
    key_floor, draw_rank, seq, order = draw
    ids, obj, with_ids, stats, track = idb
    w, h, oy = zbuf.shape[1], rows[1] + 1, rows[2]  # h: past the last row drawn (the empty boxes' y0)
    for s in seq:
        ax, ay, bx, by = xy[s, 0], xy[s, 1], xy[s, 2], xy[s, 3]
        r = radius[s]
        r2 = r * r
        dx, dy = bx - ax, by - ay
        l2 = dx * dx + dy * dy
        i0, i1 = inv_depth[s, 0], inv_depth[s, 1]
        zs, zb = zscale[s], zbias[s]
        cr, cg, cb = rgb[s, 0], rgb[s, 1], rgb[s, 2]
        ylo = max(rows[0], int(np.floor(min(ay, by) - r - c)))
        yhi = min(rows[1], int(np.ceil(max(ay, by) + r - c)))
        if yhi < ylo:
            continue
        k = obj[s] if with_ids else -1
        tracked = with_ids and track[s]
        disp, many, nw, bx0, by0, bx1, by1 = -1, False, 0, w, h, -1, -1
        lx0, ly0, lx1, ly1 = w, h, -1, -1  # the box of the pixels where it lost a centre z-test to another id
        floor = key_floor[s] if not (tracked and k >= 0) else np.float32(-np.inf)
        for y in range(ylo, yhi + 1):
            py = y + c
            x0, x1 = _capsule_columns(ax, ay, bx, dx, dy, r, py, c, w)
            for x in range(x0, x1 + 1):
                if zbuf[y - oy, x] < floor:
                    continue
                t = _capsule_param(ax, ay, dx, dy, l2, r2, x + c, py)
                if t < 0.0:
                    continue
                depth = 1.0 / (i0 + t * (i1 - i0))
                if _ztest(zbuf, zrank, y - oy, x, depth, zs, zb, draw_rank[s]):
                    _put(img, y - oy, x, depth, cr, cg, cb)
                    if tracked:
                        disp, many, nw = note_claim(disp, many, nw, ids[y, x], k)
                        ids[y, x] = k
                        bx0, by0, bx1, by1 = min(bx0, x), min(by0, y), max(bx1, x), max(by1, y)
                    elif with_ids:
                        ids[y, x] = k
                    if with_win:
                        win[y - oy, x] = order[s]
                elif tracked and k >= 0 and ids[y, x] != k:
                    lx0, ly0, lx1, ly1 = min(lx0, x), min(ly0, y), max(lx1, x), max(ly1, y)
        if tracked:
            commit_claims(stats, k, disp, many, (bx0, by0, bx1, by1), (lx0, ly0, lx1, ly1), nw)

@njit_vec
def planar_row(ray_xy: NDArrayFloat32, plane_p: NDArrayFloat, rgb_p: NDArrayFloat, tri: bool, zs: float, zb: float,
               near: float, far: float, eps: float, key: NDArrayFloat32, hit: NDArrayBool, col: NDArrayByte) -> None:  # fmt: skip
    # planar p along n = len(ray_xy) // 2 consecutive pixels of a row (ray_xy: their rays, x y interleaved),
    # branch-free so that it vectorises: hit[j] = `_planar_hit` meets it (its tests, negated as written there;
    # n . r = 0 gives inf / nan, which they reject), key[j] the z-test key (as `_ztest`), col[:, j] the
    # colour `_put` would write (0 where not hit, so that no nan is converted)
    n0, n1, n2, nd = plane_p[0], plane_p[1], plane_p[2], plane_p[3]
    e0, e1, e2, a0 = plane_p[4], plane_p[5], plane_p[6], plane_p[7]
    f0, f1, f2, b0 = plane_p[8], plane_p[9], plane_p[10], plane_p[11]
    r0, g0, c0, r1, g1, c1 = rgb_p[0, 0], rgb_p[0, 1], rgb_p[0, 2], rgb_p[1, 0], rgb_p[1, 1], rgb_p[1, 2]
    r2, g2, c2, r3, g3, c3 = rgb_p[2, 0], rgb_p[2, 1], rgb_p[2, 2], rgb_p[3, 0], rgb_p[3, 1], rgb_p[3, 2]
    lim = 1.0 + eps
    for j in range(len(ray_xy) // 2):
        rx, ry = np.float64(ray_xy[2 * j]), np.float64(ray_xy[2 * j + 1])
        den = n0 * rx + n1 * ry + n2
        depth = nd / den
        a = depth * (e0 * rx + e1 * ry + e2) - a0
        b = depth * (f0 * rx + f1 * ry + f2) - b0
        out = (a < -eps) | (b < -eps) | ((a + b > lim) if tri else ((a > lim) | (b > lim)))
        ok = (den != 0.0) & (depth > near) & (depth <= far) & (not out)
        hit[j] = ok
        key[j] = np.float32(zs * depth + zb + 1.0)
        f = max(1.0 - depth * INV_MAX_DEPTH, 0.0) if ok else 0.0
        cr, cg, cb = r0, g0, c0
        if not tri:
            a, b = min(max(a, 0.0), 1.0), min(max(b, 0.0), 1.0)
            w0, w1, w2, w3 = (1 - a) * (1 - b), a * (1 - b), a * b, (1 - a) * b
            cr = w0 * r0 + w1 * r1 + w2 * r2 + w3 * r3 if ok else 0.0
            cg = w0 * g0 + w1 * g1 + w2 * g2 + w3 * g3 if ok else 0.0
            cb = w0 * c0 + w1 * c1 + w2 * c2 + w3 * c3 if ok else 0.0
        col[0, j], col[1, j], col[2, j] = np.uint8(int(cr * f + 0.5)), np.uint8(int(cg * f + 0.5)), np.uint8(int(cb * f + 0.5))

@njit_inline
def _commit_row(zrow: NDArrayFloat32, krow: NDArrayInt, irow: NDArrayByte, wrow: NDArrayInt, with_win: bool,
                key: NDArrayFloat32, hit: NDArrayBool, col: NDArrayByte, n: int, rank: int, code: int) -> None:  # fmt: skip
    # draw_planars' z-test and writes over the first n pixels of a row span (`planar_row`'s outputs), without ids
    for j in range(n):
        if hit[j] and (key[j] < zrow[j] or (key[j] == zrow[j] and rank < krow[j])):
            zrow[j], krow[j] = key[j], rank
            if with_win:
                wrow[j] = code
            irow[j, 0], irow[j, 1], irow[j, 2] = col[0, j], col[1, j], col[2, j]

@njit
def draw_planars(buf: FrameBuffers, rays: NDArrayFloat32, pls: PlanarArrays, draw: DrawPlan, idb: IdBuffers,
                 consts: tuple[float, float, float], rows: tuple[int, int, int]) -> None:  # fmt: skip
    # draw.seq: the planars to draw, in any sequence (the z-test is on (key, draw.rank)); each row span is cast at
    # once by `planar_row` (vectorised), then z-tested pixel by pixel. draw.key_floor (`planar_key_floor`): the ends
    # of a span whose z-buffer keys are below it are cut off first (they would fail the z-test), except for a
    # tracked object's primitive, whose lost z-tests grow its lost box; consts: (near, far, barycentric eps);
    # rows: as draw_capsules'
    (img, zbuf, zrank, win, with_win), (near, far, eps) = buf, consts
    plane, is_tri, rgb, bbox, zscale, zbias, use_spans, row_start, row_span = pls
    key_floor, draw_rank, seq, order = draw
    ids, obj, with_ids, stats, track = idb
    w, oy = zbuf.shape[1], rows[2]
    ray_xy = rays.reshape(rays.shape[0], 2 * w)
    key, hit, col = np.empty(w, np.float32), np.empty(w, np.bool_), np.empty((3, w), np.uint8)
    for p in seq:
        if bbox[p, 3] < rows[0] or bbox[p, 1] > rows[1]:
            continue
        rank = draw_rank[p]
        k = obj[p] if with_ids else -1
        tracked = with_ids and track[p]
        disp, many, nw, bx0, by0, bx1, by1 = -1, False, 0, bbox[p, 2] + 1, bbox[p, 3] + 1, -1, -1
        lx0, ly0, lx1, ly1 = bbox[p, 2] + 1, bbox[p, 3] + 1, -1, -1  # where it lost a centre z-test to another id
        floor = key_floor[p] if not (tracked and k >= 0) else np.float32(-np.inf)
        for y in range(max(bbox[p, 1], rows[0]), min(bbox[p, 3], rows[1]) + 1):
            xs, xe = bbox[p, 0], bbox[p, 2]
            if use_spans:
                row = row_start[p] + y - bbox[p, 1]
                xs, xe = max(xs, row_span[row, 0]), min(xe, row_span[row, 1])
            while xs <= xe and zbuf[y - oy, xs] < floor:  # occluded ends of the span: no ray is cast there
                xs += 1
            while xe >= xs and zbuf[y - oy, xe] < floor:
                xe -= 1
            if xe < xs:
                continue
            planar_row(ray_xy[y, 2 * xs:2 * xe + 2], plane[p], rgb[p], is_tri[p], zscale[p], zbias[p], near, far, eps,
                       key, hit, col)  # fmt: skip
            zrow, krow, irow, wrow = zbuf[y - oy, xs:], zrank[y - oy, xs:], img[y - oy, xs:], win[y - oy if with_win else 0]
            if not with_ids:
                _commit_row(zrow, krow, irow, wrow[xs:], with_win, key, hit, col, xe + 1 - xs, rank, order[p])
                continue
            for j in range(xe + 1 - xs):
                if not hit[j]:
                    continue
                if not (key[j] < zrow[j] or (key[j] == zrow[j] and rank < krow[j])):
                    if tracked and k >= 0 and ids[y, xs + j] != k:
                        lx0, ly0, lx1, ly1 = min(lx0, xs + j), min(ly0, y), max(lx1, xs + j), max(ly1, y)
                    continue
                zrow[j], krow[j] = key[j], rank
                if tracked:
                    disp, many, nw = note_claim(disp, many, nw, ids[y, xs + j], k)
                    ids[y, xs + j] = k
                    bx0, by0, bx1, by1 = min(bx0, xs + j), min(by0, y), max(bx1, xs + j), max(by1, y)
                elif with_ids:
                    ids[y, xs + j] = k
                if with_win:
                    wrow[xs + j] = order[p]
                irow[j, 0], irow[j, 1], irow[j, 2] = col[0, j], col[1, j], col[2, j]
        if tracked:
            commit_claims(stats, k, disp, many, (bx0, by0, bx1, by1), (lx0, ly0, lx1, ly1), nw)

@njit
def _cover(mask: NDArrayByte, y: int, x: int, box: NDArrayInt) -> int:
    # marks pixel (y, x) covered; returns 1 when it was not yet, growing the marked box (x0, y0, x1, y1)
    if mask[y, x]:
        return 0
    mask[y, x] = 1
    box[0], box[1], box[2], box[3] = min(box[0], x), min(box[1], y), max(box[2], x), max(box[3], y)
    return 1

@njit
def _cover_capsules(mask: NDArrayByte, box: NDArrayInt, clip: NDArrayInt, ids: NDArrayInt, skip: int,
                    caps: CapsuleArrays, start: int, stop: int, c: float) -> int:  # fmt: skip
    # the pixels draw_capsules would give a fragment with a finite key (its z-test against a cleared buffer),
    # inside `clip` (inclusive x0, y0, x1, y1) and where ids != skip
    xy, inv_depth, radius, _, zscale, zbias = caps
    h, w = mask.shape
    n = 0
    for s in range(start, stop):
        ax, ay, bx, by = xy[s, 0], xy[s, 1], xy[s, 2], xy[s, 3]
        r = radius[s]
        r2 = r * r
        dx, dy = bx - ax, by - ay
        l2 = dx * dx + dy * dy
        i0, i1 = inv_depth[s, 0], inv_depth[s, 1]
        zs, zb = zscale[s], zbias[s]
        ylo = max(clip[1], int(np.floor(min(ay, by) - r - c)))
        yhi = min(clip[3], int(np.ceil(max(ay, by) + r - c)))
        for y in range(ylo, yhi + 1):
            py = y + c
            x0, x1 = _capsule_columns(ax, ay, bx, dx, dy, r, py, c, w)
            for x in range(max(x0, clip[0]), min(x1, clip[2]) + 1):
                if mask[y, x] or ids[y, x] == skip:
                    continue
                t = _capsule_param(ax, ay, dx, dy, l2, r2, x + c, py)
                if t < 0.0:
                    continue
                depth = 1.0 / (i0 + t * (i1 - i0))
                if np.float32(zs * depth + zb + 1.0) < np.float32(np.inf):
                    n += _cover(mask, y, x, box)
    return n

@njit
def _cover_planars(mask: NDArrayByte, box: NDArrayInt, clip: NDArrayInt, ids: NDArrayInt, skip: int,
                   rays: NDArrayFloat32, pls: PlanarArrays, start: int, stop: int, near: float, far: float,
                   eps: float) -> int:  # fmt: skip
    # the pixels draw_planars would give a fragment with a finite key (its z-test against a cleared buffer),
    # inside `clip` (inclusive x0, y0, x1, y1) and where ids != skip
    plane, is_tri, _, bbox, zscale, zbias, use_spans, row_start, row_span = pls
    n = 0
    for p in range(start, stop):
        tri = is_tri[p]
        zs, zb = zscale[p], zbias[p]
        for y in range(max(bbox[p, 1], clip[1]), min(bbox[p, 3], clip[3]) + 1):
            xs, xe = max(bbox[p, 0], clip[0]), min(bbox[p, 2], clip[2])
            if use_spans:
                k = row_start[p] + y - bbox[p, 1]
                xs, xe = max(xs, row_span[k, 0]), min(xe, row_span[k, 1])
            for x in range(xs, xe + 1):
                if mask[y, x] or ids[y, x] == skip:
                    continue
                depth = _planar_hit(plane, p, np.float64(rays[y, x, 0]), np.float64(rays[y, x, 1]), tri, near, far, eps)[0]
                if depth < 0.0:
                    continue
                if np.float32(zs * depth + zb + 1.0) < np.float32(np.inf):
                    n += _cover(mask, y, x, box)
    return n

@njit_inline
def grow_visible_box(counts: NDArrayInt, boxes: NDArrayInt, k: int, y: int, x: int) -> None:
    # pixel (y, x), met in row-major order, joins object k's visible count and inclusive box (x0, y0, x1, y1)
    if counts[k] == 0:
        boxes[k, 0], boxes[k, 1], boxes[k, 2], boxes[k, 3] = x, y, x, y
    else:
        boxes[k, 0], boxes[k, 2] = min(boxes[k, 0], x), max(boxes[k, 2], x)
        boxes[k, 3] = y
    counts[k] += 1

@njit
def object_coverage_visible(mask: NDArrayByte, ids: NDArrayInt, rays: NDArrayFloat32, caps: CapsuleArrays,
                            cap_start: NDArrayInt, pls: PlanarArrays, pl_start: NDArrayInt,
                            consts: tuple[float, float, float, float], counts: tuple[NDArrayInt, NDArrayInt, NDArrayInt],
                            todo: NDArrayInt, clip: NDArrayInt, held: bool) -> None:  # fmt: skip
    # for each object k of `todo`: out[k] += the pixels its primitives cover drawn alone (the union of their
    # coverage) inside clip[k] (inclusive x0, y0, x1, y1). held: vis[k] already counts the pixels with
    # ids == k, which are skipped; else they are found in the marked box (which holds every pixel k's
    # primitives drew) as the mask is cleared: vis[k] = count of ids == k, vis_box[k] their inclusive box
    # (x0, y0, x1, y1; left at -1 where none); caps, pls: each object's primitives, grouped by object
    # (cap_start, pl_start: (N + 1,) bounds); consts: (pixel centre offset, near, far, eps); counts: (out, vis, vis_box)
    c, near, far, eps = consts
    out, vis, vis_box = counts
    box = np.zeros(4, np.int64)
    h, w = mask.shape
    for k in todo:
        box[0], box[1], box[2], box[3] = w, h, -1, -1
        skip = k if held else -2
        n = _cover_planars(mask, box, clip[k], ids, skip, rays, pls, pl_start[k], pl_start[k + 1], near, far, eps)
        n += _cover_capsules(mask, box, clip[k], ids, skip, caps, cap_start[k], cap_start[k + 1], c)
        out[k] += n
        for y in range(box[1], box[3] + 1):
            for x in range(box[0], box[2] + 1):
                mask[y, x] = 0
                if not held and ids[y, x] == k:
                    grow_visible_box(vis, vis_box, k, y, x)

@njit
def visible_in_boxes(ids: NDArrayInt, boxes: NDArrayInt, todo: NDArrayInt, counts: NDArrayInt, vis_box: NDArrayInt) -> None:
    # counts[k] = pixels with id k inside boxes[k] (inclusive x0, y0, x1, y1) and vis_box[k] their box, for each k of `todo`
    for k in todo:
        for y in range(boxes[k, 1], boxes[k, 3] + 1):
            for x in range(boxes[k, 0], boxes[k, 2] + 1):
                if ids[y, x] == k:
                    grow_visible_box(counts, vis_box, k, y, x)
