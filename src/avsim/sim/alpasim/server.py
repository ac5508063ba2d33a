"""`avsim serve sensorsim SCENARIOS --port P`: avsim as an AlpaSim sensor simulator.

`SensorsimServer` implements AlpaSim's v0 `SensorsimService` (avsim's own .proto files, the same
wire format) over the scenes of `avsim.sim.alpasim.scenes.SceneCatalog`:

- `get_available_scenes`: the scenario ids; `get_available_cameras(scene)`: the scenario's rig,
  each camera as an f-theta or OpenCV-pinhole `CameraSpec` with its rig->camera pose;
  `get_available_trajectories(scene)`: the logged ego, local->rig, microseconds;
- `render_rgb`: one control image for the request's camera spec (f-theta or OpenCV pinhole, any
  resolution; rolling shutter where the spec asks), sensor pose (local->camera at the exposure's
  start and end) and dynamic objects, as PNG or JPEG (`image_quality`, default 95);
  `render_aggregated`: several at once (its lidar requests are refused); `get_version`;
- `--generated`: the images are the Transfer model's (`avsim.sim.alpasim.generated_frames`).

Bad requests never raise into gRPC: an unknown scene is `NOT_FOUND`; a time outside the scene's
span `OUT_OF_RANGE`; an unknown track, a bad camera or pose, a resolution over
`MAX_SIDE_PX`, more than `MAX_OBJECTS` objects or `MAX_AGGREGATED` images, an unsupported image
format `INVALID_ARGUMENT`; what avsim does not do (lidar, ego masks, batch rendering)
`UNIMPLEMENTED`; a request over `max_request_bytes` is refused by gRPC itself
(`RESOURCE_EXHAUSTED`). Each is one line; no traceback is printed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import cv2
import grpc
import numpy as np

from avsim import __version__
from avsim.core.errors import AvsimInputError
from avsim.core.typing import NDArrayByte
from avsim.sim.alpasim.frames import (
    SpecError,
    camera_from_spec,
    ns_to_us,
    pose_from_proto,
    pose_to_proto,
    rig_cameras,
    us_to_ns,
)
from avsim.sim.alpasim.protos import common_pb2, sensorsim_pb2, sensorsim_pb2_grpc
from avsim.sim.alpasim.scenes import (
    FrameRequest,
    LoadedScene,
    OutOfRange,
    SceneCatalog,
    Shutter,
    UnknownScene,
    local_poses,
)

__all__ = ["ServerOptions", "SensorsimServer", "serve"]

MAX_SIDE_PX = 8192
MAX_OBJECTS = 10_000
MAX_AGGREGATED = 64
MAX_REQUEST_BYTES = 4 * 1024 * 1024
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
SHUTTERS = {sensorsim_pb2.ShutterType.ROLLING_TOP_TO_BOTTOM: Shutter.TOP_TO_BOTTOM, sensorsim_pb2.ShutterType.ROLLING_LEFT_TO_RIGHT: Shutter.LEFT_TO_RIGHT,
            sensorsim_pb2.ShutterType.ROLLING_BOTTOM_TO_TOP: Shutter.BOTTOM_TO_TOP, sensorsim_pb2.ShutterType.ROLLING_RIGHT_TO_LEFT: Shutter.RIGHT_TO_LEFT}  # fmt: skip

Handler = TypeVar("Handler", bound=Callable[..., Any])


class Unsupported(Exception):
    """What avsim's sensor simulator does not do (UNIMPLEMENTED)."""


@dataclass(frozen=True)
class ServerOptions:
    """host and port (0: a free one); worker threads; the largest request in bytes; scenes kept loaded;
    the rasteriser backend; strips of a rolling-shutter image."""

    host: str = "127.0.0.1"
    port: int = 0
    workers: int = 4
    max_request_bytes: int = MAX_REQUEST_BYTES
    max_loaded: int = 4
    backend: str = "numba"
    rolling_bands: int = 8


def _guarded(handler: Handler) -> Handler:
    """Map a handler's refusals onto gRPC status codes with one-line details (never a traceback)."""

    @wraps(handler)
    def wrapped(self: SensorsimServer, request: Any, context: grpc.ServicerContext) -> Any:
        codes: list[tuple[type[BaseException], grpc.StatusCode]] = [(UnknownScene, grpc.StatusCode.NOT_FOUND), (OutOfRange, grpc.StatusCode.OUT_OF_RANGE),
                                                                  (SpecError, grpc.StatusCode.INVALID_ARGUMENT), (Unsupported, grpc.StatusCode.UNIMPLEMENTED)]  # fmt: skip
        try:
            return handler(self, request, context)
        except tuple(c for c, _ in codes) as exc:
            code = next(code for cls, code in codes if isinstance(exc, cls))
            context.abort(code, " ".join(str(exc.args[0] if exc.args else exc).split())[:500])
        except Exception as exc:  # a bug: still one line to the caller, and the server keeps serving
            context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500])

    return wrapped  # type: ignore[return-value]


class SensorsimServer(sensorsim_pb2_grpc.SensorsimServiceServicer):
    """The servicer (see the module docstring).

    Args:
        catalog: the scenes.
        generated: turns a scene's control images into generated ones (None: control images).
    """

    def __init__(self, catalog: SceneCatalog, generated: Callable[[LoadedScene, list[tuple[str, NDArrayByte]]], list[NDArrayByte]] | None = None) -> None:
        self.catalog, self.generated = catalog, generated
        self._lock = threading.Lock()  # scene loading and drawing (the scenes' caches): one image at a time

    def _scene(self, scene_id: str) -> LoadedScene:
        with self._lock:
            return self.catalog.scene(scene_id)

    @_guarded
    def get_version(self, request: common_pb2.Empty, context: grpc.ServicerContext) -> common_pb2.VersionId:
        return common_pb2.VersionId(version_id=f"avsim-sensorsim-{__version__}", git_hash="unknown",
                                    grpc_api_version=common_pb2.VersionId.APIVersion(major=0))  # fmt: skip

    @_guarded
    def get_available_scenes(self, request: common_pb2.Empty, context: grpc.ServicerContext) -> common_pb2.AvailableScenesReturn:
        return common_pb2.AvailableScenesReturn(scene_ids=self.catalog.scene_ids)

    @_guarded
    def get_available_cameras(self, request: sensorsim_pb2.AvailableCamerasRequest, context: grpc.ServicerContext) -> sensorsim_pb2.AvailableCamerasReturn:
        return sensorsim_pb2.AvailableCamerasReturn(available_cameras=rig_cameras(self._scene(request.scene_id).scenario.rig))

    @_guarded
    def get_available_trajectories(self, request: sensorsim_pb2.AvailableTrajectoriesRequest,
                                   context: grpc.ServicerContext) -> sensorsim_pb2.AvailableTrajectoriesReturn:  # fmt: skip
        times_ns, poses = local_poses(self._scene(request.scene_id))
        traj = common_pb2.Trajectory(poses=[common_pb2.PoseAtTime(pose=pose_to_proto(poses[i]), timestamp_us=ns_to_us(int(t)))
                                            for i, t in enumerate(times_ns)])  # fmt: skip
        return sensorsim_pb2.AvailableTrajectoriesReturn(available_trajectories=[sensorsim_pb2.AvailableTrajectoriesReturn.AvailableTrajectory(trajectory=traj)])

    @_guarded
    def render_rgb(self, request: sensorsim_pb2.RGBRenderRequest, context: grpc.ServicerContext) -> sensorsim_pb2.RGBRenderReturn:
        return self._render([request])[0]

    @_guarded
    def render_aggregated(self, request: sensorsim_pb2.AggregatedRenderRequest, context: grpc.ServicerContext) -> sensorsim_pb2.AggregatedRenderReturn:
        if len(request.lidar_requests):
            raise Unsupported("lidar_requests: avsim renders camera images only")
        if len(request.rgb_requests) > MAX_AGGREGATED:
            raise SpecError(f"rgb_requests: at most {MAX_AGGREGATED}, got {len(request.rgb_requests)}")
        return sensorsim_pb2.AggregatedRenderReturn(rgb_returns=self._render(list(request.rgb_requests)))

    @_guarded
    def render_lidar(self, request: Any, context: grpc.ServicerContext) -> Any:
        raise Unsupported("render_lidar: avsim renders camera images only")

    @_guarded
    def batch_render_rgb(self, request: Any, context: grpc.ServicerContext) -> Any:
        raise Unsupported("batch_render_rgb: use render_rgb or render_aggregated")

    @_guarded
    def get_available_ego_masks(self, request: Any, context: grpc.ServicerContext) -> sensorsim_pb2.AvailableEgoMasksReturn:
        return sensorsim_pb2.AvailableEgoMasksReturn()

    @_guarded
    def get_loaded_scenes(self, request: Any, context: grpc.ServicerContext) -> sensorsim_pb2.LoadedScenesReturn:
        with self._lock:
            loaded = list(self.catalog._loaded)
        return sensorsim_pb2.LoadedScenesReturn(scenes=[sensorsim_pb2.LoadedSceneEntry(scene_id=s, loaded_instance_count=1) for s in loaded],
                                                loaded_instance_capacity=self.catalog.max_loaded)  # fmt: skip

    def _render(self, requests: list[sensorsim_pb2.RGBRenderRequest]) -> list[sensorsim_pb2.RGBRenderReturn]:
        """Every request checked first, then drawn (then generated, per scene), then encoded."""
        checked = []
        for i, r in enumerate(requests):
            scene = self._scene(r.scene_id)
            checked.append((scene, frame_request(scene, r, f"rgb_requests[{i}]" if len(requests) > 1 else "request"), r))
        with self._lock:
            images = [scene.render(req) for scene, req, _ in checked]
            if self.generated is not None:
                images = self._generate(checked, images)
        return [sensorsim_pb2.RGBRenderReturn(image_bytes=encode(img, r.image_format, r.image_quality)) for img, (_, _, r) in zip(images, checked)]

    def _generate(self, checked: list[tuple[LoadedScene, FrameRequest, Any]], images: list[NDArrayByte]) -> list[NDArrayByte]:
        assert self.generated is not None
        out = list(images)
        for scene_id in {r.scene_id for _, _, r in checked}:
            idx = [i for i, (_, _, r) in enumerate(checked) if r.scene_id == scene_id]
            views = [(checked[i][2].camera_intrinsics.logical_id, images[i]) for i in idx]
            for i, img in zip(idx, self.generated(checked[idx[0]][0], views)):
                out[i] = img
        return out


def frame_request(scene: LoadedScene, r: sensorsim_pb2.RGBRenderRequest, field: str = "request") -> FrameRequest:
    """A render request checked and moved into avsim's terms (world frame, ns); SpecError / OutOfRange / UnknownScene."""
    w, h = int(r.resolution_w or r.camera_intrinsics.resolution_w), int(r.resolution_h or r.camera_intrinsics.resolution_h)
    if not (0 < w <= MAX_SIDE_PX and 0 < h <= MAX_SIDE_PX):
        raise SpecError(f"{field}.resolution: width and height must be in 1..{MAX_SIDE_PX}, got {w}x{h}")
    if len(r.dynamic_objects) > MAX_OBJECTS:
        raise SpecError(f"{field}.dynamic_objects: at most {MAX_OBJECTS}, got {len(r.dynamic_objects)}")
    if r.frame_end_us < r.frame_start_us:
        raise SpecError(f"{field}: frame_end_us {r.frame_end_us} is before frame_start_us {r.frame_start_us}")
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
    """PNG (also for UNDEFINED) or JPEG at `quality` (1..100; 0: 95) bytes of an RGB image."""
    bgr = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2BGR)
    if image_format in (sensorsim_pb2.ImageFormat.UNDEFINED, sensorsim_pb2.ImageFormat.PNG):
        ok, buf = cv2.imencode(".png", bgr)
    elif image_format == sensorsim_pb2.ImageFormat.JPEG:
        q = int(round(quality)) if quality else 95
        if not 1 <= q <= 100:
            raise SpecError(f"image_quality: expected 1..100 for JPEG, got {quality:g}")
        ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, q])
    else:
        raise SpecError(f"image_format: {sensorsim_pb2.ImageFormat.Name(image_format)} is not served (PNG and JPEG are)")
    if not ok:
        raise RuntimeError("image encoding failed")
    return bytes(buf)


def serve(root: Path, options: ServerOptions,
          generated: Callable[[LoadedScene, list[tuple[str, NDArrayByte]]], list[NDArrayByte]] | None = None) -> tuple[grpc.Server, int]:  # fmt: skip
    """Start the sensor simulator on `options.host:options.port`.

    Args:
        root: SCENARIOS (a scenario folder, or a folder of them).
        options: address, threads, bounds, rendering.
        generated: the generated-images hook (`--generated`), or None.

    Returns:
        The started server and the port it listens on.
    """
    catalog = SceneCatalog(Path(root), options.max_loaded, options.backend, True, options.rolling_bands)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max(int(options.workers), 1)),
                         options=[("grpc.max_receive_message_length", int(options.max_request_bytes)),
                                  ("grpc.max_send_message_length", MAX_RESPONSE_BYTES),
                                  ("grpc.so_reuseport", 0)])  # fmt: skip  # a port in use is an error, not shared
    sensorsim_pb2_grpc.add_SensorsimServiceServicer_to_server(SensorsimServer(catalog, generated), server)
    host = f"[{options.host}]" if ":" in options.host else options.host
    try:
        port = server.add_insecure_port(f"{host}:{int(options.port)}")
    except RuntimeError:
        port = 0
    if port == 0:
        raise AvsimInputError(f"{options.host}:{options.port}", "--port", "cannot listen there (in use, or not an address of this machine)")
    server.start()
    return server, port


def run_server(root: Path, options: ServerOptions, generation: Any = None, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve until SIGINT or SIGTERM (what `avsim serve sensorsim` runs).

    Args:
        root: SCENARIOS.
        options: address, threads, bounds, rendering.
        generation: `avsim.sim.generated.options.GenerationOptions` for generated images, or None.
        on_ready: called with one line once the server listens (the address, the scene count).
    """
    import signal

    hook = None
    if generation is not None:
        from avsim.sim.alpasim.generated_frames import GeneratedImages

        hook = GeneratedImages(generation)
    server, port = serve(root, options, hook)
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if on_ready is not None:
            scenes = SceneCatalog(Path(root)).scene_ids
            on_ready(f"avsim sensorsim: {len(scenes)} scene(s) on {options.host}:{port} ({'generated' if hook else 'control'} images)")
        while not stop.wait(0.5):
            pass
    finally:
        server.stop(grace=2.0).wait()
        for s, handler in previous.items():
            signal.signal(s, handler)
