"""The road model on hand-built maps: the drivable area from outlines, junctions and kerbs, the lane
graph, map matching of a driven path, and the ego poses a car cannot drive."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3
from avsim.maps import HDMap, Lanes, Polygons, Polylines
from avsim.maps.lane_geometry import LaneGeometry
from avsim.maps.lane_graph import LaneGraph, geometric_successors
from avsim.maps.lane_matching import LaneMatcher, Move
from avsim.maps.road import RoadFacts, RoadModel
from avsim.scenario.ego_motion import implausible_ego_poses, plausible_ego, plausible_mask


def _line(a: tuple[float, float], b: tuple[float, float], offset: float = 0.0, n: int = 21) -> np.ndarray:
    a_, b_ = np.asarray(a, float), np.asarray(b, float)
    d = (b_ - a_) / np.linalg.norm(b_ - a_)
    xy = a_ + np.linspace(0.0, 1.0, n)[:, None] * (b_ - a_) + offset * np.array([-d[1], d[0]])
    return np.c_[xy, np.zeros(n)]


def _lanes(spec: dict[str, tuple[tuple[float, float], tuple[float, float]]], half_width: float = 1.75) -> Lanes:
    ids = list(spec)
    return Lanes(np.array(ids), Polylines.from_list(ids, [_line(*spec[k], half_width) for k in ids]),
                 Polylines.from_list(ids, [_line(*spec[k], -half_width) for k in ids]), Polylines.from_list(ids, [_line(*spec[k]) for k in ids]))  # fmt: skip


def _ring(points: list[tuple[float, float]]) -> np.ndarray:
    p = np.asarray(points + points[:1], float)
    return np.c_[p, np.zeros(len(p))]


def test_an_outline_with_an_island_is_road_around_the_island_and_a_kerb_ring_is_not() -> None:
    """ScenarioNet writes nuScenes' drivable area as closed rings: nested by parity, kept where lanes run."""
    lanes = _lanes({"a": ((-50.0, 0.0), (50.0, 0.0))}, half_width=1.5)
    outline = _ring([(-50, -10), (50, -10), (50, 10), (-50, 10)])
    island = _ring([(-5, 4), (5, 4), (5, 8), (-5, 8)])
    block = _ring([(60, 0), (70, 0), (70, 10), (60, 10)])  # a closed kerb around a block: no lane inside
    hd = HDMap.build(lanes=lanes, road_boundaries=Polylines.from_list(["o", "i", "b"], [outline, island, block]))
    area = RoadModel(hd).drivable
    inside = shapely.contains_xy(area, [0.0, 0.0, -40.0, 65.0], [-8.0, 6.0, 9.0, 5.0])
    assert inside.tolist() == [True, False, True, False]  # the car park beside the lane, the island, far corner, the block


def test_where_the_source_describes_no_road_the_junction_and_the_seams_are_derived() -> None:
    """Waymo-like: lanes with a seam between them and a junction of crossing lanes, no polygons."""
    lanes = _lanes({"east": ((-60.0, 0.0), (60.0, 0.0)), "east2": ((-60.0, 3.9), (60.0, 3.9)),  # 0.4 m seam
                    "north": ((20.0, -40.0), (20.0, 40.0)), "diag": ((0.0, -20.0), (40.0, 20.0))}, half_width=1.75)  # fmt: skip
    kerb = Polylines.from_list(["k"], [np.array([[30.0, -30.0, 0.0], [60.0, -30.0, 0.0], [60.0, -5.0, 0.0], [30.0, -5.0, 0.0], [30.0, -30.0, 0.0]])])
    road = RoadModel(HDMap.build(lanes=lanes, road_boundaries=kerb))
    assert road.graph.junctions, "crossing lanes form a junction"
    area = road.drivable
    assert shapely.contains_xy(area, -30.0, 1.95)  # the seam between the two eastbound lanes
    assert shapely.contains_xy(area, 26.0, 6.0)  # between the crossing lanes, inside the junction's hull
    assert not shapely.contains_xy(area, 45.0, -20.0)  # beyond the kerb ring: no lane, not road
    assert road.in_intersection(np.array([[20.0, 0.0]]))[0] and not road.in_intersection(np.array([[-50.0, 0.0]]))[0]  # near the crossings only


def test_a_source_that_describes_its_road_keeps_it() -> None:
    """Drivable polygons holding the lanes are the road: no hull over the corners."""
    lanes = _lanes({"east": ((-60.0, 0.0), (60.0, 0.0)), "north": ((0.0, -60.0), (0.0, 60.0))})
    plus = [(-60, -2), (-2, -2), (-2, -60), (2, -60), (2, -2), (60, -2), (60, 2), (2, 2), (2, 60), (-2, 60), (-2, 2), (-60, 2)]
    road = RoadModel(HDMap.build(lanes=lanes, drivable_areas=Polygons.from_list(["p"], [np.c_[np.asarray(plus, float), np.zeros(len(plus))]])))
    assert not shapely.contains_xy(road.drivable, 5.0, 5.0)  # the corner between the arms
    assert shapely.contains_xy(road.drivable, 30.0, 0.0)


def test_successors_named_or_geometric() -> None:
    centres = [np.array([[0.0, 0.0], [10.0, 0.0]]), np.array([[10.3, 0.0], [20.0, 0.0]]), np.array([[12.0, 0.0], [20.0, 5.0]])]
    assert geometric_successors(centres) == [[1], [], []]
    lanes = LaneGeometry.of(HDMap.build(lanes=_lanes({"a": ((0.0, 0.0), (10.0, 0.0)), "b": ((10.0, 0.0), (20.0, 0.0)), "c": ((10.0, 0.0), (20.0, 8.0))})))
    assert LaneGraph(lanes).successors == [[1, 2], [], []]
    assert LaneGraph(lanes, {"a": ["c"]}).successors == [[2], [], []]


def test_map_matching_follows_a_successor_chain_a_lane_change_and_leaves_no_stub() -> None:
    """A path east along a0 -> a1 changes into b1 beside it; the stub s (a dead-end connector turning
    off a0's end) is near the path but never on the matched route."""
    spec = {"a0": ((0.0, 0.0), (30.0, 0.0)), "a1": ((30.0, 0.0), (80.0, 0.0)), "b0": ((0.0, 3.5), (30.0, 3.5)),
            "b1": ((30.0, 3.5), (80.0, 3.5)), "s": ((30.0, 0.0), (36.0, -6.0))}  # fmt: skip
    road = RoadModel(HDMap.build(lanes=_lanes(spec)))
    x = np.linspace(2.0, 78.0, 77)
    y = np.clip((x - 45.0) / 10.0, 0.0, 1.0) * 3.5  # change lanes between x = 45 and 55
    yaw = np.arctan2(np.gradient(y), np.gradient(x))
    m = LaneMatcher(road.graph).match(np.c_[x, y], yaw)
    ids = [str(road.lane_ids[k]) for k in m.lane]
    assert ids[0] == "a0" and ids[-1] == "b1" and "s" not in ids and "b0" not in ids
    assert Move.SUCCESSOR in m.move and Move.LANE_CHANGE in m.move and Move.GAP not in m.move
    assert list(dict.fromkeys(ids)) == ["a0", "a1", "b1"]


def test_a_path_through_a_car_park_leaves_the_lanes_and_comes_back() -> None:
    road = RoadModel(HDMap.build(lanes=_lanes({"in": ((0.0, 0.0), (20.0, 0.0)), "out": ((60.0, 0.0), (90.0, 0.0))})))
    x = np.linspace(1.0, 89.0, 89)
    y = np.where((x > 25.0) & (x < 55.0), 15.0, 0.0)
    m = LaneMatcher(road.graph).match(np.c_[x, y], np.zeros(len(x)))
    assert (m.lane[(x > 25.0) & (x < 55.0)] == -1).all() and Move.GAP in m.move


def _ego(xy: np.ndarray, dt_s: float = 0.1) -> EgoTrajectory:
    n = len(xy)
    return EgoTrajectory((np.arange(n) * dt_s * 1e9).astype(np.int64), SE3.from_yaw(np.zeros(n), np.c_[xy, np.zeros(n)]))


def test_implausible_poses_are_named_and_left_out_of_the_replayed_log() -> None:
    """nuScenes-like: 8 m/s, a 0.4 m step back 0.3 s before the end (every later pose shifted), a
    0.5 m forward glitch mid-log; a 200 Hz stream with millimetre jitter is fine."""
    x = np.arange(100) * 0.8
    x[97:] -= 1.2  # the step back at the end
    x[50:] += 0.5  # a forward jump mid-log
    issues = implausible_ego_poses(_ego(np.c_[x, np.zeros(100)]))
    kinds = {(i.kind, i.suspect) for i in issues}
    assert ("back_step", 97) in kinds and ("acceleration", 49) in kinds and ("acceleration", 50) in kinds
    keep = plausible_mask(_ego(np.c_[x, np.zeros(100)]))
    assert not keep[96:].any() and not keep[49:51].any() and keep[:49].all() and keep[51:96].all()  # a step spread over 0.3 s
    assert len(plausible_ego(_ego(np.c_[x, np.zeros(100)])).timestamps_ns) == int(keep.sum())
    fine = np.arange(2000) * 0.04 + np.random.default_rng(0).normal(0.0, 0.001, 2000)
    assert implausible_ego_poses(_ego(np.c_[fine, np.zeros(2000)], dt_s=0.005)) == []


def test_road_facts_gate_the_lanes_behind_a_light() -> None:
    lanes = _lanes({"in": ((0.0, 0.0), (20.0, 0.0)), "through": ((20.0, 0.0), (40.0, 0.0))})
    road = RoadModel(HDMap.build(lanes=lanes), RoadFacts(light_lanes={"L": ["in"]}, light_ids=("L",)))
    assert road.controlled_lanes == {"L": [0]} and road.light_of_lane.tolist() == ["", "L"]


@pytest.mark.parametrize("lanes", [0, 1])
def test_a_map_without_road_has_an_empty_area(lanes: int) -> None:
    hd = HDMap.build(lanes=_lanes({"a": ((0.0, 0.0), (20.0, 0.0))})) if lanes else HDMap.empty()
    road = RoadModel(hd)
    assert road.drivable.is_empty is (lanes == 0)
    assert road.on_drivable(np.array([[10.0, 0.0]])).tolist() == [bool(lanes)]


def test_holding_is_the_within_predicate_prepared_or_not() -> None:
    """`holding` (the tree's boxes, then each lane's prepared polygon) equals shapely's `within` on every
    lane, on points near the lanes, on polygon vertices and edge midpoints (boundary excluded), also
    after a pickle round trip (unprepared polygons)."""
    import pickle

    from avsim.scenario.road import road_model
    from avsim.scenario.sample import make_sample_scenario

    geom = road_model(make_sample_scenario(seed=0, duration_s=2.0, fps=10.0)).geometry
    rng = np.random.default_rng(0)
    near = geom.samples.xy[rng.integers(0, len(geom.samples.xy), 2000)] + rng.normal(0.0, 2.0, (2000, 2))
    verts = shapely.get_coordinates(geom.polygons[:8])
    xy = np.vstack([near, verts, (verts[:-1] + verts[1:]) / 2])
    want = np.zeros((len(xy), geom.n_lanes), bool)
    for k, poly in enumerate(geom.polygons):
        want[:, k] = shapely.within(shapely.points(xy), poly)
    assert want.any() and not want.all()
    assert np.array_equal(geom.holding(xy), want)
    assert np.array_equal(pickle.loads(pickle.dumps(geom)).holding(xy), want)
