"""What a ClipGT clip can carry of an avsim scenario: `clipgt_view`.

`avsim.scenario.exporters.clipgt` writes exactly this view, and reading the clip back
(`avsim.scenario.importers.clipgt`) gives it again, so every difference between a scenario and
its ClipGT round trip is one of these, made here on purpose:

* id: made file-name safe (`clip_id_of`), as the files are named after it;
* world frame: the clip frame of the format's documentation, the first ego pose at the origin
  with identity rotation (`avsim.scenario.frames.first_pose_frame`; rigid, so every camera image
  is the same);
* times: rounded to whole microseconds (ego poses, boxes and the frame origin); of poses (or
  a track's boxes) that fall in one microsecond, the first is kept; a frame origin
  (`Scenario.frame_origin_ns`, frame 0 of a render) on another microsecond than the first pose is
  kept, and written as the frame times NVIDIA's loader renders at (`export_clipgt`);
* cameras: named as the loader names rig-JSON sensors (``CAM_FRONT`` -> ``camera_CAM_FRONT``,
  ``camera_front_wide_120fov`` unchanged); per-camera capture offsets are dropped (the format
  has one time per frame); a forward-polynomial f-theta lens becomes its backward refit
  (`clipgt_rig.backward_equivalent`, which every loader release reads);
* agents: a source class that the loader would put in another class than avsim does becomes
  the loader's name for avsim's class (``vehicle.car`` -> ``automobile``); a track observed once
  gets a copy of its box 1 microsecond later (the loader drops one-row tracks; both renderers
  then hold the box for 0.5 s either side);
* map: drivable areas are dropped (no table; neither renderer draws them); lane centre lines
  are re-derived from the rails (the lane table has none); lane-line types become per-vertex
  pairs; element ids survive through ``key.map_id``; a crosswalk or road marking that lies in a
  plane without forward slope gets one (`renderable_polygon`: at most 0.5 mm, so that NVIDIA's
  renderer can triangulate it);
* traffic-light states are dropped (the format has none; NVIDIA's loader draws every light as
  unknown); of the metadata, only ``lane_speed_limits_mps`` survives (as the lane table's mph).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from avsim.core.agents import AgentTracks, collapse_class
from avsim.core.cameras import FThetaCamera
from avsim.core.lights import TrafficLightStates
from avsim.core.names import safe_name
from avsim.core.rig import CameraRig, named_rig
from avsim.core.trajectory import EgoTrajectory
from avsim.maps import HDMap
from avsim.scenario.frames import first_pose_frame, transform_scenario
from avsim.scenario.importers.av2 import _resample
from avsim.scenario.importers.clipgt_rig import backward_equivalent
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
POLYGON_TILT_M = 1e-3  # forward height span given to a polygon NVIDIA's renderer cannot triangulate (ends move 0.5 mm)
PLANAR_TOLERANCE_M = 1e-4  # a polygon this close to a plane is "planar" (real survey polygons are cm off one)


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
    cameras = tuple(backward_equivalent(c) if isinstance(c, FThetaCamera) else c for c in rig.cameras)
    return CameraRig(names, cameras, rig.ego_SE3_camera)


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


_POLYGONS = ("crosswalks", "road_markings")  # the tables NVIDIA's renderer triangulates


def renderable_polygon(points_m: np.ndarray) -> np.ndarray:
    """A polygon (clip frame, FLU) that NVIDIA's renderer can triangulate; others unchanged.

    NVIDIA's renderer (`triangulate_polygon_3d` of cosmos-transfer2.5) triangulates a polygon by a
    Delaunay triangulation of its loader coordinates' first two axes, OpenCV RDF: (right, down) =
    (-y, -z) of the clip frame. A polygon in a plane whose height does not change along x (a flat
    crosswalk, a speed bump on a level or cross-sloped road) projects to a line there, and qhull
    refuses it (QH6154, initial simplex is flat). Such a polygon gets the smallest forward slope that
    it accepts: its height becomes z + s (x - x_mid) with s (x_max - x_min) = `POLYGON_TILT_M` (1 mm
    end to end, so no vertex moves more than 0.5 mm). The projection is then an affine image of the
    polygon's plane, so the triangles NVIDIA's renderer builds tile the polygon's convex hull.

    Args:
        points_m: (N, 3) polygon vertices, clip frame (x forward, y left, z up), metres.

    Returns:
        (N, 3) vertices: the same array when the polygon is not planar (its projection is not a
        line), already slopes forward by `POLYGON_TILT_M` or more, or has no extent along x.
    """
    p = np.asarray(points_m, dtype=np.float64)
    x_span = float(np.ptp(p[:, 0])) if len(p) else 0.0
    if len(p) < 3 or x_span <= POLYGON_TILT_M:
        return points_m
    design = np.stack([np.ones(len(p)), p[:, 0] - p[:, 0].mean(), p[:, 1] - p[:, 1].mean()], -1)
    plane, *_ = np.linalg.lstsq(design, p[:, 2], rcond=None)
    if np.abs(design @ plane - p[:, 2]).max() > PLANAR_TOLERANCE_M or abs(plane[1]) * x_span >= 0.99 * POLYGON_TILT_M:  # 0.99: a view of a view keeps its slope
        return points_m
    slope = (1.0 if plane[1] >= 0 else -1.0) * POLYGON_TILT_M / x_span
    return np.concatenate([p[:, :2], p[:, 2:] + slope * (p[:, :1] - (p[:, 0].min() + p[:, 0].max()) / 2)], -1)


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
            getattr(mb, name).add(eid, renderable_polygon(elements[k]) if name in _POLYGONS else elements[k])
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


def frame_origin_view(scenario: Scenario, ego: EgoTrajectory) -> int | None:
    """The frame origin a clip carries: the scenario's, on its microsecond; None when that is the first pose.

    Args:
        scenario: the scenario.
        ego: its ego trajectory as the clip carries it (`_ego_view`).

    Returns:
        Nanoseconds on a whole microsecond, or None (frame 0 = the first ego pose).
    """
    if scenario.frame_origin_ns is None:
        return None
    origin_ns = int(to_microseconds(np.array([scenario.frame_origin_ns]))[0]) * NS_PER_US
    return None if origin_ns == int(ego.timestamps_ns[0]) else origin_ns


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
    ego = _ego_view(moved.ego)
    return Scenario(
        scenario_id=clip_id_of(scenario.scenario_id), rig=_rig_view(scenario.rig), ego=ego,
        agents=_agents_view(moved.agents), map=_map_view(moved.map), lights=TrafficLightStates.empty(),
        metadata={"lane_speed_limits_mps": limits} if limits else {}, frame_origin_ns=frame_origin_view(scenario, ego),
    )  # fmt: skip


__all__ = ["POLYGON_TILT_M", "SINGLE_ROW_COPY_NS", "category_as_read", "clip_id_of", "clipgt_category", "clipgt_view",
           "frame_origin_view", "ids_as_read", "renderable_polygon", "speed_limits_view", "to_microseconds"]  # fmt: skip
