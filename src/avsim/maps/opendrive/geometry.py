"""A road's reference line: position and heading at road s, from its plan-view geometries.

The formulas are the standard's (ASAM OpenDRIVE 1.8, section 7: geometry), in each geometry's
local frame (origin x, y, rotated by hdg) with ds = s - s_start:

- line: (ds, 0), heading 0;
- arc (curvature k): (sin(k ds) / k, (1 - cos(k ds)) / k), heading k ds;
- spiral (curvature k0 + c ds, c = (k1 - k0) / length): heading th(ds) = k0 ds + c ds^2 / 2 and
  position (integral of cos th, integral of sin th) from 0 to ds, in closed form with the Fresnel
  integrals (`clothoid_xy`);
- poly3 (a, b, c, d): the point (u, v(u)), v = a + b u + c u^2 + d u^3, where u is the value at
  which the arc length of the curve from u = 0 is ds; heading atan(v'(u));
- paramPoly3: the point (u(p), v(p)) of two cubics of p, p in [0, 1] (pRange normalized) or
  [0, length] (arcLength), with p such that the arc length from p = 0 is ds * L / length (L the
  curve's own length, so that s = length is the curve's end, as libOpenDRIVE maps it);
  heading atan2(v'(p), u'(p)).

poly3 and paramPoly3 arc lengths are Gauss-Legendre integrals (`_ARC_NODES` nodes per piece,
`_ARC_PIECES` pieces), inverted by interpolation and refined by Newton steps to below 1e-9 m.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import fresnel

from avsim.core.typing import NDArrayFloat
from avsim.maps.opendrive.model import GeometryKind, PlanGeometry

_ARC_PIECES = 64
_ARC_NODES = 16
_FLAT = 1e-12  # |curvature rate| below which a spiral is an arc


def clothoid_xy(ds: NDArrayFloat, k0: float, c: float) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat]:
    """A spiral in its local frame (start at the origin, heading 0), by the Fresnel integrals.

    With th(u) = k0 u + c u^2 / 2 = a (u + k0 / c)^2 + phi, a = c / 2, phi = -k0^2 / (2 c):
    x(ds) = int_{k0/c}^{ds + k0/c} cos(a w^2 + phi) dw and likewise y with sin; each integral is
    sqrt(pi / (2|a|)) times the Fresnel C and S at w sqrt(2|a| / pi).

    Args:
        ds: (N,) arc length from the spiral's start.
        k0: curvature at the start (1/m).
        c: curvature rate (1/m^2).

    Returns:
        x (N,), y (N,), heading (N,) in the local frame.
    """
    ds = np.asarray(ds, np.float64)
    if abs(c) < _FLAT:
        return _arc_xy(ds, k0)
    a = abs(c) / 2.0
    sign = 1.0 if c > 0 else -1.0
    scale = np.sqrt(np.pi / (2 * a))
    w0 = k0 / c
    phi = -k0 * k0 / (2 * c)
    s_start, c_start = fresnel(w0 / scale)
    s_end, c_end = fresnel((ds + w0) / scale)
    ci = scale * (c_end - c_start)  # int cos(a w^2)
    si = scale * (s_end - s_start) * sign  # int sin(sign a w^2)
    x = np.cos(phi) * ci - np.sin(phi) * si
    y = np.sin(phi) * ci + np.cos(phi) * si
    return x, y, k0 * ds + c * ds * ds / 2


def _arc_xy(ds: NDArrayFloat, k: float) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat]:
    if abs(k) < 1e-15:
        return ds.copy(), np.zeros_like(ds), np.zeros_like(ds)
    th = k * ds
    return np.sin(th) / k, (1 - np.cos(th)) / k, th


_GL_X, _GL_W = np.polynomial.legendre.leggauss(_ARC_NODES)


@dataclass(frozen=True, eq=False)
class _Cubic2D:
    """u(p), v(p) cubics with arc length tables over [0, p_end]."""

    u: NDArrayFloat  # (4,) coefficients, lowest order first
    v: NDArrayFloat
    p_end: float
    p_knots: NDArrayFloat  # (P+1,)
    s_knots: NDArrayFloat  # (P+1,) arc length at the knots

    @classmethod
    def of(cls, u: NDArrayFloat, v: NDArrayFloat, p_end: float) -> _Cubic2D:
        knots = np.linspace(0.0, p_end, _ARC_PIECES + 1)
        half = (knots[1:] - knots[:-1]) / 2
        mid = (knots[1:] + knots[:-1]) / 2
        p = mid[:, None] + half[:, None] * _GL_X[None, :]
        speed = cls._speed(u, v, p)
        pieces = (speed * _GL_W[None, :]).sum(1) * half
        return cls(u, v, p_end, knots, np.r_[0.0, np.cumsum(pieces)])

    @staticmethod
    def _speed(u: NDArrayFloat, v: NDArrayFloat, p: NDArrayFloat) -> NDArrayFloat:
        du = u[1] + p * (2 * u[2] + 3 * p * u[3])
        dv = v[1] + p * (2 * v[2] + 3 * p * v[3])
        return np.hypot(du, dv)

    @property
    def total(self) -> float:
        return float(self.s_knots[-1])

    def arc_length(self, p: NDArrayFloat) -> NDArrayFloat:
        """Arc length from 0 to p (N,)."""
        k = np.clip(np.searchsorted(self.p_knots, p, side="right") - 1, 0, _ARC_PIECES - 1)
        a = self.p_knots[k]
        half = (p - a) / 2
        nodes = (a + half)[:, None] + half[:, None] * _GL_X[None, :]
        return self.s_knots[k] + (self._speed(self.u, self.v, nodes) * _GL_W[None, :]).sum(1) * half

    def p_at(self, s: NDArrayFloat) -> NDArrayFloat:
        """The parameter p (N,) at arc length s (N,) (clipped to [0, p_end])."""
        s = np.clip(np.asarray(s, np.float64), 0.0, self.total)
        p = np.interp(s, self.s_knots, self.p_knots)
        for _ in range(6):
            speed = np.maximum(self._speed(self.u, self.v, p), 1e-12)
            step = (self.arc_length(p) - s) / speed
            p = np.clip(p - step, 0.0, self.p_end)
            if np.max(np.abs(step), initial=0.0) < 1e-12:
                break
        return p

    def point(self, p: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat]:
        x = self.u[0] + p * (self.u[1] + p * (self.u[2] + p * self.u[3]))
        y = self.v[0] + p * (self.v[1] + p * (self.v[2] + p * self.v[3]))
        du = self.u[1] + p * (2 * self.u[2] + 3 * p * self.u[3])
        dv = self.v[1] + p * (2 * self.v[2] + 3 * p * self.v[3])
        return x, y, np.arctan2(dv, du)


def _curve_of(g: PlanGeometry) -> _Cubic2D | None:
    if g.kind is GeometryKind.POLY3:
        a, b, c, d = g.params
        # u runs until the arc length reaches the geometry's length: find u_end by doubling then Newton
        u_end = max(g.length, 1e-9)
        curve = _Cubic2D.of(np.array([0.0, 1.0, 0.0, 0.0]), np.array([a, b, c, d]), u_end)
        for _ in range(60):
            if curve.total >= g.length or g.length == 0:
                break
            u_end *= 1.5
            curve = _Cubic2D.of(curve.u, curve.v, u_end)
        u_hit = float(curve.p_at(np.array([g.length]))[0]) if g.length > 0 else 0.0
        return _Cubic2D.of(curve.u, curve.v, max(u_hit, 1e-12))
    if g.kind is GeometryKind.PARAM_POLY3:
        p = g.params
        p_end = 1.0 if p[8] else g.length
        return _Cubic2D.of(np.array(p[0:4]), np.array(p[4:8]), max(p_end, 1e-12))
    return None


class ReferenceLine:
    """The plan view of one road: `xy_hdg(s)` evaluates every geometry kind, vectorised.

    Args:
        geometries: the road's geometries, sorted by s.
    """

    def __init__(self, geometries: tuple[PlanGeometry, ...]) -> None:
        self.geometries = geometries
        self.starts = np.array([g.s for g in geometries], np.float64)
        self._curves = [_curve_of(g) for g in geometries]

    def geometry_index(self, s: NDArrayFloat) -> np.ndarray:
        """Index (N,) of the geometry each s falls in (s before the first: the first)."""
        return np.clip(np.searchsorted(self.starts, s, side="right") - 1, 0, len(self.starts) - 1)

    def xy_hdg(self, s: NDArrayFloat | float) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat]:
        """The reference line at road s.

        Args:
            s: (N,) road s (m); values past a geometry's end extend it.

        Returns:
            x (N,), y (N,), heading (N,) in the inertial frame.
        """
        s = np.atleast_1d(np.asarray(s, np.float64))
        x, y, h = np.empty_like(s), np.empty_like(s), np.empty_like(s)
        idx = self.geometry_index(s)
        for k in np.unique(idx):
            sel = idx == k
            lx, ly, lh = self._local(int(k), s[sel] - self.geometries[k].s)
            g = self.geometries[k]
            cos, sin = np.cos(g.hdg), np.sin(g.hdg)
            x[sel] = g.x + cos * lx - sin * ly
            y[sel] = g.y + sin * lx + cos * ly
            h[sel] = g.hdg + lh
        return x, y, h

    def _local(self, k: int, ds: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat]:
        g = self.geometries[k]
        if g.kind is GeometryKind.LINE:
            return ds.copy(), np.zeros_like(ds), np.zeros_like(ds)
        if g.kind is GeometryKind.ARC:
            return _arc_xy(ds, g.params[0])
        if g.kind is GeometryKind.SPIRAL:
            k0, k1 = g.params
            return clothoid_xy(ds, k0, (k1 - k0) / g.length if g.length > 0 else 0.0)
        curve = self._curves[k]
        assert curve is not None
        scale = curve.total / g.length if g.length > 0 else 1.0
        inside = np.clip(ds, 0.0, g.length)
        x, y, h = curve.point(curve.p_at(inside * scale))
        past = ds - inside  # beyond either end: continue straight along the end tangent
        return x + past * np.cos(h), y + past * np.sin(h), h

    def curvature(self, s: NDArrayFloat, step_m: float = 1e-3) -> NDArrayFloat:
        """Signed curvature (N,) at road s, from the heading's central difference."""
        s = np.asarray(s, np.float64)
        _, _, h1 = self.xy_hdg(s + step_m)
        _, _, h0 = self.xy_hdg(s - step_m)
        return np.asarray((np.angle(np.exp(1j * (h1 - h0)))) / (2 * step_m))
