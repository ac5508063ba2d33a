"""The old import paths of moved modules, kept importable (docs/core_api.md, "Moved names").

`MOVED` is the one table of old module name -> new module name. `install` (run by
`import avsim`) puts a finder first on `sys.meta_path` that answers an old name with the new
module itself (the same object, so monkeypatching either name patches both) and a one-line
`DeprecationWarning` naming the new path. A submodule of a moved package moves with it
(`avsim.importers.registry` is `avsim.scenario.importers.registry`). No module file stands at
an old path, and avsim's own code never imports an old name (tests/test_layering.py).

Plain strings only: this table imports nothing it names until an old name is imported.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence

_RENDER = "avsim.render"
MOVED: dict[str, str] = {
    # the flat modules of the package root: the core layer, then the scenario layer
    **{f"avsim.{name}": f"avsim.core.{name}" for name in ("agents", "atomic", "cameras", "errors", "lights", "rig", "trajectory",
                                                        "transforms", "video")},  # fmt: skip
    "avsim.io": "avsim.scenario.io",
    "avsim.sample": "avsim.scenario.sample",
    "avsim.importers": "avsim.scenario.importers",
    # the renderer's flat modules, now in its four sub-packages
    f"{_RENDER}.frame": f"{_RENDER}.geometry.scene",
    f"{_RENDER}.geometry_kernels": f"{_RENDER}.geometry.kernels",
    f"{_RENDER}.stroke_kernels": f"{_RENDER}.geometry.strokes",
    f"{_RENDER}.patterns": f"{_RENDER}.geometry.patterns",
    f"{_RENDER}.camera_geometry": f"{_RENDER}.geometry.camera",
    f"{_RENDER}.agents_geometry": f"{_RENDER}.geometry.agents",
    f"{_RENDER}.cull": f"{_RENDER}.geometry.cull",
    f"{_RENDER}.static_world": f"{_RENDER}.geometry.static_world",
    f"{_RENDER}.raster_kernels": f"{_RENDER}.raster.kernels",
    f"{_RENDER}.raster_aa": f"{_RENDER}.raster.aa",
    f"{_RENDER}.raster_spans": f"{_RENDER}.raster.spans",
    f"{_RENDER}.raster_strips": f"{_RENDER}.raster.strips",
    f"{_RENDER}.raster_torch": f"{_RENDER}.raster.torch_backend",
    f"{_RENDER}.labels_io": f"{_RENDER}.labels.records",
    f"{_RENDER}.labels_json": f"{_RENDER}.labels.json_text",
    f"{_RENDER}.labels_merge": f"{_RENDER}.labels.merge",
    f"{_RENDER}.labels_rle": "avsim.core.coco_rle",
    f"{_RENDER}.labels.rle": "avsim.core.coco_rle",
    f"{_RENDER}.lane_labels": f"{_RENDER}.labels.lanes",
    f"{_RENDER}.labels_run": f"{_RENDER}.run.labels",
    f"{_RENDER}.runner": f"{_RENDER}.run.runner",
    f"{_RENDER}.pipeline": f"{_RENDER}.run.pool",
    f"{_RENDER}.memory_plan": f"{_RENDER}.run.memory",
    f"{_RENDER}.resume": f"{_RENDER}.run.resume",
    f"{_RENDER}.writer": f"{_RENDER}.run.writer",
    f"{_RENDER}.real_frames": f"{_RENDER}.run.real_frames",
    f"{_RENDER}.overlay": f"{_RENDER}.run.overlay",
    f"{_RENDER}.projection_check": "avsim.scenario.projection_check",
    f"{_RENDER}.synthetic": "avsim.scenario.synthetic",
    f"{_RENDER}.moved": "avsim.core.moved",  # this table's own old home
}


def new_name(old: str) -> str | None:
    """The module an old import path names now: its `MOVED` entry, or its moved package's.

    Args:
        old: a full module name, e.g. "avsim.agents" or "avsim.importers.registry".

    Returns:
        The new full name, or None when `old` did not move.
    """
    if not old.startswith("avsim."):
        return None
    package, rest = old, ""
    while package:
        if package in MOVED:
            return MOVED[package] + rest
        package, _, last = package.rpartition(".")
        rest = f".{last}{rest}"
    return None


def pointer(old: str, new: str) -> str:
    """The one line an old import path gives: where its module is now."""
    return f'{old} moved to {new}; import {new} (docs/core_api.md, "Moved names")'


# frames between the importer and the loader: this module, importlib.import_module, the import system
_PASSED = frozenset({__file__, importlib.__file__, "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>"})


def _importer_stacklevel() -> int:
    """The `stacklevel` of the frame that imported the old name, counted as `warnings` counts it
    (the import system's `_bootstrap` frames not at all)."""
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename in _PASSED:
        frame = frame.f_back
        if frame is not None and "_bootstrap" not in frame.f_code.co_filename:
            level += 1
    return level


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as the new module itself, leaving that module's own spec in place."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.new)
        self._spec = module.__spec__
        warnings.warn(pointer(self.old, self.new), DeprecationWarning, stacklevel=_importer_stacklevel())
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """The new module ran when it was imported; only its spec, which the import system
        just overwrote with the old name's, is put back."""
        module.__spec__ = self._spec


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of `MOVED` (and their submodules) by their old names."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        return None if new is None else importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new))


def install() -> None:
    """Put the finder first on `sys.meta_path` once per interpreter (first: a submodule of a moved
    package must not be found again, as a second copy, through the new package's path)."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
