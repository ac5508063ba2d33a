"""Raster stage: exact pixels, clipping, occlusion, heading gradient, fill, fade, backends.

Exact-palette checks run with anti-aliasing off (`render_objects` and `rasterize*` default to
``antialias=False``, one sample per pixel); the backend agreement runs with it off and on, and
tests/test_antialias.py covers the anti-aliased look.
"""

from __future__ import annotations

import numpy as np
import pytest

from avsim.core.agents import box_corners
from avsim.core.cameras import PinholeCamera
from avsim.core.rig import cosmos_rig
from avsim.core.transforms import SE3, matrix_to_quat
from avsim.render import style
from avsim.render.geometry.projection import PIXEL_CENTRE_OFFSET
from avsim.render.geometry.scene import FrameObjects, SceneRenderer, render_objects
from avsim.scenario.synthetic import highway_scenario

IDENTITY = SE3.identity()  # world frame == camera frame (RDF) in most tests below
W, H = 320, 180
PINHOLE = PinholeCamera(W, H, 160.0, 160.0, 160.0, 90.0)


def _lit(img: np.ndarray) -> np.ndarray:
    return img.any(axis=-1)


def _centroid(mask: np.ndarray) -> np.ndarray:
    """Mean continuous coordinate (u, v) of the lit pixel centres (i, j) + PIXEL_CENTRE_OFFSET."""
    ys, xs = np.nonzero(mask)
    return np.array([xs.mean(), ys.mean()]) + PIXEL_CENTRE_OFFSET


def _dot(point, width_px=5.0, rgb=style.POLE_RGB) -> FrameObjects:
    p = np.asarray(point, float)[None]
    return FrameObjects.build(lines=(p, p, np.array([rgb], float), np.array([width_px])))


def _line(p0, p1, width_px=12.0, rgb=(255, 255, 255)) -> FrameObjects:
    return FrameObjects.build(
        lines=(np.asarray(p0, float)[None], np.asarray(p1, float)[None], np.array([rgb], float), np.array([width_px]))
    )


def _box_rdf(center, size_lwh, heading_cam, cls="Car"):
    """Cuboid corners for a box given in the camera frame: x (heading) along `heading_cam`,
    z (up) along camera -y."""
    x_axis = np.asarray(heading_cam, float) / np.linalg.norm(heading_cam)
    z_axis = np.array([0.0, -1.0, 0.0])
    R = np.stack([x_axis, np.cross(z_axis, x_axis), z_axis], axis=1)
    return box_corners(np.asarray(center, float)[None], np.asarray(size_lwh, float)[None], matrix_to_quat(R)[None]), [cls]


# ---- analytic positions ---------------------------------------------------------------------------
def test_pinhole_point_lands_on_its_pixel():
    img = render_objects(PINHOLE, IDENTITY, _dot([1.0, 0.5, 10.0]))
    np.testing.assert_allclose(_centroid(_lit(img)), [160 + 16, 90 + 8], atol=1e-9)
    f = 1 - 10 / 200
    assert img[98, 176].tolist() == [int(c * f + 0.5) for c in style.POLE_RGB]


def test_opencv_pixel_centres_integer_projection_lights_that_pixel():
    # OpenCV convention: u = 176.0, v = 98.0 is the centre of pixel (row 98, column 176)
    assert PIXEL_CENTRE_OFFSET == 0.0
    img = render_objects(PINHOLE, IDENTITY, _dot([1.0, 0.5, 10.0], width_px=1.0))
    assert np.argwhere(_lit(img)).tolist() == [[98, 176]]
    # (175.8, 97.8) is nearest the centre of (98, 176); with centres at +0.5 it would be (97, 175)
    img = render_objects(PINHOLE, IDENTITY, _dot([(175.8 - 160) / 16, (97.8 - 90) / 16, 10.0], width_px=1.0))
    assert np.argwhere(_lit(img)).tolist() == [[98, 176]]


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_opencv_pixel_centres_planar_fill(backend):
    # a fronto-parallel square imaged at u in [99.7, 110.3], v in [60.7, 70.3] covers exactly the
    # pixel centres 100..110 x 61..70 (centres at +0.5 would give 100..109 x 61..69)
    u0, u1, v0, v1 = 99.7, 110.3, 60.7, 70.3
    x0, x1, y0, y1 = (u0 - 160) / 16, (u1 - 160) / 16, (v0 - 90) / 16, (v1 - 90) / 16
    a, b, c, d = [x0, y0, 10.0], [x1, y0, 10.0], [x1, y1, 10.0], [x0, y1, 10.0]
    tri = np.array([[a, b, c], [a, c, d]], float)
    img = render_objects(PINHOLE, IDENTITY, FrameObjects.build(triangles=(tri, np.full((2, 3), 200.0))), backend)
    rows, cols = np.nonzero(_lit(img))
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (61, 70, 100, 110)
    assert len(rows) == 10 * 11


def test_pinhole_line_covers_the_expected_rows():
    img = render_objects(PINHOLE, IDENTITY, _line([-2.0, 0.5, 10.0], [2.0, 0.5, 10.0]))
    # the line projects to v = 98 from u = 128 to 192; half width 6 px * fade(10 m) = 5.7 px
    c = PIXEL_CENTRE_OFFSET
    rows = np.flatnonzero(_lit(img)[:, 160])
    assert rows.tolist() == list(range(int(np.ceil(98 - 5.7 - c)), int(np.floor(98 + 5.7 - c)) + 1))
    assert rows.tolist() == list(range(93, 104))  # the rows whose centres lie in [92.3, 103.7]
    cols = np.flatnonzero(_lit(img)[97])
    assert cols.min() == int(np.ceil(128 - 5.7 - c)) and cols.max() == int(np.floor(192 + 5.7 - c))
    assert img[97, 160].tolist() == [242, 242, 242]  # 255 * (1 - 10/200) rounded


def _ftheta_expected(cam, points: np.ndarray) -> np.ndarray:
    """Independent f-theta projection: solve backward_poly(r) = theta by bisection."""
    theta = np.arctan2(np.hypot(points[:, 0], points[:, 1]), points[:, 2])
    bw = cam.backward_poly
    lo, hi = np.zeros_like(theta), np.full_like(theta, 4.0 * max(cam.width_px, cam.height_px))
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        val = np.polynomial.polynomial.polyval(mid, bw)
        lo, hi = np.where(val < theta, mid, lo), np.where(val < theta, hi, mid)
    r = 0.5 * (lo + hi)
    phi = np.arctan2(points[:, 1], points[:, 0])
    return np.stack([cam.cx_px + r * np.cos(phi), cam.cy_px + r * np.sin(phi)], -1)


def test_ftheta_point_lands_on_its_pixel():
    cam = cosmos_rig(640, 360).camera("camera_front_wide_120fov")
    point = np.array([6.0, -2.0, 6.0])  # ~46 deg off axis: strongly curved region of the lens
    img = render_objects(cam, IDENTITY, _dot(point, width_px=5.0))
    expected = _ftheta_expected(cam, point[None])[0]
    np.testing.assert_allclose(_centroid(_lit(img)), expected, atol=0.3)


def test_ftheta_straight_line_follows_the_curved_image():
    cam = cosmos_rig(640, 360).camera("camera_front_wide_120fov")
    p0, p1 = np.array([-6.0, 1.2, 4.0]), np.array([6.0, 1.2, 4.0])
    img = render_objects(cam, IDENTITY, _line(p0, p1, width_px=6.0))
    dense = p0 + np.linspace(0, 1, 20001)[:, None] * (p1 - p0)
    uv = _ftheta_expected(cam, dense)
    lit = _lit(img)
    checked = 0
    for col in range(200, 440, 10):
        u = col + PIXEL_CENTRE_OFFSET
        v_expected = np.interp(u, uv[:, 0], uv[:, 1])
        rows = np.flatnonzero(lit[:, col])
        assert rows.size, col
        v_lit = rows.mean() + PIXEL_CENTRE_OFFSET
        assert abs(v_lit - v_expected) <= 0.5, (col, v_lit, v_expected)
        checked += 1
    bow = uv[:, 1].max() - uv[:, 1].min()
    assert checked == 24 and bow > 10  # the image of the line really is curved


# ---- exact clipping -------------------------------------------------------------------------------
def test_segment_crossing_behind_the_camera_draws_its_visible_part():
    img = render_objects(PINHOLE, IDENTITY, _line([0.5, 1.0, -5.0], [0.5, 1.0, 20.0], width_px=2.0))
    lit = _lit(img)
    # far end (z = 20) at (164, 98), the centre of that pixel; the line leaves the image bottom at
    # z = 1.788 m, u = 204.7, and crosses row 179 at u = 204.2
    assert lit[98, 164] and not lit[97, 164] and lit[121, 175] and lit[179, 204]
    assert lit.sum() > 80


def test_large_truck_beside_the_ego_with_no_corner_in_frame_covers_the_image():
    corners, cls = _box_rdf([0.0, 0.25, 3.05], [16.0, 2.6, 4.0], [1.0, 0.0, 0.0], "Truck")
    assert not PINHOLE.project(corners[0])[2].any()  # every corner is outside the image
    img = render_objects(PINHOLE, IDENTITY, FrameObjects.build(boxes=(corners, cls)))
    assert _lit(img).mean() > 0.999
    # truck palette: orange-red to amber, red channel dominant
    assert (img[..., 0].astype(int) > img[..., 2]).mean() > 0.99


# ---- occlusion -----------------------------------------------------------------------------------
def test_nearer_car_owns_the_shared_pixels():
    near = _box_rdf([0.0, 0.75, 10.0], [4.5, 1.9, 1.5], [1.0, 0.0, 0.2])
    far = _box_rdf([1.0, 0.75, 14.0], [4.5, 1.9, 1.5], [1.0, 0.0, -0.3])
    both = FrameObjects.build(boxes=(np.concatenate([far[0], near[0]]), far[1] + near[1]))
    img_near = render_objects(PINHOLE, IDENTITY, FrameObjects.build(boxes=near))
    img_far = render_objects(PINHOLE, IDENTITY, FrameObjects.build(boxes=far))
    img = render_objects(PINHOLE, IDENTITY, both)
    shared = _lit(img_near) & _lit(img_far)
    assert shared.sum() > 500
    np.testing.assert_array_equal(img[shared], img_near[shared])
    only_far = _lit(img_far) & ~_lit(img_near)
    np.testing.assert_array_equal(img[only_far], img_far[only_far])


def test_crosswalk_under_a_car_is_hidden_where_the_car_is():
    ground_y = 1.5  # camera 1.5 m above a flat ground (camera frame, y down)
    cw = np.array([[-4.0, ground_y, 8.0], [4.0, ground_y, 8.0], [4.0, ground_y, 14.0], [-4.0, ground_y, 14.0]])
    tris = np.stack([cw[[0, 1, 2]], cw[[0, 2, 3]]])
    crosswalk = (tris, np.array([style.CROSSWALK_RGB] * 2, float))
    car = _box_rdf([0.5, ground_y - 0.75, 11.0], [4.5, 1.9, 1.5], [1.0, 0.0, 0.0])
    img_cw = render_objects(PINHOLE, IDENTITY, FrameObjects.build(triangles=crosswalk))
    img_car = render_objects(PINHOLE, IDENTITY, FrameObjects.build(boxes=car))
    img = render_objects(PINHOLE, IDENTITY, FrameObjects.build(triangles=crosswalk, boxes=car))
    car_px, cw_px = _lit(img_car), _lit(img_cw)
    assert (car_px & cw_px).sum() > 300  # the car stands on the crosswalk in the image
    np.testing.assert_array_equal(img[car_px], img_car[car_px])
    np.testing.assert_array_equal(img[cw_px & ~car_px], img_cw[cw_px & ~car_px])


def test_lane_line_on_a_crosswalk_is_drawn_over_it():
    ground_y = 1.5
    cw = np.array([[-4.0, ground_y, 8.0], [4.0, ground_y, 8.0], [4.0, ground_y, 14.0], [-4.0, ground_y, 14.0]])
    tris = np.stack([cw[[0, 1, 2]], cw[[0, 2, 3]]])
    line = ([0.0, ground_y, 6.0], [0.0, ground_y, 16.0])
    objs = FrameObjects.build(
        lines=(np.array([line[0]]), np.array([line[1]]), np.array([[255.0, 255, 255]]), np.array([12.0])),
        triangles=(tris, np.array([style.CROSSWALK_RGB] * 2, float)),
    )
    img = render_objects(PINHOLE, IDENTITY, objs)
    line_only = render_objects(PINHOLE, IDENTITY, _line(*line))
    lit_line = _lit(line_only)
    np.testing.assert_array_equal(img[lit_line], line_only[lit_line])


# ---- heading gradient -----------------------------------------------------------------------------
def test_turning_a_car_by_180_degrees_swaps_the_gradient():
    # principal point on the image's mirror axis: column i mirrors to W - 1 - i, so cx is the
    # continuous coordinate halfway between the centres of columns 0 and W - 1
    camera = PinholeCamera(W, H, 160.0, 160.0, (W - 1) / 2 + PIXEL_CENTRE_OFFSET, 90.0)
    images = []
    for heading in ([1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]):
        box = _box_rdf([0.0, 0.5, 8.0], [4.5, 1.9, 1.5], heading)
        images.append(render_objects(camera, IDENTITY, FrameObjects.build(boxes=box)))
    fwd, back = images
    row = 101  # middle of the side face (the face is 7.05 m away, centre 0.5 m below the axis)
    cols = np.flatnonzero(_lit(fwd)[row])
    left, right = cols[: len(cols) // 3], cols[-len(cols) // 3 :]
    # front colour A is dark (red 0), back colour B light (red 126): heading +x -> front on the right
    assert fwd[row, left, 0].mean() > fwd[row, right, 0].mean() + 40
    assert back[row, left, 0].mean() + 40 < back[row, right, 0].mean()
    # the scene is mirror-symmetric about the image centre: the two renders are mirror images
    np.testing.assert_array_equal(back, fwd[:, ::-1])


# ---- fill, fade, width -------------------------------------------------------------------------------
def test_concave_polygon_is_filled_exactly_not_as_its_hull():
    from avsim.render.geometry.scene import triangulate_polygon

    # a U shape standing upright 10 m ahead (camera frame): the notch must stay empty
    u_shape = np.array([[-2, -2, 10], [2, -2, 10], [2, 2, 10], [1, 2, 10], [1, -1, 10], [-1, -1, 10], [-1, 2, 10], [-2, 2, 10]], float)
    tris = triangulate_polygon(u_shape)  # earcut works on x, y: here the image plane
    img = render_objects(PINHOLE, IDENTITY, FrameObjects.build(triangles=(tris, np.array([style.ROAD_MARKING_RGB] * len(tris), float))))
    lit = _lit(img)
    assert not lit[110, 160]  # inside the notch (x = 0, y = 1.25)
    assert lit[110, 136] and lit[110, 184] and lit[65, 160]  # both arms and the bar
    f = 1 - 10 / 200
    assert img[65, 160].tolist() == [int(c * f + 0.5) for c in style.ROAD_MARKING_RGB]


def test_colour_and_width_fade_with_depth():
    widths = {}
    for z in (10.0, 100.0, 190.0):
        img = render_objects(PINHOLE, IDENTITY, _line([-50.0, 0.0, z], [50.0, 0.0, z]))
        rows = np.flatnonzero(_lit(img)[:, 160])
        widths[z] = len(rows)
        f = 1 - z / 200
        assert img[90, 160].tolist() == [int(255 * f + 0.5)] * 3
    # rows whose centres lie within the half width 6 px * fade of v = 90 (OpenCV centres: 11 and 7)
    expected = {z: int(np.sum(np.abs(np.arange(H) + PIXEL_CENTRE_OFFSET - 90.0) <= 6.0 * (1 - z / 200))) for z in widths}
    assert widths[10.0] == expected[10.0] == 11 and widths[100.0] == expected[100.0] == 7
    assert 1 <= widths[190.0] <= 2  # never thinner than 1 px
    far = render_objects(PINHOLE, IDENTITY, _line([-50.0, 0.0, 250.0], [50.0, 0.0, 260.0]))
    assert not far.any()  # beyond 200 m nothing is drawn


def test_traffic_light_uses_its_state_colour():
    rig = cosmos_rig(320, 180)
    scenario = highway_scenario(4.0, rig=rig)
    renderer = SceneRenderer(scenario, cameras=["camera_front_tele_30fov"], size=(320, 180))
    early, late = renderer.frame_objects(0)[1], renderer.frame_objects(renderer.n_frames - 1)[1]
    assert early.static_rgb.tolist()[-1] == list(style.TRAFFIC_LIGHT_RGB["red"])
    assert late.static_rgb.tolist()[-1] == list(style.TRAFFIC_LIGHT_RGB["green"])


# ---- backends and determinism -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_renderer() -> SceneRenderer:
    scenario = highway_scenario(2.0, rig=cosmos_rig(320, 180))
    cams = ["camera_front_wide_120fov", "camera_cross_left_120fov", "camera_rear_tele_30fov"]
    return SceneRenderer(scenario, cameras=cams, size=(320, 180))


@pytest.mark.slow
@pytest.mark.parametrize("antialias", [False, True])
def test_numba_and_torch_backends_agree(small_renderer, antialias):
    prims = small_renderer.primitives(5)
    from avsim.render.raster.draw import rasterize_numba, rasterize_torch

    rays = [small_renderer.rays(i) for i in range(len(prims))]
    a = np.stack([rasterize_numba(p, r, antialias=antialias) for p, r in zip(prims, rays)])
    b = rasterize_torch(prims, rays, device="cpu", max_fragments=50_000, antialias=antialias)  # several chunks
    assert a.any(axis=-1).mean() > 0.05
    differs = (a != b).any(axis=-1)
    assert differs.mean() < 1e-3
    assert np.abs(a.astype(int) - b.astype(int)).max() <= 1 or differs.sum() < 20


def test_renders_are_byte_identical(small_renderer):
    scenario = small_renderer.scenario
    again = SceneRenderer(scenario, cameras=list(small_renderer.camera_names), size=(320, 180))
    for f in (0, 7):
        a, b = small_renderer.render_frame(f), again.render_frame(f)
        for name in a:
            assert a[name].tobytes() == b[name].tobytes()


def test_row_spans_only_bound_the_loop(small_renderer):
    # spans are a conservative loop bound: dropping them (scan whole boxes) changes no pixel
    from dataclasses import replace

    from avsim.render.raster.draw import rasterize_numba

    for f in (0, 9):
        for i, prims in enumerate(small_renderer.primitives(f)):
            assert prims.planars.has_spans
            whole = replace(prims, planars=replace(prims.planars, row_start=np.zeros(0, np.int64), row_span=np.zeros((0, 2), np.int64)))
            rays = small_renderer.rays(i)
            np.testing.assert_array_equal(rasterize_numba(prims, rays), rasterize_numba(whole, rays))


def test_empty_scene_and_camera_inside_a_box_render_black():
    from avsim.core.agents import AgentTracks
    from avsim.core.lights import TrafficLightStates
    from avsim.maps import HDMap

    scenario = highway_scenario(0.5, rig=cosmos_rig(160, 96))
    bare = scenario.replace(map=HDMap.empty(), agents=AgentTracks.empty(), lights=TrafficLightStates.empty())
    frames = SceneRenderer(bare, size=(160, 96)).render_frame(3)
    assert all(not f.any() for f in frames.values())
    # a box around the camera shows no face (all are turned away): nothing drawn, no crash
    corners, cls = _box_rdf([0.0, 0.0, 0.0], [4.0, 4.0, 4.0], [1.0, 0.0, 0.0])
    assert not render_objects(PINHOLE, IDENTITY, FrameObjects.build(boxes=(corners, cls))).any()
