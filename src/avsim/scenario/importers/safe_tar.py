"""Webdataset tars read in memory: member names are never used as file-system paths.

RDS-HQ ships each clip as one-sample webdataset tars whose members are named
``<clip_id>.<frame:06d>.<field>.<ext>`` or ``<clip_id>.<field>.<ext>``. A tar is untrusted:
a member named ``../x`` or ``/etc/x`` would escape an extraction folder, and links or device
nodes have no business in a sample. `read_tar_members` refuses all of these and returns the
regular members' bytes; `decode_member` turns ``.json`` / ``.npy`` payloads into Python and
numpy values (``np.load(allow_pickle=False)``).
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.safe_files import file_kind, regular_file

# A single RDS-HQ member is at most a few MB (lane JSON); this bounds memory on a hostile tar.
MAX_MEMBER_BYTES = 512 * 1024 * 1024
# All members read from one tar together: an RDS-HQ sample is tens of MB; this bounds a tar of
# many members that are each under the member cap (a gzip bomb of several 400 MB members).
MAX_TOTAL_BYTES = 1024 * 1024 * 1024


def check_member_name(name: str, tar_path: str | os.PathLike[str]) -> None:
    """Raise `AvsimInputError` if `name` could escape a folder or is not a plain relative name."""
    pure = PurePosixPath(name)
    if (
        not name
        or "\\" in name
        or "\x00" in name
        or pure.is_absolute()
        or any(part == ".." for part in pure.parts)
    ):
        raise AvsimInputError(tar_path, f"member {name!r}", "unsafe member name (path traversal); refused")


def read_tar_members(
    path: str | os.PathLike[str], *, max_member_bytes: int = MAX_MEMBER_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES, suffixes: tuple[str, ...] | None = None,
) -> dict[str, bytes]:
    """Return ``{member name: bytes}`` for the regular members of the tar at `path`.

    Args:
        path: the tar (plain or compressed).
        max_member_bytes: the most one member may hold.
        max_total_bytes: the most all members read may hold together.
        suffixes: read only members whose names end in one of these (None: all); the others
            are checked (name, type) but their data is never read.

    Returns:
        the members' bytes by name. Directories are skipped; links, devices and FIFOs, unsafe
        names, duplicate names and sizes over the caps raise `AvsimInputError`. Nothing is
        written to disk.
    """
    if file_kind(path) == "missing":
        raise AvsimInputError(path, "file", "not found")
    path = regular_file(path, "file")  # a FIFO or a device is named, never opened
    members: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, mode="r:*") as tar:
            for info in tar:
                check_member_name(info.name, path)
                if info.isdir():
                    continue
                if not info.isfile():
                    raise AvsimInputError(path, f"member {info.name!r}", "not a regular file (link or device); refused")
                if suffixes is not None and not info.name.endswith(suffixes):
                    continue
                if info.size > max_member_bytes:
                    raise AvsimInputError(path, f"member {info.name!r}", f"{info.size} bytes exceeds {max_member_bytes}")
                total += info.size
                if total > max_total_bytes:
                    raise AvsimInputError(path, "members", f"more than {max_total_bytes} bytes in all (at {info.name!r})")
                if info.name in members:
                    raise AvsimInputError(path, f"member {info.name!r}", "duplicate member name")
                handle = tar.extractfile(info)
                if handle is None:  # pragma: no cover - isfile() members always have data
                    raise AvsimInputError(path, f"member {info.name!r}", "unreadable member")
                data = handle.read()
                if len(data) != info.size:
                    raise AvsimInputError(path, f"member {info.name!r}", "truncated member data")
                members[info.name] = data
    except FileNotFoundError:
        raise AvsimInputError(path, "file", "not found") from None
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise AvsimInputError(path, "tar", f"unreadable or truncated tar: {exc}") from None
    return members


def split_sample_key(name: str) -> tuple[str, str]:
    """Split a webdataset member name into ``(clip_id, key)`` at the first dot.

    ``"clip.000003.pose.camera_front_wide_120fov.npy"`` -> ``("clip", "000003.pose.camera_front_wide_120fov.npy")``.
    """
    base = PurePosixPath(name).name
    clip_id, _, key = base.partition(".")
    return clip_id, key


def decode_member(name: str, data: bytes, tar_path: str | os.PathLike[str]) -> Any:
    """Decode one member by extension: ``.json`` -> Python value, ``.npy`` -> ndarray."""
    try:
        if name.endswith(".json"):
            return json.loads(data.decode("utf-8"))
        if name.endswith(".npy"):
            return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, UnicodeDecodeError, EOFError, OSError) as exc:
        raise AvsimInputError(tar_path, f"member {name!r}", f"cannot decode: {exc}") from None
    except RecursionError:
        raise AvsimInputError(tar_path, f"member {name!r}", "cannot decode: nested too deeply") from None
    raise AvsimInputError(tar_path, f"member {name!r}", "unsupported member type (expected .json or .npy)")


def read_sample(path: str | os.PathLike[str], *, suffixes: tuple[str, ...] = (".json", ".npy")) -> dict[str, Any]:
    """Read a one-sample webdataset tar: ``{key: decoded value}`` with the clip id stripped.

    Members whose names end in none of `suffixes` are ignored; all keys must share one clip id.
    """
    members = read_tar_members(path, suffixes=suffixes)
    sample: dict[str, Any] = {}
    clip_ids: set[str] = set()
    for name, data in sorted(members.items()):
        clip_id, key = split_sample_key(name)
        clip_ids.add(clip_id)
        sample[key] = decode_member(name, data, path)
    if len(clip_ids) > 1:
        raise AvsimInputError(path, "members", f"members of several clips in one sample: {sorted(clip_ids)[:3]}")
    return sample
