"""The library entry point of `avsim render`: plan, process pool, resume, variants, summary.

Work is split into segments (150 frames of one camera); each streams its frames into an H.264
encoder and lands atomically, then a camera's segments are remuxed into its video. A rerun
skips finished videos and segments (resumable); an interrupted run leaves no partial file.
`RenderOptions.workers = N` renders segments in N processes; the bytes do not depend on N.

Given the output folder of `avsim edit` (a `manifest.json` of format `avsim-edit-manifest`
beside one scenario folder per variant), `run_render_variants` renders every variant with the
same options to `OUT/<scenario_id>/...`, and `OUT/render_summary.json` lists them all.

`avsim.render.cli` only parses the command line and calls `run_render` / `run_render_variants`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.rig import NAMED_RIGS, CameraRig, named_rig
from avsim.render import style
from avsim.render.run import memory as memory_plan
from avsim.render.run import resume, writer
from avsim.render.run.pool import StageTimes, StreamPart, TimeSegment, render_segments
from avsim.render.run.real_frames import RealCamera, plan_camera

if TYPE_CHECKING:
    from avsim.render.labels.merge import LabelFiles
    from avsim.scenario import Scenario

RIG_CHOICES = ("scenario", *NAMED_RIGS)
# `avsim edit`'s manifest (edit/cli.py writes it; render sits below edit in the layering, so
# the two names are restated here rather than imported)
EDIT_MANIFEST_NAME = "manifest.json"
EDIT_MANIFEST_FORMAT = "avsim-edit-manifest"
VARIANTS_SUMMARY_FORMAT = "avsim-render-variants-summary"
X264_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")

Progress = Callable[[int], None]
"""Called with a number of stream-frames (camera, mosaic, overlay frames) that just finished (or were found finished)."""


class FrameSelectionError(ValueError):
    """The frame selection (`frames` / `start_s` / `end_s`) is malformed or selects nothing.

    The command line reports it as a usage error of `--frames` / `--start` / `--end`.
    """


@dataclass(frozen=True)
class RenderOptions:
    """Everything `avsim render` can be asked (see the command's help)."""

    out: Path
    cameras: tuple[str, ...] | None = None
    start_s: float | None = None
    end_s: float | None = None
    frames: str | None = None
    fps: float = style.DEFAULT_FPS
    width_px: int = style.DEFAULT_WIDTH_PX
    height_px: int = style.DEFAULT_HEIGHT_PX
    exact_size: bool = True  # every camera at width_px x height_px; False: each at its own aspect at height_px (geometry/sizes.py; the CLI default)
    chunk_frames: int = 0
    workers: int = 1
    overlay: Path | None = None
    mosaic: bool = False
    png: bool = False
    layout: str = "default"
    rig: str = "scenario"
    backend: str = "numba"
    overwrite: bool = False
    preset: str = writer.DEFAULT_PRESET
    labels: bool = False  # also write labels (render/labels_run.py): same pass, numba id buffer
    label_files: LabelFiles = "compact"  # compact parquet tables, the standard files, or both (render/labels/merge.py LABEL_FILES)
    label_images: str | None = None  # also keep every labelled frame as a jpg / png file under labels/images/
    antialias: bool = True  # 4x MSAA on edge pixels (render/raster_aa.py); False (`--aa off`): the exact single-sample frames
    overlay_offset_s: float = 0.0  # render time t shows real time t + offset (render/real_frames.py)
    overlay_fps: float | None = None  # rate of an image folder of real frames (None: times from the names)
    max_memory_mib: int = memory_plan.DEFAULT_MAX_MEMORY_MIB  # budget of one render process (render/memory_plan.py; 0: none); bytes unchanged


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
    peak_estimate_mib: float = 0.0  # the largest work unit's estimated peak memory (render/memory_plan.py)

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


@dataclass(frozen=True)
class Variant:
    """One variant listed in an `avsim edit` manifest: its name and scenario folder."""

    name: str
    folder: Path


# ---- edit variants -------------------------------------------------------------------------------
def is_variants_folder(path: Path) -> bool:
    """Whether `path` holds an `avsim edit` manifest.

    Args:
        path: a folder given as SCENARIO.

    Returns:
        True when `path/manifest.json` is readable JSON of format avsim-edit-manifest.
    """
    manifest = Path(path) / EDIT_MANIFEST_NAME
    if not manifest.is_file():
        return False
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == EDIT_MANIFEST_FORMAT


def read_variants(path: Path) -> list[Variant]:
    """The variants of an `avsim edit` output folder, in manifest order.

    Each `folder` must be a plain name inside `path` that exists (no separators, no `..`), and
    no two variants may share one; anything else is an AvsimInputError naming the field.

    Args:
        path: the `avsim edit` output folder (holds manifest.json).

    Returns:
        One Variant per manifest entry, in order.
    """
    manifest = Path(path) / EDIT_MANIFEST_NAME
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AvsimInputError(manifest, "manifest", f"unreadable: {exc}") from None
    entries = doc.get("variants") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise AvsimInputError(manifest, "variants", "expected a non-empty list of variants")
    variants: list[Variant] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        folder = entry.get("folder") if isinstance(entry, dict) else None
        field_name = f"variants[{i}].folder"
        if not isinstance(folder, str) or not folder or folder in (".", "..") or "/" in folder or "\\" in folder:
            raise AvsimInputError(manifest, field_name, f"expected a folder name inside {path}, got {folder!r}")
        if folder in seen:
            raise AvsimInputError(manifest, field_name, f"folder {folder!r} is listed twice")
        if not (Path(path) / folder).is_dir():
            raise AvsimInputError(manifest, field_name, f"no such variant folder {folder!r}")
        seen.add(folder)
        name = entry.get("name", folder)
        variants.append(Variant(str(name), Path(path) / folder))
    return variants


def variants_summary_document(variants: list[Variant], summaries: list[RenderSummary]) -> dict[str, Any]:
    """`OUT/render_summary.json` for a rendered set of edit variants (no paths of the inputs).

    Args:
        variants: the variants, in manifest order.
        summaries: one summary per variant, in the same order.

    Returns:
        The JSON-ready document (format avsim-render-variants-summary) with per-variant rows and totals.
    """
    return {
        "format": VARIANTS_SUMMARY_FORMAT,
        "variants": [{"name": v.name, **s.to_json()} for v, s in zip(variants, summaries)],
        "camera_frames_rendered": sum(s.camera_frames_rendered for s in summaries),
        "camera_frames_skipped": sum(s.camera_frames_skipped for s in summaries),
        "seconds": round(sum(s.seconds for s in summaries), 3),
    }


def load_scenario_folder(path: Path) -> Scenario:
    """Load a scenario folder; a missing one is an AvsimInputError (one line on the command line).

    Args:
        path: a scenario folder in the avsim native format.

    Returns:
        The loaded scenario.
    """
    from avsim.scenario.io import load_scenario

    if not path.exists():
        raise AvsimInputError(path, "scenario", "no such scenario folder")
    return load_scenario(path)


def run_render_variants(
    path: Path,
    opts: RenderOptions,
    progress: Progress | None = None,
    on_variant: Callable[[int, Variant, Scenario], None] | None = None,
) -> list[RenderSummary]:
    """Render every variant of an `avsim edit` output folder with the same `opts`.

    Variants go to `opts.out/<scenario_id>/...` (ids differ per variant); each is resumable on
    its own, and `opts.out/render_summary.json` lists them all.

    Args:
        path: the `avsim edit` output folder.
        opts: render options shared by every variant.
        progress: called with camera-frame counts as they finish (see `run_render`).
        on_variant: `on_variant(i, variant, scenario)` is called before variant i renders (progress bars).

    Returns:
        One summary per variant, in manifest order.
    """
    variants = read_variants(path)
    summaries: list[RenderSummary] = []
    clip_owner: dict[str, str] = {}
    for i, variant in enumerate(variants):
        scenario = load_scenario_folder(variant.folder)
        clip_id = writer.safe_name(scenario.scenario_id)
        if clip_id in clip_owner:
            raise AvsimInputError(
                variant.folder, "scenario_id", f"{scenario.scenario_id!r} is also the id of variant {clip_owner[clip_id]!r}"
            )
        clip_owner[clip_id] = variant.name
        if on_variant is not None:
            on_variant(i, variant, scenario)
        summaries.append(run_render(scenario, opts, progress=progress, source=variant.folder))
        del scenario
    doc = variants_summary_document(variants, summaries)
    with atomic_output_path(opts.out / "render_summary.json") as tmp:
        Path(tmp).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return summaries


# ---- planning ------------------------------------------------------------------------------------
def _parse_frames(frames: str, n_frames: int) -> tuple[int, int]:
    try:
        if ":" in frames:
            a, b = frames.split(":", 1)
            return int(a or 0), int(b) if b else n_frames
        return 0, int(frames)
    except ValueError:
        raise FrameSelectionError(f"--frames: expected N or A:B, got {frames!r}") from None


def select_frames(n_frames: int, fps: float, start_s: float | None, end_s: float | None, frames: str | None) -> tuple[int, int]:
    """The frames to render, from a time window or a frame range.

    Args:
        n_frames: frames of the clip at `fps`.
        fps: render rate.
        start_s: first time, seconds from the clip start (or None).
        end_s: last time, seconds from the clip start, inclusive (or None).
        frames: "N" (the first N frames) or "A:B" (frames A..B-1), or None; not with start_s/end_s.

    Returns:
        (first, stop): the half-open frame index range; FrameSelectionError when it is empty or malformed.
    """
    if frames is not None and (start_s is not None or end_s is not None):
        raise FrameSelectionError("use either --frames or --start/--end, not both")
    first, stop = _parse_frames(frames, n_frames) if frames is not None else (0, n_frames)
    if start_s is not None:
        first = math.ceil(start_s * fps - 1e-9)
    if end_s is not None:
        stop = math.floor(end_s * fps + 1e-9) + 1
    first, stop = max(first, 0), min(stop, n_frames)
    if stop <= first:
        raise FrameSelectionError(f"no frames selected (the clip has {n_frames} frames at {fps:g} fps)")
    return first, stop


def plan_jobs(clip_id: str, cameras: tuple[str, ...], first: int, stop: int, opts: RenderOptions) -> list[writer.CameraJob]:
    """The camera videos to write: one job per (chunk, camera), chunks first.

    Args:
        clip_id: the file-safe clip name.
        cameras: camera names to render.
        first: first frame index.
        stop: one past the last frame index.
        opts: render options (output folder, chunking, layout, PNGs).

    Returns:
        The jobs, in chunk then camera order.
    """
    ranges = writer.chunk_ranges(stop - first, opts.chunk_frames)
    jobs = []
    for k, (a, b) in enumerate(ranges):
        cid = writer.chunk_clip_id(clip_id, k, len(ranges))
        for cam in cameras:
            outputs = tuple(writer.camera_video_paths(opts.out, cid, cam, opts.layout))
            png = writer.png_folder(opts.out, cid, cam) if opts.png else None
            jobs.append(writer.CameraJob(cam, cid, first + a, first + b, outputs, png))
    return jobs


def resolve_rig(scenario: Scenario, name: str) -> CameraRig:
    """The rig `--rig name` asks for.

    Args:
        scenario: the scenario being rendered.
        name: "scenario" (its own rig) or a name of `avsim.core.rig.NAMED_RIGS`.

    Returns:
        The camera rig to render through.
    """
    return scenario.rig if name == "scenario" else named_rig(name)


def render_sizes(scenario: Scenario, opts: RenderOptions, cameras: tuple[str, ...] | None = None) -> dict[str, tuple[int, int]]:
    """Each camera's image size in a render with `opts` (`geometry.sizes.camera_sizes` of the rig it asks for).

    Args:
        scenario: the scenario.
        opts: render options (size, `exact_size`, rig, cameras).
        cameras: the cameras (None: per `opts` and the rig).

    Returns:
        Camera -> (width, height), in rig order of `cameras`.
    """
    from avsim.render.geometry.sizes import camera_sizes

    rig = resolve_rig(scenario, opts.rig)
    rig = rig.subset(list(cameras or (tuple(opts.cameras) if opts.cameras else rig.names)))
    return dict(zip(rig.names, camera_sizes(rig, opts.width_px, opts.height_px, opts.exact_size)))


# ---- execution -------------------------------------------------------------------------------------
def check_cameras(cameras: tuple[str, ...], rig: CameraRig) -> None:
    """Every asked-for camera must be in the rig (AvsimInputError naming `--cameras` otherwise).

    Args:
        cameras: camera names.
        rig: the rig rendered through.
    """
    for cam in cameras:
        if cam not in rig.names:
            raise AvsimInputError("--cameras", cam, f"no such camera; the rig has {', '.join(rig.names)}")


def progress_units(n_cameras: int, n_frames: int, opts: RenderOptions) -> int:
    """What the progress bar counts to: one unit per frame of every output stream.

    Args:
        n_cameras: cameras rendered.
        n_frames: frames rendered.
        opts: render options (mosaic, overlay).

    Returns:
        n_frames * (cameras + 1 if mosaic + cameras if overlay).
    """
    streams = n_cameras * (2 if opts.overlay is not None else 1) + (1 if opts.mosaic else 0)
    return n_frames * streams


def plan_overlay(scenario: Scenario, opts: RenderOptions, cameras: tuple[str, ...] | None = None) -> dict[str, RealCamera]:
    """Find, time and size-check the real frames of every camera (before anything is rendered).

    Args:
        scenario: the scenario.
        opts: render options (`overlay` set; else nothing is planned).
        cameras: the cameras (None: per `opts` and the rig).

    Returns:
        Camera -> its real frames and pairing; AvsimInputError (one line) when they do not fit.
    """
    if opts.overlay is None:
        return {}
    rig = resolve_rig(scenario, opts.rig)
    cameras = cameras or (tuple(opts.cameras) if opts.cameras else rig.names)
    first, stop = select_frames(len(scenario.frame_times(opts.fps)), opts.fps, opts.start_s, opts.end_s, opts.frames)
    import numpy as np

    times_s = np.arange(stop - first, dtype=np.float64) / opts.fps + opts.overlay_offset_s
    clip_id = writer.safe_name(scenario.scenario_id)
    sizes = render_sizes(scenario, opts, cameras)
    return {cam: plan_camera(Path(opts.overlay), cam, clip_id, times_s, opts.fps, sizes[cam], opts.overlay_fps) for cam in cameras}


def _rel(opts: RenderOptions, path: Path) -> str:
    try:
        return path.relative_to(opts.out).as_posix()
    except ValueError:
        return path.as_posix()


def plan_streams(clip_id: str, cameras: tuple[str, ...], first: int, stop: int, opts: RenderOptions,
                 scenario_hex: str, reals: dict[str, RealCamera]) -> list[tuple[str, writer.CameraJob]]:  # fmt: skip
    """Every output job with its digest: camera videos, then per chunk the mosaic, then overlays.

    Args:
        clip_id: the file-safe clip name.
        cameras: camera names.
        first: first frame.
        stop: one past the last frame.
        opts: render options.
        scenario_hex: `resume.scenario_digest` of the scenario.
        reals: camera -> real frames (overlay), else empty.

    Returns:
        (kind, job) pairs; a mosaic job's camera is "mosaic", an overlay's "<camera>.overlay".
    """
    common = {"fps": opts.fps, "size": [opts.width_px, opts.height_px], "exact_size": opts.exact_size, "rig": opts.rig, "backend": opts.backend,
              "antialias": opts.antialias, "segment_frames": writer.SEGMENT_FRAMES}  # fmt: skip
    real_hex = {cam: r.digest() for cam, r in reals.items()}
    out: list[tuple[str, writer.CameraJob]] = []
    for job in plan_jobs(clip_id, cameras, first, stop, opts):
        opt = {**common, "stream": "camera", "camera": job.camera, "frames": [job.start, job.stop],
               "preset": opts.preset, "png": opts.png, "outputs": [_rel(opts, p) for p in job.outputs]}  # fmt: skip
        out.append(("camera", replace(job, digest=resume.job_digest(scenario_hex, opt))))
    chunks = {j.clip_id: (j.start, j.stop) for _, j in out}
    for cid, (a, b) in chunks.items():
        if opts.mosaic:
            path = writer.mosaic_path(opts.out, cid)
            opt = {**common, "stream": "mosaic", "cameras": list(cameras), "frames": [a, b], "tile": list(writer.MOSAIC_TILE_PX)}
            out.append(("mosaic", writer.CameraJob("mosaic", cid, a, b, (path,), None, resume.job_digest(scenario_hex, opt))))
        for cam in cameras if reals else ():
            path = writer.overlay_path(opts.out, cid, cam)
            opt = {**common, "stream": "overlay", "camera": cam, "frames": [a, b], "real": real_hex[cam],
                   "offset_s": opts.overlay_offset_s, "real_fps": opts.overlay_fps}  # fmt: skip
            job = writer.CameraJob(f"{cam}.overlay", cid, a, b, (path,), None, resume.job_digest(scenario_hex, opt))
            out.append(("overlay", job))
    return out


def time_segments(todo: list[tuple[str, writer.CameraJob]], opts: RenderOptions,
                  redo: Callable[[writer.Segment], bool]) -> list[TimeSegment]:  # fmt: skip
    """Group the unfinished parts of the jobs to (re)write into time segments.

    Args:
        todo: (kind, job) pairs to write.
        opts: render options (`overwrite`).
        redo: whether a camera part must be rewritten for its labels.

    Returns:
        One TimeSegment per (clip, start) with the parts that are not done, in time order.
    """
    groups: dict[tuple[str, int], list[StreamPart]] = {}
    stops: dict[tuple[str, int], int] = {}
    for kind, job in todo:
        name = job.camera.removesuffix(".overlay") if kind == "overlay" else ("" if kind == "mosaic" else job.camera)
        for seg in job.segments():
            if opts.overwrite or not seg.done() or (kind == "camera" and redo(seg)):
                groups.setdefault((job.clip_id, seg.start), []).append(StreamPart(kind, name, seg))
                stops[job.clip_id, seg.start] = seg.stop
    return [TimeSegment(cid, a, stops[cid, a], tuple(parts)) for (cid, a), parts in sorted(groups.items(), key=lambda kv: kv[0][1])]


def _current(opts: RenderOptions, record: dict[str, str], job: writer.CameraJob) -> bool:
    """Whether a job is finished with the inputs it would have now (resume by content)."""
    return not opts.overwrite and job.done() and all(record.get(_rel(opts, p)) == job.digest for p in job.outputs)


def run_render(scenario: Scenario, opts: RenderOptions, progress: Progress | None = None, source: Path | None = None) -> RenderSummary:
    """Render `scenario` per `opts` (keeping outputs whose recorded input digest still matches, unless `opts.overwrite`).

    Args:
        scenario: the scenario to render.
        opts: render options.
        progress: `progress(n)` is called as stream-frames finish (and once for those kept); the
            total is `progress_units`.
        source: the scenario folder it was loaded from (its files are digested), or None (the
            scenario's serialized form is).

    Returns:
        The run summary, also written (merged with earlier runs') to `opts.out/<clip>/render_summary.json`.
    """
    t0 = time.perf_counter()
    rig = resolve_rig(scenario, opts.rig)
    cameras = tuple(opts.cameras) if opts.cameras else rig.names
    check_cameras(cameras, rig)
    first, stop = select_frames(len(scenario.frame_times(opts.fps)), opts.fps, opts.start_s, opts.end_s, opts.frames)
    reals = plan_overlay(scenario, opts, cameras)  # bad real frames fail here, before anything is written
    clip_id = writer.safe_name(scenario.scenario_id)
    opts = replace(opts, cameras=cameras)
    jobs = plan_streams(clip_id, cameras, first, stop, opts, resume.scenario_digest(scenario, source), reals)
    record = resume.read_record(opts.out, clip_id)
    redo = _labels_missing(opts, clip_id)
    for _, job in jobs:  # leftovers of a killed run (dead writers' temporaries, empty .parts)
        writer.sweep_job(job)
    todo = [(k, j) for k, j in jobs if not _current(opts, record, j) or (k == "camera" and any(redo(s) for s in j.segments()))]
    segments = time_segments(todo, opts, redo)
    total = sum(j.stop - j.start for _, j in jobs)
    planned = sum(s.n_frames * len(s.parts) for s in segments)
    if progress is not None and total > planned:
        progress(total - planned)
    stats = render_segments(scenario, opts, segments, reals, first, progress)
    for _, job in todo:
        writer.assemble_job(job)
        record.update({_rel(opts, p): job.digest for p in job.outputs})
    if todo:
        resume.write_record(opts.out, clip_id, record)
    outputs = [str(p) for k, j in jobs if k == "camera" for p in j.outputs]
    from avsim.render.run import labels as labels_run

    if opts.labels and (todo or not labels_run.labels_done(opts, clip_id)):
        labels_run.merge_parts(scenario, opts, clip_id, [s for k, j in jobs if k == "camera" for s in j.segments()], first, stop)
    if opts.labels:
        outputs.append(str(labels_run_folder(opts.out, clip_id)))
    outputs += [str(p) for k, j in jobs if k != "camera" for p in j.outputs]
    written = [str(p) for _, j in todo for p in j.outputs]
    return _finish(opts, clip_id, cameras, stop - first, stats, time.perf_counter() - t0, outputs, written)


def _finish(opts: RenderOptions, clip_id: str, cameras: tuple[str, ...], n_frames: int, stats: StageTimes,
            seconds: float, outputs: list[str], written: list[str]) -> RenderSummary:  # fmt: skip
    """The run's summary, merged with the clip's earlier runs into `render_summary.json`."""
    summary = RenderSummary(
        clip_id, list(cameras), n_frames, stats.camera_frames, len(cameras) * n_frames - stats.camera_frames, seconds,
        outputs, stats.mosaic_frames, stats.overlay_frames, stats.render_cpu_s, stats.encode_cpu_s, stats.composite_cpu_s,
        round(stats.peak_estimate_mib, 1),
    )  # fmt: skip
    resume.write_summary(opts.out, clip_id, resume.merged_summary(opts.out, clip_id, summary.to_json(), written))
    return summary


def labels_run_folder(out: Path, clip_id: str) -> Path:
    """`OUT/<clip>/labels` (see `avsim.render.run.labels`).

    Args:
        out: the render output folder.
        clip_id: the clip id.

    Returns:
        The labels folder.
    """
    return Path(out) / clip_id / "labels"


def _labels_missing(opts: RenderOptions, clip_id: str) -> Callable[[writer.Segment], bool]:
    """Whether a segment must be (re-)rendered for its labels: asked for, not yet merged, part missing."""
    from avsim.render.run.labels import labels_done, part_path

    if not opts.labels or (not opts.overwrite and labels_done(opts, clip_id)):
        return lambda s: False

    return lambda s: opts.overwrite or not part_path(opts.out, clip_id, s).is_file()
