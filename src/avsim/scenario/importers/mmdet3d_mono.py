"""mmdetection3d nuScenes mono3d COCO files (``*_mono3d.coco.json``) as one-frame scenarios.

The file (read through `avsim.core.safe_json`) lists ``images`` (one per camera image:
``cam2ego_rotation``/``translation``, ``ego2global_rotation``/``translation`` as nuScenes
quaternions (w, x, y, z) and metres, ``cam_intrinsic``, ``width``/``height``, ``file_name``,
sample ``token``) and ``annotations`` (camera-frame ``bbox_cam3d``, its projected centre
``center2d`` (u, v, depth), the COCO 2-D ``bbox`` (x, y, w, h) of the projected corners
clipped to the image, ``category_name``).

- clip: one sample: the images of the first sample ``token`` (by capture time), or
  ``FILE::TOKEN``; capture times from the nuScenes file names (``..__<us>.jpg``) - the file
  has no timestamps - else the image order (1 us apart); the ego poses are the images'
  ``ego2global`` at those times; capture offsets are 0 (the file has no sample time);
- agents: every annotation is its own track (id ``<annotation id>``; one object seen by two
  cameras gives two tracks), moved to the world through ``cam2ego`` and ``ego2global`` as an
  upright box (see `mmdet3d_boxes.cam_boxes_to_world`); the sizes / angle convention of the file
  is the one of `mmdet3d_boxes.CAM_CONVENTIONS` whose projected corners best fit the unclipped
  2-D boxes (``metadata.box_convention``);
- reference labels: ``center2d`` and ``bbox`` (clipped when it touches the image border).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.names import check_name
from avsim.scenario.importers import mmdet3d_boxes as boxes
from avsim.scenario.importers.common import TrackBuilder, build_scenario, split_selector
from avsim.scenario.importers.mmdet3d import CameraFrame, floats, image_in_root, make_rig, merge_poses, need

if TYPE_CHECKING:
    from avsim.scenario.reference import ReferenceSource

_NAME_FIELD_SEP = "__"


def _capture_ns(file_name: str, fallback_ns: int) -> int:
    stem = Path(file_name).stem
    tail = stem.rsplit(_NAME_FIELD_SEP, 1)[-1]
    return int(tail) * 1000 if tail.isdigit() and _NAME_FIELD_SEP in stem else fallback_ns


def _camera_name(im: dict, k: int) -> str:
    name = str(im.get("file_name") or "")
    parent = Path(name).parent.name
    if parent.startswith("CAM"):
        return parent
    parts = Path(name).name.split("__")
    return parts[1] if len(parts) >= 3 else f"image_{k}"


def _pose(rec: dict, prefix: str, path: Path, where: str) -> Any:
    from avsim.core.transforms import SE3

    q = floats(need(rec, f"{prefix}_rotation", path, where), 4, path, f"{where}.{prefix}_rotation")
    t = floats(need(rec, f"{prefix}_translation", path, where), 3, path, f"{where}.{prefix}_translation")
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(t))):
        raise AvsimInputError(path, f"{where}.{prefix}_rotation", "expected a finite quaternion (w, x, y, z) and translation (3,)")
    if abs(np.linalg.norm(q) - 1.0) > 1e-3:
        raise AvsimInputError(path, f"{where}.{prefix}_rotation", f"non-unit quaternion (norm {np.linalg.norm(q):.4f})")
    return SE3.from_quat(q / np.linalg.norm(q), t)


def _frames(images: list[dict], root: Path, path: Path) -> dict[str, CameraFrame]:
    frames: dict[str, CameraFrame] = {}
    for k, im in enumerate(images):
        where = f"images[{k}]"
        K = boxes.as_matrix(need(im, "cam_intrinsic", path, where), path, f"{where}.cam_intrinsic", (3, 3))
        image = image_in_root(root, "", str(im.get("file_name") or ""))
        size, source = (boxes.image_size(image) if image else None), "image file header"
        if size is None and boxes.record_size(im, path, where) is not None:
            size, source = boxes.record_size(im, path, where), "image record width/height"
        if size is None:
            size, source = boxes.DEFAULT_IMAGE_SIZE_PX, "nuScenes default 1600x900"
        camera = check_name(_camera_name(im, k), path, f"{where}.file_name")  # a camera name: file names later
        if camera in frames:
            raise AvsimInputError(path, where, f"two images of camera {camera} in one sample")
        frames[camera] = CameraFrame(
            camera, _capture_ns(str(im.get("file_name") or ""), 1000 * k), K, _pose(im, "cam2ego", path, where),
            _pose(im, "ego2global", path, where), image, size, source,
        )  # fmt: skip
    times = [f.time_ns for f in frames.values()]
    if len(set(times)) != len(times):
        raise AvsimInputError(path, "images.file_name", "two images of the sample share a capture time")
    return frames


def _select(doc: dict, selector: str | None, path: Path) -> tuple[str, list[dict]]:
    images = need(doc, "images", path, "")
    if not isinstance(images, list) or not images or not all(isinstance(im, dict) for im in images):
        raise AvsimInputError(path, "images", "expected a non-empty list of image records")
    groups: dict[str, list[dict]] = {}
    for im in sorted(images, key=lambda im: _capture_ns(str(im.get("file_name") or ""), 0)):
        groups.setdefault(str(im.get("token", "")), []).append(im)
    token = selector if selector is not None else next(iter(groups))
    if token not in groups:
        raise AvsimInputError(path, "token", f"no sample token {token!r}; tokens: {', '.join(groups)}")
    return token, groups[token]


def _annotations(doc: dict, frames_by_id: dict[str, CameraFrame], path: Path) -> list[tuple[int, dict, CameraFrame]]:
    anns = need(doc, "annotations", path, "")
    if not isinstance(anns, list):
        raise AvsimInputError(path, "annotations", "expected a list")
    out = []
    for k, a in enumerate(anns):
        frame = frames_by_id.get(str(a.get("image_id"))) if isinstance(a, dict) else None
        if frame is None:
            continue
        b = floats(need(a, "bbox_cam3d", path, f"annotations[{k}]"), 7, path, f"annotations[{k}].bbox_cam3d")
        if not np.all(np.isfinite(b)):
            raise AvsimInputError(path, f"annotations[{k}].bbox_cam3d", "expected 7 finite numbers")
        out.append((k, a, frame))
    return out


def _coco_rect(a: dict, path: Path, k: int) -> np.ndarray:
    x, y, w, h = (float(v) for v in floats(need(a, "bbox", path, f"annotations[{k}]"), 4, path, f"annotations[{k}].bbox"))
    return np.array([x, y, x + w, y + h])


def _rect_error(anns: list[tuple[int, dict, CameraFrame]], convention: str, path: Path) -> float:
    errs = []
    for k, a, f in anns:
        rect = _coco_rect(a, path, k)
        if boxes.is_clipped(rect, *f.size_px):
            continue
        c, lwh, yaw = boxes.cam_boxes_to_world(np.asarray(a["bbox_cam3d"], dtype=np.float64)[None, :7], f.world_SE3_camera, convention)
        corners = f.world_SE3_camera.inverse().apply(boxes.corners_world(c, lwh, yaw)[0])
        errs.append(np.nanmax(np.abs(boxes.rect_of_projection(corners[None], f.K)[0] - rect)))
    return float(np.median(errs)) if errs else float("nan")


def mono3d_reference_source(src: str | os.PathLike[str], rig_name: str | None = None) -> ReferenceSource:
    """Import a mono3d .coco.json (``FILE`` or ``FILE::SAMPLE_TOKEN``) with its 2-D labels.

    Args:
        src: the .coco.json file, optionally with a sample-token selector.
        rig_name: replace the calibrated rig by a named default rig.

    Returns:
        `ReferenceSource`: one-frame scenario, ``center2d`` / ``bbox`` labels, images found.
    """
    from avsim.core.lights import TrafficLightStates
    from avsim.core.rig import named_rig
    from avsim.core.safe_json import read_json
    from avsim.core.transforms import yaw_to_quat
    from avsim.scenario.reference import ReferenceLabel, ReferenceSource

    path, selector = split_selector(src)
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise AvsimInputError(path, "json", "expected an object with images and annotations")
    token, images = _select(doc, selector, path)
    frames = _frames(images, path.parent, path)
    by_id = {str(im.get("id")): frames[_camera_name(im, k)] for k, im in enumerate(images)}
    anns = _annotations(doc, by_id, path)
    fits = {c: _rect_error(anns, c, path) for c in boxes.CAM_CONVENTIONS}
    convention = min(boxes.CAM_CONVENTIONS, key=lambda c: (np.nan_to_num(fits[c], nan=np.inf), boxes.CAM_CONVENTIONS.index(c)))
    tracks, labels = TrackBuilder(), []
    for k, a, f in anns:
        c, lwh, yaw = boxes.cam_boxes_to_world(np.asarray(a["bbox_cam3d"], dtype=np.float64)[None, :7], f.world_SE3_camera, convention)
        track_id = str(a.get("id", k))
        tracks.add(track_id, str(a.get("category_name", "ignore")), np.array([f.time_ns]), c, lwh, yaw_to_quat(yaw))
        rect = _coco_rect(a, path, k)
        centre = floats(a.get("center2d", [np.nan] * 2), 2, path, f"annotations[{k}].center2d")
        labels.append(ReferenceLabel(f.camera, f.time_ns, track_id, centre, rect, boxes.is_clipped(rect, *f.size_px)))
    ego_t, world_SE3_ego = merge_poses([(f.time_ns, f.world_SE3_ego) for f in frames.values()], path)
    rig = named_rig(rig_name) if rig_name else make_rig(list(frames.values()), {}, path)
    metadata = {
        "source_format": "mmdet3d",
        "mmdet3d_file": "mono3d coco json",
        "sample_token": token,
        "box_convention": convention,
        "box_convention_fit_px": {c: (None if np.isnan(v) else round(v, 4)) for c, v in fits.items()},
        "box_origin": "gravity centre",
        "track_ids": "<annotation id> (one track per camera annotation)",
        "capture_times": "from the file names (..__<us>.jpg)",
        "capture_offsets_ns": "0 (the file has no sample timestamp)",
        "image_size": "; ".join(sorted({f.size_source for f in frames.values()})),
        "map": boxes.PLACEHOLDER_NOTE,
        "rig": rig_name or "mmdet3d calibration (cam_intrinsic, cam2ego)",
    }
    scenario = build_scenario(
        path, scenario_id=token or path.stem, rig=rig, ego_timestamps_ns=ego_t, world_SE3_ego=world_SE3_ego,
        agents=tracks.build(path), hd_map=boxes.placeholder_map(world_SE3_ego.translation), lights=TrafficLightStates.empty(), metadata=metadata,
    )  # fmt: skip
    images_on_disk = {(f.camera, f.time_ns): f.image for f in frames.values() if f.image is not None}
    return ReferenceSource(scenario, tuple(labels), images_on_disk)
