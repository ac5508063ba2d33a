"""avsim.sim.scoring restates NAVSIM's PDM scorer: its definitions on hand-built cases.

Each case builds ego states and boxes on the road of tests/sim_cases.py and checks the sub-score
NAVSIM's code gives (`navsim/planning/simulation/planner/pdm_planner/scoring/pdm_scorer.py`,
`pdm_scorer_utils.get_collision_type`, `pdm_comfort_metrics.py`), with the reason in the comment.
"""

from __future__ import annotations

import numpy as np
import pytest
from sim_cases import DT_S, box, moving_box, road_and_route, scene, states_along

from avsim.sim.metrics import human_filtered, window_progress
from avsim.sim.scoring import ScorerConfig, aggregate, normalized_progress

T = 41  # NAVSIM's 4 s at 10 Hz


@pytest.fixture(scope="module")
def road_route():  # type: ignore[no-untyped-def]
    return road_and_route()


# ---- no at-fault collision ------------------------------------------------------------------
def test_moving_ego_into_a_stopped_car_is_at_fault(road_route) -> None:  # type: ignore[no-untyped-def]
    ego = states_along(0.0, 0.0, np.full(T, 5.0))  # front bumper at x = 3.8 + 5 t
    m = scene(ego, box("car", (20.0, 0.0)), road_route=road_route).metrics(0, T - 1)
    # STOPPED_TRACK_COLLISION is at fault; an agent scores 0; first contact when 3.8 + 5 t >= 17.75
    assert m.no_at_fault_collisions[0] == 0.0
    assert m.collision_index[0] == np.ceil((17.75 - 3.8) / 0.5 - 1e-9)


def test_stopped_ego_hit_from_behind_is_not_at_fault(road_route) -> None:  # type: ignore[no-untyped-def]
    ego = states_along(0.0, 0.0, np.zeros(T))
    m = scene(ego, moving_box("car", -20.0, 0.0, 8.0, T), road_route=road_route).metrics(0, T - 1)
    assert m.no_at_fault_collisions[0] == 1.0  # STOPPED_EGO_COLLISION (speed <= 0.05 m/s)


def test_rear_collision_between_moving_vehicles_is_not_at_fault(road_route) -> None:  # type: ignore[no-untyped-def]
    """Even with the ego across two lanes (where a lateral contact would be at fault)."""
    ego = states_along(0.0, 1.75, np.full(T, 3.0))
    m = scene(ego, moving_box("car", -15.0, 1.75, 9.0, T), road_route=road_route).metrics(0, T - 1)
    assert m.no_at_fault_collisions[0] == 1.0  # ACTIVE_REAR_COLLISION: the track is behind (angle > 150 deg)


def test_front_bumper_into_a_slower_car_is_at_fault(road_route) -> None:  # type: ignore[no-untyped-def]
    ego = states_along(0.0, 0.0, np.full(T, 10.0))
    m = scene(ego, moving_box("car", 15.0, 0.0, 2.0, T), road_route=road_route).metrics(0, T - 1)
    assert m.no_at_fault_collisions[0] == 0.0  # ACTIVE_FRONT_COLLISION: the front edge touches it


@pytest.mark.parametrize(("ego_y", "expected"), [(0.0, 1.0), (1.75, 0.0)])
def test_lateral_collision_is_at_fault_only_across_lanes(road_route, ego_y: float, expected: float) -> None:  # type: ignore[no-untyped-def]
    """A car beside the ego drifts into its side: not at fault in one lane, at fault across two."""
    ego = states_along(0.0, ego_y, np.full(T, 5.0))
    drift = [box("car", (1.4 + 5.0 * k * DT_S, ego_y + 3.0 - 0.05 * k), 0.0, 5.0) for k in range(T)]
    m = scene(ego, drift, road_route=road_route).metrics(0, T - 1)
    assert m.no_at_fault_collisions[0] == expected


def test_a_static_object_scores_half(road_route) -> None:  # type: ignore[no-untyped-def]
    ego = states_along(0.0, 0.0, np.full(T, 5.0))
    m = scene(ego, box("cone", (20.0, 0.0), cls="Others", size=(0.5, 0.5)), road_route=road_route).metrics(0, T - 1)
    assert m.no_at_fault_collisions[0] == 0.5  # not an agent type: 0.5


# ---- drivable area, driving direction, lights -------------------------------------------------
@pytest.mark.parametrize(("y", "expected"), [(3.5, 1.0), (4.5, 0.0)])
def test_drivable_area_compliance(road_route, y: float, expected: float) -> None:  # type: ignore[no-untyped-def]
    ego = states_along(0.0, y, np.full(T, 5.0))  # corners at y +- 1.0: 5.5 > 5.25 is off the road
    assert scene(ego, road_route=road_route).metrics(0, T - 1).drivable_area_compliance[0] == expected


@pytest.mark.parametrize(("seconds", "expected"), [(0.3, 1.0), (0.7, 0.5), (2.0, 0.0)])
def test_driving_direction_compliance(road_route, seconds: float, expected: float) -> None:  # type: ignore[no-untyped-def]
    """The ego, in the westbound lane, drives 6 m/s for `seconds`: its oncoming travel summed over
    NAVSIM's 1 s windows (11 samples) below 2 m -> 1, below 6 m -> 0.5, else 0."""
    n = int(round(seconds / DT_S))
    speed = np.zeros(T)
    speed[1 : 1 + n] = 6.0
    ego = states_along(0.0, -3.5, speed)
    assert scene(ego, road_route=road_route).metrics(0, T - 1).driving_direction_compliance[0] == expected


def _into_junction() -> np.ndarray:
    return states_along(-10.0, 0.0, np.full(T, 5.0))  # front at -6.2 + 5 t: enters E0b (x >= 0) after 1.3 s


def test_crossing_a_red_light_fails(road_route) -> None:  # type: ignore[no-untyped-def]
    assert scene(_into_junction(), red=[["E0b"]] * T, road_route=road_route).metrics(0, T - 1).traffic_light_compliance[0] == 0.0


def test_crossing_on_green_passes(road_route) -> None:  # type: ignore[no-untyped-def]
    assert scene(_into_junction(), red=[[]] * T, road_route=road_route).metrics(0, T - 1).traffic_light_compliance[0] == 1.0


def test_a_window_that_starts_in_a_red_zone_fails(road_route) -> None:  # type: ignore[no-untyped-def]
    """NAVSIM v2: the red zones are in the observation of every time, the first included, and
    nothing is exempt; a light that turns red with the ego inside its zone fails too."""
    red = [[]] * 20 + [["E0b"]] * (T - 20)  # at 2 s the front is at 3.8 m, inside E0b
    assert scene(_into_junction(), red=red, road_route=road_route).metrics(0, T - 1).traffic_light_compliance[0] == 0.0
    inside = states_along(1.0, 0.0, np.zeros(T))  # stopped inside E0b, red throughout
    assert scene(inside, red=[["E0b"]] * T, road_route=road_route).metrics(0, T - 1).traffic_light_compliance[0] == 0.0
    assert scene(inside, red=[[]] * T, road_route=road_route).metrics(0, T - 1).traffic_light_compliance[0] == 1.0


# ---- progress, TTC, lane keeping, comfort -------------------------------------------------------
def test_progress_along_the_centre_line(road_route) -> None:  # type: ignore[no-untyped-def]
    m = scene(states_along(0.0, 0.0, np.full(T, 5.0)), road_route=road_route).metrics(0, T - 1)
    assert m.progress_m[0] == pytest.approx(5.0 * 4.0)


@pytest.mark.parametrize(
    ("progress", "multi", "reference", "expected"),
    [
        ([10.0], [1.0], 20.0, [0.5]),  # normalised by the larger admissible progress
        ([10.0, 20.0], [1.0, 1.0], None, [0.5, 1.0]),
        ([10.0, 20.0], [1.0, 0.0], None, [1.0, 1.0]),  # the inadmissible one does not normalise (and is clipped)
        ([3.0], [1.0], 4.0, [1.0]),  # below 5 m: every candidate gets 1
    ],
)
def test_progress_ratio(progress: list[float], multi: list[float], reference: float | None, expected: list[float]) -> None:
    ep = normalized_progress(np.array(progress), np.array(multi), reference, ScorerConfig())
    np.testing.assert_allclose(ep, expected)


@pytest.mark.parametrize(("lead_y", "expected"), [(0.0, 0.0), (3.5, 1.0)])
def test_time_to_collision(road_route, lead_y: float, expected: float) -> None:  # type: ignore[no-untyped-def]
    """At 10 m/s the ego box projected 0.9 s ahead reaches a car stopped 7 m ahead of its front."""
    ego = states_along(0.0, 0.0, np.full(11, 10.0))
    m = scene(ego, box("car", (3.8 + 7.0 + 2.25, lead_y)), road_route=road_route).metrics(0, 10)
    assert m.time_to_collision_within_bound[0] == expected


@pytest.mark.parametrize(("seconds", "expected"), [(1.5, 1.0), (2.1, 0.0)])
def test_lane_keeping(road_route, seconds: float, expected: float) -> None:  # type: ignore[no-untyped-def]
    """More than 0.5 m off the centre line for 2 s in a row fails."""
    ego = states_along(0.0, 0.0, np.full(T, 5.0))
    ego[5 : 5 + int(round(seconds / DT_S)), 1] = 0.6
    assert scene(ego, road_route=road_route).metrics(0, T - 1).lane_keeping[0] == expected


def test_comfort(road_route) -> None:  # type: ignore[no-untyped-def]
    smooth = scene(states_along(0.0, 0.0, np.full(T, 8.0)), road_route=road_route).metrics(0, T - 1)
    harsh = scene(states_along(0.0, 0.0, np.maximum(12.0 - 6.0 * np.arange(T) * DT_S, 0.0)), road_route=road_route).metrics(0, T - 1)
    assert smooth.history_comfort[0] == 1.0 and smooth.comfort[0] == 1.0
    assert harsh.comfort[0] == 0.0  # -6 m/s^2 is below NAVSIM's -4.05 m/s^2


# ---- aggregates -----------------------------------------------------------------------------
def test_pdms_and_epdms_formulas(road_route) -> None:  # type: ignore[no-untyped-def]
    m = scene(states_along(0.0, 0.0, np.full(T, 5.0)), box("cone", (20.0, 0.0), cls="Others", size=(0.5, 0.5)),
              road_route=road_route).metrics(0, T - 1)  # fmt: skip
    ep = np.array([0.8])
    agg = aggregate(m, ep, ScorerConfig(), extended_comfort=np.array([1.0]))
    nc, ttc = m.no_at_fault_collisions[0], m.time_to_collision_within_bound[0]
    assert nc == 0.5 and ttc == 0.0
    assert agg["pdms"][0] == pytest.approx(nc * 1.0 * (5 * 0.8 + 5 * ttc + 2 * 1.0) / 12)
    assert agg["epdms"][0] == pytest.approx(nc * (5 * 0.8 + 5 * ttc + 2 * 1.0 + 2 * 1.0 + 2 * 1.0) / 16)
    no_ec = aggregate(m, ep, ScorerConfig())["epdms"][0]
    assert no_ec == pytest.approx(nc * (5 * 0.8 + 5 * ttc + 2 + 2) / 14)


def test_human_penalty_filter(road_route) -> None:  # type: ignore[no-untyped-def]
    """A sub-score the human also fails counts as 1 for the policy (NAVSIM's human_penalty_filter)."""
    off = scene(states_along(0.0, 4.5, np.full(T, 5.0)), road_route=road_route).metrics(0, T - 1)
    on = scene(states_along(0.0, 0.0, np.full(T, 5.0)), road_route=road_route).metrics(0, T - 1)
    assert human_filtered(off, off).drivable_area_compliance[0] == 1.0
    assert human_filtered(off, on).drivable_area_compliance[0] == 0.0


def test_progress_is_normalised_by_the_log_only_where_the_log_is_admissible(road_route) -> None:  # type: ignore[no-untyped-def]
    """NAVSIM masks the reference's progress by its multiplicative metrics: a log that leaves the
    road over the window does not normalise the policy's progress."""
    policy = scene(states_along(0.0, 0.0, np.full(T, 5.0)), road_route=road_route).metrics(0, T - 1)
    log_on = scene(states_along(0.0, 0.0, np.full(T, 10.0)), road_route=road_route).metrics(0, T - 1)
    log_off = scene(states_along(0.0, 4.6, np.full(T, 10.0)), road_route=road_route).metrics(0, T - 1)
    assert log_off.drivable_area_compliance[0] == 0.0 and log_off.progress_m[0] == pytest.approx(40.0)
    assert window_progress(policy, log_on, ScorerConfig())[0] == pytest.approx(0.5)
    assert window_progress(policy, log_off, ScorerConfig())[0] == pytest.approx(1.0)
