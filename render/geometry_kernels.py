"""Compiled (numba) pieces of the renderer's geometry stage, with the same outputs as numpy.

- `project_px`: pixels of camera-frame points. For an f-theta camera the ray angle comes
  from numpy (the same `arctan2` / `hypot` calls as `FThetaCamera.project`, so the same
  last bits) and the radial polynomial, its Newton polish and the pixel map run in one
  compiled loop, in the same order of operations (numba without fastmath fuses no
  multiply-add), so the pixels equal `camera.project` bit for bit at a fraction of the
  call cost. Other cameras use their own `project`.
- `pixel_bounds_kernel`: per-owner min/max of pixels in one pass (exact: comparisons only).

Without numba both fall back to the numpy paths.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from avsim.core.cameras import Camera, FThetaCamera
from avsim.core.typing import NDArrayFloat, NDArrayInt

__all__ = ["HAVE_NUMBA", "Projector", "owner_min_max", "project_px"]

_njit: Any
try:
    import numba

    _njit = numba.njit(cache=True, nogil=True, fastmath=False, boundscheck=False)
except ImportError:  # pragma: no cover - exercised only where numba is missing
    _njit = None

HAVE_NUMBA = _njit is not None
_NEWTON_STEPS = 3  # avsim.core.cameras.NEWTON_STEPS


def _ftheta_params(camera: FThetaCamera) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayFloat]:
    """Forward, backward and derivative-of-backward coefficients, then the scalars of the map."""
    fw, bw = camera.forward_poly, camera.backward_poly
    dbw = bw[1:] * np.arange(1, len(bw))  # avsim.core.cameras._polyder
    theta_max = camera.max_theta_rad
    r_end = _polyval_np(fw, np.array(theta_max))
    slope = _polyval_np(fw[1:] * np.arange(1, len(fw)), np.array(theta_max))
    c, d, e = camera.linear_cde
    scalars = np.array([theta_max, float(r_end), float(slope), c, d, e, camera.cx_px, camera.cy_px,
                        float(camera.is_backward_poly)])  # fmt: skip
    return fw, bw, dbw, scalars


def _polyval_np(coeffs: NDArrayFloat, x: NDArrayFloat) -> NDArrayFloat:
    out: NDArrayFloat = np.zeros_like(x, dtype=np.float64)
    for c in coeffs[::-1]:
        out = out * x + c
    return out


def project_px(camera: Camera, points_cam: NDArrayFloat) -> NDArrayFloat:
    """Pixels of camera-frame points, equal to `camera.project(points_cam)[0]`.

    Args:
        camera: the camera.
        points_cam: (N, 3) camera-frame points.

    Returns:
        (N, 2) float64 pixels.
    """
    return Projector(camera)(points_cam)


class Projector:
    """`project_px` for one camera, its polynomial coefficients prepared once (for repeated calls)."""

    def __init__(self, camera: Camera) -> None:
        self.camera = camera
        self.params = _ftheta_params(camera) if _njit is not None and isinstance(camera, FThetaCamera) else None

    def __call__(self, points_cam: NDArrayFloat) -> NDArrayFloat:
        """Pixels of camera-frame points (see `project_px`).

        Args:
            points_cam: (N, 3) camera-frame points.

        Returns:
            (N, 2) float64 pixels.
        """
        pts = np.asarray(points_cam, dtype=np.float64)
        if not len(pts):
            return np.zeros((0, 2))
        if self.params is None:
            uv: NDArrayFloat = self.camera.project(pts)[0]
            return uv
        x, y, z = (np.ascontiguousarray(pts[:, k]) for k in range(3))  # contiguous: no alignment-dependent SIMD peel
        xy_norm = np.hypot(x, y)
        theta = np.arctan2(xy_norm, z)
        out = np.empty((len(pts), 2))
        _ftheta_pixels(np.ascontiguousarray(pts), xy_norm, theta, *self.params, out)
        return out


def owner_min_max(n: int, owner: NDArrayInt, uv: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Per-owner minimum and maximum of pixels (owners without pixels: +inf / -inf).

    Args:
        n: number of owners.
        owner: (M,) owner index of each pixel, in [0, n).
        uv: (M, 2) pixels.

    Returns:
        lo (n, 2), hi (n, 2).
    """
    lo = np.full((n, 2), np.inf)
    hi = np.full((n, 2), -np.inf)
    if not len(owner):
        return lo, hi
    if _njit is None:  # pragma: no cover - exercised only where numba is missing
        np.minimum.at(lo, owner, uv)
        np.maximum.at(hi, owner, uv)
        return lo, hi
    _min_max(np.ascontiguousarray(owner, dtype=np.int64), np.ascontiguousarray(uv, dtype=np.float64), lo, hi)
    return lo, hi


if _njit is not None:

    @_njit
    def _polyval(coeffs: NDArrayFloat, x: float) -> float:
        out = 0.0
        for k in range(len(coeffs) - 1, -1, -1):
            out = out * x + coeffs[k]
        return out

    @_njit
    def _ftheta_pixels(
        pts: NDArrayFloat, xy_norm: NDArrayFloat, theta: NDArrayFloat, fw: NDArrayFloat, bw: NDArrayFloat,
        dbw: NDArrayFloat, scalars: NDArrayFloat, out: NDArrayFloat,
    ) -> None:  # fmt: skip
        theta_max, r_end, slope, c, d, e, cx, cy, backward = scalars
        for i in range(len(pts)):
            th = theta[i]
            r = _polyval(fw, th)
            if backward != 0.0:
                for _ in range(_NEWTON_STEPS):
                    deriv = _polyval(dbw, r)
                    r = r - (_polyval(bw, r) - th) / (deriv if abs(deriv) > 1e-12 else 1e-12)
            if th > theta_max:
                r = r_end + slope * (th - theta_max)
            n = xy_norm[i]
            if n == 0:
                ox, oy = 0.0, 0.0
            else:
                ox, oy = pts[i, 0] / n * r, pts[i, 1] / n * r
            out[i, 0] = c * ox + d * oy + cx
            out[i, 1] = e * ox + oy + cy

    @_njit
    def _min_max(owner: NDArrayInt, uv: NDArrayFloat, lo: NDArrayFloat, hi: NDArrayFloat) -> None:
        for i in range(len(owner)):
            k = owner[i]
            for j in range(2):
                v = uv[i, j]
                if v < lo[k, j] or v != v:  # NaN propagates, as in np.minimum
                    lo[k, j] = v
                if v > hi[k, j] or v != v:
                    hi[k, j] = v
