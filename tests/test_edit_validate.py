"""Scenario validation: each check finds what it should, with the right time and ids."""

from __future__ import annotations

import numpy as np
import pytest
from test_edit_helpers import NS, road_scenario

from avsim.core.lights import TrafficLightStates
from avsim.edit import ops_agents, ops_lights, ops_map
from avsim.edit.common import build_agents, columns
from avsim.edit.validate import ValidationConfig, box_penetration_m, light_lanes, validate_scenario


def _kinds(findings):
    return [(f.kind, f.ids) for f in findings]


def test_clean_scene_has_no_findings():
    assert validate_scenario(road_scenario()) == []


def test_head_on_overlap_reported_with_time_and_ids():
    scn = road_scenario()
    # lead: x = 30 + 10 t; rammer: x = 100 - 10 t; half lengths 2.25 + 2.3 = 4.55 m (tol 0.05 m)
    scn = ops_agents.add_agent_waypoints(scn, "rammer", "Car", [0, 10], [[100, 0], [0, 0]], size_m=(4.6, 1.9, 1.5))
    findings = [f for f in validate_scenario(scn) if f.kind == "overlap"]
    first = findings[0]
    assert first.ids == ("lead", "rammer")
    assert first.time_s == pytest.approx(3.3)
    assert "overlap" in first.reason and "from 3.30" in first.reason


def test_overlap_tolerance_allows_touching():
    scn = road_scenario()
    # a car exactly beside the lead, boxes touching (1.9 m wide, centres 1.9 m apart)
    cols = columns(scn.agents.track("lead"))
    cols["track_id"][:] = "twin"
    cols["center_m"][:, 1] += 1.9
    both = scn.replace(agents=build_agents({k: np.concatenate([columns(scn.agents)[k], cols[k]]) for k in cols}))
    assert not [f for f in validate_scenario(both) if f.kind == "overlap"]
    cols["center_m"][:, 1] -= 0.2
    both = scn.replace(agents=build_agents({k: np.concatenate([columns(scn.agents)[k], cols[k]]) for k in cols}))
    assert ("overlap", ("lead", "twin")) in _kinds(validate_scenario(both))


def test_penetration_of_rotated_boxes():
    # a unit square and the same square rotated 45 deg, centres 1.2 m apart along x
    d = box_penetration_m(np.array([[0.0, 0.0]]), np.array([0.0]), np.array([[1.0, 1.0]]),
                          np.array([[1.2, 0.0]]), np.array([np.pi / 4]), np.array([[1.0, 1.0]]))  # fmt: skip
    assert d[0] == pytest.approx(0.5 + np.sqrt(0.5) - 1.2)
    d = box_penetration_m(np.array([[0.0, 0.0]]), np.array([0.0]), np.array([[1.0, 1.0]]),
                          np.array([[1.3, 0.0]]), np.array([np.pi / 4]), np.array([[1.0, 1.0]]))  # fmt: skip
    assert d[0] < 0


def test_off_road_vehicle_but_not_pedestrian():
    scn = ops_agents.shift_agents(road_scenario(), ["oncoming"], dy_m=-4.0)
    found = [f for f in validate_scenario(scn) if f.kind == "off_road"]
    assert [f.ids for f in found] == [("oncoming",)]  # the pedestrian on the sidewalk is fine
    assert found[0].time_s == 0.0 and "is outside" in found[0].reason


def test_leaving_drivable_area_mid_clip():
    scn = ops_agents.add_agent_waypoints(road_scenario(), "swerver", "Car", [0, 5, 6], [[60, 3.5], [110, 3.5], [118, 9]])
    found = [f for f in validate_scenario(scn) if f.kind == "off_road"]
    assert found and found[0].ids == ("swerver",) and "leaves" in found[0].reason
    assert 5.0 < found[0].time_s <= 6.0


def test_speed_and_acceleration_limits():
    scn = ops_agents.scale_speed(road_scenario(), ["lead"], 8.0)  # 80 m/s
    assert ("speed", ("lead",)) in _kinds(validate_scenario(scn))
    jerky = ops_agents.add_agent_waypoints(road_scenario(), "jerky", "Pedestrian", [0, 1, 1.5, 3], [[40, 8], [41, 8], [41.1, 8], [40.8, 8]])
    assert ("acceleration", ("jerky",)) not in _kinds(validate_scenario(jerky))
    sprint = ops_agents.add_agent_waypoints(road_scenario(), "sprint", "Pedestrian", [0, 1, 1.2, 3], [[40, 8], [41, 8], [43.4, 8], [45, 8]])
    kinds = _kinds(validate_scenario(sprint))
    assert ("acceleration", ("sprint",)) in kinds and ("speed", ("sprint",)) in kinds


def test_track_gap():
    scn = road_scenario()
    cols = columns(scn.agents)
    t = (cols["timestamps_ns"] - scn.ego.timestamps_ns[0]) / NS
    drop = (cols["track_id"] == "lead") & (t > 3.05) & (t < 4.95)
    gappy = scn.replace(agents=build_agents({k: v[~drop] for k, v in cols.items()}))
    (f,) = [f for f in validate_scenario(gappy) if f.kind == "track_gap"]
    assert f.ids == ("lead",) and f.time_s == pytest.approx(3.0) and "2.00 s" in f.reason


def _crossing_lights(scn, metadata: bool):
    """Add a crossing road's light: lane 'lane_cross' heads +y and ends at (150, -10)."""
    from avsim.maps import Lanes, Polylines

    lanes = scn.map.lanes
    cross = np.array([[150.0, -60, 0], [150.0, -10, 0]])
    new_lanes = Lanes(
        np.r_[lanes.ids, ["lane_cross"]],
        Polylines.from_list(np.r_[lanes.left.ids, ["d"]], [*lanes.left, cross - [1.75, 0, 0]]),
        Polylines.from_list(np.r_[lanes.right.ids, ["d"]], [*lanes.right, cross + [1.75, 0, 0]]),
        Polylines.from_list(np.r_[lanes.centre.ids, ["d"]], [*lanes.centre, cross]),
    )
    scn = scn.replace(map=scn.map.replace(lanes=new_lanes))
    scn = ops_map.add_map_element(scn, "traffic_lights", "L_cross", center=[150, 5, 5], yaw_rad=-np.pi / 2)
    scn = ops_lights.set_light_states(scn, ["L_cross"], [(0.0, "green"), (3.0, "red")])
    if metadata:
        scn = scn.replace(metadata={**scn.metadata, "traffic_light_lanes": {"L1": ["lane_ego"], "L_cross": ["lane_cross"]}})
    return scn


def test_light_conflict_from_metadata():
    scn = _crossing_lights(road_scenario(), metadata=True)
    assert light_lanes(scn) == {"L1": [0], "L_cross": [3]}
    # L1: red 0-3, green 3-8; L_cross: green 0-3, red after -> no conflict
    assert not [f for f in validate_scenario(scn) if f.kind == "light_conflict"]
    bad = ops_lights.shift_lights(scn, ["L1"], -1.0)  # L1 turns green at 2 s while L_cross is green
    (f,) = [f for f in validate_scenario(bad) if f.kind == "light_conflict"]
    assert f.ids == ("L1", "L_cross") and f.time_s == pytest.approx(2.0)


def test_light_lanes_from_geometry():
    scn = _crossing_lights(road_scenario(), metadata=False)
    # L_cross hangs 15 m beyond the end of lane_cross, right over it
    assert light_lanes(scn) == {"L_cross": [3]}


def test_findings_are_sorted_and_serialisable():
    scn = ops_agents.shift_agents(road_scenario(), ["lead"], dx_m=-25.0)
    scn = ops_agents.scale_speed(scn, ["oncoming"], 8.0)
    found = validate_scenario(scn, ValidationConfig(sample_rate_hz=5.0))
    assert [f.time_s for f in found] == sorted(f.time_s for f in found)
    d = found[0].to_dict()
    assert set(d) == {"kind", "time_s", "ids", "reason"} and isinstance(d["ids"], list)
    assert str(found[0]).split()[0] == f"{found[0].time_s:.2f}"
    assert TrafficLightStates.empty() is not None
