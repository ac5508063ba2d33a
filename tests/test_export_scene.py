"""`avsim export-scene`: the sample as a glTF 2.0 binary scene, read back with trimesh."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import trimesh  # a core dependency (pyproject): a missing install fails here

from avsim.cli import main
from avsim.edit.export_scene import FRUSTUM_DEPTH_M, export_scene, select_times_s, to_gltf_axes
from avsim.edit.preview import EGO_RGB
from avsim.maps import style
from avsim.scenario.io import save_scenario
from avsim.scenario.sample import make_sample_scenario

T_S = 4.0
MAP_TYPES = ("lane_lines", "road_boundaries", "wait_lines", "poles", "drivable_areas", "road_markings", "crosswalks", "traffic_signs")


@pytest.fixture(scope="module")
def scn():
    return make_sample_scenario(duration_s=6.0)


@pytest.fixture(scope="module")
def glb(scn, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("glb") / "scene.glb"
    export_scene(scn, out, [T_S])
    return out


@pytest.fixture(scope="module")
def loaded(glb):
    return trimesh.load(str(glb), force="scene")


def _gltf_json(data: bytes) -> dict:
    magic, version, length = struct.unpack("<4sII", data[:12])
    chunk_len, chunk_type = struct.unpack("<I4s", data[12:20])
    assert magic == b"glTF" and version == 2 and length == len(data) and chunk_type == b"JSON"
    return json.loads(data[20 : 20 + chunk_len])


def _node_points(scene, node: str) -> np.ndarray:
    matrix, geom = scene.graph[node]
    return trimesh.transform_points(np.asarray(scene.geometry[geom].vertices), matrix)


def _bounds(points: np.ndarray) -> np.ndarray:
    return np.stack([points.min(0), points.max(0)])


def _agents_at_t(scn) -> dict[str, np.ndarray]:
    """Each agent present at T_S: its box corners (8, 3), interpolated here by hand (linear)."""
    t_ns = scn.start_ns + int(T_S * 1e9)
    a = scn.agents
    out = {}
    for tid in a.track_ids:
        rows = np.flatnonzero(a.track_id == tid)
        ts = a.timestamps_ns[rows]
        if not ts[0] <= t_ns <= ts[-1]:
            continue
        k = min(int(np.searchsorted(ts, t_ns, "right")) - 1, len(rows) - 2) if len(rows) > 1 else 0
        corners = a.select(rows).corners_m()
        if len(rows) == 1:
            out[str(tid)] = corners[0]
            continue
        w = (t_ns - ts[k]) / (ts[k + 1] - ts[k])
        out[str(tid)] = corners[k] + w * (corners[k + 1] - corners[k])
    return out


def test_axis_mapping_is_a_rotation_to_y_up():
    p = to_gltf_axes(np.array([[1.0, 2.0, 3.0]]))[0]
    assert p.tolist() == [1.0, 3.0, -2.0]  # x stays, z up becomes +Y, y (left/north) becomes -Z


@pytest.mark.slow
def test_glb_is_valid_gltf2_with_axes_in_asset_extras(glb, scn):
    tree = _gltf_json(glb.read_bytes())
    assert tree["asset"]["version"] == "2.0"
    extras = tree["asset"]["extras"]["avsim"]
    assert "+Y up" in extras["axes"] and extras["units"] == "m" and extras["times_s"] == [T_S]
    assert extras["scenario_id"] == scn.scenario_id
    assert all(p["mode"] in (1, 4) for m in tree["meshes"] for p in m["primitives"])  # lines, triangles


def test_one_node_per_map_element_and_agent(loaded, scn):
    names = set(loaded.graph.nodes_geometry)
    for kind in MAP_TYPES:
        got = {n for n in names if n.startswith(f"map/{kind}/") and not n.endswith("/outline")}
        assert len(got) == len(getattr(scn.map, kind)) > 0, kind
    assert {n for n in names if n.endswith("/outline")} == {f"map/crosswalks/{i}/outline" for i in scn.map.crosswalks.ids}
    expected = _agents_at_t(scn)
    assert {n for n in names if n.startswith("agents/")} == {f"agents/{t}" for t in expected}
    assert len(expected) > 10
    assert {n for n in names if n.startswith("lights/")} == {f"lights/{i}" for i in scn.map.traffic_lights.ids}
    assert {"ego/box", "ego/path"} <= names


def test_bounds_equal_map_and_agents_after_axis_mapping(loaded, scn):
    names = loaded.graph.nodes_geometry
    map_pts = np.concatenate([_node_points(loaded, n) for n in names if n.startswith("map/")])
    hd = scn.map
    raw = [hd.lane_lines.lines.points_m] + [getattr(hd, k).points_m for k in MAP_TYPES[1:-1]]
    raw.append(hd.traffic_signs.corners_m().reshape(-1, 3))
    np.testing.assert_allclose(_bounds(map_pts), _bounds(to_gltf_axes(np.concatenate(raw))), atol=0.01)
    for tid, corners in _agents_at_t(scn).items():
        np.testing.assert_allclose(_bounds(_node_points(loaded, f"agents/{tid}")), _bounds(to_gltf_axes(corners)), atol=0.01)
    ego_path = _node_points(loaded, "ego/path")
    np.testing.assert_allclose(_bounds(ego_path), _bounds(to_gltf_axes(scn.ego.world_SE3_ego.translation)), atol=0.01)
    # the whole scene: the map's ground extent holds everything in the sample
    np.testing.assert_allclose(loaded.bounds[:, [0, 2]], _bounds(to_gltf_axes(np.concatenate(raw)))[:, [0, 2]], atol=0.01)


def test_colours_follow_the_style_table(glb, loaded, scn):
    tree = _gltf_json(glb.read_bytes())
    meshes = {m["name"]: m for m in tree["meshes"]}

    def line_rgb(name: str) -> list[list[int]]:
        acc = tree["accessors"][meshes[name]["primitives"][0]["attributes"]["COLOR_0"]]
        return [acc["min"][:3], acc["max"][:3]]

    ll = scn.map.lane_lines
    for k in range(len(ll)):
        rgb = list(style.lane_style(ll.lane_type(k)).rgb)
        assert line_rgb(f"map/lane_lines/{ll.ids[k]}") == [rgb, rgb]
    rb = list(style.ROAD_BOUNDARY_RGB)
    assert line_rgb(f"map/road_boundaries/{scn.map.road_boundaries.ids[0]}") == [rb, rb]
    cw = loaded.geometry[f"map/crosswalks/{scn.map.crosswalks.ids[0]}"].visual.vertex_colors[:, :3]
    assert (cw == style.CROSSWALK_RGB).all()
    classes = {str(t): str(c) for t, c in zip(scn.agents.track_id, scn.agents.object_class)}
    for tid in _agents_at_t(scn):
        front, back = style.BOX_RGB[classes[tid]]
        colors = loaded.geometry[f"agents/{tid}"].visual.vertex_colors[:, :3]
        assert (colors[[0, 1, 4, 5]] == front).all() and (colors[[2, 3, 6, 7]] == back).all()
    assert (loaded.geometry["ego/box"].visual.vertex_colors[:, :3] == EGO_RGB).all()


def test_a_frustum_per_camera_at_the_rig_mounting(loaded, scn):
    t_ns = scn.start_ns + int(T_S * 1e9)
    world_SE3_ego = scn.ego.pose_at(np.array([t_ns]))[0]
    for v, name in enumerate(scn.rig.names):
        pts = _node_points(loaded, f"cameras/{name}")
        centre = to_gltf_axes(world_SE3_ego.apply(scn.rig.ego_SE3_camera[v].translation))[0]
        d = np.linalg.norm(pts - centre, axis=1)
        assert d.min() < 0.01 and abs(d.max() - FRUSTUM_DEPTH_M) < 0.01, name
        # the frustum opens along the camera's optical axis (camera +z)
        axis = to_gltf_axes(world_SE3_ego.rotation @ scn.rig.ego_SE3_camera[v].rotation[:, 2])[0]
        assert ((pts[d > 1.0] - centre) @ axis).min() > 0, name
    assert len([n for n in loaded.graph.nodes_geometry if n.startswith("cameras/")]) == len(scn.rig)


@pytest.mark.slow
def test_same_input_same_bytes(glb, tmp_path):
    out = tmp_path / "again.glb"
    export_scene(make_sample_scenario(duration_s=6.0), out, [T_S])
    assert out.read_bytes() == glb.read_bytes()


def test_frames_give_one_node_group_per_step(scn, tmp_path):
    times = select_times_s(scn, frames=(30, 36), every=2)
    assert times == pytest.approx([1.0, 32 / 30, 34 / 30])
    out = tmp_path / "frames.glb"
    summary = export_scene(scn, out, times)
    scene = trimesh.load(str(out), force="scene")
    groups = sorted({n.split("/")[0] for n in scene.graph.nodes_geometry if n.startswith("t=")})
    assert groups == ["t=1.00s", "t=1.07s", "t=1.13s"]
    for g in groups:
        assert f"{g}/ego/box" in scene.graph.nodes_geometry
        assert len([n for n in scene.graph.nodes_geometry if n.startswith(f"{g}/cameras/")]) == len(scn.rig)
    assert summary.agent_nodes == len([n for n in scene.graph.nodes_geometry if "/agents/" in n]) > 0


@pytest.mark.parametrize("args, field", [(["--time", "99"], "--time"), (["--time", "-1"], "--time"),
                                         (["--frames", "5:900"], "--frames"), (["--frames", "3x"], "--frames"),
                                         (["--frames", "0:9", "--every", "0"], "--every")])  # fmt: skip
def test_bad_times_exit_1_with_one_line_and_no_file(scn, tmp_path, capsys, args, field):
    folder = tmp_path / "s"
    save_scenario(scn, folder)
    out = tmp_path / "x.glb"
    assert main(["export-scene", str(folder), str(out), *args]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".x*"))


def test_cli_writes_the_scene(scn, tmp_path, capsys):
    folder = tmp_path / "s"
    save_scenario(scn, folder)
    out = tmp_path / "scene.glb"
    assert main(["export-scene", str(folder), str(out), "--time", "1.5"]) == 0
    assert "wrote" in capsys.readouterr().err
    tree = _gltf_json(out.read_bytes())
    assert tree["asset"]["extras"]["avsim"]["times_s"] == [1.5]
    assert main(["export-scene", str(folder), str(tmp_path / "scene.gltf")]) == 2
