"""What an evaluation command returns and writes: its table, and strict JSON.

`MetricTable` is a command's result (the table it prints and the JSON document it writes);
`json_ready` turns numpy values into Python ones and non-finite floats into null, and
`write_json` writes the strict JSON atomically; `fmt_number` is how a number is printed (tables
and the report page). Every metric module and the report use these.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.atomic import atomic_output_path


@dataclass(frozen=True)
class MetricTable:
    """A command's result: the table it prints (`title`, `header`, `rows`) and the JSON `document`."""

    title: str
    header: list[str]
    rows: list[list[Any]]
    document: dict[str, Any]


ROUNDING_NOISE = 1e-9  # |value| below this prints as 0: floating-point rounding, e.g. a FID of a set with itself


def fmt_number(x: Any) -> str:
    """A value as tables and the report print it: 4 significant digits, "n/a" for None and non-finite
    values, and 0 for magnitudes below `ROUNDING_NOISE` (a FID of 5.7e-14 beside an interval bound of 0
    is the same zero).

    Args:
        x: a number (or anything else, printed with str).

    Returns:
        The text.
    """
    if x is None:
        return "n/a"
    if isinstance(x, (float, np.floating)):
        v = float(x)
        if not math.isfinite(v):
            return "n/a"
        return "0" if abs(v) < ROUNDING_NOISE else f"{v:.4g}"
    return str(x)


def write_json(data: dict[str, Any], out: Path) -> None:
    """`data` as strict JSON (numpy values converted, non-finite floats as null), atomically."""
    with atomic_output_path(out) as tmp:
        tmp.write_text(json.dumps(json_ready(data), indent=1, allow_nan=False) + "\n")


def json_ready(x: Any) -> Any:
    """`x` with numpy scalars/arrays as Python values and non-finite floats as None (strict JSON)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: json_ready(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_ready(v) for v in x]
    if isinstance(x, np.generic):
        return json_ready(x.item())
    if isinstance(x, np.ndarray):
        return json_ready(x.tolist())
    return x
