"""ASAM OpenDRIVE road networks: the parsed file (`model`, `parse`), its geometry (`geometry`,
`road`), the query API (`network.RoadNetwork`: road/lane coordinates <-> world, the lane graph)
and its sampling into an avsim HD map (`hdmap.build_hdmap`).
"""

from avsim.maps.opendrive.network import LaneKey, Pose, RoadCoordinate, RoadNetwork

__all__ = ["LaneKey", "Pose", "RoadCoordinate", "RoadNetwork"]
