"""Traffic-rule checks of `avsim validate` (avsim.edit.rules): each rule broken and kept, on the
embedded sample and, where the data has what the rule needs, on converted real scenes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from avsim.edit import ops_agents, ops_lights, ops_map
from avsim.edit.editfile import apply_edit_file
from avsim.edit.validate import ValidationConfig, validate_scenario
from avsim.edit.validation_inputs import RULE_KINDS

REPO_ROOT = Path(__file__).resolve().parents[1]
SN_WAYMO = "scenarionet/sd_waymo_v1.2_eb4b91b10ca94ff2.pkl"


@pytest.fixture(scope="module")
def sample(session_sample):
    return session_sample


def _rule(scenario, kind, config=None):
    return [f for f in validate_scenario(scenario, config) if f.kind == kind]


def _car(scenario, tid, waypoints):
    """Add a car through [t_s, x, y] waypoints."""
    wp = np.asarray(waypoints, dtype=np.float64)
    return ops_agents.add_agent_waypoints(scenario, tid, "Car", wp[:, 0], wp[:, 1:])


@pytest.mark.slow
def test_sample_obeys_every_rule(sample):
    assert not [f for f in validate_scenario(sample) if f.kind in RULE_KINDS]


# ----------------------------------------------------------------------------- red_light
def test_red_longer_example_makes_the_ego_run_the_red(sample):
    results = apply_edit_file(sample, REPO_ROOT / "docs" / "examples" / "red_longer.yaml")
    for r in results:
        (f,) = [f for _, f in r.new_findings]
        assert f.kind == "red_light" and f.ids == ("ego", "S_in_0")
        # the ego's front (4.87 m box, centre 1.385 m ahead of the rear axle) passes y = -17.5 at 10.9 s
        assert f.time_s == pytest.approx(10.9) and f.end_s == pytest.approx(10.9)
        assert "light_S_left_through is red" in f.reason


def test_yellow_is_not_red(sample):
    yellow = ops_lights.set_light_states(sample, ["light_S_left_through"], [(0.0, "red"), (10.0, "yellow"), (12.0, "green")])
    assert _rule(yellow, "red_light") == []
    red = ops_lights.set_light_states(sample, ["light_S_left_through"], [(0.0, "red"), (12.0, "green")])
    assert [f.ids for f in _rule(red, "red_light")] == [("ego", "S_in_0")]


def test_every_light_red_catches_every_crossing(sample):
    all_red = ops_lights.set_light_states(sample, sorted(set(sample.lights.light_id)), [(0.0, "red")])
    found = _rule(all_red, "red_light")
    assert ("ego", "S_in_0") in {f.ids for f in found} and len(found) >= 5
    assert all(f.ids[1] in {"E_in_0", "E_in_1", "W_in_1", "N_in_1", "S_in_0", "S_in_bike"} for f in found)
    assert _rule(all_red, "red_light", ValidationConfig(rule_checks=("wrong_way",))) == []


@pytest.mark.slow
def test_right_turn_on_red_after_a_stop(sample):
    # let light_S_through_right control the right-turn connector from its stop point (as Waymo does)
    meta = {**sample.metadata, "traffic_light_lanes": {**sample.metadata["traffic_light_lanes"],
                                                       "light_S_through_right": ["S_in_1__right"]},
            "traffic_light_stop_points_m": {"light_S_through_right": [5.25, -17.5, 0.0]}}  # fmt: skip
    scn = dataclasses.replace(sample, metadata=meta)
    k = list(scn.map.lanes.ids).index("S_in_1__right")
    turn = np.asarray(scn.map.lanes.centre[k])[1:, :2]  # from just past the stop point, east
    approach = [[0.0, 5.25, -45.0], [3.0, 5.25, -21.0]]
    rolling = _car(scn, "turner", approach + [[3.5 + 0.15 * i, *p] for i, p in enumerate(turn)])
    stopping = _car(scn, "turner", approach + [[5.0, 5.25, -21.0]] + [[5.5 + 0.15 * i, *p] for i, p in enumerate(turn)])
    assert [f.ids for f in _rule(rolling, "red_light")] == [("turner", "S_in_1__right")]  # light red until 10 s
    assert _rule(stopping, "red_light") == []
    strict = ValidationConfig(red_light_right_turn_after_stop=False)
    assert [f.ids for f in _rule(stopping, "red_light", strict)] == [("turner", "S_in_1__right")]


# ----------------------------------------------------------------------------- wrong_way
def test_wrong_way(sample):
    against = _car(sample, "ghost", [[0.0, 5.25, -100.0], [5.0, 5.25, -150.0]])  # southbound in S_in_1
    (f,) = _rule(against, "wrong_way")
    assert f.ids == ("ghost", "S_in_1") and f.time_s == pytest.approx(0.0, abs=0.1) and f.end_s > 4.5
    along = _car(sample, "commuter", [[0.0, 5.25, -150.0], [5.0, 5.25, -100.0]])
    assert _rule(along, "wrong_way") == []
    slow = _car(sample, "reversing", [[0.0, 5.25, -100.0], [5.0, 5.25, -105.0]])  # 1 m/s: under the threshold
    assert _rule(slow, "wrong_way") == []


# ----------------------------------------------------------------------------- speed_limit
def test_speed_limit_from_metadata(sample):
    assert _rule(sample, "speed_limit") == []  # the sample has no limits
    slow_zone = dataclasses.replace(sample, metadata={**sample.metadata, "lane_speed_limits_mps": {"S_in_0": 5.0}})
    found = _rule(slow_zone, "speed_limit")
    assert found and found[0].ids == ("ego", "S_in_0") and found[0].time_s == pytest.approx(0.0, abs=0.1)
    fast_zone = dataclasses.replace(sample, metadata={**sample.metadata, "lane_speed_limits_mps": {"S_in_0": 20.0}})
    assert _rule(fast_zone, "speed_limit") == []


# ----------------------------------------------------------------------------- solid_line_crossing
def test_lane_change_over_solid_but_not_dashed_line(sample):
    # S_in_divider_solid: x = 3.5 for y in [-47.5, -17.5]; dashed south of it
    solid = _car(sample, "weaver", [[0.0, 1.75, -90.0], [4.0, 1.75, -45.0], [5.0, 5.25, -35.0], [6.0, 5.25, -33.0]])
    (f,) = _rule(solid, "solid_line_crossing")
    assert f.ids == ("weaver", "S_in_divider_solid") and 4.0 < f.time_s < 5.0
    dashed = _car(sample, "weaver", [[0.0, 1.75, -150.0], [4.0, 1.75, -110.0], [5.0, 5.25, -100.0], [6.0, 5.25, -90.0]])
    assert _rule(dashed, "solid_line_crossing") == []


def test_double_line_may_be_crossed_from_its_dashed_side_only(sample):
    # S_centre_far (YELLOW DASHED_SOLID) runs south along x = 0: its left (first, solid) copy faces x > 0
    from_solid = _car(sample, "overtaker", [[0.0, 1.75, -150.0], [2.0, 1.75, -130.0], [3.0, -1.75, -120.0], [4.0, -1.75, -110.0]])
    assert [f.ids for f in _rule(from_solid, "solid_line_crossing")] == [("overtaker", "S_centre_far")]
    from_dashed = _car(sample, "overtaker", [[0.0, -1.75, -100.0], [2.0, -1.75, -120.0], [3.0, 1.75, -130.0], [4.0, 1.75, -150.0]])
    assert _rule(from_dashed, "solid_line_crossing") == []


# ----------------------------------------------------------------------------- stop_line
def test_stopped_past_the_stop_line(sample):
    # N_in_1 (x = -5.25) runs south; stop_line_N at y = 17.5; a 4.8 m car stopping with its centre at
    # y = 17.9 has its front 2 m past the line
    over = _car(sample, "eager", [[0.0, -5.25, 60.0], [4.0, -5.25, 17.9], [9.0, -5.25, 17.9]])
    (f,) = _rule(over, "stop_line")
    assert f.ids == ("eager", "stop_line_N") and f.end_s - f.time_s >= 4.0
    behind = _car(sample, "patient", [[0.0, -5.25, 60.0], [4.0, -5.25, 20.5], [9.0, -5.25, 20.5]])
    assert _rule(behind, "stop_line") == []


# ----------------------------------------------------------------------------- jaywalking
@pytest.mark.slow
def test_pedestrian_stepout_example_is_jaywalking(sample):
    results = apply_edit_file(sample, REPO_ROOT / "docs" / "examples" / "pedestrian_stepout.yaml")
    for r in results:
        assert [(f.kind, f.ids[0]) for _, f in r.new_findings] == [("jaywalking", "stepping_ped")], r.name


def test_crossing_at_the_crosswalk_is_not_jaywalking(sample):
    ped = ops_agents.add_agent_waypoints(sample, "walker", "Pedestrian", [0.0, 12.0], np.array([[-12.0, -14.5], [12.0, -14.5]]))
    assert _rule(ped, "jaywalking") == []
    beside = ops_agents.add_agent_waypoints(sample, "walker", "Pedestrian", [0.0, 12.0], np.array([[-12.0, -25.0], [12.0, -25.0]]))
    (f,) = _rule(beside, "jaywalking")
    assert f.ids[0] == "walker" and f.end_s - f.time_s > 5.0


# ----------------------------------------------------------------------------- real scenes
def _convert(shared_data, rel, fmt, rig=None):
    from avsim.scenario.importers.registry import convert

    path = shared_data / rel
    if not path.exists():
        pytest.skip(f"{path} not present")
    return convert(path, fmt, rig)


def test_real_waymo_red_lights(shared_data):
    s = _convert(shared_data, SN_WAYMO, "scenarionet", "waymo")
    # recorded: agent 18 creeps (0.5 m/s) past lane 260's stop point at 1.1 s and agent 5 turns right
    # (lane 262) at 4 m/s without stopping, both while their lights are red
    found = {f.ids: f for f in _rule(s, "red_light")}
    assert set(found) == {("18", "260"), ("5", "262")}
    assert found[("18", "260")].time_s == pytest.approx(1.1, abs=0.05)
    green = ops_lights.set_light_states(s, ["260", "262"], [(0.0, "green")])
    assert _rule(green, "red_light") == []


def test_real_waymo_speed_limits_from_the_source_lanes(shared_data):
    from avsim.scenario.importers.safe_pickle import load_pickle

    s = _convert(shared_data, SN_WAYMO, "scenarionet", "waymo")
    # the importer carries the lanes' speed_limit_mph (exact mph -> m/s) into the metadata
    features = load_pickle(shared_data / SN_WAYMO)["map_features"]
    limits = {str(k): float(f["speed_limit_mph"]) * 0.44704 for k, f in features.items() if f.get("speed_limit_mph")}
    assert len(limits) > 90 and s.metadata["lane_speed_limits_mps"] == pytest.approx(limits, rel=1e-12)
    # recorded: agent 43 drives up to 22.7 m/s (51 mph) in 40 mph lane 193 from 12.7 to 17.3 s
    (f,) = _rule(s, "speed_limit")
    assert f.ids == ("43", "193") and f.time_s == pytest.approx(12.7, abs=0.05) and f.end_s == pytest.approx(17.3, abs=0.05)
    assert _rule(ops_agents.scale_speed(s, ["43"], 0.5), "speed_limit") == []


@pytest.mark.slow
def test_real_waymo_wrong_way_and_jaywalking(shared_data):
    s = _convert(shared_data, SN_WAYMO, "scenarionet", "waymo")
    assert _rule(s, "wrong_way") == []
    k_lane = int(np.argmax(s.map.lanes.centre.lengths_m))
    centre = np.asarray(s.map.lanes.centre[k_lane])[:, :2]
    arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(centre, axis=0), axis=1))]
    keep = np.r_[True, np.diff(arc) > 1e-6]
    keep &= arc <= 8.0 * 15.0  # 8 m/s along (up to 120 m of) the map's longest lane centre line
    centre, t_lane = centre[keep], arc[keep] / 8.0
    along = ops_agents.add_agent_waypoints(s, "shadow", "Car", t_lane, centre)
    ghost = ops_agents.add_agent_waypoints(s, "ghost", "Car", t_lane, centre[::-1])
    assert not [f for f in _rule(along, "wrong_way") if f.ids[0] == "shadow"]
    assert [f.ids[0] for f in _rule(ghost, "wrong_way")] == ["ghost"]
    xy = s.ego.world_SE3_ego.translation[::10, :2]
    t = (s.ego.timestamps_ns[::10] - s.ego.timestamps_ns[0]) / 1e9
    # a pedestrian standing on the ego's road away from crosswalks, or on a crosswalk
    k = len(xy) // 2
    road_ped = ops_agents.add_agent_waypoints(s, "stander", "Pedestrian", [t[k], t[k] + 3], np.array([xy[k], xy[k]]))
    cw = np.asarray(s.map.crosswalks[0])[:, :2].mean(axis=0)
    cw_ped = ops_agents.add_agent_waypoints(s, "stander", "Pedestrian", [t[k], t[k] + 3], np.array([cw, cw]))
    assert [f.ids[0] for f in _rule(road_ped, "jaywalking") if f.ids[0] == "stander"] == ["stander"]
    assert not [f for f in _rule(cw_ped, "jaywalking") if f.ids[0] == "stander"]


def test_real_av2_solid_line_crossing_and_repaint(shared_data):
    logs = sorted((shared_data / "av2" / "sensor").glob("*")) if (shared_data / "av2" / "sensor").exists() else []
    if not logs:
        pytest.skip("no AV2 sensor log in the shared data")
    s = _convert(shared_data, logs[0].relative_to(shared_data), "av2")
    found = {f.ids for f in _rule(s, "solid_line_crossing")}
    # recorded: a vehicle crosses the double yellow 42811329_left (twice, 13.3-14.3 s)
    assert ("b55ff604-ca47-46d3-b622-8b844e241e20", "42811329_left") in found
    mask = np.asarray(s.map.lane_lines.ids) == "42811329_left"
    dashed = ops_map.restyle_lane_lines(s, mask, color="YELLOW", style="LONG_DASHED_SINGLE")
    assert not [f for f in _rule(dashed, "solid_line_crossing") if f.ids[1] == "42811329_left"]


def test_unknown_rule_is_refused():
    from avsim.core.errors import AvsimValueError

    with pytest.raises(AvsimValueError, match="unknown rules"):
        ValidationConfig(rule_checks=("tailgating",))


# ----------------------------------------------------------------------------- CLI
@pytest.mark.e2e
def test_cli_red_longer_variants_report_the_ego_running_the_red(tmp_path, capsys):
    """`avsim sample s && avsim edit s docs/examples/red_longer.yaml v && avsim validate v/*`."""
    import json

    from avsim.cli import main

    s, v = tmp_path / "s", tmp_path / "v"
    assert main(["sample", str(s)]) == 0
    assert main(["edit", str(s), str(REPO_ROOT / "docs" / "examples" / "red_longer.yaml"), str(v)]) == 0
    capsys.readouterr()
    variants = sorted(v.glob("*"))  # what the shell's v/* gives: the variant folders and manifest.json
    assert main(["validate", *map(str, variants)]) == 0
    lines = capsys.readouterr().out.splitlines()
    red = [ln for ln in lines if "red_light" in ln]
    assert len(red) == 3 and all(ln.split()[:4] == ["10.90", "s", "red_light", "ego,"] for ln in red), lines
    heads = [i for i, ln in enumerate(lines) if "finding(s)  [" in ln]  # each scenario's name, its findings under it
    assert [lines[i].split(":")[0] for i in heads] == [f"avsim_sample_seed0__red_plus{k}s" for k in (2, 4, 6)], lines
    assert all("red_light" in lines[i + 1] and lines[i + 1].startswith("  ") for i in heads), lines
    assert lines[-1] == "3 finding(s) in 3 scenarios", lines
    assert main(["validate", *map(str, variants), "--json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert [d["counts"] for d in docs] == [{"red_light": 1}] * 3
    assert docs[0]["findings"][0]["ids"] == ["ego", "S_in_0"] and docs[0]["findings"][0]["end_s"] == 10.9
    assert main(["validate", str(v / "manifest.json")]) == 1  # nothing to validate
