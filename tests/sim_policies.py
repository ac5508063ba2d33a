"""Policies for the closed-loop tests, loadable as `avsim sim --policy sim_policies:NAME`."""

from __future__ import annotations

import time
from typing import Any

import numpy as np


class CrashAtStep3:
    name = "crash-at-3"

    def __call__(self, observation: Any) -> Any:
        if observation.step == 3:
            raise ZeroDivisionError("division by zero in the planner")
        return np.array([0.0, 0.0])


class NaNAtStep2:
    def __call__(self, observation: Any) -> Any:
        return np.array([np.nan, 0.0]) if observation.step == 2 else np.array([0.5, 0.0])


class WrongShape:
    def __call__(self, observation: Any) -> Any:
        return np.zeros((4, 2))


class SlowAtStep4:
    """Sleeps 5 s at step 4 (the hang limit interrupts it)."""

    def __call__(self, observation: Any) -> Any:
        if observation.step == 4:
            time.sleep(5.0)
        return np.array([0.0, 0.0])


class SpinAtStep1:
    """Computes (a busy loop of 0.25 CPU seconds) at step 1."""

    def __call__(self, observation: Any) -> Any:
        if observation.step == 1:
            end = time.process_time() + 0.25
            while time.process_time() < end:
                pass
        return np.array([0.0, 0.0])


def brake(observation: Any) -> Any:
    """A plain function policy: brake gently."""
    return np.array([-1.0, 0.0])


def hard_brake(observation: Any) -> Any:
    """A plain function policy: brake hard (the generated-world tests need a rollout that leaves the log)."""
    return np.array([-6.0, 0.0])


class MarkAtStep:
    """Drives straight on (no acceleration, no steering); at step $AVSIM_TEST_MARK_STEP writes the file $AVSIM_TEST_MARK (a test
    then signals the process) and waits there up to $AVSIM_TEST_MARK_WAIT seconds (default 0) for the signal."""

    def __call__(self, observation: Any) -> Any:
        import os
        from pathlib import Path

        if observation.step == int(os.environ["AVSIM_TEST_MARK_STEP"]):
            Path(os.environ["AVSIM_TEST_MARK"]).write_text(str(observation.step))
            time.sleep(float(os.environ.get("AVSIM_TEST_MARK_WAIT", "0")))
        return np.array([0.0, 0.0])


class NeedsArgument:
    """A policy class whose constructor needs an argument (`--policy` cannot make it)."""

    def __init__(self, gain: float) -> None:
        self.gain = gain

    def __call__(self, observation: Any) -> Any:
        return np.array([0.0, 0.0])


def many_poses(observation: Any) -> Any:
    """100,000 poses (their reference would be 74 GiB): refused before anything is made of them."""
    from avsim.sim.actions import Trajectory

    return Trajectory(np.zeros((100_000, 3)), 0.1)


def far_interval(observation: Any) -> Any:
    """8 poses 1e300 s apart."""
    from avsim.sim.actions import Trajectory

    return Trajectory(np.zeros((8, 3)), 1e300)
