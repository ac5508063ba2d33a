"""RNDS by hand and bootstrap intervals (seeded, unit recorded, paired statistics)."""

from __future__ import annotations

import numpy as np
import pytest

from avsim.core.errors import AvsimValueError
from avsim.evaluation.bootstrap import (
    bootstrap_many,
    bootstrap_mean,
    bootstrap_median,
    resample_counts,
)
from avsim.evaluation.rnds import (
    chunk_video,
    load_scorer,
    rnds_curve,
    rnds_summary,
    sharpness_score,
)


def test_rnds_by_hand() -> None:
    curve = rnds_curve(np.array([[2.0, 3.0, 1.0]]), np.array([[1.0, 2.0, 2.0]]))
    np.testing.assert_allclose(curve, [[1.0, 0.75, 0.25]])


def test_rnds_summary_band_and_mean() -> None:
    q = np.array([[2.0, 3.0, 1.0], [1.0, 1.0, 1.0]])
    g = np.array([[1.0, 2.0, 2.0], [1.0, 1.0, 1.0]])
    r = rnds_summary(q, g, n_resamples=200, seed=0)
    np.testing.assert_allclose(r.curve, [1.0, 0.875, 0.625])
    assert (r.band_low <= r.curve + 1e-12).all() and (r.curve <= r.band_high + 1e-12).all()
    assert r.mean.estimate == pytest.approx(np.mean([(0.75 + 0.25) / 2, 1.0]))
    assert r.mean.unit == "video" and r.mean.seed == 0
    with pytest.raises(AvsimValueError):
        rnds_curve(np.ones((2, 3)), np.ones((2, 2)))


def test_chunking_and_scorers() -> None:
    v = np.zeros((10, 8, 8, 3), np.uint8)
    assert [len(c) for c in chunk_video(v, 4)] == [4, 4]
    sharp = np.zeros((2, 16, 16, 3), np.uint8)
    sharp[:, ::2] = 255
    assert sharpness_score(sharp) > sharpness_score(v[:2]) == 0.0
    assert load_scorer("sharpness") is sharpness_score
    assert load_scorer("avsim.evaluation.rnds:sharpness_score") is sharpness_score
    with pytest.raises(AvsimValueError):
        load_scorer("nope")


def test_bootstrap_is_seeded_and_covers_the_estimate() -> None:
    x = np.random.default_rng(0).normal(5.0, 1.0, 50)
    a = bootstrap_mean(x, "clip", 300, seed=7)
    b = bootstrap_mean(x, "clip", 300, seed=7)
    assert a == b and a.low < a.estimate < a.high and a.unit == "clip" and a.n_units == 50
    assert a.high - a.low == pytest.approx(2 * 1.96 / np.sqrt(50), rel=0.35)
    m = bootstrap_median(x, "frame", 200, seed=1)
    assert m.low <= m.estimate <= m.high
    counts = resample_counts(10, 5, 0)
    assert counts.shape == (5, 10) and (counts.sum(axis=1) == 10).all()


def test_paired_bootstrap_gap_is_tighter_than_unpaired() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(0, 1, 80)
    a, b = base + 0.5, base + rng.normal(0, 0.05, 80)

    def stats(w):
        w = np.ones(80) if w is None else w
        return {"a": float((w * a).sum() / w.sum()), "b": float((w * b).sum() / w.sum()),
                "gap": float((w * (a - b)).sum() / w.sum())}

    iv = bootstrap_many(stats, 80, "frame", 300, seed=0)
    assert iv["gap"].low > 0.4 and iv["gap"].high < 0.6
    assert (iv["gap"].high - iv["gap"].low) < 0.5 * (iv["a"].high - iv["a"].low)
