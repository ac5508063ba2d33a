"""Labels beside the generated videos (`avsim generate` from a control folder rendered with `--labels`).

`avsim render --labels` writes `CONTROL/<clip>/labels/` (docs/labels.md): `index.json` maps each
labelled frame (`frame_index`, `timestamp_ns`) to a video frame (`video_clip`, `video_frame`).
`avsim generate` reads its control at the model rate by time (`video_io.select_frames`: from a
30 fps render every third frame, from a 10 fps render every frame), so generated frame k is
control frame `source_frames[k]`. When the control clip has labels, the generated clip gets
them as `OUT/labels/`:

- **identical**: the generated clip has exactly the labelled video's frames (same rate, all
  frames, in order): `OUT/labels` is a relative symlink to the control render's `labels/`
  (a copy where the file system has no symlinks);
- **selected** (a higher-rate render): `OUT/labels/` is written with only the generated
  frames: `index.json` lists them with `video_frame` = the generated frame and `fps` = the
  model rate, and `source` = the control's rate and frames; `coco/<camera>.json` keeps those
  images (their `file_name` / `video_frame` now name the generated video) and their
  annotations; `boxes3d.json` keeps their samples; `openlane/<camera>/` their files (copied).
  Frame ids (`frame_index`, `sample_token`, `timestamp_ns`) are unchanged, so every label
  record is byte-for-byte the control's apart from those frame references.

Each selected frame is matched to its label by time: the label's `timestamp_ns` (relative to
the clip's first labelled frame) must equal the control video frame's presentation time to
within `TIME_TOLERANCE_NS`. The labels are in the pixels of the render: a render at the model's
size is used as it is; one at another size of the same aspect (224x128 for the 112x64 model)
is remapped to the model's pixels by the scaling the generator applies to its frames
(`avsim.models.labels_scaling`; the pairing is then "selected", written, never linked); another
aspect is refused. Everything is checked before any model is loaded (`check_pairing`, from
`index.json` and the control video's packets) and the frame count again before the output is
renamed into place (`place_labels`); a mismatch is a one-line input error. `index.json` is
read tolerantly: keys this module does not know (a layout version) are kept.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.label_folders import LABELS_FOLDER
from avsim.core.safe_json import read_json
from avsim.models.labels_scaling import LabelScale, camera_scales, rescale_label_folder

TIME_TOLERANCE_NS = 1_000_000  # 1 ms: a label and a video frame with times this close are the same frame


@dataclass(frozen=True)
class LabelsPairing:
    """Control labels that pair with a generated clip.

    folder: the control clip's `labels/` folder; video_clip: the clip id of the control video
    (`index.json["frames"][*]["video_clip"]`); source_frames: (T,) the control video frame of
    each generated frame; source_fps: the labels' rate; fps: the generated rate; width_px,
    height_px: the generated image size; identical: the generated clip has exactly the labelled
    video's frames at its size (the folder is linked, not rewritten); scales: camera -> the remap
    of labels made at another size of the same aspect (`avsim.models.labels_scaling`).
    """

    folder: Path
    video_clip: str
    source_frames: tuple[int, ...]
    source_fps: float
    fps: float
    width_px: int
    height_px: int
    identical: bool
    scales: Mapping[str, LabelScale] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.source_frames or self.fps <= 0 or self.source_fps <= 0 or self.width_px < 1 or self.height_px < 1:
            raise ValueError(f"invalid labels pairing {self}")

    @property
    def frames(self) -> int:
        """Frames of the generated clip (T)."""
        return len(self.source_frames)


def _index_frames(doc: Any) -> list[dict[str, Any]]:
    frames = doc.get("frames", []) if isinstance(doc, dict) else []
    return [f for f in frames if isinstance(f, dict)] if isinstance(frames, list) else []


def find_control_labels(control_dir: Path, clip: str) -> Path | None:
    """The `labels/` folder whose index lists frames of control video clip `clip`, or None.

    Args:
        control_dir: the folder given to `avsim generate`: an `avsim render` output
            (`<dir>/<clip>/labels`) or one clip folder of it (`<dir>/labels`).
        clip: the clip id `avsim generate` found (`<clip>` or `<clip>_<k>` with `--chunk`).

    Returns:
        The labels folder, or None when the render wrote no labels.
    """
    root = Path(control_dir)
    own = [root / LABELS_FOLDER / "index.json"] if (root / LABELS_FOLDER / "index.json").is_file() else []
    for index in [*own, *sorted(root.glob(f"*/{LABELS_FOLDER}/index.json"))]:
        if any(f.get("video_clip") == clip for f in _index_frames(read_json(index, "labels index"))):
            return index.parent
    return None


def _clip_frames(folder: Path, clip: str) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """(index document, video_frame -> frame record) of clip `clip` in `folder/index.json`."""
    path = folder / "index.json"
    doc = read_json(path, "labels index")
    mine: dict[int, dict[str, Any]] = {}
    for f in _index_frames(doc):
        if f.get("video_clip") != clip:
            continue
        try:
            mine[int(f["video_frame"])] = f
            int(f["timestamp_ns"])
        except (KeyError, TypeError, ValueError):
            raise AvsimInputError(path, "frames", f"a frame of {clip} lacks an integer video_frame or timestamp_ns") from None
    return doc, mine


def check_pairing(folder: Path, clip: str, source_frames: Sequence[int], source_times_s: np.ndarray,
                  fps: float, size: tuple[int, int], cameras: Sequence[str] | None = None) -> LabelsPairing:  # fmt: skip
    """Check that labels made for the control video index the generated clip, and say how.

    Args:
        folder: the control `labels/` folder (`find_control_labels`).
        clip: the control video's clip id.
        source_frames: (T,) the control video frame of each generated frame (`select_frames`).
        source_times_s: (N,) presentation times of the control video's frames (`frame_times_s`).
        fps: the generated rate (the model rate).
        size: the generated (width, height) in pixels.
        cameras: the generated views (default: every camera of the labels).

    Returns:
        The pairing (`identical` when the generated clip has every labelled frame, in order, at the
        labels' rate and size; `scales` for cameras labelled at another size of the same aspect).

    Raises:
        AvsimInputError: the labels are of another aspect, miss a selected frame, or their times
            disagree with the video's.
    """
    path = folder / "index.json"
    doc, mine = _clip_frames(folder, clip)
    views = list(cameras) if cameras is not None else [str(c) for c in doc.get("cameras", [])]
    scales = camera_scales(doc, views, (int(size[0]), int(size[1])), path)
    missing = [int(j) for j in source_frames if int(j) not in mine]
    if missing or 0 not in mine:
        first = missing[0] if missing else 0
        raise AvsimInputError(path, "frames", f"control video frame {first} of {clip} has no labels")
    first_ns = int(mine[0]["timestamp_ns"])
    for j in source_frames:
        label_ns = int(mine[int(j)]["timestamp_ns"]) - first_ns
        video_ns = round(float(source_times_s[int(j)]) * 1e9)
        if abs(label_ns - video_ns) > TIME_TOLERANCE_NS:
            raise AvsimInputError(path, "timestamp_ns", f"frame {j} of {clip}: the labels say t={label_ns / 1e9:.4f} s, the "
                                  f"video t={video_ns / 1e9:.4f} s: these labels are not of this video")  # fmt: skip
    source_fps = float(doc.get("fps", 0) or fps)
    same_frames = round(source_fps, 6) == round(float(fps), 6) and list(source_frames) == list(range(len(mine)))
    return LabelsPairing(folder, clip, tuple(int(j) for j in source_frames), source_fps, float(fps),
                         int(size[0]), int(size[1]), same_frames and not scales, scales)  # fmt: skip


def _link_or_copy(src: Path, link: Path, final_link: Path) -> str:
    """A relative symlink at `link` to `src` (relative to where `final_link` will be), else a copy."""
    target = os.path.relpath(src, final_link.parent.resolve())
    try:
        link.symlink_to(target, target_is_directory=src.is_dir())
        return "symlink"
    except OSError:  # no symlinks here (some Windows and network file systems): copy
        if src.is_dir():
            shutil.copytree(src, link)
        else:
            shutil.copyfile(src, link)
        return "copy"


def _write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")  # as the render writes them


def _selected_coco(src: Path, keep: dict[int, int], clip: str, camera: str) -> dict[str, Any]:
    """A COCO file of the control restricted to the images `keep` (frame_index -> generated frame), renamed to the generated video."""
    doc = read_json(src, "labels coco")
    if not isinstance(doc, dict):
        raise AvsimInputError(src, "coco", "expected a COCO object")
    images = []
    for image in doc.get("images", []):
        if isinstance(image, dict) and image.get("id") in keep:
            images.append({**image, "file_name": f"{clip}.{camera}.mp4", "video_frame": keep[int(image["id"])]})
    annotations = [a for a in doc.get("annotations", []) if isinstance(a, dict) and a.get("image_id") in keep]
    return {**doc, "images": images, "annotations": annotations}


def write_selected_labels(pairing: LabelsPairing, out: Path, cameras: Sequence[str]) -> None:
    """Write the labels of the generated frames only into the new folder `out` (module docstring, "selected").

    Args:
        pairing: the checked pairing (not `identical`).
        out: the labels folder to create.
        cameras: the generated views (labels of other cameras are left out).
    """
    src = pairing.folder
    doc, mine = _clip_frames(src, pairing.video_clip)
    frames = [{**mine[j], "video_frame": k} for k, j in enumerate(pairing.source_frames)]
    keep = {int(f["frame_index"]): k for k, f in enumerate(frames)}
    tokens = {str(f.get("sample_token", f["timestamp_ns"])) for f in frames}
    views = [c for c in doc.get("cameras", cameras) if c in cameras]
    source = {"fps": pairing.source_fps, "video_clip": pairing.video_clip, "video_frames": list(pairing.source_frames)}
    kept = {"openlane_cameras": [c for c in doc["openlane_cameras"] if c in views]} if isinstance(doc.get("openlane_cameras"), list) else {}
    _write_json(out / "index.json", {**doc, "fps": pairing.fps, "cameras": views, "frames": frames, "source": source, **kept})
    if (src / "boxes3d.json").is_file():
        boxes = read_json(src / "boxes3d.json", "labels boxes3d")
        results = boxes.get("results", {}) if isinstance(boxes, dict) else {}
        _write_json(out / "boxes3d.json", {**boxes, "results": {t: v for t, v in results.items() if t in tokens}})
    _write_selected_tables(src, out, keep, views)
    for camera in views:
        for frame_index in keep:  # `--images` frames: copied
            image = next(iter(sorted((src / "images" / camera).glob(f"{frame_index:06d}.*"))), None) if (src / "images").is_dir() else None
            if image is not None:
                (out / "images" / camera).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(image, out / "images" / camera / image.name)
        if (src / "coco" / f"{camera}.json").is_file():
            _write_json(out / "coco" / f"{camera}.json", _selected_coco(src / "coco" / f"{camera}.json", keep, pairing.video_clip, camera))
        for frame_index in keep:
            lane = src / "openlane" / camera / f"{frame_index:06d}.json"
            if lane.is_file():
                (out / "openlane" / camera).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(lane, out / "openlane" / camera / lane.name)


def _write_selected_tables(src: Path, out: Path, keep: dict[int, int], views: Sequence[str]) -> None:
    """The compact tables (`*.parquet`, docs/labels.md) cut to the kept frames and views; tables without a frame
    column (the lane lines, once per clip) are copied."""
    import polars as pl

    from avsim.core.safe_parquet import TableLimits, read_frame

    for table in sorted(src.glob("*.parquet")):
        df = read_frame(table, TableLimits(10_000_000, 1 << 30), root=src)  # bounded before decoding, inside the label folder
        key = next((c for c in ("frame_index", "image_id") if c in df.columns), None)
        if key is not None:
            df = df.filter(pl.col(key).is_in(sorted(keep)))
        if "camera" in df.columns:
            df = df.filter(pl.col("camera").cast(pl.String).is_in(list(views)))
        with atomic_output_path(out / table.name) as tmp:
            df.write_parquet(tmp, compression="zstd")


def place_labels(pairing: LabelsPairing, tmp_out: Path, final_out: Path, generated_frames: int,
                 cameras: Sequence[str]) -> dict[str, Any]:  # fmt: skip
    """Put the control labels of the generated frames beside the generated videos: `OUT/labels`.

    Args:
        pairing: the checked pairing.
        tmp_out: the temporary output folder being filled (renamed to `final_out` afterwards).
        final_out: the output folder (a symlink is relative to where it will be).
        generated_frames: frames of the generated videos (checked again against the labels).
        cameras: the generated views.

    Returns:
        The `settings.json["labels"]` record: folder, how it was placed, where from, the mapping.

    Raises:
        AvsimInputError: the generated videos do not have the paired frame count.
    """
    if generated_frames != pairing.frames:
        raise AvsimInputError(pairing.folder / "index.json", "frames",
                              f"generated {generated_frames} frames, the labels index {pairing.frames}")  # fmt: skip
    src = pairing.folder.resolve()
    link = Path(tmp_out) / LABELS_FOLDER
    if pairing.identical:
        how = _link_or_copy(src, link, Path(final_out).resolve() / LABELS_FOLDER)
        note = "each labels/index.json frame is frame video_frame of <video_clip>.<camera>.mp4 in this folder"
    else:
        write_selected_labels(pairing, link, cameras)
        rescale_label_folder(link, pairing.scales)
        how = "selected"
        note = ("labels/ holds the generated frames only: index.json frame k is frame video_frame = k of "
                "<video_clip>.<camera>.mp4 in this folder; index.json['source'] lists the control frames they came from")  # fmt: skip
        if pairing.scales:
            note += "; their pixels are remapped from the render's size to the generated one (index.json['rescaled'])"
    record = {
        "folder": LABELS_FOLDER, "placed_as": how, "control_labels": str(src), "control_clip": pairing.video_clip,
        "frame_mapping": "identical" if pairing.identical else "selected", "frames": pairing.frames, "fps": pairing.fps,
        "source_fps": pairing.source_fps, "source_frames": list(pairing.source_frames),
        "width_px": pairing.width_px, "height_px": pairing.height_px, "note": note,
    }  # fmt: skip
    return {**record, "rescaled": {c: s.record() for c, s in pairing.scales.items()}} if pairing.scales else record
