"""A box-level LiDAR: a spinning multi-beam sensor ray cast against agent boxes and the road surface.

`LidarModel` is the sensor (beam elevations, azimuth step, range, mounting); `nuscenes_lidar()`
is nuScenes' 32-beam top LiDAR (a Velodyne HDL-32E: elevations -30.67 to +10.67 deg, 1.33 deg apart;
1/3 deg azimuth step at 20 Hz, about 34,560 rays; mounted 1.84 m up, its x axis to the ego's right
and y forward). `RoadSurface` is the map's drivable surface as triangles (drivable areas, lane
surfaces between their rails, crosswalks) binned on a 2-D grid once per scenario; `cast_sweep`
casts one sweep at one instant (no motion during the sweep) and returns the first hit of every
ray within range: its point in the sensor frame, an intensity and its beam (ring) index.

Rays hit each box inset by `BOX_HIT_INSET_M` on every side, so a box's points lie strictly inside
its annotated cuboid (an annotation box is drawn around an object's points) and
`points_in_boxes` (nuscenes-devkit's `points_in_box` rule: inside or on the cuboid) counts every
one of them. Intensity = reflectivity x 255 x |cos(incidence)|, rounded (road `ROAD_REFLECTIVITY`,
boxes `BOX_REFLECTIVITY`): synthetic, as the geometry is. The kernels are compiled (numba,
`avsim.core.jit`) and deterministic: rays are cast in a fixed order, one after the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.jit import njit
from avsim.core.shapes import check_shape
from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayFloat, NDArrayInt
from avsim.maps import HDMap
from avsim.maps.queries import road_surface_rings
from avsim.render.geometry.static_world import triangulate_polygon

HDL32E_ELEVATION_RANGE_DEG = (-30.67, 10.67)
NUSCENES_LIDAR_TRANSLATION_M = (0.943713, 0.0, 1.84023)  # nuScenes' LIDAR_TOP mount in the ego frame
BOX_HIT_INSET_M = 0.02
ROAD_REFLECTIVITY = 0.1
BOX_REFLECTIVITY = 0.4
GRID_CELL_M = 4.0
NO_HIT = -2  # hit index of a ray that hits nothing
ROAD_HIT = -1


def lidar_mount(translation_m: tuple[float, float, float] = NUSCENES_LIDAR_TRANSLATION_M) -> SE3:
    """ego_SE3_lidar of a top LiDAR with nuScenes' axes (x to the ego's right, y forward, z up).

    Args:
        translation_m: the sensor origin in the ego frame.

    Returns:
        The mount (a -90 deg yaw).
    """
    return SE3(np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]), np.asarray(translation_m, np.float64))


@dataclass(frozen=True, eq=False)
class LidarModel:
    """A spinning LiDAR: beam elevations (deg, one per beam: the ring index is the beam's rank by
    elevation, 0 the lowest), azimuth step (deg), range (m) and its mount `ego_SE3_lidar`."""

    elevations_deg: tuple[float, ...]
    azimuth_step_deg: float = 1.0 / 3.0
    max_range_m: float = 70.0
    min_range_m: float = 1.0
    ego_SE3_lidar: SE3 = field(default_factory=lidar_mount)

    def __post_init__(self) -> None:
        el = np.asarray(self.elevations_deg, np.float64)
        if el.ndim != 1 or not len(el) or not np.all(np.isfinite(el)) or np.any(np.abs(el) >= 90):
            raise AvsimValueError(f"lidar: elevations must be finite angles in (-90, 90) deg, got {self.elevations_deg}")
        if not (0 < self.azimuth_step_deg <= 45):
            raise AvsimValueError(f"lidar: azimuth step must be in (0, 45] deg, got {self.azimuth_step_deg}")
        if not (0 <= self.min_range_m < self.max_range_m <= 1000):
            raise AvsimValueError(f"lidar: expected 0 <= min range < max range <= 1000 m, got {self.min_range_m}, {self.max_range_m}")
        object.__setattr__(self, "elevations_deg", tuple(float(e) for e in np.sort(el)))

    @property
    def n_azimuths(self) -> int:
        """Rays per beam in one sweep."""
        return int(round(360.0 / self.azimuth_step_deg))

    def rays(self) -> tuple[NDArrayFloat, NDArrayInt]:
        """Every ray of one sweep in firing order (azimuth columns clockwise from the sensor's +x, beams low to high).

        Returns:
            Unit directions (R, 3) in the sensor frame and the ring index (R,) of each.
        """
        az = -np.arange(self.n_azimuths) * (2 * np.pi / self.n_azimuths)
        el = np.radians(np.asarray(self.elevations_deg))
        a, e = np.meshgrid(az, el, indexing="ij")
        dirs = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], -1).reshape(-1, 3)
        return dirs, np.tile(np.arange(len(el)), self.n_azimuths)

    def to_dict(self) -> dict[str, object]:
        """The model as JSON-ready values (recorded beside an export)."""
        return {"elevations_deg": list(self.elevations_deg), "azimuth_step_deg": self.azimuth_step_deg,
                "max_range_m": self.max_range_m, "min_range_m": self.min_range_m,
                "ego_SE3_lidar": self.ego_SE3_lidar.as_matrix().tolist()}  # fmt: skip


def nuscenes_lidar(beams: int = 32, elevations_deg: tuple[float, ...] | None = None, azimuth_step_deg: float = 1.0 / 3.0,
                   max_range_m: float = 70.0) -> LidarModel:  # fmt: skip
    """nuScenes' top LiDAR, or a variant of it.

    Args:
        beams: the number of beams, evenly spread over the HDL-32E's elevations (ignored with `elevations_deg`).
        elevations_deg: an explicit elevation table (deg).
        azimuth_step_deg: the azimuth resolution.
        max_range_m: the range.

    Returns:
        The model, on nuScenes' mount.
    """
    if elevations_deg is None:
        if beams < 1:
            raise AvsimValueError(f"lidar: beams must be >= 1, got {beams}")
        lo, hi = HDL32E_ELEVATION_RANGE_DEG
        elevations_deg = tuple(np.linspace(lo, hi, beams).tolist()) if beams > 1 else ((lo + hi) / 2,)
    return LidarModel(tuple(elevations_deg), azimuth_step_deg, max_range_m)


@dataclass(frozen=True, eq=False)
class RoadSurface:
    """The road surface as triangles (T, 3, 3), binned on a 2-D grid: cell (i, j) holds
    `tri_index[cell_start[c]:cell_start[c + 1]]`, c = j * nx + i, over [x0, x0 + nx * cell) x [y0, y0 + ny * cell),
    and `cell_z[c]` = the (min, max) height of those triangles (a ray passing above or below them skips the cell)."""

    triangles: NDArrayFloat
    origin_xy: NDArrayFloat
    cell_m: float
    shape: tuple[int, int]
    cell_start: NDArrayInt
    tri_index: NDArrayInt
    cell_z: NDArrayFloat

    @classmethod
    def from_triangles(cls, triangles: NDArrayFloat, cell_m: float = GRID_CELL_M) -> RoadSurface:
        """Bin triangles on a grid (each into every cell its x, y bounding box meets).

        Args:
            triangles: (T, 3, 3) world triangles.
            cell_m: the grid cell side.

        Returns:
            The binned surface.
        """
        tri = np.ascontiguousarray(np.asarray(triangles, np.float64).reshape(-1, 3, 3))
        if not len(tri):
            return cls(tri, np.zeros(2), cell_m, (1, 1), np.zeros(2, np.int64), np.zeros(0, np.int64), np.zeros((1, 2)))
        lo, hi = tri[..., :2].min(axis=1), tri[..., :2].max(axis=1)
        origin = np.floor(lo.min(axis=0) / cell_m) * cell_m
        nx, ny = (np.floor((hi.max(axis=0) - origin) / cell_m).astype(np.int64) + 1).tolist()
        i0, j0 = np.floor((lo - origin) / cell_m).astype(np.int64).T
        i1, j1 = np.floor((hi - origin) / cell_m).astype(np.int64).T
        pairs = int(np.sum((i1 - i0 + 1) * (j1 - j0 + 1)))  # the cells of every triangle's bounding box
        cell, tri_of = _bin_triangles(tri, origin, float(cell_m), int(nx), i0, j0, i1, j1, pairs)
        order = np.lexsort((tri_of, cell))
        start = np.searchsorted(cell[order], np.arange(nx * ny + 1)).astype(np.int64)
        cell_z = np.zeros((nx * ny, 2))
        cell_z[:, 0], cell_z[:, 1] = np.inf, -np.inf
        np.minimum.at(cell_z[:, 0], cell, tri[tri_of, :, 2].min(axis=1))
        np.maximum.at(cell_z[:, 1], cell, tri[tri_of, :, 2].max(axis=1))
        return cls(tri, origin, float(cell_m), (int(nx), int(ny)), start, tri_of[order], cell_z)


@njit
def _bin_triangles(tri: NDArrayFloat, origin: NDArrayFloat, cell: float, nx: int, i0: NDArrayInt, j0: NDArrayInt, i1: NDArrayInt,
                   j1: NDArrayInt, pairs: int) -> tuple[NDArrayInt, NDArrayInt]:  # fmt: skip
    """The (cell, triangle) pairs where a triangle's x, y footprint meets a square cell of its bounding box (separating
    axes: the cells' own axes are the bounding-box test, then each triangle edge's normal)."""
    cells, tris = np.empty(pairs, np.int64), np.empty(pairs, np.int64)
    n = 0
    for t in range(len(tri)):
        for i in range(i0[t], i1[t] + 1):
            for j in range(j0[t], j1[t] + 1):
                x0, y0 = origin[0] + i * cell, origin[1] + j * cell
                meets = True
                for a in range(3):
                    b = (a + 1) % 3
                    nx_, ny_ = tri[t, a, 1] - tri[t, b, 1], tri[t, b, 0] - tri[t, a, 0]  # the edge's normal
                    p0, p1, p2 = (tri[t, 0, 0] * nx_ + tri[t, 0, 1] * ny_, tri[t, 1, 0] * nx_ + tri[t, 1, 1] * ny_,
                                  tri[t, 2, 0] * nx_ + tri[t, 2, 1] * ny_)  # fmt: skip
                    c = x0 * nx_ + y0 * ny_
                    c_lo = c + min(0.0, cell * nx_) + min(0.0, cell * ny_)
                    c_hi = c + max(0.0, cell * nx_) + max(0.0, cell * ny_)
                    if c_hi < min(p0, p1, p2) or c_lo > max(p0, p1, p2):
                        meets = False
                        break
                if meets:
                    cells[n], tris[n] = j * nx + i, t
                    n += 1
    return cells[:n], tris[:n]


def road_surface(hd_map: HDMap, cell_m: float = GRID_CELL_M) -> RoadSurface:
    """The map's road surface (`maps.queries.road_surface_rings`: drivable areas, lane surfaces, crosswalks) as binned triangles.

    Args:
        hd_map: the scenario's map.
        cell_m: the grid cell side.

    Returns:
        The binned triangles (none for a map without any of these).
    """
    parts = [triangulate_polygon(ring) for ring in road_surface_rings(hd_map)]
    parts = [p for p in parts if len(p)]
    return RoadSurface.from_triangles(np.concatenate(parts) if parts else np.zeros((0, 3, 3)), cell_m)


@dataclass(frozen=True)
class LidarSweep:
    """One sweep's returns: points (N, 3) in the sensor frame, intensity (N,) in [0, 255], ring (N,)
    and what each hit (N,): the box index, or `ROAD_HIT`."""

    points_m: NDArrayFloat
    intensity: NDArrayFloat
    ring: NDArrayInt
    hit: NDArrayInt

    def pcd_bin(self) -> bytes:
        """The sweep in nuScenes' `.pcd.bin` layout: float32 (x, y, z, intensity, ring index) per point."""
        out = np.column_stack([self.points_m, self.intensity, self.ring]).astype("<f4")
        return out.tobytes()


def cast_sweep(model: LidarModel, world_SE3_ego: SE3, boxes_centre_m: NDArrayFloat, boxes_world_R_obj: NDArrayFloat,
               boxes_size_lwh_m: NDArrayFloat, road: RoadSurface) -> LidarSweep:  # fmt: skip
    """Cast one sweep at one instant.

    Args:
        model: the sensor.
        world_SE3_ego: the ego pose at the sweep.
        boxes_centre_m: (B, 3) box centres (world).
        boxes_world_R_obj: (B, 3, 3) box rotations.
        boxes_size_lwh_m: (B, 3) box sizes (length, width, height).
        road: the road surface.

    Returns:
        The returns, in firing order.
    """
    centre = np.ascontiguousarray(np.asarray(boxes_centre_m, np.float64).reshape(-1, 3))
    b = len(centre)
    rot = np.ascontiguousarray(np.asarray(boxes_world_R_obj, np.float64))
    size = np.asarray(boxes_size_lwh_m, np.float64)
    check_shape(rot, (b, 3, 3), "boxes_world_R_obj")
    check_shape(size, (b, 3), "boxes_size_lwh_m")
    half = np.ascontiguousarray(np.maximum(size / 2 - BOX_HIT_INSET_M, size / 4))
    world_SE3_lidar = world_SE3_ego.compose(model.ego_SE3_lidar)
    dirs_lidar, ring = model.rays()
    dirs = np.ascontiguousarray(dirs_lidar @ np.asarray(world_SE3_lidar.rotation).T)
    origin = np.ascontiguousarray(np.asarray(world_SE3_lidar.translation, np.float64))
    t, hit, cos_inc = _cast(origin, dirs, centre, rot, half, road.triangles, road.origin_xy, road.cell_m, road.shape[0],
                            road.shape[1], road.cell_start, road.tri_index, road.cell_z, model.min_range_m, model.max_range_m)  # fmt: skip
    keep = hit != NO_HIT
    points = dirs_lidar[keep] * t[keep, None]
    refl = np.where(hit[keep] == ROAD_HIT, ROAD_REFLECTIVITY, BOX_REFLECTIVITY)
    return LidarSweep(points, np.round(refl * 255.0 * cos_inc[keep]), ring[keep].astype(np.int64), hit[keep])


def points_in_boxes(points_m: NDArrayFloat, boxes_centre_m: NDArrayFloat, boxes_world_R_obj: NDArrayFloat,
                    boxes_size_lwh_m: NDArrayFloat) -> NDArrayInt:  # fmt: skip
    """How many points lie inside or on each box (nuscenes-devkit `points_in_box`'s rule, in the box's own axes).

    Args:
        points_m: (N, 3) points in the boxes' frame.
        boxes_centre_m: (B, 3) centres.
        boxes_world_R_obj: (B, 3, 3) rotations.
        boxes_size_lwh_m: (B, 3) sizes (length, width, height).

    Returns:
        (B,) int64 counts.
    """
    pts = np.ascontiguousarray(np.asarray(points_m, np.float64).reshape(-1, 3))
    centre = np.ascontiguousarray(np.asarray(boxes_centre_m, np.float64).reshape(-1, 3))
    rot = np.ascontiguousarray(np.asarray(boxes_world_R_obj, np.float64).reshape(-1, 3, 3))
    half = np.ascontiguousarray(np.asarray(boxes_size_lwh_m, np.float64).reshape(-1, 3) / 2)
    return _count_inside(pts, centre, rot, half)


@njit
def _count_inside(pts: NDArrayFloat, centre: NDArrayFloat, rot: NDArrayFloat, half: NDArrayFloat) -> NDArrayInt:
    out = np.zeros(len(centre), np.int64)
    for k in range(len(centre)):
        reach = math.sqrt(half[k, 0] ** 2 + half[k, 1] ** 2 + half[k, 2] ** 2)
        for i in range(len(pts)):
            dx, dy, dz = pts[i, 0] - centre[k, 0], pts[i, 1] - centre[k, 1], pts[i, 2] - centre[k, 2]
            if abs(dx) > reach or abs(dy) > reach or abs(dz) > reach:
                continue
            inside = True
            for a in range(3):
                local = rot[k, 0, a] * dx + rot[k, 1, a] * dy + rot[k, 2, a] * dz
                if abs(local) > half[k, a]:
                    inside = False
            if inside:
                out[k] += 1
    return out


@njit
def _box_hit(o: NDArrayFloat, d: NDArrayFloat, c: NDArrayFloat, r: NDArrayFloat, h: NDArrayFloat) -> tuple[float, int]:
    """Slab test in the box frame: (entry distance, entry axis) or (inf, -1); a ray starting inside misses."""
    t0, t1, axis = -np.inf, np.inf, -1
    for a in range(3):
        lo = r[0, a] * (o[0] - c[0]) + r[1, a] * (o[1] - c[1]) + r[2, a] * (o[2] - c[2])
        dl = r[0, a] * d[0] + r[1, a] * d[1] + r[2, a] * d[2]
        if dl == 0.0:
            if abs(lo) > h[a]:
                return np.inf, -1
            continue
        ta, tb = (-h[a] - lo) / dl, (h[a] - lo) / dl
        if ta > tb:
            ta, tb = tb, ta
        if ta > t0:
            t0, axis = ta, a
        t1 = min(t1, tb)
        if t0 > t1:
            return np.inf, -1
    if t0 <= 0.0:
        return np.inf, -1
    return t0, axis


@njit
def _triangle_hit(o: NDArrayFloat, d: NDArrayFloat, tri: NDArrayFloat, k: int) -> float:
    """Moller-Trumbore on triangle `k`: the hit distance, or inf."""
    ax, ay, az = tri[k, 0, 0], tri[k, 0, 1], tri[k, 0, 2]
    e1x, e1y, e1z = tri[k, 1, 0] - ax, tri[k, 1, 1] - ay, tri[k, 1, 2] - az
    e2x, e2y, e2z = tri[k, 2, 0] - ax, tri[k, 2, 1] - ay, tri[k, 2, 2] - az
    px, py, pz = d[1] * e2z - d[2] * e2y, d[2] * e2x - d[0] * e2z, d[0] * e2y - d[1] * e2x
    det = e1x * px + e1y * py + e1z * pz
    if abs(det) < 1e-12:
        return np.inf
    sx, sy, sz = o[0] - ax, o[1] - ay, o[2] - az
    u = (sx * px + sy * py + sz * pz) / det
    if u < 0.0 or u > 1.0:
        return np.inf
    qx, qy, qz = sy * e1z - sz * e1y, sz * e1x - sx * e1z, sx * e1y - sy * e1x
    v = (d[0] * qx + d[1] * qy + d[2] * qz) / det
    if v < 0.0 or u + v > 1.0:
        return np.inf
    t = (e2x * qx + e2y * qy + e2z * qz) / det
    return t if t > 0.0 else np.inf


@njit
def _road_hit(o: NDArrayFloat, d: NDArrayFloat, t_max: float, tris: NDArrayFloat, gx: float, gy: float, cell: float, nx: int,
              ny: int, start: NDArrayInt, index: NDArrayInt, cell_z: NDArrayFloat) -> tuple[float, int]:  # fmt: skip
    """The nearest road triangle along the ray before `t_max`: walk the grid cells the ray's x, y path crosses (Amanatides-Woo)."""
    if len(tris) == 0:
        return np.inf, -1
    # clip the ray's x, y path to the grid
    t_in, t_out = 0.0, t_max
    bounds = ((gx, gx + nx * cell), (gy, gy + ny * cell))
    for a in range(2):
        if d[a] == 0.0:
            if o[a] < bounds[a][0] or o[a] >= bounds[a][1]:
                return np.inf, -1
            continue
        ta, tb = (bounds[a][0] - o[a]) / d[a], (bounds[a][1] - o[a]) / d[a]
        t_in, t_out = max(t_in, min(ta, tb)), min(t_out, max(ta, tb))
    if t_in > t_out:
        return np.inf, -1
    px, py = o[0] + t_in * d[0], o[1] + t_in * d[1]
    i = min(max(int(math.floor((px - gx) / cell)), 0), nx - 1)
    j = min(max(int(math.floor((py - gy) / cell)), 0), ny - 1)
    step_i = 1 if d[0] > 0 else -1
    step_j = 1 if d[1] > 0 else -1
    next_x = gx + (i + (1 if step_i > 0 else 0)) * cell
    next_y = gy + (j + (1 if step_j > 0 else 0)) * cell
    tx = (next_x - o[0]) / d[0] if d[0] != 0.0 else np.inf
    ty = (next_y - o[1]) / d[1] if d[1] != 0.0 else np.inf
    dtx = cell / abs(d[0]) if d[0] != 0.0 else np.inf
    dty = cell / abs(d[1]) if d[1] != 0.0 else np.inf
    best, best_k = np.inf, -1
    t_cell = t_in
    while 0 <= i < nx and 0 <= j < ny and t_cell <= t_out:
        c = j * nx + i
        t_exit = min(tx, ty)
        z0, z1 = o[2] + d[2] * t_cell, o[2] + d[2] * min(t_exit, t_out)
        if min(z0, z1) <= cell_z[c, 1] and max(z0, z1) >= cell_z[c, 0]:
            for m in range(start[c], start[c + 1]):
                k = index[m]
                t = _triangle_hit(o, d, tris, k)
                if t < best or (t == best and k < best_k):
                    best, best_k = t, k
        if best <= t_exit:
            break
        t_cell = t_exit
        if tx < ty:
            tx += dtx
            i += step_i
        else:
            ty += dty
            j += step_j
    return (best, best_k) if best <= t_max else (np.inf, -1)


@njit
def _triangle_cos(tris: NDArrayFloat, k: int, d: NDArrayFloat) -> float:
    """|cos| of the angle between a ray and triangle `k`'s normal."""
    e1x, e1y, e1z = tris[k, 1, 0] - tris[k, 0, 0], tris[k, 1, 1] - tris[k, 0, 1], tris[k, 1, 2] - tris[k, 0, 2]
    e2x, e2y, e2z = tris[k, 2, 0] - tris[k, 0, 0], tris[k, 2, 1] - tris[k, 0, 1], tris[k, 2, 2] - tris[k, 0, 2]
    nx, ny, nz = e1y * e2z - e1z * e2y, e1z * e2x - e1x * e2z, e1x * e2y - e1y * e2x
    norm = math.sqrt(nx * nx + ny * ny + nz * nz)
    return abs(nx * d[0] + ny * d[1] + nz * d[2]) / norm if norm > 0.0 else 0.0


@njit
def _cast(origin: NDArrayFloat, dirs: NDArrayFloat, centre: NDArrayFloat, rot: NDArrayFloat, half: NDArrayFloat,
          tris: NDArrayFloat, grid_xy: NDArrayFloat, cell: float, nx: int, ny: int, start: NDArrayInt, index: NDArrayInt,
          cell_z: NDArrayFloat, min_range: float, max_range: float) -> tuple[NDArrayFloat, NDArrayInt, NDArrayFloat]:  # fmt: skip
    n = len(dirs)
    t_out = np.full(n, np.inf)
    hit = np.full(n, NO_HIT, np.int64)
    cos_inc = np.zeros(n)
    # bounding cones: a ray can meet box k only when its angle to the box centre is within the box's angular radius
    reach = np.empty(len(centre))
    axis = np.empty((len(centre), 3))
    cos_cone = np.empty(len(centre))
    for k in range(len(centre)):
        dx, dy, dz = centre[k, 0] - origin[0], centre[k, 1] - origin[1], centre[k, 2] - origin[2]
        dist = math.sqrt(dx * dx + dy * dy + dz * dz)
        radius = math.sqrt(half[k, 0] ** 2 + half[k, 1] ** 2 + half[k, 2] ** 2)
        reach[k] = dist - radius
        axis[k, 0], axis[k, 1], axis[k, 2] = dx / max(dist, 1e-300), dy / max(dist, 1e-300), dz / max(dist, 1e-300)
        cos_cone[k] = math.cos(math.asin(radius / dist)) if dist > radius else -2.0
    for r in range(n):
        d = dirs[r]
        best, best_k, best_axis = max_range, NO_HIT, -1
        for k in range(len(centre)):
            if reach[k] > best or axis[k, 0] * d[0] + axis[k, 1] * d[1] + axis[k, 2] * d[2] < cos_cone[k]:
                continue
            t, ax = _box_hit(origin, d, centre[k], rot[k], half[k])
            if t < best:
                best, best_k, best_axis = t, k, ax
        if best_k >= 0:
            cos_inc[r] = abs(rot[best_k, 0, best_axis] * d[0] + rot[best_k, 1, best_axis] * d[1] + rot[best_k, 2, best_axis] * d[2])
        t_road, tri = _road_hit(origin, d, best, tris, grid_xy[0], grid_xy[1], cell, nx, ny, start, index, cell_z)
        if tri >= 0 and t_road < best:
            best, best_k = t_road, ROAD_HIT
            cos_inc[r] = _triangle_cos(tris, tri, d)
        if best_k != NO_HIT and best >= min_range:
            t_out[r], hit[r] = best, best_k
    return t_out, hit, cos_inc
