"""Detectors shipped for `avsim eval detect --detector MODULE:CALLABLE`.

`LabelsOracle` (`avsim.evaluation.detectors:LabelsOracle`) answers every frame with the clip's
own labels (`labels/boxes3d.json` and the front camera's OpenLane lanes, as `avsim labels`
writes them), score 1. On a control render it is the upper bound any detector can reach
(LET-3D-AP 1, lane F 1); run over real and generated clips that share labels, it checks the
pipeline (frame keys, frames, calibration, file layout) before a real detector is plugged in.
It reads the labels, not the pixels: the gap it shows between sides is 0 by construction.

Wrapping a real detector is a class with `__call__(batch: FrameBatch) -> Detections`; see
docs/evaluation.md "Detectors" for mmdetection3d and ONNX Runtime sketches.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from avsim.evaluation.detect import Detections, FrameBatch, clip_ground_truth, frame_key
from avsim.evaluation.lanes import LaneSet
from avsim.evaluation.let_ap import Boxes3D


class LabelsOracle:
    """The clip's own labels as detections (see module docstring); labels are read once per clip."""

    def __init__(self) -> None:
        self._clips: dict[Path, tuple[Boxes3D, LaneSet]] = {}

    def __call__(self, batch: FrameBatch) -> Detections:
        if batch.clip_dir not in self._clips:
            self._clips[batch.clip_dir] = clip_ground_truth(batch.clip_dir)
        boxes, lanes = self._clips[batch.clip_dir]
        key = frame_key(batch.clip, batch.sample_token)
        sel = boxes.frame == key
        rows = np.flatnonzero(lanes.frame == key)
        lane_pts = tuple(lanes.points_m[lanes.offsets[i] : lanes.offsets[i + 1]] for i in rows)
        return Detections(boxes.boxes[sel], tuple(boxes.label[sel].tolist()), np.ones(int(sel.sum())), lane_pts,
                          tuple(int(c) for c in lanes.category[rows]))  # fmt: skip
