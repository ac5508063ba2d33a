"""Polynomials with coefficients lowest power first (f-theta lenses' forward and backward polynomials)."""

from __future__ import annotations

import numpy as np

from avsim.core.typing import NDArrayFloat


def polyval(coeffs: NDArrayFloat, x: NDArrayFloat) -> NDArrayFloat:
    """sum_i coeffs[i] x^i (Horner)."""
    out: NDArrayFloat = np.zeros_like(x, dtype=np.float64)
    for c in coeffs[::-1]:
        out = out * x + c
    return out


def polyder(coeffs: NDArrayFloat) -> NDArrayFloat:
    """The derivative's coefficients, lowest power first."""
    out: NDArrayFloat = coeffs[1:] * np.arange(1, len(coeffs))
    return out


def fit_through_origin(x: NDArrayFloat, y: NDArrayFloat, degree: int) -> NDArrayFloat:
    """Least-squares y = sum_{i=1..degree} c_i x^i (constant term 0), returns c_0..c_degree."""
    scale = float(np.abs(x).max()) or 1.0  # fit on x / scale: powers of raw pixel radii are ill-conditioned
    A = np.stack([(x / scale) ** i for i in range(1, degree + 1)], -1)
    coeffs, *_ = np.linalg.lstsq(A, y, rcond=None)
    return np.concatenate([[0.0], coeffs / scale ** np.arange(1, degree + 1)])
