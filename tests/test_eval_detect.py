"""`avsim eval detect`: a detector callable run over labelled clips, writing what `eval let`,
`eval lanes` and `eval report` read; the labels oracle as the upper bound."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from avsim.cli import main
from avsim.evaluation.detect import Detections, FrameBatch, load_detector
from avsim.evaluation.jobs import run_lanes, run_let

CAMS = "camera_front_wide_120fov,camera_cross_right_120fov"
SEEN: list[FrameBatch] = []


def recording_detector(batch: FrameBatch) -> Detections:
    """A detector that finds nothing and keeps what it was given (module:callable for the CLI)."""
    SEEN.append(batch)
    return Detections()


def wrong_detector(batch: FrameBatch) -> dict:
    return {}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("detect")
    assert main(["sample", str(root / "s"), "--duration-s", "1"]) == 0
    assert main(["render", str(root / "s"), str(root / "r"), "--labels", "--frames", "3", "--fps", "10", "--size", "320x180",
                 "--cameras", CAMS]) == 0  # fmt: skip
    return root


@pytest.mark.e2e
def test_oracle_gives_the_upper_bound_and_the_report_runs_in_two_commands(rendered: Path, capsys) -> None:
    out = rendered / "det"
    assert main(["eval", "detect", str(rendered / "r"), str(out), "--detector", "avsim.evaluation.detectors:LabelsOracle",
                 "--generated", str(rendered / "r")]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "next: avsim eval report --real" in printed
    real = out / "real"
    for f in ("detections.parquet", "lanes.parquet", "gt/boxes.parquet", "gt/lanes.parquet", "detect.json"):
        assert (real / f).is_file(), f
    views = sorted(p.name for p in (real / "videos" / "avsim_sample_seed0").iterdir())
    assert views == ["calibration.json", "camera_cross_right_120fov.mp4", "camera_front_wide_120fov.mp4"]
    let = run_let(real / "gt" / "boxes.parquet", real / "detections.parquet").document
    assert let["mean_over_classes_with_gt"]["ap"] == pytest.approx(1.0) and let["headline"]["apl"] > 0.3
    assert run_lanes(real / "gt" / "lanes.parquet", real / "lanes.parquet").document["f_score"] == pytest.approx(1.0)
    # the second command: the report, from exactly these files
    assert main(["eval", "report", "--real", str(real), "--generated", str(out / "generated"), "--gt", str(real / "gt"),
                 "--out", str(out / "report"), "--no-video-metrics", "--n-resamples", "20"]) == 0  # fmt: skip
    rep = json.loads((out / "report" / "report.json").read_text())
    assert rep["detection"]["intervals"]["waymo_mean/ap/gap"]["estimate"] == pytest.approx(0.0)
    assert rep["lanes"]["intervals"]["f_score/real"]["estimate"] == pytest.approx(1.0)


@pytest.mark.e2e
def test_detector_gets_all_views_with_calibration(rendered: Path, capsys) -> None:
    SEEN.clear()
    assert main(["eval", "detect", str(rendered / "r"), str(rendered / "rec"), "--detector",
                 "test_eval_detect:recording_detector"]) == 0  # fmt: skip
    assert [b.frame_index for b in SEEN] == [0, 1, 2]
    b = SEEN[0]
    assert b.cameras == tuple(CAMS.split(",")) and b.stacked_images().shape == (2, 180, 320, 3) and b.images[0].dtype == np.uint8
    assert b.image_sizes_px == ((320, 180), (320, 180)) and b.lane_camera == "camera_front_wide_120fov"
    front = b.calibration[0]
    assert front.camera["model"] == "ftheta" and front.camera["width_px"] == 320
    R = front.ego_SE3_camera[:3, :3]
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-9)
    assert R[0, 2] > 0.99 and R[1, 0] < -0.99  # camera z (forward) along ego x, camera x (right) along -ego y
    assert b.world_SE3_ego.shape == (4, 4)
    # a detector returning something else is a one-line error naming it
    assert main(["eval", "detect", str(rendered / "r"), str(rendered / "bad"), "--detector", "test_eval_detect:wrong_detector"]) == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error")]  # (the progress bar is above)
    assert len(err) == 1 and "--detector: test_eval_detect:wrong_detector: returned dict, expected" in err[0]
    assert not (rendered / "bad" / "detections.parquet").exists()
    # two clip folders of one scenario: refused before anything is written (their frame keys would collide)
    for copy in ("a", "b"):
        shutil.copytree(rendered / "r" / "avsim_sample_seed0", rendered / "dup" / copy)
    assert main(["eval", "detect", str(rendered / "dup"), str(rendered / "dup_out"), "--detector", "test_eval_detect:recording_detector"]) == 1
    err = capsys.readouterr().err
    assert "clip 'avsim_sample_seed0' is also" in err and "frame keys would collide" in err
    assert not (rendered / "dup_out" / "detections.parquet").exists()


def test_detections_are_validated_and_detectors_named() -> None:
    d = Detections(np.zeros((1, 7)) + [10, 0, 1, 4, 2, 1.5, 0], ("vehicle",), [0.5], (np.zeros((3, 3)),), (2,))
    assert d.labels[0].value == "vehicle" and d.lane_categories == (2,)
    with pytest.raises(Exception, match="unknown class 'car'"):
        Detections(np.zeros((1, 7)), ("car",), [0.5])
    with pytest.raises(Exception, match="1 boxes, 1 labels, 2 scores"):
        Detections(np.zeros((1, 7)), ("vehicle",), [0.5, 0.1])
    with pytest.raises(Exception, match=r"box sizes \(length, width, height\) must be > 0"):  # as `eval let`'s tables
        Detections(np.zeros((1, 7)) + [10, 0, 1, 4, 0, 1.5, 0], ("vehicle",), [0.5])
    with pytest.raises(Exception, match="expected MODULE:CALLABLE"):
        load_detector("nocolon")
    assert callable(load_detector("avsim.evaluation.detectors:LabelsOracle"))


def every_labelled_box(batch: FrameBatch) -> Detections:
    """The clip's labelled boxes wherever they are (what the oracle returned before issue 53), as a detector."""
    from avsim.evaluation.detect import GtVisibility, clip_ground_truth, frame_key

    truth = clip_ground_truth(batch.clip_dir, batch.cameras, GtVisibility.ALL)
    sel = truth.boxes.frame == frame_key(batch.clip, batch.sample_token)
    return Detections(truth.boxes.boxes[sel], tuple(truth.boxes.label[sel].tolist()), np.ones(int(sel.sum())))


@pytest.mark.e2e
def test_ground_truth_is_what_the_evaluated_cameras_show(rendered: Path, capsys) -> None:
    """--cameras and --gt-visibility: the boxes no evaluated camera shows are counted, not scored; the oracle (what the
    cameras show) scores 1 and a detector returning every labelled box pays for the ones it cannot see."""
    out, front = rendered / "gtvis", "camera_front_wide_120fov"
    docs = {}
    for rule in ("visible", "in-view", "all"):
        assert main(["eval", "detect", str(rendered / "r"), str(out / rule), "--detector", "avsim.evaluation.detectors:LabelsOracle",
                     "--cameras", front, "--gt-visibility", rule]) == 0  # fmt: skip
        docs[rule] = json.loads((out / rule / "detect.json").read_text())
    assert f"cameras {front}; " in capsys.readouterr().out
    clip = docs["visible"]["clips"][0]
    assert clip["cameras"] == [front] and clip["lane_camera"] == front and clip["gt_visibility"] == "visible"
    assert len(clip["instants"]) == 3 and clip["instants"] == [str(t) for t in (0, 100_000_000, 200_000_000)]
    labelled = docs["all"]["gt_boxes"]
    assert docs["all"]["gt_boxes_unseen"] == 0 and docs["visible"]["gt_boxes"] + docs["visible"]["gt_boxes_unseen"] == labelled
    assert 0 < docs["visible"]["gt_boxes"] <= docs["in-view"]["gt_boxes"] < labelled and docs["visible"]["gt_boxes_unseen"] > 0
    oracle = run_let(out / "visible" / "gt" / "boxes.parquet", out / "visible" / "detections.parquet").document
    assert oracle["mean_over_classes_with_gt"]["ap"] == pytest.approx(1.0)
    assert main(["eval", "detect", str(rendered / "r"), str(out / "blind"), "--detector", "test_eval_detect:every_labelled_box",
                 "--cameras", front]) == 0  # fmt: skip
    blind = run_let(out / "blind" / "gt" / "boxes.parquet", out / "blind" / "detections.parquet").document
    assert blind["mean_over_classes_with_gt"]["ap"] < 0.9  # its unseen boxes are false positives against what the camera shows
    assert main(["eval", "detect", str(rendered / "r"), str(out / "bad"), "--detector", "test_eval_detect:recording_detector",
                 "--cameras", "camera_rear_tele_30fov"]) == 1  # fmt: skip
    assert "no camera 'camera_rear_tele_30fov' (--cameras" in capsys.readouterr().err


@pytest.mark.e2e
def test_generated_clips_are_compared_on_the_cameras_both_sides_have(rendered: Path) -> None:
    front = "camera_front_wide_120fov"
    assert main(["render", str(rendered / "s"), str(rendered / "gen1"), "--labels", "--frames", "3", "--fps", "10", "--size", "320x180",
                 "--cameras", front]) == 0  # fmt: skip
    out = rendered / "pair"
    assert main(["eval", "detect", str(rendered / "r"), str(out), "--generated", str(rendered / "gen1"), "--detector",
                 "avsim.evaluation.detectors:LabelsOracle"]) == 0  # fmt: skip
    for side in ("real", "generated"):
        doc = json.loads((out / side / "detect.json").read_text())
        assert [c["cameras"] for c in doc["clips"]] == [[front]], side
        assert sorted(p.name for p in (out / side / "videos" / "avsim_sample_seed0").iterdir()) == ["calibration.json", f"{front}.mp4"]


@pytest.mark.e2e
def test_cameras_of_different_sizes(tmp_path: Path) -> None:
    """The AV2 rig keeps each camera's aspect (its front centre camera is portrait): each image at its own size, the
    calibration at that size, and the oracle's upper bound."""
    from avsim.evaluation.calibration import load_calibration_json

    assert main(["sample", str(tmp_path / "s"), "--duration-s", "1"]) == 0
    assert main(["render", str(tmp_path / "s"), str(tmp_path / "r"), "--labels", "--rig", "av2", "--frames", "2", "--fps", "10",
                 "--size", "x180"]) == 0  # fmt: skip
    SEEN.clear()
    assert main(["eval", "detect", str(tmp_path / "r"), str(tmp_path / "rec"), "--detector", "test_eval_detect:recording_detector"]) == 0
    b = SEEN[0]
    sizes = dict(zip(b.cameras, b.image_sizes_px))
    assert sizes["ring_front_center"] == (136, 180) and sizes["ring_front_left"] == (238, 180) and len(set(sizes.values())) == 2
    assert all(c.camera["width_px"] == im.shape[1] and c.camera["height_px"] == im.shape[0] for c, im in zip(b.calibration, b.images))
    assert b.lane_camera == "ring_front_center"
    with pytest.raises(Exception, match="the cameras differ in size"):
        b.stacked_images()
    cal = load_calibration_json(tmp_path / "rec" / "videos" / "avsim_sample_seed0" / "calibration.json")
    assert (cal.cameras["ring_front_center"].width_px, cal.cameras["ring_front_center"].height_px) == (136, 180)
    assert cal.world_SE3_ego is not None and len(cal.world_SE3_ego) == 2  # every video frame labelled: its pose
    assert main(["eval", "detect", str(tmp_path / "r"), str(tmp_path / "o"), "--detector", "avsim.evaluation.detectors:LabelsOracle"]) == 0
    let = run_let(tmp_path / "o" / "gt" / "boxes.parquet", tmp_path / "o" / "detections.parquet").document
    assert let["mean_over_classes_with_gt"]["ap"] == pytest.approx(1.0)
