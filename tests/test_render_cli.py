"""`avsim render`: layouts, mosaic, PNGs, overlay, resume, determinism, rigs, workers, errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from avsim.cli import main
from avsim.core.rig import COSMOS_VIEW_NAMES, cosmos_rig, named_rig
from avsim.core.video import MP4Writer, read_video, video_info
from avsim.render.run.plan import FrameRange, RenderOptions, select_frames
from avsim.render.run.runner import run_render
from avsim.scenario.io import save_scenario
from avsim.scenario.synthetic import highway_scenario

SIZE = "160x96"
CAMS = "camera_front_wide_120fov,camera_rear_tele_30fov"


@pytest.fixture(scope="module")
def scenario_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("scen") / "highway"
    save_scenario(highway_scenario(1.0, rig=cosmos_rig()), folder)
    return folder


def _summary(out: Path) -> dict:
    return json.loads((out / "synthetic_highway" / "render_summary.json").read_text())


def test_render_writes_both_layouts_mosaic_and_pngs(scenario_dir, tmp_path):
    out = tmp_path / "out"
    rc = main(["render", str(scenario_dir), str(out), "--size", SIZE, "--frames", "6", "--cameras", CAMS,
               "--layout", "both", "--mosaic", "--png"])  # fmt: skip
    assert rc == 0
    clip = out / "synthetic_highway"
    for cam in CAMS.split(","):
        video = clip / f"synthetic_highway.{cam}.mp4"
        post = out / "control_input_hdmap_bbox" / f"ftheta_{cam}" / "synthetic_highway.mp4"
        assert video_info(video) == {"frames": 6, "fps": 30.0, "width_px": 160, "height_px": 96}
        assert post.read_bytes() == video.read_bytes()
        pngs = sorted((clip / "png" / cam).glob("*.png"))
        assert [p.name for p in pngs] == [f"{i:06d}.png" for i in range(6)]
    mosaic = video_info(clip / "synthetic_highway.mosaic.mp4")
    assert mosaic["frames"] == 6 and mosaic["width_px"] == 640 and mosaic["height_px"] == 2 * 360  # front row, rear row
    summary = _summary(out)
    assert summary["frames"] == 6 and summary["camera_frames_rendered"] == 12 and summary["camera_frames_per_s"] > 0
    assert not list(out.rglob(".*tmp*"))  # no temporaries left behind


def test_render_resumes_and_keeps_finished_cameras(scenario_dir, tmp_path):
    out = tmp_path / "out"
    args = ["render", str(scenario_dir), str(out), "--size", SIZE, "--frames", "4", "--cameras", CAMS]
    assert main(args) == 0
    clip = out / "synthetic_highway"
    kept = clip / "synthetic_highway.camera_front_wide_120fov.mp4"
    redo = clip / "synthetic_highway.camera_rear_tele_30fov.mp4"
    stamp = kept.stat().st_mtime_ns
    redo.unlink()
    assert main(args) == 0
    assert kept.stat().st_mtime_ns == stamp and redo.is_file()
    summary = _summary(out)
    assert summary["camera_frames_rendered"] == 4 and summary["camera_frames_skipped"] == 4


@pytest.mark.e2e
def test_two_renders_are_identical(scenario_dir, tmp_path):
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        assert main(["render", str(scenario_dir), str(out), "--size", SIZE, "--frames", "5", "--cameras", CAMS]) == 0
    for cam in CAMS.split(","):
        a, b = (o / "synthetic_highway" / f"synthetic_highway.{cam}.mp4" for o in outs)
        np.testing.assert_array_equal(read_video(a), read_video(b))
        assert a.read_bytes() == b.read_bytes()


@pytest.mark.e2e
def test_cosmos_rig_rerenders_another_rig_on_the_same_ego(tmp_path):
    scenario = highway_scenario(1.0, rig=named_rig("nuscenes"))
    opts = RenderOptions(out=tmp_path, frames="2", width_px=160, height_px=96, rig="cosmos", layout="posttrain")
    summary = run_render(scenario, opts)
    assert summary.cameras == list(COSMOS_VIEW_NAMES)
    for cam in COSMOS_VIEW_NAMES:
        assert video_info(tmp_path / "control_input_hdmap_bbox" / f"ftheta_{cam}" / "synthetic_highway.mp4")["frames"] == 2
    own = run_render(scenario, RenderOptions(out=tmp_path / "own", frames="2", width_px=160, height_px=96))
    assert own.cameras == list(named_rig("nuscenes").names)


def test_chunks_are_written_as_numbered_clips(tmp_path):
    scenario = highway_scenario(0.5, rig=cosmos_rig())  # 16 frames at 30 fps
    opts = RenderOptions(out=tmp_path, cameras=("camera_front_tele_30fov",), width_px=160, height_px=96, chunk_frames=6)
    summary = run_render(scenario, opts)
    frames = [video_info(tmp_path / f"synthetic_highway_{k}" / f"synthetic_highway_{k}.camera_front_tele_30fov.mp4")["frames"] for k in range(3)]
    assert frames == [6, 6, 4] and summary.frames == 16


@pytest.mark.slow
def test_workers_give_the_same_videos(scenario_dir, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    base = ["render", str(scenario_dir), "--size", SIZE, "--frames", "3", "--cameras", CAMS]
    assert main(base[:2] + [str(one)] + base[2:] + ["--png"]) == 0
    assert main(base[:2] + [str(two)] + base[2:] + ["--png", "--workers", "2"]) == 0
    for cam in CAMS.split(","):
        # rendered frames are compared byte for byte (PNG); libx264's bitstream itself was seen to
        # vary under heavy CPU load even single-threaded, so the mp4s are compared by frame count
        pngs = sorted((one / "synthetic_highway" / "png" / cam).glob("*.png"))
        assert len(pngs) == 3
        for png in pngs:
            assert png.read_bytes() == (two / "synthetic_highway" / "png" / cam / png.name).read_bytes()
        name = f"synthetic_highway.{cam}.mp4"
        assert video_info(one / "synthetic_highway" / name)["frames"] == video_info(two / "synthetic_highway" / name)["frames"] == 3


def test_overlay_blends_on_real_frames(scenario_dir, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    cam = "camera_front_wide_120fov"
    grey = np.full((96, 160, 3), 90, np.uint8)
    with MP4Writer(real / f"{cam}.mp4", 160, 96, 30) as w:
        for _ in range(8):
            w.write(grey)
    out = tmp_path / "out"
    assert main(["render", str(scenario_dir), str(out), "--size", SIZE, "--frames", "4", "--cameras", cam, "--overlay", str(real)]) == 0
    overlay = read_video(out / "synthetic_highway" / f"synthetic_highway.{cam}.overlay.mp4")
    control = read_video(out / "synthetic_highway" / f"synthetic_highway.{cam}.mp4")
    assert overlay.shape == control.shape
    background = ~control[0].any(axis=-1) & (np.abs(overlay[0].astype(int) - 90).max(axis=-1) < 6)
    assert background.mean() > 0.3  # real frame shows where nothing is drawn


def test_frame_selection():
    assert select_frames(100, 30.0, None, None, None) == (0, 100)
    assert select_frames(100, 30.0, None, None, FrameRange.parse("10")) == (0, 10)
    assert select_frames(100, 30.0, None, None, FrameRange.parse("5:20")) == (5, 20)
    assert select_frames(100, 30.0, 1.0, 2.0, None) == (30, 61)


def test_bad_input_exits_with_one_line(tmp_path, capsys):
    assert main(["render", str(tmp_path / "missing"), str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing" in err[0]


def test_bad_options_are_usage_errors(scenario_dir, tmp_path):
    assert main(["render", str(scenario_dir), str(tmp_path / "o"), "--size", "12x7"]) == 2
    assert main(["render", str(scenario_dir), str(tmp_path / "o"), "--layout", "nope"]) == 2
    assert main(["render", str(scenario_dir), str(tmp_path / "o"), "--max-memory-mib", "-1"]) == 2


def test_a_unit_over_the_memory_budget_is_reported(scenario_dir, tmp_path, capsys):
    common = ["render", str(scenario_dir), "--frames", "2", "--size", "64x36", "--cameras", "camera_front_tele_30fov"]
    assert main([*common[:2], str(tmp_path / "a"), *common[2:], "--max-memory-mib", "1"]) == 0
    err = capsys.readouterr().err
    assert "note: synthetic_highway: a worker is estimated to need" in err and "--max-memory-mib 1" in err
    assert _summary(tmp_path / "a")["peak_estimate_mib"] > 1
    assert main([*common[:2], str(tmp_path / "b"), *common[2:]]) == 0  # the default budget: no note
    assert "note:" not in capsys.readouterr().err


def test_segments_are_joined_and_an_interrupted_run_resumes_mid_clip(tmp_path, monkeypatch):
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.render.run import pool as pipeline
    from avsim.render.run import units

    monkeypatch.setattr(units, "SEGMENT_FRAMES", 4)
    scenario = highway_scenario(0.5, rig=cosmos_rig())
    cam = "camera_front_tele_30fov"
    opts = RenderOptions(out=tmp_path, cameras=(cam,), frames="10", width_px=160, height_px=96, png=True)
    real_render = pipeline.SegmentWorker.render_segment
    calls = []

    def failing(self, seg, *args, **kwargs):
        if len(calls) == 2:
            raise KeyboardInterrupt  # the user stops the run during the third segment
        calls.append(seg.start)
        return real_render(self, seg, *args, **kwargs)

    monkeypatch.setattr(pipeline.SegmentWorker, "render_segment", failing)
    with pytest.raises(KeyboardInterrupt):
        run_render(scenario, opts)
    video = tmp_path / "synthetic_highway" / f"synthetic_highway.{cam}.mp4"
    assert not video.exists() and len(list((tmp_path / "synthetic_highway" / ".parts").glob("*.mp4"))) == 2
    monkeypatch.setattr(pipeline.SegmentWorker, "render_segment", real_render)
    summary = run_render(scenario, opts)
    assert summary.camera_frames_rendered == 2 and summary.camera_frames_skipped == 8  # only the last segment
    decoded = read_video(video)
    assert decoded.shape == (10, 96, 160, 3) and not (tmp_path / "synthetic_highway" / ".parts").exists()
    renderer = SceneRenderer(scenario, cameras=[cam], size=(160, 96))
    for f in (0, 4, 9):  # the joined video shows the right frames in order (lossy codec: close)
        truth = renderer.render_camera(f, 0).astype(float)
        assert np.abs(decoded[f] - truth).mean() < 4.0
    pngs = sorted((tmp_path / "synthetic_highway" / "png" / cam).glob("*.png"))
    assert len(pngs) == 10


def test_mosaic_is_a_spatial_layout_without_black_tiles():
    """Front row, sides, rear, left to right as seen from above (issue 55), for every named rig;
    each row as wide as the mosaic, no pixel outside a tile."""
    from avsim.core.mosaic import camera_yaws_deg, spatial_rows
    from avsim.render.run.writer import render_mosaic_layout, tile_mosaic

    cosmos = cosmos_rig()
    assert spatial_rows(cosmos) == [
        ["camera_front_wide_120fov", "camera_front_tele_30fov"],
        ["camera_cross_left_120fov", "camera_cross_right_120fov"],
        ["camera_rear_left_70fov", "camera_rear_tele_30fov", "camera_rear_right_70fov"]]  # fmt: skip
    assert spatial_rows(named_rig("nuscenes")) == [["CAM_FRONT_LEFT", "CAM_FRONT", "CAM_FRONT_RIGHT"],
                                                   ["CAM_BACK_LEFT", "CAM_BACK", "CAM_BACK_RIGHT"]]  # fmt: skip
    assert spatial_rows(named_rig("waymo")) == [["FRONT_LEFT", "FRONT", "FRONT_RIGHT"], ["SIDE_LEFT", "SIDE_RIGHT"]]
    assert spatial_rows(named_rig("av2"), ["ring_rear_right", "ring_front_center"]) == [["ring_front_center"], ["ring_rear_right"]]
    for name in ("cosmos", "nuscenes", "av2", "waymo"):
        rig = named_rig(name)
        layout = render_mosaic_layout(rig, rig.names)
        assert sorted(layout.cameras) == sorted(rig.names) and layout.width_px % 2 == 0 == layout.height_px % 2
        yaw = camera_yaws_deg(rig)
        for row in spatial_rows(rig):  # left to right: a left-looking camera never right of a right-looking one
            sides = [yaw[c] > 0 for c in row if abs(yaw[c]) not in (0.0, 180.0)]
            assert sides == sorted(sides, reverse=True), (name, row)
        frames = {c: np.full((36, 64, 3), 10 * (i + 1), np.uint8) for i, c in enumerate(rig.names)}
        tiled = tile_mosaic(frames, layout)
        assert tiled.shape == (layout.height_px, layout.width_px, 3)
        for t in layout.tiles:  # each tile filled by its camera (the label aside), so no pixel stays black
            block = tiled[t.y_px : t.y_px + t.height_px, t.x_px : t.x_px + t.width_px, 0]
            assert (block == frames[t.camera][0, 0, 0]).mean() > 0.95, (name, t)
        assert (tiled.max(axis=2) > 0).all(), name
    layout = render_mosaic_layout(cosmos, COSMOS_VIEW_NAMES)
    assert (layout.width_px, layout.height_px) == (1440, 404 + 404 + 270)  # 1920 x 1440 at 640x360 tiles: fit to 1080p


# ---- a folder of edit variants -------------------------------------------------------------------
VARIANT_CAM = "camera_front_wide_120fov"
EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


@pytest.fixture(scope="module")
def variants_dir(tmp_path_factory) -> Path:
    """The real `avsim sample` (20 s, the default: the example crops 16-20 s) + `avsim edit` with docs/examples/cutin.yaml: 10 variants."""
    root = tmp_path_factory.mktemp("variants")
    assert main(["sample", str(root / "s"), "--duration-s", "20"]) == 0
    assert main(["edit", str(root / "s"), str(EXAMPLES / "cutin.yaml"), str(root / "variants")]) == 0
    return root / "variants"


def _render_variants(variants: Path, out: Path) -> int:
    return main(["render", str(variants), str(out), "--size", "256x144", "--cameras", VARIANT_CAM, "--frames", "4"])


@pytest.mark.e2e
def test_render_of_an_edit_output_renders_every_variant_and_resumes(variants_dir, tmp_path, capsys):
    manifest = json.loads((variants_dir / "manifest.json").read_text())
    ids = [v["scenario_id"] for v in manifest["variants"]]
    assert len(ids) == 10
    out = tmp_path / "out"
    assert _render_variants(variants_dir, out) == 0
    videos = [out / i / f"{i}.{VARIANT_CAM}.mp4" for i in ids]
    for video in videos:
        assert video_info(video) == {"frames": 4, "fps": 30.0, "width_px": 256, "height_px": 144}
    # one summary listing all variants, in manifest order
    summary = json.loads((out / "render_summary.json").read_text())
    assert summary["format"] == "avsim-render-variants-summary"
    assert [v["name"] for v in summary["variants"]] == [v["name"] for v in manifest["variants"]]
    assert [v["clip_id"] for v in summary["variants"]] == ids
    assert summary["camera_frames_rendered"] == 40 and summary["camera_frames_skipped"] == 0
    assert "rendered 10 variants" in capsys.readouterr().err
    # the variants really differ (the cut-in car sits 1 m vs 5 m ahead of the ego)
    first, last = read_video(videos[0]), read_video(videos[-1])
    assert np.abs(first.astype(int) - last.astype(int)).max() > 50
    # a variant rendered through the set is the same video as the folder rendered alone
    alone = tmp_path / "alone"
    assert main(["render", str(variants_dir / manifest["variants"][3]["folder"]), str(alone), "--size", "256x144",
                 "--cameras", VARIANT_CAM, "--frames", "4"]) == 0  # fmt: skip
    decoded = [read_video(p).astype(int) for p in (alone / ids[3] / videos[3].name, videos[3])]
    assert decoded[0].shape == decoded[1].shape and np.abs(decoded[0] - decoded[1]).mean() < 0.5
    # resumable: delete one variant's video; a rerun renders only that one
    stamps = [v.stat().st_mtime_ns for v in videos]
    videos[5].unlink()
    assert _render_variants(variants_dir, out) == 0
    summary = json.loads((out / "render_summary.json").read_text())
    assert summary["camera_frames_rendered"] == 4 and summary["camera_frames_skipped"] == 36
    assert [v.stat().st_mtime_ns for k, v in enumerate(videos) if k != 5] == stamps[:5] + stamps[6:]
    assert video_info(videos[5])["frames"] == 4


def test_render_of_an_edit_output_with_a_missing_variant_fails_before_rendering(variants_dir, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    doc = json.loads((variants_dir / "manifest.json").read_text())
    doc["variants"] = doc["variants"][:2] + [{**doc["variants"][2], "folder": "../escape"}]
    (broken / "manifest.json").write_text(json.dumps(doc))
    for v in doc["variants"][:2]:  # copies: a link leading out of the edit output is refused itself
        shutil.copytree(variants_dir / v["folder"], broken / v["folder"])
    assert _render_variants(broken, tmp_path / "out") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "variants[2].folder" in err[0]
    assert not (tmp_path / "out").exists()
    doc["variants"][2]["folder"] = "no_such_variant"
    (broken / "manifest.json").write_text(json.dumps(doc))
    assert _render_variants(broken, tmp_path / "out") == 1
    assert "no such variant folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_summary_lines_never_wrap_mid_number_at_120_columns(tmp_path: Path) -> None:
    """The render's last lines (issue 55): each number whole on a line under 120 columns; only the
    output path's line may be longer, and rich never folds it (the terminal does, at its width)."""
    import io

    from rich.console import Console

    from avsim.edit.render_report import print_summaries
    from avsim.render.run.runner import RenderSummary

    big = RenderSummary("waymo_3a9f0c1e2d4b5a6978881234abcdef01_x", [f"cam{i}" for i in range(11)], 123456, 1358016, 98765,
                        12345.678, mosaic_frames_rendered=123456, overlay_frames_rendered=123456, render_cpu_s=123456.7,
                        encode_cpu_s=98765.4, composite_cpu_s=12345.6)  # fmt: skip
    out = tmp_path / ("a_long_output_folder_name_" * 6) / "render"
    for width in (120, 60):
        buffer = io.StringIO()
        print_summaries(Console(file=buffer, width=width), [big, big], out, variants_mode=True)
        lines = buffer.getvalue().splitlines()
        assert len(lines) == 10, lines  # nothing folded: 4 lines per clip, 2 for the totals
        assert all(len(line) <= 120 for line in lines if "->" not in line), lines
        assert lines[0] == (f"rendered {big.clip_id}: 123456 frames x 11 cameras in 12345.7 s "
                            "(110.0 camera-frames/s)")  # fmt: skip
        assert lines[3] == f"  -> {out}"
