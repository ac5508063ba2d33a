"""Waymo Open Dataset PERCEPTION ``Frame`` TFRecords (one driving segment per file).

Records are framed and CRC-checked by `avsim.scenario.importers.waymo_records.iter_tfrecord`; each is a
``waymo_open_dataset.dataset_pb2.Frame`` (the ``waymo`` extra). What is read:

- ego: ``Frame.pose`` (4x4 world_SE3_vehicle, row major) at ``timestamp_micros``, merged with
  every ``CameraImage.pose`` at its ``pose_timestamp`` (the exact pose of that image; where two
  samples share a microsecond the camera pose wins). Waymo documents that ``Frame.pose`` is only
  roughly the pose in the middle of the frame, not at ``timestamp_micros`` (the first top-lidar
  scan); it is placed at ``timestamp_micros`` anyway, as the frame's clock.
- rig: ``context.camera_calibrations`` (pinhole; intrinsic f_u, f_v, c_u, c_v, k1, k2, p1, p2, k3
  as OpenCV; extrinsic vehicle_SE3_camera). Waymo's camera frame is x forward, y left, z up;
  avsim's is RDF (x right, y down, z forward), so ego_SE3_camera = vehicle_SE3_waymo_camera @
  waymo_camera_R_rdf. ``capture_offset_ns`` per camera = median over frames of (image
  pose_timestamp - frame timestamp). The scenario (and the renderer) is global-shutter at the
  image pose time; the direction is kept in the metadata, and `reference_source` keeps each
  image's rolling-shutter timing and velocity (`capture_of`) for check-projection, which projects
  with Waymo's rolling-shutter model (`avsim.scenario.importers.waymo_camera`).
- agents: ``laser_labels`` (upright boxes in the frame-pose vehicle frame: centre = box centre,
  length along the box x axis, heading = yaw of the box x axis about vehicle +z, counter-clockwise)
  moved to the world with ``Frame.pose``, at ``timestamp_micros``; track id = label id; class =
  the label type name (``TYPE_VEHICLE`` ... collapsed by `avsim.core.agents.collapse_class`).
- map: ``map_features`` when a frame carries them (v1.4.2+ files, first frame only), converted as
  the motion importer does; otherwise one placeholder drivable-area rectangle around the ego path
  (as the mmdet3d importer does), so ``avsim convert`` accepts the scenario; metadata["map"] says which.
- images: `write_camera_images` writes ``<camera>/<pose_timestamp_us>.jpg`` (the JPEG bytes as
  stored); `reference_source` pairs them with ``projected_lidar_labels`` for check-projection.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.scenario.importers.common import TrackBuilder, build_scenario
from avsim.scenario.importers.scenarionet import map_from_description
from avsim.scenario.importers.waymo import map_features
from avsim.scenario.importers.waymo_records import (
    dataset_pb2_module,
    first_record_is_frame,
    iter_tfrecord,
    parse_frame,
)

if TYPE_CHECKING:
    from avsim.core.rig import CameraRig
    from avsim.core.transforms import SE3
    from avsim.maps import HDMap
    from avsim.scenario.importers.waymo_camera import RollingShutterCapture
    from avsim.scenario.reference import ReferenceLabel, ReferenceSource
    from avsim.scenario.types import Scenario

# RDF camera axes (columns) expressed in Waymo's camera frame (x forward, y left, z up).
WAYMO_CAMERA_R_RDF = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


def parse_frames(path: str | os.PathLike[str]) -> list:
    """All ``Frame`` protos of a perception TFRecord, in file order.

    Args:
        path: the TFRecord file.

    Returns:
        List of ``dataset_pb2.Frame``.

    Raises:
        AvsimInputError: a record is not a Frame (a motion ``Scenario`` is named as such), or the
            file holds none.
    """
    path = Path(path)
    frames = []
    for k, payload in enumerate(iter_tfrecord(path)):
        frame = parse_frame(payload)
        if frame is None:
            raise AvsimInputError(
                path, f"record {k}", "not a Waymo perception Frame protobuf (a motion Scenario file imports with --from waymo)"
            )
        frames.append(frame)
    if not frames:
        raise AvsimInputError(path, "records", "the TFRecord file holds no records")
    return frames


def _matrix(values: Any, path: Path, where: str) -> np.ndarray:
    """(4, 4) rigid transform from a Waymo row-major ``Transform`` (rotation re-orthonormalised)."""
    mat = np.asarray(list(values), dtype=np.float64)
    if mat.shape != (16,) or not np.all(np.isfinite(mat)):
        raise AvsimInputError(path, where, f"expected 16 finite values (4x4 row major), got {mat.size}")
    mat = mat.reshape(4, 4)
    u, s, vt = np.linalg.svd(mat[:3, :3])
    if np.max(np.abs(s - 1.0)) > 1e-3 or np.linalg.det(u @ vt) < 0:
        raise AvsimInputError(path, where, "rotation part is not a rotation")
    mat[:3, :3] = u @ vt
    return mat


def _se3(mats: np.ndarray) -> SE3:
    from avsim.core.transforms import SE3

    return SE3(mats[..., :3, :3], mats[..., :3, 3])


def camera_name(dataset_pb2: Any, value: int) -> str:
    """Waymo camera enum value -> its name (``FRONT``, ``SIDE_LEFT``, ...)."""
    return str(dataset_pb2.CameraName.Name.Name(value))


def image_time_us(image: Any) -> int:
    """An image's ``pose_timestamp`` (s, double) in integer microseconds."""
    return int(round(float(image.pose_timestamp) * 1e6))


def _capture_offsets_ns(frames: list, names: tuple[str, ...], dataset_pb2: Any) -> np.ndarray:
    offsets: dict[str, list[int]] = {n: [] for n in names}
    for frame in frames:
        for image in frame.images:
            name = camera_name(dataset_pb2, image.name)
            if name in offsets and image.pose_timestamp > 0:
                offsets[name].append((image_time_us(image) - int(frame.timestamp_micros)) * 1000)
    return np.array([int(np.round(np.median(offsets[n]))) if offsets[n] else 0 for n in names], dtype=np.int64)


def read_rig(frames: list, path: Path) -> CameraRig:
    """The calibrated cameras of ``frames[0].context`` (enum order) as a `CameraRig`.

    Args:
        frames: the segment's frames (capture offsets are medians over all of them).
        path: the source file, named in errors.

    Returns:
        CameraRig of pinhole cameras with OpenCV distortion and capture offsets.
    """
    from avsim.core.cameras import PinholeCamera
    from avsim.core.rig import CameraRig

    dataset_pb2 = dataset_pb2_module()
    calibrations = sorted(frames[0].context.camera_calibrations, key=lambda c: int(c.name))
    if not calibrations:
        raise AvsimInputError(path, "context.camera_calibrations", "the first frame has no camera calibrations")
    names, cameras, mounts = [], [], []
    for calib in calibrations:
        name = camera_name(dataset_pb2, calib.name)
        where = f"context.camera_calibrations[{name}]"
        k = np.asarray(list(calib.intrinsic), dtype=np.float64)
        if k.shape != (9,):
            raise AvsimInputError(path, f"{where}.intrinsic", f"expected 9 values (f_u f_v c_u c_v k1 k2 p1 p2 k3), got {k.size}")
        try:
            cameras.append(PinholeCamera(int(calib.width), int(calib.height), k[0], k[1], k[2], k[3], distortion=tuple(k[4:9])))
        except AvsimValueError as exc:
            raise AvsimInputError(path, where, str(exc)) from None
        vehicle_SE3_camera = _matrix(calib.extrinsic.transform, path, f"{where}.extrinsic")
        vehicle_SE3_camera[:3, :3] = vehicle_SE3_camera[:3, :3] @ WAYMO_CAMERA_R_RDF
        names.append(name)
        mounts.append(vehicle_SE3_camera)
    offsets = _capture_offsets_ns(frames, tuple(names), dataset_pb2)
    return CameraRig(tuple(names), tuple(cameras), _se3(np.stack(mounts)), capture_offset_ns=offsets)


def read_ego(frames: list, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Ego samples: frame poses at ``timestamp_micros`` and image poses at ``pose_timestamp``.

    Args:
        frames: the segment's frames.
        path: the source file, named in errors.

    Returns:
        timestamps_ns (T,) int64 strictly increasing, world_SE3_ego (T, 4, 4).
    """
    samples: dict[int, tuple[int, np.ndarray]] = {}  # time_us -> (priority, pose); camera poses win
    for k, frame in enumerate(frames):
        t_us = int(frame.timestamp_micros)
        if t_us not in samples:
            samples[t_us] = (1, _matrix(frame.pose.transform, path, f"record {k}.pose"))
        for image in frame.images:
            if len(image.pose.transform) == 16 and image.pose_timestamp > 0:
                t_us = image_time_us(image)
                if samples.get(t_us, (1,))[0] > 0:
                    samples[t_us] = (0, _matrix(image.pose.transform, path, f"record {k}.images.pose"))
    times = sorted(samples)
    return np.array(times, dtype=np.int64) * 1000, np.stack([samples[t][1] for t in times])


def read_agents(frames: list, path: Path) -> tuple[TrackBuilder, int]:
    """Laser labels moved from the frame-pose vehicle frame to the world.

    Args:
        frames: the segment's frames.
        path: the source file, named in errors.

    Returns:
        The filled `TrackBuilder`, and the number of labels read.
    """
    from waymo_open_dataset import label_pb2

    from avsim.core.transforms import matrix_to_quat

    builder, count = TrackBuilder(), 0
    for k, frame in enumerate(frames):
        if not frame.laser_labels:
            continue
        world_T_vehicle = _matrix(frame.pose.transform, path, f"record {k}.pose")
        rows = np.array([[lb.box.center_x, lb.box.center_y, lb.box.center_z, lb.box.length, lb.box.width, lb.box.height,
                          lb.box.heading] for lb in frame.laser_labels], dtype=np.float64)  # fmt: skip
        center = rows[:, :3] @ world_T_vehicle[:3, :3].T + world_T_vehicle[:3, 3]
        c, s = np.cos(rows[:, 6]), np.sin(rows[:, 6])
        vehicle_R_box = np.zeros((len(rows), 3, 3))
        vehicle_R_box[:, 0, 0], vehicle_R_box[:, 0, 1], vehicle_R_box[:, 1, 0], vehicle_R_box[:, 1, 1] = c, -s, s, c
        vehicle_R_box[:, 2, 2] = 1.0
        quat = matrix_to_quat(world_T_vehicle[:3, :3] @ vehicle_R_box)
        ids = np.array([lb.id for lb in frame.laser_labels], dtype=str)
        classes = np.array([label_pb2.Label.Type.Name(lb.type) for lb in frame.laser_labels], dtype=str)
        builder.add(ids, classes, np.full(len(rows), int(frame.timestamp_micros) * 1000), center, rows[:, 3:6], quat)
        count += len(rows)
    return builder, count


PLACEHOLDER_MARGIN_M = 30.0
PLACEHOLDER_NOTE = (
    "none in the source: one placeholder drivable-area rectangle (ego path bounding box + 30 m, "
    "id waymo-frame-placeholder-area) so the scenario is usable; it is not real road geometry"
)


def read_map(frames: list, path: Path, ego_positions_m: np.ndarray) -> tuple[HDMap, int]:
    """The ``map_features`` of the first frame carrying any, as the motion importer maps them.

    Args:
        frames: the segment's frames.
        path: the source file, named in errors.
        ego_positions_m: (T, 3) ego positions, for the placeholder when there is no map.

    Returns:
        The HD map and the number of features read; with no (usable) map feature, one
        placeholder drivable-area rectangle around the ego path (`PLACEHOLDER_NOTE`).
    """
    from waymo_open_dataset.protos import map_pb2

    from avsim.scenario.importers.common import MapBuilder

    source = next((f for f in frames if len(f.map_features)), None)
    if source is not None:
        features = map_features(source, map_pb2)
        hd_map = map_from_description({"map_features": features}, path, "waymo")[0].build()
        if not hd_map.is_empty():
            return hd_map, len(features)
    lo = ego_positions_m[:, :2].min(axis=0) - PLACEHOLDER_MARGIN_M
    hi = ego_positions_m[:, :2].max(axis=0) + PLACEHOLDER_MARGIN_M
    z = float(np.median(ego_positions_m[:, 2]))
    builder = MapBuilder()
    builder.drivable_areas.add("waymo-frame-placeholder-area", np.array([[lo[0], lo[1], z], [hi[0], lo[1], z], [hi[0], hi[1], z], [lo[0], hi[1], z]]))
    return builder.build(), 0


def load_waymo_frames(path: str | os.PathLike[str], rig_name: str | None = None) -> Scenario:
    """Convert a Waymo perception ``Frame`` TFRecord (one segment) to a `Scenario`.

    Args:
        path: the TFRecord file.
        rig_name: replace the calibrated rig by this named rig.

    Returns:
        The scenario (ego, rig with capture offsets, laser-label tracks, map when present).
    """
    path = Path(path)
    return _scenario_of(parse_frames(path), path, rig_name)


def _scenario_of(frames: list, path: Path, rig_name: str | None) -> Scenario:
    from avsim.core.lights import TrafficLightStates
    from avsim.core.rig import named_rig

    rig = named_rig(rig_name) if rig_name else read_rig(frames, path)
    t_ns, world_T_ego = read_ego(frames, path)
    builder, n_labels = read_agents(frames, path)
    hd_map, n_features = read_map(frames, path, world_T_ego[:, :3, 3])
    dataset_pb2 = dataset_pb2_module()
    shutters = {camera_name(dataset_pb2, c.name): dataset_pb2.CameraCalibration.RollingShutterReadOutDirection.Name(
        c.rolling_shutter_direction) for c in frames[0].context.camera_calibrations}  # fmt: skip
    metadata = {
        "source_format": "waymo-frame",
        "segment": frames[0].context.name,
        "frames": len(frames),
        "laser_labels": n_labels,
        "map_features": n_features,
        "map": f"{n_features} map_features of the source" if n_features else PLACEHOLDER_NOTE,
        "rig": rig_name or "waymo calibration",
        "rig_source": "named default" if rig_name else "context.camera_calibrations",
        "rolling_shutter_direction": dict(sorted(shutters.items())),
        "camera_model_note": "rendered as a global shutter at the image pose_timestamp; Waymo's own projection is "
        "rolling shutter (avsim check-projection models it from each image's timing and velocity)",
        "frame_origin": "the first frame's timestamp_micros (its laser labels' time)",
    }
    return build_scenario(
        path, scenario_id=frames[0].context.name or path.stem, rig=rig, ego_timestamps_ns=t_ns,
        world_SE3_ego=_se3(world_T_ego), agents=builder.build(path), hd_map=hd_map,
        lights=TrafficLightStates.empty(), metadata=metadata, frame_origin_ns=min(int(f.timestamp_micros) for f in frames) * 1000,
    )  # fmt: skip


def _write_images(frames: list, folder: Path) -> dict[tuple[str, int], Path]:
    """Write every camera image as ``folder/<camera>/<pose_timestamp_us>.jpg``; (camera, time_ns) -> path."""
    dataset_pb2 = dataset_pb2_module()
    written: dict[tuple[str, int], Path] = {}
    for frame in frames:
        for image in frame.images:
            if not image.image:
                continue
            name, t_us = camera_name(dataset_pb2, image.name), image_time_us(image)
            target = folder / name / f"{t_us}.jpg"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(image.image)
            written[(name, t_us * 1000)] = target
    return written


def write_camera_images(path: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write the segment's camera JPEGs as ``OUT_DIR/<camera>/<pose_timestamp_us>.jpg`` (atomically).

    The folder is what ``avsim render --overlay`` reads as real frames; names are integer
    microseconds on the scenario clock (ego timestamps_ns / 1000).

    Args:
        path: the perception TFRecord.
        out_dir: the folder to write (replaced as a whole).

    Returns:
        The written files, sorted.
    """
    from avsim.core.atomic import atomic_output_path

    frames = parse_frames(path)
    out_dir = Path(out_dir)
    with atomic_output_path(out_dir, is_dir=True) as tmp:
        written = _write_images(frames, tmp)
    return sorted(out_dir / p.relative_to(tmp) for p in written.values())


def _labels_of(frame: Any, images: dict[str, Any], sizes: dict[str, tuple[int, int]]) -> list[ReferenceLabel]:
    from avsim.scenario.reference import ReferenceLabel

    dataset_pb2 = dataset_pb2_module()
    labels = []
    for camera_labels in frame.projected_lidar_labels:
        name = camera_name(dataset_pb2, camera_labels.name)
        if name not in images or name not in sizes:
            continue
        width, height = sizes[name]
        t_ns = image_time_us(images[name]) * 1000
        for lb in camera_labels.labels:
            b = lb.box
            box = np.array([b.center_x - b.length / 2, b.center_y - b.width / 2, b.center_x + b.length / 2, b.center_y + b.width / 2])
            track = lb.id[: -len(name) - 1] if lb.id.endswith("_" + name) else lb.id
            clipped = bool(box[0] <= 0.5 or box[1] <= 0.5 or box[2] >= width - 0.5 or box[3] >= height - 0.5)
            labels.append(ReferenceLabel(name, t_ns, track, np.full(2, np.nan), box, clipped))
    return labels


def capture_of(image: Any, readout: str) -> RollingShutterCapture | None:
    """An image's rolling-shutter timing and ego velocity, or None when it carries no timing.

    Args:
        image: a ``CameraImage``.
        readout: its camera's ``rolling_shutter_direction`` name.

    Returns:
        The `RollingShutterCapture` (velocity v_x, v_y, v_z in the world frame; w_x, w_y, w_z in
        the vehicle frame, as Waymo's camera model reads them), or None without trigger and
        readout-done times.
    """
    from avsim.scenario.importers.waymo_camera import RollingShutterCapture

    if not (image.HasField("camera_trigger_time") and image.HasField("camera_readout_done_time")):
        return None
    v = image.velocity
    return RollingShutterCapture(readout, image.pose_timestamp, image.camera_trigger_time, image.camera_readout_done_time,
                                 image.shutter, (v.v_x, v.v_y, v.v_z), (v.w_x, v.w_y, v.w_z))  # fmt: skip


def _captures(frames: list, path: Path) -> dict[tuple[str, int], RollingShutterCapture]:
    """(camera, image time_ns) -> the image's `RollingShutterCapture`, for every image with timing."""
    dataset_pb2 = dataset_pb2_module()
    readout = {camera_name(dataset_pb2, c.name): dataset_pb2.CameraCalibration.RollingShutterReadOutDirection.Name(
        c.rolling_shutter_direction) for c in frames[0].context.camera_calibrations}  # fmt: skip
    captures = {}
    for k, frame in enumerate(frames):
        for image in frame.images:
            name = camera_name(dataset_pb2, image.name)
            if name not in readout:
                continue
            try:
                capture = capture_of(image, readout[name])
            except AvsimValueError as exc:
                raise AvsimInputError(path, f"record {k}.images[{name}]", str(exc)) from None
            if capture is not None:
                captures[(name, image_time_us(image) * 1000)] = capture
    return captures


def reference_source(path: str | os.PathLike[str]) -> ReferenceSource:
    """The scenario of a perception TFRecord with its ``projected_lidar_labels`` as reference labels.

    Each camera image's projected labels become `ReferenceLabel`s at the image pose time; the
    label id's ``_<CAMERA>`` suffix is stripped to the laser label id; the centre is NaN (Waymo
    stores only the rectangle); `clipped` = the rectangle touches the image border. Each image's
    shutter timing and velocity become ``captures`` (`capture_of`). The JPEGs are
    written to ``<tmp>/avsim_waymo_frame_<sha256 of the file>/`` (one folder per source, replaced
    on each call, so repeated checks do not pile up copies).

    Args:
        path: the perception TFRecord.

    Returns:
        The `ReferenceSource`.

    Raises:
        AvsimInputError: the file is not a perception Frame TFRecord.
    """
    from avsim.scenario.reference import ReferenceSource

    path = Path(os.fspath(path).partition("::")[0])
    if not path.is_file() or not first_record_is_frame(path):
        raise AvsimInputError(path, "source", "not a Waymo perception Frame TFRecord")
    frames = parse_frames(path)
    scenario = _scenario_of(frames, path, None)
    dataset_pb2 = dataset_pb2_module()
    sizes = {camera_name(dataset_pb2, c.name): (int(c.width), int(c.height)) for c in frames[0].context.camera_calibrations}
    labels: list[ReferenceLabel] = []
    for frame in frames:
        images = {camera_name(dataset_pb2, im.name): im for im in frame.images}
        labels.extend(_labels_of(frame, images, sizes))
    return ReferenceSource(scenario, tuple(labels), _cached_images(frames, path), _captures(frames, path))


def _cached_images(frames: list, path: Path) -> dict[tuple[str, int], Path]:
    """The JPEGs in ``<tmp>/avsim_waymo_frame_<sha256 of the file>/``, written once (atomically)."""
    import hashlib

    from avsim.core.atomic import atomic_output_path

    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:20]
    folder = Path(tempfile.gettempdir()) / f"avsim_waymo_frame_{digest}"
    with atomic_output_path(folder, is_dir=True) as tmp:
        written = _write_images(frames, tmp)
    return {key: folder / p.relative_to(tmp) for key, p in written.items()}
