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
