"""A render request as typed values: the options asked for, and the plan they resolve to.

`RenderOptions` is what `avsim render` / `avsim labels` / `avsim run render` can be asked (names
as enums, the frame selection as a `FrameRange`), validated when it is made. `RenderPlan.resolve`
turns options and a scenario into what every consumer needs, once: the rig and cameras, the
frame range, the clip id and the output streams. The render pool, the labels pass, the overlay
plan, the progress bar and the closed-loop sensors all read the same plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.names import safe_name  # re-exported: the clip id of a scenario id
from avsim.core.rig import NAMED_RIGS, CameraRig, named_rig
from avsim.core.typing import StrEnum
from avsim.render import style
from avsim.render.geometry.sizes import camera_sizes
from avsim.render.labels.merge import LABEL_FILES, LabelFiles
from avsim.render.labels.records import IMAGE_FORMATS

if TYPE_CHECKING:
    from avsim.scenario import Scenario

DEFAULT_MAX_MEMORY_MIB = 1000  # `avsim render --max-memory-mib`: the budget of one render process (0: none; run/memory.py)
MAX_SIDE_PX = 8192  # a frame side above 8K is no camera's; bounds memory (a 100000x100000 frame is 149 GiB)
MAX_FPS = 1000.0  # timestamps are built per frame: 1e9 fps would be 2e10 of them for 20 s
SCENARIO_RIG = "scenario"  # `--rig scenario`: the scenario's own rig


class Backend(StrEnum):
    """The rasteriser (`--backend`)."""

    NUMBA = "numba"  # CPU kernels, compiled and cached on disk
    TORCH = "torch"  # batched, on a GPU when present


class Layout(StrEnum):
    """Where camera videos go (`--layout`; paths in `avsim.render.run.writer.camera_video_paths`)."""

    DEFAULT = "default"  # OUT/<clip>/<clip>.<camera>.mp4
    POSTTRAIN = "posttrain"  # OUT/control_input_hdmap_bbox/ftheta_<camera>/<clip>.mp4
    BOTH = "both"  # both of the above
    MULTIVIEW = "multiview"  # OUT/<clip>/world_scenario_videos/ws_<view>.mp4 (cosmos-transfer2.5's multiview example)
    OMNIDREAMS = "omnidreams"  # OUT/hdmap/<camera>/<clip>.mp4 (OmniDreams' local multiview dataset)


class Preset(StrEnum):
    """libx264 speed presets (`--preset`; crf 18 always)."""

    ULTRAFAST = "ultrafast"
    SUPERFAST = "superfast"
    VERYFAST = "veryfast"
    FASTER = "faster"
    FAST = "fast"
    MEDIUM = "medium"
    SLOW = "slow"
    SLOWER = "slower"
    VERYSLOW = "veryslow"


DEFAULT_PRESET = Preset.SUPERFAST  # ~30 % less encode time than veryfast at crf 18


class StreamKind(StrEnum):
    """What an output stream shows."""

    CAMERA = "camera"  # one camera's control video
    MOSAIC = "mosaic"  # every camera tiled, labelled
    OVERLAY = "overlay"  # one camera's control frames blended on its real frames


@dataclass(frozen=True)
class Stream:
    """One output stream of a render: its kind and camera ("" for the mosaic)."""

    kind: StreamKind
    camera: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", StreamKind(self.kind))
        if (self.kind is StreamKind.MOSAIC) != (self.camera == ""):
            raise AvsimValueError(f"stream: a {self.kind} stream {'has no' if self.kind is StreamKind.MOSAIC else 'needs a'} camera, got {self.camera!r}")

    @property
    def name(self) -> str:
        """The stream's name in file names and records: the camera, "mosaic" or "<camera>.overlay"."""
        if self.kind is StreamKind.MOSAIC:
            return "mosaic"
        return self.camera if self.kind is StreamKind.CAMERA else f"{self.camera}.overlay"

    @property
    def renders(self) -> str | None:
        """The camera whose frames this stream needs (None: the mosaic needs every camera)."""
        return None if self.kind is StreamKind.MOSAIC else self.camera


class FrameSelectionError(ValueError):
    """The frame selection (`frames` / `start_s` / `end_s`) is malformed or selects nothing.

    The command line reports it as a usage error of `--frames` / `--start` / `--end`.
    """


@dataclass(frozen=True)
class FrameRange:
    """`--frames`: frames [start, stop) of the clip; `stop` None runs to the clip's end."""

    start: int = 0
    stop: int | None = None

    @classmethod
    def parse(cls, text: str) -> FrameRange:
        """`"N"` (the first N frames) or `"A:B"` (frames A..B-1; either side may be empty).

        Args:
            text: the selection as written on the command line.

        Returns:
            The range; FrameSelectionError when `text` is neither form.
        """
        try:
            if ":" in text:
                a, b = text.split(":", 1)
                return cls(int(a or 0), int(b) if b else None)
            return cls(0, int(text))
        except ValueError:
            raise FrameSelectionError(f"--frames: expected N or A:B, got {text!r}") from None

    def __str__(self) -> str:
        return f"{self.start}:{'' if self.stop is None else self.stop}"


def select_frames(n_frames: int, fps: float, start_s: float | None, end_s: float | None, frames: FrameRange | None) -> tuple[int, int]:
    """The frames to render, from a time window or a frame range.

    Args:
        n_frames: frames of the clip at `fps`.
        fps: render rate.
        start_s: first time, seconds from the clip start (or None).
        end_s: last time, seconds from the clip start, inclusive (or None).
        frames: a frame range, or None; not with start_s/end_s.

    Returns:
        (first, stop): the half-open frame index range; FrameSelectionError when it is empty or malformed.
    """
    if frames is not None and (start_s is not None or end_s is not None):
        raise FrameSelectionError("use either --frames or --start/--end, not both")
    first, stop = (frames.start, n_frames if frames.stop is None else frames.stop) if frames is not None else (0, n_frames)
    if start_s is not None:
        first = math.ceil(start_s * fps - 1e-9)
    if end_s is not None:
        stop = math.floor(end_s * fps + 1e-9) + 1
    first, stop = max(first, 0), min(stop, n_frames)
    if stop <= first:
        raise FrameSelectionError(f"no frames selected (the clip has {n_frames} frames at {fps:g} fps)")
    return first, stop


def rig_choices() -> tuple[str, ...]:
    """What `--rig` accepts: "scenario" (the scenario's own rig) or a named rig of `avsim.core.rig.NAMED_RIGS`."""
    return (SCENARIO_RIG, *NAMED_RIGS)


@dataclass(frozen=True)
class RenderOptions:
    """Everything `avsim render` can be asked (see the command's help), checked when made.

    Enum fields also take their string values (`layout="posttrain"`), and `frames` the
    command-line text (`"10"`, `"5:20"`); both are stored as the typed values.
    """

    out: Path
    cameras: tuple[str, ...] | None = None
    start_s: float | None = None
    end_s: float | None = None
    frames: FrameRange | None = None
    fps: float = style.DEFAULT_FPS
    width_px: int = style.DEFAULT_WIDTH_PX
    height_px: int = style.DEFAULT_HEIGHT_PX
    exact_size: bool = True  # every camera at width_px x height_px; False: each at its own aspect, height_px high (the CLI default)
    chunk_frames: int = 0
    workers: int = 1
    overlay: Path | None = None
    mosaic: bool = False
    png: bool = False
    layout: Layout = Layout.DEFAULT
    rig: str = SCENARIO_RIG  # "scenario" or a name of NAMED_RIGS (`rig_choices()`)
    backend: Backend = Backend.NUMBA
    overwrite: bool = False
    preset: Preset = DEFAULT_PRESET
    labels: bool = False  # also write labels (run/labels.py): same pass, numba id buffer
    label_files: LabelFiles = "compact"  # compact parquet tables, the standard files, or both (labels/merge.py)
    label_images: str | None = None  # "jpg" / "png": also keep every labelled frame as an image file under labels/images/
    antialias: bool = True  # 4x MSAA on edge pixels (raster/aa.py); False (`--aa off`): the exact single-sample frames
    overlay_offset_s: float = 0.0  # render time t shows real time t + offset (run/real_frames.py)
    overlay_fps: float | None = None  # rate of an image folder of real frames (None: times from the names)
    max_memory_mib: int = DEFAULT_MAX_MEMORY_MIB  # budget of one render process (run/memory.py; 0: none); bytes unchanged
    wait: bool = False  # `--wait`: wait for another process writing OUT/<clip> (else refuse at once; avsim.core.locks)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "out", Path(self.out))
        for name, kind in (("layout", Layout), ("backend", Backend), ("preset", Preset)):
            value = getattr(self, name)
            if value not in kind.choices():
                raise AvsimValueError(f"{name}: expected one of {', '.join(kind.choices())}, got {value!r}")
            set_(self, name, kind(value))
        if isinstance(self.frames, str):
            set_(self, "frames", FrameRange.parse(self.frames))
        if self.rig not in rig_choices():
            raise AvsimValueError(f"rig: expected one of {', '.join(rig_choices())}, got {self.rig!r}")
        if self.cameras is not None:
            set_(self, "cameras", tuple(self.cameras))
        if self.label_files not in LABEL_FILES:
            raise AvsimValueError(f"label_files: expected one of {', '.join(LABEL_FILES)}, got {self.label_files!r}")
        if self.label_images is not None and self.label_images not in IMAGE_FORMATS:
            raise AvsimValueError(f"images: expected one of {', '.join(IMAGE_FORMATS)}, got {self.label_images!r}")
        self._check_numbers()

    def _check_numbers(self) -> None:
        if not (math.isfinite(self.fps) and 0 < self.fps <= MAX_FPS):
            raise AvsimValueError(f"fps: must be > 0 and at most {MAX_FPS:g}, got {self.fps}")
        if not (0 < self.width_px <= MAX_SIDE_PX and 0 < self.height_px <= MAX_SIDE_PX) or self.width_px % 2 or self.height_px % 2:
            raise AvsimValueError(f"size: width and height must be positive, even and at most {MAX_SIDE_PX}, got {self.width_px}x{self.height_px}")
        for name, low in (("workers", 1), ("chunk_frames", 0), ("max_memory_mib", 0)):
            if getattr(self, name) < low:
                raise AvsimValueError(f"{name}: must be >= {low}, got {getattr(self, name)}")
        if self.overlay_fps is not None and not (math.isfinite(self.overlay_fps) and self.overlay_fps > 0):
            raise AvsimValueError(f"overlay_fps: must be > 0, got {self.overlay_fps}")

    @property
    def size_px(self) -> tuple[int, int]:
        """(width, height) asked for (`exact_size`: every camera's; else the height of each, a 16:9 camera's width)."""
        return self.width_px, self.height_px


def resolve_rig(scenario: Scenario, name: str) -> CameraRig:
    """The rig `--rig name` asks for.

    Args:
        scenario: the scenario being rendered.
        name: "scenario" (its own rig) or a name of `avsim.core.rig.NAMED_RIGS`.

    Returns:
        The camera rig to render through.
    """
    return scenario.rig if name == SCENARIO_RIG else named_rig(name)


def check_cameras(cameras: tuple[str, ...], rig: CameraRig) -> None:
    """Every asked-for camera must be in the rig (AvsimInputError naming `--cameras` otherwise).

    Args:
        cameras: camera names.
        rig: the rig rendered through.
    """
    for cam in cameras:
        if cam not in rig.names:
            raise AvsimInputError("--cameras", cam, f"no such camera; the rig has {', '.join(rig.names)}")


@dataclass(frozen=True)
class RenderPlan:
    """A render request resolved against its scenario: what is drawn, when, and into which streams.

    Attributes:
        clip_id: the file-safe clip name (`safe_name` of the scenario id).
        rig: the rig rendered through (the scenario's own or a named one).
        cameras: the cameras drawn, in rig order as asked.
        first: first frame index at `fps`.
        stop: one past the last frame index.
        fps: render rate.
        sizes_px: (width, height) of each camera's frames, in `cameras` order (`geometry.sizes.camera_sizes`).
        streams: the output streams: each camera's video, then the mosaic, then each overlay.
    """

    clip_id: str
    rig: CameraRig
    cameras: tuple[str, ...]
    first: int
    stop: int
    fps: float
    sizes_px: tuple[tuple[int, int], ...]
    streams: tuple[Stream, ...] = field(default=())

    def __post_init__(self) -> None:
        if not 0 <= self.first < self.stop:
            raise AvsimValueError(f"frames: a plan needs frames, got [{self.first}, {self.stop})")
        if not self.cameras:
            raise AvsimValueError("cameras: a plan needs at least one camera")
        if len(self.sizes_px) != len(self.cameras):
            raise AvsimValueError(f"sizes_px: one size per camera expected, got {len(self.sizes_px)} for {len(self.cameras)}")

    @classmethod
    def resolve(cls, scenario: Scenario, opts: RenderOptions) -> RenderPlan:
        """Resolve `opts` against `scenario` (unknown cameras and empty selections fail here, in one line).

        Args:
            scenario: the scenario to render.
            opts: the request.

        Returns:
            The plan.
        """
        rig = resolve_rig(scenario, opts.rig)
        cameras = tuple(opts.cameras) if opts.cameras else rig.names
        check_cameras(cameras, rig)
        first, stop = select_frames(len(scenario.frame_times(opts.fps)), opts.fps, opts.start_s, opts.end_s, opts.frames)
        streams = [Stream(StreamKind.CAMERA, c) for c in cameras]
        streams += [Stream(StreamKind.MOSAIC)] if opts.mosaic else []
        streams += [Stream(StreamKind.OVERLAY, c) for c in cameras] if opts.overlay is not None else []
        sizes = camera_sizes(rig.subset(list(cameras)), opts.width_px, opts.height_px, opts.exact_size)
        return cls(safe_name(scenario.scenario_id), rig, cameras, first, stop, opts.fps, sizes, tuple(streams))

    @property
    def n_frames(self) -> int:
        """Frames rendered per stream."""
        return self.stop - self.first

    @classmethod
    def for_sensors(cls, scenario: Scenario, cameras: tuple[str, ...] | None, size_px: tuple[int, int],
                    rig: str = SCENARIO_RIG, exact_size: bool = True, fps: float = style.DEFAULT_FPS) -> RenderPlan:  # fmt: skip
        """The plan of in-memory frames (closed-loop sensors): the same rig, camera and size resolution as a render,
        over the whole clip, with no output stream.

        Args:
            scenario: the scenario.
            cameras: camera names (None: every camera of the rig).
            size_px: (width, height) asked for.
            rig: "scenario" or a named rig.
            exact_size: every camera at exactly `size_px` (else each at its own aspect, `size_px[1]` high).
            fps: frame rate of the clip's frames.

        Returns:
            The plan (`streams` empty).
        """
        resolved = resolve_rig(scenario, rig)
        names = tuple(cameras) if cameras else resolved.names
        check_cameras(names, resolved)
        sizes = camera_sizes(resolved.subset(list(names)), size_px[0], size_px[1], exact_size)
        n_frames = max(len(scenario.frame_times(fps)), 1)
        return cls(safe_name(scenario.scenario_id), resolved, names, 0, n_frames, fps, sizes, ())

    def size_of(self, camera: str) -> tuple[int, int]:
        """(width, height) of one camera's frames."""
        return self.sizes_px[self.cameras.index(camera)]

    @property
    def largest_px(self) -> tuple[int, int]:
        """The largest camera frame (what a memory estimate per camera assumes)."""
        return max(self.sizes_px, key=lambda wh: wh[0] * wh[1])

    @property
    def progress_units(self) -> int:
        """What a progress bar counts to: one unit per frame of every output stream."""
        return self.n_frames * len(self.streams)

    def with_cameras(self, opts: RenderOptions) -> RenderOptions:
        """`opts` with its cameras resolved to this plan's (what the workers are given)."""
        return replace(opts, cameras=self.cameras)
