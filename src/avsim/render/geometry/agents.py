"""Agent boxes of a clip, resampled to the render rate a block of frames at a time.

`AgentRows` holds one row per (time, agent), sorted by time then track id, with the box
corners, class colours, sizes and centres the renderer needs; `resample_rows` builds the rows
of a block of frames with whole-array operations (no per-row Python work), and `drawn_rows`
selects the rows a frame draws (not the ego's own box, within reach of the ego).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from avsim.core.agents import AgentTracks, box_corners, collapse_class
from avsim.core.trajectory import NS_PER_S
from avsim.core.transforms import quat_slerp
from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt
from avsim.render import style

__all__ = ["AgentRows", "drawn_rows", "resample_rows"]


@dataclass(frozen=True)
class AgentRows:
    """Box arrays of agents, one row per (time, agent), sorted by time then track id.

    t (N,) int64 timestamps in ns; corners (N, 8, 3) world-frame box corners in the spec's
    order; front, back (N, 3) float RGB colours A and B of the class; min_size, max_size (N,)
    smallest and largest box dimension in metres; centre (N, 2) world x, y of the box centre;
    track_id (N,) str (labels name the boxes by it).
    """

    t: NDArrayInt
    corners: NDArrayFloat
    front: NDArrayFloat
    back: NDArrayFloat
    min_size: NDArrayFloat
    max_size: NDArrayFloat
    centre: NDArrayFloat
    track_id: npt.NDArray[np.str_]

    @classmethod
    def empty(cls) -> AgentRows:
        """No rows.

        Returns:
            AgentRows with N = 0.
        """
        return cls(np.zeros(0, np.int64), np.zeros((0, 8, 3)), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0),
                   np.zeros(0), np.zeros((0, 2)), np.zeros(0, str))  # fmt: skip

    def rows(self, lo: int, hi: int) -> AgentRows:
        """Rows lo..hi-1 of every field.

        Args:
            lo: first row.
            hi: one past the last row.

        Returns:
            The slice (views of these arrays).
        """
        return AgentRows(**{f.name: getattr(self, f.name)[lo:hi] for f in fields(self)})

def _contains_xy(corners: NDArrayFloat, point_xy: NDArrayFloat) -> NDArrayBool:
    """(N,) whether each box footprint (corners (N, 8, 3); top face 0..3 is a rectangle) holds a point."""
    c0, c1, c3 = corners[:, 0, :2], corners[:, 1, :2], corners[:, 3, :2]
    e1, e2 = c1 - c0, c3 - c0
    q = point_xy[None] - c0
    a = (q * e1).sum(-1) / np.maximum((e1 * e1).sum(-1), 1e-12)
    b = (q * e2).sum(-1) / np.maximum((e2 * e2).sum(-1), 1e-12)
    return (a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)


def resample_rows(agents: AgentTracks, timestamps_ns: NDArrayInt, max_extrapolation_s: float = 0.5) -> AgentRows:
    """The boxes of every agent at the target times, as `AgentRows`, with whole-array operations.

    The same values as `AgentTracks.resample` (linear centre and size, SLERP orientation,
    constant-velocity extrapolation for at most `max_extrapolation_s`, sizes never extrapolated),
    computed for all (track, time) pairs at once instead of one track at a time.

    Args:
        agents: the scenario's tracks (rows sorted by track id, then time).
        timestamps_ns: (K,) int64 target times.
        max_extrapolation_s: how far beyond a track's first/last observation it is kept.

    Returns:
        The rows, sorted by time then track id.
    """
    target = np.asarray(timestamps_ns, dtype=np.int64).reshape(-1)
    if not len(agents) or not len(target):
        return AgentRows.empty()
    ts = agents.timestamps_ns
    ids = agents.track_id
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], len(ids)]
    limit_ns = int(round(max_extrapolation_s * NS_PER_S))
    # (time, track) pairs in time-then-track order; tracks are in sorted id order
    pair_t = np.repeat(target, len(starts))
    pair_k = np.tile(np.arange(len(starts)), len(target))
    keep = (pair_t >= ts[starts[pair_k]] - limit_ns) & (pair_t <= ts[ends[pair_k] - 1] + limit_ns)
    pair_t, pair_k = pair_t[keep], pair_k[keep]
    if not len(pair_t):
        return AgentRows.empty()
    idx, alpha = _interpolation_rows(ts, starts, ends, pair_k, pair_t)
    single = (ends - starts)[pair_k] == 1
    nxt = np.where(single, idx, idx + 1)
    return _rows_at(agents, pair_t, idx, nxt, alpha)


def _interpolation_rows(
    ts: NDArrayInt, starts: NDArrayInt, ends: NDArrayInt, pair_k: NDArrayInt, pair_t: NDArrayInt
) -> tuple[NDArrayInt, NDArrayFloat]:
    """Global left row (P,) and fraction (P,) of each (track, time) pair, as
    `avsim.core.trajectory.interpolation_weights` per track (single-row tracks: that row, 0)."""
    # one searchsorted over all tracks: rank the times, then key = track * (ranks + 1) + rank
    uniq = np.unique(np.concatenate([ts, pair_t]))
    track_of_row = np.repeat(np.arange(len(starts)), ends - starts)
    stride = len(uniq) + 1
    row_key = track_of_row * stride + np.searchsorted(uniq, ts)
    pair_key = pair_k * stride + np.searchsorted(uniq, pair_t)
    n_rows = (ends - starts)[pair_k]
    local = np.searchsorted(row_key, pair_key, side="right") - 1 - starts[pair_k]
    local = np.clip(local, 0, np.maximum(n_rows - 2, 0))
    idx = starts[pair_k] + local
    multi = n_rows >= 2
    t0 = ts[idx]
    t1 = ts[np.where(multi, idx + 1, idx)]
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = (pair_t - t0).astype(np.float64) / (t1 - t0).astype(np.float64)
    return idx, np.where(multi, alpha, 0.0)


def _rows_at(agents: AgentTracks, t: NDArrayInt, idx: NDArrayInt, nxt: NDArrayInt, alpha: NDArrayFloat) -> AgentRows:
    """AgentRows of interpolated boxes (P rows, already in time-then-track order)."""
    c, s, q = agents.center_m, agents.size_m, agents.orientation
    a = alpha[:, None]
    centre = c[idx] + a * (c[nxt] - c[idx])
    size = s[idx] + np.clip(a, 0.0, 1.0) * (s[nxt] - s[idx])  # sizes are never extrapolated
    orientation = quat_slerp(q[idx], q[nxt], np.clip(alpha, 0.0, 1.0))  # heading held when extrapolating
    classes, inverse = np.unique(agents.source_class[idx], return_inverse=True)
    collapsed = np.array([collapse_class(str(c)) for c in classes], dtype="<U10")  # as AgentTracks.object_class
    front = np.array([style.BOX_RGB[k][0] for k in collapsed], float).reshape(-1, 3)[inverse]
    back = np.array([style.BOX_RGB[k][1] for k in collapsed], float).reshape(-1, 3)[inverse]
    return AgentRows(
        t=t, corners=box_corners(centre, size, orientation), front=front, back=back,
        min_size=size.min(axis=1), max_size=size.max(axis=1), centre=centre[:, :2], track_id=agents.track_id[idx],
    )  # fmt: skip


def drawn_rows(rows: AgentRows, centre_xy: NDArrayFloat, reach_m: float) -> NDArrayBool:
    """Which rows of one frame are drawn: not the ego's own box (a track may hold it), within reach.

    Args:
        rows: the frame's rows.
        centre_xy: (2,) world x, y of the ego.
        reach_m: reach in metres (a box counts when its centre is within reach + its largest size).

    Returns:
        (N,) bool.
    """
    keep = ~_contains_xy(rows.corners, centre_xy)
    keep &= np.linalg.norm(rows.centre - centre_xy, axis=-1) <= reach_m + rows.max_size
    return keep
