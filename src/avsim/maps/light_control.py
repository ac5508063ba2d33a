"""Which lanes a traffic light controls, and which lanes' entry it controls.

avsim maps carry no lane-to-light table; the lanes of each light come from (first match):

1. `explicit`, {light id: [lane id, ...]} (the scenario's `metadata['traffic_light_lanes']`);
2. a light id that is also a lane id (Waymo, ScenarioNet: the light is the lane's signal);
3. geometry: the lane whose centre line ends nearest before the light's position (its cuboid, or
   its stop point from `metadata['traffic_light_stop_points_m']`), the light at most `radius_m`
   straight ahead of the lane's end and `lateral_m` to the side.

A controlled lane gates entry into its successors (nuPlan's lane connectors behind a light);
a controlled lane without successors (Waymo's lane through the junction) gates itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from avsim.core.typing import NDArrayFloat, NDArrayObject
from avsim.maps.elements import HDMap

LIGHT_RADIUS_M = 40.0
LIGHT_LATERAL_M = 1.5


@dataclass(frozen=True)
class LightAssociation:
    """How far ahead of a lane's end (`radius_m`) and to its side (`lateral_m`) a light may be to control it."""

    radius_m: float = LIGHT_RADIUS_M
    lateral_m: float = LIGHT_LATERAL_M


def lane_end_headings(hdmap: HDMap) -> tuple[NDArrayFloat, NDArrayFloat]:
    """End points (K, 2) and end headings (K,) of the lanes' centre lines."""
    centre = hdmap.lanes.centre
    ends, yaws = [], []
    for k in range(len(centre)):
        p = np.asarray(centre[k])
        d = p[-1, :2] - p[max(len(p) - 2, 0), :2]
        ends.append(p[-1, :2])
        yaws.append(np.arctan2(d[1], d[0]))
    return np.asarray(ends, np.float64).reshape(-1, 2), np.asarray(yaws, np.float64)


def light_lanes(hdmap: HDMap, light_ids: list[str], explicit: dict[str, Any] | None = None,
                stop_points: dict[str, Any] | None = None, association: LightAssociation | None = None) -> dict[str, list[int]]:  # fmt: skip
    """Lane indices each light controls (see the module docstring); lights without lanes are left out.

    Args:
        hdmap: the map (its lanes and traffic-light cuboids).
        light_ids: the lights that have states.
        explicit: {light id: [lane id, ...]}, or None.
        stop_points: {light id: (x, y[, z])}, or None.
        association: the geometric rule's reach.

    Returns:
        {light id: [lane index, ...]}.
    """
    assoc = association or LightAssociation()
    lane_ids = [str(i) for i in np.asarray(hdmap.lanes.ids)]
    index = {lid: k for k, lid in enumerate(lane_ids)}
    explicit = explicit if isinstance(explicit, dict) else {}
    positions = {str(i): np.asarray(c)[:2] for i, c in zip(np.asarray(hdmap.traffic_lights.ids), np.asarray(hdmap.traffic_lights.center_m))}
    for lid, p in (stop_points if isinstance(stop_points, dict) else {}).items():
        positions.setdefault(str(lid), np.asarray(p, dtype=np.float64)[:2])
    ends, yaws = lane_end_headings(hdmap) if lane_ids else (np.zeros((0, 2)), np.zeros(0))
    out: dict[str, list[int]] = {}
    for light in sorted(set(map(str, light_ids))):
        if light in explicit:
            out[light] = [index[str(x)] for x in explicit[light] if str(x) in index]
        elif light in index:
            out[light] = [index[light]]
        elif light in positions and len(ends):
            rel = positions[light] - ends
            along = rel[:, 0] * np.cos(yaws) + rel[:, 1] * np.sin(yaws)
            across = -rel[:, 0] * np.sin(yaws) + rel[:, 1] * np.cos(yaws)
            ok = (along >= -2.0) & (along <= assoc.radius_m) & (np.abs(across) <= assoc.lateral_m)
            if ok.any():
                out[light] = [int(np.flatnonzero(ok)[np.argmin(along[ok])])]
    return {k: v for k, v in out.items() if v}


def entry_lights(controlled: dict[str, list[int]], successors: list[list[int]]) -> NDArrayObject:
    """Light id (or "") controlling entry into each lane (see the module docstring).

    Args:
        controlled: {light id: [lane index, ...]} (`light_lanes`).
        successors: each lane's successors.

    Returns:
        (K,) object array of light ids.
    """
    out = np.full(len(successors), "", dtype=object)
    for light, lanes in sorted(controlled.items()):
        for lane in lanes:
            for target in successors[lane] or [lane]:
                if not out[target]:
                    out[target] = light
    return out
