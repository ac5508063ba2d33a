"""`avsim export nuscenes` (issue 56): a labelled render as a nuScenes v1.0 dataset, tested by its consumers.

On the sample (2 s, 7 f-theta cameras, labels with JPEG images at 10 fps): nuscenes-devkit's
`NuScenes` loads it, `list_scenes` / `render_sample` / `render_sample_data` run (camera with boxes,
LiDAR top view), the boxes it projects lie on the rendered objects (against the labels' own masks,
resampled like the images), its `points_in_box` counts agree with `num_lidar_pts`, its detection-eval
steps give mAP 1 for an oracle (and 0.5 when every box is 1.5 m off), `NuScenesMap` reads the map
expansion, mmdetection3d's nuScenes info converter (restated, tests/mmdet3d_nuscenes_reference.py)
gives the infos of `avsim labels-mmdet3d`, and `avsim convert` gives the scenario back. Also: the
same input gives the same bytes, and bad input is one line with nothing written.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from nuscenes_export_checks import check_mmdet3d_infos, check_oracle, check_round_trip, check_structure, open_export

from avsim.cli import main

VERSION = "v1.0-mini"
CLIP = "avsim_sample_seed0"


@pytest.fixture(scope="module")
def sample_export(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("nuscenes_export")
    assert main(["sample", str(root / "s"), "--duration-s", "2"]) == 0
    assert main(["labels", str(root / "s"), str(root / "l"), "--fps", "10", "--size", "480x270", "--images", "jpg"]) == 0
    assert main(["export", "nuscenes", str(root / "l"), str(root / "nus"), "--scenario", str(root / "s"), "--version", VERSION]) == 0
    return {"root": root, "scenario": root / "s", "labels": root / "l" / CLIP / "labels", "out": root / "nus"}


@pytest.fixture(scope="module")
def nusc(sample_export: dict[str, Path]):
    return open_export(sample_export["out"], VERSION)


# ---- the tables, the files, the devkit's renders ----------------------------------------------------
@pytest.mark.e2e
def test_devkit_loads_lists_and_renders(nusc, sample_export: dict[str, Path], tmp_path: Path, capsys) -> None:
    import matplotlib

    matplotlib.use("Agg")
    counts = check_structure(nusc, sample_export["out"])
    assert counts["samples"] == 5 and len(nusc.scene) == 1  # 2 s at 2 Hz: 0, 0.5, ..., 2 s
    assert {s["channel"] for s in nusc.sensor} == {"CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK_RIGHT", "CAM_BACK", "CAM_BACK_LEFT",
                                                   "CAM_FRONT_LEFT", "CAM_FRONT_TELE_30FOV", "LIDAR_TOP"}  # fmt: skip
    assert counts["sample_data"] == 21 * 7 + 5  # every camera frame, one sweep per keyframe
    nusc.list_scenes()
    assert CLIP in capsys.readouterr().out
    sample = nusc.sample[2]
    nusc.render_sample(sample["token"], out_path=str(tmp_path / "sample.png"), verbose=False)
    nusc.render_sample_data(sample["data"]["CAM_FRONT"], out_path=str(tmp_path / "cam.png"), verbose=False)
    nusc.render_sample_data(sample["data"]["LIDAR_TOP"], out_path=str(tmp_path / "lidar.png"), verbose=False, nsweeps=1)
    for name in ("sample.png", "cam.png", "lidar.png"):
        assert (tmp_path / name).stat().st_size > 10_000
    readme = (sample_export["out"] / "README.md").read_text()
    assert "Everything here is synthetic" in readme and CLIP in readme


@pytest.mark.e2e
def test_boxes_sit_on_the_rendered_objects(nusc, sample_export: dict[str, Path]) -> None:
    """The devkit's projection of each annotation into each keyframe image is where the renderer drew the box:
    its 8 corners are the labels' `corners_px` (rendered f-theta pixels) carried onto the exported pinhole
    (within 0.02 px), and the box's visible pixels (the labels' mask, resampled as the image was) lie inside
    it, grown by the drawn edges' width."""
    import polars as pl
    from nuscenes.utils.geometry_utils import view_points

    from avsim.core.cameras import camera_from_dict
    from avsim.core.coco_rle import rle_decode
    from avsim.render.labels.nuscenes_images import Rectifier
    from avsim.scenario.exporters.nuscenes_tables import content_token

    manifest = json.loads((sample_export["out"] / "avsim_export.json").read_text())
    (scene_token, scene), = manifest["scenes"].items()
    index = json.loads((sample_export["labels"] / "index.json").read_text())
    anns = pl.read_parquet(sample_export["labels"] / "annotations.parquet")
    frame_of = {(f["timestamp_ns"] + 500) // 1000 + scene["time_offset_us"]: f["frame_index"] for f in index["frames"]}
    corners_checked, inside = 0, []
    for cam, channel in scene["channels"].items():
        model = camera_from_dict(index["camera_models"][cam])
        rect = Rectifier(model)
        for sample in nusc.sample:
            _, boxes, K = nusc.get_sample_data(sample["data"][channel])
            frame = frame_of[sample["timestamp"]]
            rows = anns.filter((pl.col("camera").cast(pl.String) == cam) & (pl.col("image_id") == frame))
            by_instance = {content_token("instance", scene_token, r["track_id"]): r for r in rows.iter_rows(named=True)}
            for b in boxes:
                r = by_instance.get(nusc.get("sample_annotation", b.token)["instance_token"])
                if r is None:
                    continue
                corners_cam = b.corners()
                if np.any(corners_cam[2] <= 0.5) or np.any(~np.isfinite(r["corners_px"])):
                    continue
                uv = view_points(corners_cam, K, normalize=True)[:2].T
                rays = model.pixel_to_ray(np.asarray(r["corners_px"], np.float64).reshape(8, 2))
                carried = (rays @ K.T)[:, :2] / (rays @ K.T)[:, 2:]
                gap = np.linalg.norm(uv[:, None] - carried[None], axis=-1)
                assert gap.min(axis=1).max() < 0.02 and gap.min(axis=0).max() < 0.02, (cam, r["track_id"], gap.min(axis=1))
                corners_checked += 1
                if r["visible_px"] < 100:
                    continue
                mask = rect(rle_decode({"size": [270, 480], "counts": r["counts"]}).astype(np.uint8)[..., None].repeat(3, -1))[..., 0]
                ys, xs = np.nonzero(mask)
                c = np.asarray(r["center_px"], np.float64)
                near = model.pixel_to_ray(np.stack([c, c + [1.0, 0.0], c + [0.0, 1.0]])) @ K.T
                near = near[:, :2] / near[:, 2:]
                stretch = max(np.linalg.norm(near[1] - near[0]), np.linalg.norm(near[2] - near[0]))
                margin = 3.0 * max(stretch, 1.0)  # the box edges are strokes a few rendered pixels wide, stretched by the resampling
                ok = (xs >= uv[:, 0].min() - margin) & (xs <= uv[:, 0].max() + margin) & (ys >= uv[:, 1].min() - margin) & (ys <= uv[:, 1].max() + margin)
                inside.append(ok.mean())
    assert corners_checked >= 100 and len(inside) >= 30, (corners_checked, len(inside))
    assert min(inside) >= 0.99, sorted(inside)[:5]


@pytest.mark.e2e
def test_categories_attributes_and_visibility_are_the_labels(nusc, sample_export: dict[str, Path]) -> None:
    """Each annotation's attribute is the labels' `attribute_name` of its box and frame, its category agrees with the
    labels' class (the labels' detection class, or a finer one: a bus is `bus`, the labels' `truck`), and its
    visibility bin is the labels' visible fraction over the cameras."""
    import polars as pl
    from nuscenes.eval.detection.utils import category_to_detection_name

    from avsim.core.agents import collapse_class
    from avsim.render.labels.nuscenes_clip import read_clip, visibility_fractions
    from avsim.scenario.exporters.nuscenes_names import visibility_token
    from avsim.scenario.exporters.nuscenes_tables import content_token

    manifest = json.loads((sample_export["out"] / "avsim_export.json").read_text())
    (scene_token, scene), = manifest["scenes"].items()
    index = json.loads((sample_export["labels"] / "index.json").read_text())
    frame_of = {(f["timestamp_ns"] + 500) // 1000 + scene["time_offset_us"]: f["frame_index"] for f in index["frames"]}
    boxes = pl.read_parquet(sample_export["labels"] / "boxes3d.parquet")
    labelled = {(r["frame_index"], content_token("instance", scene_token, r["track_id"])): r for r in boxes.iter_rows(named=True)}
    visible = visibility_fractions(read_clip(sample_export["labels"]))
    names = {a["token"]: a["name"] for a in nusc.attribute}
    seen = set()
    for ann in nusc.sample_annotation:
        r = labelled[frame_of[nusc.get("sample", ann["sample_token"])["timestamp"]], ann["instance_token"]]
        attr = names[ann["attribute_tokens"][0]] if ann["attribute_tokens"] else ""
        assert attr == r["attribute_name"], (ann["category_name"], attr, r["attribute_name"])
        assert collapse_class(ann["category_name"]) == r["class"]  # the category agrees with avsim's class (a bus: finer than truck)
        assert category_to_detection_name(ann["category_name"]) in (r["detection_name"], None) or r["class"] == "Truck"
        assert ann["visibility_token"] == visibility_token(visible.get((r["frame_index"], r["track_id"]), 0.0))
        seen.add(attr)
    assert {"vehicle.moving", "pedestrian.moving"} <= seen and len(seen) >= 4, seen


@pytest.mark.e2e
def test_lidar_points_match_num_lidar_pts(nusc, sample_export: dict[str, Path]) -> None:
    """The devkit's `points_in_box` on each sweep gives each annotation's `num_lidar_pts` (to the points lying
    exactly on a box's bottom face, where the road meets it); the sweep is the 5-float layout, in range."""
    from nuscenes.utils.data_classes import LidarPointCloud
    from nuscenes.utils.geometry_utils import points_in_box

    total = seen = 0
    for sample in nusc.sample:
        sd = nusc.get("sample_data", sample["data"]["LIDAR_TOP"])
        raw = np.fromfile(nusc.get_sample_data_path(sd["token"]), dtype=np.float32).reshape(-1, 5)
        assert set(np.unique(raw[:, 4]).astype(int)) <= set(range(32)) and raw[:, 3].min() >= 0 and raw[:, 3].max() <= 255
        assert np.linalg.norm(raw[:, :3], axis=1).max() <= 70.0 + 1e-3
        pc = LidarPointCloud.from_file(nusc.get_sample_data_path(sd["token"]))
        _, boxes, _ = nusc.get_sample_data(sd["token"])
        for b in boxes:
            n = int(points_in_box(b, pc.points[:3]).sum())
            want = nusc.get("sample_annotation", b.token)["num_lidar_pts"]
            bottom = b.corners()[2, 4:].mean()  # corners 4-7: the bottom face
            on_face = int((points_in_box(b, pc.points[:3], wlh_factor=1.001) & (np.abs(pc.points[2] - bottom) < 1e-3)).sum())
            assert abs(n - want) <= on_face, (b.name, n, want, on_face)
            total += want
            seen += want > 0
    assert total > 1000 and seen >= 10


@pytest.mark.e2e
def test_detection_eval_oracle(nusc) -> None:
    assert check_oracle(nusc) >= 20


@pytest.mark.e2e
def test_noisy_oracle_steps_equal_the_devkits_own_evaluation(nusc, sample_export: dict[str, Path], tmp_path: Path) -> None:
    """A noisy oracle (boxes moved, resized, turned, dropped, false positives, varied scores): the AP and TP
    errors of the devkit's steps equal those of its own `DetectionEval.main` on the same boxes written as a
    results file (its end-to-end path: `load_prediction`, `load_gt`, filters, `evaluate`)."""
    import contextlib
    import io
    from unittest import mock

    import nuscenes.eval.common.loaders as loaders
    from nuscenes.eval.common.config import config_factory
    from nuscenes.eval.detection.data_classes import DetectionBox
    from nuscenes.eval.detection.evaluate import DetectionEval
    from nuscenes_export_checks import detection_eval, filtered_gt

    from avsim.scenario.exporters.nuscenes_tables import content_token

    rng = np.random.default_rng(0)
    gt = filtered_gt(nusc)
    results: dict[str, list[dict]] = {s["token"]: [] for s in nusc.sample}
    for token in gt.sample_tokens:
        for b in gt[token]:
            box = {"sample_token": token, "translation": (np.asarray(b.translation) + rng.normal(0, 0.6, 3)).tolist(),
                   "size": (np.asarray(b.size) * rng.uniform(0.8, 1.2, 3)).tolist(), "rotation": b.rotation,
                   "velocity": list(b.velocity), "detection_name": b.detection_name, "detection_score": float(rng.uniform(0.2, 1.0)),
                   "attribute_name": b.attribute_name}  # fmt: skip
            if rng.random() >= 0.15:  # else missed
                results[token].append(box)
            if rng.random() < 0.2:  # a false positive beside it
                results[token].append({**box, "translation": (np.asarray(b.translation) + [6.0, 0.0, 0.0]).tolist(),
                                       "detection_score": float(rng.uniform(0.0, 0.5))})  # fmt: skip
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"meta": {"use_camera": True, "use_lidar": False, "use_radar": False, "use_map": False,
                                         "use_external": False}, "results": results}))  # fmt: skip
    cfg = config_factory("detection_cvpr_2019")
    classes = sorted({b.detection_name for b in gt.all})
    split = {"mini_val": [s["name"] for s in nusc.scene]}
    with mock.patch.object(loaders, "create_splits_scenes", lambda: split), contextlib.redirect_stdout(io.StringIO()):
        ev = DetectionEval(nusc, cfg, str(path), "mini_val", str(tmp_path / "eval"), verbose=False)
        metrics, _ = ev.evaluate()
        preds, _ = loaders.load_prediction(str(path), 500, DetectionBox)
    aps, tps, _ = detection_eval(nusc, preds, gt)
    summary = metrics.serialize()
    assert 0.05 < np.mean(list(aps.values())) < 0.95  # the noise matters
    for c in classes:
        assert aps[c] == pytest.approx(float(np.mean(list(summary["label_aps"][c].values()))), abs=1e-12)
        for m in ("trans_err", "scale_err", "orient_err", "vel_err", "attr_err"):
            want = summary["label_tp_errors"][c][m]
            assert (np.isnan(tps[c][m]) and np.isnan(want)) or tps[c][m] == pytest.approx(want, abs=1e-12), (c, m)
    assert summary["mean_ap"] == pytest.approx(sum(aps.values()) / len(cfg.class_names), abs=1e-12)  # classes without GT: AP 0
    assert content_token("x") != content_token("y")


# ---- the map ----------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_nuscenes_map_reads_the_expansion(sample_export: dict[str, Path]) -> None:
    from nuscenes.map_expansion.map_api import NuScenesMap

    from avsim.maps.queries import within_box
    from avsim.render.labels.nuscenes_export import world_offset
    from avsim.scenario.frames import transform_map
    from avsim.scenario.io import load_scenario

    s = load_scenario(sample_export["scenario"])
    offset, canvas = world_offset(s)
    from avsim.core.transforms import SE3

    m = within_box(transform_map(SE3(np.eye(3), np.asarray(offset)), s.map), [0, 0, *canvas])
    nmap = NuScenesMap(dataroot=str(sample_export["out"]), map_name="boston-seaport")
    assert len(nmap.lane) == len(m.lanes) > 0 and len(nmap.ped_crossing) == len(m.crosswalks)
    assert len(nmap.drivable_area) == len(m.drivable_areas) and len(nmap.stop_line) == len(m.wait_lines)
    assert len(nmap.lane_divider) + len(nmap.road_divider) == len(m.lane_lines) and len(nmap.traffic_light) == len(m.traffic_lights)
    lanes = nmap.discretize_lanes([r["token"] for r in nmap.lane], 0.5)
    for k, rec in enumerate(nmap.lane):  # the centre lines come back (straight arcline segments, 0.5 m apart)
        pts = np.asarray(lanes[rec["token"]])[:, :2]
        centre = m.lanes.centre[k][:, :2]
        assert np.linalg.norm(pts[0] - centre[0]) < 1e-6 and np.linalg.norm(pts[-1] - centre[-1]) < 0.5
    ego = json.loads((sample_export["labels"] / "index.json").read_text())["frames"][0]["world_SE3_ego"]
    x, y = ego[0][3] + offset[0], ego[1][3] + offset[1]
    assert nmap.layers_on_point(x, y)["drivable_area"]  # the ego drives on the exported drivable area
    assert any(nmap.get_next_roads(x, y).values()) or nmap.get_records_in_patch((x - 20, y - 20, x + 20, y + 20), ["lane"])["lane"]
    nusc = open_export(sample_export["out"], VERSION)
    mask = nusc.get("map", nusc.log[0]["map_token"])["mask"]
    assert mask.is_on_mask(x, y)[0] and not mask.is_on_mask(1.0, 1.0)[0]


# ---- mmdetection3d's converter -----------------------------------------------------------------------
@pytest.mark.e2e
def test_mmdet3d_converter_infos_match_labels_mmdet3d(nusc, sample_export: dict[str, Path], tmp_path: Path) -> None:
    """The restated converter runs on the export; its infos of each keyframe are those `avsim labels-mmdet3d`
    writes for the same frame (tests/nuscenes_export_checks.py `check_mmdet3d_infos`)."""
    n_boxes, n_cam = check_mmdet3d_infos(nusc, sample_export["out"], sample_export["labels"], tmp_path)
    assert n_boxes >= 100 and n_cam >= 50, (n_boxes, n_cam)


# ---- the round trip, determinism, bad input -------------------------------------------------------------
@pytest.mark.e2e
def test_convert_gives_the_scenario_back(sample_export: dict[str, Path], tmp_path: Path) -> None:
    from avsim.scenario.io import load_scenario

    index = json.loads((sample_export["labels"] / "index.json").read_text())
    manifest = json.loads((sample_export["out"] / "avsim_export.json").read_text())
    (scene,) = manifest["scenes"].values()
    source = load_scenario(sample_export["scenario"])
    times = np.array([f["timestamp_ns"] for f in index["frames"]], np.int64)
    back = check_round_trip(sample_export["out"], CLIP, source, times, scene["channels"], tmp_path)
    assert len(back.map.lanes) > 0 and len(back.map.crosswalks) == len(source.map.crosswalks)


@pytest.mark.e2e
def test_same_input_same_bytes(sample_export: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "again"
    assert main(["export", "nuscenes", str(sample_export["labels"]), str(out), "--scenario", str(sample_export["scenario"]),
                 "--version", VERSION]) == 0  # fmt: skip

    def digests(root: Path) -> dict[str, str]:
        return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()
                and p.name != "README.md" and p.name != "avsim_export.json"}  # fmt: skip

    assert digests(out) == digests(sample_export["out"])


@pytest.mark.e2e
def test_bad_input_is_one_line_and_writes_nothing(sample_export: dict[str, Path], tmp_path: Path, capsys) -> None:
    import shutil

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("x")
    assert main(["export", "nuscenes", str(sample_export["labels"]), str(busy), "--scenario", str(sample_export["scenario"])]) == 1
    assert "not an avsim nuScenes export" in capsys.readouterr().err and sorted(p.name for p in busy.iterdir()) == ["mine.txt"]
    other = tmp_path / "other"  # the same scenario id, another drive
    assert main(["sample", str(other), "--duration-s", "2", "--seed", "1"]) == 0
    doc = json.loads((other / "scenario.json").read_text())
    doc["scenario_id"] = CLIP
    (other / "scenario.json").write_text(json.dumps(doc))
    capsys.readouterr()
    out = tmp_path / "out"
    code = main(["export", "nuscenes", str(sample_export["labels"]), str(out), "--scenario", str(other)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and not out.exists(), err
    labels = tmp_path / "l"
    shutil.copytree(sample_export["labels"].parent, labels / CLIP)
    shutil.rmtree(labels / CLIP / "labels" / "images" / "camera_rear_left_70fov")
    code = main(["export", "nuscenes", str(labels), str(out), "--scenario", str(sample_export["scenario"])])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "no image of camera_rear_left_70fov" in err[0] and not out.exists(), err
    assert main(["export", "nuscenes", str(tmp_path / "nothing"), str(out), "--scenario", str(sample_export["scenario"])]) == 1
    assert "no label folder" in capsys.readouterr().err
    broken = tmp_path / "broken"  # `avsim convert` of an export whose avsim_export.json lost a log's offset
    shutil.copytree(sample_export["out"], broken)
    doc = json.loads((broken / "avsim_export.json").read_text())
    for log in doc["logs"].values():
        log["world_offset_m"] = [1.0, "x"]
    (broken / "avsim_export.json").write_text(json.dumps(doc))
    assert main(["convert", str(broken), str(tmp_path / "back")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "world_offset_m" in err[0] and not (tmp_path / "back").exists()


@pytest.mark.e2e
@pytest.mark.slow
def test_a_render_and_its_generated_clip_are_two_scenes_of_one_log(session_sample_1s_dir: Path, tmp_path: Path) -> None:
    """SOURCE holding both a labelled render (frames decoded from its videos) and the clip generated from it
    (`avsim generate`, its frames with the remapped labels): two scenes of one log; the generated scene's images
    are the generated video's frames, resampled onto the pinhole."""
    from avsim.core.cameras import camera_from_dict
    from avsim.core.video import read_video
    from avsim.render.labels.nuscenes_images import Rectifier
    from avsim.render.labels.records import encode_image

    assert main(["render", str(session_sample_1s_dir), str(tmp_path / "both" / "control"), "--labels", "--fps", "30", "--frames", "16",
                 "--size", "112x64", "--cameras", "camera_front_wide_120fov"]) == 0  # fmt: skip
    assert main(["generate", str(tmp_path / "both" / "control"), str(tmp_path / "both" / "gen"), "--config", "debug",
                 "--random-weights", "--views", "front_wide", "--steps", "1"]) == 0  # fmt: skip
    out = tmp_path / "nus"
    assert main(["export", "nuscenes", str(tmp_path / "both"), str(out), "--scenario", str(session_sample_1s_dir), "--version",
                 VERSION]) == 0  # fmt: skip
    nusc = open_export(out, VERSION)
    check_structure(nusc, out)
    assert len(nusc.scene) == 2 and len(nusc.log) == 1 and {s["name"] for s in nusc.scene} == {CLIP, "gen"}
    gen_index = json.loads((tmp_path / "both" / "gen" / "labels" / "index.json").read_text())
    model = camera_from_dict(gen_index["camera_models"]["camera_front_wide_120fov"])
    frames = read_video(tmp_path / "both" / "gen" / f"{CLIP}.camera_front_wide_120fov.mp4")
    scene = next(s for s in nusc.scene if s["name"] == "gen")
    sd = nusc.get("sample_data", nusc.get("sample", scene["first_sample_token"])["data"]["CAM_FRONT"])
    k = 0
    while sd:
        assert (out / sd["filename"]).read_bytes() == encode_image(Rectifier(model)(frames[k]), "jpg")
        sd, k = (nusc.get("sample_data", sd["next"]) if sd["next"] else None), k + 1
    assert k == len(gen_index["frames"]) == 5


@pytest.mark.e2e
@pytest.mark.slow
def test_a_fifth_scenario_gets_a_location_of_its_own(session_sample_1s_dir: Path, tmp_path: Path) -> None:
    """Five scenarios (the 1 s sample under five ids: five logs of one map): four take nuScenes' locations, the fifth
    `avsim-<log token>`; its expansion is read by `NuScenesMap` once that name is in the devkit's list, and by
    `avsim convert`."""
    import shutil

    from nuscenes.map_expansion import map_api

    from avsim.scenario.io import load_scenario

    for k in range(5):
        shutil.copytree(session_sample_1s_dir, tmp_path / "s" / f"s{k}")
        doc = json.loads((tmp_path / "s" / f"s{k}" / "scenario.json").read_text())
        doc["scenario_id"] = f"scenario{k}"
        (tmp_path / "s" / f"s{k}" / "scenario.json").write_text(json.dumps(doc))
        assert main(["labels", str(tmp_path / "s" / f"s{k}"), str(tmp_path / "l"), "--fps", "12", "--frames", "7", "--size", "160x90",
                     "--images", "jpg", "--cameras", "camera_front_wide_120fov"]) == 0  # fmt: skip
    out = tmp_path / "nus"
    assert main(["export", "nuscenes", str(tmp_path / "l"), str(out), "--scenario", str(tmp_path / "s"), "--version", VERSION]) == 0
    nusc = open_export(out, VERSION)
    locations = [g["location"] for g in nusc.log]
    assert sorted(set(locations) & set(map_api.locations)) == sorted(map_api.locations) and len(set(locations)) == 5
    fifth = next(g for g in nusc.log if g["location"] not in map_api.locations)
    assert fifth["location"].startswith("avsim-")
    map_api.locations.append(fifth["location"])
    try:
        assert len(map_api.NuScenesMap(dataroot=str(out), map_name=fifth["location"]).lane) > 0
    finally:
        map_api.locations.remove(fifth["location"])
    scene = next(s for s in nusc.scene if s["log_token"] == fifth["token"])
    assert main(["convert", f"{out}::{scene['name']}", str(tmp_path / "back")]) == 0
    back = load_scenario(tmp_path / "back")
    assert len(back.map.lanes) > 0 and fifth["location"] not in map_api.locations
