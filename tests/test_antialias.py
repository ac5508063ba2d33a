"""Anti-aliasing (render/raster_aa.py): exact interiors, blended edges, both backends, --aa off unchanged."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from avsim.core.cameras import PinholeCamera
from avsim.core.rig import cosmos_rig
from avsim.core.transforms import SE3
from avsim.render import style
from avsim.render.geometry.scene import FrameObjects, SceneRenderer, render_objects
from avsim.scenario.synthetic import highway_scenario

W, H = 320, 180
PINHOLE = PinholeCamera(W, H, 160.0, 160.0, 160.0, 90.0)  # 16 px per metre at z = 10 m
RGB = np.array([200.0, 120.0, 40.0])
# sha256 of the sample scenario (seed 0, 2 s) at 160x90, frames 0, 20, 45, every camera, rendered on main
# before anti-aliasing existed (numba and torch gave the same bytes): `--aa off` must keep it
MAIN_SHA256_160x90 = "db76d3d10a81a6404f4b9bcdb51b337c8f715fe980ac36c5f14834d892130ef7"


def _square(u0: float, u1: float, v0: float, v1: float) -> FrameObjects:
    """A flat fronto-parallel square 10 m ahead imaged at u in [u0, u1], v in [v0, v1] (two triangles)."""
    x0, x1, y0, y1 = (u0 - 160) / 16, (u1 - 160) / 16, (v0 - 90) / 16, (v1 - 90) / 16
    a, b, c, d = [x0, y0, 10.0], [x1, y0, 10.0], [x1, y1, 10.0], [x0, y1, 10.0]
    return FrameObjects.build(triangles=(np.array([[a, b, c], [a, c, d]], float), np.stack([RGB, RGB])))


def _faded(rgb: np.ndarray, depth_m: float) -> list[int]:
    return [int(c * (1 - depth_m / style.MAX_DEPTH_M) + 0.5) for c in rgb]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_flat_face_keeps_its_exact_colour_where_every_sub_sample_is_covered(backend):
    # edges at .55: the border pixels (100, 110, rows 61, 70) are edge pixels (a neighbour is
    # background) whose 4 sub-samples (+-0.125, +-0.375 px) all lie inside: exact colour, no blend
    objs = _square(99.55, 110.45, 60.55, 70.45)
    on = render_objects(PINHOLE, SE3.identity(), objs, backend, antialias=True)
    off = render_objects(PINHOLE, SE3.identity(), objs, backend, antialias=False)
    np.testing.assert_array_equal(on, off)
    assert on[61:71, 100:111].reshape(-1, 3).tolist() == [_faded(RGB, 10.0)] * 110
    assert not on[:, 99].any() and not on[:, 111].any()


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_edge_pixel_is_the_mean_of_its_sub_samples(backend):
    # left edge at u = 99.9: in column 100 two of the 4 sub-samples (x = 99.625, 99.875) are
    # outside, two (100.125, 100.375) inside -> half the face colour over the black background
    objs = _square(99.9, 110.45, 60.55, 70.45)
    on = render_objects(PINHOLE, SE3.identity(), objs, backend, antialias=True)
    off = render_objects(PINHOLE, SE3.identity(), objs, backend, antialias=False)
    face = np.array(_faded(RGB, 10.0))
    assert off[65, 100].tolist() == face.tolist()  # one sample per pixel: the centre (100.0) is inside
    assert on[65, 100].tolist() == ((2 * face + 2) // 4).tolist()
    np.testing.assert_array_equal(on[61:71, 101:111], off[61:71, 101:111])  # interior untouched


def test_slanted_line_edges_blend_between_the_two_colours():
    ground = 1.5
    road = np.array([[-6.0, ground, 6.0], [6.0, ground, 6.0], [6.0, ground, 30.0], [-6.0, ground, 30.0]])
    road_rgb = np.array([style.CROSSWALK_RGB] * 2, float)
    line = FrameObjects.build(
        lines=(np.array([[-1.0, ground, 6.0]]), np.array([[2.0, ground, 30.0]]), np.array([[255.0, 255, 255]]), np.array([8.0])),
        triangles=(np.stack([road[[0, 1, 2]], road[[0, 2, 3]]]), road_rgb),
    )
    on = render_objects(PINHOLE, SE3.identity(), line, antialias=True).astype(int)
    off = render_objects(PINHOLE, SE3.identity(), line, antialias=False).astype(int)
    changed = (on != off).any(-1)
    assert changed.sum() > 50  # the line's staircase is smoothed
    # every changed pixel inside the road (rows 101..127; the road spans v = 98 .. 130) is a blend:
    # each channel between the darkest and brightest of the pixel and its 4 neighbours in the
    # single-sample image (road and line colours, faded); at the road's ends background shows
    ys, xs = np.nonzero(changed[101:128])
    ys = ys + 101
    pad = np.pad(off, ((1, 1), (1, 1), (0, 0)), mode="edge")
    ys1, xs1 = ys + 1, xs + 1
    near = np.stack([pad[ys1, xs1], pad[ys1 - 1, xs1], pad[ys1 + 1, xs1], pad[ys1, xs1 - 1], pad[ys1, xs1 + 1]])
    assert ((on[ys, xs] >= near.min(0) - 1) & (on[ys, xs] <= near.max(0) + 1)).all()
    assert len({tuple(c) for c in on[ys, xs]}) > 10  # many intermediate shades, not two colours
    # interior of the line and of the road: untouched
    assert (~changed).mean() > 0.97


@pytest.fixture(scope="module")
def small_scene():
    return highway_scenario(2.0, rig=cosmos_rig(320, 180))


def test_numba_and_torch_agree_with_aa_and_it_is_deterministic(small_scene):
    from avsim.render.raster.draw import rasterize_numba, rasterize_torch

    r = SceneRenderer(small_scene, cameras=["camera_front_wide_120fov", "camera_rear_tele_30fov"], size=(320, 180))
    prims = r.primitives(5)
    rays = [r.rays(i) for i in range(len(prims))]
    a = np.stack([rasterize_numba(p, q, antialias=True) for p, q in zip(prims, rays)])
    b = rasterize_torch(prims, rays, device="cpu", max_fragments=50_000, antialias=True)
    assert np.abs(a.astype(int) - b.astype(int)).max() <= 1
    again = np.stack([rasterize_numba(p, q, antialias=True) for p, q in zip(prims, rays)])
    assert a.tobytes() == again.tobytes()
    off = np.stack([rasterize_numba(p, q) for p, q in zip(prims, rays)])
    assert 0.005 < (a != off).any(-1).mean() < 0.1  # only edge pixels change


def test_label_ids_are_the_pixel_centre_winners_with_aa_on(small_scene):
    cams = ["camera_front_wide_120fov"]
    on = SceneRenderer(small_scene, cameras=cams, size=(320, 180), antialias=True)
    off = SceneRenderer(small_scene, cameras=cams, size=(320, 180), antialias=False)
    img_on, ids_on, _ = on.render_camera_ids(5, 0)
    img_off, ids_off, _ = off.render_camera_ids(5, 0)
    np.testing.assert_array_equal(ids_on, ids_off)
    assert img_on.tobytes() == on.render_camera(5, 0).tobytes()  # the labelled image is the video's frame
    assert img_off.tobytes() == off.render_camera(5, 0).tobytes()


@pytest.mark.slow
def test_aa_off_frames_are_byte_identical_to_main():
    from avsim.scenario.sample import make_sample_scenario

    scenario = make_sample_scenario(seed=0, duration_s=2.0, fps=30.0)
    r = SceneRenderer(scenario, size=(160, 90), antialias=False)
    h = hashlib.sha256()
    for f in (0, 20, 45):
        frames = r.render_frame(f)
        for name in sorted(frames):
            h.update(name.encode())
            h.update(np.ascontiguousarray(frames[name]).tobytes())
    assert h.hexdigest() == MAIN_SHA256_160x90


def test_render_options_and_cli_default_to_aa_on(tmp_path):
    from typer.testing import CliRunner

    from avsim.edit.cli import app  # the render command lives there (it also renders edit outputs)
    from avsim.render.run.plan import RenderOptions

    assert RenderOptions(out=tmp_path).antialias is True
    result = CliRunner().invoke(app, ["render", str(tmp_path), str(tmp_path / "out"), "--aa", "maybe"])
    assert result.exit_code != 0 and "--aa" in result.output
