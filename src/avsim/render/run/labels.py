"""Labels in the render pass (`avsim render --labels`) and on their own (`avsim labels`).

With `--labels` each render segment rasterises its frames with the per-pixel object id
(numba kernels, whatever `--backend` says; the colours are byte-identical), computes its
camera-frame records and keeps them as `OUT/<clip>/labels/.parts/<camera>.<start>.json` (and, for
the compact tables, its annotation rows as `<camera>.<start>.annotations.parquet` beside it, built
from the records' arrays; the part then holds the COCO annotation texts only where COCO files are asked for);
once every segment is done the clip's label files are written from the parts, one part in
memory at a time (`labels_merge.write_labels`), and the parts dropped. `avsim labels` computes
the same records and parts without encoding any video.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from avsim.core import label_folders
from avsim.core.atomic import atomic_output_path, output_errors, removed_if_empty_on_error
from avsim.core.locks import output_lock
from avsim.core.names import join_names
from avsim.core.typing import NDArrayByte, NDArrayInt32
from avsim.render.geometry.scene import SceneRenderer
from avsim.render.labels import compact as compact_io
from avsim.render.labels import merge as labels_merge
from avsim.render.labels import records as labels_io
from avsim.render.labels import standard as labels_standard
from avsim.render.labels.boxes import FrameBoxesCache
from avsim.render.run import units, writer
from avsim.render.run.plan import RenderOptions, RenderPlan
from avsim.render.run.units import StreamSegment

if TYPE_CHECKING:
    from avsim.scenario import Scenario

BOXES_BLOCK_FRAMES = 64  # frames whose agents are resampled together


def labels_folder(out: Path, clip_id: str) -> Path:
    """`OUT/<clip>/labels`, beside the clip's control videos.

    Args:
        out: the render output folder.
        clip_id: the file-safe clip name (without chunk suffix).

    Returns:
        The folder.
    """
    return label_folders.labels_folder(Path(out) / clip_id)


def part_path(out: Path, clip_id: str, segment: StreamSegment) -> Path:
    """The label part file of one camera stream's render segment.

    Args:
        out: the render output folder.
        clip_id: the clip name (without chunk suffix).
        segment: the segment (of a camera stream).

    Returns:
        `OUT/<clip>/labels/.parts/<camera>.<start:06d>.json`.
    """
    return _part_in(labels_folder(out, clip_id), segment.stream.camera, segment.start)


def _part_in(folder: Path, camera: str, start: int) -> Path:
    """`folder/.parts/<camera>.<start:06d>.json`: the part of one camera's frames from `start`."""
    return join_names(folder, ".parts", f"{camera}.{start:06d}.json")


def annotations_part(part: Path) -> Path:
    """The compact annotation rows of a part (`<camera>.<start:06d>.annotations.parquet` beside it).

    Args:
        part: the part file (`part_path`).

    Returns:
        The parquet part the segment's worker writes when the layout has the compact tables.
    """
    return part.with_name(part.name.removesuffix(".json") + ".annotations.parquet")


def labels_done(opts: RenderOptions, clip_id: str) -> bool:
    """Whether `OUT/<clip>/labels` holds the labels `opts` asks for: merged, in this layout version, with the
    asked-for files (`label_files`, images or not). A folder of another layout or version is rewritten.

    Args:
        opts: the render options.
        clip_id: the clip name.

    Returns:
        True when nothing is left to write.
    """
    index = labels_folder(opts.out, clip_id) / "index.json"
    try:
        doc = json.loads(index.read_text(encoding="utf-8")) if index.is_file() else None
    except (OSError, ValueError):
        doc = None
    if not isinstance(doc, dict):
        return False
    return (doc.get("layout_version") == labels_io.LABELS_LAYOUT_VERSION and doc.get("layout") == opts.label_files
            and ("images" in doc.get("files", {})) == (opts.label_images is not None))  # fmt: skip


def image_name(camera: str, frame_index: int, image_format: str) -> str:
    """`images/<camera>/<frame:06d>.<ext>`: a frame's image file, relative to the label folder (COCO `file_name`).

    Args:
        camera: the camera.
        frame_index: frame at the render rate.
        image_format: "jpg" or "png".

    Returns:
        The relative path.
    """
    return f"images/{camera}/{int(frame_index):06d}.{image_format}"


def write_segment(part: Path, camera: str, records: list[dict[str, Any]], compact: bool = False, texts: bool = True) -> None:
    """One camera segment's labels: its OpenLane files and images (final per camera-frame files, written straight
    to `labels/openlane/<camera>/` and `labels/images/<camera>/`), its compact annotation rows (a parquet part the
    merge concatenates) and the rest of its records as the part file (written last: it marks the segment done).

    Args:
        part: the part file (`<label folder>/.parts/...`).
        camera: the camera.
        records: its camera-frame records in frame order ("openlane" and "image" are taken out of them).
        compact: also write the segment's `annotations.parquet` rows (`annotations_part`).
        texts: keep the annotations' COCO texts in the part (for COCO files); False needs `compact` (the merge
            then makes any texts it needs from the rows).
    """
    folder = part.parent.parent
    lanes = {labels_io.openlane_path(folder, camera, r["frame_index"]).name: r.pop("openlane") for r in records}
    images = {Path(name).name: data for name, data in (r.pop("image", None) or ("", b"") for r in records) if name}
    if any(lanes.values()):  # the standard files asked for
        labels_io.write_json_files(join_names(folder, "openlane", camera), lanes)
    if images:
        labels_io.write_json_files(join_names(folder, "images", camera), images)
    if compact:  # from the annotations' values (no JSON text read back)
        compact_io.write_annotations_part(annotations_part(part), camera, records)
    labels_io.write_part(part, records, texts or not compact)


@dataclass(frozen=True)
class ImageBuffers:
    """Scratch buffers of one image size, reused over many camera-frames: the (H, W) int32 id buffer and the coverage pass's (H, W) uint8 mask."""

    ids: NDArrayInt32
    mask: NDArrayByte

    @classmethod
    def of_size(cls, width_px: int, height_px: int) -> ImageBuffers:
        """New buffers for images of this size.

        Args:
            width_px: image width.
            height_px: image height.

        Returns:
            The buffers (the mask zeroed).
        """
        return cls(np.empty((height_px, width_px), np.int32), np.zeros((height_px, width_px), np.uint8))


@dataclass(frozen=True)
class Labeller:
    """What labels one renderer's camera-frames: the renderer and the 3-D boxes of its frames.

    The boxes of a frame are shared by every camera of the frame; `boxes` keeps them, for this
    renderer's scenario only (made once per renderer: a render worker's, or `avsim labels`').
    """

    renderer: SceneRenderer
    boxes: FrameBoxesCache
    openlane: bool = True  # compute the OpenLane documents (the standard files); a compact folder stores the lanes once
    compact: bool = False  # write each segment's compact annotation rows beside its part (the compact tables asked for)
    image_format: str | None = None  # also keep each frame as a jpg / png file beside the labels

    @property
    def coco_texts(self) -> bool:
        """Whether the parts keep the COCO annotation texts: COCO files asked for (the standard files, or images, which the COCO files name)."""
        return self.openlane or self.image_format is not None or not self.compact

    @classmethod
    def of(cls, renderer: SceneRenderer, files: str = "standard", image_format: str | None = None) -> Labeller:
        """A labeller of `renderer`'s frames with an empty box cache.

        Args:
            renderer: the scene renderer.
            files: the label layout ("compact", "standard", "both").
            image_format: "jpg" / "png" to keep the frames as image files, or None.

        Returns:
            The labeller.
        """
        return cls(renderer, FrameBoxesCache(renderer.scenario), files != "compact", files != "standard", image_format)


def frame_record(
    labeller: Labeller, frame_index: int, camera_index: int, buffers: ImageBuffers | None = None
) -> tuple[NDArrayByte, dict[str, Any]]:
    """One camera image and its labels, from one rasterisation with object ids.

    Args:
        labeller: the renderer and its frames' boxes.
        frame_index: frame at the render rate.
        camera_index: index into the renderer's rig.
        buffers: optional scratch buffers of the camera's image size (None: new ones).

    Returns:
        (H, W, 3) uint8 RGB (as `render_camera` with the numba backend) and the camera-frame record
        (with "image": (its file name, encoded bytes) when the labeller keeps images).
    """
    renderer = labeller.renderer
    img, ids, prims, id_stats = renderer.render_camera_id_stats(frame_index, camera_index, None if buffers is None else buffers.ids)
    block = renderer.timestamps_ns[frame_index : frame_index + BOXES_BLOCK_FRAMES]  # one resampling per block
    boxes = labeller.boxes.at(int(renderer.timestamps_ns[frame_index]), block)
    rig = renderer.rig
    ego_SE3_camera = rig.ego_SE3_camera[camera_index]
    if rig.has_capture_offsets:  # the camera at its capture time, in the ego frame of the frame time
        ego_SE3_camera = boxes.world_SE3_ego.inverse().compose(renderer.world_SE3_camera(frame_index, camera_index))
    rec = labels_io.camera_frame_record(
        renderer.scenario, boxes, renderer.box_track_ids(frame_index), rig.names[camera_index], rig.cameras[camera_index],
        ego_SE3_camera, frame_index, ids, prims, renderer.rays(camera_index), id_stats, None if buffers is None else buffers.mask,
        labeller.openlane,
    )  # fmt: skip
    if labeller.image_format is not None:
        rec["image"] = (image_name(rig.names[camera_index], frame_index, labeller.image_format), labels_io.encode_image(img, labeller.image_format))
    return img, rec


def labelled_frames(labeller: Labeller, segment: StreamSegment, part: Path) -> Iterator[NDArrayByte]:
    """The segment's images; once the last is taken, its records are written to `part`.

    The OpenLane documents are final per camera-frame files: they are written straight to
    `labels/openlane/<camera>/` (one JSON encoding), the rest of the record goes to the part.

    Args:
        labeller: the renderer and its frames' boxes.
        segment: the render segment.
        part: its label part file.

    Returns:
        An iterator of (H, W, 3) uint8 RGB frames.
    """
    rig = labeller.renderer.rig
    i = rig.index(segment.stream.camera)
    records = []
    cam = rig.cameras[i]
    buffers = ImageBuffers.of_size(cam.width_px, cam.height_px)
    for f in range(segment.start, segment.stop):
        img, rec = frame_record(labeller, f, i, buffers)
        records.append(rec)
        yield img
    write_segment(part, segment.stream.camera, records, labeller.compact, labeller.coco_texts)


def video_map(clip_id: str, first: int, stop: int, chunk_frames: int) -> dict[int, tuple[str, int]]:
    """Frame index -> (video clip id, frame within that video) of a render.

    Args:
        clip_id: the clip name.
        first: first rendered frame.
        stop: one past the last.
        chunk_frames: `--chunk` (0: one video).

    Returns:
        The mapping.
    """
    ranges = writer.chunk_ranges(stop - first, chunk_frames)
    out = {}
    for k, (a, b) in enumerate(ranges):
        cid = writer.chunk_clip_id(clip_id, k, len(ranges))
        for j in range(a, b):
            out[first + j] = (cid, j - a)
    return out


def merge_parts(scenario: Scenario, opts: RenderOptions, plan: RenderPlan, segments: list[StreamSegment]) -> list[Path]:
    """Write the clip's label files from its camera segments' parts, then drop the parts.

    Args:
        scenario: the scenario.
        opts: the render options.
        plan: the resolved plan.
        segments: every camera segment of the clip.

    Returns:
        The label files written.
    """
    folder = labels_folder(opts.out, plan.clip_id)
    parts = [(s.stream.camera, part_path(opts.out, plan.clip_id, s)) for s in sorted(segments, key=lambda s: s.start)]
    return write_from_parts(scenario, opts, plan, folder, parts)


def write_from_parts(scenario: Scenario, opts: RenderOptions, plan: RenderPlan, folder: Path, parts: list[tuple[str, Path]]) -> list[Path]:
    """Write the label files into `folder` from part files, one part in memory at a time, then drop the parts.

    Args:
        scenario: the scenario.
        opts: the render options (rig name, chunking).
        plan: the resolved plan.
        folder: the label folder.
        parts: (camera, part file) in frame order.

    Returns:
        The label files written.
    """
    video = video_map(plan.clip_id, plan.first, plan.stop, opts.chunk_frames)
    heads = [h for _, p in parts for h in labels_io.read_part_heads(p)]

    rig = plan.rig.subset(list(plan.cameras)).resize_each(plan.sizes_px)
    sizes = {name: (cam.width_px, cam.height_px) for name, cam in zip(rig.names, rig.cameras)}

    def chunks(camera: str) -> Iterator[list[dict[str, Any]]]:
        return (_with_texts(labels_io.read_part(p), annotations_part(p), sizes[camera]) for cam, p in parts if cam == camera)

    names = {(h["camera"], h["frame_index"]): image_name(h["camera"], h["frame_index"], opts.label_images)
             for h in heads} if opts.label_images else {}  # fmt: skip
    clip = labels_merge.ClipLabels(plan.cameras, plan.fps, video, dict(zip(rig.names, rig.cameras)), opts.rig, opts.label_files, names)
    def annotations(camera: str) -> list[Path]:  # a part without its rows (written for --label-files standard, resumed as compact) gets them now
        out = [annotations_part(p) for cam, p in parts if cam == camera]
        for rows, (_, p) in zip(out, [(c, p) for c, p in parts if c == camera]):
            if not rows.is_file():
                compact_io.write_annotations_part(rows, camera, labels_io.read_part(p))
        return out

    written = labels_merge.write_labels(scenario, folder, heads, chunks, clip, annotations)
    for _, p in parts:
        annotations_part(p).unlink(missing_ok=True)
        p.unlink(missing_ok=True)
    (folder / ".parts").rmdir() if (folder / ".parts").is_dir() and not any((folder / ".parts").iterdir()) else None
    return written


def _with_texts(records: list[dict[str, Any]], rows: Path, size: tuple[int, int]) -> list[dict[str, Any]]:
    """A part's records with their COCO annotation texts: made from the segment's compact rows where the part
    was written without them (only the compact tables asked for, resumed with COCO files)."""
    if all(r["annotations"] is not None for r in records):
        return records
    texts = labels_standard.texts_by_frame(pl.read_parquet(rows), size)
    return [{**r, "annotations": texts.get(r["frame_index"], [])} for r in records]


def run_labels(scenario: Scenario, opts: RenderOptions, progress: Callable[[int], None] | None = None) -> Path:
    """`avsim labels`: the labels of the frames and cameras `avsim render` with `opts` would draw.

    Nothing is encoded; the label folder `OUT/<clip>/labels` is written as a whole (atomic), by
    one process at a time (the `OUT/<clip>` writer lock, as `avsim render`; `opts.wait` waits).

    Args:
        scenario: the scenario.
        opts: render options (cameras, frames, fps, size, rig).
        progress: called with 1 per finished camera-frame.

    Returns:
        The label folder.
    """
    plan = RenderPlan.resolve(scenario, opts)
    folder = labels_folder(opts.out, plan.clip_id)
    renderer = SceneRenderer(scenario, rig=plan.rig, cameras=plan.cameras, sizes=plan.sizes_px, fps=plan.fps, antialias=opts.antialias)
    with removed_if_empty_on_error(opts.out), output_errors(opts.out), output_lock(folder.parent, wait=opts.wait), \
            atomic_output_path(folder, is_dir=True) as tmp:
        parts = _label_parts(Labeller.of(renderer, opts.label_files, opts.label_images), Path(tmp), plan.first, plan.stop, progress)
        write_from_parts(scenario, opts, plan, Path(tmp), parts)
    return folder


def _label_parts(labeller: Labeller, folder: Path, first: int, stop: int,
                 progress: Callable[[int], None] | None) -> list[tuple[str, Path]]:  # fmt: skip
    """Every camera's records of frames [first, stop) as part files under `folder/.parts`, a render
    segment's frames (`units.SEGMENT_FRAMES`) at a time, and its OpenLane files; returns (camera, part) in frame order."""
    cameras = labeller.renderer.rig.names
    buffers = {(c.width_px, c.height_px): ImageBuffers.of_size(c.width_px, c.height_px) for c in labeller.renderer.rig.cameras}
    parts: list[tuple[str, Path]] = []
    for start in range(first, stop, units.SEGMENT_FRAMES):
        end = min(stop, start + units.SEGMENT_FRAMES)
        records: dict[str, list[dict[str, Any]]] = {c: [] for c in cameras}
        for f in range(start, end):
            for i, c in enumerate(cameras):
                cam = labeller.renderer.rig.cameras[i]
                records[c].append(frame_record(labeller, f, i, buffers[cam.width_px, cam.height_px])[1])
                if progress is not None:
                    progress(1)
        for c in cameras:
            parts.append((c, _part_in(folder, c, start)))
            write_segment(parts[-1][1], c, records[c], labeller.compact, labeller.coco_texts)
    return parts
