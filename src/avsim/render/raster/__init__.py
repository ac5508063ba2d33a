"""Raster layer: z-buffered drawing of capsules and planar primitives (lowest layer of `avsim.render`).

`primitives` (what is drawn, pixel grid and ray maps), `kernels` (single-sample numba pass),
`aa` (edge-adaptive 4x MSAA), `spans`, `strips`, `torch_backend`; `draw` is the entry point
(`rasterize`, `rasterize_numba`, `object_coverage_px`). Names of the old `avsim.render.raster`
module are still readable from this package (`draw`'s public names).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    import importlib

    return getattr(importlib.import_module("avsim.render.raster.draw"), name)
