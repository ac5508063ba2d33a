"""Engines that run item tasks: `local` (a process pool, no new dependency) and `ray`.

Both call `avsim.jobs.items.run_item` once per item and report each result to the driver as it
finishes, and carry each running item's progress reports to the driver (`avsim.jobs.progress`):
a queue every pool worker inherits, a queue actor on Ray. `ray` is imported only when asked for (the optional extra `avsim[ray]`): with an
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

import contextlib
import logging
import multiprocessing as mp
import os
import queue as queue_module
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avsim.core.errors import AvsimValueError
from avsim.core.typing import StrEnum
from avsim.jobs.items import run_item
from avsim.jobs.progress import ItemUpdate, set_worker_channel
from avsim.jobs.tasks import ItemResult, ItemStatus, ItemTask, one_line

if TYPE_CHECKING:
    from rich.console import Console


class Engine(StrEnum):
    """Where a job's tasks run: a local process pool or a Ray cluster."""

    LOCAL = "local"
    RAY = "ray"


ENGINES = Engine.choices()
RAY_EXTRA_HINT = "the ray engine needs Ray: pip install 'avsim[ray]' (ray==2.60.0)"
POLL_S = 0.25  # the driver looks at its tasks and their progress this often


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
        ray_log: ray only: where the driver's own output goes while Ray runs (its C++ and Python
            log lines, its nodes' errors and state dumps), so that they stay off the user's
            terminal (`ray_output_to`); None leaves them there.
    """

    engine: Engine = Engine.LOCAL
    workers: int | None = None
    address: str | None = None
    cpus_per_task: float = 1.0
    gpus_per_task: float | None = 0.0
    max_retries: int = 3
    ray_log: Path | None = None

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


@dataclass(frozen=True)
class JobObserver:
    """What the driver hears while the tasks run (every part optional).

    Attributes:
        on_result: called once per finished item, with its task index.
        on_update: called with each running item's report (`avsim.jobs.progress.ItemUpdate`);
            None: the workers report nothing (no channel is opened).
        on_tick: called about every `POLL_S` (a display's clock).
        console: the display's console (ray: it alone keeps the terminal, `ray_output_to`).
    """

    on_result: Callable[[int, ItemResult], None] = lambda index, result: None
    on_update: Callable[[ItemUpdate], None] | None = None
    on_tick: Callable[[], None] = lambda: None
    console: Console | None = None


def run_tasks(tasks: list[ItemTask], config: EngineConfig, observer: JobObserver | None = None) -> list[ItemResult]:
    """Run every task on the configured engine; the observer hears results and progress as they come.

    Args:
        tasks: the item tasks.
        config: the engine and its resources.
        observer: the driver's display (default: hears nothing).

    Returns:
        The results, in the order of `tasks`.
    """
    observer = observer or JobObserver()
    if config.engine == Engine.RAY:
        by_index = _run_ray(tasks, config, observer)
    else:
        by_index = _run_local(tasks, config, observer)
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


def _init_worker(slots: Any, updates: Any) -> None:
    """Worker initializer: take one GPU slot (the only GPUs this process sees) and the progress channel."""
    if slots is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = slots.get()
    if updates is not None:
        set_worker_channel(updates)


def _local_pool(tasks: list[ItemTask], config: EngineConfig, updates: Any = None) -> ProcessPoolExecutor:
    """The process pool of the local engine, one GPU slot per worker when tasks take GPUs; `updates`: the
    progress queue every worker reports to (`avsim.jobs.progress`)."""
    ctx = mp.get_context("spawn")  # no inherited state: safe with numba / torch / encoders
    workers = max(1, min(config.workers or os.cpu_count() or 1, len(tasks)))
    gpus = local_gpus() if config.gpus_per_task != 0 else []  # torch is imported only when GPUs may be asked for
    per_task = (1.0 if gpus else 0.0) if config.gpus_per_task is None else config.gpus_per_task
    if per_task <= 0:
        return ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(None, updates))
    slots = gpu_slots(gpus, per_task)
    if not slots:
        raise AvsimValueError(f"--gpus-per-task {per_task:g}: {len(gpus)} GPU(s) visible here; give --gpus-per-task 0 "
                              "to run on the CPU")  # fmt: skip
    queue = ctx.Queue()
    for slot in slots[: min(workers, len(slots))]:
        queue.put(slot)
    return ProcessPoolExecutor(min(workers, len(slots)), mp_context=ctx, initializer=_init_worker, initargs=(queue, updates))


def _drain_queue(updates: Any, observer: JobObserver) -> None:
    """Hand every progress update waiting in the local queue to the observer."""
    if updates is None or observer.on_update is None:
        return
    while True:
        try:
            observer.on_update(updates.get_nowait())
        except queue_module.Empty:
            return


def _run_local(tasks: list[ItemTask], config: EngineConfig, observer: JobObserver) -> dict[int, ItemResult]:
    results: dict[int, ItemResult] = {}
    updates = mp.get_context("spawn").Queue() if observer.on_update is not None else None
    with _local_pool(tasks, config, updates) as pool:
        futures: dict[Future[ItemResult], int] = {pool.submit(run_item, t, i): i for i, t in enumerate(tasks)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
            _drain_queue(updates, observer)
            for future in done:
                index = futures[future]
                try:
                    result = future.result()
                except Exception as exc:  # the worker process died (BrokenProcessPool)
                    result = ItemResult(tasks[index].name, ItemStatus.FAILED, f"worker process died: {one_line(exc)}")
                results[index] = result
                observer.on_result(index, result)
            observer.on_tick()
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
        log = f"; Ray's log: {config.ray_log}" if config.ray_log is not None else ""
        raise AvsimValueError(f"engine: ray could not start ({where}): {one_line(exc)}{log}") from None
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


@contextlib.contextmanager
def ray_output_to(log: Path | None, console: Console | None = None) -> Iterator[None]:
    """Send this process's own output into `log` while the block runs, except `console`'s.

    Ray writes from threads this process does not control: its core worker (C++) to descriptor 2,
    its loggers to the `sys.stderr` of the time they were made, and the errors its nodes report
    (`(raylet) ...`, whole `[state-dump]`s when a node dies) to `sys.stdout` (which a progress bar
    on a terminal shows). Descriptors 1 and 2 and `sys.stdout` / `sys.stderr` go to `log` for the
    block; `console` (the progress bar) keeps writing where it wrote (the terminal).

    Args:
        log: the file (appended; created with the user's umask); None: nothing redirected.
        console: the progress bar's console, pinned to its stream for the block.

    Returns:
        A context manager.
    """
    if log is None:
        yield
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    console_file = console.file if console is not None else None
    terminal = None
    if console is not None and _fileno(console_file) in (1, 2):  # a real descriptor: the terminal (or a pipe)
        terminal = os.fdopen(os.dup(_fileno(console_file)), "w", buffering=1, encoding="utf-8", errors="backslashreplace")
    saved = os.dup(1), os.dup(2)
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    # left open after the block: a Ray logger made inside it keeps writing to the log, never to a closed file
    log_stream = os.fdopen(os.dup(target), "w", buffering=1, encoding="utf-8", errors="backslashreplace")
    old_out, old_err = sys.stdout, sys.stderr
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        sys.stdout = sys.stderr = log_stream
        if console is not None:
            console.file = terminal or console_file  # type: ignore[assignment]
        yield
    finally:
        sys.stdout, sys.stderr = old_out, old_err
        if console is not None:
            console.file = console_file  # type: ignore[assignment]
        with contextlib.suppress(Exception):
            log_stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)
        if terminal is not None:
            terminal.close()
        if log.is_file() and log.stat().st_size == 0:
            log.unlink()  # Ray said nothing: no file


def _fileno(stream: Any) -> int:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return -1


def _run_ray(tasks: list[ItemTask], config: EngineConfig, observer: JobObserver) -> dict[int, ItemResult]:
    ray = import_ray()
    with ray_output_to(config.ray_log, observer.console):
        return _run_ray_tasks(ray, tasks, config, observer)


def _run_ray_tasks(ray: Any, tasks: list[ItemTask], config: EngineConfig, observer: JobObserver) -> dict[int, ItemResult]:
    started = _start_ray(ray, config)
    results: dict[int, ItemResult] = {}
    try:
        remote = ray.remote(num_cpus=config.cpus_per_task, num_gpus=_ray_gpus_per_task(ray, config),
                            max_retries=config.max_retries, retry_exceptions=False)(run_item)  # fmt: skip
        updates = _ray_queue(ray) if observer.on_update is not None else None
        refs = {remote.remote(t, i, updates): i for i, t in enumerate(tasks)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=POLL_S)
            _drain_ray_queue(updates, observer)
            for ref in done:
                index = refs[ref]
                try:
                    result = ray.get(ref)
                except Exception as exc:  # retries exhausted (WorkerCrashedError), task cancelled, node lost
                    reason = f"ray task failed after {config.max_retries} retries: {one_line(exc)}"
                    result = ItemResult(tasks[index].name, ItemStatus.FAILED, reason)
                results[index] = result
                observer.on_result(index, result)
            observer.on_tick()
    finally:
        if started:
            ray.shutdown()
    return results


def _ray_queue(ray: Any) -> Any:
    """The progress channel on Ray: a queue actor that takes no CPU (it never holds back a task)."""
    from ray.util.queue import Queue

    return Queue(actor_options={"num_cpus": 0})


def _drain_ray_queue(updates: Any, observer: JobObserver) -> None:
    """Hand every progress update waiting in the queue actor to the observer (one round trip)."""
    if updates is None or observer.on_update is None:
        return
    with contextlib.suppress(Exception):  # progress is best effort: a queue that cannot answer is skipped
        for update in updates.get_nowait_batch(updates.qsize()):
            observer.on_update(update)
