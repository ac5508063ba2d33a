"""A storyboard run as an avsim scenario: the ego's trajectory, every other entity's box track.

- Ego: the ego entity's poses moved from its reference point to its rear axle (`RearAxle@positionX`
  ahead), which is avsim's ego frame; its size, rear-axle-to-centre offset and wheel base go to the
  metadata the simulator reads (`ego_size_m`, `ego_rear_axle_to_center_m`, `ego_wheel_base_m`).
- Agents: each other entity's bounding box while it is on the scene (placed and not deleted): the
  box centre is the reference point plus the rotated `BoundingBox/Center`, sized (length, width,
  height), oriented by heading, pitch and roll. Its class is the `avsim:sourceClass` property when the
  entity has one (avsim's own exports), else named after its category so that avsim collapses it
  right (`vehicle.car`, `vehicle.van` -> Car; `vehicle.truck`, `vehicle.bus` -> Truck;
  `vehicle.bicycle`, `vehicle.motorcycle` -> Cyclist; `pedestrian`, `pedestrian.wheelchair` ->
  Pedestrian; `animal`, `object.<category>` -> Others).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from avsim.core.agents import AgentTracks
from avsim.core.errors import AvsimValueError
from avsim.core.trajectory import NS_PER_S, EgoTrajectory
from avsim.core.transforms import SE3, matrix_to_quat
from avsim.core.typing import NDArrayFloat
from avsim.scenario.openscenario.engine import Sample
from avsim.scenario.openscenario.model import Entity, EntityKind

SOURCE_CLASS_PROPERTY = "avsim:sourceClass"  # an entity's avsim class (avsim's exports write these properties)
ROLE_PROPERTY, ROLE_EGO = "avsim:role", "ego"  # the ego entity
START_PROPERTY = "avsim:startTimeNs"  # FileHeader: the timestamp of simulation time 0
ID_PROPERTY = "avsim:scenarioId"  # FileHeader: the scenario's id
_VEHICLE_CLASSES = {"motorbike": "vehicle.motorcycle"}


def source_class(entity: Entity) -> str:
    """The avsim source class of an entity (see the module docstring)."""
    given = entity.property(SOURCE_CLASS_PROPERTY)
    if given:
        return given
    if entity.kind is EntityKind.VEHICLE:
        return _VEHICLE_CLASSES.get(entity.category, f"vehicle.{entity.category}")
    if entity.kind is EntityKind.PEDESTRIAN:
        return {"pedestrian": "pedestrian", "wheelchair": "pedestrian.wheelchair"}.get(entity.category, entity.category or "pedestrian")
    return f"object.{entity.category}"


def rotation(h: NDArrayFloat, p: NDArrayFloat, r: NDArrayFloat) -> NDArrayFloat:
    """(N, 3, 3) rotations of heading, pitch, roll (z-y-x; OpenSCENARIO's, esmini's RotateVec3d)."""
    ch, sh, cp, sp, cr, sr = np.cos(h), np.sin(h), np.cos(p), np.sin(p), np.cos(r), np.sin(r)
    return np.stack([np.stack([ch * cp, ch * sp * sr - sh * cr, ch * sp * cr + sh * sr], -1),
                     np.stack([sh * cp, sh * sp * sr + ch * cr, sh * sp * cr - ch * sr], -1),
                     np.stack([-sp, cp * sr, cp * cr], -1)], -2)  # fmt: skip


def _tables(samples: list[Sample]) -> dict[str, NDArrayFloat]:
    """Per entity, (T, 8) rows (time, x, y, z, h, p, r, speed) by time, one per time (the last recorded)."""
    rows: dict[str, dict[float, tuple[float, ...]]] = defaultdict(dict)
    for s in samples:
        rows[s.name][round(s.time, 9)] = (s.time, s.x, s.y, s.z, s.h, s.p, s.r, s.speed)
    return {name: np.array([by_time[t] for t in sorted(by_time)]) for name, by_time in rows.items()}


def _times_ns(times_s: NDArrayFloat, start_ns: int = 0) -> np.ndarray:
    return np.round(times_s * NS_PER_S).astype(np.int64) + np.int64(start_ns)


def ego_trajectory(entity: Entity, table: NDArrayFloat, start_ns: int = 0) -> EgoTrajectory:
    """The ego's rear-axle poses from its recorded reference-point rows (see the module docstring)."""
    rot = rotation(table[:, 4], table[:, 5], table[:, 6])
    xyz = table[:, 1:4] + rot[:, :, 0] * entity.rear_axle_x
    return EgoTrajectory(_times_ns(table[:, 0], start_ns), SE3(rot, xyz))


def agent_tracks(entities: dict[str, Entity], tables: dict[str, NDArrayFloat], ego: str, start_ns: int = 0) -> AgentTracks:
    """Every entity but the ego as box rows (see the module docstring)."""
    parts = []
    for name, table in tables.items():
        if name == ego:
            continue
        e = entities[name]
        rot = rotation(table[:, 4], table[:, 5], table[:, 6])
        center = table[:, 1:4] + rot @ np.array(e.bbox.center)
        n = len(table)
        parts.append(AgentTracks.from_unsorted(np.full(n, name), np.full(n, source_class(e)), _times_ns(table[:, 0], start_ns), center,
                                               np.tile([e.bbox.length, e.bbox.width, e.bbox.height], (n, 1)), matrix_to_quat(rot)))  # fmt: skip
    return AgentTracks.concat(parts) if parts else AgentTracks.empty()


def ego_metadata(entity: Entity) -> dict[str, Any]:
    """The ego's size, rear-axle-to-centre offset and wheel base for the simulator."""
    b = entity.bbox
    out: dict[str, Any] = {"ego_size_m": [b.length, b.width, b.height], "ego_rear_axle_to_center_m": b.center[0] - entity.rear_axle_x}
    if entity.front_axle_x is not None and entity.front_axle_x > entity.rear_axle_x:
        out["ego_wheel_base_m"] = entity.front_axle_x - entity.rear_axle_x
    return out


def recorded_tracks(entities: dict[str, Entity], samples: list[Sample], ego: str, start_ns: int = 0) -> tuple[EgoTrajectory, AgentTracks]:
    """The ego's trajectory and the other entities' tracks of a run.

    Args:
        entities: the scenario's entities by name.
        samples: the run's samples (`StoryboardEngine.samples`).
        ego: the ego entity's name.
        start_ns: the timestamp of simulation time 0.

    Returns:
        (ego trajectory, agent tracks); AvsimValueError when the ego was never on the scene.
    """
    tables = _tables(samples)
    if ego not in tables:
        raise AvsimValueError(f"the ego entity {ego!r} is never placed on the scene (no Init action or AddEntityAction puts it there)")
    return ego_trajectory(entities[ego], tables[ego], start_ns), agent_tracks(entities, tables, ego, start_ns)
