"""Routes of the embedded sample's road users: dense centre lines and walking lines with their rules.

A `Route` is arc-length parameterised (`ROUTE_STEP_M` apart) with straight pads before and after,
so bodies and look-ahead corridors never index outside it; `RouteTable` concatenates all routes
for vectorised lookups.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from shapely.geometry import LineString, Point, Polygon

from avsim.scenario.sample import roads
from avsim.scenario.sample.signals import arm_phase, crosswalk_phase

ROUTE_STEP_M = 0.25
ROUTE_PAD_BEFORE_M = 20.0  # routes extend straight before their start and after their end so
ROUTE_PAD_AFTER_M = 60.0  # bodies and look-ahead corridors never index outside them
LATERAL_ACCEL_MPS2 = 2.0  # comfortable lateral acceleration in turns

KIND_VEHICLE, KIND_BIKE, KIND_PED = 0, 1, 2


@dataclass(frozen=True)
class Route:
    """A dense path (arc-length parameterised, `ROUTE_STEP_M` apart) and its rules.

    Arc length s = 0 at the route start; `points_xy[i]` is at s = i * step - pad_before.
    """

    name: str
    kind: int
    points_xy: np.ndarray  # (n, 2) including the straight pads
    length_m: float  # without pads
    v_allow_mps: np.ndarray  # (n,) speed allowed by the curvature ahead
    s_stop_m: float = np.inf  # stop line (vehicles) or curb where pedestrians wait
    s_cross_end_m: float = -np.inf  # end of the intersection box / crosswalk
    phase: int = -1  # signal phase governing s_stop (-1: none)
    light: str = ""  # light id (vehicles)
    movement: str = "straight"  # straight | right | left | walk
    crosswalk_entry_m: tuple[float, ...] = ()  # where the path enters crosswalks (vehicles)


def _resample(poly: np.ndarray, step: float) -> tuple[np.ndarray, float]:
    seg = np.linalg.norm(np.diff(poly, axis=0), axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    length = float(cum[-1])
    s = np.arange(0.0, length + 1e-9, step)
    return np.stack([np.interp(s, cum, poly[:, 0]), np.interp(s, cum, poly[:, 1])], 1), length


def _fillet(poly: np.ndarray, radius: float) -> np.ndarray:
    """Round every interior corner of a polyline with a circular arc of `radius`."""
    out = [poly[0]]
    for a, b, c in zip(poly[:-2], poly[1:-1], poly[2:]):
        d1 = (b - a) / np.linalg.norm(b - a)
        d2 = (c - b) / np.linalg.norm(c - b)
        turn = np.arctan2(d1[0] * d2[1] - d1[1] * d2[0], d1 @ d2)
        if abs(turn) < 1e-6:
            out.append(b)
            continue
        r = min(radius, 0.45 * np.linalg.norm(b - a), 0.45 * np.linalg.norm(c - b)) / np.tan(
            0.5 * abs(turn))
        r = min(r, radius)
        t = r * np.tan(0.5 * abs(turn))
        p1 = b - t * d1
        left = np.array([-d1[1], d1[0]]) * np.sign(turn)
        center = p1 + r * left
        start = np.arctan2(*(p1 - center)[::-1])
        out.extend(roads.arc(center, r, start, turn, 0.2))
    out.append(poly[-1])
    return np.asarray(out)


def make_route(name: str, kind: int, poly: np.ndarray, *, s_stop: float = np.inf,
               s_cross_end: float = -np.inf, phase: int = -1, light: str = "",
               movement: str = "straight", crosswalk_entry: tuple[float, ...] = ()) -> Route:
    dense, length = _resample(poly, ROUTE_STEP_M)
    d0 = dense[1] - dense[0]
    d1 = dense[-1] - dense[-2]
    d0 /= np.linalg.norm(d0)
    d1 /= np.linalg.norm(d1)
    pre = dense[0] - d0 * np.arange(ROUTE_PAD_BEFORE_M, 0.0, -ROUTE_STEP_M)[:, None]
    post = dense[-1] + d1 * np.arange(ROUTE_STEP_M, ROUTE_PAD_AFTER_M + 1e-9,
                                      ROUTE_STEP_M)[:, None]
    pts = np.concatenate([pre, dense, post])
    tangent = np.gradient(pts, axis=0)
    heading = np.unwrap(np.arctan2(tangent[:, 1], tangent[:, 0]))
    curvature = np.abs(np.gradient(heading)) / ROUTE_STEP_M
    # smooth over 2 m so the discrete joints between lines and arcs do not spike
    kernel = np.ones(9) / 9.0
    curvature = np.convolve(curvature, kernel, mode="same")
    v_curve = np.sqrt(LATERAL_ACCEL_MPS2 / np.maximum(curvature, 1e-4))
    v_allow = v_curve.copy()
    decel = 1.5
    for i in range(len(v_allow) - 2, -1, -1):
        v_allow[i] = min(v_allow[i], np.sqrt(v_allow[i + 1] ** 2 + 2 * decel * ROUTE_STEP_M))
    return Route(name, kind, pts, length, v_allow, s_stop, s_cross_end, phase, light, movement,
                 crosswalk_entry)


def _lane_map() -> dict[str, roads.LaneSpec]:
    return {lane.lane_id: lane for lane in roads.build_lanes()}


def vehicle_route(lanes: dict[str, roads.LaneSpec], arm: int, lane: int | str,
                  movement: str) -> Route:
    """Inbound lane -> connector -> outbound lane of the exit arm."""
    inbound = lanes[roads.lane_id(arm, "in", lane)]
    conn = lanes[f"{inbound.lane_id}__{movement}"]
    outbound = lanes[conn.successors[0]]
    # the same arc as the map's connector, sampled at the route step so headings turn smoothly
    fine = roads.connector_centre(arm, roads.lane_offset(lane), movement, ROUTE_STEP_M)
    poly = roads.join(inbound.centre_xy, fine, outbound.centre_xy)
    s_stop = roads.ARM_LENGTH_M - roads.STOP_LINE_M
    conn_len = float(np.linalg.norm(np.diff(conn.centre_xy, axis=0), axis=1).sum())
    light = roads.light_id(arm, roads.LIGHT_GROUPS[0 if lane == 0 else 1])
    kind = KIND_BIKE if lane == "bike" else KIND_VEHICLE
    return make_route(f"{inbound.lane_id}__{movement}", kind, poly, s_stop=s_stop,
                      s_cross_end=s_stop + conn_len, phase=arm_phase(arm), light=light,
                      movement=movement, crosswalk_entry=_crosswalk_entries(poly))


def _crosswalk_entries(poly: np.ndarray) -> tuple[float, ...]:
    """Arc lengths where a path enters a crosswalk (with 0.5 m to spare), so that vehicles
    yielding to pedestrians stop before the crosswalk rather than on it."""
    line = LineString(poly)
    entries = []
    for k in range(4):
        inside = line.intersection(Polygon(roads.crosswalk(k)).buffer(0.5))
        for part in getattr(inside, "geoms", [inside]):
            if not part.is_empty:
                entries.append(float(line.project(Point(part.coords[0]))))
    return tuple(sorted(entries))


def _arc_length_at(route: Route, point_xy: np.ndarray) -> float:
    """Arc length of the route point nearest `point_xy`."""
    i = int(np.argmin(np.linalg.norm(route.points_xy - point_xy, axis=1)))
    return i * ROUTE_STEP_M - ROUTE_PAD_BEFORE_M


def ped_route(kind: str, arm: int, side: int, s_start: float, s_end: float) -> Route:
    """Walking routes on the sidewalk ring (see `sample_roads`): `side` +1 = the +n side.

    - "cross": walk in along arm `arm`, wait at the curb, cross the arm, walk out on the other
      side; - "corner": walk in and round the block corner onto the next arm, walking out;
    - "out": walk out along the arm away from the intersection.
    """
    ccw, cw = roads.SIDEWALK_CCW_OFFSET_M, roads.SIDEWALK_CW_OFFSET_M
    o_in = ccw if side > 0 else cw  # walking in on the +n side goes counter-clockwise
    name = f"ped_{kind}_{roads.ARM_NAMES[arm]}_{'+' if side > 0 else '-'}"
    p = roads.arm_point
    if kind == "cross":
        s_c = roads.CROSSWALK_LANES_M[0 if side > 0 else 1]
        wait = roads.CURB_WAIT_OFFSET_M
        pts = np.stack([p(arm, s_start, side * o_in), p(arm, s_c, side * o_in),
                        p(arm, s_c, side * wait), p(arm, s_c, -side * wait),
                        p(arm, s_c, -side * o_in), p(arm, s_end, -side * o_in)])
        route = make_route(name, KIND_PED, _fillet(pts, 1.0), movement="walk")
        # the curb edges, where the crossing starts (waiting pedestrians' fronts stop just
        # short of it) and ends, as arc lengths on the filleted route
        curb = roads.CURB_OFFSET_M + 0.05
        s_on, s_off = (_arc_length_at(route, p(arm, s_c, sgn * curb)) for sgn in (side, -side))
        return dataclasses.replace(route, s_stop_m=s_on, s_cross_end_m=s_off,
                                   phase=crosswalk_phase(arm))
    if kind == "corner":
        nxt = arm + (1 if side > 0 else -1)
        corner = p(arm, o_in, side * o_in)
        pts = np.stack([p(arm, s_start, side * o_in), corner, p(nxt, s_end, -side * o_in)])
        return make_route(name, KIND_PED, _fillet(pts, 1.5), movement="walk")
    o_out = cw if side > 0 else ccw
    pts = np.stack([p(arm, s_start, side * o_out), p(arm, s_end, side * o_out)])
    return make_route(name, KIND_PED, pts, movement="walk")


def vehicle_routes() -> tuple[list[Route], dict[str, int]]:
    """Every vehicle and bike route of the network, by name (`<inbound lane>__<movement>`)."""
    lanes = _lane_map()
    routes: list[Route] = []
    for arm in range(4):
        for lane in (0, 1, "bike"):
            for mv in roads.MOVEMENTS_BY_LANE[lane]:
                routes.append(vehicle_route(lanes, arm, lane, mv))
    return routes, {r.name: i for i, r in enumerate(routes)}


class RouteTable:
    """All routes concatenated so per-agent lookups are single vectorised gathers."""

    def __init__(self, routes: list[Route]) -> None:
        counts = np.array([len(r.points_xy) for r in routes])
        self.offset = np.concatenate([[0], np.cumsum(counts)])[:-1]
        self.count = counts
        self.points = np.concatenate([r.points_xy for r in routes])
        tangent = np.concatenate([np.gradient(r.points_xy, axis=0) for r in routes])
        self.tangent = tangent / np.linalg.norm(tangent, axis=1, keepdims=True)
        self.v_allow = np.concatenate([r.v_allow_mps for r in routes])
        self.pad = ROUTE_PAD_BEFORE_M / ROUTE_STEP_M

    def lookup(self, route: np.ndarray, s_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions (..., 2) and unit tangents (..., 2) at arc lengths `s_m` on `route`."""
        f = np.clip(s_m / ROUTE_STEP_M + self.pad, 0.0, self.count[route] - 1.000001)
        i0 = np.floor(f).astype(np.int64)
        alpha = (f - i0)[..., None]
        g = self.offset[route] + i0
        xy = self.points[g] * (1.0 - alpha) + self.points[g + 1] * alpha
        d = self.tangent[g] * (1.0 - alpha) + self.tangent[g + 1] * alpha
        return xy, d / np.linalg.norm(d, axis=-1, keepdims=True)

    def allowed_speed(self, route: np.ndarray, s_m: np.ndarray) -> np.ndarray:
        f = np.clip(np.round(s_m / ROUTE_STEP_M + self.pad), 0, self.count[route] - 1)
        return self.v_allow[self.offset[route] + f.astype(np.int64)]
