"""The parsed ASAM OpenDRIVE road network, as frozen records (what the file says, nothing derived).

Names follow the standard (OpenDRIVE 1.4-1.8): a road has a plan view (reference-line geometries),
elevation and superelevation profiles, lane offsets and lane sections; a lane section has left
(positive ids), centre (0) and right (negative ids) lanes; lanes have width (or border)
polynomials, road marks and links. Units are SI: metres, radians, and m/s for speed limits
(converted from the file's unit when it names one). Geometry is evaluated by
`avsim.maps.opendrive.geometry` and `avsim.maps.opendrive.network`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from avsim.core.typing import NDArrayFloat, StrEnum


@dataclass(frozen=True, eq=False)
class Cubic:
    """A piecewise cubic of s: piece k holds from `starts[k]` on, value a + b ds + c ds^2 + d ds^3.

    starts (K,) increasing; coeffs (K, 4) rows (a, b, c, d); ds = s - starts[k]. Before the first
    piece and with no pieces the value is 0 (the standard's default for every profile).
    """

    starts: NDArrayFloat
    coeffs: NDArrayFloat

    @classmethod
    def empty(cls) -> Cubic:
        """The zero profile.

        Returns:
            A Cubic with no pieces.
        """
        return cls(np.zeros(0), np.zeros((0, 4)))

    def __len__(self) -> int:
        return len(self.starts)

    def __call__(self, s: NDArrayFloat | float) -> NDArrayFloat:
        """The value at s (any shape)."""
        s = np.asarray(s, np.float64)
        if not len(self.starts):
            return np.zeros_like(s)
        k = np.clip(np.searchsorted(self.starts, s, side="right") - 1, 0, len(self.starts) - 1)
        ds = s - self.starts[k]
        a, b, c, d = self.coeffs[k].T if s.ndim else self.coeffs[k]
        value = a + ds * (b + ds * (c + ds * d))
        return np.where(s >= self.starts[0], value, 0.0) if self.starts[0] > 0 else value

    def derivative(self, s: NDArrayFloat | float) -> NDArrayFloat:
        """d/ds of the value at s (any shape)."""
        s = np.asarray(s, np.float64)
        if not len(self.starts):
            return np.zeros_like(s)
        k = np.clip(np.searchsorted(self.starts, s, side="right") - 1, 0, len(self.starts) - 1)
        ds = s - self.starts[k]
        _, b, c, d = self.coeffs[k].T if s.ndim else self.coeffs[k]
        return b + ds * (2 * c + 3 * ds * d)


class GeometryKind(StrEnum):
    """Reference-line geometry types of `<planView><geometry>`."""

    LINE = "line"
    ARC = "arc"
    SPIRAL = "spiral"
    POLY3 = "poly3"
    PARAM_POLY3 = "paramPoly3"


@dataclass(frozen=True)
class PlanGeometry:
    """One `<geometry>`: start s, x, y, heading hdg, length, kind and its parameters.

    params: arc (curvature,); spiral (curvStart, curvEnd); poly3 (a, b, c, d);
    paramPoly3 (aU, bU, cU, dU, aV, bV, cV, dV, normalized) with normalized 1.0 for pRange
    "normalized" (p in [0, 1]) and 0.0 for "arcLength" (p in [0, length]); line ().
    """

    s: float
    x: float
    y: float
    hdg: float
    length: float
    kind: GeometryKind
    params: tuple[float, ...] = ()


class ContactPoint(StrEnum):
    START = "start"
    END = "end"


class LinkType(StrEnum):
    ROAD = "road"
    JUNCTION = "junction"


@dataclass(frozen=True)
class RoadLink:
    """A road's `<predecessor>` or `<successor>`: a road (with its contact point) or a junction."""

    element_type: LinkType
    element_id: str
    contact_point: ContactPoint | None = None


@dataclass(frozen=True)
class RoadMark:
    """A `<roadMark>` of a lane: from `s_offset` (relative to its lane section) to the next one."""

    s_offset: float
    type: str  # "solid", "broken", "solid solid", "solid broken", "broken solid", "broken broken", "botts dots", "grass", "curb", "custom", "edge", "none"
    color: str = "standard"
    weight: str = "standard"
    width_m: float | None = None
    lane_change: str | None = None
    line_length_m: float | None = None  # of the first `<type><line>`: the dash length of a broken mark


@dataclass(frozen=True)
class SpeedRecord:
    """A `<speed>` of a lane (s relative to the lane section) or of a road `<type>` (road s)."""

    s: float
    max_mps: float | None  # None: "no limit" or "undefined"


class Direction(StrEnum):
    """Which way a lane is driven relative to the reference line (OpenDRIVE 1.7 `@direction` and the traffic rule)."""

    FORWARD = "forward"  # along +s
    BACKWARD = "backward"  # along -s
    BOTH = "both"


@dataclass(frozen=True)
class Lane:
    """A `<lane>`: id (0 = centre), type, width or border profile (s relative to the section;
    one of them is empty), road marks, links to the lanes of the neighbouring sections or roads."""

    id: int
    type: str
    level: bool = False
    width: Cubic = field(default_factory=Cubic.empty)
    border: Cubic = field(default_factory=Cubic.empty)
    road_marks: tuple[RoadMark, ...] = ()
    predecessors: tuple[int, ...] = ()
    successors: tuple[int, ...] = ()
    speeds: tuple[SpeedRecord, ...] = ()
    direction: str | None = None  # "standard", "reversed", "both" (1.7+), None: absent


@dataclass(frozen=True)
class LaneSection:
    """A `<laneSection>` from road s `s` to `end_s`: its lanes, ordered from the leftmost (largest
    id) to the rightmost (smallest id), the centre lane included."""

    s: float
    end_s: float
    lanes: tuple[Lane, ...]
    single_side: bool = False

    def lane(self, lane_id: int) -> Lane | None:
        """The lane with this id, or None."""
        return next((lane for lane in self.lanes if lane.id == lane_id), None)

    @property
    def lane_ids(self) -> tuple[int, ...]:
        return tuple(lane.id for lane in self.lanes)


@dataclass(frozen=True)
class Corner:
    """One outline corner: road corner (s, t, dz) or local corner (u, v, z) relative to the object."""

    a: float
    b: float
    z: float
    height: float = 0.0


@dataclass(frozen=True)
class Outline:
    """An `<outline>`: its corners, road (`cornerRoad`) or local (`cornerLocal`) ones."""

    corners: tuple[Corner, ...]
    local: bool
    closed: bool = True


@dataclass(frozen=True)
class RoadObject:
    """An `<object>` on a road: position (s, t, zOffset), orientation, size, outlines."""

    id: str
    type: str
    name: str
    s: float
    t: float
    z_offset: float = 0.0
    hdg: float = 0.0
    pitch: float = 0.0
    roll: float = 0.0
    length: float | None = None
    width: float | None = None
    height: float | None = None
    radius: float | None = None
    orientation: str = "none"
    subtype: str = ""
    outlines: tuple[Outline, ...] = ()


@dataclass(frozen=True)
class Validity:
    """A `<validity>`: the lanes (from, to, inclusive) a signal or object applies to."""

    from_lane: int
    to_lane: int


@dataclass(frozen=True)
class Signal:
    """A `<signal>` (or a `<signalReference>`, `reference_of` naming the referenced signal id)."""

    id: str
    s: float
    t: float
    orientation: str = "none"  # "+", "-", "none"
    name: str = ""
    dynamic: bool = False
    country: str = ""
    type: str = ""
    subtype: str = ""
    value: float | None = None
    unit: str = ""
    z_offset: float = 0.0
    h_offset: float = 0.0
    pitch: float = 0.0
    roll: float = 0.0
    height: float | None = None
    width: float | None = None
    validities: tuple[Validity, ...] = ()
    reference_of: str | None = None


class TrafficRule(Enum):
    RHT = "RHT"
    LHT = "LHT"


@dataclass(frozen=True)
class Road:
    """A `<road>`: id, length, junction id ("-1" outside junctions), links, plan view, profiles
    (elevation z(s), superelevation roll(s), lane offset t(s)), lane sections, objects, signals,
    speed records of its `<type>` elements and its traffic rule."""

    id: str
    length: float
    junction: str
    geometries: tuple[PlanGeometry, ...]
    sections: tuple[LaneSection, ...]
    name: str = ""
    predecessor: RoadLink | None = None
    successor: RoadLink | None = None
    elevation: Cubic = field(default_factory=Cubic.empty)
    superelevation: Cubic = field(default_factory=Cubic.empty)
    lane_offset: Cubic = field(default_factory=Cubic.empty)
    objects: tuple[RoadObject, ...] = ()
    signals: tuple[Signal, ...] = ()
    speeds: tuple[SpeedRecord, ...] = ()
    rule: TrafficRule = TrafficRule.RHT

    @property
    def in_junction(self) -> bool:
        return self.junction not in ("-1", "")


@dataclass(frozen=True)
class LaneLink:
    """A junction connection's `<laneLink from to>`."""

    from_lane: int
    to_lane: int


@dataclass(frozen=True)
class Connection:
    """A junction `<connection>`: incoming road, connecting road, the connecting road's contact point."""

    id: str
    incoming_road: str
    connecting_road: str
    contact_point: ContactPoint
    lane_links: tuple[LaneLink, ...] = ()


@dataclass(frozen=True)
class Junction:
    """A `<junction>` and its connections."""

    id: str
    name: str = ""
    type: str = "default"
    connections: tuple[Connection, ...] = ()


@dataclass(frozen=True)
class Header:
    """The `<header>`: revision, name, vendor, bounds, geo-reference (a PROJ string) and offset."""

    rev_major: int = 1
    rev_minor: int = 4
    name: str = ""
    vendor: str = ""
    date: str = ""
    north: float | None = None
    south: float | None = None
    east: float | None = None
    west: float | None = None
    geo_reference: str = ""
    offset: tuple[float, float, float, float] | None = None  # x, y, z, hdg of <offset> (1.6+)


@dataclass(frozen=True)
class OpenDriveFile:
    """The whole parsed file: header, roads and junctions by id (in file order)."""

    header: Header
    roads: dict[str, Road]
    junctions: dict[str, Junction]
