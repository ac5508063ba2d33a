"""Per-chunk progress of a generated closed-loop episode (`avsim sim --observe generated`).

The episode's phase names the chunk and the model's step within it ("chunk 2/5 (steps 5-8):
sampling 3/4"), and every finished chunk gives one line ("sim: chunk 2/5 (steps 5-8) generated in
41.2 s (control 0.1 s, model 40.3 s, drift 0.8 s)"): a terminal shows it above the progress bar,
a log file gets it as it happens (a bar alone reaches a file only when it stops).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from avsim.sim.generated.generator import ChunkGenerator
from avsim.sim.generated.options import GenerationOptions
from avsim.sim.generated.source import ChunkRecord, GeneratedSource

__all__ = ["ChunkProgress", "generated_source"]


def generated_source(options: GenerationOptions, cameras: tuple[str, ...] | None, backend: str, video_dir: Path | None,
                     on_phase: Callable[[str], None] | None, line: Callable[[str], None]) -> GeneratedSource:  # fmt: skip
    """An episode's generated frames with their progress reported (`ChunkProgress`; none without `on_phase`).

    Args:
        options: the model.
        cameras: the views (None: the model's).
        backend: the control frames' rasteriser.
        video_dir: where the frames shown are streamed (None: nowhere).
        on_phase: the progress bar's description, or None.
        line: writes one line (the random-weights banner, the finished chunks).

    Returns:
        The observation source.
    """
    if on_phase is None:
        return GeneratedSource(ChunkGenerator(options, cameras, line), backend, video_dir)
    report = ChunkProgress(on_phase, line)
    return GeneratedSource(ChunkGenerator(options, cameras, line, report.step), backend, video_dir, on_chunk=report.start, on_chunk_done=report.done)


class ChunkProgress:
    """The callbacks `GeneratedSource` (`start`, `done`) and `ChunkGenerator` (`step`) report to.

    Args:
        on_phase: shows the current phase (the progress bar's description).
        line: writes one line (stderr).
    """

    def __init__(self, on_phase: Callable[[str], None], line: Callable[[str], None]) -> None:
        self.on_phase, self.line, self.label = on_phase, line, ""

    def start(self, chunk: int, steps: range, n_chunks: int) -> None:
        """A chunk is about to be made."""
        self.label = f"chunk {chunk + 1}/{n_chunks} (steps {steps.start}-{steps.stop - 1})"
        self.on_phase(self.label)

    def step(self, name: str, done: int, total: int) -> None:
        """The model's progress (loading before the first chunk; encoding, sampling, decoding within one)."""
        self.on_phase(f"{self.label}: {name} {done}/{total}" if self.label else f"{name} {done}/{total}")

    def done(self, record: ChunkRecord, n_chunks: int) -> None:
        """A chunk is made."""
        total = record.render_s + record.generation_s + record.drift_s
        self.line(f"sim: {self.label} generated in {total:.1f} s (control {record.render_s:.1f} s, model {record.generation_s:.1f} s, "
                  f"drift {record.drift_s:.1f} s)")  # fmt: skip
