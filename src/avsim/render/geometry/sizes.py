"""The image size of each camera of a render: its own aspect by default, or one size for all when asked.

- Default (`exact=False`): each camera keeps its native aspect (its calibrated width / height) at the
  requested height; the width is rounded to an even number (video encoders need even sides). Where
  the requested size already has the camera's aspect within `ASPECT_TOLERANCE`, the camera gets the
  requested size itself (a 16:9 camera asked for 1280x720 renders 1280x720).
- `exact=True` (`--size WxH` given): every camera is re-imaged at exactly that size; a camera whose
  aspect it changes by more than `ASPECT_TOLERANCE` is stretched, and `stretch_note` says so in one line.
"""

from __future__ import annotations

from avsim.core.rig import CameraRig

ASPECT_TOLERANCE = 0.01  # relative aspect difference below which a size counts as the camera's own


def _even(value: float) -> int:
    return max(2, 2 * int(round(value / 2.0)))


def _aspect_change(native_px: tuple[int, int], size_px: tuple[int, int]) -> float:
    """How much `size_px` stretches an image of `native_px` horizontally (1: not at all)."""
    return (size_px[0] / size_px[1]) / (native_px[0] / native_px[1])


def camera_sizes(rig: CameraRig, width_px: int, height_px: int, exact: bool) -> tuple[tuple[int, int], ...]:
    """(width, height) of each camera of `rig` (in rig order) for a render asked for `width_px` x `height_px`.

    Args:
        rig: the cameras rendered, at their native (calibrated) sizes.
        width_px: requested width.
        height_px: requested height.
        exact: every camera at exactly the requested size (else each at its own aspect, at the requested height).

    Returns:
        One (width, height) per camera.
    """
    out = []
    for cam in rig.cameras:
        native = (cam.width_px, cam.height_px)
        if exact or abs(_aspect_change(native, (width_px, height_px)) - 1.0) <= ASPECT_TOLERANCE:
            out.append((int(width_px), int(height_px)))
        else:
            out.append((_even(height_px * native[0] / native[1]), int(height_px)))
    return tuple(out)


def stretch_note(rig: CameraRig, sizes_px: tuple[tuple[int, int], ...]) -> str | None:
    """One line naming every camera whose aspect the sizes change by more than ASPECT_TOLERANCE (None: none).

    Args:
        rig: the cameras at their native sizes.
        sizes_px: their render sizes (`camera_sizes`).

    Returns:
        "note: ..." with each stretched camera, its native and render size and the horizontal stretch, or None.
    """
    parts = []
    for name, cam, size in zip(rig.names, rig.cameras, sizes_px):
        change = _aspect_change((cam.width_px, cam.height_px), size)
        if abs(change - 1.0) > ASPECT_TOLERANCE:
            parts.append(f"{name} {cam.width_px}x{cam.height_px} -> {size[0]}x{size[1]} ({change:.2f}x wide)")
    if not parts:
        return None
    return (f"note: --size stretches {len(parts)} camera{'s' * (len(parts) > 1)}: " + ", ".join(parts)
            + "; leave --size out (or give --size xH) to keep each camera's aspect")  # fmt: skip
