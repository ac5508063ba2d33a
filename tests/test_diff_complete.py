"""`avsim diff` lists everything present in only one clip (also what a crop or time change
removed, over its whole span) and has a --summary form with counts per kind."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_edit_helpers import road_scenario

from avsim.edit import ops_agents, ops_map, ops_time
from avsim.edit.diff import diff_scenarios, diff_summary, format_diff, is_identical


@pytest.fixture(scope="module")
def scn():
    """The road scenario plus a pedestrian seen only from 7 to 9 s."""
    s = road_scenario()
    return ops_agents.add_agent_waypoints(s, "late_ped", "Pedestrian", [7.0, 9.0], np.array([[60.0, 8.0], [61.0, 8.0]]))


def test_crop_lists_the_tracks_it_removed_with_their_spans(scn):
    cropped = ops_time.crop(scn, 2.0, 6.0)
    d = diff_scenarios(scn, cropped)
    assert d["agents"]["removed"] == ["late_ped"] and d["agents"]["added"] == []
    assert d["agents"]["spans_s"] == {"late_ped": [7.0, 9.0]}
    # tracks in both are compared over the common span only: the crop changes none of them
    assert d["agents"]["changed"] == [] and d["agents"]["unchanged"] == 3
    text = format_diff(d)
    assert "agent - late_ped (7.00..9.00 s)" in text and "time: 0..10 s" in text
    back = diff_scenarios(cropped, scn)  # B longer than A: the track is added, times from A's start (2 s)
    assert back["agents"]["added"] == ["late_ped"] and back["agents"]["spans_s"] == {"late_ped": [5.0, 7.0]}


def test_time_shift_out_of_the_clip_is_a_removal(scn):
    # crop to 0-5 s: late_ped is gone; shift everything else within the clip: changes only
    b = ops_agents.shift_agents(ops_time.crop(scn, 0.0, 5.0), ["lead"], dt_s=1.0)
    d = diff_scenarios(scn, b)
    assert d["agents"]["removed"] == ["late_ped"]
    assert [c["id"] for c in d["agents"]["changed"]] == ["lead"]


def test_every_map_element_is_listed(scn):
    b = ops_map.remove_map_elements(scn, "crosswalks", np.array([True]))
    b = ops_map.add_map_element(b, "crosswalks", "cw_new", [[70, -6], [74, -6], [74, 6], [70, 6]])
    d = diff_scenarios(scn, b)
    assert d["map"]["crosswalks"] == {"added": ["cw_new"], "removed": ["cw1"], "changed": []}
    text = format_diff(d)
    assert "map crosswalks + cw_new" in text and "map crosswalks - cw1" in text


def test_summary_counts_per_kind(scn):
    b = ops_agents.remove_agents(ops_time.crop(scn, 2.0, 6.0), ["ped"])
    b = ops_agents.shift_agents(b, ["lead"], dy_m=1.0)
    b = ops_map.remove_map_elements(b, "crosswalks", np.array([True]))
    d = diff_scenarios(scn, b)
    c = diff_summary(d)
    assert c["agents"] == {"added": 0, "removed": 2, "changed": 1, "unchanged": 1}
    assert c["map"] == {"crosswalks": {"added": 0, "removed": 1, "changed": 0}}
    assert c["time_changed"] and c["lights"] == {"added": 0, "removed": 0, "changed": 0}
    text = format_diff(d, summary=True)
    assert "agents: +0 -2 ~1 (1 unchanged)" in text and "map crosswalks: +0 -1 ~0" in text
    assert "late_ped" not in text  # counts only
    same = diff_scenarios(scn, scn)
    assert is_identical(same) and format_diff(same, summary=True).endswith("no differences")


def test_diff_cli_summary(tmp_path, capsys, scn):
    from avsim.cli import main
    from avsim.scenario.io import save_scenario

    a, b = tmp_path / "a", tmp_path / "b"
    save_scenario(scn, a)
    save_scenario(ops_time.crop(scn, 2.0, 6.0), b)
    assert main(["diff", str(a), str(b)]) == 0
    assert "agent - late_ped (7.00..9.00 s)" in capsys.readouterr().out
    assert main(["diff", str(a), str(b), "--summary"]) == 0
    assert "agents: +0 -1 ~0 (3 unchanged)" in capsys.readouterr().out
    assert main(["diff", str(a), str(b), "--summary", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["agents"]["removed"] == 1 and doc["time_changed"] is True
