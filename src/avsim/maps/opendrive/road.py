"""One road evaluated: (s, t, h) road coordinates to the inertial frame, and its lanes' borders.

The standard's road frame (ASAM OpenDRIVE 1.8, sections 7 and 9), restated:

- reference line p0(s) = (x(s), y(s), z(s)) with z(s) the elevation profile;
- e_s the unit tangent of p0 (elevation included); theta(s) the superelevation (roll about e_s);
  e_t the unit lateral axis: the horizontal left normal rolled by theta about e_s; e_h = e_s x e_t
  normalised; a road point is p0 + t e_t + h e_h (libOpenDRIVE's `Road::get_xyz`, same axes);
- lane offset o(s) shifts the centre lane (lane 0) to t = o(s);
- lane widths are cubics of ds = s - (section start + sOffset); the outer border of lane +-k is
  o(s) +- sum of the widths of lanes +-1 ... +-k; a lane given by `<border>` records has its outer
  border at o(s) + border(ds) instead; the inner border of lane +-k is the outer border of
  lane +-(k-1) (of lane 0: o(s)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from avsim.core.typing import NDArrayFloat
from avsim.maps.opendrive.geometry import ReferenceLine
from avsim.maps.opendrive.model import Direction, LaneSection, Road, TrafficRule


@dataclass(frozen=True)
class Frame:
    """Reference-line frames at N road s values: origin p0 (N, 3) and unit axes e_s, e_t, e_h (N, 3)."""

    p0: NDArrayFloat
    e_s: NDArrayFloat
    e_t: NDArrayFloat
    e_h: NDArrayFloat

    def point(self, t: NDArrayFloat | float, h: NDArrayFloat | float = 0.0) -> NDArrayFloat:
        """p0 + t e_t + h e_h, (N, 3)."""
        t = np.asarray(t, np.float64).reshape(-1, 1)
        h = np.asarray(h, np.float64).reshape(-1, 1)
        return self.p0 + t * self.e_t + h * self.e_h


def _normalise(v: NDArrayFloat) -> NDArrayFloat:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1.0)


class RoadEval:
    """Geometry of one `Road`: frames, points, lane borders.

    Args:
        road: the parsed road.
    """

    def __init__(self, road: Road) -> None:
        self.road = road
        self.ref = ReferenceLine(road.geometries)
        self.section_starts = np.array([sec.s for sec in road.sections], np.float64)

    @property
    def length(self) -> float:
        return self.road.length

    def section_index(self, s: NDArrayFloat | float) -> np.ndarray:
        """Lane-section index (N,) holding each s (the last section whose start is <= s)."""
        s = np.asarray(s, np.float64)
        return np.clip(np.searchsorted(self.section_starts, s, side="right") - 1, 0, len(self.section_starts) - 1)

    def frame(self, s: NDArrayFloat | float) -> Frame:
        """Reference-line frames at road s.

        Args:
            s: (N,) road s.

        Returns:
            The frames (N rows each).
        """
        s = np.atleast_1d(np.asarray(s, np.float64))
        x, y, hdg = self.ref.xy_hdg(s)
        z = self.road.elevation(s)
        dz = self.road.elevation.derivative(s)
        theta = self.road.superelevation(s)
        e_s = _normalise(np.stack([np.cos(hdg), np.sin(hdg), dz], axis=1))
        ex, ey, ez = e_s.T
        e_t = _normalise(np.stack([np.cos(theta) * -ey + np.sin(theta) * -ez * ex,
                                   np.cos(theta) * ex + np.sin(theta) * -ez * ey,
                                   np.sin(theta) * (ex * ex + ey * ey)], axis=1))  # fmt: skip
        e_h = _normalise(np.cross(e_s, e_t))
        return Frame(np.stack([x, y, z], axis=1), e_s, e_t, e_h)

    def points(self, s: NDArrayFloat | float, t: NDArrayFloat | float, h: NDArrayFloat | float = 0.0) -> NDArrayFloat:
        """Inertial points (N, 3) of road coordinates (s, t, h) (each (N,) or scalar)."""
        s = np.atleast_1d(np.asarray(s, np.float64))
        t = np.broadcast_to(np.asarray(t, np.float64), s.shape)
        h = np.broadcast_to(np.asarray(h, np.float64), s.shape)
        return self.frame(s).point(t, h)

    def heading(self, s: NDArrayFloat | float) -> NDArrayFloat:
        """Reference-line heading (N,) at road s."""
        return self.ref.xy_hdg(np.atleast_1d(np.asarray(s, np.float64)))[2]

    def borders(self, section: int, s: NDArrayFloat) -> dict[int, NDArrayFloat]:
        """Outer-border t of every lane of one section at road s (lane 0: the lane-offset line).

        Args:
            section: lane-section index.
            s: (N,) road s inside that section.

        Returns:
            lane id -> (N,) t of its outer border.
        """
        sec = self.road.sections[section]
        s = np.asarray(s, np.float64)
        ds = s - sec.s
        centre = self.road.lane_offset(s)
        out: dict[int, NDArrayFloat] = {0: centre}
        for sign in (1, -1):
            t = centre
            lane_id = sign
            while (lane := sec.lane(lane_id)) is not None:
                if len(lane.border) and not len(lane.width):
                    t = centre + lane.border(ds)
                else:
                    t = t + sign * lane.width(ds)
                out[lane_id] = t
                lane_id += sign
        return out

    def lane_t(self, section: int, lane_id: int, s: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
        """The inner and outer border t (N,) of one lane at road s inside its section."""
        b = self.borders(section, s)
        if lane_id not in b:
            raise KeyError(f"road {self.road.id} section {section} has no lane {lane_id}")
        if lane_id == 0:
            return b[0], b[0]
        inner = b[lane_id - 1 if lane_id > 0 else lane_id + 1]
        return inner, b[lane_id]

    def lane_direction(self, section: int, lane_id: int) -> Direction:
        """Which way lane `lane_id` of a section is driven (the traffic rule and `@direction`)."""
        return lane_direction(self.road, self.road.sections[section], lane_id)


def lane_direction(road: Road, section: LaneSection, lane_id: int) -> Direction:
    """Driving direction of a lane: right lanes forward in RHT, left lanes forward in LHT;
    `direction="reversed"` flips it and `"both"` makes it both (OpenDRIVE 1.7).

    Args:
        road: the road.
        section: its lane section holding the lane.
        lane_id: the lane id (non-zero).

    Returns:
        The direction relative to the reference line.
    """
    lane = section.lane(lane_id)
    forward = (lane_id < 0) == (road.rule is TrafficRule.RHT)
    if lane is not None and lane.direction == "both":
        return Direction.BOTH
    if lane is not None and lane.direction == "reversed":
        forward = not forward
    return Direction.FORWARD if forward else Direction.BACKWARD
