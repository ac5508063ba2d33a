"""Temporal and cross-camera Sampson errors (TSE, CSE) of generated multi-view video.

Convention: a fundamental matrix F relates pixels of view 0 and view 1 by x0^T F x1 = 0
(homogeneous pixels). OpenCV's `findFundamentalMat(p1, p2)` returns F with p2^T F p1 = 0, so
it is called with (x1, x0). The reported error is sqrt(Sampson distance) in pixels (OpenCV
and kornia return the squared value).

Protocol (spec section 5, issue 11): frames of an f-theta (or any modelled) camera are
rectified to an ideal pinhole with the same optical axis (120 deg horizontal FOV, 960x540 by
default; `avsim.evaluation.rectify`) *before* matching; keypoints are SIFT with Lowe's ratio
test (any `avsim.evaluation.matchers.Matcher` plugs in). F comes from the calibration
(E = [t]x R, F = K^-T E K^-1 on the rectified intrinsics): for CSE from the two cameras'
mounting, for TSE from the camera's pose change between frames t and t + gap. RANSAC
(OpenCV FM_RANSAC, 3 px, 0.99; deterministic) is the alternative when there is no
calibration. TSE: one F per frame pair; CSE: two views at the same instant, one F per clip
(calibrated: the rig's; RANSAC: from the matches of the frames that count). Per video: mean of
per-frame means and median of per-frame medians; dataset: statistics over per-video medians.

A frame (pair) counts only with at least `MatchConfig.min_matches` matches (default
`MIN_MATCHES_PER_FRAME` = 16, twice the 8 points a RANSAC F is fitted to): below that an F fits
the few points it has (RANSAC's F goes through 8 of them exactly) and the error says nothing;
pure-noise frames give 0-6 cross-view matches, and 1-5 of them pooled gave a CSE of 7e-14 px.
Such frames are skipped with their reason, and a video without a frame that counts has no
error (NaN, "n/a"), never a near-zero one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import cv2
import numpy as np

from avsim.core.cameras import PinholeCamera
from avsim.core.errors import AvsimValueError
from avsim.core.progress import StepProgress, report_step
from avsim.core.shapes import check_shape
from avsim.evaluation.matchers import Matcher, SiftMatcher
from avsim.evaluation.rectify import (
    PinholeRectifier,
    RayCamera,
    RectifyConfig,
    rectified_intrinsics,
    rectify_keypoints,
)

__all__ = [
    "CSE_VIEW_PAIRS", "MIN_BASELINE_M", "MIN_MATCHES_PER_FRAME", "TSE_VIEWS", "FrameErrors", "MatchConfig", "PreparedView", "RectifyMode",
    "SiftMatcher", "calibrated_cross_F", "calibrated_temporal_F", "cross_errors", "skew",
    "cross_view_sampson", "dataset_summary", "estimate_fundamental_ransac", "fundamental_from_calibration",
    "fundamental_from_pose", "prepare_view", "rectified_intrinsics", "rectify_keypoints", "sampson_distance",
    "sampson_error", "temporal_errors", "temporal_sampson", "video_summary",
]  # fmt: skip

TSE_VIEWS = ("camera_front_wide_120fov", "camera_cross_left_120fov", "camera_cross_right_120fov")
CSE_VIEW_PAIRS = (
    ("camera_front_wide_120fov", "camera_cross_right_120fov"),
    ("camera_front_wide_120fov", "camera_cross_left_120fov"),
)
MIN_MATCHES_FOR_F = 8
MIN_MATCHES_PER_FRAME = 16  # a frame (pair) with fewer matches is not scored (module docstring)
MIN_BASELINE_M = 0.01  # below this the essential matrix [t]x R is (numerically) zero
RectifyMode = Literal["frames", "keypoints", "none"]
PointMap = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


# --------------------------------------------------------------------------- geometry


def _homogeneous(x: np.ndarray, name: str, dims: dict[str, int] | None = None) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    check_shape(x, ("N", 2), name, dims=dims)
    return np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)


def sampson_distance(F: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """Squared Sampson distance of correspondences under F (x0^T F x1 = 0).

    Args:
        F: (3, 3) fundamental matrix.
        x0: (N, 2) pixels in view 0.
        x1: (N, 2) pixels in view 1.

    Returns:
        (N,) squared distances in px^2.
    """
    F = np.asarray(F, dtype=np.float64)
    check_shape(F, (3, 3), "F")
    dims: dict[str, int] = {}
    h0, h1 = _homogeneous(x0, "x0", dims), _homogeneous(x1, "x1", dims)
    Fx1 = h1 @ F.T  # (N, 3) = F x1
    Ftx0 = h0 @ F  # (N, 3) = F^T x0
    num = (h0 * Fx1).sum(axis=1) ** 2
    den = Ftx0[:, 0] ** 2 + Ftx0[:, 1] ** 2 + Fx1[:, 0] ** 2 + Fx1[:, 1] ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / den, np.where(num > 0, np.inf, 0.0))


def sampson_error(F: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """sqrt(Sampson distance): (N,) errors in pixels (arguments as `sampson_distance`)."""
    return np.sqrt(sampson_distance(F, x0, x1))


def skew(t: np.ndarray) -> np.ndarray:
    """(3, 3) cross-product matrix [t]x of a 3-vector."""
    t = np.asarray(t, dtype=np.float64).reshape(3)
    return np.array([[0.0, -t[2], t[1]], [t[2], 0.0, -t[0]], [-t[1], t[0], 0.0]])


def fundamental_from_calibration(
    K0: np.ndarray, K1: np.ndarray, cam0_R_cam1: np.ndarray, cam0_t_cam1: np.ndarray
) -> np.ndarray:
    """F with x0^T F x1 = 0 for points X0 = R X1 + t (camera 1 -> camera 0, OpenCV RDF frames).

    Args:
        K0: (3, 3) intrinsics of view 0.
        K1: (3, 3) intrinsics of view 1.
        cam0_R_cam1: (3, 3) rotation.
        cam0_t_cam1: (3,) translation in metres.

    Returns:
        (3, 3) F = K0^-T [t]x R K1^-1.
    """
    E = skew(cam0_t_cam1) @ np.asarray(cam0_R_cam1, dtype=np.float64)
    return np.linalg.inv(np.asarray(K0, np.float64)).T @ E @ np.linalg.inv(np.asarray(K1, np.float64))


def fundamental_from_pose(
    cam0_SE3_cam1: np.ndarray, K0: np.ndarray, K1: np.ndarray, min_baseline_m: float = MIN_BASELINE_M
) -> np.ndarray | None:
    """F from a relative pose, or None when the centres are closer than `min_baseline_m`.

    With (near) zero translation, E = [t]x R vanishes: the two images are related by a
    homography and epipolar geometry says nothing, so such pairs are skipped, not scored.

    Args:
        cam0_SE3_cam1: (4, 4) camera 1's frame in camera 0's.
        K0: (3, 3) intrinsics of view 0.
        K1: (3, 3) intrinsics of view 1.
        min_baseline_m: smallest admissible distance between the camera centres.

    Returns:
        (3, 3) F, or None.
    """
    T = np.asarray(cam0_SE3_cam1, np.float64)
    if float(np.linalg.norm(T[:3, 3])) < min_baseline_m:
        return None
    return fundamental_from_calibration(K0, K1, T[:3, :3], T[:3, 3])


def estimate_fundamental_ransac(
    x0: np.ndarray, x1: np.ndarray, threshold_px: float = 3.0, confidence: float = 0.99
) -> tuple[np.ndarray | None, np.ndarray]:
    """RANSAC F (x0^T F x1 = 0) and its inlier mask.

    Args:
        x0: (N, 2) pixels in view 0.
        x1: (N, 2) pixels in view 1.
        threshold_px: RANSAC inlier threshold.
        confidence: RANSAC confidence.

    Returns:
        F (3, 3) and inliers (N,) bool; (None, all False) with fewer than 8 matches.
    """
    x0 = np.asarray(x0, np.float64).reshape(-1, 2)
    x1 = np.asarray(x1, np.float64).reshape(-1, 2)
    if x0.shape[0] < MIN_MATCHES_FOR_F or x0.shape != x1.shape:
        return None, np.zeros(x0.shape[0], bool)
    F, mask = cv2.findFundamentalMat(x1, x0, cv2.FM_RANSAC, threshold_px, confidence)
    if F is None or F.shape != (3, 3):  # degenerate input, or several 7-point solutions stacked
        return None, np.zeros(x0.shape[0], bool)
    return F.astype(np.float64), mask.reshape(-1).astype(bool)


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class MatchConfig:
    """SIFT + ratio test + F settings (the public protocol's values by default)."""

    ratio: float = 0.75
    max_features: int = 4000
    ransac_threshold_px: float = 3.0
    ransac_confidence: float = 0.99
    errors_over: Literal["all_matches", "inliers"] = "all_matches"  # "inliers": RANSAC inliers only
    min_baseline_m: float = MIN_BASELINE_M
    keep_ratio: float = 1.0  # per frame, score only the lowest-error fraction (the reference code's keep_ratio)
    min_matches: int = MIN_MATCHES_PER_FRAME  # a frame (pair) with fewer matches is not scored

    def __post_init__(self) -> None:
        if self.errors_over not in ("all_matches", "inliers"):
            raise AvsimValueError(f"errors_over: 'all_matches' or 'inliers', got {self.errors_over!r}")
        if not 0 < self.keep_ratio <= 1:
            raise AvsimValueError(f"keep_ratio: must be in (0, 1], got {self.keep_ratio}")
        if not (self.ransac_threshold_px > 0 and 0 < self.ransac_confidence < 1 and self.min_baseline_m >= 0):
            raise AvsimValueError("MatchConfig: ransac_threshold_px > 0, 0 < ransac_confidence < 1, min_baseline_m >= 0")
        if int(self.min_matches) < MIN_MATCHES_FOR_F:
            raise AvsimValueError(f"min_matches: at least {MIN_MATCHES_FOR_F} (an F needs 8 points), got {self.min_matches}")

    def matcher(self) -> SiftMatcher:
        """The default matcher with these settings.

        Returns:
            SiftMatcher(ratio, max_features).
        """
        return SiftMatcher(self.ratio, self.max_features)

    def as_dict(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict.

        Returns:
            keypoints, ratio test, feature count, RANSAC settings, errors_over, baseline, keep_ratio, min_matches.
        """
        return {
            "keypoints": "SIFT (OpenCV)", "ratio_test": self.ratio, "max_features": self.max_features,
            "ransac_threshold_px": self.ransac_threshold_px, "ransac_confidence": self.ransac_confidence,
            "errors_over": self.errors_over, "min_baseline_m": self.min_baseline_m, "keep_ratio": self.keep_ratio,
            "min_matches_per_frame": self.min_matches,
        }  # fmt: skip


# --------------------------------------------------------------------------- aggregation


@dataclass(frozen=True)
class FrameErrors:
    """Sampson errors of one frame (pair); empty, with `skip_reason`, when it was not scored."""

    index: int
    errors_px: np.ndarray
    num_matches: int
    f_ok: bool
    skip_reason: str = ""

    @property
    def mean(self) -> float:
        """Mean error (px), NaN when not scored."""
        return float(self.errors_px.mean()) if self.errors_px.size else float("nan")

    @property
    def median(self) -> float:
        """Median error (px), NaN when not scored."""
        return float(np.median(self.errors_px)) if self.errors_px.size else float("nan")


def _match_stats(counts: np.ndarray) -> dict[str, Any]:
    if counts.size == 0:
        return {"total": 0, "per_frame_min": 0, "per_frame_median": 0.0, "per_frame_max": 0, "per_frame": []}
    return {"total": int(counts.sum()), "per_frame_min": int(counts.min()), "per_frame_median": float(np.median(counts)),
            "per_frame_max": int(counts.max()), "per_frame": counts.tolist()}  # fmt: skip


def video_summary(frames: list[FrameErrors]) -> dict[str, Any]:
    """Per-video numbers: mean of per-frame means, median of per-frame medians, match counts.

    Args:
        frames: per-frame (pair) errors.

    Returns:
        JSON-ready dict; frames without errors are left out of the statistics and counted in
        `frames_without_f`, by reason in `skipped`.
    """
    means = np.array([f.mean for f in frames], dtype=np.float64)
    meds = np.array([f.median for f in frames], dtype=np.float64)
    ok = np.isfinite(means)
    skipped: dict[str, int] = {}
    for f in frames:
        if not np.isfinite(f.mean):
            reason = f.skip_reason or "no errors"
            skipped[reason] = skipped.get(reason, 0) + 1
    return {
        "mean_of_frame_means_px": float(means[ok].mean()) if ok.any() else float("nan"),
        "median_of_frame_medians_px": float(np.median(meds[ok])) if ok.any() else float("nan"),
        "frames": len(frames),
        "frames_without_f": int((~ok).sum()),
        "skipped": skipped,
        "matches": _match_stats(np.array([f.num_matches for f in frames], dtype=np.int64)),
        "per_frame_mean_px": means.tolist(),
        "per_frame_median_px": meds.tolist(),
    }


def dataset_summary(per_video_medians: np.ndarray) -> dict[str, float]:
    """Statistics over per-video medians (NaN videos, where nothing was scored, are left out).

    Args:
        per_video_medians: (V,) medians of per-frame medians.

    Returns:
        mean_px, median_px, std_px and the number of videos used.
    """
    v = np.asarray(per_video_medians, np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"mean_px": float("nan"), "median_px": float("nan"), "std_px": float("nan"), "videos": 0}
    return {"mean_px": float(v.mean()), "median_px": float(np.median(v)), "std_px": float(v.std()), "videos": int(v.size)}


# --------------------------------------------------------------------------- views


@dataclass(frozen=True, eq=False)
class PreparedView:
    """One camera's frames as the matcher sees them, and how matched pixels reach F's pixels.

    frames: the matcher's images (rectified in "frames" mode, else as read); point_map: matcher
    pixels (N, 2) -> (F-space pixels (N, 2), valid (N,)); K: (3, 3) intrinsics of F-space
    pixels (None: unknown, RANSAC only); rectification: its description for the document.
    """

    frames: list[np.ndarray]
    point_map: PointMap
    K: np.ndarray | None
    rectification: dict[str, Any]


def _identity(uv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uv = np.asarray(uv, np.float64).reshape(-1, 2)
    return uv, np.ones(uv.shape[0], bool)


def _plain_K(camera: RayCamera | None) -> np.ndarray | None:
    if isinstance(camera, PinholeCamera) and not camera.has_distortion:
        return camera.K
    return None


def prepare_view(
    frames: Iterable[np.ndarray], camera: RayCamera | None, mode: RectifyMode = "frames", rect: RectifyConfig | None = None,
    progress: StepProgress | None = None, step: str = "rectify", total: int = 0,
) -> PreparedView:  # fmt: skip
    """Rectify a camera's frames (or set up keypoint rectification) for matching.

    Args:
        frames: (H, W, 3) uint8 frames (any iterable: a clip is rectified as it is read).
        camera: the camera model at the frames' resolution; None: no model, frames used as is.
        mode: "frames" (warp each frame to the pinhole, then match), "keypoints" (match the
            raw frames, rectify the matched points: the public reference code's order), or "none".
        rect: the virtual pinhole (default `RectifyConfig()`).
        progress: called as `(step, frames done, total)` after each frame.
        step: progress step name.
        total: frames expected (for the progress bar only).

    Returns:
        The prepared view.
    """
    rect = rect or RectifyConfig()
    if mode not in ("frames", "keypoints", "none"):
        raise AvsimValueError(f"rectify: 'frames', 'keypoints' or 'none', got {mode!r}")
    out: list[np.ndarray] = []
    if camera is None or mode == "none":
        for i, f in enumerate(frames):
            out.append(np.asarray(f))
            report_step(progress, step, i + 1, total)
        return PreparedView(out, _identity, _plain_K(camera), {"mode": "none"})
    desc = {"mode": mode, **rect.as_dict()}
    if mode == "keypoints":
        K = rect.K
        for i, f in enumerate(frames):
            out.append(np.asarray(f))
            report_step(progress, step, i + 1, total)
        return PreparedView(out, lambda uv: rectify_keypoints(uv, camera, K), K, desc)
    rectifier = PinholeRectifier(camera, rect)
    for i, f in enumerate(frames):
        out.append(rectifier.rectify(f))
        report_step(progress, step, i + 1, total)
    return PreparedView(out, lambda uv: (np.asarray(uv, np.float64).reshape(-1, 2), rectifier.keep(uv)), rect.K, desc)


# --------------------------------------------------------------------------- errors


def _matched(matcher: Matcher, view0: PreparedView, i0: int, view1: PreparedView, i1: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = matcher.match(view0.frames[i0], view1.frames[i1])
    a, va = view0.point_map(a)
    b, vb = view1.point_map(b)
    ok = va & vb
    return a[ok], b[ok]


def _errors_for(F: np.ndarray | None, inliers: np.ndarray, x0: np.ndarray, x1: np.ndarray, cfg: MatchConfig) -> np.ndarray:
    if F is None:
        return np.zeros(0)
    if cfg.errors_over == "inliers":
        x0, x1 = x0[inliers], x1[inliers]
    errors = sampson_error(F, x0, x1)
    if cfg.keep_ratio < 1.0 and errors.size:
        errors = np.sort(errors)[: max(1, int(errors.size * cfg.keep_ratio))]
    return errors


def _scored(index: int, F: np.ndarray | None, inl: np.ndarray, x0: np.ndarray, x1: np.ndarray, cfg: MatchConfig,
            why_no_f: str) -> FrameErrors:  # fmt: skip
    n = int(x0.shape[0])
    if n < cfg.min_matches:
        return FrameErrors(index, np.zeros(0), n, F is not None, too_few_matches(cfg.min_matches))
    if F is None:
        return FrameErrors(index, np.zeros(0), n, False, why_no_f)
    return FrameErrors(index, _errors_for(F, inl, x0, x1, cfg), n, True)


def too_few_matches(minimum: int) -> str:
    """The skip reason of a frame (pair) with fewer than `minimum` matches."""
    return f"fewer than {minimum} matches"


def temporal_errors(
    view: PreparedView, config: MatchConfig | None = None, calibrated_F: Sequence[np.ndarray | None] | None = None,
    gap: int = 1, matcher: Matcher | None = None, progress: StepProgress | None = None, step: str = "match",
) -> list[FrameErrors]:  # fmt: skip
    """TSE of one view: frames t and t + gap, one F per pair.

    Args:
        view: the prepared view (T frames).
        config: matching and RANSAC settings.
        calibrated_F: per pair t (T - gap entries) the calibrated F, or None for a pair
            without one (baseline too short); None: RANSAC per pair.
        gap: frame distance of a pair (>= 1).
        matcher: default `config.matcher()` (SIFT + ratio test).
        progress: called as `(step, pairs done, pairs)`.
        step: progress step name.

    Returns:
        T - gap `FrameErrors`, index t.
    """
    cfg = config or MatchConfig()
    matcher = matcher or cfg.matcher()
    n = len(view.frames) - gap
    if gap < 1:
        raise AvsimValueError(f"gap: must be >= 1, got {gap}")
    if calibrated_F is not None and len(calibrated_F) < max(n, 0):
        raise AvsimValueError(f"calibrated_F: {len(calibrated_F)} matrices for {n} frame pairs")
    out: list[FrameErrors] = []
    for t in range(max(n, 0)):
        x0, x1 = _matched(matcher, view, t, view, t + gap)
        if calibrated_F is not None:
            F, inl, why = calibrated_F[t], np.ones(x0.shape[0], bool), f"camera moved less than {cfg.min_baseline_m:g} m"
        elif x0.shape[0] >= cfg.min_matches:
            F, inl = estimate_fundamental_ransac(x0, x1, cfg.ransac_threshold_px, cfg.ransac_confidence)
            why = f"RANSAC found no F ({x0.shape[0]} matches)"
        else:
            F, inl, why = None, np.zeros(x0.shape[0], bool), ""
        out.append(_scored(t, F, inl, x0, x1, cfg, why))
        report_step(progress, step, t + 1, n)
    return out


def cross_errors(
    view0: PreparedView, view1: PreparedView, config: MatchConfig | None = None, calibrated_F: np.ndarray | None = None,
    matcher: Matcher | None = None, progress: StepProgress | None = None, step: str = "match",
) -> tuple[list[FrameErrors], np.ndarray | None]:  # fmt: skip
    """CSE of a view pair at the same instants: one F per clip, errors per frame.

    Args:
        view0: the first view (T frames).
        view1: the second view (same instants; the shorter length is used).
        config: matching and RANSAC settings.
        calibrated_F: (3, 3) F from the rig; None: RANSAC on all frames' matches.
        matcher: default `config.matcher()`.
        progress: called as `(step, frames done, frames)`.
        step: progress step name.

    Returns:
        Per-frame errors and the F used (None when RANSAC found none).
    """
    cfg = config or MatchConfig()
    matcher = matcher or cfg.matcher()
    n = min(len(view0.frames), len(view1.frames))
    per_frame = []
    for t in range(n):
        per_frame.append(_matched(matcher, view0, t, view1, t))
        report_step(progress, step, t + 1, n)
    counts = [p[0].shape[0] for p in per_frame]
    pooled = [p for p, c in zip(per_frame, counts) if c >= cfg.min_matches]  # RANSAC: only the frames that count
    all0 = np.concatenate([p[0] for p in pooled]) if pooled else np.zeros((0, 2))
    all1 = np.concatenate([p[1] for p in pooled]) if pooled else np.zeros((0, 2))
    F: np.ndarray | None
    if calibrated_F is not None:
        F = np.asarray(calibrated_F, np.float64)
        inl_all = np.ones(all0.shape[0], bool)
    else:
        F, inl_all = estimate_fundamental_ransac(all0, all1, cfg.ransac_threshold_px, cfg.ransac_confidence)
    out, start = [], 0
    for t, (x0, x1) in enumerate(per_frame):
        n = x0.shape[0] if counts[t] >= cfg.min_matches else 0
        inl = inl_all[start : start + n] if n else np.ones(x0.shape[0], bool)
        start += n
        out.append(_scored(t, F, inl, x0, x1, cfg, f"RANSAC found no F for the clip ({all0.shape[0]} matches)"))
    return out, F


# --------------------------------------------------------------------------- array front ends


def temporal_sampson(
    frames: np.ndarray | Sequence[np.ndarray], camera: RayCamera | None = None, config: MatchConfig | None = None,
    calibrated_F: Sequence[np.ndarray | None] | None = None, *, mode: RectifyMode = "frames",
    rect: RectifyConfig | None = None, gap: int = 1, matcher: Matcher | None = None,
) -> list[FrameErrors]:  # fmt: skip
    """TSE of one clip held in memory (frames rectified through `camera` unless it is None).

    Args:
        frames: (T, H, W, 3) uint8.
        camera: its camera model (None: no rectification).
        config: matching settings.
        calibrated_F: per pair F on the rectified intrinsics (see `calibrated_temporal_F`);
            None: RANSAC.
        mode: rectification mode (see `prepare_view`).
        rect: the virtual pinhole.
        gap: frame distance of a pair.
        matcher: default SIFT + ratio test.

    Returns:
        T - gap `FrameErrors`.
    """
    view = prepare_view(list(frames), camera, mode, rect)
    return temporal_errors(view, config, calibrated_F, gap, matcher)


def cross_view_sampson(
    frames0: np.ndarray | Sequence[np.ndarray], frames1: np.ndarray | Sequence[np.ndarray],
    camera0: RayCamera | None = None, camera1: RayCamera | None = None, config: MatchConfig | None = None,
    calibrated_F: np.ndarray | None = None, *, mode: RectifyMode = "frames", rect: RectifyConfig | None = None,
    matcher: Matcher | None = None,
) -> tuple[list[FrameErrors], np.ndarray | None]:  # fmt: skip
    """CSE of two clips held in memory (same instants; same number of frames).

    Args:
        frames0: (T, H, W, 3) uint8 of view 0.
        frames1: (T, H', W', 3) uint8 of view 1.
        camera0: camera model of view 0 (None: no rectification).
        camera1: camera model of view 1.
        config: matching settings.
        calibrated_F: (3, 3) F on the rectified intrinsics (see `calibrated_cross_F`); None: RANSAC.
        mode: rectification mode.
        rect: the virtual pinhole.
        matcher: default SIFT + ratio test.

    Returns:
        Per-frame errors and the F used.
    """
    if len(frames0) != len(frames1):
        raise AvsimValueError(f"frames1: {len(frames1)} frames, frames0 has {len(frames0)}")
    v0 = prepare_view(list(frames0), camera0, mode, rect)
    v1 = prepare_view(list(frames1), camera1, mode, rect)
    return cross_errors(v0, v1, config, calibrated_F, matcher)


# --------------------------------------------------------------------------- calibration helpers


def _matrices(poses: Any) -> np.ndarray:
    """(..., 4, 4) from an `avsim.core.transforms.SE3` or an array."""
    return np.asarray(poses.as_matrix() if hasattr(poses, "as_matrix") else poses, np.float64)


def calibrated_temporal_F(
    world_SE3_camera: Any, K_rect: np.ndarray | None = None, gap: int = 1, min_baseline_m: float = MIN_BASELINE_M
) -> list[np.ndarray | None]:
    """F per frame pair (t, t + gap) from the camera's poses.

    Args:
        world_SE3_camera: (T,) batched SE3 or (T, 4, 4) camera poses.
        K_rect: (3, 3) intrinsics of the (rectified) images (default `rectified_intrinsics()`).
        gap: frame distance of a pair.
        min_baseline_m: pairs whose camera moved less get None.

    Returns:
        T - gap entries: (3, 3) F, or None.
    """
    K = rectified_intrinsics() if K_rect is None else np.asarray(K_rect, np.float64)
    mats = _matrices(world_SE3_camera)
    return [fundamental_from_pose(np.linalg.inv(mats[t]) @ mats[t + gap], K, K, min_baseline_m) for t in range(mats.shape[0] - gap)]


def calibrated_cross_F(
    ego_SE3_camera0: Any, ego_SE3_camera1: Any, K_rect: np.ndarray | None = None, min_baseline_m: float = MIN_BASELINE_M
) -> np.ndarray | None:
    """F between two rig cameras for (rectified) pixels.

    Args:
        ego_SE3_camera0: unbatched SE3 or (4, 4) mounting of camera 0.
        ego_SE3_camera1: the same for camera 1.
        K_rect: (3, 3) intrinsics of both (rectified) views (default `rectified_intrinsics()`).
        min_baseline_m: cameras closer than this give None (no epipolar geometry).

    Returns:
        (3, 3) F, or None.
    """
    K = rectified_intrinsics() if K_rect is None else np.asarray(K_rect, np.float64)
    rel = np.linalg.inv(_matrices(ego_SE3_camera0)) @ _matrices(ego_SE3_camera1)
    return fundamental_from_pose(rel, K, K, min_baseline_m)
