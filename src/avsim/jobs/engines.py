"""Engines that run item tasks: `local` (a process pool, no new dependency) and `ray`.

Both call `avsim.jobs.items.run_item` once per item and report each result to the driver as it
finishes. `ray` is imported only when asked for (the optional extra `avsim[ray]`): with an
`address` it joins that cluster (`auto`, `ray://host:10001`), else it starts a local instance
with `workers` CPUs (no dashboard, quiet logs) and stops it at the end. Each task asks Ray for
`cpus_per_task` CPUs (and `gpus_per_task` GPUs) and is retried `max_retries` times when its
worker dies (SIGKILL, out of memory); a task that still cannot finish is reported failed.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from avsim.core.errors import AvsimValueError
from avsim.jobs.items import ItemResult, ItemTask, one_line, run_item

ENGINES = ("local", "ray")
RAY_EXTRA_HINT = "the ray engine needs Ray: pip install 'avsim[ray]' (ray==2.60.0)"
OnResult = Callable[[ItemResult], None]


@dataclass(frozen=True)
class EngineConfig:
    """How to run a job's tasks.

    Attributes:
        engine: "local" or "ray".
        workers: local: processes; ray without `address`: CPUs of the local instance (None: all).
        address: ray only: a cluster to join ("auto", "ray://head:10001"); None starts a local instance.
        cpus_per_task: CPUs each task requests from Ray.
        gpus_per_task: GPUs each task requests from Ray (1 for generation, 0 otherwise).
        max_retries: Ray retries of a task whose worker died.
    """

    engine: str = "local"
    workers: int | None = None
    address: str | None = None
    cpus_per_task: float = 1.0
    gpus_per_task: float = 0.0
    max_retries: int = 3

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise AvsimValueError(f"engine: expected one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.workers is not None and self.workers < 1:
            raise AvsimValueError(f"workers: must be >= 1, got {self.workers}")
        if self.cpus_per_task <= 0 or self.gpus_per_task < 0 or self.max_retries < 0:
            raise AvsimValueError("cpus_per_task must be > 0, gpus_per_task and max_retries >= 0")
        if self.address is not None and self.engine != "ray":
            raise AvsimValueError("address: only the ray engine joins a cluster")


def import_ray() -> Any:
    """The `ray` module, or an AvsimValueError naming the extra that installs it.

    Returns:
        The module.
    """
    try:
        import ray
    except ImportError:
        raise AvsimValueError(RAY_EXTRA_HINT) from None
    return ray


def run_tasks(tasks: list[ItemTask], config: EngineConfig, on_result: OnResult) -> list[ItemResult]:
    """Run every task on the configured engine; `on_result` sees each result as it finishes.

    Args:
        tasks: the item tasks.
        config: the engine and its resources.
        on_result: called on the driver once per finished item (progress bar).

    Returns:
        The results, in the order of `tasks`.
    """
    run = _run_ray if config.engine == "ray" else _run_local
    by_index = run(tasks, config, on_result)
    return [by_index[i] for i in range(len(tasks))]


def _run_local(tasks: list[ItemTask], config: EngineConfig, on_result: OnResult) -> dict[int, ItemResult]:
    workers = max(1, min(config.workers or os.cpu_count() or 1, len(tasks)))
    results: dict[int, ItemResult] = {}
    ctx = mp.get_context("spawn")  # no inherited state: safe with numba / torch / encoders
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        futures: dict[Future[ItemResult], int] = {pool.submit(run_item, t): i for i, t in enumerate(tasks)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = futures[future]
                try:
                    result = future.result()
                except Exception as exc:  # the worker process died (BrokenProcessPool)
                    result = ItemResult(tasks[index].name, "failed", f"worker process died: {one_line(exc)}")
                results[index] = result
                on_result(result)
    return results


def _start_ray(ray: Any, config: EngineConfig) -> bool:
    """Join the cluster or start a local instance; False when Ray was already initialised here."""
    if ray.is_initialized():
        return False
    # Ray's own log at ERROR: its start-up notices are not avsim's output, and a failed start is one line of ours
    common: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False, "configure_logging": True}
    try:
        if config.address:
            ray.init(address=config.address, **common)
        else:
            # "local": a new instance even when another one runs on this machine (None would join that one)
            ray.init(address="local", num_cpus=config.workers or os.cpu_count() or 1, include_dashboard=False, **common)
    except Exception as exc:  # Ray raises bare Exception/RuntimeError/ConnectionError (e.g. under a memory cap)
        where = config.address or "a local instance"
        raise AvsimValueError(f"engine: ray could not start ({where}): {one_line(exc)}") from None
    return True


def _run_ray(tasks: list[ItemTask], config: EngineConfig, on_result: OnResult) -> dict[int, ItemResult]:
    ray = import_ray()
    started = _start_ray(ray, config)
    results: dict[int, ItemResult] = {}
    try:
        remote = ray.remote(num_cpus=config.cpus_per_task, num_gpus=config.gpus_per_task,
                            max_retries=config.max_retries, retry_exceptions=False)(run_item)  # fmt: skip
        refs = {remote.remote(t): i for i, t in enumerate(tasks)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                index = refs[ref]
                try:
                    result = ray.get(ref)
                except Exception as exc:  # retries exhausted (WorkerCrashedError), task cancelled, node lost
                    reason = f"ray task failed after {config.max_retries} retries: {one_line(exc)}"
                    result = ItemResult(tasks[index].name, "failed", reason)
                results[index] = result
                on_result(result)
    finally:
        if started:
            ray.shutdown()
    return results
