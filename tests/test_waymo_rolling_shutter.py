"""Waymo's rolling-shutter camera model (avsim.scenario.importers.waymo_camera).

`waymo_reference` below is a line-by-line restatement of waymo-open-dataset's
``camera_model.cc`` (``PrepareProjection``, ``WorldToImageMovingPointWithDepth``,
``ComputeDepthResidualAndJacobian``, ``DirectionToImage``, ``IterateUndistortion``) in Waymo's
own camera axes (x forward, y left, z up), one point at a time with plain Python loops; avsim's
vectorised version works in RDF axes, so agreement also checks the axis conversion. Waymo's
compiled op itself (``world_to_image``, TensorFlow) is compared when AVSIM_WAYMO_TF_PYTHON names
a Python with TensorFlow and waymo-open-dataset installed.
"""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from avsim.core.cameras import PinholeCamera
from avsim.core.errors import AvsimValueError
from avsim.core.transforms import SE3
from avsim.scenario.importers.waymo_camera import (
    READOUT_DIRECTIONS,
    RollingShutterCapture,
    ShutterProjection,
    project_points,
)

WAYMO_CAMERA_R_RDF = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
T0_S = 1_553_735_853.4891713
DIRECTIONS = READOUT_DIRECTIONS[1:]  # every value but UNKNOWN (Waymo aborts on it)


def _rotation(yaw: float, pitch: float, roll: float) -> np.ndarray:
    cy, sy, cp, sp, cr, sr = math.cos(yaw), math.sin(yaw), math.cos(pitch), math.sin(pitch), math.cos(roll), math.sin(roll)
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1.0]])
    ry = np.array([[cp, 0, sp], [0, 1.0, 0], [-sp, 0, cp]])
    rx = np.array([[1.0, 0, 0], [0, cr, -sr], [0, sr, cr]])
    return rz @ ry @ rx


def _transform(r: np.ndarray, t: object) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = r, t
    return m


def make_case(seed: int, direction: str) -> dict:
    """A turning, accelerating-free ego with one distorted camera, and points all around it."""
    rng = np.random.default_rng(seed)
    width, height = (1920, 1280) if seed % 2 else (1920, 886)
    intrinsic = [2050.0 + 20 * rng.standard_normal(), 2040.0, 955.0 + 5 * rng.standard_normal(), height / 2 + 7.0,
                 0.04, -0.33, 0.001, -0.0015, 0.01 * seed % 3]  # fmt: skip
    extrinsic = _transform(_rotation(rng.uniform(-np.pi, np.pi), rng.uniform(-0.05, 0.05), rng.uniform(-0.02, 0.02)), [1.5, rng.uniform(-1, 1), 2.1])
    heading = rng.uniform(-np.pi, np.pi)
    pose = _transform(_rotation(heading, rng.uniform(-0.03, 0.03), rng.uniform(-0.03, 0.03)), [1200.0, -3400.0, 45.0])
    speed = rng.uniform(5.0, 25.0)
    linear = np.array([speed * math.cos(heading), speed * math.sin(heading), rng.uniform(-0.5, 0.5)], dtype=np.float32)
    velocity = [*map(float, linear), rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05), rng.uniform(-0.5, 0.5)]  # v_* are float32 in the proto
    trigger = T0_S + rng.uniform(0, 0.1)
    shutter, readout = rng.uniform(0.001, 0.005), rng.uniform(0.03, 0.05)
    times = [trigger + rng.uniform(0.0, readout), shutter, trigger, trigger + shutter + readout]
    # points: inside the view (various depths), behind the camera, and at grazing angles
    k = 60
    u, v = rng.uniform(-200, width + 200, k), rng.uniform(-200, height + 200, k)
    depth = rng.uniform(2.0, 80.0, k)
    cam_w = np.stack([depth, -(u - intrinsic[2]) / intrinsic[0] * depth, -(v - intrinsic[3]) / intrinsic[1] * depth], -1)
    cam_w = np.concatenate([cam_w, [[-5.0, 1.0, 0.0], [0.3, 20.0, 0.0], [1.0, -1.5, 0.2]]])
    world_T_cam = pose @ extrinsic
    points = cam_w @ world_T_cam[:3, :3].T + world_T_cam[:3, 3]
    return {"width": width, "height": height, "intrinsic": intrinsic, "extrinsic": extrinsic, "pose": pose,
            "velocity": velocity, "times": times, "direction": direction, "points": points}  # fmt: skip


# ---- Waymo's algorithm, restated point by point in Waymo's camera axes -------------------------


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _undistort(intr: list[float], u_d: float, v_d: float) -> tuple[float, float]:
    f_u, f_v, c_u, c_v, k1, k2, p1, p2, k3 = intr
    u_nd, v_nd = (u_d - c_u) / f_u, (v_d - c_v) / f_v
    u, v = u_nd, v_nd
    min_delta2 = 1e-12 / (f_u * f_u + f_v * f_v)
    for _ in range(20):
        r2 = u * u + v * v
        rd = 1.0 + r2 * k1 + r2 * r2 * k2 + r2 * r2 * r2 * k3
        u_prev, v_prev = u, v
        u = (u_nd - (2.0 * p1 * u * v + p2 * (r2 + 2.0 * u * u))) / rd
        v = (v_nd - (2.0 * p2 * u_prev * v + p1 * (r2 + 2.0 * v * v))) / rd
        if (u - u_prev) ** 2 + (v - v_prev) ** 2 < min_delta2:
            break
    return u, v


def _direction_to_image(intr: list[float], width: int, height: int, u_n: float, v_n: float) -> tuple[float, float, bool]:
    f_u, f_v, c_u, c_v, k1, k2, p1, p2, k3 = intr
    r2 = u_n * u_n + v_n * v_n
    r_d = 1.0 + k1 * r2 + k2 * r2 * r2 + k3 * r2 * r2 * r2
    if r_d < 0.8 or r_d > 1.2:
        radius = math.hypot(width, height)
        return u_n / math.sqrt(r2) * radius + c_u, v_n / math.sqrt(r2) * radius + c_v, False
    u_nd = u_n * r_d + 2.0 * p1 * u_n * v_n + p2 * (r2 + 2.0 * u_n * u_n)
    v_nd = v_n * r_d + p1 * (r2 + 2.0 * v_n * v_n) + 2.0 * p2 * u_n * v_n
    return u_nd * f_u + c_u, v_nd * f_v + c_v, True


def _pixel_time(case: dict, x: float, y: float) -> float:
    pose_t, shutter, trigger, done = case["times"]
    duration = done - trigger - shutter
    base = trigger + 0.5 * shutter
    w, h = case["width"], case["height"]
    return {"TOP_TO_BOTTOM": base + duration / h * y, "BOTTOM_TO_TOP": base + duration / h * (h - y),
            "LEFT_TO_RIGHT": base + duration / w * x, "RIGHT_TO_LEFT": base + duration / w * (w - x)}[case["direction"]]  # fmt: skip


def _prepare(case: dict) -> dict:
    intr, w, h = case["intrinsic"], case["width"], case["height"]
    n_T_vehicle, vehicle_T_cam = case["pose"], case["extrinsic"]
    n_T_cam0 = n_T_vehicle @ vehicle_T_cam
    pose_t, shutter, trigger, done = case["times"]
    readout = done - trigger - shutter
    horizontal = case["direction"] in ("LEFT_TO_RIGHT", "RIGHT_TO_LEFT")
    if horizontal:
        span = _undistort(intr, w, 0.5 * h)[0] - _undistort(intr, 0, 0.5 * h)[0]
    else:
        span = _undistort(intr, 0.5 * w, h)[1] - _undistort(intr, 0.5 * w, 0)[1]
    factor = readout / span
    if case["direction"] in ("RIGHT_TO_LEFT", "BOTTOM_TO_TOP"):
        factor = -factor
    vel = case["velocity"]
    omega_vehicle = np.array(vel[3:])
    skew_omega = _skew(vehicle_T_cam[:3, :3].T @ omega_vehicle)
    n_pos_cam0 = n_T_vehicle[:3, :3] @ vehicle_T_cam[:3, 3]
    n_vel_cam0 = np.array(vel[:3]) + _skew(n_T_vehicle[:3, :3] @ omega_vehicle) @ n_pos_cam0
    cam0_dcm_n = n_T_cam0[:3, :3].T
    return {"n_T_cam0": n_T_cam0, "factor": factor, "horizontal": horizontal, "skew_omega": skew_omega,
            "n_vel_cam0": n_vel_cam0, "cam0_dcm_n": cam0_dcm_n, "skew_omega_dcm": -skew_omega @ cam0_dcm_n,
            "t_offset": pose_t - _pixel_time(case, intr[2], intr[3])}  # fmt: skip


def _residual(s: dict, p: np.ndarray, t_h: float) -> tuple[bool, float, float, float, float, float]:
    cam_dcm_n = s["cam0_dcm_n"] + t_h * s["skew_omega_dcm"]
    n_pos_cam = s["n_T_cam0"][:3, 3] + t_h * s["n_vel_cam0"]
    c = cam_dcm_n @ (p - n_pos_cam)
    if c[0] <= 0:
        return False, 0.0, 0.0, 0.0, 0.0, 0.0
    nu, nv = -c[1] / c[0], -c[2] / c[0]
    residual = t_h - (nu if s["horizontal"] else nv) * s["factor"] + s["t_offset"]
    j = cam_dcm_n @ (-s["n_vel_cam0"]) - s["skew_omega"] @ c
    combined = s["factor"] / c[0] * ((nu * j[0] - j[1]) if s["horizontal"] else (nv * j[0] - j[2]))
    return True, nu, nv, c[0], residual, 1.0 - combined


def waymo_reference(case: dict) -> list[tuple[float, float, float, bool]]:
    """(u, v, depth, valid) per point, as camera_model.cc computes them (u = v = -1 behind the camera)."""
    intr, w, h = case["intrinsic"], case["width"], case["height"]
    out = []
    if case["direction"] == "GLOBAL_SHUTTER":
        cam_T_n = np.linalg.inv(case["pose"] @ case["extrinsic"])
        for p in case["points"]:
            c = cam_T_n[:3, :3] @ p + cam_T_n[:3, 3]
            if c[0] <= 0:
                out.append((-1.0, -1.0, -1.0, False))
                continue
            u, v, valid = _direction_to_image(intr, w, h, -c[1] / c[0], -c[2] / c[0])
            out.append((u, v, c[0], valid))
        return out
    s = _prepare(case)
    for p in case["points"]:
        t_h, iters, residual, ok = 0.0, 0, 2e-5, True
        while abs(residual) > 1e-5 and iters < 4:
            ok, _, _, _, residual, jacobian = _residual(s, p, t_h)
            if not ok:
                break
            t_h += -residual / jacobian
            iters += 1
        if not ok:
            out.append((-1.0, -1.0, -1.0, False))
            continue
        if abs(residual) > 0.1:
            out.append((0.0, 0.0, 0.0, False))  # the op's untouched outputs
            continue
        ok, nu, nv, depth, _, _ = _residual(s, p, t_h)
        if not ok:
            out.append((-1.0, -1.0, -1.0, False))
            continue
        u, v, valid = _direction_to_image(intr, w, h, nu, nv)
        out.append((u, v, depth, valid))
    return out


# ---- avsim's inputs for the same case -----------------------------------------------------------


def avsim_inputs(case: dict) -> tuple[PinholeCamera, SE3, SE3, RollingShutterCapture]:
    f_u, f_v, c_u, c_v, *dist = case["intrinsic"]
    camera = PinholeCamera(case["width"], case["height"], f_u, f_v, c_u, c_v, distortion=tuple(dist))
    ego_T_cam = case["extrinsic"].copy()
    ego_T_cam[:3, :3] = ego_T_cam[:3, :3] @ WAYMO_CAMERA_R_RDF
    pose_t, shutter, trigger, done = case["times"]
    capture = RollingShutterCapture(case["direction"], pose_t, trigger, done, shutter, case["velocity"][:3], case["velocity"][3:])
    return camera, SE3.from_matrix(case["pose"]), SE3.from_matrix(ego_T_cam), capture


def _project(case: dict) -> ShutterProjection:
    return project_points(case["points"], *avsim_inputs(case))


def _compare(case: dict, expected: np.ndarray) -> None:
    got = _project(case)
    valid_w = expected[:, 3] > 0.5
    np.testing.assert_array_equal(got.valid, valid_w)
    front = np.isfinite(got.uv_px[:, 0])
    assert front.sum() >= 50 and (~front).sum() >= 1  # cases exercise both
    np.testing.assert_allclose(got.uv_px[front], expected[front, :2], rtol=0, atol=1e-6)
    np.testing.assert_allclose(got.depth_m[front], expected[front, 2], rtol=0, atol=1e-9)
    assert np.all(expected[~front, 3] == 0)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_matches_the_restated_waymo_algorithm(direction: str) -> None:
    for seed in range(3):
        case = make_case(seed, direction)
        _compare(case, np.array(waymo_reference(case)))
        got = _project(case)
        if direction != "GLOBAL_SHUTTER":  # a moving, turning ego moves the rolling-shutter pixels
            assert np.nanmax(np.abs(got.time_from_pose_s)) > 0.005


def test_zero_velocity_is_the_global_shutter_projection() -> None:
    for direction in DIRECTIONS:
        case = make_case(7, direction)
        case["velocity"] = [0.0] * 6
        got = _project(case)
        camera, world_SE3_ego, ego_SE3_camera, _ = avsim_inputs(case)
        world_SE3_camera = world_SE3_ego.compose(ego_SE3_camera)
        uv, depth, _ = camera.project(world_SE3_camera.inverse().apply(case["points"]))
        np.testing.assert_allclose(got.uv_px[got.valid], uv[got.valid], rtol=0, atol=1e-6)
        np.testing.assert_allclose(got.depth_m[got.valid], depth[got.valid], rtol=0, atol=1e-9)
        assert got.valid.sum() >= 40


@pytest.mark.parametrize("direction", ["LEFT_TO_RIGHT", "RIGHT_TO_LEFT"])
def test_sideways_ego_shift_has_the_analytic_size(direction: str) -> None:
    """Ego sliding along the camera's x axis at v: u - c = (u0 - c) / (1 + f v T / (W Z)) (exact here).

    No lens distortion, no rotation, the pose at the principal point's time; to first order the
    shift is f * v * dt / Z with dt the column's time from the centre column.
    """
    width, height, f, readout, speed, depth = 1920, 1280, 2000.0, 0.03, 10.0, 10.0
    camera = PinholeCamera(width, height, f, f, width / 2, height / 2)
    sign = 1.0 if direction == "LEFT_TO_RIGHT" else -1.0
    ego_SE3_camera = SE3.from_matrix(_transform(WAYMO_CAMERA_R_RDF, [0.0, 0.0, 1.5]))  # looks along ego +x, right = ego -y
    # times near 0: at Unix times (1.5e9 s) a double resolves 2.4e-7 s, i.e. 5e-4 px here
    capture = RollingShutterCapture(direction, 0.5 * readout, 0.0, readout, 0.0, [0.0, -speed, 0.0], [0.0, 0.0, 0.0])
    u0 = np.array([100.0, 500.0, 960.0, 1400.0, 1900.0])
    points = np.stack([np.full(5, depth), -(u0 - width / 2) / f * depth, np.full(5, 1.5)], -1)  # ego frame = world
    got = project_points(points, camera, SE3.identity(), ego_SE3_camera, capture)
    k = f * speed * readout / (width * depth)
    expected_u = width / 2 + (u0 - width / 2) / (1 + sign * k)
    np.testing.assert_allclose(got.uv_px[:, 0], expected_u, atol=1e-6)
    np.testing.assert_allclose(got.uv_px[:, 1], height / 2, atol=1e-9)
    first_order = -f * speed * (sign * (u0 - width / 2) / width * readout) / depth  # du = -f v dt / Z
    shift = got.uv_px[:, 0] - u0
    np.testing.assert_allclose(shift, first_order, rtol=0.05, atol=1e-9)
    assert abs(shift[-1]) > 25.0  # 28.5 px at column 1900 (first order: 2000 * 10 * 0.0147 / 10 = 29.4 px)


def test_unknown_readout_and_bad_values_are_refused() -> None:
    case = make_case(1, "UNKNOWN")
    with pytest.raises(AvsimValueError, match="UNKNOWN"):
        _project(case)
    with pytest.raises(AvsimValueError, match="readout"):
        RollingShutterCapture("SIDEWAYS", 0.0, 0.0, 0.0, 0.0, [0, 0, 0], [0, 0, 0])
    with pytest.raises(AvsimValueError, match="velocity_mps"):
        RollingShutterCapture("LEFT_TO_RIGHT", 0.0, 0.0, 0.0, 0.0, [0, float("nan"), 0], [0, 0, 0])


TF_PYTHON = os.environ.get("AVSIM_WAYMO_TF_PYTHON", "")
TF_SCRIPT = """
import sys, numpy as np, tensorflow as tf
from waymo_open_dataset.wdl_limited.camera.ops import py_camera_model_ops as ops
d = np.load(sys.argv[1])
out = {f"out{k}": ops.world_to_image(*(tf.constant(d[f"{n}{k}"], dtype=tf.int32 if n == "metadata" else tf.float64)
       for n in ("extrinsic", "intrinsic", "metadata", "cim", "points")), return_depth=True).numpy() for k in range(int(d["n"]))}
np.savez(sys.argv[2], **out)
"""


@pytest.mark.skipif(not TF_PYTHON, reason="set AVSIM_WAYMO_TF_PYTHON to a Python with tensorflow and waymo-open-dataset")
def test_matches_waymos_compiled_op(tmp_path: Path) -> None:
    cases = [make_case(seed, d) for d in DIRECTIONS for seed in range(3)]
    arrays: dict[str, object] = {"n": len(cases)}
    for k, c in enumerate(cases):
        arrays |= {f"extrinsic{k}": c["extrinsic"], f"intrinsic{k}": np.array(c["intrinsic"]), f"points{k}": c["points"],
                   f"metadata{k}": np.array([c["width"], c["height"], READOUT_DIRECTIONS.index(c["direction"])]),
                   f"cim{k}": np.concatenate([c["pose"].reshape(-1), c["velocity"], c["times"]])}  # fmt: skip
    np.savez(tmp_path / "in.npz", **arrays)
    subprocess.run([TF_PYTHON, "-c", TF_SCRIPT, tmp_path / "in.npz", tmp_path / "out.npz"], check=True, capture_output=True, timeout=900)
    out = np.load(tmp_path / "out.npz")
    for k, c in enumerate(cases):
        _compare(c, out[f"out{k}"])


# ---- through the importer and avsim check-projection ---------------------------------------------

FRAME_T0_US = 1_553_735_853_462_203


def _frame_case() -> dict:
    """One FRONT camera reading out left to right while the ego drives at 10 m/s and turns at 0.25 rad/s."""
    pose_t = FRAME_T0_US * 1e-6 + 0.05
    extrinsic = _transform(_rotation(0.02, 0.01, 0.0), [1.5, -0.1, 2.0])
    return {"width": 1920, "height": 1280, "intrinsic": [2050.0, 2050.0, 950.0, 633.0, 0.04, -0.33, 0.001, -0.0015, 0.0],
            "extrinsic": extrinsic, "pose": _transform(_rotation(0.5, 0.0, 0.0), [10.0 * math.cos(0.5) * 0.05, 10.0 * math.sin(0.5) * 0.05, 0.0]),
            "velocity": [float(np.float32(10.0 * math.cos(0.5))), float(np.float32(10.0 * math.sin(0.5))), 0.0, 0.0, 0.0, 0.25],
            "times": [pose_t, 0.003, pose_t - 0.025, pose_t + 0.02], "direction": "LEFT_TO_RIGHT"}  # fmt: skip


def write_rolling_frame(path: Path) -> Path:
    """A one-frame segment whose projected_lidar_labels come from `waymo_reference` (rolling shutter)."""
    dataset_pb2 = pytest.importorskip("waymo_open_dataset.dataset_pb2", reason="the `waymo` extra is not installed")
    from test_waymo_frame import _corners, write_tfrecord

    case = _frame_case()
    frame = dataset_pb2.Frame(timestamp_micros=FRAME_T0_US)
    frame.context.name = "rolling_segment"
    frame_pose = _transform(_rotation(0.5 - 0.25 * 0.05, 0.0, 0.0), [0.0, 0.0, 0.0])  # 50 ms before the image pose
    frame.pose.transform.extend(frame_pose.reshape(-1))  # the laser labels' frame
    calib = frame.context.camera_calibrations.add(name=dataset_pb2.CameraName.FRONT, width=case["width"], height=case["height"])
    calib.intrinsic.extend(case["intrinsic"])
    calib.extrinsic.transform.extend(case["extrinsic"].reshape(-1))
    calib.rolling_shutter_direction = dataset_pb2.CameraCalibration.LEFT_TO_RIGHT
    pose_t, shutter, trigger, done = case["times"]
    image = frame.images.add(name=dataset_pb2.CameraName.FRONT, pose_timestamp=pose_t, shutter=shutter, camera_trigger_time=trigger, camera_readout_done_time=done)
    image.pose.transform.extend(case["pose"].reshape(-1))
    v = image.velocity
    v.v_x, v.v_y, v.v_z, v.w_x, v.w_y, v.w_z = case["velocity"]
    projected = frame.projected_lidar_labels.add(name=dataset_pb2.CameraName.FRONT)
    for box_id, box in (("near", (14.0, 1.0, 0.8, 4.0, 2.0, 1.6, 0.3)), ("far", (30.0, -4.0, 1.0, 4.5, 2.0, 1.5, -0.2)), ("ped", (16.0, 4.0, 0.9, 0.8, 0.8, 1.8, 1.0))):
        lb = frame.laser_labels.add(id=box_id, type=1)
        b = lb.box
        b.center_x, b.center_y, b.center_z, b.length, b.width, b.height, b.heading = box
        uv = np.array(waymo_reference(case | {"points": _corners(box) @ frame_pose[:3, :3].T + frame_pose[:3, 3]}))
        assert np.all(uv[:, 3] > 0) and np.all((uv[:, 0] > 1) & (uv[:, 0] < 1919) & (uv[:, 1] > 1) & (uv[:, 1] < 1279))
        (x0, y0), (x1, y1) = uv[:, :2].min(0), uv[:, :2].max(0)
        p = projected.labels.add(id=f"{box_id}_FRONT", type=1)
        p.box.center_x, p.box.center_y, p.box.length, p.box.width = (x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0
    return write_tfrecord(path, [frame.SerializeToString()])


def _cli(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from avsim.cli import main

    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_check_projection_uses_the_rolling_shutter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the reader's image cache folder
    src = write_rolling_frame(tmp_path / "segment.tfrecord")
    docs = {}
    for mode in (None, "rolling", "global"):
        extra = [] if mode is None else ["--shutter", mode]
        rc, out, err = _cli(["check-projection", src, "--out", tmp_path / f"{mode}.json", *extra], capsys)
        assert rc == 0, err
        docs[mode] = json.loads((tmp_path / f"{mode}.json").read_text())
    (front,) = docs[None]["cameras"]
    assert docs[None]["shutter"] == "rolling" and front["shutter"] == "rolling LEFT_TO_RIGHT"
    assert front["corners_compared"] == 3 and front["corner_max_px"] < 1e-6
    assert docs["rolling"] == docs[None]
    (glob,) = docs["global"]["cameras"]
    assert docs["global"]["shutter"] == "global" and glob["shutter"] == "global" and glob["corner_max_px"] > 2.0
    assert "; shutter global" in out


def test_reader_keeps_each_images_timing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses
    import json
    import tempfile

    from avsim.scenario.importers.waymo_frame import reference_source

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    source = reference_source(write_rolling_frame(tmp_path / "segment.tfrecord"))
    case = _frame_case()
    ((key, capture),) = source.captures.items()
    assert key == ("FRONT", round(case["times"][0] * 1e6) * 1000) == (source.labels[0].camera, source.labels[0].time_ns)
    pose_t, shutter, trigger, done = case["times"]
    assert (capture.readout, capture.pose_time_s, capture.shutter_s, capture.trigger_time_s, capture.readout_done_time_s) == (
        "LEFT_TO_RIGHT", pose_t, shutter, trigger, done)  # fmt: skip
    assert capture.velocity_mps + capture.angular_velocity_radps == tuple(case["velocity"])
    doc = json.loads(json.dumps(dataclasses.asdict(capture)))  # JSON-safe numbers
    assert type(source.captures[key])(**doc) == capture


@pytest.mark.parametrize(("value", "needle"), [("rolling", "no rolling-shutter image timing"), ("sideways", "expected one of global, rolling")])
def test_shutter_option_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, needle: str) -> None:
    import mmdet3d_synth as synth

    rc, out, err = _cli(["check-projection", synth.write_info(tmp_path), "--shutter", value], capsys)
    assert rc == 1 and err.startswith("error: ") and err.count("\n") == 1 and needle in err and "--shutter" in err, err


REAL_FRAME = os.environ.get("AVSIM_WAYMO_FRAME", "")


@pytest.mark.skipif(not REAL_FRAME or not Path(REAL_FRAME).is_file(),
                    reason="set AVSIM_WAYMO_FRAME to waymo-open-dataset's utils/testdata/pvps_data_one_frame.tfrecord")  # fmt: skip
def test_real_frame_labels_are_rolling_shutter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pvps_data_one_frame: standing ego, but its 0.003 rad/s yaw rate is what the last 0.2 px were."""
    import tempfile

    from avsim.scenario.importers.waymo_frame import reference_source
    from avsim.scenario.projection_check import check_projection

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    source = reference_source(REAL_FRAME)
    assert len(source.captures) == 5 and {c.readout for c in source.captures.values()} == {"LEFT_TO_RIGHT"}
    rolling, glob = check_projection(source, "pvps"), check_projection(source, "pvps", "global")
    assert rolling.shutter == "rolling" and sum(s.corners_compared for s in rolling.cameras) == 45
    assert max(s.corner_max_px for s in rolling.cameras) < 0.01  # measured 0.00013 px
    assert 0.1 < max(s.corner_max_px for s in glob.cameras) < 0.2  # measured 0.198 px
