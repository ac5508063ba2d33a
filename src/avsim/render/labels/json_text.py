"""Fast JSON text of rounded float arrays, byte-identical to `json.dumps` of `np.round(a, d).tolist()`.

Label files hold thousands of rounded floats per camera-frame (lane points above all); Python's
float repr was most of the labels' JSON cost. `float_lists_json` writes the lists in one compiled
pass: a value rounded to d decimals is the integer q = rint(x * 10**d) over 10**d, and for
|q| < 10**15 that decimal (trailing zeros dropped) is the shortest string that reads back as
the double (any two decimals of <= 15 significant digits are distinct doubles), so it is what
`repr` writes, in fixed notation for 1e-4 <= |value| < 1e16. Values outside that range are
left to `json.dumps` (the list is redone in Python). Non-finite values are `null` (as the
labels' `_f` writes NaN).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from avsim.core.jit import njit
from avsim.core.typing import NDArrayFloat, NDArrayInt

MAX_DIGITS_Q = 10**15  # |q| below this: at most 15 significant digits, the decimal is repr's


@njit
def put_int(out: npt.NDArray[np.uint8], n: int, value: int, digits: npt.NDArray[np.uint8]) -> int:
    # writes the decimal integer `value` (json.dumps / str of an int) at out[n:]; digits: (20,) scratch; returns the new length
    if value < 0:
        out[n] = 45  # -
        n += 1
        value = -value
    k = 0
    while True:
        digits[k] = 48 + value % 10
        value //= 10
        k += 1
        if value == 0:
            break
    for j in range(k - 1, -1, -1):
        out[n] = digits[j]
        n += 1
    return n

@njit
def put_number(out: npt.NDArray[np.uint8], n: int, x: float, p: float, nd: int, lo: float, scale: int,
                digits: npt.NDArray[np.uint8]) -> tuple[int, bool]:  # fmt: skip
    # writes rint(x * p) / p as repr would (fixed notation); scale = 10**nd, digits: (20,) scratch;
    # returns (new length, written exactly)
    if not np.isfinite(x):
        for c in (110, 117, 108, 108):  # null
            out[n] = c
            n += 1
        return n, True
    qf = np.rint(x * p)
    neg = qf < 0.0 or (qf == 0.0 and np.copysign(1.0, qf) < 0.0)
    qa = abs(qf)
    if qa >= MAX_DIGITS_Q or (qa != 0.0 and qa < lo):
        return n, False
    q = np.int64(qa)
    if neg:
        out[n] = 45  # -
        n += 1
    ip, fp = q // scale, q % scale
    n = put_int(out, n, ip, digits)
    out[n] = 46  # .
    n += 1
    keep = nd
    while keep > 1 and fp % 10 == 0:
        fp //= 10
        keep -= 1
    for j in range(keep - 1, -1, -1):
        digits[j] = 48 + fp % 10
        fp //= 10
    for j in range(keep):
        out[n] = digits[j]
        n += 1
    if nd == 0:  # "3.0"
        out[n] = 48
        n += 1
    return n, True

@njit
def _lists_text(values: NDArrayFloat, starts: NDArrayInt, stops: NDArrayInt, nds: NDArrayInt,
                out: npt.NDArray[np.uint8], ends: NDArrayInt, exact: npt.NDArray[np.bool_]) -> None:  # fmt: skip
    # "[v,v,...]" of values[starts[s]:stops[s]] rounded to nds[s] decimals for every s, back to
    # back; ends[s]: end offset in out
    digits = np.empty(20, np.uint8)
    n = 0
    for s in range(len(starts)):
        nd = nds[s]
        p = 10.0**nd
        lo = 10.0 ** (nd - 4) if nd >= 4 else 0.0  # |value| >= 1e-4: fixed notation in repr
        scale = np.int64(10) ** nd
        out[n] = 91  # [
        n += 1
        for i in range(starts[s], stops[s]):
            if i > starts[s]:
                out[n] = 44  # ,
                n += 1
            n, ok = put_number(out, n, values[i], p, nd, lo, scale, digits)
            if not ok:
                exact[s] = False
        out[n] = 93  # ]
        n += 1
        ends[s] = n


def _slow_list(values: NDArrayFloat, decimals: int) -> str:
    """`json.dumps` of the rounded list (None for non-finite values)."""
    r = np.round(values, decimals)
    return json.dumps([v if np.isfinite(v) else None for v in r.tolist()], separators=(",", ":"))


def float_lists_json(values: NDArrayFloat, starts: NDArrayInt, stops: NDArrayInt, decimals: int | NDArrayInt) -> list[str]:
    """JSON text of the lists values[starts[s]:stops[s]] rounded to `decimals`.

    Args:
        values: (N,) float values.
        starts: (S,) first index of each list.
        stops: (S,) one past the last index of each list.
        decimals: decimals kept (0..9), as `np.round`: one for all lists, or (S,) one per list.

    Returns:
        S strings, each `json.dumps(np.round(values[a:b], decimals).tolist(), separators=(",", ":"))`
        with non-finite values written as null.
    """
    v = np.ascontiguousarray(values, np.float64).reshape(-1)
    a, b = np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(stops, np.int64)
    nds = np.ascontiguousarray(np.broadcast_to(np.asarray(decimals, np.int64), a.shape))
    out = np.empty(int((b - a).sum()) * (int(nds.max(initial=0)) + 24) + 2 * len(a) + 16, np.uint8)
    ends, exact = np.zeros(len(a), np.int64), np.ones(len(a), np.bool_)
    _lists_text(v, a, b, nds, out, ends, exact)
    text = out[: int(ends[-1]) if len(a) else 0].tobytes().decode("ascii")
    begin = np.r_[0, ends[:-1]].tolist()
    return [text[i:j] if ok else _slow_list(v[s:e], d)
            for i, j, ok, s, e, d in zip(begin, ends.tolist(), exact.tolist(), a.tolist(), b.tolist(), nds.tolist())]  # fmt: skip


def float_rows_json(values: NDArrayFloat, decimals: int) -> list[str]:
    """JSON text of every row of a 2-D array, rounded to `decimals` (`float_lists_json` of the rows).

    Args:
        values: (R, C) float values.
        decimals: decimals kept.

    Returns:
        R strings `[v, ...]` (compact).
    """
    r, c = np.shape(values)
    starts = np.arange(r, dtype=np.int64) * c
    return float_lists_json(np.reshape(values, -1), starts, starts + c, decimals)


def columns_json(columns: Sequence[tuple[NDArrayFloat, int]]) -> list[list[str]]:
    """JSON text of every row of (M, ...) arrays, each rounded to its decimals, in one compiled pass.

    Row i of a column is `json.dumps` of its rounded `tolist()` (non-finite values: null): a 1-D
    column gives the scalars' text, a 2-D one each row's list, a 3-D one each row's list of lists.

    Args:
        columns: (values, decimals) pairs; values (M,), (M, C) or (M, R, C) floats (M may differ).

    Returns:
        One list of M strings per column.
    """
    arrays = [np.asarray(v, np.float64) for v, _ in columns]
    if any(a.ndim not in (1, 2, 3) for a in arrays):
        raise ValueError(f"columns_json takes 1-, 2- or 3-D arrays, got shapes {[a.shape for a in arrays]}")
    flat = [a.reshape(-1, 1) if a.ndim == 1 else a.reshape(-1, a.shape[-1]) for a in arrays]
    sizes = np.array([f.size for f in flat], np.int64)
    offsets = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    starts = np.concatenate([o + np.arange(len(f), dtype=np.int64) * f.shape[1] for o, f in zip(offsets, flat)] + [np.zeros(0, np.int64)])
    widths = np.concatenate([np.full(len(f), f.shape[1], np.int64) for f in flat] + [np.zeros(0, np.int64)])
    nds = np.concatenate([np.full(len(f), d, np.int64) for f, (_, d) in zip(flat, columns)] + [np.zeros(0, np.int64)])
    values = np.concatenate([f.reshape(-1) for f in flat] + [np.zeros(0)])
    rows = float_lists_json(values, starts, starts + widths, nds)
    out, at = [], 0
    for a, f in zip(arrays, flat):
        mine, at = rows[at : at + len(f)], at + len(f)
        if a.ndim == 1:
            out.append([t[1:-1] for t in mine])
        elif a.ndim == 2:
            out.append(mine)
        else:
            r = a.shape[1]
            out.append(["[" + ",".join(mine[i * r : (i + 1) * r]) + "]" for i in range(len(a))])
    return out
