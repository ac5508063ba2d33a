"""Camera models: OpenCV pinhole and NVIDIA f-theta, vectorised project / unproject.

Camera frame is OpenCV RDF: x right, y down, z forward. Depth is the camera-frame z in metres.
Pixel coordinates are continuous, in the OpenCV convention of the calibration files: the
centre of pixel (i, j) is at (i, j), so the image covers [-0.5, W - 0.5) x [-0.5, H - 0.5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from avsim.core.distortion import OpenCVDistortion
from avsim.core.errors import AvsimValueError
from avsim.core.polynomials import fit_through_origin, polyder, polyval
from avsim.core.shapes import check_shape
from avsim.core.typing import NDArrayBool, NDArrayFloat

POLY_DEGREE = 5  # f-theta polynomials have six coefficients p0..p5
FIT_SAMPLES = 500  # samples for the least-squares fit of the inverse polynomial (spec)
NEWTON_STEPS = 3  # refinement so the stored polynomial is honoured exactly
MAX_RAY_ANGLE_RAD = np.pi  # the image's farthest pixel sees a ray at most this far off the optical axis


def _check_points(points: NDArrayFloat, name: str = "points_cam") -> NDArrayFloat:
    pts = np.asarray(points, dtype=np.float64)
    check_shape(pts, ("N", 3), name)
    return pts


def _check_uv(uv: NDArrayFloat) -> NDArrayFloat:
    uv = np.asarray(uv, dtype=np.float64)
    check_shape(uv, ("N", 2), "uv_px")
    return uv


def _check_size(width_px: int, height_px: int) -> None:
    if int(width_px) <= 0 or int(height_px) <= 0:
        raise AvsimValueError(f"image size: width and height must be positive, got {width_px}x{height_px}")


def _in_image(uv: NDArrayFloat, depth: NDArrayFloat, width_px: int, height_px: int) -> NDArrayBool:
    u, v = uv[:, 0] + 0.5, uv[:, 1] + 0.5  # pixel centres at integers: edges at -0.5 and W - 0.5
    return (depth > 0) & (u >= 0) & (u < width_px) & (v >= 0) & (v < height_px)


@dataclass(frozen=True)
class PinholeCamera:
    """Pinhole camera with optional OpenCV distortion (k1, k2, p1, p2, k3).

    The distortion polynomial is used inside its valid (rising) range only (`lens`,
    `avsim.core.distortion`): points farther off axis project outside the image, never folded
    back into it; a camera whose image reaches past that range is refused (AvsimValueError).
    """

    width_px: int
    height_px: int
    fx_px: float
    fy_px: float
    cx_px: float
    cy_px: float
    distortion: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        _check_size(self.width_px, self.height_px)
        for name in ("fx_px", "fy_px", "cx_px", "cy_px"):
            value = float(getattr(self, name))
            if not np.isfinite(value):
                raise AvsimValueError(f"{name}: must be finite, got {value}")
            object.__setattr__(self, name, value)
        if self.fx_px <= 0 or self.fy_px <= 0:
            raise AvsimValueError(f"focal length: fx_px and fy_px must be > 0, got {self.fx_px}, {self.fy_px}")
        dist = tuple(float(d) for d in self.distortion) + (0.0,) * max(0, 5 - len(self.distortion))
        if len(dist) != 5 or not all(np.isfinite(dist)):
            raise AvsimValueError(f"distortion: expected 5 finite values (k1, k2, p1, p2, k3), got {self.distortion}")
        object.__setattr__(self, "distortion", dist)
        object.__setattr__(self, "width_px", int(self.width_px))
        object.__setattr__(self, "height_px", int(self.height_px))
        if self.has_distortion:
            self._check_lens_covers_image()

    def _check_lens_covers_image(self) -> None:
        """AvsimValueError when the image reaches past the distortion's valid range (the polynomial folds inside it)."""
        u = np.array([-0.5, self.width_px - 0.5, -0.5, self.width_px - 0.5])
        v = np.array([-0.5, -0.5, self.height_px - 0.5, self.height_px - 0.5])
        self.lens.check_covers(np.stack([(u - self.cx_px) / self.fx_px, (v - self.cy_px) / self.fy_px], -1), f"the {self.width_px}x{self.height_px} image")

    @property
    def model(self) -> str:
        """Model name as stored in a scenario: "pinhole"."""
        return "pinhole"

    @property
    def K(self) -> NDArrayFloat:
        """(3, 3) intrinsic matrix [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]."""
        return np.array([[self.fx_px, 0.0, self.cx_px], [0.0, self.fy_px, self.cy_px], [0.0, 0.0, 1.0]])

    @property
    def has_distortion(self) -> bool:
        """Whether any distortion coefficient is non-zero."""
        return any(d != 0.0 for d in self.distortion)

    @property
    def horizontal_fov_rad(self) -> float:
        """Horizontal field of view (undistorted) in radians."""
        return float(np.arctan(self.cx_px / self.fx_px) + np.arctan((self.width_px - self.cx_px) / self.fx_px))

    @cached_property
    def lens(self) -> OpenCVDistortion:
        """The distortion model and its valid range (`avsim.core.distortion`)."""
        return OpenCVDistortion(*self.distortion)

    def project(self, points_cam: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayBool]:
        """Project camera-frame points; points with z <= 0 get NaN pixels (a pinhole cannot image them).

        Args:
            points_cam: (N, 3) points in the camera frame, metres.

        Returns:
            uv_px (N, 2), depth_m (N,) (camera z), in_image (N,) bool.
        """
        pts = _check_points(points_cam)
        z = pts[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            safe_z = np.where(z > 0, z, np.nan)
            xn, yn = pts[:, 0] / safe_z, pts[:, 1] / safe_z
        beyond = None
        if self.has_distortion:
            beyond = self.lens.beyond(xn, yn)
            xn, yn = self.lens.distort(xn, yn)
        uv = np.stack([self.fx_px * xn + self.cx_px, self.fy_px * yn + self.cy_px], -1)
        in_image = _in_image(np.nan_to_num(uv, nan=-1.0), z, self.width_px, self.height_px)
        return uv, z.copy(), in_image if beyond is None else in_image & ~beyond

    def pixel_to_ray(self, uv_px: NDArrayFloat) -> NDArrayFloat:
        """Cast rays through pixels (distortion removed).

        Args:
            uv_px: (N, 2) pixel coordinates.

        Returns:
            (N, 3) unit rays in the camera frame.
        """
        uv = _check_uv(uv_px)
        xn = (uv[:, 0] - self.cx_px) / self.fx_px
        yn = (uv[:, 1] - self.cy_px) / self.fy_px
        if self.has_distortion:
            xn, yn = self.lens.undistort(xn, yn)
        rays = np.stack([xn, yn, np.ones_like(xn)], -1)
        return rays / np.linalg.norm(rays, axis=-1, keepdims=True)

    def unproject(self, uv_px: NDArrayFloat, depth_m: NDArrayFloat) -> NDArrayFloat:
        """Lift pixels to camera-frame points at given depths.

        Args:
            uv_px: (N, 2) pixel coordinates.
            depth_m: (N,) depths (camera z) in metres.

        Returns:
            (N, 3) points in the camera frame.
        """
        rays = self.pixel_to_ray(uv_px)
        depth = np.asarray(depth_m, dtype=np.float64).reshape(-1)
        return rays * (depth / rays[:, 2])[:, None]

    def resize(self, width_px: int, height_px: int) -> PinholeCamera:
        """The same camera imaged at another resolution (intrinsics scaled per axis).

        Args:
            width_px: new image width.
            height_px: new image height.

        Returns:
            The resized camera.
        """
        sx, sy = width_px / self.width_px, height_px / self.height_px
        return PinholeCamera(
            width_px, height_px, self.fx_px * sx, self.fy_px * sy, self.cx_px * sx, self.cy_px * sy, self.distortion
        )

    def to_dict(self) -> dict[str, Any]:
        """The camera as a JSON-ready dict (inverse: `camera_from_dict`).

        Returns:
            model, size, focal lengths, principal point and distortion.
        """
        return {
            "model": "pinhole",
            "width_px": self.width_px,
            "height_px": self.height_px,
            "fx_px": self.fx_px,
            "fy_px": self.fy_px,
            "cx_px": self.cx_px,
            "cy_px": self.cy_px,
            "distortion": list(self.distortion),
        }


@dataclass(frozen=True)
class FThetaCamera:
    """NVIDIA f-theta fisheye camera.

    poly (6,): backward polynomial r -> theta when `is_backward_poly`, else forward
    theta -> r (r in pixels, theta the angle from the optical axis in rad). The other direction
    is fitted by least squares (500 samples over the valid range, constant term 0, same degree)
    and both directions are polished with Newton steps on the stored polynomial, so the stored
    calibration is honoured exactly. Past the largest in-image ray angle the forward map
    continues linearly with its end slope, so every direction projects to a finite pixel.
    linear_cde (c, d, e): the matrix [[c, d], [e, 1]] applied to the distorted pixel offset.
    """

    width_px: int
    height_px: int
    cx_px: float
    cy_px: float
    poly: tuple[float, ...]
    is_backward_poly: bool = True
    linear_cde: tuple[float, float, float] = (1.0, 0.0, 0.0)
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_size(self.width_px, self.height_px)
        poly = tuple(float(p) for p in np.asarray(self.poly, dtype=np.float64).ravel())
        if len(poly) != POLY_DEGREE + 1 or not all(np.isfinite(poly)):
            raise AvsimValueError(f"poly: expected {POLY_DEGREE + 1} finite coefficients, got {self.poly}")
        if poly[1] == 0.0 or all(p == 0.0 for p in poly[1:]):
            raise AvsimValueError("poly: zero focal length (linear coefficient is 0)")
        cde = tuple(float(v) for v in self.linear_cde)
        if len(cde) != 3 or not all(np.isfinite(cde)) or abs(cde[0] - cde[1] * cde[2]) < 1e-12:
            raise AvsimValueError(f"linear_cde: expected an invertible (c, d, e), got {self.linear_cde}")
        for name in ("cx_px", "cy_px"):
            value = float(getattr(self, name))
            if not np.isfinite(value):
                raise AvsimValueError(f"{name}: must be finite")
            object.__setattr__(self, name, value)
        object.__setattr__(self, "poly", poly)
        object.__setattr__(self, "linear_cde", cde)
        object.__setattr__(self, "is_backward_poly", bool(self.is_backward_poly))
        object.__setattr__(self, "width_px", int(self.width_px))
        object.__setattr__(self, "height_px", int(self.height_px))
        self._derived.update(self._derive())

    # construction --------------------------------------------------------------------------
    @classmethod
    def from_intrinsic_vector(cls, vector: NDArrayFloat) -> FThetaCamera:
        """Parse an RDS-HQ f-theta intrinsic vector.

        Args:
            vector: (10,), (11,) or (14,) [cx, cy, width, height, p0..p5, is_bw_poly, (c, d, e)].

        Returns:
            The camera.
        """
        v = np.asarray(vector, dtype=np.float64).ravel()
        if v.size not in (10, 11, 14):
            raise AvsimValueError(f"f-theta intrinsic vector: expected 10, 11 or 14 values, got {v.size}")
        is_bw = bool(v[10]) if v.size > 10 else True
        cde = tuple(v[11:14]) if v.size == 14 else (1.0, 0.0, 0.0)
        return cls(int(round(v[2])), int(round(v[3])), v[0], v[1], tuple(v[4:10]), is_bw, cde)

    def to_intrinsic_vector(self) -> NDArrayFloat:
        """The camera as an RDS-HQ f-theta intrinsic vector.

        Returns:
            (14,) [cx, cy, width, height, p0..p5, is_bw_poly, c, d, e].
        """
        return np.array(
            [self.cx_px, self.cy_px, self.width_px, self.height_px, *self.poly, float(self.is_backward_poly), *self.linear_cde]
        )

    def _max_radius_px(self) -> float:
        corners = np.array([[0, 0], [self.width_px, 0], [0, self.height_px], [self.width_px, self.height_px]], float)
        offsets = self._pixel_to_offset(corners)
        return float(np.linalg.norm(offsets, axis=-1).max())

    @np.errstate(all="ignore")  # a diverging polynomial is refused below (one line), not warned about
    def _derive(self) -> dict[str, Any]:
        stored = np.array(self.poly)
        r_max = self._max_radius_px()
        if self.is_backward_poly:
            bw = stored
            r = np.linspace(0.0, r_max, FIT_SAMPLES)
            theta = polyval(bw, r)
            if not np.isfinite(theta).all() or not 0.0 < theta[-1] <= MAX_RAY_ANGLE_RAD:
                raise AvsimValueError(f"poly: the backward polynomial maps the image's {r_max:.0f} px radius to {theta[-1]:g} rad; a ray is at most {MAX_RAY_ANGLE_RAD:g} rad off the optical axis (the polynomial diverges)")  # fmt: skip
            fw = fit_through_origin(theta, r, POLY_DEGREE)
            theta_max = float(theta[-1])
        else:
            fw = stored
            theta_dense = np.linspace(0.0, np.pi, 20001)
            r_dense = polyval(fw, theta_dense)
            increasing = np.diff(r_dense) > 0
            stop = int(np.argmin(increasing)) if not increasing.all() else len(increasing)
            reach = np.flatnonzero(r_dense[: stop + 1] >= r_max)
            end = int(reach[0]) if reach.size else stop
            theta_max = float(theta_dense[end])
            theta = np.linspace(0.0, theta_max, FIT_SAMPLES)
            bw = fit_through_origin(polyval(fw, theta), theta, POLY_DEGREE)
        r_end = float(polyval(fw, np.array(theta_max)))
        slope = float(polyval(polyder(fw), np.array(theta_max)))
        if not (np.isfinite(fw).all() and np.isfinite(bw).all() and np.isfinite(r_end) and slope > 0):  # diverging, or turning back
            raise AvsimValueError("poly: forward polynomial is not increasing at the image border (or it or its fitted inverse is not finite)")
        fw.setflags(write=False)  # the camera is immutable; so are its derived polynomials
        bw.setflags(write=False)
        return {"fw": fw, "bw": bw, "theta_max": theta_max, "r_end": r_end, "slope": slope}

    # properties -----------------------------------------------------------------------------
    @property
    def model(self) -> str:
        """Model name as stored in a scenario: "ftheta"."""
        return "ftheta"

    @property
    def forward_poly(self) -> NDArrayFloat:
        """(6,) theta -> r polynomial coefficients p0..p5 (stored or fitted)."""
        out: NDArrayFloat = self._derived["fw"].copy()
        return out

    @property
    def backward_poly(self) -> NDArrayFloat:
        """(6,) r -> theta polynomial coefficients p0..p5 (stored or fitted)."""
        out: NDArrayFloat = self._derived["bw"].copy()
        return out

    @property
    def max_theta_rad(self) -> float:
        """Largest ray angle inside the image; the forward map is linear beyond it."""
        return float(self._derived["theta_max"])

    @property
    def horizontal_fov_rad(self) -> float:
        """Horizontal field of view through the principal point's row, in radians."""
        edges = np.array([[0.0, self.cy_px], [float(self.width_px), self.cy_px]])
        theta = self._radius_to_theta(np.linalg.norm(self._pixel_to_offset(edges), axis=-1))
        return float(theta.sum())

    # radial maps ----------------------------------------------------------------------------
    def _theta_to_radius(self, theta: NDArrayFloat) -> NDArrayFloat:
        d = self._derived
        r = polyval(d["fw"], theta)
        if self.is_backward_poly:  # honour the stored r -> theta map exactly in range
            dbw = polyder(d["bw"])
            for _ in range(NEWTON_STEPS):
                deriv = polyval(dbw, r)
                r = r - (polyval(d["bw"], r) - theta) / np.where(np.abs(deriv) > 1e-12, deriv, 1e-12)
        beyond = theta > d["theta_max"]
        return np.where(beyond, d["r_end"] + d["slope"] * (theta - d["theta_max"]), r)

    def _radius_to_theta(self, r: NDArrayFloat) -> NDArrayFloat:
        d = self._derived
        theta = polyval(d["bw"], r)
        if not self.is_backward_poly:  # honour the stored theta -> r map exactly in range
            dfw = polyder(d["fw"])
            for _ in range(NEWTON_STEPS):
                deriv = polyval(dfw, theta)
                theta = theta - (polyval(d["fw"], theta) - r) / np.where(np.abs(deriv) > 1e-12, deriv, 1e-12)
        beyond = r > d["r_end"]
        return np.where(beyond, d["theta_max"] + (r - d["r_end"]) / d["slope"], theta)

    def _offset_to_pixel(self, offset: NDArrayFloat) -> NDArrayFloat:
        c, d, e = self.linear_cde
        return np.stack(
            [c * offset[:, 0] + d * offset[:, 1] + self.cx_px, e * offset[:, 0] + offset[:, 1] + self.cy_px], -1
        )

    def _pixel_to_offset(self, uv: NDArrayFloat) -> NDArrayFloat:
        c, d, e = self.linear_cde
        du, dv = uv[:, 0] - self.cx_px, uv[:, 1] - self.cy_px
        det = c - d * e
        return np.stack([(du - d * dv) / det, (c * dv - e * du) / det], -1)

    # public API -----------------------------------------------------------------------------
    def project(self, points_cam: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayBool]:
        """Project camera-frame points.

        Every direction gets a finite pixel (theta up to pi, via the linear extension); the
        origin itself maps to the principal point.

        Args:
            points_cam: (N, 3) points in the camera frame, metres.

        Returns:
            uv_px (N, 2), depth_m (N,) (camera z), in_image (N,) bool.
        """
        pts = _check_points(points_cam)
        xy_norm = np.hypot(pts[:, 0], pts[:, 1])
        theta = np.arctan2(xy_norm, pts[:, 2])  # == arccos(z / |p|), stable near the axis
        r = self._theta_to_radius(theta)
        safe = np.where(xy_norm > 0, xy_norm, 1.0)
        offset = np.stack([pts[:, 0] / safe * r, pts[:, 1] / safe * r], -1)
        offset[xy_norm == 0] = 0.0
        uv = self._offset_to_pixel(offset)
        depth = pts[:, 2].copy()
        return uv, depth, _in_image(uv, depth, self.width_px, self.height_px)

    def pixel_to_ray(self, uv_px: NDArrayFloat) -> NDArrayFloat:
        """Cast rays through pixels (theta may exceed pi/2).

        Args:
            uv_px: (N, 2) pixel coordinates.

        Returns:
            (N, 3) unit rays in the camera frame.
        """
        offset = self._pixel_to_offset(_check_uv(uv_px))
        r = np.linalg.norm(offset, axis=-1)
        theta = self._radius_to_theta(r)
        safe = np.where(r > 0, r, 1.0)
        s = np.sin(theta) / safe
        rays = np.stack([offset[:, 0] * s, offset[:, 1] * s, np.cos(theta)], -1)
        rays[r == 0] = (0.0, 0.0, 1.0)
        return rays

    def unproject(self, uv_px: NDArrayFloat, depth_m: NDArrayFloat) -> NDArrayFloat:
        """Lift pixels to camera-frame points at given depths.

        Args:
            uv_px: (N, 2) pixel coordinates.
            depth_m: (N,) depths (camera z > 0) in metres.

        Returns:
            (N, 3) points in the camera frame.
        """
        rays = self.pixel_to_ray(uv_px)
        depth = np.asarray(depth_m, dtype=np.float64).reshape(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return rays * (depth / rays[:, 2])[:, None]

    def resize(self, width_px: int, height_px: int) -> FThetaCamera:
        """The same lens at another resolution.

        Centre scales by the size ratios; pixel radii by s = sqrt(rw * rh), so a backward
        polynomial's coefficients scale by s^-i and a forward polynomial's by s.

        Args:
            width_px: new image width.
            height_px: new image height.

        Returns:
            The resized camera.
        """
        rw, rh = width_px / self.width_px, height_px / self.height_px
        s = np.sqrt(rw * rh)
        poly = np.array(self.poly)
        poly = poly * s ** -np.arange(len(poly)) if self.is_backward_poly else poly * s
        return FThetaCamera(
            width_px, height_px, self.cx_px * rw, self.cy_px * rh, tuple(poly), self.is_backward_poly, self.linear_cde
        )

    def to_dict(self) -> dict[str, Any]:
        """The camera as a JSON-ready dict (inverse: `camera_from_dict`).

        Returns:
            model, size, principal point, polynomial and its direction, linear term.
        """
        return {
            "model": "ftheta",
            "width_px": self.width_px,
            "height_px": self.height_px,
            "cx_px": self.cx_px,
            "cy_px": self.cy_px,
            "poly": list(self.poly),
            "is_backward_poly": self.is_backward_poly,
            "linear_cde": list(self.linear_cde),
        }


CameraModel = PinholeCamera | FThetaCamera
"""The concrete camera models (what a scenario file can hold)."""


class Camera(Protocol):
    """What the renderer, the rig and the geometry need from a camera (both models provide it).

    Camera frame OpenCV RDF; pixels continuous, centre of pixel (i, j) at (i, j).
    """

    @property
    def width_px(self) -> int:
        """Image width in pixels."""
        ...

    @property
    def height_px(self) -> int:
        """Image height in pixels."""
        ...

    @property
    def model(self) -> str:
        """Model name as stored in a scenario ("pinhole" or "ftheta")."""
        ...

    @property
    def horizontal_fov_rad(self) -> float:
        """Horizontal field of view through the principal point, in radians."""
        ...

    def project(self, points_cam: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayBool]:
        """Project camera-frame points.

        Args:
            points_cam: (N, 3) points in the camera frame, metres.

        Returns:
            uv_px (N, 2) pixels, depth_m (N,) camera z, in_image (N,) bool (in front and inside the image).
        """
        ...

    def pixel_to_ray(self, uv_px: NDArrayFloat) -> NDArrayFloat:
        """Cast rays through pixels.

        Args:
            uv_px: (N, 2) pixel coordinates.

        Returns:
            (N, 3) unit rays in the camera frame.
        """
        ...

    def unproject(self, uv_px: NDArrayFloat, depth_m: NDArrayFloat) -> NDArrayFloat:
        """Lift pixels to camera-frame points at given depths.

        Args:
            uv_px: (N, 2) pixel coordinates.
            depth_m: (N,) depths (camera z) in metres.

        Returns:
            (N, 3) points in the camera frame.
        """
        ...

    def resize(self, width_px: int, height_px: int) -> Camera:
        """The same camera imaged at another resolution.

        Args:
            width_px: new image width.
            height_px: new image height.

        Returns:
            The resized camera (same model).
        """
        ...

    def to_dict(self) -> dict[str, Any]:
        """The camera as a JSON-ready dict (inverse: `camera_from_dict`).

        Returns:
            Its model name and parameters.
        """
        ...


def camera_from_dict(d: dict[str, Any]) -> CameraModel:
    """Inverse of `Camera.to_dict()`; raises AvsimValueError naming the bad field.

    Args:
        d: a camera dict (`model` "pinhole" or "ftheta" and its parameters).

    Returns:
        The camera.
    """
    model = d.get("model")
    try:
        if model == "pinhole":
            return PinholeCamera(
                int(d["width_px"]), int(d["height_px"]), float(d["fx_px"]), float(d["fy_px"]),
                float(d["cx_px"]), float(d["cy_px"]), tuple(d.get("distortion", (0.0,) * 5)),
            )  # fmt: skip
        if model == "ftheta":
            return FThetaCamera(
                int(d["width_px"]), int(d["height_px"]), float(d["cx_px"]), float(d["cy_px"]),
                tuple(d["poly"]), bool(d["is_backward_poly"]), tuple(d.get("linear_cde", (1.0, 0.0, 0.0))),
            )  # fmt: skip
    except KeyError as exc:
        raise AvsimValueError(f"camera.{exc.args[0]}: missing") from exc
    except (TypeError, ValueError) as exc:
        if isinstance(exc, AvsimValueError):
            raise
        raise AvsimValueError(f"camera: {exc}") from exc
    raise AvsimValueError(f"camera.model: unknown camera model {model!r} (expected 'pinhole' or 'ftheta')")
