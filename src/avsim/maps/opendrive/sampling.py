"""Arc-length sampling of lane sections into polylines, to a stated chord tolerance.

Each lane section gets one grid of road s values shared by all its lanes: every geometry start,
lane-offset, elevation and width record start inside the section, filled so that no step is longer
than `max_step_m`; then, up to `REFINE_ROUNDS` times, every interval where any lane border (the
lane-offset line and every lane's outer border, in 3-D) lies farther than `tolerance_m` from the
chord at a quarter, half or three-quarter point is halved. A polyline through the grid is
therefore within `tolerance_m` of the curve at those points of every interval (for the smooth
curves OpenDRIVE describes the chord error peaks near the middle of a short interval).
"""

from __future__ import annotations

import numpy as np

from avsim.core.typing import NDArrayFloat
from avsim.maps.opendrive.road import RoadEval

TOLERANCE_M = 0.01
MAX_STEP_M = 10.0
REFINE_ROUNDS = 12
_PROBES = (0.25, 0.5, 0.75)


def _breaks(ev: RoadEval, section: int) -> NDArrayFloat:
    road = ev.road
    sec = road.sections[section]
    found = [g.s for g in road.geometries] + list(road.lane_offset.starts) + list(road.elevation.starts)
    found += list(road.superelevation.starts)
    for lane in sec.lanes:
        found += list(sec.s + lane.width.starts) + list(sec.s + lane.border.starts)
    b = np.asarray(found, np.float64)
    return b[(b > sec.s) & (b < sec.end_s)]


def _border_points(ev: RoadEval, section: int, s: NDArrayFloat) -> NDArrayFloat:
    """(L, N, 3) points of every border (lane 0 and every lane's outer border) at s."""
    frame = ev.frame(s)
    borders = ev.borders(section, s)
    return np.stack([frame.point(t) for t in borders.values()])


def section_grid(ev: RoadEval, section: int, tolerance_m: float = TOLERANCE_M, max_step_m: float = MAX_STEP_M) -> NDArrayFloat:
    """The road s values at which one lane section is sampled (see the module docstring).

    Args:
        ev: the evaluated road.
        section: lane-section index.
        tolerance_m: largest chord error at interval midpoints.
        max_step_m: longest step.

    Returns:
        (N,) increasing s from the section's start to its end (N >= 2; one value for a
        zero-length section); a section followed by another ends one float below the next
        section's start, as libOpenDRIVE evaluates it, so that profiles that change there (lane
        offset, widths) are read from the section's own records.
    """
    sec = ev.road.sections[section]
    start, end = sec.s, min(sec.end_s, ev.length) if ev.length > sec.s else sec.end_s
    if section + 1 < len(ev.road.sections):
        end = float(np.nextafter(end, -np.inf))  # the section's end from below: records starting at the next section do not apply
    if end - start <= 1e-9:
        return np.array([start])
    knots = np.unique(np.r_[start, _breaks(ev, section), end])
    pieces = [np.linspace(a, b, max(int(np.ceil((b - a) / max_step_m)), 1) + 1)[:-1] for a, b in zip(knots[:-1], knots[1:])]
    s = np.r_[np.concatenate(pieces), end]
    for _ in range(REFINE_ROUNDS):
        n = len(s)
        probes = np.concatenate([s[:-1] + f * np.diff(s) for f in _PROBES])
        pts = _border_points(ev, section, np.r_[s, probes])
        ends = pts[:, :n]
        error = np.zeros(n - 1)
        for j, f in enumerate(_PROBES):
            on_curve = pts[:, n + j * (n - 1) : n + (j + 1) * (n - 1)]
            chord = (1 - f) * ends[:, :-1] + f * ends[:, 1:]
            error = np.maximum(error, np.linalg.norm(on_curve - chord, axis=-1).max(0))
        bad = error > tolerance_m
        if not bad.any():
            break
        s = np.sort(np.r_[s, (s[:-1] + s[1:])[bad] / 2])
    return s
