"""Building blocks of the embedded sample: road geometry, signal plan, overlap test, ego
kinematics, and the native-format round trip."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from shapely.geometry import Polygon

from avsim.scenario.io import load_scenario, save_scenario
from avsim.scenario.sample import (
    build_sample_map,
    make_sample_scenario,
    overlaps,
    roads,
    routes,
    run_sample_traffic,
    signals,
    traffic,
)


def _direction(points: np.ndarray, at_end: bool) -> np.ndarray:
    d = points[-1] - points[-2] if at_end else points[1] - points[0]
    return d / np.linalg.norm(d)


def test_connectors_join_their_lanes_tangentially():
    lanes = {lane.lane_id: lane for lane in roads.build_lanes()}
    connectors = [lane for lane in lanes.values() if lane.kind == "connector"]
    assert len(connectors) == 4 * 5  # per approach: left, 2 straight, right, bike
    for conn in connectors:
        inbound = lanes[conn.lane_id.split("__")[0]]
        outbound = lanes[conn.successors[0]]
        for a, b, end in ((inbound.centre_xy, conn.centre_xy, True),
                          (conn.centre_xy, outbound.centre_xy, True)):
            assert np.allclose(a[-1], b[0], atol=1e-9)
            cos = _direction(a, end) @ _direction(b, False)
            assert cos > np.cos(np.radians(3.0)), conn.lane_id  # 1 m chords of the arcs


@pytest.mark.parametrize("movement,offset,radius", [("right", roads.OUTER_LANE_OFFSET_M, 12.25),
                                                    ("left", roads.INNER_LANE_OFFSET_M, 19.25)])
def test_turns_are_quarter_circles(movement, offset, radius):
    for arm in range(4):
        pts = roads.connector_centre(arm, offset, movement, step_m=0.25)
        u, n = roads.arm_axes(arm)
        centre = roads.STOP_LINE_M * (u + n if movement == "right" else u - n)
        assert np.allclose(np.linalg.norm(pts - centre, axis=1), radius)
        turn = np.degrees(np.arctan2(*_direction(pts, True)[::-1])
                          - np.arctan2(*_direction(pts, False)[::-1]))
        assert (turn + 180.0) % 360.0 - 180.0 == pytest.approx(90.0 if movement == "left"
                                                               else -90.0, abs=1.5)


@given(radius=st.floats(5.0, 50.0), offset=st.floats(-3.0, 3.0), sweep=st.floats(0.3, 3.0))
def test_offset_of_an_arc_is_a_concentric_arc(radius, offset, sweep):
    pts = roads.arc(np.array([3.0, -2.0]), radius, 0.4, sweep, 0.5)
    shifted = roads.offset_polyline(pts, offset)  # left of a counter-clockwise arc: inwards
    assert np.allclose(np.linalg.norm(shifted - [3.0, -2.0], axis=1), radius - offset,
                       atol=1e-6)


def test_lane_arrows_are_single_simple_polygons():
    for movements in (("straight",), ("left", "straight"), ("straight", "right")):
        ring = roads.arrow_marking(movements)
        poly = Polygon(ring)
        assert poly.is_valid and 1.0 < poly.area < 4.0
        assert poly.convex_hull.area > poly.area * 1.2  # concave, as painted arrows are


@settings(deadline=None)
@example(t0=-3e-24, length=0.0, green=5.0, yellow=2.0, all_red=1.0)  # phase 1 turns green at 0, within 1e-6 of t0
@given(t0=st.floats(-100.0, 100.0), length=st.floats(0.0, 80.0),
       green=st.floats(5.0, 40.0), yellow=st.floats(2.0, 5.0), all_red=st.floats(0.0, 3.0))
def test_signal_changes_agree_with_states(t0, length, green, yellow, all_red):
    plan = signals.SignalPlan(green_s=green, yellow_s=yellow, all_red_s=all_red)
    for phase in (0, 1):
        changes = plan.changes(phase, t0, t0 + length)
        assert changes[0] == (t0, plan.state(phase, t0))
        times = [t for t, _ in changes]
        assert times == sorted(times) and len(set(times)) == len(times)
        # changes come up to 1e-9 past the end (float drift): the last state holds from its change on
        for (t, state), nxt in zip(changes, times[1:] + [max(t0 + length, times[-1])]):
            # probes strictly inside [t, nxt) (a probe past nxt may see the next change: length 0 at t0 = -3e-24 with a change at 0)
            for probe in np.linspace(t, nxt, 9)[1:-1]:
                assert plan.state(phase, probe) == state
    # the two phases are never released together
    for t in np.linspace(t0, t0 + length, 50):
        assert "red" in (plan.state(0, t), plan.state(1, t))


def _box(x, y, yaw, length, width):
    return overlaps.box_polygons_xy(np.array([[x, y]]), np.array([yaw]), np.array([length]),
                                   np.array([width]))


@settings(deadline=None, max_examples=200)
@given(x=st.floats(-6.0, 6.0), y=st.floats(-6.0, 6.0), yaw_a=st.floats(-3.2, 3.2),
       yaw_b=st.floats(-3.2, 3.2), la=st.floats(0.4, 12.0), wa=st.floats(0.4, 2.6),
       lb=st.floats(0.4, 12.0), wb=st.floats(0.4, 2.6))
def test_separating_axis_test_matches_shapely(x, y, yaw_a, yaw_b, la, wa, lb, wb):
    a, b = _box(0.0, 0.0, yaw_a, la, wa), _box(x, y, yaw_b, lb, wb)
    pa, pb = Polygon(a[0]), Polygon(b[0])
    gap = pa.distance(pb)
    area = pa.intersection(pb).area
    if gap < 1e-6 and area < 1e-6:
        return  # touching: either answer is right
    assert bool(overlaps.boxes_overlap(a, b, 0.0)[0]) == (area > 0.0)
    if gap > 1e-6:
        # with a clearance larger than the gap the test reports them as too close
        assert bool(overlaps.boxes_overlap(a, b, 2.0 * gap + 1e-3)[0])


def test_find_overlaps_sees_a_crossing_between_samples():
    # two cars cross the same point a few centimetres apart in time: only the sub-steps see it
    t = np.array([0.0, 0.1, 0.0, 0.1])
    agent = np.array([0, 0, 1, 1])
    xy = np.array([[-1.2, 0.0], [1.2, 0.0], [0.0, -1.2], [0.0, 1.2]])
    yaw = np.array([0.0, 0.0, np.pi / 2, np.pi / 2])
    size = np.array([[0.5, 0.5], [0.5, 0.5]])
    assert overlaps.find_overlaps(agent, t, xy, yaw, size, upsample=1) == set()
    assert overlaps.find_overlaps(agent, t, xy, yaw, size, upsample=3) == {(0, 1)}


@pytest.mark.slow
def test_ego_kinematics_reproduce_the_simulated_steps():
    sim = run_sample_traffic(seed=5, duration_s=6.0)
    res = sim.result
    s_again = traffic.ego_arc_length(res, res.ego_time_s)
    assert np.allclose(s_again, res.ego_s_m)
    # between steps: constant acceleration, never backwards
    fine = np.linspace(0.0, res.ego_time_s[-1], 400)
    assert np.all(np.diff(traffic.ego_arc_length(res, fine)) >= -1e-9)
    # ego rows in the agent table are the same motion
    ego_rows = res.agent == 0
    table = routes.RouteTable(sim.routes)
    xy, _ = table.lookup(np.full(ego_rows.sum(), sim.cast.route[0]), res.ego_s_m)
    assert np.allclose(xy, res.center_xy[ego_rows])


def test_map_is_built_once_per_call_and_identical():
    a, b = build_sample_map(), build_sample_map()
    assert a.element_counts() == b.element_counts()
    assert np.array_equal(a.lanes.centre.points_m, b.lanes.centre.points_m)


@pytest.mark.slow
def test_sample_round_trips_through_the_native_format(tmp_path):
    sc = make_sample_scenario(seed=4, duration_s=3.0, fps=15.0)
    save_scenario(sc, tmp_path / "sample")
    back = load_scenario(tmp_path / "sample")
    assert back.scenario_id == sc.scenario_id and back.metadata == sc.metadata
    assert np.array_equal(back.ego.world_SE3_ego.as_matrix(), sc.ego.world_SE3_ego.as_matrix())
    for f in ("track_id", "source_class", "timestamps_ns", "center_m", "size_m", "orientation"):
        assert np.array_equal(getattr(back.agents, f), getattr(sc.agents, f)), f
    assert np.array_equal(back.lights.state, sc.lights.state)
    assert back.map.element_counts() == sc.map.element_counts()
    assert list(back.map.lane_lines.lane_types()) == list(sc.map.lane_lines.lane_types())
