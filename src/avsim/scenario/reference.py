"""Reference 2-D labels of a source: where the dataset itself says its 3-D boxes land in its images.

A reader of a dataset that ships its own projections (mmdetection3d's ``center_2d`` / ``bbox``,
Waymo's projected lidar boxes, ...) returns a `ReferenceSource`: the imported `Scenario` plus
one `ReferenceLabel` per (camera image, box). ``avsim check-projection``
(`avsim.scenario.projection_check`) projects the scenario's boxes through its rig and ego poses
and compares them with these labels. The types live in the scenario layer so that importers can
build them; `avsim.scenario.projection_check` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.core.shapes import check_shape

if TYPE_CHECKING:
    from avsim.scenario.importers.waymo_camera import RollingShutterCapture
    from avsim.scenario.types import Scenario


def _vector(value: object, n: int, name: str) -> np.ndarray:
    arr = np.array(value, dtype=np.float64).reshape(-1)
    check_shape(arr, (n,), name)
    if np.any(np.isinf(arr)):
        raise AvsimValueError(f"{name}: infinite value (use NaN for 'none')")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True)
class ReferenceLabel:
    """One source label: the source's own projection of one 3-D box into one camera image.

    Attributes:
        camera: rig camera name.
        time_ns: the camera's capture time on the scenario's clock (the clock of
            ``scenario.ego.timestamps_ns``).
        track_id: the box's track id in the imported scenario.
        center_px: (2,) the source's projection of the 3-D box centre; NaN if the source has none.
        box_px: (4,) x0, y0, x1, y1: the source's 2-D rectangle of the projected 3-D box; NaN if none.
        clipped: the source's rectangle was clipped to the image (skipped by the corner check).
    """

    camera: str
    time_ns: int
    track_id: str
    center_px: np.ndarray
    box_px: np.ndarray
    clipped: bool

    def __post_init__(self) -> None:
        object.__setattr__(self, "camera", str(self.camera))
        object.__setattr__(self, "time_ns", int(self.time_ns))
        object.__setattr__(self, "track_id", str(self.track_id))
        object.__setattr__(self, "center_px", _vector(self.center_px, 2, "ReferenceLabel.center_px"))
        object.__setattr__(self, "box_px", _vector(self.box_px, 4, "ReferenceLabel.box_px"))
        object.__setattr__(self, "clipped", bool(self.clipped))


@dataclass(frozen=True)
class ReferenceSource:
    """An imported scenario with the source's reference labels and real images.

    Attributes:
        scenario: the scenario as the normal importer builds it.
        labels: the source's 2-D labels.
        images: (camera, time_ns) -> the real image file, where the source has it on disk.
        captures: (camera, time_ns) -> the image's rolling-shutter timing and ego velocity, where
            the source has them (Waymo perception frames); check-projection's rolling shutter.
    """

    scenario: Scenario
    labels: tuple[ReferenceLabel, ...]
    images: dict[tuple[str, int], Path] = field(default_factory=dict)
    captures: dict[tuple[str, int], RollingShutterCapture] = field(default_factory=dict)

    def __post_init__(self) -> None:
        labels = tuple(self.labels)
        for label in labels:
            if not isinstance(label, ReferenceLabel):
                raise AvsimValueError(f"ReferenceSource.labels: not a ReferenceLabel: {type(label).__name__}")
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "images", {(str(c), int(t)): Path(p) for (c, t), p in dict(self.images).items()})
        captures = {(str(c), int(t)): v for (c, t), v in dict(self.captures).items()}
        if captures:
            from avsim.scenario.importers.waymo_camera import RollingShutterCapture

            for value in captures.values():
                if not isinstance(value, RollingShutterCapture):
                    raise AvsimValueError(f"ReferenceSource.captures: not a RollingShutterCapture: {type(value).__name__}")
        object.__setattr__(self, "captures", captures)
