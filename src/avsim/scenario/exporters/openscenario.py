"""`avsim export openscenario SCENARIO OUT/`: a recorded or edited scenario as ASAM OpenSCENARIO 1.2.

OUT/ gets `<id>.xosc` and its road network `<id>.xodr` (`avsim export opendrive`). The ego and every
agent track become entities (the ego a vehicle named `Ego` with the property `avsim:role=ego`;
agents vehicles, pedestrians or objects by their class, with the property `avsim:sourceClass`) that
each follow their recorded poses: one `FollowTrajectoryAction` of a polyline with a vertex per
recorded pose (`WorldPosition` x, y, z, h, p, r; `time` the seconds from the scenario's start),
timed absolutely. The reference point of an agent is the bottom centre of its box (the box's
`Center` is (0, 0, height / 2)); the ego's is its rear axle (avsim's ego frame), its box centre
`ego_rear_axle_to_center_m` ahead. An entity has one box: a track whose box size changes over time
(Waymo's do) keeps its median size, its box centres exact.

A track present from the start is placed and starts following in Init; one that starts later is
deleted in Init and added (`AddEntityAction` at its first pose, then the trajectory) when the
simulation time reaches its first time (`greaterOrEqual`); every track, the ego's too, is deleted
when the simulation time reaches its last time, after the step that records it there, so nothing
moves on past a recording's end; the storyboard stops after the scenario's end. A track's gaps are
driven through (its trajectory interpolates them); a single pose is a polyline of two equal vertices. The header's properties keep the scenario's
id and its first timestamp (`avsim:startTimeNs`), which `avsim convert --from openscenario` restores.

Same scenario, same bytes (the header's date is fixed). The document passes ASAM's checker
(`asam-qc-openscenarioxml`), and converting it back gives every recorded pose at its time
(within float precision) when the poses' times lie on the conversion's step grid or are
trajectory vertices (always: vertices are recorded between steps).
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import avsim
from avsim.core.agents import AgentTracks
from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.names import join_names, safe_name
from avsim.core.trajectory import NS_PER_S
from avsim.core.transforms import quat_to_matrix
from avsim.core.typing import NDArrayFloat
from avsim.scenario.openscenario.record import (
    ID_PROPERTY,
    ROLE_EGO,
    ROLE_PROPERTY,
    SOURCE_CLASS_PROPERTY,
    START_PROPERTY,
)
from avsim.scenario.types import Scenario

EGO_NAME = "Ego"
EGO_SIZE_M = (4.8, 2.0, 1.6)  # avsim's ego when the scenario's metadata has none (edit, sim: the same)
EGO_REAR_AXLE_TO_CENTER_M = 1.4
PERFORMANCE = {"maxSpeed": "100", "maxAcceleration": "100", "maxDeceleration": "100"}  # recorded motion: no limit binds
FIXED_DATE = "2000-01-01T00:00:00"
WHEEL_BASE_FRACTION = 0.597  # of the length, where the scenario gives no wheel base (the simulator's default, nuPlan's Pacifica)


@dataclass
class OpenScenarioExport:
    """What was written: the files, the entities by kind and the vertices."""

    xosc: Path
    xodr: Path
    entities: dict[str, int] = field(default_factory=dict)
    vertices: int = 0
    map_report: Any = None


def _f(v: float) -> str:
    return repr(float(v)) if math.isfinite(v) else "0.0"


def _sub(parent: ET.Element, tag: str, **attrs: str) -> ET.Element:
    return ET.SubElement(parent, tag, attrs)


def hpr(rot: NDArrayFloat) -> NDArrayFloat:
    """(N, 3) heading, pitch, roll of (N, 3, 3) rotations (z-y-x, the inverse of OpenSCENARIO's).

    Computed with Python's `math` one row at a time: numpy's vectorised arctan2 / arcsin may round the
    last bit differently for elements its SIMD loop and its scalar tail handle, and the output must be
    the same bytes every time."""
    m = rot.tolist()
    return np.array([(math.atan2(r[1][0], r[0][0]), -math.asin(min(max(r[2][0], -1.0), 1.0)), math.atan2(r[2][1], r[2][2])) for r in m],
                    dtype=np.float64).reshape(len(m), 3)  # fmt: skip


def _category(source_class: str, object_class: str) -> tuple[str, str]:
    """(element, category) of an agent class: Vehicle/Pedestrian/MiscObject and its OpenSCENARIO category."""
    low = source_class.lower()
    if object_class == "Pedestrian":
        return "Pedestrian", "pedestrian"
    if object_class == "Cyclist":
        return "Vehicle", "motorbike" if "motor" in low else "bicycle"
    if object_class == "Truck":
        kind = next((k for k in ("bus", "tram", "train", "trailer") if k in low), "truck")
        return "Vehicle", "semitrailer" if kind == "trailer" else kind
    if object_class == "Car":
        return "Vehicle", "van" if "van" in low else "car"
    return "MiscObject", "obstacle"


def _entity(parent: ET.Element, name: str, element: str, category: str, size: tuple[float, float, float],
            center: tuple[float, float, float], props: dict[str, str], wheel_base: float | None = None) -> None:  # fmt: skip
    obj = _sub(parent, "ScenarioObject", name=name)
    kind_attr = {"Vehicle": "vehicleCategory", "Pedestrian": "pedestrianCategory", "MiscObject": "miscObjectCategory"}[element]
    e = _sub(obj, element, name=name, **{kind_attr: category})
    if element != "Vehicle":
        e.set("mass", "80.0" if element == "Pedestrian" else "100.0")
    box = _sub(e, "BoundingBox")
    _sub(box, "Center", x=_f(center[0]), y=_f(center[1]), z=_f(center[2]))
    _sub(box, "Dimensions", width=_f(size[1]), length=_f(size[0]), height=_f(size[2]))
    if element == "Vehicle":
        _sub(e, "Performance", **PERFORMANCE)
        axles = _sub(e, "Axles")
        axle = {"maxSteering": "0.5", "wheelDiameter": "0.6", "trackWidth": _f(size[1] * 0.8), "positionZ": "0.3"}
        _sub(axles, "FrontAxle", positionX=_f(wheel_base if wheel_base is not None else WHEEL_BASE_FRACTION * size[0]), **axle)  # 1.2 needs one
        _sub(axles, "RearAxle", positionX="0.0", **axle)
    props_el = _sub(e, "Properties")
    for k, v in props.items():
        _sub(props_el, "Property", name=k, value=v)


def _world(parent: ET.Element, row: NDArrayFloat) -> None:
    pos = _sub(parent, "Position")
    _sub(pos, "WorldPosition", x=_f(row[0]), y=_f(row[1]), z=_f(row[2]), h=_f(row[3]), p=_f(row[4]), r=_f(row[5]))


def _follow(parent: ET.Element, name: str, times: NDArrayFloat, poses: NDArrayFloat) -> None:
    """`PrivateAction/RoutingAction/FollowTrajectoryAction` of a timed polyline (absolute timing)."""
    follow = _sub(_sub(_sub(parent, "PrivateAction"), "RoutingAction"), "FollowTrajectoryAction")
    traj = _sub(_sub(follow, "TrajectoryRef"), "Trajectory", name=f"{name}_track", closed="false")
    line = _sub(_sub(traj, "Shape"), "Polyline")
    if len(times) == 1:  # a polyline needs two vertices: a single pose is held
        times, poses = np.repeat(times, 2), np.repeat(poses, 2, axis=0)
    for t, row in zip(times, poses):
        _world(_sub(line, "Vertex", time=_f(t)), row)
    _sub(_sub(follow, "TimeReference"), "Timing", domainAbsoluteRelative="absolute", scale="1.0", offset="0.0")
    _sub(follow, "TrajectoryFollowingMode", followingMode="position")


def _time_trigger(parent: ET.Element, tag: str, name: str, rule: str, value: float) -> None:
    cond = _sub(_sub(_sub(parent, tag), "ConditionGroup"), "Condition", name=name, delay="0", conditionEdge="none")
    _sub(_sub(cond, "ByValueCondition"), "SimulationTimeCondition", value=_f(value), rule=rule)


def _entity_action(parent: ET.Element, name: str, kind: str, first: NDArrayFloat | None = None) -> None:
    ea = _sub(_sub(parent, "GlobalAction"), "EntityAction", entityRef=name)
    a = _sub(ea, kind)
    if first is not None:
        _world(a, first)


@dataclass(frozen=True)
class _Track:
    name: str
    element: str
    category: str
    size: tuple[float, float, float]
    center: tuple[float, float, float]
    props: dict[str, str]
    times: NDArrayFloat
    poses: NDArrayFloat  # (T, 6) x, y, z, h, p, r of the reference point
    wheel_base: float | None = None


def _ego_track(s: Scenario) -> _Track:
    meta = s.metadata
    size = meta.get("ego_size_m")
    size = tuple(float(v) for v in size) if isinstance(size, (list, tuple)) and len(size) == 3 else EGO_SIZE_M
    offset = meta.get("ego_rear_axle_to_center_m")
    offset = float(offset) if isinstance(offset, (int, float)) and not isinstance(offset, bool) else EGO_REAR_AXLE_TO_CENTER_M
    base = meta.get("ego_wheel_base_m")
    pose = s.ego.world_SE3_ego
    poses = np.concatenate([np.asarray(pose.translation), hpr(np.asarray(pose.rotation))], axis=1)
    times = (s.ego.timestamps_ns - s.start_ns) / NS_PER_S
    return _Track(EGO_NAME, "Vehicle", "car", size, (offset, 0.0, size[2] / 2), {ROLE_PROPERTY: ROLE_EGO}, times, poses,
                  float(base) if isinstance(base, (int, float)) and not isinstance(base, bool) else None)  # fmt: skip


def _agent_tracks(s: Scenario, taken: set[str]) -> list[_Track]:
    out = []
    agents: AgentTracks = s.agents
    for track_id, sl in agents.track_slices():
        rot = quat_to_matrix(agents.orientation[sl])
        size = np.median(agents.size_m[sl], axis=0)  # an entity has one box: a track whose size changes keeps its median
        ref = agents.center_m[sl] - rot[:, :, 2] * (size[2] / 2)
        poses = np.concatenate([ref, hpr(rot)], axis=1)
        source = str(agents.source_class[sl][0])
        element, category = _category(source, str(agents.object_class[sl][0]))
        name = track_id if track_id not in taken else f"{track_id}_agent"
        taken.add(name)
        times = (agents.timestamps_ns[sl] - s.start_ns) / NS_PER_S
        out.append(_Track(name, element, category, (float(size[0]), float(size[1]), float(size[2])), (0.0, 0.0, float(size[2]) / 2),
                          {SOURCE_CLASS_PROPERTY: source}, times, poses))  # fmt: skip
    return out


def xosc_document(s: Scenario, xodr_name: str) -> tuple[ET.Element, list[_Track]]:
    """The `<OpenSCENARIO>` document of a scenario (see the module docstring)."""
    root = ET.Element("OpenSCENARIO")
    header = _sub(root, "FileHeader", revMajor="1", revMinor="2", date=FIXED_DATE, description=f"avsim scenario {s.scenario_id}",
                  author=f"avsim {avsim.__version__}")  # fmt: skip
    props = _sub(header, "Properties")
    _sub(props, "Property", name=ID_PROPERTY, value=s.scenario_id)
    _sub(props, "Property", name=START_PROPERTY, value=str(s.start_ns))
    _sub(root, "ParameterDeclarations")
    _sub(root, "CatalogLocations")
    _sub(_sub(root, "RoadNetwork"), "LogicFile", filepath=xodr_name)
    tracks = [_ego_track(s)]
    tracks += _agent_tracks(s, {EGO_NAME})
    entities = _sub(root, "Entities")
    for t in tracks:
        _entity(entities, t.name, t.element, t.category, t.size, t.center, t.props, t.wheel_base)
    end = (s.end_ns - s.start_ns) / NS_PER_S
    board = _sub(root, "Storyboard")
    actions = _sub(_sub(board, "Init"), "Actions")
    late = [t for t in tracks if t.times[0] > 1e-9]
    for t in late:
        _entity_action(actions, t.name, "DeleteEntityAction")
    for t in tracks:
        if t.times[0] <= 1e-9:
            private = _sub(actions, "Private", entityRef=t.name)
            _world(_sub(_sub(private, "PrivateAction"), "TeleportAction"), t.poses[0])
            _follow(private, t.name, t.times, t.poses)
    _story(board, tracks, end)
    _time_trigger(board, "StopTrigger", "end_of_recording", "greaterThan", end)
    return root, tracks


def _story(board: ET.Element, tracks: list[_Track], end: float) -> None:
    """The events that add late tracks and delete every track at its last time."""
    act = _sub(_sub(board, "Story", name="avsim_recording"), "Act", name="tracks")
    for t in tracks:
        group = _sub(act, "ManeuverGroup", name=f"{t.name}_group", maximumExecutionCount="1")
        _sub(_sub(group, "Actors", selectTriggeringEntities="false"), "EntityRef", entityRef=t.name)
        maneuver = _sub(group, "Maneuver", name=f"{t.name}_maneuver")
        if t.times[0] > 1e-9:
            ev = _sub(maneuver, "Event", name=f"{t.name}_appears", priority="override", maximumExecutionCount="1")
            _entity_action(_sub(ev, "Action", name=f"{t.name}_add"), t.name, "AddEntityAction", t.poses[0])
            _follow(_sub(ev, "Action", name=f"{t.name}_follow"), t.name, t.times, t.poses)
            _time_trigger(ev, "StartTrigger", f"{t.name}_first_time", "greaterOrEqual", float(t.times[0]))
        ev = _sub(maneuver, "Event", name=f"{t.name}_leaves", priority="parallel", maximumExecutionCount="1")
        _entity_action(_sub(ev, "Action", name=f"{t.name}_delete"), t.name, "DeleteEntityAction")
        _time_trigger(ev, "StartTrigger", f"{t.name}_last_time", "greaterOrEqual", float(t.times[-1]))
    start = _sub(act, "StartTrigger")
    cond = _sub(_sub(start, "ConditionGroup"), "Condition", name="from_the_start", delay="0", conditionEdge="none")
    _sub(_sub(cond, "ByValueCondition"), "SimulationTimeCondition", value="0.0", rule="greaterOrEqual")


def check_output(out: Path) -> None:
    """Refuse an OUT that is a file or holds anything but OpenSCENARIO / OpenDRIVE files."""
    if out.exists() and (not out.is_dir() or any(p.suffix not in (".xosc", ".xodr") or not p.is_file() for p in out.iterdir())):
        raise AvsimInputError(out, "OUT", "exists and is not a folder of .xosc/.xodr files; refusing to replace it")


def export_openscenario(scenario: Scenario, out: str | os.PathLike[str]) -> OpenScenarioExport:
    """Write `OUT/<id>.xosc` and `OUT/<id>.xodr` (see the module docstring), as one atomic folder.

    Args:
        scenario: the scenario (its map needs lanes for the road network).
        out: the folder (absent, empty, or an earlier export, which is replaced).

    Returns:
        What was written.
    """
    from avsim.core.safe_xml import parse_xml
    from avsim.scenario.exporters.opendrive import export_opendrive

    out = Path(out)
    check_output(out)
    stem = safe_name(scenario.scenario_id)
    root, tracks = xosc_document(scenario, f"{stem}.xodr")
    ET.indent(root, space="  ")
    data = ET.tostring(root, encoding="UTF-8", xml_declaration=True) + b"\n"
    with atomic_output_path(out, is_dir=True) as tmp:
        tmp.mkdir(parents=True, exist_ok=True)
        map_report = export_opendrive(scenario, join_names(tmp, f"{stem}.xodr"))
        join_names(tmp, f"{stem}.xosc").write_bytes(data)
        parse_xml(data, tmp / f"{stem}.xosc")
    kinds: dict[str, int] = {}
    for t in tracks:
        kinds[t.element] = kinds.get(t.element, 0) + 1
    return OpenScenarioExport(out / f"{stem}.xosc", out / f"{stem}.xodr", kinds, int(sum(len(t.times) for t in tracks)), map_report)
