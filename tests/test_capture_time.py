"""Per-camera capture time (`CameraRig.capture_offset_ns`) and full 6-DoF ego poses.

Camera i of a rig images frame time t at t + capture_offset_ns[i]: the renderer, the labels and
the Sampson calibration place it at ego.pose_at(t + offset) . ego_SE3_camera[i]
(`avsim.core.rig.world_SE3_camera_at`); agents, lights and the map stay at t. All-zero offsets
must change nothing (same files, same pixels).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.rig import CameraRig, capture_times_ns, nuscenes_rig, world_SE3_camera_at
from avsim.core.transforms import SE3
from avsim.scenario import Scenario
from avsim.scenario.io import load_scenario, save_scenario
from avsim.scenario.summary import scenario_summary, summary_pose_lines

OFFSETS_NS = np.array([-36_240_000, -28_360_000, -20_800_000, -11_170_000, -1_270_000, 43_820_000, 5], np.int64)


@pytest.fixture(scope="module")
def sample() -> Scenario:
    from avsim.scenario.sample import make_sample_scenario

    return make_sample_scenario(0, duration_s=2.0)  # the ego drives at about 10 m/s


def _with_offsets(rig: CameraRig, offsets: np.ndarray | None) -> CameraRig:
    return CameraRig(rig.names, rig.cameras, rig.ego_SE3_camera, capture_offset_ns=offsets)


# ---- the field ---------------------------------------------------------------------------------
def test_capture_offsets_default_to_zero_and_are_validated() -> None:
    rig = nuscenes_rig()
    assert rig.capture_offset_ns.dtype == np.int64 and rig.capture_offset_ns.tolist() == [0] * 6
    assert not rig.has_capture_offsets and not rig.capture_offset_ns.flags.writeable
    off = OFFSETS_NS[:6]
    timed = _with_offsets(rig, off)
    assert timed.has_capture_offsets and timed.capture_offset_ns.tolist() == off.tolist()
    assert timed != rig and timed == _with_offsets(rig, off.copy()) and rig == _with_offsets(rig, np.zeros(6, np.int32))
    assert timed.subset(["CAM_BACK", "CAM_FRONT"]).capture_offset_ns.tolist() == [off[3], off[0]]
    assert timed.resize(800, 450).capture_offset_ns.tolist() == off.tolist()
    assert capture_times_ns(timed, 10**18).tolist() == (10**18 + off).tolist()
    bad = [
        (np.zeros(5, np.int64), "expected shape (6,)"),
        (np.zeros((6, 1), np.int64), "expected shape (6,)"),
        (np.zeros(6), "expected integer nanoseconds"),
        (np.zeros(6, bool), "expected integer nanoseconds"),
        (np.array([0, 0, 0, 0, 0, 1_000_000_001]), "|offset| must be <= 1000000000 ns"),
        (np.array([0, -1_000_000_001, 0, 0, 0, 0]), "at camera 1"),
        (np.array([0, 0, 0, 0, 0, 2**63], np.uint64), "|offset| must be <= 1000000000 ns"),
    ]
    for value, message in bad:
        with pytest.raises(AvsimValueError, match="rig.capture_offset_ns") as err:
            _with_offsets(rig, value)
        assert message in str(err.value)
    _with_offsets(rig, np.array([1_000_000_000, -1_000_000_000, 0, 0, 0, 0]))  # exactly 1 s is allowed


# ---- the scenario folder -------------------------------------------------------------------------
@pytest.mark.slow
def test_offsets_round_trip_through_the_folder(sample: Scenario, tmp_path: Path) -> None:
    timed = sample.replace(rig=_with_offsets(sample.rig, OFFSETS_NS))
    save_scenario(timed, tmp_path / "s")
    doc = json.loads((tmp_path / "s" / "scenario.json").read_text())
    assert [c["capture_offset_ns"] for c in doc["rig"]["cameras"]] == OFFSETS_NS.tolist()
    back = load_scenario(tmp_path / "s")
    assert back.rig == timed.rig and back.rig.capture_offset_ns.tolist() == OFFSETS_NS.tolist()


def test_zero_offsets_write_the_same_files(sample: Scenario, tmp_path: Path) -> None:
    save_scenario(sample, tmp_path / "a")
    save_scenario(sample.replace(rig=_with_offsets(sample.rig, np.zeros(7, np.int64))), tmp_path / "b")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert "capture_offset_ns" not in (tmp_path / "a" / "scenario.json").read_text()


def test_folder_without_offsets_reads_zeros_and_bad_offsets_are_refused(sample: Scenario, tmp_path: Path) -> None:
    save_scenario(sample.replace(rig=_with_offsets(sample.rig, OFFSETS_NS)), tmp_path / "s")
    path = tmp_path / "s" / "scenario.json"
    doc = json.loads(path.read_text())
    for entry in doc["rig"]["cameras"]:
        del entry["capture_offset_ns"]  # as written before the field existed
    path.write_text(json.dumps(doc))
    assert load_scenario(tmp_path / "s").rig.capture_offset_ns.tolist() == [0] * 7
    for value, reason in ((0.5, "0.5"), (2_000_000_000, "2000000000"), ("1", "'1'"), (True, "True"), (None, "None")):
        doc["rig"]["cameras"][2]["capture_offset_ns"] = value
        path.write_text(json.dumps(doc))
        with pytest.raises(AvsimInputError) as err:
            load_scenario(tmp_path / "s")
        assert err.value.field == "rig.cameras[2] (camera_rear_right_70fov).capture_offset_ns" and reason in str(err.value)


# ---- rendering ---------------------------------------------------------------------------------
def test_zero_offsets_render_byte_identical(sample: Scenario) -> None:
    from avsim.render.geometry.scene import SceneRenderer, camera_primitives
    from avsim.render.raster.draw import rasterize

    size = (160, 90)
    plain = SceneRenderer(sample, size=size)
    zeros = SceneRenderer(sample.replace(rig=_with_offsets(sample.rig, np.zeros(7, np.int64))), size=size)
    for f in (0, 30, 59):
        a, b = plain.render_frame(f), zeros.render_frame(f)
        t = int(plain.timestamps_ns[f])
        world_SE3_ego = sample.ego.pose_at(np.array([t]))[0]
        _, objects = plain.frame_objects(f)
        for i, name in enumerate(plain.camera_names):
            assert a[name].tobytes() == b[name].tobytes(), (f, name)
            mount = plain.rig.ego_SE3_camera[i]  # the single-pose path, composed by hand
            prims = camera_primitives(plain.rig.cameras[i], plain._cones[i], world_SE3_ego.compose(mount).inverse(), objects)
            assert rasterize(prims, plain.rays(i), "numba", antialias=plain.antialias).tobytes() == a[name].tobytes(), (f, name)  # AA on (default)
            pose = world_SE3_camera_at(sample, plain.rig, t, i)
            assert np.array_equal(pose.as_matrix(), world_SE3_ego.compose(mount).as_matrix())


def test_offset_places_each_camera_at_its_capture_time(sample: Scenario) -> None:
    from avsim.render.geometry.scene import SceneRenderer, camera_primitives

    size = (160, 90)
    timed = sample.replace(rig=_with_offsets(sample.rig, OFFSETS_NS))
    renderer, plain = SceneRenderer(timed, size=size), SceneRenderer(sample, size=size)
    f = 30
    t = int(renderer.timestamps_ns[f])
    _, objects = renderer.frame_objects(f)  # objects (agents, lights, map) at the frame time
    _, plain_objects = plain.frame_objects(f)
    assert np.array_equal(objects.box_corners, plain_objects.box_corners)
    poses = world_SE3_camera_at(timed, renderer.rig, t)
    assert poses.batch_shape == (7,)
    point = np.array([[30.0, 2.0, 1.0]])
    for i in range(7):
        world_SE3_ego = sample.ego.pose_at(np.array([t + OFFSETS_NS[i]]))[0]
        by_hand = world_SE3_ego.compose(renderer.rig.ego_SE3_camera[i])
        np.testing.assert_array_equal(poses[i].as_matrix(), by_hand.as_matrix())
        np.testing.assert_array_equal(renderer.world_SE3_camera(f, i).as_matrix(), by_hand.as_matrix())
        got = renderer.camera_primitives(f, i)
        want = camera_primitives(renderer.rig.cameras[i], renderer._cones[i], by_hand.inverse(), objects)
        assert got.n_capsules > 0  # every camera sees some lines
        for part in ("capsules", "planars"):  # (the first camera_primitives call of a camera can differ in the last bit)
            for fld in dataclasses.fields(getattr(got, part)):
                np.testing.assert_allclose(getattr(getattr(got, part), fld.name), getattr(getattr(want, part), fld.name),
                                           rtol=0, atol=1e-9, err_msg=f"{part}.{fld.name} {i}")  # fmt: skip
        at_frame_time = plain.camera_primitives(f, i)
        if abs(OFFSETS_NS[i]) > 1_000_000:
            assert not np.array_equal(got.capsules.xy_px, at_frame_time.capsules.xy_px)
        # the camera moved by speed x offset along the path (about 10 m/s)
        at_t = world_SE3_camera_at(sample, plain.rig, t, i)
        moved_m = np.linalg.norm(by_hand.translation - at_t.translation)
        assert moved_m == pytest.approx(abs(OFFSETS_NS[i]) * 1e-9 * sample.ego.speed_mps[f], rel=0.05, abs=1e-6)
        if abs(OFFSETS_NS[i]) > 1_000_000:
            a = at_t.inverse().apply(point)
            b = by_hand.inverse().apply(point)
            assert np.linalg.norm(a - b) > 0.005  # a world point lands elsewhere in the camera
    front = renderer.rig.index("camera_front_wide_120fov")
    assert renderer.render_camera(f, front).tobytes() != plain.render_camera(f, front).tobytes()


def test_offset_outside_the_trajectory_extrapolates_like_pose_at(sample: Scenario) -> None:
    rig = _with_offsets(sample.rig, OFFSETS_NS)
    t0 = int(sample.ego.timestamps_ns[0])
    poses = world_SE3_camera_at(sample.ego, rig, t0)
    want = sample.ego.pose_at(t0 + OFFSETS_NS)  # before the first pose for negative offsets
    for i in range(7):
        np.testing.assert_array_equal(poses[i].as_matrix(), want[i].compose(rig.ego_SE3_camera[i]).as_matrix())


def test_labels_and_sampson_calibration_use_the_capture_pose(sample: Scenario, tmp_path: Path) -> None:
    from avsim.evaluation.calibration import calibration_from_scenario
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.render.run.labels import Labeller, frame_record

    timed = sample.replace(rig=_with_offsets(sample.rig, OFFSETS_NS))
    renderer = SceneRenderer(timed, size=(160, 90))
    img, rec = frame_record(Labeller.of(renderer), 10, 0)
    assert img.tobytes() == renderer.render_camera(10, 0).tobytes() and isinstance(rec, dict)
    save_scenario(timed, tmp_path / "s")
    cal = calibration_from_scenario(tmp_path / "s", fps=30.0, start_frame=3)
    times = timed.frame_timestamps(30.0)[3:]
    for i, name in enumerate(timed.rig.names):
        want = np.stack([world_SE3_camera_at(timed, timed.rig, int(t), i).as_matrix() for t in times])
        np.testing.assert_array_equal(cal.camera_poses(name), want)
        if abs(OFFSETS_NS[i]) > 1_000_000:
            assert not np.allclose(want, cal.world_SE3_ego @ cal.ego_SE3_camera[name], atol=1e-3)
    plain = calibration_from_scenario(_saved(sample, tmp_path / "p"), fps=30.0)
    assert plain.world_SE3_camera == {}


def _saved(scenario: Scenario, folder: Path) -> Path:
    save_scenario(scenario, folder)
    return folder


# ---- avsim info ------------------------------------------------------------------------------------
def test_info_reports_yaw_only_ego_and_capture_offsets(sample: Scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from avsim.cli.main import main

    plain = scenario_summary(sample)
    assert plain["ego_orientation"] is None and plain["capture_offsets_ms"] == {} and summary_pose_lines(plain) == []
    timed = sample.replace(rig=_with_offsets(sample.rig, OFFSETS_NS), metadata={**sample.metadata, "ego_orientation": "yaw_only"})
    summary = scenario_summary(timed)
    assert summary["ego_orientation"] == "yaw_only"
    assert summary["capture_offsets_ms"]["camera_front_wide_120fov"] == pytest.approx(-36.24)
    save_scenario(timed, tmp_path / "s")
    capsys.readouterr()
    assert main(["info", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "ego pose: yaw only (roll/pitch unknown" in out
    assert "camera capture offsets: camera_front_wide_120fov -36.2 ms" in out and "camera_cross_left_120fov +43.8 ms" in out
    assert main(["info", str(tmp_path / "s"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ego_orientation"] == "yaw_only" and len(doc["capture_offsets_ms"]) == 7
    save_scenario(sample.replace(metadata={**sample.metadata, "ego_orientation": "full"}), tmp_path / "f")
    assert main(["info", str(tmp_path / "f")]) == 0
    out = capsys.readouterr().out
    assert "yaw only" not in out and "capture offsets" not in out


# ---- importers (real data; skipped when absent) -------------------------------------------------
@pytest.fixture(scope="module")
def nuscenes_fixture(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    from test_importers_nuscenes import write_nuscenes_fixture

    root = tmp_path_factory.mktemp("nuscenes_capture")
    fixture = write_nuscenes_fixture(shared_data / "nuscenes-mmdet3d" / "nus_info.pkl", root)
    # give every camera record its own ego pose (the fixture copies the keyframe's), with roll and pitch
    path = root / "v1.0-mini" / "ego_pose.json"
    poses = json.loads(path.read_text())
    for k, pose in enumerate(poses):
        roll, pitch = 0.01 * (k % 5), -0.02 + 0.003 * k
        cr, sr, cp, sp = np.cos(roll / 2), np.sin(roll / 2), np.cos(pitch / 2), np.sin(pitch / 2)
        tilt = np.array([cr * cp, sr * cp, cr * sp, -sr * sp])  # wxyz of Ry(pitch) . Rx(roll)
        w0, x0, y0, z0 = pose["rotation"]
        w1, x1, y1, z1 = tilt
        pose["rotation"] = [w0 * w1 - x0 * x1 - y0 * y1 - z0 * z1, w0 * x1 + x0 * w1 + y0 * z1 - z0 * y1,
                            w0 * y1 - x0 * z1 + y0 * w1 + z0 * x1, w0 * z1 + x0 * y1 - y0 * x1 + z0 * w1]  # fmt: skip
        pose["translation"] = [pose["translation"][0] + 0.01 * k, pose["translation"][1], pose["translation"][2]]
    path.write_text(json.dumps(poses))
    return root, {**fixture, "ego_pose": {p["timestamp"]: p for p in poses}}


@pytest.mark.slow
def test_nuscenes_capture_offsets_and_camera_poses(nuscenes_fixture: tuple[Path, dict]) -> None:
    from avsim.scenario.importers.registry import convert

    root, fixture = nuscenes_fixture
    sc = convert(root, "nuscenes")
    samples = fixture["samples"]
    for k, name in enumerate(sc.rig.names):
        d_ns = [(round(s["images"][name]["timestamp"] * 1e6) - round(s["timestamp"] * 1e6)) * 1000 for s in samples]
        assert sc.rig.capture_offset_ns[k] == int(np.round(np.median(d_ns))), name
    front = sc.rig.capture_offset_ns[sc.rig.index("CAM_FRONT")]
    assert -37e6 < front < -35e6  # the real fixture: CAM_FRONT fires about 36 ms before the sample time
    # the ego: both keyframes (LIDAR_TOP) plus the camera records inside their span, strictly increasing
    t0, t1 = (round(s["timestamp"] * 1e6) * 1000 for s in samples)
    cams_inside = sorted({round(samples[1]["images"][c]["timestamp"] * 1e6) * 1000 for c in sc.rig.names})
    assert sc.ego.timestamps_ns.tolist() == [t0, *[t for t in cams_inside if t0 <= t <= t1], t1]
    assert "6 CAM_* sample_data ego poses" in sc.metadata["ego_pose_source"] and sc.metadata["ego_orientation"] == "full"
    # each camera record's own pose is in the trajectory exactly: the camera-time pose is not interpolated
    for t_ns in sc.ego.timestamps_ns:
        src = fixture["ego_pose"][int(t_ns) // 1000]
        got = sc.ego.pose_at(np.array([t_ns]))[0]
        want = SE3.from_quat(np.array(src["rotation"]) / np.linalg.norm(src["rotation"]), np.array(src["translation"]))
        np.testing.assert_allclose(got.as_matrix(), want.as_matrix(), atol=1e-12)
    # roll and pitch survive the import (full quaternion poses, not a heading)
    R = sc.ego.world_SE3_ego.rotation
    assert np.abs(R[:, 2, :2]).max() > 0.01


def test_named_rig_on_nuscenes_has_no_offsets(nuscenes_fixture: tuple[Path, dict]) -> None:
    from avsim.scenario.importers.registry import convert

    sc = convert(nuscenes_fixture[0], "nuscenes", rig_name="cosmos")
    assert not sc.rig.has_capture_offsets and sc.metadata["capture_offset_source"] == "named rig: none"


def test_av2_sensor_and_rdshq_keep_roll_and_pitch(shared_data: Path) -> None:
    import polars as pl

    from avsim.core.transforms import quat_to_matrix
    from avsim.scenario.importers.registry import convert

    log = shared_data / "av2/sensor/adcf7d18-0510-35b0-a2fa-b4cea13a6d76"
    sc = convert(log, "av2")
    df = pl.read_ipc(log / "city_SE3_egovehicle.feather").sort("timestamp_ns")
    q = df.select(["qw", "qx", "qy", "qz"]).to_numpy()
    want = quat_to_matrix(q / np.linalg.norm(q, axis=1, keepdims=True))
    np.testing.assert_allclose(sc.ego.world_SE3_ego.rotation, want, atol=1e-9)
    assert np.abs(want[:, 2, :2]).max() > 1e-3 and sc.metadata["ego_orientation"] == "full"  # the log has real tilt
    rds = convert(shared_data / "rdshq-example" / "assets" / "example", "rdshq")
    assert rds.metadata["ego_orientation"] == "full"
    assert np.abs(rds.ego.world_SE3_ego.rotation[:, 2, :2]).max() > 1e-4  # vehicle_pose tilt kept


def test_yaw_only_sources_say_so(shared_data: Path) -> None:
    from avsim.scenario.importers.registry import convert

    sn = convert(shared_data / "scenarionet" / "sd_nuscenes_v1.0-mini_scene-0103.pkl", "scenarionet")
    assert sn.metadata["ego_orientation"] == "yaw_only"
    assert np.abs(sn.ego.world_SE3_ego.rotation[:, 2, :2]).max() < 1e-12
    fc = convert(shared_data / "av2/forecasting/0a1e6f0a-1817-4a98-b02e-db8c9327d151", "av2")
    assert fc.metadata["ego_orientation"] == "yaw_only"
    wm = convert(shared_data / "waymo" / "motion_data_one_scenario.tfrecord", "waymo")
    assert wm.metadata["ego_orientation"] == "yaw_only"
    assert "ego pose: yaw only" in summary_pose_lines(scenario_summary(wm))[0]
