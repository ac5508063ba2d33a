"""OpenCV pinhole distortion used only inside its valid (rising) range (`avsim.core.distortion`):
AlpaSim's example camera (NVlabs/alpasim src/wizard/configs/driver/vavam.yaml, the rectification
target of `camera_front_wide_120fov`: f = 1545, k1 = -0.356) projects, casts rays, renders and labels
without folding far-off-axis points back into its image; a camera whose image reaches past the
range is refused with one line."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from avsim.core.cameras import PinholeCamera
from avsim.core.distortion import OpenCVDistortion
from avsim.core.errors import AvsimValueError
from avsim.core.transforms import SE3
from avsim.render.geometry.camera import FrameObjects, render_objects
from avsim.render.geometry.projector import Projector, pixels_px

# (k1, k2, p1, p2, k3): AlpaSim's radial [-0.356123, 0.172545, -0.05231] and tangential [-0.00213, 0.000464]
ALPASIM_DISTORTION = (-0.356123, 0.172545, -0.00213, 0.000464, -0.05231)
ALPASIM = PinholeCamera(1920, 1080, 1545.0, 1545.0, 960.0, 560.0, ALPASIM_DISTORTION)


def _off_axis(angles_deg: np.ndarray, azimuth_rad: float = 0.3) -> np.ndarray:
    """Unit-depth camera-frame points at these angles from the optical axis."""
    rho = np.tan(np.radians(angles_deg))
    return np.stack([rho * np.cos(azimuth_rad), rho * np.sin(azimuth_rad), np.ones_like(rho)], -1)


def test_the_valid_range_is_where_the_radial_map_turns() -> None:
    lens = ALPASIM.lens
    k1, k2, k3 = ALPASIM_DISTORTION[0], ALPASIM_DISTORTION[1], ALPASIM_DISTORTION[4]
    r = lens.valid_radius
    assert abs(1 + 3 * k1 * r**2 + 5 * k2 * r**4 + 7 * k3 * r**6) < 1e-12  # g'(r_v) = 0
    assert 51.6 < np.degrees(np.arctan(r)) < 51.7
    grid = np.linspace(0, r, 10_001)
    assert np.all(np.diff(grid * (1 + k1 * grid**2 + k2 * grid**4 + k3 * grid**6)) > 0)
    assert OpenCVDistortion(0.1, 0.01, 0.0, 0.0, 0.001).valid_radius == float("inf")  # pincushion never turns
    assert OpenCVDistortion(-0.2, 0.0, 0.0, 0.0, 0.0).valid_radius == pytest.approx(np.sqrt(1 / 0.6))


def test_inside_the_range_the_pixels_are_opencvs() -> None:
    pts = _off_axis(np.linspace(0, 45, 200), 1.1)
    uv, _, inside = ALPASIM.project(pts)
    ref, _ = cv2.projectPoints(pts, np.zeros(3), np.zeros(3), ALPASIM.K, np.array(ALPASIM_DISTORTION))
    np.testing.assert_allclose(uv, ref[:, 0], atol=1e-6)
    assert inside[:50].all()  # the first 11 deg: inside the image in every direction


def test_far_off_axis_points_land_outside_the_image_in_order() -> None:
    for azimuth in np.linspace(0, 2 * np.pi, 13):
        angles = np.linspace(0, 89.5, 900)
        uv, _, inside = ALPASIM.project(_off_axis(angles, azimuth))
        radius = np.hypot((uv[:, 0] - ALPASIM.cx_px) / ALPASIM.fx_px, (uv[:, 1] - ALPASIM.cy_px) / ALPASIM.fy_px)
        assert np.all(np.diff(radius) > 0), azimuth  # rising along every ray fan: nothing folds back
        past = angles > np.degrees(np.arctan(ALPASIM.lens.valid_radius))
        assert not inside[past].any()
        assert not ((uv[past, 0] >= -0.5) & (uv[past, 0] < 1919.5) & (uv[past, 1] >= -0.5) & (uv[past, 1] < 1079.5)).any()
    # OpenCV's polynomial itself folds: 60 deg off axis it lands near the image centre
    folded, _ = cv2.projectPoints(_off_axis(np.array([60.0])), np.zeros(3), np.zeros(3), ALPASIM.K, np.array(ALPASIM_DISTORTION))
    assert 0 <= folded[0, 0, 0] < 1920 and 0 <= folded[0, 0, 1] < 1080


def test_rays_of_every_pixel_round_trip() -> None:
    ys, xs = np.mgrid[-0.5:1080:9.5, -0.5:1920:9.5]
    uv = np.stack([xs.ravel(), ys.ravel()], -1)
    rays = ALPASIM.pixel_to_ray(uv)
    assert np.all(np.degrees(np.arccos(rays[:, 2])) < np.degrees(np.arctan(ALPASIM.lens.valid_radius)))
    np.testing.assert_allclose(ALPASIM.project(rays)[0], uv, atol=1e-7)
    outside = np.array([[-3000.0, 560.0], [5000.0, -2000.0], [960.0, 4000.0]])  # past the turning circle: the continued map's inverse
    np.testing.assert_allclose(ALPASIM.project(ALPASIM.pixel_to_ray(outside))[0], outside, atol=1e-6)


def test_the_compiled_projector_matches_the_camera_bit_for_bit() -> None:
    pts = np.random.default_rng(0).normal(size=(20_000, 3))
    assert np.array_equal(pixels_px(Projector(ALPASIM), pts), ALPASIM.project(pts)[0], equal_nan=True)


def test_a_camera_whose_image_reaches_past_the_range_is_refused() -> None:
    with pytest.raises(AvsimValueError) as info:
        PinholeCamera(3840, 2160, 1545.0, 1545.0, 1920.0, 1080.0, ALPASIM_DISTORTION)
    message = str(info.value)
    assert "distortion:" in message and "turns back 51.7 deg off axis" in message and "\n" not in message
    assert ALPASIM.resize(480, 270).lens.valid_radius == ALPASIM.lens.valid_radius  # a resize keeps the cover


def test_lines_beside_the_camera_render_where_they_are() -> None:
    """Ground lines from 0.15 m to 40 m ahead, 1.5 m below: their near ends are up to 89 deg off axis."""
    cam = ALPASIM.resize(960, 540)
    xs = np.arange(-6.0, 6.5, 1.0)
    p0, p1 = (np.stack([xs, np.full_like(xs, 1.5), np.full_like(xs, z)], 1) for z in (0.15, 40.0))
    img = render_objects(cam, SE3(np.eye(3), np.zeros(3)), FrameObjects.build(lines=(p0, p1, np.full((len(xs), 3), 255.0), np.full(len(xs), 4.0))))
    drawn = np.argwhere(img.max(axis=2) > 0)[:, ::-1].astype(np.float64)
    assert len(drawn) > 5000
    rays = cam.pixel_to_ray(drawn)
    q = rays[:, :2] / rays[:, 2:]  # undistorted: each line is a straight run t (x0, 1.5), t in [1/40, 1/0.15]
    off_px = np.full(len(q), np.inf)
    for x0 in xs:
        d = np.array([x0, 1.5])
        near = np.clip(q @ d / (d @ d), 1 / 40, 1 / 0.15)[:, None] * d
        off_px = np.minimum(off_px, np.hypot(*(cam.project(np.c_[near, np.ones(len(near))])[0] - drawn).T))
    assert off_px.max() < 4.0, off_px.max()  # within the stroke's half-width and anti-aliasing of the true lines
    assert img[: int(cam.cy_px) - 5].max() == 0  # nothing above the horizon (the fold mirrored the lines there)


def test_a_box_beside_the_camera_is_labelled_as_cut_by_the_image_border() -> None:
    """A car 1.5 to 3.5 m to the right, 1 to 5 m ahead: its near corners are 56 to 74 deg off axis,
    past the valid range; its full projected box starts where its visible pixels do and reaches out
    of the image to the right (the fold threw those corners 10^5 px to the left)."""
    from labels_numpy import unoccluded_pixels

    from avsim.render.geometry import projection as geo
    from avsim.render.geometry.scene import camera_primitives
    from avsim.render.labels.boxes import FrameBoxes3D, camera_box_labels
    from avsim.render.raster.draw import rasterize_numba
    from avsim.render.raster.primitives import ray_map

    cam = ALPASIM.resize(480, 270)
    centre, q, z3 = np.array([[2.5, 0.5, 3.0]]), np.array([[1.0, 0.0, 0.0, 0.0]]), np.zeros((1, 3))
    ids_, cls = np.array(["t0"]), np.array(["Car"])
    boxes = FrameBoxes3D(0, SE3.identity(), ids_, cls, cls, centre, centre, np.array([[2.0, 1.5, 4.0]]), q, q, np.zeros(1), z3, z3)
    objects = FrameObjects.build(boxes=(boxes.corners_world_m(), ["Car"]))
    prims = camera_primitives(cam, geo.cone_half_angle_rad(cam), SE3.identity(), objects)
    ids = np.empty((cam.height_px, cam.width_px), np.int32)
    rasterize_numba(prims, ray_map(cam), ids_out=ids)
    lab = camera_box_labels(cam, SE3.identity(), boxes, np.arange(1), ids, unoccluded_pixels(prims, ray_map(cam), 1))
    assert lab.visible_px[0] > 0 and lab.box2d_visible_px[0, 2] == cam.width_px - 1  # it reaches the right border
    full, seen = lab.box2d_full_px[0], lab.box2d_visible_px[0]
    assert abs(full[0] - seen[0]) <= 2 and full[1] <= seen[1] and cam.width_px < full[2] < 5 * cam.width_px and full[3] >= seen[3]
    assert 0.5 < lab.truncation[0] < 0.98
