"""Detectors for the hostile cases, loadable as `--detector hostile_detectors:NAME`."""

from __future__ import annotations

from typing import Any

import numpy as np


def explodes(batch: Any) -> Any:
    """A detector that raises."""
    raise RuntimeError("the detector's model file is corrupt")


def bad_scores(batch: Any) -> Any:
    """A detector whose scores are outside [0, 1]."""
    from avsim.evaluation.detect import Detections

    return Detections(np.array([[10.0, 0.0, 0.8, 4.0, 2.0, 1.5, 0.0], [20.0, 0.0, 0.8, 4.0, 2.0, 1.5, 0.0]]), ("vehicle", "vehicle"),
                      np.array([5.0, -3.0]))  # fmt: skip
