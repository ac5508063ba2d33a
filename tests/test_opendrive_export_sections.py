"""The OpenDRIVE export's cut of lanes into roads (`export_sections`, `export_plan`): a slanted link
becomes one road holding both lanes, linked roads meet at one perpendicular cross-section, a free
slanted end is lengthened to the rail that reaches farther, a tight left turn runs along its right
rail. Restated by hand on straight and circular lanes."""

from __future__ import annotations

import numpy as np

from avsim.maps.opendrive.export_plan import plan_roads
from avsim.maps.opendrive.export_sections import between, extend, outer_is_right, stations
from avsim.maps.opendrive.fit import fit_lane, project
from avsim.maps.opendrive.geometry import ReferenceLine


def _line(x0: float, x1: float, y: float, n: int = 3) -> np.ndarray:
    return np.stack([np.linspace(x0, x1, n), np.full(n, y), np.zeros(n)], 1)


def test_stations_extend_past_the_ends_and_follow_a_bend() -> None:
    left = np.array([[0.0, 0.0, 0.0], [10.0, 0.0, 0.0], [10.0, 10.0, 0.0]])
    s = stations(left, np.array([[-2.0, -3.0], [4.0, 1.0], [12.0, -2.0], [11.0, 14.0]]))
    # before the start: along the first segment extended; in the wedge of the bend: along its
    # central-difference tangent (1, 1)/sqrt(2); past the end: along the last segment
    np.testing.assert_allclose(s, [-2.0, 4.0, 10.0 + (2.0 - 2.0) / np.sqrt(2), 24.0], atol=1e-12)


def test_between_cuts_both_rails_on_one_cross_section() -> None:
    left, right = _line(0.0, 10.0, 0.0), _line(2.0, 12.0, -3.5)
    la, ra = between(left, right, 3.0, 7.0)
    np.testing.assert_allclose(la[[0, -1], 0], [3.0, 7.0])
    np.testing.assert_allclose(ra[[0, -1], 0], [3.0, 7.0])
    lb, rb = between(left, right, None, 3.0)  # from each rail's own start
    np.testing.assert_allclose([lb[0, 0], rb[0, 0]], [0.0, 2.0])


def test_extend_reaches_the_farther_rail() -> None:
    left, right = _line(0.0, 10.0, 0.0), _line(-1.5, 12.0, -3.5)
    out = extend(left, right, True, True)
    np.testing.assert_allclose(out[[0, -1], 0], [-1.5, 12.0])
    np.testing.assert_array_equal(extend(left, right, False, False), left)


def test_a_slanted_link_is_one_road_holding_both_lanes_and_linked_roads_meet() -> None:
    # lane a's right rail ends 2 m past its left rail's end, where lane b's right rail starts
    a = (_line(0.0, 10.0, 0.0), _line(0.0, 12.0, -3.5))
    b = (_line(10.0, 20.0, 0.0), _line(12.0, 20.0, -3.5))
    plan = plan_roads(["a", "b"], [a, b], [[1], []])
    assert [p.name for p in plan.pieces] == ["a", "a>b", "b"]
    assert [(p.predecessor, p.successor) for p in plan.pieces] == [(None, 1), (0, 2), (1, None)]
    for p, q in zip(plan.pieces[:-1], plan.pieces[1:]):
        np.testing.assert_allclose(p.left[-1], q.left[0], atol=1e-12)
        np.testing.assert_allclose(p.right[-1], q.right[0], atol=1e-12)
    np.testing.assert_allclose([plan.pieces[1].left[0, 0], plan.pieces[1].left[-1, 0]], [10.0, 12.0])
    assert plan.max_move_m == 0.0
    # a straight link is two roads exactly as the lanes were
    straight = plan_roads(["a", "b"], [(a[0], _line(0.0, 10.0, -3.5)), (b[0], _line(10.0, 20.0, -3.5))], [[1], []])
    assert [p.name for p in straight.pieces] == ["a", "b"]
    np.testing.assert_array_equal(straight.pieces[1].right, _line(10.0, 20.0, -3.5))


def _arc_rail(radius: float, a0: float, a1: float, n: int) -> np.ndarray:
    t = np.linspace(a0, a1, n)
    return np.stack([radius * np.cos(t), radius * np.sin(t), np.zeros(n)], 1)


def test_a_tight_left_turn_runs_along_its_right_rail() -> None:
    # a left turn: left rail inner (radius 2, 6 vertices), right rail outer (radius 6, 40 vertices
    # whose cross-sections from the coarse inner rail fold back)
    left, right = _arc_rail(2.0, -np.pi / 2, 0.0, 6), _arc_rail(6.0, -np.pi / 2, 0.0, 40)
    left[2:4, :2] *= np.array([[1.1], [0.92]])  # a recorded, uneven inner rail (its end segments on the circle's chords)
    assert outer_is_right(left, right)
    assert not outer_is_right(_line(0.0, 10.0, 0.0), _line(0.0, 10.0, -3.5))
    fit = fit_lane(left, right, on_right=True)
    assert fit.on_right
    ref = ReferenceLine(fit.geometries)
    s, t = project(ref, fit.length, right)
    assert np.abs(t).max() < 0.003  # the reference line is the right rail (2 mm fit)
    s, t = project(ref, fit.length, left)
    np.testing.assert_allclose(t, fit.width(s), atol=1e-9)  # the width reaches the left rail's vertices
