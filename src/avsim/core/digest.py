"""Content digests of a job's inputs: what a resumed job compares to decide an output is current.

A job (one render, one labels run, one dataset item) records `input_digest(...)` of the files
it read and the options it was given beside its outputs; a rerun skips the job only when its
outputs exist *and* the digest it would record now equals the recorded one. The digest covers
the files' relative names and bytes, the options as canonical JSON and avsim's version, so a
changed scenario, option or release re-runs the job while renaming the parent folder does not.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import avsim

DIGEST_SCHEME = "avsim-input-digest-v1"
_CHUNK_BYTES = 1 << 20


def folder_files(folder: Path) -> list[Path]:
    """The regular files under `folder` that are inputs: hidden names (temporaries) left out.

    Args:
        folder: a directory.

    Returns:
        The files, sorted by their path relative to `folder`.
    """
    files = [
        path
        for path in folder.rglob("*")
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    ]
    return sorted(files, key=lambda path: path.relative_to(folder).as_posix())


def input_digest(files: Iterable[Path], root: Path, options: Mapping[str, Any],
                 progress: Callable[[int, int], None] | None = None) -> str:  # fmt: skip
    """sha256 (hex) over files (relative name, size, bytes), canonical-JSON options and avsim's version.

    Args:
        files: the input files; each must lie under `root`. Their order does not matter.
        root: the folder the names are taken relative to (e.g. the scenario folder).
        options: JSON-serialisable options of the job (non-JSON values are hashed by `str`).
        progress: called with (bytes hashed, bytes in all) after each chunk (gigabytes take seconds).

    Returns:
        64 hex characters.
    """
    digest = hashlib.sha256()
    digest.update(f"{DIGEST_SCHEME}\0{avsim.__version__}\0".encode())
    ordered = sorted(files, key=lambda p: p.relative_to(root).as_posix())
    sizes = [path.stat().st_size for path in ordered]
    done, total = 0, sum(sizes)
    for path, size in zip(ordered, sizes):
        digest.update(f"{path.relative_to(root).as_posix()}\0{size}\0".encode())
        with path.open("rb") as stream:
            for chunk in iter(lambda: stream.read(_CHUNK_BYTES), b""):
                digest.update(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
    canonical = json.dumps(dict(options), sort_keys=True, separators=(",", ":"), default=str)
    digest.update(b"\0options\0" + canonical.encode())
    return digest.hexdigest()


def folder_digest(folder: Path, options: Mapping[str, Any], progress: Callable[[int, int], None] | None = None) -> str:
    """`input_digest` of every input file of `folder` (see `folder_files`) and `options`.

    Args:
        folder: an input folder (a scenario folder, a source-data folder).
        options: JSON-serialisable job options.
        progress: as `input_digest`'s.

    Returns:
        64 hex characters.
    """
    return input_digest(folder_files(folder), folder, options, progress)
