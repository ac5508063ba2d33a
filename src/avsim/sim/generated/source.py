"""Generated camera frames in the closed loop: multi-view video made chunk by chunk from the policy's own driving.

`GeneratedSource` is an `avsim.sim.observation.ObservationSource`. At the first step of every
chunk (`avsim.sim.chunks.ChunkSchedule`) it

1. forecasts the chunk's steps from the current, policy-driven state (`forecast.ChunkForecaster`:
   the ego along its plan, the others at constant velocity, the lights on their schedule);
2. renders their world-scenario control frames in memory at the model's size
   (`avsim.sim.render_source.RenderedControlSource`);
3. generates the chunk (`generator.ChunkGenerator`: the Transfer pipeline, conditioned on the last
   `overlap` generated frames of the previous chunk with their control frames);
4. measures its drift figures (`drift.chunk_drift`: RNDS inputs, CSE) and times every part;

and at every step hands the policy the step's generated frame of every camera (the forecast
error of the step is folded into the chunk's figures). The frames the episode shows are streamed
to one mp4 per camera when a folder is given. Every chunk is generated with its own seed drawn
from the episode's seed: same inputs, same frames (on one device).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.rig import CameraRig
from avsim.core.typing import NDArrayByte, NDArrayFloat
from avsim.core.video import MP4Writer
from avsim.sim.chunks import ChunkSchedule
from avsim.sim.generated.drift import ChunkDrift, DriftConfig, chunk_drift, rnds_values
from avsim.sim.generated.forecast import ChunkForecaster
from avsim.sim.generated.generator import ChunkGenerator
from avsim.sim.observation import EpisodeInfo, FrameState
from avsim.sim.render_source import RenderedControlSource
from avsim.sim.vehicle import StateIndex

__all__ = ["ChunkRecord", "GeneratedSource"]


@dataclass
class ChunkRecord:
    """One generated chunk: its index, the steps of its new frames, the seed, the forecast ego poses
    (K, 3) its frames were rendered at, its drift figures and where its time went (s)."""

    index: int
    steps: range
    seed: int
    forecast: NDArrayFloat
    drift: ChunkDrift
    render_s: float
    generation_s: float
    drift_s: float
    steps_shown: int = 0

    def as_dict(self, rnds: float | None) -> dict[str, Any]:
        """The deterministic record (sim_metrics.json)."""
        return {"index": self.index, "first_step": self.steps.start, "last_step": self.steps.stop - 1, "new_frames": len(self.steps),
                "steps_shown": self.steps_shown, "seed": self.seed, "rnds": rnds, **self.drift.as_dict()}  # fmt: skip

    def timing(self) -> dict[str, Any]:
        """Wall times (timing.json)."""
        return {"index": self.index, "render_s": round(self.render_s, 4), "generation_s": round(self.generation_s, 4),
                "drift_s": round(self.drift_s, 4)}  # fmt: skip


class GeneratedSource:
    """Generated frames of `generator.cameras` at every step (see the module docstring).

    Args:
        generator: the model.
        backend: the control frames' rasteriser (numba or torch).
        video_dir: folder for `<camera>.mp4` of the frames shown (None: not written).
        drift: the drift figures' settings.
        on_chunk: called with (chunk index, its steps, the episode's chunks) before each chunk is made (progress).
        on_chunk_done: called with (the chunk's record, the episode's chunks) once it is made (progress).
    """

    def __init__(self, generator: ChunkGenerator, backend: str = "numba", video_dir: Path | None = None,
                 drift: DriftConfig | None = None, on_chunk: Callable[[int, range, int], None] | None = None,
                 on_chunk_done: Callable[[ChunkRecord, int], None] | None = None) -> None:  # fmt: skip
        self.generator = generator
        self.schedule = ChunkSchedule(generator.config.frames_per_chunk, generator.options.overlap)
        self.control = RenderedControlSource(generator.cameras, generator.size, backend)
        self.camera_names: tuple[str, ...] = generator.cameras
        self.video_dir, self.drift_config, self.on_chunk, self.on_chunk_done = video_dir, drift or DriftConfig(), on_chunk, on_chunk_done
        self.n_chunks = 0
        self.chunks: list[ChunkRecord] = []
        self._frames: dict[int, dict[str, NDArrayByte]] = {}
        self._tail: tuple[dict[str, NDArrayByte], dict[str, NDArrayByte]] | None = None  # last overlap frames: generated, control
        self._writers: dict[str, MP4Writer] = {}
        self._seed = 0

    @property
    def rig(self) -> CameraRig:
        """The generated cameras at the model's size (after `reset`)."""
        return self.control.rig

    def reset(self, episode: EpisodeInfo) -> None:
        fps = self.generator.fps
        if abs(episode.dt_s * fps - 1.0) > 1e-9:
            raise AvsimInputError("--rate", "rate", f"with --observe generated the sim steps at the model's frame rate ({fps:g} fps), "
                                  f"got {1 / episode.dt_s:g} Hz")  # fmt: skip
        self.control.reset(episode)
        self.generator.load()
        self._forecaster = ChunkForecaster(episode, self.schedule.frames)
        self.chunks, self._frames, self._tail, self._seed = [], {}, None, int(episode.seed)
        self.n_chunks = self.schedule.chunk_of(len(episode.step_times_ns) - 1) + 1  # the episode shows steps 0..n
        self._close_writers()
        if self.video_dir is not None:
            self.video_dir.mkdir(parents=True, exist_ok=True)
            w, h = self.generator.size
            for cam in self.camera_names:
                self._writers[cam] = MP4Writer(self.video_dir / f"{cam}.mp4", w, h, fps).__enter__()

    def frames(self, state: FrameState) -> dict[str, NDArrayByte]:
        """The step's generated frame of every camera (a new chunk is made at its first step)."""
        if self.schedule.is_start(state.step) or not self.chunks:
            self._make_chunk(state)
        record = self.chunks[-1]
        st = state.ego_state
        record.drift.observe(record.forecast[state.step - record.steps.start], np.array([st[StateIndex.X], st[StateIndex.Y], st[StateIndex.HEADING]]))
        record.steps_shown += 1
        images = self._frames.pop(state.step)
        for cam, writer in self._writers.items():
            writer.write(images[cam])
        return images

    def _make_chunk(self, state: FrameState) -> None:
        c = self.schedule.chunk_of(state.step)
        steps = self.schedule.steps(c)
        if self.on_chunk is not None:
            self.on_chunk(c, steps, self.n_chunks)
        t0 = time.perf_counter()
        states = self._forecaster.states(state, len(steps))
        rendered = [self.control.frames(s) for s in states]
        control = {cam: np.stack([r[cam] for r in rendered]) for cam in self.camera_names}
        t1 = time.perf_counter()
        tail_gen, tail_ctrl = self._tail if self._tail is not None and c > 0 else ({}, {})
        full_control = [np.concatenate([tail_ctrl[cam], control[cam]]) if tail_ctrl else control[cam] for cam in self.camera_names]
        conditioning = [tail_gen[cam] for cam in self.camera_names] if tail_gen else None
        seed = int(np.random.SeedSequence([self._seed, c]).generate_state(1)[0])
        videos = self.generator.generate(full_control, conditioning, seed)
        t2 = time.perf_counter()
        skip = len(conditioning[0]) if conditioning else 0
        new = {cam: v[skip:] for cam, v in zip(self.camera_names, videos)}
        for i, step in enumerate(steps):
            self._frames[step] = {cam: new[cam][i] for cam in self.camera_names}
        o = self.schedule.overlap
        if o:
            self._tail = ({cam: v[-o:] for cam, v in zip(self.camera_names, videos)},
                          {cam: fc[-o:] for cam, fc in zip(self.camera_names, full_control)})  # fmt: skip
        drift = chunk_drift(new, control, self.control.rig, self.drift_config)
        t3 = time.perf_counter()
        forecast = np.array([[s.ego_state[StateIndex.X], s.ego_state[StateIndex.Y], s.ego_state[StateIndex.HEADING]] for s in states])
        self.chunks.append(ChunkRecord(c, steps, seed, forecast, drift, t1 - t0, t2 - t1, t3 - t2))
        if self.on_chunk_done is not None:
            self.on_chunk_done(self.chunks[-1], self.n_chunks)

    def summary(self) -> dict[str, Any]:
        """The generation's settings and per-chunk figures (sim_metrics.json's `generation`)."""
        rnds = rnds_values([r.drift for r in self.chunks])
        cfg = self.generator.config
        return {"config": cfg.name, "views": list(self.camera_names), "size_px": list(self.generator.size), "fps": self.generator.fps,
                "chunk_frames": self.schedule.frames, "overlap": self.schedule.overlap, "output_is_noise": self.generator.output_is_noise,
                "rnds_reference": "control frames", "rnds_scorer": getattr(self.drift_config.scorer, "__name__", "scorer"),
                "chunks": [r.as_dict(q) for r, q in zip(self.chunks, rnds)]}  # fmt: skip

    def timing(self) -> list[dict[str, Any]]:
        """Per chunk: render, generation and drift wall times (timing.json)."""
        return [r.timing() for r in self.chunks]

    def _close_writers(self) -> None:
        """Finish every video (one with no frame, an episode that failed at once, is discarded)."""
        writers, self._writers = self._writers, {}
        for writer in writers.values():
            if writer.frames_written:
                writer.__exit__(None, None, None)
            else:
                writer.__exit__(RuntimeError, RuntimeError("no frame written"), None)

    def close(self) -> None:
        self.control.close()
        self._close_writers()
