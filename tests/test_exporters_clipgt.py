"""`avsim export clipgt`: any scenario written as an NVIDIA world-scenario parquet clip.

The round trip (export, then `avsim convert`) gives back `clipgt_view(scenario)` within float
tolerance for the sample, an edit of it and every shared dataset; the view is the same scene
(rigid change of frame: every box and map vertex lands on the same camera pixel); NVIDIA's loader
reads the export (restated here with pyarrow rows, and run itself when a cosmos-transfer2.5
checkout is given in AVSIM_COSMOS_TRANSFER25)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from nvidia_loader import PROBE_RAYS, run_nvidia_loader
from scipy.interpolate import interp1d
from scipy.spatial.transform import Rotation, Slerp

from avsim.cli import main
from avsim.core.rig import named_rig, world_SE3_camera_at
from avsim.scenario.compare import scenario_differences
from avsim.scenario.exporters.clipgt import export_clipgt
from avsim.scenario.exporters.clipgt_view import clipgt_view, to_microseconds
from avsim.scenario.importers.registry import convert
from avsim.scenario.io import load_scenario
from avsim.scenario.sample import make_sample_scenario

S = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])  # FLU -> RDF (the loader's matrix)
ATOL = 1e-9


@pytest.fixture(scope="module")
def sample():
    return make_sample_scenario(seed=0, duration_s=2.0, fps=30.0)


@pytest.fixture(scope="module")
def exported(sample, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "clip"
    export_clipgt(sample, out)
    return out


def _same_as_view(scenario, back) -> list[str]:
    view = clipgt_view(scenario)
    diffs = scenario_differences(view.replace(metadata={}), back.replace(metadata={}), atol=ATOL)
    limits = back.metadata.get("lane_speed_limits_mps", {})
    expected = view.metadata.get("lane_speed_limits_mps", {})
    if limits.keys() != expected.keys() or any(abs(limits[k] - expected[k]) > ATOL for k in limits):
        diffs.append("metadata.lane_speed_limits_mps differ")
    return diffs


def test_sample_round_trips_to_its_view(sample, exported):
    assert sorted(p.name.split(".")[1] for p in exported.iterdir()) == sorted(
        ["calibration_estimate", "egomotion_estimate", "obstacle", "lane", "lane_line", "road_boundary",
         "crosswalk", "pole", "road_marking", "wait_line", "traffic_light", "traffic_sign"])  # fmt: skip
    assert _same_as_view(sample, convert(exported)) == []


def test_view_is_the_same_scene_in_every_camera(sample):
    """A rigid change of frame and microsecond times: every box corner and map vertex on the same pixel."""
    view = clipgt_view(sample)
    frames = sample.frame_timestamps(10.0)[::7]
    lines = sample.map.lane_lines.lines.points_m
    moved_lines = view.map.lane_lines.lines.points_m
    for t in frames:
        t_view = int(to_microseconds(np.array([t]))[0] * 1000)
        boxes, boxes_view = sample.agents.resample(np.array([t])), view.agents.resample(np.array([t_view]))
        common = np.intersect1d(boxes.track_id, boxes_view.track_id)
        assert len(common) == len(boxes.track_id)
        for k, name in enumerate(sample.rig.names):
            cam = sample.rig.cameras[k]
            a = world_SE3_camera_at(sample, sample.rig, int(t), k).inverse()
            b = world_SE3_camera_at(view, view.rig, t_view, k).inverse()
            uv_a, _, in_a = cam.project(a.apply(np.concatenate([boxes.corners_m().reshape(-1, 3), lines])))
            uv_b, _, in_b = cam.project(b.apply(np.concatenate([boxes_view.corners_m().reshape(-1, 3), moved_lines])))
            assert np.array_equal(in_a, in_b) and np.abs(uv_a[in_a] - uv_b[in_b]).max() < 1e-3, name
    np.testing.assert_allclose(view.ego.world_SE3_ego[0].as_matrix(), np.eye(4), atol=1e-12)  # the clip frame


def test_single_observation_tracks_are_kept_for_the_loader(sample, tmp_path):
    """A one-row track gets a copy 1 us later: NVIDIA's loader drops one-row tracks."""
    from avsim.core.agents import AgentTracks

    a = sample.agents
    one = AgentTracks(np.array(["solo"]), np.array(["stroller"]), np.array([int(sample.ego.timestamps_ns[10])]), a.center_m[:1], a.size_m[:1], a.orientation[:1])
    scenario = sample.replace(agents=AgentTracks.concat([a, one]))
    back = convert(export_clipgt(scenario, tmp_path / "clip").folder)
    solo = back.agents.track("solo")
    assert list(np.diff(solo.timestamps_ns)) == [1000] and np.array_equal(solo.center_m[0], solo.center_m[1])
    assert _same_as_view(scenario, back) == []


@pytest.mark.e2e
def test_edit_variant_round_trips(tmp_path, capsys):
    repo = Path(__file__).resolve().parents[1]
    assert main(["sample", str(tmp_path / "s")]) == 0
    assert main(["edit", str(tmp_path / "s"), str(repo / "docs/examples/red_longer.yaml"), str(tmp_path / "v")]) == 0
    variants = sorted(p.parent for p in (tmp_path / "v").glob("*/scenario.json"))
    assert variants
    edited = load_scenario(variants[0])
    assert main(["export", "clipgt", str(variants[0]), str(tmp_path / "clip")]) == 0
    assert _same_as_view(edited, convert(tmp_path / "clip")) == []


def test_cli_rig_option_and_refusals(sample, exported, tmp_path, capsys):
    from avsim.scenario.io import save_scenario

    save_scenario(sample, tmp_path / "s")
    assert main(["export", "clipgt", str(tmp_path / "s"), str(tmp_path / "c"), "--rig", "nuscenes"]) == 0
    err = capsys.readouterr().err
    assert "camera_CAM_BACK: pinhole written as its f-theta equivalent" in err
    assert "--cameras camera_CAM_FRONT,camera_CAM_FRONT_RIGHT," in err and "v1.4.0 or later" in err
    rig = json.loads(pq.read_table(next((tmp_path / "c").glob("*.calibration_estimate.parquet"))).to_pylist()[0]["calibration_estimate"]["rig_json"])
    assert [s["name"] for s in rig["rig"]["sensors"]][:2] == ["camera:CAM:FRONT", "camera:CAM:FRONT:RIGHT"]
    assert main(["export", "clipgt", str(tmp_path / "s"), str(tmp_path / "c")]) == 0  # a ClipGT folder is replaced
    assert main(["export", "clipgt", str(tmp_path / "s"), str(tmp_path / "s")]) == 1  # a scenario folder is not
    assert "not a ClipGT table; refusing to replace it" in capsys.readouterr().err
    assert main(["export", "clipgt", str(tmp_path / "s"), str(tmp_path / "d"), "--rig", "gopro"]) == 2


@pytest.mark.parametrize("rig", ["nuscenes", "waymo", "av2", "cosmos"])
def test_every_rig_reaches_the_loader_as_close_backward_lenses(tmp_path, sample, rig):
    """Pinholes and forward polynomials are written backward; avsim and NVIDIA's loader (its own
    forward fit, restated in clipgt_nvidia) place them within 1 px, most within 0.05 px."""
    written = export_clipgt(sample, tmp_path / "clip", rig_name=rig)
    fw = [n for n, c in zip(clipgt_view(sample, rig).rig.names, named_rig(rig).cameras) if c.model == "ftheta" and not c.is_backward_poly]
    assert sorted(written.refitted) == sorted(n for n in written.nvidia_error_px if n in fw or rig != "cosmos")
    for errors in (written.avsim_error_px, written.nvidia_error_px):
        assert max(errors.values()) < 1.0 and np.median(list(errors.values())) < 0.05, errors
    assert written.nvidia_min_release == "v1.4.0"
    assert (written.nvidia_cameras_option is None) == (rig == "cosmos")
    assert bool(written.nvidia_resized) == (rig in ("av2", "waymo"))  # AV2 4:3 and portrait, Waymo 3:2 and 1920x886


# ---- NVIDIA's loader, restated -----------------------------------------------------------------
def _rows(folder: Path, table: str) -> list[dict]:
    """What pandas hands the loader: one dict per row (struct columns as dicts)."""
    path = next(folder.glob(f"*.{table}.parquet"))
    return pq.read_table(path).to_pylist()


def _loader_cameras(folder: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{camera: (intrinsics as the loader builds them, camera_to_vehicle in RDF)} (clipgt_loader._load_camera_calibrations)."""
    rig = json.loads(_rows(folder, "calibration_estimate")[0]["calibration_estimate"]["rig_json"])
    out = {}
    for sensor in rig["rig"]["sensors"]:
        if not sensor["name"].startswith("camera:"):
            continue
        p = sensor["properties"]
        poly = np.array([float(x) for x in p["polynomial"].split()], dtype=np.float32)
        is_bw = p["polynomial-type"] == "pixeldistance-to-angle"
        intr = np.array([float(p["cx"]), float(p["cy"]), int(p["width"]), int(p["height"]), *poly, is_bw,
                         float(p.get("linear-c", 1.0)), float(p.get("linear-d", 0.0)), float(p.get("linear-e", 0.0))])
        T = np.eye(4)
        T[:3, :3] = S @ Rotation.from_euler("xyz", np.radians(sensor["nominalSensor2Rig_FLU"]["roll-pitch-yaw"])).as_matrix() @ S.T
        T[:3, 3] = S @ np.asarray(sensor["nominalSensor2Rig_FLU"]["t"])
        out[sensor["name"].replace(":", "_")] = (intr, T)
    return out


def _loader_ego(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """Frame times (us) and ego poses (RDF 4x4) at the loader's 30 fps (clipgt_loader._load_ego_poses)."""
    rows = _rows(folder, "egomotion_estimate")
    t = np.array([r["key"]["timestamp_micros"] for r in rows], dtype=np.float64)
    pos = np.array([[r["egomotion_estimate"]["location"][k] for k in "xyz"] for r in rows])
    quat = np.array([[r["egomotion_estimate"]["orientation"][k] for k in "xyzw"] for r in rows])
    n = int((t[-1] - t[0]) / 1e6 * 30) + 1
    frames = t[0] + np.linspace(0, (n - 1) / 30, n) * 1e6
    p = np.stack([interp1d(t, pos[:, i])(frames) for i in range(3)], -1)
    R = Slerp(t, Rotation.from_quat(quat))(frames).as_matrix()
    poses = np.tile(np.eye(4), (n, 1, 1))
    poses[:, :3, :3], poses[:, :3, 3] = S @ R @ S.T, p @ S.T
    return frames.astype(np.int64), poses


def _loader_boxes(folder: Path, t_us: int) -> dict[str, np.ndarray]:
    """{track: box centre (RDF world)} at one time (clipgt_loader._load_dynamic_objects + DynamicObject.get_pose_at_timestamp)."""
    tracks = defaultdict(list)
    for r in _rows(folder, "obstacle"):
        if not r["obstacle"]["trackline_id"].startswith("labelstore:"):
            tracks[r["obstacle"]["trackline_id"]].append((r["key"]["timestamp_micros"], [r["obstacle"]["center"][k] for k in "xyz"]))
    out = {}
    for tid, obs in tracks.items():
        obs.sort(key=lambda o: o[0])
        ts, c = np.array([o[0] for o in obs]), np.array([o[1] for o in obs])
        if len(ts) < 2 or t_us < ts[0] - 500_000 or t_us > ts[-1] + 500_000:
            continue
        i = min(max(int(np.searchsorted(ts, t_us)), 1), len(ts) - 1)
        alpha = (t_us - ts[i - 1]) / (ts[i] - ts[i - 1])
        out[tid] = S @ ((1 - alpha) * c[i - 1] + alpha * c[i])
    return out


def test_nvidia_loader_restated_sees_the_same_scene(sample, exported):
    """Each box centre in each camera, as the loader computes it from our export, equals avsim's."""
    cameras, (frames_us, ego_rdf) = _loader_cameras(exported), _loader_ego(exported)
    assert list(cameras) == list(sample.rig.names) and len(frames_us) == len(sample.frame_timestamps(30.0))
    for k, name in enumerate(sample.rig.names):
        intr = cameras[name][0]
        cam = clipgt_view(sample).rig.cameras[k]  # forward polynomials are written as their backward refit
        assert cam.is_backward_poly
        np.testing.assert_allclose(intr[4:10], np.float32(cam.poly), rtol=1e-6)
        assert tuple(intr[:4]) == (cam.cx_px, cam.cy_px, cam.width_px, cam.height_px) and bool(intr[10]) == cam.is_backward_poly
    t0 = int(sample.ego.timestamps_ns[0])
    for i in (0, 37, len(frames_us) - 1):
        t_ns = t0 + (int(frames_us[i]) - int(frames_us[0])) * 1000
        ours = sample.agents.resample(np.array([t_ns]))
        theirs = _loader_boxes(exported, int(frames_us[i]))
        assert sorted(theirs) == sorted(ours.track_id)
        for k, name in enumerate(sample.rig.names):
            world_to_cam = np.linalg.inv(ego_rdf[i] @ cameras[name][1])
            ours_cam = world_SE3_camera_at(sample, sample.rig, t_ns, k).inverse().apply(ours.center_m)
            theirs_cam = np.array([world_to_cam[:3, :3] @ theirs[tid] + world_to_cam[:3, 3] for tid in ours.track_id])
            np.testing.assert_allclose(theirs_cam, ours_cam, atol=2e-3, err_msg=name)


def test_nvidia_loader_restated_reads_lane_line_types(sample, exported):
    """The loader's most frequent (colour, style) pair per line is avsim's drawn type."""
    types = []
    for r in _rows(exported, "lane_line"):
        c, s = Counter(zip(r["lane_line"]["colors"], r["lane_line"]["styles"])).most_common(1)[0][0]
        types.append(f"{c} {s}")
    assert types == list(sample.map.lane_lines.lane_types())


# ---- NVIDIA's loader itself (a cosmos-transfer2.5 checkout or git dir in AVSIM_COSMOS_TRANSFER25) -------
@pytest.mark.subprocess
def test_nvidia_loader_reads_the_export(sample, exported, tmp_path):
    got = run_nvidia_loader(exported, PROBE_RAYS, tmp_path)
    view = clipgt_view(sample)
    frames = np.asarray(got["timestamps"], dtype=np.int64) * 1000  # the loader's 30 fps frames (truncated to us)
    assert len(frames) == len(view.frame_timestamps(30.0))
    assert np.abs(frames - view.frame_timestamps(30.0)).max() <= 1000  # int() of float microseconds
    for k, name in enumerate(view.rig.names):  # cameras: mounting and projection
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = S @ view.rig.ego_SE3_camera[k].rotation, S @ view.rig.ego_SE3_camera[k].translation
        np.testing.assert_allclose(np.asarray(got["extrinsics"][name]), T, atol=1e-6)
        ours, _, _ = view.rig.cameras[k].project(PROBE_RAYS)
        np.testing.assert_allclose(np.asarray(got["pixels"][name]), ours, atol=0.05, err_msg=name)
    ego = np.asarray(got["ego"])  # RDF world: S pose S^T
    poses = view.ego.pose_at(frames)
    np.testing.assert_allclose(ego[:, :3, 3], poses.translation @ S.T, atol=1e-3)
    np.testing.assert_allclose(ego[:, :3, :3], S @ poses.rotation @ S.T, atol=1e-5)
    t_ns = got["boxes_t"] * 1000
    ours = view.agents.resample(np.array([t_ns]))
    assert sorted(got["boxes"]) == sorted(ours.track_id)
    theirs = np.array([got["boxes"][tid] for tid in ours.track_id])
    np.testing.assert_allclose(theirs, ours.center_m @ S.T, atol=1e-3)
    assert got["lane_lines"] == list(view.map.lane_lines.lane_types())
    m = view.map
    assert got["counts"] == {"lane_boundaries": 2 * len(m.lanes), "road_boundaries": len(m.road_boundaries), "crosswalks": len(m.crosswalks),
                             "poles": len(m.poles), "road_markings": len(m.road_markings), "wait_lines": len(m.wait_lines),
                             "traffic_lights": len(m.traffic_lights), "traffic_signs": len(m.traffic_signs)}  # fmt: skip


# ---- every shared dataset -----------------------------------------------------------------------
SHARED = [
    *(f"scenarionet/sd_nuscenes_v1.0-mini_scene-{n}.pkl" for n in ("0103", "0553", "0655", "0757", "0796", "0916", "1077")),
    "scenarionet/sd_waymo_v1.2_eb4b91b10ca94ff2.pkl", "waymo/motion_data_one_scenario.tfrecord",
    "av2/sensor/adcf7d18-0510-35b0-a2fa-b4cea13a6d76", "av2/forecasting/0a1e6f0a-1817-4a98-b02e-db8c9327d151",
    "rdshq-example/assets/example", "nuscenes-mmdet3d/nus_info.pkl", "nuscenes-dataroot",
]  # fmt: skip


@pytest.mark.realdata
@pytest.mark.parametrize("rel", SHARED)
def test_every_shared_dataset_exports_and_converts_back(shared_data, tmp_path, rel):
    """`avsim convert` the dataset, `avsim export clipgt`, `avsim convert` the clip: the view comes back."""
    if rel.startswith("waymo/"):
        pytest.importorskip("waymo_open_dataset.protos.scenario_pb2", reason="the `waymo` extra is not installed")
    src = shared_data / rel
    if rel == "nuscenes-dataroot":  # the nuScenes importer's real-calibration dataroot (tests/test_importers_nuscenes.py)
        from test_importers_nuscenes import write_nuscenes_fixture

        src = tmp_path / "nuscenes"
        write_nuscenes_fixture(shared_data / "nuscenes-mmdet3d" / "nus_info.pkl", src)
    assert main(["convert", str(src), str(tmp_path / "scenario")]) == 0
    assert main(["export", "clipgt", str(tmp_path / "scenario"), str(tmp_path / "clip")]) == 0
    original = load_scenario(tmp_path / "scenario")
    if rel.startswith("nuscenes-mmdet3d"):  # no map: its placeholder drivable area has no table, and
        assert original.map.drivable_areas.ids.tolist() == ["mmdet3d-placeholder-area"]  # `avsim convert`
        back = convert(tmp_path / "clip")  # refuses a scenario without map elements, so read it directly
        assert back.map.is_empty()
    else:
        assert main(["convert", str(tmp_path / "clip"), str(tmp_path / "back"), "--from", "clipgt"]) == 0
        back = load_scenario(tmp_path / "back")
    assert _same_as_view(original, back) == []
    assert len(back.agents.track_ids) == len(original.agents.track_ids)
