"""World-space culling of a frame's objects, once per frame and then once per camera.

The frame's objects (`FrameObjects`) are gathered once per frame for every camera: the map
elements within reach of the ego, the agent boxes and the traffic-light colours at that time.
Each camera then keeps only the objects whose bounding spheres (computed once per map, and
once per frame for the boxes) may reach its view cone between the near and far planes,
before any per-primitive work. The test is conservative with a wide margin
(`SPHERE_MARGIN_RAD` beyond the cone's own one-degree slack), so whatever it drops the exact
per-camera stages would have clipped or culled, or would have drawn no pixel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayBool, NDArrayFloat
from avsim.render import style

__all__ = ["SPHERE_MARGIN_RAD", "Spheres", "bounding_spheres", "sphere_in_view"]

SPHERE_MARGIN_RAD = float(np.radians(6.0))  # beyond the cone: 1 degree of the exact stages + 5 of safety
SPHERE_SLACK_M = 1e-6  # rounding of the radius


@dataclass(frozen=True)
class Spheres:
    """Bounding spheres: centre_m (N, 3) and radius_m (N,) in the world frame."""

    centre_m: NDArrayFloat
    radius_m: NDArrayFloat

    def take(self, mask: NDArrayBool) -> Spheres:
        """The spheres where `mask` holds.

        Args:
            mask: (N,) bool or integer indices.

        Returns:
            The selected spheres.
        """
        return Spheres(self.centre_m[mask], self.radius_m[mask])


def bounding_spheres(points: NDArrayFloat) -> Spheres:
    """Spheres around each element's points (centre: their mean; radius: the farthest point).

    Args:
        points: (N, K, 3) world points of N elements.

    Returns:
        The N spheres.
    """
    if not len(points):
        return Spheres(np.zeros((0, 3)), np.zeros(0))
    pts = np.asarray(points, float).reshape(len(points), -1, 3)
    centre = pts.mean(axis=1)
    radius = np.sqrt(((pts - centre[:, None]) ** 2).sum(-1)).max(axis=1) * (1 + 1e-9) + SPHERE_SLACK_M
    return Spheres(centre, radius)


def sphere_in_view(spheres: Spheres, world_SE3_camera: SE3, cone_rad: float) -> NDArrayBool:
    """Which spheres may reach a camera's view cone between the near and far planes.

    Args:
        spheres: N world-frame spheres.
        world_SE3_camera: the camera pose (one SE3; camera z is the optical axis).
        cone_rad: the camera's cone half-angle (`geometry.cone_half_angle_rad`).

    Returns:
        (N,) bool, False only where the sphere certainly lies outside the cone or the depth range.
    """
    d = spheres.centre_m - world_SE3_camera.translation
    r = spheres.radius_m
    z = d @ world_SE3_camera.rotation[:, 2]
    dist = np.sqrt((d * d).sum(-1))
    in_depth = (z + r >= style.NEAR_M) & (z - r <= style.MAX_DEPTH_M)
    inside = dist <= r  # the camera centre lies in the sphere
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.arccos(np.clip(z / dist, -1.0, 1.0))
        half = np.arcsin(np.clip(r / dist, 0.0, 1.0))
    in_cone = inside | ~(theta - half > cone_rad + SPHERE_MARGIN_RAD)
    return in_depth & in_cone
