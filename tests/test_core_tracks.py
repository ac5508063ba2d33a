"""Ego trajectory, agent tracks and light states: resampling and validation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avsim.core.agents import AgentTracks, collapse_class
from avsim.core.errors import AvsimValueError
from avsim.core.lights import TrafficLightStates
from avsim.core.trajectory import NS_PER_S, EgoTrajectory, uniform_timestamps
from avsim.core.transforms import SE3, quat_to_yaw, wrap_angle, yaw_to_quat

MS = 1_000_000


def straight_ego(speed_mps=10.0, yaw_rate=0.0, n=11, dt_ns=100 * MS):
    t = np.arange(n, dtype=np.int64) * dt_ns
    s = t / NS_PER_S
    return EgoTrajectory(t, SE3.from_yaw(yaw_rate * s, np.stack([speed_mps * s, np.zeros(n), np.zeros(n)], -1)))


@given(rate=st.sampled_from([10.0, 12.0, 25.0, 30.0, 60.0]))
@settings(max_examples=10, deadline=None)
def test_ego_resampling_is_exact_for_constant_velocity(rate):
    ego = straight_ego(yaw_rate=0.3)
    target = ego.uniform_timestamps(rate)
    out = ego.resample(target)
    s = target / NS_PER_S
    np.testing.assert_allclose(out.positions_m[:, 0], 10.0 * s, atol=1e-9)
    np.testing.assert_allclose(out.world_SE3_ego.yaw_rad, 0.3 * s, atol=1e-9)  # SLERP of constant rate


def test_ego_extrapolates_at_constant_velocity():
    ego = straight_ego()
    poses = ego.pose_at(np.array([-500 * MS, 1500 * MS]))
    np.testing.assert_allclose(poses.translation[:, 0], [-5.0, 15.0], atol=1e-9)


def test_ego_resampling_round_trips_source_samples():
    ego = straight_ego(yaw_rate=0.5)
    again = ego.resample(ego.timestamps_ns)
    np.testing.assert_allclose(again.world_SE3_ego.as_matrix(), ego.world_SE3_ego.as_matrix(), atol=1e-12)


def test_uniform_timestamps_include_end():
    ts = uniform_timestamps(0, 20 * NS_PER_S, 30.0)
    assert len(ts) == 601 and ts[-1] == 20 * NS_PER_S


@pytest.mark.parametrize("bad", [np.array([0, 10, 10]), np.array([0, 20, 10])])
def test_non_monotonic_timestamps_rejected(bad):
    with pytest.raises(AvsimValueError, match="strictly increasing"):
        EgoTrajectory(bad, SE3.identity((3,)))


def make_tracks():
    t = np.arange(5, dtype=np.int64) * 500 * MS  # 2 Hz keyframes, like nuScenes
    n = len(t)
    return AgentTracks.from_unsorted(
        np.r_[["car1"] * n, ["ped"] * 2],
        np.r_[["vehicle.car"] * n, ["human.pedestrian.adult"] * 2],
        np.r_[t, t[:2]],
        np.r_[np.stack([np.arange(n) * 5.0, np.zeros(n), np.zeros(n)], -1), [[0.0, 3, 0], [1.0, 3, 0]]],
        np.r_[np.tile([[4.0, 2.0, 1.5]], (n, 1)), [[0.5, 0.5, 1.8]] * 2],
        np.r_[yaw_to_quat(np.linspace(0, 1, n)), yaw_to_quat(np.zeros(2))],
    )


def test_track_resampling_interpolates_and_limits_extrapolation():
    tracks = make_tracks()
    target = np.arange(0, 3000 * MS, 100 * MS, dtype=np.int64)
    out = tracks.resample(target)
    car = out.track("car1")
    # car spans 0..2.0 s; extrapolated up to 2.5 s, then absent
    assert car.timestamps_ns.max() == 2500 * MS
    np.testing.assert_allclose(car.center_m[:, 0], car.timestamps_ns / NS_PER_S * 10.0, atol=1e-9)
    np.testing.assert_allclose(wrap_angle(car.yaw_rad[:21]), np.linspace(0, 1, 21), atol=1e-9)
    ped = out.track("ped")
    assert ped.timestamps_ns.max() == 1000 * MS  # 0.5 s past its last keyframe
    assert set(out.object_class) == {"Car", "Pedestrian"}


def test_track_corners_follow_spec_order():
    tracks = AgentTracks.from_unsorted(["a"], ["Car"], [0], [[0.0, 0, 0]], [[4.0, 2.0, 2.0]], yaw_to_quat([0.0]))
    corners = tracks.corners_m()[0]
    np.testing.assert_allclose(corners[0], [2, 1, 1])
    np.testing.assert_allclose(corners[2], [-2, -1, 1])
    np.testing.assert_allclose(corners[5], [2, -1, -1])


def test_tracks_validation_errors():
    with pytest.raises(AvsimValueError, match="center_m"):
        AgentTracks(np.array(["a"]), np.array(["Car"]), np.array([0]), np.array([[np.nan, 0, 0]]), np.ones((1, 3)), np.array([[1.0, 0, 0, 0]]))
    with pytest.raises(AvsimValueError, match="non-unit"):
        AgentTracks(np.array(["a"]), np.array(["Car"]), np.array([0]), np.zeros((1, 3)), np.ones((1, 3)), np.array([[2.0, 0, 0, 0]]))
    with pytest.raises(AvsimValueError, match="sorted"):
        AgentTracks(np.array(["b", "a"]), np.array(["Car"] * 2), np.array([0, 0]), np.zeros((2, 3)), np.ones((2, 3)), np.tile([1.0, 0, 0, 0], (2, 1)))


@pytest.mark.parametrize(
    "name, expected",
    [("Bus", "Truck"), ("Heavy truck", "Truck"), ("Train/tram", "Truck"), ("Trolley bus", "Truck"), ("Trailer", "Truck"),
     ("Vehicle", "Car"), ("Automobile", "Car"), ("Other vehicle", "Car"), ("Person", "Pedestrian"), ("Rider", "Cyclist"),
     ("Motorcycle", "Cyclist"), ("Bicycle", "Cyclist"), ("vehicle.bus.rigid", "Truck"), ("human.pedestrian.adult", "Pedestrian"),
     ("TYPE_CYCLIST", "Cyclist"), ("Train_or_tram_car", "Truck"), ("TRUCK_CAB", "Truck"), ("REGULAR_VEHICLE", "Car"), ("movable_object.barrier", "Others"), ("static_object.bicycle_rack", "Others")],
)  # fmt: skip
def test_class_collapse(name, expected):
    assert collapse_class(name) == expected


def test_light_state_is_a_step_function():
    lights = TrafficLightStates.from_unsorted(["L1", "L1", "L1", "L2"], [0, 10, 20, 15], ["green", "yellow", "red", "green"])
    assert list(lights.state_at(["L1", "L2", "L3"], 5)) == ["green", "unknown", "unknown"]
    assert list(lights.state_at(["L1", "L2"], 15)) == ["yellow", "green"]
    assert list(lights.state_at(["L1"], 99)) == ["red"]
    with pytest.raises(AvsimValueError, match="unknown state"):
        TrafficLightStates.from_unsorted(["L"], [0], ["blue"])


@given(st.permutations(list(range(7))))
@settings(max_examples=20, deadline=None)
def test_track_construction_is_order_invariant(perm):
    tracks = make_tracks()
    cols = [getattr(tracks, f)[list(perm)] for f in AgentTracks._fields()]
    again = AgentTracks.from_unsorted(*cols)
    for f in AgentTracks._fields():
        np.testing.assert_array_equal(getattr(again, f), getattr(tracks, f))
    assert quat_to_yaw(again.orientation).shape == (7,)


def test_ordering_checks_hold_across_the_whole_int64_range():
    """Times far apart must not overflow the ordering checks (ns timestamps span +-292 years)."""
    extremes = np.array([-(2**63) + 2, 2**63 - 2], dtype=np.int64)
    EgoTrajectory(extremes, SE3.identity((2,)))
    AgentTracks.from_unsorted(["a", "a"], ["Car"] * 2, extremes[::-1], np.zeros((2, 3)), np.ones((2, 3)), yaw_to_quat(np.zeros(2)))
    TrafficLightStates.from_unsorted(["L", "L"], extremes[::-1], ["red", "green"])
    with pytest.raises(AvsimValueError, match="strictly increasing"):
        EgoTrajectory(extremes[::-1].copy(), SE3.identity((2,)))
