"""OpenDRIVE import against the standard's formulas, on maps scenariogeneration 0.16.7 writes.

`tests/opendrive_reference.py` restates the formulas by numerical integration; every lane centre
avsim samples must lie on the restated centre at its vertices (1 mm) and within the documented
tolerance (1 cm) between them; the query API must agree to a micrometre.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from opendrive_reference import _arc, reference_roads

from avsim.maps.opendrive.hdmap import build_hdmap
from avsim.maps.opendrive.network import RoadNetwork
from avsim.maps.opendrive.sampling import TOLERANCE_M, section_grid

xodr_maps = pytest.importorskip("opendrive_maps", reason="scenariogeneration 0.16.7 (dev extra) writes the test maps")


@pytest.fixture(scope="module")
def maps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("xodr")
    out = {
        "geometry": xodr_maps.geometry_map(d / "geometry.xodr"),
        "sections": xodr_maps.sections_map(d / "sections.xodr"),
        "junction": xodr_maps.junction_map(d / "junction.xodr"),
    }
    length = _arc((0.0, 1.0, 0.0, 0.0), (0.2, 0.05, 0.004, -0.00005), xodr_maps.POLY3_U_END)
    out["poly3"] = xodr_maps.poly3_map(d / "poly3.xodr", length)
    return out


def _check_lanes(path: Path, road_ids: list[str] | None = None) -> float:
    """Max distance of avsim's sampled lane centres from the restated ones; asserts the bounds."""
    net = RoadNetwork.from_file(path)
    ref = reference_roads(str(path))
    built = build_hdmap(net)
    worst = 0.0
    for name, key in built.lane_keys.items():
        if road_ids is not None and key.road not in road_ids:
            continue
        ev = net.road(key.road)
        s = section_grid(ev, key.section)
        centre = built.hdmap.lanes.centre[list(built.hdmap.lanes.ids).index(name)]
        if net.lane_direction(key).value == "backward":
            centre = centre[::-1]
        assert len(centre) == len(s)
        expected = np.array([ref[key.road].lane_centre(float(x), key.lane, key.section) for x in s])
        at_vertices = np.linalg.norm(centre - expected, axis=1).max()
        assert at_vertices < 1e-3, (name, at_vertices)
        mid_s = (s[:-1] + s[1:]) / 2
        mid = np.array([ref[key.road].lane_centre(float(x), key.lane, key.section) for x in mid_s])
        chord = np.linalg.norm(mid - (centre[:-1] + centre[1:]) / 2, axis=1).max()
        assert chord <= TOLERANCE_M + 1e-6, (name, chord)
        worst = max(worst, at_vertices, chord)
    return worst


@pytest.mark.parametrize("road", list(range(1, 8)))
def test_each_geometry_kind_within_1cm(maps: dict[str, Path], road: int) -> None:
    """line, arc, spiral (from 0 and general), paramPoly3 (arcLength, normalized), and a mixed road
    with elevation, superelevation and a lane offset."""
    assert _check_lanes(maps["geometry"], [str(road)]) <= TOLERANCE_M


def test_poly3_within_1cm(maps: dict[str, Path]) -> None:
    assert _check_lanes(maps["poly3"]) <= TOLERANCE_M


def test_lane_sections_and_width_changes_within_1cm(maps: dict[str, Path]) -> None:
    net = RoadNetwork.from_file(maps["sections"])
    assert len(net.roads["1"].sections) == 3
    assert _check_lanes(maps["sections"]) <= TOLERANCE_M
    # the lane that opens with a cubic width: 0 at its section's start, 3 m at 50 m
    assert net.lane_width("1", -2, 40.0)[0] == pytest.approx(0.0, abs=1e-12)
    assert net.lane_width("1", -2, 89.999)[0] == pytest.approx(3.0, abs=1e-3)


def test_junction_connecting_roads_within_1cm_and_linked(maps: dict[str, Path]) -> None:
    assert _check_lanes(maps["junction"]) <= TOLERANCE_M
    net = RoadNetwork.from_file(maps["junction"])
    built = build_hdmap(net)
    lanes = built.hdmap.lanes
    index = {str(i): k for k, i in enumerate(lanes.ids)}
    incoming = [k for k in built.lane_keys.values() if not net.roads[k.road].in_junction]
    links = 0
    for key in incoming:
        for nxt in built.lane_successors.get(key.name, []):
            gap = np.linalg.norm(lanes.centre[index[key.name]][-1] - lanes.centre[index[nxt]][0])
            assert gap < 1e-6, (key.name, nxt, gap)
            links += 1
    # every incoming lane driven into the junction reaches the three other roads' lanes
    into = [k for k in incoming if built.lane_successors.get(k.name)]
    assert len(into) == 8 and links >= 8 * 3
    assert all(net.roads[n.split(":")[0]].in_junction for k in into for n in built.lane_successors[k.name])


def test_query_api_matches_the_formulas(maps: dict[str, Path]) -> None:
    """lane_pose / road_pose / locate / lane_change_offset at random points of the mixed road."""
    path = maps["geometry"]
    net = RoadNetwork.from_file(path)
    ref = reference_roads(str(path))["7"]
    rng = np.random.default_rng(0)
    for s in rng.uniform(0.0, net.roads["7"].length, 12):
        for lane in (-2, -1, 1, 2):
            pose = net.lane_pose("7", lane, float(s))
            assert np.linalg.norm(np.array([pose.x, pose.y, pose.z]) - ref.lane_centre(float(s), lane)) < 1e-6
        t = ref.border_t(float(s), 0) + 1.3  # inside lane 1
        p = net.road_pose("7", float(s), t)
        assert np.linalg.norm(np.array([p.x, p.y, p.z]) - ref.point(float(s), t)) < 1e-6
        where = net.locate(p.x, p.y)
        assert where is not None and where.road == "7" and abs(where.s - s) < 1e-6 and abs(where.t - t) < 1e-6
        assert where.lane is not None and where.lane.lane == 1
        offset = net.lane_change_offset("7", float(s), -1, -2)
        b = {k: ref.border_t(float(s), k) for k in (0, -1, -2)}
        assert offset == pytest.approx((b[-1] + b[-2]) / 2 - (b[0] + b[-1]) / 2, abs=1e-9)
