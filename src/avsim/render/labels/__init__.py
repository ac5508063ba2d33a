"""Labels layer: 3-D boxes, visible 2-D boxes and masks, OpenLane lanes of rendered frames.

`boxes` (per camera-frame box labels from the renderer's id buffer), `lanes` (OpenLane lane
lines), `rle` (COCO RLE), `json_text` (fast JSON of rounded floats), `records` (camera-frame
records and part files) and `merge` (a clip's label files from its parts). Names of the old
`avsim.render.labels` module are still readable from this package (`boxes`'s public names).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    import importlib

    return getattr(importlib.import_module("avsim.render.labels.boxes"), name)
