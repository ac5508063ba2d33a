"""A small, exactly known road scene for edit tests, plus helpers shared by test_edit_*.py.

Straight road along +x: two lanes driving +x (ego lane centred on y = 0, a left lane on
y = 3.5) and one oncoming lane (y = -3.5). Ego at 10 m/s on y = 0, 10 s at 10 Hz. A lead car
ahead in the ego lane, an oncoming car, a pedestrian on the sidewalk, one traffic light.
"""

from __future__ import annotations

import hashlib

import numpy as np

from avsim.core.agents import AgentTracks
from avsim.core.lights import TrafficLightStates
from avsim.core.rig import cosmos_rig
from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3, yaw_to_matrix, yaw_to_quat
from avsim.maps import Cuboids, HDMap, LaneLines, Lanes, Polygons, Polylines
from avsim.scenario import Scenario

NS = 1_000_000_000


def _line(y: float, x0: float = -50.0, x1: float = 250.0, z: float = 0.0, step: float = 10.0) -> np.ndarray:
    x = np.arange(x0, x1 + 1e-9, step)
    return np.stack([x, np.full_like(x, y), np.full_like(x, z)], axis=1)


def road_map() -> HDMap:
    lane_lines = LaneLines(
        Polylines.from_list(
            ["ll_left_edge", "ll_div", "ll_centre", "ll_right_edge"],
            [_line(5.25), _line(1.75), _line(-1.75), _line(-5.25)],
        ),
        np.array(["WHITE", "WHITE", "YELLOW", "WHITE"]),
        np.array(["SOLID_SINGLE", "LONG_DASHED_SINGLE", "SOLID_GROUP", "SOLID_SINGLE"]),
    )
    lanes = Lanes(
        np.array(["lane_ego", "lane_left", "lane_oncoming"]),
        Polylines.from_list(["a", "b", "c"], [_line(1.75), _line(5.25), _line(-5.25)[::-1]]),
        Polylines.from_list(["a", "b", "c"], [_line(-1.75), _line(1.75), _line(-1.75)[::-1]]),
        Polylines.from_list(["a", "b", "c"], [_line(0.0), _line(3.5), _line(-3.5)[::-1]]),
    )
    drivable = Polygons.from_list(["road"], [np.array([[-50, -5.25, 0], [250, -5.25, 0], [250, 5.25, 0], [-50, 5.25, 0]], float)])
    crosswalk = Polygons.from_list(["cw1"], [np.array([[100, -5.25, 0], [104, -5.25, 0], [104, 5.25, 0], [100, 5.25, 0]], float)])
    wait = Polylines.from_list(["wl1"], [np.array([[98, -5.25, 0], [98, 0, 0]], float)])
    lights = Cuboids(np.array(["L1"]), np.array([[106.0, -6.0, 5.0]]), np.array([[0.3, 0.4, 1.0]]), yaw_to_quat(np.array([np.pi])))
    signs = Cuboids(np.array(["S1"]), np.array([[60.0, -6.5, 2.5]]), np.array([[0.1, 0.8, 0.8]]), yaw_to_quat(np.array([np.pi])))
    return HDMap.build(
        lane_lines=lane_lines, lanes=lanes, drivable_areas=drivable, crosswalks=crosswalk,
        wait_lines=wait, traffic_lights=lights, traffic_signs=signs,
        road_boundaries=Polylines.from_list(["rb_l", "rb_r"], [_line(5.4), _line(-5.4)]),
    )  # fmt: skip


def _track(tid: str, cls: str, ts: np.ndarray, xy: np.ndarray, yaw: float, size) -> dict:
    n = len(ts)
    return dict(
        track_id=np.full(n, tid), source_class=np.full(n, cls), timestamps_ns=ts,
        center_m=np.c_[xy, np.full(n, size[2] / 2)], size_m=np.tile(size, (n, 1)),
        orientation=yaw_to_quat(np.full(n, yaw)),
    )  # fmt: skip


def road_scenario(duration_s: float = 10.0, rate_hz: float = 10.0) -> Scenario:
    t_s = np.arange(0.0, duration_s + 1e-9, 1.0 / rate_hz)
    ts = (1_000 * NS + np.round(t_s * NS)).astype(np.int64)
    ego_xyz = np.c_[10.0 * t_s, np.zeros_like(t_s), np.zeros_like(t_s)]
    ego = EgoTrajectory(ts, SE3(yaw_to_matrix(np.zeros_like(t_s)), ego_xyz))
    tracks = [
        _track("lead", "vehicle.car", ts, np.c_[30.0 + 10.0 * t_s, np.zeros_like(t_s)], 0.0, (4.5, 1.9, 1.6)),
        _track("oncoming", "Car", ts, np.c_[200.0 - 12.0 * t_s, np.full_like(t_s, -3.5)], np.pi, (4.6, 1.9, 1.5)),
        _track("ped", "pedestrian", ts, np.c_[50.0 + 1.2 * t_s, 7.0 + 0.02 * t_s**2], 0.0, (0.6, 0.6, 1.75)),
    ]
    agents = AgentTracks.from_unsorted(*(np.concatenate([t[k] for t in tracks]) for k in AgentTracks._fields()))
    lights = TrafficLightStates.from_unsorted(
        ["L1", "L1", "L1"], ts[0] + np.array([0, 3, 8]) * NS, ["red", "green", "yellow"]
    )
    return Scenario("road", cosmos_rig(64, 36), ego, agents, road_map(), lights, {"source": "test"})


def fingerprint(obj, _seen=None) -> str:
    """Hash of every numpy array reachable from a scenario (dataclasses, tuples, dicts)."""
    import dataclasses

    h = hashlib.sha256()

    def walk(x):
        if isinstance(x, np.ndarray):
            h.update(str((x.dtype, x.shape)).encode())
            h.update(np.ascontiguousarray(x).tobytes())
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            for f in dataclasses.fields(x):
                h.update(f.name.encode())
                walk(getattr(x, f.name))
        elif isinstance(x, dict):
            for k in sorted(x, key=str):
                h.update(str(k).encode())
                walk(x[k])
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        else:
            h.update(repr(x).encode())

    walk(obj)
    return h.hexdigest()


def shares_writable_memory(a, b) -> bool:
    """True if any writable array of `b` shares memory with an array of `a`.

    The camera rig is skipped: edits never touch it and pass the same (frozen) rig object on;
    its cameras keep private lazily derived caches.
    """
    import dataclasses

    def arrays(x, out):
        if isinstance(x, np.ndarray):
            out.append(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            for f in dataclasses.fields(x):
                if f.name != "rig":
                    arrays(getattr(x, f.name), out)
        elif isinstance(x, (list, tuple)):
            for v in x:
                arrays(v, out)
        elif isinstance(x, dict):
            for v in x.values():
                arrays(v, out)
        return out

    old = arrays(a, [])
    return any(arr.flags.writeable and any(np.shares_memory(arr, o) for o in old) for arr in arrays(b, []))


def test_road_scenario_is_consistent():
    scn = road_scenario()
    assert scn.duration_s == 10.0
    assert set(scn.agents.track_ids) == {"lead", "oncoming", "ped"}
    assert scn.map.element_counts()["lanes"] == 3
    assert fingerprint(scn) == fingerprint(road_scenario())
