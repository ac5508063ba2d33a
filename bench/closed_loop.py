"""Closed-loop latency budget: where a step's and a chunk's time goes (docs/closed_loop.md, "Latency").

Rows (the sample scenario, seed 0; wall clock, this machine; every part measured in one run, and
each part measured directly: a stopwatch around the calls that make it up (`Stopwatch`, put in
place for the run), never a difference of separately measured medians, which goes negative under
load):

1. generated world (`--observe generated`), per chunk: forecast + control render of the chunk's
   frames, VAE encode (control and conditioning), sampling, VAE decode, drift figures (RNDS
   scores, CSE matching); per step: the policy (idm) and the rest of the step. The chunk reported
   is the last full one (conditioned on the previous chunk's frames), the model the CPU debug
   config with random weights (`--config`, `--views`).
2. an AlpaSim driver over gRPC (127.0.0.1), per step with 7 cameras of rendered control frames at
   `--size`: PNG encoding of the images, the gRPC calls (images, egomotion, route, drive) with a
   driver that answers at once, against an in-process policy call.
3. `avsim serve sensorsim`: one f-theta image at `--size` drawn in process, the same over gRPC
   (PNG encoding and transfer included), and the 7 cameras in one `render_aggregated`.

    python bench/closed_loop.py                  # about 2-4 minutes on 2 cores
    python bench/closed_loop.py --rows 2,3 --size 640x360

`chunk_budget` is also the GPU proof's closed-loop row (bench/gpu_check.py: one chunk of 7 views
at 720p with the 2B config).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

VIEWS7 = ("camera_front_wide_120fov", "camera_cross_right_120fov", "camera_rear_right_70fov", "camera_rear_tele_30fov",
          "camera_rear_left_70fov", "camera_cross_left_120fov", "camera_front_tele_30fov")  # fmt: skip
PHASES = {"VAE encode control": "vae_encode_s", "VAE encode conditioning": "vae_encode_s", "sampling": "sampling_s", "VAE decode": "vae_decode_s"}


class Stopwatch:
    """Wall time of every call of the functions it wraps, summed until `take` (one step's or one call's share)."""

    def __init__(self) -> None:
        self.spent = 0.0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - t0

        return timed

    def take(self) -> float:
        spent, self.spent = self.spent, 0.0
        return spent


@contextlib.contextmanager
def timing(owner: Any, name: str, watch: Stopwatch) -> Iterator[Stopwatch]:
    """`owner.name` (a module's function, a class's method) wrapped by `watch` while the block runs."""
    original = getattr(owner, name)
    setattr(owner, name, watch.wrap(original))
    try:
        yield watch
    finally:
        setattr(owner, name, original)


class _TimedPolicy:
    """A policy whose calls a stopwatch times (its other attributes, `reset` included, are the policy's)."""

    def __init__(self, policy: Any, watch: Stopwatch) -> None:
        self._policy, self._call = policy, watch.wrap(policy)

    def __call__(self, observation: Any) -> Any:
        return self._call(observation)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)


class PhaseTimer:
    """A `StepProgress` that sums the wall time of the pipeline's steps (from a step's 0 to its last unit)."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.spent: dict[str, float] = {}

    def __call__(self, step: str, done: int, total: int) -> None:
        if done == 0:
            self.started[step] = time.perf_counter()
        elif done == total and step in self.started:
            key = PHASES.get(step, step)
            self.spent[key] = self.spent.get(key, 0.0) + time.perf_counter() - self.started.pop(step)

    def take(self) -> dict[str, float]:
        out, self.spent = self.spent, {}
        return out


def chunk_budget(config: str = "debug", views: tuple[str, ...] = VIEWS7, device: str | None = None, steps: int | None = None,
                 chunks: int = 2, policy: str = "idm") -> dict[str, Any]:  # fmt: skip
    """Drive the sample with generated frames for `chunks` chunks and time the last one and the steps.

    Args:
        config: the model config (random weights).
        views: the cameras generated.
        device: torch device (None: cuda when present).
        steps: sampling steps (None: the config's).
        chunks: chunks to drive (the last is reported; 1: the first, unconditioned).
        policy: the policy's name.

    Returns:
        load_s; per chunk (the last): render_s, vae_encode_s, sampling_s, vae_decode_s, drift_s,
        generation_s, chunk_s; per step: policy_s (the policy call) and other_s (`sim.step`), each timed around
        its own calls, medians over the steps that made no chunk.
    """
    from avsim.scenario.sample import make_sample_scenario
    from avsim.sim.chunks import ChunkSchedule
    from avsim.sim.episode import run_episode
    from avsim.sim.generated.generator import ChunkGenerator
    from avsim.sim.generated.options import GenerationOptions
    from avsim.sim.generated.source import GeneratedSource
    from avsim.sim.policies import load_policy
    from avsim.sim.stepper import SimConfig, Simulator

    timer = PhaseTimer()
    options = GenerationOptions(config=config, random_weights=True, device=device, steps=steps)
    generator = ChunkGenerator(options, views, progress=timer)
    schedule = ChunkSchedule(generator.config.frames_per_chunk, options.overlap)
    n_steps = schedule.start(chunks) - 1
    t0 = time.perf_counter()
    generator.load()
    load_s = time.perf_counter() - t0
    timer.take()
    per_chunk: list[dict[str, float]] = []
    source = GeneratedSource(generator, on_chunk=lambda c, steps, n: per_chunk.append(timer.take()) if c else None)
    sim = Simulator(make_sample_scenario(0, duration_s=n_steps / 10 + 1.0), SimConfig(steps=n_steps), source)
    calls, steps_watch = Stopwatch(), Stopwatch()
    per_step: list[tuple[float, float]] = []  # (policy call, sim.step) of each step, both timed around the calls
    sim.step = steps_watch.wrap(sim.step)  # type: ignore[method-assign]
    run_episode(sim, _TimedPolicy(load_policy(policy), calls), float("inf"), on_step=lambda k: per_step.append((calls.take(), steps_watch.take())))
    per_chunk.append(timer.take())
    source.close()
    last = source.chunks[-1].timing()
    chunk_steps = {schedule.start(c) for c in range(chunks)}
    plain = [per_step[i] for i in range(1, len(per_step)) if i + 1 not in chunk_steps]  # step i -> i + 1 made no chunk
    out = {"config": config, "views": len(views), "size": list(generator.size), "frames": schedule.frames, "sampling_steps": steps,
           "load_s": load_s, "render_s": last["render_s"], **{k: per_chunk[-1].get(k, 0.0) for k in ("vae_encode_s", "sampling_s", "vae_decode_s")},
           "drift_s": last["drift_s"], "generation_s": last["generation_s"]}  # fmt: skip
    out["chunk_s"] = out["render_s"] + out["generation_s"] + out["drift_s"]
    out["policy_s"] = float(np.median([p for p, _ in plain])) if plain else float("nan")
    out["other_s"] = float(np.median([s for _, s in plain])) if plain else float("nan")
    return out


class _AnsweringDriver:
    """An egodriver that answers every call at once (drive: the ego's pose, straight on at 5 m/s)."""

    def __new__(cls) -> Any:
        from avsim.sim.alpasim.protos import common_pb2, egodriver_pb2, egodriver_pb2_grpc

        class Driver(egodriver_pb2_grpc.EgodriverServiceServicer):  # type: ignore[misc]
            last: Any = None

            def start_session(self, request: Any, context: Any) -> Any:
                return common_pb2.SessionRequestStatus()

            def close_session(self, request: Any, context: Any) -> Any:
                return common_pb2.Empty()

            def submit_image_observation(self, request: Any, context: Any) -> Any:
                return common_pb2.Empty()

            def submit_route(self, request: Any, context: Any) -> Any:
                return common_pb2.Empty()

            def submit_egomotion_observation(self, request: Any, context: Any) -> Any:
                self.last = request.trajectory.poses[-1]
                return common_pb2.Empty()

            def drive(self, request: Any, context: Any) -> Any:
                p = self.last.pose
                yaw = float(np.arctan2(2 * (p.quat.w * p.quat.z + p.quat.x * p.quat.y), 1 - 2 * (p.quat.y**2 + p.quat.z**2)))
                poses = [common_pb2.PoseAtTime(pose=common_pb2.Pose(vec=common_pb2.Vec3(x=p.vec.x + 0.5 * i * np.cos(yaw), y=p.vec.y + 0.5 * i * np.sin(yaw),
                                                                                        z=p.vec.z), quat=p.quat),
                                               timestamp_us=request.time_now_us + 100_000 * i) for i in range(41)]  # fmt: skip
                return egodriver_pb2.DriveResponse(trajectory=common_pb2.Trajectory(poses=poses))

        return Driver()


def driver_budget(size: tuple[int, int], steps: int = 10) -> dict[str, Any]:
    """Per step (medians over the steps after the first): the whole policy call, and inside it the PNG
    encoding of the 7 control images and the gRPC calls, each timed around its own calls; against an
    in-process policy."""
    import grpc

    from avsim.scenario.sample import make_sample_scenario
    from avsim.sim.alpasim import driver as driver_module
    from avsim.sim.alpasim.driver import AlpasimDriverPolicy
    from avsim.sim.alpasim.protos import egodriver_pb2_grpc
    from avsim.sim.episode import run_episode
    from avsim.sim.policies import ConstantVelocityPolicy
    from avsim.sim.render_source import RenderedControlSource
    from avsim.sim.stepper import SimConfig, Simulator

    scenario = make_sample_scenario(0, duration_s=steps / 10 + 1.0)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    egodriver_pb2_grpc.add_EgodriverServiceServicer_to_server(_AnsweringDriver(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    calls, png, rpc = Stopwatch(), Stopwatch(), Stopwatch()
    per_step: list[tuple[float, float, float]] = []  # (whole call, PNG, gRPC) of each step
    try:
        source = RenderedControlSource(None, size)
        sim = Simulator(scenario, SimConfig(steps=steps), source)
        policy = AlpasimDriverPolicy(f"alpasim://127.0.0.1:{port}", 10.0, rig=lambda: source.rig)
        with timing(driver_module, "_encoded", png), timing(AlpasimDriverPolicy, "_rpc", rpc):
            run_episode(sim, _TimedPolicy(policy, calls), float("inf"), on_step=lambda k: per_step.append((calls.take(), png.take(), rpc.take())))
        cameras = len(source.frames(sim.frame_state()))
        source.close()
    finally:
        server.stop(grace=None)
    sim = Simulator(scenario, SimConfig(steps=steps))
    local = Stopwatch()
    local_steps: list[float] = []
    run_episode(sim, _TimedPolicy(ConstantVelocityPolicy(), local), float("inf"), on_step=lambda k: local_steps.append(local.take()))
    later = per_step[1:]  # step 0 opens the connection
    whole, encode, grpc_s = (float(np.median([s[j] for s in later])) for j in range(3))
    rest = float(np.median([s[0] - s[1] - s[2] for s in later]))  # the call's own time outside both (one interval, >= 0)
    return {"cameras": cameras, "size": list(size), "policy_call_s": whole, "png_encode_s": encode, "grpc_s": grpc_s, "rest_s": rest,
            "in_process_policy_s": float(np.median(local_steps[1:]))}  # fmt: skip


def sensorsim_budget(size: tuple[int, int], repeats: int = 5) -> dict[str, Any]:
    """One f-theta image drawn in process and over gRPC, and the 7 cameras in one aggregated call."""
    import tempfile

    import grpc

    from avsim.render.raster.primitives import ray_map
    from avsim.scenario.io import save_scenario
    from avsim.scenario.sample import make_sample_scenario
    from avsim.sim.alpasim import server as server_module
    from avsim.sim.alpasim.frames import LocalFrame, camera_spec, pose_to_proto
    from avsim.sim.alpasim.protos import sensorsim_pb2, sensorsim_pb2_grpc
    from avsim.sim.alpasim.render_requests import frame_request
    from avsim.sim.alpasim.server import ServerOptions, serve

    scenario = make_sample_scenario(0, duration_s=3.0)
    with tempfile.TemporaryDirectory() as tmp:
        save_scenario(scenario, Path(tmp) / "s")
        server, port = serve(Path(tmp) / "s", ServerOptions())
        try:
            stub = sensorsim_pb2_grpc.SensorsimServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 2**28)]))
            frame, t_ns = LocalFrame.of(scenario), int(scenario.frame_times(10.0)[5])
            ego = frame.to_local(scenario.ego.pose_at(np.array([t_ns]))[0])
            reqs = []
            for name in scenario.rig.names:
                cam = pose_to_proto(ego.compose(scenario.rig.extrinsic(name)))
                reqs.append(sensorsim_pb2.RGBRenderRequest(scene_id=scenario.scenario_id, resolution_w=size[0], resolution_h=size[1],
                                                           camera_intrinsics=camera_spec(name, scenario.rig.camera(name)), frame_start_us=t_ns // 1000,
                                                           frame_end_us=t_ns // 1000, sensor_pose=sensorsim_pb2.PosePair(start_pose=cam, end_pose=cam)))  # fmt: skip
            stub.render_rgb(reqs[0])  # warm: scene load, ray maps, kernels
            stub.render_aggregated(sensorsim_pb2.AggregatedRenderRequest(rgb_requests=reqs))
            scene = server_scene(tmp, scenario.scenario_id)
            first = frame_request(scene, reqs[0])
            rays = ray_map(first.camera)  # as the server keeps it
            local = _best(lambda: scene.render(frame_request(scene, reqs[0]), rays), repeats)
            draw, png = Stopwatch(), Stopwatch()  # inside the server, around its draw and its PNG encoding
            parts = []
            with timing(type(scene), "render", draw), timing(server_module, "encode", png):
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    stub.render_rgb(reqs[0])
                    call = time.perf_counter() - t0
                    parts.append((call, draw.take(), png.take()))
            seven = _best(lambda: stub.render_aggregated(sensorsim_pb2.AggregatedRenderRequest(rgb_requests=reqs)), max(repeats // 2, 1))
        finally:
            server.stop(grace=None)
    best = min(parts)  # the fastest call, with its own parts
    return {"size": list(size), "in_process_s": local, "render_rgb_s": best[0], "server_draw_s": best[1], "png_s": best[2],
            "grpc_s": best[0] - best[1] - best[2], "aggregated_7_s": seven}  # fmt: skip


def server_scene(root: str, scene_id: str) -> Any:
    """A scene loaded as the server loads it (for the in-process figure)."""
    from avsim.sim.alpasim.scenes import SceneCatalog

    return SceneCatalog(Path(root) / "s").scene(scene_id)


def _best(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _ms(x: float) -> str:
    return f"{1000 * x:,.1f} ms" if x < 10 else f"{x:,.1f} s"


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| where | part | time |", "|---|---|---|"]
    if "chunk" in results:
        c = results["chunk"]
        where = f"chunk ({c['config']}, {c['views']} views x {c['frames']} frames at {c['size'][0]}x{c['size'][1]})"
        for key, label in (("render_s", "forecast + control render"), ("vae_encode_s", "VAE encode (control + conditioning)"),
                           ("sampling_s", "sampling"), ("vae_decode_s", "VAE decode"), ("drift_s", "drift figures (RNDS, CSE)"),
                           ("chunk_s", "whole chunk"), ("load_s", "model load (once)")):  # fmt: skip
            lines.append(f"| {where} | {label} | {_ms(c[key])} |")
        lines.append(f"| step (no chunk made) | policy (idm) | {_ms(c['policy_s'])} |")
        lines.append(f"| step (no chunk made) | stepper, frame hand-off | {_ms(c['other_s'])} |")
    if "driver" in results:
        d = results["driver"]
        where = f"step, alpasim:// driver, {d['cameras']} cameras at {d['size'][0]}x{d['size'][1]}"
        for key, label in (("png_encode_s", "PNG encoding"), ("grpc_s", "gRPC calls (images, egomotion, route, drive)"),
                           ("rest_s", "the rest of the call"), ("policy_call_s", "whole policy call"),
                           ("in_process_policy_s", "in-process policy (constant velocity)")):  # fmt: skip
            lines.append(f"| {where} | {label} | {_ms(d[key])} |")
    if "sensorsim" in results:
        s = results["sensorsim"]
        where = f"avsim serve sensorsim, f-theta at {s['size'][0]}x{s['size'][1]}"
        for key, label in (("in_process_s", "one image drawn in process"), ("render_rgb_s", "render_rgb over gRPC (PNG)"),
                           ("server_draw_s", "of which the server's draw"), ("png_s", "of which PNG encoding"),
                           ("grpc_s", "of which gRPC and the rest"), ("aggregated_7_s", "render_aggregated, 7 cameras")):  # fmt: skip
            lines.append(f"| {where} | {label} | {_ms(s[key])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="1,2,3")
    p.add_argument("--config", default="debug")
    p.add_argument("--views", type=int, default=7)
    p.add_argument("--size", default="1280x720", help="rows 2 and 3: image size WxH")
    p.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = p.parse_args(argv)
    rows = {r.strip() for r in args.rows.split(",")}
    w, h = (int(v) for v in args.size.split("x"))
    results: dict[str, dict[str, Any]] = {}
    if "1" in rows:
        results["chunk"] = chunk_budget(args.config, VIEWS7[: args.views])
    if "2" in rows:
        results["driver"] = driver_budget((w, h))
    if "3" in rows:
        results["sensorsim"] = sensorsim_budget((w, h))
    print(table(results))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
