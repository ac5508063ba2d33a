"""The parts of `avsim export nuscenes` (issue 56) on their own: nuScenes names, the LiDAR ray cast, the tables, the map.

- names: categories the devkit's detection classes take as avsim's classes do, the labels' attributes allowed for
  every category, visibility bins, camera channels of the cosmos and nuScenes rigs;
- LiDAR: the grid-accelerated ray cast against a brute-force cast over every triangle (a bumpy surface), box
  hits inside their boxes and shadows behind them, beams and range, same sweep twice, the `.pcd.bin` layout,
  `points_in_boxes` against nuscenes-devkit's `points_in_box`;
- tables: content tokens, annotation chains, a second record under one token refused, read back;
- map: the mask's pixels where nuscenes-devkit's `MapMask` looks, divider types, lane connectivity.
"""

from __future__ import annotations

import numpy as np
import pytest

from avsim.core.transforms import SE3, quat_to_matrix, yaw_to_matrix, yaw_to_quat
from avsim.render.geometry import lidar as L
from avsim.scenario.exporters import nuscenes_names as N
from avsim.scenario.exporters.nuscenes_tables import NuScenesTables, SampleBoxes, SampleDataRecord, content_token


# ---- names ------------------------------------------------------------------------------------------
def test_categories_take_the_detection_class_of_avsims_class() -> None:
    from nuscenes.eval.detection.utils import category_to_detection_name

    from avsim.core.agents import collapse_class
    from avsim.render.labels.mmdet3d_info import AVSIM_TO_NUSCENES

    for source in ("vehicle.car", "human.pedestrian.child", "REGULAR_VEHICLE", "BOX_TRUCK", "BICYCLIST", "TYPE_PEDESTRIAN", "Car", "Truck",
                   "Cyclist", "Pedestrian", "TYPE_VEHICLE", "TYPE_CYCLIST", "WHEELED_RIDER"):  # fmt: skip
        cat = N.nuscenes_category(source)
        assert cat in N.CATEGORIES
        assert category_to_detection_name(cat) == AVSIM_TO_NUSCENES[collapse_class(source)], source
    assert N.nuscenes_category("BUS") == "vehicle.bus.rigid" and N.nuscenes_category("ARTICULATED_BUS") == "vehicle.bus.bendy"
    assert N.nuscenes_category("CONSTRUCTION_CONE") == "movable_object.trafficcone"  # not vehicle.construction: it is no vehicle
    assert N.nuscenes_category("MOTORCYCLIST") == "vehicle.motorcycle" and N.nuscenes_category("BOLLARD") == "movable_object.barrier"
    assert category_to_detection_name(N.nuscenes_category("STOP_SIGN")) is None  # Others without a nuScenes class: not evaluated


def test_the_labels_attributes_fit_every_category() -> None:
    """The export writes the labels' own attribute (`labels.attributes`, by avsim's class); for every category a box
    can take, it is one the devkit allows for that category's detection class."""
    from nuscenes.eval.detection.utils import category_to_detection_name, detection_name_to_rel_attributes

    from avsim.core.agents import collapse_class
    from avsim.render.labels.attributes import nuscenes_attributes

    for cat in N.CATEGORIES:
        name = category_to_detection_name(cat)
        if name is None:
            continue  # not evaluated: any attribute
        for speed, travels in ((0.0, False), (0.1, True), (5.0, True)):
            (attr,) = nuscenes_attributes(np.array([collapse_class(cat)]), np.array(["t"]), np.array([[speed, 0.0, 0.0]]),
                                          frozenset({"t"}) if travels else frozenset())  # fmt: skip
            rel = detection_name_to_rel_attributes(name)
            assert (attr in rel) if rel else attr == "", (cat, attr)
            assert attr == "" or attr in N.ATTRIBUTES  # the attribute table holds it
    from avsim.render.labels.mmdet3d_info import NUS_ATTRIBUTES

    assert set(N.ATTRIBUTES) == set(NUS_ATTRIBUTES) - {"None"}  # the table's vocabulary is mmdetection3d's (less its "None")


def test_visibility_bins() -> None:
    got = [N.visibility_token(v) for v in (0.0, 0.3999, 0.4, 0.5999, 0.6, 0.7999, 0.8, 1.0, float("nan"))]
    assert got == ["1", "1", "2", "2", "3", "3", "4", "4", "1"]


def test_camera_channels_of_the_cosmos_and_nuscenes_rigs() -> None:
    """`avsim labels-mmdet3d --camera-names nuscenes`'s names (by heading), and the camera left over keeps a name."""
    from avsim.core.rig import named_rig
    from avsim.render.labels.nuscenes_export import camera_channels

    assert camera_channels(named_rig("cosmos")) == {
        "camera_front_wide_120fov": "CAM_FRONT", "camera_cross_right_120fov": "CAM_FRONT_RIGHT",
        "camera_rear_right_70fov": "CAM_BACK_RIGHT", "camera_rear_tele_30fov": "CAM_BACK", "camera_rear_left_70fov": "CAM_BACK_LEFT",
        "camera_cross_left_120fov": "CAM_FRONT_LEFT", "camera_front_tele_30fov": "CAM_FRONT_TELE_30FOV",
    }  # fmt: skip
    nus = named_rig("nuscenes")
    assert camera_channels(nus) == {n: n for n in nus.names}


# ---- LiDAR ------------------------------------------------------------------------------------------
def _bumpy_ground(n: int = 24, size_m: float = 120.0, seed: int = 0) -> np.ndarray:
    """A height field of triangles around the origin (z up to +/- 0.4 m)."""
    rng = np.random.default_rng(seed)
    xs = np.linspace(-size_m / 2, size_m / 2, n + 1)
    z = rng.uniform(-0.4, 0.4, (n + 1, n + 1))
    tris = []
    for i in range(n):
        for j in range(n):
            p = [np.array([xs[i + a], xs[j + b], z[i + a, j + b]]) for a, b in ((0, 0), (1, 0), (1, 1), (0, 1))]
            tris += [np.stack([p[0], p[1], p[2]]), np.stack([p[0], p[2], p[3]])]
    return np.asarray(tris)


def _brute_force_ground(origin: np.ndarray, dirs: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """The nearest triangle hit of every ray, over every triangle (numpy Moller-Trumbore)."""
    e1, e2 = tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]
    best = np.full(len(dirs), np.inf)
    for k, d in enumerate(dirs):
        p = np.cross(d, e2)
        det = np.einsum("ij,ij->i", e1, p)
        s = origin - tris[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.einsum("ij,ij->i", s, p) / det
            q = np.cross(s, e1)
            v = q @ d / det
            t = np.einsum("ij,ij->i", e2, q) / det
        ok = (np.abs(det) > 1e-12) & (u >= 0) & (u <= 1) & (v >= 0) & (u + v <= 1) & (t > 0)
        best[k] = t[ok].min() if ok.any() else np.inf
    return best


def test_grid_cast_equals_brute_force_on_a_bumpy_surface() -> None:
    tris = _bumpy_ground()
    road = L.RoadSurface.from_triangles(tris, cell_m=4.0)
    model = L.LidarModel(tuple(np.linspace(-30.67, 10.67, 8)), azimuth_step_deg=7.5, max_range_m=60.0)
    pose = SE3(yaw_to_matrix(0.3), np.array([3.0, -2.0, 0.2]))
    sweep = L.cast_sweep(model, pose, np.zeros((0, 3)), np.zeros((0, 3, 3)), np.zeros((0, 3)), road)
    world_SE3_lidar = pose.compose(model.ego_SE3_lidar)
    dirs_lidar, ring = model.rays()
    want = _brute_force_ground(world_SE3_lidar.translation, dirs_lidar @ world_SE3_lidar.rotation.T, tris)
    hit = np.isfinite(want) & (want <= 60.0) & (want >= 1.0)
    assert len(sweep.points_m) == hit.sum() > 100
    np.testing.assert_allclose(np.linalg.norm(sweep.points_m, axis=1), want[hit], rtol=1e-12, atol=1e-9)
    np.testing.assert_array_equal(sweep.ring, ring[hit])
    assert np.all(sweep.hit == L.ROAD_HIT) and np.all(sweep.intensity <= 255 * L.ROAD_REFLECTIVITY + 0.5)


def test_a_box_takes_points_inside_it_and_shadows_the_road() -> None:
    tris = np.array([[[-100, -100, 0], [100, -100, 0], [100, 100, 0]], [[-100, -100, 0], [100, 100, 0], [-100, 100, 0]]], float)
    road = L.RoadSurface.from_triangles(tris)
    model = L.nuscenes_lidar()
    ego = SE3(np.eye(3), np.zeros(3))
    centre, size = np.array([[10.0, 0.0, 0.8]]), np.array([[4.5, 1.9, 1.6]])
    rot = quat_to_matrix(yaw_to_quat(np.array([0.2])))
    sweep = L.cast_sweep(model, ego, centre, rot, size, road)
    again = L.cast_sweep(model, ego, centre, rot, size, road)
    assert sweep.pcd_bin() == again.pcd_bin()
    world = ego.compose(model.ego_SE3_lidar).apply(sweep.points_m)
    on_box = sweep.hit == 0
    assert on_box.sum() > 200 and np.all(L.points_in_boxes(world[on_box], centre, rot, size - 2 * L.BOX_HIT_INSET_M + 1e-9) == on_box.sum())
    assert L.points_in_boxes(world, centre, rot, size)[0] >= on_box.sum()
    ground = world[sweep.hit == L.ROAD_HIT]
    np.testing.assert_allclose(ground[:, 2], 0.0, atol=1e-9)
    behind = (ground[:, 0] > 13) & (np.abs(ground[:, 1]) < 0.3)  # the box's shadow on the road
    assert not behind.any()
    r = np.linalg.norm(sweep.points_m, axis=1)
    assert r.max() <= 70.0 and r.min() >= 1.0
    raw = np.frombuffer(sweep.pcd_bin(), dtype="<f4").reshape(-1, 5)
    np.testing.assert_allclose(raw[:, :3], sweep.points_m, atol=1e-4)
    assert set(np.unique(raw[:, 4]).astype(int)) <= set(range(32))


def test_beams_elevations_and_range_are_configurable() -> None:
    m16 = L.nuscenes_lidar(beams=16, azimuth_step_deg=1.0, max_range_m=30.0)
    dirs, ring = m16.rays()
    assert len(dirs) == 16 * 360 and ring.max() == 15 and m16.max_range_m == 30.0
    table = L.nuscenes_lidar(elevations_deg=(5.0, -10.0, 0.0))
    assert table.elevations_deg == (-10.0, 0.0, 5.0)  # ring 0 is the lowest beam
    np.testing.assert_allclose(np.linalg.norm(table.rays()[0], axis=1), 1.0)
    for bad in ({"elevations_deg": (95.0,)}, {"elevations_deg": ()}, {"azimuth_step_deg": 0.0}, {"max_range_m": 0.5}):
        with pytest.raises(ValueError):
            L.nuscenes_lidar(**bad)  # type: ignore[arg-type]


def test_points_in_boxes_is_the_devkits_points_in_box() -> None:
    from nuscenes.utils.data_classes import Box
    from nuscenes.utils.geometry_utils import points_in_box
    from pyquaternion import Quaternion

    rng = np.random.default_rng(1)
    pts = rng.uniform(-6, 6, (5000, 3))
    centres, sizes = rng.uniform(-3, 3, (6, 3)), rng.uniform(0.5, 4, (6, 3))
    quats = rng.normal(size=(6, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    got = L.points_in_boxes(pts, centres, quat_to_matrix(quats), sizes)
    for k in range(6):
        box = Box(centres[k], sizes[k][[1, 0, 2]], Quaternion(quats[k]))
        assert got[k] == points_in_box(box, pts.T).sum() > 0


# ---- tables -----------------------------------------------------------------------------------------
def test_tables_tokens_chains_and_conflicts(tmp_path) -> None:
    t = NuScenesTables()
    log = t.add_log("scenario-digest", "avsim-x", "boston-seaport")
    samples = t.add_scene("clip", "x", "a clip", log, [0, 500_000, 1_000_000])
    scene = t.tables["sample"][samples[0]]["scene_token"]
    cs = t.add_sensor("CAM_FRONT", "camera", SE3(np.eye(3), np.zeros(3)), np.eye(3))
    recs = [SampleDataRecord(k * 100_000, SE3(np.eye(3), np.array([k, 0.0, 0.0])), f"f{k}.jpg", k % 5 == 0, (k + 4) // 5) for k in range(11)]
    sd = t.add_channel(scene, samples, "CAM_FRONT", cs, recs)
    assert t.tables["sample_data"][sd[1]]["sample_token"] == samples[1] and t.tables["sample_data"][sd[5]]["is_key_frame"]
    box = SampleBoxes(["a"], ["vehicle.car"], ["vehicle.moving"], ["4"], np.zeros((1, 3)), np.array([[4.0, 2.0, 1.5]]),
                      np.array([[1.0, 0, 0, 0]]), [12])  # fmt: skip
    assert t.add_annotations(scene, samples, [box, box, box]) == 3
    anns = list(t.tables["sample_annotation"].values())
    assert [a["prev"] == "" for a in anns] == [True, False, False] and anns[0]["next"] == anns[1]["token"]
    assert anns[0]["size"] == [2.0, 4.0, 1.5]  # nuScenes sizes are (width, length, height)
    (inst,) = t.tables["instance"].values()
    assert inst["token"] == content_token("instance", scene, "a") and inst["nbr_annotations"] == 3
    again = NuScenesTables()
    again.add_log("scenario-digest", "avsim-x", "boston-seaport")
    assert again.tables["log"] == {log: t.tables["log"][log]}  # same content, same token
    with pytest.raises(Exception, match="two different records"):
        again.add_log("scenario-digest", "avsim-y", "boston-seaport")
    folder = tmp_path / "v1.0-test"
    folder.mkdir()
    for name, text in t.documents().items():
        (folder / f"{name}.json").write_text(text)
    assert NuScenesTables.read(folder).documents() == t.documents()


# ---- map ----------------------------------------------------------------------------------------------
def test_mask_pixels_are_where_the_devkits_map_mask_looks(tmp_path) -> None:
    import cv2
    from nuscenes.utils.map_mask import MapMask

    from avsim.maps import HDMap, Polygons
    from avsim.scenario.exporters.nuscenes_map import mask_png

    square = np.array([[10.0, 20.0, 0.0], [30.0, 20.0, 0.0], [30.0, 25.0, 0.0], [10.0, 25.0, 0.0]])
    m = HDMap.build(drivable_areas=Polygons.from_list(["d"], [square]))
    (tmp_path / "m.png").write_bytes(mask_png(m, (50.0, 40.0)))
    assert cv2.imread(str(tmp_path / "m.png"), cv2.IMREAD_UNCHANGED).shape == (400, 500)
    mask = MapMask(str(tmp_path / "m.png"))
    inside = mask.is_on_mask(np.array([10.5, 29.5, 20.0, 15.0]), np.array([20.5, 24.5, 22.0, 22.0]))
    outside = mask.is_on_mask(np.array([9.5, 31.0, 20.0, 20.0]), np.array([22.0, 22.0, 19.5, 25.5]))
    assert inside.all() and not outside.any()


def test_divider_types_and_lane_connectivity() -> None:
    from avsim.maps import HDMap, Lanes, Polylines
    from avsim.scenario.exporters.nuscenes_map import map_expansion, segment_type

    assert segment_type("WHITE", "SOLID_SINGLE") == "SINGLE_SOLID_WHITE"
    assert segment_type("WHITE", "LONG_DASHED_SINGLE") == "DOUBLE_DASHED_WHITE"
    assert segment_type("WHITE", "SOLID_GROUP") == "DOUBLE_SOLID_WHITE"
    assert segment_type("YELLOW", "DASHED_SOLID") == "SINGLE_SOLID_YELLOW"

    def lane(x0: float, x1: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        xs = np.linspace(x0, x1, 5)
        return (np.c_[xs, np.full(5, 1.75), np.zeros(5)], np.c_[xs, np.full(5, -1.75), np.zeros(5)], np.c_[xs, np.zeros(5), np.zeros(5)])

    a, b, c = lane(0, 20), lane(20, 40), lane(60, 80)
    lanes = Lanes(np.array(["a", "b", "c"]), *(Polylines.from_list(["a", "b", "c"], [x[k] for x in (a, b, c)]) for k in range(3)))
    doc = map_expansion(HDMap.build(lanes=lanes), "k", (100.0, 100.0))
    token = {rec["polygon_token"]: rec["token"] for rec in doc["lane"]}
    ids = [token[r["polygon_token"]] for r in doc["lane"]]
    assert doc["connectivity"][ids[0]]["outgoing"] == [ids[1]] and doc["connectivity"][ids[1]]["incoming"] == [ids[0]]
    assert doc["connectivity"][ids[2]] == {"incoming": [], "outgoing": []}
    assert sum(p["segment_length"][1] for p in doc["arcline_path_3"][ids[0]]) == pytest.approx(20.0)


def test_locations_go_to_the_first_four_logs_own_first() -> None:
    from avsim.render.labels.nuscenes_export import LOCATIONS, assign_locations

    got = assign_locations({"a": None, "b": "singapore-queenstown", "c": None, "d": "singapore-queenstown", "e": None, "f": None})
    assert got["b"] == "singapore-queenstown" and got["a"] == LOCATIONS[0] and got["c"] == LOCATIONS[1] and got["d"] == LOCATIONS[2]
    assert got["e"] == "avsim-e" and got["f"] == "avsim-f"  # past the four: an expansion the devkit does not know by default
    assert sorted(v for v in got.values() if v in LOCATIONS) == sorted(LOCATIONS)
