"""`avsim serve sensorsim SCENARIOS --port P`: avsim as an AlpaSim sensor simulator.

`SensorsimServer` implements AlpaSim's v0 `SensorsimService` (avsim's own .proto files, the same
wire format) over the scenes of `avsim.sim.alpasim.scenes.SceneCatalog`:

- `get_available_scenes`: the scenario ids; `get_available_cameras(scene)`: the scenario's rig,
  each camera as an f-theta or OpenCV-pinhole `CameraSpec` with its rig->camera pose;
  `get_available_trajectories(scene)`: the logged ego, local->rig, microseconds;
- `render_rgb`: one control image for the request's camera spec (f-theta or OpenCV pinhole, any
  resolution; rolling shutter where the spec asks), sensor pose (local->camera at the exposure's
  start and end) and dynamic objects, as PNG or JPEG (`image_quality`, default 95);
  `render_aggregated`: several at once (its lidar requests are refused); `batch_render_rgb`:
  several at once, each item answered with its camera name, and an item that cannot be drawn
  answered `success = false` with a one-line `error_message` while the others are drawn (as
  AlpaSim's runtime reads NRE's answer); `get_version` (`grpc_api_version`: the alpasim_grpc
  release of the .proto files, `protos.ALPASIM_GRPC_VERSION`);
- `--generated`: the images are the Transfer model's (`avsim.sim.alpasim.generated_frames`).

Requests share the server's CPU and memory as `avsim.sim.alpasim.scheduling` says: each is costed
before any work and drawn in its own thread within `workers` slots and the memory budget, small
ones never behind large ones; a cancelled request stops at its next check.

Bad requests never raise into gRPC: an unknown scene is `NOT_FOUND`; a time outside the scene's
span `OUT_OF_RANGE`; an unknown track, a bad camera or pose, a resolution over
`MAX_SIDE_PX`, more than `MAX_OBJECTS` objects or `MAX_AGGREGATED` images, an unsupported image
format `INVALID_ARGUMENT`; a request whose memory estimate passes what one request may use, or
too many large ones waiting, `RESOURCE_EXHAUSTED` (the bound named); what avsim does not do
(lidar, ego masks) `UNIMPLEMENTED`; a request over `max_request_bytes` is refused by gRPC itself
(`RESOURCE_EXHAUSTED`), and so are RPCs past the thread pool (`rpc_threads`). Each is one line;
no traceback is printed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import grpc

from avsim import __version__
from avsim.core.errors import AvsimInputError
from avsim.core.typing import NDArrayByte
from avsim.sim.alpasim.frames import SpecError, ns_to_us, pose_to_proto, rig_cameras
from avsim.sim.alpasim.protos import ALPASIM_GRPC_VERSION, common_pb2, sensorsim_pb2, sensorsim_pb2_grpc
from avsim.sim.alpasim.render_requests import encode, frame_request
from avsim.sim.alpasim.scenes import FrameRequest, LoadedScene, OutOfRange, SceneCatalog, UnknownScene, local_poses
from avsim.sim.alpasim.scheduling import MIB, Cancelled, RayMapCache, Refused, RenderScheduler, request_bytes

__all__ = ["ServerOptions", "SensorsimServer", "serve", "start"]

MAX_AGGREGATED = 64
MAX_REQUEST_BYTES = 4 * 1024 * 1024
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
RPC_THREADS_PER_WORKER, RPC_THREADS_SPARE = 4, 4  # gRPC threads: the render slots, the large requests that may wait, the small ones and metadata calls

Handler = TypeVar("Handler", bound=Callable[..., Any])
Generated = Callable[[LoadedScene, list[tuple[str, NDArrayByte]]], list[NDArrayByte]]
Checked = tuple[LoadedScene, FrameRequest, sensorsim_pb2.RGBRenderRequest]


class Unsupported(Exception):
    """What avsim's sensor simulator does not do (UNIMPLEMENTED)."""


@dataclass(frozen=True)
class ServerOptions:
    """host and port (0: a free one); requests drawn at once; the largest request in bytes; scenes kept loaded;
    the rasteriser backend; strips of a rolling-shutter image; the memory the requests being drawn may use
    together (MiB); the ray maps kept (MiB)."""

    host: str = "127.0.0.1"
    port: int = 0
    workers: int = 4
    max_request_bytes: int = MAX_REQUEST_BYTES
    max_loaded: int = 4
    backend: str = "numba"
    rolling_bands: int = 8
    max_memory_mib: int = 2048
    ray_cache_mib: int = 512

    @property
    def rpc_threads(self) -> int:
        return RPC_THREADS_PER_WORKER * max(int(self.workers), 1) + RPC_THREADS_SPARE


STATUS: list[tuple[type[BaseException], grpc.StatusCode]] = [
    (UnknownScene, grpc.StatusCode.NOT_FOUND), (OutOfRange, grpc.StatusCode.OUT_OF_RANGE), (SpecError, grpc.StatusCode.INVALID_ARGUMENT),
    (Unsupported, grpc.StatusCode.UNIMPLEMENTED), (Refused, grpc.StatusCode.RESOURCE_EXHAUSTED), (Cancelled, grpc.StatusCode.CANCELLED),
]  # fmt: skip


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, at most 500 characters."""
    return " ".join(str(exc.args[0] if exc.args else exc).split())[:500]


def _guarded(handler: Handler) -> Handler:
    """Map a handler's refusals onto gRPC status codes with one-line details (never a traceback)."""

    @wraps(handler)
    def wrapped(self: SensorsimServer, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return handler(self, request, context)
        except tuple(c for c, _ in STATUS) as exc:
            context.abort(next(code for cls, code in STATUS if isinstance(exc, cls)), one_line(exc))
        except Exception as exc:  # a bug: still one line to the caller, and the server keeps serving
            context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500])

    return wrapped  # type: ignore[return-value]


class SensorsimServer(sensorsim_pb2_grpc.SensorsimServiceServicer):
    """The servicer (see the module docstring).

    Args:
        catalog: the scenes.
        generated: turns a scene's control images into generated ones (None: control images).
        options: the render slots, the memory budget and the ray-map cache's size.
    """

    def __init__(self, catalog: SceneCatalog, generated: Generated | None = None, options: ServerOptions | None = None) -> None:
        options = options or ServerOptions()
        self.catalog, self.generated = catalog, generated
        self.scheduler = RenderScheduler(options.workers, int(options.max_memory_mib * MIB))
        self.rays = RayMapCache(int(options.ray_cache_mib * MIB))
        self._generate_lock = threading.Lock()  # the model draws one call at a time

    @_guarded
    def get_version(self, request: common_pb2.Empty, context: grpc.ServicerContext) -> common_pb2.VersionId:
        major, minor, patch = ALPASIM_GRPC_VERSION
        return common_pb2.VersionId(version_id=f"avsim-sensorsim-{__version__}", git_hash="unknown",
                                    grpc_api_version=common_pb2.VersionId.APIVersion(major=major, minor=minor, patch=patch))  # fmt: skip

    @_guarded
    def get_available_scenes(self, request: common_pb2.Empty, context: grpc.ServicerContext) -> common_pb2.AvailableScenesReturn:
        return common_pb2.AvailableScenesReturn(scene_ids=self.catalog.scene_ids)

    @_guarded
    def get_available_cameras(self, request: sensorsim_pb2.AvailableCamerasRequest, context: grpc.ServicerContext) -> sensorsim_pb2.AvailableCamerasReturn:
        return sensorsim_pb2.AvailableCamerasReturn(available_cameras=rig_cameras(self.catalog.scene(request.scene_id).scenario.rig))

    @_guarded
    def get_available_trajectories(self, request: sensorsim_pb2.AvailableTrajectoriesRequest,
                                   context: grpc.ServicerContext) -> sensorsim_pb2.AvailableTrajectoriesReturn:  # fmt: skip
        times_ns, poses = local_poses(self.catalog.scene(request.scene_id))
        traj = common_pb2.Trajectory(poses=[common_pb2.PoseAtTime(pose=pose_to_proto(poses[i]), timestamp_us=ns_to_us(int(t)))
                                            for i, t in enumerate(times_ns)])  # fmt: skip
        return sensorsim_pb2.AvailableTrajectoriesReturn(available_trajectories=[sensorsim_pb2.AvailableTrajectoriesReturn.AvailableTrajectory(trajectory=traj)])

    @_guarded
    def render_rgb(self, request: sensorsim_pb2.RGBRenderRequest, context: grpc.ServicerContext) -> sensorsim_pb2.RGBRenderReturn:
        checked = [self._check(request, "request")]
        return sensorsim_pb2.RGBRenderReturn(image_bytes=self._draw(checked, context, "render_rgb")[0])

    @_guarded
    def render_aggregated(self, request: sensorsim_pb2.AggregatedRenderRequest, context: grpc.ServicerContext) -> sensorsim_pb2.AggregatedRenderReturn:
        if len(request.lidar_requests):
            raise Unsupported("lidar_requests: avsim renders camera images only")
        if len(request.rgb_requests) > MAX_AGGREGATED:
            raise SpecError(f"rgb_requests: at most {MAX_AGGREGATED}, got {len(request.rgb_requests)}")
        checked = [self._check(r, f"rgb_requests[{i}]") for i, r in enumerate(request.rgb_requests)]
        images = self._draw(checked, context, f"render_aggregated ({len(checked)} images)")
        return sensorsim_pb2.AggregatedRenderReturn(rgb_returns=[sensorsim_pb2.RGBRenderReturn(image_bytes=b) for b in images])

    @_guarded
    def batch_render_rgb(self, request: sensorsim_pb2.BatchRGBRenderRequest, context: grpc.ServicerContext) -> sensorsim_pb2.BatchRGBRenderReturn:
        if len(request.items) > MAX_AGGREGATED:
            raise SpecError(f"items: at most {MAX_AGGREGATED}, got {len(request.items)}")
        answers: list[sensorsim_pb2.BatchRGBRenderReturnItem | None] = [None] * len(request.items)
        drawn: list[tuple[int, Checked]] = []
        for i, item in enumerate(request.items):
            try:
                drawn.append((i, self._check(item.request, f"items[{i}].request")))
            except (UnknownScene, OutOfRange, SpecError) as exc:  # this item fails; the others are drawn
                answers[i] = sensorsim_pb2.BatchRGBRenderReturnItem(camera_name=item.camera_name, success=False, error_message=one_line(exc))
        images = self._draw([c for _, c in drawn], context, f"batch_render_rgb ({len(drawn)} images)") if drawn else []
        for (i, _), data in zip(drawn, images):
            answers[i] = sensorsim_pb2.BatchRGBRenderReturnItem(camera_name=request.items[i].camera_name, success=True,
                                                                result=sensorsim_pb2.RGBRenderReturn(image_bytes=data))  # fmt: skip
        return sensorsim_pb2.BatchRGBRenderReturn(items=[a for a in answers if a is not None])

    @_guarded
    def render_lidar(self, request: Any, context: grpc.ServicerContext) -> Any:
        raise Unsupported("render_lidar: avsim renders camera images only")

    @_guarded
    def get_available_ego_masks(self, request: Any, context: grpc.ServicerContext) -> sensorsim_pb2.AvailableEgoMasksReturn:
        return sensorsim_pb2.AvailableEgoMasksReturn()

    @_guarded
    def get_loaded_scenes(self, request: Any, context: grpc.ServicerContext) -> sensorsim_pb2.LoadedScenesReturn:
        return sensorsim_pb2.LoadedScenesReturn(scenes=[sensorsim_pb2.LoadedSceneEntry(scene_id=s, loaded_instance_count=1) for s in self.catalog.loaded_ids],
                                                loaded_instance_capacity=self.catalog.max_loaded)  # fmt: skip

    def _check(self, r: sensorsim_pb2.RGBRenderRequest, field: str) -> Checked:
        scene = self.catalog.scene(r.scene_id)
        return scene, frame_request(scene, r, field), r

    def _draw(self, checked: list[Checked], context: grpc.ServicerContext, what: str) -> list[bytes]:
        """The checked requests drawn one after another within the scheduler's slots and budget, encoded as each asks."""
        sizes = [(req.camera.width_px, req.camera.height_px, scene.is_rolling(req), req.camera in self.rays) for scene, req, _ in checked]
        gone = threading.Event()

        def ended() -> None:  # the RPC ended (cancelled, deadline passed, or answered): waiting requests look again
            gone.set()
            self.scheduler.wake()

        context.add_callback(ended)
        with self.scheduler.admitted(request_bytes(sizes, keep_decoded=self.generated is not None),
                                     lambda: context.is_active() and not gone.is_set(), what) as job:  # fmt: skip
            out: list[Any] = []
            for scene, req, r in checked:
                job.check()
                image = scene.render(req, self.rays.get(req.camera, job.check), job.check)
                job.check()
                out.append(image if self.generated is not None else encode(image, r.image_format, r.image_quality))
            if self.generated is not None:
                with self._generate_lock:
                    job.check()
                    out = [encode(img, r.image_format, r.image_quality) for img, (_, _, r) in zip(self._generate(checked, out), checked)]
        return out

    def _generate(self, checked: list[Checked], images: list[NDArrayByte]) -> list[NDArrayByte]:
        assert self.generated is not None
        out = list(images)
        for scene_id in {r.scene_id for _, _, r in checked}:
            idx = [i for i, (_, _, r) in enumerate(checked) if r.scene_id == scene_id]
            views = [(checked[i][2].camera_intrinsics.logical_id, images[i]) for i in idx]
            for i, img in zip(idx, self.generated(checked[idx[0]][0], views)):
                out[i] = img
        return out


def serve(root: Path, options: ServerOptions, generated: Generated | None = None) -> tuple[grpc.Server, int]:
    """Start the sensor simulator on `options.host:options.port`.

    Args:
        root: SCENARIOS (a scenario folder, or a folder of them).
        options: address, threads, bounds, rendering.
        generated: the generated-images hook (`--generated`), or None.

    Returns:
        The started server and the port it listens on.
    """
    catalog = SceneCatalog(Path(root), options.max_loaded, options.backend, True, options.rolling_bands)
    return start(SensorsimServer(catalog, generated, options), options)


def start(servicer: SensorsimServer, options: ServerOptions) -> tuple[grpc.Server, int]:
    """Start a gRPC server for `servicer` on `options.host:options.port` (`serve` with the servicer made by the caller).

    Args:
        servicer: the sensor simulator.
        options: address, threads, bounds.

    Returns:
        The started server and the port it listens on.
    """
    threads = options.rpc_threads
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="sensorsim"), maximum_concurrent_rpcs=threads,
                         options=[("grpc.max_receive_message_length", int(options.max_request_bytes)),
                                  ("grpc.max_send_message_length", MAX_RESPONSE_BYTES),
                                  ("grpc.so_reuseport", 0)])  # fmt: skip  # a port in use is an error, not shared
    sensorsim_pb2_grpc.add_SensorsimServiceServicer_to_server(servicer, server)
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
