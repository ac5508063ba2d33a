"""What the validation checks read: their configuration and the road users' boxes sampled on a time grid.

`ValidationConfig` holds every threshold of `avsim validate` (`avsim.edit.validate`) and of the
traffic-rule checks (`avsim.edit.rules`); `boxes_on_grid` samples every agent (and the ego) on the
validation grid once, and both check modules read the same `AgentBoxes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from avsim.core.errors import AvsimValueError
from avsim.scenario import Scenario
from avsim.scenario.ego_motion import PoseLimits

from .common import ego_box
from .findings import EGO_ID

RULE_KINDS = ("red_light", "wrong_way", "speed_limit", "solid_line_crossing", "stop_line", "jaywalking")
SPEED_LIMITS_MPS = {"Car": 70.0, "Truck": 45.0, "Pedestrian": 10.0, "Cyclist": 25.0, "Others": 70.0}
ACCEL_LIMITS_MPS2 = {"Car": 12.0, "Truck": 8.0, "Pedestrian": 8.0, "Cyclist": 8.0, "Others": 15.0}


@dataclass(frozen=True)
class ValidationConfig:
    sample_rate_hz: float = 10.0
    overlap_tolerance_m: float = 0.05
    include_ego: bool = True
    ego_size_m: tuple[float, float, float] | None = None  # None: scenario metadata or a typical car
    ego_rear_axle_to_centre_m: float | None = None
    offroad_tolerance_m: float = 0.5
    offroad_classes: tuple[str, ...] = ("Car", "Truck")
    min_ego_coverage: float = 0.5
    speed_limits_mps: dict = field(default_factory=lambda: dict(SPEED_LIMITS_MPS))
    accel_limits_mps2: dict = field(default_factory=lambda: dict(ACCEL_LIMITS_MPS2))
    accel_window_s: float = 0.5
    gap_factor: float = 3.0
    min_gap_s: float = 0.35
    vanish_range_m: float = 50.0  # track_end: how near the ego a vanishing vehicle counts as in view
    light_assoc_radius_m: float = 40.0
    light_assoc_lateral_m: float = 1.5
    ego_pose_max_speed_mps: float = PoseLimits.max_speed_mps  # ego_pose (avsim.scenario.ego_motion)
    ego_pose_back_step_m: float = PoseLimits.back_step_m
    ego_pose_max_accel_mps2: float = PoseLimits.max_accel_mps2
    # traffic rules (avsim.edit.rules)
    rule_checks: tuple[str, ...] = RULE_KINDS
    rule_vehicle_classes: tuple[str, ...] = ("Car", "Truck")
    red_light_classes: tuple[str, ...] = ("Cyclist",)
    red_light_heading_deg: float = 60.0
    red_light_right_turn_after_stop: bool = True  # right on red after a stop (lanes turning right > 45 degrees)
    red_light_stop_lookback_s: float = 5.0
    solid_line_max_angle_deg: float = 30.0
    wrong_way_angle_deg: float = 135.0
    wrong_way_min_s: float = 1.0
    wrong_way_min_speed_mps: float = 2.0
    speed_limit_tolerance_mps: float = 1.0
    speed_limit_min_s: float = 1.0
    stop_speed_mps: float = 0.3
    stop_line_tolerance_m: float = 0.5
    stop_line_min_s: float = 1.0
    jaywalk_margin_m: float = 0.5
    crosswalk_margin_m: float = 1.0
    jaywalk_min_s: float = 1.0

    def __post_init__(self) -> None:
        unknown = set(self.rule_checks) - set(RULE_KINDS)
        if unknown:
            raise AvsimValueError(f"ValidationConfig.rule_checks: unknown rules {sorted(unknown)} (known: {list(RULE_KINDS)})")


@dataclass
class AgentBoxes:
    """Boxes on the grid: row i is (ids[i], time index ti[i]); xy centre, yaw, l, w, z0, z1."""

    ids: np.ndarray
    cls: np.ndarray
    ti: np.ndarray
    xy: np.ndarray
    yaw: np.ndarray
    lw: np.ndarray
    z: np.ndarray


def boxes_on_grid(scenario: Scenario, grid: np.ndarray, config: ValidationConfig) -> AgentBoxes:
    agents = scenario.agents
    parts = []
    if len(agents):
        a = agents.resample(grid, max_extrapolation_s=0.0)
        ti = np.searchsorted(grid, np.asarray(a.timestamps_ns))
        c, s = np.asarray(a.center_m), np.asarray(a.size_m)
        parts.append((np.asarray(a.track_id).astype(str), np.asarray(a.object_class).astype(str), ti, c[:, :2],
                      np.asarray(a.yaw_rad), s[:, :2], np.c_[c[:, 2] - s[:, 2] / 2, c[:, 2] + s[:, 2] / 2]))  # fmt: skip
    if config.include_ego:
        pose = scenario.ego.pose_at(grid)
        yaw = np.asarray(pose.yaw_rad).reshape(-1)
        t = np.asarray(pose.translation)
        fwd = np.stack([np.cos(yaw), np.sin(yaw)], axis=1)
        n = len(grid)
        size, offset = ego_box(scenario)
        length, width, height = config.ego_size_m or size
        offset = offset if config.ego_rear_axle_to_centre_m is None else config.ego_rear_axle_to_centre_m
        parts.append((np.full(n, EGO_ID), np.full(n, "Ego"), np.arange(n), t[:, :2] + offset * fwd,
                      yaw, np.tile([length, width], (n, 1)), np.c_[t[:, 2], t[:, 2] + height]))  # fmt: skip
    if not parts:
        return AgentBoxes(np.zeros(0, str), np.zeros(0, str), np.zeros(0, int), np.zeros((0, 2)), np.zeros(0), np.zeros((0, 2)), np.zeros((0, 2)))
    cols = [np.concatenate(c) for c in zip(*parts)]
    return AgentBoxes(*cols)
