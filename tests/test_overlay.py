"""`avsim render --overlay`: exact coverage, no halo, real frames paired by time, sizes checked."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from avsim.cli import main
from avsim.core.rig import cosmos_rig
from avsim.core.video import MP4Writer, read_video
from avsim.maps import style as map_style
from avsim.render.geometry.scene import SceneRenderer
from avsim.render.raster.draw import rasterize_numba
from avsim.render.raster.primitives import Capsules, Primitives
from avsim.render.run import overlay, real_frames
from avsim.scenario.io import save_scenario
from avsim.scenario.synthetic import highway_scenario

W, H = 160, 96
CAM = "camera_front_wide_120fov"
CLIP = "synthetic_highway"


@pytest.fixture(scope="module")
def scenario_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("scen") / "highway"
    save_scenario(highway_scenario(0.5, rig=cosmos_rig()), folder)
    return folder


def _palette() -> list[tuple[int, int, int]]:
    s = map_style
    colours = [s.ROAD_BOUNDARY_RGB, s.WAIT_LINE_RGB, s.POLE_RGB, s.CROSSWALK_RGB, s.ROAD_MARKING_RGB, s.TRAFFIC_SIGN_RGB,
               s.BOX_EDGE_RGB, s.WHITE_RGB, s.YELLOW_RGB, s.OTHER_LANE_RGB, *s.TRAFFIC_LIGHT_RGB.values()]  # fmt: skip
    colours += [c for pair in s.BOX_RGB.values() for c in pair]
    colours += [st.rgb for st in s.LANE_STYLES.values()]
    return sorted(set(map(tuple, colours)))


def _capsule(rgb: tuple[int, int, int], depth_m: float) -> Primitives:
    return Primitives(W, H, Capsules(
        xy_px=np.array([[20.0, 40.0, 140.0, 40.0]]), inv_depth=np.full((1, 2), 1.0 / depth_m), radius_px=np.array([3.0]),
        rgb=np.array([rgb], float), zscale=np.ones(1), zbias=np.zeros(1), order=np.zeros(1, np.int64),
    ))  # fmt: skip


def test_every_palette_colour_fades_to_exact_black_so_coverage_comes_from_the_rasteriser():
    rays = np.zeros((H, W, 2), np.float32)
    palette = _palette()
    assert len(palette) >= 15 and (0, 0, 0) not in palette  # no colour is black at full strength ...
    for rgb in palette:
        near = _capsule(rgb, 100.0)  # ... dimmed to half at 100 m, still not black ...
        img = rasterize_numba(near, rays)
        assert img[40, 80].any()
        far = _capsule(rgb, 199.8)  # ... but faded to (0, 0, 0) near 200 m: `frame.any(-1)` would miss it
        ids = np.empty((H, W), np.int32)
        img = rasterize_numba(far, rays, ids_out=ids)
        assert not img.any()
        marked = far.with_object_ids(np.zeros(1, np.int32), np.zeros(0, np.int32))
        img = rasterize_numba(marked, rays, ids_out=ids)
        assert not img.any() and (ids[40, 80] == 0) and (ids >= 0).sum() > 100


def test_coverage_image_is_the_render_and_composite_is_exact(scenario_dir):
    from avsim.scenario.io import load_scenario

    renderer = SceneRenderer(load_scenario(scenario_dir), cameras=[CAM], size=(W, H))
    img, coverage = overlay.render_with_coverage(renderer, 3, 0)
    np.testing.assert_array_equal(img, renderer.render_camera(3, 0))
    assert (coverage >= img.any(-1)).all() and 0.02 < coverage.mean() < 0.9
    real = np.random.default_rng(0).integers(0, 256, (H, W, 3), dtype=np.uint8)
    out = overlay.composite(real, img, coverage)
    np.testing.assert_array_equal(out[~coverage], real[~coverage])  # undrawn: the real pixels exactly
    expected = np.round(0.5 * real[coverage].astype(float) + 0.5 * img[coverage]).astype(np.uint8)
    np.testing.assert_array_equal(out[coverage], expected)


def _real_video(path: Path, n: int, fps: float, size: tuple[int, int] = (W, H), textured: bool = False) -> None:
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    with MP4Writer(path, w, h, fps) as writer:
        for k in range(n):
            if textured:  # smooth photo-like texture, moving a little per frame
                base = 128 + 60 * np.sin(xx / 9.0 + k * 0.3) * np.cos(yy / 7.0)
                frame = np.stack([base, base * 0.8 + 20, 255 - base], -1).clip(0, 255).astype(np.uint8)
            else:
                frame = np.full((h, w, 3), 10 + 8 * k, np.uint8)
            writer.write(frame)


def _render(scenario_dir: Path, out: Path, real: Path, *extra: str) -> int:
    return main(["render", str(scenario_dir), str(out), "--size", f"{W}x{H}", "--cameras", CAM, "--overlay", str(real), *extra])


@pytest.mark.slow
def test_overlay_has_no_halo(scenario_dir, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    _real_video(real / f"{CAM}.mp4", 12, 30.0, textured=True)
    out = tmp_path / "out"
    assert _render(scenario_dir, out, real, "--frames", "10") == 0
    decoded = read_video(out / CLIP / f"{CLIP}.{CAM}.overlay.mp4").astype(int)
    real_decoded = read_video(real / f"{CAM}.mp4").astype(int)
    from avsim.scenario.io import load_scenario

    renderer = SceneRenderer(load_scenario(scenario_dir), cameras=[CAM], size=(W, H))
    with MP4Writer(tmp_path / "again.mp4", W, H, 30.0) as writer:  # the codec's own noise: the real frames encoded again
        for frame in real_decoded[:10]:
            writer.write(frame.astype(np.uint8))
    again = read_video(tmp_path / "again.mp4").astype(int)
    diff, noise = [], []
    for k in range(10):
        coverage = overlay.render_with_coverage(renderer, k, 0)[1]
        far = cv2.dilate(coverage.astype(np.uint8), np.ones((17, 17), np.uint8)) == 0  # >= 8 px from any drawn pixel
        assert far.mean() > 0.2
        diff.append((real_decoded[k] - decoded[k])[far])
        noise.append((real_decoded[k] - again[k])[far])
    d, n = np.concatenate(diff), np.concatenate(noise)
    stats = (np.abs(d).mean(), np.abs(n).mean(), np.percentile(np.abs(d), 99.9), np.percentile(np.abs(n), 99.9), d.mean(), n.mean())
    # codec noise only (measured mean |d| 1.9 vs 1.7 for the real frames re-encoded alone, p99.9 12 vs 10-11,
    # signed mean ~0); the old lossy `any()` mask blended speckles half-way to black (30-90 levels darker)
    assert stats[0] <= 1.25 * stats[1] + 0.25 and stats[2] <= stats[3] + 4 and abs(stats[4] - stats[5]) < 0.5, stats


def test_25fps_real_video_pairs_by_nearest_time(scenario_dir, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    _real_video(real / f"{CAM}.mp4", 10, 25.0)  # 0 .. 0.36 s
    times, size = real_frames.video_times_s(real / f"{CAM}.mp4")
    np.testing.assert_allclose(times, np.arange(10) / 25.0, atol=1e-6)
    assert size == (W, H)
    render_t = np.arange(10) / 30.0
    pick = real_frames.nearest_frames(times, render_t)
    real_ns = np.round(times * 1e9).astype(np.int64)
    brute = [int(np.argmin(np.abs(real_ns - round(k * 1e9 / 30)))) for k in range(10)]  # argmin: the earlier on a tie
    assert pick.tolist() == brute == [0, 1, 2, 2, 3, 4, 5, 6, 7, 7]
    out = tmp_path / "out"
    assert _render(scenario_dir, out, real, "--frames", "10") == 0
    decoded = read_video(out / CLIP / f"{CLIP}.{CAM}.overlay.mp4").astype(int)
    control = read_video(out / CLIP / f"{CLIP}.{CAM}.mp4")
    undrawn = ~control[0].any(-1)
    for k, j in enumerate(brute):  # the grey of real frame j shows through where nothing is drawn
        assert abs(np.median(decoded[k][undrawn]) - (10 + 8 * j)) <= 2


def test_too_short_real_clip_fails_before_anything_is_written(scenario_dir, tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    _real_video(real / f"{CAM}.mp4", 5, 25.0)  # 0.16 s; the render is 10 frames = 0.30 s
    out = tmp_path / "out"
    assert _render(scenario_dir, out, real, "--frames", "10") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{CAM}.mp4" in err[0] and "25 fps" in err[0] and "30 fps" in err[0], err
    assert not out.exists()


def test_real_frames_of_another_size_are_resized_or_refused(scenario_dir, tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    _real_video(real / f"{CAM}.mp4", 4, 30.0, size=(2 * W, 2 * H))
    assert _render(scenario_dir, tmp_path / "a", real, "--frames", "3") == 0
    assert f"resized {2 * W}x{2 * H} -> {W}x{H}" in capsys.readouterr().err
    assert read_video(tmp_path / "a" / CLIP / f"{CLIP}.{CAM}.overlay.mp4").shape == (3, H, W, 3)
    _real_video(real / f"{CAM}.mp4", 4, 30.0, size=(W, W))
    assert _render(scenario_dir, tmp_path / "b", real, "--frames", "3") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{W}x{W}" in err[0] and f"{W}x{H}" in err[0] and "aspect" in err[0]
    assert not (tmp_path / "b").exists()


@pytest.mark.slow
def test_nuscenes_style_image_names_give_the_times(scenario_dir, tmp_path, capsys):
    real = tmp_path / "real"
    folder = real / CAM
    folder.mkdir(parents=True)
    t0_us = 1533151603512404
    for k in range(6):  # 12 Hz, like nuScenes sweeps
        img = np.full((H, W, 3), 20 * k, np.uint8)
        cv2.imwrite(str(folder / f"n015-2018-08-02-17-16-37+0800__CAM_FRONT__{t0_us + k * 83333}.jpg"), img)
    files, times = real_frames.image_times_s(sorted(folder.iterdir()), None)
    np.testing.assert_allclose(times, np.arange(6) * 0.083333, atol=1e-9)
    assert [f.name for f in files] == sorted(p.name for p in folder.iterdir())
    out = tmp_path / "out"
    assert _render(scenario_dir, out, real, "--frames", "12") == 0  # 0.367 s of render within 0.417 s
    summary = json.loads((out / CLIP / "render_summary.json").read_text())
    assert summary["overlay_frames_rendered"] == 12
    (folder / "extra_frame.jpg").write_bytes((folder / files[0].name).read_bytes())
    assert _render(scenario_dir, tmp_path / "o2", real, "--frames", "12") == 1
    assert "--overlay-fps" in capsys.readouterr().err
    assert _render(scenario_dir, tmp_path / "o3", real, "--frames", "12", "--overlay-fps", "30") == 1  # 7 images at 30 fps are too short
    assert _render(scenario_dir, tmp_path / "o4", real, "--frames", "6", "--overlay-fps", "30") == 0
