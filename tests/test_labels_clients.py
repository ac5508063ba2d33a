"""The label files read by the programs perception teams feed them to (issues 41, 53), each scoring itself perfectly:

- COCO: pycocotools' `COCO` and `COCOeval`, against the ground truth itself and against boxes derived from
  the masks (`mask.toBbox`): AP 1.0 for bbox and segm;
- `boxes3d.json`: nuscenes-devkit's `load_prediction` (all five `meta` flags), and its detection eval's attribute
  error (`accumulate`, `calc_tp`) of the labels against themselves: 0 (every attribute one of its class's);
- OpenLane: the official evaluator's own per-file and per-lane steps (`openlane_reference`: a 3x3
  intrinsic, every in-range lane counted), and a camera-visible-only lane detector (the points each image shows)
  at F = 1 on every camera whose lanes the evaluator can count (`openlane_cameras`), by the restated evaluator
  (`test_eval_reference_impl.lane_frame_reference`) and by `avsim eval lanes`;
- `avsim labels-convert`: the standard files rebuilt from the compact tables, byte for byte.

On the sample (7 f-theta cameras) and on the real Argoverse 2 log of ../shared/data (pinhole, real map).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import openlane_reference as olr
import pytest
from test_eval_reference_impl import lane_frame_reference

from avsim.cli import main

CLIP = "avsim_sample_seed0"


@pytest.fixture(scope="module")
def sample_labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("clients")
    assert main(["sample", str(root / "s"), "--duration-s", "1"]) == 0
    assert main(["labels", str(root / "s"), str(root / "out"), "--fps", "10", "--size", "320x180", "--label-files", "both"]) == 0
    return root / "out" / CLIP / "labels"


@pytest.fixture(scope="module")
def av2_labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conftest import DATA_DIR

    logs = sorted((DATA_DIR / "av2" / "sensor").glob("*")) if (DATA_DIR / "av2" / "sensor").is_dir() else []
    if not logs:
        pytest.skip(f"no Argoverse 2 sensor log under {DATA_DIR} (real data is not shipped with avsim)")
    root = tmp_path_factory.mktemp("clients_av2")
    assert main(["convert", str(logs[0]), str(root / "s")]) == 0
    assert main(["labels", str(root / "s"), str(root / "out"), "--fps", "1", "--frames", "4", "--size", "x480", "--label-files", "both"]) == 0
    (folder,) = (root / "out").glob("*/labels")
    return folder


def _cameras(folder: Path) -> list[str]:
    return json.loads((folder / "index.json").read_text())["cameras"]


# ---- COCO -------------------------------------------------------------------------------------------
def check_coco(folder: Path) -> int:
    """COCOeval of every camera's file against itself and against the masks' boxes; returns the annotations seen."""
    from pycocotools import mask as mask_utils
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    seen = at_edge = 0
    for cam in _cameras(folder):
        gt = COCO(str(folder / "coco" / f"{cam}.json"))
        anns = gt.loadAnns(gt.getAnnIds())
        if not anns:
            continue
        seen += len(anns)
        for a in anns:  # the box is pycocotools' own box of the mask, to the bit
            assert a["bbox"] == mask_utils.toBbox(a["segmentation"]).tolist(), (cam, a["id"])
            at_edge += a["bbox"][0] == 0 or a["bbox"][1] == 0
        from_masks = [{"image_id": a["image_id"], "category_id": a["category_id"], "score": 1.0,
                       "bbox": mask_utils.toBbox(a["segmentation"]).tolist()} for a in anns]  # fmt: skip
        itself = [{"image_id": a["image_id"], "category_id": a["category_id"], "score": 1.0, "bbox": a["bbox"]} for a in anns]
        segm = [{"image_id": a["image_id"], "category_id": a["category_id"], "score": 1.0, "segmentation": a["segmentation"]}
                for a in anns]  # fmt: skip
        for kind, dets in (("bbox", itself), ("bbox", from_masks), ("segm", segm)):
            ev = COCOeval(gt, gt.loadRes(dets), kind)
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
            assert ev.stats[0] == pytest.approx(1.0) and ev.stats[1] == pytest.approx(1.0), (cam, kind, ev.stats[:2])
    assert at_edge > 0  # boxes on the first image row / column start at 0 (they started at -0.5)
    return seen


@pytest.mark.e2e
def test_coco_scores_ap_one_against_itself_and_the_mask_boxes(sample_labels: Path) -> None:
    assert check_coco(sample_labels) > 100


# ---- nuScenes ---------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_boxes3d_loads_with_nuscenes_devkit_with_all_meta_flags(sample_labels: Path) -> None:
    from nuscenes.eval.common.loaders import load_prediction
    from nuscenes.eval.detection.data_classes import DetectionBox

    boxes, meta = load_prediction(str(sample_labels / "boxes3d.json"), 500, DetectionBox)
    assert set(meta) == {"use_camera", "use_lidar", "use_radar", "use_map", "use_external"}
    assert all(isinstance(v, bool) for v in meta.values()) and meta["use_camera"]
    index = json.loads((sample_labels / "index.json").read_text())
    assert boxes.sample_tokens == [f["sample_token"] for f in index["frames"]]
    assert sum(len(boxes[t]) for t in boxes.sample_tokens) > 50


# ---- OpenLane ---------------------------------------------------------------------------------------
def check_openlane(folder: Path, tmp_path: Path) -> dict[str, tuple[int, float]]:
    """Every camera's files through the evaluator's steps, and a camera-visible-only lane detector (each lane's points
    the image shows, near-to-far) scored by the restated evaluator and by `avsim eval lanes`.

    Returns:
        camera -> (lanes the evaluator counts, the detector's F by the restated evaluator; 1.0 when none is counted).
    """
    from avsim.evaluation.jobs import run_lanes

    out = {}
    for cam in _cameras(folder):
        stats = np.zeros(6)
        pred_dir = tmp_path / "pred" / cam
        pred_dir.mkdir(parents=True)
        for path in sorted((folder / "openlane" / cam).glob("*.json")):
            doc = json.loads(path.read_text())
            lanes, vis, cats, P_g2im = olr.ground_lanes(doc)
            assert P_g2im.shape == (3, 4) and np.isfinite(P_g2im).all()
            counted = olr.counted_gt(lanes, vis)
            assert counted == olr.in_range(lanes, vis), (cam, path.name)  # every in-range lane counted
            pred = [olr.near_to_far(lanes[k][vis[k] > 0]) for k in range(len(lanes)) if (vis[k] > 0).sum() > 1]
            pred_cats = [cats[k] for k in range(len(lanes)) if (vis[k] > 0).sum() > 1]
            r = lane_frame_reference(lanes, cats, vis, pred, pred_cats)
            stats += np.array(r[:6], float)
            (pred_dir / path.name).write_text(json.dumps({"file_path": doc["file_path"], "lane_lines": [
                {"xyz": p.tolist(), "category": c} for p, c in zip(pred, pred_cats)]}))  # fmt: skip
        f_score = 1.0
        if stats[3]:  # the camera's frames have lanes in the evaluator's range
            recall, precision = stats[0] / stats[3], stats[1] / stats[4]
            f_score = 2 * recall * precision / (recall + precision) if recall + precision else 0.0
            assert stats[2] == stats[5], (cam, stats)  # categories
            ours = run_lanes(folder / "openlane" / cam, pred_dir).document
            assert ours["f_score"] == pytest.approx(f_score) and ours["recall"] == pytest.approx(recall), (cam, ours)
        out[cam] = (int(stats[3]), f_score)
    return out


def check_supported_cameras(folder: Path, tmp_path: Path, min_lanes: int) -> dict[str, tuple[int, float]]:
    """F = 1 on every camera index.json lists in `openlane_cameras` (each with at least `min_lanes` counted), and no
    lane counted on the others (cameras looking across the road)."""
    index = json.loads((folder / "index.json").read_text())
    scores = check_openlane(folder, tmp_path)
    for cam, (counted, f_score) in scores.items():
        if cam in index["openlane_cameras"]:
            assert counted >= min_lanes and f_score >= 0.99, (cam, counted, f_score)
        else:
            assert counted == 0, (cam, counted)
    return scores


@pytest.mark.e2e
def test_openlane_files_pass_the_evaluators_steps_and_a_perfect_predictor_scores_one(sample_labels: Path, tmp_path: Path) -> None:
    scores = check_supported_cameras(sample_labels, tmp_path, min_lanes=1)
    assert len(scores) == 7 and all(f == 1.0 for _, f in scores.values()) and sum(n for n, _ in scores.values()) > 100
    assert sorted(json.loads((sample_labels / "index.json").read_text())["openlane_cameras"]) == sorted(scores)  # every cosmos camera


@pytest.mark.e2e
def test_openlane_intrinsic_of_an_ftheta_camera_is_its_pinhole_at_the_principal_point(sample_labels: Path) -> None:
    from avsim.core.cameras import camera_from_dict

    for cam in _cameras(sample_labels):
        doc = json.loads((sample_labels / "openlane" / cam / "000000.json").read_text())
        camera = camera_from_dict(doc["camera_model"])
        assert camera.model == "ftheta" and doc["intrinsic_model"] == "ftheta_pinhole_equivalent"
        K = np.array(doc["intrinsic"])
        near_axis = np.array([[0.02, -0.015, 10.0], [-0.01, 0.03, 25.0]])
        uv = (near_axis @ K.T)[:, :2] / near_axis[:, 2:]
        np.testing.assert_allclose(uv, camera.project(near_axis)[0], atol=1e-4)


# ---- real data --------------------------------------------------------------------------------------
@pytest.mark.realdata
@pytest.mark.e2e
def test_real_av2_labels_are_read_by_the_clients(av2_labels: Path, tmp_path: Path) -> None:
    assert check_coco(av2_labels) > 20
    scores = check_supported_cameras(av2_labels, tmp_path / "lanes", min_lanes=1)
    index = json.loads((av2_labels / "index.json").read_text())
    assert sorted(set(scores) - set(index["openlane_cameras"])) == ["ring_side_left", "ring_side_right"]  # 99 deg off the heading
    assert sum(n for n, _ in scores.values()) > 20
    assert check_convert(av2_labels, tmp_path / "convert") == 1 + 4 + 1 + 7 + 7 * 4
    errors = attribute_error(av2_labels / "boxes3d.json")
    assert {"car", "pedestrian"} <= set(errors) and all(v == 0.0 for v in errors.values()), errors
    doc = json.loads((av2_labels / "openlane" / "ring_front_center" / "000000.json").read_text())
    assert doc["intrinsic_model"] == "pinhole" and np.array(doc["intrinsic"]).shape == (3, 3)


# ---- compact layout -----------------------------------------------------------------------------------
def compact_copy(folder: Path, dst: Path) -> Path:
    """`folder` (written with --label-files both) as the compact write alone leaves it: index.json and the tables (and images)."""
    import shutil

    from avsim.render.labels import compact
    from avsim.render.labels.merge import index_files
    from avsim.render.labels.records import write_json

    dst.mkdir(parents=True)
    for name in compact.COMPACT_FILES.values():
        shutil.copyfile(folder / name, dst / name)
    if (folder / "images").is_dir():
        shutil.copytree(folder / "images", dst / "images")
    index = json.loads((folder / "index.json").read_text())
    write_json(dst / "index.json", {**index, "layout": "compact", "files": index_files("compact", "images" in index["files"])})
    return dst


def check_convert(folder: Path, tmp_path: Path) -> int:
    """`avsim labels-convert` of the compact part of `folder` gives every file of `folder`, byte for byte; returns the files compared."""
    work = compact_copy(folder, tmp_path / "convert")
    assert main(["labels-convert", str(work)]) == 0
    files = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(work) for p in work.rglob("*") if p.is_file())
    for rel in files:
        assert (work / rel).read_bytes() == (folder / rel).read_bytes(), rel
    return len(files)


@pytest.mark.e2e
def test_labels_convert_writes_the_standard_files_byte_for_byte(sample_labels: Path, tmp_path: Path) -> None:
    from avsim.render.labels import standard

    assert check_convert(sample_labels, tmp_path) == 1 + 4 + 1 + 7 + 7 * 11  # index, tables, boxes3d.json, COCO, OpenLane
    # --drop-compact: the folder `--label-files standard` writes (index.json included)
    assert main(["labels", str(sample_labels.parents[2] / "s"), str(tmp_path / "std"), "--fps", "10", "--size", "320x180",
                 "--label-files", "standard"]) == 0  # fmt: skip
    direct = tmp_path / "std" / CLIP / "labels"
    work = compact_copy(sample_labels, tmp_path / "drop")
    assert main(["labels-convert", str(tmp_path / "drop"), "--drop-compact"]) == 0
    assert sorted(p.relative_to(work) for p in work.rglob("*") if p.is_file()) == sorted(p.relative_to(direct) for p in direct.rglob("*") if p.is_file())
    assert all((work / p.relative_to(direct)).read_bytes() == p.read_bytes() for p in direct.rglob("*") if p.is_file())
    # the readers give the standard documents back: the OpenLane files' exact bytes (final newline included)
    for cam in _cameras(sample_labels):
        docs = list(standard.openlane_documents(sample_labels, cam))
        assert len(docs) == 11 and all((sample_labels / "openlane" / cam / f"{f:06d}.json").read_text() == t for f, t in docs)
        assert standard.coco_document(sample_labels, cam) == json.loads((sample_labels / "coco" / f"{cam}.json").read_text())
    assert standard.boxes3d_document(sample_labels) == json.loads((sample_labels / "boxes3d.json").read_text())
    # a layout 2 folder (float32 tables without world-frame boxes) is refused in one line
    old = compact_copy(sample_labels, tmp_path / "v2")
    index = json.loads((old / "index.json").read_text())
    (old / "index.json").write_text(json.dumps({**index, "layout_version": 2}))
    assert main(["labels-convert", str(old)]) == 1


@pytest.mark.e2e
def test_evaluators_read_a_compact_folder_as_the_standard_files(sample_labels: Path, tmp_path: Path) -> None:
    from avsim.evaluation.jobs import run_lanes, run_let

    scenario = sample_labels.parents[2] / "s"
    cam = "camera_front_wide_120fov"
    compact_only = compact_copy(sample_labels, tmp_path / "c")
    a, b = run_lanes(compact_only / "openlane" / cam, scenario).document, run_lanes(sample_labels / "openlane" / cam, scenario).document
    # (the scenario's lanes are whole; the files' ground truth is what the image shows: recall 1, a few predictions longer)
    assert a == b and a["recall"] == pytest.approx(1.0) and a["f_score"] > 0.95
    let = run_let(scenario, compact_only).document["headline"]
    assert let == run_let(scenario, sample_labels / "boxes3d.json").document["headline"] and let["ap"] == pytest.approx(1.0)


# ---- nuScenes attributes -------------------------------------------------------------------------------
def attribute_error(boxes3d: Path) -> dict[str, float]:
    """nuscenes-devkit's attribute error (`accumulate` + `calc_tp`, the detection eval's own steps) of the labels scored
    against themselves, per class that has ground truth; every attribute is one of its class's (the devkit's list)."""
    from nuscenes.eval.common.loaders import load_prediction
    from nuscenes.eval.common.utils import center_distance
    from nuscenes.eval.detection.algo import accumulate, calc_tp
    from nuscenes.eval.detection.data_classes import DetectionBox
    from nuscenes.eval.detection.utils import detection_name_to_rel_attributes

    boxes, _ = load_prediction(str(boxes3d), 10_000, DetectionBox)
    out = {}
    for name in sorted({b.detection_name for b in boxes.all}):
        assert all(b.attribute_name in detection_name_to_rel_attributes(name) or (not detection_name_to_rel_attributes(name) and
                   b.attribute_name == "") for b in boxes.all if b.detection_name == name), name  # fmt: skip
        if not detection_name_to_rel_attributes(name):
            continue
        md = accumulate(boxes, boxes, name, center_distance, 2.0)
        out[name] = float(calc_tp(md, 0.1, "attr_err"))
    return out


@pytest.mark.e2e
def test_nuscenes_attribute_error_of_the_labels_is_zero(sample_labels: Path) -> None:
    errors = attribute_error(sample_labels / "boxes3d.json")
    assert errors and all(v == 0.0 for v in errors.values()), errors


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", ["png", "jpg"])
def test_images_beside_coco_are_what_a_detector_trainer_reads(tmp_path: Path, fmt: str) -> None:
    import cv2
    from pycocotools.coco import COCO

    from avsim.core.video import read_video

    cam = "camera_front_wide_120fov"
    assert main(["sample", str(tmp_path / "s"), "--duration-s", "1"]) == 0
    args = ["--frames", "3", "--size", "320x180", "--cameras", cam]
    assert main(["render", str(tmp_path / "s"), str(tmp_path / "out"), *args, "--labels", "--images", fmt]) == 0
    folder = tmp_path / "out" / CLIP / "labels"
    assert not (folder / "boxes3d.json").exists() and (folder / "annotations.parquet").is_file()  # compact, plus COCO for the images
    coco = COCO(str(folder / "coco" / f"{cam}.json"))
    video = read_video(tmp_path / "out" / CLIP / f"{CLIP}.{cam}.mp4")
    for img in coco.loadImgs(coco.getImgIds()):
        assert img["file_name"] == f"images/{cam}/{img['id']:06d}.{fmt}"
        pixels = cv2.imread(str(folder / img["file_name"]))[..., ::-1]
        assert pixels.shape == (img["height"], img["width"], 3) == (180, 320, 3)
        assert np.abs(pixels.astype(int) - video[img["id"]]).mean() < 3.0  # the frame the video holds (both lossy but png)
    if fmt == "png":  # lossless: the renderer's own frame
        from avsim.render.geometry.scene import SceneRenderer
        from avsim.scenario.io import load_scenario

        frame = SceneRenderer(load_scenario(tmp_path / "s"), cameras=[cam], size=(320, 180)).render_camera(1, 0)
        assert np.array_equal(cv2.imread(str(folder / "images" / cam / f"000001.{fmt}"))[..., ::-1], frame)


def test_run_options_carry_the_label_layout_and_images(tmp_path: Path) -> None:
    from avsim.core.errors import AvsimInputError
    from avsim.jobs.kinds import kind_options
    from avsim.jobs.options import render_options

    opts = render_options(kind_options("labels", {"label_files": "both", "images": "jpg"}, "t"), tmp_path, labels_only=True)
    assert (opts.label_files, opts.label_images, opts.exact_size) == ("both", "jpg", False)
    assert render_options({}, tmp_path).label_files == "compact"
    with pytest.raises(AvsimInputError, match="label_files"):
        render_options({"label_files": "zip"}, tmp_path)
