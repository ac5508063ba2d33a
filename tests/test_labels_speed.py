"""Labels speed work (issue 13 item 4) keeps every written byte: the label files and videos of a tiny
labelled render are pinned to the sha256 they had before the speed work, and the compiled coverage
pass equals drawing each object alone with the raster kernels."""

from __future__ import annotations

import hashlib
from pathlib import Path

import av
import numpy as np
import pytest

from avsim.cli import main
from avsim.core import video as core_video
from avsim.render import style
from avsim.render.geometry.scene import SceneRenderer
from avsim.render.labels.boxes import unoccluded_pixels
from avsim.render.raster.draw import new_id_stats
from avsim.render.raster.kernels import PARAM_EPS, draw_capsules, draw_planars
from avsim.render.raster.primitives import PIXEL_CENTRE_OFFSET, DrawPlan, FrameBuffers, IdBuffers, Primitives
from avsim.scenario.io import load_scenario

CAMERAS = "camera_front_wide_120fov,camera_cross_left_120fov"
SKIPPED = ("render_summary.json", "render_inputs.json")  # timings; resume digests (version, options)
# `avsim render s out --labels --size 320x180 --frames 4 --cameras CAMERAS` (s: `avsim sample s
# --duration-s 1`) on d089305, before the speed work; render_summary.json holds timings and
# render_inputs.json the resume digests (avsim version, options): both left out
PINNED_SHA256 = {
    "avsim_sample_seed0.camera_cross_left_120fov.mp4": "7fb9c7f4ea263d37ac146c91111c279bf926e754c43d4177ed70acbc7bdf0b9a",
    "avsim_sample_seed0.camera_front_wide_120fov.mp4": "6a22e9bc2630af476056468daa93f5ab7f61d80313766a9e91efe15a242b6317",
    "labels/boxes3d.json": "a8156f02701a8c5f3afca59876a1aad1b1cf70f9f4ac31b0b8c8ae421b8d4c49",
    "labels/coco/camera_cross_left_120fov.json": "74992905fe2932031887e55715dff8e36dd799be7c86215b210aafd575f8bd2c",
    "labels/coco/camera_front_wide_120fov.json": "cc933235f4484f2fed055fb86404ec5953134570fc501f8bcef488f404a896a1",
    "labels/index.json": "2b8a4d7ed4cfb329f3ebecfab05a69edc3e4470826db16272f06d783aac096e3",
    "labels/openlane/camera_cross_left_120fov/000000.json": "9621f8c04b9fc6b5de4c4e9664f20c6ae5e0a8de8c7680ba5e1c40122d2818df",
    "labels/openlane/camera_cross_left_120fov/000001.json": "802fddc9181f39212db61cd8c689f1e985394a1facbc286d2bcc07a83c70543b",
    "labels/openlane/camera_cross_left_120fov/000002.json": "04ccdf7d845b716c4990933c1e80a815740a695f1b366b230b905159ec6f917c",
    "labels/openlane/camera_cross_left_120fov/000003.json": "1841f0445bb58b424cb1b96284ab2c81130025f0cce87089ab3c9e218cfec58f",
    "labels/openlane/camera_front_wide_120fov/000000.json": "738e1c56530d9369255ee80a48cba66c0a62a82d85bf395945b0219de4fd4c5a",
    "labels/openlane/camera_front_wide_120fov/000001.json": "67a810e64665b33a0f4daf4f955e8dfeeb1e4d3d4753ce58834f3634f10e91ba",
    "labels/openlane/camera_front_wide_120fov/000002.json": "3279351f01bf66af4f915337f633657c3da711aecdd17b86866f8915540b2a43",
    "labels/openlane/camera_front_wide_120fov/000003.json": "1b03c30548e09ed7e816760efb24cb39a75750bfa8a6aa019821217cf728667f",
}


@pytest.mark.slow
def test_labelled_render_bytes_are_pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session_sample_1s_dir: Path) -> None:
    # the videos were pinned when libswscale converted RGB -> YUV inside the encoder: put it back for them
    monkeypatch.setattr(core_video, "rgb_to_yuv420p", _swscale_yuv420p)
    sample = session_sample_1s_dir
    out = tmp_path / "out"
    args = ["render", str(sample), str(out), "--labels", "--size", "320x180", "--frames", "4", "--cameras", CAMERAS]
    assert main(args) == 0
    clip = out / "avsim_sample_seed0"
    got = {p.relative_to(clip).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(clip.rglob("*")) if p.is_file() and p.name not in SKIPPED}
    assert got == PINNED_SHA256


# `avsim render s out --labels --size 160x90 --frames 1:6 --chunk 2 --cameras CAMERAS` (three chunks: a
# merge of three parts per camera, frames not starting at 0) and `avsim labels` of the same frames
# (one video: its COCO file names and index differ, the rest is the render's), on 1f47cd5
PINNED_CHUNKED_SHA256 = {
    "boxes3d.json": "5b99b427e8b73f525b99782cb27353d061a75d9a594edfad70337fa4aecd95fc",
    "coco/camera_cross_left_120fov.json": "e896e97ac06842c0009313f7d384cda1927a3d1b9ab6cca725e437d207495a44",
    "coco/camera_front_wide_120fov.json": "f6db683bf75f66ba6cee1b0a06b8c12bda557edcb03223169084715470b7d019",
    "index.json": "db2ee3cfa792555f3e998bf943f3ec432f9a38dad51e024a35c387497d30b65b",
    **{f"openlane/camera_cross_left_120fov/{f:06d}.json": h for f, h in enumerate((
        "7623046c65d6500b33138dde394775903311c4e9e88e6b598c4f26aa607455c7",
        "0987c091b8d0d0176cf866831c423f3b6b68268bdb94a9ee4c44789bf4e5cd9f",
        "a84590e9aab512ce5dd809e4f6169a7d8b0222293745b9904193f39bb3368cc7",
        "96dc7524729c1ee17ea0fd32f19f37ea3bdee509150d18cbb9916041935f607f",
        "55ae312ae142d5616f3e9e8a0332371d4fc3cda24cab2c621a2e4553ed655061"), 1)},
    **{f"openlane/camera_front_wide_120fov/{f:06d}.json": h for f, h in enumerate((
        "c6dd82ac98dcab3e9af6a1c2f304c090f19ef0ef5a6117ad33664d6bf2d5b6be",
        "4a4eeee4bf43cef60aae8e02a6d23d4b05b3d9977c1b2175590a990219d7581c",
        "5622c51de8ba52b4f1fbc8c22afa6adb2352cf08aa12a2125e0259a4af76892f",
        "e93e83015b1269bee05cae879b33a37cd862a510461f5531b92a6de147a05d96",
        "ed0e862c1d1a77e814bfcd5845137f7127d0b030f4a87d11f6e0ea432bc3d863"), 1)},
}  # fmt: skip
PINNED_LABELS_CMD_SHA256 = {
    "coco/camera_cross_left_120fov.json": "bf3aaecc1877db5ff86cb454773deb76fb8068040f493bcdfab9efa58a558431",
    "coco/camera_front_wide_120fov.json": "23c301c8f5a72111930f3d49dd298ffdcbe192743c721cbc68f563a0ee64ec35",
    "index.json": "4fa0c2e8a1449a9135cf6c99f86feb9d6a623b998d266fa68f4bc1ad15e0a67b",
}


def _label_hashes(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.e2e
def test_chunked_render_and_labels_command_label_bytes_are_pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session_sample_1s_dir: Path) -> None:
    from avsim.render.run import labels as labels_run

    sample = session_sample_1s_dir
    common = ["--size", "160x90", "--frames", "1:6", "--cameras", CAMERAS]
    render = ["render", str(sample), str(tmp_path / "out"), "--labels", "--chunk", "2", *common]
    with monkeypatch.context() as m:  # a run stopped after its segments, before the merge: the parts stay
        m.setattr(labels_run, "merge_parts", _stopped)
        assert main(render) == 130  # interrupted
    labels = tmp_path / "out" / "avsim_sample_seed0" / "labels"
    assert len(list((labels / ".parts").glob("*.json"))) == 6 and not (labels / "index.json").exists()
    assert main(render) == 0  # resumes: merges the kept parts
    assert _label_hashes(labels) == PINNED_CHUNKED_SHA256
    assert main(["labels", str(sample), str(tmp_path / "lab"), *common]) == 0
    assert _label_hashes(tmp_path / "lab" / "avsim_sample_seed0" / "labels") == {**PINNED_CHUNKED_SHA256, **PINNED_LABELS_CMD_SHA256}


@pytest.mark.e2e
def test_labels_in_parts_and_blocks_of_two_frames_keep_the_label_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session_sample_1s_dir: Path) -> None:
    # `avsim labels` keeps its records as parts of SEGMENT_FRAMES frames and the merge streams boxes3d.json
    # MERGE_BOXES_BLOCK_FRAMES frames at a time: parts and blocks of 2 over 5 frames (3 each, the last of a
    # single frame) must write the bytes of one part and one block
    from avsim.render.labels import merge as labels_merge
    from avsim.render.run import units

    sample = session_sample_1s_dir
    monkeypatch.setattr(labels_merge, "MERGE_BOXES_BLOCK_FRAMES", 2)
    monkeypatch.setattr(units, "SEGMENT_FRAMES", 2)
    common = ["--size", "160x90", "--frames", "1:6", "--cameras", CAMERAS]
    assert main(["labels", str(sample), str(tmp_path / "lab"), *common]) == 0
    assert _label_hashes(tmp_path / "lab" / "avsim_sample_seed0" / "labels") == {**PINNED_CHUNKED_SHA256, **PINNED_LABELS_CMD_SHA256}


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

    from avsim.core.errors import AvsimInputError
    from avsim.render.labels.boxes import visible_boxes
    from avsim.render.labels.json_text import columns_json
    from avsim.render.labels.records import _f, read_part
    from avsim.render.labels.rle import rle_string, rle_strings

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
