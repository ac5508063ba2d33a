"""Reading torch.distributed.checkpoint (DCP) folders without unpickling untrusted code.

DCP's `FileSystemReader` reads a checkpoint's `.metadata` with plain `pickle.load`, and its
default load planner reads every non-tensor item (optimizer hyper-parameters, counters) with
`torch.load(weights_only=False)`: a checkpoint folder someone else wrote could run any code on
resume. Here `.metadata` goes through an unpickler that admits only the classes DCP metadata is
made of (listed in `METADATA_GLOBALS`; anything else is refused with the name of the global), and
non-tensor items through `torch.load(weights_only=True)` (tensors, numbers, strings, containers).
Tensor items were already read with `weights_only=True` by DCP itself.

Every storage entry of the metadata (`_StorageInfo.relative_path`, offset, length) is checked
before anything is read: the path must be a plain relative path that resolves to a regular file
inside the checkpoint folder (no absolute path, no `..`, no link out, no FIFO or device), and
the byte range must lie within that file.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import ReadItem

from avsim.core.errors import AvsimInputError
from avsim.core.safe_files import contained_file

MAX_METADATA_BYTES = 256 * 1024**2  # a DCP .metadata of a 2B model is a few MB

# (module, name) of every global a DCP .metadata pickle of torch 2.13 refers to
METADATA_GLOBALS = frozenset({
    ("torch.distributed.checkpoint.metadata", name)
    for name in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
                 "TensorProperties", "MetadataIndex", "StorageMeta")
} | {
    ("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),  # maps a layout's name to a torch.layout, nothing else
    ("pathlib", "PosixPath"), ("collections", "OrderedDict"),
})  # fmt: skip
_TORCH_ENUM_NAMES = frozenset(
    name for name in dir(torch) if isinstance(getattr(torch, name, None), (torch.dtype, torch.layout, torch.memory_format))
)


class _MetadataUnpickler(pickle.Unpickler):
    """Admits only DCP metadata classes and torch dtype/layout/memory-format constants."""

    def __init__(self, stream: io.BytesIO, path: Path) -> None:
        super().__init__(stream)
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in METADATA_GLOBALS or (module == "torch" and name in _TORCH_ENUM_NAMES):
            return super().find_class(module, name)
        raise AvsimInputError(self.path, "global", f"{module}.{name} is not part of DCP checkpoint metadata; refused")


def read_dcp_metadata(path: str | os.PathLike[str]) -> Metadata:
    """A DCP `.metadata` file read with the restricted unpickler.

    Args:
        path: the `.metadata` file.

    Returns:
        the checkpoint's `Metadata`.
    """
    p = Path(path)
    if not p.is_file():
        raise AvsimInputError(p, "file", "missing: not a complete checkpoint")
    if p.stat().st_size > MAX_METADATA_BYTES:
        raise AvsimInputError(p, "file", f"{p.stat().st_size} bytes, more than DCP metadata can be ({MAX_METADATA_BYTES})")
    try:
        metadata = _MetadataUnpickler(io.BytesIO(p.read_bytes()), p).load()
    except AvsimInputError:
        raise
    except Exception as exc:  # a truncated or corrupt pickle: unpickling errors of many kinds
        raise AvsimInputError(p, "metadata", f"cannot read DCP metadata: {type(exc).__name__}: {exc}") from None
    if not isinstance(metadata, Metadata):
        raise AvsimInputError(p, "metadata", f"holds a {type(metadata).__name__}, not DCP Metadata")
    check_storage_entries(metadata, p)
    return metadata


def check_storage_entries(metadata: Metadata, path: Path) -> None:
    """Every storage entry must name a byte range of a regular file inside the checkpoint folder.

    Args:
        metadata: the checkpoint's metadata.
        path: its `.metadata` file (the folder is its parent).
    """
    storage = getattr(metadata, "storage_data", None)
    if not isinstance(storage, dict):
        raise AvsimInputError(path, "storage_data", f"must be a mapping of storage entries, got {type(storage).__name__}")
    sizes: dict[str, int] = {}
    for index, info in storage.items():
        where = f"storage_data[{getattr(index, 'fqn', '?')!s:.200}]"
        raw = getattr(info, "relative_path", None)
        relative = str(raw)
        if relative not in sizes:  # refused unless a relative path to a regular file inside the folder
            sizes[relative] = contained_file(path.parent, raw, path, f"{where}.relative_path").stat().st_size
        offset, length = getattr(info, "offset", None), getattr(info, "length", None)
        if type(offset) is not int or type(length) is not int or offset < 0 or length < 0 or offset + length > sizes[relative]:
            raise AvsimInputError(path, where, f"bytes [{offset!r}, +{length!r}) are not within {relative} ({sizes[relative]} bytes)")
        descriptors = getattr(info, "transform_descriptors", None)
        if descriptors is not None and not (isinstance(descriptors, (list, tuple)) and all(isinstance(d, str) for d in descriptors)):
            raise AvsimInputError(path, f"{where}.transform_descriptors", "must be a list of strings")


class SafeFileSystemReader(FileSystemReader):
    """`FileSystemReader` whose `.metadata` is read by `read_dcp_metadata`."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        path = Path(str(self.path)) / ".metadata"
        metadata = read_dcp_metadata(path)
        storage_meta = getattr(metadata, "storage_meta", None) or StorageMeta()
        storage_meta.load_id = self.load_id
        metadata.storage_meta = storage_meta
        return metadata


class SafeLoadPlanner(DefaultLoadPlanner):
    """`DefaultLoadPlanner` reading non-tensor items with `torch.load(weights_only=True)`
    (the rest of `DefaultLoadPlanner.load_bytes` unchanged: where the object goes)."""

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        fqn = read_item.dest_index.fqn
        try:
            obj = torch.load(value, weights_only=True)
        except pickle.UnpicklingError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise AvsimInputError(fqn, "checkpoint item", f"refused by the weights-only loader: {first}") from None
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[fqn], obj)
        else:
            self.state_dict[fqn] = obj


def load_dcp(state: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """`dcp.load` of a checkpoint folder that may come from anyone: no untrusted unpickling.

    Args:
        state: what to load (DCP state dict / Stateful objects), filled in place.
        path: the checkpoint folder (DCP shards and `.metadata`).

    Returns:
        None; a refused or unreadable checkpoint raises `AvsimInputError` (one line).
    """
    read_dcp_metadata(Path(path) / ".metadata")  # its own one-line error before DCP wraps it
    try:
        dcp.load(state, storage_reader=SafeFileSystemReader(path), planner=SafeLoadPlanner())
    except CheckpointException as exc:
        errors = [err for err, _ in exc.failures.values()]
        for err in errors:
            if isinstance(err, AvsimInputError):
                raise err from None
        first = str(errors[0]).strip().splitlines()[0] if errors and str(errors[0]).strip() else "unknown failure"
        raise AvsimInputError(path, "checkpoint", f"cannot load: {first}") from None
