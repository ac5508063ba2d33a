"""Labels speed work (issue 13 item 4): labels leave the videos' bytes alone (pinned), every way of writing the
label files (a chunked render resumed after its segments, `avsim labels`, parts and blocks of 2 frames) writes
the same labels, and the compiled coverage pass equals drawing each object alone with the raster kernels.
What the label files hold is checked by their clients in tests/test_labels_clients.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import av
import numpy as np
import pytest
from labels_numpy import unoccluded_pixels

from avsim.cli import main
from avsim.core import video as core_video
from avsim.render import style
from avsim.render.geometry.scene import SceneRenderer
from avsim.render.raster.draw import new_id_stats
from avsim.render.raster.kernels import PARAM_EPS, draw_capsules, draw_planars
from avsim.render.raster.primitives import PIXEL_CENTRE_OFFSET, DrawPlan, FrameBuffers, IdBuffers, Primitives
from avsim.scenario.io import load_scenario

CAMERAS = "camera_front_wide_120fov,camera_cross_left_120fov"
SKIPPED = ("render_summary.json", "render_inputs.json")  # timings; resume digests (version, options)
# `avsim render s out --labels --size 320x180 --frames 4 --cameras CAMERAS` (s: `avsim sample s
# --duration-s 1`) on d089305, before the speed work: labels leave the videos' bytes alone. The label
# files themselves are checked by their clients (tests/test_labels_clients.py), and their writers
# against one another below (a chunked, resumed render and `avsim labels`; parts and blocks of 2 frames).
PINNED_VIDEO_SHA256 = {
    "avsim_sample_seed0.camera_cross_left_120fov.mp4": "7fb9c7f4ea263d37ac146c91111c279bf926e754c43d4177ed70acbc7bdf0b9a",
    "avsim_sample_seed0.camera_front_wide_120fov.mp4": "6a22e9bc2630af476056468daa93f5ab7f61d80313766a9e91efe15a242b6317",
}


@pytest.mark.e2e
def test_labelled_render_videos_are_pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session_sample_1s_dir: Path) -> None:
    # the videos were pinned when libswscale converted RGB -> YUV inside the encoder: put it back for them
    monkeypatch.setattr(core_video, "rgb_to_yuv420p", _swscale_yuv420p)
    out = tmp_path / "out"
    args = ["render", str(session_sample_1s_dir), str(out), "--labels", "--size", "320x180", "--frames", "4", "--cameras", CAMERAS,
            "--label-files", "standard"]  # fmt: skip
    assert main(args) == 0
    clip = out / "avsim_sample_seed0"
    got = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(clip.glob("*.mp4"))}
    assert got == PINNED_VIDEO_SHA256
    assert sorted(p.relative_to(clip / "labels").as_posix() for p in (clip / "labels").rglob("*.json")) == sorted(
        ["boxes3d.json", "index.json", *(f"coco/{c}.json" for c in CAMERAS.split(",")),
         *(f"openlane/{c}/{f:06d}.json" for c in CAMERAS.split(",") for f in range(4))])  # fmt: skip


def _label_hashes(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def _without_videos(folder: Path) -> dict[str, object]:
    """The label files with what names the videos taken out (`avsim labels` writes one video's names, a chunked render three)."""
    import json

    out: dict[str, object] = dict(_label_hashes(folder))
    index = json.loads((folder / "index.json").read_text())
    out["index.json"] = {**index, "frames": [{k: v for k, v in f.items() if not k.startswith("video_")} for f in index["frames"]]}
    for cam in CAMERAS.split(","):
        coco = json.loads((folder / "coco" / f"{cam}.json").read_text())
        coco["images"] = [{k: v for k, v in im.items() if k not in ("file_name", "video_frame")} for im in coco["images"]]
        out[f"coco/{cam}.json"] = coco
    return out


@pytest.mark.e2e
def test_chunked_render_and_labels_command_write_the_same_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `avsim render --labels --chunk 2 --frames 1:6` (three chunks: a merge of three parts per camera, frames not
    # starting at 0), stopped before the merge and resumed, and `avsim labels` of the same frames: the same labels
    from avsim.render.run import labels as labels_run

    assert main(["sample", str(tmp_path / "s"), "--duration-s", "1"]) == 0
    common = ["--size", "160x90", "--frames", "1:6", "--cameras", CAMERAS, "--label-files", "both"]
    render = ["render", str(tmp_path / "s"), str(tmp_path / "out"), "--labels", "--chunk", "2", *common]
    with monkeypatch.context() as m:  # a run stopped after its segments, before the merge: the parts stay
        m.setattr(labels_run, "merge_parts", _stopped)
        assert main(render) == 130  # interrupted
    labels = tmp_path / "out" / "avsim_sample_seed0" / "labels"
    assert len(list((labels / ".parts").glob("*.json"))) == 6 and not (labels / "index.json").exists()
    assert main(render) == 0  # resumes: merges the kept parts
    assert main(["labels", str(tmp_path / "s"), str(tmp_path / "lab"), *common]) == 0
    cmd = tmp_path / "lab" / "avsim_sample_seed0" / "labels"
    assert _without_videos(labels) == _without_videos(cmd)
    import json

    frames = json.loads((labels / "index.json").read_text())["frames"]
    assert [(f["frame_index"], f["video_clip"][-2:], f["video_frame"]) for f in frames] == [
        (1, "_0", 0), (2, "_0", 1), (3, "_1", 0), (4, "_1", 1), (5, "_2", 0)]  # fmt: skip


@pytest.mark.e2e
def test_labels_in_parts_and_blocks_of_two_frames_keep_the_label_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `avsim labels` keeps its records as parts of SEGMENT_FRAMES frames and the merge streams boxes3d.json
    # MERGE_BOXES_BLOCK_FRAMES frames at a time: parts and blocks of 2 over 5 frames (3 each, the last of a
    # single frame) must write the bytes of one part and one block
    from avsim.render.labels import merge as labels_merge
    from avsim.render.run import units

    assert main(["sample", str(tmp_path / "s"), "--duration-s", "1"]) == 0
    common = ["--size", "160x90", "--frames", "1:6", "--cameras", CAMERAS, "--label-files", "both"]
    assert main(["labels", str(tmp_path / "s"), str(tmp_path / "one"), *common]) == 0
    monkeypatch.setattr(labels_merge, "MERGE_BOXES_BLOCK_FRAMES", 2)
    monkeypatch.setattr(units, "SEGMENT_FRAMES", 2)
    assert main(["labels", str(tmp_path / "s"), str(tmp_path / "lab"), *common]) == 0
    one = _label_hashes(tmp_path / "one" / "avsim_sample_seed0" / "labels")
    assert _label_hashes(tmp_path / "lab" / "avsim_sample_seed0" / "labels") == one and len(one) == 18  # 14 standard, 4 compact


@pytest.mark.e2e
def test_parts_without_coco_texts_give_the_same_coco_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a compact render's parts keep no COCO texts; merged with COCO files asked for (a render resumed with other
    # --label-files) the texts are made from the segment's compact rows: the bytes of parts that kept them
    from avsim.render.labels import records as labels_io
    from avsim.render.run import labels as labels_run

    assert main(["sample", str(tmp_path / "s"), "--duration-s", "1"]) == 0
    common = ["--size", "160x90", "--frames", "2:9", "--cameras", CAMERAS, "--label-files", "both", "--images", "png"]
    assert main(["labels", str(tmp_path / "s"), str(tmp_path / "texts"), *common]) == 0
    monkeypatch.setattr(labels_run.Labeller, "coco_texts", property(lambda self: False))
    read = labels_io.read_part
    seen: list[bool] = []
    monkeypatch.setattr(labels_io, "read_part", lambda p: (r := read(p), seen.append(r[0]["annotations"] is None))[0])
    assert main(["labels", str(tmp_path / "s"), str(tmp_path / "rows"), *common]) == 0
    want = _label_hashes(tmp_path / "texts" / "avsim_sample_seed0" / "labels")
    assert _label_hashes(tmp_path / "rows" / "avsim_sample_seed0" / "labels") == want and len(want) > 18
    assert seen and all(seen)  # every part was read without its texts


def _stopped(*args: object) -> None:
    raise KeyboardInterrupt


def _swscale_yuv420p(frame_rgb: np.ndarray) -> np.ndarray:
    return av.VideoFrame.from_ndarray(np.ascontiguousarray(frame_rgb), format="rgb24").reformat(format="yuv420p").to_ndarray()


def _drawn_alone(prims: Primitives, rays: np.ndarray, n_objects: int) -> np.ndarray:
    """Reference: each object's primitives drawn alone into cleared buffers with the raster kernels."""
    h, w = prims.height_px, prims.width_px
    counts = np.zeros(n_objects, np.int64)
    cap_obj, pl_obj = prims.capsules.object_ids(), prims.planars.object_ids()
    caps, pls = prims.capsules.arrays(), prims.planars.arrays()
    no_floor = (np.full(prims.n_capsules, -np.inf, np.float32), np.full(prims.n_planars, -np.inf, np.float32))
    codes = np.zeros(max(prims.n_capsules, prims.n_planars), np.int32)
    stats = new_id_stats(n_objects)
    for k in range(n_objects):
        img, zbuf, ids = np.zeros((h, w, 3), np.uint8), np.full((h, w), np.inf, np.float32), np.full((h, w), -1, np.int32)
        buf = FrameBuffers(img, zbuf, np.zeros((h, w), np.int32), np.zeros((1, 1), np.int32), False)
        for p in np.flatnonzero(pl_obj == k):
            draw = DrawPlan(no_floor[1], prims.planars.order, np.array([p]), codes)
            idb = IdBuffers(ids, pl_obj, True, stats, np.ones(prims.n_planars, bool))
            draw_planars(buf, rays, pls, draw, idb, (style.NEAR_M, style.MAX_DEPTH_M, PARAM_EPS), (0, h - 1, 0))
        for s in np.flatnonzero(cap_obj == k):
            draw = DrawPlan(no_floor[0], prims.capsules.order, np.array([s]), codes)
            idb = IdBuffers(ids, cap_obj, True, stats, np.ones(prims.n_capsules, bool))
            draw_capsules(buf, caps, draw, idb, PIXEL_CENTRE_OFFSET, (0, h - 1, 0))
        counts[k] = int((ids == k).sum())
    return counts


@pytest.fixture(scope="module")
def small_renderer(session_sample_1s_dir: Path) -> SceneRenderer:
    return SceneRenderer(load_scenario(session_sample_1s_dir), size=(240, 136))


@pytest.mark.slow
def test_coverage_pass_equals_each_object_drawn_alone(small_renderer: SceneRenderer) -> None:
    renderer = small_renderer
    checked = 0
    for i in range(len(renderer.rig)):
        prims = renderer.camera_primitives(3, i)
        n = len(renderer.box_track_ids(3))
        got = unoccluded_pixels(prims, renderer.rays(i), n)
        np.testing.assert_array_equal(got, _drawn_alone(prims, renderer.rays(i), n))
        checked += int((got > 0).sum())
    assert checked > 20  # the frame shows boxes, partly cut by the image border


def test_float_lists_json_is_json_dumps_of_the_rounded_lists() -> None:
    import json

    from avsim.render.labels.json_text import float_lists_json, float_rows_json

    rng = np.random.default_rng(0)
    edge = [0.0, -0.0, 1e-5, -1e-5, 5e-5, 4.9999e-5, 1e-4, 0.5, 1.5, 2.5, -2.5e-4, 1e14, 1e15, 1e16, np.nan, np.inf, -np.inf]
    values = np.concatenate([rng.normal(0.0, 1.0, 3000) * 10.0 ** rng.integers(-8, 13, 3000), np.arange(-400, 400) / 1600, edge])
    starts, stops = np.array([0, 7, 3000]), np.array([len(values), 7, len(values)])
    for decimals in (0, 3, 4, 6, 9):
        got = float_lists_json(values, starts, stops, decimals)
        for text, a, b in zip(got, starts, stops):
            want = [v if np.isfinite(v) else None for v in np.round(values[a:b], decimals).tolist()]
            assert text == json.dumps(want, separators=(",", ":"))
    rows = values[:12].reshape(4, 3)
    assert float_rows_json(rows, 4) == [json.dumps(np.round(r, 4).tolist(), separators=(",", ":")) for r in rows]


def test_coverage_with_visible_pixels_equals_the_two_passes(small_renderer: SceneRenderer) -> None:
    from avsim.render.labels.boxes import visible_boxes
    from avsim.render.raster.draw import object_coverage_visible_px

    renderer = small_renderer
    seen = 0
    contested = uncontested = 0
    for f, i in [(3, i) for i in range(len(renderer.rig))] + [(17, 0), (25, 3)]:
        _, ids, prims, stats = renderer.render_camera_id_stats(f, i)
        n = len(renderer.box_track_ids(f))
        unocc, vis, vis_box = object_coverage_visible_px(prims, renderer.rays(i), n, ids)
        np.testing.assert_array_equal(unocc, unoccluded_pixels(prims, renderer.rays(i), n))
        counts, boxes = visible_boxes(ids, n)
        np.testing.assert_array_equal(vis, counts)
        np.testing.assert_array_equal(vis_box, boxes)
        fast = object_coverage_visible_px(prims, renderer.rays(i), n, ids, stats)  # only contested objects re-covered
        for a, b in zip(fast, (unocc, vis, vis_box)):
            np.testing.assert_array_equal(a, b)
        drawn = unocc > 0
        lost = stats[:, 6] >= stats[:, 4]  # a non-empty lost box: re-covered there
        contested += int((drawn & lost).sum())
        uncontested += int((drawn & ~lost).sum())
        seen += int((vis > 0).sum())
    assert seen > 10 and contested > 5 and uncontested > 5  # both paths of the shortcut ran


def test_one_pass_rle_and_columns_equal_the_per_mask_and_json_dumps_writers(tmp_path: Path) -> None:
    import json

    from avsim.core.coco_rle import rle_string, rle_strings
    from avsim.core.errors import AvsimInputError
    from avsim.render.labels.boxes import visible_boxes
    from avsim.render.labels.json_text import columns_json
    from avsim.render.labels.records import _f, read_part

    rng = np.random.default_rng(3)
    for trial in range(20):
        h, w = (int(v) for v in rng.integers(1, 30, 2))
        ids = rng.integers(-1, 4, (h, w)).astype(np.int32)
        if trial % 4 == 0:
            ids[:] = 1  # one object over the whole image (full-height columns)
        counts, boxes = visible_boxes(ids, 4)
        objs = np.flatnonzero(counts > 0)
        want = [rle_string(ids[y0 : y1 + 1, x0 : x1 + 1] == o, x0, y0, h, w) for o, (x0, y0, x1, y1) in zip(objs, boxes[objs].tolist())]
        assert rle_strings(ids, objs, boxes[objs]) == want
    cols = [(rng.normal(0.0, 50.0, shape), nd) for shape, nd in (((6,), 4), ((6, 3), 6), ((6, 8, 2), 3), ((0, 4), 4), ((2, 4), 9))]
    cols[0][0][1] = np.nan
    for (values, nd), got in zip(cols, columns_json(cols)):
        assert got == [json.dumps(v, separators=(",", ":")) for v in _f(values, nd)]
    old = tmp_path / "part.json"
    old.write_text("[]")  # another version's part
    with pytest.raises(AvsimInputError):
        read_part(old)


def test_annotation_rows_from_the_values_equal_the_rows_read_from_the_texts(small_renderer: SceneRenderer) -> None:
    # a worker builds its compact annotation rows from the records' arrays; a part file's texts (a resumed render) give the same rows
    import io

    from avsim.render.labels import compact
    from avsim.render.labels.records import encoded_records
    from avsim.render.run import labels as labels_run

    labeller = labels_run.Labeller.of(small_renderer, "compact")
    records = [labels_run.frame_record(labeller, f, 1)[1] for f in range(0, 30, 3)]
    first = records[0]["annotations"]  # the floats' edge cases: NaN (written null), -0.0 and a value halfway at the last decimal
    floats = list(first.floats)
    floats[4] = np.r_[np.nan, -0.00001, 2.00005, floats[4][3:]][: len(floats[4])]
    records[0] = {**records[0], "annotations": type(first)(first.head, first.counts, tuple(floats), first.values)}
    v = first.values
    none = type(first)((), (), tuple(f[:0] for f in first.floats), type(v)((), (), v.category_id[:0], v.bbox[:0], (), v.visible_px[:0], v.unoccluded_px[:0]))
    for case in (records, [{**records[1], "annotations": none}]):  # an image without annotations
        tables = []
        for recs in (case, encoded_records(case)):
            buf = io.BytesIO()
            compact.annotations_frame("cam", recs).write_parquet(buf, compression="lz4", statistics=False)
            tables.append(buf.getvalue())
        assert tables[0] == tables[1]
    assert sum(len(r["annotations"].head) for r in records) > 10 and len(floats[4]) >= 3
