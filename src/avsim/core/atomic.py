"""Atomic outputs: a writer never leaves a half-written file or folder behind.

Every output is written to a temporary name beside its final one, closed, checked (by the
writer's own check, e.g. an mp4's frame count) and only then renamed. A write that fails
because the disk is full or read-only is reported by `output_errors` as one line naming the
output folder (`OUT: disk full`).

Folders and files are created with the user's umask (`umask_mode`): a temporary folder is made
private by `tempfile.mkdtemp` and opened up to `0o777 & ~umask` before anything is written in
it, so outputs on shared storage are readable by the group and others when the umask says so.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from avsim.core.errors import AvsimOutputError

# errno of a write that failed for lack of room or permission, and the one-line reason for each
OUTPUT_ERRNO_REASONS: dict[int, str] = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk full (quota exceeded)",
    errno.EFBIG: "file too large (for the file system or the process's file size limit)",
    errno.EROFS: "read-only file system",
}


@contextlib.contextmanager
def atomic_output_path(
    path: str | os.PathLike[str], *, is_dir: bool = False, check: Callable[[Path], None] | None = None
) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only on success.

    The temporary lives in the same folder, so the final `os.replace` is atomic on POSIX.
    On any exception the temporary is removed and `path` is left as it was. For folders an
    existing target is replaced as a whole (moved aside, then deleted after the rename).
    Suffixes are kept (``.x.tmp<host>.<pid>-abc.mp4``) so writers that pick a format from the
    name work. Temporaries a killed process left for the same `path` (same host, a process id
    that no longer runs) are removed first, so a rerun leaves no stray files.

    Before the rename the temporary must exist (a file must be a regular file) and pass `check`
    (raising from it drops the temporary): a writer that failed without raising never leaves a
    file under the final name.

    Args:
        path: the final file or folder.
        is_dir: whether a folder is written (the temporary is then an empty folder).
        check: called with the finished temporary (closed by the writer) before the rename.

    Returns:
        A context manager yielding the temporary path to write.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    stem, suffix = _temp_parts(final, is_dir)
    remove_stale_temporaries(final, is_dir=is_dir)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}.tmp{_owner_tag()}-", suffix=suffix, dir=final.parent))
    if is_dir:
        tmp.chmod(umask_mode(0o777))  # mkdtemp makes it private; an output folder is an ordinary one
    else:
        tmp.rmdir()  # the writer creates the file itself (open() applies the umask)
    try:
        yield tmp
        if not (tmp.is_dir() if is_dir else tmp.is_file() and not tmp.is_symlink()):
            raise AvsimOutputError(final, "the writer left no output")
        if check is not None:
            check(tmp)
        if is_dir and final.exists():
            old = final.with_name(f".{_short(final.name)}.old{_owner_tag()}")
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()
        raise


def current_umask() -> int:
    """The process's umask, read without changing it where the system tells it (Linux: /proc/self/status).

    Elsewhere it is set and restored at once (`os.umask` has no read-only form); threads that
    create files in between would see 0o077 for that instant, so avsim reads it before starting any.

    Returns:
        The umask bits (e.g. 0o022).
    """
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def umask_mode(mode: int = 0o777) -> int:
    """`mode` as a new file or folder gets it under the user's umask (`mode & ~umask`).

    Args:
        mode: the requested permission bits (0o777 for folders, 0o666 for files).

    Returns:
        The bits to `chmod` a folder or file to that `tempfile` created private.
    """
    return mode & ~current_umask()


MAX_TEMP_STEM_CHARS = 120  # a longer name's temporary is named by its first 100 characters and a hash (255-byte names)


def _short(name: str) -> str:
    """`name`, or its first 100 characters and 8 hex digits of its hash when longer than `MAX_TEMP_STEM_CHARS`."""
    if len(name) <= MAX_TEMP_STEM_CHARS:
        return name
    return f"{name[:100]}~{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def _temp_parts(final: Path, is_dir: bool) -> tuple[str, str]:
    """(stem, suffix) of the temporaries of `final`: a file keeps its suffix, a long name is shortened."""
    stem, suffix = (final.name, "") if is_dir else (final.stem, final.suffix)
    return _short(stem), suffix if len(suffix) <= 16 else ""


def _owner_tag() -> str:
    """`<host>.<pid>` of this process, written into temporary names."""
    return f"{_host()}.{os.getpid()}"


def _host() -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in os.uname().nodename)[:40] or "host"


def _pid_running(pid: int) -> bool:
    """Whether process `pid` still runs: it exists and is not a zombie (killed, not yet reaped by its
    parent: a SIGKILLed Ray worker stays one until the raylet reaps it, while its task is retried)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """Linux: the state field of /proc/<pid>/stat is Z (zombie) or X (dead); elsewhere False."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    fields = stat[stat.rfind(")") + 1 :].split()  # the command name in parentheses may hold spaces
    return bool(fields) and fields[0] in ("Z", "X")


def remove_stale_temporaries(path: str | os.PathLike[str], *, is_dir: bool = False) -> list[Path]:
    """Remove what a killed writer of `path` left beside it (its temporary, a moved-aside old copy).

    Only leftovers of this host whose process is gone are removed: a writer that still runs,
    or one on another machine sharing the folder, is never disturbed. Temporaries of temporaries
    (a writer that wrote into another's temporary, both killed) go too.

    Args:
        path: the final file or folder.
        is_dir: whether it is a folder.

    Returns:
        the paths removed.
    """
    final = Path(path)
    if not final.parent.is_dir():
        return []
    stem, suffix = _temp_parts(final, is_dir)
    host = re.escape(_host())
    # a writer inside a writer (`avsim run sim` runs `avsim sim` into its own temporary) leaves `..<stem>.tmp<host>.<pid>-...`:
    # leading dots repeat, and the outer writer's pid decides
    pattern = re.compile(rf"^\.+(?:{re.escape(stem)}\.tmp|{re.escape(_short(final.name))}\.old){host}\.(\d+)(?:-.*{re.escape(suffix)})?$")
    removed = []
    for entry in final.parent.iterdir():
        m = pattern.match(entry.name)
        if m and not _pid_running(int(m.group(1))):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


@contextlib.contextmanager
def output_errors(out: str | os.PathLike[str]) -> Iterator[None]:
    """Report a write that failed for lack of room or permission as one line naming `out`.

    An exception whose errno (`write_errno`: an `OSError`'s, or the one polars or pyarrow quote in
    their message) is in `OUTPUT_ERRNO_REASONS` (disk full, quota, read-only file system) becomes
    `AvsimOutputError(out, reason)`, e.g. ``OUT: disk full``; every other exception passes unchanged. Writers inside use `atomic_output_path`, so nothing half-written
    is left under a final name and a rerun after freeing space continues from what was finished.

    Args:
        out: the output folder (or file) named in the message.

    Returns:
        A context manager.
    """
    try:
        yield
    except Exception as exc:
        reason = OUTPUT_ERRNO_REASONS.get(write_errno(exc) or 0)
        if reason is None:
            raise
        raise AvsimOutputError(out, reason) from None


_ERRNO_TEXT = re.compile(r"\(os error (\d+)\)|\[Errno (\d+)\]")


def write_errno(exc: BaseException) -> int | None:
    """The errno of a failed write: an `OSError`'s own, or the one a library quotes in its message
    (polars: ``... No space left on device (os error 28)``; pyarrow: ``[Errno 28] ...``).

    Args:
        exc: the exception.

    Returns:
        The errno, or None.
    """
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno
    m = _ERRNO_TEXT.search(str(exc))
    return int(m.group(1) or m.group(2)) if m else None


@contextlib.contextmanager
def removed_if_empty_on_error(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Remove `folder` (and the parents made for it) when the block fails and leaves them empty.

    A refused or failed run (a full disk, a bad input found late) then leaves no empty output
    folder behind; a folder that was there before is never removed.

    Args:
        folder: the output folder a command is about to create.

    Returns:
        A context manager yielding the folder.
    """
    path = Path(folder)
    new = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        new.append(probe)
        probe = probe.parent
    try:
        yield path
    except BaseException:
        for made in new:  # deepest first
            with contextlib.suppress(OSError):  # not empty, or gone
                made.rmdir()
        raise
