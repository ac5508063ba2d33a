"""Bird's-eye preview video of a scenario (or before | after side by side), drawn with OpenCV.

World x points right and world y up in the image; the view is fixed for the whole clip (it
fits the ego path(s) plus a margin, or a given square extent around the ego path's centre),
so an edit's motion is easy to compare between panels. Lane lines use the render spec's
colours, dash patterns and double-line offset from the one style table (`avsim.maps.style`,
the renderer's); agents are boxes in their class colour with a heading tick and
their id; the ego is a green box; each panel shows the time on the scenario clock.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import cv2
import numpy as np

from avsim.core.agents import AgentTracks, box_corners
from avsim.core.transforms import yaw_to_quat
from avsim.core.typing import NDArrayByte
from avsim.core.video import MP4Writer
from avsim.maps import HDMap, style
from avsim.scenario import Scenario

from .common import ego_box
from .routes import arc_length_m

BACKGROUND = (12, 12, 12)
DRIVABLE = (48, 48, 52)
# the spec palette (avsim.maps.style); the colours above and below are the preview's own
CROSSWALK = style.CROSSWALK_RGB
ROAD_MARKING = style.ROAD_MARKING_RGB
ROAD_BOUNDARY = style.ROAD_BOUNDARY_RGB
WAIT_LINE = style.WAIT_LINE_RGB
POLE = style.POLE_RGB
SIGN = style.TRAFFIC_SIGN_RGB
LIGHT_RGB = style.TRAFFIC_LIGHT_RGB
CLASS_RGB = {name: back for name, (_front, back) in style.BOX_RGB.items()}  # a box's back colour B
EGO_RGB = (60, 220, 60)
TEXT_RGB = (235, 235, 235)


class _View:
    """World xy <-> pixel mapping for a square panel."""

    def __init__(self, center_xy: np.ndarray, extent_m: float, size_px: int):
        self.size_px = size_px
        self.res = extent_m / size_px
        self.x0 = center_xy[0] - extent_m / 2
        self.y1 = center_xy[1] + extent_m / 2

    def px(self, xy: np.ndarray) -> np.ndarray:
        xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
        u = (xy[:, 0] - self.x0) / self.res
        v = (self.y1 - xy[:, 1]) / self.res
        return np.round(np.stack([u, v], axis=1) * 4).astype(np.int32)  # 2 fractional bits (cv2 shift=2)


def fit_view(scenarios: Sequence[Scenario], size_px: int, extent_m: float | None = None, margin_m: float = 25.0) -> _View:
    """A view covering every scenario's ego path plus `margin_m` (or a fixed square extent)."""
    xy = np.concatenate([np.asarray(s.ego.world_SE3_ego.translation)[:, :2] for s in scenarios])
    lo, hi = xy.min(0), xy.max(0)
    center = (lo + hi) / 2
    if extent_m is None:
        extent_m = float(np.clip((hi - lo).max() + 2 * margin_m, 60.0, 400.0))
    return _View(center, extent_m, size_px)


def _poly(img, view: _View, pts: np.ndarray, color, thickness: int = 1, closed: bool = False) -> None:
    cv2.polylines(img, [view.px(pts[:, :2])], closed, color, thickness, cv2.LINE_AA, shift=2)


def _fill(img, view: _View, pts: np.ndarray, color) -> None:
    cv2.fillPoly(img, [view.px(pts[:, :2])], color, cv2.LINE_AA, shift=2)


def _offset(pts: np.ndarray, d_m: float) -> np.ndarray:
    """Polyline shifted `d_m` to the left of its direction (ground plane)."""
    t = np.gradient(pts[:, :2], axis=0)
    n = np.stack([-t[:, 1], t[:, 0]], axis=1)
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-9)
    out = pts.copy()
    out[:, :2] += d_m * n
    return out


def _draw_patterned(img, view: _View, pts: np.ndarray, pattern: style.DashPattern, color, thickness: int) -> None:
    if pattern.pairs is None or len(pts) < 2:
        _poly(img, view, pts, color, thickness)
        return
    s = arc_length_m(pts)
    fine = np.arange(0.0, s[-1], min(0.1, min(on for on, _ in pattern.pairs) / 2))
    if not len(fine):
        return
    xy = np.stack([np.interp(fine, s, pts[:, i]) for i in (0, 1)], axis=1)
    on = pattern.is_painted(fine)
    edges = np.flatnonzero(np.diff(np.r_[0, on.astype(np.int8), 0]))
    runs = [xy[a:b] for a, b in zip(edges[::2], edges[1::2])]
    cv2.polylines(img, [view.px(r) for r in runs if len(r) >= 1], False, color, thickness, cv2.LINE_AA, shift=2)


def draw_static(hdmap: HDMap, view: _View) -> NDArrayByte:
    """The map layer (H, W, 3) uint8 RGB."""
    img = np.full((view.size_px, view.size_px, 3), BACKGROUND, dtype=np.uint8)
    for k in range(len(hdmap.drivable_areas)):
        _fill(img, view, np.asarray(hdmap.drivable_areas[k]), DRIVABLE)
    for k in range(len(hdmap.crosswalks)):
        _fill(img, view, np.asarray(hdmap.crosswalks[k]), CROSSWALK)
    for k in range(len(hdmap.road_markings)):
        _fill(img, view, np.asarray(hdmap.road_markings[k]), ROAD_MARKING)
    for k in range(len(hdmap.road_boundaries)):
        _poly(img, view, np.asarray(hdmap.road_boundaries[k]), ROAD_BOUNDARY, 2)
    for k in range(len(hdmap.wait_lines)):
        _poly(img, view, np.asarray(hdmap.wait_lines[k]), WAIT_LINE, 2)
    ll = hdmap.lane_lines
    for k in range(len(ll)):
        pts = np.asarray(ll.lines[k])
        lane = style.lane_style(ll.lane_type(k))
        if len(lane.patterns) == 2:  # a double line: left copy first
            for sign, pattern in zip((1.0, -1.0), lane.patterns):
                _draw_patterned(img, view, _offset(pts, sign * style.DOUBLE_LINE_OFFSET_M), pattern, lane.rgb, 1)
        else:
            _draw_patterned(img, view, pts, lane.patterns[0], lane.rgb, 1)
    for k in range(len(hdmap.poles)):
        p = view.px(np.asarray(hdmap.poles[k])[:1, :2])[0]
        cv2.circle(img, tuple(int(v) for v in p), 2 * 4, POLE, -1, cv2.LINE_AA, shift=2)
    signs = hdmap.traffic_signs
    for c in np.asarray(signs.corners_m()) if len(signs) else []:
        _fill(img, view, c[[4, 5, 6, 7]], SIGN)
    return img


def _box_xy(center: np.ndarray, size: np.ndarray, yaw: float) -> np.ndarray:
    """Footprint corners (4, 2) of a box from its centre (2|3,), size (l, w[, h]) and yaw."""
    return box_corners(np.r_[center[:2], 0.0][None], np.r_[size[:2], 0.0][None], yaw_to_quat(yaw)[None])[0, :4, :2]


def _draw_box(img, view: _View, center, size, yaw, color, label: str | None, font_scale: float) -> None:
    corners = _box_xy(np.asarray(center), np.asarray(size), float(yaw))
    _fill(img, view, corners, tuple(int(v * 0.55) for v in color))
    _poly(img, view, corners, color, 1, closed=True)
    nose = np.stack([np.asarray(center)[:2], np.asarray(center)[:2] + (size[0] / 2 + 1.0) * np.array([np.cos(yaw), np.sin(yaw)])])
    _poly(img, view, nose, color, 1)
    if label:
        u, v = view.px(np.asarray(center)[None, :2])[0] // 4
        cv2.putText(img, label, (int(u) + 4, int(v) - 4), cv2.FONT_HERSHEY_SIMPLEX, font_scale, TEXT_RGB, 1, cv2.LINE_AA)


def _light_positions(scenario: Scenario) -> dict[str, np.ndarray]:
    tl = scenario.map.traffic_lights
    pos = {str(i): np.asarray(c)[:2] for i, c in zip(np.asarray(tl.ids), np.asarray(tl.center_m))}
    for lid, p in (scenario.metadata.get("traffic_light_stop_points_m") or {}).items():
        pos.setdefault(str(lid), np.asarray(p, dtype=np.float64)[:2])
    return pos


def draw_frame(scenario: Scenario, static: NDArrayByte, view: _View, t_ns: int, agents_at: AgentTracks,
               title: str) -> NDArrayByte:
    """One panel at absolute time `t_ns`; `agents_at` holds the agents' rows at that time."""
    img = static.copy()
    font = max(0.3, view.size_px / 1600)
    positions = _light_positions(scenario)
    if positions:
        ids = sorted(positions)
        states = scenario.lights.state_at(np.array(ids), t_ns)
        radius = int(max(3, 1.2 / view.res) * 4)
        for lid, st in zip(ids, states):
            p = view.px(positions[lid][None])[0]
            cv2.circle(img, (int(p[0]), int(p[1])), radius, LIGHT_RGB.get(str(st), LIGHT_RGB["unknown"]), -1, cv2.LINE_AA, shift=2)
    cls = np.asarray(agents_at.object_class)
    yaw = np.asarray(agents_at.yaw_rad)
    for i, tid in enumerate(np.asarray(agents_at.track_id).astype(str)):
        label = tid if len(tid) <= 10 else tid[:4] + ".." + tid[-4:]
        _draw_box(img, view, agents_at.center_m[i], agents_at.size_m[i], yaw[i], CLASS_RGB.get(str(cls[i]), CLASS_RGB["Others"]), label, font)
    pose = scenario.ego.pose_at(np.array([t_ns]))
    ego_yaw = float(np.asarray(pose.yaw_rad).reshape(-1)[0])
    p = np.asarray(pose.translation)[0]
    size, offset = ego_box(scenario)
    ego_c = p[:2] + offset * np.array([np.cos(ego_yaw), np.sin(ego_yaw)])
    _draw_box(img, view, ego_c, np.array(size[:2]), ego_yaw, EGO_RGB, "ego", font)
    t_s = (t_ns - int(scenario.ego.timestamps_ns[0])) / 1e9
    cv2.putText(img, f"{title}  t = {t_s:6.2f} s", (8, int(22 * font / 0.4)), cv2.FONT_HERSHEY_SIMPLEX, font * 1.2, TEXT_RGB, 1, cv2.LINE_AA)
    bar = int(round(10.0 / view.res))  # 10 m scale bar
    y = view.size_px - 12
    cv2.line(img, (8, y), (8 + bar, y), TEXT_RGB, 2)
    cv2.putText(img, "10 m", (12 + bar, y + 4), cv2.FONT_HERSHEY_SIMPLEX, font, TEXT_RGB, 1, cv2.LINE_AA)
    return img


def preview_frames(scenario: Scenario, before: Scenario | None = None, fps: float = 10.0, size_px: int = 640,
                   extent_m: float | None = None) -> Iterator[NDArrayByte]:
    """Yield preview frames (H, W, 3) uint8 RGB: one panel, or before | after."""
    size_px += size_px % 2
    panels = [(before, "before"), (scenario, "after")] if before is not None else [(scenario, scenario.scenario_id)]
    view = fit_view([p for p, _ in panels], size_px, extent_m)
    statics = [draw_static(p.map, view) for p, _ in panels]
    frame_ts = scenario.ego.uniform_timestamps(fps)
    per_panel = []
    for p, _ in panels:
        a = p.agents.resample(frame_ts, max_extrapolation_s=0.0) if len(p.agents) else p.agents
        order = np.argsort(np.asarray(a.timestamps_ns), kind="stable")
        ts = np.asarray(a.timestamps_ns)[order]
        per_panel.append((a, order, ts))
    for t in frame_ts:
        tiles = []
        for (p, title), static, (a, order, ts) in zip(panels, statics, per_panel):
            lo, hi = np.searchsorted(ts, t, "left"), np.searchsorted(ts, t, "right")
            rows = np.sort(order[lo:hi])
            tiles.append(draw_frame(p, static, view, int(t), a.select(rows) if len(a) else a, title))
        frame = np.concatenate(tiles, axis=1)
        if len(tiles) > 1:
            frame[:, size_px - 1 : size_px + 1] = 200
        yield frame


def write_preview(scenario: Scenario, out: str | os.PathLike[str], before: Scenario | None = None, fps: float = 10.0, size_px: int = 640,
                  extent_m: float | None = None) -> int:  # fmt: skip
    """Write the preview mp4 atomically; returns the number of frames."""
    size_px += size_px % 2
    panels = 2 if before is not None else 1
    with MP4Writer(out, size_px * panels, size_px, fps=fps) as writer:
        for frame in preview_frames(scenario, before, fps, size_px, extent_m):
            writer.write(frame)
    return writer.frames_written
