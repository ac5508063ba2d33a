"""Detectors shipped for `avsim eval detect --detector MODULE:CALLABLE`.

`LabelsOracle` (`avsim.evaluation.detectors:LabelsOracle`) answers every frame with the boxes
and lanes its cameras show, from the clip's own labels (score 1): the boxes with at least one
visible pixel in one of the batch's cameras (`GtVisibility.VISIBLE`, the default ground truth)
and the lane camera's lane points inside its image. On a control render it is the upper bound
a camera-only detector can reach (LET-3D-AP 1, lane F 1 with the default ground truth); run
over real and generated clips that share labels, it checks the pipeline (frame keys, instants,
cameras, calibration, file layout) before a real detector is plugged in. It reads the labels,
not the pixels: on the instants both sides have, the gap it shows is 0 by construction.

Wrapping a real detector is a class with `__call__(batch: FrameBatch) -> Detections`; see
docs/evaluation.md "Detectors" for mmdetection3d and ONNX Runtime sketches.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from avsim.evaluation.clip_folders import frame_key
from avsim.evaluation.detect_truth import ClipTruth, clip_ground_truth, visible_lanes
from avsim.evaluation.detect_types import Detections, FrameBatch, GtVisibility


class LabelsOracle:
    """The boxes and lanes the batch's cameras show, from the clip's labels (module docstring); read once per clip and cameras."""

    def __init__(self) -> None:
        self._clips: dict[tuple[Path, tuple[str, ...]], ClipTruth] = {}

    def __call__(self, batch: FrameBatch) -> Detections:
        key = (batch.clip_dir, batch.cameras)
        if key not in self._clips:
            truth = clip_ground_truth(batch.clip_dir, batch.cameras, GtVisibility.VISIBLE)
            self._clips[key] = ClipTruth(truth.boxes, visible_lanes(truth.lanes), truth.labelled, truth.unseen, truth.lane_camera)
        truth = self._clips[key]
        boxes, lanes = truth.boxes, truth.lanes
        frame = frame_key(batch.clip, batch.sample_token)
        sel = boxes.frame == frame
        rows = np.flatnonzero(lanes.frame == frame)
        lane_pts = tuple(lanes.points_m[lanes.offsets[i] : lanes.offsets[i + 1]] for i in rows)
        return Detections(boxes.boxes[sel], tuple(boxes.label[sel].tolist()), np.ones(int(sel.sum())), lane_pts,
                          tuple(int(c) for c in lanes.category[rows]))  # fmt: skip
