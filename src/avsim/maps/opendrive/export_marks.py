"""Road marks for exported lane rails: which avsim lane line (or road boundary) runs along each rail.

Each rail is walked every `STEP_M`; a sample takes the nearest lane-line (or boundary) vertex within
`MATCH_M` that no earlier rail has claimed (lines are resampled every 0.5 m first), so a line two
lanes share is written once, on the first road that meets it. Runs of one line shorter than
`MIN_RUN_M` become no mark. A matched lane line becomes the `<roadMark>` of its type
(`MARK_TYPES`; a double line with one dashed side is mirrored when the line runs against the
rail), a boundary a curb; the rest of the rail is type none. The line's own geometry is not kept:
on re-import the mark lies on the rail (the lanes' geometry), `unmatched_m` says how much line
length no rail carried.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from avsim.core.typing import NDArrayFloat
from avsim.maps import LaneLines, Polylines
from avsim.maps.opendrive.model import RoadMark

STEP_M = 1.0
MATCH_M = 0.3
MIN_RUN_M = 2.0
_SAMPLE_M = 0.5
CLAIM_M = 0.75  # a matched sample claims its line's samples this near (the rail is walked every STEP_M)

MARK_TYPES: dict[str, str] = {
    "SOLID_SINGLE": "solid", "LONG_DASHED_SINGLE": "broken", "SHORT_DASHED_SINGLE": "broken",
    "DOT_DASHED_SINGLE": "botts dots", "SOLID_GROUP": "solid solid", "SOLID_DASHED": "solid broken",
    "DASHED_SOLID": "broken solid", "DOT_SOLID_SINGLE": "solid", "DOT_SOLID_GROUP": "solid solid",
}  # fmt: skip
"""avsim style -> OpenDRIVE road-mark type (the inverse of `marks.road_mark_type` for the right
side; dotted-solid yellow lines have no OpenDRIVE twin and become solid)."""
MARK_COLOURS = {"WHITE": "white", "YELLOW": "yellow", "OTHER": "blue"}
"""avsim colour -> OpenDRIVE colour (OTHER, any colour but white and yellow, is written blue)."""
_MIRROR = {"solid broken": "broken solid", "broken solid": "solid broken"}
SHORT_DASH_LINE_M = (1.5, 1.5)
"""Dash and gap of a short-dashed line's `<type><line>` (avsim's SHORT_DASH pattern)."""


def _resample(p: NDArrayFloat, step: float) -> tuple[NDArrayFloat, NDArrayFloat]:
    s = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1))]
    q = np.r_[np.arange(0.0, s[-1], step), s[-1]]
    pts = np.stack([np.interp(q, s, p[:, i]) for i in range(3)], 1)
    d = np.gradient(pts[:, :2], axis=0) if len(pts) > 1 else np.zeros((1, 2))
    return pts, d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)


@dataclass
class MarkMatcher:
    """Lane lines and boundaries as claimable samples (see the module docstring)."""

    lines: LaneLines
    boundaries: Polylines

    def __post_init__(self) -> None:
        pts, dirs, owner = [], [], []
        for kind, elems in (("line", self.lines.lines), ("boundary", self.boundaries)):
            for k in range(len(elems)):
                p, d = _resample(np.asarray(elems[k]), _SAMPLE_M)
                pts.append(p)
                dirs.append(d)
                owner += [(kind, k)] * len(p)
        self.points = np.concatenate(pts) if pts else np.zeros((0, 3))
        self.dirs = np.concatenate(dirs) if dirs else np.zeros((0, 2))
        self.owner = owner
        self.claimed = np.zeros(len(self.points), bool)
        self.tree = cKDTree(self.points[:, :2]) if len(self.points) else None

    def _label(self, p: NDArrayFloat, d: NDArrayFloat) -> tuple[tuple[str, int] | None, int, bool]:
        if self.tree is None:
            return None, -1, False
        hits = [h for h in self.tree.query_ball_point(p[:2], MATCH_M) if not self.claimed[h]]
        if not hits:
            return None, -1, False
        h = min(hits, key=lambda i: float(np.linalg.norm(self.points[i, :2] - p[:2])))
        return self.owner[h], h, bool(self.dirs[h] @ d < 0)

    def marks(self, rail: NDArrayFloat, s_of: NDArrayFloat) -> list[RoadMark]:
        """Road marks along one rail.

        Args:
            rail: (N, 3) the rail, in the road's direction.
            s_of: (M,) road s of the rail's points every STEP_M (`rail_samples(rail)` projected onto the road).

        Returns:
            Marks with sOffset in road s, the first at 0.
        """
        pts, dirs = _resample(rail, STEP_M)
        labels = [self._label(p, d) for p, d in zip(pts, dirs)]
        runs: list[list[int]] = []
        for i, (lab, _, _) in enumerate(labels):
            if runs and labels[runs[-1][0]][0] == lab:
                runs[-1].append(i)
            else:
                runs.append([i])
        out: list[RoadMark] = []
        for run in runs:
            lab = labels[run[0]][0]
            if lab is not None and (len(run) - 1) * STEP_M < MIN_RUN_M:
                lab = None
            if lab is not None:
                for i in run:
                    self._claim(labels[i][1])
            mark = self._mark(lab, any(labels[i][2] for i in run))
            start = 0.0 if not out else float(s_of[run[0]])
            if out and (out[-1].type, out[-1].color, out[-1].line_length_m) == (mark.type, mark.color, mark.line_length_m):
                continue
            out.append(RoadMark(max(start, 0.0), mark.type, mark.color, line_length_m=mark.line_length_m))
        return out or [RoadMark(0.0, "none")]

    def _claim(self, h: int) -> None:
        if h < 0 or self.tree is None:
            return
        for j in self.tree.query_ball_point(self.points[h, :2], CLAIM_M):
            if self.owner[j] == self.owner[h]:
                self.claimed[j] = True

    def _mark(self, label: tuple[str, int] | None, against: bool) -> RoadMark:
        if label is None:
            return RoadMark(0.0, "none")
        kind, k = label
        if kind == "boundary":
            return RoadMark(0.0, "curb")
        colour, style = str(self.lines.color[k]), str(self.lines.style[k])
        mark_type = MARK_TYPES.get(style, "solid")
        if against:
            mark_type = _MIRROR.get(mark_type, mark_type)
        dash = SHORT_DASH_LINE_M[0] if style == "SHORT_DASHED_SINGLE" else None
        return RoadMark(0.0, mark_type, MARK_COLOURS.get(colour, "blue"), line_length_m=dash)

    def unmatched_m(self) -> dict[str, float]:
        """Length (m) of lane line and boundary no rail claimed."""
        kinds = np.array([o[0] for o in self.owner]) if self.owner else np.zeros(0, str)
        return {k: float(((~self.claimed) & (kinds == k)).sum() * _SAMPLE_M) for k in ("line", "boundary")}


def rail_samples(rail: NDArrayFloat) -> NDArrayFloat:
    """The points `MarkMatcher.marks` walks (to project them onto the road first)."""
    return _resample(rail, STEP_M)[0]
