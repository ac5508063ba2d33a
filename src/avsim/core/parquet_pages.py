"""What a parquet file's pages decode to, counted from the page headers before anything is decoded.

A parquet footer states rows and sizes that the decoder does not hold it to: a file may claim 10
rows and 1-byte column chunks while its pages (run-length encoded levels, dictionary indices)
decode to gigabytes. The page headers are what the decoder follows: each data page says how many
values it holds, and a dictionary page how large its dictionary is. `chunk_pages` walks the
headers of one column chunk (Thrift compact protocol, the few fields needed; every length checked
against the bytes that are there) and `decoded_bound` turns them into an upper bound of the bytes
the chunk decodes to: fixed-width values times their width; byte arrays by the page's own bytes
(plain) or their count times the longest dictionary entry (dictionary-encoded; the dictionary page
is decompressed and measured unless its own size already bounds the column below 1 MiB); plus 8
bytes a value for offsets, levels and validity.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO, Any

MAX_PAGE_HEADER_BYTES = 16 << 20  # the parquet-cpp reader's own default limit of a page header
_DICT_ENCODINGS = (2, 8)  # PLAIN_DICTIONARY, RLE_DICTIONARY
_DELTA_BYTE_ARRAY = 7  # each value a prefix of the previous one plus a suffix: a value may be as long as its page
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
COARSE_BOUND_BYTES = 1 << 20  # above this, a dictionary page is read to bound its entries by the longest, not by its own size
PER_VALUE_OVERHEAD_BYTES = 8  # offsets, repetition/definition levels and validity of one decoded value
FIXED_WIDTH = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}
_CODECS = {"SNAPPY": "snappy", "GZIP": "gzip", "ZSTD": "zstd", "LZ4_RAW": "lz4_raw", "BROTLI": "brotli"}


class PageFormatError(ValueError):
    """A page header that cannot be read (truncated, malformed, larger than allowed)."""


class _Compact:
    """A reader of the Thrift compact protocol over one buffer (structs, as dicts of field id -> value)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _byte(self) -> int:
        if self.pos >= len(self.data):
            raise PageFormatError("page header truncated")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def _varint(self) -> int:
        out, shift = 0, 0
        while True:
            b = self._byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise PageFormatError("varint longer than 64 bits")

    def _zigzag(self) -> int:
        n = self._varint()
        return (n >> 1) ^ -(n & 1)

    def _skip(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise PageFormatError("page header truncated")
        self.pos += n

    def value(self, kind: int, depth: int) -> Any:
        if depth > 16:
            raise PageFormatError("page header nested too deeply")
        if kind in (1, 2):
            return kind == 1
        if kind == 3:
            return self._byte()
        if kind in (4, 5, 6):
            return self._zigzag()
        if kind == 7:
            self._skip(8)
            return None
        if kind == 8:
            self._skip(self._varint())
            return None
        if kind in (9, 10):
            head = self._byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self._varint()
            if size > len(self.data) - self.pos:
                raise PageFormatError("page header list longer than the header")
            for _ in range(size):
                self.value(elem if elem not in (1, 2) else 3, depth + 1)  # booleans in lists are one byte
            return None
        if kind == 11:
            size = self._varint()
            if size:
                types = self._byte()
                if 2 * size > len(self.data) - self.pos:
                    raise PageFormatError("page header map longer than the header")
                for _ in range(size):
                    self.value(types >> 4, depth + 1)
                    self.value(types & 0x0F, depth + 1)
            return None
        if kind == 12:
            return self.struct(depth + 1)
        raise PageFormatError(f"unknown Thrift type {kind}")

    def struct(self, depth: int = 0) -> dict[int, Any]:
        out: dict[int, Any] = {}
        last = 0
        while True:
            head = self._byte()
            if head == 0:
                return out
            delta, kind = head >> 4, head & 0x0F
            last = last + delta if delta else self._zigzag()
            out[last] = self.value(kind, depth)


@dataclass(frozen=True)
class Page:
    """One page of a column chunk: its kind, sizes, value count and encoding, and where its data starts."""

    kind: int
    uncompressed_bytes: int
    compressed_bytes: int
    values: int
    encoding: int
    data_offset: int


def _header(f: IO[bytes], offset: int, end: int) -> tuple[dict[int, Any], int]:
    """The page header at `offset` and its length (read in growing windows up to `MAX_PAGE_HEADER_BYTES`)."""
    window = 4096
    while True:
        f.seek(offset)
        data = f.read(min(window, end - offset))
        try:
            reader = _Compact(data)
            return reader.struct(), reader.pos
        except PageFormatError:
            if len(data) < min(window, end - offset) or window >= MAX_PAGE_HEADER_BYTES or offset + len(data) >= end:
                raise
            window *= 4


def chunk_pages(f: IO[bytes], start: int, length: int) -> list[Page]:
    """Every page header of the column chunk at [start, start + length) of the file.

    Args:
        f: the file, open for binary reading.
        start: the chunk's first page (its dictionary page, else its first data page).
        length: the chunk's compressed length (the footer's `total_compressed_size`).

    Returns:
        The pages in order; `PageFormatError` when a header cannot be read or a page overruns the chunk.
    """
    pages, pos, end = [], start, start + length
    while pos < end:
        header, used = _header(f, pos, end)
        kind, size, compressed = header.get(1), header.get(2), header.get(3)
        if not isinstance(kind, int) or not isinstance(size, int) or not isinstance(compressed, int) or size < 0 or compressed < 0:
            raise PageFormatError(f"page header at byte {pos} lacks its type or sizes")
        sub = header.get({_DATA_PAGE: 5, _DICTIONARY_PAGE: 7, _DATA_PAGE_V2: 8}.get(kind, -1)) or {}
        values = sub.get(1, 0) if isinstance(sub, dict) else 0
        encoding = sub.get(4 if kind == _DATA_PAGE_V2 else 2, 0) if isinstance(sub, dict) else 0
        if not isinstance(values, int) or values < 0:
            raise PageFormatError(f"page header at byte {pos}: negative value count")
        pages.append(Page(kind, size, compressed, values, int(encoding or 0), pos + used))
        pos += used + compressed
    if pos != end:
        raise PageFormatError(f"the last page ends at byte {pos}, past its column chunk (ends at {end})")
    return pages


def _longest_entry(f: IO[bytes], page: Page, codec: str) -> int | None:
    """The longest entry of a PLAIN byte-array dictionary page, or None when it cannot be measured."""
    import pyarrow as pa

    f.seek(page.data_offset)
    raw = f.read(page.compressed_bytes)
    if codec != "UNCOMPRESSED":
        if codec not in _CODECS:
            return None
        try:
            raw = pa.Codec(_CODECS[codec]).decompress(raw, decompressed_size=page.uncompressed_bytes).to_pybytes()
        except (pa.ArrowException, ValueError, OSError):
            return None
    buf, pos, longest = memoryview(raw), 0, 0
    for _ in range(page.values):
        if pos + 4 > len(buf):
            return None
        n = struct.unpack_from("<I", buf, pos)[0]
        pos += 4 + n
        longest = max(longest, n)
    return longest if pos <= len(buf) else None


def decoded_bound(f: IO[bytes], pages: list[Page], physical_type: str, type_length: int, codec: str, budget: int) -> tuple[int, int]:
    """An upper bound of the bytes one column chunk decodes to, and its value count.

    Args:
        f: the file.
        pages: the chunk's pages (`chunk_pages`).
        physical_type: the column's parquet physical type (``INT64``, ``BYTE_ARRAY``, ...).
        type_length: a FIXED_LEN_BYTE_ARRAY's width.
        codec: the chunk's compression (``ZSTD``, ...).
        budget: the bytes the caller allows (a dictionary page is measured when the coarse bound is above it or 1 MiB).

    Returns:
        (bytes, values) counted from the page headers.
    """
    values = sum(p.values for p in pages if p.kind in (_DATA_PAGE, _DATA_PAGE_V2))
    overhead = values * PER_VALUE_OVERHEAD_BYTES
    if physical_type != "BYTE_ARRAY":
        width = FIXED_WIDTH.get(physical_type, max(int(type_length or 0), 1))
        return values * width + overhead, values
    dictionary = next((p for p in pages if p.kind == _DICTIONARY_PAGE), None)
    indexed = sum(p.values for p in pages if p.kind in (_DATA_PAGE, _DATA_PAGE_V2) and p.encoding in _DICT_ENCODINGS)
    data = [p for p in pages if p.kind in (_DATA_PAGE, _DATA_PAGE_V2) and p.encoding not in _DICT_ENCODINGS]
    plain = sum(p.uncompressed_bytes * (p.values if p.encoding == _DELTA_BYTE_ARRAY else 1) for p in data)
    longest = dictionary.uncompressed_bytes if dictionary is not None else 0
    if dictionary is not None and indexed * longest > min(budget, COARSE_BOUND_BYTES):
        measured = _longest_entry(f, dictionary, codec)
        longest = longest if measured is None else measured
    return indexed * longest + plain + overhead, values
