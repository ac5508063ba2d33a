"""Ego trajectory: timestamped world_SE3_ego poses and resampling to any rate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape
from avsim.core.transforms import SE3, matrix_to_quat, quat_slerp, quat_to_matrix

NS_PER_S = 1_000_000_000


def check_timestamps(timestamps_ns: np.ndarray, name: str = "timestamps_ns") -> np.ndarray:
    """int64 (T,) strictly increasing timestamps, or AvsimValueError naming `name`.

    Args:
        timestamps_ns: (T,) integer nanoseconds.
        name: what they are, for the error message.

    Returns:
        (T,) int64 timestamps.
    """
    ts = np.asarray(timestamps_ns)
    check_shape(ts, ("T",), name)
    if ts.size and not np.issubdtype(ts.dtype, np.integer):
        raise AvsimValueError(f"{name}: expected integer nanoseconds, got {ts.dtype}")
    ts = ts.astype(np.int64)
    not_increasing = ts[1:] <= ts[:-1]  # compare, never subtract: int64 differences can overflow
    if np.any(not_increasing):
        i = int(np.flatnonzero(not_increasing)[0])
        raise AvsimValueError(f"{name}: not strictly increasing at index {i + 1} ({ts[i]} -> {ts[i + 1]})")
    return ts


def check_grouped_times(ids: np.ndarray, timestamps_ns: np.ndarray, where: str, key: str) -> None:
    """Check that table rows are sorted by (`key`, timestamp) with unique times per key.

    Args:
        ids: (N,) string keys (track or light ids), one per row.
        timestamps_ns: (N,) int64 timestamps, one per row.
        where: table name for the message (e.g. "agents").
        key: key column name (e.g. "track_id"); the message names it without "_id".

    Raises:
        AvsimValueError: when the order is broken or a key repeats a timestamp.
    """
    if len(ids) > 1:
        same = ids[1:] == ids[:-1]
        if np.any(ids[1:] < ids[:-1]) or np.any(same & (timestamps_ns[1:] <= timestamps_ns[:-1])):
            raise AvsimValueError(
                f"{where}: rows must be sorted by ({key}, timestamp) with unique times per {key.removesuffix('_id')}"
            )


def interpolation_weights(source_ns: np.ndarray, target_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left index i (K,) and fraction alpha (K,) with target = source[i] + alpha * (source[i+1] - source[i]).

    Outside the source span alpha is < 0 or > 1 (linear extrapolation of the end segment).
    Needs at least 2 source samples.

    Args:
        source_ns: (T,) increasing int64 source times, T >= 2.
        target_ns: (K,) int64 target times (alpha < 0 or > 1 outside the span).

    Returns:
        (i (K,) int, alpha (K,) float64).
    """
    idx = np.clip(np.searchsorted(source_ns, target_ns, side="right") - 1, 0, len(source_ns) - 2)
    t0, t1 = source_ns[idx], source_ns[idx + 1]
    alpha = (target_ns - t0).astype(np.float64) / (t1 - t0).astype(np.float64)
    return idx, alpha


def uniform_timestamps(start_ns: int, end_ns: int, rate_hz: float) -> np.ndarray:
    """Timestamps from `start_ns` every 1/rate_hz seconds up to and including `end_ns` (int64).

    Args:
        start_ns: first timestamp.
        end_ns: last admissible timestamp.
        rate_hz: rate in Hz (> 0).

    Returns:
        (K,) int64 timestamps, rounded to the nanosecond.
    """
    if rate_hz <= 0:
        raise AvsimValueError(f"rate_hz: must be > 0, got {rate_hz}")
    count = int(np.floor((end_ns - start_ns) * rate_hz / NS_PER_S + 1e-6)) + 1
    return start_ns + np.round(np.arange(count) * (NS_PER_S / rate_hz)).astype(np.int64)


class UniformTimes:
    """`uniform_timestamps(start_ns, end_ns, rate_hz)` without building the array: its length is
    computed, and an index or slice gives exactly the values the array would hold (only the
    frames asked for are ever made, whatever the rate).

    Args:
        start_ns: first timestamp.
        end_ns: last admissible timestamp.
        rate_hz: rate in Hz (> 0).
    """

    def __init__(self, start_ns: int, end_ns: int, rate_hz: float) -> None:
        if rate_hz <= 0:
            raise AvsimValueError(f"rate_hz: must be > 0, got {rate_hz}")
        self.start_ns, self.rate_hz = int(start_ns), float(rate_hz)
        self.count = int(np.floor((end_ns - start_ns) * rate_hz / NS_PER_S + 1e-6)) + 1

    def __len__(self) -> int:
        return self.count

    def _at(self, index: np.ndarray) -> np.ndarray:
        return self.start_ns + np.round(index * (NS_PER_S / self.rate_hz)).astype(np.int64)

    def __getitem__(self, key: int | slice) -> Any:
        """One timestamp (np.int64) for an int, an (n,) int64 array for a slice."""
        if isinstance(key, slice):
            return self._at(np.arange(*key.indices(self.count)))
        i = int(key) + (self.count if int(key) < 0 else 0)
        if not 0 <= i < self.count:
            raise IndexError(f"frame {key} out of range ({self.count} frames)")
        return self._at(np.array([i]))[0]


@dataclass(frozen=True, eq=False)
class EgoTrajectory:
    """Ego poses over time: timestamps_ns (T,) int64 strictly increasing, world_SE3_ego (T,)."""

    timestamps_ns: np.ndarray
    world_SE3_ego: SE3

    def __post_init__(self) -> None:
        ts = check_timestamps(self.timestamps_ns, "ego.timestamps_ns")
        if ts.size == 0:
            raise AvsimValueError("ego.timestamps_ns: the trajectory is empty")
        if self.world_SE3_ego.batch_shape != ts.shape:
            raise AvsimValueError(
                f"ego.world_SE3_ego: batch shape {self.world_SE3_ego.batch_shape} != timestamps {ts.shape}"
            )
        ts.setflags(write=False)
        object.__setattr__(self, "timestamps_ns", ts)

    def __len__(self) -> int:
        return len(self.timestamps_ns)

    @property
    def duration_s(self) -> float:
        """Time from the first to the last pose, in seconds."""
        return float(self.timestamps_ns[-1] - self.timestamps_ns[0]) / NS_PER_S

    @property
    def rate_hz(self) -> float:
        """Median sampling rate (0 for a single pose)."""
        if len(self) < 2:
            return 0.0
        return float(NS_PER_S / np.median(np.diff(self.timestamps_ns)))

    @property
    def positions_m(self) -> np.ndarray:
        """Ego positions (T, 3) in the world frame (m)."""
        return self.world_SE3_ego.translation

    @property
    def speed_mps(self) -> np.ndarray:
        """Speed (T,) from finite differences of position (central inside, one-sided at ends)."""
        if len(self) < 2:
            return np.zeros(len(self))
        t_s = (self.timestamps_ns - self.timestamps_ns[0]) / NS_PER_S
        velocity = np.gradient(self.positions_m, t_s, axis=0)
        return np.linalg.norm(velocity, axis=-1)

    def uniform_timestamps(self, rate_hz: float) -> np.ndarray:
        """Render timestamps (K,) over the trajectory's span at `rate_hz`.

        Args:
            rate_hz: rate in Hz.

        Returns:
            (K,) int64 timestamps from the first pose to at most the last.
        """
        return uniform_timestamps(int(self.timestamps_ns[0]), int(self.timestamps_ns[-1]), rate_hz)

    def uniform_times(self, rate_hz: float) -> UniformTimes:
        """`uniform_timestamps` of the span, lazily (length and requested frames only).

        Args:
            rate_hz: rate in Hz.

        Returns:
            the lazy sequence of (K,) int64 timestamps.
        """
        return UniformTimes(int(self.timestamps_ns[0]), int(self.timestamps_ns[-1]), rate_hz)

    def pose_at(self, timestamps_ns: np.ndarray) -> SE3:
        """Poses (K,) at arbitrary times: linear position, SLERP rotation, constant-velocity
        (and constant angular-rate) extrapolation outside the span.

        Args:
            timestamps_ns: (K,) int64 times.

        Returns:
            SE3 with batch shape (K,).
        """
        target = np.asarray(timestamps_ns, dtype=np.int64).reshape(-1)
        if len(self) == 1:
            pose = self.world_SE3_ego[0]
            return SE3(np.broadcast_to(pose.rotation, (len(target), 3, 3)).copy(), np.broadcast_to(pose.translation, (len(target), 3)).copy())
        idx, alpha = interpolation_weights(self.timestamps_ns, target)
        p = self.world_SE3_ego.translation
        position = p[idx] + alpha[:, None] * (p[idx + 1] - p[idx])
        q = matrix_to_quat(self.world_SE3_ego.rotation)
        rotation = quat_to_matrix(quat_slerp(q[idx], q[idx + 1], alpha))
        return SE3(rotation, position)

    def resample(self, timestamps_ns: np.ndarray) -> EgoTrajectory:
        """The trajectory at new times (see `pose_at`).

        Args:
            timestamps_ns: (K,) strictly increasing int64 times.

        Returns:
            EgoTrajectory with K poses.
        """
        target = check_timestamps(timestamps_ns, "timestamps_ns")
        return EgoTrajectory(target, self.pose_at(target))

    def crop(self, start_ns: int, end_ns: int) -> EgoTrajectory:
        """The poses within [start_ns, end_ns].

        Args:
            start_ns: first admissible time.
            end_ns: last admissible time.

        Returns:
            EgoTrajectory with the poses in the window.

        Raises:
            AvsimValueError: no pose lies in the window.
        """
        keep = (self.timestamps_ns >= start_ns) & (self.timestamps_ns <= end_ns)
        if not keep.any():
            raise AvsimValueError(f"ego: no pose in [{start_ns}, {end_ns}] ns")
        return EgoTrajectory(self.timestamps_ns[keep], self.world_SE3_ego[keep])
