"""Camera models: analytic projections, project/unproject round trips, f-theta spec behaviour."""

import io
import tarfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avsim.core.cameras import FThetaCamera, PinholeCamera, camera_from_dict
from avsim.core.errors import AvsimValueError
from avsim.core.rig import COSMOS_VIEW_NAMES, camera_mount, cosmos_rig, named_rig

PINHOLE = PinholeCamera(1600, 900, 1266.4, 1266.4, 816.3, 491.5)
DISTORTED = PinholeCamera(1280, 720, 900.0, 905.0, 640.0, 360.0, (-0.2, 0.05, 0.001, -0.0005, -0.01))
FTHETA_BW = FThetaCamera(1920, 1080, 954.2, 757.2, (0.0, 1.06e-3, 2.0e-8, -1.0e-11, 3.0e-15, 0.0), True)
FTHETA_FW = FThetaCamera(1920, 1080, 978.4, 597.7, (0.0, 3675.7, 178.8, -387.4, -11.4, 18.0), False)
CAMERAS = [PINHOLE, DISTORTED, FTHETA_BW, FTHETA_FW]


def test_pinhole_analytic_pixel():
    uv, depth, inside = PINHOLE.project(np.array([[1.0, -0.5, 10.0]]))
    np.testing.assert_allclose(uv, [[816.3 + 126.64, 491.5 - 63.32]])
    assert depth[0] == 10.0 and inside[0]


def test_ftheta_analytic_pixel_equidistant():
    # theta = r / f exactly (backward poly linear) -> r = f * theta
    f = 500.0
    cam = FThetaCamera(1000, 800, 500.0, 400.0, (0.0, 1.0 / f, 0, 0, 0, 0), True)
    theta = np.radians(30.0)
    point = np.array([[np.sin(theta), 0.0, np.cos(theta)]]) * 7.0
    uv, _, inside = cam.project(point)
    np.testing.assert_allclose(uv, [[500.0 + f * theta, 400.0]], atol=1e-9)
    assert inside[0]


@pytest.mark.parametrize("cam", CAMERAS, ids=["pinhole", "distorted", "ftheta_bw", "ftheta_fw"])
@given(u=st.floats(0.05, 0.95), v=st.floats(0.05, 0.95), depth=st.floats(0.5, 150.0))
@settings(max_examples=60, deadline=None)
def test_unproject_project_round_trip(cam, u, v, depth):
    uv = np.array([[u * cam.width_px, v * cam.height_px]])
    points = cam.unproject(uv, np.array([depth]))
    assert points[0, 2] == pytest.approx(depth)
    uv2, depth2, inside = cam.project(points)
    np.testing.assert_allclose(uv2, uv, atol=1e-6)
    assert depth2[0] == pytest.approx(depth) and inside[0]


@pytest.mark.parametrize("cam", [FTHETA_BW, FTHETA_FW], ids=["bw", "fw"])
def test_ftheta_fitted_inverse_agrees_with_stored_polynomial(cam):
    theta = np.linspace(0.0, cam.max_theta_rad, 200)
    r = np.polynomial.polynomial.polyval(theta, cam.forward_poly)
    theta_back = np.polynomial.polynomial.polyval(r, cam.backward_poly)
    assert np.abs(theta_back - theta).max() < 2e-3  # the fit itself; exactness comes from Newton


def test_ftheta_linear_extension_beyond_valid_range():
    cam = FTHETA_FW
    theta_max = cam.max_theta_rad
    thetas = theta_max + np.array([0.1, 0.2, 0.3])
    points = np.stack([np.sin(thetas), np.zeros(3), np.cos(thetas)], -1)
    uv, _, inside = cam.project(points)
    r = uv[:, 0] - cam.cx_px
    assert np.all(np.isfinite(uv)) and not inside.any()
    np.testing.assert_allclose(np.diff(r), np.diff(r)[0], rtol=1e-9)  # linear in theta
    slope = np.polynomial.polynomial.polyval(theta_max, np.polynomial.polynomial.polyder(cam.forward_poly))
    assert np.diff(r)[0] == pytest.approx(slope * 0.1, rel=1e-6)


def test_ftheta_projects_points_behind_the_camera_to_finite_pixels():
    uv, depth, inside = FTHETA_BW.project(np.array([[1.0, 0.0, -1.0], [0.0, 0.0, -1.0]]))
    assert np.all(np.isfinite(uv)) and np.all(depth < 0) and not inside.any()


@pytest.mark.parametrize("cam", [FTHETA_BW, FTHETA_FW, PINHOLE], ids=["bw", "fw", "pinhole"])
def test_resize_keeps_rays(cam):
    small = cam.resize(cam.width_px * 2 // 3, cam.height_px * 2 // 3)
    rays = cam.pixel_to_ray(np.array([[cam.width_px * 0.8, cam.height_px * 0.3]]))
    uv_small, _, _ = small.project(rays * 10)
    np.testing.assert_allclose(uv_small, [[small.width_px * 0.8, small.height_px * 0.3]], atol=0.5)
    assert small.horizontal_fov_rad == pytest.approx(cam.horizontal_fov_rad, rel=2e-3)


def test_resize_scales_backward_coefficients_by_inverse_powers():
    small = FTHETA_BW.resize(1280, 720)
    s = np.sqrt((1280 / 1920) * (720 / 1080))
    np.testing.assert_allclose(small.poly, np.array(FTHETA_BW.poly) * s ** -np.arange(6))
    assert small.cx_px == pytest.approx(954.2 * 1280 / 1920)


def test_linear_cde_matrix_is_applied_and_inverted():
    cam = FThetaCamera(1000, 800, 500.0, 400.0, (0.0, 2e-3, 0, 0, 0, 0), True, (1.01, 0.02, -0.01))
    uv = np.array([[700.0, 250.0]])
    np.testing.assert_allclose(cam.project(cam.unproject(uv, np.array([5.0])))[0], uv, atol=1e-9)


@pytest.mark.parametrize(
    "make",
    [
        lambda: PinholeCamera(100, 100, 0.0, 10.0, 50, 50),
        lambda: FThetaCamera(100, 100, 50, 50, (0, 0, 0, 0, 0, 0), True),
        lambda: PinholeCamera(0, 100, 10.0, 10.0, 50, 50),
        lambda: PinholeCamera(100, 100, float("nan"), 10.0, 50, 50),
    ],
)
def test_bad_intrinsics_rejected(make):
    with pytest.raises(AvsimValueError):
        make()


@pytest.mark.parametrize("cam", CAMERAS)
def test_dict_round_trip(cam):
    assert camera_from_dict(cam.to_dict()) == cam


def test_real_default_ftheta_intrinsics_fields_of_view(shared_data):
    tar_path = shared_data / "rdshq-example/cosmos-drive-dreams-toolkits/assets/default_ftheta_intrinsic.tar"
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            vector = np.load(io.BytesIO(tar.extractfile(member).read()), allow_pickle=False)
            cam = FThetaCamera.from_intrinsic_vector(vector)
            expected = int(member.name.split(".")[-2].rsplit("_", 1)[-1].removesuffix("fov"))
            assert np.degrees(cam.horizontal_fov_rad) == pytest.approx(expected, abs=1.5)
            np.testing.assert_allclose(cam.to_intrinsic_vector()[:11], vector[:11])


def test_cosmos_rig_names_and_fields_of_view():
    rig = cosmos_rig()
    assert rig.names == COSMOS_VIEW_NAMES
    for name, cam in zip(rig.names, rig.cameras):
        expected = int(name.rsplit("_", 1)[-1].removesuffix("fov"))
        assert np.degrees(cam.horizontal_fov_rad) == pytest.approx(expected, abs=0.5)
        assert (cam.width_px, cam.height_px) == (1280, 720)


def test_camera_mount_points_optical_axis_along_yaw():
    left = camera_mount(0.0, 0.0, 1.5, np.pi / 2)
    np.testing.assert_allclose(left.apply(np.array([0.0, 0.0, 10.0])), [0.0, 10.0, 1.5], atol=1e-12)
    # camera x (right) of a left-looking camera points to ego forward
    np.testing.assert_allclose(left.rotation[:, 0], [1.0, 0.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("name", ["nuscenes", "av2", "waymo", "cosmos"])
def test_named_rigs(name):
    rig = named_rig(name)
    assert len(rig) >= 5 and rig.subset(rig.names[:2]).names == rig.names[:2]


def test_unknown_rig_rejected():
    with pytest.raises(AvsimValueError, match="unknown rig"):
        named_rig("kitti")
