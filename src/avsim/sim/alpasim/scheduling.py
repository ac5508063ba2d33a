"""How `avsim serve sensorsim` shares its CPU and memory between requests.

Memory: every render request is costed before any work (`image_bytes`, `request_bytes`: the ray
map of a camera not yet cached, the drawn image, a rolling-shutter composite, the encoding and
the reply, and the encoded images an aggregated request keeps while it draws the next), from the
bytes a pixel takes, measured with tracemalloc on the drawing code (ray map 8 B/px plus a
bounded block of work, see `avsim.render.raster.primitives.ray_map`; image 3 B/px, a rolling
composite 6 B/px more; encoding and reply 6 B/px). `RenderScheduler` admits a request only while
the estimates of the requests running stay within the server's budget; one whose estimate alone
passes what a single request may use is refused (`Refused`, gRPC `RESOURCE_EXHAUSTED`), the bound
named. Ray maps are kept in one `RayMapCache` for the server, bounded in bytes.

Fairness: requests render in the gRPC threads that received them, at most `workers` at once.
A request is *large* when its estimate is over a quarter of the budget (`SMALL_SHARE`); large
requests may hold at most `workers - 1` render slots and three quarters of the budget, so one slot
and a quarter of the budget are always there for small ones: a small request never waits for a
large one to finish (at most for another small one). Large requests queue in arrival order, at
most `2 * workers` of them (more are refused, busy).

Cancellation: a request whose client cancels it or whose deadline passes leaves the queue at once
(`Cancelled`); one that is drawing stops at its next check (`RenderJob.check`: between blocks of
ray-map rows, rolling-shutter strips and the images of an aggregated request), and its memory
returns to the budget.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from avsim.core.cameras import Camera
from avsim.core.typing import NDArrayFloat32
from avsim.render.raster.primitives import RAY_BLOCK_PX, ray_map

__all__ = ["Cancelled", "RayMapCache", "Refused", "RenderJob", "RenderScheduler", "image_bytes", "request_bytes"]

MIB = 1024 * 1024
RAY_BYTES_PER_PX = 8  # the (H, W, 2) float32 ray map
RAY_WORK_BYTES = 160 * RAY_BLOCK_PX  # the working memory of one block of ray-map rows (tracemalloc: 40 MiB)
IMAGE_BYTES_PER_PX = 3  # the drawn RGB image
ROLLING_BYTES_PER_PX = 6  # a rolling-shutter image: the composite and the next strip's image besides the drawn one
ENCODE_BYTES_PER_PX = 6  # the BGR copy the encoder reads, the encoded bytes and the reply (a PNG of noise is about raw size)
KEPT_BYTES_PER_PX = 3  # an encoded image kept while the next of a request is drawn (at most raw size)
FIXED_BYTES = 32 * MIB  # per image: primitives, kernel buffers, the interpreter's share
SMALL_SHARE = 4  # a request is large above budget / SMALL_SHARE; that share stays for small ones
WAITING_PER_WORKER = 2  # large requests that may queue, per render worker


class Refused(Exception):
    """A request over a bound (RESOURCE_EXHAUSTED); `str()` names the bound."""


class Cancelled(Exception):
    """The client cancelled the request or its deadline passed."""


def image_bytes(width_px: int, height_px: int, rolling: bool, cached: bool) -> int:
    """The memory one image of a request takes while it is drawn and encoded (see the module docstring)."""
    px = int(width_px) * int(height_px)
    per_px = IMAGE_BYTES_PER_PX + ENCODE_BYTES_PER_PX + (ROLLING_BYTES_PER_PX if rolling else 0) + (0 if cached else RAY_BYTES_PER_PX)
    return px * per_px + FIXED_BYTES + (0 if cached else RAY_WORK_BYTES)


def request_bytes(images: list[tuple[int, int, bool, bool]], keep_decoded: bool = False) -> int:
    """The memory of a request that draws `images` one after another.

    Args:
        images: per image (width, height, rolling shutter, ray map cached).
        keep_decoded: every decoded image is kept until the last is drawn (the generated mode: the
            model takes the views together), with its generated twin.

    Returns:
        Bytes: the largest image's work plus what the others leave kept meanwhile.
    """
    if not images:
        return 0
    work = [image_bytes(*im) for im in images]
    px = [w * h for w, h, _, _ in images]
    kept_per_px = KEPT_BYTES_PER_PX + (2 * IMAGE_BYTES_PER_PX if keep_decoded else 0)
    return max(work) + kept_per_px * (sum(px) - px[work.index(max(work))])


class RayMapCache:
    """Ray maps by camera (`ray_map`), least recently used first out, at most `max_bytes` in all
    (a map larger than that is made for its request and not kept). Thread-safe; two requests that
    need the same new map may both make it."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = int(max_bytes)
        self._maps: OrderedDict[Camera, NDArrayFloat32] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        return self._bytes

    def __contains__(self, camera: Camera) -> bool:
        with self._lock:
            return camera in self._maps

    def get(self, camera: Camera, between_blocks: Callable[[], None] | None = None) -> NDArrayFloat32:
        """The camera's ray map, made (in blocks, `between_blocks` called before each) when not kept."""
        with self._lock:
            if camera in self._maps:
                self._maps.move_to_end(camera)
                return self._maps[camera]
        rays = ray_map(camera, between_blocks)
        with self._lock:
            if camera not in self._maps and rays.nbytes <= self.max_bytes:
                self._maps[camera] = rays
                self._bytes += rays.nbytes
                while self._bytes > self.max_bytes:
                    _, old = self._maps.popitem(last=False)
                    self._bytes -= old.nbytes
        return rays


@dataclass
class RenderJob:
    """One admitted request: its estimate, and the check its drawing calls between steps."""

    cost_bytes: int
    large: bool
    is_active: Callable[[], bool]
    cancelled: threading.Event

    def check(self) -> None:
        """Cancelled when the client went away (cancelled, deadline passed)."""
        if self.cancelled.is_set() or not self.is_active():
            raise Cancelled("the client cancelled the request or its deadline passed")


class RenderScheduler:
    """Admits render requests within `workers` slots and `budget_bytes` (see the module docstring).

    Args:
        workers: render slots (requests drawn at once).
        budget_bytes: the memory the requests being drawn may use together.
    """

    def __init__(self, workers: int, budget_bytes: int) -> None:
        self.workers, self.budget_bytes = max(int(workers), 1), int(budget_bytes)
        self.reserve_bytes = self.budget_bytes // SMALL_SHARE
        self.max_large = max(self.workers - 1, 1)
        self.max_waiting = WAITING_PER_WORKER * self.workers
        self._cond = threading.Condition()
        self._running: list[RenderJob] = []
        self._waiting_large: list[RenderJob] = []

    @property
    def largest_request_bytes(self) -> int:
        """What one request may use: the budget less the share kept for small requests."""
        return self.budget_bytes - self.reserve_bytes

    @property
    def running(self) -> int:
        with self._cond:
            return len(self._running)

    @property
    def used_bytes(self) -> int:
        with self._cond:
            return sum(j.cost_bytes for j in self._running)

    def wake(self) -> None:
        """Wake the waiting requests (one was cancelled)."""
        with self._cond:
            self._cond.notify_all()

    def _fits(self, job: RenderJob) -> bool:
        used = sum(j.cost_bytes for j in self._running)
        if len(self._running) >= self.workers or used + job.cost_bytes > self.budget_bytes:
            return False
        if not job.large:
            return True
        large = [j for j in self._running if j.large]
        return (len(large) < self.max_large and sum(j.cost_bytes for j in large) + job.cost_bytes <= self.largest_request_bytes
                and self._waiting_large[0] is job)  # fmt: skip

    @contextmanager
    def admitted(self, cost_bytes: int, is_active: Callable[[], bool], what: str) -> Iterator[RenderJob]:
        """Wait for a slot and memory, then hold them while the `with` block draws.

        Args:
            cost_bytes: the request's estimate (`request_bytes`).
            is_active: whether the client still waits (gRPC's `context.is_active`).
            what: the request in words, for a refusal.

        Yields:
            The job (its `check` stops the drawing once the client has gone).

        Raises:
            Refused: the estimate alone passes what one request may use, or too many large requests wait.
            Cancelled: the client went away while the request waited.
        """
        if cost_bytes > self.largest_request_bytes:
            raise Refused(f"{what} needs about {cost_bytes / MIB:,.0f} MiB to draw; one request may use {self.largest_request_bytes / MIB:,.0f} MiB "
                          f"(3/4 of the server's memory budget, --max-memory-mib {self.budget_bytes // MIB})")  # fmt: skip
        job = RenderJob(int(cost_bytes), cost_bytes > self.reserve_bytes, is_active, threading.Event())
        with self._cond:
            if job.large:
                if len(self._waiting_large) >= self.max_waiting:
                    raise Refused(f"busy: {len(self._waiting_large)} large requests already wait (at most {self.max_waiting}: 2 per --workers)")
                self._waiting_large.append(job)
            try:
                while not self._fits(job):
                    if not is_active():
                        raise Cancelled("the client cancelled the request or its deadline passed while it waited")
                    self._cond.wait(timeout=1.0)
            finally:
                if job.large:
                    self._waiting_large.remove(job)
                    self._cond.notify_all()
            self._running.append(job)
        try:
            yield job
        finally:
            with self._cond:
                self._running.remove(job)
                self._cond.notify_all()
