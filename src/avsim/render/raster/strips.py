"""Strip-wise drawing of one image with the numba kernels (`draw_strips`; with object ids and their statistics, `draw_strips_ids`).

A 1280x720 frame's z-buffer, draw ranks, winner codes and colours take about 14 MB, well beyond
a core's L2 cache, and each was cleared, drawn and (for anti-aliasing) scanned in passes over
the whole frame. `draw_strips` instead draws the image in strips of rows into strip-sized
buffers that stay in cache: each strip is cleared, its planars and capsules are drawn (nearest
first, as `avsim.render.raster.draw` orders them), its edge pixels are anti-aliased and its rows are
copied out. With anti-aliasing every strip also draws the row above and below it, so that the
edge test and the candidates of its first and last rows see their neighbours' winners.

The pixels do not change: the z-test keeps the smallest (key, draw rank) pair whatever the
sequence fragments come in, each pixel meets the same fragments as in one whole-frame pass, and
the anti-aliasing of a pixel reads only its own and its 4 neighbours' winners. With ids, each
strip resets its rows' ids and notes the claims of its own rows only (its halo rows are drawn
without ids: the strip next to it owns them), so every pixel's claims are seen once, in the
sequence of the calls; the won boxes and counts of the statistics are those of one pass over the
frame, and a lost box still holds every pixel its object may have lost (labels read no more).
"""

from __future__ import annotations

import numpy as np

from avsim.core.jit import njit
from avsim.core.typing import NDArrayByte, NDArrayFloat, NDArrayFloat32, NDArrayInt
from avsim.render.raster.aa import aa_rows
from avsim.render.raster.kernels import draw_capsules, draw_planars
from avsim.render.raster.primitives import CapsuleArrays, DrawPlan, FrameBuffers, IdBuffers, PlanarArrays

STRIP_ROWS = 32  # rows per strip: its buffers (about 0.6 MB at 1280 px wide, with the ray rows) fit a core's L2


@njit
def _clear(img: NDArrayByte, zbuf: NDArrayFloat32, win: NDArrayInt, n: int, antialias: bool) -> None:
    # the first n rows of the strip buffers: no colour, no fragment, no winner
    img[:n] = 0
    zbuf[:n] = np.inf
    if antialias:
        win[:n] = -1

@njit
def _copy_rows(img: NDArrayByte, sub: NDArrayByte, y0: int, y1: int, oy: int) -> None:
    # img rows y0 .. y1 - 1 from sub, which holds image row y at row y - oy (flat: a memcpy, where a 3-d
    # slice assignment is an element loop about twice as slow)
    row = img.shape[1] * img.shape[2]
    img.reshape(-1)[y0 * row : y1 * row] = sub.reshape(-1)[(y0 - oy) * row : (y1 - oy) * row]

@njit
def _strip_buffers(h: int, w: int, strip_rows: int, antialias: bool, n_ranks: int) -> tuple[FrameBuffers, IdBuffers]:
    # one strip's buffers (its rows and, with AA, a halo row each side) and the "no ids" buffers of a call drawing none
    halo = 1 if antialias else 0
    n_rows = min(strip_rows + 2 * halo, h)
    sub, zbuf = np.empty((n_rows, w, 3), np.uint8), np.empty((n_rows, w), np.float32)
    zrank, win = np.empty((n_rows, w), np.int32), np.empty((n_rows if antialias else 1, w), np.int32)
    no_ids = IdBuffers(np.zeros((1, 1), np.int32), np.zeros(0, np.int32), False, np.zeros((0, 9), np.int64), np.zeros(n_ranks, np.bool_))
    return FrameBuffers(sub, zbuf, zrank, win, antialias), no_ids


@njit
def draw_strips(img: NDArrayByte, rays: NDArrayFloat32, strip_rows: int, antialias: bool, caps: CapsuleArrays,
                cap_draw: DrawPlan, pls: PlanarArrays, pl_draw: DrawPlan, order: NDArrayInt, offs: NDArrayFloat,
                consts: tuple[float, float, float, float]) -> None:  # fmt: skip
    # img (H, W, 3): the image, every pixel written; cap_draw, pl_draw: how each kind is drawn; order: the draw
    # rank of each winner code; offs: the AA sub-sample offsets; consts: (pixel centre offset, near, far, eps)
    h, w = img.shape[0], img.shape[1]
    c, near, far, eps = consts
    halo = 1 if antialias else 0
    buf, no_ids = _strip_buffers(h, w, strip_rows, antialias, max(len(cap_draw.rank), len(pl_draw.rank)))
    sub, zbuf, win = buf.img, buf.zbuf, buf.win
    for y0 in range(0, h, strip_rows):
        y1 = min(y0 + strip_rows, h)
        lo, hi = max(y0 - halo, 0), min(y1 - 1 + halo, h - 1)  # image rows drawn: the strip and its halo
        _clear(sub, zbuf, win, hi + 1 - lo, antialias)
        rows = (lo, hi, lo)
        draw_planars(buf, rays, pls, pl_draw, no_ids, (near, far, eps), rows)
        draw_capsules(buf, caps, cap_draw, no_ids, c, rows)
        if antialias:
            aa_rows(sub, win, rays, order, caps, pls, offs, consts, (y0, y1, lo))
        _copy_rows(img, sub, y0, y1, lo)

@njit
def draw_strips_ids(img: NDArrayByte, rays: NDArrayFloat32, strip_rows: int, antialias: bool, caps: CapsuleArrays,
                    cap_draw: DrawPlan, pls: PlanarArrays, pl_draw: DrawPlan, calls: NDArrayInt, idbs: tuple[IdBuffers, IdBuffers],
                    order: NDArrayInt, offs: NDArrayFloat, consts: tuple[float, float, float, float]) -> None:  # fmt: skip
    # draw_strips with object ids (and their statistics): calls (C, 4) rows (kind 0 = capsules / 1 = planars, start, stop,
    # with ids) are the kernel calls of every strip, each drawing cap_draw.seq[start:stop] / pl_draw.seq[start:stop];
    # idbs (capsule, planar) IdBuffers (ids in image rows, reset to -1 strip by strip). A strip's own rows are drawn with
    # ids where a call says so (the statistics see the claims in the calls' sequence); its halo rows, which the strip next
    # to it owns, are drawn by the same calls without ids (each pixel's claims are noted once)
    h, w = img.shape[0], img.shape[1]
    c, near, far, eps = consts
    halo = 1 if antialias else 0
    buf, no_ids = _strip_buffers(h, w, strip_rows, antialias, max(len(cap_draw.rank), len(pl_draw.rank)))
    sub, zbuf, win = buf.img, buf.zbuf, buf.win
    ids = idbs[0].ids.reshape(-1)
    for y0 in range(0, h, strip_rows):
        y1 = min(y0 + strip_rows, h)
        lo, hi = max(y0 - halo, 0), min(y1 - 1 + halo, h - 1)
        _clear(sub, zbuf, win, hi + 1 - lo, antialias)
        ids[y0 * w : y1 * w] = -1
        for part in range(3):  # the halo row above, the strip's own rows, the halo row below
            ra, rb = (lo, y0 - 1) if part == 0 else ((y0, y1 - 1) if part == 1 else (y1, hi))
            if rb < ra:
                continue
            for j in range(len(calls)):
                a, b, own = calls[j, 1], calls[j, 2], part == 1 and calls[j, 3] != 0
                if calls[j, 0] == 0:
                    draw = DrawPlan(cap_draw.key_floor, cap_draw.rank, cap_draw.seq[a:b], cap_draw.code)
                    draw_capsules(buf, caps, draw, idbs[0] if own else no_ids, c, (ra, rb, lo))
                else:
                    draw = DrawPlan(pl_draw.key_floor, pl_draw.rank, pl_draw.seq[a:b], pl_draw.code)
                    draw_planars(buf, rays, pls, draw, idbs[1] if own else no_ids, (near, far, eps), (ra, rb, lo))
        if antialias:
            aa_rows(sub, win, rays, order, caps, pls, offs, consts, (y0, y1, lo))
        _copy_rows(img, sub, y0, y1, lo)
