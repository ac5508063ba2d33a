"""Where each camera of a rig goes in a mosaic: rows as the cameras look around the car, no empty tiles.

The cameras are grouped by where their optical axis points on the ground plane (the yaw of the
camera's +z axis in the ego frame, 0 = ahead, + = left):

- the **front row**: within `FRONT_DEG` of ahead, left to right (larger yaw first);
- the **sides row**: the left-looking cameras, then the right-looking ones (each group front to back);
- the **rear row**: more than `REAR_DEG` from ahead, left to right as seen from above with the
  front up (rear-left, rear, rear-right).

A row of more than `MAX_ROW_TILES` cameras is split into balanced rows. Each row spans the whole
mosaic width, its tiles sharing it equally at the tile aspect, so a row of fewer cameras has
larger tiles and no tile is left black (the 7-camera model rig: 2 front tiles, 2 side tiles, 3
rear tiles). Cameras of equal yaw (the model rig's front wide and front tele) keep the rig's order.

    rows = spatial_rows(rig)
    layout = mosaic_layout(rows, tile_w_px=640, tile_h_px=360, max_size_px=(1920, 1080))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from avsim.core.rig import CameraRig

FRONT_DEG = 60.0  # within this of straight ahead: the front row
REAR_DEG = 105.0  # more than this from ahead: the rear row (nuScenes' back cameras at 110 degrees)
MAX_ROW_TILES = 4


def camera_yaws_deg(rig: CameraRig) -> dict[str, float]:
    """Each camera's viewing direction on the ground plane, degrees in (-180, 180] (0 ahead, + left).

    Args:
        rig: the camera rig.

    Returns:
        camera name -> yaw of its optical axis (camera +z) in the ego frame.
    """
    axes = np.asarray(rig.ego_SE3_camera.rotation)[:, :, 2]  # (V, 3): camera +z in ego FLU
    yaws = np.degrees(np.arctan2(axes[:, 1], axes[:, 0]))
    return {name: 180.0 if yaw <= -180.0 + 1e-9 else float(yaw) for name, yaw in zip(rig.names, yaws)}


def spatial_rows(rig: CameraRig, cameras: Sequence[str] | None = None) -> list[list[str]]:
    """The mosaic rows of `cameras` (default: every camera of the rig): front, sides, rear.

    Args:
        rig: the rig (its extrinsics give each camera's direction).
        cameras: the cameras to place (a subset of the rig's, any order).

    Returns:
        The non-empty rows, top to bottom, each left to right.
    """
    names = list(rig.names if cameras is None else cameras)
    yaw = camera_yaws_deg(rig)
    unknown = [c for c in names if c not in yaw]
    if unknown:
        raise KeyError(f"cameras not in the rig: {unknown}")
    rank = {c: i for i, c in enumerate(rig.names)}
    front = sorted((c for c in names if abs(yaw[c]) < FRONT_DEG), key=lambda c: (-yaw[c], rank[c]))
    rear = sorted((c for c in names if abs(yaw[c]) > REAR_DEG), key=lambda c: (yaw[c] % 360.0, rank[c]))
    side = [c for c in names if FRONT_DEG <= abs(yaw[c]) <= REAR_DEG]
    left = sorted((c for c in side if yaw[c] > 0), key=lambda c: (yaw[c], rank[c]))
    right = sorted((c for c in side if yaw[c] <= 0), key=lambda c: (-yaw[c], rank[c]))
    return [row for group in (front, left + right, rear) for row in _split(group)]


def camera_rows(cameras: Sequence[str], rig: CameraRig, columns: int = 3) -> list[list[str]]:
    """`spatial_rows` of the cameras the rig has, then the others (no extrinsics known) in rows of
    `columns`, in the order given.

    Args:
        cameras: camera names (e.g. the videos found for a source).
        rig: the rig that places them.
        columns: cameras per row of the ones the rig does not have.

    Returns:
        Non-empty rows, top to bottom.
    """
    known = [c for c in cameras if c in rig.names]
    other = [c for c in cameras if c not in rig.names]
    return (spatial_rows(rig, known) if known else []) + [other[i : i + columns] for i in range(0, len(other), columns)]


def _split(group: list[str]) -> list[list[str]]:
    """A group as rows of at most `MAX_ROW_TILES`, balanced (5 -> 3 + 2)."""
    if not group:
        return []
    n_rows = -(-len(group) // MAX_ROW_TILES)
    per = -(-len(group) // n_rows)
    return [group[i : i + per] for i in range(0, len(group), per)]


@dataclass(frozen=True)
class Tile:
    """One camera's rectangle in the mosaic, pixels (x, y of the top-left corner)."""

    camera: str
    x_px: int
    y_px: int
    width_px: int
    height_px: int


@dataclass(frozen=True)
class MosaicLayout:
    """Tiles covering a `width_px` x `height_px` mosaic exactly (both even, for H.264 4:2:0)."""

    width_px: int
    height_px: int
    tiles: tuple[Tile, ...]

    @property
    def cameras(self) -> list[str]:
        """The cameras, row by row."""
        return [t.camera for t in self.tiles]


def mosaic_layout(rows: Sequence[Sequence[str]], tile_w_px: int, tile_h_px: int,
                  max_size_px: tuple[int, int] | None = None) -> MosaicLayout:  # fmt: skip
    """Tile rectangles for `rows`: the widest row has tiles of `tile_w_px` x `tile_h_px`, every row
    spans the same width, its tiles sharing it equally at that aspect (rows of fewer tiles are taller).

    Args:
        rows: camera names per row (`spatial_rows`).
        tile_w_px: tile width in the widest row.
        tile_h_px: tile height in the widest row.
        max_size_px: (width, height) the mosaic must fit in: the tiles shrink (same aspect) when
            it would not (None: no bound).

    Returns:
        The layout; every pixel belongs to exactly one tile.
    """
    if not rows or not all(rows):
        raise ValueError("mosaic_layout: needs non-empty rows")
    layout = _layout(rows, tile_w_px, tile_h_px)
    if max_size_px is not None:
        scale = min(max_size_px[0] / layout.width_px, max_size_px[1] / layout.height_px)
        if scale < 1.0:
            layout = _layout(rows, max(2, int(tile_w_px * scale)), tile_h_px / tile_w_px * max(2, int(tile_w_px * scale)))
    return layout


def _layout(rows: Sequence[Sequence[str]], tile_w_px: int, tile_h_px: float) -> MosaicLayout:
    """`mosaic_layout` without a size bound (even sizes; heights rounded to even pixels)."""
    width = max(len(r) for r in rows) * tile_w_px
    width += width % 2
    tiles, y = [], 0
    for row in rows:
        n = len(row)
        height = max(2, round(width / n * tile_h_px / tile_w_px / 2) * 2)
        edges = [round(i * width / n / 2) * 2 for i in range(n)] + [width]
        tiles += [Tile(c, edges[i], y, edges[i + 1] - edges[i], height) for i, c in enumerate(row)]
        y += height
    return MosaicLayout(width, y, tuple(tiles))
