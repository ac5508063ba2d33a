"""The units of a render's work, from an output down to what one worker writes at a time.

- `StreamJob`: one output stream (`plan.Stream`: a camera video, the mosaic, an overlay) over
  frames [start, stop) of one clip or chunk, written to its output files.
- `StreamSegment`: `SEGMENT_FRAMES` frames of one stream, encoded on their own into a part file
  (the unit of resume; a job's segments are remuxed into its outputs).
- `TimeSegment`: frames [start, stop) of one clip for every stream that still has a segment to
  write there (the unit a worker renders: each needed camera's frame once, fed to every encoder).

Segment boundaries are fixed (`SEGMENT_FRAMES`), independent of the number of workers, so the
bytes are too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.video import mp4_frame_count
from avsim.render.run.plan import Stream, StreamKind

SEGMENT_FRAMES = 150  # encoding unit: a stream's clip is encoded in segments, then remuxed


def _pngs_done(png_dir: Path | None, start: int, stop: int) -> bool:
    """True when no PNGs are asked for (png_dir None) or frames [start, stop) all have theirs."""
    return png_dir is None or all((png_dir / f"{f:06d}.png").is_file() for f in range(start, stop))


def video_complete(path: Path, frames: int) -> bool:
    """Whether `path` is an mp4 whose header lists `frames` frames (what resume trusts).

    A file cut short (a full disk, a copy that stopped) or one of another clip length is not
    complete: the rerun writes it again instead of joining or keeping it.

    Args:
        path: the part or output file.
        frames: the frames it must hold.

    Returns:
        True when it opens and lists exactly `frames` frames.
    """
    if not path.is_file():
        return False
    try:
        return mp4_frame_count(path) == frames
    except AvsimInputError:
        return False


@dataclass(frozen=True)
class StreamSegment:
    """Frames [start, stop) of one stream, encoded on their own into `part` (an mp4)."""

    stream: Stream
    start: int
    stop: int
    part: Path
    png_dir: Path | None = None  # camera streams with `--png`: where each frame's PNG goes

    def done(self) -> bool:
        """Whether the segment is finished (a rerun skips it).

        Returns:
            True when the part is a complete video of the segment's frames and every asked-for PNG exists.
        """
        return video_complete(self.part, self.stop - self.start) and _pngs_done(self.png_dir, self.start, self.stop)


@dataclass(frozen=True)
class StreamJob:
    """One stream over frames [start, stop) written under `clip_id` (one file per output).

    The frames are encoded in fixed segments of `SEGMENT_FRAMES` that are remuxed into the
    outputs; finished segments are kept until then, so an interrupted run resumes mid-clip.
    """

    stream: Stream
    clip_id: str
    start: int
    stop: int
    outputs: tuple[Path, ...]
    png_dir: Path | None = None
    digest: str = ""  # `avsim.core.digest.input_digest` of what the outputs are made from ("" : none)

    def done(self) -> bool:
        """Whether the job's files are all there (the runner also compares the recorded digest).

        Returns:
            True when every output is a complete video of the job's frames and every asked-for PNG exists.
        """
        frames = self.stop - self.start
        return all(video_complete(p, frames) for p in self.outputs) and _pngs_done(self.png_dir, self.start, self.stop)

    @property
    def _part_tag(self) -> str:
        """Parts carry a digest prefix: a rerun with other inputs never joins a stale part."""
        return f".{self.digest[:12]}" if self.digest else ""

    @property
    def parts_dir(self) -> Path:
        """Folder of the job's segment files (beside its first output)."""
        return self.outputs[0].parent / ".parts"

    def part_glob(self) -> str:
        """A glob matching every part file of this stream and clip, whatever its digest tag."""
        return f"{self.clip_id}.{self.stream.name}.[0-9][0-9][0-9][0-9][0-9][0-9].*.mp4"

    def segments(self) -> list[StreamSegment]:
        """The job's encoding units.

        Returns:
            Segments of SEGMENT_FRAMES frames (the last may be shorter), in order.
        """
        name = self.stream.name
        return [
            StreamSegment(self.stream, a, min(a + SEGMENT_FRAMES, self.stop),
                          self.parts_dir / f"{self.clip_id}.{name}.{a:06d}{self._part_tag}.mp4", self.png_dir)
            for a in range(self.start, self.stop, SEGMENT_FRAMES)
        ]  # fmt: skip


@dataclass(frozen=True)
class TimeSegment:
    """Frames [start, stop) of clip (or chunk) `clip_id`, for the stream segments in `parts`."""

    clip_id: str
    start: int
    stop: int
    parts: tuple[StreamSegment, ...]

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.stop or not self.parts:
            raise AvsimValueError(f"a time segment needs frames and parts, got [{self.start}, {self.stop}) with {len(self.parts)} parts")

    @property
    def n_frames(self) -> int:
        """Frames in the segment."""
        return self.stop - self.start

    def with_parts(self, parts: tuple[StreamSegment, ...]) -> TimeSegment:
        """The same frames with other parts (a split of this segment)."""
        return TimeSegment(self.clip_id, self.start, self.stop, parts)

    def count(self, kind: StreamKind) -> int:
        """Stream-frames of one kind this segment writes."""
        return self.n_frames * sum(p.stream.kind is kind for p in self.parts)

    def cameras(self, all_cameras: tuple[str, ...]) -> list[str]:
        """The cameras a worker must render (every camera when the mosaic is among the parts).

        Args:
            all_cameras: the render's cameras, in order.

        Returns:
            Camera names in `all_cameras` order.
        """
        wanted = {p.stream.renders for p in self.parts}
        if None in wanted:
            return list(all_cameras)
        return [c for c in all_cameras if c in wanted]
