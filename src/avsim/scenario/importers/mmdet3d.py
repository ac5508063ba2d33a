"""mmdetection3d nuScenes info files (info_version 1.1 ``metainfo`` + ``data_list``).

Source: an info ``.pkl`` (read by the restricted unpickler), ``FILE.pkl::LOG`` to pick one log,
a mono3d ``.coco.json`` (`avsim.scenario.importers.mmdet3d_mono`), or a folder holding exactly
one info ``.pkl`` (else exactly one ``.coco.json``) and its ``samples/<CAM>/`` images.

- clip: the samples of one log (the ``<log>__<SENSOR>__<us>`` prefix of the lidar / image file
  names), sorted by timestamp and cut where two samples are more than 2 s apart (a log holds
  several scenes; the pieces are ``LOG#0``, ``LOG#1``, ...); the first by time unless ``::LOG``
  (= ``LOG#0``) or ``::LOG#k`` picks one; timestamps are
  float seconds of nuScenes' integer microseconds, so ns = round(t * 1e6) * 1000;
- rig: every camera of the first sample: ``cam2img`` intrinsics (pinhole), ``cam2ego`` mounting;
  image size from the image file's header when ``samples/<CAM>/<img_path>`` exists next to the
  info, else the info's ``width``/``height``, else nuScenes' 1600x900 (``metadata.image_size``
  says which); capture offset per camera = camera timestamp - sample timestamp of the clip's
  first sample (so frame 0 is exactly that sample's captures; the largest difference to the
  other samples' offsets is ``metadata.capture_offsets_spread_ns``);
- frames: frame 0 of a render is the clip's first sample (lidar keyframe) time
  (`Scenario.frame_origin_ns`), each camera at its capture offset from it, so frame 0 pairs with
  the first sample's images and labels (the ego span starts earlier, at the first capture);
- ego: ``ego2global`` at each sample's (lidar) timestamp and each lidar sweep's, plus the ego
  pose at every camera's capture time, ``ego2global @ lidar2ego @ inv(lidar2cam) @ inv(cam2ego)``
  (the info's ``lidar2cam`` was built through the ego pose at the camera's time), merged into one
  strictly increasing trajectory;
- agents: ``instances`` (lidar frame; box convention in `mmdet3d_boxes`) moved to the world
  through ``lidar2ego`` and ``ego2global`` at the sample time, upright in the world with the
  heading whose lidar-frame yaw is the info's (`mmdet3d_boxes.upright_world_yaw`: the lidar's
  roll and pitch are not carried into the box); source class = the metainfo class
  name of ``bbox_label_3d``; track id = ``instance_token`` when the info has one, else
  ``<sample_idx>:<k>`` (v1.1 infos carry no instance tokens, so tracks are one box long);
- reference labels (`mmdet3d_source.reference_source`): ``cam_instances`` ``center_2d`` / ``bbox``, matched to
  the lidar instance whose world centre is nearest (within `MATCH_RADIUS_M`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.names import check_name
from avsim.core.safe_files import file_kind
from avsim.scenario.importers import mmdet3d_boxes as boxes
from avsim.scenario.importers.common import TrackBuilder, build_scenario, split_selector

if TYPE_CHECKING:
    from avsim.core.rig import CameraRig
    from avsim.core.transforms import SE3
    from avsim.scenario.reference import ReferenceLabel, ReferenceSource

MATCH_RADIUS_M = 0.3
MAX_SAMPLE_GAP_NS = 2_000_000_000  # keyframes are 0.5 s apart; a longer gap starts another scene
_LOG_RE = re.compile(r"^(?P<log>.+?)__(?P<sensor>[A-Z_]+)__(?P<us>\d+)\.")


@dataclasses.dataclass(frozen=True)
class CameraFrame:
    """One camera image of a sample: intrinsics, mounting, capture time and ego pose then."""

    camera: str
    time_ns: int
    K: np.ndarray
    ego_SE3_camera: SE3
    world_SE3_ego: SE3
    image: Path | None
    size_px: tuple[int, int]
    size_source: str

    @property
    def world_SE3_camera(self) -> SE3:
        return self.world_SE3_ego.compose(self.ego_SE3_camera)


def need(record: Any, key: str, path: Path, where: str) -> Any:
    """`record[key]`, or an input error naming ``where.key`` when it is missing."""
    if not isinstance(record, dict):
        raise AvsimInputError(path, where, f"expected a mapping, got {type(record).__name__}")
    if key not in record or record[key] is None:
        raise AvsimInputError(path, f"{where}.{key}" if where else key, "missing")
    return record[key]


def seconds_to_ns(t_s: object, path: Path, where: str) -> int:
    """Float seconds of integer microseconds -> int ns (exact microseconds)."""
    try:
        t = float(t_s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise AvsimInputError(path, where, f"not a number: {t_s!r}") from None
    if not np.isfinite(t):
        raise AvsimInputError(path, where, "not finite")
    return int(round(t * 1e6)) * 1000


def floats(value: object, n: int, path: Path, where: str) -> np.ndarray:
    """The first `n` numbers of a list as float64 (n,); NaN allowed (a missing value), inf not."""
    try:
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise AvsimInputError(path, where, f"expected {n} numbers") from None
    if arr.shape[0] < n or np.any(np.isinf(arr[:n])):
        raise AvsimInputError(path, where, f"expected {n} finite numbers, got {arr.tolist()[:8]}")
    return arr[:n].copy()


def log_of(file_name: object) -> str | None:
    """The nuScenes log name of a ``<log>__<SENSOR>__<us>.ext`` file name, if it has that form."""
    m = _LOG_RE.match(Path(str(file_name)).name)
    return m.group("log") if m else None


def read_info(path: Path) -> dict:
    """The info file's top-level dict, checked for ``metainfo`` and a non-empty ``data_list``."""
    from avsim.scenario.importers.safe_pickle import load_pickle

    info = load_pickle(path)
    if not isinstance(info, dict):
        raise AvsimInputError(path, "info", f"expected a dict with metainfo and data_list, got {type(info).__name__}")
    data_list = need(info, "data_list", path, "")
    if not isinstance(data_list, list) or not data_list:
        raise AvsimInputError(path, "data_list", "expected a non-empty list of samples")
    if not isinstance(info.get("metainfo", {}), dict):
        raise AvsimInputError(path, "metainfo", "expected a mapping")
    return info


def _sample_log(sample: dict) -> str:
    names = [sample.get("lidar_points", {}).get("lidar_path")] if isinstance(sample.get("lidar_points"), dict) else []
    images = sample.get("images")
    names += [im.get("img_path") for im in images.values() if isinstance(im, dict)] if isinstance(images, dict) else []
    for name in names:
        if name and log_of(name):
            return str(log_of(name))
    return ""


def select_log(data_list: list, selector: str | None, path: Path) -> tuple[str, list[tuple[int, dict]]]:
    """(clip name, its (data_list index, sample) pairs by time): the first clip by time, or `selector`'s."""
    for k, sample in enumerate(data_list):
        if not isinstance(sample, dict):
            raise AvsimInputError(path, f"data_list[{k}]", "expected a mapping")
        need(sample, "timestamp", path, f"data_list[{k}]")
    keyed = sorted(
        ((seconds_to_ns(s["timestamp"], path, f"data_list[{k}].timestamp"), k) for k, s in enumerate(data_list))
    )
    logs: dict[str, list[tuple[int, int, dict]]] = {}
    for t_ns, k in keyed:
        logs.setdefault(_sample_log(data_list[k]), []).append((t_ns, k, data_list[k]))
    clips: dict[str, list[tuple[int, dict]]] = {}
    for log, rows in logs.items():  # a log holds several nuScenes scenes: split at time gaps
        cuts = [0] + [i for i in range(1, len(rows)) if rows[i][0] - rows[i - 1][0] > MAX_SAMPLE_GAP_NS] + [len(rows)]
        for c, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
            clips[log if len(cuts) == 2 else f"{log}#{c}"] = [(k, smp) for _, k, smp in rows[a:b]]
    if selector is None:
        name = next(iter(clips))
    elif selector in clips or f"{selector}#0" in clips:
        name = selector if selector in clips else f"{selector}#0"
    else:
        raise AvsimInputError(path, "log", f"no log named {selector!r}; logs: {', '.join(clips) or '(unnamed)'}")
    return name, clips[name]


def class_names(metainfo: dict, path: Path) -> dict[int, str]:
    """Label index -> class name from ``metainfo.categories`` (1.x) or ``CLASSES`` / ``classes``."""
    cats = metainfo.get("categories")
    try:
        if isinstance(cats, dict):
            return {int(v): str(k) for k, v in cats.items() if int(v) >= 0}
        names = metainfo.get("classes", metainfo.get("CLASSES", ()))
        return {i: str(n) for i, n in enumerate(names or ())}
    except (TypeError, ValueError):
        raise AvsimInputError(path, "metainfo.categories", "expected class name -> integer label") from None


def is_legacy(metainfo: dict) -> bool:
    """mmdet3d 0.x box convention: no ``info_version`` and no ``categories`` in the metainfo."""
    return "info_version" not in metainfo and "categories" not in metainfo


def image_in_root(root: Path, camera: str, img_path: str) -> Path | None:
    """The image an info's `img_path` names, inside `root` (a path that leads out of it is never read)."""
    name = Path(img_path).name
    candidates = [root / "samples" / camera / name] if camera and name not in ("", ".", "..") else []
    if img_path and not Path(img_path).is_absolute() and ".." not in Path(img_path).parts:
        candidates.append(root / img_path)
    base = root.resolve()
    for cand in candidates:
        resolved = cand.resolve()
        if (resolved == base or base in resolved.parents) and file_kind(cand) is None:
            return cand
    return None


def camera_frames(sample: dict, root: Path, path: Path, where: str) -> list[CameraFrame]:
    """The sample's camera images (`CameraFrame`), ego pose at capture derived from lidar2cam."""
    world_T_ego = boxes.as_matrix(need(sample, "ego2global", path, where), path, f"{where}.ego2global")
    lidar = need(sample, "lidar_points", path, where)
    ego_T_lidar = boxes.as_matrix(need(lidar, "lidar2ego", path, f"{where}.lidar_points"), path, f"{where}.lidar_points.lidar2ego")
    images = need(sample, "images", path, where)
    if not isinstance(images, dict):
        raise AvsimInputError(path, f"{where}.images", "expected a mapping camera -> image record")
    frames = []
    for camera, im in images.items():
        camera = check_name(camera, path, f"{where}.images")  # a camera name: file names later
        w = f"{where}.images.{camera}"
        K = boxes.as_matrix(need(im, "cam2img", path, w), path, f"{w}.cam2img", (3, 3))
        ego_T_cam = boxes.as_matrix(need(im, "cam2ego", path, w), path, f"{w}.cam2ego")
        cam_T_lidar = boxes.as_matrix(need(im, "lidar2cam", path, w), path, f"{w}.lidar2cam")
        world_T_ego_cam = world_T_ego @ ego_T_lidar @ np.linalg.inv(cam_T_lidar) @ np.linalg.inv(ego_T_cam)
        image = image_in_root(root, str(camera), str(im.get("img_path") or ""))
        size = boxes.image_size(image) if image is not None else None
        source = "image file header"
        if size is None and boxes.record_size(im, path, w) is not None:
            size, source = boxes.record_size(im, path, w), "info width/height"
        if size is None:
            size, source = boxes.DEFAULT_IMAGE_SIZE_PX, "nuScenes default 1600x900 (no image, no size in the info)"
        frames.append(CameraFrame(
            str(camera), seconds_to_ns(need(im, "timestamp", path, w), path, f"{w}.timestamp"), K,
            boxes.rigid(ego_T_cam, path, f"{w}.cam2ego"), boxes.rigid(world_T_ego_cam, path, f"{w}.lidar2cam"),
            image, size, source,
        ))  # fmt: skip
    if not frames:
        raise AvsimInputError(path, f"{where}.images", "no camera in the sample")
    return frames


def make_rig(frames: list[CameraFrame], offsets_ns: dict[str, int], path: Path) -> CameraRig:
    """CameraRig of `frames`' cameras (nuScenes channel order first), with capture offsets."""
    from avsim.core.cameras import PinholeCamera
    from avsim.core.errors import AvsimValueError
    from avsim.core.rig import CameraRig
    from avsim.core.transforms import SE3
    from avsim.scenario.importers.nuscenes import CAMERA_CHANNELS

    order = {name: i for i, name in enumerate(CAMERA_CHANNELS)}
    frames = sorted(frames, key=lambda f: (order.get(f.camera, len(order)), f.camera))
    try:
        cams = tuple(
            PinholeCamera(f.size_px[0], f.size_px[1], f.K[0, 0], f.K[1, 1], f.K[0, 2], f.K[1, 2]) for f in frames
        )
        names = tuple(f.camera for f in frames)
        poses = SE3.stack([f.ego_SE3_camera for f in frames])
        offsets = np.array([int(offsets_ns.get(n, 0)) for n in names], dtype=np.int64)
        return CameraRig(names, cams, poses, capture_offset_ns=offsets)
    except AvsimValueError as exc:
        raise AvsimInputError(path, "images", f"bad camera: {exc}") from None


def merge_poses(entries: list[tuple[int, SE3]], path: Path) -> tuple[np.ndarray, SE3]:
    """Timestamped poses -> strictly increasing (T,) ns and SE3 (T,); a repeated time keeps its first pose."""
    from avsim.core.transforms import SE3

    entries = sorted(entries, key=lambda e: e[0])
    kept: list[tuple[int, SE3]] = []
    for t, pose in entries:
        if not kept or t > kept[-1][0]:
            kept.append((t, pose))
    return np.array([t for t, _ in kept], dtype=np.int64), SE3.stack([p for _, p in kept])


def _instances(sample: dict, path: Path, where: str) -> tuple[list[dict], np.ndarray]:
    inst = sample.get("instances") or []
    if not isinstance(inst, list):
        raise AvsimInputError(path, f"{where}.instances", "expected a list")
    rows = []
    for k, rec in enumerate(inst):
        b = floats(need(rec, "bbox_3d", path, f"{where}.instances[{k}]"), 7, path, f"{where}.instances[{k}].bbox_3d")
        if not np.all(np.isfinite(b)):
            raise AvsimInputError(path, f"{where}.instances[{k}].bbox_3d", f"expected 7 finite numbers, got {b.tolist()}")
        rows.append(b[:7])
    return inst, np.array(rows, dtype=np.float64).reshape(-1, 7)


@dataclasses.dataclass
class _Collected:
    """What the per-sample pass gathers for the scenario and the reference labels."""

    tracks: TrackBuilder = dataclasses.field(default_factory=TrackBuilder)
    poses: list[tuple[int, SE3]] = dataclasses.field(default_factory=list)
    offsets: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    labels: list[ReferenceLabel] = dataclasses.field(default_factory=list)
    images: dict[tuple[str, int], Path] = dataclasses.field(default_factory=dict)
    unmatched: int = 0


def _add_agents(sample: dict, k: int, world_T_lidar: np.ndarray, meta: dict, out: _Collected, path: Path) -> tuple[list[str], np.ndarray]:
    from avsim.core.transforms import yaw_to_quat

    where = f"data_list[{k}]"
    inst, b = _instances(sample, path, where)
    if not len(b):
        return [], np.zeros((0, 3))
    c_lidar, lwh, yaw = boxes.lidar_boxes(b, is_legacy(meta))
    centre = c_lidar @ world_T_lidar[:3, :3].T + world_T_lidar[:3, 3]
    heading = boxes.upright_world_yaw(world_T_lidar[:3, :3], yaw)  # upright in the world, as nuScenes boxes are
    names = class_names(meta, path)
    idx = sample.get("sample_idx", k)
    ids = [str(r.get("instance_token") or f"{idx}:{j}") for j, r in enumerate(inst)]
    try:
        cls = [names.get(int(r.get("bbox_label_3d", r.get("bbox_label", -1))), "ignore") for r in inst]
    except (TypeError, ValueError):
        raise AvsimInputError(path, f"{where}.instances", "bbox_label_3d is not an integer") from None
    t_ns = seconds_to_ns(sample["timestamp"], path, f"{where}.timestamp")
    out.tracks.add(np.array(ids), np.array(cls), np.full(len(ids), t_ns, dtype=np.int64), centre, lwh, yaw_to_quat(heading))
    return ids, centre


def _add_cam_labels(sample: dict, frames: list[CameraFrame], ids: list[str], centres: np.ndarray, out: _Collected, path: Path) -> None:
    from avsim.scenario.reference import ReferenceLabel

    cam_instances = sample.get("cam_instances") or {}
    if not isinstance(cam_instances, dict):
        raise AvsimInputError(path, "cam_instances", "expected a mapping camera -> list of instances")
    by_cam = {f.camera: f for f in frames}
    for camera, recs in cam_instances.items():
        frame = by_cam.get(str(camera))
        if frame is None or not recs:
            continue
        if not isinstance(recs, list) or not all(isinstance(r, dict) for r in recs):
            raise AvsimInputError(path, f"cam_instances.{camera}", "expected a list of instance records")
        for j, rec in enumerate(recs):
            where = f"cam_instances.{camera}[{j}]"
            loc = floats(need(rec, "bbox_3d", path, where), 3, path, f"{where}.bbox_3d")
            world = frame.world_SE3_camera.apply(loc[None])[0]
            dist = np.linalg.norm(centres - world, axis=1) if len(centres) else np.zeros(0)
            if not len(dist) or dist.min() > MATCH_RADIUS_M:
                out.unmatched += 1
                continue
            centre_px = floats(rec.get("center_2d", [np.nan] * 2), 2, path, f"{where}.center_2d")
            box_px = floats(rec.get("bbox", [np.nan] * 4), 4, path, f"{where}.bbox")
            clipped = bool(np.all(np.isfinite(box_px)) and boxes.is_clipped(box_px, *frame.size_px))
            out.labels.append(ReferenceLabel(frame.camera, frame.time_ns, ids[int(dist.argmin())], centre_px, box_px, clipped))


def _collect(samples: list[tuple[int, dict]], meta: dict, root: Path, path: Path) -> tuple[_Collected, list[CameraFrame]]:
    out, first_frames = _Collected(), list[CameraFrame]()
    for k, sample in samples:
        where = f"data_list[{k}]"
        t_ns = seconds_to_ns(sample["timestamp"], path, f"{where}.timestamp")
        world_T_ego = boxes.as_matrix(need(sample, "ego2global", path, where), path, f"{where}.ego2global")
        out.poses.append((t_ns, boxes.rigid(world_T_ego, path, f"{where}.ego2global")))
        for s, sweep in enumerate(sample.get("lidar_sweeps") or []):
            if isinstance(sweep, dict) and sweep.get("ego2global") is not None and sweep.get("timestamp") is not None:
                w = f"{where}.lidar_sweeps[{s}]"
                T = boxes.as_matrix(sweep["ego2global"], path, f"{w}.ego2global")
                out.poses.append((seconds_to_ns(sweep["timestamp"], path, f"{w}.timestamp"), boxes.rigid(T, path, f"{w}.ego2global")))
        frames = camera_frames(sample, root, path, where)
        first_frames = first_frames or frames
        for f in frames:
            out.poses.append((f.time_ns, f.world_SE3_ego))
            out.offsets.setdefault(f.camera, []).append(f.time_ns - t_ns)
            if f.image is not None:
                out.images[(f.camera, f.time_ns)] = f.image
        ego_T_lidar = boxes.as_matrix(sample["lidar_points"]["lidar2ego"], path, f"{where}.lidar_points.lidar2ego")
        ids, centres = _add_agents(sample, k, world_T_ego @ ego_T_lidar, meta, out, path)
        _add_cam_labels(sample, frames, ids, centres, out, path)
    return out, first_frames


def info_reference_source(src: str | os.PathLike[str], rig_name: str | None = None) -> ReferenceSource:
    """Import an info .pkl (``FILE.pkl`` or ``FILE.pkl::LOG``) with its ``cam_instances`` labels.

    Args:
        src: the info file, optionally with a ``::LOG`` selector.
        rig_name: replace the calibrated rig by a named default rig.

    Returns:
        The scenario, the reference labels (empty when the info has no ``cam_instances``) and the
        real images found next to the info.
    """
    from avsim.core.lights import TrafficLightStates
    from avsim.core.rig import named_rig
    from avsim.scenario.reference import ReferenceSource

    path, selector = split_selector(src)
    info = read_info(path)
    meta = info.get("metainfo") or {}
    log, samples = select_log(info["data_list"], selector, path)
    out, frames = _collect(samples, meta, path.parent, path)
    offsets = {cam: int(v[0]) for cam, v in out.offsets.items()}  # the first sample's: frame 0 is exactly its capture
    spread = {cam: int(np.max(np.abs(np.asarray(v) - v[0]))) for cam, v in out.offsets.items()}
    rig = named_rig(rig_name) if rig_name else make_rig(frames, offsets, path)
    ego_t, world_SE3_ego = merge_poses(out.poses, path)
    metadata = {
        "source_format": "mmdet3d",
        "mmdet3d_file": "info pkl",
        "info_version": str(meta.get("info_version", "legacy (no info_version)")),
        "dataset_version": str(meta.get("version", "")),
        "log": log,
        "samples": len(samples),
        "box_convention": "mmdet3d 0.x (x, y, z, w, l, h, -yaw - pi/2)" if is_legacy(meta) else "mmdet3d 1.x (x, y, z, l, w, h, yaw)",
        "box_origin": "gravity centre",
        "track_ids": "instance_token" if any("instance_token" in r for _, s in samples for r in s.get("instances") or []) else "<sample_idx>:<k> (no instance tokens in the info)",
        "image_size": "; ".join(sorted({f.size_source for f in frames})),
        "capture_offsets_ns": {k: int(v) for k, v in sorted(offsets.items())},
        "capture_offsets_spread_ns": {k: v for k, v in sorted(spread.items())},
        "reference_labels_unmatched": out.unmatched,
        "map": boxes.PLACEHOLDER_NOTE,
        "rig": rig_name or "mmdet3d calibration (cam2img, cam2ego)",
        "frame_origin": "the first sample's (lidar keyframe) timestamp; cameras fire at their capture offsets from it",
    }
    scenario = build_scenario(
        path, scenario_id=log or path.stem, rig=rig, ego_timestamps_ns=ego_t, world_SE3_ego=world_SE3_ego,
        agents=out.tracks.build(path), hd_map=boxes.placeholder_map(world_SE3_ego.translation), lights=TrafficLightStates.empty(), metadata=metadata,
        frame_origin_ns=seconds_to_ns(samples[0][1]["timestamp"], path, f"data_list[{samples[0][0]}].timestamp"),
    )  # fmt: skip
    return ReferenceSource(scenario, tuple(out.labels), out.images)


def looks_like_info(path: Path) -> bool:
    """Whether `path` is an mmdet3d info pickle (its first bytes name ``metainfo`` / ``data_list``)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return False
    return head[:1] == b"\x80" and b"data_list" in head


def find_info_file(folder: Path) -> Path:
    """The one info .pkl in `folder` (else its one mono3d .coco.json)."""
    pkls = sorted(p for p in folder.glob("*.pkl") if looks_like_info(p))
    if len(pkls) == 1:
        return pkls[0]
    if len(pkls) > 1:
        raise AvsimInputError(folder, "source", f"{len(pkls)} info files ({', '.join(p.name for p in pkls)}); pass one of them")
    jsons = sorted(folder.glob("*.coco.json"))
    if len(jsons) == 1:
        return jsons[0]
    raise AvsimInputError(folder, "source", f"expected one mmdet3d info .pkl or one .coco.json, found {len(jsons)} .coco.json and no info .pkl")
