"""Lanelet2's map projections, restated: latitude/longitude/elevation to a local metric frame.

- `UtmProjector(origin)` is `lanelet2_projection`'s `UtmProjector(Origin, useOffset=true)`:
  GeographicLib's UTM (`UTMUPS::Forward`: the standard zone of the origin, with the Norway and
  Svalbard exceptions; every point projected in that zone, as `UTMUPS::Transfer` moves points of
  a neighbouring zone) minus the origin's own UTM coordinates; z is the elevation. The transverse
  Mercator is Krueger's series to order 6 (Karney 2011, GeographicLib's `TransverseMercator`
  with its default order), accurate to a few nanometres inside a zone.
- `LocalCartesianProjector(origin)` is `LocalCartesianProjector`: east-north-up about the origin
  (GeographicLib's `LocalCartesian`: WGS84 geocentric coordinates rotated to the origin's ENU).

WGS84: a = 6378137 m, f = 1 / 298.257223563; UTM scale k0 = 0.9996, false easting 500 km,
false northing 10,000 km in the southern hemisphere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.typing import NDArrayFloat

WGS84_A = 6378137.0
WGS84_F = 1 / 298.257223563
UTM_K0 = 0.9996
_E2 = WGS84_F * (2 - WGS84_F)
_E = np.sqrt(_E2)
_N = WGS84_F / (2 - WGS84_F)


def _krueger_alpha(n: float) -> tuple[float, ...]:
    n2, n3, n4, n5, n6 = n**2, n**3, n**4, n**5, n**6
    return (
        n / 2 - 2 * n2 / 3 + 5 * n3 / 16 + 41 * n4 / 180 - 127 * n5 / 288 + 7891 * n6 / 37800,
        13 * n2 / 48 - 3 * n3 / 5 + 557 * n4 / 1440 + 281 * n5 / 630 - 1983433 * n6 / 1935360,
        61 * n3 / 240 - 103 * n4 / 140 + 15061 * n5 / 26880 + 167603 * n6 / 181440,
        49561 * n4 / 161280 - 179 * n5 / 168 + 6601661 * n6 / 7257600,
        34729 * n5 / 80640 - 3418889 * n6 / 1995840,
        212378941 * n6 / 319334400,
    )


_ALPHA = _krueger_alpha(_N)
_A1 = WGS84_A / (1 + _N) * (1 + _N**2 / 4 + _N**4 / 64 + _N**6 / 256)  # rectifying radius


def transverse_mercator(lat_deg: NDArrayFloat, lon_deg: NDArrayFloat, lon0_deg: float, k0: float = UTM_K0) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Transverse Mercator easting and northing (no false origin) about central meridian lon0.

    Args:
        lat_deg: (N,) latitudes.
        lon_deg: (N,) longitudes.
        lon0_deg: the central meridian.
        k0: the central scale.

    Returns:
        x (N,), y (N,) in metres.
    """
    phi = np.radians(np.asarray(lat_deg, np.float64))
    lam = np.radians((np.asarray(lon_deg, np.float64) - lon0_deg + 180.0) % 360.0 - 180.0)
    tau = np.tan(phi)
    sigma = np.sinh(_E * np.arctanh(_E * tau / np.hypot(1.0, tau)))
    taup = tau * np.hypot(1.0, sigma) - sigma * np.hypot(1.0, tau)
    xip = np.arctan2(taup, np.cos(lam))
    etap = np.arcsinh(np.sin(lam) / np.hypot(taup, np.cos(lam)))
    xi, eta = xip.copy(), etap.copy()
    for j, a in enumerate(_ALPHA, start=1):
        xi += a * np.sin(2 * j * xip) * np.cosh(2 * j * etap)
        eta += a * np.cos(2 * j * xip) * np.sinh(2 * j * etap)
    return k0 * _A1 * eta, k0 * _A1 * xi


def utm_zone(lat_deg: float, lon_deg: float) -> int:
    """GeographicLib's `UTMUPS::StandardZone` for UTM latitudes (Norway and Svalbard exceptions)."""
    if not -80.0 <= lat_deg < 84.0:
        raise AvsimValueError(f"origin: latitude {lat_deg} is outside UTM (-80 to 84 degrees; UPS is not supported)")
    ilon = int(np.floor((lon_deg + 180.0) % 360.0 - 180.0))
    if ilon == 180:
        ilon = -180
    zone = (ilon + 186) // 6
    band = int(np.floor(lat_deg / 8.0)) + 10 if lat_deg < 72 else 19  # MGRS latitude band index (C=0 .. X=19)
    band = min(max(band, 0), 19)
    if band == 17 and zone == 31 and ilon >= 3:  # band V
        zone = 32
    elif band == 19 and 0 <= ilon < 42:  # band X
        zone = 2 * ((ilon + 183) // 12) + 1
    return zone


@dataclass(frozen=True)
class UtmProjector:
    """Lanelet2's UtmProjector with an offset (see the module docstring)."""

    lat0: float
    lon0: float

    @property
    def zone(self) -> int:
        return utm_zone(self.lat0, self.lon0)

    def utm(self, lat: NDArrayFloat, lon: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
        """UTM easting and northing in the origin's zone and hemisphere."""
        x, y = transverse_mercator(lat, lon, 6.0 * self.zone - 183.0)
        return x + 500000.0, y + (0.0 if self.lat0 >= 0 else 1e7)

    def forward(self, lat: NDArrayFloat, lon: NDArrayFloat, ele: NDArrayFloat) -> NDArrayFloat:
        """Local x, y, z (N, 3): UTM minus the origin's UTM; z = elevation."""
        x, y = self.utm(np.asarray(lat, np.float64), np.asarray(lon, np.float64))
        x0, y0 = self.utm(np.array([self.lat0]), np.array([self.lon0]))
        return np.stack([x - x0[0], y - y0[0], np.asarray(ele, np.float64)], axis=1)


def _geocentric(lat: NDArrayFloat, lon: NDArrayFloat, h: NDArrayFloat) -> NDArrayFloat:
    phi, lam = np.radians(lat), np.radians(lon)
    n = WGS84_A / np.sqrt(1 - _E2 * np.sin(phi) ** 2)
    return np.stack([(n + h) * np.cos(phi) * np.cos(lam), (n + h) * np.cos(phi) * np.sin(lam), (n * (1 - _E2) + h) * np.sin(phi)], axis=-1)


@dataclass(frozen=True)
class LocalCartesianProjector:
    """Lanelet2's LocalCartesianProjector: east, north, up about the origin (lat0, lon0, ele0)."""

    lat0: float
    lon0: float
    ele0: float = 0.0

    def forward(self, lat: NDArrayFloat, lon: NDArrayFloat, ele: NDArrayFloat) -> NDArrayFloat:
        """Local east, north, up (N, 3)."""
        p = _geocentric(np.asarray(lat, np.float64), np.asarray(lon, np.float64), np.asarray(ele, np.float64))
        o = _geocentric(np.array(self.lat0), np.array(self.lon0), np.array(self.ele0))
        d = p - o
        phi, lam = np.radians(self.lat0), np.radians(self.lon0)
        east = np.array([-np.sin(lam), np.cos(lam), 0.0])
        north = np.array([-np.sin(phi) * np.cos(lam), -np.sin(phi) * np.sin(lam), np.cos(phi)])
        up = np.array([np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)])
        return np.stack([d @ east, d @ north, d @ up], axis=1)


Projector = UtmProjector | LocalCartesianProjector
