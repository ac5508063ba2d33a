"""COCO compressed RLE of instance masks (pycocotools' string encoding of column-major runs).

`rle_encode` / `rle_decode` convert a mask and its `{"size", "counts"}` record; `rle_string`
encodes one mask crop; `rle_strings` all masks of an image in one compiled pass over the
renderer's id buffer (each object's visible box only). A file format, so in the core layer: the
labels writer (`avsim.render.labels`) and the remapping of labels to the generated size
(`avsim.models.labels_scaling`) share it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from avsim.core.jit import njit
from avsim.core.typing import NDArrayBool, NDArrayInt, NDArrayInt32

__all__ = ["rle_decode", "rle_encode", "rle_string", "rle_strings"]


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


def rle_encode(mask: NDArrayBool, box: tuple[int, int, int, int] | None = None) -> dict[str, Any]:
    """COCO compressed RLE of a binary mask (column-major runs, pycocotools' string encoding).

    Args:
        mask: (H, W) bool, or with `box` the crop of an (H, W) mask that is False outside it.
        box: None, or (x0, y0, H, W): where the crop sits and the image size.

    Returns:
        {"size": [H, W], "counts": str}.
    """
    x0, y0, h, w = box if box is not None else (0, 0, *mask.shape)
    return {"size": [int(h), int(w)], "counts": rle_string(np.asarray(mask, bool), x0, y0, h, w)}


def rle_decode(rle: dict[str, Any]) -> NDArrayInt:
    """Inverse of `rle_encode`.

    Args:
        rle: {"size": [H, W], "counts": str}.

    Returns:
        (H, W) bool mask.
    """
    h, w = rle["size"]
    s, p = rle["counts"], 0
    runs: list[int] = []
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            c = ord(s[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(runs) > 2:
            x += runs[-2]
        runs.append(x)
    flat = np.zeros(h * w, bool)
    pos = 0
    for i, n in enumerate(runs):
        if i % 2:
            flat[pos : pos + n] = True
        pos += n
    return flat.reshape((w, h)).T
