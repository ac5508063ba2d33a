"""`avsim check-projection` on a synthetic mmdet3d v1.1 info (no real data needed) and on the real files."""

from __future__ import annotations

import json
import pickle
import sys
from dataclasses import replace
from pathlib import Path

import mmdet3d_synth as synth
import numpy as np
import pytest

from avsim.cli import main
from avsim.scenario import projection_check as pc

MONO3D = Path("nuscenes-mmdet3d/nus_infos_mono3d.coco.json")


def run(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_synthetic_round_trip_is_exact(tmp_path: Path) -> None:
    source = pc.reference_source(synth.write_info(tmp_path))
    report = pc.check_projection(source, "synthetic")
    (front,) = report.cameras
    assert front.camera == "CAM_FRONT" and front.boxes == 6 and front.missing == 0
    assert front.centres_compared == 6 and front.centre_max_px < 1e-3
    assert front.corners_compared == 5 and front.skipped_clipped == 1 and front.corner_max_px < 1e-3


@pytest.mark.parametrize("legacy", [False, True])
def test_a_tilted_lidar_keeps_the_boxes_upright_in_the_world(tmp_path: Path, legacy: bool) -> None:
    """The lidar rolled and pitched by 2.19 deg (real scene-0061): the converter's yaw-only lidar-frame box is
    the upright world box, so corners project exactly (carried through the tilted pose they missed by 11 px)."""
    source = pc.reference_source(synth.write_info(tmp_path, legacy=legacy, tilted=True))
    if not legacy:
        (front,) = pc.check_projection(source, "synthetic").cameras
        assert front.corners_compared == 5 and front.corner_max_px < 1e-6 and front.centre_max_px < 1e-6
    from avsim.core.transforms import quat_to_matrix

    R = quat_to_matrix(np.asarray(source.scenario.agents.orientation))
    np.testing.assert_allclose(R[:, 2], [[0.0, 0.0, 1.0]] * len(R), atol=1e-12)  # the box z axis is the world's
    world = {(round(float(c[0]), 6), round(float(c[1]), 6)) for c in synth.world_boxes()[0]}
    assert {(round(float(c[0]), 6), round(float(c[1]), 6)) for c in np.asarray(source.scenario.agents.center_m)} == world
    assert sorted(np.round(np.asarray(synth.world_boxes()[1]), 9).tolist()) == sorted(
        set(np.round(np.arctan2(R[:, 1, 0], R[:, 0, 0]), 9).tolist()))


def test_lidar_time_ego_pose_would_be_visibly_wrong(tmp_path: Path) -> None:
    """The camera fires 30 ms before the sample: projecting with the sample's ego pose misses by pixels."""
    source = pc.reference_source(synth.write_info(tmp_path))
    errs = []
    for label in source.labels:
        shifted = replace(label, time_ns=label.time_ns + synth.CAM_DELAY_US * 1000)
        proj = pc.project_label(source.scenario, shifted)
        assert proj is not None
        errs.append(np.linalg.norm(proj.center_px - label.center_px))
    assert min(errs) > 2.0


def test_a_wrong_label_shows_its_error(tmp_path: Path) -> None:
    source = pc.reference_source(synth.write_info(tmp_path))
    bad = [replace(lb, center_px=lb.center_px + [5.0, 0.0], box_px=lb.box_px + [0.0, 3.0, 0.0, 3.0]) for lb in source.labels]
    (front,) = pc.check_projection(replace(source, labels=tuple(bad))).cameras
    assert front.centre_max_px == pytest.approx(5.0, abs=1e-3) and front.centre_median_px == pytest.approx(5.0, abs=1e-3)
    assert front.corner_max_px == pytest.approx(3.0, abs=1e-3)


def test_legacy_info_gives_the_same_world_boxes(tmp_path: Path) -> None:
    v11 = pc.reference_source(synth.write_info(tmp_path / "a")).scenario
    legacy = pc.reference_source(synth.write_info(tmp_path / "b", legacy=True)).scenario
    assert "0.x" in legacy.metadata["box_convention"] and "1.x" in v11.metadata["box_convention"]
    np.testing.assert_allclose(legacy.agents.corners_m(), v11.agents.corners_m(), atol=1e-9)


def test_cli_lines_json_and_overlay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import cv2

    info = synth.write_info(tmp_path / "src")
    rc, out, err = run(["check-projection", info, "--overlay-dir", tmp_path / "ov", "--out", tmp_path / "r.json"], capsys)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("CAM_FRONT: 6 boxes; centre error px max 0.000 median 0.000 (6 compared)")
    assert "corner (bbox) error px max 0.000 median 0.000 (5 compared, 1 skipped" in lines[0]
    assert lines[-1] == f"6 reference labels in {info}"
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["cameras"][0]["camera"] == "CAM_FRONT" and doc["cameras"][0]["centre_max_px"] < 1e-3
    pngs = sorted((tmp_path / "ov").glob("*.png"))
    assert [p.name for p in pngs] == [f"CAM_FRONT_{(synth.T0_US + d - synth.CAM_DELAY_US) * 1000}.png" for d in (0, 500_000)]
    img = cv2.imread(str(pngs[0]))
    assert img.shape == (900, 1600, 3)
    assert np.any((img[:, :, 1] > 150) & (img[:, :, 2] < 100)), "no green box edge drawn"


def test_cli_json_to_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["check-projection", synth.write_info(tmp_path), "--out", "-"], capsys)
    assert rc == 0, err
    assert json.loads(out)["labels"] == 6 and "CAM_FRONT: 6 boxes" in err


def test_cli_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    info = synth.write_info(tmp_path / "src")
    for k in (1, 2):
        assert run(["check-projection", info, "--overlay-dir", tmp_path / f"ov{k}", "--out", tmp_path / f"r{k}.json"], capsys)[0] == 0
    assert (tmp_path / "r1.json").read_bytes() == (tmp_path / "r2.json").read_bytes()
    for a in sorted((tmp_path / "ov1").glob("*.png")):
        assert a.read_bytes() == (tmp_path / "ov2" / a.name).read_bytes()


@pytest.mark.parametrize("case", ["missing", "not_a_source", "bad_pickle"])
def test_cli_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    if case == "missing":
        src = tmp_path / "nope.pkl"
    elif case == "not_a_source":
        src = tmp_path / "x.txt"
        src.write_text("hello")
    else:
        src = tmp_path / "x.pkl"
        src.write_bytes(pickle.dumps({"metainfo": {}, "data_list": [{"timestamp": "soon"}]}))
    rc, out, err = run(["check-projection", src, "--overlay-dir", tmp_path / "ov"], capsys)
    assert rc == 1 and err.startswith("error: ") and err.count("\n") == 1, err
    assert not (tmp_path / "ov").exists()


@pytest.mark.parametrize("as_folder", [False, True], ids=["coco_json", "folder"])
def test_real_mono3d_cli(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], as_folder: bool) -> None:
    """The COCO file, or the folder holding it beside an info .pkl without 2-D labels."""
    src = shared_data / MONO3D
    if not src.exists():
        pytest.skip(f"{src} not found")
    rc, out, err = run(["check-projection", src.parent if as_folder else src, "--overlay-dir", tmp_path / "ov", "--out", tmp_path / "r.json"], capsys)
    assert rc == 0, err
    doc = json.loads((tmp_path / "r.json").read_text())
    cams = {c["camera"]: c for c in doc["cameras"]}
    assert sum(c["boxes"] for c in cams.values()) == 11 and sum(c["skipped_clipped"] for c in cams.values()) == 2
    assert max(c["centre_max_px"] for c in cams.values() if c["centres_compared"]) < 0.5
    assert max(c["corner_max_px"] for c in cams.values() if c["corners_compared"]) < 1.0
    assert cams["CAM_BACK_LEFT"]["boxes"] == 5 and "CAM_BACK_LEFT: 5 boxes" in out
    overlay = tmp_path / "ov" / "CAM_BACK_LEFT_1531883530447423000.png"
    assert overlay.exists()


def test_dispatch_falls_back_to_the_waymo_frame_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A source no mmdet3d reader takes goes to avsim.scenario.importers.waymo_frame.reference_source."""
    import importlib.machinery
    import types

    expected = pc.reference_source(synth.write_info(tmp_path / "src"))
    seen = []
    fake = types.ModuleType(pc.WAYMO_FRAME_MODULE)
    fake.__spec__ = importlib.machinery.ModuleSpec(pc.WAYMO_FRAME_MODULE, None)
    fake.reference_source = lambda path: seen.append(path) or expected  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, pc.WAYMO_FRAME_MODULE, fake)
    frames = tmp_path / "segment.tfrecord"
    frames.write_bytes(b"\0" * 16)
    assert pc.reference_source(frames) is expected and seen == [frames]


def test_rig_capture_offsets_put_the_camera_at_its_capture_time(tmp_path: Path) -> None:
    """frame time + rig.capture_offset_ns = the camera's capture time: the labels land exactly there."""
    source = pc.reference_source(synth.write_info(tmp_path))
    rig = source.scenario.rig
    assert rig.capture_offset_ns.tolist() == [-synth.CAM_DELAY_US * 1000]
    sample_times = {(synth.T0_US + d) * 1000 for d in (0, 500_000)}
    assert {lb.time_ns - int(rig.capture_offset_ns[rig.index(lb.camera)]) for lb in source.labels} == sample_times


@pytest.mark.parametrize(("legacy", "convention"), [(False, "lhw_neg_yaw"), (True, "wlh_pos_yaw")])
def test_synthetic_mono3d_both_conventions(tmp_path: Path, legacy: bool, convention: str) -> None:
    src = tmp_path / "nus_infos_mono3d.coco.json"
    src.write_text(json.dumps(synth.mono3d_doc(legacy)))
    source = pc.reference_source(src)
    assert source.scenario.metadata["box_convention"] == convention
    (front,) = pc.check_projection(source).cameras
    assert front.boxes == 3 and front.centre_max_px < 1e-6
    assert front.corners_compared == 3 and front.corner_max_px < 1e-6
