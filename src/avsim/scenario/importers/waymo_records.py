"""Waymo TFRecord files read by hand (no TensorFlow): the record framing, its CRCs, and what a record holds.

Each record is

    uint64 length (little endian) | uint32 masked CRC-32C of the 8 length bytes |
    data[length] | uint32 masked CRC-32C of data

and both CRCs are verified. A record holds a motion ``Scenario`` (`avsim.scenario.importers.waymo`)
or a perception ``Frame`` (`avsim.scenario.importers.waymo_frame`); `payload_is_frame` tells them
apart, so each importer can say when it was given the other's file.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from avsim.core.errors import AvsimInputError

_MAX_FIRST_RECORD_BYTES = 1 << 31

_CRC32C_POLY = 0x82F63B78  # Castagnoli, reflected
_MASK_DELTA = 0xA282EAD8


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CRC32C_POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()

try:  # a C implementation when one is installed; the pure-Python loop is the fallback
    import google_crc32c
except ImportError:  # looked up once: a failed import is not cached and crc32c runs twice per record
    google_crc32c = None


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of `data`, as TFRecord uses it."""
    if google_crc32c is not None:
        return int(google_crc32c.value(bytes(data)))
    crc = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC: rotate right by 15 and add a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def iter_tfrecord(path: str | os.PathLike[str], *, verify_crc: bool = True) -> Iterator[bytes]:
    """Yield each record's payload; a truncated record or a CRC mismatch raises `AvsimInputError`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AvsimInputError(path, "file", f"cannot read: {exc.strerror or exc}") from None
    pos, index = 0, 0
    while pos < len(data):
        where = f"record {index} at byte {pos}"
        if pos + 12 > len(data):
            raise AvsimInputError(path, where, "truncated record header")
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        if verify_crc and masked_crc32c(header) != length_crc:
            raise AvsimInputError(path, where, "length CRC mismatch (not a TFRecord file, or corrupt)")
        start, end = pos + 12, pos + 12 + length
        if end + 4 > len(data):
            raise AvsimInputError(path, where, f"truncated record data ({len(data) - start} of {length + 4} bytes)")
        payload = data[start:end]
        (data_crc,) = struct.unpack("<I", data[end : end + 4])
        if verify_crc and masked_crc32c(payload) != data_crc:
            raise AvsimInputError(path, where, "data CRC mismatch (corrupt record)")
        yield payload
        pos, index = end + 4, index + 1


def dataset_pb2_module() -> Any:
    try:
        from waymo_open_dataset import dataset_pb2
    except ImportError as exc:
        raise AvsimInputError(
            "waymo_open_dataset", "import",
            f"Waymo protobuf classes unavailable ({exc}); install with "
            "`pip install protobuf && pip install --no-deps waymo-open-dataset-tf-2-12-0`",
        ) from None  # fmt: skip
    return dataset_pb2


def parse_frame(payload: bytes) -> Any | None:
    """The ``Frame`` in `payload`, or None when it does not parse as one with a 4x4 pose."""
    from google.protobuf.message import DecodeError

    frame = dataset_pb2_module().Frame()
    try:
        frame.ParseFromString(payload)
    except DecodeError:
        return None
    if len(frame.pose.transform) != 16 or not frame.HasField("timestamp_micros"):
        return None  # a Scenario record parses into unknown fields only
    return frame


def payload_is_frame(payload: bytes) -> bool:
    """Whether one TFRecord payload is a Waymo perception ``Frame``.

    Args:
        payload: the record's bytes.

    Returns:
        True when it parses as a ``Frame`` with a pose and a timestamp.
    """
    return parse_frame(payload) is not None


def first_record_is_frame(path: str | os.PathLike[str]) -> bool:
    """Whether the first record of a TFRecord file is a perception ``Frame`` (reads one record).

    Args:
        path: a TFRecord file.

    Returns:
        False for unreadable, empty or non-Frame files.
    """
    try:
        with Path(path).open("rb") as fh:
            head = fh.read(12)
            if len(head) < 12 or masked_crc32c(head[:8]) != int.from_bytes(head[8:12], "little"):
                return False
            (length,) = struct.unpack("<Q", head[:8])
            if length > _MAX_FIRST_RECORD_BYTES:
                return False
            payload = fh.read(length)
    except OSError:
        return False
    return len(payload) == length and payload_is_frame(payload)
