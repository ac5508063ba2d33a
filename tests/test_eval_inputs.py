"""Metric inputs: box/lane tables, nuScenes submissions, OpenLane JSON, real scenarios."""

from __future__ import annotations

import json

import numpy as np
import pytest

from avsim.core.errors import AvsimInputError
from avsim.evaluation.detections import (
    read_box_table,
    read_nuscenes_submission,
    write_box_table,
)
from avsim.evaluation.lane_io import (
    read_lane_table,
    read_openlane_json,
    write_lane_table,
)
from avsim.evaluation.lanes import LaneSet, evaluate_lanes
from avsim.evaluation.let_ap import Boxes3D, evaluate_let
from avsim.evaluation.let_result import LetMetric


def _yaw_quat(yaw: float) -> list[float]:
    return [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]


def test_nuscenes_submission_to_ego_frame(tmp_path) -> None:
    ego_yaw = np.pi / 2
    world_T_ego = np.eye(4)
    world_T_ego[:2, :2] = [[0, -1], [1, 0]]  # ego faces world +y
    world_T_ego[:3, 3] = [100.0, 50.0, 0.0]
    dets = [
        # 10 m ahead of the ego (world +y), facing along the ego heading
        {"sample_token": "t0", "translation": [100.0, 60.0, 1.0], "size": [1.9, 4.5, 1.6], "rotation": _yaw_quat(ego_yaw),
         "velocity": [0, 0], "detection_name": "car", "detection_score": 0.8, "attribute_name": ""},
        {"sample_token": "t0", "translation": [100.0, 55.0, 0.5], "size": [0.5, 0.5, 1.0], "rotation": _yaw_quat(0.0),
         "velocity": [0, 0], "detection_name": "barrier", "detection_score": 0.9, "attribute_name": ""},
    ]
    p = tmp_path / "sub.json"
    p.write_text(json.dumps({"meta": {}, "results": {"t0": dets}}))
    b = read_nuscenes_submission(p, world_SE3_ego={"t0": world_T_ego}, token_to_frame={"t0": 7})
    assert len(b) == 1 and b.label[0] == "vehicle" and b.frame[0] == 7  # barrier dropped
    np.testing.assert_allclose(b.boxes[0], [10.0, 0.0, 1.0, 4.5, 1.9, 1.6, 0.0], atol=1e-9)
    with pytest.raises(AvsimInputError, match="no ego pose"):
        read_nuscenes_submission(p, world_SE3_ego={})


def test_box_table_round_trip_and_errors(tmp_path) -> None:
    b = Boxes3D(np.array([3, 4]), np.array(["vehicle", "cyclist"]), np.array([[1, 2, 3, 4, 5, 6, 0.5], [7, 8, 9, 1, 1, 1, -1.0]]), np.array([0.4, 0.6]))
    write_box_table(b, tmp_path / "b.parquet")
    r = read_box_table(tmp_path / "b.parquet")
    np.testing.assert_array_equal(r.boxes, b.boxes)
    assert r.label.tolist() == ["vehicle", "cyclist"] and r.frame.tolist() == [3, 4]
    with pytest.raises(AvsimInputError, match="not found"):
        read_box_table(tmp_path / "missing.parquet")


def test_openlane_gt_json_is_brought_to_the_ground_frame(tmp_path) -> None:
    extrinsic = np.eye(4)
    extrinsic[:3, 3] = [1.5, 0.0, 2.0]  # camera 2 m above the ground, looking forward
    doc = {
        "file_path": "segment/000.jpg", "extrinsic": extrinsic.tolist(), "intrinsic": np.eye(3).tolist(),
        # OpenLane camera-frame points: x forward, y left, z up (relative to the camera)
        "lane_lines": [{"xyz": [[10.0, 20.0, 30.0], [1.8, 1.8, 1.8], [-2.0, -2.0, -2.0]], "visibility": [1, 1, 0], "category": 2}],
    }
    (tmp_path / "000.json").write_text(json.dumps(doc))
    ls = read_openlane_json(tmp_path, ground_truth=True)
    assert ls.frame.tolist() == ["segment/000.jpg"] and ls.category.tolist() == [2]
    np.testing.assert_allclose(ls.points_m, [[-1.8, 10.0, 0.0], [-1.8, 20.0, 0.0], [-1.8, 30.0, 0.0]], atol=1e-12)
    assert ls.visibility.tolist() == [True, True, False]
    (tmp_path / "bad.json").write_text(json.dumps({"lane_lines": [{"xyz": [[0, 1]]}]}))
    with pytest.raises(AvsimInputError, match="extrinsic"):
        read_openlane_json(tmp_path / "bad.json", ground_truth=True)


def test_lane_table_round_trip(tmp_path) -> None:
    ls = LaneSet.from_lists(["f1", "f1", "f2"], [np.ones((3, 3)), np.zeros((2, 3)), np.arange(12.0).reshape(4, 3)], [1, 7, 21],
                            [np.array([1, 0, 1]), np.ones(2), np.ones(4)])
    write_lane_table(ls, tmp_path / "l.parquet")
    r = read_lane_table(tmp_path / "l.parquet")
    assert r.frame.tolist() == ["f1", "f1", "f2"] and r.category.tolist() == [1, 7, 21]
    np.testing.assert_array_equal(r.points_m, ls.points_m)
    np.testing.assert_array_equal(r.visibility, ls.visibility)


def test_scenario_ground_truth_from_real_nuscenes(shared_data) -> None:
    from avsim.evaluation.detections import boxes_from_scenario
    from avsim.evaluation.lane_io import lanes_from_scenario
    from avsim.scenario.importers.registry import convert

    s = convert(shared_data / "scenarionet" / "sd_nuscenes_v1.0-mini_scene-0103.pkl")
    ts = s.frame_timestamps(2.0)[:6]
    boxes = boxes_from_scenario(s, ts)
    assert set(np.unique(boxes.frame)) <= set(ts.tolist()) and len(boxes) > 20
    # ego frame: one box checked against a direct world -> ego transform
    agents = s.agents.resample(ts[:1]).at(int(ts[0]))
    world = agents.center_m[0]
    ego = s.ego.pose_at(ts[:1])[0].inverse().apply(world)
    assert np.min(np.linalg.norm(boxes.boxes[boxes.frame == ts[0], :3] - ego, axis=1)) < 1e-9
    r = evaluate_let(boxes, Boxes3D(boxes.frame, boxes.label, boxes.boxes, np.full(len(boxes), 0.5))).result()
    assert r.mean_over_classes_with_gt[LetMetric.AP] == pytest.approx(1.0, abs=1e-9)

    lanes = lanes_from_scenario(s, ts)
    assert len(lanes) > 10 and set(np.unique(lanes.category)) <= {0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12}
    res = evaluate_lanes(lanes, LaneSet(lanes.frame, lanes.category, lanes.points_m, lanes.offsets)).result()
    assert res["f_score"] == 1.0 and res["num_gt"] > 0


def test_openlane_result_json_points_are_n_by_3(tmp_path) -> None:
    doc = {"file_path": "seg/001.jpg", "lane_lines": [
        {"xyz": [[-2.3, 5.0, -0.3], [-2.4, 10.0, -0.1], [-2.5, 15.0, 0.0]], "uv": [], "visibility": [], "category": 20}]}
    (tmp_path / "001.json").write_text(json.dumps(doc))
    ls = read_openlane_json(tmp_path / "001.json", ground_truth=False)
    np.testing.assert_allclose(ls.points_m[1], [-2.4, 10.0, -0.1])
    assert ls.category.tolist() == [20] and ls.visibility.all()
    (tmp_path / "bad.json").write_text(json.dumps({"lane_lines": [{"xyz": [[1.0, 2.0], [3.0, 4.0]]}]}))
    with pytest.raises(AvsimInputError, match=r"\(N, 3\)"):
        read_openlane_json(tmp_path / "bad.json", ground_truth=False)


def test_lane_range_check_uses_the_given_end_points() -> None:
    # As OpenLane's bench(): a lane is kept when lane[0].y < 102 and lane[-1].y > 3 in the given
    # order. Listed far-to-near (110 m -> 50 m) the first point fails the test.
    y = np.linspace(110.0, 50.0, 7)
    lane = np.column_stack([np.zeros(7), y, np.zeros(7)])
    r = evaluate_lanes(LaneSet.from_lists([0], [lane], [1]), LaneSet.from_lists([0], [lane[::-1]], [1])).result()
    assert r["num_gt"] == 0 and r["num_pred"] == 1
