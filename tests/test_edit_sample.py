"""Edits on the embedded sample (a signalised four-way intersection): every op, the shipped
cut-in example (ten variants that change lanes in time and pass validation), determinism."""

from __future__ import annotations

import numpy as np
import pytest
from test_edit_helpers import fingerprint, shares_writable_memory

from avsim.edit import ops_agents, ops_ego, ops_lights, ops_map, ops_time, routes
from avsim.edit.editfile import apply_edit_file
from avsim.edit.selectors import Region, select_map_elements
from avsim.edit.validate import light_lanes, validate_scenario

REPO_ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sample(session_sample):
    return session_sample


def _lane_at(scenario, xy, yaw) -> str:
    found = routes.nearest_lane(scenario.map, xy, yaw, max_heading_diff_rad=np.deg2rad(30))
    return str(scenario.map.lanes.ids[found[0]])


def _car_tracks(scenario) -> list:
    return [scenario.agents.track(t) for t in scenario.agents.track_ids if scenario.agents.track(t).source_class[0] == "Car"]


def nearest_car_ahead(scenario) -> str:
    """The car whose centre is nearest ahead of the ego at its first pose (ego frame x > 0)."""
    pose = scenario.ego.world_SE3_ego
    origin, yaw = pose.translation[0, :2], float(pose.yaw_rad[0])
    best = None
    for tr in _car_tracks(scenario):
        k = np.flatnonzero(tr.timestamps_ns == scenario.ego.timestamps_ns[0])
        if len(k):
            d = tr.center_m[k[0], :2] - origin
            ahead = d @ [np.cos(yaw), np.sin(yaw)]
            if ahead > 0 and (best is None or np.hypot(*d) < best[0]):
                best = (float(np.hypot(*d)), str(tr.track_id[0]))
    assert best is not None, "no car ahead of the ego at its first pose"
    return best[1]


def longest_driving_car(scenario) -> str:
    """The car that drives the farthest (so time, speed and noise edits must change it)."""
    return max(_car_tracks(scenario), key=lambda tr: np.linalg.norm(np.diff(tr.center_m[:, :2], axis=0), axis=1).sum()).track_id[0]


def most_turning_car(scenario) -> str:
    """The car whose heading changes the most (a turn, so mirroring must change its path)."""
    def turn(tr):
        return abs(np.angle(np.exp(1j * (float(tr.yaw_rad[-1]) - float(tr.yaw_rad[0])))))
    return max(_car_tracks(scenario), key=turn).track_id[0]


SAMPLE_OPS = {
    "add_route": lambda s: ops_agents.add_agent_route(s, "bus", "Bus", [-60.0, -1.75], routes.SpeedProfile.constant(8.0), heading_rad=0.0, turns=("left",)),
    "add_waypoints": lambda s: ops_agents.add_agent_waypoints(s, "walker", "Pedestrian", [2, 8], [[10.5, -30], [10.5, -20]]),
    "remove": lambda s: ops_agents.remove_agents(s, [nearest_car_ahead(s)]),
    "replace": lambda s: ops_agents.replace_agents(s, [nearest_car_ahead(s)], "Truck", (9.0, 2.5, 3.4)),
    "shift": lambda s: ops_agents.shift_agents(s, [longest_driving_car(s)], dt_s=1.0),
    "scale_speed": lambda s: ops_agents.scale_speed(s, [longest_driving_car(s)], 0.8),
    "mirror": lambda s: ops_agents.mirror_agents(s, [most_turning_car(s)]),
    "perturb": lambda s: ops_agents.perturb_agents(s, [longest_driving_car(s)], 0.2),
    "follow": lambda s: ops_agents.follow_agent(s, "tailgater", longest_driving_car(s), 1.2),
    "cut_in": lambda s: ops_agents.cut_in(s, "cutter", 0.5, 2.0, side="right", gap_m=3.0),
    "restyle": lambda s: ops_map.restyle_lane_lines(s, np.asarray(s.map.lane_lines.ids) == s.map.lane_lines.ids[0], style="SOLID_SINGLE", s_range_m=(5.0, 25.0)),
    "remove_crosswalks": lambda s: ops_map.remove_map_elements(s, "crosswalks", select_map_elements(s.map, "crosswalks", region=Region(center_xy=(0, -15), radius_m=5))),
    "move_signs": lambda s: ops_map.move_map_elements(s, "traffic_signs", np.arange(len(s.map.traffic_signs)) == 0, dx_m=1.0),
    "add_wait_line": lambda s: ops_map.add_map_element(s, "wait_lines", "stop_extra", [[0.2, -40], [3.5, -40]]),
    "set_lights": lambda s: ops_lights.set_light_states(s, ["light_S_left_through"], [(0.0, "green")]),
    "extend_red": lambda s: ops_lights.extend_light_state(s, ["light_S_left_through", "light_S_through_right"], "red", 5.0, 3.0),
    "crop": lambda s: ops_time.crop(s, 2.0, 12.0),
    "resample": lambda s: ops_time.resample(s, 10.0),
    "retime": lambda s: ops_time.retime(s, 1.25),
    "ego_shift": lambda s: ops_ego.shift_ego_lateral(s, -3.5, 0.5, 2.5),
    "ego_route": lambda s: ops_ego.replace_ego_route(s, routes.SpeedProfile.constant(9.0), turns=("right",)),
}


@pytest.mark.slow
def test_track_picks_are_meaningful(sample):
    """The ops above pick their tracks by property, so sample changes cannot silently empty them."""
    ahead, mover, turner = nearest_car_ahead(sample), longest_driving_car(sample), most_turning_car(sample)
    for tid in (ahead, mover, turner):
        assert tid in set(sample.agents.track_ids)
    tr = sample.agents.track(mover)
    assert np.linalg.norm(tr.center_m[-1, :2] - tr.center_m[0, :2]) > 20.0  # it really drives
    tr = sample.agents.track(turner)
    turn = abs(np.angle(np.exp(1j * (float(tr.yaw_rad[-1]) - float(tr.yaw_rad[0])))))
    assert turn > np.deg2rad(60)  # a real turn, so mirroring moves it


@pytest.mark.slow
def test_every_op_on_the_sample(sample):
    before = fingerprint(sample)
    for name, op in SAMPLE_OPS.items():
        out = op(sample)
        assert fingerprint(out) != before, name
        assert not shares_writable_memory(sample, out), name
    assert fingerprint(sample) == before
    # the agent ops did to their picked track what they say
    ahead, mover = nearest_car_ahead(sample), longest_driving_car(sample)
    assert ahead not in set(SAMPLE_OPS["remove"](sample).agents.track_ids)
    replaced = SAMPLE_OPS["replace"](sample).agents.track(ahead)
    assert set(replaced.source_class) == {"Truck"} and np.allclose(replaced.size_m, (9.0, 2.5, 3.4))
    shifted = SAMPLE_OPS["shift"](sample).agents.track(mover).timestamps_ns
    original = sample.agents.track(mover).timestamps_ns
    np.testing.assert_array_equal(shifted[: len(original)], (original + 1_000_000_000)[: len(shifted)])


def test_sample_is_clean_and_lights_are_known(sample):
    assert validate_scenario(sample) == []
    assert len(light_lanes(sample)) == 8  # from metadata["traffic_light_lanes"]


def test_green_for_crossing_approaches_is_a_conflict(sample):
    bad = ops_lights.set_light_states(sample, ["light_E_through_right", "light_S_left_through"], [(0.0, "green")])
    conflicts = [f for f in validate_scenario(bad) if f.kind == "light_conflict"]
    assert ("light_E_through_right", "light_S_left_through") in {f.ids for f in conflicts}
    assert min(f.time_s for f in conflicts) == 0.0


@pytest.mark.slow
def test_route_follows_lane_successors(sample):
    out = SAMPLE_OPS["add_route"](sample)
    tr = out.agents.track("bus")
    # starts on the W arm heading east in the inner lane, turns left -> heading north
    assert tr.yaw_rad[0] == pytest.approx(0.0, abs=1e-6)
    assert tr.yaw_rad[-1] == pytest.approx(np.pi / 2, abs=0.05)
    assert [f for f in validate_scenario(out) if "bus" in f.ids and f.kind in ("off_road", "speed", "acceleration")] == []


@pytest.mark.slow
def test_example_cutin_gives_ten_clean_lane_changes(sample):
    results = apply_edit_file(sample, REPO_ROOT / "docs" / "examples" / "cutin.yaml")
    assert len(results) == 10
    for r in results:
        assert r.new_findings == [], (r.name, [str(f) for _, f in r.new_findings])
        start, end = 1.0, 1.0 + r.params["duration_s"]
        s = r.scenario
        t_ego = (s.ego.timestamps_ns - s.ego.timestamps_ns[0]) / 1e9
        # cropped to the sample's 16-20 s: one 121-frame chunk, the ego moving through
        assert len(t_ego) == 121 and t_ego[-1] == pytest.approx(4.0)
        assert s.ego.timestamps_ns[0] - sample.ego.timestamps_ns[0] == 16_000_000_000
        ego_xy = s.ego.world_SE3_ego.translation[:, :2]
        ego_speed = np.linalg.norm(np.diff(ego_xy, axis=0), axis=1) / np.diff(t_ego)
        assert ego_speed.min() > 5.0
        tr = s.agents.track("cut_in_car")
        t = (tr.timestamps_ns - s.ego.timestamps_ns[0]) / 1e9
        lanes = [_lane_at(s, tr.center_m[k, :2], float(tr.yaw_rad[k])) for k in range(len(tr))]
        at_start = {lanes[k] for k in np.flatnonzero((t >= start - 0.3) & (t <= start))}
        after = {lanes[k] for k in np.flatnonzero(t >= end)}
        k_end = int(np.flatnonzero(t_ego >= end)[0])
        ego_lane = _lane_at(s, ego_xy[k_end], float(s.ego.world_SE3_ego.yaw_rad[k_end]))
        assert ego_lane == "N_out_0" and at_start == {"N_out_1"} and after == {"N_out_0"}, (at_start, after)
        # the lane change happens past the junction: north of the N stop line (17.5 m from the centre)
        assert (tr.center_m[t >= start, 1] - tr.size_m[t >= start, 0] / 2).min() > 17.5
        # ahead of the ego, bumper to bumper, once it has arrived
        np.testing.assert_array_equal(tr.timestamps_ns, s.ego.timestamps_ns)  # sampled on the ego clock
        ego_y = ego_xy[:, 1]
        done = t >= end
        gap = tr.center_m[done, 1] - tr.size_m[done, 0] / 2 - (ego_y[done] + 1.385 + 4.87 / 2)
        np.testing.assert_allclose(gap, r.params["gap_m"], atol=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("name,count", [("pedestrian_stepout", 3), ("red_longer", 3), ("repaint_lane", 1), ("ten_speeds", 10)])
def test_other_examples_apply_cleanly(sample, name, count):
    results = apply_edit_file(sample, REPO_ROOT / "docs" / "examples" / f"{name}.yaml")
    assert len(results) == count
    if name == "ten_speeds":
        # slowing down never adds findings; speeding up scales accelerations by factor^2, and
        # validation may report the sample's liveliest road users (that is its job)
        for r in results:
            assert r.params["factor"] > 1 or r.new_findings == [], r.name
            assert {f.kind for _, f in r.new_findings} <= {"speed", "acceleration"}, r.name
    elif name in ("red_longer", "pedestrian_stepout"):
        # the variants break a traffic rule on purpose: the ego runs the held red light; the
        # pedestrian steps out between queued cars, away from the crosswalk (tests/test_rules.py)
        expected = [("red_light", ("ego", "S_in_0"))] if name == "red_longer" else [("jaywalking", "stepping_ped")]
        for r in results:
            got = [(f.kind, f.ids) if name == "red_longer" else (f.kind, f.ids[0]) for _, f in r.new_findings]
            assert got == expected, (r.name, [str(f) for _, f in r.new_findings])
    else:
        assert all(r.new_findings == [] for r in results), [(r.name, [str(f) for _, f in r.new_findings]) for r in results]
    if name == "ten_speeds":
        assert [round(r.scenario.duration_s, 3) for r in results[:2]] == [40.0, round(20 / 0.6, 3)]
    if name == "pedestrian_stepout":
        t0 = [int(r.scenario.agents.track("stepping_ped").timestamps_ns[0] - sample.ego.timestamps_ns[0]) for r in results]
        assert t0 == [2_000_000_000, 3_000_000_000, 4_000_000_000]
        # it crosses the right lane (x 3.5-7 m) where the queue leaves a gap: no car there
        ped = results[0].scenario.agents.track("stepping_ped")
        assert ped.center_m[:, 0].max() > 7.0 and ped.center_m[:, 0].min() < 3.9
