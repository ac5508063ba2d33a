"""Keypoint matchers for the Sampson metrics: a small interface and the SIFT default.

Any object with `match(image_a, image_b) -> (pts_a_px (N, 2), pts_b_px (N, 2))` and
`describe() -> dict` is a `Matcher`. SIFT with Lowe's ratio test (OpenCV, no weights) is the
default. Learned matchers (kornia's LoFTR or DISK, LightGlue with SuperPoint, which the
public protocol's code uses) fit the same interface, but their weights cannot be downloaded
in this environment, so none is bundled or tested here.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import cv2
import numpy as np

from avsim.core.errors import AvsimValueError

FEATURE_CACHE_SIZE = 4  # images whose SIFT features are kept (a clip's consecutive pairs reuse them)


@runtime_checkable
class Matcher(Protocol):
    """Correspondences between two images."""

    def match(self, image_a: np.ndarray, image_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Matched keypoints.

        Args:
            image_a: (H, W, 3) RGB or (H, W) grey uint8 image.
            image_b: the same for the second image (its size may differ).

        Returns:
            pts_a_px (N, 2) and pts_b_px (N, 2): row i of each is one correspondence, in pixels
            (centre of pixel (i, j) at (i, j)).
        """
        ...

    def describe(self) -> dict[str, Any]:
        """The matcher and its settings, for the output document."""
        ...


def gray_u8(frame: np.ndarray) -> np.ndarray:
    """A contiguous (H, W) uint8 grey image.

    Args:
        frame: (H, W, 3) RGB or (H, W) uint8.

    Returns:
        (H, W) uint8.
    """
    f = np.asarray(frame)
    if f.ndim == 3 and f.shape[2] == 3:
        return cv2.cvtColor(np.ascontiguousarray(f, dtype=np.uint8), cv2.COLOR_RGB2GRAY)
    if f.ndim == 2:
        return np.ascontiguousarray(f, dtype=np.uint8)
    raise AvsimValueError(f"frame: expected (H, W, 3) or (H, W) uint8, got {f.shape}")


Features = tuple[np.ndarray, "np.ndarray | None"]


class SiftMatcher:
    """SIFT keypoints with Lowe's ratio test (brute-force L2 matching, k = 2); deterministic.

    Features of the last few images are kept, keyed by the image object itself, so matching
    frame t against t + 1 and then t + 1 against t + 2 detects frame t + 1 once.
    """

    def __init__(self, ratio: float = 0.75, max_features: int = 4000, cache_size: int = FEATURE_CACHE_SIZE) -> None:
        """Args:
        ratio: Lowe's ratio (a match is kept when best < ratio * second best), in (0, 1].
        max_features: SIFT features per image (the strongest).
        cache_size: images whose features are kept (>= 1).
        """
        if not (0.0 < ratio <= 1.0):
            raise AvsimValueError(f"ratio: must be in (0, 1], got {ratio}")
        if max_features < 1 or cache_size < 1:
            raise AvsimValueError(f"max_features and cache_size: must be >= 1, got {max_features}, {cache_size}")
        self.ratio = float(ratio)
        self.max_features = int(max_features)
        cv2.setRNGSeed(0)
        self._sift = cv2.SIFT_create(nfeatures=self.max_features)  # type: ignore[attr-defined]
        self._bf = cv2.BFMatcher(cv2.NORM_L2)
        self._cache: list[tuple[np.ndarray, Features]] = []
        self._cache_size = int(cache_size)

    def describe(self) -> dict[str, Any]:
        """Matcher name and settings.

        Returns:
            JSON-ready dict (keypoints, ratio_test, max_features).
        """
        return {"keypoints": "SIFT (OpenCV)", "ratio_test": self.ratio, "max_features": self.max_features}

    def detect(self, frame: np.ndarray) -> Features:
        """SIFT keypoints and descriptors of one image (cached by the image object).

        Args:
            frame: (H, W, 3) RGB or (H, W) uint8.

        Returns:
            keypoints (N, 2) px and descriptors (N, 128) float32 (None without keypoints).
        """
        for image, feats in self._cache:
            if image is frame:
                return feats
        kps, desc = self._sift.detectAndCompute(gray_u8(frame), None)
        feats = (np.array([k.pt for k in kps], dtype=np.float64).reshape(-1, 2), desc)
        self._cache = [*self._cache[len(self._cache) + 1 - self._cache_size :], (frame, feats)]
        return feats

    def match_features(self, f0: Features, f1: Features) -> tuple[np.ndarray, np.ndarray]:
        """Ratio-test matches between two detections.

        Args:
            f0: `detect` output of the first image.
            f1: `detect` output of the second image.

        Returns:
            x0 (N, 2) and x1 (N, 2) matched keypoints, px.
        """
        (p0, d0), (p1, d1) = f0, f1
        if d0 is None or d1 is None or len(p0) < 2 or len(p1) < 2:
            return np.zeros((0, 2)), np.zeros((0, 2))
        i0, i1 = [], []
        for m in self._bf.knnMatch(d0, d1, k=2):
            if len(m) == 2 and m[0].distance < self.ratio * m[1].distance:
                i0.append(m[0].queryIdx)
                i1.append(m[0].trainIdx)
        return p0[np.asarray(i0, np.int64)], p1[np.asarray(i1, np.int64)]

    def match(self, image_a: np.ndarray, image_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ratio-test matches between two images.

        Args:
            image_a: (H, W, 3) RGB or (H, W) uint8.
            image_b: the same.

        Returns:
            pts_a_px (N, 2), pts_b_px (N, 2).
        """
        return self.match_features(self.detect(image_a), self.detect(image_b))
