"""nuScenes importer, through nuscenes-devkit, on a tiny nuScenes-format folder.

Real nuScenes tables are not available here. The test writes a v1.0-mini-like table folder
from the REAL calibration, ego poses and 3-D boxes in
``../shared/data/nuscenes-mmdet3d/nus_info.pkl`` (2 keyframes of log n015-2018-08-02-17-16-37),
plus a small map-expansion v1.3 JSON (synthetic geometry around the real ego position, with
divider segment types), and imports it through nuscenes-devkit.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from avsim.core.errors import AvsimInputError
from avsim.core.transforms import SE3, matrix_to_quat, yaw_to_matrix
from avsim.scenario.importers.registry import convert, detect_format
from avsim.scenario.importers.safe_pickle import load_pickle

MMDET_TO_NUSCENES = {
    "car": "vehicle.car", "truck": "vehicle.truck", "trailer": "vehicle.trailer", "bus": "vehicle.bus.rigid",
    "construction_vehicle": "vehicle.construction", "bicycle": "vehicle.bicycle", "motorcycle": "vehicle.motorcycle",
    "pedestrian": "human.pedestrian.adult", "traffic_cone": "movable_object.trafficcone", "barrier": "movable_object.barrier",
}  # fmt: skip
CAMS = ("CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_FRONT_LEFT", "CAM_BACK", "CAM_BACK_LEFT", "CAM_BACK_RIGHT")


def _tok(*parts) -> str:
    return "-".join(str(p) for p in parts)


def _global_boxes(sample: dict, classes: tuple) -> list[dict]:
    """mmdet3d (v0.x convention) lidar-frame boxes -> nuScenes global boxes.

    The fixture stores (x, y, z centre, w, l, h, yaw_mm) with yaw_mm = -yaw - pi/2 in the lidar
    frame (checked on the real file: the box heading then agrees with its velocity).
    """
    world_SE3_ego = SE3.from_matrix(np.array(sample["ego2global"]))
    ego_SE3_lidar = SE3.from_matrix(np.array(sample["lidar_points"]["lidar2ego"]))
    world_SE3_lidar = world_SE3_ego.compose(ego_SE3_lidar)
    out = []
    for inst in sample["instances"]:
        x, y, z, w, l, h, yaw_mm = inst["bbox_3d"]
        box = SE3(yaw_to_matrix(-yaw_mm - np.pi / 2), np.array([x, y, z]))
        g = world_SE3_lidar.compose(box)
        out.append({"label": classes[inst["bbox_label_3d"]], "t": g.translation, "q": g.quat, "wlh": [w, l, h]})
    return out


def _match(a: list[dict], b: list[dict]) -> dict[int, int]:
    """Greedy same-class nearest-centre matching of boxes across the two keyframes (< 2 m)."""
    pairs = sorted(
        (float(np.linalg.norm(ba["t"] - bb["t"])), i, j)
        for i, ba in enumerate(a) for j, bb in enumerate(b) if ba["label"] == bb["label"]
    )  # fmt: skip
    out, used = {}, set()
    for d, i, j in pairs:
        if d < 2.0 and i not in out and j not in used:
            out[i] = j
            used.add(j)
    return out


def write_nuscenes_fixture(info_path: Path, root: Path) -> dict:
    """Write a nuScenes dataroot (tables + map expansion) from the real nus_info.pkl."""
    info = load_pickle(info_path)
    classes = tuple(info["metainfo"]["CLASSES"])
    samples = info["data_list"]
    tables: dict[str, list[dict]] = {k: [] for k in (
        "category", "attribute", "visibility", "instance", "sensor", "calibrated_sensor", "ego_pose",
        "log", "scene", "sample", "sample_data", "sample_annotation", "map")}  # fmt: skip
    channels = {c: "camera" for c in CAMS} | {"LIDAR_TOP": "lidar"}
    _static_tables(tables, samples[0], channels)
    _sample_tables(tables, samples, channels)
    boxes = [_global_boxes(s, classes) for s in samples]
    match = _match(boxes[0], boxes[1])
    _annotation_tables(tables, samples, boxes, match)
    tokens = [s["token"] for s in samples]
    tables["scene"].append({"token": "scene0", "log_token": "log0", "nbr_samples": len(samples), "name": "scene-fixture",
                            "description": "built from mmdetection3d nus_info.pkl", "first_sample_token": tokens[0],
                            "last_sample_token": tokens[-1]})  # fmt: skip
    version = root / "v1.0-mini"
    version.mkdir(parents=True)
    for name, rows in tables.items():
        (version / f"{name}.json").write_text(json.dumps(rows))
    ego_xy = np.array(samples[0]["ego2global"])[:2, 3]
    ego_yaw = float(np.arctan2(samples[0]["ego2global"][1][0], samples[0]["ego2global"][0][0]))
    write_map_expansion(root / "maps" / "expansion" / "singapore-onenorth.json", ego_xy, ego_yaw)
    import cv2  # the devkit asserts that each log's semantic-prior mask file exists

    cv2.imwrite(str(root / "maps" / "none.png"), np.zeros((2, 2), np.uint8))
    return {"boxes": boxes, "match": match, "samples": samples}


def _static_tables(tables: dict[str, list[dict]], s0: dict, channels: dict[str, str]) -> None:
    """log, map, visibility, category, sensor and calibrated_sensor rows (calibration of sample 0)."""
    tables["log"].append({"token": "log0", "logfile": "n015-2018-08-02-17-16-37+0800", "vehicle": "n015",
                          "date_captured": "2018-08-02", "location": "singapore-onenorth"})  # fmt: skip
    tables["map"].append({"token": "map0", "log_tokens": ["log0"], "category": "semantic_prior", "filename": "maps/none.png"})
    tables["visibility"].append({"token": "4", "level": "v80-100", "description": "visibility of whole object is between 80 and 100%"})
    for name in sorted(set(MMDET_TO_NUSCENES.values())):
        tables["category"].append({"token": _tok("cat", name), "name": name, "description": name, "index": len(tables["category"])})
    for ch, modality in channels.items():
        tables["sensor"].append({"token": _tok("sensor", ch), "channel": ch, "modality": modality})
    for ch in channels:
        T = np.array(s0["lidar_points"]["lidar2ego"] if ch == "LIDAR_TOP" else s0["images"][ch]["cam2ego"])
        K = [] if ch == "LIDAR_TOP" else np.array(s0["images"][ch]["cam2img"]).tolist()
        tables["calibrated_sensor"].append({
            "token": _tok("cs", ch), "sensor_token": _tok("sensor", ch), "translation": T[:3, 3].tolist(),
            "rotation": matrix_to_quat(T[:3, :3]).tolist(), "camera_intrinsic": K})  # fmt: skip


def _sample_data_token(samples: list[dict], k: int, ch: str) -> str:
    return _tok("sd", ch, k) if ch == "LIDAR_TOP" else samples[k]["images"][ch]["sample_data_token"]


def _sample_tables(tables: dict[str, list[dict]], samples: list[dict], channels: dict[str, str]) -> None:
    """sample, ego_pose and sample_data rows (one sample_data per channel and sample, chained)."""
    tokens = [s["token"] for s in samples]
    for k, s in enumerate(samples):
        ts_us = round(s["timestamp"] * 1e6)
        tables["sample"].append({"token": s["token"], "timestamp": ts_us, "scene_token": "scene0",
                                 "prev": tokens[k - 1] if k else "", "next": tokens[k + 1] if k + 1 < len(tokens) else ""})  # fmt: skip
        T = np.array(s["ego2global"])
        for ch in channels:
            sd_tok = _sample_data_token(samples, k, ch)
            sd_ts = ts_us if ch == "LIDAR_TOP" else round(s["images"][ch]["timestamp"] * 1e6)
            tables["ego_pose"].append({"token": sd_tok, "timestamp": sd_ts, "translation": T[:3, 3].tolist(),
                                       "rotation": matrix_to_quat(T[:3, :3]).tolist()})  # fmt: skip
            prev_tok = _sample_data_token(samples, k - 1, ch) if k else ""
            next_tok = _sample_data_token(samples, k + 1, ch) if k + 1 < len(samples) else ""
            tables["sample_data"].append({
                "token": sd_tok, "sample_token": s["token"], "ego_pose_token": sd_tok, "calibrated_sensor_token": _tok("cs", ch),
                "timestamp": sd_ts, "fileformat": "pcd" if ch == "LIDAR_TOP" else "jpg", "is_key_frame": True,
                "height": 0 if ch == "LIDAR_TOP" else 900, "width": 0 if ch == "LIDAR_TOP" else 1600,
                "filename": s["lidar_points"]["lidar_path"] if ch == "LIDAR_TOP" else s["images"][ch]["img_path"],
                "prev": prev_tok, "next": next_tok})  # fmt: skip


def _annotation_tables(tables: dict[str, list[dict]], samples: list[dict], boxes: list[list[dict]],
                       match: dict[int, int]) -> None:
    """instance and sample_annotation rows; matched boxes of the two samples share an instance."""
    instance_of: dict[tuple[int, int], str] = {}
    for i in range(len(boxes[0])):
        instance_of[(0, i)] = _tok("inst", 0, i)
        if i in match:
            instance_of[(1, match[i])] = _tok("inst", 0, i)
    for j in range(len(boxes[1])):
        instance_of.setdefault((1, j), _tok("inst", 1, j))
    anns_of: dict[str, list[str]] = {}
    for k, sample_boxes in enumerate(boxes):
        for i, b in enumerate(sample_boxes):
            inst = instance_of[(k, i)]
            anns_of.setdefault(inst, []).append(_tok("ann", k, i))
            tables["sample_annotation"].append({
                "token": _tok("ann", k, i), "sample_token": samples[k]["token"], "instance_token": inst,
                "visibility_token": "4", "attribute_tokens": [], "translation": b["t"].tolist(), "size": b["wlh"],
                "rotation": b["q"].tolist(), "num_lidar_pts": 10, "num_radar_pts": 0, "prev": "", "next": ""})  # fmt: skip
    labels = {instance_of[(k, i)]: b["label"] for k, sb in enumerate(boxes) for i, b in enumerate(sb)}
    for inst, anns in anns_of.items():
        tables["instance"].append({"token": inst, "category_token": _tok("cat", MMDET_TO_NUSCENES[labels[inst]]),
                                   "nbr_annotations": len(anns), "first_annotation_token": anns[0], "last_annotation_token": anns[-1]})  # fmt: skip
        by_tok = {a["token"]: a for a in tables["sample_annotation"]}
        for a, b in itertools.pairwise(anns):
            by_tok[a]["next"], by_tok[b]["prev"] = b, a


class _MapLayers:
    """The layers of a v1.3 map expansion under construction, in a local frame (origin, yaw)."""

    def __init__(self, origin_xy: np.ndarray, yaw: float) -> None:
        self.origin_xy, self.yaw = origin_xy, yaw
        self.layers: dict[str, list] = {k: [] for k in (
            "polygon", "line", "node", "drivable_area", "road_segment", "road_block", "lane", "ped_crossing", "walkway",
            "stop_line", "carpark_area", "road_divider", "lane_divider", "traffic_light", "lane_connector")}  # fmt: skip

    def world(self, x: float, y: float) -> tuple[float, float]:
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        return float(self.origin_xy[0] + c * x - s * y), float(self.origin_xy[1] + s * x + c * y)

    def node(self, x: float, y: float) -> str:
        tok = f"n{len(self.layers['node'])}"
        wx, wy = self.world(x, y)
        self.layers["node"].append({"token": tok, "x": wx, "y": wy})
        return tok

    def polygon(self, pts: list[tuple[float, float]], holes: tuple | list = ()) -> str:
        tok = f"p{len(self.layers['polygon'])}"
        self.layers["polygon"].append({"token": tok, "exterior_node_tokens": [self.node(*p) for p in pts],
                                       "holes": [{"node_tokens": [self.node(*p) for p in h]} for h in holes]})  # fmt: skip
        return tok

    def line(self, pts: list[tuple[float, float]]) -> tuple[str, list[str]]:
        tok = f"l{len(self.layers['line'])}"
        nodes = [self.node(*p) for p in pts]
        self.layers["line"].append({"token": tok, "node_tokens": nodes})
        return tok, nodes


def write_map_expansion(path: Path, origin_xy: np.ndarray, yaw: float) -> None:
    """A small v1.3 map expansion: a straight two-lane road along the ego heading.

    Lane divider at y=0 (local frame) with per-node segment types: two DOUBLE_DASHED_WHITE
    nodes, one NIL, two SINGLE_SOLID_WHITE (so it splits into two painted runs); road divider
    at y=+3.5 (no type); a drivable area with a hole; a crossing; a stop line; a traffic light;
    and one lane with an arcline path and divider-segment rails.
    """
    m = _MapLayers(origin_xy, yaw)
    _add_road_features(m)
    _add_lane(m)
    sx, sy = m.world(-40, -1.75)
    data = {
        "version": "1.3",
        "canvas_edge": [3000.0, 3000.0],
        **m.layers,
        "arcline_path_3": {"lane_0": [{"start_pose": [sx, sy, yaw], "end_pose": list(m.world(40, -1.75)) + [yaw],
                                       "shape": "LSL", "radius": 999.0, "segment_length": [0.0, 80.0, 0.0]}]},
        "connectivity": {"lane_0": {"incoming": [], "outgoing": []}},
    }  # fmt: skip
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))


def _add_road_features(m: _MapLayers) -> None:
    """Lane and road dividers, the drivable area, a crossing, a stop line and a traffic light."""
    layers = m.layers
    ld_line, ld_nodes = m.line([(-40, 0), (-20, 0), (0, 0), (20, 0), (40, 0)])
    types = ["DOUBLE_DASHED_WHITE", "DOUBLE_DASHED_WHITE", "NIL", "SINGLE_SOLID_WHITE", "SINGLE_SOLID_WHITE"]
    segments = [{"node_token": n, "segment_type": t} for n, t in zip(ld_nodes, types)]
    layers["lane_divider"].append({"token": "lane_divider_0", "line_token": ld_line, "lane_divider_segments": segments})
    rd_line, _ = m.line([(-40, 3.5), (40, 3.5)])
    layers["road_divider"].append({"token": "road_divider_0", "line_token": rd_line, "road_segment_token": None})
    da = m.polygon([(-50, -4), (50, -4), (50, 8), (-50, 8)], holes=[[(10, 4), (14, 4), (14, 6), (10, 6)]])
    layers["drivable_area"].append({"token": "drivable_area_0", "polygon_tokens": [da]})
    pc = m.polygon([(25, -4), (29, -4), (29, 8), (25, 8)])
    layers["ped_crossing"].append({"token": "ped_crossing_0", "polygon_token": pc, "road_segment_token": None})
    sl = m.polygon([(22, -3.5), (24, -3.5), (24, 0), (22, 0)])
    layers["stop_line"].append({"token": "stop_line_0", "polygon_token": sl, "stop_line_type": "TRAFFIC_LIGHT",
                                "ped_crossing_tokens": [], "traffic_light_tokens": ["traffic_light_0"], "road_block_token": None})  # fmt: skip
    tl_line, _ = m.line([(30, -5), (30, -5.3)])
    wx, wy = m.world(30, -5)
    layers["traffic_light"].append({"token": "traffic_light_0", "line_token": tl_line, "traffic_light_type": "VERTICAL",
                                    "from_road_block_token": None, "items": [],
                                    "pose": {"tx": wx, "ty": wy, "tz": 4.5, "rx": 0.0, "ry": 0.0, "rz": m.yaw + np.pi}})  # fmt: skip


def _add_lane(m: _MapLayers) -> None:
    """One car lane with divider-segment rails and edge lines."""
    lane_poly = m.polygon([(-40, -3.5), (40, -3.5), (40, 0), (-40, 0)])
    left = [{"node_token": m.node(x, 0), "segment_type": "DOUBLE_DASHED_WHITE"} for x in (-40, 0, 40)]
    right = [{"node_token": m.node(x, -3.5), "segment_type": "SINGLE_SOLID_WHITE"} for x in (-40, 0, 40)]
    edge_a, _ = m.line([(-40, -3.5), (-40, 0)])
    edge_b, _ = m.line([(40, -3.5), (40, 0)])
    m.layers["lane"].append({"token": "lane_0", "polygon_token": lane_poly, "lane_type": "CAR", "from_edge_line_token": edge_a,
                             "to_edge_line_token": edge_b, "left_lane_divider_segments": left, "right_lane_divider_segments": right})  # fmt: skip


@pytest.fixture(scope="module")
def nuscenes_root(shared_data: Path, tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("nuscenes")
    fixture = write_nuscenes_fixture(shared_data / "nuscenes-mmdet3d" / "nus_info.pkl", root)
    return root, fixture


def test_fixture_box_convention_matches_velocity(shared_data):
    """The mmdet3d yaw convention used to build the tables is the one in the real file."""
    info = load_pickle(shared_data / "nuscenes-mmdet3d" / "nus_info.pkl")
    agree = []
    for inst in info["data_list"][0]["instances"]:
        vx, vy = inst["velocity"]
        if np.hypot(vx, vy) > 0.5:
            yaw = -inst["bbox_3d"][6] - np.pi / 2
            agree.append(np.cos(yaw - np.arctan2(vy, vx)) > 0.9)
    assert len(agree) >= 3 and np.mean(agree) > 0.8


def test_nuscenes_imports_real_calibration_and_boxes(nuscenes_root):
    root, fixture = nuscenes_root
    assert detect_format(root) == "nuscenes"
    sc = convert(root, "nuscenes")
    samples = fixture["samples"]
    # ego: the two real ego poses, z = 0, at the keyframe times (plus the camera sample_data poses
    # between them, see tests/test_capture_time.py)
    keyframe_ns = [round(s["timestamp"] * 1e6) * 1000 for s in samples]
    at_keyframes = np.isin(sc.ego.timestamps_ns, keyframe_ns)
    assert at_keyframes.sum() == 2 and at_keyframes[0] and at_keyframes[-1]
    np.testing.assert_allclose(sc.ego.world_SE3_ego.translation[at_keyframes], [np.array(s["ego2global"])[:3, 3] for s in samples], atol=1e-9)
    assert sc.ego.timestamps_ns[0] == round(samples[0]["timestamp"] * 1e6) * 1000
    # rig: six real calibrated cameras, OpenCV frame; CAM_FRONT looks along ego +x
    assert set(sc.rig.names) == set(CAMS)
    front = sc.rig.camera("CAM_FRONT")
    K = np.array(samples[0]["images"]["CAM_FRONT"]["cam2img"])
    assert (front.width_px, front.height_px) == (1600, 900)
    np.testing.assert_allclose(front.K, K, atol=1e-9)
    cam2ego = np.array(samples[0]["images"]["CAM_FRONT"]["cam2ego"])
    np.testing.assert_allclose(sc.rig.extrinsic("CAM_FRONT").as_matrix(), cam2ego, atol=1e-6)  # float32 source
    assert sc.rig.extrinsic("CAM_FRONT").rotation[:, 2] @ np.array([1.0, 0, 0]) > 0.99
    # agents: every real box, 2 Hz keyframes kept as they are, sizes reordered to (l, w, h)
    n_boxes = sum(len(b) for b in fixture["boxes"])
    assert len(sc.agents) == n_boxes
    assert len(sc.agents.track_ids) == n_boxes - len(fixture["match"])
    assert set(np.unique(sc.agents.timestamps_ns)) == {round(s["timestamp"] * 1e6) * 1000 for s in samples}
    car = fixture["boxes"][0][0]
    row = np.flatnonzero(np.all(np.isclose(sc.agents.center_m, car["t"], atol=1e-9), axis=1))
    assert len(row) == 1
    np.testing.assert_allclose(sc.agents.size_m[row[0]], [car["wlh"][1], car["wlh"][0], car["wlh"][2]])
    assert sc.agents.object_class[row[0]] == "Car" and sc.agents.source_class[row[0]] == "vehicle.car"
    assert {"Car", "Pedestrian"} <= set(sc.agents.object_class)
    # frames agree: most real boxes of keyframe 0 land inside some calibrated camera's image
    at0 = sc.agents.select(sc.agents.timestamps_ns == sc.ego.timestamps_ns[0])
    seen = np.zeros(len(at0), bool)
    for name in sc.rig.names:
        world_SE3_cam = sc.ego.world_SE3_ego[0].compose(sc.rig.extrinsic(name))
        _, _, inside = sc.rig.camera(name).project(world_SE3_cam.inverse().apply(at0.center_m))
        seen |= inside
    assert seen.mean() > 0.5


def test_nuscenes_map_expansion_divider_types(nuscenes_root):
    root, _ = nuscenes_root
    sc = convert(root, "nuscenes")
    m = sc.map
    types = dict(zip(m.lane_lines.ids, m.lane_lines.lane_types()))
    # NIL vertex splits the lane divider into two painted runs with their own types
    assert types["lane_divider_0#0"] == "WHITE LONG_DASHED_SINGLE"
    assert types["lane_divider_0#1"] == "WHITE SOLID_SINGLE"
    assert types["road_divider_0"] == "YELLOW SOLID_SINGLE"
    counts = m.element_counts()
    assert counts["drivable_areas"] == 1 and counts["road_boundaries"] == 2  # outer ring + hole
    assert counts["crosswalks"] == 1 and counts["wait_lines"] == 1 and counts["traffic_lights"] == 1
    assert counts["lanes"] == 1
    wait = m.wait_lines[0]
    assert np.isclose(np.linalg.norm(wait[1] - wait[0]), 3.5, atol=1e-6)  # long midline of the stop area
    np.testing.assert_allclose(m.traffic_lights.center_m[0, 2], 4.5)
    assert len(sc.lights) == 0


def test_nuscenes_round_trip(nuscenes_root, tmp_path):
    from avsim.scenario.io import load_scenario, save_scenario, scenario_differences

    root, _ = nuscenes_root
    sc = convert(root, "nuscenes")
    save_scenario(sc, tmp_path / "out")
    assert scenario_differences(sc, load_scenario(tmp_path / "out")) == []


def test_nuscenes_scene_selection_and_errors(nuscenes_root, tmp_path):
    root, _ = nuscenes_root
    assert convert(f"{root}::scene-fixture", "nuscenes").scenario_id == "scene-fixture"
    with pytest.raises(AvsimInputError, match="no scene named"):
        convert(f"{root}::scene-9999", "nuscenes")
    with pytest.raises(AvsimInputError, match="scene.json"):
        convert(tmp_path, "nuscenes")
