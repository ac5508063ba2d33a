"""Labels out (issue 13): labels from the renderer's projection and id buffer, scored by avsim's evaluators."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from labels_numpy import edge_box, edge_points, projected_boxes, truncation, unoccluded_pixels

from avsim.cli import main
from avsim.core.agents import box_corners
from avsim.core.cameras import PinholeCamera
from avsim.core.coco_rle import rle_decode
from avsim.core.rig import cosmos_rig
from avsim.core.transforms import SE3, matrix_to_quat
from avsim.render.geometry import projection as geo
from avsim.render.geometry.scene import FrameObjects, camera_primitives
from avsim.render.labels.boxes import FrameBoxes3D, camera_box_labels, visible_boxes
from avsim.render.labels.records import LANE_TYPE_TO_OPENLANE
from avsim.render.raster.draw import rasterize_numba
from avsim.render.raster.primitives import ray_map

FRONT = "camera_front_wide_120fov"
CLIP = "avsim_sample_seed0"


@pytest.fixture(scope="module")
def sample_dir(session_sample_1s_dir: Path) -> Path:
    return session_sample_1s_dir


# ---- synthetic scenes -----------------------------------------------------------------------------
def _boxes(center: np.ndarray, size: np.ndarray, quat: np.ndarray | None = None) -> FrameBoxes3D:
    """World-frame boxes with the world = ego frame."""
    n = len(center)
    q = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1)) if quat is None else quat
    ids = np.array([f"t{i}" for i in range(n)])
    cls = np.array(["Car"] * n)
    z = np.zeros((n, 3))
    return FrameBoxes3D(0, SE3.identity(), ids, cls, cls, center, center, size, q, q, np.zeros(n), z, z)


def _label(camera, boxes: FrameBoxes3D, cam_SE3_world: SE3 | None = None):
    pose = SE3.identity() if cam_SE3_world is None else cam_SE3_world
    objects = FrameObjects.build(boxes=(boxes.corners_world_m(), list(boxes.object_class)))
    prims = camera_primitives(camera, geo.cone_half_angle_rad(camera), pose, objects)
    rays = ray_map(camera)
    ids = np.empty((camera.height_px, camera.width_px), np.int32)
    img = rasterize_numba(prims, rays, ids_out=ids)
    n = len(boxes.track_id)
    unocc = unoccluded_pixels(prims, rays, n)
    return img, ids, camera_box_labels(camera, pose.inverse(), boxes, np.arange(n), ids, unocc)


PIN = PinholeCamera(320, 240, 200.0, 200.0, 159.5, 119.5)


def test_ids_leave_the_pixels_unchanged_and_visible_boxes_match_the_id_buffer() -> None:
    boxes = _boxes(np.array([[0.0, 0.0, 10.0], [3.0, 0.5, 20.0]]), np.array([[2.0, 2.0, 2.0], [4.0, 2.0, 1.5]]))
    img, ids, lab = _label(PIN, boxes)
    objects = FrameObjects.build(boxes=(boxes.corners_world_m(), ["Car", "Car"]))
    prims = camera_primitives(PIN, geo.cone_half_angle_rad(PIN), SE3.identity(), objects)
    np.testing.assert_array_equal(img, rasterize_numba(prims, ray_map(PIN)))
    assert ((ids >= 0) == img.any(-1)).all()  # every drawn pixel is a box here
    for m, k in enumerate(lab.box):
        ys, xs = np.nonzero(ids == k)
        assert lab.visible_px[m] == len(xs)
        assert lab.box2d_visible_px[m].tolist() == [xs.min(), ys.min(), xs.max(), ys.max()]
    counts, vb = visible_boxes(ids, 2)
    assert counts.tolist() == lab.visible_px.tolist() and (vb == lab.box2d_visible_px).all()


def test_a_box_hidden_behind_another_has_visible_fraction_zero() -> None:
    boxes = _boxes(np.array([[0.0, 0.0, 8.0], [0.0, 0.0, 30.0]]), np.array([[4.0, 4.0, 4.0], [1.0, 1.0, 1.0]]))
    _, ids, lab = _label(PIN, boxes)
    far = int(np.flatnonzero(lab.box == 1)[0])
    assert lab.unoccluded_px[far] > 0
    assert lab.visible_px[far] == 0 and lab.visible_fraction[far] == 0.0
    assert (lab.box2d_visible_px[far] == -1).all()
    near = int(np.flatnonzero(lab.box == 0)[0])
    assert lab.visible_fraction[near] == 1.0 and lab.truncation[near] == 0.0


def test_a_box_cut_by_the_image_border_has_its_truncation() -> None:
    # 4 m wide box at 10 m whose centre sits on the right image border: half of it is outside
    x = (PIN.width_px - 0.5 - PIN.cx_px) * 10.0 / PIN.fx_px
    boxes = _boxes(np.array([[x, 0.0, 10.0]]), np.array([[4.0, 2.0, 0.02]]))  # thin along z (forward): the front face only
    _, _, lab = _label(PIN, boxes)
    assert lab.truncation[0] == pytest.approx(0.5, abs=0.01)
    assert 0 < lab.visible_fraction[0] <= 1.0


@pytest.mark.parametrize("model", ["pinhole", "ftheta"])
def test_projected_corners_are_the_camera_models_projection(model: str) -> None:
    camera = PIN if model == "pinhole" else cosmos_rig().resize(320, 180).cameras[0]
    assert camera.model == model
    rot = matrix_to_quat(np.array([[np.cos(0.3), 0, np.sin(0.3)], [0, 1, 0], [-np.sin(0.3), 0, np.cos(0.3)]]))[None]
    boxes = _boxes(np.array([[1.0, 0.5, 12.0]]), np.array([[4.5, 1.8, 1.6]]), rot)
    pose = SE3.from_matrix(np.diag([1.0, 1.0, 1.0, 1.0]))
    _, _, lab = _label(camera, boxes, pose)
    corners_cam = box_corners(boxes.center_world_m, boxes.size_lwh_m, boxes.rotation_world_wxyz)[0]
    np.testing.assert_allclose(lab.corners_px[0], camera.project(corners_cam)[0], atol=1e-9)
    np.testing.assert_allclose(lab.center_px[0], camera.project(boxes.center_world_m)[0][0], atol=1e-9)


# ---- the compiled label geometry equals its numpy definition (issue 13 item 4) ----------------------
def _random_boxes(n: int, seed: int) -> FrameBoxes3D:
    """Boxes in front of, beside, crossing and behind a camera at the origin looking along +z."""
    rng = np.random.default_rng(seed)
    centre = np.c_[rng.uniform(-25, 25, n), rng.uniform(-3, 3, n), rng.uniform(-8, 60, n)]
    centre[:3] = [[0.0, 0.0, 0.4], [0.0, 0.0, -6.0], [30.0, 0.0, 5.0]]  # around the camera, behind it, far aside
    quat = rng.normal(size=(n, 4))
    quat[3:6] = [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [np.cos(0.4), 0.0, 0.0, np.sin(0.4)]]  # exact zeros
    return _boxes(centre, np.c_[rng.uniform(0.5, 12.0, n), rng.uniform(0.5, 3.0, n), rng.uniform(0.5, 4.0, n)], quat)


@pytest.mark.parametrize("model", ["pinhole", "ftheta"])
def test_compiled_box_geometry_equals_the_numpy_definition(model: str) -> None:
    from avsim.core.quat_kernels import rotated_quats
    from avsim.core.transforms import quat_to_matrix
    from avsim.render.labels.boxes import _project_box_points, _truncation_of

    camera = PIN if model == "pinhole" else cosmos_rig().resize(320, 180).cameras[0]
    boxes = _random_boxes(40, 7)
    n = len(boxes.track_id)
    lab = camera_box_labels(camera, SE3.identity(), boxes, np.arange(n), np.full((camera.height_px, camera.width_px), -1, np.int32),
                            np.ones(n, np.int64))  # fmt: skip
    none = camera_box_labels(camera, SE3.identity(), boxes, np.arange(n), np.full((camera.height_px, camera.width_px), -1, np.int32),
                             np.zeros(n, np.int64))  # fmt: skip
    assert none.corners_px.shape == (0, 8, 2) and none.box2d_full_px.shape == (0, 4) and none.rotation_camera_wxyz.shape == (0, 4)
    corners = boxes.corners_world_m()
    np.testing.assert_allclose(lab.corners_px, camera.project(corners.reshape(-1, 3))[0].reshape(n, 8, 2), rtol=0, atol=1e-9)
    full = projected_boxes(camera, corners)
    assert np.array_equal(np.isnan(lab.box2d_full_px), np.isnan(full)) and np.isnan(full).any()  # one box wholly behind
    np.testing.assert_allclose(lab.box2d_full_px, full, rtol=0, atol=1e-9)
    # each compiled step on the very same input: bit for bit
    uv, pts = _project_box_points(camera, corners, boxes.center_world_m)
    edges = edge_points(corners)
    assert np.array_equal(pts[9 * n :], edges.reshape(-1, 3))
    assert np.array_equal(edge_box(uv[9 * n :].reshape(n, -1, 2), edges), lab.box2d_full_px, equal_nan=True)
    assert np.array_equal(_truncation_of(full, camera.width_px, camera.height_px), truncation(full, camera.width_px, camera.height_px))
    R_cw = quat_to_matrix(np.array([0.5, -0.5, 0.5, -0.5])).T  # axis-aligned camera: exact zeros in the products
    for R in (R_cw, quat_to_matrix(np.array([0.9, 0.1, -0.3, 0.2])).T):
        ref = matrix_to_quat(np.einsum("ij,njk->nik", R, quat_to_matrix(boxes.rotation_world_wxyz)))
        assert rotated_quats(R, boxes.rotation_world_matrices()).tobytes() == ref.tobytes()


def test_compiled_pinhole_pixels_equal_the_camera_model() -> None:
    from avsim.render.geometry.projector import Projector, pixels_px

    p = np.random.default_rng(3).normal(size=(500, 3)) * 20
    p[:3] = [[1.0, 2.0, 0.0], [1.0, 2.0, -0.0], [-0.0, 0.0, 3.0]]  # on the camera plane; the axis
    for dist in ((0.0,) * 5, (-0.3, 0.1, 0.001, -0.002, -0.02)):
        cam = PinholeCamera(1600, 900, 1266.4, 1266.4, 816.3, 491.5, dist)
        ref, got = cam.project(p)[0], pixels_px(Projector(cam), p)
        assert np.isnan(got).any() and np.array_equal(np.isnan(got), np.isnan(ref))
        assert got[~np.isnan(got)].tobytes() == ref[~np.isnan(ref)].tobytes()


@pytest.mark.slow
def test_compiled_lane_text_equals_the_per_list_json(sample_dir: Path) -> None:
    from avsim.render import style
    from avsim.render.labels.lanes import _lane_entries, lane_lines_text, lane_points_camera, lane_table, near_lines
    from avsim.scenario.io import load_scenario

    scenario = load_scenario(sample_dir)
    table = lane_table(scenario.map.lane_lines)
    camera = cosmos_rig().resize(320, 180).cameras[0]
    R_cw = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])  # camera at the world origin looking along +x
    assert len(near_lines(table, np.zeros(2), 60.0)) == len(table.category)  # the sample's lines span the map
    for idx in (np.arange(len(table.category)), np.array([1, 4, 7, 20])):  # every line (no copy), a subset
        p_cam, vis, bounds = lane_points_camera(table, idx, camera, R_cw, np.zeros(3))
        assert p_cam.tobytes() == (np.concatenate([scenario.map.lane_lines.lines[k] for k in idx]) @ R_cw.T).tobytes()
    _, depth, inside = camera.project(p_cam)
    assert np.array_equal(vis, inside & (depth > style.NEAR_M) & (depth <= style.MAX_DEPTH_M)) and vis.any() and not vis.all()
    xyz = (p_cam @ labels_io_cv().T).T
    cat = table.category[idx]
    assert lane_lines_text(xyz, bounds, vis, cat, idx, 6) == _lane_entries(xyz, bounds, vis, cat, idx, 6)
    doc = json.loads("[" + lane_lines_text(xyz, bounds, vis, cat, idx, 6) + "]")
    assert [d["track_id"] for d in doc] == idx.tolist() and doc[0]["xyz"][0] == np.round(xyz[0, : bounds[1]], 6).tolist()
    odd = xyz.copy()
    odd[0, 0], odd[1, 1], odd[2, 2] = 1e17, 3e-7, np.nan  # beyond the compiled writer's exact range, and null
    assert lane_lines_text(odd, bounds, vis, cat, idx, 6) == _lane_entries(odd, bounds, vis, cat, idx, 6)
    assert json.loads("[" + lane_lines_text(odd, bounds, vis, cat, idx, 6) + "]")[0]["xyz"][0][0] == float(np.round(1e17, 6))


def labels_io_cv() -> np.ndarray:
    from avsim.render.labels.records import CV_TO_OPENLANE_CAM

    return CV_TO_OPENLANE_CAM


def test_openlane_categories_match_the_evaluator() -> None:
    from avsim.evaluation.lane_io import LANE_TYPE_TO_OPENLANE as EVAL_TABLE

    assert LANE_TYPE_TO_OPENLANE == EVAL_TABLE


# ---- the sample scenario, end to end ----------------------------------------------------------------
def test_exported_labels_score_perfectly_against_the_scenario(sample_dir: Path, tmp_path: Path) -> None:
    from avsim.evaluation.jobs import run_lanes, run_let

    out = tmp_path / "lab"
    assert main(["labels", str(sample_dir), str(out), "--fps", "10", "--size", "320x180", "--cameras", FRONT, "--label-files", "standard"]) == 0
    folder = out / CLIP / "labels"
    let = run_let(sample_dir, folder / "boxes3d.json").document["mean_over_classes_with_gt"]
    assert let["ap"] == pytest.approx(1.0) and let["apl"] == pytest.approx(1.0) and let["aph"] == pytest.approx(1.0)
    # the files' ground truth is the part of each lane the image shows; the scenario's lanes are whole: every file lane is
    # found (recall 1) at the same place and category, and some scenario lanes are longer than what the camera sees
    lanes = run_lanes(folder / "openlane" / FRONT, sample_dir).document
    assert lanes["recall"] == pytest.approx(1.0) and lanes["category_accuracy"] == pytest.approx(1.0) and lanes["precision"] > 0.9
    for key in ("x_error_near_m", "x_error_far_m", "z_error_near_m", "z_error_far_m"):
        assert abs(lanes[key]) < 1e-5


def test_render_labels_writes_videos_and_label_files(sample_dir: Path, tmp_path: Path) -> None:
    from pycocotools.coco import COCO

    args = [str(sample_dir), "--frames", "3", "--size", "320x180", "--cameras", FRONT]
    assert main(["render", args[0], str(tmp_path / "a"), *args[1:]]) == 0
    assert main(["render", args[0], str(tmp_path / "b"), *args[1:], "--labels", "--label-files", "standard"]) == 0
    video = f"{CLIP}/{CLIP}.{FRONT}.mp4"
    assert (tmp_path / "a" / video).read_bytes() == (tmp_path / "b" / video).read_bytes()
    folder = tmp_path / "b" / CLIP / "labels"
    index = json.loads((folder / "index.json").read_text())
    assert [f["video_frame"] for f in index["frames"]] == [0, 1, 2]
    coco = COCO(str(folder / "coco" / f"{FRONT}.json"))
    assert sorted(coco.getImgIds()) == [0, 1, 2] and coco.getAnnIds()
    for ann in coco.loadAnns(coco.getAnnIds()):
        mask = coco.annToMask(ann)
        assert int(mask.sum()) == ann["area"] == ann["visible_px"]
        assert (rle_decode(ann["segmentation"]) == mask.astype(bool)).all()
    assert len(list((folder / "openlane" / FRONT).glob("*.json"))) == 3
    assert not (folder / ".parts").exists()


@pytest.mark.parametrize("command", [["labels"], ["render", "--labels"]])
@pytest.mark.parametrize(
    ("extra", "rc", "says"),
    # frames out of range is a usage error (exit 2, click's usage lines), as for every `avsim render` option
    [(["--cameras", "no_such_camera"], 1, "no_such_camera: no such camera"), (["--frames", "500:600"], 2, "no frames selected")],
)
def test_bad_input_writes_nothing(sample_dir: Path, tmp_path: Path, capsys, command: list[str], extra: list[str], rc: int,
                                  says: str) -> None:  # fmt: skip
    out = tmp_path / "out"
    capsys.readouterr()
    assert main([command[0], str(sample_dir), str(out), *command[1:], "--size", "160x90", *extra]) == rc
    assert not out.exists()
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.strip()]
    assert says in err[-1] and "Traceback" not in "\n".join(err)
    if rc == 1:
        assert len(err) == 1


def test_render_labels_into_an_unwritable_output_is_one_line(sample_dir: Path, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    capsys.readouterr()
    args = ["--labels", "--frames", "1", "--size", "160x90", "--cameras", FRONT]
    assert main(["render", str(sample_dir), str(blocker / "out"), *args]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a_file is not a folder" in err[0] and blocker.read_text() == "not a folder"


def test_unwritable_output_is_one_line_error(sample_dir: Path, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    assert main(["labels", str(sample_dir), str(blocker / "out"), "--frames", "1"]) == 1
    assert blocker.read_text() == "not a folder"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a folder" in err[0]
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            assert main(["labels", str(sample_dir), str(locked / "out"), "--frames", "1"]) == 1
            assert not (locked / "out").exists()
        finally:
            locked.chmod(0o700)


# ---- real nuScenes calibration -------------------------------------------------------------------
@pytest.mark.realdata
def test_centres_match_the_official_mmdet3d_center2d(shared_data: Path) -> None:
    """nuScenes mono3d COCO infos (mmdetection3d test data): place the real CAM_BACK_LEFT on the real
    ego pose, put each ground-truth box in the world, and compare the exported centre pixels."""
    doc = json.loads((shared_data / "nuscenes-mmdet3d" / "nus_infos_mono3d.coco.json").read_text())
    img = doc["images"][0]
    anns = [a for a in doc["annotations"] if a["image_id"] == img["id"]]
    assert len(anns) == 5
    K = np.asarray(img["cam_intrinsic"])
    camera = PinholeCamera(img["width"], img["height"], K[0, 0], K[1, 1], K[0, 2], K[1, 2])
    ego_SE3_cam = SE3.from_quat(np.asarray(img["cam2ego_rotation"]), np.asarray(img["cam2ego_translation"]))
    world_SE3_ego = SE3.from_quat(np.asarray(img["ego2global_rotation"]), np.asarray(img["ego2global_translation"]))
    world_SE3_cam = world_SE3_ego.compose(ego_SE3_cam)
    centre_cam = np.array([a["bbox_cam3d"][:3] for a in anns])
    lhw = np.array([a["bbox_cam3d"][3:6] for a in anns])
    boxes = _boxes(world_SE3_cam.apply(centre_cam), lhw[:, [0, 2, 1]])
    _, _, lab = _label(camera, boxes, world_SE3_cam.inverse())
    expected = np.array([a["center2d"] for a in anns])
    for m, k in enumerate(lab.box):
        np.testing.assert_allclose(lab.center_px[m], expected[k, :2], atol=0.5)
        assert lab.center_depth_m[m] == pytest.approx(expected[k, 2], abs=1e-6)
    assert len(lab.box) >= 4  # the boxes in view (one may be cut off entirely)


def test_the_box_cache_belongs_to_its_labeller_not_the_process(sample_dir: Path) -> None:
    """Two scenarios whose objects could share an address (a worker labels many items) never share boxes."""
    from avsim.core.agents import AgentTracks
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.render.run.labels import Labeller, frame_record
    from avsim.scenario.io import load_scenario

    scenario = load_scenario(sample_dir)
    a = scenario.agents
    moved = scenario.replace(agents=AgentTracks(a.track_id, a.source_class, a.timestamps_ns, a.center_m + [3.0, 0.0, 0.0],
                                                a.size_m, a.orientation))  # fmt: skip
    first = Labeller.of(SceneRenderer(scenario, size=(160, 90), cameras=[FRONT]))
    second = Labeller.of(SceneRenderer(moved, size=(160, 90), cameras=[FRONT]))
    t = int(first.renderer.timestamps_ns[2])
    a, b = first.boxes.at(t), second.boxes.at(t)
    np.testing.assert_allclose(b.center_world_m - a.center_world_m, np.tile([3.0, 0.0, 0.0], (len(a.track_id), 1)))
    assert first.boxes.at(t) is a  # kept for the frame's other cameras
    rec_a, rec_b = frame_record(first, 3, 0)[1], frame_record(second, 3, 0)[1]
    assert rec_a["timestamp_ns"] == rec_b["timestamp_ns"] and len(first.boxes._frames) > 2  # the record's block is kept


@pytest.mark.e2e
def test_a_render_asked_for_another_label_layout_rewrites_the_labels(sample_dir: Path, tmp_path: Path) -> None:
    args = ["render", str(sample_dir), str(tmp_path / "out"), "--frames", "2", "--size", "160x90", "--cameras", FRONT, "--labels"]
    assert main(args) == 0
    folder = tmp_path / "out" / CLIP / "labels"
    assert json.loads((folder / "index.json").read_text())["layout"] == "compact" and not (folder / "boxes3d.json").exists()
    assert main([*args, "--label-files", "standard"]) == 0  # the videos are kept, the labels written in the new layout
    index = json.loads((folder / "index.json").read_text())
    assert index["layout"] == "standard" and (folder / "boxes3d.json").is_file() and "images" not in index["files"]
    assert main([*args, "--label-files", "standard", "--images", "png"]) == 0
    assert len(list((folder / "images" / FRONT).glob("*.png"))) == 2


def test_compact_annotation_rows_come_from_the_workers_parts_and_a_part_without_them_gets_them(tmp_path: Path) -> None:
    """The render workers write each segment's annotation rows (a parquet part); the merge only concatenates them.
    Parts written for the standard files (a render resumed with the compact layout) get their rows from the records."""
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.render.run import labels as labels_run
    from avsim.render.run.plan import FrameRange, RenderOptions, RenderPlan
    from avsim.scenario.sample import make_sample_scenario

    scenario = make_sample_scenario(seed=0, duration_s=1.0)
    opts = RenderOptions(out=tmp_path / "whole", cameras=(FRONT, "camera_rear_tele_30fov"), frames=FrameRange(0, 4), width_px=160,
                         height_px=90, labels=True)  # fmt: skip
    whole = labels_run.run_labels(scenario, opts)
    plan = RenderPlan.resolve(scenario, opts)
    renderer = SceneRenderer(scenario, rig=plan.rig, cameras=plan.cameras, sizes=plan.sizes_px, fps=plan.fps)
    for files, folder in (("compact", tmp_path / "compact"), ("standard", tmp_path / "resumed")):
        parts = labels_run._label_parts(labels_run.Labeller.of(renderer, files), folder, plan.first, plan.stop, None)
        rows = [labels_run.annotations_part(p) for _, p in parts]
        assert all(r.is_file() for r in rows) == (files == "compact") and len(parts) == 2
        labels_run.write_from_parts(scenario, opts, plan, folder, parts)
        assert (folder / "annotations.parquet").read_bytes() == (whole / "annotations.parquet").read_bytes()
        assert not (folder / ".parts").exists()
