"""Perpendicular cross-sections of a lane's rails, as an OpenDRIVE road holds them.

A road's lane is bounded across by cross-sections perpendicular to its reference line (the left
rail); a recorded lane often ends on a slant (its right rail starts or ends metres along the lane
from its left). Here a rail point's *station* is the arc length along the left rail of its
perpendicular foot (before the first vertex and past the last: along the end segments extended,
so negative or beyond the length; in the wedge of a bend, along the bend's central-difference
tangent, as the fitted reference line runs there), and `between` gives the rails between two stations: what a
road between those cross-sections holds.
"""

from __future__ import annotations

import numpy as np

from avsim.core.typing import NDArrayFloat

FOLD_M = 0.01


def arc(p: NDArrayFloat) -> NDArrayFloat:
    """Arc length (N,) in xy at each vertex of a polyline (N, 3)."""
    return np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1))]


def stations(left: NDArrayFloat, points: NDArrayFloat) -> NDArrayFloat:
    """Station (N,) of each point along `left` (see the module docstring).

    Args:
        left: (M, 3) the left rail, M >= 2, consecutive vertices distinct.
        points: (N, 2+) points.

    Returns:
        The arc length along `left` of each point's nearest foot, the end segments extended.
    """
    a = left[:-1, :2]
    d = left[1:, :2] - a
    seg = np.maximum(np.linalg.norm(d, axis=1), 1e-12)
    q = np.asarray(points, np.float64)[:, None, :2]
    u = ((q - a[None]) * d[None]).sum(2) / (seg * seg)[None]  # (N, M-1)
    lo = np.zeros(len(seg))
    hi = np.ones(len(seg))
    lo[0], hi[-1] = -np.inf, np.inf
    u = np.clip(u, lo[None], hi[None])
    dist = np.linalg.norm(a[None] + u[..., None] * d[None] - q, axis=2)
    j = np.argmin(dist, axis=1)
    uj = u[np.arange(len(j)), j]
    out = arc(left)[j] + uj * seg[j]
    # a foot on an inner vertex (the point lies in the wedge of a bend): along the vertex's tangent,
    # the central difference the fitted reference line takes there
    v = j + (uj >= 1.0)
    inner = ((uj <= 0.0) | (uj >= 1.0)) & (v > 0) & (v < len(left) - 1)
    if inner.any():
        vi = v[inner]
        t = left[vi + 1, :2] - left[vi - 1, :2]
        t /= np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12)
        out[inner] = arc(left)[vi] + ((q[inner, 0] - left[vi, :2]) * t).sum(1)
    return out


def extend(left: NDArrayFloat, right: NDArrayFloat, start: bool, end: bool) -> NDArrayFloat:
    """`left` lengthened straight along its first (`start`) / last (`end`) segment so that every
    right-rail vertex falls within it (a slanted lane end whose right rail reaches farther)."""
    s_r = stations(left, right)
    length = arc(left)[-1]
    out = left
    if start and s_r.min() < -1e-3:
        t = (left[0] - left[1]) / np.linalg.norm(left[0, :2] - left[1, :2])
        t[2] = 0.0
        out = np.concatenate([(left[0] - s_r.min() * t)[None], out])
    if end and s_r.max() > length + 1e-3:
        t = (left[-1] - left[-2]) / np.linalg.norm(left[-1, :2] - left[-2, :2])
        t[2] = 0.0
        out = np.concatenate([out, (left[-1] + (s_r.max() - length) * t)[None]])
    return out


def _slice(p: NDArrayFloat, s: NDArrayFloat, a: float | None, b: float | None) -> NDArrayFloat:
    """The polyline p with stations s (increasing) between stations a < b (ends interpolated,
    clamped to the polyline; None: from its first / to its last vertex)."""
    keep = (s > (-np.inf if a is None else a + 1e-9)) & (s < (np.inf if b is None else b - 1e-9))
    parts = [] if a is None else [np.array([[np.interp(a, s, p[:, i]) for i in range(p.shape[1])]])]
    parts.append(p[keep])
    if b is not None:
        parts.append(np.array([[np.interp(b, s, p[:, i]) for i in range(p.shape[1])]]))
    out = np.concatenate(parts)
    if len(out) < 2:  # both cuts beyond the same end of p: a point
        out = np.concatenate([out, out])
    return out


def between(left: NDArrayFloat, right: NDArrayFloat, a: float | None, b: float | None) -> tuple[NDArrayFloat, NDArrayFloat]:
    """The rails between the cross-sections at stations a < b along `left` (None: from the rails'
    own first vertices / to their own last vertices, however slanted that end is)."""
    s_r = np.maximum.accumulate(stations(left, right))
    s_r, idx = np.unique(s_r, return_index=True)
    return _slice(left, arc(left), a, b), _slice(right[idx], s_r, a, b)


def folds(reference: NDArrayFloat, other: NDArrayFloat) -> float:
    """How far (m) the other rail's stations along `reference` run backwards (0: every cross-section
    perpendicular to `reference` meets the other rail once, as a road's width needs)."""
    s = stations(reference, other)
    return float((np.maximum.accumulate(s) - s).max())


def outer_is_right(left: NDArrayFloat, right: NDArrayFloat) -> bool:
    """Whether a road should run along the right rail: the left rail's cross-sections fold back on
    the right rail by more than `FOLD_M` (the tight inner rail of a left turn) and the right
    rail's do not fold as far."""
    on_left = folds(left, right)
    return on_left > FOLD_M and folds(right, left) < on_left
