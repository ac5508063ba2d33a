"""The render pool: time segments of all cameras, rendered once and fed to every encoder.

A time segment is frames [start, stop) of one clip (or chunk) for every stream that still has to
be written there: each camera's control video, the mosaic, each camera's overlay. A worker
renders every needed camera's frame once (SceneRenderer), feeds it to that camera's encoder,
tiles the mosaic from the frames in memory (`writer.tile_mosaic`) and composites the overlay
from the lossless frame and its coverage (`avsim.render.run.overlay`). Each stream's part lands
atomically (`MP4Writer`); the runner concatenates the parts into the outputs. Parts are fresh
encoders over fixed frame ranges, so the bytes do not depend on the number of workers.

Progress counts stream-frames (a camera frame, a mosaic frame, an overlay frame: one each).
Each worker sums the CPU time (`time.process_time`) it spends rendering, encoding (and writing
PNGs) and compositing (mosaic tiles, real frames, overlay blending) into a `StageTimes`.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from avsim.core.memory import release_free_heap
from avsim.core.typing import NDArrayBool, NDArrayByte
from avsim.core.video import MP4Writer
from avsim.render.run import memory as memory_plan
from avsim.render.run import overlay, writer
from avsim.render.run.real_frames import RealCamera, RealReader

if TYPE_CHECKING:
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.render.run.labels import Labeller
    from avsim.render.run.runner import RenderOptions
    from avsim.scenario import Scenario

PROGRESS_BATCH_UNITS = 10  # a worker reports finished stream-frames to the main process in batches this size
STREAM_KINDS = ("camera", "mosaic", "overlay")


@dataclass(frozen=True)
class StreamPart:
    """One output stream's part of a time segment: `kind` in STREAM_KINDS, its camera ("" for the mosaic)."""

    kind: str
    camera: str
    segment: writer.Segment

    def __post_init__(self) -> None:
        if self.kind not in STREAM_KINDS:
            raise ValueError(f"kind: expected one of {STREAM_KINDS}, got {self.kind!r}")


@dataclass(frozen=True)
class TimeSegment:
    """Frames [start, stop) of clip (or chunk) `clip_id`, for the streams in `parts`."""

    clip_id: str
    start: int
    stop: int
    parts: tuple[StreamPart, ...]

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.stop or not self.parts:
            raise ValueError(f"a time segment needs frames and parts, got [{self.start}, {self.stop}) with {len(self.parts)} parts")

    @property
    def n_frames(self) -> int:
        """Frames in the segment."""
        return self.stop - self.start

    def cameras(self, all_cameras: tuple[str, ...]) -> list[str]:
        """The cameras a worker must render (every camera when the mosaic is among the parts).

        Args:
            all_cameras: the render's cameras, in order.

        Returns:
            Camera names in `all_cameras` order.
        """
        if any(p.kind == "mosaic" for p in self.parts):
            return list(all_cameras)
        wanted = {p.camera for p in self.parts}
        return [c for c in all_cameras if c in wanted]


@dataclass(frozen=True)
class StageTimes:
    """What workers did: stream-frames written per kind and CPU seconds per stage."""

    camera_frames: int = 0
    mosaic_frames: int = 0
    overlay_frames: int = 0
    render_cpu_s: float = 0.0
    encode_cpu_s: float = 0.0
    composite_cpu_s: float = 0.0
    peak_estimate_mib: float = 0.0  # the largest work unit's estimated peak (`memory_plan.render_estimate`)

    def plus(self, other: StageTimes) -> StageTimes:
        """The sum of two records.

        Args:
            other: another record.

        Returns:
            Field-wise sums (the larger peak estimate).
        """
        a, b = self, other
        return StageTimes(a.camera_frames + b.camera_frames, a.mosaic_frames + b.mosaic_frames, a.overlay_frames + b.overlay_frames,
                          a.render_cpu_s + b.render_cpu_s, a.encode_cpu_s + b.encode_cpu_s, a.composite_cpu_s + b.composite_cpu_s,
                          max(a.peak_estimate_mib, b.peak_estimate_mib))  # fmt: skip


class _Clock:
    """Per-stage CPU-time accumulator of one segment (process time of this worker)."""

    def __init__(self) -> None:
        self.seconds = {"render": 0.0, "encode": 0.0, "composite": 0.0}
        self._t = time.process_time()

    def lap(self, stage: str) -> None:
        now = time.process_time()
        self.seconds[stage] += now - self._t
        self._t = now


class _CountQueue(Protocol):
    """The part of a (manager) queue the workers use to report finished stream-frames."""

    def put(self, item: int) -> None: ...

    def get(self) -> int: ...

    def empty(self) -> bool: ...


class SegmentWorker:
    """One process's renderer, options and real-frame plan; `start` fills it (pool initializer, or inline)."""

    def __init__(self) -> None:
        self.renderer: SceneRenderer | None = None
        self.opts: RenderOptions | None = None
        self.reals: dict[str, RealCamera] = {}
        self.first = 0
        self.queue: _CountQueue | None = None
        self._readers: dict[str, RealReader] = {}
        self._labeller: Labeller | None = None  # of `renderer`, made when labels are first asked for

    def start(self, scenario: Scenario, opts: RenderOptions, reals: dict[str, RealCamera], first: int,
              queue: _CountQueue | None) -> None:  # fmt: skip
        """Build the renderer of `scenario` per `opts` (cameras resolved).

        Args:
            scenario: the scenario.
            opts: render options with `cameras` set.
            reals: camera -> its real frames (overlay only; else empty).
            first: the first rendered frame (render time 0 of the overlay pairing).
            queue: where finished stream-frames are reported (pool), or None.
        """
        from avsim.render.geometry.scene import SceneRenderer
        from avsim.render.run.runner import render_sizes, resolve_rig

        sizes = tuple(render_sizes(scenario, opts).values())  # each camera's own aspect unless opts.exact_size
        self.renderer = SceneRenderer(
            scenario, rig=resolve_rig(scenario, opts.rig), cameras=opts.cameras, sizes=sizes,
            fps=opts.fps, backend=opts.backend, antialias=opts.antialias,
        )  # fmt: skip
        self.opts, self.reals, self.first, self.queue = opts, reals, first, queue
        self._readers, self._labeller = {}, None

    def _frames(self, seg: TimeSegment, camera: str, clock: _Clock) -> Iterator[tuple[NDArrayByte, NDArrayBool | None]]:
        """One camera's frames of the segment (and their coverage when its overlay is written)."""
        renderer, opts = self.renderer, self.opts
        assert renderer is not None and opts is not None, "start() first"
        i = renderer.rig.index(camera)
        wants_overlay = any(p.kind == "overlay" and p.camera == camera for p in seg.parts)
        cam_part = next((p.segment for p in seg.parts if p.kind == "camera" and p.camera == camera), None)
        labelled: Iterator[NDArrayByte] | None = None
        if opts.labels and cam_part is not None:
            from avsim.render.run import labels as labels_run

            if self._labeller is None:  # one per renderer: it keeps the frames' boxes for every camera
                self._labeller = labels_run.Labeller.of(renderer, opts.label_files, opts.label_images)
            part = labels_run.part_path(opts.out, writer.safe_name(renderer.scenario.scenario_id), cam_part)
            labelled = labels_run.labelled_frames(self._labeller, cam_part, part)
        for f in range(seg.start, seg.stop):
            coverage = None
            if labelled is not None:
                img = next(labelled)
                if wants_overlay:
                    coverage = overlay.render_with_coverage(renderer, f, i)[1]
            elif wants_overlay and opts.backend == "numba":
                img, coverage = overlay.render_with_coverage(renderer, f, i)
            else:
                img = renderer.render_camera(f, i)
                if wants_overlay:
                    coverage = overlay.render_with_coverage(renderer, f, i)[1]
            clock.lap("render")
            yield img, coverage
        if labelled is not None:
            next(labelled, None)  # the label part is written once its last frame was taken
            clock.lap("render")

    def _real(self, camera: str, frame_index: int) -> NDArrayByte:
        reader = self._readers.get(camera)
        if reader is None:
            reader = self._readers[camera] = RealReader(self.reals[camera])
        return reader.frame(int(self.reals[camera].pick[frame_index - self.first]))

    def render_segment(self, seg: TimeSegment, on_units: Callable[[int], None] | None = None) -> StageTimes:
        """Render one time segment and write every part of it.

        Args:
            seg: the segment.
            on_units: called with the stream-frames written after each frame.

        Returns:
            What was written and the CPU time of each stage.
        """
        renderer, opts = self.renderer, self.opts
        assert renderer is not None and opts is not None and opts.cameras is not None, "start() first"
        clock = _Clock()
        cameras = seg.cameras(tuple(opts.cameras))
        renderer.prepare_rays(cameras)  # before this segment's encoders open (peak memory)
        order = writer.mosaic_order(tuple(opts.cameras))
        columns, mosaic_w, mosaic_h = writer.mosaic_size(len(order))
        with ExitStack() as stack:
            encoders: dict[tuple[str, str], tuple[MP4Writer, writer.Segment]] = {}
            for p in seg.parts:
                cam_px = renderer.rig.cameras[renderer.rig.index(p.camera)] if p.kind != "mosaic" else None
                size = (mosaic_w, mosaic_h) if cam_px is None else (cam_px.width_px, cam_px.height_px)
                encoders[p.kind, p.camera] = (stack.enter_context(MP4Writer(p.segment.part, *size, opts.fps, preset=opts.preset)), p.segment)
            streams = {cam: self._frames(seg, cam, clock) for cam in cameras}
            for f in range(seg.start, seg.stop):
                frames = {cam: next(it) for cam, it in streams.items()}
                self._write_frame(f, frames, encoders, clock, (order, columns))
                if on_units is not None:
                    on_units(len(seg.parts))
            for it in streams.values():
                next(it, None)  # let each camera's generator finish (label parts)
            clock.lap("render")
        clock.lap("encode")  # the encoders' flush on close
        release_free_heap()  # the closed encoders' buffers, so that a long clip's segments do not pile up pages
        counts = {k: seg.n_frames * sum(p.kind == k for p in seg.parts) for k in STREAM_KINDS}
        s = clock.seconds
        return StageTimes(counts["camera"], counts["mosaic"], counts["overlay"], s["render"], s["encode"], s["composite"])

    def _write_frame(self, f: int, frames: dict[str, tuple[NDArrayByte, NDArrayBool | None]],
                     encoders: dict[tuple[str, str], tuple[MP4Writer, writer.Segment]], clock: _Clock,
                     mosaic: tuple[list[str], int]) -> None:  # fmt: skip
        """Feed frame `f` of every needed camera to the encoders of the segment's parts."""
        for (kind, cam), (enc, part) in encoders.items():
            if kind == "camera":
                enc.write(frames[cam][0])
                if part.png_dir is not None:
                    writer.write_png(part.png_dir / f"{f:06d}.png", frames[cam][0])
                clock.lap("encode")
            elif kind == "mosaic":
                order, columns = mosaic
                tw, th = writer.MOSAIC_TILE_PX
                tiled = writer.tile_mosaic({c: frames[c][0] for c in order}, order, tw, th, columns)
                clock.lap("composite")
                enc.write(tiled)
                clock.lap("encode")
            else:
                img, coverage = frames[cam]
                assert coverage is not None
                blended = overlay.composite(self._real(cam, f), img, coverage)
                clock.lap("composite")
                enc.write(blended)
                clock.lap("encode")

    def run_segment(self, seg: TimeSegment) -> StageTimes:
        """`render_segment`, reporting finished stream-frames on the queue in batches.

        Args:
            seg: the segment.

        Returns:
            As `render_segment`.
        """
        queue = self.queue
        pending = [0]

        def tick(n: int) -> None:
            pending[0] += n
            if queue is not None and pending[0] >= PROGRESS_BATCH_UNITS:
                queue.put(pending[0])
                pending[0] = 0

        result = self.render_segment(seg, on_units=tick)
        if queue is not None and pending[0]:
            queue.put(pending[0])
        return result


@functools.cache
def _process_worker() -> SegmentWorker:
    """This worker process's `SegmentWorker` (spawned pool processes each make their own)."""
    return SegmentWorker()


def _init_pool_worker(scenario: Scenario, opts: RenderOptions, reals: dict[str, RealCamera], first: int, queue: _CountQueue) -> None:
    _process_worker().start(scenario, opts, reals, first, queue)


def _run_pool_segment(seg: TimeSegment) -> StageTimes:
    return _process_worker().run_segment(seg)


def spread_over_workers(segments: list[TimeSegment], workers: int) -> list[TimeSegment]:
    """Split time segments by their streams until every worker has one (short clips, few segments).

    The segment with the most parts is halved (the mosaic part, which renders every camera, stays
    in the first half) while there are fewer segments than workers. Each stream's segment
    boundaries, hence its bytes, do not change: only which worker writes which part.

    Args:
        segments: the time segments to write.
        workers: pool size.

    Returns:
        The segments, some split; their parts together are `segments`' parts.
    """
    out = list(segments)
    while len(out) < workers:
        k = max(range(len(out)), key=lambda i: len(out[i].parts), default=-1)
        if k < 0 or len(out[k].parts) < 2:
            break
        seg = out[k]
        parts = sorted(seg.parts, key=lambda p: p.kind != "mosaic")  # stable: the mosaic first, then rig order
        half = (len(parts) + 1) // 2
        out[k : k + 1] = [TimeSegment(seg.clip_id, seg.start, seg.stop, tuple(parts[:half])),
                          TimeSegment(seg.clip_id, seg.start, seg.stop, tuple(parts[half:]))]  # fmt: skip
    return out


def render_segments(scenario: Scenario, opts: RenderOptions, segments: list[TimeSegment], reals: dict[str, RealCamera],
                    first: int, progress: Callable[[int], None] | None) -> StageTimes:  # fmt: skip
    """Render `segments` in this process (`opts.workers == 1`) or in a pool of `opts.workers` processes.

    Args:
        scenario: the scenario.
        opts: render options with `cameras` set.
        segments: the time segments to write.
        reals: camera -> real frames (overlay), else empty.
        first: first rendered frame of the clip.
        progress: called with numbers of finished stream-frames.

    Returns:
        The summed record of every segment.
    """
    if not segments:
        return StageTimes()
    real_sizes = [r.size_px for r in reals.values() if r.video is not None]
    segments = spread_over_workers(memory_plan.fit_to_budget(segments, opts, real_sizes), opts.workers)
    total = StageTimes(peak_estimate_mib=max(map(memory_plan.render_estimate(opts, real_sizes), segments)))
    if opts.workers > 1 and len(segments) > 1:
        return total.plus(_run_pool(scenario, opts, segments, reals, first, progress))
    worker = SegmentWorker()
    worker.start(scenario, opts, reals, first, None)
    for seg in segments:
        total = total.plus(worker.render_segment(seg, progress))
    return total


def _run_pool(scenario: Scenario, opts: RenderOptions, segments: list[TimeSegment], reals: dict[str, RealCamera],
              first: int, progress: Callable[[int], None] | None) -> StageTimes:  # fmt: skip
    ctx = mp.get_context("spawn")  # no inherited state: safe with numba / torch / encoders
    manager = ctx.Manager()
    queue = manager.Queue()
    total = StageTimes()
    try:
        initargs = (scenario, opts, reals, first, queue)
        with ProcessPoolExecutor(opts.workers, mp_context=ctx, initializer=_init_pool_worker, initargs=initargs) as pool:
            # most work first, so the pool's greedy scheduling ends evenly
            ordered = sorted(segments, key=lambda s: -(s.n_frames * len(s.parts)))
            pending: set[Future[StageTimes]] = {pool.submit(_run_pool_segment, s) for s in ordered}
            while pending:
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for fut in done:
                    total = total.plus(fut.result())
                _drain(queue, progress)
            _drain(queue, progress)
    finally:
        manager.shutdown()
    return total


def _drain(queue: _CountQueue, progress: Callable[[int], None] | None) -> None:
    while not queue.empty():
        n = queue.get()
        if progress is not None:
            progress(n)
