"""OpenCV's radial-tangential lens distortion (k1, k2, p1, p2, k3) and the range where it is valid.

On normalised image coordinates (x, y) = (X / Z, Y / Z), r^2 = x^2 + y^2, OpenCV's model is

    x_d = x (1 + k1 r^2 + k2 r^4 + k3 r^6) + 2 p1 x y + p2 (r^2 + 2 x^2)
    y_d = y (1 + k1 r^2 + k2 r^4 + k3 r^6) + p1 (r^2 + 2 y^2) + 2 p2 x y

Its radial part g(r) = r (1 + k1 r^2 + k2 r^4 + k3 r^6) rises from 0 up to its first turning
point `valid_radius` (where g'(r) = 1 + 3 k1 r^2 + 5 k2 r^4 + 7 k3 r^6 = 0; infinite when g never
turns) and falls after it: past that radius the polynomial folds points far off the axis back
towards the centre (AlpaSim's example camera, k1 = -0.356, turns 51.7 deg off axis), so it is
used only inside it. Beyond it `distort` continues the map along the same ray at the secant
slope g(r_v) / r_v (the polynomial, tangential terms included, at the turning radius, plus a
straight radial run): a continuous, rising map whose far-off-axis points land outside every
image the lens covers. A camera whose image reaches past the distorted turning radius
(`check_covers`) cannot be imaged by the model; `avsim.core.cameras.PinholeCamera` refuses one.

`undistort` inverts `distort`: OpenCV's fixed-point iteration (as `undistortPoints`), kept where it
converged, and elsewhere (near the turning radius it converges slowly or not at all) a bisection
of the rising radial map with the tangential terms iterated out.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.typing import NDArrayBool, NDArrayFloat

__all__ = ["OpenCVDistortion"]

FIXED_POINT_STEPS = 30  # OpenCV-style fixed-point iterations of `undistort`
CONVERGED = 1e-10  # normalised distance under which a fixed-point answer is kept
BISECTION_STEPS = 64  # halvings of the radial bracket (2^-64 of it: past float64)
TANGENTIAL_STEPS = 20  # outer iterations taking the tangential terms out
BOUNDARY_DIRECTIONS = 720  # directions sampled around the turning radius (`boundary_radius`)


@dataclass(frozen=True)
class OpenCVDistortion:
    """OpenCV's five distortion coefficients in `cv2` order (see the module docstring)."""

    k1: float
    k2: float
    p1: float
    p2: float
    k3: float

    @cached_property
    def valid_radius(self) -> float:
        """The first turning point of the radial map (normalised radius; inf when it never turns)."""
        coeffs = [7.0 * self.k3, 5.0 * self.k2, 3.0 * self.k1, 1.0]  # g'(r) as a polynomial in s = r^2
        while coeffs and coeffs[0] == 0.0:
            coeffs.pop(0)
        if len(coeffs) < 2:
            return float("inf")
        roots = np.roots(coeffs)
        s = roots[(np.abs(roots.imag) <= 1e-12 * np.maximum(np.abs(roots.real), 1.0)) & (roots.real > 0)].real
        return float(np.sqrt(s.min())) if s.size else float("inf")

    @cached_property
    def valid_distorted_radius(self) -> float:
        """g(valid_radius): the largest radius the radial polynomial reaches (inf when it never turns)."""
        r = self.valid_radius
        return float(r * self._radial(r * r)) if np.isfinite(r) else float("inf")

    @cached_property
    def boundary_radius(self) -> float:
        """The smallest distorted radius on the turning circle, tangential terms included (inf when none).

        Every distorted point inside it comes from the valid range (the map is one-to-one there).
        """
        r = self.valid_radius
        if not np.isfinite(r):
            return float("inf")
        a = np.linspace(0.0, 2.0 * np.pi, BOUNDARY_DIRECTIONS, endpoint=False)
        xd, yd = self._polynomial(r * np.cos(a), r * np.sin(a))
        return float(np.hypot(xd, yd).min())

    def _radial(self, r2: NDArrayFloat | float) -> NDArrayFloat:
        return 1 + r2 * (self.k1 + r2 * (self.k2 + r2 * self.k3))  # type: ignore[return-value]

    def _polynomial(self, xn: NDArrayFloat, yn: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
        """OpenCV's polynomial as it is (folding past the turning radius)."""
        k1, k2, p1, p2, k3 = self.k1, self.k2, self.p1, self.p2, self.k3
        r2 = xn * xn + yn * yn
        radial = 1 + r2 * (k1 + r2 * (k2 + r2 * k3))
        xd = xn * radial + 2 * p1 * xn * yn + p2 * (r2 + 2 * xn * xn)
        yd = yn * radial + p1 * (r2 + 2 * yn * yn) + 2 * p2 * xn * yn
        return xd, yd

    def distort(self, xn: NDArrayFloat, yn: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
        """Distorted normalised coordinates (OpenCV's inside the valid range, continued past it).

        Args:
            xn: (N,) undistorted x / z (NaN stays NaN).
            yn: (N,) undistorted y / z.

        Returns:
            (xd, yd), each (N,).
        """
        xd, yd = self._polynomial(xn, yn)
        r_v = self.valid_radius
        if not np.isfinite(r_v):
            return xd, yd
        with np.errstate(invalid="ignore"):
            beyond = xn * xn + yn * yn > r_v * r_v
        if not beyond.any():
            return xd, yd
        xs, ys = xn[beyond], yn[beyond]
        scale = r_v / np.sqrt(xs * xs + ys * ys)
        xb, yb = self._polynomial(xs * scale, ys * scale)
        extra = (1 - scale) * (self.valid_distorted_radius / r_v)
        xd, yd = np.array(xd, np.float64), np.array(yd, np.float64)
        xd[beyond], yd[beyond] = xb + xs * extra, yb + ys * extra
        return xd, yd

    def beyond(self, xn: NDArrayFloat, yn: NDArrayFloat) -> NDArrayBool:
        """(N,) bool: points past the valid range (NaN: False)."""
        with np.errstate(invalid="ignore"):
            out: NDArrayBool = xn * xn + yn * yn > self.valid_radius**2
        return out

    def check_covers(self, corners_xy: NDArrayFloat, image: str) -> None:
        """AvsimValueError unless an image whose distorted normalised corners are `corners_xy` (K, 2) lies inside the valid range.

        Args:
            corners_xy: (K, 2) the image's corners as distorted x / z, y / z.
            image: the image in words, for the message.
        """
        reach = float(np.hypot(corners_xy[:, 0], corners_xy[:, 1]).max())
        if not reach < self.boundary_radius:
            raise AvsimValueError(
                f"distortion: the polynomial {(self.k1, self.k2, self.p1, self.p2, self.k3)} turns back "
                f"{np.degrees(np.arctan(self.valid_radius)):.1f} deg off axis, inside {image} (it reaches a distorted radius of "
                f"{self.boundary_radius:.4g}, the image corners {reach:.4g}): points beyond would fold back into the image"
            )

    def undistort(self, xd: NDArrayFloat, yd: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
        """The inverse of `distort` (see the module docstring).

        Args:
            xd: (N,) distorted x.
            yd: (N,) distorted y.

        Returns:
            (xn, yn), each (N,).
        """
        xn, yn = xd.copy(), yd.copy()
        k1, k2, p1, p2, k3 = self.k1, self.k2, self.p1, self.p2, self.k3
        for _ in range(FIXED_POINT_STEPS):
            r2 = xn * xn + yn * yn
            radial = 1 + r2 * (k1 + r2 * (k2 + r2 * k3))
            dx = 2 * p1 * xn * yn + p2 * (r2 + 2 * xn * xn)
            dy = p1 * (r2 + 2 * yn * yn) + 2 * p2 * xn * yn
            xn, yn = (xd - dx) / radial, (yd - dy) / radial
        with np.errstate(invalid="ignore", over="ignore"):
            back_x, back_y = self.distort(xn, yn)
            bad = ~(np.hypot(back_x - xd, back_y - yd) <= CONVERGED) & np.isfinite(xd) & np.isfinite(yd)
        if bad.any():
            xn, yn = np.array(xn, np.float64), np.array(yn, np.float64)
            xn[bad], yn[bad] = self._solve(xd[bad], yd[bad])
        return xn, yn

    def _solve(self, xd: NDArrayFloat, yd: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
        """`undistort` by bisection of the rising radial map, the tangential terms iterated out."""
        xn, yn = xd.copy(), yd.copy()
        r_v = self.valid_radius
        for _ in range(TANGENTIAL_STEPS if (self.p1 or self.p2) else 1):
            r = np.hypot(xn, yn)
            clamp = np.where(r > r_v, r_v / np.maximum(r, 1e-300), 1.0)
            cx, cy = xn * clamp, yn * clamp
            r2 = cx * cx + cy * cy
            qx = xd - (2 * self.p1 * cx * cy + self.p2 * (r2 + 2 * cx * cx))
            qy = yd - (self.p1 * (r2 + 2 * cy * cy) + 2 * self.p2 * cx * cy)
            q = np.hypot(qx, qy)
            factor = np.where(q > 0, self._radius_of(q) / np.maximum(q, 1e-300), 1.0)
            xn, yn = qx * factor, qy * factor
        return xn, yn

    def _radius_of(self, q: NDArrayFloat) -> NDArrayFloat:
        """The undistorted radius r (N,) whose radial map is q (N,) (the continued map past the turning point)."""
        r_v, q_v = self.valid_radius, self.valid_distorted_radius
        out = np.zeros_like(q)
        past = q >= q_v
        if past.any():
            out[past] = r_v + (q[past] - q_v) * (r_v / q_v)
        inside = np.flatnonzero(~past)
        if not inside.size:
            return out
        target = q[inside]
        lo = np.zeros_like(target)
        hi: NDArrayFloat = np.full_like(target, r_v) if np.isfinite(r_v) else np.maximum(target, 1.0)
        for _ in range(BISECTION_STEPS):  # an unbounded rising map: grow the bracket first
            short = hi * self._radial(hi * hi) < target
            if not short.any():
                break
            hi = np.where(short, 2 * hi, hi)
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            low = mid * self._radial(mid * mid) < target
            lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
        out[inside] = 0.5 * (lo + hi)
        return out
