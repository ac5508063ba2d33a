"""A sensor-simulator render request checked and moved into avsim's terms, and its image encoded.

`frame_request` checks one `RGBRenderRequest` before any drawing (its size, objects, times,
camera, poses, tracks and image format; `SpecError`, `OutOfRange` or `UnknownScene` naming the
field) and gives the `FrameRequest` a scene draws; `encode` writes the drawn image as the request
asked (PNG, or JPEG at its quality).
"""

from __future__ import annotations

import cv2
import numpy as np

from avsim.core.typing import NDArrayByte
from avsim.sim.alpasim.frames import SpecError, camera_from_spec, pose_from_proto, us_to_ns
from avsim.sim.alpasim.protos import sensorsim_pb2
from avsim.sim.alpasim.scenes import FrameRequest, LoadedScene, Shutter

__all__ = ["MAX_OBJECTS", "MAX_SIDE_PX", "encode", "frame_request"]

MAX_SIDE_PX = 8192
MAX_OBJECTS = 10_000
DEFAULT_JPEG_QUALITY = 95
SHUTTERS = {sensorsim_pb2.ShutterType.ROLLING_TOP_TO_BOTTOM: Shutter.TOP_TO_BOTTOM, sensorsim_pb2.ShutterType.ROLLING_LEFT_TO_RIGHT: Shutter.LEFT_TO_RIGHT,
            sensorsim_pb2.ShutterType.ROLLING_BOTTOM_TO_TOP: Shutter.BOTTOM_TO_TOP, sensorsim_pb2.ShutterType.ROLLING_RIGHT_TO_LEFT: Shutter.RIGHT_TO_LEFT}  # fmt: skip
SERVED_FORMATS = (sensorsim_pb2.ImageFormat.UNDEFINED, sensorsim_pb2.ImageFormat.PNG, sensorsim_pb2.ImageFormat.JPEG)


def _jpeg_quality(quality: float, field: str) -> int:
    q = int(round(quality)) if quality else DEFAULT_JPEG_QUALITY
    if not (np.isfinite(quality) and 1 <= q <= 100):
        raise SpecError(f"{field}.image_quality: expected 1..100 for JPEG, got {quality:g}")
    return q


def check_format(image_format: int, quality: float, field: str = "request") -> None:
    """SpecError unless the image format is served (PNG, JPEG at a quality in 1..100)."""
    if image_format not in SERVED_FORMATS:
        name = sensorsim_pb2.ImageFormat.Name(image_format) if image_format in sensorsim_pb2.ImageFormat.values() else str(image_format)
        raise SpecError(f"{field}.image_format: {name} is not served (PNG and JPEG are)")
    if image_format == sensorsim_pb2.ImageFormat.JPEG:
        _jpeg_quality(quality, field)


def frame_request(scene: LoadedScene, r: sensorsim_pb2.RGBRenderRequest, field: str = "request") -> FrameRequest:
    """A render request checked and moved into avsim's terms (world frame, ns); SpecError / OutOfRange / UnknownScene."""
    w, h = int(r.resolution_w or r.camera_intrinsics.resolution_w), int(r.resolution_h or r.camera_intrinsics.resolution_h)
    if not (0 < w <= MAX_SIDE_PX and 0 < h <= MAX_SIDE_PX):
        raise SpecError(f"{field}.resolution: width and height must be in 1..{MAX_SIDE_PX}, got {w}x{h}")
    if len(r.dynamic_objects) > MAX_OBJECTS:
        raise SpecError(f"{field}.dynamic_objects: at most {MAX_OBJECTS}, got {len(r.dynamic_objects)}")
    if r.frame_end_us < r.frame_start_us:
        raise SpecError(f"{field}: frame_end_us {r.frame_end_us} is before frame_start_us {r.frame_start_us}")
    check_format(r.image_format, r.image_quality, field)
    start_ns, end_ns = us_to_ns(r.frame_start_us), us_to_ns(r.frame_end_us)
    scene.check_time(start_ns, f"{field}.frame_start_us")
    scene.check_time(end_ns, f"{field}.frame_end_us")
    camera = camera_from_spec(r.camera_intrinsics, w, h)
    to_world = scene.frame.to_world
    unknown = [o.track_id for o in r.dynamic_objects if o.track_id not in scene.tracks]
    if unknown:
        raise SpecError(f"{field}.dynamic_objects: no track {unknown[0][:100]!r} in scene {scene.scenario.scenario_id!r}")
    objs = list(r.dynamic_objects)
    return FrameRequest(camera, to_world(pose_from_proto(r.sensor_pose.start_pose, f"{field}.sensor_pose.start_pose")),
                        to_world(pose_from_proto(r.sensor_pose.end_pose, f"{field}.sensor_pose.end_pose")), start_ns, end_ns,
                        tuple(o.track_id for o in objs),
                        tuple(to_world(pose_from_proto(o.pose_pair.start_pose, f"{field}.dynamic_objects.start_pose")) for o in objs),
                        tuple(to_world(pose_from_proto(o.pose_pair.end_pose, f"{field}.dynamic_objects.end_pose")) for o in objs),
                        SHUTTERS.get(r.camera_intrinsics.shutter_type, Shutter.GLOBAL))  # fmt: skip


def encode(image: NDArrayByte, image_format: int, quality: float) -> bytes:
    """PNG (also for UNDEFINED) or JPEG at `quality` (1..100; 0: 95) bytes of an RGB image (`check_format` first)."""
    check_format(image_format, quality)
    bgr = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2BGR)
    if image_format == sensorsim_pb2.ImageFormat.JPEG:
        ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, _jpeg_quality(quality, "request")])
    else:
        ok, buf = cv2.imencode(".png", bgr)
    if not ok:
        raise RuntimeError("image encoding failed")
    return bytes(buf)
