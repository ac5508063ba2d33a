"""Moving a whole scenario into another world frame (a rigid change of coordinates), or onto another time axis.

Everything that lives in the world frame moves: ego poses, agent boxes, every map element.
What is relative to the ego (the camera rig) or has no geometry (light states, metadata) stays.
Camera images are unchanged by construction: every camera's pose relative to every box and map
vertex is the same before and after. `shift_times` moves every timestamp instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import numpy as np

from avsim.core.agents import AgentTracks
from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3, matrix_to_quat, quat_multiply, quat_normalize
from avsim.maps.elements import Cuboids, HDMap, LaneLines, Lanes, MapElements, Polylines
from avsim.scenario.types import Scenario


def _rotate_quats(new_SE3_world: SE3, quats: np.ndarray) -> np.ndarray:
    if not len(quats):
        return quats
    q = np.broadcast_to(matrix_to_quat(new_SE3_world.rotation), quats.shape)
    return quat_normalize(quat_multiply(q, quats))  # canonical sign, as every importer stores them


_P = TypeVar("_P", bound=Polylines)


def _move_polylines(new_SE3_world: SE3, elements: _P) -> _P:
    points = new_SE3_world.apply(elements.points_m) if len(elements.points_m) else elements.points_m
    return type(elements)(elements.ids, points, elements.offsets)


def transform_elements(new_SE3_world: SE3, elements: MapElements) -> MapElements:
    """One map-element container in the new frame.

    Args:
        new_SE3_world: the change of frame (world points -> new-frame points).
        elements: any container of an `HDMap`.

    Returns:
        The same container type with moved geometry (ids, types and styles unchanged).
    """
    if isinstance(elements, LaneLines):
        return dataclasses.replace(elements, lines=_move_polylines(new_SE3_world, elements.lines))
    if isinstance(elements, Lanes):
        left, right, centre = (_move_polylines(new_SE3_world, r) for r in (elements.left, elements.right, elements.centre))
        return dataclasses.replace(elements, left=left, right=right, centre=centre)
    if isinstance(elements, Cuboids):
        return Cuboids(
            elements.ids, new_SE3_world.apply(elements.center_m) if len(elements) else elements.center_m,
            elements.size_m, _rotate_quats(new_SE3_world, elements.orientation),
        )  # fmt: skip
    return _move_polylines(new_SE3_world, elements)


def transform_map(new_SE3_world: SE3, hd_map: HDMap) -> HDMap:
    """Every element of a map in the new frame.

    Args:
        new_SE3_world: the change of frame.
        hd_map: the map.

    Returns:
        The moved map.
    """
    moved: dict[str, Any] = {f.name: transform_elements(new_SE3_world, getattr(hd_map, f.name)) for f in dataclasses.fields(hd_map)}
    return HDMap(**moved)


def transform_scenario(scenario: Scenario, new_SE3_world: SE3) -> Scenario:
    """The scenario with its world frame changed.

    Args:
        scenario: the scenario.
        new_SE3_world: unbatched SE3 mapping old world points to the new frame.

    Returns:
        The scenario in the new frame (rig, lights and metadata unchanged).
    """
    ego = EgoTrajectory(scenario.ego.timestamps_ns, new_SE3_world.compose(scenario.ego.world_SE3_ego))
    a = scenario.agents
    agents = AgentTracks(
        a.track_id, a.source_class, a.timestamps_ns, new_SE3_world.apply(a.center_m) if len(a) else a.center_m,
        a.size_m, _rotate_quats(new_SE3_world, a.orientation),
    )  # fmt: skip
    return scenario.replace(ego=ego, agents=agents, map=transform_map(new_SE3_world, scenario.map))


def first_pose_frame(scenario: Scenario) -> SE3:
    """The change of frame that puts the first ego pose at the origin with identity rotation.

    Args:
        scenario: the scenario.

    Returns:
        clip_SE3_world = world_SE3_ego[0]^-1.
    """
    return scenario.ego.world_SE3_ego[0].inverse()


__all__ = ["first_pose_frame", "transform_elements", "transform_map", "transform_scenario"]


def shift_times(scenario: Scenario, dt_ns: int) -> Scenario:
    """The scenario with every timestamp moved by `dt_ns` (ego, agents, light states, frame origin).

    Args:
        scenario: the scenario.
        dt_ns: nanoseconds added to every time.

    Returns:
        The scenario on the new time axis (geometry, rig and metadata unchanged).
    """
    from avsim.core.lights import TrafficLightStates

    dt = np.int64(dt_ns)
    a, lights = scenario.agents, scenario.lights
    return scenario.replace(
        ego=EgoTrajectory(scenario.ego.timestamps_ns + dt, scenario.ego.world_SE3_ego),
        agents=AgentTracks(a.track_id, a.source_class, a.timestamps_ns + dt, a.center_m, a.size_m, a.orientation),
        lights=TrafficLightStates(lights.light_id, lights.timestamps_ns + dt, lights.state),
        frame_origin_ns=None if scenario.frame_origin_ns is None else int(scenario.frame_origin_ns + dt),
    )  # fmt: skip
