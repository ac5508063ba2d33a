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
import warnings
from collections.abc import Iterator
from pathlib import Path

from avsim.core.errors import AvsimOutputError, AvsimWarning

BUSY_REASON = "another avsim process is writing here; wait for it to finish, or pass --wait to wait for it"


@contextlib.contextmanager
def output_lock(folder: str | os.PathLike[str], *, wait: bool = False) -> Iterator[Path]:
    """Hold the exclusive writer lock of `folder` (created if missing) for the `with` block.

    The folder is removed again on exit when it is empty (a run that failed before writing
    anything leaves nothing behind); a process that was waiting for it then locks the new one.

    Args:
        folder: the output folder one writer at a time may write (e.g. `OUT/<clip>`).
        wait: block until another holder is done, with an `AvsimWarning` saying so (else refuse at once).

    Returns:
        A context manager yielding the folder; `AvsimOutputError` when another process holds
        the lock and `wait` is False.
    """
    path = Path(folder)
    fd = _locked(path, wait)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):  # not empty (the usual case), or already gone
            path.rmdir()
        os.close(fd)  # closing the last descriptor releases the lock


def _locked(path: Path, wait: bool) -> int:
    """A descriptor of `path` holding its lock; retried when the folder was replaced meanwhile."""
    while True:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                os.close(fd)
                raise AvsimOutputError(path, BUSY_REASON) from None
            warnings.warn(f"{path}: another avsim process is writing here; waiting for it (--wait)", AvsimWarning, stacklevel=4)
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:  # the holder removed the (empty) folder as it finished
            same = False
        if same:
            return fd
        os.close(fd)
