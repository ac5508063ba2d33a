"""The label files read by the programs perception teams feed them to (issue 41), each scoring itself perfectly:

- COCO: pycocotools' `COCO` and `COCOeval`, against the ground truth itself and against boxes derived from
  the masks (`mask.toBbox`): AP 1.0 for bbox and segm;
- `boxes3d.json`: nuscenes-devkit's `load_prediction` (all five `meta` flags);
- OpenLane: the official evaluator's own per-file and per-lane steps (`openlane_reference`: a 3x3
  intrinsic, every in-range lane counted) and a near-to-far perfect predictor at F = 1, by the
  restated evaluator (`test_eval_reference_impl.lane_frame_reference`) and by `avsim eval lanes`.

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
def check_openlane(folder: Path, tmp_path: Path) -> tuple[int, int]:
    """Every camera's files through the evaluator's steps; a near-to-far perfect predictor at F = 1.

    Returns:
        (files read, lanes counted).
    """
    from avsim.evaluation.jobs import run_lanes

    files = counted_total = 0
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
            files += 1
            counted_total += len(counted)
        if stats[3]:  # the camera's frames have lanes in the evaluator's range
            recall, precision = stats[0] / stats[3], stats[1] / stats[4]
            assert recall == 1.0 and precision == 1.0 and stats[2] == stats[5], (cam, stats)
            ours = run_lanes(folder / "openlane" / cam, pred_dir).document
            assert ours["f_score"] == pytest.approx(1.0) and ours["recall"] == pytest.approx(1.0), (cam, ours)
    return files, counted_total


@pytest.mark.e2e
def test_openlane_files_pass_the_evaluators_steps_and_a_perfect_predictor_scores_one(sample_labels: Path, tmp_path: Path) -> None:
    files, counted = check_openlane(sample_labels, tmp_path)
    assert files == 7 * 11 and counted > 100


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
    files, counted = check_openlane(av2_labels, tmp_path)
    assert files == 7 * 4 and counted > 20
    doc = json.loads((av2_labels / "openlane" / "ring_front_center" / "000000.json").read_text())
    assert doc["intrinsic_model"] == "pinhole" and np.array(doc["intrinsic"]).shape == (3, 3)


# ---- compact layout -----------------------------------------------------------------------------------
@pytest.mark.e2e
def test_compact_tables_give_the_standard_documents_back(sample_labels: Path, tmp_path: Path) -> None:
    from avsim.evaluation.jobs import run_lanes, run_let
    from avsim.render.labels import compact

    assert compact.is_compact(sample_labels)
    for cam in _cameras(sample_labels):  # OpenLane: the very bytes (lanes and poses are stored in float64)
        docs = list(compact.openlane_documents(sample_labels, cam))
        assert len(docs) == 11 and all((sample_labels / "openlane" / cam / f"{f:06d}.json").read_text() == t + "\n" for f, t in docs)
        std, ours = json.loads((sample_labels / "coco" / f"{cam}.json").read_text()), compact.coco_document(sample_labels, cam)
        assert ours["images"] == std["images"] and len(ours["annotations"]) == len(std["annotations"])
        for a, b in zip(ours["annotations"], std["annotations"]):  # COCO: the same, extras within float32
            assert {k: v for k, v in a.items() if not isinstance(v, (float, list)) or k == "bbox"} == {
                k: v for k, v in b.items() if not isinstance(v, (float, list)) or k == "bbox"}  # fmt: skip
            np.testing.assert_allclose(np.array(a["corners_px"], float), np.array(b["corners_px"], float), atol=2e-3, rtol=1e-6)
    std, ours = json.loads((sample_labels / "boxes3d.json").read_text()), compact.boxes3d_document(sample_labels)
    assert ours["meta"] == std["meta"] and list(ours["results"]) == list(std["results"])
    for token, boxes in std["results"].items():
        for a, b in zip(ours["results"][token], boxes):
            assert (a["track_id"], a["detection_name"], a["cameras"]) == (b["track_id"], b["detection_name"], b["cameras"])
            np.testing.assert_allclose(a["translation"] + a["size"] + a["rotation"], b["translation"] + b["size"] + b["rotation"], atol=1e-4)
    # avsim's evaluators read the compact folder as they read the standard files
    scenario = sample_labels.parents[2] / "s"
    cam = "camera_front_wide_120fov"
    compact_only = tmp_path / "c"
    compact_only.mkdir()
    for name in ("index.json", *compact.COMPACT_FILES.values()):
        (compact_only / name).write_bytes((sample_labels / name).read_bytes())
    a, b = run_lanes(compact_only / "openlane" / cam, scenario).document, run_lanes(sample_labels / "openlane" / cam, scenario).document
    assert a == b and a["f_score"] == pytest.approx(1.0)
    let = run_let(scenario, compact_only).document["headline"]  # float32 boxes: APL within 1e-6 of the JSON's
    standard = run_let(scenario, sample_labels / "boxes3d.json").document["headline"]
    assert {k: let[k] for k in ("ap", "apl", "aph")} == pytest.approx({k: standard[k] for k in ("ap", "apl", "aph")}, abs=1e-6)
    assert let["ap"] == pytest.approx(1.0)


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
