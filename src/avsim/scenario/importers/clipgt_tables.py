"""Reading ClipGT parquet tables safely: bounded before decoding, nested fields by dotted name.

A table is checked before any page is decoded (`avsim.core.safe_parquet`: a regular file inside
the clip folder; file size, rows and decoded bytes counted from its page headers), then read with pyarrow (the decoder behind the pandas that NVIDIA's loader
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
from avsim.core.safe_files import regular_file
from avsim.core.safe_parquet import TableLimits, checked_path, measure, read_arrow
from avsim.scenario.importers.clipgt_schema import TABLE_LIMITS

if TYPE_CHECKING:
    import pyarrow as pa


def table_present(path: Path) -> bool:
    """Whether an optional table is there: False when nothing is at `path`, True for a regular file,
    and one line naming what it is otherwise (a FIFO, a device, a dangling link is never skipped as absent).

    Args:
        path: the table's path.

    Returns:
        Whether to read it.
    """
    if not os.path.lexists(path):
        return False
    regular_file(path, "file")
    return True


def read_table(path: str | os.PathLike[str], *, limits: TableLimits = TABLE_LIMITS, columns: list[str] | None = None) -> pa.Table:
    """One parquet table of a clip folder, checked before decoding (`avsim.core.safe_parquet.read_arrow`):
    a regular file inside its folder, rows and decoded bytes counted from its pages within `limits`.

    Args:
        path: the ``.parquet`` file.
        limits: rows, decoded bytes and file bytes (default: `clipgt_schema.TABLE_LIMITS`).
        columns: the top-level columns to read (None: all).

    Returns:
        The table (pyarrow).

    Raises:
        AvsimInputError: missing, not a regular file, over a limit, or not a readable parquet file.
    """
    path = Path(path)
    return read_arrow(path, limits, columns, root=path.parent)


def count_rows(path: Path) -> int:
    """A table's rows, counted from its pages without decoding it.

    Args:
        path: the ``.parquet`` file.

    Returns:
        The row count.
    """
    return measure(checked_path(path, path.parent), TABLE_LIMITS).rows


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


__all__ = ["Fields", "count_rows", "read_table", "table_present"]
