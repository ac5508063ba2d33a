"""LET pair measures: longitudinal affinity, the range-aligned prediction centre, heading
accuracy, and the reference's quantised Hungarian weight (Waymo metrics/iou.cc, matcher.h).

Centres are sensor-relative (the sensor location already subtracted), in metres.
"""

from __future__ import annotations

import numpy as np


def longitudinal_affinity(
    gt_center_m: np.ndarray,
    pd_center_m: np.ndarray,
    tolerance_fraction: float = 0.10,
    min_tolerance_m: float = 0.5,
) -> np.ndarray:
    """LA in [0, 1] for sensor-relative centres `(..., 3)` (broadcasting) -> `(...)`."""
    g = np.asarray(gt_center_m, dtype=np.float64)
    p = np.asarray(pd_center_m, dtype=np.float64)
    r_gt = np.maximum(np.linalg.norm(g, axis=-1), 1e-6)
    r_pd = np.maximum(np.linalg.norm(p, axis=-1), 1e-6)
    cos = (g * p).sum(axis=-1) / (r_gt * r_pd)
    e_lon = np.abs(r_pd * cos - r_gt)
    tol = np.maximum(tolerance_fraction * r_gt, min_tolerance_m)
    return np.clip(1.0 - e_lon / tol, 0.0, 1.0)


def let_aligned_centers(gt_center_m: np.ndarray, pd_center_m: np.ndarray) -> np.ndarray:
    """Prediction centres moved along their line of sight to the point nearest the GT centre."""
    g = np.asarray(gt_center_m, dtype=np.float64)
    p = np.asarray(pd_center_m, dtype=np.float64)
    scale = (g * p).sum(axis=-1) / np.maximum((p * p).sum(axis=-1), 1e-6)
    return p * scale[..., None]


def heading_accuracy(gt_heading_rad: np.ndarray, pd_heading_rad: np.ndarray) -> np.ndarray:
    """HA = clamp(1 - |dheading|/pi, 0, 1), with the difference folded into [0, pi]."""
    d = np.abs(np.mod(np.asarray(pd_heading_rad) - np.asarray(gt_heading_rad) + np.pi, 2 * np.pi) - np.pi)
    return np.clip(1.0 - d / np.pi, 0.0, 1.0)


def quantised_weight(iou32: np.ndarray, la32: np.ndarray) -> np.ndarray:
    """Waymo's Hungarian weight `std::round(float(IoU * LA) * 1000000)` in float32 arithmetic.

    The reference holds IoU and LA as `float` (matcher.h) and compares IoU with the float
    class threshold, so avsim rounds both to float32 first; `std::round` rounds halves away
    from zero (numpy's `rint` would round them to even).

    Args:
        iou32: (E,) float32 LET-IoU; la32: (E,) float32 longitudinal affinity.

    Returns:
        (E,) int64 weights in [0, 1000000].
    """
    scaled = (iou32 * la32).astype(np.float32) * np.float32(1_000_000)
    return np.floor(scaled.astype(np.float64) + 0.5).astype(np.int64)
