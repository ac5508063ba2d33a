"""What the report page says beside each number: which direction is better, the published
values of the Cosmos multi-view driving paper where they exist (as quoted in the project's
issue 43: FVD 24.2, FID 20.0, CSE 1.9-2.3 px, LET-3D-AP 0.394 generated vs 0.476 real, lane
F1 0.637), whether the report's protocol matches theirs (and why not), and the caveats of
docs/evaluation.md.

A published value is only a yardstick when the protocol matches: the same network and
normaliser, the same clips, frame rate and size, the same detector. The report can check its
own settings but never the clips or the detector the paper used, so no row claims a match it
cannot check; each says what differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class Better(str, Enum):
    """Which direction of a metric is better."""

    LOWER = "lower is better"
    HIGHER = "higher is better"
    ZERO = "closer to 0 is better"


@dataclass(frozen=True)
class MetricNotes:
    """The page's notes for one metric: direction, published values and why they compare or not."""

    title: str
    better: Better
    paper_generated: str = ""
    paper_real: str = ""
    protocol: str = ""
    caveat: str = ""


FRECHET_CAVEAT = ("Resampling with replacement duplicates rows, which biases a Fréchet distance upward: the interval "
                  "sits mostly above the estimate; read it as spread, not as a symmetric error bar.")  # fmt: skip
RANK_CAVEAT = "With fewer feature rows than dimensions the covariance is rank-deficient and the value depends on the sample size."
CSE_CAVEAT = ("On control renders (thin lines and flat boxes on black) few cross-camera matches are true "
              "correspondences, so CSE measures mismatches, not geometry; the paper's CSE is on photoreal video.")  # fmt: skip
RNDS_CAVEAT = "The built-in 'sharpness' scorer is a weight-free proxy (variance of the Laplacian), not DOVER."
DETECTOR_PROTOCOL = ("not comparable as such: the paper's value comes from its own detector on its own clips; compare "
                     "the gap (real - generated) of your detector with the paper's gap (0.476 - 0.394 = 0.082)")  # fmt: skip

NOTES: dict[str, MetricNotes] = {
    "let": MetricNotes(
        "LET-3D-AP (Waymo mean over vehicle, pedestrian, cyclist)", Better.HIGHER, "0.394", "0.476", DETECTOR_PROTOCOL,
        "Headline = the leaderboard's mean over vehicle, pedestrian and cyclist; a class without ground truth or "
        "predictions counts as 0; signs are left out (their average is 'mean over classes with GT').",
    ),
    "let_gap": MetricNotes("LET-3D-AP gap (real - generated)", Better.ZERO, "", "", "paper gap 0.082 (0.476 - 0.394)"),
    "lane_f1": MetricNotes(
        "Lane F1 (OpenLane)", Better.HIGHER, "0.637", "",
        "not comparable as such: depends on the lane detector and the clips; OpenLane's own evaluator "
        "(assignment by its min-cost flow, ties included)",
    ),
    "lane_error": MetricNotes("Lane x / z error", Better.LOWER),
    "fid": MetricNotes("FID", Better.LOWER, "20.0", "", "", FRECHET_CAVEAT),
    "fvd": MetricNotes("FVD (TF-Hub I3D)", Better.LOWER, "24.2", "", "", FRECHET_CAVEAT),
    "tse": MetricNotes("TSE (px)", Better.LOWER, "", "", "", "F by RANSAC on rectified frames: the report has no calibration."),
    "cse": MetricNotes("CSE (px)", Better.LOWER, "1.9-2.3", "", "", CSE_CAVEAT),
    "rnds": MetricNotes("RNDS (mean over chunks 2..C)", Better.HIGHER, "", "", "", RNDS_CAVEAT),
}


def frechet_protocol(video: dict[str, Any], kind: str, clips: dict[str, Any] | None) -> str:
    """Why a FID / FVD of this report does or does not compare with the paper's value.

    Args:
        video: the report's video section.
        kind: "fid" or "fvd".
        clips: the report's clip inventory (rates, sizes), or None.

    Returns:
        one sentence: what matches (network, normaliser) and what differs or cannot be checked.
    """
    d = video.get(kind, {})
    rows = d.get("rows", {})
    dim = 2048 if kind == "fid" else 400
    parts = [f"same network ({'Inception pool3' if kind == 'fid' else 'TF-Hub I3D logits'}) and N-1 normaliser"]
    n = min(rows.get("real", 0), rows.get("generated", 0))
    if n and n < dim:
        parts.append(f"but only {n} feature rows per side (< {dim}): rank-deficient, not comparable")
    if clips:
        rates = sorted(set(clips["real"]["fps"]) | set(clips["generated"]["fps"]))
        sizes = sorted(set(clips["real"]["sizes"]) | set(clips["generated"]["sizes"]))
        parts.append(f"clips here: {', '.join(f'{r:g}' for r in rates)} fps, {', '.join(sizes)}")
    parts.append("the paper's clips, frame rate and clip count cannot be checked here")
    return "; ".join(parts)


def cse_protocol(sampson: dict[str, Any]) -> str:
    """Why the report's CSE does or does not compare with the paper's 1.9-2.3 px."""
    return ("rectified 120 deg 960x540 pinhole and RANSAC F as the public protocol, but SIFT matches (the paper: "
            "learned matchers) and the clips differ; " + str(sampson.get("f_source", "")))  # fmt: skip
