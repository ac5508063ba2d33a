"""Every edit on converted real scenes (ScenarioNet nuScenes and Waymo), cut-in validation,
and edit files applied to a real scene."""

from __future__ import annotations

import numpy as np
import pytest
from test_edit_helpers import fingerprint, shares_writable_memory

from avsim.core.errors import AvsimValueError
from avsim.edit import ops_agents, ops_ego, ops_lights, ops_map, ops_time, routes
from avsim.edit.editfile import apply_edit_file
from avsim.edit.validate import validate_scenario

SCENES = {
    "nuscenes": ("scenarionet/sd_nuscenes_v1.0-mini_scene-0103.pkl", "nuscenes"),
    "waymo": ("scenarionet/sd_waymo_v1.2_eb4b91b10ca94ff2.pkl", "waymo"),
    # a multi-lane road: scene-0103's ego lane has no same-direction neighbour to cut in from
    "nuscenes_multilane": ("scenarionet/sd_nuscenes_v1.0-mini_scene-0796.pkl", "nuscenes"),
}
_CACHE: dict = {}


def _scene(shared_data, name):
    if name not in _CACHE:
        from avsim.scenario.importers.registry import convert

        rel, rig = SCENES[name]
        _CACHE[name] = convert(shared_data / rel, "scenarionet", rig)
    return _CACHE[name]


def _longest_track(s) -> str:
    ids, counts = np.unique(s.agents.track_id, return_counts=True)
    return str(ids[np.argmax(counts)])


def _ops(s):
    tid = _longest_track(s)
    ego0 = s.ego.world_SE3_ego.translation[0]
    ll_len = s.map.lane_lines.lines.lengths_m
    k_line = int(np.argmax(ll_len))
    line_mask = np.arange(len(ll_len)) == k_line
    ops = {
        "add_waypoints": lambda s: ops_agents.add_agent_waypoints(s, "new", "Pedestrian", [1, 4], [ego0[:2] + [15, 6], ego0[:2] + [15, -6]]),
        "remove": lambda s: ops_agents.remove_agents(s, [tid]),
        "replace": lambda s: ops_agents.replace_agents(s, [tid], "Truck", (8, 2.5, 3.2)),
        "shift": lambda s: ops_agents.shift_agents(s, [tid], dx_m=1.0, dt_s=0.2),
        "scale_speed": lambda s: ops_agents.scale_speed(s, [tid], 1.5),
        "mirror": lambda s: ops_agents.mirror_agents(s, [tid]),
        "perturb": lambda s: ops_agents.perturb_agents(s, [tid], 0.2, seed=3),
        "follow": lambda s: ops_agents.follow_agent(s, "follower", tid, 1.0),
        "restyle": lambda s: ops_map.restyle_lane_lines(s, line_mask, color="YELLOW", style="SOLID_GROUP", s_range_m=(2.0, ll_len[k_line] / 2)),
        "remove_map": lambda s: ops_map.remove_map_elements(s, "lane_lines", line_mask),
        "move_map": lambda s: ops_map.move_map_elements(s, "road_boundaries", np.arange(len(s.map.road_boundaries)) == 0, dy_m=1.0),
        "add_map": lambda s: ops_map.add_map_element(s, "crosswalks", "cw_new", [ego0[:2] + d for d in ([30, -6], [34, -6], [34, 6], [30, 6])]),
        "add_sign": lambda s: ops_map.add_map_element(s, "traffic_signs", "stop_new", center=ego0[:2] + [25, -5]),
        "crop": lambda s: ops_time.crop(s, 2.0, 8.0),
        "resample": lambda s: ops_time.resample(s, 5.0),
        "retime": lambda s: ops_time.retime(s, 0.5),
        "ego_shift": lambda s: ops_ego.shift_ego_lateral(s, -3.0, 2.0, 4.0),
        "ego_waypoints": lambda s: ops_ego.replace_ego_waypoints(s, [0, 5], [ego0[:2], ego0[:2] + [30, 0]]),
    }
    if len(s.lights):
        lid = str(s.lights.light_id[0])
        ops["set_lights"] = lambda s: ops_lights.set_light_states(s, [lid], [(0.0, "red"), (4.0, "green")])
        ops["shift_lights"] = lambda s: ops_lights.shift_lights(s, [lid], 2.0)
    if len(s.map.lanes):
        ops["add_route"] = lambda s: ops_agents.add_agent_route(s, "router", "Car", ego0[:2], routes.SpeedProfile.constant(6.0), float(s.ego.world_SE3_ego.yaw_rad[0]))
        ops["ego_route"] = lambda s: ops_ego.replace_ego_route(s, routes.SpeedProfile.constant(5.0))
    return ops


@pytest.mark.realdata
@pytest.mark.parametrize("scene", sorted(SCENES))
def test_every_op_on_real_scene(shared_data, scene):
    s = _scene(shared_data, scene)
    before = fingerprint(s)
    ops = _ops(s)
    # 18 ops everywhere, 2 route ops (all three maps have lanes), 2 light ops (only Waymo has lights):
    # a converter that dropped lanes or lights would otherwise skip those ops silently
    assert len(ops) == {"nuscenes": 20, "nuscenes_multilane": 20, "waymo": 22}[scene]
    for name, op in ops.items():
        out = op(s)
        assert fingerprint(out) != before, name
        assert not shares_writable_memory(s, out), name
        validate_scenario(out)  # every result is a valid, checkable scenario
    assert fingerprint(s) == before


@pytest.mark.realdata
def test_cut_in_into_real_queue_is_caught(shared_data):
    """Waymo: the ego waits in a queue at a light; a cut-in 14 m ahead lands on queued cars."""
    s = _scene(shared_data, "waymo")
    baseline = {f.key for f in validate_scenario(s)}
    out = ops_agents.cut_in(s, "cutter", 9.0, 3.0, side="left", gap_m=14.0, lead_in_s=2.0, lead_out_s=3.0)
    # the lead-out ends the cutter's track on the road in view: `track_end` (the road model gives Waymo a drivable area)
    new = [f for f in validate_scenario(out) if f.key not in baseline and f.key != ("track_end", ("cutter",))]
    assert new and all(f.kind == "overlap" and "cutter" in f.ids for f in new)
    assert all(7.0 <= f.time_s <= 15.0 for f in new)  # within the cut-in's own span


@pytest.mark.realdata
def test_cut_in_without_an_adjacent_lane_is_refused(shared_data):
    """scene-0103 is one lane per direction: there is no lane beside the ego to cut in from."""
    s = _scene(shared_data, "nuscenes")
    with pytest.raises(AvsimValueError, match="no lane runs beside the ego"):
        ops_agents.cut_in(s, "cutter", 3.0, 3.0, side="right", gap_m=10.0)


@pytest.mark.realdata
def test_cut_in_on_real_scene_passes_validation(shared_data):
    s = _scene(shared_data, "nuscenes_multilane")
    baseline = {f.key for f in validate_scenario(s)}
    t_ego = (s.ego.timestamps_ns - s.ego.timestamps_ns[0]) / 1e9
    moving = t_ego[(s.ego.speed_mps > 2.0) & (t_ego > 2.0) & (t_ego < t_ego[-1] - 6.0)]
    # an author tries a few start times, gaps and sides; one must give a clean cut-in
    found = None
    for start in moving[::10]:
        for gap in (10.0, 14.0, 18.0):
            for side in ("left", "right"):
                try:
                    out = ops_agents.cut_in(s, "cutter", float(start), 3.0, side=side, gap_m=gap, lead_in_s=2.0, lead_out_s=3.0)
                except AvsimValueError:
                    continue
                if not [f for f in validate_scenario(out) if f.key not in baseline and f.key != ("track_end", ("cutter",))]:  # lead-out: ends in view
                    found = (float(start), out)
                    break
            if found:
                break
        if found:
            break
    assert found is not None, "no clean cut-in anywhere in the clip"
    start, out = found
    tr = out.agents.track("cutter")
    ref = routes.dedupe_polyline(s.ego.world_SE3_ego.translation[:, :2])
    _, d = routes.world_to_frenet(ref, tr.center_m[:, :2])
    t = (tr.timestamps_ns - s.ego.timestamps_ns[0]) / 1e9
    assert np.abs(d[t <= start]).min() > 2.5  # beside the ego before
    assert np.abs(d[t >= start + 3.0]).max() < 0.3  # in the ego's lane after


@pytest.mark.realdata
def test_edit_file_on_real_scene_twice_is_identical(shared_data, tmp_path):
    from avsim.scenario.io import save_scenario

    s = _scene(shared_data, "nuscenes")
    tid = _longest_track(s)
    edits = tmp_path / "e.yaml"
    edits.write_text(
        "version: 1\nsweep:\n  k: [0.8, 1.2]\nops:\n"
        f"  - op: scale_speed\n    track_id: '{tid}'\n    factor: $k\n"
        "  - op: remove_agents\n    select: {class: Pedestrian, within_m_of_ego: 30}\n"
        "  - op: crop\n    start_s: 1\n    stop_s: 9\n"
    )
    first = apply_edit_file(s, edits)
    second = apply_edit_file(s, edits)
    for a, b in zip(first, second):
        save_scenario(a.scenario, tmp_path / "a" / a.name)
        save_scenario(b.scenario, tmp_path / "b" / b.name)
        for f in sorted((tmp_path / "a" / a.name).iterdir()):
            assert f.read_bytes() == (tmp_path / "b" / b.name / f.name).read_bytes(), f.name
    assert [r.name.rsplit("-", 1)[0] for r in first] == ["k-0.8", "k-1.2"]
