"""Pixels of camera-frame points, compiled (numba) where it pays, with the same outputs as numpy.

- `Projector` / `project_px`: pixels of camera-frame points. For an f-theta camera the ray angle
  comes from numpy (the same `arctan2` / `hypot` calls as `FThetaCamera.project`, so the same
  last bits) and the radial polynomial, its Newton polish and the pixel map run in one compiled
  loop, in the same order of operations (numba without fastmath fuses no multiply-add), so the
  pixels equal `camera.project` bit for bit at a fraction of the call cost. Other cameras use
  their own `project` (pinholes: `pixels_px`'s compiled twin of it).
- `subdivide_ftheta`: adaptive subdivision of segments for an f-theta camera. The f-theta radii
  are computed with the loop over points innermost (vectorised; the same operations per element).
- The per-chord pieces (`ftheta_pixel`, `outside_cone`, `push_halves`, `midpoint_error`) are
  shared with the stroke pass (`avsim.render.geometry.strokes`).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from avsim.core.cameras import Camera, FThetaCamera, PinholeCamera
from avsim.core.jit import njit, njit_vec
from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt

__all__ = ["Projector", "cached_projector", "ftheta_pixel", "ftheta_pixels", "midpoint_error", "outside_cone", "pixels_px", "project_px",
           "project_xyz_px", "push_halves", "subdivide_ftheta"]

_NEWTON_STEPS = 3  # avsim.core.cameras.NEWTON_STEPS


def _ftheta_params(camera: FThetaCamera) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayFloat]:
    """Forward, backward and derivative-of-backward coefficients, then the scalars of the map."""
    fw, bw = camera.forward_poly, camera.backward_poly
    dbw = bw[1:] * np.arange(1, len(bw))  # avsim.core.polynomials.polyder
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
        self.params = _ftheta_params(camera) if isinstance(camera, FThetaCamera) else None

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
        ftheta_pixels(np.ascontiguousarray(pts), xy_norm, theta, *self.params, out)
        return out


@njit
def _polyval(coeffs: NDArrayFloat, x: float) -> float:
    out = 0.0
    for k in range(len(coeffs) - 1, -1, -1):
        out = out * x + coeffs[k]
    return out

@njit
def _ftheta_radius(th: float, fw: NDArrayFloat, bw: NDArrayFloat, dbw: NDArrayFloat, scalars: NDArrayFloat) -> float:
    # image radius (px) of ray angle th: the forward polynomial, or Newton on the backward one,
    # linear beyond the polynomial's valid angle (scalars as `ftheta_pixels`)
    theta_max, r_end, slope, backward = scalars[0], scalars[1], scalars[2], scalars[8]
    r = _polyval(fw, th)
    if backward != 0.0:
        for _ in range(_NEWTON_STEPS):
            deriv = _polyval(dbw, r)
            r = r - (_polyval(bw, r) - th) / (deriv if abs(deriv) > 1e-12 else 1e-12)
    if th > theta_max:
        r = r_end + slope * (th - theta_max)
    return r

@njit
def _polyval_all(coeffs: NDArrayFloat, x: NDArrayFloat, out: NDArrayFloat) -> None:
    # `_polyval` of every x, the loop over points innermost (independent chains: vectorised)
    out[:] = 0.0
    for k in range(len(coeffs) - 1, -1, -1):
        c = coeffs[k]
        for i in range(len(x)):
            out[i] = out[i] * x[i] + c

@njit
def _ftheta_radii(theta: NDArrayFloat, fw: NDArrayFloat, bw: NDArrayFloat, dbw: NDArrayFloat, scalars: NDArrayFloat,
                  r: NDArrayFloat) -> None:  # fmt: skip
    # `_ftheta_radius` of every angle (N,) into r (N,): the same operations per element in the same order
    theta_max, r_end, slope, backward = scalars[0], scalars[1], scalars[2], scalars[8]
    n = len(theta)
    _polyval_all(fw, theta, r)
    if backward != 0.0:
        deriv, value = np.empty(n), np.empty(n)
        for _ in range(_NEWTON_STEPS):
            _polyval_all(dbw, r, deriv)
            _polyval_all(bw, r, value)
            for i in range(n):
                d = deriv[i]
                r[i] = r[i] - (value[i] - theta[i]) / (d if abs(d) > 1e-12 else 1e-12)
    for i in range(n):
        if theta[i] > theta_max:
            r[i] = r_end + slope * (theta[i] - theta_max)

@njit
def ftheta_pixels(
    pts: NDArrayFloat, xy_norm: NDArrayFloat, theta: NDArrayFloat, fw: NDArrayFloat, bw: NDArrayFloat,
    dbw: NDArrayFloat, scalars: NDArrayFloat, out: NDArrayFloat,
) -> None:  # fmt: skip
    c, d, e, cx, cy = scalars[3], scalars[4], scalars[5], scalars[6], scalars[7]
    radii = np.empty(len(pts))
    _ftheta_radii(theta, fw, bw, dbw, scalars, radii)
    for i in range(len(pts)):
        r = radii[i]
        n = xy_norm[i]
        if n == 0:
            ox, oy = 0.0, 0.0
        else:
            ox, oy = pts[i, 0] / n * r, pts[i, 1] / n * r
        out[i, 0] = c * ox + d * oy + cx
        out[i, 1] = e * ox + oy + cy

def subdivide_ftheta(
    projector: Projector, p0: NDArrayFloat, p1: NDArrayFloat, uv0: NDArrayFloat, uv1: NDArrayFloat, keep: NDArrayBool,
    tol_px: float, cone_rad: float | None, max_levels: int,
) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayFloat, NDArrayInt, NDArrayBool] | None:  # fmt: skip
    """`geometry.subdivide_segments` for an f-theta camera in one compiled pass (None: not available).

    Depth first per segment, so chords come out by source segment then along it with no sort;
    the same chords as the level-by-level numpy loop, whose decisions (midpoint within
    `tol_px`, chord outside the cone) are taken here per chord in the same order. The midpoint
    ray angles use libm's atan2, numpy's SIMD one may differ in the last bit (1e-13 px).

    Args:
        projector: the camera's projector (f-theta, with numba).
        p0: (N, 3) camera-frame segment starts.
        p1: (N, 3) segment ends.
        uv0: (N, 2) their pixels.
        uv1: (N, 2).
        keep: (N,) bool, keep a chord found outside the cone (flagged approx) instead of dropping it.
        tol_px: chord tolerance in pixels.
        cone_rad: the cone half-angle, or None (no culling).
        max_levels: at most this many halvings.

    Returns:
        q0, q1 (M, 3), uv0, uv1 (M, 2), source (M,), approx (M,), or None for a camera that is not f-theta.
    """
    if projector.params is None:
        return None
    n = len(p0)
    cone = -1.0 if cone_rad is None else float(cone_rad) + float(np.radians(1.0))
    capacity = 4 * n + 64
    args = [np.ascontiguousarray(x, dtype=np.float64) for x in (p0, p1, uv0, uv1)]
    args.append(projector(0.5 * (args[0] + args[1])))  # level-0 midpoints in one batch
    while True:
        out_p = np.empty((capacity, 2, 3))
        out_uv = np.empty((capacity, 2, 2))
        out_src = np.empty(capacity, np.int64)
        out_approx = np.empty(capacity, np.bool_)
        m = _subdivide(*args, np.ascontiguousarray(keep, np.bool_), *projector.params, tol_px, cone, max_levels,
                       out_p, out_uv, out_src, out_approx)  # fmt: skip
        if m >= 0:
            break
        capacity *= 4
    return (out_p[:m, 0], out_p[:m, 1], out_uv[:m, 0], out_uv[:m, 1], out_src[:m], out_approx[:m])


@njit_vec
def ftheta_pixel(
    x: float, y: float, z: float, fw: NDArrayFloat, bw: NDArrayFloat, dbw: NDArrayFloat, scalars: NDArrayFloat
) -> tuple[float, float]:
    c, d, e, cx, cy = scalars[3], scalars[4], scalars[5], scalars[6], scalars[7]
    n = math.hypot(x, y)
    r = _ftheta_radius(math.atan2(n, z), fw, bw, dbw, scalars)
    ox, oy = (0.0, 0.0) if n == 0 else (x / n * r, y / n * r)
    return c * ox + d * oy + cx, e * ox + oy + cy

@njit_vec
def outside_cone(a0: float, a1: float, a2: float, b0: float, b1: float, b2: float, cone: float) -> bool:
    """`geometry.segment_cone_visible` negated (cone: half-angle + its one-degree margin)."""
    l0 = math.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
    l1 = math.sqrt(b0 * b0 + b1 * b1 + b2 * b2)
    t0 = math.acos(min(max(a2 / l0, -1.0), 1.0))
    t1 = math.acos(min(max(b2 / l1, -1.0), 1.0))
    span = math.acos(min(max((a0 * b0 + a1 * b1 + a2 * b2) / (l0 * l1), -1.0), 1.0))
    if not math.isfinite(span):
        return False
    return not (min(t0, t1) - span <= cone)

@njit_vec
def push_halves(st: NDArrayFloat, top: int, a0: float, a1: float, a2: float, m0: float, m1: float, m2: float,
                 ua0: float, ua1: float, um0: float, um1: float, level: int) -> int:  # fmt: skip
    # replace the popped segment st[top] (end a, midpoint m) by its two halves: the second half (m .. its
    # end, kept in place) below, the first half (a .. m) on top, popped first; returns the new stack size
    st[top, 0], st[top, 1], st[top, 2], st[top, 6], st[top, 7], st[top, 10] = m0, m1, m2, um0, um1, level + 1
    t = top + 1
    st[t, 0], st[t, 1], st[t, 2], st[t, 3], st[t, 4], st[t, 5] = a0, a1, a2, m0, m1, m2
    st[t, 6], st[t, 7], st[t, 8], st[t, 9], st[t, 10] = ua0, ua1, um0, um1, level + 1
    return top + 2

@njit_vec
def midpoint_error(ua0: float, ua1: float, ub0: float, ub1: float, um0: float, um1: float) -> float:
    c0, c1 = ub0 - ua0, ub1 - ua1
    length = math.hypot(c0, c1)
    r0, r1 = um0 - ua0, um1 - ua1
    if length > 1e-9:
        return abs(c0 * r1 - c1 * r0) / max(length, 1e-12)
    return math.hypot(r0, r1)

@njit_vec
def _subdivide(
    p0: NDArrayFloat, p1: NDArrayFloat, uv0: NDArrayFloat, uv1: NDArrayFloat, um: NDArrayFloat, keep: NDArrayBool, fw: NDArrayFloat,
    bw: NDArrayFloat, dbw: NDArrayFloat, scalars: NDArrayFloat, tol: float, cone: float, max_levels: int,
    out_p: NDArrayFloat, out_uv: NDArrayFloat, out_src: NDArrayInt, out_approx: NDArrayBool,
) -> int:  # fmt: skip
    """Chords into the out_* buffers; returns their number, or -1 when the buffers are too small.
    A stack row holds a chord: ends a (3), b (3), pixels ua (2), ub (2), then its level."""
    st = np.empty((max_levels + 2, 11))
    m = 0
    for i in range(len(p0)):
        for c in range(3):
            st[0, c], st[0, 3 + c] = p0[i, c], p1[i, c]
        st[0, 6], st[0, 7], st[0, 8], st[0, 9], st[0, 10] = uv0[i, 0], uv0[i, 1], uv1[i, 0], uv1[i, 1], 0.0
        top = 1
        while top > 0:
            top -= 1
            a0, a1, a2, b0, b1, b2 = st[top, 0], st[top, 1], st[top, 2], st[top, 3], st[top, 4], st[top, 5]
            ua0, ua1, ub0, ub1, level = st[top, 6], st[top, 7], st[top, 8], st[top, 9], int(st[top, 10])
            outside = cone >= 0.0 and level > 0 and outside_cone(a0, a1, a2, b0, b1, b2, cone)
            if outside and not keep[i]:
                continue
            done = outside
            if not outside:
                m0, m1, m2 = 0.5 * (a0 + b0), 0.5 * (a1 + b1), 0.5 * (a2 + b2)
                if level == 0:
                    um0, um1 = um[i, 0], um[i, 1]
                else:
                    um0, um1 = ftheta_pixel(m0, m1, m2, fw, bw, dbw, scalars)
                done = midpoint_error(ua0, ua1, ub0, ub1, um0, um1) <= tol or level == max_levels
            if done:
                if m >= len(out_src):
                    return -1
                out_p[m, 0, 0], out_p[m, 0, 1], out_p[m, 0, 2], out_p[m, 1, 0], out_p[m, 1, 1], out_p[m, 1, 2] = a0, a1, a2, b0, b1, b2
                out_uv[m, 0, 0], out_uv[m, 0, 1], out_uv[m, 1, 0], out_uv[m, 1, 1] = ua0, ua1, ub0, ub1
                out_src[m], out_approx[m] = i, outside
                m += 1
                continue
            # second half below, first half on top (popped first: along-segment order)
            top = push_halves(st, top, a0, a1, a2, m0, m1, m2, ua0, ua1, um0, um1, level)
    return m


def cached_projector(camera: Camera) -> Projector:
    """The camera's `Projector`, its coefficients prepared once per camera value (a bounded cache).

    Cameras are frozen dataclasses hashed by value, so equal cameras share one `Projector`;
    one that cannot be hashed gets a fresh `Projector`.

    Args:
        camera: the camera.

    Returns:
        Its projector.
    """
    key: Any = camera  # hashed when called (frozen dataclass cameras are)
    try:
        return _projector_of(key)
    except TypeError:  # unhashable camera
        return Projector(camera)


@lru_cache(maxsize=32)
def _projector_of(camera: Camera) -> Projector:
    return Projector(camera)


def project_xyz_px(projector: Projector, points_cam: NDArrayFloat, xyz: NDArrayFloat) -> NDArrayFloat:
    """`projector(points_cam)` for points also given as contiguous coordinate rows (no column copies).

    Args:
        projector: the camera's `Projector`.
        points_cam: (N, 3) C-contiguous float64 camera-frame points.
        xyz: (3, N) C-contiguous float64, the same points' x, y and z rows.

    Returns:
        (N, 2) float64 pixels, equal to `camera.project(points_cam)[0]` (the same numpy ray
        angle as `Projector`, then its compiled radial map).
    """
    if projector.params is None or not len(points_cam):
        return pixels_px(projector, points_cam)
    xy_norm = np.hypot(xyz[0], xyz[1])
    theta = np.arctan2(xy_norm, xyz[2])
    out = np.empty((len(points_cam), 2))
    ftheta_pixels(points_cam, xy_norm, theta, *projector.params, out)
    return out


def pixels_px(projector: Projector, points_cam: NDArrayFloat) -> NDArrayFloat:
    """`projector(points_cam)`, with a pinhole camera's pixels from one compiled loop.

    The pinhole loop does `PinholeCamera.project`'s operations in its order (division by z,
    the OpenCV distortion polynomial, the intrinsics; numba without fastmath fuses no
    multiply-add), so the pixels are equal, NaN where z <= 0.

    Args:
        projector: the camera's `Projector`.
        points_cam: (N, 3) camera-frame points.

    Returns:
        (N, 2) float64 pixels, equal to `camera.project(points_cam)[0]`.
    """
    cam = projector.camera
    if not isinstance(cam, PinholeCamera) or not len(points_cam):
        return projector(points_cam)
    out = np.empty((len(points_cam), 2))
    lens = cam.lens
    r_v = lens.valid_radius if cam.has_distortion else math.inf
    slope = lens.valid_distorted_radius / r_v if math.isfinite(r_v) else 1.0
    _pinhole_pixels(np.ascontiguousarray(points_cam, np.float64), cam.fx_px, cam.fy_px, cam.cx_px, cam.cy_px,
                    np.array(cam.distortion, np.float64), cam.has_distortion, r_v, slope, out)  # fmt: skip
    return out


@njit
def _opencv_distort(xn: float, yn: float, d: NDArrayFloat) -> tuple[float, float]:
    # `OpenCVDistortion._polynomial`, term by term in numpy's order
    k1, k2, p1, p2, k3 = d[0], d[1], d[2], d[3], d[4]
    r2 = xn * xn + yn * yn
    radial = 1 + r2 * (k1 + r2 * (k2 + r2 * k3))
    xd = xn * radial + 2 * p1 * xn * yn + p2 * (r2 + 2 * xn * xn)
    yd = yn * radial + p1 * (r2 + 2 * yn * yn) + 2 * p2 * xn * yn
    return xd, yd


@njit
def _pinhole_pixels(pts: NDArrayFloat, fx: float, fy: float, cx: float, cy: float, d: NDArrayFloat, distort: bool, r_v: float,
                    slope: float, out: NDArrayFloat) -> None:  # fmt: skip
    # `PinholeCamera.project`'s pixels in numpy's order; past the lens's valid radius r_v, `OpenCVDistortion.distort`'s continuation
    for i in range(len(pts)):
        z = pts[i, 2]
        if not z > 0:
            out[i, 0], out[i, 1] = np.nan, np.nan
            continue
        xn, yn = pts[i, 0] / z, pts[i, 1] / z
        if distort:
            if xn * xn + yn * yn > r_v * r_v:
                scale = r_v / math.sqrt(xn * xn + yn * yn)
                xb, yb = _opencv_distort(xn * scale, yn * scale, d)
                extra = (1 - scale) * slope
                xn, yn = xb + xn * extra, yb + yn * extra
            else:
                xn, yn = _opencv_distort(xn, yn, d)
        out[i, 0] = fx * xn + cx
        out[i, 1] = fy * yn + cy
