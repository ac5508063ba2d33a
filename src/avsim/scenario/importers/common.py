"""Shared building blocks of the importers: collect map elements and tracks, then build core types.

Importers parse their format into plain numpy arrays and feed them to `MapBuilder` and
`TrackBuilder`; these check values (finite, shapes) and emit the core `HDMap` / `AgentTracks`
objects, so every importer validates the same way and reports bad values as
`AvsimInputError(path, field, reason)`.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.scenario.importers.line_types import LaneType

if TYPE_CHECKING:
    from avsim.core.agents import AgentTracks
    from avsim.core.lights import TrafficLightStates
    from avsim.core.rig import CameraRig
    from avsim.core.transforms import SE3
    from avsim.maps import HDMap
    from avsim.scenario.types import Scenario

NS_PER_S = 1_000_000_000


def split_selector(src: str | os.PathLike[str]) -> tuple[Path, str | None]:
    """``ROOT::name`` -> (ROOT, name): the selector picks one scene / clip / record of a source."""
    base, _, name = os.fspath(src).partition("::")
    return Path(base), name or None


def seconds_to_ns(t_s: np.ndarray) -> np.ndarray:
    """Seconds (float) -> int64 nanoseconds, rounded to the nearest ns."""
    return np.round(np.asarray(t_s, dtype=np.float64) * NS_PER_S).astype(np.int64)


def as_points(
    values: object, path: str | os.PathLike[str], what: str, *, min_points: int = 1, dims: tuple[int, ...] = (2, 3)
) -> np.ndarray:
    """Convert a list / array of 2-D or 3-D points to float64 (N, 3) (z = 0 for 2-D input)."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise AvsimInputError(path, what, f"not a list of points: {exc}") from None
    if arr.ndim != 2 or arr.shape[1] not in dims:
        raise AvsimInputError(path, what, f"expected (N, {'|'.join(map(str, dims))}) points, got shape {arr.shape}")
    if arr.shape[0] < min_points:
        raise AvsimInputError(path, what, f"needs at least {min_points} points, got {arr.shape[0]}")
    if not np.all(np.isfinite(arr)):
        raise AvsimInputError(path, what, "contains NaN or infinite coordinates")
    if arr.shape[1] == 2:
        arr = np.concatenate([arr, np.zeros((arr.shape[0], 1))], axis=1)
    return arr


def check_finite(arr: np.ndarray, path: str | os.PathLike[str], what: str) -> np.ndarray:
    arr = np.asarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr).reshape(len(arr), -1).all(axis=1))[0]) if arr.ndim else 0
        raise AvsimInputError(path, what, f"contains NaN or infinite values (first at row {bad})")
    return arr


def check_increasing(t_ns: np.ndarray, path: str | os.PathLike[str], what: str) -> np.ndarray:
    t_ns = np.asarray(t_ns, dtype=np.int64)
    back = t_ns[1:] <= t_ns[:-1]  # compared, not np.diff: a difference of int64 ns can overflow
    if back.any():
        i = int(np.argmax(back))
        raise AvsimInputError(path, what, f"timestamps not strictly increasing at index {i + 1}")
    return t_ns


def split_painted_runs(types: list[LaneType | None]) -> list[tuple[int, int]]:
    """Index ranges ``[start, stop)`` of consecutive painted (non-None) vertices, >= 2 long."""
    runs, start = [], None
    for i, t in enumerate([*types, None]):
        if t is not None and start is None:
            start = i
        elif t is None and start is not None:
            if i - start >= 2:
                runs.append((start, i))
            start = None
    return runs


@dataclass
class _Ragged:
    ids: list[str] = field(default_factory=list)
    points: list[np.ndarray] = field(default_factory=list)

    def add(self, element_id: str, points: np.ndarray) -> None:
        self.ids.append(str(element_id))
        self.points.append(np.asarray(points, dtype=np.float64).reshape(-1, 3))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids = np.asarray(self.ids, dtype=str) if self.ids else np.zeros(0, dtype="<U1")
        pts = np.concatenate(self.points) if self.points else np.zeros((0, 3))
        offsets = np.concatenate([[0], np.cumsum([len(p) for p in self.points])]).astype(np.int64)
        return ids, pts, offsets


@dataclass
class _Boxes:
    ids: list[str] = field(default_factory=list)
    center: list[np.ndarray] = field(default_factory=list)
    size: list[np.ndarray] = field(default_factory=list)
    quat: list[np.ndarray] = field(default_factory=list)

    def add(self, element_id: str, center_m: npt.ArrayLike, size_m: npt.ArrayLike, quat: npt.ArrayLike) -> None:
        self.ids.append(str(element_id))
        self.center.append(np.asarray(center_m, dtype=np.float64))
        self.size.append(np.asarray(size_m, dtype=np.float64))
        self.quat.append(np.asarray(quat, dtype=np.float64))


class MapBuilder:
    """Collects map elements (world frame, metres) and builds an `avsim.maps.HDMap`."""

    def __init__(self) -> None:
        self.lane_lines = _Ragged()
        self._lane_vertex_types: list[list[LaneType]] = []
        self.road_boundaries = _Ragged()
        self.wait_lines = _Ragged()
        self.poles = _Ragged()
        self.crosswalks = _Ragged()
        self.road_markings = _Ragged()
        self.drivable_areas = _Ragged()
        self.lane_ids: list[str] = []
        self.lane_left = _Ragged()
        self.lane_right = _Ragged()
        self.lane_centre = _Ragged()
        self.traffic_signs = _Boxes()
        self.traffic_lights = _Boxes()

    def add_lane_line(self, element_id: str, points_m: np.ndarray, vertex_types: list[LaneType | None] | LaneType | None) -> int:
        """Add a typed lane line; virtual vertices (type None) split it into painted runs.

        Returns the number of polylines added (0 if nothing is painted).
        """
        points_m = np.asarray(points_m, dtype=np.float64)
        if vertex_types is None or isinstance(vertex_types, tuple):
            vertex_types = [vertex_types] * len(points_m)
        runs = split_painted_runs(list(vertex_types))
        for k, (a, b) in enumerate(runs):
            suffix = "" if len(runs) == 1 else f"#{k}"
            self.lane_lines.add(f"{element_id}{suffix}", points_m[a:b])
            self._lane_vertex_types.append(list(vertex_types[a:b]))  # type: ignore[arg-type]  # painted runs hold no None
        return len(runs)

    def add_lane(self, lane_id: str, left_m: np.ndarray, right_m: np.ndarray, centre_m: np.ndarray) -> None:
        self.lane_ids.append(str(lane_id))
        self.lane_left.add(lane_id, left_m)
        self.lane_right.add(lane_id, right_m)
        self.lane_centre.add(lane_id, centre_m)

    def _lane_line_attributes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Per-line (most frequent pair) and per-vertex colour/style; vertex arrays only if mixed."""
        colors: list[str] = []
        styles: list[str] = []
        v_colors: list[str] = []
        v_styles: list[str] = []
        mixed = False
        for types in self._lane_vertex_types:
            (c, s), _ = Counter(types).most_common(1)[0]
            colors.append(c)
            styles.append(s)
            mixed |= len(set(types)) > 1
            v_colors.extend(t[0] for t in types)
            v_styles.extend(t[1] for t in types)
        def as_str(v: list[str]) -> np.ndarray:
            return np.asarray(v, dtype=str) if v else np.zeros(0, dtype="<U1")

        if not mixed:
            return as_str(colors), as_str(styles), None, None
        return as_str(colors), as_str(styles), as_str(v_colors), as_str(v_styles)

    def build(self) -> HDMap:
        """The collected elements as an `avsim.maps.HDMap`."""
        from avsim import maps

        def polylines(r: _Ragged) -> maps.Polylines:
            return maps.Polylines(*r.arrays())

        def polygons(r: _Ragged) -> maps.Polygons:
            return maps.Polygons(*r.arrays())

        def cuboids(b: _Boxes) -> maps.Cuboids:
            n = len(b.ids)
            return maps.Cuboids(
                np.asarray(b.ids, dtype=str) if n else np.zeros(0, dtype="<U1"),
                np.asarray(b.center).reshape(n, 3),
                np.asarray(b.size).reshape(n, 3),
                np.asarray(b.quat).reshape(n, 4),
            )

        color, style, v_color, v_style = self._lane_line_attributes()
        lane_lines = maps.LaneLines(polylines(self.lane_lines), color, style, v_color, v_style)
        lane_ids = np.asarray(self.lane_ids, dtype=str) if self.lane_ids else np.zeros(0, dtype="<U1")
        lanes = maps.Lanes(lane_ids, polylines(self.lane_left), polylines(self.lane_right), polylines(self.lane_centre))
        return maps.HDMap(
            lane_lines=lane_lines,
            lanes=lanes,
            road_boundaries=polylines(self.road_boundaries),
            wait_lines=polylines(self.wait_lines),
            crosswalks=polygons(self.crosswalks),
            road_markings=polygons(self.road_markings),
            poles=polylines(self.poles),
            traffic_signs=cuboids(self.traffic_signs),
            traffic_lights=cuboids(self.traffic_lights),
            drivable_areas=polygons(self.drivable_areas),
        )


class TrackBuilder:
    """Collects box observations (world frame) and builds `avsim.core.agents.AgentTracks`."""

    def __init__(self) -> None:
        self._cols: dict[str, list[np.ndarray]] = {k: [] for k in ("id", "cls", "t", "c", "s", "q")}
        self.dropped_unsized = 0  # rows left out by `build` because a size was 0

    def add(
        self,
        track_id: str | np.ndarray,
        source_class: str | np.ndarray,
        timestamps_ns: np.ndarray,
        center_m: np.ndarray,
        size_m: np.ndarray,
        orientation: np.ndarray,
    ) -> None:
        """Add n observations; `track_id` / `source_class` may be scalars (one track)."""
        t = np.asarray(timestamps_ns, dtype=np.int64).reshape(-1)
        n = len(t)
        self._cols["id"].append(np.broadcast_to(np.asarray(track_id, dtype=str), (n,)))
        self._cols["cls"].append(np.broadcast_to(np.asarray(source_class, dtype=str), (n,)))
        self._cols["t"].append(t)
        self._cols["c"].append(np.asarray(center_m, dtype=np.float64).reshape(n, 3))
        self._cols["s"].append(np.asarray(size_m, dtype=np.float64).reshape(n, 3))
        self._cols["q"].append(np.asarray(orientation, dtype=np.float64).reshape(n, 4))

    def build(self, path: str | os.PathLike[str]) -> AgentTracks:
        from avsim.core.agents import AgentTracks

        if not self._cols["t"] or sum(len(t) for t in self._cols["t"]) == 0:
            return AgentTracks.empty()
        cols = {k: np.concatenate(v) for k, v in self._cols.items()}
        for key, what in (("c", "agents.center_m"), ("s", "agents.size_m"), ("q", "agents.orientation")):
            check_finite(cols[key], path, what)
        if np.any(cols["s"] < 0):
            row = int(np.flatnonzero(np.any(cols["s"] < 0, axis=1))[0])
            raise AvsimInputError(path, "agents.size_m", f"negative box size for track {cols['id'][row]!r}")
        keep = np.all(cols["s"] > 0, axis=1)  # a zero size means "not labelled"; such rows are left out
        self.dropped_unsized = int((~keep).sum())
        try:
            return AgentTracks.from_unsorted(
                cols["id"][keep], cols["cls"][keep], cols["t"][keep], cols["c"][keep], cols["s"][keep], cols["q"][keep]
            )
        except AvsimValueError as exc:
            raise AvsimInputError(path, "agents", str(exc)) from None


def build_scenario(
    path: str | os.PathLike[str],
    *,
    scenario_id: str,
    rig: CameraRig,
    ego_timestamps_ns: np.ndarray,
    world_SE3_ego: SE3,
    agents: AgentTracks,
    hd_map: HDMap,
    lights: TrafficLightStates,
    metadata: dict,
    frame_origin_ns: int | None = None,
) -> Scenario:
    """Assemble an `avsim.scenario.Scenario`, turning in-memory validation errors into input errors.

    `frame_origin_ns`: the source's first sample (keyframe) time, where frame 0 of a render goes
    (None: the first ego pose).
    """
    from avsim.core.trajectory import EgoTrajectory
    from avsim.scenario import Scenario

    try:
        ego = EgoTrajectory(check_increasing(ego_timestamps_ns, path, "ego.timestamps_ns"), world_SE3_ego)
        return Scenario(
            scenario_id=str(scenario_id), rig=rig, ego=ego, agents=agents, map=hd_map, lights=lights, metadata=metadata,
            frame_origin_ns=frame_origin_ns,
        )
    except AvsimValueError as exc:
        raise AvsimInputError(path, "scenario", str(exc)) from None
