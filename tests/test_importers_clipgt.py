"""`avsim convert --from clipgt`: a clip written by hand from cosmos-transfer2.5's documented schema
(tests/clipgt_handmade.py) converts with the loader's conventions, renders, exports back; bad
tables fail with one line naming the file and field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from clipgt_handmade import CLIP_ID, EGO_POSES, RIG, T0_US, WORLD_ORIGIN, ego_pose, write_handmade_clip
from scipy.interpolate import interp1d
from scipy.spatial.transform import Rotation, Slerp

from avsim.cli import main
from avsim.core.agents import AgentTracks
from avsim.core.cameras import FThetaCamera, PinholeCamera
from avsim.maps.style import OTHER_LANE_STYLE, lane_style
from avsim.scenario.compare import scenario_differences
from avsim.scenario.exporters.clipgt import export_clipgt
from avsim.scenario.exporters.clipgt_view import clipgt_view
from avsim.scenario.importers import clipgt_schema, clipgt_tables
from avsim.scenario.importers.registry import FORMATS, convert, detect_format

# FLU -> OpenCV RDF, as the loader's data_utils.FLU_TO_RDF_MATRIX
S = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    return write_handmade_clip(tmp_path_factory.mktemp("clipgt") / CLIP_ID)


@pytest.fixture(scope="module")
def scenario(clip):
    return convert(clip)


def test_detected_and_registered(clip):
    assert "clipgt" in FORMATS and detect_format(clip) == "clipgt"
    assert detect_format(f"{clip}::{CLIP_ID}") == "clipgt"


def test_cameras_follow_the_loader(scenario):
    rig = scenario.rig
    assert rig.names == ("camera_front_wide_120fov", "camera_cross_left_120fov", "camera_front_tele_30fov", "camera_rear_tele_30fov")
    wide, cross, tele, pinhole = rig.cameras
    assert isinstance(wide, FThetaCamera) and wide.is_backward_poly and wide.poly == (0, 0.000538, 2.356e-09, 1.907e-12, 1.204e-16, 0)
    assert (wide.width_px, wide.height_px, wide.cx_px, wide.cy_px) == (3848, 2168, 1919.42, 1078.106)
    assert isinstance(cross, FThetaCamera) and cross.is_backward_poly and cross.poly[5] == 0.0  # bw-poly, 5 coefficients
    assert isinstance(tele, FThetaCamera) and not tele.is_backward_poly and tele.linear_cde == (1.0005, 0.0002, -0.0001)
    assert pinhole == PinholeCamera(1280, 720, 2000.0, 1990.0, 640.0, 360.0, (-0.05, 0.01, 0.0005, -0.0003, 0.0))
    # extrinsics: the loader's camera_to_vehicle in RDF is S R_flu S^T with R_flu = from_euler("xyz", radians(rpy))
    sensors = {s["name"].replace(":", "_"): s for s in RIG["rig"]["sensors"]}
    for k, name in enumerate(rig.names):
        nominal = sensors[name]["nominalSensor2Rig_FLU"]
        loader_R = S @ Rotation.from_euler("xyz", np.radians(nominal["roll-pitch-yaw"])).as_matrix() @ S.T
        ours = rig.ego_SE3_camera[k]
        np.testing.assert_allclose(S @ ours.rotation, loader_R, atol=1e-12)  # same map camera -> vehicle (RDF)
        np.testing.assert_allclose(ours.translation, nominal["t"])
    np.testing.assert_allclose(rig.extrinsic("camera_cross_left_120fov").rotation[:, 2], [0, 1, 0], atol=1e-12)  # looks left
    np.testing.assert_allclose(rig.extrinsic("camera_rear_tele_30fov").rotation[:, 2], [-np.cos(np.radians(1)), 0, -np.sin(np.radians(1))], atol=1e-12)
    assert scenario.metadata["cameras_skipped"] == {"camera:rear:left:70fov": "no polynomial (the loader reads f-theta cameras only)"}
    assert len(scenario.metadata["camera_corrections_ignored"]) == 4  # the loader reads nominalSensor2Rig_FLU only


def test_ego_poses_kept_in_the_stored_world_frame(scenario):
    ego = scenario.ego
    assert len(ego) == EGO_POSES and ego.timestamps_ns[0] == T0_US * 1000
    p, yaw = ego_pose(1.3)
    np.testing.assert_allclose(ego.positions_m[13], p, atol=1e-9)
    np.testing.assert_allclose(ego.positions_m[0], WORLD_ORIGIN)  # not moved to the origin, as the loader
    np.testing.assert_allclose(ego.world_SE3_ego[13].yaw_rad, yaw, atol=1e-12)


def test_ego_rows_in_any_order(clip, scenario, tmp_path):
    """avsim sorts the egomotion rows by time (NVIDIA's loader takes them in file order and fails on others)."""
    src = _rewrite(clip, tmp_path, "egomotion_estimate", lambda rows, path: rows[::-1])
    assert scenario_differences(convert(src).ego, scenario.ego) == []


def test_poses_resample_as_the_loader(scenario):
    """The loader's 30 Hz frames: t0 + k/30 s, k < int(duration * 30) + 1; interp1d positions, Slerp rotations."""
    t_us = (scenario.ego.timestamps_ns // 1000).astype(np.float64)
    duration = (t_us[-1] - t_us[0]) / 1e6
    n = int(duration * clipgt_schema.LOADER_FPS) + 1
    loader_us = t_us[0] + np.linspace(0, (n - 1) / clipgt_schema.LOADER_FPS, n) * 1e6
    frames_ns = scenario.frame_timestamps(clipgt_schema.LOADER_FPS)
    assert len(frames_ns) == n and np.abs(frames_ns / 1000 - loader_us).max() < 1e-3
    poses = scenario.ego.pose_at(frames_ns)
    loader_p = np.stack([interp1d(t_us, scenario.ego.positions_m[:, i])(loader_us) for i in range(3)], -1)
    loader_R = Slerp(t_us, Rotation.from_matrix(scenario.ego.world_SE3_ego.rotation))(loader_us).as_matrix()
    np.testing.assert_allclose(poses.translation, loader_p, atol=1e-6)
    np.testing.assert_allclose(poses.rotation, loader_R, atol=1e-9)


def test_tracks_selected_and_classed_as_the_loader(scenario):
    a = scenario.agents
    assert list(a.track_ids) == ["101", "102", "105", "106", "107"]  # labelstore:, one-row and NaN tracks dropped
    classes = dict(zip(a.track_id, a.object_class))
    assert classes == {"101": "Car", "102": "Pedestrian", "105": "Others", "106": "Cyclist", "107": "Truck"}
    assert a.track("105").source_class[0] == "Others"  # school_bus: Others in the loader (avsim alone would say Truck)
    assert scenario.metadata["categories_remapped"] == {"school_bus": "Others"}
    person = a.track("102")
    assert len(person) == 6 and person.center_m[2, 0] == pytest.approx(WORLD_ORIGIN[0] + 12.0)  # repeated time: first row
    assert len(a.track("106")) == 4  # the zero quaternion row is dropped
    assert scenario.metadata["tracks_dropped"] == {"labelstore": 1, "short_or_nan": 2}
    assert scenario.metadata["rows_dropped"] == {"repeated_times": 1, "zero_quaternion": 1}


def test_tracks_extrapolate_at_most_the_loaders_half_second(scenario):
    import inspect

    limit_s = inspect.signature(AgentTracks.resample).parameters["max_extrapolation_s"].default
    assert limit_s * 1e6 == clipgt_schema.MAX_EXTRAPOLATION_US
    car = scenario.agents.track("101")
    end = int(car.timestamps_ns[-1])
    kept = car.resample(np.array([end + 400_000_000, end + 500_000_000, end + 600_000_000]))
    assert list(kept.timestamps_ns - end) == [400_000_000, 500_000_000]


def test_map_tables(scenario):
    m = scenario.map
    assert m.element_counts() == {"lane_lines": 3, "lanes": 2, "road_boundaries": 2, "wait_lines": 1, "crosswalks": 1,
                                  "road_markings": 1, "poles": 2, "traffic_signs": 1, "traffic_lights": 2, "drivable_areas": 0}  # fmt: skip
    assert list(m.lane_lines.lane_types()) == ["YELLOW SOLID_GROUP", "WHITE VIRTUAL", "WHITE LONG_DASHED_SINGLE"]
    assert lane_style("WHITE VIRTUAL") == OTHER_LANE_STYLE  # drawn as OTHER, as NVIDIA's ClipGT path draws VIRTUAL
    assert list(m.lane_lines.vertex_style[:4]) == ["SOLID_GROUP"] * 3 + ["DASHED_SINGLE"]
    assert list(m.lane_lines.ids) == ["lane_line_0", "lane_line_1", "lane_line_2"]  # empty map_id: the loader's ids
    np.testing.assert_allclose(m.lanes.centre[0][[0, -1]], WORLD_ORIGIN + [[0, 0, 0], [40, 3, 0]])
    assert scenario.metadata["lane_speed_limits_mps"] == {"0": pytest.approx(25 * 0.44704)}
    np.testing.assert_allclose(m.poles[1], WORLD_ORIGIN + [[30, -7, 0], [30, -7, 3]])  # one point: a 3 m pole
    np.testing.assert_allclose(m.traffic_lights.size_m, [[0.4, 0.4, 1.1], [0.6, 0.6, 1.0]])  # no dimensions: the default
    assert len(scenario.lights) == 0  # the format has no states
    assert scenario.metadata["skipped"] == {"lane_line": 1} and scenario.metadata["unread_tables"] == {"intersection_area": 1}


@pytest.mark.e2e
def test_handmade_clip_renders_through_every_camera(scenario):
    from avsim.render.geometry.scene import SceneRenderer

    renderer = SceneRenderer(scenario, size=(320, 180), antialias=False)
    for name in scenario.rig.names:
        image = renderer.render_camera(5, name)
        assert image.shape == (180, 320, 3) and (image.sum(axis=-1) > 0).mean() > 0.005, name
    front = renderer.render_camera(5, "camera_front_wide_120fov")
    yellow = (front[..., 0] > 200) & (front[..., 1] > 200) & (front[..., 2] < 60)
    assert yellow.sum() > 20  # the yellow double line ahead


def test_handmade_clip_exports_back(scenario, tmp_path):
    export_clipgt(scenario, tmp_path / "back")
    again = convert(tmp_path / "back")
    view = clipgt_view(scenario)
    assert scenario_differences(view.replace(metadata={}), again.replace(metadata={}), atol=1e-9) == []
    assert isinstance(again.rig.camera("camera_rear_tele_30fov"), PinholeCamera)
    assert again.metadata["lane_speed_limits_mps"] == pytest.approx(view.metadata["lane_speed_limits_mps"])


def test_clip_selection(clip, tmp_path):
    two = tmp_path / "two"
    shutil.copytree(clip, two)
    for f in clip.iterdir():
        if ".calibration_estimate." in f.name or ".egomotion_estimate." in f.name:
            shutil.copy(f, two / f.name.replace(CLIP_ID, "other"))
    with pytest.raises(Exception, match="2 clips; select one"):
        convert(two)
    assert convert(f"{two}::other").scenario_id == "other"
    with pytest.raises(Exception, match="no clip 'absent'"):
        convert(f"{two}::absent")


def _rewrite(clip: Path, tmp_path: Path, table: str, edit) -> Path:
    src = tmp_path / "bad" / CLIP_ID
    shutil.copytree(clip, src)
    path = src / f"{CLIP_ID}.{table}.parquet"
    rows = pq.read_table(path).to_pylist()
    result = edit(rows, path)
    if result is not None:
        pq.write_table(pa.Table.from_pylist(result), path)
    return src


def _set(rows, dotted, value, row=0):
    *parents, last = dotted.split(".")
    target = rows[row]
    for p in parents:
        target = target[p]
    target[last] = value
    return rows


BAD = {
    "no ego location": ("egomotion_estimate", lambda r, p: [{**x, "egomotion_estimate": {"name": "e", "orientation": x["egomotion_estimate"]["orientation"]}} for x in r],
                        "egomotion_estimate.location"),
    "repeated ego time": ("egomotion_estimate", lambda r, p: _set(r, "key.timestamp_micros", r[1]["key"]["timestamp_micros"]), "key.timestamp_micros"),
    "NaN ego": ("egomotion_estimate", lambda r, p: _set(r, "egomotion_estimate.location.x", float("nan"), 3), "egomotion_estimate"),
    "rig not JSON": ("calibration_estimate", lambda r, p: _set(r, "calibration_estimate.rig_json", "{rig"), "calibration_estimate.rig_json"),
    "3-term polynomial": ("calibration_estimate", lambda r, p: _set(r, "calibration_estimate.rig_json", json.dumps(
        {"rig": {"sensors": [{**RIG["rig"]["sensors"][0], "properties": {**RIG["rig"]["sensors"][0]["properties"], "polynomial": "0 1e-3 1e-9"}}]}})),
        "rig.sensors[0](camera:front:wide:120fov).polynomial"),
    "time as text": ("obstacle", lambda r, p: [{**x, "key": {**x["key"], "timestamp_micros": str(x["key"]["timestamp_micros"])}} for x in r], "key.timestamp_micros"),
    "not parquet": ("lane_line", lambda r, p: p.write_bytes(b"PAR1 this is not parquet") and None, "file"),
    "zero-norm light": ("traffic_light", lambda r, p: _set(r, "traffic_light.orientation", {"x": 0.0, "y": 0.0, "z": 0.0, "w": 0.0}), "traffic_light[0]"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_bad_tables_fail_with_one_line_naming_file_and_field(clip, tmp_path, capsys, case):
    table, edit, field = BAD[case]
    src = _rewrite(clip, tmp_path, table, edit)
    out = tmp_path / "out"
    assert main(["convert", str(src), str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{CLIP_ID}.{table}.parquet" in err and field in err, err
    assert not out.exists()


def test_tables_are_bounded_before_decoding(clip):
    from avsim.core.safe_parquet import TableLimits

    path = clip / f"{CLIP_ID}.obstacle.parquet"
    with pytest.raises(Exception, match=r"rows: \d+ rows, more than the 10 a table may have"):
        clipgt_tables.read_table(path, limits=TableLimits(10, 1 << 30))
    with pytest.raises(Exception, match="decodes to more than 100 bytes"):
        clipgt_tables.read_table(path, limits=TableLimits(1000, 100))
    with pytest.raises(Exception, match="more than the 100 a table file may have"):
        clipgt_tables.read_table(path, limits=TableLimits(1000, 1 << 30, 100))


@pytest.mark.subprocess
def test_nvidia_loader_and_avsim_read_the_handmade_clip_alike(clip, scenario, tmp_path):
    """NVIDIA's own loader (AVSIM_COSMOS_TRANSFER25) on the same clip: same cameras, poses, tracks, types."""
    from nvidia_loader import PROBE_RAYS, run_nvidia_loader

    got = run_nvidia_loader(clip, PROBE_RAYS, tmp_path)
    fthetas = [n for n, c in zip(scenario.rig.names, scenario.rig.cameras) if c.model == "ftheta"]
    assert sorted(got["extrinsics"]) == sorted(fthetas)  # it skips the hand-written pinhole
    for name in fthetas:
        k = scenario.rig.index(name)
        pose = scenario.rig.ego_SE3_camera[k]
        np.testing.assert_allclose(np.asarray(got["extrinsics"][name])[:3, :3], S @ pose.rotation, atol=1e-6)
        ours, _, _ = scenario.rig.cameras[k].project(PROBE_RAYS)
        np.testing.assert_allclose(np.asarray(got["pixels"][name]), ours, atol=0.05, err_msg=name)
    frames = np.asarray(got["timestamps"], dtype=np.int64) * 1000
    poses = scenario.ego.pose_at(frames)
    ego = np.asarray(got["ego"])
    np.testing.assert_allclose(ego[:, :3, 3], poses.translation @ S.T, atol=2e-4)  # theirs is float32
    np.testing.assert_allclose(ego[:, :3, :3], S @ poses.rotation @ S.T, atol=1e-5)
    assert {k: ("Others" if v == "Other" else v) for k, v in got["classes"].items()} == dict(
        zip(scenario.agents.track_id, scenario.agents.object_class))
    boxes = scenario.agents.resample(np.array([got["boxes_t"] * 1000]))
    assert sorted(got["boxes"]) == sorted(boxes.track_id)
    np.testing.assert_allclose([got["boxes"][t] for t in boxes.track_id], boxes.center_m @ S.T, atol=2e-4)
    assert [lane_style(t) for t in got["lane_lines"]] == [lane_style(t) for t in scenario.map.lane_lines.lane_types()]
    m = scenario.map
    assert got["counts"] == {"lane_boundaries": 2 * len(m.lanes), "road_boundaries": len(m.road_boundaries), "crosswalks": len(m.crosswalks),
                             "poles": len(m.poles), "road_markings": len(m.road_markings), "wait_lines": len(m.wait_lines),
                             "traffic_lights": len(m.traffic_lights), "traffic_signs": len(m.traffic_signs)}  # fmt: skip
