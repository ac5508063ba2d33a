"""Lane-line patterns of the renderer: polylines cut into painted pieces in metres of arc length.

Patterns and colours come from the style table (`avsim.maps.style`, via `avsim.render.style`);
double lines are two copies offset by +/-DOUBLE_LINE_OFFSET_M along the ground-plane normal.
These functions are also importable from `avsim.render.geometry.projection`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from avsim.core.typing import NDArrayFloat
from avsim.render import style


def arc_lengths(points: NDArrayFloat) -> NDArrayFloat:
    """Cumulative 3-D arc length of a polyline.

    Args:
        points: (n, 3) vertices.

    Returns:
        (n,) arc length at each vertex, starting at 0.
    """
    seg = np.linalg.norm(np.diff(points, axis=0), axis=-1)
    return np.concatenate([[0.0], np.cumsum(seg)])


def pattern_segments(points: npt.ArrayLike, pattern: style.DashPattern) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Cut a polyline into its painted pieces.

    The pattern starts painted at arc length 0 and repeats every `pattern.period_m` metres of
    3-D arc length; pieces are exact (cut points are interpolated on the polyline).

    Args:
        points: (n, 3) vertices.
        pattern: the dash pattern.

    Returns:
        Segment starts (k, 3) and ends (k, 3).
    """
    points = np.asarray(points, dtype=np.float64)
    if len(points) < 2:
        return np.zeros((0, 3)), np.zeros((0, 3))
    s = arc_lengths(points)
    total = s[-1]
    if pattern.pairs is None or total <= 0:
        return points[:-1].copy(), points[1:].copy()
    period = pattern.period_m
    starts, ends, acc = [], [], 0.0
    for on, off in pattern.pairs:
        starts.append(acc)
        ends.append(acc + on)
        acc += on + off
    base = np.arange(int(np.ceil(total / period)) + 1)[:, None] * period
    a = (base + np.array(starts)[None]).ravel()
    b = (base + np.array(ends)[None]).ravel()
    keep = a < total
    a, b = a[keep], np.minimum(b[keep], total)
    cuts = np.unique(np.concatenate([s, a, b]))
    mids = 0.5 * (cuts[:-1] + cuts[1:])
    idx = np.searchsorted(a, mids, side="right") - 1
    painted = (idx >= 0) & (mids < b[np.maximum(idx, 0)])
    pts = np.stack([np.interp(cuts, s, points[:, k]) for k in range(3)], -1)
    return pts[:-1][painted], pts[1:][painted]


def offset_polyline(points: npt.ArrayLike, offset_m: float) -> NDArrayFloat:
    """Shift a polyline along its ground-plane left normal (+perp, CCW).

    Vertex normals are the normalised mean of the adjacent segment normals (a mitre-free
    offset, adequate for the +/-0.10 m of double lines).

    Args:
        points: (n, 3) vertices.
        offset_m: signed offset in metres (positive: left).

    Returns:
        (n, 3) shifted vertices (z unchanged).
    """
    points = np.asarray(points, dtype=np.float64)
    d = np.diff(points[:, :2], axis=0)
    n = np.stack([-d[:, 1], d[:, 0]], -1)
    n /= np.maximum(np.linalg.norm(n, axis=-1, keepdims=True), 1e-12)
    vn = np.zeros((len(points), 2))
    vn[:-1] += n
    vn[1:] += n
    vn /= np.maximum(np.linalg.norm(vn, axis=-1, keepdims=True), 1e-12)
    out = points.copy()
    out[:, :2] += offset_m * vn
    return out


def lane_line_segments(points: NDArrayFloat, lane_type: str) -> tuple[NDArrayFloat, NDArrayFloat, style.RGB]:
    """The painted pieces of one lane line, per the style table.

    Args:
        points: (n, 3) world vertices.
        lane_type: ``"<COLOR> <STYLE>"``.

    Returns:
        Segment starts (k, 3), ends (k, 3) and the line's RGB colour.
    """
    lane = style.lane_style(lane_type)
    if len(lane.patterns) == 1:
        p0, p1 = pattern_segments(points, lane.patterns[0])
        return p0, p1, lane.rgb
    parts = [
        pattern_segments(offset_polyline(points, sign * style.DOUBLE_LINE_OFFSET_M), pattern)
        for sign, pattern in zip((1.0, -1.0), lane.patterns)
    ]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), lane.rgb
