"""Bird's-eye preview video of a scenario (or before | after side by side, or overlaid), drawn with OpenCV.

World x points right and world y up in the image; the view is fixed for the whole clip (it
fits the ego path(s) plus a margin, or a given square extent around the ego path's centre),
so an edit's motion is easy to compare between panels. Lane lines use the render spec's
colours, dash patterns and double-line offset from the one style table (`avsim.maps.style`,
the renderer's); agents are boxes in their class colour with a heading tick; the ego is a
green box drawn after every agent. Labels (track ids) are placed without overlaps
(`avsim.edit.preview_labels`: greedy over candidate offsets, leader lines, labels that find no
room are dropped), the ego's label first and drawn last, on top. A legend shows the class,
ego and light-state colours and, when comparing, the two styles: before = dashed outline
without fill ("ghost"), after = filled box with a solid outline. Each panel shows the time on
one clock, the previewed (after) scenario's, and a 10 m scale bar.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

import cv2
import numpy as np

from avsim.core.agents import AgentTracks, box_corners
from avsim.core.transforms import yaw_to_quat
from avsim.core.typing import NDArrayByte
from avsim.core.video import MP4Writer
from avsim.maps import HDMap, style
from avsim.scenario import Scenario

from .common import ego_box
from .preview_labels import Rect, draw_labels, plan_labels, text_size_px
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
LEGEND_BG_RGB = (24, 24, 24)
GHOST_DASH_PX = 4  # dash and gap length of a "before" ghost outline


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


def _box_xy(center: np.ndarray, size: np.ndarray, yaw: float | np.ndarray) -> np.ndarray:
    """Footprint corners (4, 2) of a box from its centre (2|3,), size (l, w[, h]) and yaw; batched:
    centres (N, 2|3), sizes (N, 2|3), yaws (N,) give (N, 4, 2)."""
    c, sz, y = np.asarray(center, np.float64), np.asarray(size, np.float64), np.asarray(yaw, np.float64)
    if c.ndim == 1:
        return _box_xy(c[None], sz[None], y.reshape(1))[0]
    if not len(c):
        return np.zeros((0, 4, 2))
    zeros = np.zeros((len(c), 1))
    return box_corners(np.c_[c[:, :2], zeros], np.c_[sz[:, :2], zeros], yaw_to_quat(y))[:, :4, :2]


def _dashed(img, view: _View, pts: np.ndarray, color, closed: bool = True) -> None:
    """A dashed polyline (GHOST_DASH_PX on, GHOST_DASH_PX off, in image pixels)."""
    px = view.px(pts[:, :2]).astype(np.float64) / 4
    if closed:
        px = np.r_[px, px[:1]]
    seg = np.linalg.norm(np.diff(px, axis=0), axis=1)
    s = np.r_[0.0, np.cumsum(seg)]
    for a in np.arange(0.0, s[-1], 2 * GHOST_DASH_PX):
        t = np.linspace(a, min(a + GHOST_DASH_PX, s[-1]), 4)
        run = np.stack([np.interp(t, s, px[:, 0]), np.interp(t, s, px[:, 1])], axis=1)
        cv2.polylines(img, [np.round(run * 4).astype(np.int32)], False, color, 1, cv2.LINE_AA, shift=2)


def _draw_box(img, view: _View, center, size, yaw, color, ghost: bool = False, corners: np.ndarray | None = None) -> None:
    """One box with a heading tick: filled with a solid outline, or (`ghost`) a dashed outline only.

    `corners` (4, 2) are the footprint when already computed (`_box_xy`).
    """
    corners = _box_xy(np.asarray(center), np.asarray(size), float(yaw)) if corners is None else corners
    nose = np.stack([np.asarray(center)[:2], np.asarray(center)[:2] + (size[0] / 2 + 1.0) * np.array([np.cos(yaw), np.sin(yaw)])])
    if ghost:
        _dashed(img, view, corners, color)
        _dashed(img, view, nose, color, closed=False)
        return
    _fill(img, view, corners, tuple(int(v * 0.55) for v in color))
    _poly(img, view, corners, color, 1, closed=True)
    _poly(img, view, nose, color, 1)


def _light_positions(scenario: Scenario) -> dict[str, np.ndarray]:
    tl = scenario.map.traffic_lights
    pos = {str(i): np.asarray(c)[:2] for i, c in zip(np.asarray(tl.ids), np.asarray(tl.center_m))}
    for lid, p in (scenario.metadata.get("traffic_light_stop_points_m") or {}).items():
        pos.setdefault(str(lid), np.asarray(p, dtype=np.float64)[:2])
    return pos


def _label_text(track_id: str) -> str:
    return track_id if len(track_id) <= 10 else track_id[:4] + ".." + track_id[-4:]


def legend_entries(compare: bool) -> list[tuple[str, str, tuple[int, int, int]]]:
    """The legend's rows (kind, text, colour); kind is "box", "light", "before" or "after".

    Args:
        compare: whether the before/after style rows are included.

    Returns:
        Rows in drawing order: the five classes and the ego, the light states, then the styles.
    """
    rows = [("box", name, rgb) for name, rgb in CLASS_RGB.items()] + [("box", "ego", EGO_RGB)]
    rows += [("light", name, rgb) for name, rgb in LIGHT_RGB.items()]
    if compare:
        rows += [("before", "before", TEXT_RGB), ("after", "after", TEXT_RGB)]
    return rows


def legend_rect(size_px: int, font_scale: float, compare: bool) -> Rect:
    """The legend's rectangle (x0, y0, x1, y1) px in the bottom-right corner of a panel: two columns.

    Args:
        size_px: the panel's side in pixels.
        font_scale: OpenCV font scale of the panel.
        compare: whether the before/after rows are included.

    Returns:
        The rectangle, x1/y1 exclusive.
    """
    rows = legend_entries(compare)
    row_h = text_size_px("Pg", font_scale)[1] + 1
    col_w = max(text_size_px(t, font_scale)[0] for _, t, _ in rows) + row_h + 6
    n_rows = max(6, len(rows) - 6)
    w, h = 2 * col_w + 8, n_rows * row_h + 8
    return (size_px - w - 4, size_px - h - 4, size_px - 4, size_px - 4)


def draw_legend(img: NDArrayByte, font_scale: float, compare: bool) -> Rect:
    """Draw the legend (`legend_rect`) into a panel in place: swatches in their exact colours.

    Args:
        img: (S, S, 3) uint8 RGB panel.
        font_scale: OpenCV font scale.
        compare: whether the before/after style rows are drawn.

    Returns:
        The legend's rectangle.
    """
    x0, y0, x1, y1 = rect = legend_rect(img.shape[1], font_scale, compare)
    img[y0:y1, x0:x1] = (img[y0:y1, x0:x1].astype(np.uint16) // 4 + np.array(LEGEND_BG_RGB, np.uint16) * 3 // 4).astype(np.uint8)
    row_h = text_size_px("Pg", font_scale)[1] + 1
    sw = row_h - 4
    for k, (kind, text, rgb) in enumerate(legend_entries(compare)):
        col, row = (0, k) if k < 6 else (1, k - 6)
        x, y = x0 + 4 + col * (x1 - x0 - 8) // 2, y0 + 4 + row * row_h
        if kind == "box":
            cv2.rectangle(img, (x, y + 1), (x + sw, y + 1 + sw), rgb, -1)
        elif kind == "light":
            cv2.circle(img, (x + sw // 2, y + 1 + sw // 2), max(sw // 2, 1), rgb, -1)
        elif kind == "before":
            for d in range(0, sw + 1, 4):  # a dashed square
                for a, b in (((x + d, y + 1), (x + min(d + 2, sw), y + 1)), ((x + d, y + 1 + sw), (x + min(d + 2, sw), y + 1 + sw)),
                             ((x, y + 1 + d), (x, y + 1 + min(d + 2, sw))), ((x + sw, y + 1 + d), (x + sw, y + 1 + min(d + 2, sw)))):
                    cv2.line(img, a, b, rgb, 1)
        else:
            cv2.rectangle(img, (x, y + 1), (x + sw, y + 1 + sw), tuple(int(v * 0.55) for v in rgb), -1)
            cv2.rectangle(img, (x, y + 1), (x + sw, y + 1 + sw), rgb, 1)
        cv2.putText(img, text, (x + sw + 4, y + sw), cv2.FONT_HERSHEY_SIMPLEX, font_scale, TEXT_RGB, 1, cv2.LINE_AA)
    return rect


def _draw_lights(img: NDArrayByte, scenario: Scenario, view: _View, t_ns: int) -> list[Rect]:
    """The lights in their state at `t_ns`; returns their pixel rectangles."""
    positions = _light_positions(scenario)
    if not positions:
        return []
    ids = sorted(positions)
    states = scenario.lights.state_at(np.array(ids), t_ns)
    radius = int(max(3, 1.2 / view.res) * 4)
    rects = []
    for lid, st in zip(ids, states):
        p = view.px(positions[lid][None])[0]
        cv2.circle(img, (int(p[0]), int(p[1])), radius, LIGHT_RGB.get(str(st), LIGHT_RGB["unknown"]), -1, cv2.LINE_AA, shift=2)
        u, v, r = int(p[0]) // 4, int(p[1]) // 4, radius // 4 + 1
        rects.append((u - r, v - r, u + r + 1, v + r + 1))
    return rects


def _draw_boxes(img: NDArrayByte, scenario: Scenario, view: _View, t_ns: int, agents_at: AgentTracks,
                ghost: bool) -> tuple[np.ndarray, list[Rect]]:  # fmt: skip
    """Agents, then the ego, as boxes; returns anchors (N + 1, 2) px and pixel rectangles, the ego's last."""
    cls = np.asarray(agents_at.object_class)
    yaw = np.asarray(agents_at.yaw_rad)
    footprints = list(_box_xy(np.asarray(agents_at.center_m), np.asarray(agents_at.size_m), yaw))
    for i in range(len(agents_at)):
        rgb = CLASS_RGB.get(str(cls[i]), CLASS_RGB["Others"])
        _draw_box(img, view, agents_at.center_m[i], agents_at.size_m[i], yaw[i], rgb, ghost, corners=footprints[i])
    pose = scenario.ego.pose_at(np.array([t_ns]))
    ego_yaw = float(np.asarray(pose.yaw_rad).reshape(-1)[0])
    p = np.asarray(pose.translation)[0]
    size, offset = ego_box(scenario)
    ego_c = p[:2] + offset * np.array([np.cos(ego_yaw), np.sin(ego_yaw)])
    footprints.append(_box_xy(ego_c, np.array(size[:2]), ego_yaw))
    _draw_box(img, view, ego_c, np.array(size[:2]), ego_yaw, EGO_RGB, ghost, corners=footprints[-1])
    px = (view.px(np.concatenate(footprints)) // 4).reshape(-1, 4, 2)
    lo, hi = px.min(axis=1), px.max(axis=1) + 1
    rects = [(int(a[0]), int(a[1]), int(b[0]), int(b[1])) for a, b in zip(lo, hi)]
    centres = np.r_[np.asarray(agents_at.center_m).reshape(-1, 3)[:, :2], ego_c[None]]
    return view.px(centres) // 4, rects


def draw_frame(scenario: Scenario, static: NDArrayByte, view: _View, t_ns: int, agents_at: AgentTracks,
               title: str, ghost: bool = False, underlay: tuple[Scenario, AgentTracks] | None = None,
               legend: bool = True, compare: bool = False, clock_origin_ns: int | None = None) -> NDArrayByte:  # fmt: skip
    """One panel at absolute time `t_ns`; `agents_at` holds the agents' rows at that time.

    Args:
        scenario: the scenario drawn (its lights, ego and labels).
        static: (S, S, 3) uint8 map layer (`draw_static`).
        view: the panel's view.
        t_ns: absolute time, int ns.
        agents_at: the agents' rows at `t_ns`.
        title: text before the clock.
        ghost: draw this scenario's boxes in the "before" style (dashed outlines, no fill).
        underlay: another scenario and its rows, drawn first as ghosts (the overlay mode).
        legend: whether to draw the legend.
        compare: whether the legend shows the before/after styles.
        clock_origin_ns: the absolute time shown as t = 0 (None: this scenario's first ego
            time); side-by-side panels share one, so one instant reads the same in both.

    Returns:
        (S, S, 3) uint8 RGB panel.
    """
    img = static.copy()
    font = max(0.3, view.size_px / 1600)
    light_rects = _draw_lights(img, scenario, view, t_ns)
    ghost_rects = _draw_boxes(img, underlay[0], view, t_ns, underlay[1], ghost=True)[1] if underlay is not None else []
    anchors, box_rects = _draw_boxes(img, scenario, view, t_ns, agents_at, ghost)
    origin_ns = int(scenario.ego.timestamps_ns[0]) if clock_origin_ns is None else clock_origin_ns
    heading = f"{title}  t = {(t_ns - origin_ns) / 1e9:6.2f} s"
    title_w, title_h = text_size_px(heading, font * 1.2)
    title_y = int(22 * font / 0.4)
    bar = int(round(10.0 / view.res))  # 10 m scale bar
    y = view.size_px - 12
    obstacles = [(0, 0, title_w + 12, title_y + 6), (0, y - title_h - 4, 16 + bar + text_size_px("10 m", font)[0], view.size_px),
                 *light_rects, *box_rects, *ghost_rects]  # fmt: skip
    if legend:
        obstacles.append(draw_legend(img, font, compare))
    texts = [_label_text(t) for t in np.asarray(agents_at.track_id).astype(str)] + ["ego"]
    cls = np.asarray(agents_at.object_class)
    rgbs = [CLASS_RGB.get(str(c), CLASS_RGB["Others"]) for c in cls] + [EGO_RGB]
    labels = plan_labels(texts, anchors, rgbs, len(texts) - 1, (view.size_px, view.size_px), font, obstacles)
    draw_labels(img, labels, font)
    cv2.putText(img, heading, (8, title_y), cv2.FONT_HERSHEY_SIMPLEX, font * 1.2, TEXT_RGB, 1, cv2.LINE_AA)
    cv2.line(img, (8, y), (8 + bar, y), TEXT_RGB, 2)
    cv2.putText(img, "10 m", (12 + bar, y + 4), cv2.FONT_HERSHEY_SIMPLEX, font, TEXT_RGB, 1, cv2.LINE_AA)
    return img


def _rows_at(agents: AgentTracks, frame_ts: np.ndarray) -> Iterator[AgentTracks]:
    """The agents' rows at each frame time (tracks resampled, no extrapolation)."""
    a = agents.resample(frame_ts, max_extrapolation_s=0.0) if len(agents) else agents
    order = np.argsort(np.asarray(a.timestamps_ns), kind="stable")
    ts = np.asarray(a.timestamps_ns)[order]
    for t in frame_ts:
        lo, hi = np.searchsorted(ts, t, "left"), np.searchsorted(ts, t, "right")
        yield a.select(np.sort(order[lo:hi])) if len(a) else a


def preview_frames(scenario: Scenario, before: Scenario | None = None, fps: float = 10.0, size_px: int = 640,
                   extent_m: float | None = None, overlay: bool = False) -> Iterator[NDArrayByte]:  # fmt: skip
    """Yield preview frames (H, W, 3) uint8 RGB, one per `fps` step over `scenario`'s span.

    Every panel reads one clock, `scenario`'s (t = 0 at its first ego time): the before panel of an
    edit that cropped or shifted time shows the same t as the after panel at the same instant.

    Args:
        scenario: the scenario ("after" when `before` is given).
        before: another scenario to compare with: the left panel (dashed ghosts), or with
            `overlay` drawn as ghosts under `scenario` in one panel.
        fps: frame rate.
        size_px: panel side in pixels (made even).
        extent_m: side of the square view in metres (None: fit the ego path(s)).
        overlay: one panel with `before` as ghosts instead of two panels.

    Returns:
        An iterator of frames (S, S or 2S, 3).
    """
    size_px += size_px % 2
    compare = before is not None
    view = fit_view([scenario] + ([before] if before is not None else []), size_px, extent_m)
    frame_ts = scenario.ego.uniform_timestamps(fps)
    static = draw_static(scenario.map, view)
    after_rows = _rows_at(scenario.agents, frame_ts)
    if before is None or overlay:
        before_rows = _rows_at(before.agents, frame_ts) if before is not None else None
        title = "before (dashed) / after" if before is not None else scenario.scenario_id
        for t in frame_ts:
            under = (before, next(before_rows)) if before is not None and before_rows is not None else None
            yield draw_frame(scenario, static, view, int(t), next(after_rows), title, underlay=under, compare=compare)
        return
    static_before = draw_static(before.map, view)
    before_rows = _rows_at(before.agents, frame_ts)
    origin_ns = int(scenario.ego.timestamps_ns[0])
    for t in frame_ts:
        left = draw_frame(before, static_before, view, int(t), next(before_rows), "before", ghost=True, legend=False,
                          clock_origin_ns=origin_ns)  # fmt: skip
        right = draw_frame(scenario, static, view, int(t), next(after_rows), "after", compare=True, clock_origin_ns=origin_ns)
        frame = np.concatenate([left, right], axis=1)
        frame[:, size_px - 1 : size_px + 1] = 200
        yield frame


def preview_frame_count(scenario: Scenario, fps: float = 10.0) -> int:
    """How many frames `preview_frames` yields for `scenario` at `fps` (a progress bar's total)."""
    return len(scenario.ego.uniform_timestamps(fps))


def write_preview(scenario: Scenario, out: str | os.PathLike[str], before: Scenario | None = None, fps: float = 10.0, size_px: int = 640,
                  extent_m: float | None = None, overlay: bool = False, progress: Callable[[int], None] | None = None) -> int:  # fmt: skip
    """Write the preview mp4 atomically; returns the number of frames (see `preview_frames`).

    `progress(1)` is called after each frame is written (of `preview_frame_count`).
    """
    size_px += size_px % 2
    panels = 2 if before is not None and not overlay else 1
    with MP4Writer(out, size_px * panels, size_px, fps=fps) as writer:
        for frame in preview_frames(scenario, before, fps, size_px, extent_m, overlay):
            writer.write(frame)
            if progress is not None:
                progress(1)
    return writer.frames_written
