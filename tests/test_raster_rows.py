"""The vectorised planar row (`raster_kernels.planar_row`) against the scalar per-pixel kernels, and
strip-wise drawing (`raster_strips`) against one pass over the whole frame.

`draw_planars` casts a whole row span at once with branch-free code (numpy's float error model,
so that LLVM vectorises it) and z-tests the pixels after. The scalar `_planar_hit`, `_ztest` key
and `_put` colour stay the reference: every hit flag, key and colour byte must equal theirs,
also where n . r is 0, the ray is nan or inf, the depth is out of range or exactly on a limit.
"""

from __future__ import annotations

import numpy as np
import pytest

from avsim.render import style
from avsim.render.raster import kernels as raster_kernels
from avsim.render.raster.kernels import PARAM_EPS
from avsim.render.raster.primitives import Planars

FAR_M = 9.0


def _planars(rng: np.random.Generator, n: int) -> Planars:
    origin = rng.normal(0.0, 3.0, (n, 3)) + np.array([0.0, 0.0, 8.0])
    e1, e2 = rng.normal(0.0, 4.0, (n, 3)), rng.normal(0.0, 4.0, (n, 3))
    e2[0] = 2.0 * e1[0]  # degenerate (zero area): plane parameters zeroed
    e1[1], e2[1] = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])  # fronto-parallel: n . r = 1 everywhere
    e1[2], e2[2] = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])  # contains the rays with y = o_y / o_z
    # fronto-parallel squares a = rx - ox / 8, b = ry - oy / 8 at depth z: rays on the grid of `_rays` meet their
    # edges within or just beyond PARAM_EPS, or lie at exactly the near / far limit
    for p, (ox, oy, z) in enumerate([(4e-9, 0.0, 8.0), (1.6e-8, 0.0, 8.0), (0.0, -4e-9, 8.0), (0.0, -1.6e-8, 8.0),
                                     (-2e-9, -2e-9, 8.0), (0.0, 0.0, style.NEAR_M), (0.0, 0.0, FAR_M)], start=3):  # fmt: skip
        origin[p], e1[p], e2[p] = np.array([ox, oy, z]), np.array([8.0, 0.0, 0.0]), np.array([0.0, 8.0, 0.0])
    return Planars(
        origin=origin, e1=e1, e2=e2, is_tri=rng.random(n) < 0.5, rgb=rng.uniform(0.0, 255.0, (n, 4, 3)),
        bbox=np.zeros((n, 4), np.int64), zscale=rng.uniform(0.5, 2.0, n), zbias=rng.uniform(0.0, 0.1, n),
        order=np.arange(n, dtype=np.int64),
    )  # fmt: skip


def _rays(rng: np.random.Generator, n: int) -> np.ndarray:
    rays = rng.uniform(-1.5, 1.5, (n, 2)).astype(np.float32)
    rays[:4] = [[np.nan, 0.0], [0.0, np.nan], [np.inf, 0.0], [0.0, -np.inf]]
    rays[20:56] = np.stack(np.meshgrid(*[np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.5], np.float32)] * 2), -1).reshape(-1, 2)
    return rays


def _reference(plane: np.ndarray, rgb: np.ndarray, tri: bool, zs: float, zb: float, rays: np.ndarray, far: float):
    hit, key, col = [], [], []
    img = np.zeros((1, 1, 3), np.uint8)
    for rx, ry in rays.astype(np.float64):
        depth, a, b = raster_kernels._planar_hit(plane[None], 0, rx, ry, tri, style.NEAR_M, far, PARAM_EPS)
        hit.append(depth >= 0.0)
        key.append(np.float32(zs * depth + zb + 1.0))
        if tri:
            raster_kernels._put(img, 0, 0, depth, rgb[0, 0], rgb[0, 1], rgb[0, 2])
        else:
            a, b = min(max(a, 0.0), 1.0), min(max(b, 0.0), 1.0)
            w = np.array([(1 - a) * (1 - b), a * (1 - b), a * b, (1 - a) * b])
            c = [w[0] * rgb[0, ch] + w[1] * rgb[1, ch] + w[2] * rgb[2, ch] + w[3] * rgb[3, ch] for ch in range(3)]
            raster_kernels._put(img, 0, 0, depth, *c)
        col.append(img[0, 0].copy())
    return np.array(hit), np.array(key, np.float32), np.array(col)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planar_row_equals_the_scalar_kernels(seed):
    rng = np.random.default_rng(seed)
    prims = _planars(rng, 24)
    prims.is_tri[3:10] = [False, False, False, False, True, False, False]
    with np.errstate(invalid="ignore"):  # planar 0 is degenerate
        plane = prims.plane_params()
    rays = _rays(rng, 301)
    o = prims.origin[2]
    rays[4:20, 1] = np.float32(o[1] / o[2])  # in the plane of planar 2: n . r = 0 exactly
    far = FAR_M  # some depths beyond it
    n_hit = 0
    for p in range(len(plane)):
        key, hit, col = np.empty(len(rays), np.float32), np.empty(len(rays), np.bool_), np.empty((3, len(rays)), np.uint8)
        zs, zb = float(prims.zscale[p]), float(prims.zbias[p])
        tri = bool(prims.is_tri[p])
        raster_kernels.planar_row(rays.reshape(-1), plane[p], prims.rgb[p], tri, zs, zb, style.NEAR_M, far, PARAM_EPS,
                                  key, hit, col)  # fmt: skip
        ref_hit, ref_key, ref_col = _reference(plane[p], prims.rgb[p], tri, zs, zb, rays, far)
        np.testing.assert_array_equal(hit, ref_hit)
        np.testing.assert_array_equal(key[hit], ref_key[hit])
        np.testing.assert_array_equal(col.T[hit], ref_col[hit])
        n_hit += int(hit.sum())
    assert 0 < n_hit < len(plane) * len(rays)


def test_planar_row_reads_interleaved_rays_of_any_span():
    rng = np.random.default_rng(5)
    prims = _planars(rng, 12)
    prims.origin[3], prims.e1[3], prims.e2[3] = [-6.0, -6.0, 10.0], [12.0, 0.0, 0.0], [0.0, 12.0, 2.0]
    with np.errstate(invalid="ignore"):
        plane = prims.plane_params()
    row = np.stack([np.linspace(-1.0, 1.0, 40), np.full(40, 0.1)], -1).astype(np.float32).reshape(-1)  # hits x 10 .. 29
    full_key, full_hit, col = np.empty(40, np.float32), np.empty(40, np.bool_), np.empty((3, 40), np.uint8)
    args = (plane[3], prims.rgb[3], False, 1.0, 0.0, style.NEAR_M, style.MAX_DEPTH_M, PARAM_EPS)
    raster_kernels.planar_row(row, *args, full_key, full_hit, col)
    key, hit = np.empty(40, np.float32), np.empty(40, np.bool_)
    raster_kernels.planar_row(row[2 * 7 : 2 * 19], *args, key, hit, col)  # pixels 7 .. 18
    np.testing.assert_array_equal(hit[:12], full_hit[7:19])
    np.testing.assert_array_equal(key[:12][hit[:12]], full_key[7:19][hit[:12]])
    assert 0 < hit[:12].sum() < 12


@pytest.fixture(scope="module")
def renderer():
    from avsim.core.rig import cosmos_rig
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.scenario.synthetic import highway_scenario

    scenario = highway_scenario(2.0, rig=cosmos_rig(320, 180))
    return SceneRenderer(scenario, cameras=["camera_front_wide_120fov", "camera_rear_tele_30fov"], size=(320, 181))


@pytest.mark.parametrize("antialias", [False, True])
def test_strips_of_any_height_give_the_whole_frame_pass(renderer, monkeypatch, antialias):
    # every render is drawn in strips (`raster_strips.draw_strips`, with ids `draw_strips_ids`); a strip of the whole
    # image is the one pass over the frame
    from avsim.render.raster import draw as raster

    cases = [(renderer.camera_primitives(f, i), renderer.rays(i)) for f in (0, 17, 41) for i in range(len(renderer.rig))]
    ids = np.empty((181, 320), np.int32)
    whole = [raster.rasterize_numba(p, rays, ids_out=ids, antialias=antialias).tobytes() for p, rays in cases]
    assert any(p.n_planars > 5 and p.n_capsules > 5 for p, _ in cases)
    for strip_rows in (1, 2, 7, 32, 180, 181, 500):
        monkeypatch.setattr(raster, "STRIP_ROWS", strip_rows)
        assert [raster.rasterize_numba(p, rays, antialias=antialias).tobytes() for p, rays in cases] == whole, strip_rows


@pytest.mark.parametrize("antialias", [False, True])
def test_strips_with_ids_give_the_same_ids_and_labels_at_any_height(renderer, monkeypatch, antialias):
    # the labelled render draws its ids and their statistics in strips: the pixels are the render's, the ids and the
    # statistics' won boxes and counts those of one strip over the whole image, and so is the coverage read from them
    from avsim.render.raster import draw as raster

    cases = [(renderer.camera_primitives(f, i), renderer.rays(i), len(renderer.box_track_ids(f)))
             for f in (0, 17, 41) for i in range(len(renderer.rig))]  # fmt: skip

    def labelled() -> list[tuple[bytes, ...]]:
        out = []
        for p, rays, n in cases:
            ids, stats = np.empty((181, 320), np.int32), raster.new_id_stats(n)
            img = raster.rasterize_numba(p, rays, ids_out=ids, antialias=antialias, id_stats_out=stats)
            cover = raster.object_coverage_visible_px(p, rays, n, ids, stats)
            out.append((img.tobytes(), ids.tobytes(), stats[:, [0, 1, 2, 3, 8]].tobytes(), *(a.tobytes() for a in cover)))
        return out

    monkeypatch.setattr(raster, "STRIP_ROWS", 181)
    whole = labelled()
    plain = [raster.rasterize_numba(p, rays, antialias=antialias).tobytes() for p, rays, _ in cases]
    assert [w[0] for w in whole] == plain
    assert sum(int(np.frombuffer(w[1], np.int32).max()) >= 0 for w in whole) >= 3  # boxes drawn
    for strip_rows in (1, 7, 32):
        monkeypatch.setattr(raster, "STRIP_ROWS", strip_rows)
        assert labelled() == whole, strip_rows
