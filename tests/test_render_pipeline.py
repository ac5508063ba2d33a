"""The render pool: time segments of all cameras, mosaic from memory, one bar, bytes, resume by content."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import av
import numpy as np
import pytest

from avsim.core import video as core_video
from avsim.core.rig import cosmos_rig
from avsim.core.video import MP4Writer, read_video
from avsim.render.geometry.scene import SceneRenderer
from avsim.render.run import pool as pipeline
from avsim.render.run import units, writer
from avsim.render.run.plan import RenderOptions, RenderPlan, Stream, StreamKind
from avsim.render.run.runner import run_render
from avsim.render.run.units import StreamSegment, TimeSegment
from avsim.scenario.synthetic import highway_scenario

CAMS = ("camera_front_wide_120fov", "camera_rear_tele_30fov")
CLIP = "synthetic_highway"
# sha256 of (file bytes, decoded frames) of each camera video, recorded on main (4a7f23b, per-camera
# segments) before the pool changed: highway_scenario(0.5, cosmos rig), 10 frames, 160x96, SEGMENT_FRAMES 4
MAIN_SHA256 = {
    "camera_front_wide_120fov": ("5e9b1f0bf3d401732ef65c9092da143d4b936c4dee136a03a8a0b9c696387283",
                                 "d1e1a5efcbe994e4372da68a066a7be9d0d07cc184f99af1e7e0c25c2a58d85f"),
    "camera_rear_tele_30fov": ("896e526b689555266871c0e34e03b8fbc8bb88b24cf61bdc9a3545609e9648d6",
                               "31b59e380d7acfb8eab2eb2d3f4abb195dd1f0d99e848930e76ac7a6af782edc"),
}  # fmt: skip


@pytest.fixture(scope="module")
def scenario():
    return highway_scenario(0.5, rig=cosmos_rig())


def _opts(out: Path, **kw) -> RenderOptions:
    return RenderOptions(**{"out": out, "cameras": CAMS, "frames": "10", "width_px": 160, "height_px": 96, **kw})


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _swscale_yuv420p(frame_rgb: np.ndarray) -> np.ndarray:
    return av.VideoFrame.from_ndarray(np.ascontiguousarray(frame_rgb), format="rgb24").reformat(format="yuv420p").to_ndarray()


def _summary(out: Path) -> dict:
    return json.loads((out / CLIP / "render_summary.json").read_text())


@pytest.mark.e2e
def test_camera_videos_equal_main_and_mosaic_is_tiled_from_memory(scenario, tmp_path, monkeypatch):
    monkeypatch.setattr(units, "SEGMENT_FRAMES", 4)  # 3 time segments
    written: dict[str, list[np.ndarray]] = {}

    class Spy(MP4Writer):
        def write(self, frame_rgb):
            written.setdefault(self.path.name.split(".")[1], []).append(frame_rgb.copy())
            super().write(frame_rgb)

    monkeypatch.setattr(pipeline, "MP4Writer", Spy)
    # main converted RGB -> YUV with libswscale inside the encoder; with that conversion put back the
    # pool writes main's bytes (the new converter is tested against swscale in tests/test_core_yuv.py)
    monkeypatch.setattr(core_video, "rgb_to_yuv420p", _swscale_yuv420p)
    ticks: list[int] = []
    # recorded on main before the pool changed, i.e. before anti-aliasing existed: --aa off
    summary = run_render(scenario, _opts(tmp_path, mosaic=True, antialias=False), progress=ticks.append)
    for cam in CAMS:  # the mosaic in the same pass leaves the camera videos as main wrote them
        video = tmp_path / CLIP / f"{CLIP}.{cam}.mp4"
        assert (_sha(video), hashlib.sha256(read_video(video).tobytes()).hexdigest()) == MAIN_SHA256[cam]
    renderer = SceneRenderer(scenario, cameras=CAMS, size=(160, 96), antialias=False)
    layout = writer.render_mosaic_layout(scenario.rig, CAMS)
    mw, mh = layout.width_px, layout.height_px
    assert len(written["mosaic"]) == 10
    for f in range(10):  # mosaic frames are tile_mosaic of the renderer's lossless frames
        tiles = {c: renderer.render_camera(f, i) for i, c in enumerate(CAMS)}
        np.testing.assert_array_equal(written["mosaic"][f], writer.tile_mosaic(tiles, layout))
    decoded = read_video(tmp_path / CLIP / f"{CLIP}.mosaic.mp4")
    assert decoded.shape == (10, mh, mw, 3) and np.abs(decoded.astype(int) - np.stack(written["mosaic"])).mean() < 2
    # one bar over everything: 10 frames x (2 cameras + mosaic)
    assert sum(ticks) == RenderPlan.resolve(scenario, _opts(tmp_path, mosaic=True, antialias=False)).progress_units == 30
    doc = _summary(tmp_path)
    assert doc["camera_frames_rendered"] == 20 and doc["mosaic_frames_rendered"] == 10
    assert doc["camera_frames_per_s"] == round(20 / summary.seconds, 2)
    assert doc["render_cpu_s"] > 0 and doc["encode_cpu_s"] > 0 and doc["composite_cpu_s"] > 0
    assert not list(tmp_path.rglob(".parts"))


@pytest.mark.e2e
def test_workers_give_identical_bytes(scenario, tmp_path, monkeypatch):
    monkeypatch.setattr(units, "SEGMENT_FRAMES", 4)  # planned in this process: the pool gets 2 segments
    real = tmp_path / "real"
    real.mkdir()
    with MP4Writer(real / f"{CAMS[0]}.mp4", 160, 96, 30) as w:
        for k in range(8):
            w.write(np.full((96, 160, 3), 20 + 10 * k, np.uint8))
    outs = {n: tmp_path / f"w{n}" for n in (1, 3)}  # 3 workers: one of the 2 segments is split by streams
    for n, out in outs.items():
        opts = _opts(out, cameras=(CAMS[0],), frames="8", mosaic=True, overlay=real, workers=n)
        summary = run_render(scenario, opts)
        assert summary.overlay_frames_rendered == 8 and summary.mosaic_frames_rendered == 8
    names = [f"{CLIP}.{CAMS[0]}.mp4", f"{CLIP}.mosaic.mp4", f"{CLIP}.{CAMS[0]}.overlay.mp4"]
    for name in names:
        assert _sha(outs[1] / CLIP / name) == _sha(outs[3] / CLIP / name), name


@pytest.mark.e2e
def test_resume_skips_unchanged_and_rerenders_changed_and_keeps_the_record(scenario, tmp_path):
    first = run_render(scenario, _opts(tmp_path))
    assert first.camera_frames_rendered == 20
    videos = [tmp_path / CLIP / f"{CLIP}.{c}.mp4" for c in CAMS]
    stamps = [v.stat().st_mtime_ns for v in videos]
    stale = tmp_path / CLIP / ".parts" / f"{CLIP}.{CAMS[0]}.000000.0123456789ab.mp4"  # a killed run's part, other inputs
    stale.parent.mkdir()
    stale.write_bytes(b"old")
    again = run_render(scenario, _opts(tmp_path))
    assert again.camera_frames_rendered == 0 and again.camera_frames_skipped == 20
    assert not stale.parent.exists()  # swept: never joined, never left behind
    assert [v.stat().st_mtime_ns for v in videos] == stamps
    doc = _summary(tmp_path)  # the first run's record is kept, not overwritten with zeros
    assert [r["camera_frames_rendered"] for r in doc["runs"]] == [20, 0]
    assert doc["totals"]["camera_frames_rendered"] == 20
    assert set(doc["written_by_run"].values()) == {0}
    # a changed option re-renders (same file names); a mosaic asked for later renders only the mosaic
    changed = run_render(scenario, _opts(tmp_path, preset="ultrafast"))
    assert changed.camera_frames_rendered == 20
    mosaic = run_render(scenario, _opts(tmp_path, preset="ultrafast", mosaic=True))
    assert mosaic.camera_frames_rendered == 0 and mosaic.mosaic_frames_rendered == 10
    doc = _summary(tmp_path)
    assert len(doc["runs"]) == 4 and doc["totals"]["camera_frames_rendered"] == 40
    assert doc["written_by_run"][str(videos[0])] == 2 and doc["written_by_run"][str(tmp_path / CLIP / f"{CLIP}.mosaic.mp4")] == 3
    # a changed scenario re-renders
    other = highway_scenario(0.6, rig=cosmos_rig())
    assert run_render(other, _opts(tmp_path, preset="ultrafast")).camera_frames_rendered == 20
    # the anti-aliasing mode changes the frames: --aa off re-renders
    assert run_render(other, _opts(tmp_path, preset="ultrafast", antialias=False)).camera_frames_rendered == 20


def _seg(start: int, kinds: str) -> TimeSegment:
    names = {"c": StreamKind.CAMERA, "m": StreamKind.MOSAIC, "o": StreamKind.OVERLAY}
    parts = [StreamSegment(Stream(names[k], "" if k == "m" else f"cam{i}"), start, start + 4, Path(f"{k}{i}.mp4"))
             for i, k in enumerate(kinds)]  # fmt: skip
    return TimeSegment(CLIP, start, start + 4, tuple(parts))


def test_few_segments_are_split_by_streams_so_every_worker_has_one():
    one = _seg(0, "ccmcc")
    halves = pipeline.spread_over_workers([one], 2)
    assert [[p.stream.kind for p in s.parts] for s in halves] == [["mosaic", "camera", "camera"], ["camera", "camera"]]
    assert sorted(p.part for s in halves for p in s.parts) == sorted(p.part for p in one.parts)
    assert len(pipeline.spread_over_workers([one], 8)) == 5  # down to one stream each
    many = [_seg(0, "cc"), _seg(4, "cc")]
    assert pipeline.spread_over_workers(many, 2) == many and pipeline.spread_over_workers(many, 1) == many
