"""Comparison of scenarios (or any nested core values): `scenario_differences`.

Bit for bit by default (the native format's round trip); with ``atol`` floats may differ by that
much (a round trip through another format). Re-exported by `avsim.scenario.io`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def scenario_differences(a: Any, b: Any, where: str = "scenario", limit: int = 20, *, atol: float = 0.0) -> list[str]:
    """Where two scenarios (or any nested core values) differ; [] when identical.

    Arrays compare by shape, kind and values (NaN equals NaN); dataclasses field by field
    (fields with compare=False are skipped); dicts, lists and tuples element-wise.

    Args:
        a: a scenario or any nested value.
        b: the other.
        where: name of the root in the messages.
        limit: most differences reported.
        atol: largest absolute difference allowed between floats (0: bit for bit).

    Returns:
        One line per difference (``where: what``), at most `limit`.
    """
    out: list[str] = []
    _diff(a, b, where, out, limit, atol)
    return out


def _floats_differ(a: np.ndarray, b: np.ndarray, atol: float) -> bool:
    if atol > 0 and a.dtype.kind == "f":
        return not np.allclose(a, b, rtol=0.0, atol=atol, equal_nan=True)
    return not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


def _diff(a: Any, b: Any, where: str, out: list[str], limit: int, atol: float = 0.0) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        if a_arr.shape != b_arr.shape or a_arr.dtype.kind != b_arr.dtype.kind:
            out.append(f"{where}: {a_arr.dtype}{a_arr.shape} != {b_arr.dtype}{b_arr.shape}")
        elif _floats_differ(a_arr, b_arr, atol):
            out.append(f"{where}: values differ")
        return
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        if type(a) is not type(b):
            out.append(f"{where}: {type(a).__name__} != {type(b).__name__}")
            return
        for f in dataclasses.fields(a):
            if f.compare:
                _diff(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}", out, limit, atol)
        return
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if list(a) != list(b):
            out.append(f"{where}: keys {list(a)} != {list(b)}")
            return
        for key in a:
            _diff(a[key], b[key], f"{where}[{key!r}]", out, limit, atol)
        return
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b):
        if len(a) != len(b):
            out.append(f"{where}: length {len(a)} != {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", out, limit, atol)
        return
    if atol > 0 and type(a) is float and type(b) is float and abs(a - b) <= atol:
        return
    if type(a) is not type(b) or (a != b and not (isinstance(a, float) and math.isnan(a) and math.isnan(b))):
        out.append(f"{where}: {a!r} != {b!r}")


__all__ = ["scenario_differences"]
