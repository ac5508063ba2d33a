"""Geometry layer: a frame's map and agents moved into each camera and cut into raster primitives.

`projection` (world -> camera, clipping, culling, subdivision), `kernels` and `strokes` (their
compiled f-theta paths), `patterns` (lane-line patterns), `static_world`, `agents`, `cull`,
`camera` (one camera's primitives) and `scene` (`SceneRenderer`: a scenario frame -> one image
per camera). Names of the old `avsim.render.geometry` module are still readable from this
package (`projection`'s public names).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    import importlib

    return getattr(importlib.import_module("avsim.render.geometry.projection"), name)
