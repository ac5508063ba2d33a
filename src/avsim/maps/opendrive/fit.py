"""Fit an OpenDRIVE road to one lane: a reference line through its left rail, a width to its right.

- **Reference line**: G1-continuous cubic Hermite pieces written as paramPoly3 (pRange normalized)
  through a subset of the left rail's vertices (every vertex where the rail turns; a piece grows
  while every vertex it spans stays within `FIT_TOLERANCE_M` of it), tangents from the rail's
  neighbouring vertices, end tangents from the end segments; each piece's `length` is its arc
  length (Gauss-Legendre, 1e-9 m), as ASAM's checker verifies.
- **Width**: the right rail's vertices (and points every `WIDTH_STEP_M` between them) projected
  onto the fitted line give (s, w); a monotone cubic Hermite (PCHIP) through them gives one
  `<width>` record per interval, so the right rail's vertices are exact.
- **Elevation and superelevation**: z of the left rail along s (PCHIP, `<elevation>`), and the roll
  that puts the right rail at its own height (`<superelevation>`), written only where the lane is
  not flat.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.interpolate import PchipInterpolator

from avsim.core.typing import NDArrayFloat
from avsim.maps.opendrive.geometry import ReferenceLine
from avsim.maps.opendrive.model import Cubic, GeometryKind, PlanGeometry

FIT_TOLERANCE_M = 0.002
WIDTH_STEP_M = 2.0
ON_ROAD_M = 1e-4  # a point's foot is on the road when it is this close along the road to its projection
ACROSS_MAX_RAD = 0.5
MAX_SPAN = 40  # a piece spans at most this many rail vertices
_GL_X, _GL_W = np.polynomial.legendre.leggauss(24)


@dataclass(frozen=True)
class FittedLane:
    """One lane as a road: geometries (s from 0), length, width, elevation and superelevation."""

    geometries: tuple[PlanGeometry, ...]
    length: float
    width: Cubic
    elevation: Cubic
    superelevation: Cubic
    on_right: bool = False  # the reference line is the right rail; a laneOffset (= width) lifts the lane onto it


def dedupe(points: NDArrayFloat, min_step_m: float = 1e-3) -> NDArrayFloat:
    """Drop vertices closer than `min_step_m` (in xy) to the previous kept one (the last is kept)."""
    p = np.asarray(points, np.float64)
    keep = [0]
    for i in range(1, len(p)):
        if np.linalg.norm(p[i, :2] - p[keep[-1], :2]) >= min_step_m:
            keep.append(i)
    if len(keep) > 1 and np.linalg.norm(p[-1, :2] - p[keep[-1], :2]) > 0:
        keep[-1] = len(p) - 1
    return p[keep]


def _tangents(p: NDArrayFloat) -> NDArrayFloat:
    d = np.zeros((len(p), 2))
    d[1:-1] = p[2:, :2] - p[:-2, :2]
    d[0] = p[1, :2] - p[0, :2]
    d[-1] = p[-1, :2] - p[-2, :2]
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def _hermite(p0: NDArrayFloat, t0: NDArrayFloat, p1: NDArrayFloat, t1: NDArrayFloat) -> tuple[float, NDArrayFloat, NDArrayFloat]:
    """A paramPoly3 piece: heading, u and v coefficients (4,) in the frame at p0 along t0."""
    hdg = float(np.arctan2(t0[1], t0[0]))
    c, s = np.cos(hdg), np.sin(hdg)
    rot = np.array([[c, s], [-s, c]])
    chord = float(np.linalg.norm(p1 - p0))
    P1 = rot @ (p1 - p0)
    M0 = np.array([chord, 0.0])
    M1 = chord * (rot @ t1)
    b, cc, d = M0, -2 * M0 + 3 * P1 - M1, M0 - 2 * P1 + M1
    return hdg, np.array([0.0, b[0], cc[0], d[0]]), np.array([0.0, b[1], cc[1], d[1]])


def _poly(coef: NDArrayFloat, p: NDArrayFloat) -> NDArrayFloat:
    return coef[0] + p * (coef[1] + p * (coef[2] + p * coef[3]))


def _arc_length(u: NDArrayFloat, v: NDArrayFloat) -> float:
    p = (_GL_X + 1) / 2
    du = u[1] + p * (2 * u[2] + 3 * p * u[3])
    dv = v[1] + p * (2 * v[2] + 3 * p * v[3])
    return float((np.hypot(du, dv) * _GL_W).sum() / 2)


def _deviation(p: NDArrayFloat, t: NDArrayFloat, i: int, j: int) -> float:
    """Largest distance of vertices i..j from the Hermite piece between them."""
    if j - i < 2:
        return 0.0
    hdg, u, v = _hermite(p[i, :2], t[i], p[j, :2], t[j])
    q = np.linspace(0.0, 1.0, 64 * (j - i) + 1)
    c, s = np.cos(hdg), np.sin(hdg)
    lu, lv = _poly(u, q), _poly(v, q)
    curve = p[i, :2] + np.stack([c * lu - s * lv, s * lu + c * lv], 1)
    inner = p[i + 1 : j, :2]
    return float(np.min(np.linalg.norm(inner[:, None, :] - curve[None, :, :], axis=2), axis=1).max())


def _knots(p: NDArrayFloat, t: NDArrayFloat, tolerance_m: float) -> list[int]:
    knots = [0]
    while knots[-1] < len(p) - 1:
        i = knots[-1]
        j = i + 1
        while j + 1 < len(p) and j + 1 - i <= MAX_SPAN and _deviation(p, t, i, j + 1) <= tolerance_m:
            j += 1
        knots.append(j)
    return knots


def fit_reference(rail: NDArrayFloat, tolerance_m: float = FIT_TOLERANCE_M, start_heading: float | None = None,
                  end_heading: float | None = None) -> tuple[tuple[PlanGeometry, ...], NDArrayFloat]:  # fmt: skip
    """paramPoly3 pieces through a rail (see the module docstring).

    Args:
        rail: (N, 3) vertices, N >= 2, consecutive ones distinct.
        tolerance_m: largest distance of a skipped vertex from its piece.
        start_heading: the heading at the first vertex (None: from the rail), so that a linked
            road continues its predecessor without a kink.
        end_heading: likewise at the last vertex.

    Returns:
        The geometries (s from 0) and the road s (N,) of every rail vertex that is a knot (NaN elsewhere).
    """
    p = np.asarray(rail, np.float64)
    t = _tangents(p)
    if start_heading is not None:
        t[0] = [np.cos(start_heading), np.sin(start_heading)]
    if end_heading is not None:
        t[-1] = [np.cos(end_heading), np.sin(end_heading)]
    knots = _knots(p, t, tolerance_m)
    geoms: list[PlanGeometry] = []
    s = 0.0
    s_at = np.full(len(p), np.nan)
    for i, j in zip(knots[:-1], knots[1:]):
        hdg, u, v = _hermite(p[i, :2], t[i], p[j, :2], t[j])
        length = _arc_length(u, v)
        geoms.append(PlanGeometry(s, float(p[i, 0]), float(p[i, 1]), hdg, length, GeometryKind.PARAM_POLY3, (*u, *v, 1.0)))
        s_at[i] = s
        s += length
    s_at[knots[-1]] = s
    return tuple(geoms), s_at


def project(ref: ReferenceLine, length: float, points: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Road s and planar t (N,) of points on a reference line (Newton from the nearest sample)."""
    grid = np.linspace(0.0, length, max(int(length / 0.25), 2) + 1)
    gx, gy, _ = ref.xy_hdg(grid)
    pts = np.asarray(points, np.float64)[:, :2]
    s = grid[np.argmin(np.hypot(gx[None] - pts[:, :1], gy[None] - pts[:, 1:2]), axis=1)]
    for _ in range(30):
        x, y, h = ref.xy_hdg(s)
        step = (pts[:, 0] - x) * np.cos(h) + (pts[:, 1] - y) * np.sin(h)
        s = np.clip(s + step, 0.0, length)
        if np.abs(step).max() < 1e-10:
            break
    x, y, h = ref.xy_hdg(s)
    return s, -(pts[:, 0] - x) * np.sin(h) + (pts[:, 1] - y) * np.cos(h)


def _densify(rail: NDArrayFloat, step_m: float) -> NDArrayFloat:
    out = [rail[:1]]
    for a, b in zip(rail[:-1], rail[1:]):
        n = max(int(np.ceil(np.linalg.norm(b[:2] - a[:2]) / step_m)), 1)
        out.append(a + (b - a) * (np.arange(1, n + 1) / n)[:, None])
    return np.concatenate(out)


def _pchip_cubic(s: NDArrayFloat, values: NDArrayFloat) -> Cubic:
    """Records (s_k, a, b, c, d) of a PCHIP through (s, values) (s increasing, unique); the first
    record starts at s = 0 (its cubic re-centred there: it extends the first interval backwards)."""
    if len(s) == 1 or np.ptp(values) < 1e-12:
        return Cubic(np.array([0.0]), np.array([[float(values[0]), 0.0, 0.0, 0.0]]))
    pc = PchipInterpolator(s, values)
    c = pc.c  # (4, K): highest order first
    coeffs = np.stack([c[3], c[2], c[1], c[0]], axis=1)
    starts = s[:-1].copy()
    if starts[0] != 0.0:
        shifted = np.polynomial.Polynomial(coeffs[0])(np.polynomial.Polynomial([-starts[0], 1.0]))
        coeffs[0] = np.pad(shifted.coef, (0, 4 - len(shifted.coef)))[:4]
        starts[0] = 0.0
    return Cubic(starts, coeffs)


def _unique(s: NDArrayFloat, *cols: NDArrayFloat) -> tuple[NDArrayFloat, ...]:
    order = np.argsort(s, kind="stable")
    s = s[order]
    keep = np.r_[True, np.diff(s) > 1e-6]
    return (s[keep], *(c[order][keep] for c in cols))


@dataclass(frozen=True)
class EndState:
    """A road end another road must continue: heading (rad), width (m), superelevation (rad)."""

    heading: float
    width: float
    roll: float = 0.0


def end_states(fit: FittedLane) -> tuple[EndState, EndState]:
    """The fitted road's heading and width at its start and at its end."""
    ref = ReferenceLine(fit.geometries)
    _, _, h = ref.xy_hdg(np.array([0.0, fit.length]))
    w = fit.width(np.array([0.0, fit.length]))
    r = fit.superelevation(np.array([0.0, fit.length]))
    return EndState(float(h[0]), float(w[0]), float(r[0])), EndState(float(h[1]), float(w[1]), float(r[1]))


def _pin(cubic: Cubic, length: float, start: float | None, end: float | None) -> Cubic:
    """The cubic with its value at 0 (and at `length`) moved to `start` (`end`) by a linear ramp
    over its first (last) record, so the other end of that record keeps its value."""
    starts, coeffs = cubic.starts.copy(), cubic.coeffs.copy()
    bounds = np.r_[starts[1:], length]
    if start is not None:
        h = max(bounds[0] - starts[0], 1e-9)
        delta = start - float(cubic(np.array([starts[0]]))[0])
        coeffs[0, 0] += delta
        coeffs[0, 1] -= delta / h
    if end is not None:
        k = len(starts) - 1
        h = max(length - starts[k], 1e-9)
        delta = end - float(Cubic(starts, coeffs)(np.array([length]))[0])
        coeffs[k, 1] += delta / h
    return Cubic(starts, coeffs)


def _width_samples(ref: ReferenceLine, length: float, rail: NDArrayFloat, s_left: NDArrayFloat,
                   right: NDArrayFloat, side: float = -1.0) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat]:  # fmt: skip
    """(s, width, roll) of the other rail's points (on the `side` of the reference line: -1 right,
    +1 left) whose perpendicular foot is on the road (a skewed lane end projects past it: its foot is
    clamped to an end), held constant to s = 0 and s = length."""
    pts = _densify(right, WIDTH_STEP_M)
    s_r, t_r = project(ref, length, pts)
    x, y, h = ref.xy_hdg(s_r)
    along = (pts[:, 0] - x) * np.cos(h) + (pts[:, 1] - y) * np.sin(h)
    inside = np.abs(along) < ON_ROAD_M
    if not inside.any():
        inside = np.ones(len(s_r), bool)
    s_r, t_r, pts = s_r[inside], t_r[inside], pts[inside]
    if len(np.unique(s_left)) > 1:
        z0 = PchipInterpolator(*_unique(s_left, rail[:, 2]))(s_r)
    else:
        z0 = np.full(len(s_r), rail[0, 2])
    dz = z0 - pts[:, 2]
    lateral = np.maximum(side * t_r, 0.0)
    width = np.hypot(lateral, dz)
    roll = np.arctan2(-side * dz, np.maximum(lateral, 1e-6))
    s_w, w, r = _unique(s_r, width, roll)
    s_w, w, r = np.r_[0.0, s_w, length], np.r_[w[0], w, w[-1]], np.r_[r[0], r, r[-1]]
    keep = np.r_[True, np.diff(s_w) > 1e-6]
    keep[-1] = True
    keep[-2] = keep[-2] and s_w[-1] - s_w[-2] > 1e-6 if len(keep) > 2 else keep[-2]
    return s_w[keep], w[keep], r[keep]


def _across(rail: NDArrayFloat, other: NDArrayFloat, i: int) -> float | None:
    """The heading at the end i (0 or -1) of `rail` whose normal runs to `other`'s end (the lane's
    end cross-section), if within `ACROSS_MAX_RAD` of the rail's own end segment (else None: a
    slanted end keeps the rail's tangent)."""
    d = other[i, :2] - rail[i, :2]
    h = float(np.arctan2(d[1], d[0]) - np.pi / 2)
    seg = rail[1, :2] - rail[0, :2] if i == 0 else rail[-1, :2] - rail[-2, :2]
    own = float(np.arctan2(seg[1], seg[0]))
    return h if abs(np.angle(np.exp(1j * (h - own)))) <= ACROSS_MAX_RAD else None


def fit_lane(left: NDArrayFloat, right: NDArrayFloat, tolerance_m: float = FIT_TOLERANCE_M, start: EndState | None = None,
             end: EndState | None = None, on_right: bool = False) -> FittedLane:  # fmt: skip
    """A one-lane road for a lane with these rails (see the module docstring).

    Args:
        left: (N, 3) left rail in the driving direction (N >= 2).
        right: (M, 3) right rail (M >= 2).
        tolerance_m: the reference line's fit tolerance.
        start: heading and width the road must start with (continuing its predecessor), or None.
        end: heading and width it must end with (meeting its successor), or None.
        on_right: the reference line follows the right rail (the outer rail of a tight left turn,
            whose cross-sections the left rail's normals cannot hold) and the width reaches the left.

    Returns:
        The fitted road.
    """
    headings = (start.heading if start else None, end.heading if end else None)
    if on_right:  # its ends across the lane's end cross-sections (right rail end to left rail end)
        headings = (headings[0] if start else _across(right, left, 0), headings[1] if end else _across(right, left, -1))
        left, right = right, left
    rail = dedupe(left)
    if len(rail) < 2:
        rail = np.stack([left[0], left[0] + [1e-3, 0.0, 0.0]])
    geoms, s_knots = fit_reference(rail, tolerance_m, *headings)
    length = geoms[-1].s + geoms[-1].length
    ref = ReferenceLine(geoms)
    s_left, _ = project(ref, length, rail)
    s_w, w, r = _width_samples(ref, float(length), rail, s_left, dedupe(right), 1.0 if on_right else -1.0)
    s_e, z = _unique(s_left, rail[:, 2])
    flat = np.abs(z).max() < 1e-9
    level = np.abs(np.r_[r, start.roll if start else 0.0, end.roll if end else 0.0]).max() < 1e-6
    width_cubic = _pin(_pchip_cubic(s_w, w), float(length), start.width if start else None, end.width if end else None)
    roll_cubic = _pin(_pchip_cubic(s_w, r), float(length), start.roll if start else None, end.roll if end else None)
    return FittedLane(geoms, float(length), compact(width_cubic),
                      Cubic.empty() if flat else compact(_pchip_cubic(s_e, z)), Cubic.empty() if level else compact(roll_cubic), on_right)  # fmt: skip


def same_record(s1: float, c1: NDArrayFloat, s2: float, c2: NDArrayFloat, tolerance: float = 1e-6) -> bool:
    """Whether two records are one polynomial (ASAM's checker's `are_same_equations`, restated:
    the expanded coefficients differ by less than `tolerance`)."""
    def expand(s0: float, c: NDArrayFloat) -> NDArrayFloat:
        a, b, cc, d = c
        return np.array([a - b * s0 + cc * s0**2 - d * s0**3, b - 2 * cc * s0 + 3 * d * s0**2, cc - 3 * d * s0, d])

    return bool(np.all(np.abs(expand(s1, c1) - expand(s2, c2)) < tolerance))


def compact(cubic: Cubic) -> Cubic:
    """The cubic without records that only continue the previous record's polynomial."""
    if len(cubic) < 2:
        return cubic
    keep = [0]
    for k in range(1, len(cubic)):
        j = keep[-1]
        if not same_record(float(cubic.starts[j]), cubic.coeffs[j], float(cubic.starts[k]), cubic.coeffs[k]):
            keep.append(k)
    return Cubic(cubic.starts[keep].copy(), cubic.coeffs[keep].copy())
