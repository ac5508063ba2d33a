"""Camera frames as nuScenes images: ideal pinhole JPEGs.

nuScenes pipelines project with the 3x3 `camera_intrinsic` alone (nuscenes-devkit `view_points`,
mmdetection3d's `cam2img`), so every exported image is an undistorted pinhole image. A pinhole
camera without distortion is written as rendered; any other camera is resampled (`Rectifier`,
bilinear, black outside the rendered image) onto the pinhole of its `export_intrinsic`: its own K,
or for an f-theta lens the pinhole that agrees with it at the principal point
(`labels.lanes.openlane_intrinsic`, the `cam2img` of `avsim labels-mmdet3d`), at the same image size
(OpenCV's fixed-point maps: source positions to 1/32 px).
JPEG quality `labels.records.JPEG_QUALITY`; the same frame gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from avsim.core.cameras import Camera, PinholeCamera
from avsim.core.typing import NDArrayByte, NDArrayFloat
from avsim.render.labels.lanes import openlane_intrinsic
from avsim.render.labels.records import encode_image


def export_intrinsic(camera: Camera) -> NDArrayFloat:
    """The 3x3 intrinsic of a camera's exported images (see the module docstring).

    Args:
        camera: the camera at its image size.

    Returns:
        (3, 3) K.
    """
    return openlane_intrinsic(camera)[0]


def needs_rectification(camera: Camera) -> bool:
    """Whether a camera's frames must be resampled to be ideal pinhole images."""
    return not (isinstance(camera, PinholeCamera) and not camera.has_distortion)


class Rectifier:
    """Resamples one camera's frames onto the ideal pinhole of `export_intrinsic` (maps computed once).

    Args:
        camera: the rendered camera (at its image size).
    """

    def __init__(self, camera: Camera) -> None:
        self.camera = camera
        self.K = export_intrinsic(camera)
        self._maps: tuple[np.ndarray, np.ndarray] | None = None
        if needs_rectification(camera):
            w, h = camera.width_px, camera.height_px
            u, v = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
            rays = np.stack([u.ravel(), v.ravel(), np.ones(u.size)], -1) @ np.linalg.inv(self.K).T
            uv, _, _ = camera.project(rays)
            import cv2

            uv = np.nan_to_num(uv, nan=-1e6)
            mx, my = uv[:, 0].reshape(h, w).astype(np.float32), uv[:, 1].reshape(h, w).astype(np.float32)
            self._maps = cv2.convertMaps(mx, my, cv2.CV_16SC2)  # fixed point (1/32 px): a faster remap

    def __call__(self, rgb: NDArrayByte) -> NDArrayByte:
        """One frame as the pinhole image.

        Args:
            rgb: (H, W, 3) uint8, as rendered.

        Returns:
            (H, W, 3) uint8.
        """
        if self._maps is None:
            return rgb
        import cv2

        out = cv2.remap(rgb, self._maps[0], self._maps[1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0))
        return np.asarray(out, np.uint8)


def write_frames(images: dict[int, Path], videos: dict[Path, dict[int, int]], rectify: Rectifier,
                 destination: Callable[[int], Path], done: Callable[[], None]) -> None:  # fmt: skip
    """Write every wanted frame of one camera as a pinhole JPEG.

    Args:
        images: frame position -> an image file (`labels/images/`); a JPEG that needs no resampling is copied byte for byte.
        videos: video -> {video frame: frame position}, decoded once each, one frame at a time.
        rectify: the camera's rectifier.
        destination: frame position -> the file to write.
        done: called after each frame.
    """
    from avsim.core.image import read_image_rgb

    for pos, src in sorted(images.items()):
        out = destination(pos)
        if rectify._maps is None and src.suffix.lower() in (".jpg", ".jpeg"):
            out.write_bytes(src.read_bytes())
        else:
            out.write_bytes(encode_image(rectify(read_image_rgb(src)), "jpg"))
        done()
    for video, wanted in sorted(videos.items()):
        for k, frame in _frames(video, max(wanted) + 1):
            if k in wanted:
                destination(wanted[k]).write_bytes(encode_image(rectify(frame), "jpg"))
                done()


def _frames(video: Path, n: int) -> Iterator[tuple[int, NDArrayByte]]:
    """The first `n` frames of a video with their index (a shorter video is an input error)."""
    from avsim.core.errors import AvsimInputError
    from avsim.core.video import iter_video_frames

    k = -1
    for k, frame in enumerate(iter_video_frames(video)):
        yield k, frame
        if k + 1 >= n:
            return
    raise AvsimInputError(video, "frames", f"{k + 1} frames, the labels name frame {n - 1}")
