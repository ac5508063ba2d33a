"""What a detector sees and returns in `avsim eval detect`: `FrameBatch` -> `Detections`.

A `FrameBatch` is one labelled instant of a clip: the frames of its evaluated cameras, each at
its own size (cameras of one rig often differ: AV2's ring_front_center is portrait, 1550x2048,
its other cameras 2048x1550, and a render keeps each camera's aspect unless `--size WxH` says
otherwise), each camera's calibration, and the ego pose. `Detections` are 3-D boxes in the ego
frame with LET classes and scores, and lane lines in OpenLane's ground frame of the batch's
`lane_camera` (the frame its OpenLane files are written in, docs/labels.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape
from avsim.core.typing import StrEnum
from avsim.evaluation.let_result import LetClass

# avsim camera axes (x right, y down, z forward) in OpenLane / Waymo camera axes (x forward, y left, z up)
FLU_R_RDF = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


class GtVisibility(StrEnum):
    """Which labelled boxes are ground truth for the cameras a detector is given (`--gt-visibility`).

    VISIBLE: the boxes with at least one visible pixel (the renderer's id buffer, after
    occlusion: the COCO annotations) in at least one evaluated camera at that instant: what a
    camera-only detector can find, as Waymo's camera-only evaluation keeps only objects some
    camera sees. IN_VIEW: the boxes that cover at least one pixel of an evaluated camera when
    drawn alone (in its field of view, possibly hidden behind others: `boxes3d.json` `cameras`).
    ALL: every labelled box of the instant, wherever it is (the earlier behaviour).
    """

    VISIBLE = "visible"
    IN_VIEW = "in-view"
    ALL = "all"


@dataclass(frozen=True)
class CameraCalibration:
    """One camera: its model as the labels store it and its mounting.

    camera: dict `{"model": "ftheta" | "pinhole", "width_px", "height_px", ...}` (the scenario's
        camera dict; `avsim.core.cameras` reads it); ego_SE3_camera: (4, 4) camera (x right,
        y down, z forward) to ego (x forward, y left, z up), metres.
    """

    name: str
    camera: dict[str, Any]
    ego_SE3_camera: np.ndarray


@dataclass(frozen=True)
class FrameBatch:
    """All evaluated cameras of one labelled instant of a clip.

    images: one (H_v, W_v, 3) uint8 RGB frame per camera, in the order of `cameras` and
    `calibration` (each camera at its own size: `image_sizes_px`); world_SE3_ego: (4, 4) the ego
    pose at `timestamp_ns`; lane_camera: the camera whose OpenLane ground frame `Detections.lanes`
    are in (x right, y along that camera's heading on the ground, z up, origin under it).
    """

    clip: str
    clip_dir: Path
    frame_index: int
    timestamp_ns: int
    sample_token: str
    cameras: tuple[str, ...]
    images: tuple[np.ndarray, ...]
    calibration: tuple[CameraCalibration, ...]
    world_SE3_ego: np.ndarray
    lane_camera: str = ""

    def __post_init__(self) -> None:
        images = tuple(np.asarray(im) for im in self.images)
        if not (len(images) == len(self.cameras) == len(self.calibration)):
            raise AvsimValueError(f"FrameBatch: {len(images)} images, {len(self.cameras)} cameras, {len(self.calibration)} calibrations")
        for name, im in zip(self.cameras, images):
            check_shape(im, ("H", "W", 3), f"FrameBatch.images[{name}]")
        object.__setattr__(self, "images", images)

    @property
    def image_sizes_px(self) -> tuple[tuple[int, int], ...]:
        """(width, height) of each camera's frame."""
        return tuple((int(im.shape[1]), int(im.shape[0])) for im in self.images)

    def stacked_images(self) -> np.ndarray:
        """The frames as one (V, H, W, 3) array, for a model that takes a batch of equal views.

        Returns:
            The stacked frames; AvsimValueError when the cameras differ in size (resize or pad
            them to the model's input first).
        """
        sizes = set(self.image_sizes_px)
        if len(sizes) > 1:
            listed = ", ".join(f"{c} {w}x{h}" for c, (w, h) in zip(self.cameras, self.image_sizes_px))
            raise AvsimValueError(f"FrameBatch: the cameras differ in size ({listed}); take batch.images one by one")
        return np.stack(self.images)


@dataclass(frozen=True)
class Detections:
    """What a detector returns for one `FrameBatch`.

    boxes_ego: (N, 7) (x, y, z, length, width, height, yaw_rad): box centre in the ego frame
        (x forward, y left, z up, m), yaw about ego z from ego x; labels: N LET classes;
        scores: (N,) in [0, 1]; lanes: 3-D lane lines, each (n_i, 3) in OpenLane's ground frame
        of the batch's `lane_camera` (x right, y forward along that camera's heading, z up, m,
        origin under the camera); lane_categories: OpenLane category codes (-1: none).
    """

    boxes_ego: np.ndarray = field(default_factory=lambda: np.zeros((0, 7)))
    labels: tuple[LetClass, ...] = ()
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lanes: tuple[np.ndarray, ...] = ()
    lane_categories: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        boxes = np.asarray(self.boxes_ego, np.float64).reshape(-1, 7)
        labels = tuple(LetClass.parse(c) for c in self.labels)
        scores = np.asarray(self.scores, np.float64).reshape(-1)
        if not (len(boxes) == len(labels) == len(scores)):
            raise AvsimValueError(f"Detections: {len(boxes)} boxes, {len(labels)} labels, {len(scores)} scores")
        if not (np.isfinite(boxes).all() and np.isfinite(scores).all()):
            raise AvsimValueError("Detections: boxes and scores must be finite")
        if ((scores < 0) | (scores > 1)).any():  # as the box tables `avsim eval let` reads require
            bad = float(scores[(scores < 0) | (scores > 1)][0])
            raise AvsimValueError(f"Detections: scores must be in [0, 1], got {bad:g}")
        if (boxes[:, 3:6] <= 0).any():  # as the box tables `avsim eval let` reads require
            raise AvsimValueError("Detections: box sizes (length, width, height) must be > 0")
        lanes = tuple(np.asarray(ln, np.float64).reshape(-1, 3) for ln in self.lanes)
        cats = tuple(int(c) for c in self.lane_categories) or (-1,) * len(lanes)
        if len(cats) != len(lanes):
            raise AvsimValueError(f"Detections: {len(lanes)} lanes, {len(cats)} lane categories")
        for name, value in (("boxes_ego", boxes), ("labels", labels), ("scores", scores), ("lanes", lanes), ("lane_categories", cats)):
            object.__setattr__(self, name, value)


Detector = Callable[[FrameBatch], Detections]
