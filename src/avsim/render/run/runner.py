"""The library entry point of `avsim render`: plan, process pool, resume, summary.

A request (`RenderOptions`) is resolved once into a `RenderPlan` (rig, cameras, frames, clip id,
streams). Each output stream is a `StreamJob`, split into fixed segments of 150 frames; every
segment streams its frames into an H.264 encoder and lands atomically, then a job's segments are
remuxed into its outputs. A rerun skips finished outputs and segments (resumable, by content);
an interrupted run leaves no partial file. `RenderOptions.workers = N` renders time segments in
N processes; the bytes do not depend on N.

`avsim.render.cli` only parses the command line and calls `run_render` (or, for an `avsim edit`
output folder, `avsim.edit.render_variants.run_render_variants`, which calls it per variant).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avsim.core.atomic import output_errors, removed_if_empty_on_error
from avsim.core.locks import output_lock
from avsim.render.run import labels as labels_run
from avsim.render.run import resume, units, writer
from avsim.render.run.plan import RenderOptions, RenderPlan, Stream, StreamKind
from avsim.render.run.pool import StageTimes, render_segments
from avsim.render.run.real_frames import RealCamera, plan_camera
from avsim.render.run.units import StreamJob, StreamSegment, TimeSegment

if TYPE_CHECKING:
    from avsim.scenario import Scenario

Progress = Callable[[int], None]
"""Called with a number of stream-frames (camera, mosaic, overlay frames) that just finished (or were found finished)."""


@dataclass
class RenderSummary:
    """What one `run_render` did (written as `OUT/<clip>/render_summary.json`)."""

    clip_id: str
    cameras: list[str]
    frames: int
    camera_frames_rendered: int
    camera_frames_skipped: int
    seconds: float
    outputs: list[str] = field(default_factory=list)
    mosaic_frames_rendered: int = 0
    overlay_frames_rendered: int = 0
    render_cpu_s: float = 0.0  # CPU seconds of all workers rendering (raster, labels)
    encode_cpu_s: float = 0.0  # ... encoding every stream (and writing PNGs)
    composite_cpu_s: float = 0.0  # ... tiling the mosaic, reading real frames, blending overlays
    peak_estimate_mib: float = 0.0  # the largest work unit's estimated peak memory (run/memory.py)

    @property
    def camera_frames_per_s(self) -> float:
        """Rendered camera-video frames per wall-clock second (mosaic and overlay frames not counted; 0 for an instant run)."""
        return self.camera_frames_rendered / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """The summary as a JSON-ready dict (the fields plus `camera_frames_per_s`).

        Returns:
            The `render_summary.json` document of one clip.
        """
        doc = asdict(self)
        for key in ("seconds", "render_cpu_s", "encode_cpu_s", "composite_cpu_s"):
            doc[key] = round(doc[key], 3)
        return {**doc, "camera_frames_per_s": round(self.camera_frames_per_s, 2)}


# ---- planning ------------------------------------------------------------------------------------
def plan_jobs(plan: RenderPlan, opts: RenderOptions) -> list[StreamJob]:
    """The camera videos to write: one job per (chunk, camera), chunks first.

    Args:
        plan: the resolved plan.
        opts: render options (output folder, chunking, layout, PNGs).

    Returns:
        The jobs, in chunk then camera order.
    """
    ranges = writer.chunk_ranges(plan.n_frames, opts.chunk_frames)
    jobs = []
    for k, (a, b) in enumerate(ranges):
        cid = writer.chunk_clip_id(plan.clip_id, k, len(ranges))
        for cam in plan.cameras:
            stream = Stream(StreamKind.CAMERA, cam)
            png = writer.png_folder(opts.out, cid, cam) if opts.png else None
            outputs = writer.stream_outputs(opts.out, cid, stream, opts.layout)
            jobs.append(StreamJob(stream, cid, plan.first + a, plan.first + b, outputs, png))
    return jobs


def plan_overlay(scenario: Scenario, opts: RenderOptions, plan: RenderPlan | None = None) -> dict[str, RealCamera]:
    """Find, time and size-check the real frames of every camera (before anything is rendered).

    Args:
        scenario: the scenario.
        opts: render options (`overlay` set; else nothing is planned).
        plan: the resolved plan (None: resolved here).

    Returns:
        Camera -> its real frames and pairing; AvsimInputError (one line) when they do not fit.
    """
    if opts.overlay is None:
        return {}
    import numpy as np

    plan = plan or RenderPlan.resolve(scenario, opts)
    times_s = np.arange(plan.n_frames, dtype=np.float64) / plan.fps + opts.overlay_offset_s
    return {cam: plan_camera(Path(opts.overlay), cam, plan.clip_id, times_s, plan.fps, plan.size_of(cam), opts.overlay_fps)
            for cam in plan.cameras}  # fmt: skip


def _rel(opts: RenderOptions, path: Path) -> str:
    try:
        return path.relative_to(opts.out).as_posix()
    except ValueError:
        return path.as_posix()


def plan_streams(plan: RenderPlan, opts: RenderOptions, scenario_hex: str, reals: dict[str, RealCamera]) -> list[StreamJob]:
    """Every output job with its digest: camera videos, then per chunk the mosaic, then overlays.

    Args:
        plan: the resolved plan.
        opts: render options.
        scenario_hex: `resume.scenario_digest` of the scenario.
        reals: camera -> real frames (overlay), else empty.

    Returns:
        The jobs (each stream's kind is in `job.stream`).
    """
    common = {"fps": plan.fps, "size": list(opts.size_px), "rig": opts.rig, "backend": opts.backend.value,
              "antialias": opts.antialias, "segment_frames": units.SEGMENT_FRAMES}  # fmt: skip
    if not opts.exact_size:  # each camera at its own aspect (digests of exact-size renders unchanged)
        common["exact_size"] = False
    real_hex = {cam: r.digest() for cam, r in reals.items()}
    out: list[StreamJob] = []
    for job in plan_jobs(plan, opts):
        opt = {**common, "stream": job.stream.kind.value, "camera": job.stream.camera, "frames": [job.start, job.stop],
               "preset": opts.preset.value, "png": opts.png, "outputs": [_rel(opts, p) for p in job.outputs]}  # fmt: skip
        out.append(replace(job, digest=resume.job_digest(scenario_hex, opt)))
    chunks = {j.clip_id: (j.start, j.stop) for j in out}
    mosaic = writer.render_mosaic_layout(plan.rig, plan.cameras)
    for cid, (a, b) in chunks.items():
        streams = [s for s in plan.streams if s.kind is StreamKind.MOSAIC]
        streams += [s for s in plan.streams if s.kind is StreamKind.OVERLAY] if reals else []
        for stream in streams:
            if stream.kind is StreamKind.MOSAIC:
                opt = {**common, "stream": "mosaic", "cameras": list(plan.cameras), "frames": [a, b], "tiles": [[t.camera, t.x_px, t.y_px, t.width_px, t.height_px] for t in mosaic.tiles]}
            else:
                opt = {**common, "stream": "overlay", "camera": stream.camera, "frames": [a, b], "real": real_hex[stream.camera],
                       "offset_s": opts.overlay_offset_s, "real_fps": opts.overlay_fps}  # fmt: skip
            outputs = writer.stream_outputs(opts.out, cid, stream, opts.layout)
            out.append(StreamJob(stream, cid, a, b, outputs, None, resume.job_digest(scenario_hex, opt)))
    return out


def time_segments(todo: list[StreamJob], opts: RenderOptions, redo: Callable[[StreamSegment], bool]) -> list[TimeSegment]:
    """Group the unfinished segments of the jobs to (re)write into time segments.

    Args:
        todo: jobs to write.
        opts: render options (`overwrite`).
        redo: whether a camera segment must be rewritten for its labels.

    Returns:
        One TimeSegment per (clip, start) with the segments that are not done, in time order.
    """
    groups: dict[tuple[str, int], list[StreamSegment]] = {}
    stops: dict[tuple[str, int], int] = {}
    for job in todo:
        for seg in job.segments():
            if opts.overwrite or not seg.done() or (job.stream.kind is StreamKind.CAMERA and redo(seg)):
                groups.setdefault((job.clip_id, seg.start), []).append(seg)
                stops[job.clip_id, seg.start] = seg.stop
    return [TimeSegment(cid, a, stops[cid, a], tuple(parts)) for (cid, a), parts in sorted(groups.items(), key=lambda kv: kv[0][1])]


def _current(opts: RenderOptions, record: dict[str, str], job: StreamJob) -> bool:
    """Whether a job is finished with the inputs it would have now (resume by content)."""
    return not opts.overwrite and job.done() and all(record.get(_rel(opts, p)) == job.digest for p in job.outputs)


def run_render(scenario: Scenario, opts: RenderOptions, progress: Progress | None = None, source: Path | None = None) -> RenderSummary:
    """Render `scenario` per `opts` (keeping outputs whose recorded input digest still matches, unless `opts.overwrite`).

    Args:
        scenario: the scenario to render.
        opts: render options.
        progress: `progress(n)` is called as stream-frames finish (and once for those kept); the
            total is `RenderPlan.progress_units`.
        source: the scenario folder it was loaded from (its files are digested), or None (the
            scenario's serialized form is).

    Returns:
        The run summary, also written (merged with earlier runs') to `opts.out/<clip>/render_summary.json`.
        One writer at a time per `OUT/<clip>` (`avsim.core.locks.output_lock`; `opts.wait` waits);
        a full or read-only disk is one line (`OUT: disk full`), leaving only finished files.
    """
    t0 = time.perf_counter()
    plan = RenderPlan.resolve(scenario, opts)
    reals = plan_overlay(scenario, opts, plan)  # bad real frames fail here, before anything is written
    jobs = plan_streams(plan, opts, resume.scenario_digest(scenario, source), reals)
    with removed_if_empty_on_error(opts.out), output_errors(opts.out), output_lock(opts.out / plan.clip_id, wait=opts.wait):
        return _render_jobs(scenario, opts, plan, jobs, reals, progress, t0)


def _render_jobs(scenario: Scenario, opts: RenderOptions, plan: RenderPlan, jobs: list[StreamJob], reals: dict[str, RealCamera],
                 progress: Progress | None, t0: float) -> RenderSummary:  # fmt: skip
    """`run_render` once the clip's writer lock is held: sweep, render what is missing, join, record."""
    record = resume.read_record(opts.out, plan.clip_id)
    redo = _labels_missing(opts, plan.clip_id)
    for job in jobs:  # leftovers of a killed run (dead writers' temporaries, empty .parts)
        writer.sweep_job(job)
    is_camera = [j.stream.kind is StreamKind.CAMERA for j in jobs]
    todo = [j for j, cam in zip(jobs, is_camera) if not _current(opts, record, j) or (cam and any(redo(s) for s in j.segments()))]
    segments = time_segments(todo, opts, redo)
    total = sum(j.stop - j.start for j in jobs)
    planned = sum(s.n_frames * len(s.parts) for s in segments)
    if progress is not None and total > planned:
        progress(total - planned)
    stats = render_segments(scenario, opts, plan, segments, reals, progress)
    for job in todo:
        writer.assemble_job(job)
        record.update({_rel(opts, p): job.digest for p in job.outputs})
    if todo:
        resume.write_record(opts.out, plan.clip_id, record)
    camera_jobs = [j for j, cam in zip(jobs, is_camera) if cam]
    outputs = [str(p) for j in camera_jobs for p in j.outputs]
    labels = labels_run.labels_folder(opts.out, plan.clip_id)
    if opts.labels and (todo or not labels_run.labels_done(opts, plan.clip_id)):
        labels_run.merge_parts(scenario, opts, plan, [s for j in camera_jobs for s in j.segments()])
    if opts.labels:
        outputs.append(str(labels))
    outputs += [str(p) for j, cam in zip(jobs, is_camera) if not cam for p in j.outputs]
    written = [str(p) for j in todo for p in j.outputs]
    return _finish(opts, plan, stats, time.perf_counter() - t0, outputs, written)


def _finish(opts: RenderOptions, plan: RenderPlan, stats: StageTimes, seconds: float, outputs: list[str], written: list[str]) -> RenderSummary:
    """The run's summary, merged with the clip's earlier runs into `render_summary.json`."""
    n_cams = len(plan.cameras)
    summary = RenderSummary(
        plan.clip_id, list(plan.cameras), plan.n_frames, stats.camera_frames, n_cams * plan.n_frames - stats.camera_frames,
        seconds, outputs, stats.mosaic_frames, stats.overlay_frames, stats.render_cpu_s, stats.encode_cpu_s,
        stats.composite_cpu_s, round(stats.peak_estimate_mib, 1),
    )  # fmt: skip
    resume.write_summary(opts.out, plan.clip_id, resume.merged_summary(opts.out, plan.clip_id, summary.to_json(), written))
    return summary


def _labels_missing(opts: RenderOptions, clip_id: str) -> Callable[[StreamSegment], bool]:
    """Whether a segment must be (re-)rendered for its labels: asked for, not yet merged, part missing."""
    if not opts.labels or (not opts.overwrite and labels_run.labels_done(opts, clip_id)):
        return lambda s: False
    return lambda s: opts.overwrite or not labels_run.part_path(opts.out, clip_id, s).is_file()
