"""Temporal and cross-camera Sampson errors (TSE, CSE) of generated multi-view video.

Convention: a fundamental matrix F relates pixels of view 0 and view 1 by x0^T F x1 = 0
(homogeneous pixels). OpenCV's `findFundamentalMat(p1, p2)` returns F with p2^T F p1 = 0, so
it is called with (x1, x0). The reported error is sqrt(Sampson distance) in pixels (OpenCV
and kornia return the squared value).

Protocol (spec section 5): keypoints are SIFT with Lowe's ratio test, rectified from the
camera model to an ideal 120-degree 960x540 pinhole; F comes from RANSAC (OpenCV FM_RANSAC,
3 px, 0.99; deterministic) or from the known calibration (E = [t]x R, F = K0^-T E K1^-1).
TSE: consecutive frames of one view, one F per frame pair. CSE: two overlapping views at the
same instant, one F per clip from all frames' matches. Per video: mean of per-frame means and
median of per-frame medians; dataset: statistics over per-video medians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import cv2
import numpy as np

from avsim.core.errors import AvsimValueError

RECTIFIED_WIDTH_PX = 960
RECTIFIED_HEIGHT_PX = 540
RECTIFIED_HFOV_DEG = 120.0
TSE_VIEWS = ("camera_front_wide_120fov", "camera_cross_left_120fov", "camera_cross_right_120fov")
CSE_VIEW_PAIRS = (
    ("camera_front_wide_120fov", "camera_cross_right_120fov"),
    ("camera_front_wide_120fov", "camera_cross_left_120fov"),
)
MIN_MATCHES_FOR_F = 8


class _RayCamera(Protocol):
    def pixel_to_ray(self, uv_px: np.ndarray) -> np.ndarray: ...


# --------------------------------------------------------------------------- geometry


def _homogeneous(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 2:
        raise AvsimValueError(f"{name}: expected shape (N, 2), got {x.shape}")
    return np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)


def sampson_distance(F: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """Squared Sampson distance (px^2) of correspondences `x0 (N,2)`, `x1 (N,2)` under F."""
    F = np.asarray(F, dtype=np.float64)
    if F.shape != (3, 3):
        raise AvsimValueError(f"F: expected shape (3, 3), got {F.shape}")
    h0, h1 = _homogeneous(x0, "x0"), _homogeneous(x1, "x1")
    if h0.shape != h1.shape:
        raise AvsimValueError(f"x1: shape {h1.shape} differs from x0 {h0.shape}")
    Fx1 = h1 @ F.T  # (N, 3) = F x1
    Ftx0 = h0 @ F  # (N, 3) = F^T x0
    num = (h0 * Fx1).sum(axis=1) ** 2
    den = Ftx0[:, 0] ** 2 + Ftx0[:, 1] ** 2 + Fx1[:, 0] ** 2 + Fx1[:, 1] ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / den, np.where(num > 0, np.inf, 0.0))


def sampson_error(F: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """sqrt(Sampson distance) in pixels, (N,)."""
    return np.sqrt(sampson_distance(F, x0, x1))


def skew(t: np.ndarray) -> np.ndarray:
    t = np.asarray(t, dtype=np.float64).reshape(3)
    return np.array([[0.0, -t[2], t[1]], [t[2], 0.0, -t[0]], [-t[1], t[0], 0.0]])


def fundamental_from_calibration(
    K0: np.ndarray, K1: np.ndarray, cam0_R_cam1: np.ndarray, cam0_t_cam1: np.ndarray
) -> np.ndarray:
    """F with x0^T F x1 = 0 for points X0 = R X1 + t (camera 1 -> camera 0, OpenCV RDF frames)."""
    E = skew(cam0_t_cam1) @ np.asarray(cam0_R_cam1, dtype=np.float64)
    return np.linalg.inv(np.asarray(K0, np.float64)).T @ E @ np.linalg.inv(np.asarray(K1, np.float64))


def rectified_intrinsics(
    width_px: int = RECTIFIED_WIDTH_PX, height_px: int = RECTIFIED_HEIGHT_PX, hfov_deg: float = RECTIFIED_HFOV_DEG
) -> np.ndarray:
    """K (3,3) of the ideal pinhole used for rectification (square pixels, centred)."""
    f = 0.5 * width_px / math.tan(math.radians(hfov_deg) * 0.5)
    return np.array([[f, 0.0, width_px * 0.5], [0.0, f, height_px * 0.5], [0.0, 0.0, 1.0]])


def rectify_keypoints(uv_px: np.ndarray, camera: _RayCamera, K_rect: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Map pixels of `camera` (f-theta or pinhole) to the ideal pinhole: (uv (N,2), valid (N,)).

    The rectified camera keeps the source camera's frame; rays at or behind its image plane,
    or landing outside the rectified image, are invalid.
    """
    K = rectified_intrinsics() if K_rect is None else np.asarray(K_rect, np.float64)
    uv_px = np.asarray(uv_px, dtype=np.float64).reshape(-1, 2)
    if uv_px.shape[0] == 0:
        return np.zeros((0, 2)), np.zeros(0, bool)
    rays = camera.pixel_to_ray(uv_px)
    z = rays[:, 2]
    safe = np.where(z > 1e-6, z, 1.0)
    u = K[0, 0] * rays[:, 0] / safe + K[0, 2]
    v = K[1, 1] * rays[:, 1] / safe + K[1, 2]
    w, h = 2.0 * K[0, 2], 2.0 * K[1, 2]
    valid = (z > 1e-6) & (u >= 0) & (u < w) & (v >= 0) & (v < h)
    return np.stack([u, v], axis=1), valid


# --------------------------------------------------------------------------- matching


@dataclass(frozen=True)
class MatchConfig:
    """SIFT + ratio test + RANSAC settings (the public protocol's values by default)."""

    ratio: float = 0.75
    max_features: int = 4000
    ransac_threshold_px: float = 3.0
    ransac_confidence: float = 0.99
    errors_over: Literal["all_matches", "inliers"] = "all_matches"

    def as_dict(self) -> dict[str, Any]:
        return {
            "keypoints": "SIFT (OpenCV)", "ratio_test": self.ratio, "max_features": self.max_features,
            "f_estimator": "OpenCV FM_RANSAC", "ransac_threshold_px": self.ransac_threshold_px,
            "ransac_confidence": self.ransac_confidence, "errors_over": self.errors_over,
        }


def _gray(frame: np.ndarray) -> np.ndarray:
    f = np.asarray(frame)
    if f.ndim == 3 and f.shape[2] == 3:
        return cv2.cvtColor(np.ascontiguousarray(f, dtype=np.uint8), cv2.COLOR_RGB2GRAY)
    if f.ndim == 2:
        return np.ascontiguousarray(f, dtype=np.uint8)
    raise AvsimValueError(f"frame: expected (H, W, 3) or (H, W) uint8, got {f.shape}")


class SiftMatcher:
    """SIFT keypoints with Lowe's ratio test (brute-force L2 matching, k=2)."""

    def __init__(self, config: MatchConfig | None = None) -> None:
        self.config = config or MatchConfig()
        cv2.setRNGSeed(0)
        self._sift = cv2.SIFT_create(nfeatures=self.config.max_features)  # type: ignore[attr-defined]
        self._bf = cv2.BFMatcher(cv2.NORM_L2)

    def detect(self, frame: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        kps, desc = self._sift.detectAndCompute(_gray(frame), None)
        pts = np.array([k.pt for k in kps], dtype=np.float64).reshape(-1, 2)
        return pts, desc

    def match_features(
        self, f0: tuple[np.ndarray, np.ndarray | None], f1: tuple[np.ndarray, np.ndarray | None]
    ) -> tuple[np.ndarray, np.ndarray]:
        (p0, d0), (p1, d1) = f0, f1
        if d0 is None or d1 is None or len(p0) < 2 or len(p1) < 2:
            return np.zeros((0, 2)), np.zeros((0, 2))
        pairs = self._bf.knnMatch(d0, d1, k=2)
        i0, i1 = [], []
        for m in pairs:
            if len(m) == 2 and m[0].distance < self.config.ratio * m[1].distance:
                i0.append(m[0].queryIdx)
                i1.append(m[0].trainIdx)
        return p0[np.asarray(i0, np.int64)], p1[np.asarray(i1, np.int64)]

    def match(self, frame0: np.ndarray, frame1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ratio-test matches between two frames: (x0 (N,2), x1 (N,2)) pixels."""
        return self.match_features(self.detect(frame0), self.detect(frame1))


def estimate_fundamental_ransac(
    x0: np.ndarray, x1: np.ndarray, threshold_px: float = 3.0, confidence: float = 0.99
) -> tuple[np.ndarray | None, np.ndarray]:
    """RANSAC F (x0^T F x1 = 0) and inlier mask; (None, all-False) with fewer than 8 matches."""
    x0 = np.asarray(x0, np.float64).reshape(-1, 2)
    x1 = np.asarray(x1, np.float64).reshape(-1, 2)
    if x0.shape[0] < MIN_MATCHES_FOR_F or x0.shape != x1.shape:
        return None, np.zeros(x0.shape[0], bool)
    F, mask = cv2.findFundamentalMat(x1, x0, cv2.FM_RANSAC, threshold_px, confidence)
    if F is None or F.shape != (3, 3):  # degenerate input, or several 7-point solutions stacked
        return None, np.zeros(x0.shape[0], bool)
    return F.astype(np.float64), mask.reshape(-1).astype(bool)


# --------------------------------------------------------------------------- aggregation


@dataclass(frozen=True)
class FrameErrors:
    """Sampson errors of one frame (pair); errors empty when F could not be estimated."""

    index: int
    errors_px: np.ndarray
    num_matches: int
    f_ok: bool

    @property
    def mean(self) -> float:
        return float(self.errors_px.mean()) if self.errors_px.size else float("nan")

    @property
    def median(self) -> float:
        return float(np.median(self.errors_px)) if self.errors_px.size else float("nan")


def video_summary(frames: list[FrameErrors]) -> dict[str, Any]:
    """Per-video numbers: mean of per-frame means, median of per-frame medians."""
    means = np.array([f.mean for f in frames], dtype=np.float64)
    meds = np.array([f.median for f in frames], dtype=np.float64)
    ok = np.isfinite(means)
    return {
        "mean_of_frame_means_px": float(means[ok].mean()) if ok.any() else float("nan"),
        "median_of_frame_medians_px": float(np.median(meds[ok])) if ok.any() else float("nan"),
        "frames": len(frames),
        "frames_without_f": int((~ok).sum()),
        "per_frame_mean_px": means.tolist(),
        "per_frame_median_px": meds.tolist(),
    }


def dataset_summary(per_video_medians: np.ndarray) -> dict[str, float]:
    """Statistics over per-video medians (NaN videos, where no F was found, are left out)."""
    v = np.asarray(per_video_medians, np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"mean_px": float("nan"), "median_px": float("nan"), "std_px": float("nan"), "videos": 0}
    return {"mean_px": float(v.mean()), "median_px": float(np.median(v)), "std_px": float(v.std()), "videos": int(v.size)}


def _rectify_pair(x0: np.ndarray, x1: np.ndarray, cam0: _RayCamera | None, cam1: _RayCamera | None) -> tuple[np.ndarray, np.ndarray]:
    ok = np.ones(x0.shape[0], bool)
    if cam0 is not None:
        x0, v0 = rectify_keypoints(x0, cam0)
        ok &= v0
    if cam1 is not None:
        x1, v1 = rectify_keypoints(x1, cam1)
        ok &= v1
    return x0[ok], x1[ok]


def _errors_for(F: np.ndarray | None, inliers: np.ndarray, x0: np.ndarray, x1: np.ndarray, cfg: MatchConfig) -> np.ndarray:
    if F is None:
        return np.zeros(0)
    if cfg.errors_over == "inliers":
        x0, x1 = x0[inliers], x1[inliers]
    return sampson_error(F, x0, x1)


def temporal_sampson(
    frames: np.ndarray | list[np.ndarray],
    camera: _RayCamera | None = None,
    config: MatchConfig | None = None,
    calibrated_F: list[np.ndarray] | None = None,
) -> list[FrameErrors]:
    """TSE of one view: one F per consecutive frame pair (RANSAC, or `calibrated_F[t]`)."""
    cfg = config or MatchConfig()
    matcher = SiftMatcher(cfg)
    feats = [matcher.detect(f) for f in frames]
    out: list[FrameErrors] = []
    for t in range(len(feats) - 1):
        x0, x1 = matcher.match_features(feats[t], feats[t + 1])
        x0, x1 = _rectify_pair(x0, x1, camera, camera)
        F: np.ndarray | None
        if calibrated_F is not None:
            F, inl = calibrated_F[t], np.ones(x0.shape[0], bool)
            F = F if x0.shape[0] > 0 else None
        else:
            F, inl = estimate_fundamental_ransac(x0, x1, cfg.ransac_threshold_px, cfg.ransac_confidence)
        out.append(FrameErrors(t, _errors_for(F, inl, x0, x1, cfg), int(x0.shape[0]), F is not None))
    return out


def cross_view_sampson(
    frames0: np.ndarray | list[np.ndarray],
    frames1: np.ndarray | list[np.ndarray],
    camera0: _RayCamera | None = None,
    camera1: _RayCamera | None = None,
    config: MatchConfig | None = None,
    calibrated_F: np.ndarray | None = None,
) -> tuple[list[FrameErrors], np.ndarray | None]:
    """CSE of a view pair: one F per clip from all frames' matches; errors per frame."""
    cfg = config or MatchConfig()
    if len(frames0) != len(frames1):
        raise AvsimValueError(f"frames1: {len(frames1)} frames, frames0 has {len(frames0)}")
    matcher = SiftMatcher(cfg)
    per_frame = []
    for f0, f1 in zip(frames0, frames1):
        x0, x1 = matcher.match(f0, f1)
        per_frame.append(_rectify_pair(x0, x1, camera0, camera1))
    all0 = np.concatenate([p[0] for p in per_frame]) if per_frame else np.zeros((0, 2))
    all1 = np.concatenate([p[1] for p in per_frame]) if per_frame else np.zeros((0, 2))
    F: np.ndarray | None
    if calibrated_F is not None:
        F, inl_all = np.asarray(calibrated_F, np.float64), np.ones(all0.shape[0], bool)
    else:
        F, inl_all = estimate_fundamental_ransac(all0, all1, cfg.ransac_threshold_px, cfg.ransac_confidence)
    out, start = [], 0
    for t, (x0, x1) in enumerate(per_frame):
        inl = inl_all[start : start + x0.shape[0]]
        start += x0.shape[0]
        out.append(FrameErrors(t, _errors_for(F, inl, x0, x1, cfg), int(x0.shape[0]), F is not None))
    return out, F


# --------------------------------------------------------------------------- calibration helpers


def calibrated_temporal_F(world_SE3_camera: Any, K_rect: np.ndarray | None = None) -> list[np.ndarray]:
    """F per consecutive pair from camera poses (an `avsim.core.transforms.SE3` of batch (T,))."""
    K = rectified_intrinsics() if K_rect is None else K_rect
    mats = np.asarray(world_SE3_camera.as_matrix())
    out = []
    for t in range(mats.shape[0] - 1):
        rel = np.linalg.inv(mats[t]) @ mats[t + 1]  # cam_t <- cam_{t+1}
        out.append(fundamental_from_calibration(K, K, rel[:3, :3], rel[:3, 3]))
    return out


def calibrated_cross_F(ego_SE3_camera0: Any, ego_SE3_camera1: Any, K_rect: np.ndarray | None = None) -> np.ndarray:
    """F between two rig cameras (unbatched `SE3` extrinsics) for rectified keypoints."""
    K = rectified_intrinsics() if K_rect is None else K_rect
    rel = np.linalg.inv(np.asarray(ego_SE3_camera0.as_matrix())) @ np.asarray(ego_SE3_camera1.as_matrix())
    return fundamental_from_calibration(K, K, rel[:3, :3], rel[:3, 3])
