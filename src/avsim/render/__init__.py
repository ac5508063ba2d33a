"""World-scenario control-video renderer, in four layers (lowest first; docs/render.md, "Code map").

- `raster`: z-buffered drawing of capsules and planar primitives into an image (numba, torch).
- `geometry`: map and agent geometry of a frame moved into each camera and cut into primitives;
  `geometry.scene.SceneRenderer` turns a scenario frame into one image per camera.
- `labels`: 3-D boxes, visible 2-D boxes and masks, OpenLane lanes of rendered frames.
- `run`: the request resolved into a plan, the worker pool, memory budget, resume and writers.

A module imports only its own layer and those below it (tests/test_layering.py). The modules'
old flat paths (`avsim.render.frame`, `avsim.render.runner`, ...) still import, through
`avsim.core.moved`.
"""
