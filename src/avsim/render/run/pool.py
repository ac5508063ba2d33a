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
from avsim.core.mosaic import MosaicLayout
from avsim.core.typing import NDArrayBool, NDArrayByte
from avsim.core.video import MP4Writer
from avsim.render.geometry.scene import SceneRenderer
from avsim.render.run import labels as labels_run
from avsim.render.run import memory as memory_plan
from avsim.render.run import overlay, writer
from avsim.render.run.plan import Backend, RenderOptions, RenderPlan, StreamKind
from avsim.render.run.real_frames import RealCamera, RealReader
from avsim.render.run.units import StreamSegment, TimeSegment

if TYPE_CHECKING:
    from avsim.scenario import Scenario

PROGRESS_BATCH_UNITS = 10  # a worker reports finished stream-frames to the main process in batches this size


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
        self.plan: RenderPlan | None = None
        self.reals: dict[str, RealCamera] = {}
        self.first = 0
        self.queue: _CountQueue | None = None
        self._readers: dict[str, RealReader] = {}
        self._labeller: labels_run.Labeller | None = None  # of `renderer`, made when labels are first asked for

    def start(self, scenario: Scenario, opts: RenderOptions, plan: RenderPlan, reals: dict[str, RealCamera],
              queue: _CountQueue | None) -> None:  # fmt: skip
        """Build the renderer of `scenario` per `plan`.

        Args:
            scenario: the scenario.
            opts: render options.
            plan: the resolved plan (rig, cameras, frames, size).
            reals: camera -> its real frames (overlay only; else empty).
            queue: where finished stream-frames are reported (pool), or None.
        """
        self.renderer = SceneRenderer(scenario, rig=plan.rig, cameras=plan.cameras, sizes=plan.sizes_px, fps=plan.fps,
                                      backend=opts.backend, antialias=opts.antialias)  # fmt: skip
        self.opts, self.plan, self.reals, self.first, self.queue = opts, plan, reals, plan.first, queue
        self._readers, self._labeller = {}, None

    def _frames(self, seg: TimeSegment, camera: str, clock: _Clock) -> Iterator[tuple[NDArrayByte, NDArrayBool | None]]:
        """One camera's frames of the segment (and their coverage when its overlay is written)."""
        renderer, opts = self.renderer, self.opts
        assert renderer is not None and opts is not None, "start() first"
        i = renderer.rig.index(camera)
        wants_overlay = any(p.stream.kind is StreamKind.OVERLAY and p.stream.camera == camera for p in seg.parts)
        cam_part = next((p for p in seg.parts if p.stream.kind is StreamKind.CAMERA and p.stream.camera == camera), None)
        labelled: Iterator[NDArrayByte] | None = None
        if opts.labels and cam_part is not None:
            assert self.plan is not None
            if self._labeller is None:  # one per renderer: it keeps the frames' boxes for every camera
                self._labeller = labels_run.Labeller.of(renderer, opts.label_files, opts.label_images)
            part = labels_run.part_path(opts.out, self.plan.clip_id, cam_part)
            labelled = labels_run.labelled_frames(self._labeller, cam_part, part)
        for f in range(seg.start, seg.stop):
            coverage = None
            if labelled is not None:
                img = next(labelled)
                if wants_overlay:
                    coverage = overlay.render_with_coverage(renderer, f, i)[1]
            elif wants_overlay and opts.backend is Backend.NUMBA:
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
        renderer, opts, plan = self.renderer, self.opts, self.plan
        assert renderer is not None and opts is not None and plan is not None, "start() first"
        clock = _Clock()
        cameras = seg.cameras(plan.cameras)
        renderer.prepare_rays(cameras)  # before this segment's encoders open (peak memory)
        mosaic = writer.render_mosaic_layout(plan.rig, plan.cameras)
        with ExitStack() as stack:
            encoders: list[tuple[MP4Writer, StreamSegment]] = []
            for p in seg.parts:
                size = (mosaic.width_px, mosaic.height_px) if p.stream.kind is StreamKind.MOSAIC else plan.size_of(p.stream.camera)
                encoders.append((stack.enter_context(MP4Writer(p.part, *size, plan.fps, preset=str(opts.preset))), p))
            streams = {cam: self._frames(seg, cam, clock) for cam in cameras}
            for f in range(seg.start, seg.stop):
                frames = {cam: next(it) for cam, it in streams.items()}
                self._write_frame(f, frames, encoders, clock, mosaic)
                if on_units is not None:
                    on_units(len(seg.parts))
            for it in streams.values():
                next(it, None)  # let each camera's generator finish (label parts)
            clock.lap("render")
        clock.lap("encode")  # the encoders' flush on close
        release_free_heap()  # the closed encoders' buffers, so that a long clip's segments do not pile up pages
        s = clock.seconds
        return StageTimes(seg.count(StreamKind.CAMERA), seg.count(StreamKind.MOSAIC), seg.count(StreamKind.OVERLAY),
                          s["render"], s["encode"], s["composite"])  # fmt: skip

    def _write_frame(self, f: int, frames: dict[str, tuple[NDArrayByte, NDArrayBool | None]],
                     encoders: list[tuple[MP4Writer, StreamSegment]], clock: _Clock,
                     mosaic: MosaicLayout) -> None:  # fmt: skip
        """Feed frame `f` of every needed camera to the encoders of the segment's parts."""
        for enc, part in encoders:
            kind, cam = part.stream.kind, part.stream.camera
            if kind is StreamKind.CAMERA:
                enc.write(frames[cam][0])
                if part.png_dir is not None:
                    writer.write_png(part.png_dir / f"{f:06d}.png", frames[cam][0])
                clock.lap("encode")
            elif kind is StreamKind.MOSAIC:
                tiled = writer.tile_mosaic({c: frames[c][0] for c in mosaic.cameras}, mosaic)
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


def _init_pool_worker(scenario: Scenario, opts: RenderOptions, plan: RenderPlan, reals: dict[str, RealCamera], queue: _CountQueue) -> None:
    _process_worker().start(scenario, opts, plan, reals, queue)


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
        parts = sorted(seg.parts, key=lambda p: p.stream.kind is not StreamKind.MOSAIC)  # stable: the mosaic first, then rig order
        half = (len(parts) + 1) // 2
        out[k : k + 1] = [seg.with_parts(tuple(parts[:half])), seg.with_parts(tuple(parts[half:]))]
    return out


def render_segments(scenario: Scenario, opts: RenderOptions, plan: RenderPlan, segments: list[TimeSegment],
                    reals: dict[str, RealCamera], progress: Callable[[int], None] | None) -> StageTimes:  # fmt: skip
    """Render `segments` in this process (`opts.workers == 1`) or in a pool of `opts.workers` processes.

    Args:
        scenario: the scenario.
        opts: render options.
        plan: the resolved plan.
        segments: the time segments to write.
        reals: camera -> real frames (overlay), else empty.
        progress: called with numbers of finished stream-frames.

    Returns:
        The summed record of every segment.
    """
    if not segments:
        return StageTimes()
    real_sizes = [r.size_px for r in reals.values() if r.video is not None]
    segments = spread_over_workers(memory_plan.fit_to_budget(segments, opts, plan, real_sizes), opts.workers)
    total = StageTimes(peak_estimate_mib=max(map(memory_plan.render_estimate(opts, plan, real_sizes), segments)))
    if opts.workers > 1 and len(segments) > 1:
        return total.plus(_run_pool(scenario, opts, plan, segments, reals, progress))
    worker = SegmentWorker()
    worker.start(scenario, opts, plan, reals, None)
    for seg in segments:
        total = total.plus(worker.render_segment(seg, progress))
    return total


def _run_pool(scenario: Scenario, opts: RenderOptions, plan: RenderPlan, segments: list[TimeSegment],
              reals: dict[str, RealCamera], progress: Callable[[int], None] | None) -> StageTimes:  # fmt: skip
    ctx = mp.get_context("spawn")  # no inherited state: safe with numba / torch / encoders
    manager = ctx.Manager()
    queue = manager.Queue()
    total = StageTimes()
    try:
        initargs = (scenario, opts, plan, reals, queue)
        with ProcessPoolExecutor(opts.workers, mp_context=ctx, initializer=_init_pool_worker, initargs=initargs) as pool:
            # most work first, so the pool's greedy scheduling ends evenly
            ordered = sorted(segments, key=lambda s: -(s.n_frames * len(s.parts)))
            pending: set[Future[StageTimes]] = {pool.submit(_run_pool_segment, s) for s in ordered}
            try:
                while pending:
                    done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                    for fut in done:
                        total = total.plus(fut.result())
                    _drain(queue, progress)
            except BaseException:  # e.g. a full disk: segments not started yet are not started at all
                for fut in pending:
                    fut.cancel()
                raise
            _drain(queue, progress)
    finally:
        manager.shutdown()
    return total


def _drain(queue: _CountQueue, progress: Callable[[int], None] | None) -> None:
    while not queue.empty():
        n = queue.get()
        if progress is not None:
            progress(n)
