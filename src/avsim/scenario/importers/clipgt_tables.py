"""Reading ClipGT parquet tables safely: bounded before decoding, nested fields by dotted name.

A table is checked from its parquet footer (file size, rows, uncompressed column bytes) before
any page is decoded, then read with pyarrow (the decoder behind the pandas that NVIDIA's loader
uses). Fields are addressed as ``"obstacle.center.x"``; a missing or mistyped field raises
`AvsimInputError(file, field, reason)`. Struct nulls propagate to their fields (a null float
reads as NaN, a null list as an empty list, a null string as "").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.clipgt_schema import MAX_TABLE_BYTES, MAX_TABLE_ROWS, MAX_UNCOMPRESSED_BYTES

if TYPE_CHECKING:
    import pyarrow as pa


def read_table(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = MAX_TABLE_BYTES,
    max_rows: int = MAX_TABLE_ROWS,
    max_uncompressed_bytes: int = MAX_UNCOMPRESSED_BYTES,
) -> pa.Table:
    """One parquet table, after checking its size, rows and uncompressed bytes from the footer.

    Args:
        path: the ``.parquet`` file.
        max_bytes: largest file size accepted.
        max_rows: most rows accepted.
        max_uncompressed_bytes: most bytes the column chunks may decode to.

    Returns:
        The table (pyarrow).

    Raises:
        AvsimInputError: missing, too large, or not a readable parquet file.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise AvsimInputError(path, "file", "missing")
    size = path.stat().st_size
    if size > max_bytes:
        raise AvsimInputError(path, "file", f"{size} bytes is over the limit of {max_bytes}")
    try:
        with pq.ParquetFile(path) as pf:
            meta = pf.metadata
            if meta.num_rows > max_rows:
                raise AvsimInputError(path, "rows", f"{meta.num_rows} rows is over the limit of {max_rows}")
            unpacked = sum(
                meta.row_group(g).column(c).total_uncompressed_size
                for g in range(meta.num_row_groups)
                for c in range(meta.num_columns)
            )
            if unpacked > max_uncompressed_bytes:
                raise AvsimInputError(path, "file", f"decodes to {unpacked} bytes, over the limit of {max_uncompressed_bytes}")
            table = pf.read()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise AvsimInputError(path, "file", f"not a readable parquet file: {str(exc).splitlines()[0]}") from None
    return table


class Fields:
    """Dotted-name access to the (nested) columns of one table.

    Args:
        table: the table.
        path: its file, named in errors.
    """

    def __init__(self, table: pa.Table, path: Path) -> None:
        self.table, self.path = table, path

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def has(self, name: str) -> bool:
        """Whether the dotted field exists in the schema.

        Args:
            name: e.g. ``"obstacle.center"``.

        Returns:
            True when every component is present.
        """
        try:
            self._type(name)
        except AvsimInputError:
            return False
        return True

    def _type(self, name: str) -> pa.DataType:
        import pyarrow as pa

        head, *rest = name.split(".")
        if head not in self.table.column_names:
            raise AvsimInputError(self.path, name, "missing")
        t = self.table.schema.field(head).type
        for part in rest:
            if not pa.types.is_struct(t) or t.get_field_index(part) < 0:
                raise AvsimInputError(self.path, name, "missing")
            t = t.field(part).type
        return t

    def array(self, name: str) -> pa.Array:
        """The field as one array (struct parents' nulls propagate).

        Args:
            name: dotted field name.

        Returns:
            (N,) pyarrow array.
        """
        import pyarrow.compute as pc

        self._type(name)
        head, *rest = name.split(".")
        arr = self.table.column(head).combine_chunks()
        for part in rest:
            arr = pc.struct_field(arr, [part])
        return arr

    def floats(self, name: str) -> np.ndarray:
        """A numeric field as float64 (nulls -> NaN).

        Args:
            name: dotted field name.

        Returns:
            (N,) float64.
        """
        return _numeric(self.array(name), self.path, name).astype(np.float64)

    def ints(self, name: str) -> np.ndarray:
        """An integer field as int64 (nulls are an error).

        Args:
            name: dotted field name.

        Returns:
            (N,) int64.
        """
        import pyarrow as pa

        arr = self.array(name)
        if not pa.types.is_integer(arr.type):
            raise AvsimInputError(self.path, name, f"expected integers, got {arr.type}")
        if arr.null_count:
            raise AvsimInputError(self.path, name, f"null at row {_first_null(arr)}")
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)

    def strings(self, name: str, default: str = "") -> list[str]:
        """A string field (nulls -> `default`); a missing field gives `default` for every row.

        Args:
            name: dotted field name.
            default: value for nulls and for a missing field.

        Returns:
            N strings.
        """
        import pyarrow as pa

        if not self.has(name):
            return [default] * len(self)
        arr = self.array(name)
        if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
            raise AvsimInputError(self.path, name, f"expected strings, got {arr.type}")
        return [default if v is None else str(v) for v in arr.to_pylist()]

    def vectors(self, name: str, components: str = "xyz") -> np.ndarray:
        """A struct of named numbers as rows, e.g. a point ``{x, y, z}`` or quaternion ``{x, y, z, w}``.

        Args:
            name: dotted field name of the struct.
            components: its numeric fields, in column order.

        Returns:
            (N, len(components)) float64 (nulls -> NaN).
        """
        return np.stack([self.floats(f"{name}.{c}") for c in components], axis=-1) if len(self) else np.zeros((0, len(components)))

    def point_lists(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A list-of-points field (``[{x, y, z}, ...]`` per row).

        Args:
            name: dotted field name of the list.

        Returns:
            offsets (N+1,) int64 (a null list is empty) and points (M, 3) float64 (nulls -> NaN).
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        arr = self.array(name)
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)) or not pa.types.is_struct(arr.type.value_type):
            raise AvsimInputError(self.path, name, f"expected a list of {{x, y, z}} points, got {arr.type}")
        lengths = np.asarray(pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False), dtype=np.int64)
        points = arr.flatten()
        cols = []
        for c in "xyz":
            if points.type.get_field_index(c) < 0:
                raise AvsimInputError(self.path, f"{name}[].{c}", "missing")
            cols.append(_numeric(pc.struct_field(points, [c]), self.path, f"{name}[].{c}").astype(np.float64))
        return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), np.stack(cols, -1).reshape(-1, 3)

    def string_lists(self, name: str) -> list[list[str]]:
        """A list-of-strings field; a missing field or a null list gives [] (null items give "").

        Args:
            name: dotted field name of the list.

        Returns:
            N lists of strings.
        """
        import pyarrow as pa

        if not self.has(name):
            return [[] for _ in range(len(self))]
        arr = self.array(name)
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)) or not pa.types.is_string(arr.type.value_type):
            raise AvsimInputError(self.path, name, f"expected a list of strings, got {arr.type}")
        return [[("" if v is None else str(v)) for v in (row or [])] for row in arr.to_pylist()]

    def rows(self, name: str) -> list[Any]:
        """Any field as Python values (what pandas hands NVIDIA's loader).

        Args:
            name: dotted field name.

        Returns:
            N values (dicts for structs, lists for lists).
        """
        return list(self.array(name).to_pylist())


def _numeric(arr: pa.Array, path: Path, name: str) -> np.ndarray:
    import pyarrow as pa

    if not (pa.types.is_floating(arr.type) or pa.types.is_integer(arr.type)):
        raise AvsimInputError(path, name, f"expected numbers, got {arr.type}")
    out = arr.to_numpy(zero_copy_only=False)
    return np.asarray(out, dtype=np.float64)


def _first_null(arr: pa.Array) -> int:
    return int(np.flatnonzero(np.asarray(arr.is_null().to_numpy(zero_copy_only=False)))[0])


__all__ = ["Fields", "read_table"]
