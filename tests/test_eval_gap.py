"""The detection-gap headline (issue 53): LET and lanes on the instants both sides have, Sampson errors only from
frames with enough matches, CSE pairs from each rig's calibration, readable warnings and numbers.

The docs/jobs.md chain and the real rigs are in tests/test_eval_gap_real.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from avsim.cli import main
from avsim.evaluation.detections import write_box_table
from avsim.evaluation.lane_io import write_lane_table
from avsim.evaluation.lanes import LaneSet
from avsim.evaluation.let_ap import Boxes3D
from avsim.evaluation.report import build_report
from avsim.evaluation.report_config import ReportConfig

CLIP = "drive"


def _frames(n: int) -> list[str]:
    """Instants of one clip at 30 fps (the sample token is the timestamp in ns)."""
    return [f"{CLIP}@{k * 33_333_333}" for k in range(n)]


def _truth(keys: list[str]) -> tuple[Boxes3D, LaneSet]:
    """Two boxes and two lanes per instant, the same for an instant whichever side lists it."""
    frames, labels, rows, lane_f, lanes = [], [], [], [], []
    for key in keys:
        rng = np.random.default_rng(int(key.split("@")[1]))
        for cls, size in (("vehicle", (4.5, 1.9, 1.6)), ("pedestrian", (0.8, 0.8, 1.8))):
            frames.append(key)
            labels.append(cls)
            rows.append([rng.uniform(5, 40), rng.uniform(-8, 8), size[2] / 2, *size, rng.uniform(-3, 3)])
        for x in (-1.8, 1.8):
            lane_f.append(key)
            lanes.append(np.column_stack([np.full(20, x), np.linspace(3, 60, 20), np.zeros(20)]))
    boxes = Boxes3D(np.array(frames), np.array(labels), np.array(rows), np.ones(len(rows)))
    return boxes, LaneSet.from_lists(lane_f, lanes, [2] * len(lanes))


def _side(folder: Path, keys: list[str], recorded: bool) -> None:
    """A side as `avsim eval detect` writes it: the truth as its detections at `keys` (and its detect.json when `recorded`)."""
    boxes, lanes = _truth(keys)
    (folder / "gt").mkdir(parents=True)
    write_box_table(boxes, folder / "detections.parquet")
    write_lane_table(lanes, folder / "lanes.parquet")
    write_box_table(boxes, folder / "gt" / "boxes.parquet")
    write_lane_table(lanes, folder / "gt" / "lanes.parquet")
    if recorded:
        clips = [{"clip": keys[0].split("@")[0], "cameras": ["front"], "gt_visibility": "visible", "instants": [k.split("@")[1] for k in keys]}]
        (folder / "detect.json").write_text(json.dumps({"format": "avsim-detect", "clips": clips, "gt_boxes": len(boxes.score),
                                                        "gt_boxes_unseen": 3}))  # fmt: skip


@pytest.mark.parametrize("recorded", [True, False])
def test_let_and_lanes_are_scored_on_the_instants_both_sides_have(tmp_path: Path, recorded: bool) -> None:
    """A 30 fps real side and a generated side with every third instant (the model's 10 fps): an oracle's gap is 0
    with the interval [0, 0], whichever side's ground truth is given; before, the real side's extra instants
    counted as misses of the generated side (gap 0.6154 on the docs' two samples)."""
    real, gen = _frames(31), _frames(31)[::3]
    _side(tmp_path / "real", real, recorded)
    _side(tmp_path / "gen", gen, recorded)
    for gt in ("real", "gen"):
        rep = build_report(tmp_path / "real", tmp_path / "gen", tmp_path / gt / "gt", ReportConfig(n_resamples=50, video_metrics=False))
        gap = rep["detection"]["intervals"]["waymo_mean/ap/gap"]
        assert (gap["estimate"], gap["ci_low"], gap["ci_high"]) == (0.0, 0.0, 0.0)
        assert rep["lanes"]["intervals"]["f_score/gap"]["estimate"] == 0.0 and rep["lanes"]["intervals"]["f_score/real"]["estimate"] == 1.0
        assert rep["instants"]["instants"] == 11 and (rep["instants"]["real"], rep["instants"]["generated"]) == (31, 11)
        assert rep["detection"]["instants"] == rep["lanes"]["instants"] == 11
        assert any("20 of the real side's 31 instants are not on the other side" in w for w in rep["warnings"])
    if recorded:  # the ground truth's own record: its rule and the boxes no evaluated camera shows
        assert rep["ground_truth"]["boxes_seen_by_no_evaluated_camera"] == 3 and rep["ground_truth"]["gt_visibility"] == ["visible"]


@pytest.mark.e2e
def test_sides_without_a_common_instant_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _side(tmp_path / "real", _frames(3), True)
    _side(tmp_path / "gen", [k.replace(CLIP, "other") for k in _frames(3)], True)
    args = ["eval", "report", "--real", str(tmp_path / "real"), "--generated", str(tmp_path / "gen"), "--gt", str(tmp_path / "real" / "gt"),
            "--out", str(tmp_path / "rep"), "--no-video-metrics"]  # fmt: skip
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no instant in common with" in err and "real has 3 of clip(s) drive" in err and "generated 3 of other" in err
    assert not (tmp_path / "rep" / "report.json").exists()


# --------------------------------------------------------------------------- Sampson


def _textured(n: int, h: int = 270, w: int = 480, shift_px: int = 6) -> np.ndarray:
    """Frames of one smooth random texture moving right (consecutive frames match well)."""
    import cv2

    rng = np.random.default_rng(1)
    base = cv2.GaussianBlur(rng.integers(0, 256, (h, w + shift_px * n), np.uint8), (0, 0), 2.0)
    return np.stack([np.repeat(base[:, k * shift_px : k * shift_px + w, None], 3, 2) for k in range(n)])


def test_sampson_needs_enough_matches_noise_is_not_a_number() -> None:
    """Pure noise gives 0-6 matches a frame: no error (NaN, "fewer than 16 matches"), never the 7e-14 px an F fitted
    to a handful of points gave; a textured clip still gets its numbers."""
    from avsim.evaluation.sampson import MIN_MATCHES_PER_FRAME, cross_view_sampson, temporal_sampson, video_summary

    rng = np.random.default_rng(0)
    a, b = (rng.integers(0, 256, (4, 270, 480, 3), np.uint8) for _ in range(2))
    cse = video_summary(cross_view_sampson(a, b)[0])
    tse = video_summary(temporal_sampson(a))
    for doc in (cse, tse):
        assert np.isnan(doc["median_of_frame_medians_px"]) and np.isnan(doc["mean_of_frame_means_px"])
        assert max(doc["matches"]["per_frame"]) < MIN_MATCHES_PER_FRAME
        assert doc["skipped"] == {f"fewer than {MIN_MATCHES_PER_FRAME} matches": doc["frames"]}
    good = video_summary(temporal_sampson(_textured(3)))
    assert np.isfinite(good["median_of_frame_medians_px"]) and min(good["matches"]["per_frame"]) >= MIN_MATCHES_PER_FRAME


@pytest.mark.slow
def test_report_says_n_a_for_a_side_without_frames_that_count(tmp_path: Path) -> None:
    """The report's CSE of a noise side is n/a with its reason (the summary row and the JSON), not a number."""
    from avsim.core.video import MP4Writer
    from avsim.evaluation.report_sampson import sampson_section

    rng = np.random.default_rng(0)
    clips = {}
    for cam in ("camera_front_wide_120fov", "camera_cross_right_120fov"):  # cosmos names: the rig is known without calibration.json
        path = tmp_path / "noise" / f"{cam}.mp4"
        path.parent.mkdir(exist_ok=True)
        with MP4Writer(path, 320, 180) as writer:
            for frame in rng.integers(0, 256, (3, 180, 320, 3), np.uint8):
                writer.write(frame)
        clips[cam] = path
    out = sampson_section({"c": clips}, {"c": clips}, ReportConfig(n_resamples=10, max_frames=3))
    assert out["rigs"]["real"]["c"]["pairs"] == ["camera_front_wide_120fov+camera_cross_right_120fov"]
    for key in ("cse/real", "cse/generated", "tse/generated"):
        assert out[key]["skipped"].startswith("n/a: no frame of the "), out[key]


def test_cse_pairs_come_from_the_rig_calibration() -> None:
    """Pairs whose fields of view overlap and whose centres differ, for the cosmos rig and the Argoverse 2 rig (each
    camera at its own size: AV2's front centre is portrait); named pairs instead when given."""
    from avsim.core.rig import av2_rig, cosmos_rig
    from avsim.evaluation.report_sampson import ClipRig, cse_pairs, view_overlap

    def rig(name: str) -> ClipRig:
        r = cosmos_rig() if name == "cosmos" else av2_rig()
        return ClipRig({c: r.camera(c) for c in r.names}, {c: np.asarray(r.extrinsic(c).as_matrix(), np.float64) for c in r.names})

    cosmos = rig("cosmos")
    pairs = cse_pairs(cosmos)
    assert ("camera_front_wide_120fov", "camera_cross_right_120fov") in pairs or ("camera_cross_right_120fov", "camera_front_wide_120fov") in pairs
    assert not any({"camera_front_wide_120fov", "camera_front_tele_30fov"} == set(p) for p in pairs)  # one place: no epipolar geometry
    assert view_overlap(cosmos, "camera_front_wide_120fov", "camera_front_tele_30fov") == 1.0
    assert view_overlap(cosmos, "camera_front_wide_120fov", "camera_rear_tele_30fov") == 0.0
    av2 = rig("av2")
    assert av2.cameras["ring_front_center"].width_px < av2.cameras["ring_front_center"].height_px
    pairs = {frozenset(p) for p in cse_pairs(av2)}
    assert frozenset({"ring_front_center", "ring_front_left"}) in pairs and frozenset({"ring_side_left", "ring_side_right"}) not in pairs
    assert len(pairs) >= 6
    assert cse_pairs(av2, (("ring_front_center", "ring_rear_left"), ("ring_front_center", "nope"))) == [("ring_front_center", "ring_rear_left")]


# --------------------------------------------------------------------------- page


def test_warnings_in_words_and_tiny_numbers_as_zero() -> None:
    from avsim.evaluation.report_warnings import collect_warnings, place_name
    from avsim.evaluation.results import fmt_number

    assert place_name("detection/intervals/vehicle/range [0, 30)/ap/real") == "LET-3D-AP, vehicle, range [0, 30) m, real"
    assert place_name("video/fid/unbiased_n_minus_1") == "video, FID, covariance N-1"
    note = {"estimate": 1.0, "note": "n/a (1 clip)"}
    lines = collect_warnings({"video": {"fid": {"unbiased_n_minus_1": note, "biased_n": note}}, "sampson": {"cse/real": {"skipped": "x"}}})
    assert lines == ["video, FID, covariance N-1: interval n/a (1 clip) (and 1 more in video)", "Sampson, CSE, real: skipped: x"]
    assert (fmt_number(5.7e-14), fmt_number(-3e-10), fmt_number(0.61538), fmt_number(float("nan")), fmt_number(None)) == ("0", "0", "0.6154", "n/a", "n/a")


def test_mmdet3d_camera_names_for_nuscenes_configs() -> None:
    """The six nuScenes names by heading: the cosmos rig's front tele and AV2's rear right have no nuScenes counterpart."""
    from avsim.core.rig import av2_rig, cosmos_rig
    from avsim.render.labels.mmdet3d_info import nuscenes_camera_map

    def mounts(name: str) -> dict[str, np.ndarray]:
        r = cosmos_rig() if name == "cosmos" else av2_rig()
        return {c: np.asarray(r.extrinsic(c).as_matrix(), np.float64) for c in r.names}

    assert nuscenes_camera_map(mounts("cosmos")) == {
        "camera_front_wide_120fov": "CAM_FRONT", "camera_cross_right_120fov": "CAM_FRONT_RIGHT", "camera_rear_right_70fov": "CAM_BACK_RIGHT",
        "camera_rear_tele_30fov": "CAM_BACK", "camera_rear_left_70fov": "CAM_BACK_LEFT", "camera_cross_left_120fov": "CAM_FRONT_LEFT"}  # fmt: skip
    av2 = nuscenes_camera_map(mounts("av2"))
    assert sorted(av2.values()) == sorted(["CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_FRONT_LEFT", "CAM_BACK", "CAM_BACK_LEFT", "CAM_BACK_RIGHT"])
    assert av2["ring_front_center"] == "CAM_FRONT" and "ring_rear_right" not in av2
