"""Lane lines of one camera image for the OpenLane labels (`labels_io.lane_record`), in few numpy calls.

- `lane_table`: per map (its `LaneLines`, prepared once): every line's OpenLane category, xy
  bounds and the vertices as one float64 array.
- `lane_points_camera`: the vertices of the lines within a radius of the ego, in the camera
  frame, and which of them the image shows (`visible_in_image`): in front of the camera within
  the render range and inside the image. Only the points that pass the depth test are
  projected (the rest are not visible whatever their pixel); pixels come from the camera's
  `Projector` (equal to `camera.project`).
- `camera_json`: the camera model's JSON text, once per camera.
- `lane_lines_text`: the `lane_lines` list of the document as JSON text in one compiled pass,
  the numbers written by `labels_json`'s formatter (the bytes `json.dumps` writes for the
  rounded values); where a value is outside the formatter's exact range, list by list through
  `labels_json.float_lists_json` (which hands such lists to `json.dumps`).

Camera projectors and camera JSON are cached per camera value, lane tables per `LaneLines`
object (bounded caches of pure functions of frozen inputs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from avsim.core.cameras import Camera
from avsim.core.jit import njit
from avsim.core.shapes import check_shape
from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt
from avsim.maps.elements import LaneLines
from avsim.maps.style import LANE_TYPE_TO_OPENLANE
from avsim.render import style
from avsim.render.geometry.projector import cached_projector, pixels_px
from avsim.render.labels.json_text import float_lists_json, put_int, put_number

# the keys of an entry, as bytes (read-only constants of the compiled writer)
_HEAD, _VIS_KEY, _IMG_KEY = (np.frombuffer(t, np.uint8) for t in (b'{"xyz":[', b'],"visibility":[', b'],"visible_in_image":['))
_CAT_KEY, _TID_KEY = (np.frombuffer(t, np.uint8) for t in (b'],"category":', b',"track_id":'))


@dataclass(frozen=True)
class LaneTable:
    """The lane lines of a map as arrays (K lines, P vertices).

    category (K,) int64 OpenLane category of each line's drawn type; bounds_xy (K, 4) min_x,
    min_y, max_x, max_y; offsets (K + 1,) vertex offsets; points_m (P, 3) float64 world vertices;
    counts (K,) vertices per line (`np.diff(offsets)`).
    """

    category: NDArrayInt
    bounds_xy: NDArrayFloat
    offsets: NDArrayInt
    points_m: NDArrayFloat
    counts: NDArrayInt = field(init=False)

    def __post_init__(self) -> None:
        k = len(self.category)
        check_shape(self.bounds_xy, (k, 4), "LaneTable.bounds_xy")
        check_shape(self.offsets, (k + 1,), "LaneTable.offsets")
        check_shape(self.points_m, (None, 3), "LaneTable.points_m")
        object.__setattr__(self, "counts", np.diff(self.offsets))


@lru_cache(maxsize=8)
def lane_table(lane_lines: LaneLines) -> LaneTable:
    """The map's lane lines as a `LaneTable` (cached per `LaneLines` object: it is frozen, hashed by identity).

    Args:
        lane_lines: the map's lane lines.

    Returns:
        The table.
    """
    if not len(lane_lines):
        return LaneTable(np.zeros(0, np.int64), np.zeros((0, 4)), np.zeros(1, np.int64), np.zeros((0, 3)))
    types = lane_lines.lane_types()
    category = np.array([int(LANE_TYPE_TO_OPENLANE.get(str(t), 0)) for t in types.tolist()], np.int64)
    lines = lane_lines.lines
    return LaneTable(category, lines.bounds_xy(), np.asarray(lines.offsets, np.int64), np.asarray(lines.points_m, np.float64))


def camera_json(camera: Camera) -> str:
    """`json.dumps(camera.to_dict(), separators=(",", ":"))`, encoded once per camera value (a bounded cache).

    Args:
        camera: the camera (frozen, hashed by value; an unhashable one is encoded each time).

    Returns:
        The compact JSON text.
    """
    key: Any = camera  # hashed when called (frozen dataclass cameras are)
    try:
        return _camera_json(key)
    except TypeError:  # unhashable camera
        return json.dumps(camera.to_dict(), separators=(",", ":"))


@lru_cache(maxsize=32)
def _camera_json(camera: Camera) -> str:
    return json.dumps(camera.to_dict(), separators=(",", ":"))


def openlane_intrinsic(camera: Camera) -> tuple[NDArrayFloat, str]:
    """The 3x3 `intrinsic` of an OpenLane file: the camera's K, or a pinhole equivalent of an f-theta lens.

    OpenLane's evaluator multiplies `intrinsic` with the extrinsic (`projection_g2im_extrinsic`)
    and so needs a 3x3 matrix, though its metrics never use the product. For an f-theta lens
    the matrix is the pinhole that agrees with it at the principal point: focal length = the
    forward polynomial's linear term (d r / d theta at theta = 0), times the lens' linear
    (c, d, e) term, and the principal point; it is exact only near the image centre (the
    full model is the file's `camera_model`).

    Args:
        camera: the camera (at the image size).

    Returns:
        (3, 3) float64 matrix and its kind: "pinhole" (the camera's K; its distortion, if any, is
        in `camera_model`) or "ftheta_pinhole_equivalent".
    """
    K = getattr(camera, "K", None)
    if K is not None:
        return np.asarray(K, np.float64), "pinhole"
    f = float(camera.forward_poly[1])  # type: ignore[attr-defined]  # f-theta: the only other model
    c, d, e = camera.linear_cde  # type: ignore[attr-defined]
    cx, cy = camera.cx_px, camera.cy_px  # type: ignore[attr-defined]
    return np.array([[c * f, d * f, cx], [e * f, f, cy], [0.0, 0.0, 1.0]]), "ftheta_pinhole_equivalent"


def near_to_far(forward: NDArrayFloat, bounds: NDArrayInt) -> NDArrayInt:
    """Point order that makes every line run near-to-far: lines whose last point is behind their first are reversed.

    OpenLane's evaluator keeps a ground-truth lane only when its first point is before the far
    end of its range and its last point past the near end (`lane[0, 1] < y_max` and
    `lane[-1, 1] > y_min` in its ground frame, y forward), so a lane written far-to-near is
    never counted, while models output their lanes near-to-far.

    Args:
        forward: (N,) each point's coordinate along the forward axis (lines back to back).
        bounds: (L + 1,) first point of each line.

    Returns:
        (N,) int64 permutation of the points (each line's points stay within its own slice).
    """
    n = len(forward)
    order = np.arange(n, dtype=np.int64)
    if not n:
        return order
    first, last = bounds[:-1], bounds[1:] - 1
    flip = (bounds[1:] > bounds[:-1]) & (forward[np.maximum(last, 0)] < forward[np.minimum(first, n - 1)])
    line = np.repeat(np.arange(len(first)), np.diff(bounds))
    rev = flip[line]
    order[rev] = (first[line] + last[line] - order)[rev]
    return order


def near_lines(table: LaneTable, centre_xy_m: NDArrayFloat, radius_m: float) -> NDArrayInt:
    """Indices of the lines whose xy bounds come within `radius_m` of a point (per axis, as a box test).

    Args:
        table: the lane table.
        centre_xy_m: (2,) the point (the ego position).
        radius_m: the radius.

    Returns:
        (L,) ascending line indices.
    """
    b, (cx, cy), r = table.bounds_xy, centre_xy_m, radius_m
    return np.flatnonzero((b[:, 0] - r <= cx) & (b[:, 2] + r >= cx) & (b[:, 1] - r <= cy) & (b[:, 3] + r >= cy))


def lane_points_camera(
    table: LaneTable, idx: NDArrayInt, camera: Camera, R_cw: NDArrayFloat, t_cw: NDArrayFloat
) -> tuple[NDArrayFloat, NDArrayBool, NDArrayInt]:
    """The vertices of lines `idx` in the camera frame and which of them the image shows.

    Args:
        table: the lane table.
        idx: (L,) ascending line indices.
        camera: the camera (at the image size).
        R_cw: (3, 3) camera_R_world.
        t_cw: (3,) camera_t_world.

    Returns:
        points_cam (N, 3) = world vertices @ R_cw.T + t_cw (lines in `idx` order), visible (N,)
        bool (depth in (NEAR_M, MAX_DEPTH_M] and inside the image, as `camera.project`'s
        `in_image`), bounds (L + 1,) each line's first vertex in points_cam.
    """
    counts = table.counts[idx]
    every = len(idx) == len(table.category)
    pts = table.points_m if every else table.points_m[np.repeat(_line_mask(table, idx), table.counts)]
    p_cam = pts @ R_cw.T + t_cw
    depth = p_cam[:, 2]
    cand = np.flatnonzero((depth > style.NEAR_M) & (depth <= style.MAX_DEPTH_M))
    uv = pixels_px(cached_projector(camera), np.ascontiguousarray(p_cam[cand]))
    u, v = uv[:, 0] + 0.5, uv[:, 1] + 0.5  # `cameras._in_image`: pixel centres at integers
    visible = np.zeros(len(p_cam), bool)
    visible[cand] = (depth[cand] > 0) & (u >= 0) & (u < camera.width_px) & (v >= 0) & (v < camera.height_px)
    bounds = np.zeros(len(idx) + 1, np.int64)
    np.cumsum(counts, out=bounds[1:])
    return p_cam, visible, bounds


def _line_mask(table: LaneTable, idx: NDArrayInt) -> NDArrayBool:
    mask = np.zeros(len(table.category), bool)
    mask[idx] = True
    return mask


def lane_lines_text(xyz: NDArrayFloat, bounds: NDArrayInt, visible: NDArrayBool, category: NDArrayInt, track_id: NDArrayInt,
                    decimals: int) -> str:  # fmt: skip
    """The OpenLane `lane_lines` entries, comma-separated, as JSON text.

    Each entry is `{"xyz":[[x...],[y...],[z...]],"visibility":[v,...],"visible_in_image":[v,...],
    "category":c,"track_id":k}`, the coordinates rounded to `decimals` and written as
    `json.dumps` writes them.

    Args:
        xyz: (3, N) coordinates of every line's points, line after line.
        bounds: (L + 1,) first point of each line.
        visible: (N,) bool: the image shows the point (`visibility` and `visible_in_image`).
        category: (L,) int OpenLane category.
        track_id: (L,) int line index in the map.
        decimals: decimals kept (4..9).

    Returns:
        The text (no brackets around the list). Where a coordinate is outside the compiled
        formatter's exact range the entries are built list by list (`float_lists_json`, which
        hands such lists to `json.dumps`).
    """
    n = xyz.shape[1]
    out = np.empty(3 * n * (decimals + 24) + 4 * n + 160 * len(category) + 16, np.uint8)  # keys and two int64 per line: < 130
    k = _lane_text(np.ascontiguousarray(xyz, np.float64), np.ascontiguousarray(bounds, np.int64), np.ascontiguousarray(visible, np.bool_),
                   np.ascontiguousarray(category, np.int64), np.ascontiguousarray(track_id, np.int64), int(decimals), out)  # fmt: skip
    if k >= 0:
        return out[:k].tobytes().decode("ascii")
    return _lane_entries(xyz, bounds, visible, category, track_id, decimals)


def _lane_entries(xyz: NDArrayFloat, bounds: NDArrayInt, visible: NDArrayBool, category: NDArrayInt, track_id: NDArrayInt,
                  decimals: int) -> str:  # fmt: skip
    """`lane_lines_text` list by list, through `labels_json.float_lists_json`."""
    n_all, lo_l = xyz.shape[1], bounds[:-1]
    starts = (lo_l[:, None] + n_all * np.arange(3)[None, :]).reshape(-1)  # (lane, axis) rows of xyz (3, N)
    rows = float_lists_json(xyz, starts, starts + np.repeat(np.diff(bounds), 3), decimals)
    chars = np.full(2 * n_all, ord(","), np.uint8)
    chars[::2] = np.where(visible, ord("1"), ord("0"))
    vis_s = chars.tobytes().decode("ascii")  # "v,v,...": point i at 2 i
    lanes = []
    for j, (c, k) in enumerate(zip(category.tolist(), track_id.tolist())):
        lo, hi = 2 * int(bounds[j]), 2 * int(bounds[j + 1]) - 1
        lanes.append(f'{{"xyz":[{rows[3 * j]},{rows[3 * j + 1]},{rows[3 * j + 2]}],"visibility":[{vis_s[lo:hi]}],'
                     f'"visible_in_image":[{vis_s[lo:hi]}],"category":{int(c)},"track_id":{int(k)}}}')  # fmt: skip
    return ",".join(lanes)


@njit
def _put_bytes(out: npt.NDArray[np.uint8], n: int, text: npt.NDArray[np.uint8]) -> int:
    for c in text:
        out[n] = c
        n += 1
    return n

@njit
def _put_flags(out: npt.NDArray[np.uint8], n: int, flags: NDArrayBool, a: int, b: int) -> int:
    # "f,f,...": 1/0 of flags[a:b]
    for i in range(a, b):
        if i > a:
            out[n] = 44  # ,
            n += 1
        out[n] = 49 if flags[i] else 48
        n += 1
    return n

@njit
def _lane_text(xyz: NDArrayFloat, bounds: NDArrayInt, visible: NDArrayBool, category: NDArrayInt, track_id: NDArrayInt,
               nd: int, out: npt.NDArray[np.uint8]) -> int:  # fmt: skip
    # the entries back to back into out; returns the length, or -1 where a number is not exact
    p = 10.0**nd
    lo = 10.0 ** (nd - 4) if nd >= 4 else 0.0  # as labels_json._lists_text
    scale = np.int64(10) ** nd
    digits = np.empty(24, np.uint8)
    n = 0
    for s in range(len(category)):
        a, b = bounds[s], bounds[s + 1]
        if s:
            out[n] = 44  # ,
            n += 1
        n = _put_bytes(out, n, _HEAD)
        for r in range(3):
            out[n] = 91  # [
            n += 1
            for i in range(a, b):
                if i > a:
                    out[n] = 44
                    n += 1
                n, ok = put_number(out, n, xyz[r, i], p, nd, lo, scale, digits)
                if not ok:
                    return -1
            out[n] = 93  # ]
            n += 1
            if r < 2:
                out[n] = 44
                n += 1
        n = _put_flags(out, _put_bytes(out, n, _VIS_KEY), visible, a, b)
        n = _put_flags(out, _put_bytes(out, n, _IMG_KEY), visible, a, b)
        n = _put_bytes(out, n, _CAT_KEY)
        n = put_int(out, n, category[s], digits)
        n = _put_bytes(out, n, _TID_KEY)
        n = put_int(out, n, track_id[s], digits)
        out[n] = 125  # }
        n += 1
    return n
