"""What the raster layer draws: capsules and planars of one image, checked and frozen, and the pixel grid.

`Capsules` (screen-space strokes) and `Planars` (3-D parallelograms and triangles) are frozen
dataclasses whose arrays are checked when made (shapes, one length per set, kernel dtypes); `Primitives`
holds one image's two sets and its size. The compiled kernels read them as named tuples of
contiguous arrays (`CapsuleArrays`, `PlanarArrays`), with the per-call drawing state in
`DrawPlan`, `FrameBuffers` and `IdBuffers`: no kernel takes more than a handful of arguments.

Pixel grid: pixel (i, j) (column, row) has its centre at (i, j) + PIXEL_CENTRE_OFFSET, i.e. the
OpenCV convention PIXEL_CENTRE_OFFSET = 0: the pixel covers [i - 0.5, i + 0.5) x [j - 0.5, j + 0.5).
`ray_map` gives each pixel centre's camera ray.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from avsim.core.cameras import Camera
from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape
from avsim.core.typing import (
    NDArrayAny,
    NDArrayBool,
    NDArrayByte,
    NDArrayFloat,
    NDArrayFloat32,
    NDArrayInt,
    NDArrayInt32,
)

PIXEL_CENTRE_OFFSET = 0.0  # pixel (i, j) is centred at (i, j) + this (OpenCV); the renderer's one pixel convention


def _array(array: Any, dtype: type | np.dtype) -> np.ndarray:
    """`array` as a C-contiguous array of `dtype` (a copy only when needed: the kernels read it as it is)."""
    return np.ascontiguousarray(array, dtype=dtype)


def _empty(*shape: int, dtype: type = np.float64) -> Any:
    return field(default_factory=lambda: np.zeros(shape, dtype))


@dataclass(frozen=True)
class Capsules:
    """S capsules: projected (sub-)segments drawn as thick strokes with round caps.

    Depth along a capsule is perspective-correct (1/z interpolated in screen space); its colour is
    `rgb` faded by depth.

    Attributes:
        xy_px: (S, 4) float64 pixel ends (x0, y0, x1, y1).
        inv_depth: (S, 2) float64 1/z at the two ends.
        radius_px: (S,) float64 stroke half-width.
        rgb: (S, 3) float64 colour in [0, 255].
        zscale: (S,) float64 and zbias: (S,) float64: the z-test key is zscale * depth + zbias + 1.
        order: (S,) int64 draw-order rank, strictly increasing.
        obj: (S,) int32 labelled object of each capsule (-1: none), or empty (all -1).
    """

    xy_px: NDArrayFloat = _empty(0, 4)
    inv_depth: NDArrayFloat = _empty(0, 2)
    radius_px: NDArrayFloat = _empty(0)
    rgb: NDArrayFloat = _empty(0, 3)
    zscale: NDArrayFloat = _empty(0)
    zbias: NDArrayFloat = _empty(0)
    order: NDArrayInt = _empty(0, dtype=np.int64)
    obj: NDArrayAny = _empty(0, dtype=np.int32)  # any integer dtype in, int32 stored

    def __post_init__(self) -> None:
        dims: dict[str, int] = {}
        for name, spec in (("xy_px", ("S", 4)), ("inv_depth", ("S", 2)), ("radius_px", ("S",)), ("rgb", ("S", 3)),
                           ("zscale", ("S",)), ("zbias", ("S",)), ("order", ("S",))):  # fmt: skip
            value = _array(getattr(self, name), np.int64 if name == "order" else np.float64)
            check_shape(value, spec, f"capsules.{name}", dims=dims)
            object.__setattr__(self, name, value)
        obj = _array(self.obj, np.int32)
        if len(obj) not in (0, dims.get("S", 0)):
            raise AvsimValueError(f"capsules.obj: expected shape (S,) = ({dims.get('S', 0)},) or (0,), got {obj.shape}")
        object.__setattr__(self, "obj", obj)

    def __len__(self) -> int:
        return len(self.order)

    def take(self, index: NDArrayInt) -> Capsules:
        """The capsules at `index` (in that sequence; `obj` kept when given)."""
        obj = self.obj[index] if len(self.obj) else self.obj
        return Capsules(self.xy_px[index], self.inv_depth[index], self.radius_px[index], self.rgb[index], self.zscale[index],
                        self.zbias[index], self.order[index], obj)  # fmt: skip

    def object_ids(self) -> NDArrayInt32:
        """(S,) int32 object ids (all -1 when none were given)."""
        return self.obj if len(self.obj) == len(self) else np.full(len(self), -1, np.int32)

    def arrays(self) -> CapsuleArrays:
        """The kernels' view of the capsules."""
        return CapsuleArrays(self.xy_px, self.inv_depth, self.radius_px, self.rgb, self.zscale, self.zbias)


@dataclass(frozen=True)
class Planars:
    """P planars: 3-D parallelograms (cuboid faces) or triangles (pieces of concave map polygons).

    Each covered pixel casts its own camera ray, intersects the plane and tests the barycentric
    coordinates (exact depth); corner colours are interpolated bilinearly across a parallelogram.

    Attributes:
        origin: (P, 3) float64 corner c0 in the camera frame; e1, e2: (P, 3) the edges to c1 and c3.
        is_tri: (P,) bool: a triangle c0, c0 + e1, c0 + e2.
        rgb: (P, 4, 3) float64 colours at c0, c1, c2 = c0 + e1 + e2, c3 (triangles use the first).
        bbox: (P, 4) int64 inclusive pixel box (x0, y0, x1, y1).
        zscale, zbias: (P,) float64, as for capsules.
        order: (P,) int64 draw-order rank, strictly increasing.
        row_start: (P,) int64 and row_span: (R, 2) int64, optional row spans (a loop bound only;
            coverage is decided per pixel): row y of planar p is scanned over x in
            row_span[row_start[p] + y - y0] (inclusive); empty row_start: whole box rows.
        obj: (P,) int32 labelled object of each planar (-1: none), or empty.
    """

    origin: NDArrayFloat = _empty(0, 3)
    e1: NDArrayFloat = _empty(0, 3)
    e2: NDArrayFloat = _empty(0, 3)
    is_tri: NDArrayBool = _empty(0, dtype=np.bool_)
    rgb: NDArrayFloat = _empty(0, 4, 3)
    bbox: NDArrayInt = _empty(0, 4, dtype=np.int64)
    zscale: NDArrayFloat = _empty(0)
    zbias: NDArrayFloat = _empty(0)
    order: NDArrayInt = _empty(0, dtype=np.int64)
    row_start: NDArrayInt = _empty(0, dtype=np.int64)
    row_span: NDArrayInt = _empty(0, 2, dtype=np.int64)
    obj: NDArrayAny = _empty(0, dtype=np.int32)  # any integer dtype in, int32 stored

    def __post_init__(self) -> None:
        dims: dict[str, int] = {}
        specs = {"origin": (("P", 3), np.float64), "e1": (("P", 3), np.float64), "e2": (("P", 3), np.float64),
                 "is_tri": (("P",), np.bool_), "rgb": (("P", 4, 3), np.float64), "bbox": (("P", 4), np.int64),
                 "zscale": (("P",), np.float64), "zbias": (("P",), np.float64), "order": (("P",), np.int64),
                 "row_span": ((None, 2), np.int64)}  # fmt: skip
        for name, (spec, dtype) in specs.items():
            value = _array(getattr(self, name), dtype).reshape(-1, 2) if name == "row_span" else _array(getattr(self, name), dtype)
            check_shape(value, spec, f"planars.{name}", dims=dims)
            object.__setattr__(self, name, value)
        n = dims.get("P", 0)
        for name, dtype in (("row_start", np.int64), ("obj", np.int32)):
            value = _array(getattr(self, name), dtype)
            if value.shape not in ((0,), (n,)):
                raise AvsimValueError(f"planars.{name}: expected shape (P,) = ({n},) or (0,), got {value.shape}")
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return len(self.order)

    @property
    def has_spans(self) -> bool:
        """Whether every planar has row spans."""
        return len(self.row_start) == len(self) > 0

    def object_ids(self) -> NDArrayInt32:
        """(P,) int32 object ids (all -1 when none were given)."""
        return self.obj if len(self.obj) == len(self) else np.full(len(self), -1, np.int32)

    def take(self, index: NDArrayInt) -> Planars:
        """The planars at `index` (row spans kept: `row_start` indexes the same `row_span`)."""
        keep = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("origin", "e1", "e2", "is_tri", "rgb", "bbox", "zscale", "zbias", "order"):
            keep[name] = keep[name][index]
        for name in ("row_start", "obj"):
            keep[name] = keep[name][index] if len(keep[name]) else keep[name]
        return Planars(**keep)

    def plane_params(self) -> NDArrayFloat:
        """Plane and barycentric parameters of every planar.

        For the camera ray r = (x/z, y/z, 1) hitting the plane at depth d = (n . c0) / (n . r) the
        barycentric coordinates are a = d (A . r) - a0, b = d (B . r) - b0.

        Returns:
            (P, 12) float64: normal n (3), n . c0, A (3), a0, B (3), b0 (non-finite values zeroed).
        """
        o, e1, e2 = self.origin, self.e1, self.e2
        normal = np.cross(e1, e2)
        nd = np.einsum("pk,pk->p", normal, o)
        g00, g01, g11 = (e1 * e1).sum(-1), (e1 * e2).sum(-1), (e2 * e2).sum(-1)
        det = g00 * g11 - g01 * g01
        with np.errstate(divide="ignore", invalid="ignore"):
            i00, i01, i11 = g11 / det, -g01 / det, g00 / det
        A = i00[:, None] * e1 + i01[:, None] * e2
        B = i01[:, None] * e1 + i11[:, None] * e2
        a0 = np.einsum("pk,pk->p", A, o)
        b0 = np.einsum("pk,pk->p", B, o)
        out = np.concatenate([normal, nd[:, None], A, a0[:, None], B, b0[:, None]], axis=1)
        return np.ascontiguousarray(np.where(np.isfinite(out), out, 0.0))

    def arrays(self) -> PlanarArrays:
        """The kernels' view of the planars (plane parameters computed once per planar set: a labelled render's
        rasterisation and its coverage pass read the same)."""
        return self._kernel_arrays

    @cached_property
    def _kernel_arrays(self) -> PlanarArrays:
        spans = self.has_spans
        row_start = self.row_start if spans else np.zeros(0, np.int64)
        return PlanarArrays(self.plane_params(), self.is_tri, self.rgb, self.bbox, self.zscale, self.zbias, spans, row_start,
                            self.row_span)  # fmt: skip


@dataclass(frozen=True)
class Primitives:
    """Everything one camera image shows: its capsules and planars, in camera coordinates and pixels."""

    width_px: int
    height_px: int
    capsules: Capsules = field(default_factory=Capsules)
    planars: Planars = field(default_factory=Planars)

    def __post_init__(self) -> None:
        if self.width_px < 0 or self.height_px < 0:
            raise AvsimValueError(f"primitives: image size must be >= 0, got {self.width_px}x{self.height_px}")

    @property
    def n_capsules(self) -> int:
        """Number of capsules S."""
        return len(self.capsules)

    @property
    def n_planars(self) -> int:
        """Number of planars P."""
        return len(self.planars)

    def with_object_ids(self, capsule_obj: NDArrayInt32, planar_obj: NDArrayInt32) -> Primitives:
        """The same primitives with other object ids ((S,) and (P,) int32; -1: none)."""
        return replace(self, capsules=replace(self.capsules, obj=capsule_obj), planars=replace(self.planars, obj=planar_obj))

    @staticmethod
    def concat(width_px: int, height_px: int, parts: list[Primitives]) -> Primitives:
        """Join primitive sets (orders are kept as given).

        Args:
            width_px: image width.
            height_px: image height.
            parts: the sets, in order.

        Returns:
            One set holding every part's primitives (row spans kept only when every part with planars has them).
        """
        cap = {f.name: np.concatenate([getattr(Capsules(), f.name)] + [getattr(p.capsules, f.name) for p in parts])
               for f in fields(Capsules)}  # fmt: skip
        pl = {f.name: np.concatenate([getattr(Planars(), f.name)] + [getattr(p.planars, f.name) for p in parts])
              for f in fields(Planars) if f.name not in ("row_start", "row_span")}  # fmt: skip
        with_planars = [p.planars for p in parts if len(p.planars)]
        if with_planars and all(p.has_spans for p in with_planars):
            shift = np.cumsum([0] + [len(p.row_span) for p in with_planars])
            pl["row_start"] = np.concatenate([p.row_start + s for p, s in zip(with_planars, shift)])
            pl["row_span"] = np.concatenate([p.row_span for p in with_planars])
        return Primitives(width_px, height_px, Capsules(**cap), Planars(**pl))


class CapsuleArrays(NamedTuple):
    """The capsule arrays the compiled kernels read (`Capsules.arrays`)."""

    xy: NDArrayFloat  # (S, 4)
    inv_depth: NDArrayFloat  # (S, 2)
    radius: NDArrayFloat  # (S,)
    rgb: NDArrayFloat  # (S, 3)
    zscale: NDArrayFloat  # (S,)
    zbias: NDArrayFloat  # (S,)


class PlanarArrays(NamedTuple):
    """The planar arrays the compiled kernels read (`Planars.arrays`)."""

    plane: NDArrayFloat  # (P, 12) `Planars.plane_params`
    is_tri: NDArrayBool  # (P,)
    rgb: NDArrayFloat  # (P, 4, 3)
    bbox: NDArrayInt  # (P, 4)
    zscale: NDArrayFloat  # (P,)
    zbias: NDArrayFloat  # (P,)
    use_spans: bool
    row_start: NDArrayInt  # (P,) with spans, else (0,)
    row_span: NDArrayInt  # (R, 2)


class DrawPlan(NamedTuple):
    """How one kind of primitive is drawn in one kernel call."""

    key_floor: NDArrayFloat32  # (N,) lower bound of each primitive's keys (early z-reject; -inf: none)
    rank: NDArrayInt  # (N,) int64 draw rank (the z-test breaks key ties on it)
    seq: NDArrayInt  # the primitives to draw, in any sequence
    code: NDArrayInt32  # (N,) winner code of each primitive (capsule s -> s, planar p -> S + p)


class FrameBuffers(NamedTuple):
    """The image being drawn (rows y0 - oy ... of the kernel's `rows`)."""

    img: NDArrayByte  # (H', W, 3)
    zbuf: NDArrayFloat32  # (H', W) comparison keys
    zrank: NDArrayInt32  # (H', W) the winner's draw rank
    win: NDArrayInt32  # (H', W) winner codes (with_win), else (1, W)
    with_win: bool


class IdBuffers(NamedTuple):
    """Object ids a rasterisation with labels writes (image rows)."""

    ids: NDArrayInt32  # (H, W) object id of each pixel's winner (with_ids), else (1, 1)
    obj: NDArrayInt32  # (N,) object id of each primitive of the kind drawn
    with_ids: bool
    stats: NDArrayInt  # (N_objects, 9) `ID_STATS_COLUMNS`, or (0, 9)
    track: NDArrayBool  # (N,) primitives whose centre z-tests the statistics see


RAY_BLOCK_PX = 1 << 18  # pixels cast at once by `ray_map`: bounds its working memory (about 130 bytes a pixel of the block)


def ray_map(camera: Camera, between_blocks: Callable[[], None] | None = None) -> NDArrayFloat32:
    """Per-pixel camera rays scaled to z = 1, at pixel centres (pixel (i, j) at (i, j) + PIXEL_CENTRE_OFFSET).

    Pixels whose ray does not point forward (theta >= 90 deg) hold NaN and are never drawn. The rays
    are cast in blocks of whole rows (`RAY_BLOCK_PX` pixels), so the working memory beyond the
    8 bytes a pixel of the result stays bounded; every value is the one a single pass would give.

    Args:
        camera: the camera.
        between_blocks: called before each block (it may raise to stop the work: a cancelled request).

    Returns:
        (H, W, 2) float32 (x/z, y/z).
    """
    h, w = camera.height_px, camera.width_px
    out = np.empty((h, w, 2), np.float32)
    rows = max(1, RAY_BLOCK_PX // max(w, 1))
    for y0 in range(0, h, rows):
        if between_blocks is not None:
            between_blocks()
        y1 = min(h, y0 + rows)
        ys, xs = np.mgrid[y0:y1, 0:w]
        uv = np.stack([xs.ravel(), ys.ravel()], -1).astype(np.float64) + PIXEL_CENTRE_OFFSET
        rays = camera.pixel_to_ray(uv)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(rays[:, 2] > 1e-6, rays[:, 2], np.nan)
            out[y0:y1] = np.stack([rays[:, 0] / z, rays[:, 1] / z], -1).reshape(y1 - y0, w, 2)
    return out
