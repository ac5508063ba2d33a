"""Labels remapped to the generated frames' pixels when the render was made at another size of the same aspect.

`avsim generate` reads each control frame and resamples it to the model size
(`video_io.resample`: bilinear, antialiased, `align_corners=False`). A label folder written at
the render's size is remapped by that same scaling, so its pixels index the generated frames:

- a point in the camera model's pixels (pixel (i, j) centred at (i, j): `center_px`,
  `corners_px`, `box2d_full_px`) moves to `(u + 0.5) * s - 0.5`;
- a COCO box in pixel edges (`bbox` = [x, y, w, h], pixel i covering [i, i + 1)) is scaled by
  `s`: the render's visible box, exactly (floats);
- a mask (`segmentation` / `counts`, COCO RLE) is resampled by the same filter and kept where
  it covers at least half a pixel; `visible_px` and `area` count its pixels, `unoccluded_px` is
  scaled by `s_x * s_y`;
- each camera model (`index.json` `camera_models`, OpenLane `camera_model` and `intrinsic`) is the
  camera that images the resampled frames: focal lengths and polynomial radii scaled by `s`
  (`Camera.resize`), the principal point moved as a point;
- `--images` frames are resampled (and written in their format);
- `index.json` gets the new sizes and `rescaled: {from_px, to_px, scale}` per camera.

3-D boxes, lanes and poses hold no pixels and are kept. Only sizes of exactly the same aspect are
remapped (`label_scale`); one scale factor then serves both axes. `PIXEL_FIELDS` and
`PIXEL_FREE_FIELDS` name every annotation field the labels writer emits; a field in neither is
refused (tests/test_labels_pairing.py checks both tables against a fresh render), so a new pixel
field cannot pass through unscaled.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from avsim.core.atomic import atomic_output_path
from avsim.core.cameras import camera_from_dict
from avsim.core.coco_rle import rle_decode, rle_encode
from avsim.core.errors import AvsimInputError
from avsim.core.safe_json import read_json
from avsim.models.video_io import resample

MASK_KEEP = 0.5  # a resampled mask pixel belongs to the object when at least half of it does
# annotation fields (COCO files and the compact `annotations.parquet`) and how they move
PIXEL_FIELDS: dict[str, str] = {
    "bbox": "edges", "center_px": "points", "corners_px": "points", "box2d_full_px": "points",
    "segmentation": "mask", "counts": "mask", "area": "mask_area", "visible_px": "mask_area", "unoccluded_px": "area",
}  # fmt: skip
PIXEL_FREE_FIELDS = frozenset({
    "id", "image_id", "category_id", "iscrowd", "track_id", "class", "source_class", "camera", "center_camera_m",
    "size_lwh_m", "rotation_camera_wxyz", "center_depth_m", "visible_fraction", "truncation",
})  # fmt: skip


@dataclass(frozen=True)
class LabelScale:
    """One camera's labelled size and the generated size (same aspect).

    Attributes:
        from_px: (width, height) of the labelled images.
        to_px: (width, height) of the generated frames.
    """

    from_px: tuple[int, int]
    to_px: tuple[int, int]

    @property
    def s(self) -> float:
        """The scale factor (both axes: the aspect is the same)."""
        return self.to_px[0] / self.from_px[0]

    def points(self, uv: np.ndarray) -> np.ndarray:
        """Camera-model pixels (centred at integers) of the labelled image -> of the generated frame."""
        return (np.asarray(uv, np.float64) + 0.5) * self.s - 0.5

    def record(self) -> dict[str, Any]:
        """`index.json["rescaled"][camera]`."""
        return {"from_px": list(self.from_px), "to_px": list(self.to_px), "scale": self.s}


def same_aspect(from_px: tuple[int, int], to_px: tuple[int, int]) -> bool:
    """Whether two (width, height) sizes have exactly the same aspect ratio (integer cross-product)."""
    return int(from_px[0]) * int(to_px[1]) == int(to_px[0]) * int(from_px[1])


def label_scale(from_px: tuple[int, int], to_px: tuple[int, int]) -> LabelScale | None:
    """The remap of labels of `from_px` images to `to_px` frames.

    Args:
        from_px: the labelled (width, height).
        to_px: the generated (width, height).

    Returns:
        None when the sizes are equal (nothing to remap).

    Raises:
        ValueError: the aspects differ (the labels cannot be remapped exactly).
    """
    if tuple(from_px) == tuple(to_px):
        return None
    if not same_aspect(from_px, to_px):
        raise ValueError(f"{from_px[0]}x{from_px[1]} and {to_px[0]}x{to_px[1]} differ in aspect")
    return LabelScale((int(from_px[0]), int(from_px[1])), (int(to_px[0]), int(to_px[1])))


# ---- one value at a time ------------------------------------------------------------------------------
def scale_camera_dict(camera: Mapping[str, Any], scale: LabelScale) -> dict[str, Any]:
    """A camera model dict (`Camera.to_dict`) of the labelled size -> the camera imaging the resampled frames."""
    cam = camera_from_dict(dict(camera))
    cx, cy = scale.points(np.array([cam.cx_px, cam.cy_px]))
    return dataclasses.replace(cam.resize(*scale.to_px), cx_px=float(cx), cy_px=float(cy)).to_dict()


def scale_intrinsic(k: Sequence[Sequence[float]], scale: LabelScale) -> list[list[float]]:
    """A 3x3 pinhole matrix of the labelled size -> of the generated frames (focal lengths scaled, principal point moved)."""
    m = np.array(k, np.float64)
    m[0, 0], m[1, 1], m[0, 1] = m[0, 0] * scale.s, m[1, 1] * scale.s, m[0, 1] * scale.s
    m[:2, 2] = scale.points(m[:2, 2])
    return m.tolist()


def scale_mask(size_hw: Sequence[int], counts: str, scale: LabelScale) -> tuple[dict[str, Any], int]:
    """A COCO RLE mask resampled as the frames are (`video_io.resample`), kept at `MASK_KEEP`.

    Returns:
        The new RLE record and its pixel count.
    """
    mask = rle_decode({"size": [int(size_hw[0]), int(size_hw[1])], "counts": counts})
    w, h = scale.to_px
    mask_t = torch.from_numpy(np.ascontiguousarray(mask, np.float32))[None, None]
    kept = (resample(mask_t, h, w)[0, 0] >= MASK_KEEP).numpy()
    return rle_encode(kept), int(kept.sum())


def _points(value: Any, scale: LabelScale, digits: int = 4) -> Any:
    """Nested lists of (x, y) pairs (or a flat [x0, y0, x1, y1, ...]) moved as points; None stays None."""
    if value is None:
        return None
    a = np.asarray(value, np.float64)
    flat = a.reshape(-1, 2)
    return np.round(scale.points(flat), digits).reshape(a.shape).tolist()


def scale_annotation(ann: Mapping[str, Any], scale: LabelScale, where: Path) -> dict[str, Any]:
    """One COCO annotation (or compact-table row) of the labelled size -> of the generated frames.

    Args:
        ann: the annotation's fields.
        scale: the camera's scale.
        where: the file (named in an error).

    Returns:
        The annotation with every pixel field remapped (module docstring).
    """
    unknown = [k for k in ann if k not in PIXEL_FIELDS and k not in PIXEL_FREE_FIELDS]
    if unknown:
        raise AvsimInputError(where, unknown[0], "a label field this avsim cannot remap to the generated size")
    out = dict(ann)
    mask = ann.get("segmentation") if isinstance(ann.get("segmentation"), dict) else None
    counts = mask["counts"] if mask is not None else ann.get("counts")
    if counts is not None:
        size_hw = mask["size"] if mask is not None else (scale.from_px[1], scale.from_px[0])
        rle, n = scale_mask(size_hw, str(counts), scale)
        if mask is not None:
            out["segmentation"] = rle
        else:
            out["counts"] = rle["counts"]
        out.update({k: n for k in ("area", "visible_px") if k in ann})
    if ann.get("bbox") is not None:
        out["bbox"] = [round(float(v) * scale.s, 4) for v in ann["bbox"]]
    for key in ("center_px", "corners_px", "box2d_full_px"):
        if key in ann:
            out[key] = _points(ann[key], scale)
    if ann.get("unoccluded_px") is not None:
        out["unoccluded_px"] = int(round(float(ann["unoccluded_px"]) * scale.s * scale.s))
    return out


# ---- a label folder ----------------------------------------------------------------------------------
def camera_scales(index: Mapping[str, Any], cameras: Sequence[str], to_px: tuple[int, int], where: Path) -> dict[str, LabelScale]:
    """Each generated camera's scale, from `index.json` (`camera_sizes_px`, else `width_px` / `height_px`).

    Args:
        index: the label folder's index document.
        cameras: the generated views.
        to_px: the generated (width, height).
        where: the index file (named in an error).

    Returns:
        camera -> scale, for the cameras whose labelled size differs from `to_px`.

    Raises:
        AvsimInputError: a camera's labels are of another aspect (nothing to remap them exactly).
    """
    raw_sizes = index.get("camera_sizes_px")
    sizes: dict[str, Any] = raw_sizes if isinstance(raw_sizes, dict) else {}
    out = {}
    for cam in cameras:
        size = sizes.get(cam) or [index.get("width_px"), index.get("height_px")]
        try:
            from_px = (int(size[0]), int(size[1]))
        except (TypeError, ValueError, IndexError):
            raise AvsimInputError(where, "camera_sizes_px", f"no image size for camera {cam}") from None
        try:
            scale = label_scale(from_px, to_px)
        except ValueError:
            w, h = to_px
            raise AvsimInputError(where, "width_px", f"labels of {from_px[0]}x{from_px[1]} {cam} images cannot index the generated "
                                  f"{w}x{h} frames: they are remapped only at the same aspect; render with --labels --size "
                                  f"{w}x{h} (or {2 * w}x{2 * h}, any {w}:{h} size), or generate from a folder without labels/") from None  # fmt: skip
        if scale is not None:
            out[cam] = scale
    return out


def rescale_label_folder(folder: Path, scales: Mapping[str, LabelScale]) -> None:
    """Remap a label folder written for the generated frames (`write_selected_labels`) in place.

    Args:
        folder: the generated clip's `labels/` (its own copy, not the control's).
        scales: camera -> scale (`camera_scales`).
    """
    if not scales:
        return
    index_path = folder / "index.json"
    index = read_json(index_path, "labels index")
    sizes = dict(index.get("camera_sizes_px") or {})
    models = dict(index.get("camera_models") or {})
    for cam, scale in scales.items():
        sizes[cam] = list(scale.to_px)
        if isinstance(models.get(cam), dict):
            models[cam] = scale_camera_dict(models[cam], scale)
    shared = {tuple(s.to_px) for s in scales.values()}
    whole = {"width_px": next(iter(shared))[0], "height_px": next(iter(shared))[1]} if len(shared) == 1 and len(scales) == len(sizes) else {}
    rescaled = {cam: s.record() for cam, s in scales.items()}
    _write_json(index_path, {**index, **whole, "camera_sizes_px": sizes, "camera_models": models, "rescaled": rescaled})
    for cam, scale in scales.items():
        _rescale_coco(folder / "coco" / f"{cam}.json", scale)
        for lane in sorted((folder / "openlane" / cam).glob("*.json")):
            _rescale_openlane(lane, scale)
        for image in sorted((folder / "images" / cam).glob("*")):
            _rescale_image(image, scale)
    _rescale_annotations_table(folder / "annotations.parquet", scales)


def _write_json(path: Path, doc: Any) -> None:
    with atomic_output_path(path) as tmp:
        tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")  # as the render writes them


def _rescale_coco(path: Path, scale: LabelScale) -> None:
    if not path.is_file():
        return
    doc = read_json(path, "labels coco")
    images = [{**im, "width": scale.to_px[0], "height": scale.to_px[1]} for im in doc.get("images", [])]
    annotations = [scale_annotation(a, scale, path) for a in doc.get("annotations", [])]
    _write_json(path, {**doc, "images": images, "annotations": annotations})


def _rescale_openlane(path: Path, scale: LabelScale) -> None:
    doc = read_json(path, "labels openlane")
    out = dict(doc)
    if isinstance(doc.get("intrinsic"), list):
        out["intrinsic"] = scale_intrinsic(doc["intrinsic"], scale)
    if isinstance(doc.get("camera_model"), dict):
        out["camera_model"] = scale_camera_dict(doc["camera_model"], scale)
    _write_json(path, out)


def _rescale_image(path: Path, scale: LabelScale) -> None:
    import cv2

    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise AvsimInputError(path, "image", "cannot decode")
    w, h = scale.to_px
    frame = torch.from_numpy(np.ascontiguousarray(bgr)).permute(2, 0, 1)[None]
    small = resample(frame, h, w).round().clamp(0, 255).to(torch.uint8)[0].permute(1, 2, 0).numpy()
    ok, buf = cv2.imencode(path.suffix, np.ascontiguousarray(small))
    if not ok:  # pragma: no cover - OpenCV encodes any uint8 image in its own formats
        raise AvsimInputError(path, "image", "cannot encode")
    with atomic_output_path(path) as tmp:
        tmp.write_bytes(buf.tobytes())


def _rescale_annotations_table(path: Path, scales: Mapping[str, LabelScale]) -> None:
    """The compact `annotations.parquet`: each row remapped by its camera's scale (its schema kept where it can be)."""
    if not path.is_file():
        return
    import polars as pl

    df = pl.read_parquet(path)
    rows = [scale_annotation(r, scales[r["camera"]], path) if r.get("camera") in scales else r for r in df.to_dicts()]
    schema = {name: (pl.List(pl.Float64) if name == "bbox" else dtype) for name, dtype in df.schema.items()}
    with atomic_output_path(path) as tmp:
        pl.DataFrame(rows, schema=schema, orient="row").write_parquet(tmp, compression="zstd")
