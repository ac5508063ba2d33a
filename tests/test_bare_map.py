"""An ego and traffic for a map without a log: routes, speed profile, traffic, trajectory files, the
IDM drive, and `avsim convert` of OpenDRIVE / Lanelet2 maps end to end."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from avsim.cli import main
from avsim.core.errors import AvsimInputError
from avsim.core.trajectory import NS_PER_S
from avsim.scenario.bare_map import (
    ACCEL_MPS2,
    DECEL_MPS2,
    LATERAL_ACCEL_MPS2,
    TRAFFIC_GAP_M,
    MapOptions,
    RouteOptions,
    read_trajectory,
)
from avsim.scenario.importers.registry import convert, detect_format
from avsim.scenario.io import load_scenario

xodr_maps = pytest.importorskip("opendrive_maps", reason="scenariogeneration 0.16.7 (dev extra) writes the test maps")


@pytest.fixture(scope="module")
def junction(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return xodr_maps.junction_map(tmp_path_factory.mktemp("bare") / "junction.xodr")


def _on_route(xy: np.ndarray, route: np.ndarray) -> np.ndarray:
    a, b = route[:-1, :2], route[1:, :2]
    d = b - a
    out = []
    for q in xy:
        u = np.clip(((q - a) * d).sum(1) / np.maximum((d * d).sum(1), 1e-18), 0, 1)
        out.append(np.linalg.norm(a + u[:, None] * d - q, axis=1).min())
    return np.array(out)


def test_route_from_start_to_goal_follows_the_lanes(junction: Path) -> None:
    assert detect_format(junction) == "opendrive"
    sc = convert(junction, map_options=MapOptions(RouteOptions(start="1:0:-1", goal="3:0:1")))
    lanes = sc.metadata["ego_route_lanes"]
    assert lanes[0] == "1:0:-1" and lanes[-1] == "3:0:1" and len(lanes) == 3
    succ = sc.metadata["lane_successors"]
    assert all(b in succ[a] for a, b in zip(lanes[:-1], lanes[1:]))
    index = {str(i): k for k, i in enumerate(sc.map.lanes.ids)}
    route = np.concatenate([sc.map.lanes.centre[index[x]] for x in lanes])
    xy = sc.ego.world_SE3_ego.translation[:, :2]
    assert _on_route(xy, route).max() < 0.01
    t = (sc.ego.timestamps_ns - sc.ego.timestamps_ns[0]) / NS_PER_S
    v = np.linalg.norm(np.diff(xy, axis=0), axis=1) / np.diff(t)
    assert v[0] < 0.5 and v[-1] < 0.5  # from rest, stopping at the goal
    a = np.diff(v) / np.diff(t)[1:]
    assert a.max() <= ACCEL_MPS2 * 1.5 and a.min() >= -DECEL_MPS2 * 1.5


def test_route_by_points_and_unreachable_goal(junction: Path) -> None:
    sc = convert(junction, map_options=MapOptions(RouteOptions(start="1:0:-1", goal="3:0:1")))
    index = {str(i): k for k, i in enumerate(sc.map.lanes.ids)}
    p0 = sc.map.lanes.centre[index["1:0:-1"]][5, :2]
    p1 = sc.map.lanes.centre[index["3:0:1"]][-5, :2]
    by_points = convert(junction, map_options=MapOptions(RouteOptions(start=f"{p0[0]},{p0[1]}", goal=f"{p1[0]},{p1[1]}")))
    xy = by_points.ego.world_SE3_ego.translation[:, :2]
    assert np.linalg.norm(xy[0] - p0) < 1e-6 and np.linalg.norm(xy[-1] - p1) < 0.05
    with pytest.raises(AvsimInputError, match="no lane path from 1:0:1"):
        convert(junction, map_options=MapOptions(RouteOptions(start="1:0:1", goal="3:0:1")))  # lane 1 leaves road 1 away from the junction
    with pytest.raises(AvsimInputError, match="neither a lane id"):
        convert(junction, map_options=MapOptions(RouteOptions(start="nope", goal="3:0:1")))


def test_traffic_is_seeded_spaced_and_on_lanes(junction: Path) -> None:
    opts = MapOptions(RouteOptions(traffic=5, seed=7, duration_s=6.0))
    a, b = convert(junction, map_options=opts), convert(junction, map_options=opts)
    assert np.array_equal(a.agents.center_m, b.agents.center_m) and np.array_equal(a.ego.world_SE3_ego.translation, b.ego.world_SE3_ego.translation)
    first = a.agents.at(int(a.ego.timestamps_ns[0]))
    assert 1 <= len(first) <= 5
    pts = np.r_[first.center_m[:, :2], a.ego.world_SE3_ego.translation[:1, :2]]
    gaps = np.linalg.norm(pts[:, None] - pts[None], axis=2) + np.eye(len(pts)) * 1e9
    assert gaps.min() >= TRAFFIC_GAP_M - 1e-6
    on_lane = np.min([_on_route(first.center_m[:, :2], np.asarray(c)) for c in a.map.lanes.centre], axis=0)
    assert on_lane.max() < 0.01
    # curvature-limited: lateral acceleration of every car within the profile's bound (+ sampling slack)
    c = convert(junction, map_options=MapOptions(RouteOptions(traffic=0, seed=3)))
    xy, t = c.ego.world_SE3_ego.translation[:, :2], c.ego.timestamps_ns / NS_PER_S
    v = np.gradient(xy, t, axis=0)
    acc = np.gradient(v, t, axis=0)
    lateral = np.abs(v[:, 0] * acc[:, 1] - v[:, 1] * acc[:, 0]) / np.maximum(np.linalg.norm(v, axis=1), 1e-3)
    assert np.percentile(lateral, 95) <= LATERAL_ACCEL_MPS2 * 1.5


def test_trajectory_file(tmp_path: Path, junction: Path) -> None:
    csv = tmp_path / "ego.csv"
    csv.write_text("t_s,x_m,y_m,yaw_rad\n0,0,-1.75,0\n1,5,-1.75,0\n2,10,-1.75,0\n")
    traj = read_trajectory(csv)
    assert len(traj) == 3 and traj.duration_s == 2.0
    sc = convert(junction, map_options=MapOptions(ego_csv=csv))
    assert sc.metadata["bare_map"]["ego"] == "trajectory file" and np.allclose(sc.ego.world_SE3_ego.translation[:, 0], [0, 5, 10])
    csv.write_text("t_s,x_m,y_m\n0,0,0\n0,1,1\n")
    with pytest.raises(AvsimInputError, match="t_s: times must increase strictly"):
        read_trajectory(csv)


@pytest.mark.slow
@pytest.mark.subprocess
def test_convert_cli_drives_with_idm_and_is_deterministic(junction: Path, tmp_path: Path) -> None:
    args = ["convert", str(junction), "", "--start", "1:0:-1", "--goal", "3:0:1", "--traffic", "2", "--seed", "4", "--duration", "6"]
    for name in ("a", "b"):
        args[2] = str(tmp_path / name)
        assert main(args) == 0
    a = load_scenario(tmp_path / "a")
    assert a.metadata["sim"]["policy"] == "idm" and a.metadata["sim"]["agents"] == "idm" and a.metadata["sim"]["status"] == "completed"
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(p.name for p in (tmp_path / "b").iterdir())
    for f in (tmp_path / "a").iterdir():
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes(), f.name
    # the IDM ego drove the route: it stays on the route's lanes
    index = {str(i): k for k, i in enumerate(a.map.lanes.ids)}
    route = np.concatenate([a.map.lanes.centre[index[x]] for x in a.metadata["ego_route_lanes"]])
    assert _on_route(a.ego.world_SE3_ego.translation[:, :2], route).max() < 0.5


def _carla_maps() -> list[Path]:
    folder = os.environ.get("AVSIM_OPENDRIVE_MAPS")
    return sorted(Path(folder).glob("*.xodr")) if folder else []


@pytest.mark.slow
@pytest.mark.skipif(not _carla_maps(), reason="AVSIM_OPENDRIVE_MAPS names no folder of .xodr files (CARLA's towns)")
@pytest.mark.parametrize("path", _carla_maps(), ids=lambda p: p.stem)
def test_carla_towns_convert(path: Path) -> None:
    sc = convert(path, map_options=MapOptions(RouteOptions(traffic=5, seed=1, duration_s=5.0)))
    m = sc.map
    assert len(m.lanes) > 50 and len(m.lane_lines) > 50 and len(m.road_boundaries) > 10
    index = {str(i): k for k, i in enumerate(m.lanes.ids)}
    gaps = np.array([np.linalg.norm(m.lanes.centre[index[a]][-1] - m.lanes.centre[index[b]][0])
                     for a, bs in sc.metadata["lane_successors"].items() for b in bs])  # fmt: skip
    assert len(gaps) >= len(m.lanes) * 0.8 and np.mean(gaps < 0.002) > 0.99


def test_map_scenarios_save_and_load_losslessly(junction: Path, tmp_path: Path) -> None:
    from avsim.scenario.compare import scenario_differences
    from avsim.scenario.io import save_scenario

    sc = convert(junction, map_options=MapOptions(RouteOptions(traffic=2, seed=1, duration_s=3.0)))
    save_scenario(sc, tmp_path / "s")
    assert scenario_differences(sc, load_scenario(tmp_path / "s")) == []
