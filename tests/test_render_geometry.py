"""Geometry stage of the renderer: patterns, clipping, culling, subdivision, cuboid faces."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avsim.core.cameras import PinholeCamera
from avsim.core.rig import cosmos_rig
from avsim.render import style
from avsim.render.geometry import projection as geo

SAMPLE_M = 0.05  # the public renderer resamples lane lines every 0.05 m: "one sample"


def _straight(length_m: float, step_m: float = 1.0) -> np.ndarray:
    x = np.arange(0.0, length_m + 1e-9, step_m)
    return np.stack([x, np.zeros_like(x), np.zeros_like(x)], -1)


def _painted(p0: np.ndarray, p1: np.ndarray) -> float:
    return float(np.linalg.norm(p1 - p0, axis=-1).sum())


def _pieces(p0: np.ndarray, p1: np.ndarray) -> int:
    """Painted pieces = runs of touching segments."""
    if not len(p0):
        return 0
    gaps = np.linalg.norm(p0[1:] - p1[:-1], axis=-1) > 1e-9
    return 1 + int(gaps.sum())


def test_long_dash_on_straight_120m_line_paints_30m():
    p0, p1, rgb = geo.lane_line_segments(_straight(120.0, 0.7), "WHITE LONG_DASHED_SINGLE")
    assert rgb == (255, 255, 255)
    assert abs(_painted(p0, p1) - 30.0) <= SAMPLE_M
    assert _pieces(p0, p1) == 10
    # dashes start at 0, 12, 24, ... m and are 3 m long
    starts = np.concatenate([[p0[0, 0]], p0[1:, 0][np.linalg.norm(p0[1:] - p1[:-1], axis=-1) > 1e-9]])
    np.testing.assert_allclose(starts, np.arange(10) * 12.0, atol=1e-9)


@pytest.mark.parametrize(
    ("lane_type", "painted_per_period", "period"),
    [
        ("WHITE SHORT_DASHED_SINGLE", 1.5, 3.0),
        ("YELLOW DOT_SOLID_SINGLE", 0.05, 0.5),
        ("WHITE DOT_DASHED_SINGLE", 0.30, 3.6576),
    ],
)
def test_pattern_duty_cycles(lane_type, painted_per_period, period):
    n_periods = 20
    p0, p1, _ = geo.lane_line_segments(_straight(period * n_periods, 0.37), lane_type)
    assert abs(_painted(p0, p1) - painted_per_period * n_periods) <= SAMPLE_M


def test_dot_dash_keeps_every_third_piece_of_a_yard_window():
    assert len(style.DOT_DASH.pairs) == 6
    assert style.DOT_DASH.period_m == pytest.approx(0.9144 + 2.7432)
    p0, _, _ = geo.lane_line_segments(_straight(3.6576, 0.01), "WHITE DOT_DASHED_SINGLE")
    piece_starts = np.unique(np.round(p0[:, 0], 6))
    firsts = [s for s in piece_starts if not np.any(np.isclose(piece_starts, s - 0.01))]
    np.testing.assert_allclose(firsts, [0.0, 0.15, 0.30, 0.45, 0.60, 0.75], atol=1e-6)


def test_pattern_follows_3d_arc_length_on_a_bend():
    # quarter circle of radius 30 m: arc length 47.12 m -> 4 dashes (0, 12, 24, 36) = 12 m painted
    a = np.linspace(0, np.pi / 2, 200)
    ring = np.stack([30 * np.sin(a), 30 * (1 - np.cos(a)), np.zeros_like(a)], -1)
    p0, p1, _ = geo.lane_line_segments(ring, "YELLOW LONG_DASHED_SINGLE")
    assert abs(_painted(p0, p1) - 12.0) <= SAMPLE_M


def test_double_lines_sit_left_and_right():
    line = _straight(24.0)
    # DASHED_SOLID: left (+y for a line along +x) solid, right long dash
    p0, p1, rgb = geo.lane_line_segments(line, "YELLOW DASHED_SOLID")
    assert rgb == (255, 255, 0)
    left, right = p0[:, 1] > 0, p0[:, 1] < 0
    np.testing.assert_allclose(p0[left, 1], 0.10)
    np.testing.assert_allclose(p0[right, 1], -0.10)
    assert _painted(p0[left], p1[left]) == pytest.approx(24.0)
    assert _painted(p0[right], p1[right]) == pytest.approx(6.0)
    p0, p1, _ = geo.lane_line_segments(line, "YELLOW SOLID_DASHED")
    assert _painted(p0[p0[:, 1] > 0], p1[p0[:, 1] > 0]) == pytest.approx(6.0)


def test_unknown_type_is_other_solid():
    p0, p1, rgb = geo.lane_line_segments(_straight(10.0), "PURPLE ZIGZAG")
    assert rgb == style.OTHER_LANE_RGB and _painted(p0, p1) == pytest.approx(10.0)


def test_clip_segments_is_exact_at_near_and_far_planes():
    p0 = np.array([[0.0, 1.0, -5.0], [1.0, 0.0, 10.0], [0.0, 0.0, -1.0], [0.0, 0.0, 150.0]])
    p1 = np.array([[0.0, 1.0, 20.0], [2.0, 0.0, 20.0], [0.0, 0.0, -3.0], [0.0, 0.0, 300.0]])
    q0, q1, keep = geo.clip_segments(p0, p1, near_m=0.1, far_m=200.0)
    assert keep.tolist() == [True, True, False, True]
    np.testing.assert_allclose(q0[0], [0.0, 1.0, 0.1])
    np.testing.assert_allclose(q1[0], p1[0])
    np.testing.assert_allclose(q0[1], p0[1])
    np.testing.assert_allclose(q1[3], [0.0, 0.0, 200.0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-20, 20), min_size=12, max_size=12))
def test_clip_polygons_matches_halfspace_membership(coords):
    tri = np.array(coords[:9]).reshape(1, 3, 3)
    rings, counts = geo.clip_polygons(tri, near_m=0.1, far_m=200.0)
    pts = rings[0, : counts[0]]
    assert np.all(pts[:, 2] >= 0.1 - 1e-9)
    # every clipped vertex lies in the triangle's plane and inside it (barycentric >= 0)
    a, b, c = tri[0]
    n = np.cross(b - a, c - a)
    if counts[0] and np.linalg.norm(n) > 1e-6:
        np.testing.assert_allclose((pts - a) @ n / np.linalg.norm(n), 0.0, atol=1e-6)
    if counts[0] and np.linalg.norm(n) > 1e-3:
        # barycentric coordinates of each clipped vertex (signed sub-areas over the full area)
        nn = n @ n
        bary = np.stack([np.cross(b - pts, c - pts) @ n, np.cross(c - pts, a - pts) @ n, np.cross(a - pts, b - pts) @ n], -1) / nn
        assert np.all(bary >= -1e-6), bary
    if tri[0, :, 2].min() >= 0.1:
        assert counts[0] == 3
    if tri[0, :, 2].max() < 0.1:
        assert counts[0] == 0


def test_cone_culling_is_conservative():
    cam = cosmos_rig(640, 360).camera("camera_front_wide_120fov")
    cone = geo.cone_half_angle_rad(cam)
    rng = np.random.default_rng(0)
    start = rng.uniform(-30, 30, size=(4000, 1, 3))
    pts = np.concatenate([start, start + rng.uniform(-3, 3, size=(4000, 1, 3))], axis=1)
    pts[..., 2] = np.abs(pts[..., 2]) + 0.2
    visible = geo.cone_visible(pts, None, cone)
    # sample points along the culled segments: none may project into the image
    t = np.linspace(0, 1, 50)[None, :, None]
    culled = pts[~visible]
    samples = (culled[:, :1] + t * (culled[:, 1:] - culled[:, :1])).reshape(-1, 3)
    assert not cam.project(samples)[2].any()
    assert (~visible).sum() > 100  # the test does cull something


def test_subdivision_keeps_ftheta_chords_on_the_true_curve():
    cam = cosmos_rig(1280, 720).camera("camera_front_wide_120fov")
    p0 = np.array([[-40.0, 1.5, 4.0], [-3.0, 1.5, 2.0]])
    p1 = np.array([[40.0, 1.5, 4.0], [3.0, -4.0, 30.0]])
    a, b, ua, ub, src = geo.subdivide_segments(cam, p0, p1, tol_px=0.25)
    assert len(a) > 20 and set(src.tolist()) == {0, 1}
    # chords are contiguous along each source segment
    for s in (0, 1):
        sa, sb = a[src == s], b[src == s]
        np.testing.assert_allclose(sa[1:], sb[:-1])
    # dense true curve points lie within the tolerance (+ a little) of the chord polyline
    t = np.linspace(0, 1, 9)[1:-1]
    for k in range(len(a)):
        pts = a[k] + t[:, None] * (b[k] - a[k])
        uv = cam.project(pts)[0]
        chord = ub[k] - ua[k]
        rel = uv - ua[k]
        dist = np.abs(chord[0] * rel[:, 1] - chord[1] * rel[:, 0]) / max(np.linalg.norm(chord), 1e-9)
        assert dist.max() <= 0.5


def test_pinhole_segments_are_not_split():
    cam = PinholeCamera(640, 360, 300.0, 300.0, 320.0, 180.0)
    p0, p1 = np.array([[-40.0, 1.5, 4.0]]), np.array([[40.0, 1.5, 4.0]])
    a, *_ = geo.subdivide_segments(cam, p0, p1)
    assert len(a) == 1


def test_front_facing_faces_of_a_box_ahead():
    # box 10 m ahead of a camera (camera frame): only the face towards the camera is visible
    from avsim.core.agents import box_corners
    from avsim.core.transforms import SE3

    # object frame x (heading) along camera -z (driving towards the camera), z up = camera -y
    x_axis, z_axis = np.array([0.0, 0.0, -1.0]), np.array([0.0, -1.0, 0.0])
    R = np.stack([x_axis, np.cross(z_axis, x_axis), z_axis], axis=1)
    q = SE3(R, np.zeros(3)).quat
    corners = box_corners(np.array([[0.0, 0.0, 10.0]]), np.array([[4.0, 2.0, 1.5]]), q[None])
    facing = geo.front_facing(corners)
    assert facing.tolist() == [[True, False, False, False, False, False]]


def test_edge_faces_table():
    assert geo.CUBOID_EDGE_FACES.shape == (12, 2)
    for (a, b), (f, g) in zip(geo.CUBOID_EDGES, geo.CUBOID_EDGE_FACES):
        for face in (f, g):
            assert a in geo.CUBOID_FACES[face] and b in geo.CUBOID_FACES[face]


def test_traffic_light_colours():
    rgb = geo.traffic_light_rgb(np.array(["red", "yellow", "green", "unknown", "off"]))
    assert rgb.tolist() == [[240, 50, 50], [255, 200, 0], [130, 240, 132], [100, 100, 100], [100, 100, 100]]


def test_segment_cone_test_matches_the_general_one():
    rng = np.random.default_rng(3)
    a = rng.uniform(-20, 20, size=(2000, 3))
    b = a + rng.uniform(-4, 4, size=(2000, 3))
    a[:, 2], b[:, 2] = np.abs(a[:, 2]) + 0.1, np.abs(b[:, 2]) + 0.1
    for cone in (0.3, 0.9, 1.2):
        general = geo.cone_visible(np.stack([a, b], 1), None, cone)
        np.testing.assert_array_equal(geo.segment_cone_visible(a, b, cone), general)
