"""The report's settings (`avsim eval report` options) and the lane numbers it compares."""

from __future__ import annotations

from dataclasses import dataclass, field

from avsim.evaluation.let_ap import LetConfig

# the lane numbers the report compares (keys of `LaneEvaluation.result()`)
LANE_METRICS = ("f_score", "precision", "recall", "category_accuracy", "x_error_near_m", "x_error_far_m",
                "z_error_near_m", "z_error_far_m")  # fmt: skip


@dataclass(frozen=True)
class ReportConfig:
    n_resamples: int = 1000
    seed: int = 0
    level: float = 0.95
    let: LetConfig = field(default_factory=LetConfig)
    max_frames: int | None = 64  # per clip, for FID and Sampson (CPU cost)
    fvd_max_windows: int | None = 4  # 16-frame windows per clip
    video_metrics: bool = True
    inception_weights: str | None = None
    i3d_weights: str | None = None
    cache_dir: str | None = None
    rnds_scorer: str | None = None  # compute chunk scores from videos with this scorer
    rnds_chunk_frames: int = 16
    cse_pairs: tuple[tuple[str, str], ...] | None = None  # CSE camera pairs (None: every overlapping pair of each clip's rig)
