"""Lanelet2 import against the lanelet2 library itself (lanelet2 1.2.3 from PyPI, the dev extra).

The map is Lanelet2's own example, `lanelet2_maps/res/mapping_example.osm`
(fzi-forschungszentrum-informatik/Lanelet2 @ 1.2.3, BSD-3-Clause), found through AVSIM_LANELET2_MAPS
(a folder holding it) or a Lanelet2 checkout in AVSIM_LANELET2_SRC; without either the library tests
skip and the rest run on a small map written here.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from avsim.maps.lanelet2.hdmap import build_hdmap, sign_speed_kmh, speed_kmh
from avsim.maps.lanelet2.origin import place_nodes
from avsim.maps.lanelet2.osm import read_osm
from avsim.maps.lanelet2.projection import LocalCartesianProjector, UtmProjector

ORIGIN = (49.0, 8.4)  # the origin Lanelet2's tutorial loads mapping_example.osm with


def example_map() -> Path | None:
    for root, rel in ((os.environ.get("AVSIM_LANELET2_MAPS"), "mapping_example.osm"),
                      (os.environ.get("AVSIM_LANELET2_SRC"), "lanelet2_maps/res/mapping_example.osm")):  # fmt: skip
        if root and (Path(root) / rel).is_file():
            return Path(root) / rel
    return None


needs_example = pytest.mark.skipif(example_map() is None, reason="AVSIM_LANELET2_MAPS / AVSIM_LANELET2_SRC name no mapping_example.osm")


@needs_example
def test_lanelet_positions_equal_lanelet2s_projection() -> None:
    lanelet2 = pytest.importorskip("lanelet2", reason="lanelet2 1.2.3 (dev extra) is the reference")
    from lanelet2.io import Origin
    from lanelet2.projection import UtmProjector as L2Utm

    path = example_map()
    assert path is not None
    ref = lanelet2.io.load(str(path), L2Utm(Origin(*ORIGIN)))
    osm = read_osm(path)
    xyz, placement = place_nodes(osm, path, ORIGIN)
    assert placement.projector == "UtmProjector"
    built = build_hdmap(osm, xyz)
    lanes = built.hdmap.lanes
    index = {str(i): k for k, i in enumerate(lanes.ids)}
    compared = worst = 0.0
    for ll in ref.laneletLayer:
        k = index.get(str(ll.id))
        if k is None:
            continue
        for ours, theirs in ((lanes.left[k], ll.leftBound), (lanes.right[k], ll.rightBound)):
            expected = np.array([[p.x, p.y, p.z] for p in theirs])
            assert ours.shape == expected.shape, ll.id
            worst = max(worst, float(np.abs(ours - expected).max()))
        compared += 1
    assert compared >= 300
    assert worst < 1e-3, worst
    # every node, not only the bounds
    for p in ref.pointLayer:
        assert np.abs(xyz[p.id] - [p.x, p.y, p.z]).max() < 1e-3


@needs_example
def test_lane_graph_equals_lanelet2_routing() -> None:
    lanelet2 = pytest.importorskip("lanelet2", reason="lanelet2 1.2.3 (dev extra) is the reference")
    from lanelet2.io import Origin
    from lanelet2.projection import UtmProjector as L2Utm

    path = example_map()
    assert path is not None
    ref = lanelet2.io.load(str(path), L2Utm(Origin(*ORIGIN)))
    rules = lanelet2.traffic_rules.create(lanelet2.traffic_rules.Locations.Germany, lanelet2.traffic_rules.Participants.Vehicle)
    graph = lanelet2.routing.RoutingGraph(ref, rules)
    osm = read_osm(path)
    built = build_hdmap(osm, place_nodes(osm, path, ORIGIN)[0])
    ids = set(map(str, built.hdmap.lanes.ids))
    checked = 0
    for ll in ref.laneletLayer:
        if str(ll.id) not in ids or not rules.canPass(ll):
            continue
        theirs = sorted(str(x.id) for x in graph.following(ll))
        ours = sorted(x.split(":")[0] for x in built.lane_successors.get(str(ll.id), []))  # a two-way lanelet entered backwards: <id>:reverse
        assert ours == theirs, ll.id
        checked += 1
    assert checked >= 200


def test_projections_equal_lanelet2s() -> None:
    pytest.importorskip("lanelet2", reason="lanelet2 1.2.3 (dev extra) is the reference")
    from lanelet2.core import GPSPoint
    from lanelet2.io import Origin
    from lanelet2.projection import LocalCartesianProjector as L2Enu
    from lanelet2.projection import UtmProjector as L2Utm

    rng = np.random.default_rng(0)
    # Karlsruhe, Sydney, the Norway exception, Svalbard, Tokyo, across the equator and zone 30/31
    for lat0, lon0 in ((49.0, 8.4), (-33.9, 151.2), (60.5, 5.5), (78.0, 15.0), (35.6, 139.7), (0.01, -0.01)):
        lat, lon, ele = lat0 + rng.uniform(-0.05, 0.05, 100), lon0 + rng.uniform(-0.05, 0.05, 100), rng.uniform(-10, 300, 100)
        for ours, theirs in ((UtmProjector(lat0, lon0), L2Utm(Origin(lat0, lon0))), (LocalCartesianProjector(lat0, lon0), L2Enu(Origin(lat0, lon0)))):
            got = ours.forward(lat, lon, ele)
            want = np.array([[p.x, p.y, p.z] for p in (theirs.forward(GPSPoint(a, b, c)) for a, b, c in zip(lat, lon, ele))])
            assert np.abs(got - want).max() < 1e-6, (lat0, lon0, type(ours).__name__)


def test_speed_values() -> None:
    assert speed_kmh("50") == 50 and speed_kmh("30 mph") == pytest.approx(48.28032) and speed_kmh("10 m/s") == 36
    assert speed_kmh("fast") is None
    assert sign_speed_kmh("de274") == 30 and sign_speed_kmh("de274-80") == 80 and sign_speed_kmh("de274_1") == 30
