"""HD-map element containers (struct of arrays, ragged geometry as points + offsets).

All coordinates are world-frame metres (FLU, z up). Polygons are outer rings, not closed
(the last vertex is not a repeat of the first), and may be concave.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from avsim.core.agents import box_corners
from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape
from avsim.core.transforms import check_unit_quat
from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt, NDArrayStr


def _ids(values: npt.ArrayLike, n: int, name: str) -> NDArrayStr:
    arr = np.asarray(values)
    check_shape(arr, (n,), name)
    arr = arr.astype(str) if n else np.zeros(0, "<U1")
    if n and len(np.unique(arr)) != n:
        raise AvsimValueError(f"{name}: element ids must be unique")
    return arr


def _points(values: npt.ArrayLike, name: str) -> NDArrayFloat:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        arr = arr.reshape(0, 3)
    check_shape(arr, ("M", 3), name)
    if not np.all(np.isfinite(arr)):
        raise AvsimValueError(f"{name}: contains NaN or infinite values")
    return arr


def _freeze(obj: object, **arrays: Any) -> None:
    for name, arr in arrays.items():
        if isinstance(arr, np.ndarray):
            arr.setflags(write=False)
        object.__setattr__(obj, name, arr)


def _offsets_from_lengths(lengths: npt.ArrayLike) -> NDArrayInt:
    return np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64))]).astype(np.int64)


_P = TypeVar("_P", bound="Polylines")


@dataclass(frozen=True, eq=False)
class Polylines:
    """K ragged 3-D polylines: ids (K,), points_m (M, 3), offsets (K+1,) with element k =
    points_m[offsets[k]:offsets[k+1]] (at least `min_points` vertices each)."""

    ids: np.ndarray
    points_m: np.ndarray
    offsets: np.ndarray

    min_points = 2
    kind = "polyline"

    def __post_init__(self) -> None:
        offsets = np.asarray(self.offsets, dtype=np.int64).reshape(-1)
        n = len(offsets) - 1
        if n < 0:
            raise AvsimValueError(f"{self.kind}.offsets: needs at least one entry (0)")
        pts = _points(self.points_m, f"{self.kind}.points_m")
        ids = _ids(self.ids, n, f"{self.kind}.ids")
        if offsets[0] != 0 or offsets[-1] != len(pts) or np.any(np.diff(offsets) < self.min_points):
            raise AvsimValueError(
                f"{self.kind}.offsets: must start at 0, end at {len(pts)} and give >= {self.min_points} points per element"
            )
        _freeze(self, ids=ids, points_m=pts, offsets=offsets)

    @classmethod
    def from_list(cls: type[_P], ids: npt.ArrayLike, arrays: Sequence[npt.ArrayLike]) -> _P:
        """Elements from one array per element.

        Args:
            ids: (K,) element ids.
            arrays: K vertex arrays, each (n_k, 3) (or anything reshapeable to it).

        Returns:
            The container (points concatenated, offsets from the lengths).
        """
        vertices = [np.asarray(a, dtype=np.float64).reshape(-1, 3) for a in arrays]
        pts = np.concatenate(vertices) if vertices else np.zeros((0, 3))
        return cls(np.asarray(ids).astype(str) if len(vertices) else np.zeros(0, "<U1"), pts, _offsets_from_lengths([len(a) for a in vertices]))

    @classmethod
    def empty(cls: type[_P]) -> _P:
        """A container with no elements.

        Returns:
            An empty container of this type.
        """
        return cls(np.zeros(0, "<U1"), np.zeros((0, 3)), np.zeros(1, np.int64))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, k: int) -> NDArrayFloat:
        return self.points_m[self.offsets[k] : self.offsets[k + 1]]

    def __iter__(self) -> Iterator[NDArrayFloat]:
        return (self[k] for k in range(len(self)))

    @property
    def element_index(self) -> NDArrayInt:
        """Element index (M,) of every vertex."""
        return np.repeat(np.arange(len(self)), np.diff(self.offsets))

    def vertex_mask(self, mask: npt.ArrayLike) -> NDArrayBool:
        """Per-vertex mask from a per-element one.

        Args:
            mask: (K,) bool per element.

        Returns:
            (M,) bool per vertex (each element's value repeated over its vertices).
        """
        return np.repeat(np.asarray(mask, bool), np.diff(self.offsets))

    def select(self: _P, mask: npt.ArrayLike) -> _P:
        """The elements where a mask holds.

        Args:
            mask: (K,) bool, or an index array.

        Returns:
            A container of the same type with the selected elements, in order.
        """
        mask = np.asarray(mask)
        if mask.dtype != bool:
            m = np.zeros(len(self), bool)
            m[mask] = True
            mask = m
        lengths = np.diff(self.offsets)[mask]
        return type(self)(self.ids[mask], self.points_m[self.vertex_mask(mask)], _offsets_from_lengths(lengths))

    @property
    def lengths_m(self) -> NDArrayFloat:
        """Arc length (K,) of each element (polygons: perimeter of the open ring)."""
        seg = np.linalg.norm(np.diff(self.points_m, axis=0), axis=-1)
        same = np.diff(self.element_index) == 0
        return np.asarray(np.bincount(self.element_index[1:][same], weights=seg[same], minlength=len(self)), dtype=np.float64)

    def bounds_xy(self) -> NDArrayFloat:
        """The xy bounds of every element.

        Returns:
            (K, 4) per element (min_x, min_y, max_x, max_y).
        """
        if not len(self):
            return np.zeros((0, 4))
        xy = self.points_m[:, :2]
        starts = self.offsets[:-1]  # every element has >= min_points vertices, so reduceat is exact
        return np.concatenate([np.minimum.reduceat(xy, starts), np.maximum.reduceat(xy, starts)], axis=1)


@dataclass(frozen=True, eq=False)
class Polygons(Polylines):
    """K ragged 3-D polygons (outer rings, open, concave allowed; >= 3 vertices)."""

    min_points = 3
    kind = "polygon"


@dataclass(frozen=True, eq=False)
class Cuboids:
    """K oriented 3-D boxes: ids (K,), center_m (K, 3), size_m (K, 3) (l, w, h),
    orientation (K, 4) world_R_object quaternions."""

    ids: np.ndarray
    center_m: np.ndarray
    size_m: np.ndarray
    orientation: np.ndarray

    def __post_init__(self) -> None:
        center = _points(self.center_m, "cuboid.center_m")
        n = len(center)
        ids = _ids(self.ids, n, "cuboid.ids")
        size = _points(self.size_m, "cuboid.size_m")
        quat = np.asarray(self.orientation, dtype=np.float64).reshape(-1, 4) if n == 0 else np.asarray(self.orientation, dtype=np.float64)
        check_shape(size, (n, 3), "cuboid.size_m")
        check_shape(quat, (n, 4), "cuboid.orientation")
        if np.any(size <= 0):
            raise AvsimValueError("cuboid.size_m: sizes must be > 0")
        check_unit_quat(quat, "cuboid.orientation")
        _freeze(self, ids=ids, center_m=center, size_m=size, orientation=quat)

    @classmethod
    def empty(cls) -> Cuboids:
        """A container with no boxes.

        Returns:
            Empty Cuboids.
        """
        return cls(np.zeros(0, "<U1"), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 4)))

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, mask: npt.ArrayLike) -> Cuboids:
        """The boxes where a mask holds.

        Args:
            mask: (K,) bool, or an index array.

        Returns:
            The selected boxes, in order.
        """
        mask = np.asarray(mask)
        return Cuboids(self.ids[mask], self.center_m[mask], self.size_m[mask], self.orientation[mask])

    def corners_m(self) -> NDArrayFloat:
        """The box corners in the render spec's corner order.

        Returns:
            (K, 8, 3) world-frame corners.
        """
        return box_corners(self.center_m, self.size_m, self.orientation)

    def bounds_xy(self) -> NDArrayFloat:
        """The xy bounds of every box's corners.

        Returns:
            (K, 4) per box (min_x, min_y, max_x, max_y).
        """
        if not len(self):
            return np.zeros((0, 4))
        c = self.corners_m()
        return np.concatenate([c[..., :2].min(1), c[..., :2].max(1)], -1)


@dataclass(frozen=True, eq=False)
class LaneLines:
    """Painted lane lines: polylines plus a colour and style per line; optional per-vertex
    colour/style (RDS-HQ); the drawn type is the most frequent per-vertex pair."""

    lines: Polylines
    color: np.ndarray
    style: np.ndarray
    vertex_color: np.ndarray | None = None
    vertex_style: np.ndarray | None = None

    def __post_init__(self) -> None:
        k, m = len(self.lines), len(self.lines.points_m)
        color = np.asarray(self.color).astype(str) if k else np.zeros(0, "<U5")
        style = np.asarray(self.style).astype(str) if k else np.zeros(0, "<U12")
        check_shape(color, (k,), "lane_lines.color")
        check_shape(style, (k,), "lane_lines.style")
        per_vertex: dict[str, NDArrayStr | None] = {}
        for name in ("vertex_color", "vertex_style"):
            value = getattr(self, name)
            if value is not None:
                value = np.asarray(value).astype(str) if m else np.zeros(0, "<U5")
                check_shape(value, (m,), f"lane_lines.{name}")
            per_vertex[name] = value
        if (per_vertex["vertex_color"] is None) != (per_vertex["vertex_style"] is None):
            raise AvsimValueError("lane_lines: vertex_color and vertex_style must be given together")
        _freeze(self, color=color, style=style, **per_vertex)

    @classmethod
    def empty(cls) -> LaneLines:
        """A container with no lane lines.

        Returns:
            Empty LaneLines.
        """
        return cls(Polylines.empty(), np.zeros(0, "<U5"), np.zeros(0, "<U12"))

    def __len__(self) -> int:
        return len(self.lines)

    @property
    def ids(self) -> NDArrayStr:
        """(K,) lane-line ids (those of `lines`)."""
        return self.lines.ids

    def lane_type(self, k: int) -> str:
        """The drawn type of one line.

        Args:
            k: line index.

        Returns:
            "<COLOR> <STYLE>": the most frequent per-vertex pair when present (ties go to the
            pair seen first along the line), else the line's own colour and style.
        """
        if self.vertex_color is not None and self.vertex_style is not None:
            s = slice(self.lines.offsets[k], self.lines.offsets[k + 1])
            pairs = list(zip(self.vertex_color[s], self.vertex_style[s]))
            counts = Counter(pairs)
            best = max(counts.values())
            color, style = next(p for p in pairs if counts[p] == best)
            return f"{color} {style}"
        return f"{self.color[k]} {self.style[k]}"

    def lane_types(self) -> NDArrayStr:
        """The drawn type of every line.

        Returns:
            (K,) str, `lane_type(k)` for each line.
        """
        return np.array([self.lane_type(k) for k in range(len(self))], dtype=str)

    def select(self, mask: npt.ArrayLike) -> LaneLines:
        """The lines where a mask holds, per-vertex colour and style kept aligned.

        Args:
            mask: (K,) bool, or an index array.

        Returns:
            The selected lines, in order.
        """
        mask = np.asarray(mask)
        if mask.dtype != bool:
            m = np.zeros(len(self), bool)
            m[mask] = True
            mask = m
        vmask = self.lines.vertex_mask(mask)
        return LaneLines(
            self.lines.select(mask), self.color[mask], self.style[mask],
            None if self.vertex_color is None else self.vertex_color[vmask],
            None if self.vertex_style is None else self.vertex_style[vmask],
        )  # fmt: skip


@dataclass(frozen=True, eq=False)
class Lanes:
    """Drivable lanes: ids (K,), left and right rails and centre line (K polylines each)."""

    ids: np.ndarray
    left: Polylines
    right: Polylines
    centre: Polylines

    def __post_init__(self) -> None:
        k = len(self.centre)
        ids = _ids(self.ids, k, "lanes.ids")
        if len(self.left) != k or len(self.right) != k:
            raise AvsimValueError(f"lanes: left ({len(self.left)}), right ({len(self.right)}) and centre ({k}) counts differ")
        _freeze(self, ids=ids)

    @classmethod
    def empty(cls) -> Lanes:
        """A container with no lanes.

        Returns:
            Empty Lanes.
        """
        return cls(np.zeros(0, "<U1"), Polylines.empty(), Polylines.empty(), Polylines.empty())

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, mask: npt.ArrayLike) -> Lanes:
        """The lanes where a mask holds.

        Args:
            mask: (K,) bool, or an index array.

        Returns:
            The selected lanes (ids and the three rails), in order.
        """
        mask = np.asarray(mask)
        return Lanes(self.ids[mask], self.left.select(mask), self.right.select(mask), self.centre.select(mask))


MapElements = LaneLines | Lanes | Polylines | Cuboids
"""Any element container of an HDMap (Polygons is a Polylines)."""

MAP_ELEMENT_TYPES: dict[str, type[LaneLines] | type[Lanes] | type[Polylines] | type[Cuboids]] = {
    "lane_lines": LaneLines,
    "lanes": Lanes,
    "road_boundaries": Polylines,
    "wait_lines": Polylines,
    "crosswalks": Polygons,
    "road_markings": Polygons,
    "poles": Polylines,
    "traffic_signs": Cuboids,
    "traffic_lights": Cuboids,
    "drivable_areas": Polygons,
}


@dataclass(frozen=True, eq=False)
class HDMap:
    """A vector HD map: every element type as one struct-of-arrays container."""

    lane_lines: LaneLines
    lanes: Lanes
    road_boundaries: Polylines
    wait_lines: Polylines
    crosswalks: Polygons
    road_markings: Polygons
    poles: Polylines
    traffic_signs: Cuboids
    traffic_lights: Cuboids
    drivable_areas: Polygons

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            expected = MAP_ELEMENT_TYPES[f.name]
            if type(value) is not expected:
                raise AvsimValueError(f"map.{f.name}: expected {expected.__name__}, got {type(value).__name__}")

    @classmethod
    def empty(cls) -> HDMap:
        """A map with no elements.

        Returns:
            The empty map.
        """
        elements: dict[str, Any] = {name: t.empty() for name, t in MAP_ELEMENT_TYPES.items()}
        return cls(**elements)

    @classmethod
    def build(cls, **elements: MapElements) -> HDMap:
        """An HDMap with the given element types and every other type empty.

        Args:
            **elements: containers by element-type name (keys of MAP_ELEMENT_TYPES).

        Returns:
            The map.
        """
        unknown = set(elements) - set(MAP_ELEMENT_TYPES)
        if unknown:
            raise AvsimValueError(f"map: unknown element types {sorted(unknown)}")
        full: dict[str, Any] = {name: elements.get(name, t.empty()) for name, t in MAP_ELEMENT_TYPES.items()}
        return cls(**full)

    def element_counts(self) -> dict[str, int]:
        """The number of elements of each type.

        Returns:
            Element-type name -> count, in MAP_ELEMENT_TYPES order.
        """
        return {name: len(getattr(self, name)) for name in MAP_ELEMENT_TYPES}

    def is_empty(self) -> bool:
        """Whether the map has no element of any type.

        Returns:
            True for an empty map.
        """
        return not any(self.element_counts().values())

    def replace(self, **changes: MapElements) -> HDMap:
        """A copy with some element types replaced.

        Args:
            **changes: new containers by element-type name.

        Returns:
            The new map (the other types shared with this one).
        """
        full: dict[str, Any] = {name: changes.get(name, getattr(self, name)) for name in MAP_ELEMENT_TYPES}
        return HDMap(**full)

    def select(self, masks: dict[str, npt.ArrayLike]) -> HDMap:
        """Keep, per element type, the elements where a mask holds.

        Args:
            masks: element-type name -> (K,) bool mask or index array of that type (types absent: kept).

        Returns:
            The selected map.
        """
        return self.replace(**{name: getattr(self, name).select(mask) for name, mask in masks.items()})

    def bounds_xy(self) -> NDArrayFloat | None:
        """The xy bounds of the whole map.

        Returns:
            (4,) (min_x, min_y, max_x, max_y) over all elements, or None for an empty map.
        """
        boxes = [b for name in MAP_ELEMENT_TYPES if len(b := element_bounds_xy(getattr(self, name)))]
        if not boxes:
            return None
        allb = np.concatenate(boxes)
        return np.array([allb[:, 0].min(), allb[:, 1].min(), allb[:, 2].max(), allb[:, 3].max()])


def element_bounds_xy(elements: MapElements) -> NDArrayFloat:
    """The xy bounds of any element container.

    Args:
        elements: an element container of an HDMap.

    Returns:
        (K, 4) per element (min_x, min_y, max_x, max_y).
    """
    if isinstance(elements, LaneLines):
        return elements.lines.bounds_xy()
    if isinstance(elements, Lanes):
        if not len(elements):
            return np.zeros((0, 4))
        b = np.stack([elements.left.bounds_xy(), elements.right.bounds_xy(), elements.centre.bounds_xy()])
        return np.concatenate([b[..., :2].min(0), b[..., 2:].max(0)], -1)
    return elements.bounds_xy()
