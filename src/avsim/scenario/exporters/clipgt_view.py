"""What a ClipGT clip can carry of an avsim scenario: `clipgt_view`.

`avsim.scenario.exporters.clipgt` writes exactly this view, and reading the clip back
(`avsim.scenario.importers.clipgt`) gives it again, so every difference between a scenario and
its ClipGT round trip is one of these, made here on purpose:

* id: made file-name safe (`clip_id_of`), as the files are named after it;
* world frame: the clip frame of the format's documentation, the first ego pose at the origin
  with identity rotation (`avsim.scenario.frames.first_pose_frame`; rigid, so every camera image
  is the same);
* times: rounded to whole microseconds (ego poses and boxes); of poses (or a track's boxes)
  that fall in one microsecond, the first is kept;
* cameras: named as the loader names rig-JSON sensors (``CAM_FRONT`` -> ``camera_CAM_FRONT``,
  ``camera_front_wide_120fov`` unchanged); per-camera capture offsets are dropped (the format
  has one time per frame);
* agents: a source class that the loader would put in another class than avsim does becomes
  the loader's name for avsim's class (``vehicle.car`` -> ``automobile``); a track observed once
  gets a copy of its box 1 microsecond later (the loader drops one-row tracks; both renderers
  then hold the box for 0.5 s either side);
* map: drivable areas are dropped (no table; neither renderer draws them); lane centre lines
  are re-derived from the rails (the lane table has none); lane-line types become per-vertex
  pairs; element ids survive through ``key.map_id``;
* traffic-light states are dropped (the format has none; NVIDIA's loader draws every light as
  unknown); of the metadata, only ``lane_speed_limits_mps`` survives (as the lane table's mph).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from avsim.core.agents import AgentTracks, collapse_class
from avsim.core.lights import TrafficLightStates
from avsim.core.names import safe_name
from avsim.core.rig import CameraRig, named_rig
from avsim.core.trajectory import EgoTrajectory
from avsim.maps import HDMap
from avsim.scenario.frames import first_pose_frame, transform_scenario
from avsim.scenario.importers.av2 import _resample
from avsim.scenario.importers.clipgt_schema import (
    CLASS_CATEGORY,
    DEFAULT_LINE_COLOR,
    DEFAULT_LINE_STYLE,
    camera_name,
    loader_class,
    sensor_name,
)
from avsim.scenario.importers.common import MapBuilder
from avsim.scenario.types import Scenario

NS_PER_US = 1000
SINGLE_ROW_COPY_NS = NS_PER_US  # the copy that keeps a one-row track in NVIDIA's loader


def to_microseconds(timestamps_ns: np.ndarray) -> np.ndarray:
    """Nanoseconds rounded to whole microseconds.

    Args:
        timestamps_ns: (N,) int64 ns.

    Returns:
        (N,) int64 microseconds.
    """
    t = np.asarray(timestamps_ns, dtype=np.int64)
    return (t + NS_PER_US // 2) // NS_PER_US  # round half up, exact in integers


def clip_id_of(scenario_id: str) -> str:
    """The clip id (file-name prefix) of a scenario id.

    Args:
        scenario_id: the scenario id.

    Returns:
        `avsim.core.names.safe_name` of it (as render names its files).
    """
    return safe_name(scenario_id)


def clipgt_category(source_class: str) -> str:
    """The obstacle category avsim writes for a source class.

    Args:
        source_class: the agent's source class.

    Returns:
        The source class itself when the loader gives it avsim's class, else the loader's name
        for avsim's class (`CLASS_CATEGORY`).
    """
    cls = collapse_class(source_class)
    return source_class if loader_class(source_class) == cls else CLASS_CATEGORY[cls]


def category_as_read(category: str) -> str:
    """The source class avsim's reader gives an obstacle category (the loader's class wins).

    Args:
        category: the ``obstacle.category`` string.

    Returns:
        The category when avsim and the loader class it alike, else the loader's class name.
    """
    cls = loader_class(category)
    return category if collapse_class(category) == cls else cls


def _rig_view(rig: CameraRig) -> CameraRig:
    names = tuple(camera_name(sensor_name(n)) for n in rig.names)
    return CameraRig(names, rig.cameras, rig.ego_SE3_camera)


def _ego_view(ego: EgoTrajectory) -> EgoTrajectory:
    t_us = to_microseconds(ego.timestamps_ns)
    first = np.r_[True, t_us[1:] != t_us[:-1]]  # rounding never reorders; keep a microsecond's first pose
    return EgoTrajectory(t_us[first] * NS_PER_US, ego.world_SE3_ego[first])


def _agents_view(agents: AgentTracks) -> AgentTracks:
    if not len(agents):
        return agents
    t_ns = to_microseconds(agents.timestamps_ns) * NS_PER_US
    first = np.r_[True, (agents.track_id[1:] != agents.track_id[:-1]) | (t_ns[1:] != t_ns[:-1])]
    agents, t_ns = agents.select(first), t_ns[first]
    same_track = agents.track_id[1:] == agents.track_id[:-1]
    classes = {c: category_as_read(clipgt_category(c)) for c in np.unique(agents.source_class)}
    starts = np.flatnonzero(np.r_[True, ~same_track])  # the reader takes a track's first category
    first_class = np.array([classes[c] for c in agents.source_class[starts]], dtype=str)
    source = np.repeat(first_class, np.diff(np.r_[starts, len(agents)]))
    single = np.ones(len(agents), bool)
    single[1:] &= ~same_track
    single[:-1] &= ~same_track
    rows = np.flatnonzero(single)
    cols = [agents.track_id, source, t_ns, agents.center_m, agents.size_m, agents.orientation]
    extra = [c[rows] for c in cols]
    extra[2] = extra[2] + SINGLE_ROW_COPY_NS
    return AgentTracks.from_unsorted(*(np.concatenate([c, e]) for c, e in zip(cols, extra)))


def _vertex_types(hd_map: HDMap, k: int) -> list[tuple[str, str]]:
    ll = hd_map.lane_lines
    s = slice(ll.lines.offsets[k], ll.lines.offsets[k + 1])
    n = s.stop - s.start
    colors = ll.vertex_color[s] if ll.vertex_color is not None else [ll.color[k]] * n
    styles = ll.vertex_style[s] if ll.vertex_style is not None else [ll.style[k]] * n
    return [(str(c).upper() or DEFAULT_LINE_COLOR, str(st).upper() or DEFAULT_LINE_STYLE) for c, st in zip(colors, styles)]


def ids_as_read(ids: Any, loader_prefix: str) -> list[str]:
    """Element ids after a round trip: kept when all are distinct and non-empty, else the loader's.

    Args:
        ids: (K,) element ids of one table.
        loader_prefix: the loader's id prefix for the table (``"lane_line_"``, ...).

    Returns:
        K ids.
    """
    ids = [str(i) for i in ids]
    return ids if all(ids) and len(set(ids)) == len(ids) else [f"{loader_prefix}{k}" for k in range(len(ids))]


def _map_view(hd_map: HDMap) -> HDMap:
    mb = MapBuilder()
    for k, eid in enumerate(ids_as_read(hd_map.lane_lines.ids, "lane_line_")):
        mb.add_lane_line(eid, hd_map.lane_lines.lines[k], _vertex_types(hd_map, k))  # type: ignore[arg-type]
    lanes = hd_map.lanes
    for k, eid in enumerate(ids_as_read(lanes.ids, "")):
        left, right = lanes.left[k], lanes.right[k]
        n = max(len(left), len(right))
        mb.add_lane(eid, left, right, (_resample(left, n) + _resample(right, n)) / 2.0)
    shapes = {"road_boundaries": "road_boundary_", "wait_lines": "wait_line_", "poles": "pole_",
              "crosswalks": "crosswalk_", "road_markings": "road_marking_"}  # fmt: skip
    for name, prefix in shapes.items():
        elements = getattr(hd_map, name)
        for k, eid in enumerate(ids_as_read(elements.ids, prefix)):
            getattr(mb, name).add(eid, elements[k])
    for name, prefix in (("traffic_lights", "traffic_light_"), ("traffic_signs", "traffic_sign_")):
        boxes = getattr(hd_map, name)
        for k, eid in enumerate(ids_as_read(boxes.ids, prefix)):
            getattr(mb, name).add(eid, boxes.center_m[k], boxes.size_m[k], boxes.orientation[k])
    return mb.build()


def speed_limits_view(scenario: Scenario, lane_ids: Any) -> dict[str, float]:
    """The lane speed limits (m/s) a clip carries: those of existing lanes, positive, by id as read.

    Args:
        scenario: the scenario (its ``metadata["lane_speed_limits_mps"]``, keyed by lane id).
        lane_ids: the lane ids as written, in order (ids as read follow from them).

    Returns:
        {lane id as read: m/s}.
    """
    limits = scenario.metadata.get("lane_speed_limits_mps") or {}
    written = [str(i) for i in lane_ids]
    read = ids_as_read(written, "")
    return {r: float(limits[w]) for w, r in zip(written, read) if isinstance(limits.get(w), (int, float)) and limits[w] > 0}


def clipgt_view(scenario: Scenario, rig_name: str | None = None) -> Scenario:
    """The scenario as a ClipGT clip carries it (see the module docstring for every change).

    Args:
        scenario: any avsim scenario.
        rig_name: a named rig (``cosmos``, ...) replacing the scenario's rig first; None keeps it.

    Returns:
        The view: what `export_clipgt` writes and reading the clip back gives.
    """
    if rig_name is not None:
        scenario = scenario.replace(rig=named_rig(rig_name))
    moved = transform_scenario(scenario, first_pose_frame(scenario))
    limits = speed_limits_view(scenario, scenario.map.lanes.ids)
    return Scenario(
        scenario_id=clip_id_of(scenario.scenario_id), rig=_rig_view(scenario.rig), ego=_ego_view(moved.ego),
        agents=_agents_view(moved.agents), map=_map_view(moved.map), lights=TrafficLightStates.empty(),
        metadata={"lane_speed_limits_mps": limits} if limits else {},
    )  # fmt: skip


__all__ = ["SINGLE_ROW_COPY_NS", "category_as_read", "clip_id_of", "clipgt_category", "clipgt_view", "ids_as_read",
           "speed_limits_view", "to_microseconds"]  # fmt: skip
