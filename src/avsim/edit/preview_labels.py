"""Label placement for the bird's-eye preview: greedy, over candidate offsets, never overlapping.

Each label is a text box near its anchor (a box centre in pixels). Labels are placed in
priority order (the caller puts the ego first, then agents nearest the ego): for each, the
candidate rectangles around the anchor (eight directions, at growing distances) are tried in
order and the first that stays inside the image and clears every placed label and obstacle
(title, scale bar, legend, lights, every box) by `gap_px` is taken; a label with no free candidate is dropped.
Labels placed beyond the first ring get a leader line to their anchor. Drawing happens in the
reverse sense of priority for the ego: its label is drawn last, on top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from avsim.core.typing import NDArrayByte

Rect = tuple[int, int, int, int]  # x0, y0, x1, y1 in pixels (x1, y1 exclusive)
# candidate directions (du, dv), image v down: up-right, up-left, down-right, down-left, right, left, up, down
DIRECTIONS = ((1, -1), (-1, -1), (1, 1), (-1, 1), (1, 0), (-1, 0), (0, -1), (0, 1))
RINGS = (1, 2, 3, 4, 5, 6)
LABEL_BG_RGB = (16, 16, 16)
LEADER_RGB = (170, 170, 170)
LABEL_TEXT_RGB = (235, 235, 235)


@dataclass(frozen=True)
class Label:
    """One label: text, anchor (u, v) px, its rectangle (None: dropped), frame colour, ego flag."""

    text: str
    anchor_px: tuple[int, int]
    rect_px: Rect | None
    rgb: tuple[int, int, int]
    is_ego: bool = False
    ring: int = 0


def rects_overlap(a: Rect, b: Rect, gap_px: int = 0) -> bool:
    """Whether two rectangles overlap (or come closer than `gap_px`).

    Args:
        a: (x0, y0, x1, y1), x1/y1 exclusive.
        b: the same.
        gap_px: required clearance.

    Returns:
        True when they overlap.
    """
    return a[0] < b[2] + gap_px and b[0] < a[2] + gap_px and a[1] < b[3] + gap_px and b[1] < a[3] + gap_px


def count_overlaps(rects: Sequence[Rect | None]) -> int:
    """Pairs of overlapping rectangles (None entries skipped).

    Args:
        rects: (N,) rectangles.

    Returns:
        The number of overlapping pairs.
    """
    r = [x for x in rects if x is not None]
    return sum(rects_overlap(r[i], r[j]) for i in range(len(r)) for j in range(i + 1, len(r)))


def _candidates(anchors: np.ndarray, sizes: np.ndarray, step_px: int) -> np.ndarray:
    """Candidate rectangles (N, len(RINGS) * 8, 4) in try order: ring by ring, DIRECTIONS within a ring.

    Each rectangle's near side (or centre line, for a zero direction component) sits
    `ring * step_px` from its anchor (N, 2) along the direction; sizes are (N, 2) (w, h).
    """
    d = np.tile(np.array(DIRECTIONS, dtype=np.int64), (len(RINGS), 1))
    off = np.repeat(np.array(RINGS, dtype=np.int64) * step_px, len(DIRECTIONS))[:, None] * d
    w, h = sizes[:, None, 0].astype(np.int64), sizes[:, None, 1].astype(np.int64)
    x0 = anchors[:, None, 0].astype(np.int64) + off[None, :, 0] - np.where(d[:, 0] < 0, w, np.where(d[:, 0] == 0, w // 2, 0))
    y0 = anchors[:, None, 1].astype(np.int64) + off[None, :, 1] - np.where(d[:, 1] < 0, h, np.where(d[:, 1] == 0, h // 2, 0))
    return np.stack([x0, y0, x0 + w, y0 + h], axis=-1)


def _free(cands: np.ndarray, taken: np.ndarray, gap_px: int) -> np.ndarray:
    """(C,) whether each candidate clears every taken rectangle (K, 4)."""
    if not len(taken):
        return np.ones(len(cands), dtype=bool)
    c, t = cands[:, None, :], taken[None, :, :]
    hit = (c[..., 0] < t[..., 2] + gap_px) & (t[..., 0] < c[..., 2] + gap_px) & (c[..., 1] < t[..., 3] + gap_px) & (t[..., 1] < c[..., 3] + gap_px)
    return np.asarray(~hit.any(axis=1))


def place_labels(anchors_px: np.ndarray, sizes_px: np.ndarray, image_size_px: tuple[int, int],
                 obstacles_px: Sequence[Rect] = (), step_px: int = 6, gap_px: int = 1) -> list[tuple[Rect, int] | None]:  # fmt: skip
    """Greedy non-overlapping placement, in the given (priority) order.

    Args:
        anchors_px: (N, 2) anchor points (u, v) in pixels.
        sizes_px: (N, 2) label sizes (w, h) in pixels.
        image_size_px: (width, height) of the image.
        obstacles_px: rectangles no label may touch (title, legend, lights, boxes).
        step_px: distance between candidate rings.
        gap_px: clearance kept between labels.

    Returns:
        (N,) per label its rectangle and ring (1 = next to the anchor), or None when dropped.
    """
    width, height = image_size_px
    hard = np.array(list(obstacles_px), dtype=np.int64).reshape(-1, 4)
    out: list[tuple[Rect, int] | None] = []
    all_cands = _candidates(np.asarray(anchors_px).reshape(-1, 2), np.asarray(sizes_px).reshape(-1, 2), step_px)
    all_inside = (all_cands[..., 0] >= 0) & (all_cands[..., 1] >= 0) & (all_cands[..., 2] <= width) & (all_cands[..., 3] <= height)
    for cands, inside in zip(all_cands, all_inside):
        pick = np.flatnonzero(inside & _free(cands, hard, gap_px))
        if not len(pick):
            out.append(None)
            continue
        k = int(pick[0])
        rect = (int(cands[k, 0]), int(cands[k, 1]), int(cands[k, 2]), int(cands[k, 3]))
        hard = np.r_[hard, np.array([rect], dtype=np.int64)]
        out.append((rect, RINGS[k // len(DIRECTIONS)]))
    return out


def text_size_px(text: str, font_scale: float) -> tuple[int, int]:
    """A label's box size (w, h) in pixels: the text plus a 2 px margin."""
    (w, h), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, font_scale, 1)
    return w + 4, h + base + 4


def plan_labels(texts: Sequence[str], anchors_px: np.ndarray, rgbs: Sequence[tuple[int, int, int]], ego_index: int | None,
                image_size_px: tuple[int, int], font_scale: float, obstacles_px: Sequence[Rect] = ()) -> list[Label]:  # fmt: skip
    """Labels placed ego first, then by distance to the ego (or as given); returned in draw order.

    Args:
        texts: (N,) label texts.
        anchors_px: (N, 2) anchors (u, v) px.
        rgbs: (N,) frame colours.
        ego_index: the ego's index in `texts`, or None.
        image_size_px: (width, height).
        font_scale: OpenCV font scale.
        obstacles_px: rectangles to keep clear.

    Returns:
        The placed labels (dropped ones and those anchored outside the image left out), the
        ego's last (drawn on top).
    """
    anchors = np.asarray(anchors_px, dtype=np.float64).reshape(-1, 2)
    order = list(range(len(texts)))
    if ego_index is not None:
        d = np.linalg.norm(anchors - anchors[ego_index], axis=1)
        order = [ego_index] + [i for i in np.lexsort((np.arange(len(texts)), d)).tolist() if i != ego_index]
    width, height = image_size_px
    order = [i for i in order if 0 <= anchors[i, 0] < width and 0 <= anchors[i, 1] < height]  # off-panel: no label
    sizes = np.array([text_size_px(texts[i], font_scale) for i in order]).reshape(-1, 2)
    placed = place_labels(anchors[order], sizes, image_size_px, obstacles_px)
    labels = [Label(texts[i], (int(anchors[i, 0]), int(anchors[i, 1])), p[0], rgbs[i], i == ego_index, p[1])
              for i, p in zip(order, placed) if p is not None]  # fmt: skip
    return [lab for lab in labels if not lab.is_ego] + [lab for lab in labels if lab.is_ego]


def draw_labels(img: NDArrayByte, labels: Sequence[Label], font_scale: float) -> None:
    """Draw labels in list order (later ones on top): leader line, dark box, coloured frame, text.

    Args:
        img: (H, W, 3) uint8 RGB image, drawn in place.
        labels: placed labels (`plan_labels`).
        font_scale: OpenCV font scale.
    """
    for lab in labels:
        if lab.rect_px is None:
            continue
        x0, y0, x1, y1 = lab.rect_px
        if lab.ring > 1:
            near = (int(np.clip(lab.anchor_px[0], x0, x1 - 1)), int(np.clip(lab.anchor_px[1], y0, y1 - 1)))
            cv2.line(img, lab.anchor_px, near, LEADER_RGB, 1, cv2.LINE_AA)
        cv2.rectangle(img, (x0, y0), (x1 - 1, y1 - 1), LABEL_BG_RGB, -1)
        cv2.rectangle(img, (x0, y0), (x1 - 1, y1 - 1), lab.rgb, 1)
        (_, h), _ = cv2.getTextSize(lab.text, cv2.FONT_HERSHEY_SIMPLEX, font_scale, 1)
        cv2.putText(img, lab.text, (x0 + 2, y0 + 2 + h), cv2.FONT_HERSHEY_SIMPLEX, font_scale, LABEL_TEXT_RGB, 1, cv2.LINE_AA)
