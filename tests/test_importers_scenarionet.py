"""ScenarioNet importer on the real pickles in ../shared/data/scenarionet/."""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np
import pytest

from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.registry import convert
from avsim.scenario.importers.safe_pickle import load_pickle
from avsim.scenario.importers.scenarionet import light_state_changes

NUSCENES_0103 = "sd_nuscenes_v1.0-mini_scene-0103.pkl"
WAYMO = "sd_waymo_v1.2_eb4b91b10ca94ff2.pkl"


@pytest.fixture(scope="module")
def scenes(shared_data):
    return {name: convert(shared_data / "scenarionet" / name, "scenarionet") for name in (NUSCENES_0103, WAYMO)}


@pytest.mark.slow
def test_nuscenes_scene_0103(scenes, shared_data):
    sc = scenes[NUSCENES_0103]
    raw = load_pickle(shared_data / "scenarionet" / NUSCENES_0103)
    assert sc.scenario_id == "scene-0103"
    assert sc.rig.names[0] == "CAM_FRONT" and len(sc.rig) == 6  # named default nuScenes rig
    ego = raw["tracks"]["ego"]["state"]
    np.testing.assert_allclose(sc.ego.world_SE3_ego.translation[:, :2], ego["position"][:, :2])
    np.testing.assert_allclose(sc.ego.world_SE3_ego.yaw_rad, np.arctan2(np.sin(ego["heading"]), np.cos(ego["heading"])), atol=1e-9)
    assert np.all(sc.ego.world_SE3_ego.translation[:, 2] == 0.0)  # nuScenes ego z = 0
    assert sc.ego.rate_hz == pytest.approx(10.0)
    # every valid non-ego observation, classes kept from nuScenes and collapsed for rendering
    n_valid = sum(int(np.asarray(t["state"]["valid"]).astype(bool).sum()) for k, t in raw["tracks"].items() if k != "ego")
    assert len(sc.agents) == n_valid
    assert "human.pedestrian.adult" in set(sc.agents.source_class)
    counts = Counter(sc.agents.object_class[np.unique(sc.agents.track_id, return_index=True)[1]])
    assert counts["Car"] >= 50 and counts["Pedestrian"] >= 40 and counts["Cyclist"] >= 5
    # lane-line stand-ins: broken white dividers, solid yellow road dividers; boundary_* -> road boundaries
    types = Counter(sc.map.lane_lines.lane_types())
    assert types == {"WHITE LONG_DASHED_SINGLE": 106, "YELLOW SOLID_SINGLE": 43}
    assert len(sc.map.road_boundaries) == 6 and all(i.startswith("boundary_") for i in sc.map.road_boundaries.ids)
    assert np.all(sc.map.lane_lines.lines.points_m[:, 2] == 0.0)


def test_waymo_scenarionet_file(scenes, shared_data):
    sc = scenes[WAYMO]
    assert sc.rig.names[0] == "FRONT" and sc.metadata["dataset"] == "waymo"
    counts = sc.map.element_counts()
    assert counts["crosswalks"] == 5 and counts["road_boundaries"] == 33 and counts["traffic_signs"] == 1
    assert counts["lanes"] == 102 and counts["drivable_areas"] == 9 and counts["road_markings"] == 1
    types = Counter(sc.map.lane_lines.lane_types())
    assert types["YELLOW DASHED_SOLID"] == 2 and types["YELLOW SOLID_GROUP"] == 1  # passing / solid double yellow
    # 14 signalised lanes; states are change points of GO/STOP sequences
    assert len(np.unique(sc.lights.light_id)) == 14
    assert set(sc.lights.state) <= {"red", "yellow", "green", "unknown"} and "green" in set(sc.lights.state)
    assert len(sc.metadata["traffic_light_stop_points_m"]) == 14
    # ego origin = bottom of the SDC box
    raw = load_pickle(shared_data / "scenarionet" / WAYMO)
    sdc = raw["tracks"][raw["metadata"]["sdc_id"]]["state"]
    np.testing.assert_allclose(sc.ego.world_SE3_ego.translation[0, 2], sdc["position"][0, 2] - sdc["height"][0] / 2, rtol=1e-6)


@pytest.mark.slow
def test_all_real_scenarionet_files_convert(shared_data):
    files = sorted((shared_data / "scenarionet").glob("*.pkl"))
    assert len(files) == 8
    for f in files:
        sc = convert(f)  # auto-detected
        assert len(sc.agents) > 0 and not sc.map.is_empty() and sc.ego.duration_s > 19.0


def test_light_state_changes():
    t = np.arange(5, dtype=np.int64) * 100
    times, states = light_state_changes(["LANE_STATE_GO", "LANE_STATE_GO", "LANE_STATE_CAUTION", "LANE_STATE_STOP", "LANE_STATE_STOP"], t)
    assert times.tolist() == [0, 200, 300] and states.tolist() == ["green", "yellow", "red"]


def _minimal():
    n = 3
    state = {"position": np.zeros((n, 3)), "heading": np.zeros(n), "length": np.ones(n), "width": np.ones(n),
             "height": np.ones(n), "valid": np.ones(n, bool)}  # fmt: skip
    state["position"][:, 0] = [0.0, 1.0, 2.0]
    return {
        "id": "s", "length": n, "dynamic_map_states": {},
        "metadata": {"dataset": "waymo", "ts": np.array([0.0, 0.1, 0.2]), "sdc_id": "0"},
        "tracks": {"0": {"type": "VEHICLE", "state": state, "metadata": {}}},
        "map_features": {"1": {"type": "ROAD_LINE_SOLID_SINGLE_WHITE", "polyline": np.array([[0.0, 0, 0], [1, 0, 0]])}},
    }  # fmt: skip


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d["tracks"]["0"]["state"]["position"].__setitem__((1, 0), np.nan), "position"),
        (lambda d: d["metadata"].__setitem__("ts", np.array([0.0, 0.2, 0.1])), "metadata.ts"),
        (lambda d: d["metadata"].__setitem__("sdc_id", "9"), "metadata.sdc_id"),
        (lambda d: d.pop("map_features"), "map_features"),
        (lambda d: d["map_features"]["1"].__setitem__("polyline", np.array([[np.inf, 0, 0], [1, 0, 0]])), "polyline"),
    ],
    ids=["nan-pose", "non-monotonic-ts", "no-ego", "no-map", "inf-map"],
)
def test_bad_scenarionet_input(tmp_path, mutate, field):
    d = _minimal()
    convert_ok = tmp_path / "ok.pkl"
    convert_ok.write_bytes(pickle.dumps(d))
    assert len(convert(convert_ok, "scenarionet").ego.timestamps_ns) == 3
    mutate(d)
    bad = tmp_path / "bad.pkl"
    bad.write_bytes(pickle.dumps(d))
    with pytest.raises(AvsimInputError) as err:
        convert(bad, "scenarionet")
    assert str(err.value).startswith(str(bad)) and field in str(err.value)


def test_nuscenes_lanes_get_rails_from_their_surface_polygons(scenes, shared_data):
    """ScenarioNet's nuScenes lanes carry a surface polygon, not widths: rails lie on its edge."""
    import shapely

    sc = scenes[NUSCENES_0103]
    raw = load_pickle(shared_data / "scenarionet" / NUSCENES_0103)
    lane_ids = [k for k, v in raw["map_features"].items() if str(v["type"]).startswith("LANE")]
    assert len(sc.map.lanes) == len(lane_ids) == 358
    half_widths = []
    with_polygon = 0
    for k, lane_id in enumerate(sc.map.lanes.ids):
        left_half = np.linalg.norm(sc.map.lanes.left[k][:, :2] - sc.map.lanes.centre[k][:, :2], axis=1)
        if "polygon" not in raw["map_features"][lane_id]:  # connectors: nominal width
            np.testing.assert_allclose(left_half, 1.75)
            continue
        with_polygon += 1
        polygon = shapely.Polygon(np.asarray(raw["map_features"][lane_id]["polygon"])[:, :2])
        inside = shapely.contains_xy(polygon, *sc.map.lanes.centre[k][:, :2].T)
        if not inside.any():
            continue
        centre = sc.map.lanes.centre[k][inside, :2]
        for rail in (sc.map.lanes.left[k], sc.map.lanes.right[k]):
            # where the centre line runs inside the surface, each rail vertex sits on its
            # boundary, or at the nominal half width where no edge lies within 5 m
            d = shapely.distance(shapely.points(rail[inside, :2]), polygon.exterior)
            nominal = np.isclose(np.linalg.norm(rail[inside, :2] - centre, axis=1), 1.75)
            assert np.all((d < 0.1) | nominal), (lane_id, d)  # half widths are clipped to >= 0.1 m
            assert (d < 1e-3).mean() > 0.3, lane_id
        half_widths.append(left_half)
    assert with_polygon == 158
    median = np.median(np.concatenate(half_widths))
    assert 1.2 < median < 2.5  # nuScenes (Boston / Singapore) lanes are ~3-4.5 m wide
