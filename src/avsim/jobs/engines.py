"""Engines that run item tasks: `local` (a process pool, no new dependency) and `ray`.

Both call `avsim.jobs.items.run_item` once per item and report each result to the driver as it
finishes. `ray` is imported only when asked for (the optional extra `avsim[ray]`): with an
`address` it joins that cluster (`auto`, `ray://host:10001`), else it starts a local instance
with `workers` CPUs (no dashboard, quiet logs) and stops it at the end. Each task asks Ray for
`cpus_per_task` CPUs (and `gpus_per_task` GPUs) and is retried `max_retries` times when its
worker dies (SIGKILL, out of memory); a task that still cannot finish is reported failed.

GPUs (`gpus_per_task`; None: one per task when the engine has a GPU, else none): Ray places
tasks on GPUs itself and a request the cluster cannot meet is refused before any task starts.
The local pool gives each worker process its own GPUs through `CUDA_VISIBLE_DEVICES`, set
before the worker imports anything (`gpu_slots`: `g` GPUs per worker for `g >= 1`, `1/g`
workers sharing each GPU for `g < 1`), so there are at most as many workers as slots.
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
from avsim.core.typing import StrEnum
from avsim.jobs.items import run_item
from avsim.jobs.tasks import ItemResult, ItemStatus, ItemTask, one_line


class Engine(StrEnum):
    """Where a job's tasks run: a local process pool or a Ray cluster."""

    LOCAL = "local"
    RAY = "ray"


ENGINES = Engine.choices()
RAY_EXTRA_HINT = "the ray engine needs Ray: pip install 'avsim[ray]' (ray==2.60.0)"
OnResult = Callable[[ItemResult], None]


@dataclass(frozen=True)
class EngineConfig:
    """How to run a job's tasks.

    Attributes:
        engine: an `Engine` (its name is accepted and converted).
        workers: local: processes; ray without `address`: CPUs of the local instance (None: all).
        address: ray only: a cluster to join ("auto", "ray://head:10001"); None starts a local instance.
        cpus_per_task: CPUs each task requests from Ray.
        gpus_per_task: GPUs each task gets (Ray's request; local: its devices); None: 1 when the engine has a GPU, else 0.
        max_retries: Ray retries of a task whose worker died.
    """

    engine: Engine = Engine.LOCAL
    workers: int | None = None
    address: str | None = None
    cpus_per_task: float = 1.0
    gpus_per_task: float | None = 0.0
    max_retries: int = 3

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise AvsimValueError(f"engine: expected one of {', '.join(ENGINES)}, got {self.engine!r}")
        object.__setattr__(self, "engine", Engine(self.engine))
        if self.workers is not None and self.workers < 1:
            raise AvsimValueError(f"workers: must be >= 1, got {self.workers}")
        if self.cpus_per_task <= 0 or (self.gpus_per_task or 0) < 0 or self.max_retries < 0:
            raise AvsimValueError("cpus_per_task must be > 0, gpus_per_task and max_retries >= 0")
        if self.address is not None and self.engine != Engine.RAY:
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
    run = _run_ray if config.engine == Engine.RAY else _run_local
    by_index = run(tasks, config, on_result)
    return [by_index[i] for i in range(len(tasks))]


def local_gpus() -> list[str]:
    """The GPUs this process sees (`CUDA_VISIBLE_DEVICES` ids, or `0..n-1`); empty without CUDA."""
    try:
        import torch
    except ImportError:
        return []
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return visible[:count] if len(visible) >= count > 0 else [str(i) for i in range(count)]


def gpu_slots(gpus: list[str], gpus_per_task: float) -> list[str]:
    """The `CUDA_VISIBLE_DEVICES` value of each local worker: `g` GPUs each, or `1/g` workers per GPU.

    Args:
        gpus: the visible GPU ids.
        gpus_per_task: GPUs per task (> 0); below 1 it must be 1/k.

    Returns:
        One comma-separated id list per worker slot.
    """
    if gpus_per_task >= 1:
        if gpus_per_task != int(gpus_per_task):
            raise AvsimValueError(f"--gpus-per-task: the local engine takes a whole number or 1/k, got {gpus_per_task:g}")
        per = int(gpus_per_task)
        return [",".join(gpus[i : i + per]) for i in range(0, len(gpus) - per + 1, per)]
    share = round(1 / gpus_per_task)
    if abs(share * gpus_per_task - 1) > 1e-6:
        raise AvsimValueError(f"--gpus-per-task: the local engine takes a whole number or 1/k, got {gpus_per_task:g}")
    return [g for g in gpus for _ in range(share)]


def _claim_gpus(slots: Any) -> None:
    """Worker initializer: take one slot and make it the only GPUs this process sees."""
    os.environ["CUDA_VISIBLE_DEVICES"] = slots.get()


def _local_pool(tasks: list[ItemTask], config: EngineConfig) -> ProcessPoolExecutor:
    """The process pool of the local engine, one GPU slot per worker when tasks take GPUs."""
    ctx = mp.get_context("spawn")  # no inherited state: safe with numba / torch / encoders
    workers = max(1, min(config.workers or os.cpu_count() or 1, len(tasks)))
    gpus = local_gpus() if config.gpus_per_task != 0 else []  # torch is imported only when GPUs may be asked for
    per_task = (1.0 if gpus else 0.0) if config.gpus_per_task is None else config.gpus_per_task
    if per_task <= 0:
        return ProcessPoolExecutor(workers, mp_context=ctx)
    slots = gpu_slots(gpus, per_task)
    if not slots:
        raise AvsimValueError(f"--gpus-per-task {per_task:g}: {len(gpus)} GPU(s) visible here; give --gpus-per-task 0 "
                              "to run on the CPU")  # fmt: skip
    queue = ctx.Queue()
    for slot in slots[: min(workers, len(slots))]:
        queue.put(slot)
    return ProcessPoolExecutor(min(workers, len(slots)), mp_context=ctx, initializer=_claim_gpus, initargs=(queue,))


def _run_local(tasks: list[ItemTask], config: EngineConfig, on_result: OnResult) -> dict[int, ItemResult]:
    results: dict[int, ItemResult] = {}
    with _local_pool(tasks, config) as pool:
        futures: dict[Future[ItemResult], int] = {pool.submit(run_item, t): i for i, t in enumerate(tasks)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = futures[future]
                try:
                    result = future.result()
                except Exception as exc:  # the worker process died (BrokenProcessPool)
                    result = ItemResult(tasks[index].name, ItemStatus.FAILED, f"worker process died: {one_line(exc)}")
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


def _ray_gpus_per_task(ray: Any, config: EngineConfig) -> float:
    """GPUs per Ray task: the configured number (refused when the cluster has fewer), or 1 / 0 by the cluster's GPUs."""
    cluster = float(ray.cluster_resources().get("GPU", 0))
    if config.gpus_per_task is None:
        return 1.0 if cluster >= 1 else 0.0
    if config.gpus_per_task > cluster:
        raise AvsimValueError(f"--gpus-per-task {config.gpus_per_task:g}: the Ray cluster has {cluster:g} GPU(s); "
                              "give --gpus-per-task 0 to run on CPUs")  # fmt: skip
    return config.gpus_per_task


def _run_ray(tasks: list[ItemTask], config: EngineConfig, on_result: OnResult) -> dict[int, ItemResult]:
    ray = import_ray()
    started = _start_ray(ray, config)
    results: dict[int, ItemResult] = {}
    try:
        remote = ray.remote(num_cpus=config.cpus_per_task, num_gpus=_ray_gpus_per_task(ray, config),
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
                    result = ItemResult(tasks[index].name, ItemStatus.FAILED, reason)
                results[index] = result
                on_result(result)
    finally:
        if started:
            ray.shutdown()
    return results
