"""The embedded sample scenario: determinism, content, and plausible traffic.

Every check reads the generated `Scenario` (map geometry, tracks, light table, metadata), not
the simulator's internals, so the tests hold the sample to what a renderer or an editor sees.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import shapely
from shapely.geometry import LineString, Point, Polygon

from avsim.core.errors import AvsimValueError
from avsim.core.rig import COSMOS_VIEW_NAMES
from avsim.core.trajectory import NS_PER_S
from avsim.scenario.sample import make_sample_scenario

VEHICLE_CLASSES = ("Car", "Truck", "Cyclist")


@pytest.fixture(scope="module")
def scenario():
    return make_sample_scenario(seed=0)


def _arrays(sc) -> dict[str, np.ndarray]:
    """Every array of a scenario by a dotted name (map elements included)."""
    out = {
        "ego.t": sc.ego.timestamps_ns, "ego.T": sc.ego.world_SE3_ego.as_matrix(),
        "lights.id": sc.lights.light_id, "lights.t": sc.lights.timestamps_ns,
        "lights.state": sc.lights.state,
    }
    for f in ("track_id", "source_class", "timestamps_ns", "center_m", "size_m", "orientation"):
        out[f"agents.{f}"] = getattr(sc.agents, f)
    m = sc.map
    for name in ("road_boundaries", "wait_lines", "crosswalks", "road_markings", "poles",
                 "drivable_areas"):
        el = getattr(m, name)
        out[f"map.{name}.points"], out[f"map.{name}.ids"] = el.points_m, el.ids
    for name in ("traffic_signs", "traffic_lights"):
        el = getattr(m, name)
        out[f"map.{name}.center"], out[f"map.{name}.orientation"] = el.center_m, el.orientation
    out["map.lane_lines.points"] = m.lane_lines.lines.points_m
    out["map.lane_lines.types"] = m.lane_lines.lane_types()
    for rail in ("left", "right", "centre"):
        out[f"map.lanes.{rail}"] = getattr(m.lanes, rail).points_m
    return out


def _speeds(sc) -> np.ndarray:
    """Per-row speed (m/s) of the agent tracks by finite differences within each track."""
    a = sc.agents
    speed = np.zeros(len(a))
    for _, rows in a.track_slices():
        c = a.center_m[rows, :2]
        t = a.timestamps_ns[rows] / NS_PER_S
        v = np.linalg.norm(np.gradient(c, t, axis=0), axis=1)
        speed[rows] = v
    return speed


def _front_xy(sc) -> np.ndarray:
    a = sc.agents
    yaw = a.yaw_rad
    return a.center_m[:, :2] + 0.5 * a.size_m[:, :1] * np.stack([np.cos(yaw), np.sin(yaw)], 1)


def _controlled_lanes(sc) -> list[tuple[str, np.ndarray, np.ndarray, float]]:
    """(light id, lane end point (2,), unit direction at the end (2,), lane half width)."""
    lanes = sc.map.lanes
    index = {lid: k for k, lid in enumerate(lanes.ids)}
    out = []
    for light, lane_ids in sc.metadata["traffic_light_lanes"].items():
        for lane_id in lane_ids:
            k = index[lane_id]
            c = lanes.centre[k][:, :2]
            d = c[-1] - c[-2]
            half_w = 0.5 * np.linalg.norm(lanes.left[k][-1, :2] - lanes.right[k][-1, :2])
            out.append((light, c[-1], d / np.linalg.norm(d), half_w))
    return out


# --- determinism and arguments ----------------------------------------------------------------

@pytest.mark.slow
def test_same_seed_gives_identical_arrays(scenario):
    again = make_sample_scenario(seed=0)
    a, b = _arrays(scenario), _arrays(again)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), key
    assert scenario.metadata == again.metadata and scenario.rig == again.rig


@pytest.mark.slow
def test_other_seed_changes_agents_but_not_map(scenario):
    other = make_sample_scenario(seed=1)
    a, b = _arrays(scenario), _arrays(other)
    for key in a:
        if key.startswith("map."):
            assert np.array_equal(a[key], b[key]), key
    assert len(a["agents.center_m"]) != len(b["agents.center_m"]) or not np.array_equal(
        a["agents.center_m"], b["agents.center_m"])
    assert other.scenario_id != scenario.scenario_id


@pytest.mark.parametrize("kwargs", [{"seed": -1}, {"duration_s": 0.0}, {"duration_s": 1e3},
                                    {"duration_s": float("nan")}, {"fps": 0.0},
                                    {"fps": float("inf")}])
def test_bad_arguments_raise(kwargs):
    with pytest.raises(AvsimValueError):
        make_sample_scenario(**kwargs)


def test_short_clip_at_other_rate():
    sc = make_sample_scenario(seed=2, duration_s=2.0, fps=10.0)
    assert sc.duration_s == pytest.approx(2.0)
    assert len(sc.ego.timestamps_ns) == 21 and sc.ego.rate_hz == pytest.approx(10.0)
    assert sc.agents.timestamps_ns.max() == 2 * NS_PER_S


# --- content ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_rates_duration_and_rig(scenario):
    assert scenario.duration_s == pytest.approx(20.0)
    assert scenario.ego.rate_hz == pytest.approx(30.0)
    assert len(scenario.ego.timestamps_ns) == 601 and scenario.ego.timestamps_ns[0] == 0
    steps = np.diff(np.unique(scenario.agents.timestamps_ns))
    assert np.all(steps == NS_PER_S // 10)  # agents at 10 Hz, like real annotations
    assert scenario.rig.names == tuple(COSMOS_VIEW_NAMES) and len(scenario.rig) == 7


def test_agent_counts_and_classes(scenario):
    a = scenario.agents
    classes = {}
    for tid, rows in a.track_slices():
        classes[tid] = a.object_class[rows][0]
    assert len(classes) >= 20
    counts = {c: list(classes.values()).count(c) for c in ("Car", "Truck", "Pedestrian",
                                                            "Cyclist")}
    assert all(n >= 1 for n in counts.values()), counts
    assert counts["Car"] >= 10 and counts["Pedestrian"] >= 4
    sizes = {c: a.size_m[a.object_class == c] for c in counts}
    assert np.all((sizes["Car"][:, 0] > 3.8) & (sizes["Car"][:, 0] < 6.0))
    assert np.all(sizes["Truck"][:, 0] >= 10.0) and np.all(sizes["Truck"][:, 0] <= 12.0)
    assert np.all(sizes["Pedestrian"][:, :2] < 0.8)
    # boxes stand on the flat ground
    assert np.allclose(a.center_m[:, 2], 0.5 * a.size_m[:, 2])


def test_map_content(scenario):
    m = scenario.map
    counts = m.element_counts()
    assert all(n > 0 for n in counts.values()), counts
    types = set(m.lane_lines.lane_types())
    assert {"WHITE SOLID_SINGLE", "WHITE LONG_DASHED_SINGLE", "YELLOW SOLID_GROUP",
            "YELLOW DASHED_SOLID"} <= types
    assert counts["crosswalks"] == 4 and counts["wait_lines"] == 4
    assert counts["traffic_lights"] == 8  # one head per lane group and approach
    # signal heads hang over their lanes from mast arms: 5-6 m up, near a pole
    lights = m.traffic_lights
    assert np.all((lights.center_m[:, 2] > 4.5) & (lights.center_m[:, 2] < 6.5))
    # lane geometry: 3.5 m lanes, every lane end continues into a lane start (connectivity)
    lanes = m.lanes
    widths = [np.linalg.norm(lanes.left[k][0, :2] - lanes.right[k][0, :2])
              for k in range(len(lanes))]
    assert set(np.round(widths, 6)) == {1.5, 3.5}
    starts = np.array([lanes.centre[k][0, :2] for k in range(len(lanes))])
    for lane_id, succ in scenario.metadata["lane_successors"].items():
        end = lanes.centre[list(lanes.ids).index(lane_id)][-1, :2]
        for s in succ:
            assert np.linalg.norm(starts[list(lanes.ids).index(s)] - end) < 1e-6
    # the drivable area contains every lane centre line and crosswalk
    area = Polygon(m.drivable_areas[0][:, :2])
    assert area.is_valid and 9_000 < area.area < 12_000  # two 320 m x 17 m roads
    for k in range(len(lanes)):
        assert area.buffer(1e-6).contains(LineString(lanes.centre[k][:, :2]))
    for k in range(len(m.crosswalks)):
        assert area.buffer(1e-6).contains(Polygon(m.crosswalks[k][:, :2]))


def test_every_controlled_lane_ends_at_a_wait_line(scenario):
    waits = shapely.union_all([LineString(w[:, :2]) for w in scenario.map.wait_lines])
    for _, end, _, _ in _controlled_lanes(scenario):
        assert waits.distance(Point(end)) < 1e-6


# --- signals ----------------------------------------------------------------------------------

def test_lights_cycle_and_crossing_directions_never_both_released(scenario):
    lights = scenario.lights
    allowed_next = {"green": "yellow", "yellow": "red", "red": "green"}
    seen = set()
    for lid in lights.light_ids:
        states = lights.state[lights.light_id == lid]
        assert lights.timestamps_ns[lights.light_id == lid][0] == 0  # known from the start
        for a, b in itertools.pairwise(states):
            assert allowed_next[a] == b, (lid, a, b)
        seen |= {(lid, s) for s in states}
    assert any({(lid, s) for s in ("green", "yellow", "red")} <= seen for lid in lights.light_ids)
    controlled = _controlled_lanes(scenario)
    times = np.arange(0, scenario.end_ns + 1, NS_PER_S // 10)
    for t in times:
        for la, _, da, _ in controlled:
            for lb, _, db, _ in controlled:
                if abs(da @ db) < np.cos(np.radians(45)):  # crossing directions
                    sa, sb = lights.state_at(np.array([la, lb]), int(t))
                    assert sa == "red" or sb == "red", (t, la, lb, sa, sb)


def _stop_line_crossings(sc):
    """(track row index where the front crosses a controlled lane's stop line, light id)."""
    a = sc.agents
    front = _front_xy(sc)
    yaw = a.yaw_rad
    heading = np.stack([np.cos(yaw), np.sin(yaw)], 1)
    out = []
    for light, end, d, half_w in _controlled_lanes(sc):
        along = (front - end) @ d
        lateral = np.abs((front - end) @ np.array([-d[1], d[0]]))
        for _, rows in a.track_slices():
            if a.object_class[rows][0] not in VEHICLE_CLASSES:
                continue
            al, lat, hd = along[rows], lateral[rows], heading[rows] @ d
            cross = np.flatnonzero((al[:-1] < 0) & (al[1:] >= 0) & (lat[1:] < half_w)
                                   & (hd[1:] > np.cos(np.radians(30))))
            out.extend((rows.start + int(i) + 1, light) for i in cross)
    return out


def test_no_vehicle_crosses_a_stop_line_on_red(scenario):
    crossings = _stop_line_crossings(scenario)
    assert len(crossings) >= 5
    for row, light in crossings:
        t = scenario.agents.timestamps_ns[row]
        assert scenario.lights.state_at(np.array([light]), int(t))[0] != "red", (
            scenario.agents.track_id[row], light, t / NS_PER_S)


@pytest.mark.slow
def test_vehicles_wait_at_red_lights(scenario):
    """A vehicle that reaches the last 1.5 m before a red light's wait line comes to a
    standstill there (unless the light turns green within a second), and queues do form."""
    a = scenario.agents
    speed = _speeds(scenario)
    front = _front_xy(scenario)
    t_s = a.timestamps_ns / NS_PER_S
    stopped_at_line = 0
    for light, end, d, half_w in _controlled_lanes(scenario):
        along = (front - end) @ d
        lateral = np.abs((front - end) @ np.array([-d[1], d[0]]))
        red = np.array([scenario.lights.state_at(np.array([light]), int(t))[0] == "red"
                        for t in a.timestamps_ns])
        at_line = red & (along > -1.5) & (along < 0.0) & (lateral < half_w)
        at_line &= np.isin(a.object_class, VEHICLE_CLASSES)
        stopped_at_line += int(np.sum(at_line & (speed < 0.1)))
        for _, rows in a.track_slices():
            run = np.flatnonzero(at_line[rows])
            if run.size == 0 or run[-1] == rows.stop - rows.start - 1:
                continue  # not there, or the clip ends while it is still braking
            first = rows.start + run[0]
            green_soon = scenario.lights.state_at(
                np.array([light]), int(a.timestamps_ns[first] + 1.5 * NS_PER_S))[0] != "red"
            assert green_soon or speed[rows.start + run].min() < 0.1, (
                a.track_id[first], light, t_s[first], speed[rows.start + run].min())
    assert stopped_at_line >= 20  # rows at 10 Hz: vehicles standing there for seconds


# --- ego ---------------------------------------------------------------------------------------

def test_ego_stops_at_red_then_drives_through_the_intersection(scenario):
    ego = scenario.ego
    xy = ego.positions_m[:, :2]
    speed = ego.speed_mps
    assert np.linalg.norm(xy[0]) > 40.0 and np.linalg.norm(xy[-1]) > 17.5
    assert xy[0] @ xy[-1] < 0  # came in on one arm, left on the opposite one
    assert speed.min() < 0.1 and speed[0] > 8.0 and speed[-1] > 5.0
    # it waits at its lane's stop line while red and crosses it on green
    light, end, d, _ = min(_controlled_lanes(scenario),
                           key=lambda c: abs(np.cross(c[2], xy[0] - c[1])))
    yaw = ego.world_SE3_ego.yaw_rad
    front = xy + (scenario.metadata["ego_rear_axle_to_center_m"]
                  + 0.5 * scenario.metadata["ego_size_m"][0]) * np.stack([np.cos(yaw),
                                                                          np.sin(yaw)], 1)
    along = (front - end) @ d
    k = int(np.flatnonzero((along[:-1] < 0) & (along[1:] >= 0))[0]) + 1
    assert scenario.lights.state_at(np.array([light]), int(ego.timestamps_ns[k]))[0] == "green"
    stopped = speed < 0.1
    assert np.any(stopped[:k]) and -3.0 < along[stopped].max() < 0.0


# --- motion ------------------------------------------------------------------------------------

def test_vehicles_follow_lane_centre_lines_and_turn_on_smooth_arcs(scenario):
    a = scenario.agents
    centres = shapely.union_all([LineString(c[:, :2]) for c in scenario.map.lanes.centre])
    vehicles = np.isin(a.object_class, VEHICLE_CLASSES)
    dist = shapely.distance(shapely.points(a.center_m[vehicles, :2]), centres)
    assert dist.max() < 0.1
    speed = _speeds(scenario)
    turned = 0
    for _, rows in a.track_slices():
        if a.object_class[rows][0] not in VEHICLE_CLASSES:
            continue
        yaw = np.unwrap(a.yaw_rad[rows])
        step = np.linalg.norm(np.diff(a.center_m[rows, :2], axis=0), axis=1)
        moving = step > 0.1
        curvature = np.abs(np.diff(yaw))[moving] / step[moving]
        assert curvature.size == 0 or curvature.max() < 1.0 / 11.0  # radius >= 11 m
        turned += int(abs(yaw[-1] - yaw[0]) > np.radians(60))
        assert speed[rows].max() < 16.0
    assert turned >= 2


def test_pedestrians_stay_on_sidewalks_and_crosswalks(scenario):
    a = scenario.agents
    m = scenario.map
    road = Polygon(m.drivable_areas[0][:, :2])
    crossings = shapely.union_all([Polygon(c[:, :2]) for c in m.crosswalks]).buffer(0.3)
    peds = a.object_class == "Pedestrian"
    pts = shapely.points(a.center_m[peds, :2])
    on_road = shapely.contains(road.buffer(-0.3), pts)
    assert not np.any(on_road & ~shapely.contains(crossings, pts))
    assert np.any(on_road)  # somebody does cross
    assert _speeds(scenario)[peds].max() < 2.5


def _boxes_at(sc, agents, t_ns):
    rows = agents.at(int(t_ns))
    boxes = [Polygon(c[:4, :2]) for c in rows.corners_m()]
    names = list(rows.track_id)
    pose = sc.ego.pose_at(np.array([t_ns]))
    l, w, _ = sc.metadata["ego_size_m"]
    off = sc.metadata["ego_rear_axle_to_center_m"]
    local = np.array([[off + l / 2, w / 2, 0], [off - l / 2, w / 2, 0], [off - l / 2, -w / 2, 0],
                      [off + l / 2, -w / 2, 0]])
    boxes.append(Polygon(pose[0].apply(local)[:, :2]))
    names.append("ego")
    return boxes, names


@pytest.mark.slow
@pytest.mark.parametrize("rate_hz", [10.0, 30.0])
def test_no_two_boxes_ever_overlap(scenario, rate_hz):
    """Pairwise oriented-box overlap (ego included) over all frames, at the stored 10 Hz and
    after resampling to the 30 fps render rate."""
    times = scenario.frame_timestamps(rate_hz)
    agents = scenario.agents if rate_hz == 10.0 else scenario.agents.resample(times)
    overlaps = []
    for t in times:
        boxes, names = _boxes_at(scenario, agents, t)
        tree = shapely.STRtree(boxes)
        left, right = tree.query(boxes, predicate="intersects")
        for i, j in zip(left, right):
            if i < j and boxes[i].intersection(boxes[j]).area > 1e-6:
                overlaps.append((t / NS_PER_S, names[i], names[j]))
    assert not overlaps, overlaps[:5]
