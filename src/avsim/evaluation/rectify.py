"""Rectify camera images (f-theta fisheye or pinhole) to a virtual ideal pinhole view.

The virtual pinhole shares the source camera's frame (same centre, same optical axis, OpenCV
RDF), has square pixels and its principal point at the image centre (W/2, H/2). Its default,
120 deg horizontal field of view at 960x540, is the public multi-view protocol's
(`IdealPinholeCamera(fov_x_deg=120, width=960, height=540)`); both are configurable.

Pixels follow `avsim.core.cameras`: the centre of pixel (i, j) is at (i, j), which is also
`cv2.remap`'s convention, so a rectified pixel u maps exactly to the source pixel its ray hits.
Rectified pixels whose ray misses the source image (the top and bottom bands of a 120 deg
pinhole over a 16:9 fisheye) are black and marked invalid; matches within `border_px` of them
are dropped, since the edge of the black band itself is not a scene feature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import cv2
import numpy as np

from avsim.core.errors import AvsimValueError

RECTIFIED_WIDTH_PX = 960
RECTIFIED_HEIGHT_PX = 540
RECTIFIED_HFOV_DEG = 120.0
BORDER_PX = 4


class RayCamera(Protocol):
    """What rectification needs from a camera (`avsim.core.cameras` models provide it)."""

    @property
    def width_px(self) -> int:
        """Image width in pixels."""
        ...

    @property
    def height_px(self) -> int:
        """Image height in pixels."""
        ...

    def project(self, points_cam: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(N, 3) camera-frame points -> uv_px (N, 2), depth_m (N,), in_image (N,)."""
        ...

    def pixel_to_ray(self, uv_px: np.ndarray) -> np.ndarray:
        """(N, 2) pixels -> (N, 3) unit rays in the camera frame."""
        ...


@dataclass(frozen=True)
class RectifyConfig:
    """The virtual pinhole: size, horizontal field of view, and the border kept off the black band."""

    width_px: int = RECTIFIED_WIDTH_PX
    height_px: int = RECTIFIED_HEIGHT_PX
    hfov_deg: float = RECTIFIED_HFOV_DEG
    border_px: int = BORDER_PX

    def __post_init__(self) -> None:
        if int(self.width_px) < 16 or int(self.height_px) < 16:
            raise AvsimValueError(f"rectify size: at least 16x16 px, got {self.width_px}x{self.height_px}")
        if not (math.isfinite(self.hfov_deg) and 1.0 <= self.hfov_deg <= 170.0):
            raise AvsimValueError(f"rectify hfov_deg: must be in [1, 170] degrees, got {self.hfov_deg}")
        if int(self.border_px) < 0:
            raise AvsimValueError(f"rectify border_px: must be >= 0, got {self.border_px}")
        object.__setattr__(self, "width_px", int(self.width_px))
        object.__setattr__(self, "height_px", int(self.height_px))
        object.__setattr__(self, "border_px", int(self.border_px))

    @property
    def K(self) -> np.ndarray:
        """(3, 3) intrinsics: f = (W/2) / tan(hfov/2) for both axes, principal point (W/2, H/2)."""
        return rectified_intrinsics(self.width_px, self.height_px, self.hfov_deg)

    def as_dict(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict (size, FOV, focal length, border)."""
        return {
            "model": "ideal pinhole, same optical axis as the source camera",
            "width_px": self.width_px, "height_px": self.height_px, "hfov_deg": self.hfov_deg,
            "focal_px": float(self.K[0, 0]), "border_px": self.border_px,
        }  # fmt: skip


def rectified_intrinsics(
    width_px: int = RECTIFIED_WIDTH_PX, height_px: int = RECTIFIED_HEIGHT_PX, hfov_deg: float = RECTIFIED_HFOV_DEG
) -> np.ndarray:
    """K of the ideal pinhole used for rectification (square pixels, centred).

    Args:
        width_px: image width.
        height_px: image height.
        hfov_deg: horizontal field of view in degrees.

    Returns:
        (3, 3) intrinsic matrix.
    """
    f = 0.5 * width_px / math.tan(math.radians(hfov_deg) * 0.5)
    return np.array([[f, 0.0, width_px * 0.5], [0.0, f, height_px * 0.5], [0.0, 0.0, 1.0]])


def rectify_keypoints(uv_px: np.ndarray, camera: RayCamera, K_rect: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Map pixels of `camera` to the ideal pinhole (keypoint rectification).

    Args:
        uv_px: (N, 2) source pixels.
        camera: the source camera model.
        K_rect: (3, 3) pinhole intrinsics (default: `rectified_intrinsics()`); its image is
            (2 cx, 2 cy) pixels.

    Returns:
        uv (N, 2) rectified pixels and valid (N,): rays in front of the pinhole that land
        inside its image.
    """
    K = rectified_intrinsics() if K_rect is None else np.asarray(K_rect, np.float64)
    uv_px = np.asarray(uv_px, dtype=np.float64).reshape(-1, 2)
    if uv_px.shape[0] == 0:
        return np.zeros((0, 2)), np.zeros(0, bool)
    rays = camera.pixel_to_ray(uv_px)
    z = rays[:, 2]
    safe = np.where(z > 1e-6, z, 1.0)
    u = K[0, 0] * rays[:, 0] / safe + K[0, 2]
    v = K[1, 1] * rays[:, 1] / safe + K[1, 2]
    w, h = 2.0 * K[0, 2], 2.0 * K[1, 2]
    valid = (z > 1e-6) & (u >= 0) & (u < w) & (v >= 0) & (v < h)
    return np.stack([u, v], axis=1), valid


class PinholeRectifier:
    """Warp images of one camera to the virtual pinhole with a precomputed bilinear map."""

    def __init__(self, camera: RayCamera, config: RectifyConfig | None = None) -> None:
        """Build the map: each pinhole pixel's ray, projected into `camera`.

        Args:
            camera: the source camera model, at the resolution of the frames to rectify.
            config: the virtual pinhole (default `RectifyConfig()`).
        """
        self.camera = camera
        self.config = config or RectifyConfig()
        w, h = self.config.width_px, self.config.height_px
        K = self.config.K
        us, vs = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
        rays = np.stack([(us - K[0, 2]) / K[0, 0], (vs - K[1, 2]) / K[1, 1], np.ones_like(us)], -1).reshape(-1, 3)
        src, depth, _ = camera.project(rays)
        src = src.reshape(h, w, 2)
        inside = (depth.reshape(h, w) > 0) & np.isfinite(src).all(-1)
        inside &= (src[..., 0] >= 0) & (src[..., 0] <= camera.width_px - 1)
        inside &= (src[..., 1] >= 0) & (src[..., 1] <= camera.height_px - 1)
        self.map_x = np.where(inside, src[..., 0], -1e4).astype(np.float32)
        self.map_y = np.where(inside, src[..., 1], -1e4).astype(np.float32)
        b = self.config.border_px
        kept = inside.astype(np.uint8)
        if b > 0:  # also keep off the outer image edge: erode a frame of zeros with the mask
            kept = cv2.erode(np.pad(kept, 1), np.ones((2 * b + 1, 2 * b + 1), np.uint8))[1:-1, 1:-1]
        self.valid = kept.astype(bool)

    @property
    def K(self) -> np.ndarray:
        """(3, 3) intrinsics of the rectified images."""
        return self.config.K

    def rectify(self, image: np.ndarray) -> np.ndarray:
        """The image seen by the virtual pinhole (bilinear; unseen pixels black).

        Args:
            image: (H, W, 3) or (H, W) uint8 frame at the camera's resolution.

        Returns:
            (height_px, width_px[, 3]) uint8 rectified frame.
        """
        img = np.asarray(image)
        if img.shape[:2] != (self.camera.height_px, self.camera.width_px):
            raise AvsimValueError(
                f"frame: {img.shape[1]}x{img.shape[0]} px, the camera model is {self.camera.width_px}x{self.camera.height_px}"
            )
        out = cv2.remap(np.ascontiguousarray(img), self.map_x, self.map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
        return np.asarray(out)

    def keep(self, uv_px: np.ndarray) -> np.ndarray:
        """Which rectified pixels lie in the valid region (seen, `border_px` off the black band).

        Args:
            uv_px: (N, 2) rectified pixels.

        Returns:
            (N,) bool.
        """
        return points_in_mask(uv_px, self.valid)


def points_in_mask(uv_px: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Whether each pixel's nearest pixel centre is inside the image and set in `mask`.

    Args:
        uv_px: (N, 2) pixels.
        mask: (H, W) bool.

    Returns:
        (N,) bool.
    """
    uv = np.asarray(uv_px, np.float64).reshape(-1, 2)
    iu, iv = np.rint(uv[:, 0]).astype(np.int64), np.rint(uv[:, 1]).astype(np.int64)
    h, w = mask.shape
    ok = (iu >= 0) & (iu < w) & (iv >= 0) & (iv < h)
    out = np.zeros(uv.shape[0], bool)
    out[ok] = mask[iv[ok], iu[ok]]
    return out
