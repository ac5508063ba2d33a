"""Row spans of planar primitives: a conservative x-range per pixel row (a loop bound of the
numba planar kernel only; coverage is decided per pixel), computed where a camera's planars are
made (`avsim.render.geometry.camera`).
"""

from __future__ import annotations

import numpy as np

from avsim.core.jit import njit
from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt
from avsim.render.raster.primitives import PIXEL_CENTRE_OFFSET


@njit
def _row_spans(bbox: NDArrayInt, row_start: NDArrayInt, owner: NDArrayInt, uv0: NDArrayFloat, uv1: NDArrayFloat,
               exact: NDArrayBool, spans: NDArrayInt, centre: float) -> None:  # fmt: skip
    # centre: PIXEL_CENTRE_OFFSET (an argument, so the on-disk kernel cache never holds a stale one)
    # Conservative x-range of each row of each planar from its projected boundary chords:
    # every row that meets the region meets its boundary within 1.5 px (chord tolerance
    # 0.25 px), so the chords' x over rows +/- 1.5 px, widened by 1 px, bound the region.
    for c in range(len(owner)):
        p = owner[c]
        if not exact[p]:
            continue
        u0, v0, u1, v1 = uv0[c, 0], uv0[c, 1], uv1[c, 0], uv1[c, 1]
        y0, y1 = bbox[p, 1], bbox[p, 3]
        # rows whose centre (y + centre) is within 1.5 px of the chord's v range
        ylo = max(y0, int(np.floor(min(v0, v1) - 1.5 - centre)))
        yhi = min(y1, int(np.ceil(max(v0, v1) + 1.5 - centre)))
        dv = v1 - v0
        for y in range(ylo, yhi + 1):
            if abs(dv) > 1e-12:
                ta = (y + centre - 1.5 - v0) / dv
                tb = (y + centre + 1.5 - v0) / dv
                if ta > tb:
                    ta, tb = tb, ta
                ta, tb = max(ta, 0.0), min(tb, 1.0)
            else:
                ta, tb = 0.0, 1.0
            xa, xb = u0 + ta * (u1 - u0), u0 + tb * (u1 - u0)
            lo = int(np.floor(min(xa, xb) - centre - 1.0))
            hi = int(np.ceil(max(xa, xb) - centre + 1.0))
            k = row_start[p] + y - y0
            spans[k, 0] = min(spans[k, 0], lo)
            spans[k, 1] = max(spans[k, 1], hi)


def planar_row_spans(
    bbox: NDArrayInt, owner: NDArrayInt, uv0: NDArrayFloat, uv1: NDArrayFloat, exact: NDArrayBool
) -> tuple[NDArrayInt, NDArrayInt]:
    """Row spans for planars from their projected boundary chords.

    Planars not `exact` (some chord only approximated) scan whole rows.

    Args:
        bbox: (P, 4) inclusive pixel boxes of the planars.
        owner: (C,) planar of each chord.
        uv0: (C, 2) chord start pixels.
        uv1: (C, 2) chord end pixels.
        exact: (P,) bool, every chord of the planar is within tolerance.

    Returns:
        (row_start (P,), row_span (R, 2)) for `Planars`.
    """
    n = len(bbox)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros((0, 2), np.int64)
    heights = np.maximum(bbox[:, 3] - bbox[:, 1] + 1, 0)
    row_start = np.concatenate([[0], np.cumsum(heights)[:-1]]).astype(np.int64)
    spans = np.empty((int(heights.sum()), 2), np.int64)
    spans[:, 0], spans[:, 1] = np.iinfo(np.int64).max // 2, -1
    rows_of = np.repeat(np.arange(n), heights)
    inexact_rows = ~np.asarray(exact, bool)[rows_of]
    spans[inexact_rows, 0] = bbox[rows_of[inexact_rows], 0]
    spans[inexact_rows, 1] = bbox[rows_of[inexact_rows], 2]
    _row_spans(np.ascontiguousarray(bbox, np.int64), row_start, np.ascontiguousarray(owner, np.int64),
               np.ascontiguousarray(uv0, np.float64), np.ascontiguousarray(uv1, np.float64),
               np.ascontiguousarray(exact, np.bool_), spans, PIXEL_CENTRE_OFFSET)  # fmt: skip
    return row_start, spans


