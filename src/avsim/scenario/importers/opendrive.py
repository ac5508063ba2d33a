"""`avsim convert --from opendrive MAP.xodr`: an ASAM OpenDRIVE road network as an avsim scenario.

The map is `avsim.maps.opendrive.hdmap.build_hdmap` of the parsed network (lanes, lines,
boundaries, drivable areas, crosswalks, markings, poles, lights, signs, wait lines; docs/importers.md
"OpenDRIVE"); the ego and traffic are `avsim.scenario.bare_map`'s (a route, or a trajectory file).
Metadata keeps what the map contract has no field for: the lane graph (`lane_successors`), speed
limits (`lane_speed_limits_mps`), the lanes each light controls (`traffic_light_lanes`), the
geo-reference (`geo_reference`: the header's PROJ string, `opendrive_header`: revision, offset,
bounds), the sampling tolerance and what was skipped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.trajectory import EgoTrajectory
from avsim.maps.opendrive.hdmap import OpenDriveMap, build_hdmap
from avsim.maps.opendrive.network import RoadNetwork
from avsim.scenario.bare_map import RouteOptions, bare_map_scenario
from avsim.scenario.types import Scenario


def opendrive_metadata(net: RoadNetwork, built: OpenDriveMap, source: str | os.PathLike[str]) -> dict[str, Any]:
    """The scenario metadata of an imported network (see the module docstring)."""
    h = net.file.header
    return {
        "source_format": "opendrive",
        "source": Path(source).name,
        "geo_reference": h.geo_reference,
        "opendrive_header": {"rev_major": h.rev_major, "rev_minor": h.rev_minor, "name": h.name, "vendor": h.vendor,
                             "date": h.date, "north": h.north, "south": h.south, "east": h.east, "west": h.west,
                             "offset": list(h.offset) if h.offset else None},  # fmt: skip
        "lane_successors": built.lane_successors,
        "lane_speed_limits_mps": built.speed_limits_mps,
        "traffic_light_lanes": built.light_lanes,
        "map_sampling_tolerance_m": built.tolerance_m,
        "map_counts": built.counts,
    }


def load_opendrive(path: str | os.PathLike[str], rig_name: str | None = None, options: RouteOptions | None = None,
                   trajectory: EgoTrajectory | None = None) -> Scenario:  # fmt: skip
    """Import an OpenDRIVE file as a scenario.

    Args:
        path: the .xodr file.
        rig_name: named camera rig (default cosmos).
        options: the ego route and traffic (default: a seeded random route, no traffic).
        trajectory: the ego's poses instead of a route.

    Returns:
        The scenario, id the file's stem.
    """
    net = RoadNetwork.from_file(path)
    built = build_hdmap(net)
    if not len(built.hdmap.lanes):
        raise AvsimInputError(path, "lanes", "the network has no drivable lane (types driving, entry, exit, ramps, bidirectional)")
    meta = opendrive_metadata(net, built, path)
    try:
        return bare_map_scenario(Path(path).stem or "opendrive", built.hdmap, meta, options or RouteOptions(), trajectory, rig_name)
    except AvsimValueError as exc:
        raise AvsimInputError(path, "route", str(exc)) from None
