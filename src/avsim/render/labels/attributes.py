"""nuScenes attributes of the labelled boxes (`boxes3d.json` `attribute_name`), from motion.

nuScenes annotates each box with one attribute of its class (nuscenes-devkit
`eval/detection/utils.detection_name_to_rel_attributes`): vehicles `vehicle.moving`,
`vehicle.stopped` ("stationary, but with an intent to move") or `vehicle.parked` ("stationary,
no immediate intent to move"); bicycles and motorcycles `cycle.with_rider` or
`cycle.without_rider`; pedestrians `pedestrian.moving`, `pedestrian.standing` (or
`sitting_lying_down`, which motion cannot tell); barriers and cones none (""). The devkit's
attribute error compares them on matched boxes, so an empty attribute is an error of 1.

A scenario has no attributes, so they follow from the box's motion, with the 0.2 m/s speed that
mmdetection3d's nuScenes result formatter uses to call a box moving (`MOVING_MPS`, on the
box's world velocity, horizontal), and the whole track to tell a stop from a parked car: a track
that never gets `TRAVEL_M` from where it started does not move in the scenario (annotation
jitter makes a parked car's speed flicker past 0.2 m/s; its track goes nowhere).

- Car, Truck: moving when faster than `MOVING_MPS` on a travelling track; stopped on a travelling
  track otherwise; parked on a track that does not travel.
- Cyclist: with rider on a travelling track, without rider otherwise (a bicycle that stays put).
- Pedestrian: moving when faster than `MOVING_MPS` on a travelling track, else standing.
- Others (written as nuScenes' `barrier`): none.
"""

from __future__ import annotations

import numpy as np

from avsim.core.agents import AgentTracks
from avsim.core.typing import NDArrayFloat

MOVING_MPS = 0.2  # mmdetection3d's threshold for a moving nuScenes box
TRAVEL_M = 1.0  # a track that never gets this far from its first position does not move


def travelling_tracks(agents: AgentTracks) -> frozenset[str]:
    """The tracks that get at least `TRAVEL_M` (horizontally) from their first position.

    Args:
        agents: the scenario's tracks.

    Returns:
        Their track ids.
    """
    out = set()
    for tid, rows in agents.track_slices():
        xy = agents.center_m[rows, :2]
        if len(xy) and float(np.max(np.linalg.norm(xy - xy[0], axis=1))) >= TRAVEL_M:
            out.add(tid)
    return frozenset(out)


def nuscenes_attributes(object_class: np.ndarray, track_id: np.ndarray, velocity_world_mps: NDArrayFloat,
                        travelling: frozenset[str]) -> list[str]:  # fmt: skip
    """Each box's nuScenes attribute (module docstring).

    Args:
        object_class: (K,) avsim classes (Car, Truck, Pedestrian, Cyclist, Others).
        track_id: (K,) track ids.
        velocity_world_mps: (K, 3) world-frame velocities.
        travelling: `travelling_tracks` of the scenario.

    Returns:
        K attribute names ("" for Others).
    """
    speed = np.linalg.norm(np.asarray(velocity_world_mps, np.float64).reshape(-1, 3)[:, :2], axis=1)
    out = []
    for cls, tid, v in zip(np.asarray(object_class).tolist(), np.asarray(track_id).tolist(), speed.tolist()):
        goes = str(tid) in travelling
        moving = goes and v > MOVING_MPS
        if cls in ("Car", "Truck"):
            out.append("vehicle.moving" if moving else "vehicle.stopped" if goes else "vehicle.parked")
        elif cls == "Cyclist":
            out.append("cycle.with_rider" if goes else "cycle.without_rider")
        elif cls == "Pedestrian":
            out.append("pedestrian.moving" if moving else "pedestrian.standing")
        else:
            out.append("")
    return out
