"""Batched 3-D IoU of paired rotated boxes (BEV polygon overlap x height overlap).

Boxes are `(cx, cy, cz, l, w, h, heading_rad)` rows; `heading` rotates the length axis from +x
towards +y in the BEV plane and `cz` is the box centre (not the bottom). The BEV overlap of two
rectangles is the convex polygon spanned by the corners of each that lie inside the other and
the crossings of their edges; ordering those points by angle around their mean and applying the
shoelace formula gives its area without any per-pair Python loop.
"""

from __future__ import annotations

import numpy as np

from avsim.core.shapes import check_shape

_CHUNK = 200_000  # pairs per block: bounds the (K, 24, 2) working arrays to ~80 MB
# Unit-square corner offsets in the box frame, counter-clockwise.
_CORNER_SIGNS = np.array([[0.5, 0.5], [-0.5, 0.5], [-0.5, -0.5], [0.5, -0.5]])


def _check_boxes(boxes: np.ndarray, name: str) -> np.ndarray:
    b = np.asarray(boxes, dtype=np.float64)
    check_shape(b, ("K", 7), name)
    return b


def bev_corners(boxes: np.ndarray) -> np.ndarray:
    """BEV corners `(K, 4, 2)` of boxes `(K, 7)`, counter-clockwise."""
    b = _check_boxes(boxes, "boxes")
    cos, sin = np.cos(b[:, 6]), np.sin(b[:, 6])
    local = _CORNER_SIGNS[None] * b[:, None, 3:5]  # (K, 4, 2): (+-l/2, +-w/2)
    x = b[:, None, 0] + cos[:, None] * local[..., 0] - sin[:, None] * local[..., 1]
    y = b[:, None, 1] + sin[:, None] * local[..., 0] + cos[:, None] * local[..., 1]
    return np.stack([x, y], axis=-1)


def _inside(points: np.ndarray, boxes: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """Which `points (K, N, 2)` lie in the BEV rectangle of `boxes (K, 7)` (boundary counts)."""
    d = points - boxes[:, None, 0:2]
    cos, sin = np.cos(boxes[:, 6])[:, None], np.sin(boxes[:, 6])[:, None]
    u = d[..., 0] * cos + d[..., 1] * sin
    v = -d[..., 0] * sin + d[..., 1] * cos
    return (np.abs(u) <= boxes[:, None, 3] * 0.5 + eps) & (np.abs(v) <= boxes[:, None, 4] * 0.5 + eps)


def _edge_crossings(ca: np.ndarray, cb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Crossings of the 4 edges of `ca (K,4,2)` with those of `cb`: points (K,16,2), valid."""
    p = ca[:, :, None, :]  # (K, 4, 1, 2)
    r = (np.roll(ca, -1, axis=1) - ca)[:, :, None, :]
    q = cb[:, None, :, :]  # (K, 1, 4, 2)
    s = (np.roll(cb, -1, axis=1) - cb)[:, None, :, :]
    den = r[..., 0] * s[..., 1] - r[..., 1] * s[..., 0]  # (K, 4, 4)
    qp = q - p
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (qp[..., 0] * s[..., 1] - qp[..., 1] * s[..., 0]) / den
        u = (qp[..., 0] * r[..., 1] - qp[..., 1] * r[..., 0]) / den
    # Parallel edges never cross in a way that adds a vertex: their shared points are corners.
    valid = (np.abs(den) > 1e-12) & (t >= 0.0) & (t <= 1.0) & (u >= 0.0) & (u <= 1.0)
    pts = p + np.where(valid, t, 0.0)[..., None] * r
    k = ca.shape[0]
    return pts.reshape(k, 16, 2), valid.reshape(k, 16)


def _bev_intersection_area_block(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ca, cb = bev_corners(a), bev_corners(b)
    scale = np.maximum(np.abs(ca).max(axis=(1, 2)), np.abs(cb).max(axis=(1, 2))) + 1.0
    eps = (scale * 1e-9)[:, None]
    cross_pts, cross_ok = _edge_crossings(ca, cb)
    pts = np.concatenate([ca, cb, cross_pts], axis=1)  # (K, 24, 2)
    ok = np.concatenate([_inside(ca, b, eps), _inside(cb, a, eps), cross_ok], axis=1)
    n_ok = ok.sum(axis=1)
    centre = (pts * ok[..., None]).sum(axis=1) / np.maximum(n_ok, 1)[:, None]
    ang = np.arctan2(pts[..., 1] - centre[:, None, 1], pts[..., 0] - centre[:, None, 0])
    ang = np.where(ok, ang, np.inf)
    order = np.argsort(ang, axis=1, kind="stable")
    pts = np.take_along_axis(pts, order[..., None], axis=1)
    ok = np.take_along_axis(ok, order, axis=1)
    # Invalid slots repeat the first valid point: zero-length edges add no area.
    pts = np.where(ok[..., None], pts, pts[:, :1, :])
    x, y = pts[..., 0], pts[..., 1]
    area = 0.5 * np.abs((x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y).sum(axis=1))
    return np.where(n_ok >= 3, area, 0.0)


def bev_intersection_area(boxes_a: np.ndarray, boxes_b: np.ndarray) -> np.ndarray:
    """Area (m^2) of the BEV overlap of paired boxes `(K, 7)` and `(K, 7)` -> `(K,)`."""
    a = _check_boxes(boxes_a, "boxes_a")
    b = _check_boxes(boxes_b, "boxes_b")
    check_shape(b, a.shape, "boxes_b")
    out = np.empty(a.shape[0], dtype=np.float64)
    for start in range(0, a.shape[0], _CHUNK):
        sl = slice(start, start + _CHUNK)
        out[sl] = _bev_intersection_area_block(a[sl], b[sl])
    return out


def paired_iou_3d(boxes_a: np.ndarray, boxes_b: np.ndarray) -> np.ndarray:
    """3-D IoU of paired boxes `(K, 7)`, `(K, 7)` -> `(K,)` in [0, 1]."""
    a = _check_boxes(boxes_a, "boxes_a")
    b = _check_boxes(boxes_b, "boxes_b")
    bev = bev_intersection_area(a, b)
    top = np.minimum(a[:, 2] + a[:, 5] * 0.5, b[:, 2] + b[:, 5] * 0.5)
    bottom = np.maximum(a[:, 2] - a[:, 5] * 0.5, b[:, 2] - b[:, 5] * 0.5)
    inter = bev * np.clip(top - bottom, 0.0, None)
    union = a[:, 3] * a[:, 4] * a[:, 5] + b[:, 3] * b[:, 4] * b[:, 5] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where(union > 0.0, inter / union, 0.0)
    return np.clip(iou, 0.0, 1.0)
