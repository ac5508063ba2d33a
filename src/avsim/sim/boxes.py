"""Boxes of road users at one step (struct of arrays) and the logged agents on the sim's clock.

`Boxes` is what the stepper, the observations and the scorer share: one row per object, world
frame, with its collapsed class and velocity. `LogTable` resamples the scenario's tracks once
onto the sim's step times (linear centre, SLERP heading, no extrapolation: an agent exists where
its log does) and hands out one step's `Boxes` as slices (rows grouped by step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from avsim.core.agents import AgentTracks, collapse_class
from avsim.core.transforms import quat_to_yaw
from avsim.core.typing import NDArrayBool, NDArrayFloat, NDArrayInt


@dataclass(frozen=True, eq=False)
class Boxes:
    """N boxes at one time, world frame: track_id, source_class, object_class (N,) str; center_m
    (N, 3); size_m (N, 3) length, width, height; yaw_rad (N,); velocity_mps (N, 2) world xy."""

    track_id: npt.NDArray[np.str_]
    source_class: npt.NDArray[np.str_]
    object_class: npt.NDArray[np.str_]
    center_m: NDArrayFloat
    size_m: NDArrayFloat
    yaw_rad: NDArrayFloat
    velocity_mps: NDArrayFloat

    def __len__(self) -> int:
        return len(self.track_id)

    @classmethod
    def empty(cls) -> Boxes:
        s = np.zeros(0, "<U1")
        return cls(s, s, s, np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros((0, 2)))

    @classmethod
    def concat(cls, parts: list[Boxes]) -> Boxes:
        """Rows of several sets, in order."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))

    def select(self, mask: NDArrayBool | NDArrayInt) -> Boxes:
        """Rows where `mask` holds (or at integer indices)."""
        return Boxes(*(getattr(self, f)[mask] for f in _FIELDS))

    def sorted(self) -> Boxes:
        """Rows in track-id order (the renderer's and the labels' order)."""
        return self.select(np.argsort(self.track_id, kind="stable"))

    @property
    def speed_mps(self) -> NDArrayFloat:
        return np.hypot(self.velocity_mps[:, 0], self.velocity_mps[:, 1])

    def corners_xy(self) -> NDArrayFloat:
        """(N, 4, 2) footprint corners: front-left, rear-left, rear-right, front-right (NAVSIM's order)."""
        return footprint(self.center_m[:, :2], self.yaw_rad, self.size_m[:, 0], self.size_m[:, 1])


_FIELDS = ("track_id", "source_class", "object_class", "center_m", "size_m", "yaw_rad", "velocity_mps")


def footprint(center_xy: NDArrayFloat, yaw_rad: NDArrayFloat, length_m: npt.ArrayLike, width_m: npt.ArrayLike) -> NDArrayFloat:
    """(..., 4, 2) corners of boxes: front-left, rear-left, rear-right, front-right (`BBCoordsIndex` order).

    Args:
        center_xy: (..., 2) box centres.
        yaw_rad: (...) headings.
        length_m, width_m: (...) box sizes (broadcast).

    Returns:
        The corners.
    """
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    hl, hw = np.asarray(length_m) / 2, np.asarray(width_m) / 2
    lon = np.stack([hl, -hl, -hl, hl], axis=-1)
    lat = np.stack([hw, hw, -hw, -hw], axis=-1) * np.ones_like(lon)
    x = center_xy[..., 0, None] + lon * c[..., None] - lat * s[..., None]
    y = center_xy[..., 1, None] + lon * s[..., None] + lat * c[..., None]
    return np.stack([x, y], axis=-1)


class LogTable:
    """The scenario's agents at the sim's step times, one `Boxes` per step (see module docstring).

    Args:
        agents: the scenario's tracks.
        step_times_ns: (T,) the sim's step times.
    """

    def __init__(self, agents: AgentTracks, step_times_ns: NDArrayInt) -> None:
        times = np.asarray(step_times_ns, np.int64)
        table = agents.resample(times, max_extrapolation_s=0.0) if len(agents) else agents
        step = np.searchsorted(times, table.timestamps_ns)
        order = np.lexsort((table.track_id, step))
        self.step = step[order]
        self.bounds = np.searchsorted(self.step, np.arange(len(times) + 1))
        track, src = table.track_id[order], table.source_class[order]
        classes, inverse = np.unique(src, return_inverse=True)
        collapsed = np.array([collapse_class(c) for c in classes.tolist()], dtype="<U10")[inverse] if len(src) else src
        center, size = table.center_m[order], table.size_m[order]
        yaw = quat_to_yaw(table.orientation[order]) if len(track) else np.zeros(0)
        self.rows = Boxes(track, src, collapsed, center, size, yaw, _velocities(table, order, times))
        self.n_steps = len(times)

    def subset(self, keep: NDArrayBool) -> LogTable:
        """The table of the rows where `keep` holds (same steps)."""
        out = LogTable.__new__(LogTable)
        out.step, out.rows, out.n_steps = self.step[keep], self.rows.select(keep), self.n_steps
        out.bounds = np.searchsorted(out.step, np.arange(self.n_steps + 1))
        return out

    def at(self, step: int) -> Boxes:
        """The logged boxes at step `step` (empty past the table)."""
        if not 0 <= step < self.n_steps:
            return Boxes.empty()
        return self.rows.select(slice(int(self.bounds[step]), int(self.bounds[step + 1])))  # type: ignore[arg-type]


def _velocities(table: AgentTracks, order: NDArrayInt, times: NDArrayInt) -> NDArrayFloat:
    """World xy velocity (N, 2) of the resampled rows (in `order`): central differences along each
    track on the step grid, one-sided at its ends, zero for a single row."""
    n = len(table)
    vel = np.zeros((n, 2))
    if n < 2:
        return vel[order] if n else vel
    ids, t, xy = table.track_id, table.timestamps_ns.astype(np.float64) * 1e-9, table.center_m[:, :2]
    same_next = np.r_[ids[1:] == ids[:-1], False]
    same_prev = np.r_[False, ids[1:] == ids[:-1]]
    nxt, prv = np.minimum(np.arange(n) + 1, n - 1), np.maximum(np.arange(n) - 1, 0)
    hi = np.where(same_next, nxt, np.arange(n))
    lo = np.where(same_prev, prv, np.arange(n))
    dt = t[hi] - t[lo]
    ok = dt > 0
    vel[ok] = (xy[hi[ok]] - xy[lo[ok]]) / dt[ok, None]
    return vel[order]
