"""Argoverse 2 importer on the real sensor log adcf7d18-... and forecasting scenario 0a1e6f0a-..."""

from __future__ import annotations

import shutil
from collections import Counter

import numpy as np
import polars as pl
import pytest

from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.registry import convert, detect_format

LOG = "av2/sensor/adcf7d18-0510-35b0-a2fa-b4cea13a6d76"
FORECAST = "av2/forecasting/0a1e6f0a-1817-4a98-b02e-db8c9327d151"


@pytest.fixture(scope="module")
def log_scenario(shared_data):
    return convert(shared_data / LOG, "av2")


def test_sensor_log_ego_rig_agents(log_scenario, shared_data):
    sc = log_scenario
    poses = pl.read_ipc(shared_data / LOG / "city_SE3_egovehicle.feather")
    assert len(sc.ego.timestamps_ns) == poses.height == 2637
    np.testing.assert_allclose(sc.ego.world_SE3_ego.translation[0], poses.sort("timestamp_ns").row(0)[5:8])
    # the 7 ring cameras from the real calibration, OpenCV frame: front centre looks forward
    assert sc.rig.names[0] == "ring_front_center" and len(sc.rig) == 7
    front = sc.rig.camera("ring_front_center")
    assert (front.width_px, front.height_px) == (1550, 2048)
    assert sc.rig.extrinsic("ring_front_center").rotation[:, 2] @ np.array([1.0, 0, 0]) > 0.99
    # 12078 cuboids of 146 tracks moved into the city frame, near the ego path
    assert len(sc.agents) == 12078 and len(sc.agents.track_ids) == 146
    assert {"REGULAR_VEHICLE", "PEDESTRIAN", "BUS", "BOLLARD"} <= set(sc.agents.source_class)
    d = np.linalg.norm(sc.agents.center_m[:, :2] - sc.ego.pose_at(sc.agents.timestamps_ns).translation[:, :2], axis=1)
    assert np.median(d) < 60.0
    z_rel = sc.agents.center_m[:, 2] - sc.ego.pose_at(sc.agents.timestamps_ns).translation[:, 2]
    assert -3.0 < np.median(z_rel) < 3.0  # boxes sit near the road surface, not in the ego frame


def test_sensor_log_vector_map(log_scenario):
    m = log_scenario.map
    types = Counter(m.lane_lines.lane_types())
    # AV2 marks through the one table: DASHED_WHITE -> long dash, DOUBLE_SOLID_YELLOW -> solid group
    assert {"WHITE LONG_DASHED_SINGLE", "WHITE SOLID_SINGLE", "YELLOW SOLID_GROUP", "YELLOW LONG_DASHED_SINGLE"} <= set(types)
    assert sum(types.values()) == len(m.lane_lines) == 110  # shared boundaries emitted once, NONE skipped
    counts = m.element_counts()
    assert counts["lanes"] == 199 and counts["crosswalks"] == 11 and counts["drivable_areas"] == 8
    assert counts["road_boundaries"] == 8
    left, right, centre = m.lanes.left[0], m.lanes.right[0], m.lanes.centre[0]
    assert np.linalg.norm(centre[0] - (left[0] + right[0]) / 2) < 1e-6


def test_forecasting_scenario(shared_data):
    path = shared_data / FORECAST
    assert detect_format(path) == "av2"
    sc = convert(path)
    assert sc.scenario_id == "0a1e6f0a-1817-4a98-b02e-db8c9327d151"
    assert len(sc.ego.timestamps_ns) == 110 and sc.ego.rate_hz == pytest.approx(10.0)
    assert len(sc.agents.track_ids) == 57  # 58 tracks minus the AV
    assert sc.metadata["box_sizes"].startswith("nominal")
    assert not sc.map.is_empty() and len(sc.map.crosswalks) == 6


def test_bad_av2_inputs(shared_data, tmp_path):
    log = tmp_path / "log"
    shutil.copytree(shared_data / LOG, log, ignore=shutil.ignore_patterns("sensors"))
    poses = pl.read_ipc(log / "city_SE3_egovehicle.feather")
    # a non-unit quaternion
    bad = poses.with_columns(pl.when(pl.int_range(pl.len()) == 5).then(2.0).otherwise(pl.col("qw")).alias("qw"))
    bad.write_ipc(log / "city_SE3_egovehicle.feather")
    with pytest.raises(AvsimInputError, match="row 5: quaternion norm"):
        convert(log, "av2")
    # a NaN translation
    poses.with_columns(pl.when(pl.int_range(pl.len()) == 7).then(float("nan")).otherwise(pl.col("tx_m")).alias("tx_m")).write_ipc(
        log / "city_SE3_egovehicle.feather"
    )
    with pytest.raises(AvsimInputError, match="NaN"):
        convert(log, "av2")
    # a camera with zero focal length
    poses.write_ipc(log / "city_SE3_egovehicle.feather")
    intr = pl.read_ipc(log / "calibration" / "intrinsics.feather")
    intr.with_columns(pl.lit(0.0).alias("fx_px")).write_ipc(log / "calibration" / "intrinsics.feather")
    with pytest.raises(AvsimInputError, match="intrinsics.feather: ring_front_center"):
        convert(log, "av2")
    # a truncated feather file
    data = (log / "annotations.feather").read_bytes()
    intr.write_ipc(log / "calibration" / "intrinsics.feather")
    (log / "annotations.feather").write_bytes(data[: len(data) // 2])
    with pytest.raises(AvsimInputError, match="annotations.feather: file: unreadable"):
        convert(log, "av2")
