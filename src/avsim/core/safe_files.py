"""Paths from anyone: a file that is not a regular file, or a path that leaves its folder, is one line.

`Path.is_file()` is False for a FIFO, a device or a dangling link alike, so "missing" would be
reported for a `/dev/zero` symlink or a named pipe (and opening either blocks or never ends).
`regular_file` tells them apart before anything is opened. `contained_file` resolves a relative
path read from a file (a checkpoint's storage entry, a manifest's folder, a job file's input)
and refuses absolute paths, `..`, and links that lead out of the folder that holds it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from avsim.core.errors import AvsimInputError

_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))  # fmt: skip


def file_kind(path: str | os.PathLike[str]) -> str | None:
    """What `path` is when it is not a regular file (following links), or None for a regular file.

    Args:
        path: any path.

    Returns:
        None for a regular file; else "missing", "a dangling link", "a named pipe (FIFO)", ...
    """
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        return "a dangling link" if p.is_symlink() else "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def regular_file(path: str | os.PathLike[str], field: str = "file") -> Path:
    """`path` when it is a regular file (or a link to one), else one line saying what it is.

    Args:
        path: the input file.
        field: the field named in the message.

    Returns:
        the path.
    """
    p = Path(path)
    kind = file_kind(p)
    if kind == "missing":
        raise AvsimInputError(p, field, "missing")
    if kind is not None:
        raise AvsimInputError(p, field, f"is {kind}, not a regular file")
    return p


def contained_file(root: str | os.PathLike[str], relative: object, source: str | os.PathLike[str], field: str) -> Path:
    """A relative path read from `source`, resolved inside `root`: a regular file that stays there.

    Args:
        root: the folder the path is relative to (and must stay within, links resolved).
        relative: the value read from the file (must be a relative path string).
        source: the file it was read from (named in errors).
        field: the field it was read from.

    Returns:
        `root / relative`.
    """
    target = contained_path(root, relative, source, field)
    kind = file_kind(target)
    if kind is not None:
        raise AvsimInputError(source, field, f"{str(relative)[:200]!r} is {kind}, not a regular file in {root}")
    return target


def contained_path(root: str | os.PathLike[str], relative: object, source: str | os.PathLike[str], field: str) -> Path:
    """As `contained_file`, for a path that may be a folder or not exist yet (nothing is opened).

    Args:
        root: the folder the path is relative to.
        relative: the value read from the file.
        source: the file it was read from.
        field: the field it was read from.

    Returns:
        `root / relative`; one line when it is not a plain relative path, or leads out of `root`.
    """
    if not isinstance(relative, (str, os.PathLike)) or not str(relative) or "\0" in str(relative):
        raise AvsimInputError(source, field, f"must be a non-empty relative path, got {str(relative)[:200]!r}")
    rel = PurePosixPath(os.fspath(relative))
    if rel.is_absolute() or ".." in rel.parts or str(relative).startswith("\\"):
        raise AvsimInputError(source, field, f"{str(relative)[:200]!r} leads outside {root} (absolute or '..'); refused")
    base = Path(root).resolve()
    target = Path(root) / rel
    resolved = target.resolve()
    if resolved != base and base not in resolved.parents:
        raise AvsimInputError(source, field, f"{str(relative)[:200]!r} resolves outside {root} (a link); refused")
    return target
