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
def sample():
    from avsim.sample import make_sample_scenario

    return make_sample_scenario(seed=0)


def _lane_at(scenario, xy, yaw) -> str:
    found = routes.nearest_lane(scenario.map, xy, yaw, max_heading_diff_rad=np.deg2rad(30))
    return str(scenario.map.lanes.ids[found[0]])


SAMPLE_OPS = {
    "add_route": lambda s: ops_agents.add_agent_route(s, "bus", "Bus", [-60.0, -1.75], routes.SpeedProfile.constant(8.0), heading_rad=0.0, turns=("left",)),
    "add_waypoints": lambda s: ops_agents.add_agent_waypoints(s, "walker", "Pedestrian", [2, 8], [[10.5, -30], [10.5, -20]]),
    "remove": lambda s: ops_agents.remove_agents(s, ["car_041"]),
    "replace": lambda s: ops_agents.replace_agents(s, ["car_041"], "Truck", (9.0, 2.5, 3.4)),
    "shift": lambda s: ops_agents.shift_agents(s, ["car_042"], dt_s=1.0),
    "scale_speed": lambda s: ops_agents.scale_speed(s, ["car_042"], 0.8),
    "mirror": lambda s: ops_agents.mirror_agents(s, ["car_025"]),
    "perturb": lambda s: ops_agents.perturb_agents(s, ["car_042"], 0.2),
    "follow": lambda s: ops_agents.follow_agent(s, "tailgater", "car_042", 1.2),
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


def test_every_op_on_the_sample(sample):
    before = fingerprint(sample)
    for name, op in SAMPLE_OPS.items():
        out = op(sample)
        assert fingerprint(out) != before, name
        assert not shares_writable_memory(sample, out), name
    assert fingerprint(sample) == before


def test_sample_is_clean_and_lights_are_known(sample):
    assert validate_scenario(sample) == []
    assert len(light_lanes(sample)) == 8  # from metadata["traffic_light_lanes"]


def test_green_for_crossing_approaches_is_a_conflict(sample):
    bad = ops_lights.set_light_states(sample, ["light_E_through_right", "light_S_left_through"], [(0.0, "green")])
    conflicts = [f for f in validate_scenario(bad) if f.kind == "light_conflict"]
    assert ("light_E_through_right", "light_S_left_through") in {f.ids for f in conflicts}
    assert min(f.time_s for f in conflicts) == 0.0


def test_route_follows_lane_successors(sample):
    out = SAMPLE_OPS["add_route"](sample)
    tr = out.agents.track("bus")
    # starts on the W arm heading east in the inner lane, turns left -> heading north
    assert tr.yaw_rad[0] == pytest.approx(0.0, abs=1e-6)
    assert tr.yaw_rad[-1] == pytest.approx(np.pi / 2, abs=0.05)
    assert [f for f in validate_scenario(out) if "bus" in f.ids and f.kind in ("off_road", "speed", "acceleration")] == []


def test_example_cutin_gives_ten_clean_lane_changes(sample):
    results = apply_edit_file(sample, REPO_ROOT / "docs" / "examples" / "cutin.yaml")
    assert len(results) == 10
    for r in results:
        assert r.new_findings == [], (r.name, [str(f) for _, f in r.new_findings])
        args = {"start": 0.5, "duration": r.params["duration_s"]}
        s = r.scenario
        tr = s.agents.track("cut_in_car")
        t = (tr.timestamps_ns - s.ego.timestamps_ns[0]) / 1e9
        lanes = [_lane_at(s, tr.center_m[k, :2], float(tr.yaw_rad[k])) for k in range(len(tr))]
        before = {lanes[k] for k in np.flatnonzero(t <= args["start"])}
        after = {lanes[k] for k in np.flatnonzero(t >= args["start"] + args["duration"])}
        ego_lane = _lane_at(s, s.ego.world_SE3_ego.translation[0, :2], float(s.ego.world_SE3_ego.yaw_rad[0]))
        assert ego_lane == "S_in_0" and before == {"S_in_1"} and after == {"S_in_0"}, (before, after)
        # it stays behind the stop line (17.5 m before the junction centre) in the cropped clip
        assert (tr.center_m[:, 1] + tr.size_m[:, 0] / 2).max() < -17.5
        # ahead of the ego, bumper to bumper, once it has arrived
        np.testing.assert_array_equal(tr.timestamps_ns, s.ego.timestamps_ns)  # sampled on the ego clock
        ego_y = s.ego.world_SE3_ego.translation[:, 1]
        done = t >= args["start"] + args["duration"]
        gap = tr.center_m[done, 1] - tr.size_m[done, 0] / 2 - (ego_y[done] + 1.385 + 4.87 / 2)
        np.testing.assert_allclose(gap, r.params["gap_m"], atol=0.05)


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
    else:
        assert all(r.new_findings == [] for r in results), [(r.name, [str(f) for _, f in r.new_findings]) for r in results]
    if name == "ten_speeds":
        assert [round(r.scenario.duration_s, 3) for r in results[:2]] == [40.0, round(20 / 0.6, 3)]
    if name == "pedestrian_stepout":
        t0 = [int(r.scenario.agents.track("stepping_ped").timestamps_ns[0] - sample.ego.timestamps_ns[0]) for r in results]
        assert t0 == [2_000_000_000, 3_000_000_000, 4_000_000_000]
