"""Scenario diff (agents, map, lights, ego, time) and the bird's-eye preview frames."""

from __future__ import annotations

import numpy as np
import pytest
from test_edit_helpers import road_scenario

from avsim.edit import ops_agents, ops_ego, ops_lights, ops_map, ops_time
from avsim.edit.diff import diff_scenarios, format_diff, is_identical
from avsim.edit.preview import CLASS_RGB, EGO_RGB, fit_view, preview_frames


@pytest.fixture(scope="module")
def scn():
    return road_scenario()


def test_identical(scn):
    d = diff_scenarios(scn, road_scenario())
    assert is_identical(d) and "no differences" in format_diff(d)


def test_agents_added_removed_moved(scn):
    b = ops_agents.cut_in(scn, "cutter", 2.0, 3.0)
    b = ops_agents.remove_agents(b, ["ped"])
    b = ops_agents.shift_agents(b, ["lead"], dx_m=3.0, dy_m=4.0)
    b = ops_agents.replace_agents(b, ["oncoming"], "Truck")
    d = diff_scenarios(scn, b)
    assert d["agents"]["added"] == ["cutter"] and d["agents"]["removed"] == ["ped"]
    changed = {c["id"]: c for c in d["agents"]["changed"]}
    assert changed["lead"]["max_displacement_m"] == pytest.approx(5.0)
    assert changed["oncoming"]["class"] == ["Car", "Truck"] and changed["oncoming"]["max_displacement_m"] == 0.0
    assert d["agents"]["unchanged"] == 0
    assert not is_identical(d)


def test_time_shifted_track_displacement(scn):
    d = diff_scenarios(scn, ops_agents.shift_agents(scn, ["lead"], dt_s=1.0))
    (c,) = d["agents"]["changed"]
    assert c["max_displacement_m"] == pytest.approx(10.0)  # 10 m/s, one second late
    assert c["span_s"] == [[0.0, 10.0], [1.0, 10.0]]  # compared within the clip


def test_map_and_light_changes(scn):
    b = ops_map.restyle_lane_lines(scn, np.array([False, True, False, False]), style="SOLID_SINGLE", s_range_m=(10, 20))
    b = ops_map.remove_map_elements(b, "crosswalks", np.array([True]))
    b = ops_lights.extend_light_state(b, ["L1"], "red", 0.0, 1.5)
    d = diff_scenarios(scn, b)
    assert d["map"]["crosswalks"] == {"added": [], "removed": ["cw1"], "changed": []}
    ll = d["map"]["lane_lines"]
    assert ll["changed"] == ["ll_div"] and ll["added"] == ["ll_div@10.00m", "ll_div@20.00m"]
    assert ll["types"]["ll_div@10.00m"] == [None, "WHITE SOLID_SINGLE"]
    (light,) = d["lights"]["changed"]
    assert light["id"] == "L1" and light["first_difference_s"] == pytest.approx(3.0)
    text = format_diff(d)
    assert "map crosswalks - cw1" in text and "light ~ L1: differs from 3.00 s" in text


def test_ego_and_time_changes(scn):
    d = diff_scenarios(scn, ops_ego.shift_ego_lateral(scn, 3.5, 2.0, 3.0))
    assert d["ego"]["max_displacement_m"] == pytest.approx(3.5)
    d = diff_scenarios(scn, ops_time.crop(scn, 2.0, 6.0))
    assert d["time"]["b_span_s"] == [2.0, 6.0] and "time: 0..10 s" in format_diff(d)


def _colour_near(img, view, xy, rgb, tol=40):
    u, v = view.px(np.asarray(xy)[None])[0] // 4
    patch = img[max(v - 3, 0) : v + 4, max(u - 3, 0) : u + 4].reshape(-1, 3).astype(int)
    return (np.abs(patch - np.asarray(rgb)).max(axis=1) <= tol).any()


def test_preview_draws_agents_ego_and_panels(scn):
    frames = list(preview_frames(scn, fps=2.0, size_px=256))
    assert len(frames) == 21 and frames[0].shape == (256, 256, 3) and frames[0].dtype == np.uint8
    view = fit_view([scn], 256)
    # lead (a Car) at x = 30 + 10 t: its outline colour at its front edge at t = 0
    assert _colour_near(frames[0], view, (30.0 + 2.25, 0.9), CLASS_RGB["Car"])
    assert _colour_near(frames[0], view, (1.4, 0.0), [int(c * 0.55) for c in EGO_RGB])
    assert not np.array_equal(frames[0], frames[1])  # things move and the clock ticks
    after = ops_agents.remove_agents(scn, ["lead"])
    pair = next(iter(preview_frames(after, before=scn, fps=2.0, size_px=256)))
    assert pair.shape == (256, 512, 3)
    left, right = pair[:, :255], pair[:, 257:]
    assert _colour_near(left, view, (32.25, 0.9), CLASS_RGB["Car"])
    assert not _colour_near(np.pad(right, ((0, 0), (2, 0), (0, 0))), view, (32.25, 0.9), CLASS_RGB["Car"])


def test_before_and_after_panels_read_one_clock(scn, monkeypatch):
    """Issue 55: beside a crop of 2-4 s of its source, one instant reads the same t in both panels
    (the after scenario's clock), not 2.00 s on the left and 0.00 s on the right."""
    from avsim.edit import preview

    after = ops_time.crop(scn, 2.0, 4.0)
    said: list[str] = []
    real = preview.cv2.putText
    monkeypatch.setattr(preview.cv2, "putText", lambda img, text, *a, **k: (said.append(text), real(img, text, *a, **k))[1])
    frames = list(preview_frames(after, before=scn, fps=1.0, size_px=128))
    headings = [t for t in said if t.startswith(("before ", "after ")) and "t =" in t]
    assert len(frames) == 3 and len(headings) == 6
    for k in range(3):
        left, right = headings[2 * k : 2 * k + 2]
        assert left.split("t =")[1].strip() == right.split("t =")[1].strip() == f"{float(k):.2f} s", headings


def test_preview_is_deterministic(scn):
    a = list(preview_frames(scn, fps=1.0, size_px=128))
    b = list(preview_frames(road_scenario(), fps=1.0, size_px=128))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
