"""Metrics from files a user already has: FID / FVD from feature arrays (`.npy`) and Sampson
errors of given point correspondences (`avsim-sampson-points` JSON).

Feature files are `(N, D)` float arrays, one row per frame (FID: D = 2048, Inception pool3)
or per 16-frame window (FVD: D = 400, I3D logits), read with `allow_pickle=False` after their
header says what they hold. A points file:

    {"format": "avsim-sampson-points",
     "pairs": [{"name": "frame 0",                       # optional
                "F": [[f00, f01, f02], [...], [...]],    # x0^T F x1 = 0
                "points_0_px": [[x, y], ...],            # view 0
                "points_1_px": [[x, y], ...]}]}          # view 1, same count

Each pair is scored like a frame of `avsim eval sampson`: the error of a correspondence is
sqrt(Sampson distance) in pixels, a pair's statistics are its mean and median, and the summary
is the median of pair medians and the mean of pair means.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.evaluation.jobs import FRECHET_NORMS
from avsim.evaluation.results import MetricTable

FEATURE_DIMS = {"fid": 2048, "fvd": 400}
MAX_FEATURE_BYTES = 4 << 30  # 4 GiB per file
MAX_POINTS_BYTES = 256 << 20
POINTS_FORMAT = "avsim-sampson-points"


def is_feature_file(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() == ".npy"


def read_features(path: Path, kind: str) -> np.ndarray:
    """A feature array `(N, D)` as float64, checked against the metric's feature size.

    Args:
        path: a `.npy` file.
        kind: "fid" or "fvd".

    Returns:
        the rows.
    """
    if path.stat().st_size > MAX_FEATURE_BYTES:
        raise AvsimInputError(path, "size", f"over {MAX_FEATURE_BYTES >> 30} GiB")
    try:
        head = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise AvsimInputError(path, "npy", f"not a numeric .npy array ({exc})") from None
    dim = FEATURE_DIMS[kind]
    if head.ndim != 2 or head.shape[1] != dim or head.dtype.kind not in "fiu":
        what = "Inception pool3 rows (N, 2048)" if kind == "fid" else "I3D logit rows (N, 400)"
        raise AvsimInputError(path, "shape", f"expected {what}, got {head.dtype} {head.shape}")
    rows = np.asarray(head, dtype=np.float64)
    if not np.isfinite(rows).all():
        raise AvsimInputError(path, "values", "not all finite")
    return rows


def frechet_from_feature_files(real: Path, generated: Path, kind: str) -> MetricTable:
    """FID or FVD between two feature files, under both covariance normalisers.

    Args:
        real, generated: `.npy` feature arrays (see module docstring).
        kind: "fid" or "fvd".

    Returns:
        the table and JSON document of `avsim eval fid|fvd` (rows instead of frames / windows).
    """
    from avsim.evaluation.frechet import frechet_distance_features, rank_warning

    xr, xg = read_features(real, kind), read_features(generated, kind)
    for p, x in ((real, xr), (generated, xg)):
        if len(x) < 2:
            raise AvsimInputError(p, "rows", f"need at least two feature rows, got {len(x)}")
    res = {n: frechet_distance_features(xr, xg, n) for n in FRECHET_NORMS}
    name = "FID" if kind == "fid" else "FVD (TF-Hub I3D)"
    warning = rank_warning(kind.upper(), len(xr), len(xg), FEATURE_DIMS[kind])
    doc = {"metric": name, kind: res, "rows": {"real": len(xr), "generated": len(xg)},
           "features": {"source": "feature files", "real": str(real), "generated": str(generated)},
           "warnings": [warning] if warning else []}  # fmt: skip
    return MetricTable(name, ["covariance", name, "rows real", "rows gen"], [[n, v, len(xr), len(xg)] for n, v in res.items()], doc)


def _matrix(value: Any, shape: tuple[int, ...], path: Path, where: str) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise AvsimInputError(path, where, "expected numbers") from None
    if a.ndim != len(shape) or any(s not in (-1, n) for s, n in zip(shape, a.shape)):
        raise AvsimInputError(path, where, f"expected shape {tuple('N' if s == -1 else s for s in shape)}, got {a.shape}")
    if not np.isfinite(a).all():
        raise AvsimInputError(path, where, "not all finite")
    return a


def read_points(path: Path) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """The pairs of a points file: (name, F (3, 3), points_0_px (N, 2), points_1_px (N, 2))."""
    from avsim.core.safe_json import read_json

    doc = read_json(path, "points", MAX_POINTS_BYTES)
    if not isinstance(doc, dict) or doc.get("format") != POINTS_FORMAT:
        raise AvsimInputError(path, "format", f"expected {{\"format\": \"{POINTS_FORMAT}\", \"pairs\": [...]}}")
    unknown = sorted(set(doc) - {"format", "pairs"})
    if unknown:
        raise AvsimInputError(path, unknown[0], "unknown key")
    pairs = doc.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise AvsimInputError(path, "pairs", "expected a non-empty list")
    out = []
    for i, pair in enumerate(pairs):
        where = f"pairs[{i}]"
        if not isinstance(pair, dict):
            raise AvsimInputError(path, where, "expected an object")
        extra = sorted(set(pair) - {"name", "F", "points_0_px", "points_1_px"})
        if extra:
            raise AvsimInputError(path, f"{where}.{extra[0]}", "unknown key")
        for key in ("F", "points_0_px", "points_1_px"):
            if key not in pair:
                raise AvsimInputError(path, f"{where}.{key}", "missing")
        F = _matrix(pair["F"], (3, 3), path, f"{where}.F")
        x0 = _matrix(pair["points_0_px"], (-1, 2), path, f"{where}.points_0_px")
        x1 = _matrix(pair["points_1_px"], (-1, 2), path, f"{where}.points_1_px")
        if len(x0) != len(x1):
            raise AvsimInputError(path, f"{where}.points_1_px", f"{len(x1)} points, but points_0_px has {len(x0)}")
        out.append((str(pair.get("name", where)), F, x0, x1))
    return out


def sampson_points_table(path: Path) -> MetricTable:
    """Sampson errors (px) of the correspondences in a points file, per pair and summarised."""
    from avsim.evaluation.sampson import sampson_error

    rows: list[list[Any]] = []
    per_pair = []
    for name, F, x0, x1 in read_points(path):
        e = sampson_error(F, x0, x1) if len(x0) else np.zeros(0)
        mean = float(e.mean()) if e.size else float("nan")
        median = float(np.median(e)) if e.size else float("nan")
        per_pair.append({"name": name, "points": int(e.size), "mean_px": mean, "median_px": median, "errors_px": e.tolist()})
        rows.append([name, e.size, mean, median])
    meds = np.array([p["median_px"] for p in per_pair])
    means = np.array([p["mean_px"] for p in per_pair])
    ok = np.isfinite(meds)
    summary = {"median_of_pair_medians_px": float(np.median(meds[ok])) if ok.any() else float("nan"),
               "mean_of_pair_means_px": float(means[ok].mean()) if ok.any() else float("nan"),
               "pairs": len(per_pair), "points": int(sum(p["points"] for p in per_pair))}  # fmt: skip
    rows.append(["all pairs", summary["points"], summary["mean_of_pair_means_px"], summary["median_of_pair_medians_px"]])
    warnings = [f"{int((~ok).sum())} pair(s) without points" for _ in [0] if (~ok).any()]
    doc = {"metric": "Sampson error (points)", "points_file": str(path), **summary, "per_pair": per_pair, "warnings": warnings}
    return MetricTable("Sampson error of given correspondences (px)", ["pair", "points", "mean", "median"], rows, doc)
