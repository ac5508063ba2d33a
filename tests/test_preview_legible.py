"""Legible previews: labels that never overlap, the ego's label on top, a legend, before/after styles."""

from __future__ import annotations

import numpy as np
import pytest
from test_edit_helpers import road_scenario

from avsim.core.agents import AgentTracks
from avsim.core.transforms import yaw_to_quat
from avsim.edit import preview
from avsim.edit.preview import (
    CLASS_RGB,
    EGO_RGB,
    LIGHT_RGB,
    draw_frame,
    draw_static,
    fit_view,
    legend_rect,
    preview_frames,
)
from avsim.edit.preview_labels import count_overlaps, place_labels, plan_labels, text_size_px

SIZE_PX = 256
FONT = max(0.3, SIZE_PX / 1600)


def _queue_scenario(n_cars: int = 10, spacing_m: float = 6.0):
    """The road scene with a queue of `n_cars` static cars in the left lane beside the ego's start."""
    scn = road_scenario()
    ts = np.asarray(scn.ego.timestamps_ns)
    rows = {k: [] for k in ("track_id", "source_class", "timestamps_ns", "center_m", "size_m", "orientation")}
    for k in range(n_cars):
        rows["track_id"].append(np.full(len(ts), f"queue_{k:02d}"))
        rows["source_class"].append(np.full(len(ts), "Car"))
        rows["timestamps_ns"].append(ts)
        rows["center_m"].append(np.tile([5.0 + spacing_m * k, 3.5, 0.8], (len(ts), 1)))
        rows["size_m"].append(np.tile([4.6, 1.9, 1.6], (len(ts), 1)))
        rows["orientation"].append(yaw_to_quat(np.zeros(len(ts))))
    agents = AgentTracks.from_unsorted(*(np.concatenate(v) for v in rows.values()))
    return scn.replace(agents=agents)


@pytest.fixture(scope="module")
def queue():
    return _queue_scenario()


def _capture_labels(monkeypatch) -> list:
    drawn: list = []
    original = preview.draw_labels

    def spy(img, labels, font_scale):
        drawn.append(list(labels))
        original(img, labels, font_scale)

    monkeypatch.setattr(preview, "draw_labels", spy)
    return drawn


def _first_frame(scn, size_px=SIZE_PX, extent_m=100.0):
    view = fit_view([scn], size_px, extent_m)
    agents = scn.agents.resample(scn.ego.timestamps_ns[:1], max_extrapolation_s=0.0)
    return view, draw_frame(scn, draw_static(scn.map, view), view, int(scn.ego.timestamps_ns[0]), agents, "t")


def test_queue_labels_do_not_overlap_where_naive_ones_do(queue, monkeypatch):
    drawn = _capture_labels(monkeypatch)
    view, _ = _first_frame(queue)
    (labels,) = drawn
    rects = [lab.rect_px for lab in labels]
    assert count_overlaps(rects) == 0
    assert all(r[0] >= 0 and r[1] >= 0 and r[2] <= SIZE_PX and r[3] <= SIZE_PX for r in rects)
    assert len(labels) >= 8  # most of the 10 queued cars plus the ego keep a label at 0.39 m/px
    # the old placement (text just above-right of each centre) piles up in this queue
    anchors = view.px(np.asarray(queue.agents.at(int(queue.ego.timestamps_ns[0])).center_m)[:, :2]) // 4
    w, h = text_size_px("queue_00", FONT)
    naive = [(int(u) + 4, int(v) - 4 - h, int(u) + 4 + w, int(v) - 4) for u, v in anchors]
    assert count_overlaps(naive) >= 9


def test_place_labels_keeps_clear_of_obstacles_and_drops_what_has_no_room():
    anchors = np.array([[50, 50]] * 40)
    sizes = np.array([[30, 10]] * 40)
    obstacle = (60, 30, 100, 45)
    placed = place_labels(anchors, sizes, (120, 120), [obstacle])
    rects = [p[0] for p in placed if p is not None]
    assert count_overlaps(rects + [obstacle]) == 0
    assert 0 < len(rects) < 40 and placed[-1] is None
    assert placed[0] is not None and placed[0][1] == 1  # the first label sits next to its anchor


def test_ego_label_is_placed_first_and_drawn_last(queue, monkeypatch):
    drawn = _capture_labels(monkeypatch)
    _, img = _first_frame(queue)
    labels = drawn[0]
    assert labels[-1].is_ego and labels[-1].text == "ego" and not any(lab.is_ego for lab in labels[:-1])
    x0, y0, x1, y1 = labels[-1].rect_px
    frame = img[y0:y1, x0:x1].reshape(-1, 3)
    border = np.r_[img[y0, x0:x1], img[y1 - 1, x0:x1], img[y0:y1, x0], img[y0:y1, x1 - 1]]
    assert (border == EGO_RGB).all(), "nothing is drawn over the ego's label"
    assert (frame == EGO_RGB).all(axis=1).sum() >= len(border) - 4
    # even when every agent label would want the ego's spot, the ego keeps its label
    anchors = np.array([[100, 100]] * 12)
    labels = plan_labels(["car"] * 11 + ["ego"], anchors, [(1, 2, 3)] * 12, 11, (140, 140), FONT)
    assert labels[-1].is_ego and labels[-1].ring == 1


def _colour_pixels(img, rect, rgb) -> int:
    x0, y0, x1, y1 = rect
    return int((img[y0:y1, x0:x1] == np.asarray(rgb)).all(axis=-1).sum())


def test_legend_shows_classes_ego_and_light_states(queue):
    _, img = _first_frame(queue)
    rect = legend_rect(SIZE_PX, FONT, compare=False)
    for rgb in [*CLASS_RGB.values(), EGO_RGB, *LIGHT_RGB.values()]:
        assert _colour_pixels(img, rect, rgb) >= 4, rgb
    pair = next(iter(preview_frames(queue, before=queue, fps=1.0, size_px=SIZE_PX)))
    right = pair[:, SIZE_PX:]
    rect_ba = legend_rect(SIZE_PX, FONT, compare=True)
    assert rect_ba[3] - rect_ba[1] >= rect[3] - rect[1]
    for name, rgb in CLASS_RGB.items():
        assert _colour_pixels(right, rect_ba, rgb) >= 4
        if name != "Car":  # (the queue's cars and their label frames are Car-coloured)
            assert _colour_pixels(pair[:, :SIZE_PX], rect_ba, rgb) == 0  # one legend, on the "after" panel


def _box_pixels(ghost: bool):
    img = np.zeros((200, 200, 3), np.uint8)
    view = preview._View(np.array([0.0, 0.0]), 20.0, 200)
    preview._draw_box(img, view, np.array([0.0, 0.0]), np.array([8.0, 4.0]), 0.0, CLASS_RGB["Car"], ghost=ghost)
    v, u = np.mgrid[:200, :200]
    band = (np.minimum(np.abs(u - 60), np.abs(u - 140)) <= 1) & (v >= 80) & (v <= 120)
    band |= (np.minimum(np.abs(v - 80), np.abs(v - 120)) <= 1) & (u >= 60) & (u <= 140)
    outline = int((img[band] > 0).any(axis=-1).sum())  # edge pixels painted (80 x 40 px box, 0.1 m/px)
    inside = img[85:97, 70:130].reshape(-1, 3)  # well inside the 80 x 40 px box, off the heading tick
    return outline, int(inside.any(axis=1).sum())


def test_before_and_after_styles_differ():
    solid_outline, solid_inside = _box_pixels(ghost=False)
    ghost_outline, ghost_inside = _box_pixels(ghost=True)
    assert solid_inside == 12 * 60 and ghost_inside == 0  # after: filled; before: no fill
    assert 0.3 * solid_outline < ghost_outline < 0.7 * solid_outline  # before: dashed outline (half painted)


def test_before_after_modes_draw_ghosts(queue):
    from avsim.edit import ops_agents

    after = ops_agents.shift_agents(queue, ["queue_03"], dy_m=-7.0)
    size_px, extent_m = 512, 60.0  # 0.12 m/px: a car is 16 px wide
    view = fit_view([queue, after], size_px, extent_m)
    fill = [int(c * 0.55) for c in CLASS_RGB["Car"]]

    def filled_at(img, xy):
        u, v = view.px(np.asarray(xy)[None])[0] // 4
        return (np.abs(img[v - 1 : v + 2, u - 1 : u + 2].reshape(-1, 3).astype(int) - fill).max(axis=1) <= 8).any()

    old_xy, new_xy = (5.0 + 18.0 - 1.0, 3.5 - 0.5), (5.0 + 18.0 - 1.0, -3.5 - 0.5)  # inside, off the heading tick
    pair = next(iter(preview_frames(after, before=queue, fps=1.0, size_px=size_px, extent_m=extent_m)))
    left, right = pair[:, :size_px], pair[:, size_px:]
    assert not filled_at(left, old_xy) and filled_at(right, new_xy)  # before panel: outlines only
    assert not filled_at(left, (34.0, 3.0)) and filled_at(right, (34.0, 3.0))  # an unmoved car (queue_05): ghost | solid
    one = next(iter(preview_frames(after, before=queue, fps=1.0, size_px=size_px, extent_m=extent_m, overlay=True)))
    assert one.shape == (size_px, size_px, 3)
    assert filled_at(one, new_xy) and not filled_at(one, old_xy)
    u, v = view.px(np.array([[5.0 + 18.0, 3.5 + 0.95]]))[0] // 4  # the ghost's left edge at the old place
    strip = one[v - 1 : v + 2, u - 20 : u + 20].reshape(-1, 3).astype(int)
    assert (np.abs(strip - CLASS_RGB["Car"]).max(axis=1) <= 60).any()


def test_preview_cli_overlay(queue, tmp_path):
    from avsim.cli import main
    from avsim.core.video import video_info
    from avsim.scenario.io import save_scenario

    save_scenario(queue, tmp_path / "q")
    out = tmp_path / "o.mp4"
    assert main(["preview", str(tmp_path / "q"), str(out), "--before", str(tmp_path / "q"), "--overlay", "--fps", "1", "--size", "96"]) == 0
    info = video_info(out)
    assert (info["width_px"], info["height_px"], info["frames"]) == (96, 96, 11)
    assert main(["preview", str(tmp_path / "q"), str(tmp_path / "x.mp4"), "--overlay"]) == 2
