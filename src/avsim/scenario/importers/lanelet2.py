"""`avsim convert --from lanelet2 MAP.osm`: a Lanelet2 map as an avsim scenario.

The nodes are placed by `avsim.maps.lanelet2.origin.place_nodes` (Lanelet2's UtmProjector at
`--origin`, or the map's map_projector_info.yaml, or the first node); the map is
`avsim.maps.lanelet2.hdmap.build_hdmap`; the ego and traffic are `avsim.scenario.bare_map`'s.
Metadata: the lane graph, speed limits, the lanes each light controls, right-of-way elements,
the projection (`lanelet2_projection`: projector, origin, where the origin came from) and counts.
"""

from __future__ import annotations

import os
from pathlib import Path

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.trajectory import EgoTrajectory
from avsim.maps.lanelet2.hdmap import build_hdmap
from avsim.maps.lanelet2.origin import place_nodes
from avsim.maps.lanelet2.osm import read_osm
from avsim.scenario.bare_map import RouteOptions, bare_map_scenario
from avsim.scenario.types import Scenario


def load_lanelet2(path: str | os.PathLike[str], rig_name: str | None = None, options: RouteOptions | None = None,
                  trajectory: EgoTrajectory | None = None, origin: tuple[float, ...] | None = None) -> Scenario:  # fmt: skip
    """Import a Lanelet2 .osm map as a scenario.

    Args:
        path: the .osm file.
        rig_name: named camera rig (default cosmos).
        options: the ego route and traffic (default: a seeded random route, no traffic).
        trajectory: the ego's poses instead of a route.
        origin: the projection origin (lat, lon[, ele]); see `avsim.maps.lanelet2.origin`.

    Returns:
        The scenario, id the file's stem.
    """
    p = Path(path)
    osm = read_osm(p)
    xyz, placement = place_nodes(osm, p, origin)
    built = build_hdmap(osm, xyz)
    if not len(built.hdmap.lanes):
        raise AvsimInputError(p, "lanelets", "the map has no lanelet vehicles drive on (subtype road, highway, ...)")
    meta = {
        "source_format": "lanelet2",
        "source": p.name,
        "lanelet2_projection": {"projector": placement.projector, "origin_lat_lon_ele": list(placement.origin) if placement.origin else None,
                                "origin_source": placement.source},  # fmt: skip
        "lane_successors": built.lane_successors,
        "lane_speed_limits_mps": built.speed_limits_mps,
        "traffic_light_lanes": built.light_lanes,
        "lanelet2_right_of_way": built.right_of_way,
        "map_counts": built.counts,
    }
    try:
        return bare_map_scenario(p.stem or "lanelet2", built.hdmap, meta, options or RouteOptions(), trajectory, rig_name)
    except AvsimValueError as exc:
        raise AvsimInputError(p, "route", str(exc)) from None
