"""Waymo perception ``Frame`` importer: synthetic two-frame, two-camera segments built with dataset_pb2.

The projected labels of the fixture are computed here with Waymo's own camera convention
(camera x forward, y left, z up; normalised u = -y/x, v = -z/x; OpenCV distortion), independently
of avsim's RDF cameras, so the round trip checks the axis conversion. The real public test frame
(``pvps_data_one_frame.tfrecord`` of waymo-open-dataset) is read from ``AVSIM_WAYMO_FRAME``.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

dataset_pb2 = pytest.importorskip("waymo_open_dataset.dataset_pb2", reason="the `waymo` extra is not installed")
label_pb2 = pytest.importorskip("waymo_open_dataset.label_pb2", reason="the `waymo` extra is not installed")

from avsim.core.errors import AvsimInputError  # noqa: E402
from avsim.scenario.importers.waymo import load_waymo  # noqa: E402
from avsim.scenario.importers.waymo_frame import load_waymo_frames, reference_source, write_camera_images  # noqa: E402
from avsim.scenario.importers.waymo_records import masked_crc32c  # noqa: E402

T0_US = 1_553_735_853_462_203
SPEED_MPS = 10.0
OFFSETS_S = {"FRONT": 0.02, "SIDE_LEFT": 0.05}
INTRINSIC = {"FRONT": [500.0, 510.0, 320.0, 240.0, 0.01, -0.002, 0.0005, -0.0003, 0.0], "SIDE_LEFT": [400.0, 400.0, 330.0, 235.0, 0, 0, 0, 0, 0]}
SIZE = (640, 480)
BOXES = [  # id, type, (x, y, z, length, width, height, heading) in the vehicle frame
    ("car1", label_pb2.Label.TYPE_VEHICLE, (15.0, 1.0, 1.0, 4.0, 2.0, 1.5, 0.3)),
    ("ped1", label_pb2.Label.TYPE_PEDESTRIAN, (3.0, 9.0, 0.9, 0.8, 0.8, 1.8, -1.0)),
    ("cyc1", label_pb2.Label.TYPE_CYCLIST, (25.0, -2.0, 1.0, 1.8, 0.6, 1.7, 2.5)),
]


def _rot_z(yaw: float) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _pose(yaw: float, t: tuple[float, float, float]) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = _rot_z(yaw), t
    return m


def world_T_vehicle(t_s: float) -> np.ndarray:
    """The fixture's ego: yaw 30 deg, driving straight at SPEED_MPS from (100, 200, 5)."""
    yaw = np.radians(30.0)
    start = np.array([100.0, 200.0, 5.0])
    return _pose(yaw, tuple(start + SPEED_MPS * t_s * np.array([np.cos(yaw), np.sin(yaw), 0.0])))


VEHICLE_T_CAMERA = {"FRONT": _pose(0.0, (1.5, 0.0, 2.0)), "SIDE_LEFT": _pose(np.pi / 2, (1.0, 0.5, 2.0))}


def _corners(box: tuple) -> np.ndarray:
    x, y, z, ln, w, h, heading = box
    signs = np.array([[sx, sy, sz] for sx in (1, -1) for sy in (1, -1) for sz in (1, -1)], dtype=float)
    return (signs * [ln / 2, w / 2, h / 2]) @ _rot_z(heading).T + [x, y, z]


def waymo_project(name: str, vehicle_T_frame_vehicle: np.ndarray, points_vehicle: np.ndarray) -> np.ndarray | None:
    """Waymo camera convention: pixels (N, 2) of vehicle-frame points, None if any is behind."""
    cam_T_vehicle = np.linalg.inv(VEHICLE_T_CAMERA[name]) @ vehicle_T_frame_vehicle
    p = points_vehicle @ cam_T_vehicle[:3, :3].T + cam_T_vehicle[:3, 3]
    if np.any(p[:, 0] <= 0.1):
        return None
    fu, fv, cu, cv, k1, k2, p1, p2, k3 = INTRINSIC[name]
    u, v = -p[:, 1] / p[:, 0], -p[:, 2] / p[:, 0]
    r2 = u * u + v * v
    radial = 1 + k1 * r2 + k2 * r2 * r2 + k3 * r2**3
    ud = u * radial + 2 * p1 * u * v + p2 * (r2 + 2 * u * u)
    vd = v * radial + p1 * (r2 + 2 * v * v) + 2 * p2 * u * v
    return np.stack([fu * ud + cu, fv * vd + cv], -1)


def _jpeg(value: int) -> bytes:
    import cv2

    ok, buf = cv2.imencode(".jpg", np.full((SIZE[1], SIZE[0], 3), value, dtype=np.uint8))
    assert ok
    return buf.tobytes()


def _frame(k: int, with_map: bool) -> object:
    frame = dataset_pb2.Frame()
    frame.context.name = "synthetic_segment"
    frame.timestamp_micros = T0_US + 100_000 * k
    t_frame = 0.1 * k
    frame.pose.transform.extend(world_T_vehicle(t_frame).reshape(-1))
    for name in ("SIDE_LEFT", "FRONT"):  # not in enum order: the rig sorts them
        calib = frame.context.camera_calibrations.add(name=dataset_pb2.CameraName.Name.Value(name), width=SIZE[0], height=SIZE[1])
        calib.intrinsic.extend(INTRINSIC[name])
        calib.extrinsic.transform.extend(VEHICLE_T_CAMERA[name].reshape(-1))
        calib.rolling_shutter_direction = dataset_pb2.CameraCalibration.GLOBAL_SHUTTER
        t_image = t_frame + OFFSETS_S[name]
        image = frame.images.add(name=dataset_pb2.CameraName.Name.Value(name), image=_jpeg(40 * k + 10))
        image.pose_timestamp = frame.timestamp_micros * 1e-6 + OFFSETS_S[name]
        image.pose.transform.extend(world_T_vehicle(t_image).reshape(-1))
        vehicle_T_frame = np.linalg.inv(world_T_vehicle(t_image)) @ world_T_vehicle(t_frame)
        projected = frame.projected_lidar_labels.add(name=image.name)
        for box_id, _, box in BOXES:
            uv = waymo_project(name, vehicle_T_frame, _corners((box[0] + k, *box[1:])))
            if uv is None:
                continue
            x0, y0 = np.clip(uv.min(0), 0, SIZE)
            x1, y1 = np.clip(uv.max(0), 0, SIZE)
            if x1 <= x0 or y1 <= y0:
                continue
            lb = projected.labels.add(id=f"{box_id}_{name}", type=label_pb2.Label.TYPE_VEHICLE)
            lb.box.center_x, lb.box.center_y, lb.box.length, lb.box.width = (x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0
    for box_id, box_type, (x, y, z, ln, w, h, heading) in BOXES:
        lb = frame.laser_labels.add(id=box_id, type=box_type)
        b = lb.box
        b.center_x, b.center_y, b.center_z, b.length, b.width, b.height, b.heading = x + k, y, z, ln, w, h, heading  # moves 1 m
    if with_map and k == 0:
        from waymo_open_dataset.protos import map_pb2

        feature = frame.map_features.add(id=7)
        feature.road_edge.type = map_pb2.RoadEdge.TYPE_ROAD_EDGE_BOUNDARY
        for i in range(5):
            feature.road_edge.polyline.add(x=100.0 + 5 * i, y=195.0, z=5.0)
    return frame


def write_tfrecord(path: Path, payloads: list[bytes]) -> Path:
    """TFRecord framing: length, masked CRC of the length, data, masked CRC of the data."""
    with path.open("wb") as fh:
        for data in payloads:
            header = struct.pack("<Q", len(data))
            fh.write(header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data)))
    return path


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    return write_tfrecord(tmp_path / "segment.tfrecord", [_frame(k, True).SerializeToString() for k in range(2)])


def test_ego_rig_and_capture_offsets(segment: Path) -> None:
    scenario = load_waymo_frames(segment)
    assert scenario.rig.names == ("FRONT", "SIDE_LEFT")
    front = scenario.rig.camera("FRONT")
    assert (front.fx_px, front.fy_px, front.cx_px, front.cy_px) == (500.0, 510.0, 320.0, 240.0)
    assert front.distortion == (0.01, -0.002, 0.0005, -0.0003, 0.0)
    np.testing.assert_array_equal(scenario.rig.capture_offset_ns, [20_000_000, 50_000_000])
    # RDF camera axes in the vehicle frame: SIDE_LEFT looks along vehicle +y, its right is vehicle +x
    side = scenario.rig.extrinsic("SIDE_LEFT").as_matrix()
    np.testing.assert_allclose(side[:3, 2], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(side[:3, 0], [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(side[:3, 1], [0, 0, -1], atol=1e-12)
    np.testing.assert_allclose(side[:3, 3], [1.0, 0.5, 2.0])
    us = [T0_US + d for d in (0, 20_000, 50_000, 100_000, 120_000, 150_000)]
    np.testing.assert_array_equal(scenario.ego.timestamps_ns, np.array(us, dtype=np.int64) * 1000)
    for t_us, t_s in zip(us, (0.0, 0.02, 0.05, 0.1, 0.12, 0.15)):
        got = scenario.ego.pose_at(np.array([t_us * 1000]))[0].as_matrix()
        np.testing.assert_allclose(got, world_T_vehicle(t_s), atol=1e-6)
    assert scenario.metadata["rolling_shutter_direction"] == {"FRONT": "GLOBAL_SHUTTER", "SIDE_LEFT": "GLOBAL_SHUTTER"}


def test_boxes_in_world(segment: Path) -> None:
    from avsim.core.agents import collapse_class
    from avsim.core.transforms import quat_to_yaw

    agents = load_waymo_frames(segment).agents
    assert sorted(set(agents.track_id)) == ["car1", "cyc1", "ped1"]
    car = agents.track("car1")
    np.testing.assert_array_equal(car.timestamps_ns, np.array([T0_US, T0_US + 100_000]) * 1000)
    for k in range(2):  # hand-computed: world = R(30 deg) (x + k, y, z) + ego position at 0.1 k s
        yaw = np.radians(30.0)
        expected = _rot_z(yaw) @ [15.0 + k, 1.0, 1.0] + world_T_vehicle(0.1 * k)[:3, 3]
        np.testing.assert_allclose(car.center_m[k], expected, atol=1e-9)
        np.testing.assert_allclose(quat_to_yaw(car.orientation[k]), yaw + 0.3, atol=1e-9)
        np.testing.assert_allclose(car.size_m[k], [4.0, 2.0, 1.5])
    assert [collapse_class(agents.track(t).source_class[0]) for t in ("car1", "ped1", "cyc1")] == ["Car", "Pedestrian", "Cyclist"]
    assert list(load_waymo_frames(segment).map.road_boundaries.ids) == ["7"]


def test_projected_labels_round_trip(segment: Path) -> None:
    import shutil

    from avsim.scenario.projection_check import check_projection

    source = reference_source(segment)
    try:
        assert {(lb.camera, lb.track_id) for lb in source.labels} >= {("FRONT", "car1"), ("FRONT", "cyc1"), ("SIDE_LEFT", "ped1")}
        assert all(np.all(np.isnan(lb.center_px)) for lb in source.labels)
        assert {t for (_, t) in source.images} == {lb.time_ns for lb in source.labels}
        report = check_projection(source, "synthetic")
        compared = [s for s in report.cameras if s.corners_compared]
        assert {s.camera for s in compared} == {"FRONT", "SIDE_LEFT"}
        assert all(s.corner_max_px < 1.0 and s.missing == 0 for s in report.cameras)
        assert sum(s.corners_compared for s in report.cameras) >= 4
    finally:
        shutil.rmtree(next(iter(source.images.values())).parents[1])


def test_write_camera_images(segment: Path, tmp_path: Path) -> None:
    files = write_camera_images(segment, tmp_path / "real")
    names = [p.relative_to(tmp_path / "real").as_posix() for p in files]
    assert names == sorted(f"{c}/{T0_US + d}.jpg" for c, d in
                           (("FRONT", 20_000), ("FRONT", 120_000), ("SIDE_LEFT", 50_000), ("SIDE_LEFT", 150_000)))  # fmt: skip
    assert files[0].read_bytes() == _jpeg(10)


def _scenario_record() -> bytes:
    scenario_pb2 = pytest.importorskip("waymo_open_dataset.protos.scenario_pb2")
    msg = scenario_pb2.Scenario(scenario_id="abc", timestamps_seconds=[0.0, 0.1])
    return msg.SerializeToString()


def test_hostile_inputs(segment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from avsim.cli import main

    truncated = tmp_path / "truncated.tfrecord"
    truncated.write_bytes(segment.read_bytes()[:-100])
    motion = write_tfrecord(tmp_path / "motion.tfrecord", [_scenario_record()])
    cases = [
        (["--from", "waymo-frame", truncated], "truncated record data"),
        (["--from", "waymo-frame", motion], "not a Waymo perception Frame"),
        (["--from", "waymo", segment], "use --from waymo-frame"),
    ]
    for args, needle in cases:
        capsys.readouterr()
        assert main(["convert", *map(str, args), str(tmp_path / "out")]) == 1
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert not (tmp_path / "out").exists()
    with pytest.raises(AvsimInputError, match="waymo-frame"):
        load_waymo(segment)
    with pytest.raises(AvsimInputError, match="not a Waymo perception Frame TFRecord"):
        reference_source(motion)


def test_convert_cli(segment: Path, tmp_path: Path) -> None:
    from avsim.cli import main
    from avsim.scenario.importers.registry import detect_format
    from avsim.scenario.io import load_scenario

    assert detect_format(segment) == "waymo-frame"
    assert main(["convert", "--from", "waymo-frame", str(segment), str(tmp_path / "a")]) == 0
    assert main(["convert", str(segment), str(tmp_path / "b")]) == 0  # auto-detected
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files and all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    loaded = load_scenario(tmp_path / "a")
    assert loaded.rig.names == ("FRONT", "SIDE_LEFT") and len(loaded.agents.track_id) == 6
    assert len(loaded.map.road_boundaries.ids) == 1 and loaded.metadata["map"] == "1 map_features of the source"
    no_map = write_tfrecord(tmp_path / "nomap.tfrecord", [_frame(k, False).SerializeToString() for k in range(2)])
    assert main(["convert", "--from", "waymo-frame", str(no_map), str(tmp_path / "c")]) == 0
    placeholder = load_scenario(tmp_path / "c").map
    assert list(placeholder.drivable_areas.ids) == ["waymo-frame-placeholder-area"] and not len(placeholder.road_boundaries.ids)


REAL_FRAME = os.environ.get("AVSIM_WAYMO_FRAME", "")


@pytest.mark.skipif(not REAL_FRAME or not Path(REAL_FRAME).is_file(),
                    reason="set AVSIM_WAYMO_FRAME to waymo-open-dataset's utils/testdata/pvps_data_one_frame.tfrecord")  # fmt: skip
def test_real_pvps_frame_projects_within_a_pixel() -> None:
    import shutil

    from avsim.scenario.projection_check import check_projection

    source = reference_source(REAL_FRAME)
    try:
        scenario = source.scenario
        assert scenario.rig.names == ("FRONT", "FRONT_LEFT", "FRONT_RIGHT", "SIDE_LEFT", "SIDE_RIGHT")
        assert len(scenario.agents.track_id) == 75 and len(source.labels) == 62
        report = check_projection(source, "pvps")
        assert sum(s.corners_compared for s in report.cameras) == 45
        assert max(s.corner_max_px for s in report.cameras) < 1.0
    finally:
        shutil.rmtree(next(iter(source.images.values())).parents[1])
