"""The OpenDRIVE formulas restated for tests, independently of avsim.maps.opendrive.

Reads the (trusted, test-written) file with ElementTree and evaluates, by numerical integration
rather than closed forms:

- the reference line: heading theta(s) = hdg + integral of the curvature (line 0, arc k, spiral
  k0 + (k1 - k0) s / length), position = start + integral of (cos theta, sin theta) (scipy quad);
  poly3 and paramPoly3 at the parameter whose arc length (scipy quad of |c'(p)|) is s;
- z(s) the elevation cubic; the lateral axis is the horizontal left normal rolled by the
  superelevation about the tangent e_s = (cos h, sin h, z'(s)) / norm;
- lane borders: lane offset + signed sums of the section-relative width cubics.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np
from scipy.integrate import quad
from scipy.optimize import brentq


def _cubic(rows: list[ET.Element], s_key: str, s: float, base: float = 0.0) -> tuple[float, float]:
    """Value and slope of the piecewise cubic records at s (0 before the first record)."""
    recs = sorted(((base + float(r.get(s_key, 0.0)), [float(r.get(k, 0.0)) for k in "abcd"]) for r in rows), key=lambda x: x[0])
    use = [r for r in recs if r[0] <= s + 1e-12]
    if not use:
        return 0.0, 0.0
    s0, (a, b, c, d) = use[-1]
    ds = s - s0
    return a + b * ds + c * ds**2 + d * ds**3, b + 2 * c * ds + 3 * d * ds**2


@dataclass
class RefRoad:
    """One road's restated geometry."""

    el: ET.Element

    @property
    def geoms(self) -> list[ET.Element]:
        return sorted(self.el.find("planView").findall("geometry"), key=lambda g: float(g.get("s")))

    def xy_hdg(self, s: float) -> tuple[float, float, float]:
        geoms = self.geoms
        g = [x for x in geoms if float(x.get("s")) <= s + 1e-12][-1] if s >= float(geoms[0].get("s")) else geoms[0]
        x0, y0, h0, L = (float(g.get(k)) for k in ("x", "y", "hdg", "length"))
        ds = s - float(g.get("s"))
        kind = next(c for c in g if c.tag in ("line", "arc", "spiral", "poly3", "paramPoly3"))
        if kind.tag in ("line", "arc", "spiral"):
            if kind.tag == "line":
                k0 = k1 = 0.0
            elif kind.tag == "arc":
                k0 = k1 = float(kind.get("curvature"))
            else:
                k0, k1 = float(kind.get("curvStart")), float(kind.get("curvEnd"))

            def theta(u: float) -> float:
                return h0 + k0 * u + (k1 - k0) * u * u / (2 * L)

            x = x0 + quad(lambda u: np.cos(theta(u)), 0, ds, epsabs=1e-13, epsrel=1e-13, limit=200)[0]
            y = y0 + quad(lambda u: np.sin(theta(u)), 0, ds, epsabs=1e-13, epsrel=1e-13, limit=200)[0]
            return x, y, theta(ds)
        if kind.tag == "poly3":
            a, b, c, d = (float(kind.get(k, 0.0)) for k in "abcd")
            U, V = (0.0, 1.0, 0.0, 0.0), (a, b, c, d)
            p_end = brentq(lambda p: _arc(U, V, p) - L, 0.0, 10 * L + 10)
        else:
            U = tuple(float(kind.get(k, 0.0)) for k in ("aU", "bU", "cU", "dU"))
            V = tuple(float(kind.get(k, 0.0)) for k in ("aV", "bV", "cV", "dV"))
            p_end = 1.0 if kind.get("pRange", "normalized") == "normalized" else L
        total = _arc(U, V, p_end)
        target = ds * total / L
        p = brentq(lambda q: _arc(U, V, q) - target, 0.0, p_end) if 0 < target < total else (0.0 if target <= 0 else p_end)
        u, v = np.polyval(U[::-1], p), np.polyval(V[::-1], p)
        du, dv = np.polyval(np.polyder(U[::-1]), p), np.polyval(np.polyder(V[::-1]), p)
        return x0 + np.cos(h0) * u - np.sin(h0) * v, y0 + np.sin(h0) * u + np.cos(h0) * v, h0 + np.arctan2(dv, du)

    def point(self, s: float, t: float) -> np.ndarray:
        x, y, h = self.xy_hdg(s)
        elev = self.el.find("elevationProfile")
        z, dz = _cubic(elev.findall("elevation") if elev is not None else [], "s", s)
        lat = self.el.find("lateralProfile")
        roll, _ = _cubic(lat.findall("superelevation") if lat is not None else [], "s", s)
        e_s = np.array([np.cos(h), np.sin(h), dz])
        e_s /= np.linalg.norm(e_s)
        n = np.array([-np.sin(h), np.cos(h), 0.0])
        e_t = np.cos(roll) * n + np.sin(roll) * np.cross(e_s, n)
        return np.array([x, y, z]) + t * e_t / np.linalg.norm(e_t)

    def sections(self) -> list[tuple[float, ET.Element]]:
        secs = self.el.find("lanes").findall("laneSection")
        return sorted(((float(x.get("s")), x) for x in secs), key=lambda x: x[0])

    def border_t(self, s: float, lane_id: int, section: int | None = None) -> float:
        """Outer border of lane `lane_id` (0: the lane-offset line) at s, in lane section `section`
        (default: the last one starting at or before s; at a section's end both apply)."""
        offset, _ = _cubic(self.el.find("lanes").findall("laneOffset"), "s", s)
        s0, sec = self.sections()[section] if section is not None else [x for x in self.sections() if x[0] <= s + 1e-12][-1]
        t = offset
        sign = 1 if lane_id > 0 else -1
        for k in range(1, abs(lane_id) + 1):
            lane = next(x for x in sec.iter("lane") if int(x.get("id")) == sign * k)
            w, _ = _cubic(lane.findall("width"), "sOffset", s, base=s0)
            t += sign * w
        return t

    def lane_centre(self, s: float, lane_id: int, section: int | None = None) -> np.ndarray:
        inner = self.border_t(s, lane_id - 1 if lane_id > 0 else lane_id + 1, section)
        return self.point(s, (inner + self.border_t(s, lane_id, section)) / 2)


def _arc(U: tuple[float, ...], V: tuple[float, ...], p: float) -> float:
    dU, dV = np.polyder(np.array(U[::-1])), np.polyder(np.array(V[::-1]))
    return quad(lambda q: np.hypot(np.polyval(dU, q), np.polyval(dV, q)), 0.0, p, epsabs=1e-13, epsrel=1e-13, limit=200)[0]


def reference_roads(path: str) -> dict[str, RefRoad]:
    """Every road of the file by id."""
    root = ET.parse(path).getroot()
    return {r.get("id"): RefRoad(r) for r in root.findall("road")}
