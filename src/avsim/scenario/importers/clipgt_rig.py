"""ClipGT calibration: the DriveWorks rig JSON <-> `avsim.core.rig.CameraRig`.

Reading follows NVIDIA's loader (``clipgt_loader._load_camera_calibrations``): the sensors whose
name starts with ``camera:``; intrinsics from ``properties``: ``cx``, ``cy``, ``width``,
``height``, ``polynomial`` (or ``bw-poly``; 5 coefficients get a 6th, 0) whose direction is
``polynomial-type`` (``pixeldistance-to-angle`` = backward r -> theta, ``angle-to-pixeldistance``
= forward; without it ``bw-poly`` is backward, else a linear coefficient below 1 means backward),
``linear-c``/``-d``/``-e`` (default 1, 0, 0); extrinsics from ``nominalSensor2Rig_FLU`` only
(``t`` in metres, ``roll-pitch-yaw`` in degrees; identity when absent). A camera named
``camera:front:wide:120fov`` becomes ``camera_front_wide_120fov``.

Pinhole cameras: the loader knows only f-theta lenses. avsim writes a pinhole camera as the
f-theta lens that images the same rays (`ftheta_equivalent`: the radial distortion folded into a
``pixeldistance-to-angle`` polynomial, the aspect ratio into ``linear-c``), so NVIDIA's loader
renders it, and adds its exact OpenCV parameters as ``"Model": "pinhole"`` with ``fx``, ``fy``
and ``distortion`` (``k1 k2 p1 p2 k3``). avsim's reader takes a camera with ``"Model": "pinhole"``
as that pinhole camera (a hand-written pinhole entry needs no polynomial; NVIDIA's loader skips
such a camera).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.cameras import POLY_DEGREE, FThetaCamera, PinholeCamera
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.names import check_name
from avsim.core.safe_json import loads_json
from avsim.scenario.importers.clipgt_schema import (
    CAMERA_RDF_IN_SENSOR_FLU,
    camera_name,
    matrix_to_rpy_deg,
    rpy_deg_to_matrix,
    sensor_name,
)

if TYPE_CHECKING:
    from avsim.core.cameras import Camera, CameraModel
    from avsim.core.rig import CameraRig

FIT_SAMPLES = 2000  # samples of the pinhole's ray angle for the f-theta polynomial fit
MINIMAX_STEPS = 40  # reweighting steps of that fit (the largest error over the image shrinks ~2x)
BACKWARD, FORWARD = "pixeldistance-to-angle", "angle-to-pixeldistance"


def _number(props: dict[str, Any], key: str, path: str | os.PathLike[str], where: str, default: float | None = None) -> float:
    if key not in props:
        if default is None:
            raise AvsimInputError(path, f"{where}.{key}", "missing")
        return default
    try:
        value = float(props[key])
    except (TypeError, ValueError):
        raise AvsimInputError(path, f"{where}.{key}", f"not a number: {props[key]!r}") from None
    if not np.isfinite(value):
        raise AvsimInputError(path, f"{where}.{key}", f"not finite: {value}")
    return value


def _numbers(props: dict[str, Any], key: str, path: str | os.PathLike[str], where: str) -> list[float]:
    try:
        values = [float(v) for v in str(props[key]).split()]
    except ValueError:
        raise AvsimInputError(path, f"{where}.{key}", f"not a list of numbers: {props[key]!r}") from None
    if not all(np.isfinite(values)):
        raise AvsimInputError(path, f"{where}.{key}", "not finite")
    return values


def _ftheta(props: dict[str, Any], path: str | os.PathLike[str], where: str) -> FThetaCamera:
    key = "polynomial" if "polynomial" in props else "bw-poly"
    if key not in props:
        raise AvsimInputError(path, f"{where}.polynomial", "missing (and no bw-poly)")
    poly = _numbers(props, key, path, where)
    if len(poly) == POLY_DEGREE:
        poly.append(0.0)  # as the loader: five coefficients get a zero sixth
    if len(poly) != POLY_DEGREE + 1:
        raise AvsimInputError(path, f"{where}.{key}", f"expected 5 or 6 coefficients, got {len(poly)}")
    kind = str(props.get("polynomial-type", ""))
    backward = kind == BACKWARD or (kind != FORWARD and (key == "bw-poly" or abs(poly[1]) < 1.0))
    size = (_number(props, "width", path, where), _number(props, "height", path, where))
    cde = tuple(_number(props, f"linear-{k}", path, where, d) for k, d in (("c", 1.0), ("d", 0.0), ("e", 0.0)))
    try:
        return FThetaCamera(
            int(size[0]), int(size[1]), _number(props, "cx", path, where), _number(props, "cy", path, where),
            tuple(poly), backward, cde,  # type: ignore[arg-type]
        )  # fmt: skip
    except AvsimValueError as exc:
        raise AvsimInputError(path, where, str(exc)) from None


def _pinhole(props: dict[str, Any], path: str | os.PathLike[str], where: str) -> PinholeCamera:
    dist = _numbers(props, "distortion", path, where) if "distortion" in props else [0.0] * 5
    if len(dist) > 5:
        raise AvsimInputError(path, f"{where}.distortion", f"expected at most 5 values (k1 k2 p1 p2 k3), got {len(dist)}")
    try:
        return PinholeCamera(
            int(_number(props, "width", path, where)), int(_number(props, "height", path, where)),
            _number(props, "fx", path, where), _number(props, "fy", path, where),
            _number(props, "cx", path, where), _number(props, "cy", path, where), tuple(dist),
        )  # fmt: skip
    except AvsimValueError as exc:
        raise AvsimInputError(path, where, str(exc)) from None


def _mounting(sensor: dict[str, Any], path: str | os.PathLike[str], where: str) -> tuple[np.ndarray, np.ndarray]:
    """(ego_R_camera (3, 3), translation (3,)) of ``nominalSensor2Rig_FLU`` (identity when absent)."""
    nominal = sensor.get("nominalSensor2Rig_FLU") or {}
    if not isinstance(nominal, dict):
        raise AvsimInputError(path, f"{where}.nominalSensor2Rig_FLU", "expected an object")
    try:
        t = np.asarray(nominal.get("t", [0.0, 0.0, 0.0]), dtype=np.float64).reshape(3)
        rpy = np.asarray(nominal.get("roll-pitch-yaw", [0.0, 0.0, 0.0]), dtype=np.float64).reshape(3)
    except (TypeError, ValueError):
        raise AvsimInputError(path, f"{where}.nominalSensor2Rig_FLU", "t and roll-pitch-yaw must be 3 numbers") from None
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(rpy))):
        raise AvsimInputError(path, f"{where}.nominalSensor2Rig_FLU", "not finite")
    return rpy_deg_to_matrix(rpy) @ CAMERA_RDF_IN_SENSOR_FLU, t


def _has_corrections(sensor: dict[str, Any]) -> bool:
    rpy = (sensor.get("correction_sensor_R_FLU") or {}).get("roll-pitch-yaw", [0, 0, 0])
    t = sensor.get("correction_rig_T", [0, 0, 0])
    try:
        return bool(np.any(np.asarray(rpy, float) != 0) or np.any(np.asarray(t, float) != 0))
    except (TypeError, ValueError):
        return True


def rig_from_json(rig_json: str, path: str | os.PathLike[str]) -> tuple[CameraRig, dict[str, Any]]:
    """The camera rig of a ``calibration_estimate.rig_json`` string.

    Args:
        rig_json: the DriveWorks rig JSON text.
        path: the calibration table, named in errors.

    Returns:
        The rig (its cameras in the JSON's order) and notes for the scenario metadata:
        ``skipped`` (sensor -> reason), ``models`` (camera -> model), ``corrections_ignored``.
    """
    from avsim.core.rig import CameraRig
    from avsim.core.transforms import SE3

    doc = loads_json(rig_json, path, "calibration_estimate.rig_json")  # nesting and syntax errors: one line
    try:
        sensors = doc["rig"]["sensors"]
    except (KeyError, TypeError) as exc:
        raise AvsimInputError(path, "calibration_estimate.rig_json", f"not a rig JSON with rig.sensors: {exc}"[:300]) from None
    if not isinstance(sensors, list):
        raise AvsimInputError(path, "calibration_estimate.rig_json.rig.sensors", "expected a list")
    names, cameras, rotations, translations = [], [], [], []
    notes: dict[str, Any] = {"skipped": {}, "models": {}, "corrections_ignored": []}
    for k, sensor in enumerate(sensors):
        if not isinstance(sensor, dict) or not str(sensor.get("name", "")).startswith("camera:"):
            continue
        where = f"calibration_estimate.rig_json.rig.sensors[{k}]"
        name = check_name(camera_name(sensor["name"]), path, f"{where}.name")  # the loader's camera name becomes file names
        where = f"rig.sensors[{k}]({sensor['name']})"
        props = sensor.get("properties")
        if not isinstance(props, dict):
            raise AvsimInputError(path, f"{where}.properties", "missing or not an object")
        if str(props.get("Model", "")).lower() == "pinhole":
            camera: CameraModel = _pinhole(props, path, where)
        elif "polynomial" in props or "bw-poly" in props:
            camera = _ftheta(props, path, where)
        else:  # the loader warns and leaves the camera out
            notes["skipped"][sensor["name"]] = "no polynomial (the loader reads f-theta cameras only)"
            continue
        if name in names:
            raise AvsimInputError(path, f"{where}.name", f"duplicate camera {name!r}")
        R, t = _mounting(sensor, path, where)
        names.append(name)
        cameras.append(camera)
        rotations.append(R)
        translations.append(t)
        notes["models"][name] = camera.model
        if _has_corrections(sensor):
            notes["corrections_ignored"].append(name)
    if not names:
        raise AvsimInputError(path, "calibration_estimate.rig_json", "no usable camera:* sensor (use --rig for a named rig)")
    return CameraRig(tuple(names), tuple(cameras), SE3(np.stack(rotations), np.stack(translations))), notes


# ---- writing -------------------------------------------------------------------------------
def _fmt(values: Any) -> str:
    return " ".join(repr(float(v)) for v in np.atleast_1d(values))


def _minimax_backward(r_px: np.ndarray, theta_rad: np.ndarray) -> tuple[float, ...]:
    """A backward polynomial theta(r) (degree 5, no constant term) near-minimax in pixels.

    Least squares reweighted by Lawson's rule (the largest pixel error over the samples shrinks
    ~2x against plain least squares); an angle error is weighed by dr/dtheta, its size in pixels.
    """
    scale = float(r_px.max())
    A = np.stack([(r_px / scale) ** i for i in range(1, POLY_DEGREE + 1)], -1)
    px_per_rad = np.gradient(r_px, theta_rad)
    weights = np.full(len(r_px), 1.0 / len(r_px))
    for _ in range(MINIMAX_STEPS):
        w = (np.sqrt(weights) * px_per_rad)[:, None]
        coeffs, *_ = np.linalg.lstsq(A * w, theta_rad * w[:, 0], rcond=None)
        weights = weights * np.abs(A @ coeffs - theta_rad) * px_per_rad + 1e-300
        weights /= weights.sum()
    return tuple(np.concatenate([[0.0], coeffs / scale ** np.arange(1, POLY_DEGREE + 1)]))


def ftheta_equivalent(camera: PinholeCamera) -> FThetaCamera:
    """The f-theta lens that images (nearly) the same rays as a pinhole camera.

    The pinhole's radial model r = fy * rho * (1 + k1 rho^2 + k2 rho^4 + k3 rho^6), rho =
    tan(theta), is sampled over the image and fitted by a backward polynomial theta(r) (degree 5,
    no constant term; near-minimax in pixels, `_minimax_backward`); ``linear-c`` = fx / fy carries
    the aspect ratio. The tangential terms (p1, p2) have no f-theta counterpart and are left out.

    Args:
        camera: the pinhole camera.

    Returns:
        The f-theta camera (same size and principal point).
    """
    fx, fy, cx, cy = camera.fx_px, camera.fy_px, camera.cx_px, camera.cy_px
    k1, k2, _, _, k3 = camera.distortion
    corners = np.array([[-0.5, -0.5], [camera.width_px - 0.5, -0.5], [-0.5, camera.height_px - 0.5],
                        [camera.width_px - 0.5, camera.height_px - 0.5]])  # fmt: skip
    r_max = float(np.hypot((corners[:, 0] - cx) * fy / fx, corners[:, 1] - cy).max())
    rho = np.linspace(0.0, 4.0 * r_max / fy + 1.0, 20 * FIT_SAMPLES)
    r = fy * rho * (1 + rho**2 * (k1 + rho**2 * (k2 + rho**2 * k3)))
    rising = np.flatnonzero(np.diff(r) <= 0)
    stop = int(rising[0]) + 1 if rising.size else len(r)
    inside = np.flatnonzero(r[:stop] >= r_max)
    end = int(inside[0]) + 1 if inside.size else stop
    sample = np.linspace(0, end - 1, FIT_SAMPLES).round().astype(int)
    poly = _minimax_backward(r[sample], np.arctan(rho[sample]))
    return FThetaCamera(camera.width_px, camera.height_px, cx, cy, poly, True, (fx / fy, 0.0, 0.0))


def backward_equivalent(camera: FThetaCamera) -> FThetaCamera:
    """An f-theta camera with a backward polynomial: itself, or its forward lens refitted.

    NVIDIA's loader before cosmos-transfer2.5 v1.5.0 (v1.4.0 is the first release with it) takes
    every ``polynomial`` as backward (pixel distance -> angle); a forward polynomial read that way
    lands hundreds of pixels off. avsim therefore writes every lens backward: a forward polynomial
    r(theta) is sampled from the axis to the image's farthest corner and fitted by a backward
    polynomial (`_minimax_backward`; the cosmos rig's 30 and 70 degree lenses: under 0.002 px).

    Args:
        camera: an f-theta camera.

    Returns:
        `camera` when its polynomial is backward, else the refitted backward lens (same size,
        principal point and linear term).
    """
    if camera.is_backward_poly:
        return camera
    theta = np.linspace(0.0, camera.max_theta_rad, FIT_SAMPLES)
    r = np.polyval(np.asarray(camera.poly)[::-1], theta)
    poly = _minimax_backward(r, theta)
    return FThetaCamera(camera.width_px, camera.height_px, camera.cx_px, camera.cy_px, poly, True, camera.linear_cde)


def written_lens(camera: Camera) -> FThetaCamera:
    """The f-theta lens avsim writes as a camera's ``polynomial`` (backward, for every loader release).

    Args:
        camera: an f-theta or pinhole camera.

    Returns:
        `backward_equivalent` of an f-theta camera, `ftheta_equivalent` of a pinhole.
    """
    if isinstance(camera, FThetaCamera):
        return backward_equivalent(camera)
    if isinstance(camera, PinholeCamera):
        return ftheta_equivalent(camera)
    raise AvsimValueError(f"camera: no f-theta lens for a {camera.model} camera")


def _ftheta_properties(camera: FThetaCamera) -> dict[str, str]:
    c, d, e = camera.linear_cde
    return {
        "Model": "ftheta", "cx": repr(camera.cx_px), "cy": repr(camera.cy_px),
        "width": str(camera.width_px), "height": str(camera.height_px), "polynomial": _fmt(camera.poly),
        "polynomial-type": BACKWARD if camera.is_backward_poly else FORWARD,
        "linear-c": repr(c), "linear-d": repr(d), "linear-e": repr(e),
    }  # fmt: skip


def camera_properties(camera: CameraModel) -> dict[str, str]:
    """The rig-JSON ``properties`` of one camera (strings, as DriveWorks writes them).

    Args:
        camera: an f-theta or pinhole camera.

    Returns:
        f-theta properties of `written_lens` (always a backward polynomial); for a pinhole camera
        those of `ftheta_equivalent` plus its exact
        ``Model: pinhole``, ``fx``, ``fy`` and ``distortion``.
    """
    if isinstance(camera, FThetaCamera):
        return _ftheta_properties(written_lens(camera))
    props = _ftheta_properties(ftheta_equivalent(camera))
    props.update({"Model": "pinhole", "cx": repr(camera.cx_px), "cy": repr(camera.cy_px), "fx": repr(camera.fx_px),
                  "fy": repr(camera.fy_px), "distortion": _fmt(camera.distortion)})  # fmt: skip
    return props


def rig_to_json(rig: CameraRig) -> dict[str, Any]:
    """The DriveWorks rig JSON of a camera rig (cameras only, corrections zero).

    Args:
        rig: the camera rig.

    Returns:
        ``{"rig": {"sensors": [...]}}`` with one ``camera:*`` sensor per camera, in rig order.
    """
    sensors = []
    for i, (name, camera) in enumerate(zip(rig.names, rig.cameras)):
        pose = rig.ego_SE3_camera[i]
        R_sensor = pose.rotation @ CAMERA_RDF_IN_SENSOR_FLU.T  # the sensor's FLU axes in the ego frame
        sensors.append({
            "name": sensor_name(name),
            "protocol": "camera.virtual",
            "properties": camera_properties(camera),  # type: ignore[arg-type]
            "nominalSensor2Rig_FLU": {"roll-pitch-yaw": [float(v) for v in matrix_to_rpy_deg(R_sensor)],
                                      "t": [float(v) for v in pose.translation]},
            "correction_sensor_R_FLU": {"roll-pitch-yaw": [0.0, 0.0, 0.0]},
            "correction_rig_T": [0.0, 0.0, 0.0],
        })  # fmt: skip
    return {"rig": {"sensors": sensors}}


__all__ = ["FIT_SAMPLES", "backward_equivalent", "camera_properties", "ftheta_equivalent", "rig_from_json", "rig_to_json",
           "written_lens"]
