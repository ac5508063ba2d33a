"""HD-map element containers (struct of arrays, ragged geometry as points + offsets).

All coordinates are world-frame metres (FLU, z up). Polygons are outer rings, not closed
(the last vertex is not a repeat of the first), and may be concave.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields

import numpy as np

from avsim.core.agents import box_corners
from avsim.core.errors import AvsimValueError
from avsim.core.transforms import check_unit_quat

# The render spec's lane-line table: type "<COLOR> <STYLE>" -> (RGB, pattern).
# Patterns: solid, long_dash, short_dash, dot_dash, dotted, and ("double", left, right).
LANE_TYPE_STYLES: dict[str, tuple[tuple[int, int, int], object]] = {
    "WHITE SOLID_SINGLE": ((255, 255, 255), "solid"),
    "WHITE LONG_DASHED_SINGLE": ((255, 255, 255), "long_dash"),
    "WHITE SHORT_DASHED_SINGLE": ((255, 255, 255), "short_dash"),
    "WHITE DOT_DASHED_SINGLE": ((255, 255, 255), "dot_dash"),
    "WHITE SOLID_GROUP": ((255, 255, 255), ("double", "solid", "solid")),
    "YELLOW SOLID_SINGLE": ((255, 255, 0), "solid"),
    "YELLOW LONG_DASHED_SINGLE": ((255, 255, 0), "long_dash"),
    "YELLOW SOLID_GROUP": ((255, 255, 0), ("double", "solid", "solid")),
    "YELLOW DASHED_SOLID": ((255, 255, 0), ("double", "solid", "long_dash")),
    "YELLOW SOLID_DASHED": ((255, 255, 0), ("double", "long_dash", "solid")),
    "YELLOW DOT_SOLID_SINGLE": ((255, 255, 0), "dotted"),
    "YELLOW DOT_SOLID_GROUP": ((255, 255, 0), ("double", "dotted", "dotted")),
}
OTHER_LANE_STYLE: tuple[tuple[int, int, int], object] = ((181, 164, 71), "solid")
DEFAULT_LANE_COLOR, DEFAULT_LANE_STYLE = "WHITE", "SOLID_SINGLE"


def lane_style(lane_type: str) -> tuple[tuple[int, int, int], object]:
    """(RGB, pattern) of a lane-line type; anything not in the table draws as OTHER."""
    return LANE_TYPE_STYLES.get(lane_type, OTHER_LANE_STYLE)


def _ids(values, n: int, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.shape != (n,):
        raise AvsimValueError(f"{name}: expected shape ({n},), got {arr.shape}")
    arr = arr.astype(str) if n else np.zeros(0, "<U1")
    if n and len(np.unique(arr)) != n:
        raise AvsimValueError(f"{name}: element ids must be unique")
    return arr


def _points(values, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        arr = arr.reshape(0, 3)
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise AvsimValueError(f"{name}: expected (M, 3), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise AvsimValueError(f"{name}: contains NaN or infinite values")
    return arr


def _freeze(obj, **arrays) -> None:
    for name, arr in arrays.items():
        if isinstance(arr, np.ndarray):
            arr.setflags(write=False)
        object.__setattr__(obj, name, arr)


def _offsets_from_lengths(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64))]).astype(np.int64)


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
    def from_list(cls, ids, arrays: list[np.ndarray]):
        arrays = [np.asarray(a, dtype=np.float64).reshape(-1, 3) for a in arrays]
        pts = np.concatenate(arrays) if arrays else np.zeros((0, 3))
        return cls(np.asarray(ids).astype(str) if len(arrays) else np.zeros(0, "<U1"), pts, _offsets_from_lengths([len(a) for a in arrays]))

    @classmethod
    def empty(cls):
        return cls(np.zeros(0, "<U1"), np.zeros((0, 3)), np.zeros(1, np.int64))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, k: int) -> np.ndarray:
        return self.points_m[self.offsets[k] : self.offsets[k + 1]]

    def __iter__(self):
        return (self[k] for k in range(len(self)))

    @property
    def element_index(self) -> np.ndarray:
        """Element index (M,) of every vertex."""
        return np.repeat(np.arange(len(self)), np.diff(self.offsets))

    def vertex_mask(self, mask: np.ndarray) -> np.ndarray:
        return np.repeat(np.asarray(mask, bool), np.diff(self.offsets))

    def select(self, mask: np.ndarray):
        """Elements where `mask` (K,) bool (or an index array) holds; extra per-element or
        per-vertex columns of subclasses are selected alongside."""
        mask = np.asarray(mask)
        if mask.dtype != bool:
            m = np.zeros(len(self), bool)
            m[mask] = True
            mask = m
        lengths = np.diff(self.offsets)[mask]
        return type(self)(self.ids[mask], self.points_m[self.vertex_mask(mask)], _offsets_from_lengths(lengths))

    @property
    def lengths_m(self) -> np.ndarray:
        """Arc length (K,) of each element (polygons: perimeter of the open ring)."""
        seg = np.linalg.norm(np.diff(self.points_m, axis=0), axis=-1)
        same = np.diff(self.element_index) == 0
        return np.bincount(self.element_index[1:][same], weights=seg[same], minlength=len(self))

    def bounds_xy(self) -> np.ndarray:
        """Per element (min_x, min_y, max_x, max_y), shape (K, 4)."""
        if not len(self):
            return np.zeros((0, 4))
        xy = self.points_m[:, :2]
        starts = self.offsets[:-1]  # every element has >= min_points vertices, so reduceat is exact
        return np.concatenate([np.minimum.reduceat(xy, starts), np.maximum.reduceat(xy, starts)], axis=1)

    def transformed(self, points_m: np.ndarray):
        """The same elements with new vertex coordinates (M, 3)."""
        return type(self)(self.ids, points_m, self.offsets)


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
        if size.shape != (n, 3) or quat.shape != (n, 4):
            raise AvsimValueError(f"cuboid: size_m {size.shape} / orientation {quat.shape} do not match {n} boxes")
        if np.any(size <= 0):
            raise AvsimValueError("cuboid.size_m: sizes must be > 0")
        check_unit_quat(quat, "cuboid.orientation")
        _freeze(self, ids=ids, center_m=center, size_m=size, orientation=quat)

    @classmethod
    def empty(cls) -> Cuboids:
        return cls(np.zeros(0, "<U1"), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 4)))

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, mask: np.ndarray) -> Cuboids:
        return Cuboids(self.ids[mask], self.center_m[mask], self.size_m[mask], self.orientation[mask])

    def corners_m(self) -> np.ndarray:
        """Corners (K, 8, 3) in the render spec's corner order."""
        return box_corners(self.center_m, self.size_m, self.orientation)

    def bounds_xy(self) -> np.ndarray:
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
        if color.shape != (k,) or style.shape != (k,):
            raise AvsimValueError(f"lane_lines.color/style: expected ({k},), got {color.shape} / {style.shape}")
        per_vertex = {}
        for name in ("vertex_color", "vertex_style"):
            value = getattr(self, name)
            if value is not None:
                value = np.asarray(value).astype(str) if m else np.zeros(0, "<U5")
                if value.shape != (m,):
                    raise AvsimValueError(f"lane_lines.{name}: expected ({m},), got {value.shape}")
            per_vertex[name] = value
        if (per_vertex["vertex_color"] is None) != (per_vertex["vertex_style"] is None):
            raise AvsimValueError("lane_lines: vertex_color and vertex_style must be given together")
        _freeze(self, color=color, style=style, **per_vertex)

    @classmethod
    def empty(cls) -> LaneLines:
        return cls(Polylines.empty(), np.zeros(0, "<U5"), np.zeros(0, "<U12"))

    def __len__(self) -> int:
        return len(self.lines)

    @property
    def ids(self) -> np.ndarray:
        return self.lines.ids

    def lane_type(self, k: int) -> str:
        """"<COLOR> <STYLE>" of line k (most frequent per-vertex pair when present; ties go to
        the pair seen first along the line)."""
        if self.vertex_color is not None:
            s = slice(self.lines.offsets[k], self.lines.offsets[k + 1])
            pairs = list(zip(self.vertex_color[s], self.vertex_style[s]))
            counts = Counter(pairs)
            best = max(counts.values())
            color, style = next(p for p in pairs if counts[p] == best)
            return f"{color} {style}"
        return f"{self.color[k]} {self.style[k]}"

    def lane_types(self) -> np.ndarray:
        return np.array([self.lane_type(k) for k in range(len(self))], dtype=str)

    def select(self, mask: np.ndarray) -> LaneLines:
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
        return cls(np.zeros(0, "<U1"), Polylines.empty(), Polylines.empty(), Polylines.empty())

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, mask: np.ndarray) -> Lanes:
        return Lanes(self.ids[mask], self.left.select(mask), self.right.select(mask), self.centre.select(mask))


MAP_ELEMENT_TYPES: dict[str, type] = {
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
        return cls(**{name: t.empty() for name, t in MAP_ELEMENT_TYPES.items()})

    @classmethod
    def build(cls, **elements) -> HDMap:
        """An HDMap with the given element types and every other type empty."""
        unknown = set(elements) - set(MAP_ELEMENT_TYPES)
        if unknown:
            raise AvsimValueError(f"map: unknown element types {sorted(unknown)}")
        return cls(**{name: elements.get(name, t.empty()) for name, t in MAP_ELEMENT_TYPES.items()})

    def element_counts(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in MAP_ELEMENT_TYPES}

    def is_empty(self) -> bool:
        return not any(self.element_counts().values())

    def replace(self, **changes) -> HDMap:
        return HDMap(**{name: changes.get(name, getattr(self, name)) for name in MAP_ELEMENT_TYPES})

    def select(self, masks: dict[str, np.ndarray]) -> HDMap:
        """Keep, per element type, the elements where masks[type] holds (types absent: kept)."""
        return self.replace(**{name: getattr(self, name).select(mask) for name, mask in masks.items()})

    def bounds_xy(self) -> np.ndarray | None:
        """(min_x, min_y, max_x, max_y) over all elements, or None for an empty map."""
        boxes = [b for name in MAP_ELEMENT_TYPES if len(b := element_bounds_xy(getattr(self, name)))]
        if not boxes:
            return None
        allb = np.concatenate(boxes)
        return np.array([allb[:, 0].min(), allb[:, 1].min(), allb[:, 2].max(), allb[:, 3].max()])

    # spatial queries live in maps.queries; these are convenience forwards
    def within_radius(self, center_xy, radius_m: float) -> HDMap:
        from avsim.maps.queries import within_radius

        return within_radius(self, center_xy, radius_m)

    def within_patch(self, world_SE3_ego, length_m: float, width_m: float) -> HDMap:
        from avsim.maps.queries import within_patch

        return within_patch(self, world_SE3_ego, length_m, width_m)

    def bev_raster(self, world_SE3_ego, size_px: int = 512, resolution_m_per_px: float = 0.2) -> np.ndarray:
        from avsim.maps.raster import bev_raster

        return bev_raster(self, world_SE3_ego, size_px, resolution_m_per_px)


def element_bounds_xy(elements) -> np.ndarray:
    """(K, 4) xy bounds of any element container."""
    if isinstance(elements, LaneLines):
        return elements.lines.bounds_xy()
    if isinstance(elements, Lanes):
        if not len(elements):
            return np.zeros((0, 4))
        b = np.stack([elements.left.bounds_xy(), elements.right.bounds_xy(), elements.centre.bounds_xy()])
        return np.concatenate([b[..., :2].min(0), b[..., 2:].max(0)], -1)
    return elements.bounds_xy()
