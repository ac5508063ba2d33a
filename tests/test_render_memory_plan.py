"""Work units under a memory budget: split by streams only when the estimate is over, same bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from avsim.core.rig import cosmos_rig
from avsim.render.run import memory as memory_plan
from avsim.render.run import pool as pipeline
from avsim.render.run import units, writer
from avsim.render.run.memory import encoder_mib, fit_segments, fit_to_budget, unit_mib
from avsim.render.run.plan import Preset, RenderOptions, RenderPlan, Stream
from avsim.render.run.runner import run_render
from avsim.render.run.units import StreamSegment, TimeSegment
from avsim.scenario.synthetic import highway_scenario

CLIP = "synthetic_highway"
COSMOS = cosmos_rig().names


def _seg(kinds: str, start: int = 0) -> TimeSegment:
    """c: the next camera's video, o: that camera's overlay, m: the mosaic."""
    names = {"c": "camera", "m": "mosaic", "o": "overlay"}
    parts, n = [], -1
    for i, k in enumerate(kinds):
        n += k == "c"
        cam = "" if k == "m" else f"cam{n}"
        parts.append(StreamSegment(Stream(names[k], cam), start, start + 4, Path(f"{k}{i}.mp4")))
    return TimeSegment(CLIP, start, start + 4, tuple(parts))


def _per_part(cost: dict[str, float]):
    return lambda seg: sum(cost[p.stream.kind] for p in seg.parts)


def _paths(segments: list[TimeSegment]) -> list[Path]:
    return sorted(p.part for s in segments for p in s.parts)


def test_segments_under_the_budget_are_not_split():
    segs = [_seg("cocomc"), _seg("cc", 4)]
    assert fit_segments(segs, 100.0, _per_part({"camera": 10, "overlay": 10, "mosaic": 10})) == segs
    assert fit_segments(segs, 0.0, _per_part({"camera": 1e9, "overlay": 1e9, "mosaic": 1e9})) == segs  # 0: no budget


def test_split_units_fit_start_with_the_mosaic_and_keep_a_camera_with_its_overlay():
    seg = _seg("cocococm")  # cam0..cam3 (camera + overlay each, cam3 camera only), then the mosaic
    estimate = _per_part({"camera": 10, "overlay": 10, "mosaic": 30})
    units = fit_segments([seg], 45.0, estimate)
    assert all(estimate(u) <= 45.0 for u in units)
    assert units[0].parts[0].stream.kind == "mosaic"
    assert _paths(units) == _paths([seg])  # every part written once
    assert [[(p.stream.kind, p.stream.camera) for p in u.parts] for u in units] == [
        [("mosaic", "")], [("camera", "cam0"), ("overlay", "cam0"), ("camera", "cam1"), ("overlay", "cam1")],
        [("camera", "cam2"), ("overlay", "cam2"), ("camera", "cam3")],
    ]  # a camera's video and overlay share a render: never in two units
    assert [u.start for u in units] == [0] * len(units) and [u.stop for u in units] == [4] * len(units)


def test_a_part_over_the_budget_alone_gets_a_unit_of_its_own():
    units = fit_segments([_seg("cmcc")], 25.0, _per_part({"camera": 10, "overlay": 10, "mosaic": 40}))
    assert [[p.stream.kind for p in u.parts] for u in units] == [["mosaic"], ["camera", "camera"], ["camera"]]


def test_encoder_estimate_grows_with_pixels_and_preset():
    assert encoder_mib(1920, 1080, "superfast") > encoder_mib(1280, 720, "superfast") > encoder_mib(640, 360, "superfast")
    presets = list(memory_plan.ENCODER_MIB)
    assert presets == list(Preset)
    assert [encoder_mib(1920, 1080, p) for p in presets] == sorted(encoder_mib(1920, 1080, p) for p in presets)
    seg = _seg("ccm")
    assert unit_mib(seg.parts, 2, (1920, 1080), (1920, 1080), "superfast") > unit_mib(seg.parts, 2, (640, 360), (1920, 1080), "superfast")


@pytest.mark.parametrize(("size", "labels", "units"), [((1280, 720), False, 1), ((1920, 1080), False, 2), ((1280, 720), True, 2),
                                                     ((1920, 1080), True, 3)])  # fmt: skip
def test_the_main_job_is_split_only_at_1080p_or_with_labels(size, labels, units):
    parts = [StreamSegment(Stream("camera", c), 0, 150, Path(f"{c}.mp4")) for c in COSMOS]
    seg = TimeSegment(CLIP, 0, 150, (*parts, StreamSegment(Stream("mosaic"), 0, 150, Path("m.mp4"))))
    opts = RenderOptions(out=Path("/unused"), cameras=COSMOS, width_px=size[0], height_px=size[1], mosaic=True, labels=labels)
    fitted = fit_to_budget([seg], opts, _plan(opts))
    assert len(fitted) == units and _paths(fitted) == _paths([seg])
    unbounded = RenderOptions(out=Path("/unused"), cameras=COSMOS, width_px=1920, height_px=1080, max_memory_mib=0)
    assert len(fit_to_budget([seg], unbounded, _plan(unbounded))) == 1


def _plan(opts: RenderOptions) -> RenderPlan:
    return RenderPlan(CLIP, cosmos_rig(), COSMOS, 0, 150, opts.fps, (opts.size_px,) * len(COSMOS))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.e2e
def test_a_tiny_budget_writes_the_same_bytes_one_stream_per_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(units, "SEGMENT_FRAMES", 4)
    cams = COSMOS[:2]
    scenario = highway_scenario(0.5, rig=cosmos_rig())
    seen: list[int] = []
    real_spread = pipeline.spread_over_workers
    monkeypatch.setattr(pipeline, "spread_over_workers", lambda segs, w: (seen.append(max(len(s.parts) for s in segs)), real_spread(segs, w))[1])
    outs = {}
    for budget in (0, 1):
        out = outs[budget] = tmp_path / f"b{budget}"
        opts = RenderOptions(out=out, cameras=cams, frames="6", width_px=160, height_px=96, mosaic=True, labels=True, max_memory_mib=budget)
        summary = run_render(scenario, opts)
        assert summary.camera_frames_rendered == 12 and summary.mosaic_frames_rendered == 6
    assert seen == [3, 1]  # no budget: every stream of a segment in one pass; budget 1 MiB: one each
    names = sorted(p.relative_to(outs[0]).as_posix() for p in outs[0].rglob("*") if p.is_file() and p.suffix in (".mp4", ".json") and "summary" not in p.name)
    assert any(n.endswith(".mosaic.mp4") for n in names) and any("labels" in n for n in names)
    for name in names:
        assert _sha(outs[0] / name) == _sha(outs[1] / name), name


def test_overlay_decoders_count_in_every_unit():
    parts = [StreamSegment(Stream(kind, c), 0, 150, Path(f"{kind}.{c}.mp4")) for c in COSMOS for kind in ("camera", "overlay")]
    seg = TimeSegment(CLIP, 0, 150, tuple(parts))
    opts = RenderOptions(out=Path("/unused"), cameras=COSMOS, width_px=1280, height_px=720)
    alone = fit_to_budget([seg], opts, _plan(opts))
    with_decoders = fit_to_budget([seg], opts, _plan(opts), [(1920, 1080)] * len(COSMOS))
    assert len(with_decoders) > len(alone) and _paths(with_decoders) == _paths([seg])
    budget = opts.max_memory_mib
    layout = writer.render_mosaic_layout(cosmos_rig(), COSMOS)
    mosaic = (layout.width_px, layout.height_px)
    kept = memory_plan.READER_FRAME_MIB_PER_MPX * 1280 * 720 / 1e6
    decoders = len(COSMOS) * (memory_plan.DECODER_MIB[0] + memory_plan.DECODER_MIB[1] * 1920 * 1080 / 1e6 + kept)
    assert all(decoders + unit_mib(u.parts, len(COSMOS), (1280, 720), mosaic, opts.preset) <= budget for u in with_decoders)

