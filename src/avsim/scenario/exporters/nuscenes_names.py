"""nuScenes' names for avsim's things: categories, attributes, visibility bins, camera channels.

One home for the rules that map an avsim box or camera onto the nuScenes v1.0 vocabulary, shared
by `avsim export nuscenes` (the category / attribute / visibility tables and sensor channels) and
by any label writer that needs nuScenes names:

- **category** (`nuscenes_category`): a source class that is already one of nuScenes' 23 annotation
  categories (a nuScenes-sourced scenario) is kept; any other is read by keyword (`bus` ->
  `vehicle.bus.rigid`, `cone` -> `movable_object.trafficcone`, ...), else from avsim's collapsed
  class (Car -> `vehicle.car`, Truck -> `vehicle.truck`, Pedestrian -> `human.pedestrian.adult`,
  Cyclist -> `vehicle.bicycle`, Others -> `movable_object.debris`, which no detection class takes);
- **attribute** (`nuscenes_attribute`), from motion: vehicles are `vehicle.moving` at or above
  `MOVING_SPEED_MPS`, else `vehicle.stopped` when the track moves at some time of the clip and
  `vehicle.parked` when it never does; bicycles and motorcycles are `cycle.with_rider` when the
  track moves at some time, else `cycle.without_rider`; pedestrians `pedestrian.moving` at or above
  `PEDESTRIAN_MOVING_SPEED_MPS`, else `pedestrian.standing`; other categories have none;
- **visibility** (`visibility_token`): the visible fraction over all cameras binned as nuScenes'
  `visibility` table (tokens "1".."4": 0-40, 40-60, 60-80, 80-100 %);
- **channels** (`camera_channels`): a camera already named like a nuScenes channel keeps its name;
  the others take the free nuScenes channel whose mounting yaw is nearest to their optical axis
  (within `CHANNEL_MAX_YAW_DEG`), cameras in rig order, nearest pairs first; a camera left over is
  `CAM_<NAME>`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from avsim.core.agents import collapse_class
from avsim.core.transforms import SE3

# The 23 annotation categories of nuScenes v1.0 (nuscenes-devkit `get_colormap`, without the lidarseg-only ones).
CATEGORIES: tuple[str, ...] = (
    "human.pedestrian.adult", "human.pedestrian.child", "human.pedestrian.wheelchair", "human.pedestrian.stroller",
    "human.pedestrian.personal_mobility", "human.pedestrian.police_officer", "human.pedestrian.construction_worker",
    "animal", "vehicle.car", "vehicle.motorcycle", "vehicle.bicycle", "vehicle.bus.bendy", "vehicle.bus.rigid",
    "vehicle.truck", "vehicle.construction", "vehicle.emergency.ambulance", "vehicle.emergency.police", "vehicle.trailer",
    "movable_object.barrier", "movable_object.trafficcone", "movable_object.pushable_pullable", "movable_object.debris",
    "static_object.bicycle_rack",
)  # fmt: skip
ATTRIBUTES: tuple[str, ...] = (
    "vehicle.moving", "vehicle.stopped", "vehicle.parked", "cycle.with_rider", "cycle.without_rider",
    "pedestrian.sitting_lying_down", "pedestrian.standing", "pedestrian.moving",
)  # fmt: skip
# visibility token -> (level, lower bound of the visible fraction); nuScenes' own tokens and levels
VISIBILITY_BINS: dict[str, tuple[str, float]] = {"1": ("v0-40", 0.0), "2": ("v40-60", 0.4), "3": ("v60-80", 0.6), "4": ("v80-100", 0.8)}
# nuScenes camera channels and their nominal mounting yaw (deg, counter-clockwise from the ego's forward axis)
CHANNEL_YAW_DEG: dict[str, float] = {
    "CAM_FRONT": 0.0, "CAM_FRONT_RIGHT": -55.0, "CAM_BACK_RIGHT": -110.0, "CAM_BACK": 180.0,
    "CAM_BACK_LEFT": 110.0, "CAM_FRONT_LEFT": 55.0,
}  # fmt: skip
LIDAR_CHANNEL = "LIDAR_TOP"
CHANNEL_MAX_YAW_DEG = 45.0
MOVING_SPEED_MPS = 0.5  # vehicles and cycles: moving at or above this ground speed
PEDESTRIAN_MOVING_SPEED_MPS = 0.3
DEFAULT_CATEGORY = {"Car": "vehicle.car", "Truck": "vehicle.truck", "Pedestrian": "human.pedestrian.adult",
                    "Cyclist": "vehicle.bicycle", "Others": "movable_object.debris"}  # fmt: skip
# keyword of a source class (lower case, letters and digits only; the last keyword found wins) -> category
_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("bus", "vehicle.bus.rigid"), ("bendy", "vehicle.bus.bendy"), ("articulated", "vehicle.bus.bendy"),
    ("trailer", "vehicle.trailer"), ("construction", "vehicle.construction"), ("ambulance", "vehicle.emergency.ambulance"),
    ("policecar", "vehicle.emergency.police"), ("motorcycl", "vehicle.motorcycle"), ("moped", "vehicle.motorcycle"),
    ("child", "human.pedestrian.child"), ("stroller", "human.pedestrian.stroller"), ("wheelchair", "human.pedestrian.wheelchair"),
    ("cone", "movable_object.trafficcone"), ("barrier", "movable_object.barrier"), ("barrel", "movable_object.barrier"),
    ("bollard", "movable_object.barrier"), ("animal", "animal"), ("dog", "animal"), ("bicyclerack", "static_object.bicycle_rack"),
)  # fmt: skip
_VEHICLES_WITH_MOTION_STATE = ("vehicle.car", "vehicle.truck", "vehicle.bus", "vehicle.construction", "vehicle.emergency",
                               "vehicle.trailer")  # fmt: skip
_CYCLES = ("vehicle.bicycle", "vehicle.motorcycle")


def nuscenes_category(source_class: str, object_class: str | None = None) -> str:
    """The nuScenes category of a box (see the module docstring).

    Args:
        source_class: the dataset's class name (`AgentTracks.source_class`).
        object_class: avsim's collapsed class (None: `collapse_class(source_class)`).

    Returns:
        One of `CATEGORIES`.
    """
    if source_class in CATEGORIES:
        return source_class
    collapsed = object_class or collapse_class(source_class)
    key = re.sub(r"[^a-z0-9]", "", source_class.lower())
    found = [cat for word, cat in _KEYWORDS if word in key and _agrees(cat, collapsed)]
    return found[-1] if found else DEFAULT_CATEGORY.get(collapsed, DEFAULT_CATEGORY["Others"])


def _agrees(category: str, collapsed: str) -> bool:
    """A keyword's category never contradicts the collapsed class (a `bus stop sign` stays Others)."""
    if collapsed in ("Car", "Truck"):
        return category.startswith("vehicle.") and category not in _CYCLES
    if collapsed == "Cyclist":
        return category in _CYCLES
    if collapsed == "Pedestrian":
        return category.startswith("human.")
    return not category.startswith(("vehicle.", "human."))


def nuscenes_attribute(category: str, speed_mps: float, track_moves: bool) -> str | None:
    """The nuScenes attribute of a box from its motion (see the module docstring).

    Args:
        category: the box's nuScenes category.
        speed_mps: its ground speed at the box's time.
        track_moves: whether its track reaches `MOVING_SPEED_MPS` at some time of the clip.

    Returns:
        One of `ATTRIBUTES`, or None for a category without attributes.
    """
    if category.startswith(_VEHICLES_WITH_MOTION_STATE):
        if speed_mps >= MOVING_SPEED_MPS:
            return "vehicle.moving"
        return "vehicle.stopped" if track_moves else "vehicle.parked"
    if category in _CYCLES:
        return "cycle.with_rider" if track_moves or speed_mps >= MOVING_SPEED_MPS else "cycle.without_rider"
    if category.startswith("human.pedestrian."):
        return "pedestrian.moving" if speed_mps >= PEDESTRIAN_MOVING_SPEED_MPS else "pedestrian.standing"
    return None


def visibility_token(visible_fraction: float) -> str:
    """nuScenes' visibility token of a visible fraction in [0, 1] (NaN: not seen, "1").

    Args:
        visible_fraction: visible pixels / unoccluded pixels, summed over the cameras.

    Returns:
        "1", "2", "3" or "4".
    """
    v = float(visible_fraction) if np.isfinite(visible_fraction) else 0.0
    return max((tok for tok, (_, lo) in VISIBILITY_BINS.items() if v >= lo), key=lambda t: VISIBILITY_BINS[t][1])


def optical_axis_yaw_deg(ego_SE3_camera: SE3) -> float:
    """The yaw of a camera's optical axis (its +z) in the ego frame, degrees counter-clockwise from forward.

    Args:
        ego_SE3_camera: one camera pose (OpenCV camera axes).

    Returns:
        The yaw in (-180, 180].
    """
    axis = np.asarray(ego_SE3_camera.rotation, np.float64)[:, 2]
    return float(np.degrees(np.arctan2(axis[1], axis[0])))


def camera_channels(names: Sequence[str], yaws_deg: Sequence[float]) -> dict[str, str]:
    """nuScenes channel names of a rig's cameras (see the module docstring).

    Args:
        names: the cameras, in rig order.
        yaws_deg: each camera's optical-axis yaw (`optical_axis_yaw_deg`).

    Returns:
        camera name -> channel, one distinct channel per camera.
    """
    out = {n: n for n in names if n in CHANNEL_YAW_DEG}
    free = [c for c in CHANNEL_YAW_DEG if c not in out.values()]
    pairs = sorted((abs((yaw - CHANNEL_YAW_DEG[c] + 180.0) % 360.0 - 180.0), k, c)
                   for k, (n, yaw) in enumerate(zip(names, yaws_deg)) if n not in out for c in free)  # fmt: skip
    for d, k, channel in pairs:
        if d <= CHANNEL_MAX_YAW_DEG and names[k] not in out and channel not in out.values():
            out[names[k]] = channel
    taken = set(out.values())
    for n in names:
        if n not in out:
            base = "CAM_" + re.sub(r"[^A-Z0-9]+", "_", n.upper()).strip("_").removeprefix("CAMERA_")
            channel, k = base, 2
            while channel in taken or channel == LIDAR_CHANNEL:
                channel, k = f"{base}_{k}", k + 1
            out[n] = channel
            taken.add(channel)
    return {n: out[n] for n in names}
