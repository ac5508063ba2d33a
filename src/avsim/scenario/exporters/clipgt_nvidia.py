"""What NVIDIA's own tools make of a ClipGT export: the lens its loader projects with, the camera
list and frame size its renderer uses.

Restated from cosmos-transfer2.5 (``cosmos_transfer2/_src/imaginaire/auxiliary/world_scenario``,
v1.4.0 and 2ff49d0; never imported, its code is not a dependency):

- **Lens.** ``clipgt_loader._load_camera_calibrations`` parses ``polynomial`` as float32; v1.5.0
  and later read ``polynomial-type`` and ``linear-c/-d/-e``, v1.4.0 (the first release with the
  loader) takes every polynomial as backward and the linear term as identity. A backward
  polynomial is projected through a forward one that ``FThetaCamera._compute_fw_poly`` fits: least
  squares, degree 5, constant term 0, over 500 radii evenly from 0 to the distance between the
  principal point and the farthest image corner (``compute_max_radius``), coefficients cast to
  float32. That fit, not the written polynomial's exact inverse, places every pixel NVIDIA draws.
- **Cameras.** ``scripts/generate_control_videos.py --cameras all`` (the default) means the seven
  cosmos cameras (``rendering/config.DEFAULT_CAMERA_NAMES``); a clip without one of them fails with
  ``KeyError``, so any other rig needs ``--cameras`` with its own names.
- **Frame size.** Every camera is resized to 1280 x 720 (``SETTINGS["RESIZE_RESOLUTION"]``) by
  ``FThetaCamera.rescale``: the principal point per axis, the polynomial by one scale, the square
  root of the two axis ratios. A camera that is not 16:9 is therefore drawn as another field of
  view (wider along one axis, cropped along the other), not as a stretched copy of its image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from avsim.core.cameras import POLY_DEGREE, FThetaCamera
from avsim.core.rig import CameraRig, named_rig
from avsim.scenario.importers.clipgt_rig import written_lens

if TYPE_CHECKING:
    from avsim.core.cameras import Camera

RENDER_SIZE_PX = (1280, 720)  # (width, height) every camera is resized to by generate_control_videos.py
LOADER_FIT_SAMPLES = 500  # radii of NVIDIA's forward-polynomial fit (approximate_polynomial_inverse)
ERROR_GRID = 33  # pixels per side of the grid over which lens errors are measured
ASPECT_TOLERANCE = 0.01  # relative aspect difference from 16:9 that counts as "not 16:9"


@dataclass(frozen=True)
class LoaderRelease:
    """How one release of NVIDIA's ClipGT loader reads a rig-JSON lens.

    Attributes:
        name: the release (``v1.4.0``, ``v1.5.0``).
        reads_polynomial_type: False: every ``polynomial`` is taken as backward.
        reads_linear_term: False: ``linear-c/-d/-e`` are ignored (identity).
    """

    name: str
    reads_polynomial_type: bool
    reads_linear_term: bool


V1_4_0 = LoaderRelease("v1.4.0", reads_polynomial_type=False, reads_linear_term=False)
V1_5_0 = LoaderRelease("v1.5.0", reads_polynomial_type=True, reads_linear_term=True)
LOADER_RELEASES = (V1_4_0, V1_5_0)


def loader_lens(written: FThetaCamera, release: LoaderRelease = V1_5_0) -> FThetaCamera:
    """The lens NVIDIA's loader projects with, given the lens avsim wrote (a forward-polynomial camera).

    Args:
        written: the f-theta lens of the rig JSON (`clipgt_rig.written_lens`: backward polynomial).
        release: the loader release reading it.

    Returns:
        An f-theta camera whose forward polynomial is NVIDIA's float32 fit, with the linear term
        the release applies.
    """
    bw = np.asarray(written.poly, dtype=np.float32).astype(np.float64)
    if not written.is_backward_poly and release.reads_polynomial_type:
        fw = bw
    else:
        w, h, cx, cy = written.width_px, written.height_px, np.float32(written.cx_px), np.float32(written.cy_px)
        r_max = float(np.hypot(cx if cx > 0.5 * w else w - cx, cy if cy > 0.5 * h else h - cy))
        r = np.linspace(0.0, r_max, LOADER_FIT_SAMPLES)
        theta = np.polyval(bw[::-1], r)
        A = np.stack([theta**i for i in range(1, POLY_DEGREE + 1)], -1)
        coeffs, *_ = np.linalg.lstsq(A, r, rcond=None)
        fw = np.concatenate([[0.0], coeffs.astype(np.float32)])
    cde = tuple(float(np.float32(v)) for v in written.linear_cde) if release.reads_linear_term else (1.0, 0.0, 0.0)
    return FThetaCamera(written.width_px, written.height_px, written.cx_px, written.cy_px, tuple(fw), False, cde)  # type: ignore[arg-type]


def _grid(camera: Camera) -> np.ndarray:
    u, v = np.meshgrid(np.linspace(0, camera.width_px - 1, ERROR_GRID), np.linspace(0, camera.height_px - 1, ERROR_GRID))
    return np.stack([u.ravel(), v.ravel()], -1)


def loader_errors_px(rig: CameraRig, release: LoaderRelease = V1_5_0) -> dict[str, float]:
    """Per camera, the largest distance (pixels, over a grid of its image) between where the camera
    images a ray and where NVIDIA's loader of `release` projects it from avsim's export.

    Args:
        rig: the rig as exported (`clipgt_view(...).rig`).
        release: the loader release.

    Returns:
        camera name -> max pixel distance.
    """
    out = {}
    for name, camera in zip(rig.names, rig.cameras):
        uv = _grid(camera)
        back, _, _ = loader_lens(written_lens(camera), release).project(camera.pixel_to_ray(uv))
        out[name] = float(np.linalg.norm(back - uv, axis=-1).max())
    return out


def avsim_errors_px(rig: CameraRig) -> dict[str, float]:
    """Per camera, the same distance as `loader_errors_px` for the written lens as avsim reads it
    (its exact inverse): the f-theta approximation alone.

    Args:
        rig: the rig as exported.

    Returns:
        camera name -> max pixel distance (0 for a backward f-theta camera, written as it is).
    """
    out = {}
    for name, camera in zip(rig.names, rig.cameras):
        uv = _grid(camera)
        back, _, _ = written_lens(camera).project(camera.pixel_to_ray(uv))
        out[name] = float(np.linalg.norm(back - uv, axis=-1).max())
    return out


def oldest_release(rig: CameraRig, tolerance_px: float = 1.0) -> LoaderRelease:
    """The oldest loader release that projects every camera of an export as the newest does.

    Args:
        rig: the rig as exported.
        tolerance_px: the largest pixel distance between the two releases' projections allowed.

    Returns:
        v1.4.0, or v1.5.0 when a camera's linear term (a pinhole with fx != fy) moves pixels by
        more than `tolerance_px` in v1.4.0, which ignores it.
    """
    newest = LOADER_RELEASES[-1]
    for release in LOADER_RELEASES[:-1]:
        gaps = []
        for camera in rig.cameras:
            rays = camera.pixel_to_ray(_grid(camera))
            lens = written_lens(camera)
            a, _, _ = loader_lens(lens, release).project(rays)
            b, _, _ = loader_lens(lens, newest).project(rays)
            gaps.append(float(np.linalg.norm(a - b, axis=-1).max()))
        if max(gaps) <= tolerance_px:
            return release
    return newest


def renderer_cameras_option(rig: CameraRig) -> str | None:
    """The ``--cameras`` value `generate_control_videos.py` needs for a rig, or None for its default.

    Args:
        rig: the rig as exported (loader camera names).

    Returns:
        None when the rig holds the seven cosmos cameras (``--cameras all`` renders them), else
        the rig's camera names joined by commas.
    """
    if set(named_rig("cosmos").names) <= set(rig.names):
        return None
    return ",".join(rig.names)


def resized_cameras(rig: CameraRig) -> dict[str, tuple[float, float]]:
    """Cameras that NVIDIA's renderer does not draw as their own image: those not 16:9.

    Args:
        rig: the rig as exported.

    Returns:
        camera name -> (width scale, height scale) to 1280 x 720, for every camera whose aspect
        differs from 16:9 by more than `ASPECT_TOLERANCE`; the polynomial is scaled by their
        geometric mean, so the drawn field of view is wider along the axis with the larger
        scale and cropped along the other.
    """
    W, H = RENDER_SIZE_PX
    out = {}
    for name, camera in zip(rig.names, rig.cameras):
        sw, sh = W / camera.width_px, H / camera.height_px
        if abs(sw / sh - 1.0) > ASPECT_TOLERANCE:
            out[name] = (sw, sh)
    return out


__all__ = ["LOADER_RELEASES", "avsim_errors_px", "RENDER_SIZE_PX", "V1_4_0", "V1_5_0", "LoaderRelease", "loader_errors_px", "loader_lens",
           "oldest_release", "renderer_cameras_option", "resized_cameras"]  # fmt: skip
