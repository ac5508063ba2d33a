"""The drivable area of a map, built from every source of road surface it has.

nuPlan (and NAVSIM, which scores on it) reads drivable area from explicit map layers: roadblocks,
intersections, drivable areas and car parks. Real sources give less: nuScenes (through
ScenarioNet) gives lanes and the drivable-area *outline* as closed lines; Waymo gives lanes with
widths that leave gaps, road edges and driveways; AV2 gives drivable polygons; RDS-HQ lanes and
road boundaries. `build_drivable_area` joins:

1. every lane polygon (lanes and connectors);
2. the surface the source describes: its drivable polygons and its *outlines*, the closed
   road-boundary rings nested by parity (a ring inside one ring is a hole, inside two an island
   of road again), each resulting part kept when lane centre lines run through it for at least
   `OUTLINE_MIN_LANE_M` (a road outline holds lanes; a closed kerb ring around a median or a
   block does not).

Where that described surface holds at least `DESCRIBED_FRACTION` of the lane surface (nuScenes'
outlines, AV2's and the sample's drivable polygons), it is the road, lanes added, and only its
small holes are filled (step 5). Otherwise (Waymo, RDS-HQ: lanes and kerbs) the road surface is
derived from the lanes as nuPlan's map layers would hold it:

3. *junctions*: per group of lanes that cross one another (`LaneGraph.junctions`), the convex
   hull of their polygons where they cross (each lane's crossings widened by `lane_graph.JUNCTION_SPAN_M`
   along it) within `JUNCTION_REACH_M` of them (nuPlan's intersection polygon: the
   surface between the connectors), cut along the road boundaries, keeping the pieces lanes
   cover for at least `JUNCTION_LANE_FRACTION` of their area (not the corners beyond a kerb);
4. the lane surface closed by `CLOSE_M` (a morphological closing: seams and slivers between
   adjacent lanes narrower than twice that);
5. *pockets*: holes of the area smaller than `POCKET_M2` with no road boundary inside or along
   most of their edge (an island), and the
   faces the area's outline closes off with an open road boundary (notches between lanes and a
   kerb) smaller than `POCKET_M2` and bounded at least half by the area.

Everything a vehicle can reach from a lane without crossing a road boundary thus counts; what a
boundary separates from the lanes (sidewalks, medians, blocks) does not.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import shapely
import shapely.ops

from avsim.core.typing import NDArrayFloat, NDArrayInt
from avsim.maps.elements import HDMap
from avsim.maps.lane_geometry import NOMINAL_HALF_WIDTH_M, LaneGeometry, polygonal

OUTLINE_MIN_LANE_M = 10.0
DESCRIBED_FRACTION = 0.9
JUNCTION_REACH_M = 5.0
JUNCTION_LANE_FRACTION = 0.3
BOUNDARY_CUT_M = 0.05
CLOSE_M = 0.5
POCKET_M2 = 3000.0
POCKET_BORDER_FRACTION = 0.5
POCKET_SEARCH_M = 30.0
QUAD_SEGS = 2


def source_drivable(hdmap: HDMap) -> shapely.Geometry:
    """The union of the map's own drivable polygons (empty when it has none).

    Args:
        hdmap: the map.

    Returns:
        A (Multi)Polygon.
    """
    da = hdmap.drivable_areas
    polys = [shapely.make_valid(shapely.Polygon(np.asarray(da[k])[:, :2])) for k in range(len(da)) if len(da[k]) >= 3]
    return polygonal(shapely.union_all(polys)) if polys else shapely.Polygon()


def boundary_lines(hdmap: HDMap) -> tuple[list[NDArrayFloat], list[NDArrayFloat]]:
    """The road boundaries split into closed rings and open lines, each (n, 2).

    Args:
        hdmap: the map.

    Returns:
        (rings, lines).
    """
    rings, lines = [], []
    rb = hdmap.road_boundaries
    for k in range(len(rb)):
        p = np.asarray(rb[k])[:, :2]
        if len(p) >= 4 and np.linalg.norm(p[0] - p[-1]) < 1e-6:
            rings.append(p)
        elif len(p) >= 2:
            lines.append(p)
    return rings, lines


def outline_area(rings: list[NDArrayFloat], centre_lines: shapely.Geometry) -> shapely.Geometry:
    """The road enclosed by closed boundary rings (step 2 of the module docstring).

    Args:
        rings: closed rings, each (n, 2).
        centre_lines: the lanes' centre lines (one geometry).

    Returns:
        A (Multi)Polygon.
    """
    if not rings:
        return shapely.Polygon()
    polys = [polygonal(shapely.make_valid(shapely.Polygon(r))) for r in rings]
    a, b = shapely.STRtree(polys).query(polys, predicate="within")
    depth = np.bincount(a[a != b], minlength=len(polys))
    area: shapely.Geometry = shapely.Polygon()
    for d in range(int(depth.max(initial=0)) + 1):
        layer = shapely.union_all([polys[k] for k in np.flatnonzero(depth == d)])
        area = shapely.union(area, layer) if d % 2 == 0 else shapely.difference(area, layer)
    parts = shapely.get_parts(polygonal(area))
    if not len(parts):
        return shapely.Polygon()
    held = shapely.length(shapely.intersection(centre_lines, parts))
    return polygonal(shapely.union_all(parts[held >= OUTLINE_MIN_LANE_M]))


def _crossing_part(lanes: LaneGeometry, k: int, span: tuple[float, float]) -> shapely.Geometry:
    """The part of lane k's polygon along its centre line from span[0] to span[1] (arc lengths)."""
    line = lanes.sample_lines[k]
    if line.geom_type != "LineString":
        return lanes.polygons[k]
    piece = shapely.ops.substring(line, max(span[0], 0.0), min(span[1], line.length))
    return shapely.intersection(lanes.polygons[k], shapely.buffer(piece, 2 * NOMINAL_HALF_WIDTH_M, cap_style="flat"))


def junction_area(lanes: LaneGeometry, junctions: list[NDArrayInt], boundaries: shapely.Geometry | None = None,
                  graph_spans: dict[int, tuple[float, float]] | None = None) -> shapely.Geometry:  # fmt: skip
    """The surface of each junction (step 3 of the module docstring).

    Args:
        lanes: the lane geometry.
        junctions: groups of crossing lanes.
        boundaries: the road boundaries (one geometry) to cut the hulls along, or None.
        graph_spans: per intersection lane, the arc-length span of its crossings widened by
            `lane_graph.JUNCTION_SPAN_M` (`LaneGraph.crossing_spans`): only that part of a long lane that runs
            through a junction counts (None: whole lanes).

    Returns:
        A (Multi)Polygon.
    """
    parts = []
    cut = None if boundaries is None or boundaries.is_empty else shapely.buffer(boundaries, BOUNDARY_CUT_M, quad_segs=1)
    for group in junctions:
        polys = polygonal(shapely.union_all([_crossing_part(lanes, k, graph_spans[k]) for k in group.tolist()])) if graph_spans \
            else polygonal(shapely.union_all(lanes.polygons[group]))
        hull = shapely.intersection(shapely.convex_hull(polys), shapely.buffer(polys, JUNCTION_REACH_M, quad_segs=QUAD_SEGS))
        if cut is not None:
            pieces = shapely.get_parts(polygonal(shapely.difference(hull, cut)))
            covered = shapely.area(shapely.intersection(pieces, polys))
            hull = shapely.union(shapely.union_all(pieces[covered >= JUNCTION_LANE_FRACTION * shapely.area(pieces)]), polys)
        parts.append(hull)
    return polygonal(shapely.union_all(parts)) if parts else shapely.Polygon()


def close_gaps(area: shapely.Geometry) -> shapely.Geometry:
    """`area` with seams narrower than 2 `CLOSE_M` filled (step 4)."""
    if area.is_empty:
        return area
    grown = shapely.buffer(area, CLOSE_M, quad_segs=QUAD_SEGS, join_style="mitre")
    return polygonal(shapely.union(area, shapely.buffer(grown, -CLOSE_M, quad_segs=QUAD_SEGS, join_style="mitre")))


def pockets(area: shapely.Geometry, rings: list[NDArrayFloat], lines: list[NDArrayFloat]) -> shapely.Geometry:
    """Holes and notches of `area` that belong to the road (step 5 of the module docstring).

    Args:
        area: the area so far.
        rings, lines: the road boundaries (`boundary_lines`).

    Returns:
        The pockets, a (Multi)Polygon.
    """
    boundaries = [shapely.LineString(p) for p in rings + lines]
    tree = shapely.STRtree(boundaries) if boundaries else None
    found = []
    for part in shapely.get_parts(area):
        holes = shapely.polygons(shapely.get_interior_ring(part, np.arange(shapely.get_num_interior_rings(part))))
        small = holes[shapely.area(holes) < POCKET_M2]
        if tree is not None and len(small):  # an island: a boundary inside the hole or along most of its edge
            inner, _ = tree.query(shapely.buffer(small, -0.1, quad_segs=1), predicate="intersects")
            edge = shapely.boundary(small)
            along = shapely.length(shapely.intersection(edge, shapely.buffer(shapely.union_all(boundaries), 0.1, quad_segs=1)))
            island = np.isin(np.arange(len(small)), inner) | (along >= POCKET_BORDER_FRACTION * shapely.length(edge))
            small = small[~island]
        found.extend(small.tolist())
    if lines:
        found.extend(_notches(area, shapely.union_all([shapely.LineString(p) for p in lines])))
    return polygonal(shapely.union_all(found)) if found else shapely.Polygon()


def _notches(area: shapely.Geometry, edges: shapely.Geometry) -> list[shapely.Geometry]:
    """Faces that open boundary lines close off against the area's outline."""
    outline = shapely.boundary(area)
    local = shapely.intersection(outline, shapely.buffer(edges, POCKET_SEARCH_M, quad_segs=1))
    faces = shapely.get_parts(shapely.polygonize(shapely.get_parts(shapely.union_all([local, edges]))))
    if not len(faces):
        return []
    faces = faces[shapely.area(faces) < POCKET_M2]
    near = shapely.buffer(outline, 0.05, quad_segs=1)
    shapely.prepare(near)
    rings = shapely.boundary(faces)
    bordered = shapely.length(shapely.intersection(rings, near)) >= POCKET_BORDER_FRACTION * shapely.length(rings)
    inside = shapely.area(shapely.intersection(faces, area)) > 0.5 * shapely.area(faces)
    return faces[bordered & ~inside].tolist()


def boundary_geometry(hdmap: HDMap) -> shapely.Geometry | None:
    """The road boundaries as one geometry (None: the map has none)."""
    rings, lines = boundary_lines(hdmap)
    return shapely.union_all([shapely.LineString(p) for p in rings + lines]) if rings or lines else None


def build_drivable_area(hdmap: HDMap, lanes: LaneGeometry, junctions: Callable[[], tuple[list[NDArrayInt], dict[int, tuple[float, float]]]]) -> shapely.Geometry:
    """The drivable area of a map (see the module docstring).

    Args:
        hdmap: the map (drivable polygons, road boundaries).
        lanes: its lane geometry.
        junctions: gives the groups of crossing lanes and their crossing spans (`LaneGraph.junctions`,
            `LaneGraph.crossing_spans`), called only when the surface is derived from the lanes.

    Returns:
        A (Multi)Polygon (empty when the map has no road surface at all).
    """
    lane_area = polygonal(shapely.union_all(lanes.polygons)) if lanes.n_lanes else shapely.Polygon()
    rings, lines = boundary_lines(hdmap)
    centre_lines = shapely.union_all(lanes.centres) if lanes.n_lanes else shapely.GeometryCollection()
    described = polygonal(shapely.union(source_drivable(hdmap), outline_area(rings, centre_lines)))
    if not lane_area.is_empty and shapely.area(shapely.intersection(lane_area, described)) >= DESCRIBED_FRACTION * lane_area.area:
        area = polygonal(shapely.union(described, lane_area))
        return polygonal(shapely.union(area, pockets(area, rings, [])))
    groups, spans = junctions()
    surface = close_gaps(polygonal(shapely.union_all([lane_area, junction_area(lanes, groups, boundary_geometry(hdmap), spans)])))
    area = polygonal(shapely.union(surface, described))
    if area.is_empty:
        return area
    return polygonal(shapely.union(area, pockets(area, rings, lines)))
