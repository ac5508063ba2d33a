"""The files an OpenSCENARIO scenario refers to: its road network, its catalogs, the scenario of a
parameter distribution; read from disk within a root folder, or from a converted scenario's metadata.

A scenario is untrusted input. Its references (`LogicFile@filepath`, `Directory@path`,
`ScenarioFile@filepath`) are taken relative to its own folder, as esmini takes them, and must stay
inside `root` (the scenario's folder unless the caller names a wider one, e.g. the folder holding
esmini's `resources/` for its examples' `../xodr/e6mini.xodr`); links are resolved before the check.
Every file is size-checked before it is read.

`FolderSources` records every file it served; `embed_sources` packs them (zlib, base64, in chunks
of at most `CHUNK_CHARS` characters: a metadata string's limit is 64 KiB) into the converted
scenario's metadata, so that `avsim sim --agents storyboard` and the parameter edits run the same
storyboard later without the original files. `EmbeddedSources` serves them back, each bounded in
size before it is inflated and checked against its SHA-256.
"""

from __future__ import annotations

import base64
import hashlib
import os
import posixpath
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from avsim.core.errors import AvsimInputError
from avsim.core.safe_files import file_kind

MAX_SOURCE_BYTES = 256 * 1024**2  # one referenced file (a city-scale OpenDRIVE file reaches ~200 MB)
MAX_EMBEDDED_BYTES = 48 * 1024**2  # all of a scenario's files, compressed (scenario.json holds at most 64 MiB)
MAX_CATALOG_FILES = 1000
CHUNK_CHARS = 60_000
EMBED_FORMAT = "avsim-openscenario-sources-v1"


class Sources(Protocol):
    """Where a scenario's files come from (see the module docstring)."""

    main: str

    def read(self, relative: str, field: str) -> bytes:
        """The bytes of `relative` (as written in the main file), naming `field` in errors."""
        ...

    def listing(self, relative: str, field: str) -> list[str]:
        """The `.xosc` files of folder `relative`, as paths relative to the main file's folder, sorted."""
        ...

    def name(self, relative: str) -> str:
        """What errors call the file `relative` (its path or its embedded name)."""
        ...


def normalise(relative: str) -> str:
    """A reference as a normalised POSIX path relative to the main file's folder (backslashes read
    as separators, as esmini does on Windows files)."""
    return posixpath.normpath(relative.replace("\\", "/"))


class FolderSources:
    """Files on disk, relative to the main file's folder and confined to `root` (see the module docstring).

    Args:
        main: the main .xosc file.
        root: the folder references must stay in (default: the main file's folder).
    """

    def __init__(self, main: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(main)
        self.main = self.path.name
        self.base = self.path.parent
        self.root = Path(root) if root is not None else self.base
        self.served: dict[str, bytes] = {}
        if not self.root.is_dir():
            raise AvsimInputError(self.root, "--root", "is not a folder")
        if not _inside(self.base.resolve(), self.root.resolve()):
            raise AvsimInputError(self.path, "--root", f"the scenario is not inside {self.root}")

    def _target(self, relative: str, field: str) -> Path:
        if not isinstance(relative, str) or not relative.strip() or "\0" in relative:
            raise AvsimInputError(self.path, field, f"expected a file path, got {str(relative)[:200]!r}")
        target = Path(relative.replace("\\", "/"))
        target = target if target.is_absolute() else self.base / target
        if not _inside(target.resolve(), self.root.resolve()):
            raise AvsimInputError(self.path, field, f"{relative[:200]!r} leads outside {self.root}; refused (name a wider --root to allow it)")
        return target

    def key(self, relative: str, field: str) -> str:
        """The normalised name of a reference (see `normalise`; an absolute one made relative to the
        main file's folder), the name `EmbeddedSources` serves it by."""
        target = self._target(relative, field)
        return normalise(os.path.relpath(target, self.base) if Path(relative.replace("\\", "/")).is_absolute() else relative)

    def name(self, relative: str) -> str:
        return str(self.base / relative.replace("\\", "/"))

    def read(self, relative: str, field: str) -> bytes:
        target = self._target(relative, field)
        kind = file_kind(target)
        if kind == "missing":
            raise AvsimInputError(self.path, field, f"{relative[:200]!r}: no such file ({target})")
        if kind is not None:
            raise AvsimInputError(self.path, field, f"{relative[:200]!r} is {kind}, not a regular file")
        size = target.stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise AvsimInputError(target, field, f"{size} bytes is over the {MAX_SOURCE_BYTES}-byte limit")
        try:
            data = target.read_bytes()
        except OSError as exc:
            raise AvsimInputError(target, field, f"cannot read: {exc.strerror or exc}") from None
        self.served[self.key(relative, field)] = data
        return data

    def listing(self, relative: str, field: str) -> list[str]:
        folder = self._target(relative, field)
        if not folder.is_dir():
            raise AvsimInputError(self.path, field, f"{relative[:200]!r} is not a folder ({folder})")
        names = sorted(p.name for p in folder.iterdir() if p.suffix.lower() == ".xosc" and p.is_file())
        if len(names) > MAX_CATALOG_FILES:
            raise AvsimInputError(folder, field, f"more than {MAX_CATALOG_FILES} catalog files")
        rel = self.key(relative, field)
        return [posixpath.join(rel, n) for n in names]


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


class EmbeddedSources:
    """Files packed into a converted scenario's metadata (`embed_sources`), served by their names.

    Args:
        doc: `metadata["openscenario"]["sources"]`.
        where: the scenario named in errors.
    """

    def __init__(self, doc: Any, where: str) -> None:
        self.where = where
        if not isinstance(doc, dict) or doc.get("format") != EMBED_FORMAT or not isinstance(doc.get("files"), dict):
            raise AvsimInputError(where, "metadata.openscenario.sources", f"expected the embedded files of a converted scenario ({EMBED_FORMAT})")
        self.main = str(doc.get("main", ""))
        self.files: dict[str, Any] = doc["files"]
        if self.main not in self.files:
            raise AvsimInputError(where, "metadata.openscenario.sources.main", f"{self.main[:200]!r} is not among the embedded files")

    def name(self, relative: str) -> str:
        return f"{self.where}[openscenario:{normalise(relative)}]"

    def read(self, relative: str, field: str) -> bytes:
        key = normalise(relative)
        entry = self.files.get(key)
        if entry is None:
            raise AvsimInputError(self.where, field, f"{relative[:200]!r} is not among the scenario's embedded OpenSCENARIO files")
        return _unpack(entry, f"{self.where}[openscenario:{key}]")

    def listing(self, relative: str, field: str) -> list[str]:
        folder = normalise(relative)
        return sorted(k for k in self.files if posixpath.dirname(k) == folder and k.lower().endswith(".xosc"))


def _unpack(entry: Any, where: str) -> bytes:
    """One embedded file: its declared size bounded before inflating, then its digest checked."""
    if not isinstance(entry, dict):
        raise AvsimInputError(where, "entry", "expected an object")
    size, digest, chunks = entry.get("bytes"), entry.get("sha256"), entry.get("zlib_base64")
    if type(size) is not int or not 0 <= size <= MAX_SOURCE_BYTES or not isinstance(digest, str) or not isinstance(chunks, list):
        raise AvsimInputError(where, "entry", f"expected bytes (at most {MAX_SOURCE_BYTES}), sha256 and zlib_base64 chunks")
    if not all(isinstance(c, str) for c in chunks) or sum(len(c) for c in chunks) > MAX_EMBEDDED_BYTES * 2:
        raise AvsimInputError(where, "zlib_base64", "expected strings within the embedding limit")
    try:
        packed = base64.b64decode("".join(chunks), validate=True)
        inflater = zlib.decompressobj()
        data = inflater.decompress(packed, size + 1)
    except (ValueError, zlib.error) as exc:
        raise AvsimInputError(where, "zlib_base64", f"cannot decode: {exc}") from None
    if len(data) != size or not inflater.eof:
        raise AvsimInputError(where, "bytes", f"inflates to a different size than the declared {size} bytes")
    if hashlib.sha256(data).hexdigest() != digest:
        raise AvsimInputError(where, "sha256", "the file does not match its digest")
    return data


def _chunks(text: str) -> Iterator[str]:
    for i in range(0, len(text), CHUNK_CHARS):
        yield text[i : i + CHUNK_CHARS]


def embed_sources(main: str, files: dict[str, bytes]) -> dict[str, Any]:
    """The metadata document of a scenario's files (see the module docstring).

    Args:
        main: the main file's name (a key of `files`).
        files: normalised name -> bytes (`FolderSources.served`).

    Returns:
        A JSON-ready document; same files, same document.
    """
    out: dict[str, Any] = {}
    total = 0
    for key in sorted(files):
        data = files[key]
        packed = base64.b64encode(zlib.compress(data, 9)).decode("ascii")
        total += len(packed)
        if total > MAX_EMBEDDED_BYTES:
            raise AvsimInputError(main, "sources", f"the scenario's files exceed the {MAX_EMBEDDED_BYTES}-byte limit for embedding them compressed")
        out[key] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "zlib_base64": list(_chunks(packed))}
    return {"format": EMBED_FORMAT, "main": main, "files": out}
