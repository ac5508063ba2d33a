"""Work units that fit a memory budget: a time segment's streams split when their encoders would not.

A render process holds, while it writes one time segment, one libx264 encoder per stream of the
segment (7 cameras and the 1920x1080 mosaic in the main job), the ray map of every camera it
renders, one time step's frame buffers, with `--labels` each camera part's label buffers and
records, and with `--overlay` the decoder of every real video it has opened. The encoders
dominate and do not depend on the clip's length: at 1920x1080 `superfast` one holds about
130 MiB, so 8 of them alone pass 1 GB.

`fit_segments` splits every segment whose estimate (`unit_mib`) is over the budget into units
of the same frames with fewer streams, the mosaic's unit first. Each stream's part, hence its
bytes, is unchanged: only which unit writes it. The cost is rendering again the cameras that
two units of one segment both need: the mosaic's unit renders every camera.

The estimate is a model of measured resident sizes (`python bench/encoder_memory.py` prints the
measurements behind `ENCODER_MIB`, `--decoders` those behind `DECODER_MIB`; `bench/render.py
--render-memory WxH --labels` those behind `LABELS_MIB`), not a limit the operating system
enforces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from avsim.render.run import writer
from avsim.render.run.plan import DEFAULT_MAX_MEMORY_MIB, Preset, RenderOptions, RenderPlan, StreamKind
from avsim.render.run.units import StreamSegment, TimeSegment

__all__ = ["DEFAULT_MAX_MEMORY_MIB", "encoder_mib", "fit_segments", "fit_to_budget", "render_estimate", "unit_mib"]
# libx264 at crf 18, one thread, after 100 frames of control-like video: (MiB, MiB per megapixel) of
# one encoder, fitted over 640x360, 1280x720 and 1920x1080 with 3 encoders in one process
# (`python bench/encoder_memory.py`, x86_64, PyAV 18.1); slower and veryslow are not measured: an
# upper guess above slow's
ENCODER_MIB: dict[Preset, tuple[float, float]] = {
    Preset.ULTRAFAST: (21.0, 20.3),
    Preset.SUPERFAST: (26.0, 51.8),
    Preset.VERYFAST: (26.0, 78.7),
    Preset.FASTER: (36.0, 103.1),
    Preset.FAST: (33.0, 148.9),
    Preset.MEDIUM: (27.0, 187.1),
    Preset.SLOW: (47.0, 209.2),
    Preset.SLOWER: (30.0, 330.0),
    Preset.VERYSLOW: (30.0, 330.0),
}
PROCESS_BASE_MIB = 250.0  # an idle render process: Python, numpy, numba's kernels, PyAV, libx264's shared state
RENDER_MIB_PER_MPX = 12.0  # per rendered camera and megapixel: its (H, W, 2) float32 ray map and a time step's buffers
# with --labels, per camera video part: (MiB, MiB per megapixel) of its id and mask buffers, a segment's records and the
# heap they leave behind; labelled minus unlabelled renders of the sample measured +16 MiB per camera at 1280x720 and
# +31 to +53 MiB at 1920x1080 (`python bench/render.py --render-memory WxH --labels`, one worker traced)
LABELS_MIB = (4.0, 18.0)
# with --overlay, per camera whose real frames come from a video: (MiB, MiB per megapixel of the real frames) of its
# open H.264 decoder (a worker keeps each reader it has opened): `python bench/encoder_memory.py --decoders` fitted
# 3 + 16.1 on 2 CPUs (36 MiB at 1920x1080), a rendered 1080p control video took 40 (FFmpeg's threads follow the CPUs)
DECODER_MIB = (4.0, 18.0)
READER_FRAME_MIB_PER_MPX = 3e6 / 2**20  # and per such camera the real frame its reader keeps at the render size (RGB)


def encoder_mib(width_px: int, height_px: int, preset: Preset) -> float:
    """Estimated resident MiB of one libx264 encoder of `width_px` x `height_px` frames.

    Args:
        width_px: frame width.
        height_px: frame height.
        preset: x264 preset.

    Returns:
        MiB.
    """
    fixed_mib, per_mpx = ENCODER_MIB[Preset(preset)]
    return fixed_mib + per_mpx * width_px * height_px / 1e6


def unit_mib(parts: tuple[StreamSegment, ...], n_rendered: int, camera_px: tuple[int, int], mosaic_px: tuple[int, int], preset: Preset,
             labels: bool = False) -> float:  # fmt: skip
    """Estimated peak MiB of a process writing `parts` of one time segment.

    Args:
        parts: the stream parts it writes (camera and overlay parts at `camera_px`, the mosaic at `mosaic_px`).
        n_rendered: cameras it renders.
        camera_px: (width, height) of a camera frame.
        mosaic_px: (width, height) of the mosaic.
        preset: x264 preset.
        labels: whether each camera part also computes its labels (`--labels`).

    Returns:
        MiB.
    """
    mpx = camera_px[0] * camera_px[1] / 1e6
    encoders = sum(encoder_mib(*(mosaic_px if p.stream.kind is StreamKind.MOSAIC else camera_px), preset) for p in parts)
    n_labelled = sum(p.stream.kind is StreamKind.CAMERA for p in parts) if labels else 0
    return PROCESS_BASE_MIB + n_rendered * RENDER_MIB_PER_MPX * mpx + encoders + n_labelled * (LABELS_MIB[0] + LABELS_MIB[1] * mpx)


def fit_segments(segments: list[TimeSegment], budget_mib: float, estimate: Callable[[TimeSegment], float]) -> list[TimeSegment]:
    """Split each segment whose estimate is over `budget_mib` into units that fit.

    The parts are taken in groups that share one render, the mosaic first, then each camera's
    video with its overlay in camera order; a unit is closed when the next group would take it
    over the budget. A group that alone is over the budget gets a unit of its own.

    Args:
        segments: the time segments to write.
        budget_mib: the budget of one process (<= 0: no budget).
        estimate: MiB of a process writing one segment (`unit_mib` with the render's sizes).

    Returns:
        The segments, some split; their parts together are `segments`' parts.
    """
    if budget_mib <= 0:
        return list(segments)
    out: list[TimeSegment] = []
    for seg in segments:
        if estimate(seg) <= budget_mib:
            out.append(seg)
            continue
        unit: tuple[StreamSegment, ...] = ()
        for group in _render_groups(seg.parts):
            if unit and estimate(seg.with_parts((*unit, *group))) > budget_mib:
                out.append(seg.with_parts(unit))
                unit = ()
            unit = (*unit, *group)
        out.append(seg.with_parts(unit))
    return out


def _render_groups(parts: tuple[StreamSegment, ...]) -> list[tuple[StreamSegment, ...]]:
    """`parts` grouped by the render they share: the mosaic, then one group per camera in first-seen order."""
    groups: dict[str, list[StreamSegment]] = {}
    for p in sorted(parts, key=lambda p: p.stream.kind is not StreamKind.MOSAIC):  # stable: the mosaic first, then the parts' order
        groups.setdefault(p.stream.camera, []).append(p)
    return [tuple(g) for g in groups.values()]


def fit_to_budget(segments: list[TimeSegment], opts: RenderOptions, plan: RenderPlan,
                  real_sizes_px: Sequence[tuple[int, int]] = ()) -> list[TimeSegment]:  # fmt: skip
    """`fit_segments` with the render's own sizes, preset and budget (`opts.max_memory_mib`).

    Args:
        segments: the time segments to write.
        opts: render options.
        plan: the resolved plan (cameras, size).
        real_sizes_px: (width, height) of each overlay camera's real video (`--overlay`; image folders: none).

    Returns:
        As `fit_segments`.
    """
    return fit_segments(segments, opts.max_memory_mib, render_estimate(opts, plan, real_sizes_px))


def render_estimate(opts: RenderOptions, plan: RenderPlan, real_sizes_px: Sequence[tuple[int, int]] = ()) -> Callable[[TimeSegment], float]:
    """The estimated peak MiB of a render process writing one (unit of a) time segment.

    Every camera's ray map and every overlay video's decoder count in every unit: a worker
    keeps the maps it has built and the readers it has opened, and the unit with the mosaic
    renders every camera.

    Args:
        opts: render options (preset, labels).
        plan: the resolved plan (cameras, size).
        real_sizes_px: as `fit_to_budget`.

    Returns:
        segment -> MiB.
    """
    n_cameras = len(plan.cameras)
    mosaic = writer.render_mosaic_layout(plan.rig, plan.cameras)
    mosaic_w, mosaic_h = mosaic.width_px, mosaic.height_px
    camera_px = plan.largest_px  # conservative: every camera costed at the largest frame
    kept_mib = READER_FRAME_MIB_PER_MPX * camera_px[0] * camera_px[1] / 1e6
    decoders = sum(DECODER_MIB[0] + DECODER_MIB[1] * w * h / 1e6 + kept_mib for w, h in real_sizes_px)

    def estimate(seg: TimeSegment) -> float:
        return decoders + unit_mib(seg.parts, n_cameras, camera_px, (mosaic_w, mosaic_h), opts.preset, opts.labels)

    return estimate
