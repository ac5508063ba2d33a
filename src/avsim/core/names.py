"""Names that become file names: one rule for every name read from a file and later joined to a path.

Camera names (a scenario's rig, a ClipGT ``camera:*`` sensor), clip ids (a label folder's
`index.json`), variant names and folders (an `avsim edit` manifest), job and dataset item names:
each ends up as a file or folder name (``OUT/<clip>/<clip>.<camera>.mp4``, ``labels/images/<camera>/``).
A name from someone else's file is checked where it is read (`check_name`: one line naming the file
and field), and the writer joins it with `join_names`, which checks again that every part is one
plain path component and that the result stays inside the folder (the last guard, should a name
arrive by a path that skipped the first).

The rule (`NAME_PATTERN`): 1 to `MAX_NAME_CHARS` characters out of ASCII letters, digits, ``_``,
``-`` and ``.``, not starting with ``.`` or ``-`` (no hidden files, no option look-alikes, never
``.`` or ``..``). Every camera and clip name of the real datasets avsim reads fits it
(``CAM_FRONT``, ``ring_front_center``, ``FRONT_LEFT``, ``camera_front_wide_120fov``,
``segment-10017090168044687777_6380_000_6400_000_with_camera_labels``).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from avsim.core.errors import AvsimInputError, AvsimOutputError, AvsimValueError

MAX_NAME_CHARS = 100  # two names, a frame number and a temporary's suffix still fit a 255-byte file name
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_UNSAFE_RUNS = re.compile(r"[^A-Za-z0-9._-]+")
NAME_RULE = f"1 to {MAX_NAME_CHARS} ASCII letters, digits, '_', '-' or '.', not starting with '.' or '-'"


def name_problem(name: object) -> str | None:
    """Why `name` may not become a file name, or None when it may.

    Args:
        name: the value read (any type).

    Returns:
        None for a safe name; else a one-line reason quoting (a prefix of) the value.
    """
    if not isinstance(name, str):
        return f"must be a string, got {type(name).__name__}"
    shown = repr(name[:60] + ("..." if len(name) > 60 else ""))
    if not name or len(name) > MAX_NAME_CHARS:
        return f"{shown} has {len(name)} characters; a name has {NAME_RULE}"
    if not NAME_PATTERN.fullmatch(name):
        return f"{shown} is not a safe file name; a name has {NAME_RULE}"
    return None


def check_name(name: object, source: str | os.PathLike[str], field: str) -> str:
    """`name` when it is a safe file name, else `AvsimInputError(source, field, reason)`.

    Args:
        name: the value read from `source`.
        source: the file (or option) it came from, named in the message.
        field: the field it came from.

    Returns:
        The name.
    """
    problem = name_problem(name)
    if problem is not None:
        raise AvsimInputError(source, field, problem)
    assert isinstance(name, str)
    return name


def require_name(name: object, what: str) -> str:
    """As `check_name` for a value built in memory (a constructor's argument): `AvsimValueError`.

    Args:
        name: the value.
        what: the field named in the message, e.g. ``rig.names[2]``.

    Returns:
        The name.
    """
    problem = name_problem(name)
    if problem is not None:
        raise AvsimValueError(f"{what}: {problem}")
    assert isinstance(name, str)
    return name


def join_names(folder: str | os.PathLike[str], *parts: str) -> Path:
    """`folder / part / ...`, where each part is a file name made of safe names (never a path).

    A part may join names with dots and carry a suffix (``f"{clip}.{camera}.mp4"``); it must be one
    path component (no ``/``, ``\\``, NUL, not ``.``/``..``, not absolute), and the joined path must
    stay inside `folder` (links in `folder` itself are not followed: the output folder is the
    user's choice).

    Args:
        folder: the output folder.
        *parts: the components below it.

    Returns:
        The joined path; `AvsimOutputError` naming `folder` when a part would leave it.
    """
    base = Path(folder)
    for part in parts:
        text = str(part)
        if not text or text in (".", "..") or "/" in text or "\\" in text or "\0" in text or len(text.encode()) > 255:
            raise AvsimOutputError(base, f"refusing to write {text[:80]!r}: not one plain file name inside this folder")
    target = base.joinpath(*parts)
    if os.path.commonpath([os.path.abspath(base), os.path.abspath(target)]) != os.path.abspath(base):
        raise AvsimOutputError(base, f"refusing to write {str(target)[:120]!r}: outside this folder")
    return target


def safe_name(text: str) -> str:
    """A safe name made from any id (a scenario id becomes the clip name of its files).

    Args:
        text: the id.

    Returns:
        The id with runs of other characters than letters, digits, ``.``, ``_``, ``-`` replaced by
        ``_`` (outer ``.``/``_`` and leading ``-`` stripped; "clip" if nothing is left); an id longer
        than `MAX_NAME_CHARS` keeps its first characters and ends in 8 hex digits of its hash.
    """
    out = _UNSAFE_RUNS.sub("_", str(text)).strip("._").lstrip("-") or "clip"
    if len(out) > MAX_NAME_CHARS:
        out = f"{out[: MAX_NAME_CHARS - 9]}_{hashlib.sha256(str(text).encode()).hexdigest()[:8]}"
    return out
