"""Selecting what an edit applies to: agents by id / class / region / distance from the ego,
map elements by type / id / region.

A region is a circle, an axis-aligned box or a polygon in world xy. An agent is in a region
(or near the ego) when it is at some observed time, or at `at_s` when that is given; a map
element is in a region when the mean of its vertices (a cuboid: its centre) is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import shapely

from avsim.core.agents import OBJECT_CLASSES
from avsim.core.errors import AvsimValueError
from avsim.maps import HDMap
from avsim.maps.elements import MAP_ELEMENT_TYPES, Cuboids, LaneLines, Lanes, Polylines
from avsim.scenario import Scenario

from .common import to_ns

MapElements = Polylines | Cuboids | LaneLines | Lanes  # one HDMap field (Polygons are Polylines)


@dataclass(frozen=True)
class Region:
    """A world-xy region: `circle` (centre_xy, radius_m), `box` (min_x, min_y, max_x, max_y) or
    `polygon` ((K, 2) vertices). Exactly one is set."""

    center_xy: tuple[float, float] | None = None
    radius_m: float | None = None
    box: tuple[float, float, float, float] | None = None
    polygon: tuple[tuple[float, float], ...] | None = None

    def __post_init__(self) -> None:
        kinds = [self.center_xy is not None, self.box is not None, self.polygon is not None]
        if sum(kinds) != 1:
            raise AvsimValueError("region: give exactly one of center+radius_m, box, polygon")
        if self.center_xy is not None and (self.radius_m is None or self.radius_m <= 0):
            raise AvsimValueError("region.radius_m: a circle needs a radius > 0")
        if self.box is not None and (len(self.box) != 4 or self.box[0] >= self.box[2] or self.box[1] >= self.box[3]):
            raise AvsimValueError("region.box: needs [min_x, min_y, max_x, max_y] with min < max")
        if self.polygon is not None and len(self.polygon) < 3:
            raise AvsimValueError("region.polygon: needs at least 3 vertices")

    def contains(self, xy: np.ndarray) -> np.ndarray:
        """Boolean (N,) for points (N, 2); boundaries count as inside."""
        xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
        if self.center_xy is not None:
            return np.linalg.norm(xy - np.asarray(self.center_xy), axis=1) <= self.radius_m
        if self.box is not None:
            x0, y0, x1, y1 = self.box
            return (xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)
        poly = shapely.Polygon(np.asarray(self.polygon, dtype=np.float64))
        return shapely.covers(poly, shapely.points(xy))


# ----------------------------------------------------------------------------- agents
@dataclass(frozen=True)
class AgentSelector:
    """Which tracks an edit applies to; all given criteria must hold (AND)."""

    track_ids: tuple[str, ...] | None = None
    classes: tuple[str, ...] | None = None
    region: Region | None = None
    max_distance_from_ego_m: float | None = None
    at_s: float | None = None

    def __post_init__(self) -> None:
        for c in self.classes or ():
            if c not in OBJECT_CLASSES:
                raise AvsimValueError(f"class: {c!r} is not one of {OBJECT_CLASSES}")


def select_agents(scenario: Scenario, selector: AgentSelector) -> list[str]:
    """Sorted track ids matching `selector` (unknown explicit ids raise)."""
    agents = scenario.agents
    all_ids = np.asarray(agents.track_id).astype(str)
    mask = np.ones(len(all_ids), dtype=bool)
    if selector.track_ids is not None:
        known = set(all_ids.tolist())
        for t in selector.track_ids:
            if t not in known:
                raise AvsimValueError(f"track_id: unknown track id {t!r}")
        mask &= np.isin(all_ids, np.asarray(selector.track_ids, dtype=str))
    if selector.classes is not None:
        mask &= np.isin(np.asarray(agents.object_class), np.asarray(selector.classes, dtype=str))
    spatial = selector.region is not None or selector.max_distance_from_ego_m is not None
    if spatial and selector.at_s is not None:
        t_ns = int(to_ns(scenario, selector.at_s))
        at = agents.resample(np.array([t_ns], dtype=np.int64), max_extrapolation_s=0.0)
        row_ok = np.zeros(len(all_ids), dtype=bool)
        hit = _spatial_hits(scenario, selector, np.asarray(at.center_m)[:, :2], np.asarray(at.timestamps_ns))
        present = set(np.asarray(at.track_id)[hit].astype(str).tolist())
        row_ok |= np.isin(all_ids, list(present))
        mask &= row_ok
    elif spatial:
        hit = _spatial_hits(scenario, selector, np.asarray(agents.center_m)[:, :2], np.asarray(agents.timestamps_ns))
        present = set(all_ids[hit].tolist())
        mask &= np.isin(all_ids, list(present))
    return sorted(set(all_ids[mask].tolist()))


def _spatial_hits(scenario: Scenario, selector: AgentSelector, xy: np.ndarray, ts: np.ndarray) -> np.ndarray:
    ok = np.ones(len(xy), dtype=bool)
    if selector.region is not None:
        ok &= selector.region.contains(xy)
    if selector.max_distance_from_ego_m is not None:
        ego_xy = np.asarray(scenario.ego.pose_at(ts).translation)[:, :2] if len(ts) else np.zeros((0, 2))
        ok &= np.linalg.norm(xy - ego_xy, axis=1) <= selector.max_distance_from_ego_m
    return ok


# ----------------------------------------------------------------------------- map elements
def element_ids(elements: MapElements) -> np.ndarray:
    return np.asarray(elements.ids).astype(str)


def element_anchor_xy(elements: MapElements) -> np.ndarray:
    """One xy point (K, 2) per element: the mean of its vertices, or a cuboid's centre."""
    if isinstance(elements, Cuboids):
        return np.asarray(elements.center_m)[:, :2].copy()
    lines = elements.lines if isinstance(elements, LaneLines) else elements.centre if isinstance(elements, Lanes) else elements
    if not len(lines):
        return np.zeros((0, 2))
    idx = lines.element_index
    n = np.bincount(idx, minlength=len(lines)).astype(np.float64)
    pts = np.asarray(lines.points_m)
    return np.stack([np.bincount(idx, weights=pts[:, i], minlength=len(lines)) / n for i in (0, 1)], axis=1)


def select_map_elements(
    hdmap: HDMap,
    kind: str,
    ids: Sequence[str] | None = None,
    region: Region | None = None,
    max_distance_from_ego_m: float | None = None,
    ego_xy: np.ndarray | None = None,
) -> np.ndarray:
    """Boolean mask (K,) over `hdmap.<kind>` of elements matching ids AND region AND (when
    given) lying within `max_distance_from_ego_m` of the ego path `ego_xy` (T, 2)."""
    if kind not in MAP_ELEMENT_TYPES:
        raise AvsimValueError(f"type: unknown map element type {kind!r} (one of {', '.join(MAP_ELEMENT_TYPES)})")
    elements = getattr(hdmap, kind)
    all_ids = element_ids(elements)
    mask = np.ones(len(all_ids), dtype=bool)
    if ids is not None:
        known = set(all_ids.tolist())
        for i in ids:
            if str(i) not in known:
                raise AvsimValueError(f"ids: unknown {kind} id {i!r}")
        mask &= np.isin(all_ids, np.asarray([str(i) for i in ids]))
    if not len(all_ids):
        return mask
    anchor = element_anchor_xy(elements)
    if region is not None:
        mask &= region.contains(anchor)
    if max_distance_from_ego_m is not None:
        if ego_xy is None:
            raise AvsimValueError("within_m_of_ego: needs the ego path")
        path = shapely.LineString(ego_xy) if len(ego_xy) > 1 else shapely.Point(ego_xy[0])
        mask &= shapely.distance(path, shapely.points(anchor)) <= max_distance_from_ego_m
    return mask
