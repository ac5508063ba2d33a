"""Agent tracks, columnar: one row per (track, timestamp) observation, in the world frame."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape
from avsim.core.trajectory import NS_PER_S, check_grouped_times, interpolation_weights
from avsim.core.transforms import check_unit_quat, quat_normalize, quat_slerp, quat_to_matrix, quat_to_yaw

OBJECT_CLASSES: tuple[str, ...] = ("Car", "Truck", "Pedestrian", "Cyclist", "Others")

# Render-spec class collapse; keys are lower case, spaces/underscores/dashes removed.
_CLASS_COLLAPSE: dict[str, str] = {
    **{
        k: "Truck"
        for k in ("bus", "heavytruck", "truck", "truckcab", "train", "tram", "traintram", "trainortram",
                  "trainortramcar", "trolleybus", "trailer")
    },  # fmt: skip
    **{k: "Car" for k in ("vehicle", "car", "automobile", "othervehicle")},
    **{k: "Pedestrian" for k in ("person", "pedestrian")},
    **{k: "Cyclist" for k in ("rider", "cyclist", "motorcycle", "bicycle")},
}

# Corners in the object frame (x heading, y left, z up) as multiples of the half sizes.
CORNER_SIGNS = np.array(
    [[1, 1, 1], [1, -1, 1], [-1, -1, 1], [-1, 1, 1], [1, 1, -1], [1, -1, -1], [-1, -1, -1], [-1, 1, -1]],
    dtype=np.float64,
)


def _class_key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def collapse_class(source_class: str) -> str:
    """Map a dataset class name to Car / Truck / Pedestrian / Cyclist / Others (render spec).

    Dotted names (nuScenes ``vehicle.bus.rigid``) are read from the most specific component
    backwards; ``TYPE_`` prefixes (Waymo) are dropped; compound names match on their final
    word (AV2 ``BOX_TRUCK`` -> Truck, ``REGULAR_VEHICLE`` -> Car, ``BICYCLIST`` -> Cyclist).

    Args:
        source_class: the dataset's class name.

    Returns:
        One of `OBJECT_CLASSES` or "Others".
    """
    for part in reversed(source_class.split(".")):
        key = _class_key(part)
        if key.startswith("type") and len(key) > 4:
            key = key[4:]
        if key in _CLASS_COLLAPSE:
            return _CLASS_COLLAPSE[key]
        for suffix in _SUFFIXES:
            if key.endswith(suffix):
                return _CLASS_COLLAPSE[suffix]
    key = _class_key(source_class)
    for name in OBJECT_CLASSES:
        if key == name.lower():
            return name
    return "Others"


_SUFFIXES = sorted(_CLASS_COLLAPSE, key=len, reverse=True)


def box_corners(center_m: np.ndarray, size_m: np.ndarray, orientation: np.ndarray) -> np.ndarray:
    """Corners (N, 8, 3) of boxes in corner order v0(+x,+y,+z) v1(+x,-y,+z) v2(-x,-y,+z)
    v3(-x,+y,+z), v4..v7 the same at -z.

    Args:
        center_m: (N, 3) box centres (m).
        size_m: (N, 3) length, width, height (m).
        orientation: (N, 4) quaternions (w, x, y, z).

    Returns:
        (N, 8, 3) float64 corners in the frame of the centres.
    """
    local = CORNER_SIGNS[None] * (np.asarray(size_m, dtype=np.float64)[:, None, :] / 2.0)
    R = quat_to_matrix(orientation)
    return np.einsum("nij,nkj->nki", R, local) + np.asarray(center_m, dtype=np.float64)[:, None, :]


def _str_array(values: npt.ArrayLike, n: int, name: str) -> np.ndarray:
    arr = np.asarray(values)
    check_shape(arr, (n,), name)
    if n and arr.dtype.kind not in "UO":
        raise AvsimValueError(f"{name}: expected strings, got {arr.dtype}")
    return arr.astype(str) if n else np.zeros(0, dtype="<U1")


@dataclass(frozen=True, eq=False)
class AgentTracks:
    """Columnar 3-D box tracks; rows sorted by (track_id, timestamp), world frame.

    track_id (N,) str, source_class (N,) str, timestamps_ns (N,) int64, center_m (N, 3),
    size_m (N, 3) as (length, width, height), orientation (N, 4) world_R_object quaternions
    (object x axis = heading).
    """

    track_id: np.ndarray
    source_class: np.ndarray
    timestamps_ns: np.ndarray
    center_m: np.ndarray
    size_m: np.ndarray
    orientation: np.ndarray

    def __post_init__(self) -> None:
        ts = np.asarray(self.timestamps_ns)
        n = ts.shape[0] if ts.ndim == 1 else -1
        if ts.ndim != 1 or (n and not np.issubdtype(ts.dtype, np.integer)):
            raise AvsimValueError(f"agents.timestamps_ns: expected (N,) integer nanoseconds, got {ts.shape} {ts.dtype}")
        ts = ts.astype(np.int64)
        ids = _str_array(self.track_id, n, "agents.track_id")
        classes = _str_array(self.source_class, n, "agents.source_class")
        arrays = {}
        for name, width in (("center_m", 3), ("size_m", 3), ("orientation", 4)):
            arr = np.asarray(getattr(self, name), dtype=np.float64).reshape(-1, width) if n == 0 else np.asarray(getattr(self, name), dtype=np.float64)
            check_shape(arr, (n, width), f"agents.{name}")
            if not np.all(np.isfinite(arr)):
                raise AvsimValueError(f"agents.{name}: contains NaN or infinite values")
            arrays[name] = arr
        if n and np.any(arrays["size_m"] <= 0):
            raise AvsimValueError("agents.size_m: box sizes must be > 0")
        check_unit_quat(arrays["orientation"], "agents.orientation")
        check_grouped_times(ids, ts, "agents", "track_id")
        for name, arr in (("track_id", ids), ("source_class", classes), ("timestamps_ns", ts), *arrays.items()):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    # construction ---------------------------------------------------------------------------
    @classmethod
    def empty(cls) -> AgentTracks:
        """Tracks with no rows.

        Returns:
            AgentTracks of length 0.
        """
        return cls(np.zeros(0, "<U1"), np.zeros(0, "<U1"), np.zeros(0, np.int64), np.zeros((0, 3)), np.ones((0, 3)), np.zeros((0, 4)))

    @classmethod
    def from_unsorted(
        cls,
        track_id: npt.ArrayLike,
        source_class: npt.ArrayLike,
        timestamps_ns: npt.ArrayLike,
        center_m: npt.ArrayLike,
        size_m: npt.ArrayLike,
        orientation: npt.ArrayLike,
    ) -> AgentTracks:
        """Build from rows in any order (sorted here; orientation normalised).

        Args:
            track_id: (N,) track ids.
            source_class: (N,) dataset class names.
            timestamps_ns: (N,) int64 observation times.
            center_m: (N, 3) box centres in the world frame (m).
            size_m: (N, 3) length, width, height (m).
            orientation: (N, 4) quaternions (w, x, y, z), normalised here.

        Returns:
            The tracks sorted by (track id, time).
        """
        track_id = np.asarray(track_id).astype(str)
        timestamps_ns = np.asarray(timestamps_ns, dtype=np.int64)
        order = np.lexsort((timestamps_ns, track_id))
        orientation = np.asarray(orientation, dtype=np.float64)
        if len(orientation):
            orientation = quat_normalize(orientation)
        return cls(
            track_id[order], np.asarray(source_class).astype(str)[order], timestamps_ns[order],
            np.asarray(center_m, np.float64)[order], np.asarray(size_m, np.float64)[order], orientation[order],
        )  # fmt: skip

    @classmethod
    def concat(cls, parts: list[AgentTracks]) -> AgentTracks:
        """All rows of several track sets, re-sorted by (track id, time).

        Args:
            parts: track sets (empty ones are skipped); ids must not repeat a time within a track.

        Returns:
            The combined tracks (empty when every part is).
        """
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        return cls.from_unsorted(*(np.concatenate([getattr(p, f) for p in parts]) for f in cls._fields()))

    @staticmethod
    def _fields() -> tuple[str, ...]:
        return ("track_id", "source_class", "timestamps_ns", "center_m", "size_m", "orientation")

    # views ----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.timestamps_ns)

    @property
    def object_class(self) -> np.ndarray:
        """Collapsed class (N,) per row (Car / Truck / Pedestrian / Cyclist / Others)."""
        if not len(self):
            return np.zeros(0, dtype="<U10")
        uniq, inverse = np.unique(self.source_class, return_inverse=True)
        return np.array([collapse_class(u) for u in uniq], dtype="<U10")[inverse]

    @property
    def yaw_rad(self) -> np.ndarray:
        """Heading (N,) in radians of each box's x axis in the xy plane."""
        return quat_to_yaw(self.orientation) if len(self) else np.zeros(0)

    @property
    def track_ids(self) -> np.ndarray:
        """Sorted unique track ids (K,)."""
        return np.unique(self.track_id)

    def select(self, mask: np.ndarray) -> AgentTracks:
        """The rows where `mask` holds.

        Args:
            mask: (N,) boolean mask, or integer row indices in sorted order.

        Returns:
            AgentTracks holding those rows.
        """
        return AgentTracks(*(getattr(self, f)[mask] for f in self._fields()))

    def track(self, track_id: str) -> AgentTracks:
        """The rows of one track.

        Args:
            track_id: the track's id.

        Returns:
            AgentTracks with that track's rows (empty if the id is absent).
        """
        return self.select(self.track_id == track_id)

    def at(self, timestamp_ns: int) -> AgentTracks:
        """Rows observed exactly at `timestamp_ns` (use after `resample`).

        Args:
            timestamp_ns: time in int nanoseconds.

        Returns:
            AgentTracks with the rows at that time.
        """
        return self.select(self.timestamps_ns == int(timestamp_ns))

    def corners_m(self) -> np.ndarray:
        """Box corners in the world frame, in the render spec's corner order.

        Returns:
            (N, 8, 3) float64 corners (see `box_corners`).
        """
        return box_corners(self.center_m, self.size_m, self.orientation)

    def track_slices(self) -> list[tuple[str, slice]]:
        """(track_id, row slice) for every track, in sorted track-id order.

        Returns:
            One (id, slice into the rows) pair per track.
        """
        if not len(self):
            return []
        starts = np.flatnonzero(np.r_[True, self.track_id[1:] != self.track_id[:-1]])
        ends = np.r_[starts[1:], len(self)]
        return [(str(self.track_id[s]), slice(int(s), int(e))) for s, e in zip(starts, ends)]

    # resampling -----------------------------------------------------------------------------
    def resample(self, timestamps_ns: np.ndarray, max_extrapolation_s: float = 0.5) -> AgentTracks:
        """Each track at the target times: linear centre/size, SLERP orientation, constant-velocity
        extrapolation for at most `max_extrapolation_s` beyond its span, absent after that.
        A single-observation track is held (static) within the extrapolation window.

        Args:
            timestamps_ns: (K,) int64 target times.
            max_extrapolation_s: how far beyond a track's first/last observation it is kept.

        Returns:
            AgentTracks with at most K rows per track (sizes are never extrapolated).
        """
        target = np.asarray(timestamps_ns, dtype=np.int64).reshape(-1)
        limit_ns = int(round(max_extrapolation_s * NS_PER_S))
        parts: list[tuple[np.ndarray, ...]] = []
        for _, rows in self.track_slices():
            ts = self.timestamps_ns[rows]
            keep = (target >= ts[0] - limit_ns) & (target <= ts[-1] + limit_ns)
            t = target[keep]
            if not t.size:
                continue
            if len(ts) == 1:
                idx, alpha = np.zeros(len(t), int), np.zeros(len(t))
                nxt = idx
            else:
                idx, alpha = interpolation_weights(ts, t)
                nxt = idx + 1
            c, s, q = self.center_m[rows], self.size_m[rows], self.orientation[rows]
            a = alpha[:, None]
            size = s[idx] + np.clip(a, 0.0, 1.0) * (s[nxt] - s[idx])  # sizes are never extrapolated
            parts.append(
                (
                    np.full(len(t), self.track_id[rows][0]),
                    np.full(len(t), self.source_class[rows][0]),
                    t,
                    c[idx] + a * (c[nxt] - c[idx]),
                    size,
                    quat_slerp(q[idx], q[nxt], np.clip(alpha, 0.0, 1.0)),  # heading held when extrapolating
                )
            )
        if not parts:
            return AgentTracks.empty()
        return AgentTracks(*(np.concatenate(col) for col in zip(*parts)))
