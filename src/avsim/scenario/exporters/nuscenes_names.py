"""nuScenes' names for avsim's boxes: categories and visibility bins (and the vocabularies of the tables).

One home for the rules that map an avsim box onto the nuScenes v1.0 vocabulary, for `avsim export
nuscenes` (its category and visibility tables) and any other writer of nuScenes names:

- **category** (`nuscenes_category`): a source class that is already one of nuScenes' 23 annotation
  categories (a nuScenes-sourced scenario) is kept; any other is read by keyword (`bus` ->
  `vehicle.bus.rigid`, `cone` -> `movable_object.trafficcone`, ...), else from avsim's collapsed
  class (Car -> `vehicle.car`, Truck -> `vehicle.truck`, Pedestrian -> `human.pedestrian.adult`,
  Cyclist -> `vehicle.bicycle`, Others -> `movable_object.debris`, which no detection class takes);
- **visibility** (`visibility_token`): the visible fraction over all cameras binned as nuScenes'
  `visibility` table (tokens "1".."4": 0-40, 40-60, 60-80, 80-100 %).

The attribute of a box is the labels' own (`avsim.render.labels.attributes`, from motion: the
`attribute_name` of `boxes3d.json`), and the camera channels those of `avsim labels-mmdet3d
--camera-names nuscenes` (`avsim.render.labels.mmdet3d_info.nuscenes_camera_map`).
"""

from __future__ import annotations

import re

import numpy as np

from avsim.core.agents import collapse_class

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
LIDAR_CHANNEL = "LIDAR_TOP"
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


def visibility_token(visible_fraction: float) -> str:
    """nuScenes' visibility token of a visible fraction in [0, 1] (NaN: not seen, "1").

    Args:
        visible_fraction: visible pixels / unoccluded pixels, summed over the cameras.

    Returns:
        "1", "2", "3" or "4".
    """
    v = float(visible_fraction) if np.isfinite(visible_fraction) else 0.0
    return max((tok for tok, (_, lo) in VISIBILITY_BINS.items() if v >= lo), key=lambda t: VISIBILITY_BINS[t][1])
