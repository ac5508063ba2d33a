"""RDS-HQ importer.

The real partial clip (../shared/data/rdshq-example/assets/example) exercises map, intrinsics and
rig-pose parsing. Its missing parts (per-camera poses, all_object_info, traffic-light cuboids
and states) are tested on small tars this test writes in the same webdataset layout.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from avsim.core.errors import AvsimInputError
from avsim.core.rig import cosmos_rig
from avsim.core.transforms import SE3, yaw_to_matrix
from avsim.scenario.importers.registry import convert, detect_format

CLIP = "2d23a1f4-c269-46aa-8e7d-1bb595d1e421_2445376400000_2445396400000"
START_NS = 2445376400000 * 1000


def _example(shared_data: Path) -> Path:
    return shared_data / "rdshq-example" / "assets" / "example"


def _write_tar(path: Path, members: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _cuboid_corners(center, size, yaw) -> list[list[float]]:
    signs = np.array([[1, 1, 1], [1, -1, 1], [-1, -1, 1], [-1, 1, 1], [1, 1, -1], [1, -1, -1], [-1, -1, -1], [-1, 1, -1]])
    return (np.asarray(center) + (signs * np.asarray(size) / 2) @ yaw_to_matrix(yaw).T).tolist()


def _light_label(feature_id: str, center, size, yaw) -> dict:
    return {"labelFamily": "SHAPE3D", "labelId": f"mads:{feature_id}", "labelData": {"shape3d": {
        "cuboid3d": {"vertices": _cuboid_corners(center, size, yaw)}, "unit": "METRIC",
        "attributes": [{"name": "feature_id", "text": feature_id}, {"name": "label_name", "enum": "traffic_light"}]}}}  # fmt: skip


@pytest.fixture(scope="module")
def real_clip(shared_data):
    return convert(_example(shared_data), "rdshq")


def test_real_partial_clip_map_intrinsics_rig_poses(real_clip, shared_data):
    sc = real_clip
    assert detect_format(_example(shared_data)) == "rdshq"
    assert sc.scenario_id == CLIP
    # rig (vehicle) poses: 300 frames at 30 Hz; the world frame is the first rig frame
    assert len(sc.ego.timestamps_ns) == 300 and sc.ego.timestamps_ns[0] == START_NS
    assert sc.ego.rate_hz == pytest.approx(30.0, rel=1e-6)
    np.testing.assert_allclose(sc.ego.world_SE3_ego[0].as_matrix(), np.eye(4), atol=1e-6)
    assert sc.ego.world_SE3_ego.translation[-1, 0] == pytest.approx(102.79, abs=0.01)
    # f-theta intrinsics of the 7 cameras (model order), fields of view 120 / 70 / 30 deg
    assert sc.rig.names == tuple(cosmos_rig().names)
    fov = {n: np.degrees(c.horizontal_fov_rad) for n, c in zip(sc.rig.names, sc.rig.cameras)}
    assert fov["camera_front_wide_120fov"] == pytest.approx(120, abs=2) and fov["camera_rear_tele_30fov"] == pytest.approx(30, abs=1)
    assert all(c.width_px == 1920 and c.height_px == 1080 for c in sc.rig.cameras)
    assert sc.metadata["pinhole_intrinsics"]["camera_front_wide_120fov"][0] == pytest.approx(945.5493, abs=1e-3)
    assert sc.metadata["camera_extrinsics"].startswith("cosmos_rig default")
    assert sc.metadata["missing_fields"] == ["3d_traffic_lights_status", "all_object_info", "pose"]
    # map: every element type of the clip, lane lines typed from per-vertex colours/styles
    counts = sc.map.element_counts()
    assert counts == {"lane_lines": 85, "lanes": 344, "road_boundaries": 93, "wait_lines": 34, "crosswalks": 1,
                      "road_markings": 6, "poles": 28, "traffic_signs": 29, "traffic_lights": 0, "drivable_areas": 0}  # fmt: skip
    types = Counter(sc.map.lane_lines.lane_types())
    assert types["WHITE LONG_DASHED_SINGLE"] == 37 and types["YELLOW SOLID_GROUP"] == 9 and types["WHITE SHORT_DASHED_SINGLE"] == 5
    signs = sc.map.traffic_signs
    assert np.all(signs.size_m[:, 1] > 0.3) and np.all(signs.size_m[:, 0] < 0.1)  # thin plates facing along x
    assert len(sc.agents) == 0 and len(sc.lights) == 0


@pytest.fixture(scope="module")
def full_clip_root(shared_data, tmp_path_factory) -> tuple[Path, dict[str, SE3]]:
    """The real clip plus tars, in the same layout, for the parts the example lacks."""
    root = tmp_path_factory.mktemp("rdshq")
    for folder in _example(shared_data).iterdir():
        if folder.is_dir():
            shutil.copytree(folder, root / folder.name)
    vp = convert(_example(shared_data), "rdshq").ego.world_SE3_ego
    default = cosmos_rig()
    extr = {n: SE3(yaw_to_matrix(0.02 * k) @ default.extrinsic(n).rotation, default.extrinsic(n).translation + [0.1, 0.0, 0.05 * k])
            for k, n in enumerate(default.names)}  # fmt: skip
    members = {}
    for f in range(0, 300, 10):
        for n, e in extr.items():
            members[f"{CLIP}.{f:06d}.pose.{n}.npy"] = _npy(vp[f].compose(e).as_matrix().astype(np.float32))
    _write_tar(root / "pose" / f"{CLIP}.tar", members)
    objects = {}
    for f in range(0, 31, 3):
        car = np.eye(4)
        car[:3, :3] = yaw_to_matrix(0.1)
        car[:3, 3] = [10.0 + 0.5 * f, 3.0, 0.8]
        ped = np.eye(4)
        ped[:3, 3] = [20.0, -5.0, 0.9]
        frame = {"7": {"object_to_world": car.tolist(), "object_lwh": [4.5, 1.9, 1.6], "object_is_moving": True, "object_type": "Automobile"}}
        if f <= 15:
            frame["12"] = {"object_to_world": ped.tolist(), "object_lwh": [0.6, 0.6, 1.8], "object_is_moving": False, "object_type": "Person"}
        objects[f"{CLIP}.{f:06d}.all_object_info.json"] = json.dumps(frame).encode()
    _write_tar(root / "all_object_info" / f"{CLIP}.tar", objects)
    lights = {"labels": [_light_label("5001", [30, 8, 5], [0.3, 0.4, 1.0], 0.3), _light_label("5002", [30, -8, 5], [0.3, 0.4, 1.0], -2.8)]}
    _write_tar(root / "3d_traffic_lights" / f"{CLIP}.tar", {f"{CLIP}.traffic_lights.json": json.dumps(lights).encode()})
    states = {"traffic_light_states": {
        "a": {"feature_id": "5001", "state": ["red"] * 100 + ["GREEN"] * 150 + ["yellow"] * 50},
        "b": {"feature_id": "5002", "state": ["unknown"] * 300}}}  # fmt: skip
    _write_tar(root / "3d_traffic_lights_status" / f"{CLIP}.tar", {f"{CLIP}.aggregated_states.json": json.dumps(states).encode()})
    return root, extr


@pytest.mark.slow
def test_full_clip_camera_poses_objects_and_light_states(full_clip_root):
    root, extr = full_clip_root
    sc = convert(f"{root}::{CLIP}", "rdshq")
    assert sc.metadata["missing_fields"] == [] and sc.metadata["camera_extrinsics"].startswith("pose/")
    for n, e in extr.items():  # ego_SE3_camera recovered from world poses (float32 tars)
        np.testing.assert_allclose(sc.rig.extrinsic(n).as_matrix(), e.as_matrix(), atol=2e-4)
        assert sc.metadata["camera_extrinsics_spread_m"][n] < 1e-3
    a = sc.agents
    assert len(a) == 11 + 6 and a.track_ids.tolist() == ["12", "7"]
    car = a.track("7")
    assert car.timestamps_ns[1] - car.timestamps_ns[0] == 100_000_000  # every 3rd 30 Hz frame = 10 Hz
    np.testing.assert_allclose(car.center_m[0], [10.0, 3.0, 0.8])
    np.testing.assert_allclose(car.yaw_rad, 0.1, atol=1e-9)
    assert set(zip(a.source_class, a.object_class)) == {("Automobile", "Car"), ("Person", "Pedestrian")}
    tl = sc.map.traffic_lights
    assert tl.ids.tolist() == ["5001", "5002"]
    np.testing.assert_allclose(tl.center_m[0], [30, 8, 5], atol=1e-9)
    np.testing.assert_allclose(tl.size_m[0], [0.3, 0.4, 1.0], atol=1e-9)
    L = sc.lights
    assert L.light_id.tolist() == ["5001"] * 3 + ["5002"]
    assert L.state.tolist() == ["red", "green", "yellow", "unknown"]
    assert (L.timestamps_ns[:3] - START_NS).tolist() == [0, round(100 * 1e9 / 30), round(250 * 1e9 / 30)]
    assert L.state_at(np.array(["5001"]), START_NS + 5 * 10**9).tolist() == ["green"]


@pytest.mark.slow
def test_full_clip_round_trip(full_clip_root, tmp_path):
    from avsim.scenario.io import load_scenario, save_scenario, scenario_differences

    root, _ = full_clip_root
    sc = convert(root, "rdshq")
    save_scenario(sc, tmp_path / "out")
    assert scenario_differences(sc, load_scenario(tmp_path / "out")) == []


@pytest.mark.slow
def test_traversal_member_in_a_clip_tar_is_refused(full_clip_root, tmp_path):
    root, _ = full_clip_root
    bad = tmp_path / "bad"
    shutil.copytree(root, bad)
    _write_tar(bad / "3d_poles" / f"{CLIP}.tar", {f"{CLIP}.poles.json": b'{"labels": []}', "../x": b"escape"})
    out = tmp_path / "converted"
    with pytest.raises(AvsimInputError) as err:
        convert(bad, "rdshq")
    assert "3d_poles" in str(err.value) and "'../x'" in str(err.value) and "path traversal" in str(err.value)
    assert not (bad / "x").exists() and not (bad / "3d_poles" / ".." / "x").exists() and not out.exists()


@pytest.mark.slow
def test_bad_rdshq_values(full_clip_root, tmp_path):
    root, _ = full_clip_root
    bad = tmp_path / "bad"
    shutil.copytree(root, bad)
    pose = np.full((4, 4), np.nan, dtype=np.float32)
    members = {}
    with tarfile.open(root / "vehicle_pose" / f"{CLIP}.tar") as tar:
        for info in tar:
            members[info.name] = tar.extractfile(info).read()
    members[f"{CLIP}.000005.vehicle_pose.npy"] = _npy(pose)
    _write_tar(bad / "vehicle_pose" / f"{CLIP}.tar", members)
    with pytest.raises(AvsimInputError, match="000005.vehicle_pose: contains NaN"):
        convert(bad, "rdshq")
    _write_tar(bad / "vehicle_pose" / f"{CLIP}.tar", {k: v for k, v in members.items() if ".000005." not in k})
    states = {"traffic_light_states": {"a": {"feature_id": "5001", "state": ["purple"]}}}
    _write_tar(bad / "3d_traffic_lights_status" / f"{CLIP}.tar", {f"{CLIP}.aggregated_states.json": json.dumps(states).encode()})
    with pytest.raises(AvsimInputError, match="unknown state 'purple'"):
        convert(bad, "rdshq")
