"""Compiled (numba) pieces of the renderer's geometry stage over planars: per-owner pixel bounds, the
planar clip/cull pass and the planars' pixel boxes, with the same outputs as the numpy paths.

- `owner_min_max`, `planar_bounds`: per-owner min/max of pixels and the planars' pixel boxes
  in one pass (exact: comparisons, floor/ceil and clamps only).
- `clip_cull_planars`: the planars' near/far clip and view-cone cull in one pass.

Projection and the f-theta subdivision live in `avsim.render.geometry.projector`, the stroke pass
in `avsim.render.geometry.strokes`.
"""

from __future__ import annotations

import math

import numpy as np

from avsim.core.jit import njit, njit_vec
from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt

__all__ = ["clip_cull_planars", "owner_min_max", "planar_bounds"]

def owner_min_max(n: int, owner: NDArrayInt, uv: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Per-owner minimum and maximum of pixels (owners without pixels: +inf / -inf).

    Args:
        n: number of owners.
        owner: (M,) owner index of each pixel, in [0, n).
        uv: (M, 2) pixels.

    Returns:
        lo (n, 2), hi (n, 2).
    """
    lo = np.full((n, 2), np.inf)
    hi = np.full((n, 2), -np.inf)
    if not len(owner):
        return lo, hi
    _min_max(np.ascontiguousarray(owner, dtype=np.int64), np.ascontiguousarray(uv, dtype=np.float64), lo, hi)
    return lo, hi


@njit
def _min_max(owner: NDArrayInt, uv: NDArrayFloat, lo: NDArrayFloat, hi: NDArrayFloat) -> None:
    for i in range(len(owner)):
        k = owner[i]
        for j in range(2):
            v = uv[i, j]
            if v < lo[k, j] or v != v:  # NaN propagates, as in np.minimum
                lo[k, j] = v
            if v > hi[k, j] or v != v:
                hi[k, j] = v


def clip_cull_planars(
    verts: NDArrayFloat, counts: NDArrayInt, cone_rad: float, near_m: float, far_m: float
) -> tuple[NDArrayInt, NDArrayFloat, NDArrayFloat, NDArrayInt] | None:
    """Depth test, near/far clip, cone cull and ring edges of convex planars in one compiled pass.

    The steps of `camera_geometry._planar_group` in numpy (`geometry.clip_polygons`,
    `geometry.cone_visible`, `geometry.ring_edges`), per planar: clipped vertices come from the
    same operations in the same order; the cone decision uses libm's atan2 / acos (numpy's SIMD
    ones may differ in the last bit, which only matters on the cone's boundary, 1 degree outside
    the image).

    Args:
        verts: (N, K, 3) camera-frame rings (padding rows repeat a vertex).
        counts: (N,) vertices of each ring.
        cone_rad: the camera's cone half-angle.
        near_m: near plane.
        far_m: far plane.

    Returns:
        Kept planar indices (P,), edge starts (E, 3), ends (E, 3), owner (E,) in [0, P).
    """
    n, k, _ = verts.shape
    kept = np.empty(n, np.int64)
    edge_a, edge_b = np.empty((n * (k + 2), 3)), np.empty((n * (k + 2), 3))
    owner = np.empty(n * (k + 2), np.int64)
    p, e = _clip_cull(np.ascontiguousarray(verts, np.float64), np.ascontiguousarray(counts, np.int64),
                      float(cone_rad) + float(np.radians(1.0)), near_m, far_m, kept, edge_a, edge_b, owner)  # fmt: skip
    return kept[:p], edge_a[:e], edge_b[:e], owner[:e]


@njit_vec
def _clip_half(ring: NDArrayFloat, count: int, plane: float, sign: float, out: NDArrayFloat) -> int:
    """`geometry._clip_ring_halfspace` for one ring: keep sign * (z - plane) >= 0; returns the new count."""
    m = 0
    for i in range(count):
        j = i + 1 if i + 1 < count else 0
        da, db = sign * (ring[i, 2] - plane), sign * (ring[j, 2] - plane)
        t = da / (da - db)
        t = min(max(t if math.isfinite(t) else 0.0, 0.0), 1.0)
        if da >= 0:
            out[m, 0], out[m, 1], out[m, 2] = ring[i, 0], ring[i, 1], ring[i, 2]
            m += 1
        if (da >= 0) != (db >= 0):
            for c in range(3):
                out[m, c] = ring[i, c] + (ring[j, c] - ring[i, c]) * t
            m += 1
    return m

@njit_vec
def _ring_visible(ring: NDArrayFloat, count: int, cone: float) -> bool:
    """`geometry.cone_visible` for one ring (cone: half-angle + its one-degree margin)."""
    u = np.empty((count, 3))
    theta_min = math.inf
    for i in range(count):
        norm = max(math.sqrt(ring[i, 0] * ring[i, 0] + ring[i, 1] * ring[i, 1] + ring[i, 2] * ring[i, 2]), 1e-300)
        for c in range(3):
            u[i, c] = ring[i, c] / norm
        theta_min = min(theta_min, math.atan2(math.hypot(u[i, 0], u[i, 1]), u[i, 2]))
    span = 0.0
    for i in range(count):
        for j in range(count):
            cos = u[i, 0] * u[j, 0] + u[i, 1] * u[j, 1] + u[i, 2] * u[j, 2]
            span = max(span, math.acos(min(max(cos, -1.0), 1.0)))
    return theta_min - span <= cone

@njit_vec
def _clip_cull(
    verts: NDArrayFloat, counts: NDArrayInt, cone: float, near: float, far: float, kept: NDArrayInt,
    edge_a: NDArrayFloat, edge_b: NDArrayFloat, owner: NDArrayInt,
) -> tuple[int, int]:  # fmt: skip
    k = verts.shape[1]
    ring, tmp = np.empty((2 * k + 4, 3)), np.empty((2 * k + 4, 3))
    p = e = 0
    for i in range(len(verts)):
        zmin, zmax = math.inf, -math.inf
        for j in range(k):
            zmin, zmax = min(zmin, verts[i, j, 2]), max(zmax, verts[i, j, 2])
        if not (zmax >= near and zmin <= far):
            continue
        count = counts[i]
        ring[:count] = verts[i, :count]
        if zmin < near or zmax > far:
            count = _clip_half(ring, count, near, 1.0, tmp)
            count = _clip_half(tmp, count, far, -1.0, ring)
        if count < 3 or not _ring_visible(ring, count, cone):
            continue
        for j in range(count):
            nxt = j + 1 if j + 1 < count else 0
            edge_a[e], edge_b[e], owner[e] = ring[j], ring[nxt], p
            e += 1
        kept[p] = i
        p += 1
    return p, e


def planar_bounds(
    n: int, owner: NDArrayInt, ua: NDArrayFloat, ub: NDArrayFloat, approx: NDArrayBool, size_px: tuple[int, int], centre_px: float
) -> tuple[NDArrayInt, NDArrayBool] | None:
    """`geometry.pixel_bounds` of planars from their chords (both ends), and which planars are exact, in one pass.

    Args:
        n: number of planars.
        owner: (C,) planar of each chord, in [0, n).
        ua: (C, 2) chord start pixels.
        ub: (C, 2) chord end pixels.
        approx: (C,) chord kept unsplit outside the cone.
        size_px: (width, height) of the image.
        centre_px: `geometry.PIXEL_CENTRE_OFFSET`.

    Returns:
        boxes (n, 4) int64 [x0, y0, x1, y1] (empty: (0, 0, -1, -1)) and exact (n,) bool (no approx
        chord).
    """
    boxes, exact = np.empty((n, 4), np.int64), np.ones(n, np.bool_)
    _planar_bounds(np.ascontiguousarray(owner, np.int64), np.ascontiguousarray(ua, np.float64), np.ascontiguousarray(ub, np.float64),
                   np.ascontiguousarray(approx, np.bool_), int(size_px[0]), int(size_px[1]), float(centre_px), boxes, exact)  # fmt: skip
    return boxes, exact


@njit_vec
def _box_edge(v: float, c: float, step: float, lo: int, hi: int) -> int:
    """np.clip(floor(v - c) - 1 (step < 0) or ceil(v - c) + 1 (step > 0), lo, hi), NaN -> -1, as an int."""
    e = np.floor(v - c) + step if step < 0 else np.ceil(v - c) + step
    e = min(max(e, float(lo)), float(hi))
    return -1 if e != e else int(e)

@njit_vec
def _planar_bounds(owner: NDArrayInt, ua: NDArrayFloat, ub: NDArrayFloat, approx: NDArrayBool, w: int, h: int, c: float,
                   boxes: NDArrayInt, exact: NDArrayBool) -> None:  # fmt: skip
    n = len(boxes)
    lo, hi = np.full((n, 2), np.inf), np.full((n, 2), -np.inf)
    _min_max(owner, ua, lo, hi)
    _min_max(owner, ub, lo, hi)
    for k in range(len(owner)):
        if approx[k]:
            exact[owner[k]] = False
    for p in range(n):
        x0, y0 = _box_edge(lo[p, 0], c, -1.0, 0, w), _box_edge(lo[p, 1], c, -1.0, 0, h)
        x1, y1 = _box_edge(hi[p, 0], c, 1.0, -1, w - 1), _box_edge(hi[p, 1], c, 1.0, -1, h - 1)
        if not (math.isfinite(lo[p, 0]) and math.isfinite(lo[p, 1])) or x1 < x0 or y1 < y0:
            x0, y0, x1, y1 = 0, 0, -1, -1
        boxes[p, 0], boxes[p, 1], boxes[p, 2], boxes[p, 3] = x0, y0, x1, y1


