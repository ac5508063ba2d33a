"""The renderer's old flat module paths, kept importable (docs/core_api.md, "Moved names").

`MOVED` is the one table of old module name -> new module name. `install` puts a finder on
`sys.meta_path` that answers an old name with the new module itself (the same object, so
monkeypatching either name patches both). avsim's own code never imports an old name (the
layering test refuses it).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence

MOVED: dict[str, str] = {
    "avsim.render.frame": "avsim.render.geometry.scene",
    "avsim.render.geometry_kernels": "avsim.render.geometry.kernels",
    "avsim.render.stroke_kernels": "avsim.render.geometry.strokes",
    "avsim.render.patterns": "avsim.render.geometry.patterns",
    "avsim.render.camera_geometry": "avsim.render.geometry.camera",
    "avsim.render.agents_geometry": "avsim.render.geometry.agents",
    "avsim.render.cull": "avsim.render.geometry.cull",
    "avsim.render.static_world": "avsim.render.geometry.static_world",
    "avsim.render.raster_kernels": "avsim.render.raster.kernels",
    "avsim.render.raster_aa": "avsim.render.raster.aa",
    "avsim.render.raster_spans": "avsim.render.raster.spans",
    "avsim.render.raster_strips": "avsim.render.raster.strips",
    "avsim.render.raster_torch": "avsim.render.raster.torch_backend",
    "avsim.render.labels_io": "avsim.render.labels.records",
    "avsim.render.labels_json": "avsim.render.labels.json_text",
    "avsim.render.labels_merge": "avsim.render.labels.merge",
    "avsim.render.labels_rle": "avsim.render.labels.rle",
    "avsim.render.lane_labels": "avsim.render.labels.lanes",
    "avsim.render.labels_run": "avsim.render.run.labels",
    "avsim.render.runner": "avsim.render.run.runner",
    "avsim.render.pipeline": "avsim.render.run.pool",
    "avsim.render.memory_plan": "avsim.render.run.memory",
    "avsim.render.resume": "avsim.render.run.resume",
    "avsim.render.writer": "avsim.render.run.writer",
    "avsim.render.real_frames": "avsim.render.run.real_frames",
    "avsim.render.overlay": "avsim.render.run.overlay",
    "avsim.render.projection_check": "avsim.scenario.projection_check",
    "avsim.render.synthetic": "avsim.scenario.synthetic",
}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: types.ModuleType) -> None:
        """The target module ran when it was imported; nothing more to run."""


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of `MOVED` by their old names."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        return None if new is None else importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install() -> None:
    """Put the finder on `sys.meta_path` once per interpreter."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())
