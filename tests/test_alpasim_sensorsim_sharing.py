"""`avsim serve sensorsim` shares CPU and memory between requests (`avsim.sim.alpasim.scheduling`): a small request is
served while large ones draw, a cancelled request stops and frees its slot, requests over the memory budget are refused
with the bound named, the ray-map cache is bounded in bytes, and the estimate covers what drawing allocates.

The tests hold a large request inside the server (a wrapper around its ray-map cache) and assert what happens meanwhile:
orderings and states, never wall-clock thresholds, so they hold on a machine at 8x load."""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from avsim.core.cameras import PinholeCamera
from avsim.scenario import Scenario
from avsim.scenario.io import save_scenario
from avsim.scenario.sample import make_sample_scenario
from avsim.sim.alpasim.frames import LocalFrame, camera_spec, pose_to_proto
from avsim.sim.alpasim.protos import sensorsim_pb2, sensorsim_pb2_grpc
from avsim.sim.alpasim.render_requests import encode, frame_request
from avsim.sim.alpasim.scenes import SceneCatalog
from avsim.sim.alpasim.scheduling import MIB, Cancelled, RayMapCache, Refused, RenderScheduler, request_bytes
from avsim.sim.alpasim.server import SensorsimServer, ServerOptions, start

CAMERA = "camera_front_wide_120fov"
LARGE, SMALL = (2048, 2048), (64, 64)
WAIT_S = 600.0  # generous: a loaded machine is slow, never wrong


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sharing") / "s"
    save_scenario(make_sample_scenario(0, duration_s=2.0), root)
    return root


def _request(s: Scenario, size: tuple[int, int]) -> sensorsim_pb2.RGBRenderRequest:
    """The front camera of the scene's ego at its fourth frame, at `size`."""
    t_ns = int(s.frame_times(10.0)[3])
    pose = pose_to_proto(LocalFrame.of(s).to_local(s.ego.pose_at(np.array([t_ns]))[0]).compose(s.rig.extrinsic(CAMERA)))
    return sensorsim_pb2.RGBRenderRequest(scene_id=s.scenario_id, resolution_w=size[0], resolution_h=size[1],
                                          camera_intrinsics=camera_spec(CAMERA, s.rig.camera(CAMERA)), frame_start_us=t_ns // 1000,
                                          frame_end_us=t_ns // 1000, sensor_pose=sensorsim_pb2.PosePair(start_pose=pose, end_pose=pose))  # fmt: skip


class Server:
    """A sensor simulator in this process (its servicer at hand) and a client stub."""

    def __init__(self, root: Path, options: ServerOptions) -> None:
        self.servicer = SensorsimServer(SceneCatalog(root), None, options)
        self.server, port = start(self.servicer, options)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = sensorsim_pb2_grpc.SensorsimServiceStub(self.channel)
        self.scenario = self.servicer.catalog.scene(self.servicer.catalog.scene_ids[0]).scenario

    def request(self, size: tuple[int, int]) -> sensorsim_pb2.RGBRenderRequest:
        return _request(self.scenario, size)

    def hold(self, width_px: int) -> tuple[threading.Event, threading.Event]:
        """Requests for cameras `width_px` wide stop inside the server before their ray map until `release` is set;
        `started` is set when the first arrives. Returns (started, release)."""
        started, release = threading.Event(), threading.Event()
        real = self.servicer.rays.get

        def get(camera, between_blocks=None):  # type: ignore[no-untyped-def]
            if camera.width_px == width_px:
                started.set()
                release.wait(WAIT_S)
            return real(camera, between_blocks)

        self.servicer.rays.get = get  # type: ignore[method-assign]
        return started, release

    def close(self) -> None:
        self.channel.close()
        self.server.stop(grace=None)


@pytest.fixture()
def server(scenes: Path, request: pytest.FixtureRequest) -> Iterator[Server]:
    opts = getattr(request, "param", {})
    srv = Server(scenes, ServerOptions(workers=2, max_memory_mib=512, **opts))
    yield srv
    srv.close()


def _until(predicate, timeout_s: float = WAIT_S) -> bool:  # type: ignore[no-untyped-def]
    done = threading.Event()
    end = threading.Timer(timeout_s, done.set)
    end.start()
    try:
        while not done.is_set():
            if predicate():
                return True
            done.wait(0.02)
        return bool(predicate())
    finally:
        end.cancel()


# ---- fairness and cancellation over gRPC --------------------------------------------------------------
@pytest.mark.distributed
def test_a_small_request_is_served_while_large_ones_draw_and_wait(server: Server) -> None:
    sched = server.servicer.scheduler
    large, small = server.request(LARGE), server.request(SMALL)
    assert request_bytes([(*LARGE, False, False)]) > sched.reserve_bytes >= request_bytes([(*SMALL, False, False)])  # large and small by the rule
    started, release = server.hold(LARGE[0])
    try:
        first = server.stub.render_rgb.future(large, timeout=WAIT_S)
        assert started.wait(WAIT_S)  # the first large request holds a render slot
        second = server.stub.render_rgb.future(large, timeout=WAIT_S)
        assert _until(lambda: len(sched._waiting_large) == 1)  # the second waits: 2 workers, at most 1 large at once
        image = server.stub.render_rgb(small, timeout=WAIT_S)  # served now, with both large requests still in the server
        assert not first.done() and not second.done() and len(image.image_bytes) > 0
    finally:
        release.set()
    assert len(first.result(timeout=WAIT_S).image_bytes) > 0 and len(second.result(timeout=WAIT_S).image_bytes) > 0
    assert _until(lambda: sched.running == 0 and sched.used_bytes == 0)


@pytest.mark.distributed
def test_a_cancelled_request_stops_drawing_and_frees_its_slot(server: Server) -> None:
    sched, cache = server.servicer.scheduler, server.servicer.rays
    blocks, started, ended = [], threading.Event(), threading.Event()
    real_get, real_wake = cache.get, sched.wake

    def wake() -> None:  # called when an RPC ends (cancelled here): the server has seen the cancellation
        ended.set()
        real_wake()

    def get(camera, between_blocks=None):  # type: ignore[no-untyped-def]
        def block() -> None:
            blocks.append(camera.width_px)
            if len(blocks) == 2:  # two blocks of the 16 of a 2048x2048 ray map drawn: the client cancels now
                started.set()
                assert ended.wait(WAIT_S)
            between_blocks()

        return real_get(camera, block if camera.width_px == LARGE[0] else between_blocks)

    sched.wake, cache.get = wake, get  # type: ignore[method-assign]
    call = server.stub.render_rgb.future(server.request(LARGE), timeout=WAIT_S)
    assert started.wait(WAIT_S)
    call.cancel()
    assert _until(lambda: sched.running == 0 and sched.used_bytes == 0)  # its slot and memory are back
    assert blocks == [LARGE[0]] * 2 and len(cache._maps) == 0  # not one block more, nothing half-made kept
    assert call.cancelled()
    assert len(server.stub.render_rgb(server.request(SMALL), timeout=WAIT_S).image_bytes) > 0


@pytest.mark.distributed
def test_a_cancelled_request_leaves_the_queue_at_once(server: Server) -> None:
    sched = server.servicer.scheduler
    started, release = server.hold(LARGE[0])
    try:
        first = server.stub.render_rgb.future(server.request(LARGE), timeout=WAIT_S)
        assert started.wait(WAIT_S)
        second = server.stub.render_rgb.future(server.request(LARGE), timeout=WAIT_S)
        assert _until(lambda: len(sched._waiting_large) == 1)
        second.cancel()
        assert _until(lambda: len(sched._waiting_large) == 0)  # gone from the queue while the first still draws
        assert not first.done() and sched.running == 1
    finally:
        release.set()
    assert len(first.result(timeout=WAIT_S).image_bytes) > 0


@pytest.mark.distributed
def test_requests_over_the_memory_budget_are_refused_with_the_bound(server: Server) -> None:
    cases = [
        (server.stub.render_rgb, server.request((8192, 8192)), "render_rgb needs about 1,160 MiB to draw; one request may use 384 MiB"),
        (server.stub.render_aggregated, sensorsim_pb2.AggregatedRenderRequest(rgb_requests=[server.request((1920, 1080))] * 64),
         "render_aggregated (64 images) needs about"),
    ]  # fmt: skip
    for call, req, text in cases:
        with pytest.raises(grpc.RpcError) as info:
            call(req, timeout=WAIT_S)
        details = info.value.details()
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and text in details and "--max-memory-mib 512" in details, details
        assert "\n" not in details
    assert server.servicer.scheduler.used_bytes == 0 and len(server.servicer.rays._maps) == 0  # refused before any work
    assert len(server.stub.render_rgb(server.request(SMALL), timeout=WAIT_S).image_bytes) > 0


# ---- the scheduler and the cache alone ----------------------------------------------------------------
def test_the_scheduler_keeps_a_slot_and_a_share_for_small_requests() -> None:
    sched = RenderScheduler(workers=3, budget_bytes=400 * MIB)  # reserve 100 MiB; one request at most 300 MiB; 2 large at once
    live = lambda: True  # noqa: E731
    with pytest.raises(Refused, match="needs about 301 MiB to draw; one request may use 300 MiB"), sched.admitted(301 * MIB, live, "x"):
        pass
    release = threading.Event()
    inside = [threading.Event() for _ in range(3)]

    def large(k: int) -> None:
        with sched.admitted(120 * MIB, live, "large"):
            inside[k].set()
            release.wait(WAIT_S)

    threads = [threading.Thread(target=large, args=(k,)) for k in range(3)]
    for t in threads[:2]:
        t.start()
    try:
        assert inside[0].wait(WAIT_S) and inside[1].wait(WAIT_S)  # two large requests draw (240 MiB)
        with sched.admitted(100 * MIB, live, "small"):  # the third slot and the reserve: admitted at once
            assert sched.running == 3
        threads[2].start()
        assert _until(lambda: len(sched._waiting_large) == 1)  # a third large one waits for a large slot
        assert not inside[2].is_set()
    finally:
        release.set()
        for t in threads:
            t.join(WAIT_S)
    assert inside[2].is_set() and sched.running == 0 and sched.used_bytes == 0


def test_the_scheduler_bounds_the_large_queue_and_drops_cancelled_waiters() -> None:
    sched = RenderScheduler(workers=1, budget_bytes=400 * MIB)  # one slot; 2 large may wait
    release, inside = threading.Event(), threading.Event()

    def hold() -> None:
        with sched.admitted(150 * MIB, lambda: True, "large"):
            inside.set()
            release.wait(WAIT_S)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(WAIT_S)
    gone = threading.Event()
    outcome: list[str] = []

    def wait_then_cancel() -> None:
        try:
            with sched.admitted(150 * MIB, lambda: not gone.is_set(), "large"):
                outcome.append("drawn")
        except Cancelled:
            outcome.append("cancelled")

    waiters = [threading.Thread(target=wait_then_cancel) for _ in range(2)]
    for w in waiters:
        w.start()
    assert _until(lambda: len(sched._waiting_large) == 2)
    with pytest.raises(Refused, match="busy: 2 large requests already wait"), sched.admitted(150 * MIB, lambda: True, "large"):
        pass
    gone.set()
    sched.wake()
    for w in waiters:
        w.join(WAIT_S)
    assert outcome == ["cancelled", "cancelled"] and len(sched._waiting_large) == 0 and sched.running == 1
    release.set()
    holder.join(WAIT_S)


def test_the_ray_map_cache_is_bounded_in_bytes() -> None:
    cams = [PinholeCamera(64, 64, f, f, 32.0, 32.0) for f in (50.0, 60.0, 70.0)]
    one = 64 * 64 * 2 * 4
    cache = RayMapCache(2 * one)
    for cam in cams:
        cache.get(cam)
    assert cams[0] not in cache and cams[1] in cache and cams[2] in cache and cache.bytes == 2 * one  # least recently used out
    big = PinholeCamera(128, 128, 50.0, 50.0, 64.0, 64.0)
    assert cache.get(big).shape == (128, 128, 2) and big not in cache and cache.bytes == 2 * one  # larger than the cache: made, not kept


@pytest.mark.slow
@pytest.mark.parametrize("shutter", [sensorsim_pb2.ShutterType.GLOBAL, sensorsim_pb2.ShutterType.ROLLING_TOP_TO_BOTTOM])
def test_the_estimate_covers_what_drawing_allocates(scenes: Path, shutter: int) -> None:
    """tracemalloc (numpy's and Python's allocations) while a 1024x576 image is cast, drawn and encoded as the server does."""
    catalog = SceneCatalog(scenes)
    scene = catalog.scene(catalog.scene_ids[0])
    r = _request(scene.scenario, (1024, 576))
    r.camera_intrinsics.shutter_type = shutter
    end = r.sensor_pose.end_pose
    end.vec.x += 1.0  # moving: a rolling shutter composes strips
    r.frame_end_us += 30_000
    req = frame_request(scene, r)
    scene.render(frame_request(scene, _request(scene.scenario, (32, 18))))  # kernels compiled, scene warm
    estimate = request_bytes([(1024, 576, scene.is_rolling(req), False)])
    tracemalloc.start()
    try:
        rays = RayMapCache(512 * MIB).get(req.camera)
        data = encode(scene.render(req, rays), r.image_format, r.image_quality)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(data) > 0 and scene.is_rolling(req) == (shutter != sensorsim_pb2.ShutterType.GLOBAL)
    assert estimate / 4 < peak < estimate, (peak / MIB, estimate / MIB)  # covered, and not by a vacuous margin
