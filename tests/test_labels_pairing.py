"""Labels beside the generated videos (`avsim generate`) and in the post-training layout (`avsim train pair`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from avsim.cli import main
from avsim.core.video import video_info
from avsim.models.config import debug

CAM = "camera_front_wide_120fov"


@pytest.fixture(scope="module")
def sample(session_sample_1s_dir: Path) -> Path:
    return session_sample_1s_dir


def _render(sample: Path, out: Path, fps: float, frames: int, label_files: str = "both", size: tuple[int, int] | None = None,
            images: str | None = None) -> Path:  # fmt: skip
    cfg = debug()
    w, h = size or (cfg.width_px, cfg.height_px)
    code = main(["render", str(sample), str(out), "--labels", "--fps", f"{fps:g}", "--frames", str(frames),
                 "--size", f"{w}x{h}", "--cameras", CAM, "--label-files", label_files, *(["--images", images] if images else [])])  # fmt: skip
    assert code == 0
    return out


@pytest.mark.e2e
def test_generate_writes_the_control_labels_beside_the_generated_clip(sample, tmp_path):
    cfg = debug()
    control = _render(sample, tmp_path / "control", cfg.model_fps, cfg.frames_per_chunk)
    out = tmp_path / "gen"
    assert main(["generate", str(control), str(out), "--config", "debug", "--random-weights", "--views", CAM, "--steps", "1"]) == 0
    settings = json.loads((out / "settings.json").read_text())
    rec = settings["labels"]
    assert rec["frame_mapping"] == "identical" and rec["placed_as"] in ("symlink", "copy")
    clip = settings["clip"]
    assert Path(rec["control_labels"]) == (control / clip / "labels").resolve()
    index = json.loads((out / "labels" / "index.json").read_text())  # readable through the link / copy
    assert (out / "labels" / "annotations.parquet").is_file()  # the compact tables (the default layout)
    info = video_info(out / f"{clip}.{CAM}.mp4")
    mine = [f for f in index["frames"] if f["video_clip"] == clip]
    assert info["frames"] == len(mine) == rec["frames"] and info["fps"] == pytest.approx(index["fps"])
    assert (info["width_px"], info["height_px"]) == (index["width_px"], index["height_px"])
    if rec["placed_as"] == "symlink":
        assert not Path(str((out / "labels").readlink())).is_absolute()


@pytest.mark.e2e
def test_generate_from_a_30fps_render_labels_the_generated_frames_by_timestamp(sample, tmp_path):
    """One labelled 30 fps render serves the 10 fps model: generated frame k is the control frame shown at
    k / 10 s, and its labels are the control's labels of that timestamp."""
    from avsim.models.video_io import frame_times_s

    cfg = debug()
    control = _render(sample, tmp_path / "control30", 30.0, 3 * (cfg.frames_per_chunk - 1) + 1)  # 0, 3, ..., 12
    out = tmp_path / "gen"
    assert main(["generate", str(control), str(out), "--config", "debug", "--random-weights", "--views", CAM, "--steps", "1"]) == 0
    settings = json.loads((out / "settings.json").read_text())
    clip, rec = settings["clip"], settings["labels"]
    assert rec["frame_mapping"] == "selected" and rec["placed_as"] == "selected" and rec["source_fps"] == 30.0
    src = control / clip / "labels"
    src_index, index = (json.loads((d / "index.json").read_text()) for d in (src, out / "labels"))
    control_times_ns = [round(t * 1e9) for t in frame_times_s(control / clip / f"{clip}.{CAM}.mp4")]
    generated_times_ns = [round(t * 1e9) for t in frame_times_s(out / f"{clip}.{CAM}.mp4")]
    assert generated_times_ns == [k * 100_000_000 for k in range(cfg.frames_per_chunk)]
    assert index["fps"] == 10.0 and len(index["frames"]) == cfg.frames_per_chunk
    first_ns = src_index["frames"][0]["timestamp_ns"]
    by_time = {f["timestamp_ns"] - first_ns: f for f in src_index["frames"]}
    for k, frame in enumerate(index["frames"]):
        assert frame["video_clip"] == clip and frame["video_frame"] == k
        t_ns = frame["timestamp_ns"] - first_ns
        assert abs(t_ns - generated_times_ns[k]) <= 1  # the label's time is the generated frame's time ...
        source = by_time[t_ns]  # ... and it is the control's label of that time, shown at that time in the control video
        assert abs(control_times_ns[source["video_frame"]] - t_ns) <= 1
        assert {**frame, "video_frame": source["video_frame"]} == source
    coco_src, coco = (json.loads((d / "coco" / f"{CAM}.json").read_text()) for d in (src, out / "labels"))
    keep = {f["frame_index"]: f["video_frame"] for f in index["frames"]}
    assert [(i["id"], i["video_frame"], i["file_name"]) for i in coco["images"]] == [
        (i, k, f"{clip}.{CAM}.mp4") for i, k in keep.items()]  # fmt: skip
    assert coco["annotations"] == [a for a in coco_src["annotations"] if a["image_id"] in keep] and coco["annotations"]
    boxes_src, boxes = (json.loads((d / "boxes3d.json").read_text()) for d in (src, out / "labels"))
    assert boxes["results"] == {f["sample_token"]: boxes_src["results"][f["sample_token"]] for f in index["frames"]}
    lanes = sorted(p.name for p in (out / "labels" / "openlane" / CAM).iterdir())
    assert lanes == [f"{i:06d}.json" for i in keep]
    import polars as pl

    for table, key in (("boxes3d.parquet", "frame_index"), ("annotations.parquet", "image_id"), ("camera_poses.parquet", "frame_index")):
        got, whole = pl.read_parquet(out / "labels" / table), pl.read_parquet(src / table)  # the compact tables, cut by frame
        assert got.equals(whole.filter(pl.col(key).is_in(list(keep)))) and len(got), table
    assert pl.read_parquet(out / "labels" / "lanes.parquet").equals(pl.read_parquet(src / "lanes.parquet"))


def test_generate_refuses_labels_of_another_aspect_before_loading_weights(sample, tmp_path, capsys):
    cfg = debug()
    control = tmp_path / "control"
    assert main(["render", str(sample), str(control), "--labels", "--fps", "10", "--frames", str(cfg.frames_per_chunk),
                 "--size", f"{2 * cfg.width_px}x{cfg.height_px}", "--cameras", CAM]) == 0  # fmt: skip
    out = tmp_path / "gen"
    code = main(["generate", str(control), str(out), "--config", "debug", "--random-weights", "--views", CAM, "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 1 and not out.exists() and "Traceback" not in err
    line = next(line for line in err.splitlines() if line.startswith("error"))
    assert "index.json" in line and "same aspect" in line and f"--size {cfg.width_px}x{cfg.height_px}" in line, line
    assert "load DiT" not in err  # refused before any weights load


def _by_key(labels: Path, camera: str) -> dict[tuple[int, str], dict]:
    doc = json.loads((labels / "coco" / f"{camera}.json").read_text())
    return {(a["image_id"], a["track_id"]): a for a in doc["annotations"]}


@pytest.mark.e2e
def test_a_double_size_render_generates_with_labels_remapped_to_the_model_size(sample, tmp_path):
    """Issue 55: a 224x128 labelled render feeds the 112x64 debug model; its labels are remapped by the
    generator's own scaling, and the projected boxes equal those of a 112x64 labelled render within 0.5 px
    (0.25 px apart: the resampled frames' pixel centres sit a quarter pixel from a native 112x64 render's)."""
    import polars as pl
    from pycocotools import mask as mask_utils

    from avsim.models.labels_scaling import PIXEL_FIELDS, PIXEL_FREE_FIELDS

    cfg = debug()
    big = _render(sample, tmp_path / "control224", cfg.model_fps, cfg.frames_per_chunk, size=(2 * cfg.width_px, 2 * cfg.height_px),
                  images="png")  # fmt: skip
    native = _render(sample, tmp_path / "control112", cfg.model_fps, cfg.frames_per_chunk)
    out = tmp_path / "gen"
    assert main(["generate", str(big), str(out), "--config", "debug", "--random-weights", "--views", CAM, "--steps", "1"]) == 0
    settings = json.loads((out / "settings.json").read_text())
    clip, rec = settings["clip"], settings["labels"]
    assert rec["frame_mapping"] == "selected" and rec["rescaled"][CAM] == {"from_px": [224, 128], "to_px": [112, 64], "scale": 0.5}
    labels, source, truth = out / "labels", big / clip / "labels", native / clip / "labels"
    index = json.loads((labels / "index.json").read_text())
    assert (index["width_px"], index["height_px"]) == (112, 64) and index["camera_sizes_px"][CAM] == [112, 64]
    assert index["camera_models"][CAM]["cx_px"] == pytest.approx((112.0 + 0.5) * 0.5 - 0.5)  # the camera of the resampled frames
    got, src, ref = _by_key(labels, CAM), _by_key(source, CAM), _by_key(truth, CAM)
    assert set(got) == set(src)  # every box of the render, remapped
    common = sorted(set(got) & set(ref))
    assert len(common) >= 20
    for key in common:
        for field in ("box2d_full_px", "corners_px", "center_px"):
            if ref[key][field] is not None:
                np.testing.assert_allclose(got[key][field], ref[key][field], atol=0.5, err_msg=f"{key} {field}")
    for key, ann in got.items():
        assert ann["bbox"] == [v * 0.5 for v in src[key]["bbox"]]  # the render's visible box, scaled exactly
        assert ann["segmentation"]["size"] == [64, 112] and ann["visible_px"] == ann["area"] == int(mask_utils.area(ann["segmentation"]))
        assert set(ann) <= set(PIXEL_FIELDS) | PIXEL_FREE_FIELDS
    table = pl.read_parquet(labels / "annotations.parquet")  # the compact table says the same
    row = table.filter(pl.col("track_id") == common[0][1], pl.col("image_id") == common[0][0]).row(0, named=True)
    assert list(row["bbox"]) == got[common[0]]["bbox"] and row["counts"] == got[common[0]]["segmentation"]["counts"]
    assert set(table.columns) <= set(PIXEL_FIELDS) | PIXEL_FREE_FIELDS
    lane = json.loads(next((labels / "openlane" / CAM).glob("*.json")).read_text())
    assert lane["camera_model"] == index["camera_models"][CAM] and lane["intrinsic"][0][2] == pytest.approx(55.75)
    image = next((labels / "images" / CAM).glob("*.png"))
    import cv2

    assert cv2.imread(str(image)).shape == (64, 112, 3)


def test_labels_whose_times_are_not_the_videos_are_refused(sample, tmp_path):
    from avsim.core.errors import AvsimInputError
    from avsim.models.labels_pairing import check_pairing, find_control_labels

    cfg = debug()
    control = _render(sample, tmp_path / "control", 30.0, 7)
    clip = next(p.name for p in control.iterdir() if p.is_dir())
    folder = find_control_labels(control, clip)
    assert folder is not None
    times = np.arange(7) / 30.0
    pairing = check_pairing(folder, clip, [0, 3, 6], times, 10.0, (cfg.width_px, cfg.height_px))
    assert pairing.source_frames == (0, 3, 6) and not pairing.identical
    with pytest.raises(AvsimInputError, match="not of this video"):
        check_pairing(folder, clip, [0, 3, 6], np.arange(7) / 25.0, 10.0, (cfg.width_px, cfg.height_px))  # a 25 fps video
    with pytest.raises(AvsimInputError, match="frame 9 .* has no labels"):
        check_pairing(folder, clip, [0, 3, 9], np.arange(10) / 30.0, 10.0, (cfg.width_px, cfg.height_px))


def test_train_pair_carries_the_labels(sample, tmp_path):
    from avsim.train.data import COSMOS_VIEW_NAMES

    cfg = debug()
    control = _render(sample, tmp_path / "control", cfg.model_fps, 2)
    clip = next(p.name for p in control.iterdir() if p.is_dir())
    clip_dir = control / clip
    from avsim.models.labels_pairing import find_control_labels

    assert find_control_labels(control, clip) == find_control_labels(clip_dir, clip) == clip_dir / "labels"
    assert find_control_labels(control, "other_clip") is None
    for view in COSMOS_VIEW_NAMES:  # every model view needs a control and a real video: reuse the one render
        src = clip_dir / f"{clip}.{CAM}.mp4"
        if view != CAM:
            (clip_dir / f"{clip}.{view}.mp4").write_bytes(src.read_bytes())
    layout = tmp_path / "layout"
    assert main(["train", "pair", str(clip_dir), str(clip_dir), str(layout), "--caption", "x"]) == 0
    copied = layout / "labels" / clip
    assert json.loads((copied / "index.json").read_text()) == json.loads((clip_dir / "labels" / "index.json").read_text())
    assert not (copied / ".parts").exists()


def test_run_render_warns_before_rendering_labels_no_model_can_take():
    """`avsim run render --labels --size WxH` says before any task when those labels could feed no model."""
    import warnings

    from avsim.core.errors import AvsimWarning
    from avsim.jobs.model_items import warn_labels_for_generation

    with pytest.warns(AvsimWarning, match="64x64: these labels cannot feed `avsim run generate`.*debug 112x64"):
        warn_labels_for_generation({"labels": True, "size": "64x64"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for options in ({"labels": True, "size": "224x128"}, {"labels": True, "size": "1920x1080"}, {"size": "64x64"}, {"labels": True}):
            warn_labels_for_generation(options)
