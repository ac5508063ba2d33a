"""A scenario's road model: its map and the road facts its metadata states.

The metadata keys (written by the importers and the sample, documented in docs/format.md):
`lane_successors` ({lane id: [lane id, ...]}), `lane_speed_limits_mps` ({lane id: m/s}),
`traffic_light_lanes` ({light id: [lane id, ...]}) and `traffic_light_stop_points_m`
({light id: (x, y[, z])}); the lights with states come from the scenario's light timeline.
"""

from __future__ import annotations

from avsim.maps.light_control import LightAssociation
from avsim.maps.road import RoadFacts, RoadModel
from avsim.scenario.types import Scenario


def road_facts(scenario: Scenario, association: LightAssociation | None = None) -> RoadFacts:
    """The road facts of a scenario's metadata and light timeline.

    Args:
        scenario: the scenario.
        association: the geometric light-to-lane rule (None: the default).

    Returns:
        The facts.
    """
    md = scenario.metadata
    return RoadFacts(md.get("lane_successors"), md.get("lane_speed_limits_mps"), md.get("traffic_light_lanes"),
                     md.get("traffic_light_stop_points_m"), tuple(str(i) for i in scenario.lights.light_ids.tolist()),
                     association or LightAssociation())  # fmt: skip


def road_model(scenario: Scenario, association: LightAssociation | None = None) -> RoadModel:
    """The road model of a scenario (`avsim.maps.road.RoadModel`).

    Args:
        scenario: the scenario.
        association: the geometric light-to-lane rule (None: the default).

    Returns:
        The road model.
    """
    return RoadModel(scenario.map, road_facts(scenario, association))
