"""Native format: lossless save/load round trips, determinism, atomic and safe writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from avsim.core.agents import AgentTracks
from avsim.core.cameras import FThetaCamera, PinholeCamera
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.lights import TrafficLightStates
from avsim.core.rig import CameraRig, camera_mount
from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3, quat_normalize, yaw_to_quat
from avsim.maps import Cuboids, HDMap, LaneLines, Lanes, Polygons, Polylines
from avsim.scenario import Scenario
from avsim.scenario.io import (
    FORMAT_NAME,
    SCENARIO_JSON,
    SCHEMA_VERSION,
    TABLE_COLUMNS,
    TABLE_FILES,
    load_scenario,
    save_scenario,
    scenario_differences,
)
from avsim.scenario.io_schema import MAX_BOX_SIZE_M, MAX_WORLD_COORD_M


def _rotation(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random proper rotations (n, 3, 3) via QR, with every last bit in use."""
    q, r = np.linalg.qr(rng.normal(size=(n, 3, 3)))
    q = q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]
    q[np.linalg.det(q) < 0, :, 0] *= -1.0
    return q


def _polylines(rng: np.random.Generator, prefix: str, k: int, cls: type = Polylines, n_min: int = 2) -> Polylines:
    arrays = [rng.normal(scale=50.0, size=(int(rng.integers(n_min, n_min + 5)), 3)) for _ in range(k)]
    return cls.from_list([f"{prefix}{i}" for i in range(k)], arrays)


def _cuboids(rng: np.random.Generator, prefix: str, k: int) -> Cuboids:
    return Cuboids(
        np.array([f"{prefix}{i}" for i in range(k)]),
        rng.normal(scale=30.0, size=(k, 3)),
        rng.uniform(0.1, 2.0, size=(k, 3)),
        quat_normalize(rng.normal(size=(k, 4))),
    )


def make_map(seed: int = 0, vertex_attributes: bool = True) -> HDMap:
    rng = np.random.default_rng(seed)
    lines = _polylines(rng, "ll", 3)
    m = len(lines.points_m)
    vertex = (
        (rng.choice(["WHITE", "YELLOW"], size=m), rng.choice(["SOLID_SINGLE", "DASHED_SOLID", "ÜNKNOWN-ß"], size=m))
        if vertex_attributes
        else (None, None)
    )
    lane_lines = LaneLines(lines, np.array(["WHITE", "YELLOW", "OTHER"]), np.array(["SOLID_SINGLE", "SOLID_GROUP", "x"]), *vertex)
    lanes = Lanes(np.array(["lane0", "lane1"]), _polylines(rng, "L", 2), _polylines(rng, "R", 2), _polylines(rng, "C", 2))
    return HDMap(
        lane_lines=lane_lines,
        lanes=lanes,
        road_boundaries=_polylines(rng, "rb", 2),
        wait_lines=_polylines(rng, "wl", 1),
        crosswalks=_polygons(rng, "cw", 2),
        road_markings=_polygons(rng, "rm", 1),
        poles=_polylines(rng, "pole", 2),
        traffic_signs=_cuboids(rng, "sign", 2),
        traffic_lights=_cuboids(rng, "tl", 3),
        drivable_areas=_polygons(rng, "da", 1),
    )


def _polygons(rng: np.random.Generator, prefix: str, k: int) -> Polygons:
    return _polylines(rng, prefix, k, Polygons, n_min=3)


def make_rig() -> CameraRig:
    pinhole = PinholeCamera(1600, 900, 1266.417203046554, 1266.417203046554, 816.2670197447984, 491.50706579294757,
                            (-0.1, 0.01, 1e-4, -2e-4, 1e-3))  # fmt: skip
    ftheta = FThetaCamera(1280, 720, 640.123, 360.456, (0.0, 1.6e-3, 1e-8, 2.5e-10, 0.0, 0.0), True, (1.0, 1e-4, -2e-4))
    fwd = FThetaCamera(1920, 1080, 960.5, 540.25, (0.0, 1500.0, 0.0, -40.0, 0.0, 0.0), False)
    poses = [camera_mount(1.7, 0.1, 1.5, 0.1, 0.05), camera_mount(2.0, -0.9, 1.0, -1.2, 0.07, 0.01),
             camera_mount(-0.8, 0.0, 1.5, np.pi, 0.02)]  # fmt: skip
    return CameraRig(("CAM_FRONT", "camera_cross_right_120fov", "rear"), (pinhole, ftheta, fwd), SE3.stack(poses))


def make_scenario(seed: int = 0, *, vertex_attributes: bool = True, n_poses: int = 25) -> Scenario:
    """A small scenario that uses every field of every table (values with all bits in use)."""
    rng = np.random.default_rng(seed)
    t0 = 1_700_000_000_123_456_789
    ts = t0 + np.cumsum(rng.integers(30_000_000, 40_000_000, size=n_poses)).astype(np.int64)
    ego = EgoTrajectory(ts, SE3(_rotation(rng, n_poses), rng.normal(scale=100.0, size=(n_poses, 3))))
    rows = []
    for k, cls in enumerate(["car", "Bus", "pedestrian", "bicycle"]):
        n = int(rng.integers(1, 6))
        times = np.sort(rng.choice(ts, size=n, replace=False))
        rows += [(f"trk-{k:02d}é", cls, t) for t in times]
    n = len(rows)
    agents = AgentTracks.from_unsorted(
        [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
        rng.normal(scale=40.0, size=(n, 3)), rng.uniform(0.3, 12.0, size=(n, 3)), yaw_to_quat(rng.uniform(-np.pi, np.pi, n)),
    )  # fmt: skip
    lights = TrafficLightStates.from_unsorted(
        ["tl0", "tl0", "tl1", "tl2", "tl2"], [ts[0], ts[5], ts[0], ts[1], ts[9]], ["red", "green", "unknown", "yellow", "red"]
    )
    metadata = {"source": "unit-test", "seed": seed, "nested": {"list": [1, 2.5, None, True], "ünïcode": "✓"}, "pi": np.pi}
    return Scenario(f"scene-{seed}", make_rig(), ego, agents, make_map(seed, vertex_attributes), lights, metadata)


@pytest.fixture()
def scenario() -> Scenario:
    return make_scenario()


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


# ---- round trip ------------------------------------------------------------------------------
def test_round_trip_is_bit_exact(tmp_path: Path, scenario: Scenario) -> None:
    save_scenario(scenario, tmp_path / "s")
    loaded = load_scenario(tmp_path / "s")
    assert scenario_differences(scenario, loaded) == []
    assert loaded.rig == scenario.rig
    assert loaded.metadata == scenario.metadata
    np.testing.assert_array_equal(_bits(loaded.ego.world_SE3_ego.rotation), _bits(scenario.ego.world_SE3_ego.rotation))
    assert loaded.ego.timestamps_ns.dtype == np.int64
    assert loaded.map.lane_lines.lane_types().tolist() == scenario.map.lane_lines.lane_types().tolist()


def test_round_trip_without_vertex_attributes_and_empty_tables(tmp_path: Path) -> None:
    s = make_scenario(3, vertex_attributes=False)
    s = s.replace(agents=AgentTracks.empty(), lights=TrafficLightStates.empty(), map=s.map.replace(lanes=Lanes.empty()))
    save_scenario(s, tmp_path / "s")
    loaded = load_scenario(tmp_path / "s")
    assert scenario_differences(s, loaded) == []
    assert loaded.map.lane_lines.vertex_color is None and len(loaded.agents) == 0 and len(loaded.map.lanes) == 0


def test_scenario_differences_finds_a_one_ulp_change(scenario: Scenario) -> None:
    center = np.array(scenario.agents.center_m)
    center[1, 2] = np.nextafter(center[1, 2], np.inf)
    a = scenario.agents
    changed = scenario.replace(agents=AgentTracks(a.track_id, a.source_class, a.timestamps_ns, center, a.size_m, a.orientation))
    assert scenario_differences(scenario, changed) == ["scenario.agents.center_m: values differ"]
    assert scenario_differences(scenario, scenario.replace(metadata={"x": 1})) != []


finite = st.floats(-MAX_WORLD_COORD_M, MAX_WORLD_COORD_M, allow_subnormal=True, width=64)  # the loader's extent


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    centers=hnp.arrays(np.float64, (4, 3), elements=finite),
    sizes=hnp.arrays(np.float64, (4, 3), elements=st.floats(min_value=5e-324, max_value=MAX_BOX_SIZE_M)),
    times=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=4, max_size=4, unique=True),
    ids=st.lists(st.text(min_size=1, max_size=8).filter(lambda s: "\x00" not in s), min_size=4, max_size=4),
)
def test_agent_values_round_trip_bit_exact(tmp_path_factory, centers, sizes, times, ids) -> None:
    """Any float within the limits (subnormals, -0.0, the limits themselves), any int64 time, any string survive unchanged."""
    agents = AgentTracks.from_unsorted(ids, ids[::-1], times, centers, sizes, yaw_to_quat(np.arange(4.0)))
    s = make_scenario(1).replace(agents=agents)
    folder = tmp_path_factory.mktemp("rt") / "s"
    save_scenario(s, folder)
    loaded = load_scenario(folder)
    assert scenario_differences(s, loaded) == []
    np.testing.assert_array_equal(_bits(loaded.agents.center_m), _bits(agents.center_m))
    np.testing.assert_array_equal(_bits(loaded.agents.size_m), _bits(agents.size_m))
    assert loaded.agents.track_id.tolist() == agents.track_id.tolist()


@pytest.mark.parametrize("column, value", [("size", np.nextafter(MAX_BOX_SIZE_M, np.inf)), ("center", -2 * MAX_WORLD_COORD_M)])
def test_save_refuses_what_load_would_refuse(tmp_path: Path, column: str, value: float) -> None:
    """A value beyond the loader's limits is refused before anything is written (never a folder nobody can load)."""
    a = make_scenario(1).agents
    center, size = np.array(a.center_m), np.array(a.size_m)
    (size if column == "size" else center)[0, 0] = value
    s = make_scenario(1).replace(agents=AgentTracks(a.track_id, a.source_class, a.timestamps_ns, center, size, a.orientation))
    field = "length_m" if column == "size" else "center_x_m"
    with pytest.raises(AvsimValueError, match=f"agents.parquet: {field}: row 0 .*is not saved"):
        save_scenario(s, tmp_path / "s")
    assert os.listdir(tmp_path) == []


# ---- layout and determinism ------------------------------------------------------------------
def test_folder_layout_and_header(tmp_path: Path, scenario: Scenario) -> None:
    save_scenario(scenario, tmp_path / "s")
    assert sorted(os.listdir(tmp_path / "s")) == sorted([SCENARIO_JSON, *TABLE_FILES])
    assert os.listdir(tmp_path) == ["s"]  # no temporary left beside it
    header = json.loads((tmp_path / "s" / SCENARIO_JSON).read_text())
    assert header["format"] == FORMAT_NAME and header["schema_version"] == SCHEMA_VERSION
    assert [c["name"] for c in header["rig"]["cameras"]] == list(scenario.rig.names)
    assert header["rig"]["cameras"][0]["model"] == "pinhole" and header["rig"]["cameras"][1]["model"] == "ftheta"
    assert header["tables"]["agents.parquet"]["rows"] == len(scenario.agents)
    for name in TABLE_FILES:
        assert dict(pl.read_parquet_schema(tmp_path / "s" / name)) == TABLE_COLUMNS[name], name


def test_save_is_deterministic(tmp_path: Path) -> None:
    save_scenario(make_scenario(5), tmp_path / "a")
    save_scenario(make_scenario(5), tmp_path / "b")
    for name in [SCENARIO_JSON, *TABLE_FILES]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_progress_reports_every_file(tmp_path: Path, scenario: Scenario) -> None:
    seen: list[str] = []
    save_scenario(scenario, tmp_path / "s", progress=seen.append)
    assert sorted(seen) == sorted([SCENARIO_JSON, *TABLE_FILES])


# ---- safe writes -----------------------------------------------------------------------------
def test_existing_scenario_is_replaced(tmp_path: Path) -> None:
    save_scenario(make_scenario(1), tmp_path / "s")
    save_scenario(make_scenario(2), tmp_path / "s")
    assert load_scenario(tmp_path / "s").scenario_id == "scene-2"
    assert os.listdir(tmp_path) == ["s"]


def test_refuses_to_replace_an_unrelated_folder(tmp_path: Path, scenario: Scenario) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("precious")
    with pytest.raises(AvsimInputError, match="not an avsim scenario folder"):
        save_scenario(scenario, tmp_path / "home")
    assert (tmp_path / "home" / "thesis.tex").read_text() == "precious"
    (tmp_path / "file").write_text("x")
    with pytest.raises(AvsimInputError, match="not a folder"):
        save_scenario(scenario, tmp_path / "file")


def test_failed_write_leaves_nothing(tmp_path: Path, scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fail_on_third(name: str) -> None:
        calls.append(name)
        if len(calls) == 3:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_scenario(scenario, tmp_path / "s", progress=fail_on_third)
    assert os.listdir(tmp_path) == []


def test_empty_map_is_refused_unless_allowed(tmp_path: Path, scenario: Scenario) -> None:
    empty = scenario.replace(map=HDMap.empty())
    with pytest.raises(AvsimValueError, match="map"):
        save_scenario(empty, tmp_path / "s")
    assert not (tmp_path / "s").exists()
    save_scenario(empty, tmp_path / "s", allow_empty_map=True)
    with pytest.raises(AvsimInputError, match="map: every map_.*parquet table is empty"):
        load_scenario(tmp_path / "s")
    assert load_scenario(tmp_path / "s", allow_empty_map=True).map.is_empty()


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"shape": (1, 2)}, r"metadata.shape: tuple .*use a list"),
        ({"x": float("nan")}, r"metadata.x: nan is not finite"),
        ({"n": np.int64(3)}, r"metadata.n: int64 does not round-trip"),
        ({1: "a"}, r"metadata: key 1 is not a string"),
    ],
)
def test_metadata_must_round_trip_through_json(tmp_path: Path, scenario: Scenario, metadata: dict, message: str) -> None:
    with pytest.raises(AvsimValueError, match=message):
        save_scenario(scenario.replace(metadata=metadata), tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_failed_replace_keeps_the_old_scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_scenario(make_scenario(1), tmp_path / "s")
    before = {p.name: p.read_bytes() for p in (tmp_path / "s").iterdir()}

    def fail(name: str) -> None:
        if name == "lights.parquet":
            raise KeyboardInterrupt  # even an interrupt leaves the old folder intact

    with pytest.raises(KeyboardInterrupt):
        save_scenario(make_scenario(2), tmp_path / "s", progress=fail)
    assert {p.name: p.read_bytes() for p in (tmp_path / "s").iterdir()} == before
    assert os.listdir(tmp_path) == ["s"]
