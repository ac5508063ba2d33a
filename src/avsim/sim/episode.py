"""The episode loop: a policy is asked for an action at every step, under a time budget.

A policy is any callable `policy(observation) -> action` (`Policy`); it may also have
`reset(episode)` (called once before the first step) and a `name`. Its output goes through
`avsim.sim.actions.parse_action`. The episode ends early, keeping the rollout up to that step, when
the policy raises, returns something unusable (wrong shape, NaN) or takes longer than its budget:
the reason is recorded (`EpisodeResult.end_reason`, one line) and the loop returns normally.

The budget is compute time: the CPU seconds the process spends inside the call
(`time.process_time`, every thread of the process), so an episode's outcome does not depend on
how busy the machine is (a loaded machine stretches wall time many times, CPU time hardly).
A call that computes longer is refused after the fact. A call that waits instead of computing
(sleeps, blocks, is starved) is stopped by the hang limit (`hang_limit_s`: `HANG_FACTOR` budgets,
at least `MIN_HANG_S`, in wall time): refused after the fact, and in the main thread of a POSIX process interrupted by an interval
timer (`signal.setitimer`; pure Python and numpy code: a call blocked inside C code that never
returns to the interpreter is not interrupted). A remote policy's network deadlines are its own
(`avsim.sim.alpasim.driver`: wall time, a share of the budget).
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from avsim.sim.actions import PolicyError, parse_action
from avsim.sim.observation import EpisodeInfo, Observation
from avsim.sim.stepper import Simulator

DEFAULT_BUDGET_S = 1.0  # CPU seconds a policy call may compute
HANG_FACTOR = 10.0  # wall seconds a call may take, in budgets (waiting, not computing) ...
MIN_HANG_S = 60.0  # ... and never less than this (a niced Ray worker on a loaded 2-core machine: 5.3 s for a 50 ms step)


def hang_limit_s(budget_s: float) -> float:
    """The wall seconds a call may take before it counts as hung: `HANG_FACTOR` budgets, at least `MIN_HANG_S`."""
    return max(HANG_FACTOR * budget_s, MIN_HANG_S)


@runtime_checkable
class Policy(Protocol):
    """A driving policy: the observation of a step in, an action out (see `avsim.sim.actions`)."""

    def __call__(self, observation: Observation) -> Any: ...


@dataclass(frozen=True)
class EpisodeResult:
    """How an episode ended: `completed` (all steps) or `policy_error` with a one-line `end_reason`;
    `steps` run; the policy's total and worst time per call."""

    status: str
    end_reason: str
    steps: int
    policy_total_s: float
    policy_max_s: float


class _BudgetExceeded(BaseException):
    """Raised in the policy's frame by the interval timer (a BaseException: `except Exception` in a
    policy does not swallow it)."""


@contextmanager
def _alarm(budget_s: float) -> Iterator[None]:
    """Interrupt the body after `budget_s` (main thread of a POSIX process only; else a no-op)."""
    usable = math.isfinite(budget_s) and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise _BudgetExceeded

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, budget_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)


def policy_name(policy: Any) -> str:
    """The policy's `name`, else its class or function name."""
    return str(getattr(policy, "name", None) or getattr(policy, "__name__", None) or type(policy).__name__)


def call_policy(policy: Callable[[Observation], Any], observation: Observation, budget_s: float, dt_s: float,
                hang_s: float | None = None) -> tuple[Any, float]:  # fmt: skip
    """One policy call under the budget, its output parsed.

    Args:
        policy: the policy.
        observation: this step's observation.
        budget_s: CPU seconds the call may compute (inf: no limit).
        dt_s: the sim's step (for bare pose arrays).
        hang_s: wall seconds the call may take (None: `hang_limit_s(budget_s)`).

    Returns:
        (the parsed action, wall seconds the call took).

    Raises:
        PolicyError: the call raised, returned something unusable, computed over its budget or hung.
    """
    hang_s = hang_limit_s(budget_s) if hang_s is None else hang_s
    t0, cpu0 = time.perf_counter(), time.process_time()
    try:
        with _alarm(hang_s):
            out = policy(observation)
    except _BudgetExceeded:
        raise PolicyError(_hang_reason(hang_s, budget_s, observation.step)) from None
    except Exception as exc:  # a user's policy may raise anything: the episode ends with its reason
        text = " ".join(str(exc).split())
        raise PolicyError(f"policy raised {type(exc).__name__} at step {observation.step}: {text}"[:300]) from None
    took, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if cpu > budget_s:
        raise PolicyError(f"policy computed for {cpu:.3f} s (CPU) at step {observation.step}, over its time budget of {budget_s:g} s")
    if took > hang_s:
        raise PolicyError(_hang_reason(hang_s, budget_s, observation.step))
    try:
        return parse_action(out, dt_s), took
    except PolicyError as exc:
        raise PolicyError(f"policy output at step {observation.step}: {exc}") from None


def _hang_reason(hang_s: float, budget_s: float, step: int) -> str:
    return f"policy did not return within {hang_s:g} s at step {step} (its hang limit; its time budget is {budget_s:g} s of CPU)"


def reset_policy(policy: Any, episode: EpisodeInfo) -> None:
    """Call `policy.reset(episode)` when the policy has one."""
    reset = getattr(policy, "reset", None)
    if callable(reset):
        reset(episode)


def run_episode(sim: Simulator, policy: Callable[[Observation], Any], budget_s: float = DEFAULT_BUDGET_S, seed: int | None = None,
                on_step: Callable[[int], None] | None = None, hang_s: float | None = None) -> EpisodeResult:  # fmt: skip
    """Run one episode of `policy` on `sim` (see the module docstring).

    Args:
        sim: the simulator (reset here).
        policy: the policy.
        budget_s: CPU seconds each call may compute (`call_policy`).
        seed: the episode's seed (None: the sim config's).
        on_step: called with the step index after each step (progress).
        hang_s: wall seconds each call may take (None: `hang_limit_s(budget_s)`).

    Returns:
        How it ended; the rollout is in `sim.recorder`.
    """
    obs = sim.reset(seed)
    assert sim.episode is not None and sim.recorder is not None
    try:
        reset_policy(policy, sim.episode)
    except Exception as exc:
        return EpisodeResult("policy_error", f"policy reset raised {type(exc).__name__}: {' '.join(str(exc).split())}"[:300], 0, 0.0, 0.0)
    total, worst = 0.0, 0.0
    while not sim.done:
        try:
            action, took = call_policy(policy, obs, budget_s, sim.dt_s, hang_s)
        except PolicyError as exc:
            return EpisodeResult("policy_error", str(exc), sim.k, total, worst)
        sim.recorder.record_policy_time(sim.k, took)
        total, worst = total + took, max(worst, took)
        obs = sim.step(action)
        if on_step is not None:
            on_step(sim.k)
    return EpisodeResult("completed", "", sim.k, total, worst)
