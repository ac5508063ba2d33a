"""Typed numpy array aliases shared by every layer (in the style of av2-api's ``av2.utils.typing``).

The aliases fix the element type only; shapes are documented in each function's docstring, e.g.
``points: NDArrayFloat`` with "(N, 3) float64 points in the world frame".

    from avsim.core.typing import NDArrayFloat, NDArrayInt

    def centroid(points: NDArrayFloat) -> NDArrayFloat: ...
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "NDArrayAny",
    "NDArrayBool",
    "NDArrayByte",
    "NDArrayFloat",
    "NDArrayFloat32",
    "NDArrayInt",
    "NDArrayInt32",
    "NDArrayObject",
    "NDArrayStr",
    "StrEnum",
]

NDArrayFloat = npt.NDArray[np.float64]
"""float64 array (metric coordinates, poses, timestamps in seconds)."""
NDArrayFloat32 = npt.NDArray[np.float32]
"""float32 array (images, compact vertex buffers)."""
NDArrayInt = npt.NDArray[np.int64]
"""int64 array (indices, ids, timestamps in nanoseconds)."""
NDArrayInt32 = npt.NDArray[np.int32]
"""int32 array."""
NDArrayByte = npt.NDArray[np.uint8]
"""uint8 array (8-bit images, masks, raw bytes)."""
NDArrayBool = npt.NDArray[np.bool_]
"""boolean array (validity masks)."""
NDArrayStr = npt.NDArray[np.str_]
"""unicode string array (track ids, class names)."""
NDArrayObject = npt.NDArray[np.object_]
"""object array (ragged or mixed content)."""
NDArrayAny = npt.NDArray[Any]
"""array of any element type (inputs accepted in several dtypes)."""


class StrEnum(str, Enum):
    """A closed set of names whose members are their string values (Python 3.11's `enum.StrEnum`).

    Members compare and hash equal to their values, and `str`, `format` and `json.dumps` give
    the value, so an option typed by such an enum reads, prints and digests as the plain name
    (`Layout("posttrain") is Layout.POSTTRAIN`, `f"{Layout.POSTTRAIN}" == "posttrain"`).
    """

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def choices(cls) -> tuple[str, ...]:
        """The members' values, in definition order."""
        return tuple(str(m.value) for m in cls)
