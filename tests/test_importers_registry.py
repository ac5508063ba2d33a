"""Importer registry: format detection, `convert`, the lane-line table, and the lossless round trip
of every real dataset in ../shared/data through the native format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avsim.core.errors import AvsimInputError
from avsim.maps.style import LANE_STYLES
from avsim.scenario.importers.common import check_increasing, split_painted_runs, split_selector
from avsim.scenario.importers.line_types import SPEC_LANE_TYPES, TABLES, lane_line_type, rdshq_lane_type
from avsim.scenario.importers.registry import FORMATS, convert, detect_format
from avsim.scenario.io import load_scenario, save_scenario, scenario_differences

REAL_SOURCES = [
    *(f"scenarionet/{n}" for n in (
        "sd_nuscenes_v1.0-mini_scene-0103.pkl", "sd_nuscenes_v1.0-mini_scene-0553.pkl", "sd_nuscenes_v1.0-mini_scene-0655.pkl",
        "sd_nuscenes_v1.0-mini_scene-0757.pkl", "sd_nuscenes_v1.0-mini_scene-0796.pkl", "sd_nuscenes_v1.0-mini_scene-0916.pkl",
        "sd_nuscenes_v1.0-mini_scene-1077.pkl", "sd_waymo_v1.2_eb4b91b10ca94ff2.pkl")),
    "waymo/motion_data_one_scenario.tfrecord",
    "av2/sensor/adcf7d18-0510-35b0-a2fa-b4cea13a6d76",
    "av2/forecasting/0a1e6f0a-1817-4a98-b02e-db8c9327d151",
    "rdshq-example/assets/example",
]  # fmt: skip
EXPECTED_FORMAT = {"scenarionet": "scenarionet", "waymo": "waymo", "av2": "av2", "rdshq-example": "rdshq"}


def test_formats_registry():
    assert set(FORMATS) == {"scenarionet", "nuscenes", "av2", "waymo", "rdshq", "mmdet3d", "waymo-frame", "clipgt", "opendrive", "lanelet2", "openscenario"}
    assert all(info.source and info.default_rig for info in FORMATS.values())


@pytest.mark.slow
@pytest.mark.parametrize("rel", REAL_SOURCES)
def test_real_dataset_converts_and_round_trips_losslessly(shared_data, tmp_path, rel):
    if rel.startswith("waymo/"):
        pytest.importorskip("waymo_open_dataset.protos.scenario_pb2", reason="the `waymo` extra is not installed")
    src = shared_data / rel
    fmt = detect_format(src)
    assert fmt == EXPECTED_FORMAT[rel.split("/")[0]]
    sc = convert(src)
    assert not sc.map.is_empty() and len(sc.ego.timestamps_ns) >= 2
    save_scenario(sc, tmp_path / "a")
    back = load_scenario(tmp_path / "a")
    assert scenario_differences(sc, back) == []
    # deterministic: the same source gives the same bytes
    save_scenario(convert(src, fmt), tmp_path / "b")
    for f in sorted((tmp_path / "a").iterdir()):
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes(), f.name


@pytest.mark.slow
def test_rig_override_and_bad_arguments(shared_data, tmp_path):
    src = shared_data / "scenarionet" / "sd_nuscenes_v1.0-mini_scene-0757.pkl"
    sc = convert(src, "scenarionet", "cosmos")
    assert sc.rig.names[0] == "camera_front_wide_120fov" and sc.metadata["rig"] == "cosmos"
    with pytest.raises(AvsimInputError, match="unknown rig"):
        convert(src, "scenarionet", "gopro")
    with pytest.raises(AvsimInputError, match="unknown format"):
        convert(src, "kitti")
    with pytest.raises(AvsimInputError, match="not found"):
        convert(tmp_path / "absent.pkl", "scenarionet")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(AvsimInputError, match="unrecognised file"):
        detect_format(tmp_path / "notes.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(AvsimInputError, match="cannot detect"):
        detect_format(tmp_path / "empty")
    # a pickle that is not a ScenarioNet scenario
    import pickle

    (tmp_path / "list.pkl").write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(AvsimInputError, match="expected a ScenarioNet dict"):
        convert(tmp_path / "list.pkl")


def test_lane_line_table_maps_onto_the_spec():
    assert {f"{c} {s}" for c, s in SPEC_LANE_TYPES} == set(LANE_STYLES)
    for source, table in TABLES.items():
        for name, mapped in table.items():
            assert mapped is None or mapped in SPEC_LANE_TYPES or mapped[0] == "OTHER", (source, name)
    # the spec's own examples
    assert lane_line_type("av2", "DASHED_WHITE") == ("WHITE", "LONG_DASHED_SINGLE")
    assert lane_line_type("av2", "DOUBLE_SOLID_YELLOW") == ("YELLOW", "SOLID_GROUP")
    assert lane_line_type("av2", "DASH_SOLID_YELLOW") == ("YELLOW", "DASHED_SOLID")
    assert lane_line_type("av2", "NONE") is None and lane_line_type("nuscenes", "NIL") is None
    assert lane_line_type("nuscenes", "SINGLE_SOLID_YELLOW") == ("YELLOW", "SOLID_SINGLE")
    assert lane_line_type("waymo", "TYPE_SOLID_DOUBLE_YELLOW") == lane_line_type("waymo", "SOLID_DOUBLE_YELLOW")
    assert lane_line_type("scenarionet", "ROAD_LINE_SOMETHING_NEW")[0] == "OTHER"
    assert rdshq_lane_type("white", "short_dashed_single") == ("WHITE", "SHORT_DASHED_SINGLE")
    assert rdshq_lane_type("WHITE", "VIRTUAL") is None
    assert rdshq_lane_type("BLUE", "SOLID_SINGLE") == ("OTHER", "SOLID_SINGLE")


def test_detect_nuscenes_and_rdshq_layouts(tmp_path):
    (tmp_path / "ns" / "maps").mkdir(parents=True)
    (tmp_path / "ns" / "v1.0-mini").mkdir()
    assert detect_format(tmp_path / "ns") == "nuscenes"
    (tmp_path / "rds" / "vehicle_pose").mkdir(parents=True)
    assert detect_format(Path(f"{tmp_path / 'rds'}::clip")) == "rdshq"


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([None, ("WHITE", "SOLID_SINGLE"), ("YELLOW", "SOLID_GROUP")]), max_size=30))
def test_painted_runs_partition_the_painted_vertices(types):
    runs = split_painted_runs(types)
    covered = [i for a, b in runs for i in range(a, b)]
    assert covered == sorted(set(covered))  # disjoint, in order
    assert all(b - a >= 2 and all(types[i] is not None for i in range(a, b)) for a, b in runs)
    painted = [i for i, t in enumerate(types) if t is not None]
    isolated = [i for i in painted if i not in covered]  # only single painted vertices are left out
    assert all((i == 0 or types[i - 1] is None) and (i + 1 == len(types) or types[i + 1] is None) for i in isolated)


def test_check_increasing_spans_the_whole_int64_range() -> None:
    # A difference of int64 nanoseconds overflows; the check must compare, not subtract.
    wide = np.array([-(2**63) + 2, 2, 2**63 - 1], dtype=np.int64)
    assert check_increasing(wide, "src", "t").tolist() == wide.tolist()
    with pytest.raises(AvsimInputError, match="at index 1"):
        check_increasing(np.array([2**63 - 1, -(2**63) + 2], dtype=np.int64), "src", "t")


@pytest.mark.parametrize(
    ("src", "expected"),
    [("root", ("root", None)), ("root::", ("root", None)), ("root::scene-1", ("root", "scene-1")), ("a::b::c", ("a", "b::c"))],
)
def test_split_selector(src: str, expected: tuple[str, str | None]) -> None:
    assert split_selector(src) == (Path(expected[0]), expected[1])
