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

import functools
import json
import math
import multiprocessing as mp
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.rig import NAMED_RIGS, CameraRig, named_rig
from avsim.render import style, writer

if TYPE_CHECKING:
    from avsim.render.frame import SceneRenderer
    from avsim.scenario import Scenario

RIG_CHOICES = ("scenario", *NAMED_RIGS)
# `avsim edit`'s manifest (edit/cli.py writes it; render sits below edit in the layering, so
# the two names are restated here rather than imported)
EDIT_MANIFEST_NAME = "manifest.json"
EDIT_MANIFEST_FORMAT = "avsim-edit-manifest"
VARIANTS_SUMMARY_FORMAT = "avsim-render-variants-summary"
X264_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")
PROGRESS_BATCH_FRAMES = 10  # a worker reports finished frames to the main process in batches this size

Progress = Callable[[int], None]
"""Called with a number of camera-frames that just finished (or were found finished)."""


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
    antialias: bool = True  # 4x MSAA on edge pixels (render/raster_aa.py); False (`--aa off`): the exact single-sample frames


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

    @property
    def camera_frames_per_s(self) -> float:
        """Rendered camera-frames per wall-clock second (0 for an instant run)."""
        return self.camera_frames_rendered / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """The summary as a JSON-ready dict (the fields plus `camera_frames_per_s`).

        Returns:
            The `render_summary.json` document of one clip.
        """
        return {**asdict(self), "camera_frames_per_s": round(self.camera_frames_per_s, 2)}


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
        summaries.append(run_render(scenario, opts, progress=progress))
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


# ---- execution -------------------------------------------------------------------------------------
class _CountQueue(Protocol):
    """The part of a (manager) queue the workers use to report finished frames."""

    def put(self, item: int) -> None: ...

    def get(self) -> int: ...

    def empty(self) -> bool: ...


class _Worker:
    """One process's renderer and options; `start` fills it (the pool initializer, or inline)."""

    def __init__(self) -> None:
        self.renderer: SceneRenderer | None = None
        self.opts: RenderOptions | None = None
        self.queue: _CountQueue | None = None

    def start(self, scenario: Scenario, opts: RenderOptions, queue: _CountQueue | None) -> None:
        """Build the renderer of `scenario` per `opts`; finished frames are reported on `queue`."""
        from avsim.render.frame import SceneRenderer

        self.renderer = SceneRenderer(
            scenario, rig=resolve_rig(scenario, opts.rig), cameras=opts.cameras, size=(opts.width_px, opts.height_px),
            fps=opts.fps, backend=opts.backend, antialias=opts.antialias,
        )  # fmt: skip
        self.opts = opts
        self.queue = queue

    def render_segment(self, segment: writer.Segment, on_frame: Callable[[], None] | None = None) -> int:
        """Render and encode one segment; returns its number of frames."""
        renderer, opts = self.renderer, self.opts
        assert renderer is not None and opts is not None, "start() first"
        cam_index = renderer.rig.index(segment.camera)
        frames: Iterator[Any] = (renderer.render_camera(f, cam_index) for f in range(segment.start, segment.stop))
        if opts.labels:
            from avsim.render import labels_run

            part = labels_run.part_path(opts.out, writer.safe_name(renderer.scenario.scenario_id), segment)
            frames = labels_run.labelled_frames(renderer, segment, part)
        return writer.write_segment(frames, segment, opts.width_px, opts.height_px, opts.fps, on_frame=on_frame, preset=opts.preset)

    def run_segment(self, segment: writer.Segment) -> int:
        """`render_segment`, reporting finished frames on the queue in batches."""
        queue = self.queue
        pending = [0]

        def tick() -> None:
            pending[0] += 1
            if queue is not None and pending[0] >= PROGRESS_BATCH_FRAMES:
                queue.put(pending[0])
                pending[0] = 0

        n = self.render_segment(segment, on_frame=tick)
        if queue is not None and pending[0]:
            queue.put(pending[0])
        return n


@functools.cache
def _process_worker() -> _Worker:
    """This worker process's `_Worker` (one per process: spawned pool processes each make their own)."""
    return _Worker()


def _init_pool_worker(scenario: Scenario, opts: RenderOptions, queue: _CountQueue) -> None:
    _process_worker().start(scenario, opts, queue)


def _run_pool_segment(segment: writer.Segment) -> int:
    return _process_worker().run_segment(segment)


def check_cameras(cameras: tuple[str, ...], rig: CameraRig) -> None:
    for cam in cameras:
        if cam not in rig.names:
            raise AvsimInputError("--cameras", cam, f"no such camera; the rig has {', '.join(rig.names)}")


def run_render(scenario: Scenario, opts: RenderOptions, progress: Progress | None = None) -> RenderSummary:
    """Render `scenario` per `opts` (resuming what exists unless `opts.overwrite`).

    Args:
        scenario: the scenario to render.
        opts: render options.
        progress: `progress(n)` is called as camera-frames finish (and once for those kept).

    Returns:
        The run summary, also written to `opts.out/<clip>/render_summary.json`.
    """
    t0 = time.perf_counter()
    rig = resolve_rig(scenario, opts.rig)
    cameras = tuple(opts.cameras) if opts.cameras else rig.names
    check_cameras(cameras, rig)
    n_total = len(scenario.frame_times(opts.fps))
    first, stop = select_frames(n_total, opts.fps, opts.start_s, opts.end_s, opts.frames)
    clip_id = writer.safe_name(scenario.scenario_id)
    jobs = plan_jobs(clip_id, cameras, first, stop, opts)
    redo = _labels_missing(opts, clip_id)
    for job in jobs:  # leftovers of a killed run (dead writers' temporaries, empty .parts)
        writer.sweep_job(job)
    todo = [j for j in jobs if opts.overwrite or not j.done() or any(redo(s) for s in j.segments())]
    segments = [s for j in todo for s in j.segments() if opts.overwrite or not s.done() or redo(s)]
    total = sum(j.stop - j.start for j in jobs)
    rendered_planned = sum(s.stop - s.start for s in segments)
    if progress is not None and total > rendered_planned:
        progress(total - rendered_planned)
    opts = RenderOptions(**{**asdict(opts), "cameras": cameras})
    rendered = _render_segments(scenario, opts, segments, progress)
    for job in todo:
        writer.assemble_job(job)
    outputs = [str(p) for j in jobs for p in j.outputs]
    if opts.labels and (todo or not (labels_run_folder(opts.out, clip_id) / "index.json").is_file()):
        from avsim.render import labels_run

        labels_run.merge_parts(scenario, opts, clip_id, [s for j in jobs for s in j.segments()], first, stop)
    if opts.labels:
        outputs.append(str(labels_run_folder(opts.out, clip_id)))
    if opts.mosaic:
        outputs += _write_mosaics(opts, jobs)
    if opts.overlay is not None:
        outputs += _write_overlays(opts, jobs)
    summary = RenderSummary(clip_id, list(cameras), stop - first, rendered, total - rendered, time.perf_counter() - t0, outputs)
    with atomic_output_path(opts.out / clip_id / "render_summary.json") as tmp:
        Path(tmp).write_text(json.dumps(summary.to_json(), indent=2) + "\n", encoding="utf-8")
    return summary


def labels_run_folder(out: Path, clip_id: str) -> Path:
    """`OUT/<clip>/labels` (see `avsim.render.labels_run`)."""
    return Path(out) / clip_id / "labels"


def _labels_missing(opts: RenderOptions, clip_id: str) -> Callable[[writer.Segment], bool]:
    """Whether a segment must be (re-)rendered for its labels: asked for, not yet merged, part missing."""
    if not opts.labels or (not opts.overwrite and (labels_run_folder(opts.out, clip_id) / "index.json").is_file()):
        return lambda s: False
    from avsim.render.labels_run import part_path

    return lambda s: opts.overwrite or not part_path(opts.out, clip_id, s).is_file()


def _render_segments(scenario: Scenario, opts: RenderOptions, segments: list[writer.Segment], progress: Progress | None) -> int:
    """Render `segments` in this process (one worker) or in a pool; returns the frames rendered."""
    if not segments:
        return 0
    if opts.workers > 1:
        return _run_pool(scenario, opts, segments, progress)
    worker = _Worker()
    worker.start(scenario, opts, None)
    on_frame = (lambda: progress(1)) if progress is not None else None
    return sum(worker.render_segment(segment, on_frame) for segment in segments)


def _run_pool(scenario: Scenario, opts: RenderOptions, segments: list[writer.Segment], progress: Progress | None) -> int:
    ctx = mp.get_context("spawn")  # no inherited state: safe with numba / torch / encoders
    manager = ctx.Manager()
    queue = manager.Queue()
    rendered = 0
    try:
        with ProcessPoolExecutor(opts.workers, mp_context=ctx, initializer=_init_pool_worker, initargs=(scenario, opts, queue)) as pool:
            # longest first, so the pool's greedy scheduling ends evenly
            ordered = sorted(segments, key=lambda s: -(s.stop - s.start))
            pending: set[Future[int]] = {pool.submit(_run_pool_segment, s) for s in ordered}
            while pending:
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for f in done:
                    rendered += f.result()
                _drain(queue, progress)
            _drain(queue, progress)
    finally:
        manager.shutdown()
    return rendered


def _drain(queue: _CountQueue, progress: Progress | None) -> None:
    while not queue.empty():
        n = queue.get()
        if progress is not None:
            progress(n)


def _write_mosaics(opts: RenderOptions, jobs: list[writer.CameraJob]) -> list[str]:
    out = []
    for clip_id in dict.fromkeys(j.clip_id for j in jobs):
        videos = {j.camera: j.outputs[0] for j in jobs if j.clip_id == clip_id}
        path = writer.mosaic_path(opts.out, clip_id)
        if opts.overwrite or not path.is_file():
            writer.write_mosaic(videos, path, opts.fps)
        out.append(str(path))
    return out


def _write_overlays(opts: RenderOptions, jobs: list[writer.CameraJob]) -> list[str]:
    assert opts.overlay is not None
    if not opts.overlay.is_dir():
        raise AvsimInputError(opts.overlay, "--overlay", "not a folder of real camera frames")
    out = []
    for job in jobs:
        path = writer.overlay_path(opts.out, job.clip_id, job.camera)
        if opts.overwrite or not path.is_file():
            real = writer.real_frames(opts.overlay, job.camera, job.clip_id)
            writer.write_overlay(job.outputs[0], real, path, opts.fps)
        out.append(str(path))
    return out
