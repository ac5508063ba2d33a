"""The per-step table of an episode (`OUT/steps.parquet`): one row per recorded step."""

from __future__ import annotations

from typing import Any

import numpy as np

from avsim.core.trajectory import NS_PER_S
from avsim.sim.metrics import EpisodeScorer
from avsim.sim.stepper import Simulator
from avsim.sim.vehicle import StateIndex

WINDOW_COLUMNS = ("no_at_fault_collisions", "drivable_area_compliance", "driving_direction_compliance", "traffic_light_compliance",
                  "ego_progress", "time_to_collision_within_bound", "lane_keeping", "history_comfort", "comfort",
                  "two_frame_extended_comfort", "pdms", "epdms", "epdms_human_filtered")  # fmt: skip


def step_table(sim: Simulator, scorer: EpisodeScorer, windows: list[dict[str, Any]]) -> Any:
    """A polars DataFrame: step, time_s, timestamp_ns, the ego state (x_m, y_m, heading_rad, speed_mps,
    accel_mps2, steering_rad, steering_rate_radps, yaw_rate_radps), the commands applied from the step
    (cmd_accel_mps2, cmd_steering_rate_radps; null on the last), n_objects, the step's facts
    (`EpisodeScorer.step_flags`) and `window_<score>` of the 4 s window from the step (null where it
    does not fit).

    Args:
        sim: the simulator after the episode.
        scorer: its scorer.
        windows: per-step window scores (`EpisodeScorer.per_step`).

    Returns:
        The table.
    """
    import polars as pl

    assert sim.recorder is not None
    n = sim.recorder.n_recorded
    st = sim.recorder.ego_states()
    cmd = np.vstack([sim.recorder.commands, np.full((1, 2), np.nan)])[:n]
    cols: dict[str, Any] = {
        "step": np.arange(n, dtype=np.int64),
        "time_s": (sim.step_times_ns[:n] - sim.step_times_ns[0]) / NS_PER_S,
        "timestamp_ns": sim.step_times_ns[:n].astype(np.int64),
        "x_m": st[:, StateIndex.X], "y_m": st[:, StateIndex.Y], "heading_rad": st[:, StateIndex.HEADING],
        "speed_mps": st[:, StateIndex.VELOCITY_X], "accel_mps2": st[:, StateIndex.ACCELERATION_X],
        "steering_rad": st[:, StateIndex.STEERING_ANGLE], "steering_rate_radps": st[:, StateIndex.STEERING_RATE],
        "yaw_rate_radps": st[:, StateIndex.ANGULAR_VELOCITY],
        "cmd_accel_mps2": cmd[:, 0], "cmd_steering_rate_radps": cmd[:, 1],
        "n_objects": np.array([len(b) for b in sim.recorder.boxes[:n]], np.int64),
    }  # fmt: skip
    cols.update({k: np.asarray(v) for k, v in scorer.step_flags().items()})
    for name in WINDOW_COLUMNS:
        cols[f"window_{name}"] = [None if not w or w.get(name) is None else float(w[name]) for w in windows]
    frame = pl.DataFrame(cols)
    return frame.with_columns([pl.col(c).fill_nan(None) for c in ("cmd_accel_mps2", "cmd_steering_rate_radps")])
