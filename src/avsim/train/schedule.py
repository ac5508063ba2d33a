"""Learning-rate schedules: the released recipe's warm-up + linear decay, and the earlier one.

``lambda_linear`` (the released multi-view recipe), with n the 0-based optimiser step, W the
warm-up steps and L the cycle length::

    f(n) = f_start + (f_max - f_start) n / W              n < W
    f(n) = f_min + (f_max - f_min) (L - n) / (L - W)      W <= n <= L
    f(n) = f_min                                          n > L   (the reference stops at L)

    lr(n) = lr f(n)

``warmup_constant`` (avsim before issue 16): ``lr min(1, (n + 1) / W)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from avsim.train.config import OptimConfig


def lr_factor(step: int, optim: OptimConfig) -> float:
    """The multiplier of ``optim.lr`` for (0-based) optimiser step `step`.

    Args:
        step: optimiser steps done before this one (0 for the first).
        optim: the schedule's fields (``schedule``, ``warmup_steps``, ``lr_*_factor``,
            ``cycle_steps``).

    Returns:
        The factor (dimensionless).
    """
    w = optim.warmup_steps
    if optim.schedule == "warmup_constant":
        return min(1.0, (step + 1) / w) if w > 0 else 1.0
    # LambdaLinearScheduler.schedule of cosmos-transfer2.5
    # cosmos_transfer2/_src/imaginaire/functional/lr_scheduler.py, evaluated by torch's LambdaLR
    # at its own step count (0 for the first optimiser step; scheduler.step() follows each
    # optimizer.step() in cosmos_transfer2/_src/imaginaire/trainer.py)
    f_start, f_max, f_min = optim.lr_start_factor, optim.lr_max_factor, optim.lr_min_factor
    if step < w:
        return (f_max - f_start) / w * step + f_start  # the reference's operation order
    cycle = optim.cycle_steps
    if step >= cycle:
        return f_min
    return f_min + (f_max - f_min) * (cycle - step) / (cycle - w)


def lr_at(step: int, optim: OptimConfig) -> float:
    """Learning rate of (0-based) optimiser step `step`: ``optim.lr * lr_factor(step, optim)``."""
    return optim.lr * lr_factor(step, optim)


__all__ = ["lr_at", "lr_factor"]
