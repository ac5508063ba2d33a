"""Draw sequence of the numba raster: nearest first, early z-rejects, and the (key, rank) z-test.

`rasterize_numba` draws the planars nearest first, then the capsules, and skips every pixel whose
z-buffer key is already below a primitive's key floor. None of that may change a pixel: the z-test
keeps the smallest (key, draw rank) pair, which does not depend on the sequence, and a floor is a
lower bound of the primitive's keys. These tests hold both to the draw-rank order.
"""

from __future__ import annotations

import numpy as np
import pytest

from avsim.core.agents import box_corners
from avsim.core.cameras import PinholeCamera
from avsim.core.rig import cosmos_rig
from avsim.core.transforms import SE3
from avsim.render import style
from avsim.render.geometry.scene import FrameObjects, SceneRenderer, render_objects
from avsim.render.raster import draw as raster
from avsim.render.raster import kernels as raster_kernels
from avsim.render.raster.draw import rasterize_numba
from avsim.render.raster.primitives import Capsules, Planars, Primitives
from avsim.scenario.synthetic import highway_scenario

PINHOLE = PinholeCamera(320, 180, 160.0, 160.0, 160.0, 90.0)


@pytest.fixture(scope="module")
def renderer() -> SceneRenderer:
    scenario = highway_scenario(2.0, rig=cosmos_rig(320, 180))
    return SceneRenderer(scenario, cameras=["camera_front_wide_120fov", "camera_rear_tele_30fov"], size=(320, 180))


def _draw(prims: Primitives, rays: np.ndarray, antialias: bool) -> bytes:
    ids = np.zeros((prims.height_px, prims.width_px), np.int32)
    img = rasterize_numba(prims, rays, ids_out=ids, antialias=antialias)
    return img.tobytes() + ids.tobytes()


def _calls(pairs: list[tuple[int, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kind, sequence) kernel calls as `raster._draw_sequence` returns them (every call with ids)."""
    seqs, calls, sizes = {0: [], 1: []}, [], [0, 0]
    for kind, seq in pairs:
        seqs[kind].append(seq)
        calls.append((kind, sizes[kind], sizes[kind] + len(seq), 1))
        sizes[kind] += len(seq)
    cap_seq, pl_seq = (np.concatenate([*seqs[k], np.zeros(0, np.int64)]).astype(np.int64) for k in (0, 1))
    return cap_seq, pl_seq, np.array(calls, np.int64).reshape(-1, 4)


def _rank_pairs(prims):
    return [(kind, np.arange(a, b, dtype=np.int64)) for kind, a, b in raster._runs(prims)]


def _rank_order(prims, pl_floor, cap_floor, tracked):
    return _calls(_rank_pairs(prims))


def _reversed(prims, pl_floor, cap_floor, tracked):
    return _calls([(kind, seq[::-1].copy()) for kind, seq in _rank_pairs(prims)[::-1]])


def _shuffled(prims, pl_floor, cap_floor, tracked):
    rng = np.random.default_rng(len(pl_floor) + 7 * len(cap_floor))
    calls = [(0, rng.permutation(len(cap_floor))), (1, rng.permutation(len(pl_floor)))]
    return _calls([(kind, seq.astype(np.int64)) for kind, seq in calls[:: int(rng.choice([-1, 1]))] if len(seq)])


@pytest.mark.parametrize("antialias", [False, True])
def test_any_draw_sequence_gives_the_rank_order_bytes(renderer, monkeypatch, antialias):
    cases = [(f, i) for f in (0, 13, 29) for i in range(len(renderer.rig))]
    prims = [renderer.camera_primitives(f, i) for f, i in cases]
    nearest_first = [_draw(p, renderer.rays(i), antialias) for p, (_, i) in zip(prims, cases)]
    assert any(p.n_planars > 5 for p in prims)
    for sequence in (_rank_order, _shuffled):
        monkeypatch.setattr(raster, "_draw_sequence", sequence)
        assert [_draw(p, renderer.rays(i), antialias) for p, (_, i) in zip(prims, cases)] == nearest_first


def test_key_floors_reject_nothing_that_could_win(renderer, monkeypatch):
    cases = [(f, i) for f in (3, 21) for i in range(len(renderer.rig))]
    with_floors = [_draw(renderer.camera_primitives(f, i), renderer.rays(i), False) for f, i in cases]
    monkeypatch.setattr(raster, "planar_key_floor", lambda p, near: np.full(len(p), -np.inf, np.float32))
    monkeypatch.setattr(raster, "capsule_key_floor", lambda p: np.full(len(p), -np.inf, np.float32))
    assert [_draw(renderer.camera_primitives(f, i), renderer.rays(i), False) for f, i in cases] == with_floors


def test_equal_keys_go_to_the_lower_rank_in_any_sequence(monkeypatch):
    # two coincident boxes: every fragment ties, and the first box (lower rank) must show
    corners = box_corners(np.array([[0.0, 0.0, 8.0]]), np.array([[4.0, 2.0, 1.5]]), np.array([[0.9, 0.1, 0.3, 0.3]]))
    both = FrameObjects.build(boxes=(np.concatenate([corners, corners]), ["Car", "Truck"]))
    alone = render_objects(PINHOLE, SE3.identity(), FrameObjects.build(boxes=(corners, ["Car"])))
    assert alone.any()
    for sequence in (None, _shuffled, _reversed):
        if sequence is not None:
            monkeypatch.setattr(raster, "_draw_sequence", sequence)
        np.testing.assert_array_equal(render_objects(PINHOLE, SE3.identity(), both), alone)


def test_key_floors_are_below_every_key_of_their_primitive():
    rng = np.random.default_rng(0)
    n = 400
    pls = Planars(origin=rng.normal(0, 3, (n, 3)) + [0, 0, 6], e1=rng.normal(0, 2, (n, 3)), e2=rng.normal(0, 2, (n, 3)),
                  is_tri=rng.random(n) < 0.5, rgb=np.zeros((n, 4, 3)), bbox=np.zeros((n, 4), np.int64),
                  zscale=rng.choice([1.0, 1.25], n), zbias=rng.choice([0.0, 0.5, -1e-3], n), order=np.arange(n))  # fmt: skip
    floor = raster_kernels.planar_key_floor(pls, style.NEAR_M)
    a, b = rng.random((2, n, 64))
    tri = pls.is_tri[:, None]
    a, b = np.where(tri & (a + b > 1), 1 - a, a), np.where(tri & (a + b > 1), 1 - b, b)
    depth = pls.origin[:, None, 2] + a * pls.e1[:, None, 2] + b * pls.e2[:, None, 2]
    drawn = (depth > style.NEAR_M) & (depth <= style.MAX_DEPTH_M)
    key = (pls.zscale[:, None] * depth + pls.zbias[:, None] + 1.0).astype(np.float32)
    assert drawn.mean() > 0.3
    assert np.all(~drawn | (key >= floor[:, None]))
    caps = Capsules(xy_px=np.zeros((n, 4)), inv_depth=1.0 / rng.uniform(0.3, 80.0, (n, 2)), radius_px=np.ones(n),
                    rgb=np.zeros((n, 3)), zscale=np.ones(n), zbias=rng.choice([0.0, -0.02], n), order=np.arange(n))  # fmt: skip
    t = rng.random((n, 64))
    i0, i1 = caps.inv_depth[:, :1], caps.inv_depth[:, 1:]
    cap_key = (1.0 / (i0 + t * (i1 - i0)) + caps.zbias[:, None] + 1.0).astype(np.float32)
    assert np.all(cap_key >= raster_kernels.capsule_key_floor(caps)[:, None])
