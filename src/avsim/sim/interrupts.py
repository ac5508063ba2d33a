"""SIGINT and SIGTERM during an episode: the episode stops there and its rollout so far is kept.

`stop_on_signals()` makes SIGINT (Ctrl-C) and SIGTERM raise `Interrupted` in the main thread for
the length of a `with` block; anywhere else (another thread, a job's worker, which must not keep a
half-run item) nothing changes. `avsim sim` runs its episode in one and, when a signal arrives,
scores and writes the steps driven as it does for a policy that fails (status `interrupted`, the
reason naming the signal and the step), then exits with 128 + the signal's number. The signal
stops the step it arrives in at once, a chunk of generated video being made included; that step
is not kept. A signal during scoring and writing aborts the command (nothing is written: the
output is atomic), and one before the first step leaves nothing to keep.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import numpy as np

from avsim.sim.episode import EpisodeResult
from avsim.sim.stepper import Simulator

__all__ = ["INTERRUPTED", "Interrupted", "interrupted_result", "stop_on_signals"]

INTERRUPTED = "interrupted"  # the episode's status
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (a BaseException: a policy's or a source's `except Exception` lets it through)."""

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        self.name = signal.Signals(self.signum).name
        super().__init__(f"interrupted by {self.name}")

    @property
    def exit_code(self) -> int:
        """The shell's code for a process ended by this signal (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


@contextmanager
def stop_on_signals(enabled: bool = True) -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` inside the block (main thread only; their handlers are restored after)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = {s: signal.signal(s, interrupt) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def interrupted_result(sim: Simulator, exc: Interrupted) -> EpisodeResult:
    """How an interrupted episode ended: the steps fully recorded (the interrupted one is not); re-raises `exc`
    when none was (nothing to keep)."""
    recorder = sim.recorder
    if recorder is None or recorder.n_recorded < 1:
        raise exc
    steps = recorder.n_recorded - 1
    times = recorder.policy_s[: steps + 1]
    times = times[np.isfinite(times)]
    total, worst = (float(times.sum()), float(times.max())) if len(times) else (0.0, 0.0)
    return EpisodeResult(INTERRUPTED, f"{exc} at step {steps}", steps, total, worst)
