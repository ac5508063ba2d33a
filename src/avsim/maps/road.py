"""The road model: one object that validation, the traffic rules, routes, the traffic model and
the closed-loop scorer all read.

`RoadModel` joins what the map's geometry implies and what the source states beside it
(`RoadFacts`, from the scenario's metadata: `avsim.scenario.road.road_model`):

- lanes (`avsim.maps.lane_geometry`): polygons, centre lines, rails, resampled centre lines;
- the lane graph (`avsim.maps.lane_graph`): successors (named or geometric), predecessors,
  conflicts, intersection lanes, junctions;
- light control (`avsim.maps.light_control`): the lanes each light controls and the light that
  gates entry into each lane;
- the drivable area (`avsim.maps.drivable`) and the intersection area (the junctions' surface:
  nuPlan's intersection layer);
- lane speed limits.

Every part is computed once, on first use (a validation that checks no rule builds no conflicts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import shapely

from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt, NDArrayObject
from avsim.maps.drivable import boundary_geometry, build_drivable_area, junction_area, source_drivable
from avsim.maps.elements import HDMap
from avsim.maps.lane_geometry import LaneGeometry, LaneSamples, polygonal
from avsim.maps.lane_graph import Conflicts, LaneGraph
from avsim.maps.light_control import LightAssociation, entry_lights, light_lanes


@dataclass(frozen=True)
class RoadFacts:
    """What a source states about its road beside the map's geometry (all optional).

    lane_successors: {lane id: [lane id, ...]}; speed_limits_mps: {lane id: m/s};
    light_lanes: {light id: [lane id, ...]}; light_stop_points_m: {light id: (x, y[, z])};
    light_ids: the lights that have states; association: the geometric light-to-lane rule.
    """

    lane_successors: dict[str, Any] | None = None
    speed_limits_mps: dict[str, Any] | None = None
    light_lanes: dict[str, Any] | None = None
    light_stop_points_m: dict[str, Any] | None = None
    light_ids: tuple[str, ...] = ()
    association: LightAssociation = field(default_factory=LightAssociation)


class RoadModel:
    """The road of a map (see the module docstring).

    Args:
        hdmap: the map.
        facts: what the source states beside it.
    """

    def __init__(self, hdmap: HDMap, facts: RoadFacts | None = None) -> None:
        self.map = hdmap
        self.facts = facts or RoadFacts()
        self.geometry = LaneGeometry.of(hdmap)
        self.graph = LaneGraph(self.geometry, self.facts.lane_successors)

    # ------------------------------------------------------------------ lanes and graph
    @property
    def n_lanes(self) -> int:
        return self.geometry.n_lanes

    @property
    def lane_ids(self) -> NDArrayObject:
        """(K,) lane ids."""
        return self.geometry.ids

    @property
    def lane_polygons(self) -> NDArrayObject:
        """(K,) lane polygons (areal, prepared)."""
        return self.geometry.polygons

    @property
    def lane_bounds(self) -> NDArrayFloat:
        return self.geometry.bounds

    @property
    def samples(self) -> LaneSamples:
        return self.geometry.samples

    @property
    def centre_lines(self) -> NDArrayObject:
        """(K,) the resampled centre lines (shapely)."""
        return self.geometry.sample_lines

    @property
    def successors(self) -> list[list[int]]:
        return self.graph.successors

    @property
    def predecessors(self) -> list[list[int]]:
        return self.graph.predecessors

    @property
    def corridors(self) -> NDArrayObject:
        return self.graph.corridors

    @property
    def conflicts(self) -> Conflicts:
        return self.graph.conflicts

    @property
    def is_intersection_lane(self) -> NDArrayBool:
        return self.graph.is_intersection_lane

    def nearest_lanes(self, xy: NDArrayFloat, yaw: NDArrayFloat, max_lateral_m: float, max_heading_rad: float) -> tuple[NDArrayInt, NDArrayFloat]:
        """`LaneGraph.nearest_lanes`."""
        return self.graph.nearest_lanes(xy, yaw, max_lateral_m, max_heading_rad)

    def straightest(self, options: list[int]) -> int:
        """`LaneGraph.straightest`."""
        return self.graph.straightest(options)

    # ------------------------------------------------------------------ lights and limits
    @cached_property
    def controlled_lanes(self) -> dict[str, list[int]]:
        """{light id: [lane index, ...]} of the lights with states (`light_control.light_lanes`)."""
        f = self.facts
        return light_lanes(self.map, list(f.light_ids), f.light_lanes, f.light_stop_points_m, f.association)

    @cached_property
    def light_of_lane(self) -> NDArrayObject:
        """(K,) the light gating entry into each lane ("" for none)."""
        return entry_lights(self.controlled_lanes, self.successors)

    @cached_property
    def speed_limit_mps(self) -> NDArrayFloat:
        """(K,) each lane's speed limit (NaN: none)."""
        limits = self.facts.speed_limits_mps or {}
        return np.array([float(limits.get(str(i), np.nan)) for i in self.lane_ids], np.float64)

    # ------------------------------------------------------------------ areas
    @cached_property
    def source_drivable(self) -> shapely.Geometry:
        """The map's own drivable polygons (empty when it has none)."""
        return source_drivable(self.map)

    @cached_property
    def drivable(self) -> shapely.Geometry:
        """The drivable area (`avsim.maps.drivable.build_drivable_area`), prepared."""
        area = build_drivable_area(self.map, self.geometry, lambda: (self.graph.junctions, self.graph.crossing_spans))
        shapely.prepare(area)
        return area

    @cached_property
    def intersection(self) -> shapely.Geometry:
        """The junctions' surface (nuPlan's intersection layer), prepared."""
        area = polygonal(junction_area(self.geometry, self.graph.junctions, boundary_geometry(self.map), self.graph.crossing_spans))
        shapely.prepare(area)
        return area

    def in_intersection(self, xy: NDArrayFloat) -> NDArrayBool:
        """(n,) whether points lie in an intersection."""
        if self.intersection.is_empty or not len(xy):
            return np.zeros(len(xy), bool)
        return shapely.contains_xy(self.intersection, xy[:, 0], xy[:, 1])

    def on_drivable(self, xy: NDArrayFloat) -> NDArrayBool:
        """(n,) whether points lie on the drivable area."""
        if self.drivable.is_empty or not len(xy):
            return np.zeros(len(xy), bool)
        return shapely.contains_xy(self.drivable, xy[:, 0], xy[:, 1])
