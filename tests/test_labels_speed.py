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
from avsim.render.frame import SceneRenderer
from avsim.render.geometry import PIXEL_CENTRE_OFFSET
from avsim.render.labels import unoccluded_pixels
from avsim.render.raster import Primitives, _f64, _obj_ids, _plane_params, draw_capsules, draw_planars, new_id_stats
from avsim.render.raster_kernels import PARAM_EPS
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


def test_labelled_render_bytes_are_pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the videos were pinned when libswscale converted RGB -> YUV inside the encoder: put it back for them
    monkeypatch.setattr(core_video, "rgb_to_yuv420p", _swscale_yuv420p)
    assert main(["sample", str(tmp_path / "s"), "--duration-s", "1"]) == 0
    out = tmp_path / "out"
    args = ["render", str(tmp_path / "s"), str(out), "--labels", "--size", "320x180", "--frames", "4", "--cameras", CAMERAS]
    assert main(args) == 0
    clip = out / "avsim_sample_seed0"
    got = {p.relative_to(clip).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(clip.rglob("*")) if p.is_file() and p.name not in SKIPPED}
    assert got == PINNED_SHA256


def _swscale_yuv420p(frame_rgb: np.ndarray) -> np.ndarray:
    return av.VideoFrame.from_ndarray(np.ascontiguousarray(frame_rgb), format="rgb24").reformat(format="yuv420p").to_ndarray()


def _drawn_alone(prims: Primitives, rays: np.ndarray, n_objects: int) -> np.ndarray:
    """Reference: each object's primitives drawn alone into cleared buffers with the raster kernels."""
    h, w = prims.height_px, prims.width_px
    counts = np.zeros(n_objects, np.int64)
    cap_obj, pl_obj = _obj_ids(prims.cap_obj, prims.n_capsules), _obj_ids(prims.pl_obj, prims.n_planars)
    spans = len(prims.pl_row_start) == prims.n_planars and prims.n_planars > 0
    pl = (_plane_params(prims), np.ascontiguousarray(prims.pl_is_tri), _f64(prims.pl_rgb), np.ascontiguousarray(prims.pl_bbox, np.int64),
          _f64(prims.pl_zscale), _f64(prims.pl_zbias), spans, np.ascontiguousarray(prims.pl_row_start, np.int64),
          np.ascontiguousarray(prims.pl_row_span, np.int64).reshape(-1, 2))  # fmt: skip
    cap = tuple(_f64(getattr(prims, f)) for f in ("cap_xy", "cap_inv_depth", "cap_radius_px", "cap_rgb", "cap_zscale", "cap_zbias"))
    no_win = (np.zeros((1, 1), np.int32), np.zeros(max(prims.n_capsules, prims.n_planars), np.int32), False, new_id_stats(n_objects))
    track = (np.ones(prims.n_capsules, bool), np.ones(prims.n_planars, bool))
    for k in range(n_objects):
        img, zbuf, ids = np.zeros((h, w, 3), np.uint8), np.full((h, w), np.inf, np.float32), np.full((h, w), -1, np.int32)
        for p in np.flatnonzero(pl_obj == k):
            draw_planars(img, zbuf, rays, *pl, p, p + 1, style.NEAR_M, style.MAX_DEPTH_M, PARAM_EPS, ids, pl_obj, True, *no_win, track[1])
        for s in np.flatnonzero(cap_obj == k):
            draw_capsules(img, zbuf, *cap, s, s + 1, PIXEL_CENTRE_OFFSET, ids, cap_obj, True, *no_win, track[0])
        counts[k] = int((ids == k).sum())
    return counts


@pytest.fixture(scope="module")
def small_renderer(tmp_path_factory: pytest.TempPathFactory) -> SceneRenderer:
    folder = tmp_path_factory.mktemp("labels_speed") / "s"
    assert main(["sample", str(folder), "--duration-s", "1"]) == 0
    return SceneRenderer(load_scenario(folder), size=(240, 136))


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

    from avsim.render.labels_json import float_lists_json, float_rows_json

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
    from avsim.render.labels import visible_boxes
    from avsim.render.raster import object_coverage_visible_px

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
        contested += int((drawn & (stats[:, 0] == 1)).sum())
        uncontested += int((drawn & (stats[:, 0] == 0)).sum())
        seen += int((vis > 0).sum())
    assert seen > 10 and contested > 5 and uncontested > 5  # both paths of the shortcut ran
