"""Waymo Open Motion importer on ../shared/data/waymo/motion_data_one_scenario.tfrecord."""

from __future__ import annotations

import struct
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.registry import convert, detect_format
from avsim.scenario.importers.waymo_records import crc32c, iter_tfrecord, masked_crc32c


@pytest.fixture
def waymo_protos():
    return pytest.importorskip("waymo_open_dataset.protos.scenario_pb2", reason="the `waymo` extra is not installed")


def _record(payload: bytes) -> bytes:
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", masked_crc32c(header)) + payload + struct.pack("<I", masked_crc32c(payload))


def test_crc32c_known_values():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc32c(b"") == 0


def test_tfrecord_framing_and_corruption(tmp_path):
    path = tmp_path / "x.tfrecord"
    path.write_bytes(_record(b"hello") + _record(b"world!"))
    assert list(iter_tfrecord(path)) == [b"hello", b"world!"]
    data = bytearray(path.read_bytes())
    data[14] ^= 0xFF  # flip a payload byte of record 0
    path.write_bytes(bytes(data))
    with pytest.raises(AvsimInputError, match="data CRC mismatch"):
        list(iter_tfrecord(path))
    path.write_bytes(_record(b"hello")[:-3])
    with pytest.raises(AvsimInputError, match="truncated"):
        list(iter_tfrecord(path))
    path.write_bytes(b"not a tfrecord at all")
    with pytest.raises(AvsimInputError, match="length CRC mismatch"):
        list(iter_tfrecord(path))


def test_not_a_scenario_proto(tmp_path, waymo_protos):
    path = tmp_path / "y.tfrecord"
    path.write_bytes(_record(b"\xff\xff\xff"))
    with pytest.raises(AvsimInputError, match="not a Waymo Scenario"):
        convert(path, "waymo")


def test_real_waymo_scenario(shared_data, waymo_protos):
    path = shared_data / "waymo" / "motion_data_one_scenario.tfrecord"
    assert detect_format(path) == "waymo"
    sc = convert(path, "waymo")
    assert sc.scenario_id == "637f20cafde22ff8"
    assert len(sc.ego.timestamps_ns) == 91 and sc.ego.rate_hz == pytest.approx(10.0, rel=1e-3)
    assert sc.rig.names == ("FRONT", "FRONT_LEFT", "FRONT_RIGHT", "SIDE_LEFT", "SIDE_RIGHT")
    tracks = np.unique(sc.agents.track_id, return_index=True)[1]
    assert Counter(sc.agents.object_class[tracks]) == {"Car": 69, "Pedestrian": 10, "Cyclist": 3}  # 83 tracks minus the SDC
    assert set(sc.agents.source_class) == {"TYPE_VEHICLE", "TYPE_PEDESTRIAN", "TYPE_CYCLIST"}
    counts = sc.map.element_counts()
    assert counts["lane_lines"] == 58  # 59 typed road lines, one has a single vertex
    assert sc.metadata["skipped_map_features"] == ["131"]
    assert counts["road_boundaries"] == 28 and counts["crosswalks"] == 4 and counts["traffic_signs"] == 8
    assert counts["road_markings"] == 3  # speed bumps
    types = Counter(sc.map.lane_lines.lane_types())
    assert types == {"WHITE LONG_DASHED_SINGLE": 24, "WHITE SOLID_SINGLE": 17, "YELLOW SOLID_SINGLE": 17}
    assert len(np.unique(sc.lights.light_id)) == 12 and "red" in set(sc.lights.state)
    assert sc.lights.timestamps_ns.min() >= sc.ego.timestamps_ns[0]
    assert convert(f"{path}::0", "waymo").scenario_id == sc.scenario_id
    with pytest.raises(AvsimInputError, match="out of range"):
        convert(f"{path}::1", "waymo")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=5))
def test_tfrecord_framing_round_trip(tmp_path_factory, payloads):
    path = tmp_path_factory.mktemp("tfr") / "r.tfrecord"
    path.write_bytes(b"".join(_record(p) for p in payloads))
    assert list(iter_tfrecord(path)) == payloads
