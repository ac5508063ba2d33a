"""Fréchet distance between Gaussians fitted to feature sets (FID, FVD).

FD = |mu1 - mu2|^2 + Tr S1 + Tr S2 - 2 Tr sqrt(S1 S2), in float64. The trace of the matrix
square root is computed through a symmetric form, Tr sqrt(S1 S2) = Tr sqrt(A S2 A) with
A = S1^(1/2), because S1 S2 is not symmetric and `scipy.linalg.sqrtm` on it can return
complex noise (and a bare array for 1x1 input in scipy 1.17).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape

# Named covariance normalisers: the original FID/FVD code uses the unbiased estimate (N-1);
# StyleGAN-V's FVD uses the maximum-likelihood one (/N).
CovarianceNorm = Literal["unbiased_n_minus_1", "biased_n"]


@dataclass(frozen=True)
class GaussianStats:
    """Mean `mu (D,)` and covariance `sigma (D, D)` of a feature set, float64."""

    mu: np.ndarray
    sigma: np.ndarray
    count: int
    covariance_norm: str = "unbiased_n_minus_1"

    def __post_init__(self) -> None:
        mu = np.asarray(self.mu, dtype=np.float64)
        sigma = np.asarray(self.sigma, dtype=np.float64)
        dims = check_shape(mu, ("D",), "mu")
        check_shape(sigma, ("D", "D"), "sigma", dims=dims)
        if not (np.isfinite(mu).all() and np.isfinite(sigma).all()):
            raise AvsimValueError("mu/sigma: must be finite")
        object.__setattr__(self, "mu", mu)
        object.__setattr__(self, "sigma", sigma)


def feature_stats(
    features: np.ndarray, covariance_norm: CovarianceNorm = "unbiased_n_minus_1"
) -> GaussianStats:
    """Fit a Gaussian to `features (N, D)`; needs N >= 2 (N-1) or N >= 1 (/N)."""
    x = np.asarray(features, dtype=np.float64)
    check_shape(x, ("N", "D"), "features")
    n = x.shape[0]
    if covariance_norm == "unbiased_n_minus_1":
        ddof = 1
    elif covariance_norm == "biased_n":
        ddof = 0
    else:
        raise AvsimValueError(f"covariance_norm: unknown {covariance_norm!r}")
    if n - ddof < 1:
        raise AvsimValueError(f"features: need more than {ddof} rows for {covariance_norm}, got {n}")
    mu = x.mean(axis=0)
    centred = x - mu
    sigma = centred.T @ centred / (n - ddof)
    return GaussianStats(mu=mu, sigma=sigma, count=n, covariance_norm=covariance_norm)


def trace_sqrt_product(sigma1: np.ndarray, sigma2: np.ndarray) -> float:
    """Tr sqrt(S1 S2) for symmetric PSD `sigma1, sigma2 (D, D)`, robust to rank deficiency."""
    s1 = np.asarray(sigma1, dtype=np.float64)
    s2 = np.asarray(sigma2, dtype=np.float64)
    s1 = 0.5 * (s1 + s1.T)
    s2 = 0.5 * (s2 + s2.T)
    evals, evecs = np.linalg.eigh(s1)
    sqrt_s1 = (evecs * np.sqrt(np.clip(evals, 0.0, None))) @ evecs.T
    m = sqrt_s1 @ s2 @ sqrt_s1
    m = 0.5 * (m + m.T)
    return float(np.sqrt(np.clip(np.linalg.eigvalsh(m), 0.0, None)).sum())


def frechet_distance(
    mu1: np.ndarray, sigma1: np.ndarray, mu2: np.ndarray, sigma2: np.ndarray
) -> float:
    """Fréchet distance between N(mu1, sigma1) and N(mu2, sigma2); mu (D,), sigma (D, D)."""
    a = GaussianStats(mu1, sigma1, 0)
    b = GaussianStats(mu2, sigma2, 0)
    check_shape(b.mu, a.mu.shape, "mu2")
    diff = a.mu - b.mu
    value = (
        float(diff @ diff)
        + float(np.trace(a.sigma))
        + float(np.trace(b.sigma))
        - 2.0 * trace_sqrt_product(a.sigma, b.sigma)
    )
    # Rounding can leave a tiny negative for identical sets; the distance is >= 0.
    return max(value, 0.0)


def frechet_distance_stats(a: GaussianStats, b: GaussianStats) -> float:
    """Fréchet distance between two fitted feature sets (same normaliser required)."""
    if a.covariance_norm != b.covariance_norm:
        raise AvsimValueError(
            f"covariance_norm: {a.covariance_norm} vs {b.covariance_norm} are not comparable"
        )
    return frechet_distance(a.mu, a.sigma, b.mu, b.sigma)


def frechet_distance_features(
    features1: np.ndarray,
    features2: np.ndarray,
    covariance_norm: CovarianceNorm = "unbiased_n_minus_1",
) -> float:
    """Fréchet distance between feature sets `(N1, D)` and `(N2, D)`.

    With fewer samples than dimensions (typical of FVD/FID on a few clips, and of bootstrap
    resamples) the trace term is computed exactly in sample space:
    Tr sqrt(S1 S2) = ||X1c X2c^T||_* / sqrt(d1 d2) (nuclear norm; d = N-1 or N), because the
    non-zero eigenvalues of S1 S2 are the squared singular values of X1c X2c^T / sqrt(d1 d2).
    """
    x1 = np.asarray(features1, dtype=np.float64)
    x2 = np.asarray(features2, dtype=np.float64)
    dims = check_shape(x1, ("N1", "D"), "features1")
    check_shape(x2, ("N2", "D"), "features2", dims=dims)
    if max(x1.shape[0], x2.shape[0]) >= x1.shape[1]:
        return frechet_distance_stats(feature_stats(x1, covariance_norm), feature_stats(x2, covariance_norm))
    a, b = feature_stats(x1, covariance_norm), feature_stats(x2, covariance_norm)  # validates N
    ddof = 1 if covariance_norm == "unbiased_n_minus_1" else 0
    c1, c2 = x1 - a.mu, x2 - b.mu
    d1, d2 = x1.shape[0] - ddof, x2.shape[0] - ddof
    tr_sqrt = float(np.linalg.svd(c1 @ c2.T, compute_uv=False).sum()) / np.sqrt(d1 * d2)
    diff = a.mu - b.mu
    value = float(diff @ diff) + float((c1 * c1).sum()) / d1 + float((c2 * c2).sum()) / d2 - 2.0 * tr_sqrt
    return max(value, 0.0)


def rank_warning(metric: str, rows_real: int, rows_generated: int, dim: int) -> str:
    """A warning when a side has fewer feature rows than the feature dimension ("" otherwise).

    With N rows the covariance has rank at most N - 1 < dim: the distance is then biased by the
    sample size and cannot be compared with values computed from more rows.

    Args:
        metric: "FID" or "FVD".
        rows_real, rows_generated: feature rows (frames, windows) per side.
        dim: the feature dimension (2048 Inception pool3, 400 I3D logits).

    Returns:
        the warning sentence, or "".
    """
    n = min(rows_real, rows_generated)
    if n >= dim:
        return ""
    return (f"{metric}: {rows_real} real / {rows_generated} generated feature rows, fewer than the feature "
            f"dimension {dim}; the covariance is rank-deficient and the value is biased by the sample size "
            "(compare only with values from the same number of rows)")  # fmt: skip
