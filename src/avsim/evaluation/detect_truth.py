"""Ground truth of a clip for `avsim eval detect`: the labelled boxes its evaluated cameras show,
and the lane camera's OpenLane lanes.

Boxes come from `labels/boxes3d.json` (or the compact `boxes3d.parquet`), kept by
`GtVisibility`: by default the boxes with at least one visible pixel in at least one evaluated
camera at that instant (the renderer's id buffer after occlusion, as the COCO annotations
record it: `coco/<camera>.json` or `annotations.parquet`). Visible pixels, not a lidar count,
because a rendered clip has no lidar and its id buffer says exactly what each camera shows;
the rule is the one Waymo's camera-only evaluation applies with its own sensors (keep an object
only when some camera sees it). The boxes of LET classes that no evaluated camera shows are
counted (`unseen`), not scored. Lanes are the lane camera's OpenLane files, with each point's
visibility (in that camera's image) kept: the metrics score only what the image shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.label_folders import labels_folder
from avsim.evaluation.clip_folders import clip_name, frame_key, lane_camera, read_index
from avsim.evaluation.detect_types import GtVisibility
from avsim.evaluation.lanes import LaneSet
from avsim.evaluation.let_ap import Boxes3D


@dataclass(frozen=True)
class ClipTruth:
    """A clip's ground truth for its evaluated cameras.

    boxes: the kept boxes (frames `<clip>@<sample_token>`); lanes: the lane camera's lanes (same
    keys, point visibility kept); labelled: boxes of LET classes in the labels; unseen: of those,
    the boxes no evaluated camera shows (left out); lane_camera: whose lanes these are.
    """

    boxes: Boxes3D
    lanes: LaneSet
    labelled: int
    unseen: int
    lane_camera: str


def _boxes_document(labels: Path) -> tuple[Path, dict[str, Any]]:
    from avsim.core.safe_json import read_json
    from avsim.render.labels import compact, standard

    if (labels / "boxes3d.json").is_file() or not compact.is_compact(labels):
        return labels / "boxes3d.json", read_json(labels / "boxes3d.json", "boxes3d")
    return labels / compact.BOXES3D, standard.boxes3d_document(labels)


def visible_tracks(labels: Path, cameras: tuple[str, ...]) -> set[tuple[int, str]]:
    """(frame index, track id) of every box with at least one visible pixel in one of `cameras`.

    Args:
        labels: the label folder.
        cameras: the cameras.

    Returns:
        The pairs, from the compact `annotations.parquet` or the COCO files (one annotation per visible box).
    """
    from avsim.core.safe_json import read_json
    from avsim.render.labels import compact

    if compact.is_compact(labels):
        import polars as pl

        from avsim.render.labels.compact_tables import read_table

        df = read_table(labels, compact.ANNOTATIONS, columns=["camera", "image_id", "track_id"])
        df = df.filter(pl.col("camera").cast(pl.String).is_in(list(cameras)))
        return set(zip(df["image_id"].to_list(), df["track_id"].cast(pl.String).to_list()))
    out: set[tuple[int, str]] = set()
    for cam in cameras:
        path = labels / "coco" / f"{cam}.json"
        if not path.is_file():
            raise AvsimInputError(path, "coco", "missing: --gt-visibility visible needs each camera's COCO annotations (or --gt-visibility in-view)")
        doc = read_json(path, "coco")
        anns = doc.get("annotations", []) if isinstance(doc, dict) else []
        out.update((int(a["image_id"]), str(a["track_id"])) for a in anns if isinstance(a, dict))
    return out


def _kept(doc: dict[str, Any], index: dict[str, Any], cameras: tuple[str, ...], visibility: GtVisibility,
          labels: Path) -> dict[str, list[dict[str, Any]]]:  # fmt: skip
    """Each sample's boxes that the rule keeps."""
    results = doc.get("results", {})
    if visibility is GtVisibility.ALL:
        return dict(results)
    frame_of = {str(f["sample_token"]): int(f["frame_index"]) for f in index["frames"]}
    if visibility is GtVisibility.IN_VIEW:
        return {t: [b for b in boxes if set(b.get("cameras") or ()) & set(cameras)] for t, boxes in results.items()}
    seen = visible_tracks(labels, cameras)
    return {t: [b for b in boxes if (frame_of.get(t, -1), str(b.get("track_id"))) in seen] for t, boxes in results.items()}


def clip_ground_truth(clip_dir: Path, cameras: tuple[str, ...] | None = None,
                      visibility: GtVisibility = GtVisibility.VISIBLE) -> ClipTruth:  # fmt: skip
    """A clip's ground truth for its evaluated cameras (module docstring), either label layout.

    Args:
        clip_dir: the clip folder.
        cameras: the evaluated cameras (default all of the clip's).
        visibility: which boxes count.

    Returns:
        The boxes, the lane camera's lanes and the counts.
    """
    from avsim.evaluation.detections import NUSCENES_TO_LET, read_nuscenes_submission
    from avsim.evaluation.lane_io import read_label_lanes

    index = read_index(clip_dir)
    cams = tuple(cameras) if cameras else tuple(str(c) for c in index["cameras"])
    name = clip_name(index, clip_dir)
    tokens = {str(f["sample_token"]): frame_key(name, str(f["sample_token"])) for f in index["frames"]}
    labels = labels_folder(clip_dir)
    path, doc = _boxes_document(labels)
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict):
        raise AvsimInputError(path, "results", "not a nuScenes detection results document")
    kept = _kept(doc, index, cams, GtVisibility(visibility), labels)
    boxes = read_nuscenes_submission(path, token_to_frame=tokens, doc={"results": kept})

    def let_boxes(results: dict[str, list[dict[str, Any]]]) -> int:
        return sum(1 for bs in results.values() for b in bs if isinstance(b, dict) and b.get("detection_name") in NUSCENES_TO_LET)

    labelled = let_boxes(doc["results"])
    lane_cam = lane_camera(clip_dir, cams) if index["frames"] else cams[0]
    lanes = read_label_lanes(labels, lane_cam, ground_truth=True)
    keys = np.array([tokens.get(str(k), frame_key(name, str(k))) for k in lanes.frame])
    lane_set = LaneSet(keys, lanes.category, lanes.points_m, lanes.offsets, lanes.visibility)
    return ClipTruth(boxes, lane_set, labelled, labelled - let_boxes(kept), lane_cam)


def visible_lanes(lanes: LaneSet) -> LaneSet:
    """Each lane cut to the points its camera's image shows (what a camera-only lane detector can report).

    Args:
        lanes: lanes with point visibility.

    Returns:
        The visible points of each lane; lanes with fewer than two left out.
    """
    assert lanes.visibility is not None  # LaneSet always sets it
    frames, pts, cats = [], [], []
    for i in range(len(lanes)):
        a, b = lanes.offsets[i], lanes.offsets[i + 1]
        p = lanes.points_m[a:b][lanes.visibility[a:b]]
        if len(p) >= 2:
            frames.append(lanes.frame[i])
            pts.append(p)
            cats.append(int(lanes.category[i]))
    return LaneSet.from_lists(frames, pts, cats) if pts else LaneSet.from_lists([], [], [])
