"""Restricted unpickling: dataset pickles are untrusted input.

A pickle can name any importable callable and have the loader call it (``os.system`` is the
classic). `load_pickle` allows only what dataset pickles (ScenarioNet scenario descriptions,
mmdetection3d info files) actually need: builtin containers and scalars, and numpy array /
dtype / scalar reconstruction. Every other global is refused *before* it is imported, and the
refusal names the file and the global.
"""

from __future__ import annotations

import codecs
import collections
import io
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError

# Builtin types whose construction runs no user code. Functions such as eval, exec, getattr,
# __import__, open or compile are deliberately absent.
_SAFE_BUILTINS = frozenset(
    {
        "bool", "int", "float", "complex", "str", "bytes", "bytearray",
        "list", "tuple", "dict", "set", "frozenset", "slice", "range",
    }
)
_PY2_BUILTIN_NAMES = {"long": "int", "unicode": "str", "xrange": "range"}
_SAFE_COLLECTIONS = frozenset({"OrderedDict", "defaultdict", "deque", "Counter"})
# numpy moved `numpy.core` to `numpy._core` in 2.0; pickles written by either name the module
# they were written with. (Typed Any: numpy's stubs do not declare these private helpers.)
_multiarray: Any = np.core.multiarray
_numeric: Any = np.core.numeric
_NUMPY_RECONSTRUCTORS = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _multiarray._reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _multiarray._reconstruct,
    ("numpy.core.multiarray", "scalar"): _multiarray.scalar,
    ("numpy._core.multiarray", "scalar"): _multiarray.scalar,
    ("numpy.core.numeric", "_frombuffer"): _numeric._frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _numeric._frombuffer,
}


def _latin1_encode(text: str, encoding: str = "latin1", errors: str = "strict") -> bytes:
    """`_codecs.encode` as protocol-2 pickles use it for raw bytes, and nothing else.

    Python-2-compatible pickles store a numpy array buffer as ``_codecs.encode(str, 'latin1')``.
    Only that pure text-to-bytes call is allowed (no codec lookup of arbitrary names).
    """
    if not isinstance(text, str) or codecs.lookup(encoding).name != "iso8859-1":
        raise pickle.UnpicklingError(f"_codecs.encode only allowed as latin1 text->bytes, got {encoding!r}")
    return text.encode("latin1", errors)


class ForbiddenGlobal(pickle.UnpicklingError):
    """The pickle asked for a global outside the allow-list."""


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler whose `find_class` allows only builtin containers and numpy arrays."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "__builtin__":  # protocol <= 2 pickles name Python 2's modules
            module, name = "builtins", _PY2_BUILTIN_NAMES.get(name, name)
        if module == "builtins" and name in _SAFE_BUILTINS:
            return getattr(__import__("builtins"), name)
        if module == "collections" and name in _SAFE_COLLECTIONS:
            return getattr(collections, name)
        if (module, name) in _NUMPY_RECONSTRUCTORS:
            return _NUMPY_RECONSTRUCTORS[(module, name)]
        if module == "_codecs" and name == "encode":
            return _latin1_encode
        raise ForbiddenGlobal(f"global '{module}.{name}' is not allowed (only builtins and numpy arrays)")


def loads_pickle(data: bytes, source: str | os.PathLike[str] = "<bytes>") -> Any:
    """Unpickle `data` with `RestrictedUnpickler`; errors name `source`."""
    try:
        return RestrictedUnpickler(io.BytesIO(data), encoding="latin1").load()
    except ForbiddenGlobal as exc:
        raise AvsimInputError(source, "pickle", f"refused: {exc}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
        raise AvsimInputError(source, "pickle", f"truncated or corrupt pickle ({type(exc).__name__}: {exc})") from None
    except MemoryError:  # a length field claiming more bytes than can be held (or the file has)
        raise AvsimInputError(source, "pickle", f"declares an object larger than memory ({len(data)}-byte file)") from None
    except RecursionError:
        raise AvsimInputError(source, "pickle", "nested too deeply") from None


def load_pickle(path: str | os.PathLike[str]) -> Any:
    """Read and restricted-unpickle the file at `path`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AvsimInputError(path, "file", f"cannot read: {exc.strerror or exc}") from None
    if not data:
        raise AvsimInputError(path, "pickle", "file is empty")
    return loads_pickle(data, path)
