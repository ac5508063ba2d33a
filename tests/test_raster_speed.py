"""Raster speed work (render/raster_kernels.py, render/raster_aa.py): frames with anti-aliasing ON are pinned.

The digests (first 16 hex digits of the sha256 of the RGB bytes and of the int32 object-id
buffer `ids_out`) were computed with the kernels and the AA resolve as they were before their
speed work (commit 4210278): any change to the centre pass, the edge scan or the sub-sample
evaluation that moves one byte fails here. AA-off frames are pinned in tests/test_antialias.py
and tests/test_render_speed_paths.py.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest

from avsim.render.geometry.scene import SceneRenderer
from avsim.render.raster.draw import rasterize_numba
from avsim.scenario.sample import make_sample_scenario

BIG_CAMERAS = ["camera_front_wide_120fov", "camera_cross_left_120fov"]
SAMPLE_AA_PINNED = {  # "<width>/<frame>/<camera>" -> (image digest, ids digest), sample seed 0, 4 s, AA on
    "1280/0/camera_cross_left_120fov": ("24fa9c853922e123", "7d02c77dd12eb1e8"),
    "1280/0/camera_front_wide_120fov": ("4dde85ce846bce75", "b14cc5feff31ff8d"),
    "1280/110/camera_cross_left_120fov": ("f5f71b380b3cdd38", "729d639086754eba"),
    "1280/110/camera_front_wide_120fov": ("cc6b0bee50524241", "f0bb046f090404fb"),
    "320/0/camera_cross_left_120fov": ("9d522a53bced78f2", "0be9a1ef7713c939"),
    "320/0/camera_cross_right_120fov": ("50a8e048df4a8d13", "d8414683452e7663"),
    "320/0/camera_front_tele_30fov": ("4c63dd09d87fe799", "bbc81e44833c5d06"),
    "320/0/camera_front_wide_120fov": ("6a78b5ead43b69ab", "1a6de2d836706b05"),
    "320/0/camera_rear_left_70fov": ("7b4fc30ad0a5c104", "1516b21572cdecd2"),
    "320/0/camera_rear_right_70fov": ("dfe52438c4a41504", "1516b21572cdecd2"),
    "320/0/camera_rear_tele_30fov": ("06b77fd23364be47", "560cfeafa79e2a5c"),
    "320/110/camera_cross_left_120fov": ("8224b1ca6c6cd3e1", "33536e26fb6b4cc0"),
    "320/110/camera_cross_right_120fov": ("68bd725e0c5385b0", "88f12d8f2a87bf30"),
    "320/110/camera_front_tele_30fov": ("be40dae67ab33b09", "61800fe854005d3e"),
    "320/110/camera_front_wide_120fov": ("6325df7a3ae20160", "f38eae7fff2f3213"),
    "320/110/camera_rear_left_70fov": ("2b18bdbf1d8b5ef4", "fa8d2876df4ee7b4"),
    "320/110/camera_rear_right_70fov": ("8bfd0e10e2e7acf6", "8b4c42fe42169d4c"),
    "320/110/camera_rear_tele_30fov": ("edd173271a654424", "d4c1b9005066c692"),
    "320/47/camera_cross_left_120fov": ("23d212a72607e0e0", "49aa8dd7b1774707"),
    "320/47/camera_cross_right_120fov": ("4b9efcf4eca1b6d3", "84ef4ae37ce3eafa"),
    "320/47/camera_front_tele_30fov": ("f3e2942a2274d126", "1406dbb949315b35"),
    "320/47/camera_front_wide_120fov": ("e92d9a9f93b3ae21", "013eae7809a5f8d3"),
    "320/47/camera_rear_left_70fov": ("90d430762c30a861", "1516b21572cdecd2"),
    "320/47/camera_rear_right_70fov": ("2703399d23eac500", "30b08df0fd9365ab"),
    "320/47/camera_rear_tele_30fov": ("5e24ec6d37af9a9a", "5683412cdf618b66"),
}
AV2_AA_PINNED = {  # the real AV2 sensor log through its own rig, 320x180, AA on
    "0/ring_front_center": ("23f66e2c40acb1c8", "2a67ea31fcfd171d"),
    "0/ring_front_left": ("364d49420f55209d", "11c916b1d1e4a453"),
    "0/ring_front_right": ("71edc5a090db2a44", "ee4d2919a9eb464d"),
    "0/ring_rear_left": ("a3ecc0be5b1573b7", "26ab9a2280c0e2c7"),
    "0/ring_rear_right": ("2e6e68d4ffa88f6d", "15127ed3c0cd9c2a"),
    "0/ring_side_left": ("90383ffa7007a029", "6533ae1658f70531"),
    "0/ring_side_right": ("6736497f8abc2ff5", "1516b21572cdecd2"),
    "100/ring_front_center": ("21d710016215d8d0", "e8f7dfbd9ff2d913"),
    "100/ring_front_left": ("42c30f7836223209", "8d338f0a75ca23b0"),
    "100/ring_front_right": ("5c75a5fefe56eb0e", "13f6ceee87430baf"),
    "100/ring_rear_left": ("ed15919da308dccb", "670bb000ea2844bc"),
    "100/ring_rear_right": ("d49c10491c61ebda", "3e63c45ec5d8c29d"),
    "100/ring_side_left": ("8655d278d8ef9cd4", "5adf9d326267f2a7"),
    "100/ring_side_right": ("b0e4a0494add4ac1", "1516b21572cdecd2"),
}
AV2_LOG = "av2/sensor/adcf7d18-0510-35b0-a2fa-b4cea13a6d76"


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


def _render(renderer: SceneRenderer, frames: tuple[int, ...], prefix: str) -> dict[str, tuple[str, str]]:
    got = {}
    for f in frames:
        for i, name in enumerate(renderer.camera_names):
            img, ids, _ = renderer.render_camera_ids(f, i)
            got[f"{prefix}{f}/{name}"] = (_digest(img), _digest(ids))
    return got


@pytest.fixture(scope="module")
def sample():
    return make_sample_scenario(seed=0, duration_s=4.0)


@pytest.mark.slow
def test_sample_aa_frames_and_ids_are_pinned(sample):
    got = _render(SceneRenderer(sample, size=(320, 180), antialias=True), (0, 47, 110), "320/")
    big = SceneRenderer(sample, size=(1280, 720), cameras=BIG_CAMERAS, antialias=True)
    got.update(_render(big, (0, 110), "1280/"))
    assert got == SAMPLE_AA_PINNED


def test_real_av2_aa_frames_and_ids_are_pinned(shared_data):
    from avsim.scenario.importers.registry import convert

    # pinned before frame 0 moved to the log's first annotated sweep (frame_origin_ns, tests/test_frame_origin.py):
    # the renderer's frames of the log's own frame times
    scenario = dataclasses.replace(convert(str(shared_data / AV2_LOG)), frame_origin_ns=None)
    assert _render(SceneRenderer(scenario, size=(320, 180), antialias=True), (0, 100), "") == AV2_AA_PINNED


def test_buffers_given_or_not_and_reused_give_the_same_bytes(sample):
    """`out` / `ids_out` full of stale values, or left to the function, and repeated calls: same bytes."""
    r = SceneRenderer(sample, size=(320, 180), cameras=BIG_CAMERAS, antialias=True)
    rays = r.rays(0)
    first, second = r.camera_primitives(47, 0), r.camera_primitives(110, 0)
    ref = [rasterize_numba(p, rays, antialias=aa) for p in (first, second) for aa in (True, False)]
    out = np.full((180, 320, 3), 77, np.uint8)
    ids = np.full((180, 320), 5, np.int32)
    for _ in range(2):
        got = [rasterize_numba(p, rays, out=out, ids_out=ids, antialias=aa).copy() for p in (first, second) for aa in (True, False)]
        assert all(np.array_equal(a, b) for a, b in zip(got, ref))
