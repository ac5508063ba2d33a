"""Metric cores against the spec's public test vectors, hand computations and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avsim.core.errors import AvsimValueError
from avsim.evaluation.box_iou import bev_intersection_area, paired_iou_3d
from avsim.evaluation.frechet import (
    feature_stats,
    frechet_distance,
    frechet_distance_features,
)
from avsim.evaluation.let_ap import LetConfig, average_precision
from avsim.evaluation.let_pairs import heading_accuracy, longitudinal_affinity
from avsim.evaluation.sampson import sampson_distance, sampson_error

ORIGIN = LetConfig(sensor_location_m=(0.0, 0.0, 0.0))


# --------------------------------------------------------------------------- Fréchet distance


def test_frechet_spec_vector_diagonal() -> None:
    d = frechet_distance(np.zeros(2), np.diag([1.0, 4.0]), np.array([1.0, 2.0]), np.diag([4.0, 9.0]))
    assert d == pytest.approx(7.0, abs=1e-12)


def test_frechet_spec_vector_non_diagonal() -> None:
    d = frechet_distance(np.zeros(2), np.array([[2.0, 1.0], [1.0, 2.0]]), np.zeros(2), np.diag([1.0, 3.0]))
    assert d == pytest.approx(8.0 - 2.0 * math.sqrt(14.0), abs=1e-12)


def test_frechet_one_by_one_covariance() -> None:
    # 1-D Gaussians: FD = (m1 - m2)^2 + (s1 - s2)^2.
    d = frechet_distance(np.array([1.0]), np.array([[4.0]]), np.array([3.0]), np.array([[9.0]]))
    assert d == pytest.approx(4.0 + 1.0, abs=1e-12)


def test_frechet_rank_deficient_covariance_is_finite() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 20))  # 5 samples in 20-D: singular covariance
    b = rng.normal(size=(6, 20))
    d = frechet_distance_features(a, b)
    assert np.isfinite(d) and d > 0


def test_frechet_covariance_normalisers_are_named_and_differ() -> None:
    x = np.array([[0.0], [2.0]])
    assert feature_stats(x, "unbiased_n_minus_1").sigma[0, 0] == pytest.approx(2.0)
    assert feature_stats(x, "biased_n").sigma[0, 0] == pytest.approx(1.0)
    with pytest.raises(AvsimValueError):
        feature_stats(x[:1], "unbiased_n_minus_1")


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 40), st.integers(1, 8), st.integers(0, 10_000))
def test_frechet_of_a_set_with_itself_is_zero(n: int, d: int, seed: int) -> None:
    x = np.random.default_rng(seed).normal(size=(n, d)) * 3.0
    assert frechet_distance_features(x, x) == pytest.approx(0.0, abs=1e-8 * max(1.0, np.abs(x).max() ** 2))


# --------------------------------------------------------------------------- AP integration


@pytest.mark.parametrize(
    ("precisions", "recalls", "delta", "expected"),
    [
        ([], [], 0.05, 0.0),
        ([0.1], [0.2], 0.05, 0.02),
        ([0.1, 0.05], [0.2, 1.0], 0.05, 0.06125),
        ([0.1, 0.05], [0.2, 1.0], 1.0, 0.08),
        ([0.1, 0.0, 0.05], [0.2, 0.4, 1.0], 0.05, 0.06125),
    ],
)
def test_average_precision_spec_vectors(precisions, recalls, delta, expected) -> None:
    assert average_precision(precisions, recalls, delta) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(("pd", "expected"), [((1.5, 0, 0), 0.75), ((1.5, 1, 0), 0.75), ((4, 0, 0), 0.0)])
def test_longitudinal_affinity_spec_vectors(pd, expected) -> None:
    la = longitudinal_affinity(np.array([1.0, 0, 0]), np.array(pd, float), tolerance_fraction=0.15, min_tolerance_m=2.0)
    assert float(la) == pytest.approx(expected, abs=1e-6)


def test_heading_accuracy_folds_angles() -> None:
    ha = heading_accuracy(np.array([0.0, 0.0, 3.0]), np.array([np.pi, 2 * np.pi, -3.0]))
    np.testing.assert_allclose(ha, [0.0, 1.0, 1.0 - (2 * np.pi - 6.0) / np.pi], atol=1e-12)


# --------------------------------------------------------------------------- box IoU


def test_iou_hand_cases() -> None:
    a = np.array([[0, 0, 0, 4, 2, 2, 0.0]] * 3)
    b = np.array([[0, 0, 0, 4, 2, 2, 0.0], [2, 0, 0, 4, 2, 2, 0.0], [0, 0, 0, 4, 2, 2, np.pi / 2]])
    # identical; half overlap (4/12 = 1/3); a cross (2x2 overlap of two 4x2 -> 4 / 12)
    np.testing.assert_allclose(paired_iou_3d(a, b), [1.0, 1.0 / 3.0, 1.0 / 3.0], atol=1e-12)
    c = np.array([[0, 0, 1.0, 4, 2, 2, 0.0]])  # half height overlap: 8 / (16+16-8)
    np.testing.assert_allclose(paired_iou_3d(a[:1], c), [1.0 / 3.0], atol=1e-12)


def test_bev_overlap_matches_shapely() -> None:
    shapely = pytest.importorskip("shapely")
    from avsim.evaluation.box_iou import bev_corners

    rng = np.random.default_rng(3)
    k = 300
    a = np.column_stack([rng.normal(size=(k, 3)), rng.uniform(0.5, 5, (k, 3)), rng.uniform(-4, 4, k)])
    b = a.copy()
    b[:, :2] += rng.normal(size=(k, 2))
    b[:, 3:5] = rng.uniform(0.5, 5, (k, 2))
    b[:, 6] = rng.uniform(-4, 4, k)
    ref = shapely.area(shapely.intersection(shapely.polygons(bev_corners(a)), shapely.polygons(bev_corners(b))))
    np.testing.assert_allclose(bev_intersection_area(a, b), ref, atol=1e-9)


# --------------------------------------------------------------------------- Sampson


def test_sampson_spec_vector() -> None:
    F = np.array([[0, 0, 0], [0, 0, -1], [0, 1, 0]], float)
    x1, x0 = np.array([[100.0, 10.0]]), np.array([[80.0, 12.0]])
    assert sampson_distance(F, x0, x1)[0] == pytest.approx(2.0, abs=1e-12)
    assert sampson_error(F, x0, x1)[0] == pytest.approx(1.41421356, abs=1e-8)
