"""The instants the report's detection and lane sections score: those both sides have.

A side's *instants* are the labelled frames its detector ran on, keyed `<clip>@<sample_token>`
(the sample token is the frame's timestamp in ns, so a 30 fps real clip and a 10 fps
generated clip of the same drive share every third instant). `avsim eval detect` records them
in `detect.json` (each clip's `instants`); for a side without one (tables written by other
tools) they are the frame keys of its detection and lane tables, so an instant where that side
output nothing is unknown to it. LET and the lane metrics are then computed on the instants
both sides have, ground truth included: a side is never charged misses on instants it was not
run on, and the paired frame bootstrap draws the same instants for both.

`avsim eval detect` also records, per clip, the cameras it was evaluated on and how many
labelled boxes no evaluated camera shows; `detect_notes` turns those into the report's lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.evaluation.lanes import LaneSet
from avsim.evaluation.let_ap import Boxes3D

DETECT_JSON = "detect.json"


def read_detect_json(folder: Path) -> dict[str, Any] | None:
    """`folder/detect.json` when `avsim eval detect` wrote one there (else None)."""
    from avsim.core.safe_json import read_json

    path = Path(folder) / DETECT_JSON
    if not path.is_file():
        return None
    doc = read_json(path, "detect")
    if not isinstance(doc, dict) or not isinstance(doc.get("clips"), list):
        raise AvsimInputError(path, "clips", "not an `avsim eval detect` record (expected a list of clips)")
    return doc


def _recorded(doc: dict[str, Any], path: Path) -> np.ndarray | None:
    keys: list[str] = []
    for i, clip in enumerate(doc["clips"]):
        if not isinstance(clip, dict) or "instants" not in clip:
            return None  # written before the instants were recorded
        if not isinstance(clip["instants"], list):
            raise AvsimInputError(path, f"clips[{i}].instants", "expected a list of sample tokens")
        keys += [f"{clip.get('clip')}@{t}" for t in clip["instants"]]
    return np.unique(np.asarray(keys, dtype=str))


@dataclass(frozen=True)
class SideInstants:
    """One side's instants (sorted, unique str keys) and where they were read from."""

    keys: np.ndarray
    source: str


def side_instants(folder: Path, boxes: Boxes3D | None, lanes: LaneSet | None) -> SideInstants:
    """A side's instants (module docstring).

    Args:
        folder: the side's folder.
        boxes: its detections (None: none).
        lanes: its lane outputs (None: none).

    Returns:
        The instants and their source.
    """
    doc = read_detect_json(folder)
    if doc is not None:
        keys = _recorded(doc, folder / DETECT_JSON)
        if keys is not None:
            return SideInstants(keys, f"{folder / DETECT_JSON}")
    parts = [np.asarray(x.frame).astype(str) for x in (boxes, lanes) if x is not None]
    keys = np.unique(np.concatenate(parts)) if parts else np.zeros(0, str)
    return SideInstants(keys, f"the frames of {folder}'s tables (a frame where it output nothing is not known)")


@dataclass(frozen=True)
class SharedInstants:
    """The instants both sides have, and how many each side has in all."""

    keys: np.ndarray
    real: SideInstants
    generated: SideInstants

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: counts and sources (the keys themselves are not repeated)."""
        return {"instants": len(self.keys), "real": len(self.real.keys), "generated": len(self.generated.keys),
                "real_source": self.real.source, "generated_source": self.generated.source}  # fmt: skip

    def warnings(self) -> list[str]:
        """What was left out, as the report's warning lines (none when the sides have the same instants)."""
        out = []
        for side, s in (("real", self.real), ("generated", self.generated)):
            extra = len(s.keys) - len(self.keys)
            if extra:
                out.append(f"{extra} of the {side} side's {len(s.keys)} instants are not on the other side and are not scored "
                           f"(LET and lanes use the {len(self.keys)} instants both sides have)")  # fmt: skip
        return out


def _clips(keys: np.ndarray) -> str:
    names = sorted({k.rsplit("@", 1)[0] for k in keys.tolist()})
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def shared_instants(real_dir: Path, gen_dir: Path, real: tuple[Boxes3D | None, LaneSet | None],
                    gen: tuple[Boxes3D | None, LaneSet | None]) -> SharedInstants:  # fmt: skip
    """The instants both sides have; a one-line refusal when they share none.

    Args:
        real_dir, gen_dir: the sides' folders.
        real, gen: each side's (detections, lane outputs).

    Returns:
        The shared instants.
    """
    a, b = side_instants(real_dir, *real), side_instants(gen_dir, *gen)
    keys = np.intersect1d(a.keys, b.keys)
    if not len(keys):
        raise AvsimInputError(gen_dir, "instants", f"no instant in common with {real_dir}: real has {len(a.keys)} of clip(s) "
                              f"{_clips(a.keys) or 'none'}, generated {len(b.keys)} of {_clips(b.keys) or 'none'} "
                              "(instants are <clip>@<timestamp>: the same clips, the same times)")  # fmt: skip
    return SharedInstants(keys, a, b)


def boxes_at(boxes: Boxes3D, keys: np.ndarray) -> Boxes3D:
    """The boxes whose frame is one of `keys` (str keys)."""
    keep = np.isin(np.asarray(boxes.frame).astype(str), keys)
    return Boxes3D(boxes.frame[keep], boxes.label[keep], boxes.boxes[keep], boxes.score[keep])


def lanes_at(lanes: LaneSet, keys: np.ndarray) -> LaneSet:
    """The lanes whose frame is one of `keys` (str keys)."""
    keep = np.isin(np.asarray(lanes.frame).astype(str), keys)
    pkeep = keep[lanes.lane_index]
    counts = np.diff(lanes.offsets)[keep]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    vis = None if lanes.visibility is None else lanes.visibility[pkeep]
    return LaneSet(lanes.frame[keep], lanes.category[keep], lanes.points_m[pkeep], offsets, vis)


def detect_notes(real_dir: Path, gen_dir: Path, ground_truth: Path | None) -> dict[str, Any]:
    """What `avsim eval detect` recorded that the report states: the ground-truth rule, how many labelled boxes
    no evaluated camera shows, and clips evaluated on different cameras by the two sides (a warning).

    Args:
        real_dir, gen_dir: the sides' folders.
        ground_truth: the `--gt` folder (its parent's detect.json describes it when it is `<side>/gt`).

    Returns:
        {"gt_visibility", "boxes", "boxes_seen_by_no_evaluated_camera", "cameras" (when the --gt folder is a side's
        `gt/`), "warnings": [...]}.
    """
    docs = {side: read_detect_json(d) for side, d in (("real", real_dir), ("generated", gen_dir))}
    out: dict[str, Any] = {"warnings": []}
    gt_doc = read_detect_json(ground_truth.parent) if ground_truth is not None and ground_truth.name == "gt" else None
    if gt_doc is not None:
        clips = [c for c in gt_doc["clips"] if isinstance(c, dict)]
        out |= {
            "gt_visibility": sorted({str(c.get("gt_visibility", "all")) for c in clips}),
            "boxes": int(gt_doc.get("gt_boxes", 0)), "boxes_seen_by_no_evaluated_camera": int(gt_doc.get("gt_boxes_unseen", 0)),
            "cameras": sorted({str(x) for c in clips for x in c.get("cameras", ())}),
        }  # fmt: skip
    if docs["real"] is not None and docs["generated"] is not None:
        cams = {side: {str(c.get("clip")): sorted(c.get("cameras") or ()) for c in d["clips"] if isinstance(c, dict)}
                for side, d in docs.items() if d is not None}  # fmt: skip
        for clip in sorted(set(cams["real"]) & set(cams["generated"])):
            if cams["real"][clip] != cams["generated"][clip]:
                out["warnings"].append(f"clip {clip}: the sides were detected on different cameras (real "
                                       f"{', '.join(cams['real'][clip])}; generated {', '.join(cams['generated'][clip])}): "
                                       "their ground truth and detections differ by more than the video")  # fmt: skip
    return out
