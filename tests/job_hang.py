"""The test hang of dataset jobs (`avsim.jobs.items.HANG_ENV`): wait until a task claims its
`<item>.hang` file; the test then kills the worker that claimed it (its pid).

The module-scoped Ray instance whose workers see a hang folder is the `ray_hang_dir` fixture in
conftest.py.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path

import pytest

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (pip install 'avsim[ray]')")


def claimed_pid(pid_file: Path, running: Callable[[], bool], timeout_s: float,
                why: Callable[[], str] = lambda: "the task never reached the test hang") -> int:  # fmt: skip
    """Wait for `pid_file`, written by the task that claimed the hang (its outputs half written).

    Args:
        pid_file: `<hang folder>/<item>.pid`.
        running: whether the job is still running (a job that ended never reaches the hang).
        timeout_s: how long to wait for the claim.
        why: the failure message when the job ended or the wait timed out.

    Returns:
        The pid of the worker that claimed the hang (it sleeps until killed).
    """
    deadline = time.monotonic() + timeout_s
    while not (pid_file.is_file() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline and running(), why()
        time.sleep(0.1)
    return int(pid_file.read_text())
