"""Property tests (hypothesis) for the geometry under the edit tools."""

from __future__ import annotations

import numpy as np
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st
from test_edit_helpers import fingerprint, road_scenario

from avsim.edit import ops_agents, ops_map, routes
from avsim.edit.validate import box_penetration_m

coord = st.floats(-20, 20, allow_nan=False)
angle = st.floats(-np.pi, np.pi, allow_nan=False)
side = st.floats(0.3, 6.0, allow_nan=False)


def _poly(x, y, yaw, l, w):
    c, s = np.cos(yaw), np.sin(yaw)
    local = np.array([[l, w], [l, -w], [-l, -w], [-l, w]]) / 2
    return shapely.Polygon(local @ np.array([[c, s], [-s, c]]) + [x, y])


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(coord, coord, angle, side, side, coord, coord, angle, side, side)
def test_box_penetration_matches_polygon_intersection(x1, y1, a1, l1, w1, x2, y2, a2, l2, w2):
    args = [np.array([[x1, y1]]), np.array([a1]), np.array([[l1, w1]]), np.array([[x2, y2]]), np.array([a2]), np.array([[l2, w2]])]
    d = float(box_penetration_m(*args)[0])
    d_swapped = float(box_penetration_m(*args[3:], *args[:3])[0])
    assert np.isclose(d, d_swapped)
    area = _poly(x1, y1, a1, l1, w1).intersection(_poly(x2, y2, a2, l2, w2)).area
    if d > 1e-6:
        assert area > 0
    if d < -1e-6:
        assert area < 1e-9


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(st.floats(0, 280), st.floats(0.5, 200), st.sampled_from(["SOLID_SINGLE", "SHORT_DASHED_SINGLE", "SOLID_GROUP"]))
def test_restyle_range_keeps_geometry(s0, length, style):
    scn = road_scenario()
    out = ops_map.restyle_lane_lines(scn, np.array([False, True, False, False]), style=style, s_range_m=(s0, s0 + length))
    ll = out.map.lane_lines
    pieces = [k for k, i in enumerate(ll.ids) if str(i).split("@")[0] == "ll_div"]
    assert np.isclose(ll.lines.lengths_m[pieces].sum(), 300.0)
    restyled = [k for k in pieces if ll.style[k] == style]
    assert np.isclose(ll.lines.lengths_m[restyled].sum(), min(length, 300.0 - s0))
    assert fingerprint(scn) == fingerprint(road_scenario())


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(st.floats(-10, 10), st.floats(-10, 10), st.floats(-2, 2), st.floats(0.2, 4.0))
def test_agent_edits_never_touch_the_input(dx, dy, dt, factor):
    scn = road_scenario()
    before = fingerprint(scn)
    ops_agents.shift_agents(scn, ["lead", "ped"], dx_m=dx, dy_m=dy, dt_s=dt)
    ops_agents.scale_speed(scn, ["oncoming"], factor)
    assert fingerprint(scn) == before


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 30), min_size=1, max_size=5), st.floats(0.1, 5))
def test_speed_profile_distance_is_monotonic(speeds, step):
    p = routes.SpeedProfile(np.arange(len(speeds)) * step, np.array(speeds))
    t = np.linspace(0, len(speeds) * step + 2, 50)
    d = p.distance_m(t)
    assert d[0] == 0 and np.all(np.diff(d) >= -1e-9)
