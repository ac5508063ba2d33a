"""An mmdetection3d source of any kind (info .pkl, mono3d .coco.json or a folder holding one), imported.

`reference_source` picks the reader (`avsim.scenario.importers.mmdet3d` for info files,
`avsim.scenario.importers.mmdet3d_mono` for mono3d COCO files) and returns the scenario with the
source's own 2-D labels; `load_mmdet3d` returns the scenario alone (`avsim convert --from mmdet3d`).
"""

from __future__ import annotations

import os

from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.common import split_selector
from avsim.scenario.importers.mmdet3d import find_info_file, info_reference_source
from avsim.scenario.importers.mmdet3d_mono import mono3d_reference_source
from avsim.scenario.reference import ReferenceSource
from avsim.scenario.types import Scenario


def reference_source(src: str | os.PathLike[str], rig_name: str | None = None) -> ReferenceSource:
    """Import an mmdet3d source (info .pkl, mono3d .coco.json or a folder) with its reference labels.

    Args:
        src: the source, optionally ``::LOG`` (info .pkl) or ``::SAMPLE_TOKEN`` (.coco.json).
        rig_name: replace the calibrated rig by a named default rig.

    Returns:
        `ReferenceSource` of the scenario, the source's 2-D labels and its images.
    """
    path, selector = split_selector(src)
    if path.is_dir():
        path = find_info_file(path)
    if not path.is_file():
        raise AvsimInputError(path, "source", "not found")
    target = f"{path}::{selector}" if selector else str(path)
    if path.name.endswith(".json"):
        return mono3d_reference_source(target, rig_name)
    return info_reference_source(target, rig_name)


def load_mmdet3d(src: str | os.PathLike[str], rig_name: str | None = None) -> Scenario:
    """Convert an mmdet3d source (see the module docstring) into a `Scenario`.

    Args:
        src: info .pkl, mono3d .coco.json or a folder, optionally with a ``::`` selector.
        rig_name: replace the calibrated rig by a named default rig.

    Returns:
        The scenario.
    """
    return reference_source(src, rig_name).scenario
