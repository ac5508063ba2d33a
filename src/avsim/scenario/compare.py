"""Bit-exact comparison of scenarios (or any nested core values): `scenario_differences`.

Re-exported by `avsim.scenario.io`, where the format's round-trip tests use it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def scenario_differences(a: Any, b: Any, where: str = "scenario", limit: int = 20) -> list[str]:
    """Where two scenarios (or any nested core values) differ, bit for bit; [] when identical.

    Arrays compare by shape, kind and exact values (NaN equals NaN); dataclasses field by field
    (fields with compare=False are skipped); dicts, lists and tuples element-wise.
    """
    out: list[str] = []
    _diff(a, b, where, out, limit)
    return out


def _diff(a: Any, b: Any, where: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        if a_arr.shape != b_arr.shape or a_arr.dtype.kind != b_arr.dtype.kind:
            out.append(f"{where}: {a_arr.dtype}{a_arr.shape} != {b_arr.dtype}{b_arr.shape}")
        elif not np.array_equal(a_arr, b_arr, equal_nan=a_arr.dtype.kind in "fc"):
            out.append(f"{where}: values differ")
        return
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        if type(a) is not type(b):
            out.append(f"{where}: {type(a).__name__} != {type(b).__name__}")
            return
        for f in dataclasses.fields(a):
            if f.compare:
                _diff(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}", out, limit)
        return
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if list(a) != list(b):
            out.append(f"{where}: keys {list(a)} != {list(b)}")
            return
        for key in a:
            _diff(a[key], b[key], f"{where}[{key!r}]", out, limit)
        return
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b):
        if len(a) != len(b):
            out.append(f"{where}: length {len(a)} != {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", out, limit)
        return
    if type(a) is not type(b) or (a != b and not (isinstance(a, float) and math.isnan(a) and math.isnan(b))):
        out.append(f"{where}: {a!r} != {b!r}")


__all__ = ["scenario_differences"]
