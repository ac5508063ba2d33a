"""Per-chunk drift figures of a closed-loop generated episode: is the error accumulating?

For each chunk's new frames:

- RNDS (`avsim.evaluation.rnds`): RNDS[c] = (Q[c] / Q_ref[c]) / (Q[0] / Q_ref[0]) with Q the
  chunk's quality score (the mean over views of `sharpness_score`, the weight-free proxy of the
  evaluation; DOVER plugs in through `DriftConfig.scorer`). The reference chunk is the chunk's
  control frames: a closed-loop episode has no real video, and dividing by the control's score
  takes out what the scene itself does to the score (a busier junction is "sharper").
- CSE (`avsim.evaluation.sampson`): the cross-camera Sampson error of `CSE_VIEW_PAIRS` (those
  both generated), the rig's calibrated F, frames rectified to the protocol's pinhole; per pair
  the median of per-frame medians (px), NaN where nothing matched (noise from random weights
  matches nothing).
- forecast error: how far the driven ego ended from the pose the chunk's frames were rendered at
  (m and rad, the largest over the chunk's steps), the price of showing a forecast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from avsim.core.rig import CameraRig
from avsim.core.typing import NDArrayByte, NDArrayFloat
from avsim.evaluation.rnds import ChunkScorer, rnds_curve, sharpness_score
from avsim.evaluation.sampson import CSE_VIEW_PAIRS, MatchConfig, calibrated_cross_F, cross_view_sampson, video_summary

__all__ = ["ChunkDrift", "DriftConfig", "chunk_drift", "rnds_values"]


@dataclass(frozen=True)
class DriftConfig:
    """scorer: the RNDS chunk scorer; cse: whether to measure CSE; match: its matching settings."""

    scorer: ChunkScorer = sharpness_score
    cse: bool = True
    match: MatchConfig = field(default_factory=MatchConfig)


@dataclass
class ChunkDrift:
    """One chunk's figures (see the module docstring); the forecast errors grow as its steps are driven."""

    q_generated: float
    q_control: float
    cse_px: dict[str, float]
    cse_matches: dict[str, int]
    forecast_error_m: float = 0.0
    forecast_heading_error_rad: float = 0.0

    def observe(self, forecast_pose: NDArrayFloat, driven_pose: NDArrayFloat) -> None:
        """Fold in one step: (3,) forecast and driven x, y, heading."""
        err = float(np.hypot(*(driven_pose[:2] - forecast_pose[:2])))
        dh = float(abs((driven_pose[2] - forecast_pose[2] + np.pi) % (2 * np.pi) - np.pi))
        self.forecast_error_m = max(self.forecast_error_m, err)
        self.forecast_heading_error_rad = max(self.forecast_heading_error_rad, dh)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN as null, floats to 6 decimals)."""
        return {"q_generated": _num(self.q_generated), "q_control": _num(self.q_control),
                "cse_px": {k: _num(v) for k, v in self.cse_px.items()}, "cse_matches": dict(self.cse_matches),
                "cse_mean_px": _num(_nanmean(list(self.cse_px.values()))),
                "forecast_error_m": _num(self.forecast_error_m), "forecast_heading_error_rad": _num(self.forecast_heading_error_rad)}  # fmt: skip


def _num(x: float) -> float | None:
    return round(float(x), 6) if math.isfinite(x) else None


def _nanmean(values: list[float]) -> float:
    ok = [v for v in values if math.isfinite(v)]
    return float(np.mean(ok)) if ok else float("nan")


def chunk_drift(generated: dict[str, NDArrayByte], control: dict[str, NDArrayByte], rig: CameraRig, config: DriftConfig) -> ChunkDrift:
    """RNDS inputs and CSE of one chunk's new frames.

    Args:
        generated: camera -> (T, H, W, 3) uint8 generated frames.
        control: camera -> (T, H, W, 3) uint8 control frames of the same steps.
        rig: the cameras at the frames' size (models and mountings, for CSE).
        config: the scorer and the matching settings.

    Returns:
        The chunk's figures (forecast errors still 0).
    """
    q_gen = float(np.mean([config.scorer(v) for v in generated.values()]))
    q_ctrl = float(np.mean([config.scorer(v) for v in control.values()]))
    cse: dict[str, float] = {}
    matches: dict[str, int] = {}
    for a, b in CSE_VIEW_PAIRS if config.cse else ():
        if a not in generated or b not in generated:
            continue
        F = calibrated_cross_F(rig.extrinsic(a), rig.extrinsic(b), min_baseline_m=config.match.min_baseline_m)
        frames, _ = cross_view_sampson(list(generated[a]), list(generated[b]), rig.camera(a), rig.camera(b), config.match, F)
        summary = video_summary(frames)
        cse[f"{a}|{b}"] = float(summary["median_of_frame_medians_px"])
        matches[f"{a}|{b}"] = int(summary["matches"]["total"])
    return ChunkDrift(q_gen, q_ctrl, cse, matches)


def rnds_values(drifts: list[ChunkDrift]) -> list[float | None]:
    """RNDS of every chunk (chunk 0 is 1 by construction; null where a score is 0 or not finite)."""
    if not drifts:
        return []
    curve = rnds_curve(np.array([d.q_generated for d in drifts]), np.array([d.q_control for d in drifts]))[0]
    return [_num(float(v)) for v in curve]
