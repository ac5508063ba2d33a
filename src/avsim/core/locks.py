"""One writer per output folder: an advisory lock that dies with its process.

`output_lock(folder)` takes an exclusive `flock` on the folder itself (no lock file is left
behind). The kernel drops the lock when the process ends however it ends (kill -9 included),
so a crashed writer never blocks the next one; a second writer meanwhile gets one line
(`AvsimOutputError`: another avsim process is writing here) or, with `wait=True`, waits.
Locks are per host (as `flock` is); folders shared over NFS are not coordinated across machines.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from avsim.core.errors import AvsimOutputError

BUSY_REASON = "another avsim process is writing here; wait for it to finish, or pass --wait to wait for it"


@contextlib.contextmanager
def output_lock(folder: str | os.PathLike[str], *, wait: bool = False) -> Iterator[Path]:
    """Hold the exclusive writer lock of `folder` (created if missing) for the `with` block.

    Args:
        folder: the output folder one writer at a time may write (e.g. `OUT/<clip>`).
        wait: block until another holder is done (else refuse at once).

    Returns:
        A context manager yielding the folder; `AvsimOutputError` when another process holds
        the lock and `wait` is False.
    """
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise AvsimOutputError(path, BUSY_REASON) from None
        yield path
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
