"""Parquet tables from anyone: checked before a value is decoded, errors as one line naming the file.

Every untrusted parquet file avsim reads (scenario tables, ClipGT clips, compact label tables,
detection and lane tables, job manifests) goes through `read_arrow` / `read_frame`:

1. the path must be a regular file (`safe_files.regular_file`: a FIFO, a device or a dangling link
   is named, never opened) and, given a `root`, stay inside it (links out refused);
2. the file and its footer must be under `TableLimits.max_file_bytes` / `MAX_FOOTER_BYTES`;
3. the rows and the bytes the selected columns decode to are counted from every page header
   (`avsim.core.parquet_pages`: what the decoder will produce, not what the footer claims) and
   must be under `max_rows` / `max_decoded_bytes`;
4. only then is the table decoded; any decoder error is `AvsimInputError(path, "file", ...)`.

Peak memory of a read is therefore about the decoded bound plus the file's own bytes.
`check_frame` then checks a decoded polars frame's columns: present, of the expected type,
without nulls, finite and within a range, naming the column and the first bad row.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avsim.core.errors import AvsimInputError
from avsim.core.parquet_pages import PageFormatError, chunk_pages, decoded_bound
from avsim.core.safe_files import contained_file, regular_file

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

MAX_FOOTER_BYTES = 64 << 20  # a footer (schema and chunk metadata) larger than this is no table avsim writes or reads


@dataclass(frozen=True)
class TableLimits:
    """What one table may hold: rows, bytes decoded (counted from its pages) and bytes on disk."""

    max_rows: int
    max_decoded_bytes: int
    max_file_bytes: int = 1 << 30


@dataclass(frozen=True)
class TableSize:
    """A table's rows and the bytes its selected columns decode to (an upper bound), from its pages."""

    rows: int
    decoded_bytes: int


def _footer_size(f: Any, path: Path, size: int) -> int:
    if size < 12:
        raise AvsimInputError(path, "file", f"unreadable parquet (truncated or corrupt): {size} bytes")
    f.seek(size - 8)
    tail = f.read(8)
    if tail[4:] != b"PAR1":
        raise AvsimInputError(path, "file", "unreadable parquet (truncated or corrupt): no PAR1 trailer")
    footer = struct.unpack("<I", tail[:4])[0]
    if footer > min(MAX_FOOTER_BYTES, size - 12):
        raise AvsimInputError(path, "file", f"a footer of {footer} bytes in a file of {size} (more than the {MAX_FOOTER_BYTES} allowed, or truncated)")
    return footer


def measure(path: str | os.PathLike[str], limits: TableLimits, columns: Sequence[str] | None = None) -> TableSize:
    """Count the rows and decoded bytes of a parquet file from its page headers, refusing it over `limits`.

    Args:
        path: the file (already checked to be a regular file).
        limits: the bounds.
        columns: the top-level columns that will be read (None: all).

    Returns:
        The table's size; `AvsimInputError` naming the file and the limit when it is over one.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    size = p.stat().st_size
    if size > limits.max_file_bytes:
        raise AvsimInputError(p, "file", f"{size} bytes, more than the {limits.max_file_bytes} a table file may have")
    try:
        with open(p, "rb") as f:
            _footer_size(f, p, size)
            meta = pq.ParquetFile(f).metadata
            wanted = None if columns is None else set(columns)
            decoded, flat_rows, budget = 0, 0, limits.max_decoded_bytes
            per_column: dict[str, int] = {}
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                group_flat = 0
                for c in range(meta.num_columns):
                    chunk, schema = group.column(c), meta.schema.column(c)
                    if wanted is not None and chunk.path_in_schema.split(".")[0] not in wanted:
                        continue
                    if chunk.total_compressed_size == 0:  # an empty chunk (a table of 0 rows) has no pages
                        continue
                    start = chunk.dictionary_page_offset if chunk.has_dictionary_page and chunk.dictionary_page_offset else chunk.data_page_offset
                    if start < 4 or chunk.total_compressed_size < 0 or start + chunk.total_compressed_size > size - 8:
                        raise AvsimInputError(p, chunk.path_in_schema, "column chunk outside the file (truncated or corrupt)")
                    pages = chunk_pages(f, start, chunk.total_compressed_size)
                    nbytes, values = decoded_bound(f, pages, chunk.physical_type, schema.length or 0, chunk.compression, budget - decoded)
                    decoded += nbytes
                    top = chunk.path_in_schema.split(".")[0]
                    per_column[top] = per_column.get(top, 0) + nbytes
                    if schema.max_repetition_level == 0:
                        group_flat = max(group_flat, values)
                flat_rows += max(group_flat, group.num_rows)
    except AvsimInputError:
        raise
    except PageFormatError as exc:
        raise AvsimInputError(p, "file", f"unreadable parquet (truncated or corrupt): {exc}") from None
    except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
        raise AvsimInputError(p, "file", f"unreadable parquet (truncated or corrupt): {_first_line(exc)}") from None
    if flat_rows > limits.max_rows:
        raise AvsimInputError(p, "rows", f"{flat_rows} rows, more than the {limits.max_rows} a table may have")
    if decoded > limits.max_decoded_bytes:
        column = max(per_column, key=lambda k: per_column[k])
        raise AvsimInputError(p, column, f"decodes to more than {limits.max_decoded_bytes} bytes (counted from its pages: "
                              f"{decoded} for the table, {per_column[column]} for this column), more than a table may have")  # fmt: skip
    return TableSize(flat_rows, decoded)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def checked_path(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None, field: str = "file") -> Path:
    """`path` when it is a regular file (inside `root`, links resolved, when given), else one line naming it.

    Args:
        path: the file.
        root: the folder it must stay in (None: anywhere).
        field: the field named in the message.

    Returns:
        The path.
    """
    p = regular_file(path, field)  # missing, a FIFO, a device, a dangling link: named for what it is
    if root is None:
        return p
    try:
        relative = p.relative_to(root)
    except ValueError:
        raise AvsimInputError(path, field, f"outside {root}") from None
    return contained_file(root, str(relative), p, field)  # a link to a regular file out of `root`: refused


def read_arrow(path: str | os.PathLike[str], limits: TableLimits, columns: Sequence[str] | None = None,
               root: str | os.PathLike[str] | None = None) -> pa.Table:  # fmt: skip
    """A parquet table (pyarrow), checked as the module docstring says.

    Args:
        path: the file.
        limits: rows, decoded bytes and file bytes it may have.
        columns: top-level columns to read (None: all; a missing one is an error naming it).
        root: the folder the file must stay in (links resolved), or None.

    Returns:
        The table.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = checked_path(path, root)
    measure(p, limits, columns)
    try:
        with pq.ParquetFile(p) as pf:
            if columns is not None:
                names = set(pf.schema_arrow.names)
                missing = [c for c in columns if c not in names]
                if missing:
                    raise AvsimInputError(p, missing[0], "missing column")
            return pf.read(columns=list(columns) if columns is not None else None)
    except AvsimInputError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise AvsimInputError(p, "file", f"unreadable parquet (truncated or corrupt): {_first_line(exc)}") from None


def read_frame(path: str | os.PathLike[str], limits: TableLimits, columns: Sequence[str] | None = None,
               root: str | os.PathLike[str] | None = None) -> pl.DataFrame:  # fmt: skip
    """As `read_arrow`, decoded by polars (its own types: categoricals, fixed-size arrays).

    Args:
        path: the file.
        limits: rows, decoded bytes and file bytes it may have.
        columns: top-level columns to read (None: all).
        root: the folder the file must stay in, or None.

    Returns:
        The frame.
    """
    import polars as pl

    p = checked_path(path, root)
    measure(p, limits, columns)
    try:
        if columns is not None:
            schema = pl.read_parquet_schema(p)
            missing = [c for c in columns if c not in schema]
            if missing:
                raise AvsimInputError(p, missing[0], "missing column")
        return pl.read_parquet(p, columns=list(columns) if columns is not None else None)
    except AvsimInputError:
        raise
    except Exception as exc:  # polars raises ComputeError / OSError / PanicException variants for damaged files
        raise AvsimInputError(p, "file", f"unreadable parquet (truncated or corrupt): {_first_line(exc)}") from None


@dataclass(frozen=True)
class Column:
    """What a column must be: its kind (``int``, ``float``, ``str``, ``floats`` (a list or array of
    numbers), ``strs``), optionally its inner width and the closed range of its (finite) values."""

    kind: str
    width: int | None = None
    low: float = -math.inf
    high: float = math.inf
    nullable: bool = False
    finite: bool = True  # False: NaN allowed (a value that may be undefined), the range not checked


def _kind_of(dtype: Any) -> str:
    import polars as pl

    if dtype.is_integer():
        return "int"
    if dtype.is_float():
        return "float"
    if dtype in (pl.String, pl.Categorical) or isinstance(dtype, (pl.Categorical, pl.Enum)):
        return "str"
    if isinstance(dtype, (pl.List, pl.Array)):
        inner = _kind_of(dtype.inner)
        return {"float": "floats", "int": "floats", "str": "strs"}.get(inner, "nested")
    return str(dtype)


def check_frame(df: pl.DataFrame, path: str | os.PathLike[str], columns: dict[str, Column]) -> None:
    """Check each listed column of a decoded table: present, of its kind, no nulls, finite and in range.

    Args:
        df: the table.
        path: its file (named in errors).
        columns: column name -> what it must be.
    """
    import polars as pl

    for name, spec in columns.items():
        if name not in df.columns:
            raise AvsimInputError(path, name, "missing column")
        col = df[name]
        kind = _kind_of(col.dtype)
        if kind != spec.kind and not (spec.kind == "float" and kind == "int"):
            raise AvsimInputError(path, name, f"has type {col.dtype}, expected {spec.kind}")
        if not spec.nullable and col.null_count():
            raise AvsimInputError(path, name, f"row {int(col.is_null().arg_max() or 0)} is null")
        if spec.kind in ("floats", "strs"):
            lengths = col.list.len() if isinstance(col.dtype, pl.List) else col.arr.len()
            if spec.width is not None and len(col) and not (lengths == spec.width).all():
                row = int((lengths != spec.width).arg_max() or 0)
                raise AvsimInputError(path, name, f"row {row} has {lengths[row]} values, expected {spec.width}")
        if spec.kind in ("int", "float", "floats") and spec.finite:
            _check_values(col, path, name, spec)


def _check_values(col: pl.Series, path: str | os.PathLike[str], name: str, spec: Column) -> None:
    import numpy as np
    import polars as pl

    frame = pl.DataFrame({"v": col}).with_row_index("row")
    if isinstance(col.dtype, pl.Array):
        frame = frame.with_columns(pl.col("v").arr.to_list())
    if isinstance(frame.schema["v"], pl.List):
        frame = frame.explode("v")
    frame = frame.drop_nulls("v")
    values = frame["v"].cast(pl.Float64).to_numpy()
    bad = ~np.isfinite(values) | (values < spec.low) | (values > spec.high)
    if bad.any():
        k = int(np.argmax(bad))
        v = float(values[k])
        why = "NaN or infinite" if not math.isfinite(v) else f"{v:g} outside [{spec.low:g}, {spec.high:g}]"
        raise AvsimInputError(path, name, f"row {int(frame['row'][k])}: {why}")
