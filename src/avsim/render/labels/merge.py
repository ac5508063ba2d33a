"""A clip's label files from its camera-frame records, streamed: one segment's records in memory at a time.

`write_labels` writes `OUT/<clip>/labels/` (layout in docs/labels.md) from

- the *heads* of every record of the clip (`frame_index`, `camera`, `timestamp_ns`, `track_ids`:
  what the index, the COCO images and the boxes' "cameras" need), and
- a *chunk source*: per camera, its records with their annotation texts, a segment at a time in
  frame order (`labels_io.read_part` of each of its parts; the OpenLane files are written with
  the parts, `labels_run.write_segment`).

Each COCO file and `boxes3d.json` is written as it goes into its temporary file (renamed when
complete), so the writer's memory does not grow with the clip's length beyond the heads. The
bytes are those of one `json.dumps` of the whole documents. A compact folder (`ClipLabels.files`)
gets the parquet tables of `labels.compact` instead (or as well): the annotation rows were written by
the render workers as parquet parts while they rendered (`compact.write_annotations_part`) and are
only concatenated here; the boxes', lanes' and camera poses' rows are gathered for the whole clip
(columns of a few numbers per box).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.cameras import Camera
from avsim.core.names import join_names
from avsim.core.typing import NDArrayFloat
from avsim.render.labels import compact as compact_io
from avsim.render.labels.attributes import nuscenes_attributes, travelling_tracks
from avsim.render.labels.boxes import FrameBoxes3D, FrameBoxesCache
from avsim.render.labels.json_text import columns_json
from avsim.render.labels.records import (
    BOXES3D_CONVENTIONS,
    COCO_CATEGORIES,
    LABELS_FORMAT,
    LABELS_LAYOUT_VERSION,
    MERGE_BOXES_BLOCK_FRAMES,
    NUSCENES_META,
    NUSCENES_NAME,
    json_strings,
    openlane_counts_lanes,
    sample_token,
    write_json,
)
from avsim.scenario import Scenario

ChunkSource = Callable[[str], Iterable[list[dict[str, Any]]]]  # camera -> its records in frame order, a segment at a time
_COMPACT = (",", ":")


LabelFiles = Literal["compact", "standard", "both"]
LABEL_FILES: tuple[LabelFiles, ...] = ("compact", "standard", "both")
STANDARD_FILES = {"boxes3d": "boxes3d.json", "coco": "coco/<camera>.json", "openlane": "openlane/<camera>/<frame:06d>.json"}


@dataclass(frozen=True)
class ClipLabels:
    """What a clip's label files are written from (besides its records).

    cameras: in rig order; fps: render rate; video: frame index -> (video clip id, frame in it);
    camera_models: camera -> the camera at its image size; rig: the rig name; files: which
    layout (`compact` tables, `standard` files, or `both`); image_names: (camera, frame) -> an
    image file beside the labels (`--images`; the COCO files then name it), else empty.
    """

    cameras: tuple[str, ...]
    fps: float
    video: dict[int, tuple[str, int]]
    camera_models: dict[str, Camera]
    rig: str
    files: LabelFiles = "standard"
    image_names: dict[tuple[str, int], str] = field(default_factory=dict)


def write_labels(scenario: Scenario, folder: Path, heads: list[dict[str, Any]], chunks: ChunkSource, clip: ClipLabels,
                 annotation_parts: Callable[[str], list[Path]]) -> list[Path]:  # fmt: skip
    """Write a clip's label files (docs/labels.md): the standard files, the compact tables, or both.

    Args:
        scenario: the scenario.
        folder: `OUT/<clip>/labels`.
        heads: the head of every camera-frame record of the clip ("frame_index", "camera", "timestamp_ns",
            "track_ids", "ego_SE3_camera").
        chunks: each camera's records with their annotation texts, a segment at a time in frame order.
        clip: cameras, rate, videos, camera models, rig and layout.
        annotation_parts: each camera's compact annotation rows, as the workers wrote them a segment at a
            time (`compact.write_annotations_part`), in frame order (read for the compact tables only).

    Returns:
        The files written.
    """
    cameras = clip.cameras
    frames = sorted({h["frame_index"] for h in heads})
    stamps = {h["frame_index"]: h["timestamp_ns"] for h in heads}
    by_camera = {cam: sorted((h for h in heads if h["camera"] == cam), key=lambda h: h["frame_index"]) for cam in cameras}
    seen: dict[int, dict[str, list[str]]] = {f: {} for f in frames}
    standard, compact = clip.files in ("standard", "both"), clip.files in ("compact", "both")
    sizes = {c: (clip.camera_models[c].width_px, clip.camera_models[c].height_px) for c in cameras}
    written = []
    for cam in cameras:
        for h in by_camera[cam]:
            for tid in h["track_ids"]:
                seen[h["frame_index"]].setdefault(tid, []).append(cam)
        if standard or clip.image_names:  # images come with the COCO file that names them
            names = {f: clip.image_names[cam, f] for f in frames if (cam, f) in clip.image_names}
            _write_coco(join_names(folder, "coco", f"{cam}.json"), cam, clip.video, by_camera[cam], chunks(cam), sizes[cam], names)
            written += [folder / "coco" / f"{cam}.json"] + ([folder / "openlane" / cam] if standard else [])
    samples = _write_boxes3d(scenario, folder, frames, stamps, seen, clip, standard, compact)
    if compact:
        compact_io.write_annotations(folder / compact_io.ANNOTATIONS, [p for cam in cameras for p in annotation_parts(cam)])
        xy = np.array([np.asarray(s["world_SE3_ego"])[:2, 3] for s in samples]).reshape(-1, 2)
        compact_io.write_lanes(folder / compact_io.LANES, scenario, xy)
        compact_io.write_camera_poses(folder / compact_io.CAMERA_POSES, heads)
        written += [folder / name for name in compact_io.COMPACT_FILES.values()]
    shared = set(sizes.values())
    (width, height) = next(iter(shared)) if len(shared) == 1 else (None, None)  # the size every camera has (None: they differ)
    files = index_files(clip.files, bool(clip.image_names))
    index = {"format": LABELS_FORMAT, "layout_version": LABELS_LAYOUT_VERSION, "layout": clip.files, "scenario_id": scenario.scenario_id,
             "fps": clip.fps, "rig": clip.rig, "cameras": list(cameras), "width_px": width, "height_px": height,
             "camera_sizes_px": {c: list(sizes[c]) for c in cameras},
             "camera_models": {c: clip.camera_models[c].to_dict() for c in cameras}, "frames": samples, "files": files,
             "openlane_cameras": _openlane_cameras(cameras, by_camera), "conventions": BOXES3D_CONVENTIONS}  # fmt: skip
    write_json(folder / "index.json", index)
    return [*written, *([folder / "boxes3d.json"] if standard else []), folder / "index.json"]


def index_files(layout: LabelFiles, images: bool) -> dict[str, str]:
    """`index.json["files"]`: which files a label folder of `layout` has (with `--images`: the images and their COCO files)."""
    standard, compact = layout in ("standard", "both"), layout in ("compact", "both")
    return {**(STANDARD_FILES if standard else {}), **(compact_io.COMPACT_FILES if compact else {}),
            **({"coco": "coco/<camera>.json", "images": "images/<camera>/<frame:06d>.<ext>"} if images else {})}  # fmt: skip


def _openlane_cameras(cameras: tuple[str, ...], by_camera: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The cameras whose OpenLane lanes the evaluator can count (`records.openlane_counts_lanes` of each camera's first pose)."""
    out = []
    for cam in cameras:
        heads = by_camera.get(cam) or []
        if heads and openlane_counts_lanes(np.asarray(heads[0]["ego_SE3_camera"], np.float64)[:3, :3]):
            out.append(cam)
    return out


def _write_coco(path: Path, camera: str, video: dict[int, tuple[str, int]], heads: list[dict[str, Any]],
                chunks: Iterable[list[dict[str, Any]]], size: tuple[int, int], image_names: dict[int, str]) -> None:  # fmt: skip
    """One camera's COCO file (`coco_stream`), written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        coco_stream(out, camera, video, heads, chunks, size, image_names)


def coco_stream(out: IO[str], camera: str, video: dict[int, tuple[str, int]], heads: list[dict[str, Any]],
                chunks: Iterable[list[dict[str, Any]]], size: tuple[int, int], image_names: dict[int, str]) -> None:  # fmt: skip
    """One camera's COCO document (the text `json.dumps` writes, compact), its annotations streamed chunk by chunk.

    `file_name` is the frame's image file (relative to the label folder) where `image_names` has one,
    else its video (with `video_frame`).

    Args:
        out: where the text goes.
        camera: the camera.
        video: frame index -> (video clip, frame in it).
        heads: the camera's records in frame order ("frame_index", "timestamp_ns").
        chunks: its records with their annotation texts, a segment at a time.
        size: (width, height) of its images.
        image_names: frame index -> image file (`--images`).
    """
    images = []
    for h in heads:
        clip, vf = video[h["frame_index"]]
        image_id = int(h["frame_index"])
        images.append({"id": image_id, "file_name": image_names.get(image_id, f"{clip}.{camera}.mp4"), "video_frame": vf,
                       "frame_index": image_id, "timestamp_ns": h["timestamp_ns"], "width": size[0], "height": size[1]})  # fmt: skip
    info = {"format": "COCO instances (avsim labels)", "camera": camera}
    cats = [{"id": i + 1, "name": c} for i, c in enumerate(COCO_CATEGORIES)]
    out.write(f'{{"info":{json.dumps(info, separators=_COMPACT)},"images":{json.dumps(images, separators=_COMPACT)},"annotations":[')
    n_written = 0
    for chunk in chunks:
        n_written = _write_annotations(out, chunk, n_written)
    out.write(f'],"categories":{json.dumps(cats, separators=_COMPACT)}}}\n')


def _write_annotations(out: IO[str], records: list[dict[str, Any]], n_written: int) -> int:
    """Append the records' COCO annotations (ids running on from `n_written`); returns the new count."""
    for r in records:
        image_id = int(r["frame_index"])
        texts = [f'{{"id":{n_written + i},"image_id":{image_id},{a}' for i, a in enumerate(r["annotations"], 1)]
        if texts:
            out.write(("," if n_written else "") + ",".join(texts))
            n_written += len(texts)
    return n_written


class Boxes3DJson:
    """`boxes3d.json` written a block of frames at a time into an open file: the bytes of one `json.dumps` of the
    whole document (`{"meta": ..., "results": {token: [box, ...]}}`, compact separators).

    Args:
        out: the open text file.
        cameras: the clip's cameras (each box's "cameras" lists those that show it, in this order).
    """

    def __init__(self, out: IO[str], cameras: tuple[str, ...]) -> None:
        self.out, self.first = out, True
        self.name = {c: json.dumps(c) for c in cameras}  # a list of camera names as json.dumps writes it: "[" + texts + "]"
        out.write(f'{{"meta":{json.dumps(dict(NUSCENES_META), separators=_COMPACT)},"results":{{')

    def write(self, boxes: list[FrameBoxes3D], tokens: list[str], attributes: list[list[str]], shown_by: list[dict[str, list[str]]]) -> None:
        """Append a block of frames.

        Args:
            boxes: each frame's boxes.
            tokens: each frame's sample token.
            attributes: each frame's boxes' nuScenes attributes.
            shown_by: each frame's track id -> the cameras that show it.
        """
        for b, token, entries, seen in zip(boxes, tokens, _box3d_entries(boxes, tokens, attributes), shown_by):
            cams = ["[" + ",".join(self.name.get(c) or json.dumps(c) for c in seen.get(str(t), ())) + "]" for t in b.track_id.tolist()]
            body = ",".join(e + ',"cameras":' + c + "}" for e, c in zip(entries, cams))
            self.out.write(("" if self.first else ",") + json.dumps(token) + ":[" + body + "]")
            self.first = False

    def close(self) -> None:
        """End the document."""
        self.out.write("}}\n")


def _write_boxes3d(scenario: Scenario, folder: Path, frames: list[int], stamps: dict[int, int], seen: dict[int, dict[str, list[str]]],
                   clip: ClipLabels, standard: bool, compact: bool) -> list[dict[str, Any]]:  # fmt: skip
    """`boxes3d.json` (standard) and `boxes3d.parquet` (compact), MERGE_BOXES_BLOCK_FRAMES frames at a time; returns the index's frame entries."""
    samples, rows = [], []
    cache = FrameBoxesCache(scenario, MERGE_BOXES_BLOCK_FRAMES)  # this merge's own: one block of frames at a time
    travelling = travelling_tracks(scenario.agents)
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        out = stack.enter_context(open(stack.enter_context(atomic_output_path(folder / "boxes3d.json")), "w", encoding="utf-8")) if standard else None
        writer = Boxes3DJson(out, clip.cameras) if out is not None else None
        for j in range(0, len(frames), MERGE_BOXES_BLOCK_FRAMES):
            block = frames[j : j + MERGE_BOXES_BLOCK_FRAMES]
            times = np.asarray([stamps[f] for f in block], np.int64)
            boxes = [cache.at(stamps[f], times if k == 0 else None) for k, f in enumerate(block)]
            attrs = [nuscenes_attributes(b.object_class, b.track_id, b.velocity_world_mps, travelling) for b in boxes]
            if writer is not None:
                writer.write(boxes, [sample_token(stamps[f]) for f in block], attrs, [seen[f] for f in block])
            for f, b, a in zip(block, boxes, attrs):
                if compact:
                    rows.append(compact_io.boxes_rows(f, b, seen[f], a))
                samples.append(_sample(f, stamps[f], b, clip.video))
        if writer is not None:
            writer.close()
    if compact:
        compact_io.write_boxes3d(folder / compact_io.BOXES3D, rows)
    return samples


def _sample(frame: int, stamp_ns: int, boxes: FrameBoxes3D, video: dict[int, tuple[str, int]]) -> dict[str, Any]:
    """The index's entry of one frame: its time, sample token, video frame and ego pose (4x4)."""
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = boxes.world_SE3_ego.rotation, boxes.world_SE3_ego.translation
    return {"frame_index": frame, "timestamp_ns": stamp_ns, "sample_token": sample_token(stamp_ns), "video_clip": video[frame][0],
            "video_frame": video[frame][1], "world_SE3_ego": T.tolist()}  # fmt: skip


def _box3d_entries(frames: list[FrameBoxes3D], tokens: list[str], attributes: list[list[str]]) -> list[list[str]]:
    """The nuScenes-layout entries of every box of every frame as JSON text up to their "cameras" value.

    Built from the columns of all the frames at once (`labels_json.columns_json`, each value's
    text independent of the others): the bytes `json.dumps` writes of the entries' dicts, the
    closing `,"cameras":[..]}` left to the caller.
    """
    if not any(len(b.track_id) for b in frames):
        return [[] for _ in frames]

    def col(get: Any) -> NDArrayFloat:
        return np.concatenate([np.asarray(get(b), np.float64) for b in frames if len(b.track_id)])

    cols = columns_json([
        (col(lambda b: b.center_ego_m), 6), (col(lambda b: b.size_lwh_m[:, [1, 0, 2]]), 6), (col(lambda b: b.rotation_ego_wxyz), 9),
        (col(lambda b: b.velocity_ego_mps[:, :2]), 4), (col(lambda b: b.center_ego_m), 4), (col(lambda b: b.size_lwh_m), 4),
        (col(lambda b: b.yaw_ego_rad), 6), (col(lambda b: b.center_world_m), 4), (col(lambda b: b.rotation_world_wxyz), 6),
        (col(lambda b: b.velocity_ego_mps), 4), (col(lambda b: b.velocity_world_mps), 4)])  # fmt: skip
    out, at = [], 0
    for boxes, token, attrs in zip(frames, tokens, attributes):
        tok = json.dumps(token)
        attr = json_strings(np.asarray(attrs, dtype=str))
        names = json_strings(np.array([NUSCENES_NAME.get(str(c), "barrier") for c in boxes.object_class.tolist()]))
        entries = []
        strings = zip(*(json_strings(a) for a in (boxes.track_id, boxes.object_class, boxes.source_class)))
        for j, (tid, cls, src) in enumerate(strings, at):
            c = [cl[j] for cl in cols]
            entries.append(f'{{"sample_token":{tok},"translation":{c[0]},"size":{c[1]},"rotation":{c[2]},"velocity":{c[3]},'
                           f'"detection_name":{names[j - at]},"detection_score":1.0,"attribute_name":{attr[j - at]},"track_id":{tid},'
                           f'"class":{cls},"source_class":{src},"center_ego_m":{c[4]},"size_lwh_m":{c[5]},"yaw_ego_rad":{c[6]},'
                           f'"center_world_m":{c[7]},"rotation_world_wxyz":{c[8]},"velocity_ego_mps":{c[9]},'
                           f'"velocity_world_mps":{c[10]}')  # fmt: skip
        out.append(entries)
        at += len(boxes.track_id)
    return out
