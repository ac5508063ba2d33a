"""Compiled (numba) stroke pass of the renderer's geometry stage: camera-frame map lines and box
edges to capsules in one pass for an f-theta camera (clip, cone cull, adaptive subdivision,
capsule radius and pixel-box test), with the outputs of the numpy steps in
`avsim.render.geometry.camera` (which it replaces for f-theta cameras).

The f-theta projection, cone test and chord test are those of `avsim.render.geometry.projector`;
ray angles of the segment ends and level-0 midpoints come from numpy (as `Projector`), the
deeper midpoints from libm (as `subdivide_ftheta`).
"""

from __future__ import annotations

import math

import numpy as np

from avsim.core.jit import njit_vec
from avsim.core.typing import NDArrayFloat, NDArrayInt
from avsim.render.geometry.projector import (
    Projector,
    ftheta_pixel,
    ftheta_pixels,
    midpoint_error,
    outside_cone,
    push_halves,
)

__all__ = ["stroke_capsules"]


def stroke_capsules(
    projector: Projector, p0: NDArrayFloat, p1: NDArrayFloat, width_px: NDArrayFloat, cone_rad: float,
    depth_range_m: tuple[float, float], extent_px: tuple[float, float, float, float], radius_rule: tuple[float, float, float],
    tol_px: float, max_levels: int,
) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayInt] | None:  # fmt: skip
    """Camera-frame strokes to capsules in one compiled pass (None for a camera that is not f-theta).

    Per segment, the steps of `camera_geometry` in numpy: near/far clip (`geometry.clip_segments`,
    the same operations in the same order), cone cull (`geometry.segment_cone_visible`, with
    libm's acos), subdivision (`subdivide_ftheta`: chords outside the cone dropped), then the
    capsule of each chord: radius max(r_min, 0.5 * width * fade(mean depth)), kept where its
    pixel box meets the image.

    Args:
        projector: the camera's projector (f-theta, with numba).
        p0: (S, 3) camera-frame segment starts (unclipped).
        p1: (S, 3) segment ends.
        width_px: (S,) stroke widths.
        cone_rad: the camera's cone half-angle.
        depth_range_m: (near, far) clip planes.
        extent_px: (x0, x1, y0, y1) image edges in continuous pixels.
        radius_rule: (minimum radius px, fade depth m, unused 0.0).
        tol_px: chord tolerance in pixels.
        max_levels: at most this many halvings.

    Returns:
        xy (M, 4) pixel ends, inv_depth (M, 2), radius (M,), source segment (M,), by source then along it.
    """
    if projector.params is None:
        return None
    cone = float(cone_rad) + float(np.radians(1.0))
    args = [np.ascontiguousarray(x, dtype=np.float64) for x in (p0, p1, width_px)]
    scal = np.array([*depth_range_m, *extent_px, *radius_rule, tol_px, cone], dtype=np.float64)
    ends, kept = _clipped_strokes(args[0], args[1], scal)
    x, y, z = (np.ascontiguousarray(ends[:, k]) for k in range(3))  # ray angles as `Projector` (numpy's own)
    xy_norm = np.hypot(x, y)
    theta = np.arctan2(xy_norm, z)
    capacity = 2 * len(kept) + 64
    while True:
        xy, inv_depth = np.empty((capacity, 4)), np.empty((capacity, 2))
        radius, src = np.empty(capacity), np.empty(capacity, np.int64)
        m = _strokes(ends, xy_norm, theta, kept, args[2], *projector.params, scal, max_levels, xy, inv_depth, radius, src)
        if m >= 0:
            return xy[:m], inv_depth[:m], radius[:m], src[:m]
        capacity *= 4


@njit_vec
def _clip_segment(ab: NDArrayFloat, n: int, plane: float, sign: float) -> bool:
    """`geometry._clip_segments_halfspace` for segment row n of ab (K, 6: start, end), in place; False: dropped."""
    d0, d1 = sign * (ab[n, 2] - plane), sign * (ab[n, 5] - plane)
    if not (d0 >= 0 or d1 >= 0):
        return False
    if d0 < 0 or d1 < 0:
        t = d0 / (d0 - d1)
        t = min(max(t if math.isfinite(t) else 0.0, 0.0), 1.0)
        for c in range(3):
            cut = ab[n, c] + (ab[n, 3 + c] - ab[n, c]) * t
            if d0 < 0:
                ab[n, c] = cut
            if d1 < 0:
                ab[n, 3 + c] = cut
    return True

@njit_vec
def _emit_capsule(
    a2: float, b2: float, ua0: float, ua1: float, ub0: float, ub1: float, width: float, scal: NDArrayFloat,
    m: int, i: int, xy: NDArrayFloat, inv_depth: NDArrayFloat, radius: NDArrayFloat, src: NDArrayInt,
) -> int:  # fmt: skip
    """`camera_geometry._capsules` for one chord: writes row m when its box meets the image; returns the next row."""
    fade = min(max(1.0 - (0.5 * (a2 + b2)) / scal[7], 0.0), 1.0)
    r = max(scal[6], 0.5 * width * fade)
    lo0 = (ua0 if (ua0 < ub0 or ua0 != ua0) else ub0) - r
    lo1 = (ua1 if (ua1 < ub1 or ua1 != ua1) else ub1) - r
    hi0 = (ua0 if (ua0 > ub0 or ua0 != ua0) else ub0) + r
    hi1 = (ua1 if (ua1 > ub1 or ua1 != ua1) else ub1) + r
    if not (hi0 >= scal[2] and lo0 <= scal[3] and hi1 >= scal[4] and lo1 <= scal[5]):
        return m
    if not (math.isfinite(lo0) and math.isfinite(lo1)):
        return m
    xy[m, 0], xy[m, 1], xy[m, 2], xy[m, 3] = ua0, ua1, ub0, ub1
    inv_depth[m, 0], inv_depth[m, 1], radius[m], src[m] = 1.0 / a2, 1.0 / b2, r, i
    return m + 1

@njit_vec
def _clipped_strokes(p0: NDArrayFloat, p1: NDArrayFloat, scal: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayInt]:
    """Strokes clipped to the depth range and inside the cone: (3K, 3) starts, ends, midpoints; (K,) their index."""
    ab, kept = np.empty((len(p0), 6)), np.empty(len(p0), np.int64)
    n = 0
    for i in range(len(p0)):
        for c in range(3):
            ab[n, c], ab[n, 3 + c] = p0[i, c], p1[i, c]
        if not (_clip_segment(ab, n, scal[0], 1.0) and _clip_segment(ab, n, scal[1], -1.0)):
            continue
        if outside_cone(ab[n, 0], ab[n, 1], ab[n, 2], ab[n, 3], ab[n, 4], ab[n, 5], scal[10]):
            continue
        kept[n] = i
        n += 1
    ends = np.empty((3 * n, 3))
    for j in range(n):
        for c in range(3):
            ends[j, c], ends[n + j, c] = ab[j, c], ab[j, 3 + c]
            ends[2 * n + j, c] = 0.5 * (ab[j, c] + ab[j, 3 + c])
    return ends, kept[:n]

@njit_vec
def _strokes(
    ends: NDArrayFloat, xy_norm: NDArrayFloat, theta: NDArrayFloat, kept: NDArrayInt, width: NDArrayFloat,
    fw: NDArrayFloat, bw: NDArrayFloat, dbw: NDArrayFloat, scalars: NDArrayFloat, scal: NDArrayFloat, max_levels: int,
    xy: NDArrayFloat, inv_depth: NDArrayFloat, radius: NDArrayFloat, src: NDArrayInt,
) -> int:  # fmt: skip
    """Capsules of the clipped strokes (`_clipped_strokes`: ends and level-0 midpoints, with their ray
    angles) into the buffers; their number, or -1 when the buffers are too small.
    scal: near, far, x0, x1, y0, y1, r_min, fade depth, unused, tol, cone; stack rows as `_subdivide`."""
    uv = np.empty((len(ends), 2))
    ftheta_pixels(ends, xy_norm, theta, fw, bw, dbw, scalars, uv)  # ends a, b and level-0 midpoints, one batch
    n = len(kept)
    st = np.empty((max_levels + 2, 13))
    tol, cone, m = scal[9], scal[10], 0
    for j in range(n):
        i = kept[j]
        for c in range(3):
            st[0, c], st[0, 3 + c] = ends[j, c], ends[n + j, c]
        st[0, 6], st[0, 7], st[0, 8], st[0, 9], st[0, 10] = uv[j, 0], uv[j, 1], uv[n + j, 0], uv[n + j, 1], 0.0
        st[0, 11], st[0, 12] = uv[2 * n + j, 0], uv[2 * n + j, 1]
        top = 1
        while top > 0:
            top -= 1
            a0, a1, a2, b0, b1, b2 = st[top, 0], st[top, 1], st[top, 2], st[top, 3], st[top, 4], st[top, 5]
            ua0, ua1, ub0, ub1, level = st[top, 6], st[top, 7], st[top, 8], st[top, 9], int(st[top, 10])
            if level > 0 and outside_cone(a0, a1, a2, b0, b1, b2, cone):
                continue
            m0, m1, m2 = 0.5 * (a0 + b0), 0.5 * (a1 + b1), 0.5 * (a2 + b2)
            if level == 0:
                um0, um1 = st[top, 11], st[top, 12]
            else:
                um0, um1 = ftheta_pixel(m0, m1, m2, fw, bw, dbw, scalars)
            if midpoint_error(ua0, ua1, ub0, ub1, um0, um1) <= tol or level == max_levels:
                if m >= len(src):
                    return -1
                m = _emit_capsule(a2, b2, ua0, ua1, ub0, ub1, width[i], scal, m, i, xy, inv_depth, radius, src)
                continue
            top = push_halves(st, top, a0, a1, a2, m0, m1, m2, ua0, ua1, um0, um1, level)
    return m
