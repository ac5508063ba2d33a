"""The standard label files from a compact label folder: `avsim labels-convert` (docs/labels.md).

A compact folder (layout version 3) holds every number the standard files are written from
(float64 boxes in the world and ego frames, the COCO extras as the files hold them, the lane
lines and camera poses), so the standard files are rebuilt by the very writers `avsim labels
--label-files standard` uses, and are the same bytes:

- `openlane/<camera>/<frame>.json`: `openlane_documents` (`records.openlane_text` of the stored
  lane lines and poses);
- `coco/<camera>.json`: `coco_text` (the annotations' texts by `records.annotation_texts`, the
  document by `merge.coco_stream`);
- `boxes3d.json`: `boxes3d_text` (`merge.Boxes3DJson` of each frame's boxes rebuilt as `FrameBoxes3D`).

`coco_document` and `boxes3d_document` are those texts parsed (what `json.load` of the standard
files gives); `write_standard` writes the files and updates `index.json` to the layout a direct
write of both (or of the standard files alone) gives.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from avsim.core.errors import AvsimInputError
from avsim.core.transforms import SE3
from avsim.render.labels import compact
from avsim.render.labels.boxes import FrameBoxes3D
from avsim.render.labels.compact_tables import ANNOTATIONS, BOXES3D, CAMERA_POSES, read_table
from avsim.render.labels.merge import (
    LABEL_FILES,
    MERGE_BOXES_BLOCK_FRAMES,
    Boxes3DJson,
    LabelFiles,
    coco_stream,
    index_files,
)
from avsim.render.labels.records import (
    ANNOTATION_FLOATS,
    COCO_CATEGORIES,
    ImageAnnotations,
    annotation_texts,
    json_strings,
    openlane_text,
    write_json,
    write_json_files,
    write_text,
)

EXACT_LAYOUT_VERSION = 3  # the first compact layout that holds every number of the standard files
_FLOAT_SHAPES = {"center_camera_m": (3,), "size_lwh_m": (3,), "rotation_camera_wxyz": (4,), "center_px": (2,), "center_depth_m": (),
                 "corners_px": (8, 2), "box2d_full_px": (4,), "visible_fraction": (), "truncation": ()}  # fmt: skip


def _index(folder: Path) -> dict[str, Any]:
    if not compact.is_compact(folder):
        raise AvsimInputError(folder, "labels", "not a compact label folder (index.json and the compact tables)")
    index = compact.read_index(folder)
    version = int(index.get("layout_version") or 1)
    if version < EXACT_LAYOUT_VERSION:
        raise AvsimInputError(folder / "index.json", "layout_version", f"{version}: its tables hold float32 values and no world-frame "
                              f"boxes (layout {EXACT_LAYOUT_VERSION} holds them all); write the labels again with this avsim")  # fmt: skip
    return index


def openlane_documents(folder: Path, camera: str) -> Iterator[tuple[int, str]]:
    """The OpenLane files of one camera, rebuilt from a compact folder: their exact text (final newline included).

    Args:
        folder: the label folder.
        camera: the camera.

    Returns:
        (frame index, file text) in frame order.
    """
    index = compact.read_index(folder)
    cam = compact.camera_model(folder, index, camera)
    table, lines = compact.read_lane_lines(folder, index)
    poses = read_table(folder, CAMERA_POSES, index).filter(pl.col("camera").cast(pl.String) == camera)
    by_frame = dict(zip(poses["frame_index"].to_list(), poses["ego_SE3_camera"].to_numpy()))
    for f in index["frames"]:
        if f["frame_index"] not in by_frame:
            continue
        T = np.asarray(by_frame[f["frame_index"]], np.float64).reshape(3, 4)
        W = np.asarray(f["world_SE3_ego"], np.float64)
        text = openlane_text(table, lines, cam, SE3(T[:, :3], T[:, 3]), SE3(W[:3, :3], W[:3, 3]), f["timestamp_ns"])
        yield f["frame_index"], text + "\n"


def _heads(folder: Path, index: dict[str, Any], camera: str) -> list[dict[str, Any]]:
    """The camera's records in frame order: the frames it was labelled at (`camera_poses.parquet`)."""
    stamps = {f["frame_index"]: f["timestamp_ns"] for f in index["frames"]}
    poses = read_table(folder, CAMERA_POSES, index, columns=["camera", "frame_index"])
    frames = sorted(poses.filter(pl.col("camera").cast(pl.String) == camera)["frame_index"].to_list())
    return [{"frame_index": f, "timestamp_ns": stamps[f]} for f in frames]


def _image_annotations(rows: pl.DataFrame, size: tuple[int, int]) -> ImageAnnotations:
    """One image's annotations (its rows of `annotations.parquet`) as the COCO writer holds them before their floats are text."""
    w, h = size
    head = []
    for cat, (x, y, bw, bh), area, counts, tid, src in zip(rows["category_id"].to_list(), rows["bbox"].to_list(), rows["area"].to_list(),
                                                          rows["counts"].to_list(), json_strings(rows["track_id"].to_numpy()),
                                                          json_strings(rows["source_class"].cast(pl.String).to_numpy())):  # fmt: skip
        rle = counts.replace("\\", "\\\\")
        head.append(f'"category_id":{cat},"bbox":[{x},{y},{bw},{bh}],"area":{area},"iscrowd":0,"segmentation":{{"size":[{h},{w}],'
                    f'"counts":"{rle}"}},"track_id":{tid},"class":{json.dumps(COCO_CATEGORIES[cat - 1])},"source_class":{src}')  # fmt: skip
    counts_text = tuple(f'"visible_px":{v},"unoccluded_px":{u}' for v, u in zip(rows["visible_px"].to_list(), rows["unoccluded_px"].to_list()))
    floats = tuple(np.asarray(rows[k].to_numpy(), np.float64).reshape((len(rows), *_FLOAT_SHAPES[k])) for k in ANNOTATION_FLOATS)
    return ImageAnnotations(tuple(head), counts_text, floats)


def texts_by_frame(rows: pl.DataFrame, size: tuple[int, int]) -> dict[int, list[str]]:
    """The COCO annotation texts of one camera's `annotations.parquet` rows (in frame order), per frame.

    Args:
        rows: the camera's rows.
        size: its image (width, height) in pixels.

    Returns:
        Frame index -> its annotation texts (frames without rows left out).
    """
    if not len(rows):
        return {}
    starts = np.flatnonzero(np.r_[True, np.diff(rows["image_id"].to_numpy()) != 0])
    bounds = np.r_[starts, len(rows)]
    images = [_image_annotations(rows.slice(int(a), int(b - a)), size) for a, b in zip(bounds[:-1], bounds[1:])]
    return {int(rows["image_id"][int(a)]): t for a, t in zip(starts, annotation_texts(images))}


def _annotation_chunks(folder: Path, index: dict[str, Any], camera: str, size: tuple[int, int]) -> Iterator[list[dict[str, Any]]]:
    """The camera's records with their COCO annotation texts, in frame order (one chunk)."""
    df = read_table(folder, ANNOTATIONS, index).filter(pl.col("camera").cast(pl.String) == camera)
    if len(df):
        yield [{"frame_index": f, "annotations": t} for f, t in texts_by_frame(df, size).items()]


def _image_names(folder: Path, index: dict[str, Any], camera: str) -> dict[int, str]:
    """frame index -> `images/<camera>/<frame>.<ext>` (relative to the label folder) where `--images` wrote one."""
    if "images" not in index.get("files", {}):
        return {}
    out = {}
    for f in index["frames"]:
        hits = sorted((Path(folder) / "images" / camera).glob(f"{f['frame_index']:06d}.*"))
        if hits:
            out[f["frame_index"]] = f"images/{camera}/{hits[0].name}"
    return out


def coco_text(folder: Path, camera: str) -> str:
    """One camera's `coco/<camera>.json`, rebuilt from a compact folder (the file's exact text).

    Args:
        folder: the label folder.
        camera: the camera.

    Returns:
        The text.
    """
    index = _index(folder)
    video = {f["frame_index"]: (f["video_clip"], f["video_frame"]) for f in index["frames"]}
    if camera not in index.get("camera_sizes_px", {}):
        raise AvsimInputError(Path(folder) / "index.json", "camera_sizes_px", f"no size of camera {camera!r}")
    w, h = index["camera_sizes_px"][camera]
    size = (int(w), int(h))
    out = io.StringIO()
    coco_stream(out, camera, video, _heads(folder, index, camera), _annotation_chunks(folder, index, camera, size), size,
                _image_names(folder, index, camera))  # fmt: skip
    return out.getvalue()


def coco_document(folder: Path, camera: str) -> dict[str, Any]:
    """`coco_text` parsed: the COCO instances document of one camera."""
    doc = json.loads(coco_text(folder, camera))
    assert isinstance(doc, dict)
    return doc


def _frame_boxes(rows: pl.DataFrame, frame: dict[str, Any]) -> FrameBoxes3D:
    W = np.asarray(frame["world_SE3_ego"], np.float64)

    def col(name: str, n: int) -> np.ndarray:
        return np.asarray(rows[name].to_numpy(), np.float64).reshape(-1, n)

    return FrameBoxes3D(
        int(frame["timestamp_ns"]), SE3(W[:3, :3], W[:3, 3]), rows["track_id"].to_numpy().astype(str),
        rows["source_class"].cast(pl.String).to_numpy().astype(str), rows["class"].cast(pl.String).to_numpy().astype(str),
        col("center_world_m", 3), col("center_ego_m", 3), col("size_lwh_m", 3), col("rotation_world_wxyz", 4),
        col("rotation_ego_wxyz", 4), np.asarray(rows["yaw_ego_rad"].to_numpy(), np.float64), col("velocity_world_mps", 3),
        col("velocity_ego_mps", 3),
    )  # fmt: skip


def boxes3d_text(folder: Path) -> str:
    """`boxes3d.json`, rebuilt from a compact folder (the file's exact text).

    Args:
        folder: the label folder.

    Returns:
        The text.
    """
    index = _index(folder)
    df = read_table(folder, BOXES3D, index)
    by_frame = {k[0]: g for k, g in df.group_by("frame_index", maintain_order=True)}
    empty = df.clear()
    out = io.StringIO()
    writer = Boxes3DJson(out, tuple(index["cameras"]))
    frames = index["frames"]
    for j in range(0, len(frames), MERGE_BOXES_BLOCK_FRAMES):
        block = frames[j : j + MERGE_BOXES_BLOCK_FRAMES]
        rows = [by_frame.get(f["frame_index"], empty) for f in block]
        shown = [{str(t): [str(c) for c in cs] for t, cs in zip(r["track_id"].to_list(), r["cameras"].to_list())} for r in rows]
        writer.write([_frame_boxes(r, f) for r, f in zip(rows, block)], [f["sample_token"] for f in block],
                     [[str(a) for a in r["attribute_name"].cast(pl.String).to_list()] for r in rows], shown)  # fmt: skip
    writer.close()
    return out.getvalue()


def boxes3d_document(folder: Path) -> dict[str, Any]:
    """`boxes3d_text` parsed: the nuScenes results document of the clip (ego frame)."""
    doc = json.loads(boxes3d_text(folder))
    assert isinstance(doc, dict)
    return doc


def write_standard(folder: Path, layout: LabelFiles = "both", progress: Callable[[str], None] | None = None) -> list[Path]:
    """Write the standard files of a compact label folder beside its tables (`avsim labels-convert`).

    Args:
        folder: the label folder.
        layout: "both" (keep the compact tables) or "standard" (remove them once the standard files are written).
        progress: called with each file group's name as it is written.

    Returns:
        The files and folders written; index.json then says the layout, as a direct write of it would.
    """
    if layout not in ("both", "standard"):
        raise AvsimInputError("--layout", "layout", f"expected both or standard, got {layout!r} (of {', '.join(LABEL_FILES)})")
    folder = Path(folder)
    index = _index(folder)
    written: list[Path] = []
    for cam in index["cameras"]:
        write_text(folder / "coco" / f"{cam}.json", coco_text(folder, cam))
        docs = {f"{f:06d}.json": text[:-1] for f, text in openlane_documents(folder, cam)}  # (write_json_files adds the newline)
        write_json_files(folder / "openlane" / cam, docs)
        written += [folder / "coco" / f"{cam}.json", folder / "openlane" / cam]
        if progress is not None:
            progress(cam)
    write_text(folder / "boxes3d.json", boxes3d_text(folder))
    written.append(folder / "boxes3d.json")
    new = {**index, "layout": layout, "files": index_files(layout, "images" in index.get("files", {}))}
    write_json(folder / "index.json", new)
    if layout == "standard":
        for name in compact.COMPACT_FILES.values():
            (folder / name).unlink()
    return [*written, folder / "index.json"]
