"""COCO compressed RLE of instance masks, straight from the renderer's id buffer (pycocotools' string encoding).

`rle_string` encodes one mask crop; `rle_strings` all masks of an image in one compiled pass
over the id buffer (each object's visible box only). Split out of `avsim.render.labels.boxes`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from avsim.core.jit import njit
from avsim.core.typing import NDArrayBool, NDArrayInt, NDArrayInt32

__all__ = ["rle_string", "rle_strings"]


@njit
def _emit(out: npt.NDArray[np.uint8], n: int, d: int) -> int:
    more = True
    while more:
        c = d & 0x1F
        d >>= 5
        more = (d != -1) if (c & 0x10) else (d != 0)
        out[n] = (c | 0x20 if more else c) + 48
        n += 1
    return n

@njit
def _rle_runs(a: npt.NDArray[Any], value: Any, ax0: int, ay0: int, ch: int, cw: int, x0: int, y0: int, h: int,
              total: int, out: npt.NDArray[np.uint8], n: int) -> int:  # fmt: skip
    # column-major runs of an image-size mask that is (a[ay0:ay0+ch, ax0:ax0+cw] == value) at
    # (x0, y0) and False elsewhere, in pycocotools' compressed string encoding, appended to
    # out[n:]; returns the new length
    k, prev1, prev2, start, on = 0, 0, 0, 0, False
    for x in range(cw):
        for y in range(ch):
            pos = (x0 + x) * h + y0 + y
            v = a[ay0 + y, ax0 + x] == value
            if v == on:
                continue
            run = pos - start
            n = _emit(out, n, run - prev2 if k > 2 else run)
            prev2, prev1, k, start, on = prev1, run, k + 1, pos, v
        pos = (x0 + x) * h + y0 + ch  # the next pixel in memory order: False unless in the crop
        if on and (y0 + ch < h or y0 > 0 or x == cw - 1) and pos < total:
            run = pos - start
            n = _emit(out, n, run - prev2 if k > 2 else run)
            prev2, prev1, k, start, on = prev1, run, k + 1, pos, False
    run = total - start
    return _emit(out, n, run - prev2 if k > 2 else run)

@njit
def _rle_chars(crop: NDArrayBool, x0: int, y0: int, h: int, out: npt.NDArray[np.uint8], total: int) -> int:
    # the runs of an image-size mask that is `crop` at (x0, y0); returns the number of chars written
    return _rle_runs(crop, True, 0, 0, crop.shape[0], crop.shape[1], x0, y0, h, total, out, 0)

@njit
def _rle_of_ids(ids: NDArrayInt32, objs: NDArrayInt, boxes: NDArrayInt, out: npt.NDArray[np.uint8], ends: NDArrayInt) -> None:
    # the runs of (ids == objs[m]) inside boxes[m] (inclusive x0, y0, x1, y1) for every m, back to back
    h, w = ids.shape
    n = 0
    for m in range(len(objs)):
        x0, y0 = boxes[m, 0], boxes[m, 1]
        ch, cw = boxes[m, 3] - y0 + 1, boxes[m, 2] - x0 + 1
        n = _rle_runs(ids, np.int32(objs[m]), x0, y0, ch, cw, x0, y0, h, h * w, out, n)
        ends[m] = n


def rle_string(crop: NDArrayBool, x0: int, y0: int, height_px: int, width_px: int) -> str:
    """COCO compressed-RLE `counts` of an image-size mask that is `crop` at (x0, y0), False elsewhere.

    Args:
        crop: (h, w) bool.
        x0: column of the crop's first pixel.
        y0: row of the crop's first pixel.
        height_px: image height H.
        width_px: image width W.

    Returns:
        The `counts` string (pycocotools' encoding of the column-major runs).
    """
    out = np.empty(16 * (crop.size + 4), np.uint8)
    n = _rle_chars(np.ascontiguousarray(crop, np.bool_), x0, y0, height_px, out, height_px * width_px)
    return out[:n].tobytes().decode("ascii")


def rle_strings(ids: NDArrayInt32, objs: NDArrayInt, boxes_px: NDArrayInt) -> list[str]:
    """COCO compressed-RLE `counts` of the masks `ids == objs[m]` of one image, in one compiled pass.

    Each mask is `rle_string` of the crop `ids[y0:y1+1, x0:x1+1] == objs[m]` at (x0, y0):
    the object's pixels must lie inside its box (the visible box of the id buffer).

    Args:
        ids: (H, W) int32 object ids.
        objs: (M,) object ids.
        boxes_px: (M, 4) inclusive pixel boxes (x0, y0, x1, y1) inside the image.

    Returns:
        M `counts` strings.
    """
    objs_a = np.ascontiguousarray(objs, np.int64)
    boxes_a = np.ascontiguousarray(np.reshape(boxes_px, (-1, 4)), np.int64)
    if not len(objs_a):
        return []
    area = (boxes_a[:, 2] - boxes_a[:, 0] + 1) * (boxes_a[:, 3] - boxes_a[:, 1] + 1)
    out = np.empty(int(16 * (area + 4).sum()), np.uint8)
    ends = np.zeros(len(objs_a), np.int64)
    _rle_of_ids(np.ascontiguousarray(ids, np.int32), objs_a, boxes_a, out, ends)
    text = out[: int(ends[-1])].tobytes().decode("ascii")
    return [text[a:b] for a, b in zip(np.r_[0, ends[:-1]].tolist(), ends.tolist())]
