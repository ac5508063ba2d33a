"""One shape guard for arrays at public boundaries (in the spirit of kornia's `KORNIA_CHECK_SHAPE`).

    from avsim.core.shapes import check_shape

    dims = check_shape(points_m, ("N", 3), "points_m")          # (N, 3), any N
    check_shape(colours, ("N", 3), "colours", dims=dims)          # the same N
    check_shape(image, ("H", "W", 3), "image", dtype=np.uint8)

A spec lists one entry per axis: an int fixes that axis, a str names it (the first array that
uses a name binds it, later ones must agree), `None` accepts any length; a leading `"*"` accepts
any number of leading axes. A mismatch raises `AvsimValueError` naming the array, the spec and
what it got, in one line.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from avsim.core.errors import AvsimValueError

Dim = int | str | None


def _spec_text(spec: Sequence[Dim]) -> str:
    text = ", ".join("*" if d == "*" else "_" if d is None else str(d) for d in spec)
    return f"({text},)" if len(spec) == 1 else f"({text})"  # a tuple's spelling, like the shape got


def check_shape(array: object, spec: Sequence[Dim], name: str, *, dims: dict[str, int] | None = None,
                dtype: np.dtype | type | None = None) -> dict[str, int]:  # fmt: skip
    """Check that `array` has the shape `spec` (and the dtype `dtype` when given).

    Args:
        array: a numpy array (anything with `shape` and `dtype`).
        spec: one entry per axis: int (that length), str (a named length), None (any); a leading
            "*" for any number of leading axes.
        name: the array's name in the error message.
        dims: named lengths bound so far (updated in place with new names), or None.
        dtype: the required dtype, or None for any.

    Returns:
        The named lengths (`dims` itself when given).
    """
    bound = {} if dims is None else dims
    shape = getattr(array, "shape", None)
    if shape is None:
        raise AvsimValueError(f"{name}: expected an array of shape {_spec_text(spec)}, got {type(array).__name__}")
    axes = list(spec)
    if axes and axes[0] == "*":
        axes = axes[1:]
        shape = tuple(shape[len(shape) - len(axes):]) if len(shape) >= len(axes) else None
    if shape is None or len(shape) != len(axes):
        raise AvsimValueError(f"{name}: expected shape {_spec_text(spec)}, got {tuple(array.shape)}")  # type: ignore[attr-defined]
    for axis, (want, got) in enumerate(zip(axes, shape)):
        if isinstance(want, str):
            want = bound.setdefault(want, int(got))
        if want is not None and want != got:
            raise AvsimValueError(f"{name}: expected shape {_spec_text(spec)} with {_axis_name(spec, axis)} = {want}, "
                                  f"got {tuple(array.shape)}")  # type: ignore[attr-defined]  # fmt: skip
    if dtype is not None and np.dtype(getattr(array, "dtype", None)) != np.dtype(dtype):
        raise AvsimValueError(f"{name}: expected dtype {np.dtype(dtype)}, got {getattr(array, 'dtype', None)}")
    return bound


def _axis_name(spec: Sequence[Dim], axis: int) -> str:
    axes = list(spec[1:]) if spec and spec[0] == "*" else list(spec)
    want = axes[axis]
    return want if isinstance(want, str) else f"axis {axis}"
