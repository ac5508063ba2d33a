"""Edit operations on the small road scene: semantics, immutability, composition."""

from __future__ import annotations

import numpy as np
import pytest
from test_edit_helpers import NS, fingerprint, road_scenario, shares_writable_memory

from avsim.core.errors import AvsimValueError
from avsim.edit import ops_agents, ops_ego, ops_lights, ops_map, ops_time, routes
from avsim.edit.selectors import AgentSelector, Region, select_agents, select_map_elements
from avsim.edit.validate import validate_scenario


@pytest.fixture(scope="module")
def scn():
    return road_scenario()


def _xy_at(scenario, tid, t_s):
    tr = scenario.agents.track(tid)
    t = (tr.timestamps_ns - scenario.ego.timestamps_ns[0]) / 1e9
    k = int(np.argmin(np.abs(t - t_s)))
    assert abs(t[k] - t_s) < 1e-6, f"{tid} has no row at {t_s}"
    return tr.center_m[k]


OPS = {
    "add_waypoints": lambda s: ops_agents.add_agent_waypoints(s, "new", "Car", [1, 3, 5], [[20, 3.5], [40, 3.5], [60, 3.5]]),
    "add_route": lambda s: ops_agents.add_agent_route(s, "new", "Truck", [10, 3.4], routes.SpeedProfile.constant(8.0), heading_rad=0.0),
    "remove": lambda s: ops_agents.remove_agents(s, ["ped"]),
    "replace": lambda s: ops_agents.replace_agents(s, ["lead"], "Truck", (9.0, 2.5, 3.4)),
    "shift": lambda s: ops_agents.shift_agents(s, ["lead"], dx_m=5.0, dt_s=0.5),
    "scale_speed": lambda s: ops_agents.scale_speed(s, ["oncoming"], 2.0),
    "mirror": lambda s: ops_agents.mirror_agents(s, ["ped"]),
    "perturb": lambda s: ops_agents.perturb_agents(s, ["lead"], 0.3, seed=1),
    "follow": lambda s: ops_agents.follow_agent(s, "follower", "lead", 1.0),
    "cut_in": lambda s: ops_agents.cut_in(s, "cutter", 2.0, 3.0),
    "restyle": lambda s: ops_map.restyle_lane_lines(s, np.array([False, True, False, False]), style="SOLID_SINGLE", s_range_m=(50, 100)),
    "remove_map": lambda s: ops_map.remove_map_elements(s, "crosswalks", np.array([True])),
    "move_map": lambda s: ops_map.move_map_elements(s, "traffic_signs", np.array([True]), dx_m=3.0),
    "add_map": lambda s: ops_map.add_map_element(s, "crosswalks", "cw2", [[150, -5], [153, -5], [153, 5], [150, 5]]),
    "set_lights": lambda s: ops_lights.set_light_states(s, ["L1"], [(0.0, "green"), (6.0, "red")]),
    "shift_lights": lambda s: ops_lights.shift_lights(s, ["L1"], 1.5),
    "extend_light": lambda s: ops_lights.extend_light_state(s, ["L1"], "red", 0.0, 2.0),
    "crop": lambda s: ops_time.crop(s, 2.0, 8.0),
    "resample": lambda s: ops_time.resample(s, 5.0),
    "retime": lambda s: ops_time.retime(s, 2.0),
    "ego_shift": lambda s: ops_ego.shift_ego_lateral(s, 3.5, 2.0, 3.0),
    "ego_waypoints": lambda s: ops_ego.replace_ego_waypoints(s, [0, 10], [[0, 0], [80, 0]]),
    "ego_route": lambda s: ops_ego.replace_ego_route(s, routes.SpeedProfile(np.array([0.0, 5.0]), np.array([5.0, 12.0]))),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_returns_new_scenario_and_leaves_original_untouched(scn, name):
    before = fingerprint(scn)
    out = OPS[name](scn)
    assert out is not scn
    assert fingerprint(scn) == before, "the input scenario was modified"
    assert fingerprint(out) != before, "the edit changed nothing"
    assert not shares_writable_memory(scn, out), "a writable array of the result aliases the input"


def test_edits_compose(scn):
    out = ops_agents.cut_in(scn, "cutter", 2.0, 3.0)
    out = ops_agents.remove_agents(out, ["ped"])
    out = ops_lights.extend_light_state(out, ["L1"], "red", 0.0, 1.0)
    out = ops_time.crop(out, 1.0, 9.0)
    assert set(out.agents.track_ids) == {"cutter", "lead", "oncoming"}
    assert out.duration_s == pytest.approx(8.0)
    # the red phase (0-3 s) now lasts until 4 s; cropped at 1 s the light starts red
    t0 = int(out.ego.timestamps_ns[0])
    assert out.lights.state_at(["L1"], t0)[0] == "red"
    assert out.lights.state_at(["L1"], t0 + int(2.9 * NS))[0] == "red"
    assert out.lights.state_at(["L1"], t0 + int(3.1 * NS))[0] == "green"


def test_add_waypoints_passes_through_waypoints(scn):
    out = OPS["add_waypoints"](scn)
    np.testing.assert_allclose(_xy_at(out, "new", 3.0)[:2], [40, 3.5], atol=1e-9)
    assert _xy_at(out, "new", 3.0)[2] == pytest.approx(0.8)  # half the default car height
    tr = out.agents.track("new")
    assert len(tr) == 41  # 1..5 s at 10 Hz
    np.testing.assert_allclose(tr.yaw_rad, 0.0, atol=1e-9)


def test_add_route_follows_lane_at_speed(scn):
    out = OPS["add_route"](scn)
    tr = out.agents.track("new")
    np.testing.assert_allclose(tr.center_m[:, 1], 3.5, atol=1e-6)  # snapped to the left lane centre
    speed = np.linalg.norm(np.diff(tr.center_m[:, :2], axis=0), axis=1) / 0.1
    np.testing.assert_allclose(speed, 8.0, atol=1e-6)
    assert str(tr.source_class[0]) == "Truck" and tr.size_m[0, 0] == 9.0


def test_speed_profile_distance_is_exact():
    p = routes.SpeedProfile(np.array([0.0, 2.0]), np.array([0.0, 4.0]))  # 2 m/s^2 then 4 m/s
    np.testing.assert_allclose(p.distance_m(np.array([0.0, 1.0, 2.0, 3.0])), [0, 1, 4, 8])


def test_replace_keeps_box_on_ground(scn):
    out = OPS["replace"](scn)
    tr = out.agents.track("lead")
    assert set(tr.source_class) == {"Truck"}
    np.testing.assert_allclose(tr.center_m[:, 2] - tr.size_m[:, 2] / 2, 0.0, atol=1e-9)


def test_shift_in_space_and_time(scn):
    out = OPS["shift"](scn)
    a, b = scn.agents.track("lead"), out.agents.track("lead")
    np.testing.assert_array_equal(b.timestamps_ns, a.timestamps_ns + NS // 2)
    np.testing.assert_allclose(b.center_m[:, 0], a.center_m[:, 0] + 5.0)


def test_scale_speed_doubles_speed(scn):
    out = OPS["scale_speed"](scn)
    tr = out.agents.track("oncoming")
    speed = np.linalg.norm(np.diff(tr.center_m[:, :2], axis=0), axis=1) / 0.1
    np.testing.assert_allclose(speed, 24.0, atol=1e-6)
    assert len(tr) == 51  # it covers its 10 s path in 5 s, then leaves


def test_mirror_turns_left_into_right(scn):
    s = ops_agents.add_agent_waypoints(scn, "turner", "Car", [0, 2, 4], [[0, 3.5], [10, 3.5], [14, 10]])
    out = ops_agents.mirror_agents(s, ["turner"])
    a, b = s.agents.track("turner"), out.agents.track("turner")
    np.testing.assert_allclose(b.center_m[:, 1] - 3.5, -(a.center_m[:, 1] - 3.5), atol=1e-9)
    np.testing.assert_allclose(b.yaw_rad, -a.yaw_rad, atol=1e-9)


def test_perturb_is_seeded_and_bounded(scn):
    a = ops_agents.perturb_agents(scn, ["lead"], 0.3, seed=1)
    b = ops_agents.perturb_agents(scn, ["lead"], 0.3, seed=1)
    c = ops_agents.perturb_agents(scn, ["lead"], 0.3, seed=2)
    assert fingerprint(a) == fingerprint(b) != fingerprint(c)
    d = np.linalg.norm(a.agents.track("lead").center_m - scn.agents.track("lead").center_m, axis=1)
    assert 0 < d.max() < 2.0


def test_follow_keeps_time_gap(scn):
    out = OPS["follow"](scn)
    f, lead = out.agents.track("follower"), out.agents.track("lead")
    # lead drives 10 m/s: 1 s behind is 10 m behind, on the same path
    np.testing.assert_allclose(lead.center_m[20:, 0] - f.center_m[20:, 0], 10.0, atol=1e-6)
    np.testing.assert_allclose(f.center_m[:, 1], 0.0, atol=1e-9)
    assert not [x for x in validate_scenario(out) if "follower" in x.ids]


def test_follow_stopped_leader_keeps_distance(scn):
    s = ops_agents.add_agent_waypoints(scn, "stopper", "Car", [0, 4, 10], [[120, 3.5], [140, 3.5], [140.001, 3.5]])
    out = ops_agents.follow_agent(s, "f", "stopper", 2.0, min_gap_m=2.0)
    gap = out.agents.track("stopper").center_m[-1, 0] - out.agents.track("f").center_m[-1, 0]
    assert gap >= 2.0 + 4.6 - 1e-6


def test_cut_in_changes_lane_within_duration_and_validates(scn):
    start, dur = 2.0, 3.0
    out = ops_agents.cut_in(scn, "cutter", start, dur, side="left", gap_m=12.0)
    tr = out.agents.track("cutter")
    t = (tr.timestamps_ns - out.ego.timestamps_ns[0]) / 1e9
    lane_names = np.asarray(scn.map.lanes.ids)

    def lane_of(k):
        found = routes.nearest_lane(scn.map, tr.center_m[k, :2], float(tr.yaw_rad[k]))
        return str(lane_names[found[0]])

    assert all(lane_of(k) == "lane_left" for k in np.flatnonzero(t <= start))
    assert all(lane_of(k) == "lane_ego" for k in np.flatnonzero(t >= start + dur))
    changed = np.flatnonzero(np.abs(tr.center_m[:, 1] - 3.5) > 0.05)
    assert t[changed[0]] >= start and t[np.flatnonzero(np.abs(tr.center_m[:, 1]) > 0.05)[-1]] <= start + dur
    ego_x = out.ego.world_SE3_ego.translation[:, 0]
    assert np.all(tr.center_m[:, 0] > ego_x)  # ahead of the ego throughout
    # bumper to bumper: ego front = rear axle + 1.4 + 4.8 / 2 (no ego size in metadata), car half length 2.3
    np.testing.assert_allclose(tr.center_m[t >= start + dur, 0] - 2.3 - (ego_x[t >= start + dur] + 1.4 + 2.4), 12.0, atol=1e-6)
    assert validate_scenario(out) == validate_scenario(scn) == []


def test_cut_in_needs_adjacent_lane(scn):
    with pytest.raises(AvsimValueError, match="no lane runs beside the ego on the right"):
        ops_agents.cut_in(scn, "cutter", 2.0, 3.0, side="right")


def test_restyle_range_splits_line(scn):
    out = OPS["restyle"](scn)
    ll = out.map.lane_lines
    ids = list(ll.ids)
    assert ids[:4] == ["ll_left_edge", "ll_div", "ll_div@50.00m", "ll_div@100.00m"]
    types = dict(zip(ids, ll.lane_types()))
    assert types["ll_div"] == types["ll_div@100.00m"] == "WHITE LONG_DASHED_SINGLE"
    assert types["ll_div@50.00m"] == "WHITE SOLID_SINGLE"
    mid = ll.lines[2]
    np.testing.assert_allclose([mid[0, 0], mid[-1, 0]], [0.0, 50.0])  # arc length 50..100 from x = -50
    np.testing.assert_allclose(ll.lines.lengths_m[1:4].sum(), 300.0)


def test_restyle_per_vertex_attributes():
    from avsim.maps import LaneLines, Polylines

    scn = road_scenario()
    ll = scn.map.lane_lines
    m = len(ll.lines.points_m)
    vll = LaneLines(ll.lines, ll.color, ll.style, np.full(m, "WHITE"), np.full(m, "SHORT_DASHED_SINGLE"))
    s = scn.replace(map=scn.map.replace(lane_lines=vll))
    out = ops_map.restyle_lane_lines(s, np.array([True, False, False, False]), color="YELLOW", s_range_m=(100, 200))
    types = dict(zip(out.map.lane_lines.ids, out.map.lane_lines.lane_types()))
    assert types["ll_left_edge@100.00m"] == "YELLOW SHORT_DASHED_SINGLE"
    assert types["ll_left_edge"] == types["ll_left_edge@200.00m"] == "WHITE SHORT_DASHED_SINGLE"
    assert isinstance(out.map.lane_lines.lines, Polylines)


def test_map_remove_move_add(scn):
    mask = select_map_elements(scn.map, "crosswalks", region=Region(center_xy=(102, 0), radius_m=5))
    out = ops_map.remove_map_elements(scn, "crosswalks", mask)
    assert len(out.map.crosswalks) == 0
    out = ops_map.remove_map_elements(scn, "traffic_lights", np.array([True]))
    assert len(out.map.traffic_lights) == 0 and len(out.lights) == 0
    out = OPS["move_map"](scn)
    np.testing.assert_allclose(out.map.traffic_signs.center_m[0], scn.map.traffic_signs.center_m[0] + [3, 0, 0])
    out = ops_map.add_map_element(scn, "traffic_lights", "L2", center=[50, 6], yaw_rad=np.pi)
    assert list(out.map.traffic_lights.ids) == ["L1", "L2"]
    out = ops_map.add_map_element(scn, "wait_lines", "wl2", [[40, 0], [40, 5]])
    assert "wl2" in set(out.map.wait_lines.ids)
    with pytest.raises(AvsimValueError, match="already has"):
        ops_map.add_map_element(scn, "crosswalks", "cw1", [[0, 0], [1, 0], [1, 1]])


def test_light_ops(scn):
    t0 = int(scn.ego.timestamps_ns[0])

    def at(s, t):
        return s.lights.state_at(["L1"], t0 + int(t * NS))[0]

    out = OPS["set_lights"](scn)
    assert [at(out, t) for t in (0, 5.9, 6)] == ["green", "green", "red"]
    out = OPS["shift_lights"](scn)
    assert [at(out, t) for t in (0, 4.4, 4.5, 9.5)] == ["red", "red", "green", "yellow"]
    out = OPS["extend_light"](scn)
    assert [at(out, t) for t in (4.9, 5.0, 10.0)] == ["red", "green", "yellow"]
    with pytest.raises(AvsimValueError, match="unknown traffic light"):
        ops_lights.shift_lights(scn, ["nope"], 1.0)


def test_time_ops(scn):
    out = OPS["crop"](scn)
    assert out.duration_s == pytest.approx(6.0) and len(out.ego) == 61
    assert out.agents.timestamps_ns.min() == out.ego.timestamps_ns[0]
    out = OPS["resample"](scn)
    assert out.ego.rate_hz == pytest.approx(5.0) and len(out.agents.track("lead")) == 51
    out = OPS["retime"](scn)
    assert out.duration_s == pytest.approx(5.0)
    assert out.ego.speed_mps[5] == pytest.approx(20.0)
    with pytest.raises(AvsimValueError, match="outside the scenario"):
        ops_time.crop(scn, 2.0, 30.0)


def test_ego_ops(scn):
    out = OPS["ego_shift"](scn)
    y = out.ego.world_SE3_ego.translation[:, 1]
    assert y[:21].max() == pytest.approx(0.0) and y[50:].min() == pytest.approx(3.5)
    assert np.asarray(out.ego.world_SE3_ego.yaw_rad)[35] > 0.05  # heading turns into the lane change
    out = OPS["ego_route"](scn)
    assert out.ego.speed_mps[-1] == pytest.approx(12.0, abs=1e-6)
    np.testing.assert_allclose(out.ego.world_SE3_ego.translation[:, 1], 0.0, atol=1e-9)
    out = OPS["ego_waypoints"](scn)
    assert out.ego.world_SE3_ego.translation[-1, 0] == pytest.approx(80.0)


def test_selectors(scn):
    assert select_agents(scn, AgentSelector(classes=("Car",))) == ["lead", "oncoming"]
    assert select_agents(scn, AgentSelector(max_distance_from_ego_m=35.0, at_s=0.0)) == ["lead"]
    assert select_agents(scn, AgentSelector(region=Region(box=(40, 5, 70, 10)))) == ["ped"]
    assert select_agents(scn, AgentSelector(region=Region(polygon=((0, -10), (300, -10), (300, -1), (0, -1))))) == ["oncoming"]
    with pytest.raises(AvsimValueError, match="unknown track id"):
        select_agents(scn, AgentSelector(track_ids=("nope",)))
