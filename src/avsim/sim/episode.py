"""The episode loop: a policy is asked for an action at every step, under a time budget.

A policy is any callable `policy(observation) -> action` (`Policy`); it may also have
`reset(episode)` (called once before the first step) and a `name`. Its output goes through
`avsim.sim.actions.parse_action`. The episode ends early, keeping the rollout up to that step, when
the policy raises, returns something unusable (wrong shape, NaN) or takes longer than its budget:
the reason is recorded (`EpisodeResult.end_reason`, one line) and the loop returns normally.

The budget is enforced twice: a call that returns late is refused after the fact, and in the main
thread of a POSIX process an interval timer (`signal.setitimer`) interrupts a call that has not
returned by then (pure Python and numpy code; a call blocked inside C code that never returns to
the interpreter is not interrupted).
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

DEFAULT_BUDGET_S = 1.0


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


def call_policy(policy: Callable[[Observation], Any], observation: Observation, budget_s: float, dt_s: float) -> tuple[Any, float]:
    """One policy call under the budget, its output parsed.

    Args:
        policy: the policy.
        observation: this step's observation.
        budget_s: seconds the call may take (inf: no limit).
        dt_s: the sim's step (for bare pose arrays).

    Returns:
        (the parsed action, seconds the call took).

    Raises:
        PolicyError: the call raised, returned something unusable or ran out of time.
    """
    t0 = time.perf_counter()
    try:
        with _alarm(budget_s):
            out = policy(observation)
    except _BudgetExceeded:
        raise PolicyError(f"policy exceeded its time budget of {budget_s:g} s at step {observation.step}") from None
    except Exception as exc:  # a user's policy may raise anything: the episode ends with its reason
        text = " ".join(str(exc).split())
        raise PolicyError(f"policy raised {type(exc).__name__} at step {observation.step}: {text}"[:300]) from None
    took = time.perf_counter() - t0
    if took > budget_s:
        raise PolicyError(f"policy took {took:.3f} s at step {observation.step}, over its time budget of {budget_s:g} s")
    try:
        return parse_action(out, dt_s), took
    except PolicyError as exc:
        raise PolicyError(f"policy output at step {observation.step}: {exc}") from None


def reset_policy(policy: Any, episode: EpisodeInfo) -> None:
    """Call `policy.reset(episode)` when the policy has one."""
    reset = getattr(policy, "reset", None)
    if callable(reset):
        reset(episode)


def run_episode(sim: Simulator, policy: Callable[[Observation], Any], budget_s: float = DEFAULT_BUDGET_S, seed: int | None = None,
                on_step: Callable[[int], None] | None = None) -> EpisodeResult:  # fmt: skip
    """Run one episode of `policy` on `sim` (see the module docstring).

    Args:
        sim: the simulator (reset here).
        policy: the policy.
        budget_s: seconds each call may take.
        seed: the episode's seed (None: the sim config's).
        on_step: called with the step index after each step (progress).

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
            action, took = call_policy(policy, obs, budget_s, sim.dt_s)
        except PolicyError as exc:
            return EpisodeResult("policy_error", str(exc), sim.k, total, worst)
        sim.recorder.record_policy_time(sim.k, took)
        total, worst = total + took, max(worst, took)
        obs = sim.step(action)
        if on_step is not None:
            on_step(sim.k)
    return EpisodeResult("completed", "", sim.k, total, worst)
