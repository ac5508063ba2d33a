"""SE3 and rotation helpers: algebraic properties over random inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from avsim.core.errors import AvsimValueError
from avsim.core.transforms import (
    SE3,
    check_unit_quat,
    matrix_to_quat,
    quat_multiply,
    quat_normalize,
    quat_slerp,
    quat_to_matrix,
    quat_to_yaw,
    yaw_to_quat,
)

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
quats = arrays(np.float64, (4,), elements=st.floats(-1, 1)).filter(lambda q: np.linalg.norm(q) > 1e-2)
vec3 = arrays(np.float64, (3,), elements=finite)


def random_pose(q, t) -> SE3:
    return SE3.from_quat(q, t)


@pytest.mark.slow
@given(quats, vec3, quats, vec3, arrays(np.float64, (5, 3), elements=finite))
@settings(max_examples=60, deadline=None)
def test_compose_matches_sequential_apply(q1, t1, q2, t2, points):
    a, b = random_pose(q1, t1), random_pose(q2, t2)
    np.testing.assert_allclose(a.compose(b).apply(points), a.apply(b.apply(points)), atol=1e-8)
    np.testing.assert_allclose((a @ b).as_matrix(), a.as_matrix() @ b.as_matrix(), atol=1e-9)


@given(quats, vec3, arrays(np.float64, (4, 3), elements=finite))
@settings(max_examples=60, deadline=None)
def test_inverse_round_trip(q, t, points):
    pose = random_pose(q, t)
    np.testing.assert_allclose(pose.inverse().apply(pose.apply(points)), points, atol=1e-8)
    np.testing.assert_allclose(pose.compose(pose.inverse()).as_matrix(), np.eye(4), atol=1e-9)


@given(quats)
@settings(max_examples=100, deadline=None)
def test_quaternion_matrix_round_trip(q):
    q = quat_normalize(q)
    R = quat_to_matrix(q)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(R) == pytest.approx(1.0)
    np.testing.assert_allclose(matrix_to_quat(R), q, atol=1e-9)


@given(quats, quats)
@settings(max_examples=60, deadline=None)
def test_quat_multiply_is_matrix_product(a, b):
    np.testing.assert_allclose(quat_to_matrix(quat_multiply(a, b)), quat_to_matrix(a) @ quat_to_matrix(b), atol=1e-9)


@given(st.floats(-np.pi + 1e-6, np.pi - 1e-6))
def test_yaw_round_trip(yaw):
    assert quat_to_yaw(yaw_to_quat(yaw)) == pytest.approx(yaw, abs=1e-12)


@given(quats, quats, st.floats(0, 1))
@settings(max_examples=60, deadline=None)
def test_slerp_endpoints_and_constant_speed(q0, q1, alpha):
    q0, q1 = quat_normalize(q0), quat_normalize(q1)
    same = lambda a, b: min(np.abs(a - b).max(), np.abs(a + b).max())  # noqa: E731 (q ~ -q)
    assert same(quat_slerp(q0, q1, 0.0), q0) < 1e-9
    assert same(quat_slerp(q0, q1, 1.0), q1) < 1e-9
    # the angle travelled is proportional to alpha along the shortest arc
    total = 2 * np.arccos(np.clip(abs(np.dot(q0, q1)), 0, 1))
    part = 2 * np.arccos(np.clip(abs(np.dot(q0, quat_slerp(q0, q1, alpha))), 0, 1))
    assert part == pytest.approx(alpha * total, abs=1e-6)


def test_slerp_yaw_midpoint():
    mid = quat_slerp(yaw_to_quat(0.0), yaw_to_quat(np.pi / 2), 0.5)
    assert quat_to_yaw(mid) == pytest.approx(np.pi / 4)


def test_batched_apply_broadcasts():
    poses = SE3.from_yaw(np.array([0.0, np.pi / 2]), np.array([[1.0, 0, 0], [0, 0, 0]]))
    out = poses.apply(np.array([[1.0, 0, 0]]))
    assert out.shape == (2, 1, 3)
    np.testing.assert_allclose(out[:, 0], [[2, 0, 0], [0, 1, 0]], atol=1e-12)


@pytest.mark.parametrize(
    "rotation, translation, match",
    [
        (np.eye(3) * 2, np.zeros(3), "orthonormal"),
        (np.diag([1.0, 1.0, -1.0]), np.zeros(3), "reflection"),
        (np.eye(3), np.array([np.nan, 0, 0]), "NaN"),
        (np.eye(3), np.zeros(2), "shape"),
    ],
)
def test_invalid_se3_rejected(rotation, translation, match):
    with pytest.raises(AvsimValueError, match=match):
        SE3(rotation, translation)


def test_non_unit_quaternion_rejected():
    with pytest.raises(AvsimValueError, match="non-unit"):
        check_unit_quat(np.array([[1.0, 0, 0, 0], [1.0, 1.0, 0, 0]]), "q")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_dtypes_are_promoted_to_float64(dtype):
    pose = SE3(np.eye(3, dtype=dtype), np.ones(3, dtype=dtype))
    assert pose.rotation.dtype == np.float64 and pose.apply(np.zeros((1, 3), dtype=dtype)).dtype == np.float64
