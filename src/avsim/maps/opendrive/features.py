"""OpenDRIVE objects and signals as avsim map elements.

- **Crosswalks**: objects of type crosswalk, their outline (`cornerRoad` s/t corners, or
  `cornerLocal` u/v corners about the object's position and heading), else the object's
  length x width rectangle.
- **Road markings**: objects of type roadMark (and CARLA's stencils: type -1 named Stencil*) as
  their outline or rectangle.
- **Poles**: objects of type pole or streetLamp: a vertical polyline of the object's height.
- **Traffic lights**: dynamic signals and the traffic-light codes (German/OpenDRIVE catalogue
  `1000xxx`), a box of the signal's width and height (nominal 0.35 x 1.0 m) 0.3 m deep, its
  bottom `zOffset` above the road, facing along the road heading + hOffset (+ pi for
  orientation "-").
- **Traffic signs**: the other static signals, boxes 0.05 m deep.
- **Wait lines**: at every traffic light, stop sign (206 / R1-1), stop line (294) and every
  `<signalReference>` to one of them: a line across the lanes it is valid for (`<validity>`,
  else every drivable lane driven in its orientation's direction) at its s; the light's
  controlled lanes are those lanes (metadata `traffic_light_lanes`). Lines repeated within
  0.5 m are kept once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from avsim.core.transforms import yaw_to_quat
from avsim.core.typing import NDArrayFloat
from avsim.maps import Cuboids, Polygons, Polylines
from avsim.maps.opendrive.marks import DRIVABLE_LANE_TYPES
from avsim.maps.opendrive.model import Direction, RoadObject, Signal
from avsim.maps.opendrive.network import LaneKey, RoadNetwork
from avsim.maps.opendrive.road import RoadEval

LIGHT_SIZE_M = (0.3, 0.35, 1.0)
SIGN_DEPTH_M = 0.05
SIGN_SIZE_M = (0.75, 0.75)
STOP_TYPES = frozenset({"206", "294", "R1-1"})
_MARKING_TYPES = frozenset({"roadmark", "roadmarking"})
_POLE_TYPES = frozenset({"pole", "streetlamp"})


@dataclass
class FeatureSet:
    """Objects and signals gathered over all roads."""

    crosswalk_ids: list[str] = field(default_factory=list)
    crosswalks: list[NDArrayFloat] = field(default_factory=list)
    marking_ids: list[str] = field(default_factory=list)
    markings: list[NDArrayFloat] = field(default_factory=list)
    pole_ids: list[str] = field(default_factory=list)
    poles: list[NDArrayFloat] = field(default_factory=list)
    light_rows: list[tuple[str, NDArrayFloat, tuple[float, float, float], float]] = field(default_factory=list)
    sign_rows: list[tuple[str, NDArrayFloat, tuple[float, float, float], float]] = field(default_factory=list)
    wait_ids: list[str] = field(default_factory=list)
    waits: list[NDArrayFloat] = field(default_factory=list)
    light_lanes: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def elements(self) -> dict[str, Any]:
        """The HDMap element containers (keyword arguments of `HDMap.build`)."""
        return {
            "crosswalks": Polygons.from_list(self.crosswalk_ids, self.crosswalks),
            "road_markings": Polygons.from_list(self.marking_ids, self.markings),
            "poles": Polylines.from_list(self.pole_ids, self.poles),
            "traffic_lights": _cuboids(self.light_rows),
            "traffic_signs": _cuboids(self.sign_rows),
            "wait_lines": Polylines.from_list(self.wait_ids, self.waits),
        }


def _cuboids(rows: list[tuple[str, NDArrayFloat, tuple[float, float, float], float]]) -> Cuboids:
    if not rows:
        return Cuboids.empty()
    ids = [r[0] for r in rows]
    centre = np.array([r[1] for r in rows])
    size = np.array([r[2] for r in rows])
    quat = np.asarray(yaw_to_quat(np.array([r[3] for r in rows])))
    return Cuboids(np.array(ids, dtype=str), centre, size, quat)


def is_traffic_light(sig: Signal) -> bool:
    """Dynamic signals and the catalogue's traffic-light codes (1000001, 1000002, ...)."""
    return sig.dynamic or (sig.type.startswith("1000") and len(sig.type) == 7)


def _object_frame(ev: RoadEval, obj: RoadObject) -> tuple[NDArrayFloat, float]:
    base = ev.points(np.array([obj.s]), np.array([obj.t]), np.array([obj.z_offset]))[0]
    return base, float(ev.heading(np.array([obj.s]))[0] + obj.hdg)


def object_polygon(ev: RoadEval, obj: RoadObject) -> NDArrayFloat | None:
    """The object's ground outline (K, 3) in the world frame, or None when it has no area."""
    base, heading = _object_frame(ev, obj)
    c, s = np.cos(heading), np.sin(heading)
    if obj.outlines:
        ol = obj.outlines[0]
        if ol.local:
            uv = np.array([[p.a, p.b] for p in ol.corners])
            z = np.array([p.z for p in ol.corners])
            pts = np.stack([base[0] + c * uv[:, 0] - s * uv[:, 1], base[1] + s * uv[:, 0] + c * uv[:, 1], base[2] + z], 1)
        else:
            pts = ev.points(np.array([p.a for p in ol.corners]), np.array([p.b for p in ol.corners]), np.array([p.z for p in ol.corners]))
    elif obj.length and obj.width:
        u = np.array([1, 1, -1, -1]) * obj.length / 2
        v = np.array([1, -1, -1, 1]) * obj.width / 2
        pts = np.stack([base[0] + c * u - s * v, base[1] + s * u + c * v, np.full(4, base[2])], 1)
    else:
        return None
    if len(pts) > 3 and np.allclose(pts[0], pts[-1]):
        pts = pts[:-1]  # a closed ring repeats its first corner
    return pts if len(pts) >= 3 else None


def _add_object(ev: RoadEval, obj: RoadObject, out: FeatureSet) -> None:
    kind = obj.type.strip().lower()
    name = f"{ev.road.id}:{obj.id}"
    if kind == "crosswalk" or "crosswalk" in obj.name.lower():
        poly = object_polygon(ev, obj)
        if poly is None:
            out.skip("crosswalk without outline or size")
            return
        out.crosswalk_ids.append(name)
        out.crosswalks.append(poly)
    elif kind in _MARKING_TYPES or (kind == "-1" and obj.name.lower().startswith("stencil")):
        poly = object_polygon(ev, obj)
        if poly is None:
            out.skip("road marking without outline or size")
            return
        out.marking_ids.append(name)
        out.markings.append(poly)
    elif kind in _POLE_TYPES and obj.height:
        base, _ = _object_frame(ev, obj)
        out.pole_ids.append(name)
        out.poles.append(np.stack([base, base + [0.0, 0.0, obj.height]]))
    else:
        out.skip(f"object type {obj.type or 'none'}")


def _controlled(net: RoadNetwork, ev: RoadEval, sig: Signal) -> list[int]:
    """Lane ids a signal (or reference) applies to at its s."""
    section = int(ev.section_index(np.array([sig.s]))[0])
    sec = ev.road.sections[section]
    drivable = [lane.id for lane in sec.lanes if lane.id != 0 and lane.type in DRIVABLE_LANE_TYPES]
    if sig.validities:
        wanted = {i for v in sig.validities for i in range(min(v.from_lane, v.to_lane), max(v.from_lane, v.to_lane) + 1)}
        return [i for i in drivable if i in wanted]
    want = {"+": Direction.FORWARD, "-": Direction.BACKWARD}.get(sig.orientation)
    return [i for i in drivable if want is None or ev.lane_direction(section, i) in (want, Direction.BOTH)]


def _wait_line(net: RoadNetwork, ev: RoadEval, sig: Signal, signal_id: str, out: FeatureSet, light: bool) -> None:
    lanes = _controlled(net, ev, sig)
    if not lanes:
        out.skip("stop position with no drivable lane")
        return
    s = float(np.clip(sig.s, 0.0, ev.length))
    section = int(ev.section_index(np.array([s]))[0])
    borders = ev.borders(section, np.array([s]))
    ts = [float(borders[i][0]) for i in lanes] + [float(borders[i - 1 if i > 0 else i + 1][0]) for i in lanes]
    pts = ev.points(np.array([s, s]), np.array([min(ts), max(ts)]))
    if not any(np.linalg.norm(w[0] - pts[0]) < 0.5 and np.linalg.norm(w[-1] - pts[-1]) < 0.5 for w in out.waits):
        out.wait_ids.append(f"{ev.road.id}:{sig.id}")
        out.waits.append(pts)
    if light:
        names = [LaneKey(ev.road.id, section, i).name for i in lanes]
        have = out.light_lanes.setdefault(signal_id, [])
        have += [n for n in names if n not in have]


def _add_signal(net: RoadNetwork, ev: RoadEval, sig: Signal, out: FeatureSet, signals: dict[str, Signal]) -> None:
    target = signals.get(sig.reference_of) if sig.reference_of is not None else sig
    if target is None:
        out.skip("signalReference to a missing signal")
        return
    signal_id = target.id
    light = is_traffic_light(target)
    if light or target.type in STOP_TYPES:
        _wait_line(net, ev, sig, signal_id, out, light)
    if sig.reference_of is not None or target.type == "294":
        return
    heading = float(ev.heading(np.array([sig.s]))[0] + sig.h_offset + (np.pi if sig.orientation == "-" else 0.0))
    if light:
        size = (LIGHT_SIZE_M[0], sig.width or LIGHT_SIZE_M[1], sig.height or LIGHT_SIZE_M[2])
    else:
        size = (SIGN_DEPTH_M, sig.width or SIGN_SIZE_M[0], sig.height or SIGN_SIZE_M[1])
    centre = ev.points(np.array([sig.s]), np.array([sig.t]), np.array([sig.z_offset + size[2] / 2]))[0]
    rows = out.light_rows if light else out.sign_rows
    name = sig.id if all(r[0] != sig.id for r in rows) else f"{ev.road.id}:{sig.id}"
    rows.append((name, centre, size, heading))


def road_features(net: RoadNetwork, ev: RoadEval, out: FeatureSet) -> None:
    """Add one road's objects and signals to `out`.

    Args:
        net: the network (signal references resolve across roads).
        ev: the road.
        out: the accumulator.
    """
    for obj in ev.road.objects:
        _add_object(ev, obj, out)
    signals = net.signals_by_id
    for sig in ev.road.signals:
        _add_signal(net, ev, sig, out, signals)
