"""Sampson errors: calibrated F, RANSAC F, rectification, protocol aggregation, real frames."""

from __future__ import annotations

import numpy as np
import pytest

from avsim.evaluation.sampson import (
    FrameErrors,
    MatchConfig,
    SiftMatcher,
    dataset_summary,
    estimate_fundamental_ransac,
    fundamental_from_calibration,
    rectified_intrinsics,
    rectify_keypoints,
    sampson_error,
    temporal_sampson,
    video_summary,
)


def _two_views(rng, n=200):
    K = rectified_intrinsics()
    X1 = np.column_stack([rng.uniform(-8, 8, n), rng.uniform(-3, 3, n), rng.uniform(6, 30, n)])  # camera-1 frame
    yaw = 0.2
    R = np.array([[np.cos(yaw), 0, np.sin(yaw)], [0, 1, 0], [-np.sin(yaw), 0, np.cos(yaw)]])
    t = np.array([0.8, 0.05, 0.3])
    X0 = X1 @ R.T + t

    def proj(X):
        uv = X @ K.T
        return uv[:, :2] / uv[:, 2:]

    return K, R, t, proj(X0), proj(X1)


def test_calibrated_fundamental_gives_zero_error_on_exact_points() -> None:
    K, R, t, x0, x1 = _two_views(np.random.default_rng(0))
    F = fundamental_from_calibration(K, K, R, t)
    assert sampson_error(F, x0, x1).max() < 1e-8
    # and a 2-px shift orthogonal-ish to the epipolar lines is measured
    assert sampson_error(F, x0 + np.array([0.0, 2.0]), x1).mean() > 0.3


def test_ransac_recovers_geometry_with_outliers() -> None:
    rng = np.random.default_rng(1)
    K, R, t, x0, x1 = _two_views(rng, 300)
    x0n = x0 + rng.normal(0, 0.5, x0.shape)
    x0n[:60] = rng.uniform(0, 960, (60, 2))  # 20% outliers
    F, inl = estimate_fundamental_ransac(x0n, x1)
    assert F is not None
    err = sampson_error(F, x0n, x1)
    assert np.median(err[60:]) < 1.0 and inl[60:].mean() > 0.9 and inl[:60].mean() < 0.3
    # the estimate agrees with the calibration on clean points
    Fc = fundamental_from_calibration(K, K, R, t)
    assert np.median(sampson_error(Fc, x0n[60:], x1[60:])) < 1.0


def test_fewer_than_eight_matches_give_no_f() -> None:
    rng = np.random.default_rng(2)
    F, inl = estimate_fundamental_ransac(rng.uniform(0, 100, (7, 2)), rng.uniform(0, 100, (7, 2)))
    assert F is None and inl.shape == (7,) and not inl.any()


def test_rectification_of_the_ideal_pinhole_is_identity() -> None:
    from avsim.core.cameras import PinholeCamera

    K = rectified_intrinsics()
    cam = PinholeCamera(960, 540, K[0, 0], K[1, 1], K[0, 2], K[1, 2])
    uv = np.array([[10.0, 20.0], [480.0, 270.0], [900.0, 500.0]])
    out, ok = rectify_keypoints(uv, cam)
    assert ok.all()
    np.testing.assert_allclose(out, uv, atol=1e-6)


def test_rectification_of_ftheta_maps_rays_consistently() -> None:
    from avsim.core.rig import cosmos_rig

    cam = cosmos_rig(1280, 720).camera("camera_front_wide_120fov")
    K = rectified_intrinsics()
    # Points in front of the camera, projected by the f-theta model, land where the ideal
    # pinhole projects the same 3-D points.
    X = np.array([[0.0, 0.0, 10.0], [3.0, 1.0, 10.0], [-5.0, -1.0, 8.0]])
    uv_f, _, ok_f = cam.project(X)
    assert ok_f.all()
    out, ok = rectify_keypoints(uv_f, cam)
    expect = X @ K.T
    np.testing.assert_allclose(out[ok], (expect[:, :2] / expect[:, 2:])[ok], atol=1e-3)
    assert ok.all()


def test_protocol_aggregation_by_hand() -> None:
    frames = [FrameErrors(0, np.array([1.0, 3.0]), 2, True), FrameErrors(1, np.array([2.0, 2.0, 8.0]), 3, True),
              FrameErrors(2, np.zeros(0), 5, False)]
    s = video_summary(frames)
    # per-frame means 2 and 4 -> 3; per-frame medians 2 and 2 -> 2; the frame without F is excluded
    assert s["mean_of_frame_means_px"] == pytest.approx(3.0)
    assert s["median_of_frame_medians_px"] == pytest.approx(2.0)
    assert s["frames_without_f"] == 1
    d = dataset_summary(np.array([1.0, 2.0, np.nan, 6.0]))
    assert d["median_px"] == 2.0 and d["mean_px"] == pytest.approx(3.0) and d["videos"] == 3


def test_tse_on_real_frames(shared_data) -> None:
    from avsim.evaluation.video_frames import read_clip

    frames = read_clip(shared_data / "udacity" / "solidWhiteRight.mp4", max_frames=4)
    res = temporal_sampson(frames[:, ::2, ::2], None, MatchConfig())
    assert len(res) == 3 and all(r.f_ok for r in res)
    med = video_summary(res)["median_of_frame_medians_px"]
    # consecutive dash-cam frames are geometrically consistent: sub-pixel to few-pixel errors
    assert 0.0 < med < 5.0
    # shuffling one frame's pixels destroys consistency: the error grows
    broken = frames[:, ::2, ::2].copy()
    broken[1] = np.roll(broken[1], 37, axis=1)[::-1]
    summary_b = video_summary(temporal_sampson(broken[:2], None))
    # F is still fitted, so the error is measured, and it is larger
    assert summary_b["frames_without_f"] == 0
    assert summary_b["median_of_frame_medians_px"] > med


def test_sift_matcher_is_deterministic(shared_data) -> None:
    from avsim.evaluation.video_frames import read_clip

    f = read_clip(shared_data / "udacity" / "solidWhiteRight.mp4", max_frames=2)[:, ::2, ::2]
    a = SiftMatcher().match(f[0], f[1])
    b = SiftMatcher().match(f[0], f[1])
    assert len(a[0]) > 50
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_calibrated_f_from_the_rig_and_from_ego_motion() -> None:
    from avsim.core.rig import cosmos_rig
    from avsim.core.transforms import SE3
    from avsim.evaluation.sampson import calibrated_cross_F, calibrated_temporal_F

    rig = cosmos_rig(1280, 720)
    K = rectified_intrinsics()
    a, b = "camera_front_wide_120fov", "camera_cross_right_120fov"
    ego_a, ego_b = rig.extrinsic(a), rig.extrinsic(b)
    rng = np.random.default_rng(4)
    # points seen by both cameras: ahead and to the right of the car
    pts_ego = np.column_stack([rng.uniform(6, 20, 200), rng.uniform(-12, -3, 200), rng.uniform(-1, 2, 200)])

    def rect_pixels(ego_SE3_cam, pts):
        cam = ego_SE3_cam.inverse().apply(pts)
        uv = cam @ K.T
        return uv[:, :2] / uv[:, 2:], cam[:, 2] > 0.5

    x0, ok0 = rect_pixels(ego_a, pts_ego)
    x1, ok1 = rect_pixels(ego_b, pts_ego)
    ok = ok0 & ok1
    assert ok.sum() > 20
    F = calibrated_cross_F(ego_a, ego_b)
    assert sampson_error(F, x0[ok], x1[ok]).max() < 1e-6
    # temporal: the ego drives 1 m forward between frames
    world_SE3_cam = SE3.stack([SE3.from_matrix(np.eye(4)).compose(ego_a),
                               SE3.from_yaw(0.02, np.array([1.0, 0.0, 0.0])).compose(ego_a)])
    (Ft,) = calibrated_temporal_F(world_SE3_cam)
    pts_world = np.column_stack([rng.uniform(8, 30, 100), rng.uniform(-6, 6, 100), rng.uniform(-1, 2, 100)])
    c0 = world_SE3_cam[0].inverse().apply(pts_world)
    c1 = world_SE3_cam[1].inverse().apply(pts_world)
    u0, u1 = c0 @ K.T, c1 @ K.T
    assert sampson_error(Ft, u0[:, :2] / u0[:, 2:], u1[:, :2] / u1[:, 2:]).max() < 1e-6


# --------------------------------------------------------------------------- rectified frames, matcher interface


def test_a_rectified_frame_is_what_the_pinhole_sees() -> None:
    """An f-theta image of a smooth pattern of ray directions, warped, equals the pattern seen by the pinhole."""
    from avsim.core.rig import cosmos_rig
    from avsim.evaluation.rectify import PinholeRectifier, RectifyConfig

    cam = cosmos_rig(640, 360).camera("camera_front_wide_120fov")
    rect = RectifyConfig(480, 270, 120.0)

    def pattern(rays: np.ndarray) -> np.ndarray:  # a function of the pinhole coordinates x/z, y/z
        return 128 + 80 * np.sin(6.0 * rays[:, 0] / rays[:, 2]) * np.cos(6.0 * rays[:, 1] / rays[:, 2])

    us, vs = np.meshgrid(np.arange(640.0), np.arange(360.0))
    fisheye = pattern(cam.pixel_to_ray(np.stack([us.ravel(), vs.ravel()], 1))).reshape(360, 640)
    rectifier = PinholeRectifier(cam, rect)
    out = rectifier.rectify(np.rint(fisheye).astype(np.uint8)).astype(np.float64)
    ru, rv = np.meshgrid(np.arange(480.0), np.arange(270.0))
    K = rect.K
    expect = pattern(np.stack([(ru - K[0, 2]) / K[0, 0], (rv - K[1, 2]) / K[1, 1], np.ones_like(ru)], -1).reshape(-1, 3)).reshape(270, 480)
    valid = rectifier.valid
    assert 0.6 < valid.mean() < 0.95  # the 120 deg pinhole sees past the fisheye's top and bottom
    assert np.abs(out - expect)[valid].mean() < 0.4  # 0.28 grey levels; a map half a pixel off gives 0.79
    assert out[0, 240] == 0 and out[269, 240] == 0 and not valid[0, 240]  # the unseen band is black, invalid
    # the optical axis stays put: the rectified centre is the fisheye's principal point
    assert abs(out[135, 240] - fisheye[180, 320]) <= 1.0


class FixedMatcher:
    """A plug-in matcher returning given correspondences (any object with match/describe works)."""

    def __init__(self, x0: np.ndarray, x1: np.ndarray) -> None:
        self.x0, self.x1 = x0, x1

    def match(self, image_a: np.ndarray, image_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.x0, self.x1

    def describe(self) -> dict:
        return {"keypoints": "fixed"}


def test_a_plugged_in_matcher_and_keep_ratio() -> None:
    from avsim.evaluation.matchers import Matcher
    from avsim.evaluation.sampson import cross_errors, prepare_view

    K, R, t, x0, x1 = _two_views(np.random.default_rng(5), 100)
    noisy = x0.copy()
    noisy[:50] += np.array([0.0, 3.0])  # half the matches off their epipolar lines
    matcher = FixedMatcher(noisy, x1)
    assert isinstance(matcher, Matcher)
    from avsim.core.cameras import PinholeCamera

    cam = PinholeCamera(960, 540, K[0, 0], K[1, 1], K[0, 2], K[1, 2])
    frame = [np.zeros((540, 960, 3), np.uint8)]
    view0, view1 = prepare_view(frame, cam, "none"), prepare_view(frame, cam, "none")
    np.testing.assert_array_equal(view0.K, K)  # an undistorted pinhole needs no rectification for calibrated F
    F = fundamental_from_calibration(K, K, R, t)
    (all_,), _ = cross_errors(view0, view1, MatchConfig(), F, matcher)
    (half,), _ = cross_errors(view0, view1, MatchConfig(keep_ratio=0.5), F, matcher)
    assert all_.num_matches == half.num_matches == 100 and all_.errors_px.size == 100 and half.errors_px.size == 50
    assert half.errors_px.max() < 1e-6 < all_.errors_px.max()
    with pytest.raises(ValueError, match="keep_ratio"):
        MatchConfig(keep_ratio=0.0)
