"""Raster stage: z-buffered rasterisation of screen-space strokes and planar 3-D primitives.

Two primitive kinds cover everything the spec draws:

* capsules: a projected (sub-)segment drawn as a thick stroke with round caps; depth along it
  is perspective-correct (1/z interpolated in screen space); colour = RGB * fade(depth).
* planars: a 3-D parallelogram (cuboid face) or triangle (piece of a concave map polygon).
  Each covered pixel casts its own camera ray (a per-camera ray map, so pinhole, distorted
  pinhole and f-theta are all exact), intersects the plane, and tests the barycentric
  coordinates; depth is exact, and the corner colours are interpolated bilinearly across the
  face (front colour A to back colour B on a cuboid's sides).

Occlusion: every fragment has a comparison key ``zscale * depth + zbias + 1`` rounded to
float32, and each pixel keeps the fragment with the smallest (key, order) pair, where `order`
is the primitive's draw-order rank (static lines, static polygons, lights and signs, boxes).
Colours always use the true depth; the key only decides who wins. Painted map surfaces use
``1.25 * depth + 0.5`` so that coplanar lane lines, drawn as screen-space strokes whose depth
is the centre-line depth, are not cut in half by the surface they lie on; box edges use a
small negative bias so that an edge wins over its own faces (hidden edges are culled before).

Backends: ``numba`` (CPU, the default; compiled kernels cached on disk, one pass per
primitive over the pixels it may cover) and ``torch`` (fragments generated per bounding box
and resolved with a scatter-min on the packed 64-bit (key, order); runs batched over many
images on a GPU). Both are deterministic and give identical frames up to floating-point ties.
"""

from __future__ import annotations

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape
from avsim.core.typing import NDArrayBool, NDArrayByte, NDArrayFloat32, NDArrayInt, NDArrayInt32
from avsim.render import style
from avsim.render.raster.aa import sample_offsets_px
from avsim.render.raster.kernels import (
    PARAM_EPS,
    capsule_key_floor,
    object_coverage_visible,
    planar_key_floor,
    visible_in_boxes,
)
from avsim.render.raster.primitives import (
    PIXEL_CENTRE_OFFSET,
    CapsuleArrays,
    DrawPlan,
    IdBuffers,
    PlanarArrays,
    Primitives,
)
from avsim.render.raster.strips import STRIP_ROWS, draw_strips, draw_strips_ids
from avsim.render.raster.torch_backend import rasterize_torch

__all__ = ["ID_STATS_COLUMNS", "new_id_stats", "object_coverage_px", "object_coverage_visible_px", "rasterize",
           "rasterize_numba", "rasterize_torch"]  # fmt: skip

# per object id, what the centre z-tests of a rasterisation with ids saw (`rasterize_numba(id_stats_out=...)`),
# as inclusive boxes x0, y0, x1, y1 (empty: x1 < x0): the box of the pixels it won, and a box holding every
# pixel its primitives cover but it may not hold at the end (where one of its fragments lost a z-test to
# another id, and where another object's primitive displaced it: the part of that primitive's won box that
# meets its own). An object with an empty lost box holds every pixel it covers ("uncontested"), and then
# `won_px` (the pixels it took that it did not hold yet) is its pixel count.
ID_STATS_COLUMNS = ("x0", "y0", "x1", "y1", "lost_x0", "lost_y0", "lost_x1", "lost_y1", "won_px")


def _draw_sequence(prims: Primitives, pl_floor: NDArrayFloat32, cap_floor: NDArrayFloat32,
                   tracked: tuple[NDArrayBool, NDArrayBool] | None) -> tuple[NDArrayInt, NDArrayInt, NDArrayInt]:  # fmt: skip
    """The kernel calls of one image: the capsules' and planars' sequences and the calls drawing them.

    The z-test keeps the smallest (key, draw rank) whatever the sequence, so the planars are drawn
    nearest first and then the capsules likewise (every fragment behind a nearer one is rejected
    before its ray is cast). With `tracked` (the primitives the id statistics see, `_tracked`: every
    one from the first object's on in draw order) the untracked ones are drawn so, without ids (they
    would only write -1 over the reset ids), and then the tracked ones in draw order, with ids:
    the statistics see the claims in draw order.

    Returns:
        The capsule sequence, the planar sequence and (C, 4) int64 calls (kind 0 = capsules /
        1 = planars, start, stop, with ids) into them.
    """
    runs = _runs(prims)  # also checks the ranks
    if tracked is None:
        lead = (np.ones(prims.n_capsules, np.bool_), np.ones(prims.n_planars, np.bool_))
    else:
        lead = (~tracked[0], ~tracked[1])
    floors = (cap_floor, pl_floor)
    seqs: list[list[NDArrayInt]] = [[], []]
    calls, sizes = [], [0, 0]
    for kind in (1, 0):  # the leading ones nearest first
        idx = np.flatnonzero(lead[kind])
        seqs[kind].append(idx[np.argsort(floors[kind][idx], kind="stable")])
        calls.append((kind, 0, len(idx), int(tracked is None)))
        sizes[kind] = len(idx)
    in_order = [] if tracked is None else [(kind, np.arange(start, stop, dtype=np.int64)[tracked[kind][start:stop]]) for kind, start, stop in runs]
    for kind, idx in in_order:
        seqs[kind].append(idx)
        calls.append((kind, sizes[kind], sizes[kind] + len(idx), 1))
        sizes[kind] += len(idx)
    cap_seq, pl_seq = (np.concatenate([*s, np.zeros(0, np.int64)]).astype(np.int64) for s in seqs)
    kept = [c for c in calls if c[2] > c[1]]
    return cap_seq, pl_seq, np.array(kept, np.int64).reshape(-1, 4)


def _runs(prims: Primitives) -> list[tuple[int, int, int]]:
    """Draw sequence as runs (kind 0 = capsules / 1 = planars, start, stop) in (order) order."""
    cap_order, pl_order = prims.capsules.order, prims.planars.order
    if (len(cap_order) > 1 and np.any(np.diff(cap_order) <= 0)) or (len(pl_order) > 1 and np.any(np.diff(pl_order) <= 0)):
        raise AvsimValueError("primitives: orders must be strictly increasing within each kind")
    kinds = np.concatenate([np.zeros(prims.n_capsules, np.int64), np.ones(prims.n_planars, np.int64)])
    seq_kinds = kinds[np.argsort(np.concatenate([cap_order, pl_order]), kind="stable")]
    if not len(seq_kinds):
        return []
    breaks = np.flatnonzero(np.diff(seq_kinds)) + 1
    starts, stops = np.r_[0, breaks], np.r_[breaks, len(seq_kinds)]
    runs, counters = [], [0, 0]
    for a, b in zip(starts, stops):
        kind = int(seq_kinds[a])
        runs.append((kind, counters[kind], counters[kind] + int(b - a)))
        counters[kind] += int(b - a)
    return runs


def rasterize_numba(
    prims: Primitives,
    rays: NDArrayFloat32,
    out: NDArrayByte | None = None,
    ids_out: NDArrayInt32 | None = None,
    antialias: bool = False,
    id_stats_out: NDArrayInt | None = None,
) -> NDArrayByte:
    """Rasterise one image on the CPU with the compiled kernels.

    Args:
        prims: the image's primitives.
        rays: (H, W, 2) float32 ray map (`ray_map`).
        out: (H, W, 3) uint8 buffer to draw into (cleared first), or None for a new one.
        ids_out: (H, W) int32 buffer (or None): filled (after a reset to -1) with the object id
            (`cap_obj` / `pl_obj`) of the fragment that won each pixel's z-test at the pixel
            centre, -1 where none or background (also with `antialias`). The colours do not depend on it.
        antialias: resolve edge pixels from 4 rotated-grid sub-samples (`avsim.render.raster.aa`);
            False: one sample per pixel, the exact-palette frames.
        id_stats_out: with `ids_out`, an (N, 9) int64 buffer (N > every object id) filled with
            `ID_STATS_COLUMNS` of each object id (`new_id_stats` makes one).

    Returns:
        (H, W, 3) uint8 RGB (`out` when given).
    """
    h, w = prims.height_px, prims.width_px
    check_shape(rays, (h, w, 2), "rays")
    if ids_out is not None:
        check_shape(ids_out, (h, w), "ids_out", dtype=np.int32)
    img = np.empty((h, w, 3), np.uint8) if out is None else out
    n_caps = prims.n_capsules  # winner codes: capsule s -> s, planar p -> n_caps + p
    codes = np.arange(n_caps, dtype=np.int32), np.arange(n_caps, n_caps + prims.n_planars, dtype=np.int32)
    ranks = prims.capsules.order, prims.planars.order
    floors = capsule_key_floor(prims.capsules), planar_key_floor(prims.planars, style.NEAR_M)
    draws = tuple(DrawPlan(floors[k], ranks[k], np.zeros(0, np.int64), codes[k]) for k in (0, 1))
    if h * w == 0:
        return img
    if ids_out is None:
        cap_seq, pl_seq, _ = _draw_sequence(prims, floors[1], floors[0], None)  # the planars' calls, then the capsules'
        draw_strips(img, rays, STRIP_ROWS, antialias, prims.capsules.arrays(), draws[0]._replace(seq=cap_seq),
                    prims.planars.arrays(), draws[1]._replace(seq=pl_seq), np.concatenate(ranks), sample_offsets_px(),
                    (PIXEL_CENTRE_OFFSET, style.NEAR_M, style.MAX_DEPTH_M, PARAM_EPS))  # fmt: skip
        return img
    cap_obj, pl_obj, stats, cap_track, pl_track = _id_args(prims, id_stats_out)
    cap_seq, pl_seq, calls = _draw_sequence(prims, floors[1], floors[0], None if id_stats_out is None else (cap_track, pl_track))
    idbs = IdBuffers(ids_out, cap_obj, True, stats, cap_track), IdBuffers(ids_out, pl_obj, True, stats, pl_track)
    draw_strips_ids(img, rays, STRIP_ROWS, antialias, prims.capsules.arrays(), draws[0]._replace(seq=cap_seq),
                    prims.planars.arrays(), draws[1]._replace(seq=pl_seq), calls, idbs, np.concatenate(ranks),
                    sample_offsets_px(), (PIXEL_CENTRE_OFFSET, style.NEAR_M, style.MAX_DEPTH_M, PARAM_EPS))  # fmt: skip
    return img


def new_id_stats(n_objects: int) -> NDArrayInt:
    """An empty id-statistics buffer for `rasterize_numba(..., id_stats_out=...)`.

    Args:
        n_objects: number of objects N (ids 0..N-1).

    Returns:
        (N, 9) int64, columns `ID_STATS_COLUMNS` (reset by every rasterisation).
    """
    return np.zeros((int(n_objects), len(ID_STATS_COLUMNS)), np.int64)


def _id_args(prims: Primitives, id_stats_out: NDArrayInt | None) -> tuple[NDArrayInt32, NDArrayInt32, NDArrayInt, NDArrayBool, NDArrayBool]:
    """The kernels' id arguments: object ids per capsule / planar, the id statistics and which primitives they track."""
    cap_obj = np.ascontiguousarray(prims.capsules.object_ids(), np.int32)
    pl_obj = np.ascontiguousarray(prims.planars.object_ids(), np.int32)
    if id_stats_out is None:  # the kernels only write ids
        no_track = (np.zeros(prims.n_capsules, np.bool_), np.zeros(prims.n_planars, np.bool_))
        return cap_obj, pl_obj, np.zeros((0, len(ID_STATS_COLUMNS)), np.int64), *no_track
    stats = _reset_id_stats(id_stats_out, cap_obj, pl_obj, prims.width_px, prims.height_px)
    return cap_obj, pl_obj, stats, *_tracked(prims, cap_obj, pl_obj)


def _reset_id_stats(
    stats: NDArrayInt, cap_obj: NDArrayInt | NDArrayInt32, pl_obj: NDArrayInt | NDArrayInt32, w: int, h: int
) -> NDArrayInt:
    """The id statistics buffer, checked and reset."""
    top = max(int(cap_obj.max(initial=-1)), int(pl_obj.max(initial=-1)))
    check_shape(stats, (None, len(ID_STATS_COLUMNS)), "id_stats_out", dtype=np.int64)
    if len(stats) <= top:
        raise AvsimValueError(f"id_stats_out: expected N > {top} rows (every object id), got {len(stats)}")
    stats[:, 0:2], stats[:, 4:6] = (w, h), (w, h)
    stats[:, 2:4], stats[:, 6:8], stats[:, 8] = -1, -1, 0
    return stats


def _tracked(
    prims: Primitives, cap_obj: NDArrayInt | NDArrayInt32, pl_obj: NDArrayInt | NDArrayInt32
) -> tuple[NDArrayBool, NDArrayBool]:
    """Primitives whose centre z-tests the id statistics must see: objects', and any drawn after the first object's.

    The others (map and sign primitives drawn before every box) cannot meet an object's pixel, so they
    only write ids.
    """
    cap_order, pl_order = prims.capsules.order, prims.planars.order
    orders = np.concatenate([cap_order[cap_obj >= 0], pl_order[pl_obj >= 0]])
    first = orders.min() if len(orders) else np.iinfo(np.int64).max
    return ((cap_obj >= 0) | (cap_order > first)), ((pl_obj >= 0) | (pl_order > first))


def _per_object(prims: Primitives, n_objects: int) -> tuple[CapsuleArrays, NDArrayInt, PlanarArrays, NDArrayInt]:
    """Each object's capsules and planars, grouped by object id (the coverage kernels' input): the kernels'
    arrays of the image's primitives (their plane parameters those the rasterisation used), taken in that sequence.

    Returns:
        The grouped capsule arrays, (N + 1,) capsule bounds per object, the grouped planar arrays, (N + 1,) planar bounds.
    """
    cap_obj, pl_obj = prims.capsules.object_ids(), prims.planars.object_ids()
    cs, ps = (np.flatnonzero((o >= 0) & (o < n_objects)) for o in (cap_obj, pl_obj))
    cs, ps = cs[np.argsort(cap_obj[cs], kind="stable")], ps[np.argsort(pl_obj[ps], kind="stable")]
    caps = CapsuleArrays(*(a[cs] for a in prims.capsules.arrays()))
    pls = prims.planars.arrays()
    pls = pls._replace(plane=pls.plane[ps], is_tri=pls.is_tri[ps], rgb=pls.rgb[ps], bbox=pls.bbox[ps], zscale=pls.zscale[ps],
                       zbias=pls.zbias[ps], row_start=pls.row_start[ps] if pls.use_spans else pls.row_start)  # fmt: skip
    cb = np.searchsorted(cap_obj[cs], np.arange(n_objects + 1)).astype(np.int64)
    pb = np.searchsorted(pl_obj[ps], np.arange(n_objects + 1)).astype(np.int64)
    return caps, cb, pls, pb


def object_coverage_px(prims: Primitives, rays: NDArrayFloat32, n_objects: int) -> NDArrayInt:
    """Pixels each object covers when drawn alone (its own primitives only).

    A pixel counts when any of the object's primitives covers its centre with a fragment the
    kernels would draw into a cleared buffer (the union of its faces' and edges' coverage, so no
    depth order is needed): `object_coverage_visible_px` against an id buffer with no object in it.

    Args:
        prims: the image's primitives with `cap_obj` / `pl_obj`.
        rays: (H, W, 2) the camera's ray map.
        n_objects: number of objects N (ids 0..N-1).

    Returns:
        (N,) int64 pixel counts.
    """
    no_ids = np.full((prims.height_px, prims.width_px), -1, np.int32)
    return object_coverage_visible_px(prims, rays, n_objects, no_ids)[0]


def object_coverage_visible_px(
    prims: Primitives, rays: NDArrayFloat32, n_objects: int, ids: NDArrayInt32, id_stats: NDArrayInt | None = None,
    scratch: NDArrayByte | None = None,
) -> tuple[NDArrayInt, NDArrayInt, NDArrayInt]:  # fmt: skip
    """`object_coverage_px` and the visible pixels of each object in the id buffer, in one compiled pass.

    The pixels an object drew (id buffer == k) are pixels its primitives cover, so they lie in the box
    the coverage marks: each object's box is read once, for its visible count and box, as it is cleared.
    With `id_stats` (of the rasterisation that drew `ids`) only contested objects take that pass: an
    object that never lost a z-test to, nor was displaced by, another id holds every pixel it
    covers, so its coverage is its visible count and its visible box the box of the pixels it won;
    a contested object's held pixels are counted in its won box, and its primitives are tested only
    inside its lost box (`ID_STATS_COLUMNS`), where every covered pixel it does not hold lies.

    Args:
        prims: the image's primitives with `cap_obj` / `pl_obj`.
        rays: (H, W, 2) the camera's ray map.
        n_objects: number of objects N (ids 0..N-1).
        ids: (H, W) int32 object ids the image was drawn with (-1: none).
        id_stats: optional (N, 9) int64 `ID_STATS_COLUMNS` from `rasterize_numba(..., id_stats_out=...)`
            of the same rasterisation.
        scratch: optional (H, W) uint8 zeros the pass marks pixels in and leaves zero (a caller
            reusing one for many images); None: a new one.

    Returns:
        unoccluded (N,) int64 pixel counts (`object_coverage_px`), visible (N,) int64 counts of
        ids == k and visible boxes (N, 4) int64 inclusive x0, y0, x1, y1 (-1 where none).
    """
    h, w = prims.height_px, prims.width_px
    check_shape(ids, (h, w), "ids")
    if id_stats is not None:
        check_shape(id_stats, (n_objects, len(ID_STATS_COLUMNS)), "id_stats")
    out, vis, vis_box = np.zeros(n_objects, np.int64), np.zeros(n_objects, np.int64), np.full((n_objects, 4), -1, np.int64)
    ids = np.ascontiguousarray(ids, np.int32)
    todo, clip = np.arange(n_objects, dtype=np.int64), np.tile(np.array([0, 0, w - 1, h - 1], np.int64), (n_objects, 1))
    if id_stats is not None:
        won, clip = np.ascontiguousarray(id_stats[:, :4]), np.ascontiguousarray(id_stats[:, 4:8])
        contested = clip[:, 2] >= clip[:, 0]
        held = np.flatnonzero(~contested & (won[:, 2] >= won[:, 0]))
        vis[held] = id_stats[held, 8]
        out[held], vis_box[held] = vis[held], won[held]
        todo = np.flatnonzero(contested)
        visible_in_boxes(ids, won, todo, vis, vis_box)
        out[todo] = vis[todo]
    if len(todo):
        caps, cb, pls, pb = _per_object(prims, n_objects)
        mask = np.zeros((h, w), np.uint8) if scratch is None else scratch
        check_shape(mask, (h, w), "scratch", dtype=np.uint8)
        consts = (PIXEL_CENTRE_OFFSET, style.NEAR_M, style.MAX_DEPTH_M, PARAM_EPS)
        object_coverage_visible(mask, ids, rays, caps, cb, pls, pb, consts,
                                (out, vis, vis_box), todo, clip, id_stats is not None)  # fmt: skip
    return out, vis, vis_box


def rasterize(prims: Primitives, rays: NDArrayFloat32, backend: str = "numba", antialias: bool = False) -> NDArrayByte:
    """Rasterise one image on a black background.

    Args:
        prims: the image's primitives.
        rays: (H, W, 2) float32 ray map (`ray_map`).
        backend: "numba" (CPU) or "torch".
        antialias: 4x MSAA on edge pixels (see `avsim.render.raster.aa`); False: one sample per pixel.

    Returns:
        (H, W, 3) uint8 RGB.
    """
    if backend == "numba":
        return rasterize_numba(prims, rays, antialias=antialias)
    if backend == "torch":
        return rasterize_torch([prims], [rays], antialias=antialias)[0]
    raise AvsimValueError(f"backend: expected numba or torch, got {backend!r}")
