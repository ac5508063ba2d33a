"""Control frames on real camera frames (`avsim render --overlay`), from the renderer's lossless frame.

Coverage: a pixel is drawn when some primitive won its z-test there. That is not `frame.any(-1)`:
colours fade linearly with depth to exactly 0 at `style.MAX_DEPTH_M` (render/raster.py), so a
line or box face near 200 m is drawn as (0, 0, 0) (any palette colour: 255 * (1 - d / 200)
rounds to 0 for d > 199.6 m). The coverage therefore comes from the numba rasteriser's object-id
buffer (`rasterize_numba(..., ids_out=...)`, public): every primitive is given object id 0, so the
buffer is 0 exactly where something won the pixel centre and -1 elsewhere; the colours do not
depend on it. With anti-aliasing (the default) an edge pixel whose centre nothing won may still
hold a blend of a primitive's colour and black, so a non-black pixel counts as drawn as well; a
pixel none of whose sub-samples is covered is exactly black and has id -1. Where nothing was drawn the overlay is the real frame's pixel, bit for bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from avsim.core.shapes import check_shape
from avsim.core.typing import NDArrayBool, NDArrayByte
from avsim.render.raster.draw import rasterize_numba

if TYPE_CHECKING:
    from avsim.render.geometry.scene import SceneRenderer

OVERLAY_ALPHA = 0.5  # weight of the control image where something was drawn


def render_with_coverage(renderer: SceneRenderer, frame_index: int, camera_index: int) -> tuple[NDArrayByte, NDArrayBool]:
    """One camera image (numba kernels) and the mask of the pixels drawn in it.

    Args:
        renderer: the scene renderer.
        frame_index: frame at the render rate.
        camera_index: index into the renderer's rig.

    Returns:
        (H, W, 3) uint8 RGB, byte-identical to `render_camera` with the numba backend, and the
        (H, W) bool coverage (True where a primitive was drawn, even in a colour faded to black).
    """
    prims = renderer.camera_primitives(frame_index, camera_index)
    marked = prims.with_object_ids(np.zeros(prims.n_capsules, np.int32), np.zeros(prims.n_planars, np.int32))
    ids = np.empty((prims.height_px, prims.width_px), np.int32)
    img = rasterize_numba(marked, renderer.rays(camera_index), ids_out=ids, antialias=renderer.antialias)
    # ids mark pixel centres a primitive won (also faded to black); with anti-aliasing an edge
    # pixel whose centre nothing won can still hold a blended (non-black) colour: drawn too
    return img, (ids >= 0) | img.any(-1)


def composite(real_rgb: NDArrayByte, control_rgb: NDArrayByte, coverage: NDArrayBool, alpha: float = OVERLAY_ALPHA) -> NDArrayByte:
    """Alpha-blend the control image over a real frame where it was drawn; elsewhere the real pixel.

    Args:
        real_rgb: (H, W, 3) uint8 real frame at the render size.
        control_rgb: (H, W, 3) uint8 lossless control frame.
        coverage: (H, W) bool, True where the control frame was drawn.
        alpha: weight of the control image.

    Returns:
        (H, W, 3) uint8 RGB: round((1 - alpha) * real + alpha * control) on covered pixels, `real_rgb` elsewhere.
    """
    check_shape(real_rgb, control_rgb.shape, "real_rgb")
    check_shape(coverage, control_rgb.shape[:2], "coverage")
    out = real_rgb.copy()
    real_px, control_px = real_rgb[coverage].astype(np.float64), control_rgb[coverage].astype(np.float64)
    out[coverage] = np.round((1.0 - alpha) * real_px + alpha * control_px).astype(np.uint8)
    return out
