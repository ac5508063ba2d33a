"""What `avsim info` reports about a scenario, as plain JSON-able values: `scenario_summary`."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from avsim.scenario.types import Scenario


def _extent(scenario: Scenario) -> dict[str, float]:
    """xy bounding box of the ego path, agent centres and the map (world frame)."""
    ego_t = np.asarray(scenario.ego.world_SE3_ego.translation)
    boxes = [np.concatenate([ego_t[:, :2].min(0), ego_t[:, :2].max(0)])]
    if len(scenario.agents):
        centres = np.asarray(scenario.agents.center_m)[:, :2]
        boxes.append(np.concatenate([centres.min(0), centres.max(0)]))
    map_box = scenario.map.bounds_xy()
    if map_box is not None:
        boxes.append(np.asarray(map_box))
    b = np.stack(boxes)
    lo, hi = b[:, :2].min(axis=0), b[:, 2:].max(axis=0)
    return {
        "x_min_m": float(lo[0]),
        "x_max_m": float(hi[0]),
        "y_min_m": float(lo[1]),
        "y_max_m": float(hi[1]),
        "size_x_m": float(hi[0] - lo[0]),
        "size_y_m": float(hi[1] - lo[1]),
        "ego_path_length_m": float(np.linalg.norm(np.diff(ego_t, axis=0), axis=1).sum()),
    }


def _tracks_per_class(scenario: Scenario) -> dict[str, int]:
    agents = scenario.agents
    classes = agents.object_class
    counts = Counter(str(classes[rows.start]) for _, rows in agents.track_slices())
    return dict(sorted(counts.items()))


def _ego_orientation(scenario: Scenario) -> str | None:
    """metadata["ego_orientation"] as the importer recorded it ("full", "yaw_only"), else None."""
    value = scenario.metadata.get("ego_orientation")
    return value if isinstance(value, str) else None


def _capture_offsets_ms(scenario: Scenario) -> dict[str, float]:
    """Camera name -> capture offset (ms), or {} when every offset is zero."""
    rig = scenario.rig
    if not rig.has_capture_offsets:
        return {}
    return {name: float(ns) / 1e6 for name, ns in zip(rig.names, rig.capture_offset_ns.tolist())}


def _agent_rate_hz(scenario: Scenario) -> float | None:
    """Median observation rate of the agent tracks (Hz), None when no track has two boxes."""
    agents = scenario.agents
    steps = [np.diff(agents.timestamps_ns[rows]) for _, rows in agents.track_slices()]
    dt_ns = np.concatenate([d for d in steps if len(d)] or [np.zeros(0, np.int64)])
    dt_ns = dt_ns[dt_ns > 0]
    return float(1e9 / np.median(dt_ns)) if len(dt_ns) else None


def _frames(scenario: Scenario) -> dict[str, Any]:
    """How render frames map to the source's samples (the times its agent boxes were labelled)."""
    sample_ns = np.unique(np.asarray(scenario.agents.timestamps_ns)) if len(scenario.agents) else np.zeros(0, np.int64)
    steps = np.diff(sample_ns)
    origin = scenario.metadata.get("frame_origin")
    return {
        "frame0_timestamp_ns": scenario.frame_start_ns,
        "frame0_after_first_pose_ms": (scenario.frame_start_ns - scenario.start_ns) / 1e6,
        "frame0_is": origin if isinstance(origin, str) and scenario.frame_origin_ns is not None else "the first ego pose",
        "source_samples": len(sample_ns),
        "first_sample_timestamp_ns": int(sample_ns[0]) if len(sample_ns) else None,
        "sample_interval_s": float(np.median(steps)) / 1e9 if len(steps) else None,
    }


def scenario_summary(scenario: Scenario, render_fps: float = 30.0) -> dict[str, Any]:
    """The facts `avsim info` prints, as plain JSON-able values.

    Args:
        scenario: the scenario to describe.
        render_fps: the render rate to report frames for (`avsim render`'s default).

    Returns:
        scenario_id, duration_s, ego_rate_hz (the source's native pose rate; None for a single
        pose), ego_poses, agent_rate_hz (median box rate of the tracks; None without two boxes
        in a track), render (fps: `render_fps`, frames: how many a render at it makes; poses and
        boxes are interpolated to those frames), start/end
        timestamps (ns), cameras (name, model, size, horizontal FOV), agents (tracks,
        observations, tracks per class), map element counts, traffic-light state counts,
        extent (xy bounding box of ego path, agents and map, m), ego_orientation ("full",
        "yaw_only" or None when the source did not say), capture_offsets_ms (camera name -> its
        capture time minus the frame time in ms; empty when every camera fires at the frame
        time), frames (frame 0's time and what it is, e.g. the source's first sample, and the
        source's labelled sample times: count, first, median interval) and the metadata.
    """
    ego = scenario.ego
    lights = scenario.lights
    cameras = [
        {
            "name": name,
            "model": camera.model,
            "width_px": camera.width_px,
            "height_px": camera.height_px,
            "horizontal_fov_deg": round(math.degrees(camera.horizontal_fov_rad), 2),
        }
        for name, camera in zip(scenario.rig.names, scenario.rig.cameras)
    ]
    return {
        "scenario_id": scenario.scenario_id,
        "duration_s": float(ego.duration_s),
        "ego_rate_hz": float(ego.rate_hz) if len(ego) > 1 else None,
        "ego_poses": len(ego),
        "agent_rate_hz": _agent_rate_hz(scenario),
        "render": {"fps": float(render_fps), "frames": len(scenario.frame_times(render_fps))},
        "start_timestamp_ns": int(ego.timestamps_ns[0]),
        "end_timestamp_ns": int(ego.timestamps_ns[-1]),
        "cameras": cameras,
        "agents": {
            "tracks": len(scenario.agents.track_ids),
            "observations": len(scenario.agents),
            "tracks_per_class": _tracks_per_class(scenario),
        },
        "map": {name: int(n) for name, n in scenario.map.element_counts().items()},
        "traffic_lights": {
            "lights_with_states": len(lights.light_ids),
            "state_rows": len(lights),
            "states": dict(sorted(Counter(str(s) for s in np.asarray(lights.state)).items())),
        },
        "extent": _extent(scenario),
        "ego_orientation": _ego_orientation(scenario),
        "capture_offsets_ms": _capture_offsets_ms(scenario),
        "frames": _frames(scenario),
        "metadata": scenario.metadata,
    }


def summary_pose_lines(summary: dict[str, Any]) -> list[str]:
    """The `avsim info` lines about the ego orientation and the cameras' capture times.

    Args:
        summary: a `scenario_summary` dict.

    Returns:
        0 to 2 lines: one when the ego pose has yaw only, one when some camera has a non-zero
        capture offset (each camera's offset in ms).
    """
    lines = []
    if summary.get("ego_orientation") == "yaw_only":
        lines.append("ego pose: yaw only (roll/pitch unknown: the source holds a heading per pose)")
    offsets = summary.get("capture_offsets_ms") or {}
    if offsets:
        lines.append("camera capture offsets: " + ", ".join(f"{name} {ms:+.1f} ms" for name, ms in offsets.items()))
    return lines


def summary_frame_line(summary: dict[str, Any]) -> str:
    """The `avsim info` line saying how render frames map to the source's samples.

    Args:
        summary: a `scenario_summary` dict.

    Returns:
        One line: what frame 0 is (and how far after the first ego pose), that frame k is at
        frame 0 + k / fps, and how often the source has samples (labelled agent times).
    """
    f = summary["frames"]
    line = f"frames: frame 0 = {f['frame0_is']}"
    if f["frame0_after_first_pose_ms"]:
        line += f" ({f['frame0_after_first_pose_ms']:.1f} ms after the first ego pose)"
    line += "; frame k at frame 0 + k / fps"
    dt = f["sample_interval_s"]
    if dt:
        lag = (f["first_sample_timestamp_ns"] - f["frame0_timestamp_ns"]) / 1e6
        at = "on frame 0" if lag == 0 else f"{lag:+.1f} ms from frame 0"
        line += f"; {f['source_samples']} source samples (labelled times) every {dt:.3f} s (median), the first {at}: " \
                f"at --fps {1.0 / dt:.4g} frame k is about sample k"
    return line


__all__ = ["scenario_summary", "summary_frame_line", "summary_pose_lines"]
