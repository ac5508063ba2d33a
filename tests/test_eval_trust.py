"""Evaluation inputs users have (Waymo Objects files, strict class names), honest statistics
(no degenerate intervals, rank warnings), progress, and no output in the current folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from avsim.cli import main
from avsim.core.errors import AvsimInputError
from avsim.evaluation.bootstrap import bootstrap_mean, too_few_units
from avsim.evaluation.detections import read_box_table, read_nuscenes_submission, write_box_table
from avsim.evaluation.frechet import rank_warning
from avsim.evaluation.jobs import run_let
from avsim.evaluation.let_ap import Boxes3D, LetConfig, evaluate_let
from avsim.evaluation.let_result import LetResult
from avsim.evaluation.report import build_report, collect_warnings, write_report
from avsim.evaluation.report_config import ReportConfig
from avsim.evaluation.rnds import rnds_summary
from avsim.evaluation.waymo_objects import read_waymo_objects, write_waymo_objects

pytest.importorskip("waymo_open_dataset.protos.metrics_pb2", reason="Waymo protobufs: README install command")


def _scene(seed: int, n_frames: int = 5) -> tuple[Boxes3D, Boxes3D]:
    """Random GT of every LET class and noisy predictions with false positives."""
    rng = np.random.default_rng(seed)
    sizes = {"vehicle": (4.5, 1.9, 1.6), "pedestrian": (0.8, 0.8, 1.8), "cyclist": (1.8, 0.6, 1.7), "sign": (0.6, 0.1, 0.8)}
    frames, labels, rows = [], [], []
    for f in range(n_frames):
        for cls, size in sizes.items():
            for _ in range(3):
                r, a = rng.uniform(5, 70), rng.uniform(-np.pi, np.pi)
                frames.append(1_000_000 * (f + 1))
                labels.append(cls)
                rows.append([r * np.cos(a), r * np.sin(a), size[2] / 2, *size, rng.uniform(-3, 3)])
    gt = Boxes3D.ground_truth(np.array(frames), np.array(labels), np.array(rows))
    pb = gt.boxes.copy()
    pb[:, :3] += rng.normal(0, 0.3, (len(pb), 3))
    extra = pb[: len(pb) // 3].copy()
    extra[:, :2] += rng.uniform(-20, 20, (len(extra), 2))
    pd = Boxes3D(np.r_[gt.frame, gt.frame[: len(extra)]], np.r_[gt.label, gt.label[: len(extra)]],
                 np.vstack([pb, extra]), rng.uniform(0, 1, len(pb) + len(extra)))  # fmt: skip
    return gt, pd


def _summary(result: LetResult) -> dict:
    return {(c.value, b.name if b else "all"): (v.ap, v.apl, v.aph, v.num_gt, v.num_pd)
            for c, d in result.per_class.items() for b, v in [(None, d.all), *d.ranges.items()]}


# --------------------------------------------------------------------------- Waymo Objects


def test_waymo_objects_files_give_the_same_let_as_the_boxes(tmp_path: Path) -> None:
    gt, pd = _scene(3)
    write_waymo_objects(gt, tmp_path / "gt.bin", ground_truth=True)
    write_waymo_objects(pd, tmp_path / "pd.bin")
    read = read_waymo_objects(tmp_path / "gt.bin", ground_truth=True)
    assert read.dropped == {} and len(read.boxes) == len(gt)
    assert read.boxes.frame[0] == f"avsim_0@{gt.frame[0]}"
    np.testing.assert_array_equal(read.boxes.boxes, gt.boxes)
    table = run_let(tmp_path / "gt.bin", tmp_path / "pd.bin")
    # boxes are doubles in label.proto, scores float32 in metrics.proto
    pd32 = Boxes3D(pd.frame, pd.label, pd.boxes, pd.score.astype(np.float32).astype(np.float64))
    expected = evaluate_let(gt, pd32, LetConfig()).result()
    got = {(c, r): (d["ap"], d["apl"], d["aph"], d["num_gt"], d["num_pd"])
           for c, per in table.document["per_class"].items() for r, d in per.items()}  # fmt: skip
    assert set(got) == set(_summary(expected)) and ("sign", "[0, 30)") in got
    for key, want in _summary(expected).items():
        np.testing.assert_allclose(got[key], want, atol=1e-9, err_msg=str(key))
    assert 0.05 < table.document["mean_over_classes_with_gt"]["ap"] < 1.0


def test_waymo_ground_truth_follows_the_reference_tool_filters(tmp_path: Path) -> None:
    """Objects without top-lidar points or a most-visible camera are left out and counted;
    the camera-synced box is the one evaluated."""
    from waymo_open_dataset.protos import metrics_pb2

    objects = metrics_pb2.Objects()
    for i, (points, camera) in enumerate([(5, "FRONT"), (0, "FRONT"), (3, "")]):
        o = objects.objects.add()
        o.context_name, o.frame_timestamp_micros = "seg", 100
        o.object.type = 1
        o.object.num_top_lidar_points_in_box, o.object.most_visible_camera_name = points, camera
        for box, x in ((o.object.box, 99.0), (o.object.camera_synced_box, 10.0 + i)):
            box.center_x, box.length, box.width, box.height = x, 4.0, 2.0, 1.5
    path = tmp_path / "gt.bin"
    path.write_bytes(objects.SerializeToString())
    read = read_waymo_objects(path, ground_truth=True)
    assert read.dropped == {"num_top_lidar_points_in_box <= 0": 1, "no most_visible_camera_name": 1}
    assert read.boxes.boxes[:, 0].tolist() == [10.0] and read.boxes.frame.tolist() == ["seg_0@100"]
    write_box_table(Boxes3D(np.array(["seg_0@100"]), np.array(["vehicle"]), read.boxes.boxes, np.array([0.5])),
                    tmp_path / "pd.parquet")  # fmt: skip
    doc = run_let(path, tmp_path / "pd.parquet").document
    assert doc["gt_left_out"] == read.dropped and len(doc["warnings"]) == 2
    assert doc["per_class"]["vehicle"]["all"]["ap"] == pytest.approx(1.0)


def test_waymo_unknown_type_and_garbage_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from waymo_open_dataset.protos import metrics_pb2

    objects = metrics_pb2.Objects()
    o = objects.objects.add()
    o.object.type = 0  # TYPE_UNKNOWN
    o.object.box.length = o.object.box.width = o.object.box.height = 1.0
    (tmp_path / "pd.bin").write_bytes(objects.SerializeToString())
    with pytest.raises(AvsimInputError, match=r"objects\[0\]\.object\.type.*0 is not a LET type"):
        read_waymo_objects(tmp_path / "pd.bin", ground_truth=False)
    (tmp_path / "junk.bin").write_bytes(b"\xff" * 40)
    gt, _ = _scene(0, 1)
    write_box_table(gt, tmp_path / "gt.parquet")
    assert main(["eval", "let", "--gt", str(tmp_path / "gt.parquet"), "--pred", str(tmp_path / "junk.bin")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "junk.bin" in err[0] and "metrics_pb2.Objects" in err[0]


def test_waymo_ground_truth_entirely_filtered_is_an_error(tmp_path: Path) -> None:
    gt, _ = _scene(1, 1)
    write_waymo_objects(gt, tmp_path / "gt.bin")  # written as predictions: no lidar points, no camera
    with pytest.raises(AvsimInputError, match="every object left out"):
        run_let(tmp_path / "gt.bin", tmp_path / "gt.bin")


# --------------------------------------------------------------------------- class names


def test_unknown_class_in_a_box_table_names_the_file_and_value(tmp_path: Path) -> None:
    gt, _ = _scene(0, 1)
    write_box_table(Boxes3D(gt.frame, np.where(gt.label == "sign", "car", gt.label), gt.boxes, gt.score), tmp_path / "b.parquet")
    with pytest.raises(AvsimInputError, match=r"b\.parquet: class: unknown class 'car'"):
        read_box_table(tmp_path / "b.parquet")
    with pytest.raises(Exception, match=r"unknown class .car. \(LET classes: vehicle, pedestrian, cyclist, sign\)"):
        LetConfig().iou_threshold("car")


def test_nuscenes_classes_known_dropped_or_refused(tmp_path: Path) -> None:
    det = {"translation": [1.0, 2.0, 0.5], "size": [1.9, 4.5, 1.6], "rotation": [1, 0, 0, 0], "detection_score": 0.5}
    doc = {"results": {"tok": [{**det, "detection_name": "car"}, {**det, "detection_name": "barrier"}]}}
    (tmp_path / "ok.json").write_text(json.dumps(doc))
    boxes = read_nuscenes_submission(tmp_path / "ok.json")
    assert boxes.label.tolist() == ["vehicle"]
    doc["results"]["tok"].append({**det, "detection_name": "spaceship"})
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(AvsimInputError, match=r"results\.tok\[2\]\.detection_name: unknown detection class 'spaceship'"):
        read_nuscenes_submission(tmp_path / "bad.json")


# --------------------------------------------------------------------------- statistics


def test_one_unit_gives_no_interval_but_a_note() -> None:
    iv = bootstrap_mean(np.array([480.5]), "clip", 100)
    assert iv.estimate == 480.5 and np.isnan(iv.low) and np.isnan(iv.high)
    assert iv.as_dict()["note"] == "n/a (1 clip)" == too_few_units(1, "clip")
    assert too_few_units(2, "clip") == "" and "note" not in bootstrap_mean(np.array([1.0, 2.0]), "clip", 50).as_dict()
    one = rnds_summary(np.array([[1.0, 0.9, 0.8]]), np.array([[1.0, 1.0, 1.0]]), 100)
    assert one.band_note == "n/a (1 video)" and np.isnan(one.band_low).all()
    np.testing.assert_allclose(one.curve, [1.0, 0.9, 0.8])
    two = rnds_summary(np.array([[1.0, 0.9], [1.0, 0.7]]), np.ones((2, 2)), 100)
    assert two.band_note == "" and np.isfinite(two.band_low).all()


def test_rank_warning_below_the_feature_dimension() -> None:
    assert "fewer than the feature dimension 2048" in rank_warning("FID", 64, 64, 2048)
    assert rank_warning("FVD", 400, 500, 400) == ""


def test_frechet_interval_from_one_clip_per_side_is_not_an_interval() -> None:
    from avsim.evaluation.report_video import _frechet_interval

    rng = np.random.default_rng(0)
    fr, fg = [rng.normal(size=(40, 8))], [rng.normal(1, 1, size=(40, 8))]
    iv = _frechet_interval(fr, fg, "unbiased_n_minus_1", ReportConfig(n_resamples=20))
    assert iv.note == "n/a (1 clip)" and iv.estimate > 1
    iv2 = _frechet_interval(fr * 3, fg * 2, "unbiased_n_minus_1", ReportConfig(n_resamples=20))
    assert iv2.note == "" and iv2.low <= iv2.estimate <= iv2.high


@pytest.mark.slow
def test_report_says_when_a_number_cannot_be_trusted(tmp_path: Path) -> None:
    """One frame of detections: no interval, a warning in the JSON and on the page."""
    gt, pd = _scene(2, 1)
    for d in ("gt", "real", "gen"):
        (tmp_path / d).mkdir()
    write_box_table(gt, tmp_path / "gt" / "boxes.parquet")
    write_box_table(pd, tmp_path / "real" / "detections.parquet")
    write_box_table(pd, tmp_path / "gen" / "detections.parquet")
    result = build_report(tmp_path / "real", tmp_path / "gen", tmp_path / "gt", ReportConfig(n_resamples=20, video_metrics=False))
    assert result["detection"]["intervals"]["waymo_mean/ap/gap"]["note"] == "n/a (1 frame)"
    headline = "LET-3D-AP, Waymo mean (vehicle, pedestrian, cyclist), real: interval n/a (1 frame) (and "
    assert any(w.startswith(headline) and w.endswith(" more in LET)") for w in result["warnings"]), result["warnings"]
    assert not any("intervals/" in w or "waymo_mean" in w for w in result["warnings"])  # words, not the JSON's keys
    assert any(w.startswith("lanes: skipped:") for w in result["warnings"])
    assert result["warnings"] == collect_warnings({k: v for k, v in result.items() if k != "warnings"})
    _, html_path = write_report(result, tmp_path / "out")
    page = html_path.read_text()
    assert "Read these numbers with care" in page and "n/a (1 frame)" in page


# --------------------------------------------------------------------------- CLI outputs and progress


def test_eval_writes_nothing_in_the_current_folder_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gt, pd = _scene(4, 2)
    inputs = tmp_path / "in"
    inputs.mkdir()
    write_box_table(gt, inputs / "gt.parquet")
    write_box_table(pd, inputs / "pd.parquet")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    args = ["eval", "let", "--gt", str(inputs / "gt.parquet"), "--pred", str(inputs / "pd.parquet")]
    assert main(args) == 0
    assert list(work.iterdir()) == []
    capsys.readouterr()
    assert main([*args, "--out", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)  # stdout is the JSON alone
    assert doc["metric"] == "LET-3D-AP" and list(work.iterdir()) == []


def test_let_reports_progress_per_class(tmp_path: Path) -> None:
    gt, pd = _scene(5, 2)
    calls: list[tuple[str, int, int]] = []
    evaluate_let(gt, pd, progress=lambda step, done, total: calls.append((step, done, total)))
    assert calls == [("LET classes", k, 4) for k in range(1, 5)]


def test_box_table_with_string_frames_round_trips(tmp_path: Path) -> None:
    gt, _ = _scene(6, 1)
    keyed = Boxes3D(np.array([f"seg_0@{f}" for f in gt.frame]), gt.label, gt.boxes, gt.score)
    write_box_table(keyed, tmp_path / "k.parquet")
    back = read_box_table(tmp_path / "k.parquet", require_score=False)
    assert back.frame.tolist() == keyed.frame.tolist()
    assert pl.read_parquet(tmp_path / "k.parquet")["frame"].dtype == pl.String
