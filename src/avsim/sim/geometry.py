"""Oriented rectangles in the ground plane, vectorised (what shapely would do one pair at a time)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from avsim.core.typing import NDArrayBool, NDArrayFloat


def boxes_overlap(xy_a: npt.ArrayLike, yaw_a: npt.ArrayLike, length_a: npt.ArrayLike, width_a: npt.ArrayLike,
                  xy_b: npt.ArrayLike, yaw_b: npt.ArrayLike, length_b: npt.ArrayLike, width_b: npt.ArrayLike) -> NDArrayBool:  # fmt: skip
    """Whether pairs of rectangles intersect (touching counts, as shapely's `intersects`).

    Separating-axis test on the four edge normals; every argument broadcasts against the others.

    Args:
        xy_a, xy_b: (..., 2) centres.
        yaw_a, yaw_b: (...) headings.
        length_a, width_a, length_b, width_b: (...) sizes.

    Returns:
        (...) bool.
    """
    ca, sa, cb, sb = np.cos(yaw_a), np.sin(yaw_a), np.cos(yaw_b), np.sin(yaw_b)
    d = np.asarray(xy_b) - np.asarray(xy_a)
    dx, dy = d[..., 0], d[..., 1]
    hla, hwa, hlb, hwb = np.asarray(length_a) / 2, np.asarray(width_a) / 2, np.asarray(length_b) / 2, np.asarray(width_b) / 2
    sep = np.zeros(np.broadcast(dx, ca, cb, hla, hlb).shape, bool)
    for ux, uy in ((ca, sa), (-sa, ca), (cb, sb), (-sb, cb)):
        ra = hla * np.abs(ux * ca + uy * sa) + hwa * np.abs(-ux * sa + uy * ca)
        rb = hlb * np.abs(ux * cb + uy * sb) + hwb * np.abs(-ux * sb + uy * cb)
        sep |= np.abs(dx * ux + dy * uy) > ra + rb
    return ~sep


def point_in_boxes(points_xy: NDArrayFloat, xy: NDArrayFloat, yaw: NDArrayFloat, length: NDArrayFloat, width: NDArrayFloat) -> NDArrayBool:
    """Whether points lie in rectangles (boundary included); arguments broadcast.

    Args:
        points_xy: (..., 2) points.
        xy: (..., 2) rectangle centres.
        yaw: (...) headings.
        length, width: (...) sizes.

    Returns:
        (...) bool.
    """
    rel = np.asarray(points_xy) - np.asarray(xy)
    c, s = np.cos(yaw), np.sin(yaw)
    lon = rel[..., 0] * c + rel[..., 1] * s
    lat = -rel[..., 0] * s + rel[..., 1] * c
    return (np.abs(lon) <= np.asarray(length) / 2 + 1e-9) & (np.abs(lat) <= np.asarray(width) / 2 + 1e-9)


def segment_hits_box(p0: NDArrayFloat, p1: NDArrayFloat, xy: NDArrayFloat, yaw: NDArrayFloat, length: NDArrayFloat,
                     width: NDArrayFloat) -> NDArrayBool:  # fmt: skip
    """Whether segments p0-p1 intersect rectangles (Liang-Barsky clip in each box's frame); broadcast.

    Args:
        p0, p1: (..., 2) segment ends.
        xy: (..., 2) rectangle centres.
        yaw: (...) headings.
        length, width: (...) sizes.

    Returns:
        (...) bool.
    """
    c, s = np.cos(yaw), np.sin(yaw)

    def local(p: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
        rel = np.asarray(p) - np.asarray(xy)
        return rel[..., 0] * c + rel[..., 1] * s, -rel[..., 0] * s + rel[..., 1] * c

    x0, y0 = local(p0)
    x1, y1 = local(p1)
    hl, hw = np.asarray(length) / 2 + 1e-9, np.asarray(width) / 2 + 1e-9
    t_lo, t_hi = np.zeros(np.broadcast(x0, hl).shape), np.ones(np.broadcast(x0, hl).shape)
    ok = np.ones(t_lo.shape, bool)
    for q, dq, h in ((x0, x1 - x0, hl), (y0, y1 - y0, hw)):
        with np.errstate(divide="ignore", invalid="ignore"):
            ta, tb = (-h - q) / dq, (h - q) / dq
        parallel = dq == 0
        ok &= ~(parallel & (np.abs(q) > h))
        lo, hi = np.where(parallel, -np.inf, np.minimum(ta, tb)), np.where(parallel, np.inf, np.maximum(ta, tb))
        t_lo, t_hi = np.maximum(t_lo, lo), np.minimum(t_hi, hi)
    return ok & (t_lo <= t_hi)
