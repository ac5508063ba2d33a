"""Closed-loop simulator speed and memory (docs/closed_loop.md, "Speed"), each row measured in one run.

Rows (the sample scenario, seed 0, 20 s at 10 Hz; every ratio is of numbers taken in this process):

1. box-level stepping, no cameras, reactive (IDM) agents, one core (threads pinned to one CPU):
   steps per second of `Simulator.step` under a constant `Control` (the stepper's own cost), and
   with every built-in policy: constant-velocity and expert (their call and the LQR tracker / perfect
   tracking included) and the IDM planner (`idm`, PDM-Closed-like: its first 50 steps). Goal: >= 2,000 steps/s.
2. the same with log-replayed agents (the floor: no agent model).
3. 7 cameras at 1280x720 rendered every step (`RenderedControlSource`, numba, 2 threads):
   steps per second on 2 cores. Goal: >= 10 (real time).
4. 10x the agents: ten samples (seeds 0..9) laid side by side 400 m apart in one scenario, every
   agent an IDM agent, against the 1x sample: step time ratio. Goal: <= 1.5x.
5. memory over episode length: RSS growth from step 200 to step 2,000 of one long IDM episode,
   per step, beside the recorder's own bytes per step (what the rollout must keep). Goal: flat,
   i.e. growth no larger than the record.

Times are the process's CPU time (rows 1, 2, 4, 5: one thread) and the best of `--repeats` rounds,
the cases interleaved; row 3 also gives the wall clock.

    python bench/sim.py            # about 5 minutes on 2 cores
    python bench/sim.py --rows 1,4
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

PLANNER_STEPS = 50  # the IDM planner's row: its first 5 s (a whole episode takes about 13 s of CPU a round)


def _sample(seed: int = 0) -> Any:
    from avsim.scenario.sample import make_sample_scenario

    return make_sample_scenario(seed=seed, duration_s=20.0, fps=10.0)


_ALL_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def _pin(cpus: int) -> str:
    """Pin the process to the first `cpus` of the CPUs it started with (where the OS allows); returns what it did."""
    if hasattr(os, "sched_setaffinity"):
        avail = _ALL_CPUS
        os.sched_setaffinity(0, avail[:cpus])
        return f"pinned to CPU {avail[:cpus]}"
    return "not pinned"


def step_rate(scenario: Any, agents: str, policy: str, steps: int | None = None, source: Any = None, controller: str = "lqr",
              cpu_time: bool = True) -> tuple[float, int]:  # fmt: skip
    """(steps per second, steps) of one episode after `reset` (the policy's calls included, scoring not), by
    the process's CPU time (one thread: what it would take on an idle core; the shared machine's wall
    clock is not) or, with `cpu_time=False`, the wall clock."""
    from avsim.sim.actions import Control, parse_action
    from avsim.sim.episode import reset_policy
    from avsim.sim.policies import load_policy
    from avsim.sim.stepper import SimConfig, Simulator

    sim = Simulator(scenario, SimConfig(agents=agents, steps=steps, controller=controller), source)
    obs = sim.reset()
    pol = None if policy == "control" else load_policy(policy)
    if pol is not None:
        assert sim.episode is not None
        reset_policy(pol, sim.episode)
    zero = Control(0.0, 0.0)
    t0 = time.process_time() if cpu_time else time.perf_counter()
    while not sim.done:
        obs = sim.step(zero if pol is None else parse_action(pol(obs), sim.dt_s))
    dt = (time.process_time() if cpu_time else time.perf_counter()) - t0
    sim.source.close()
    return sim.k / dt, sim.k


def best_rates(cases: list[tuple[Any, ...]], repeats: int) -> list[float]:
    """The best (highest) steps per second of each case over `repeats` rounds, the cases interleaved in
    every round (the shared machine's speed drifts; interleaving keeps the ratios fair)."""
    best = [0.0] * len(cases)
    for _ in range(repeats):
        for i, case in enumerate(cases):
            best[i] = max(best[i], step_rate(*case)[0])
    return best


def tiled(n: int, spacing_m: float = 400.0) -> Any:
    """`n` samples (seeds 0..n-1) side by side, `spacing_m` apart along x, in one scenario (the ego of seed 0)."""
    from dataclasses import replace

    from avsim.core.agents import AgentTracks
    from avsim.core.lights import TrafficLightStates
    from avsim.maps import HDMap
    from avsim.maps.elements import Cuboids, LaneLines, Lanes, Polygons, Polylines

    def shift(el: Any, k: int) -> Any:
        dx, tag = np.array([k * spacing_m, 0.0, 0.0]), f"t{k}_"
        if isinstance(el, LaneLines):
            return replace(el, lines=shift(el.lines, k))
        if isinstance(el, Lanes):
            return Lanes(np.char.add(tag, el.ids.astype(str)), shift(el.left, k), shift(el.right, k), shift(el.centre, k))
        if isinstance(el, Cuboids):
            return replace(el, ids=np.char.add(tag, el.ids.astype(str)), center_m=el.center_m + dx)
        cls = Polygons if isinstance(el, Polygons) else Polylines
        return cls(np.char.add(tag, el.ids.astype(str)), el.points_m + dx, el.offsets)

    scs = [_sample(k) for k in range(n)]
    maps = [HDMap.build(**{name: shift(getattr(s.map, name), k) for name in s.map.element_counts()}) for k, s in enumerate(scs)]
    merged = {name: _concat([getattr(m, name) for m in maps]) for name in maps[0].element_counts()}
    agents = AgentTracks.concat([replace(s.agents, track_id=np.char.add(f"t{k}_", s.agents.track_id.astype(str)),
                                         center_m=s.agents.center_m + [k * spacing_m, 0.0, 0.0]) for k, s in enumerate(scs)])  # fmt: skip
    lights = TrafficLightStates.from_unsorted(*(np.concatenate(c) for c in zip(*[
        (np.char.add(f"t{k}_", s.lights.light_id.astype(str)), s.lights.timestamps_ns, s.lights.state) for k, s in enumerate(scs)])))  # fmt: skip
    meta = dict(scs[0].metadata)
    meta["lane_successors"] = {f"t{k}_{a}": [f"t{k}_{b}" for b in bs] for k, s in enumerate(scs) for a, bs in s.metadata["lane_successors"].items()}
    meta["traffic_light_lanes"] = {f"t{k}_{a}": [f"t{k}_{b}" for b in bs] for k, s in enumerate(scs)
                                   for a, bs in s.metadata["traffic_light_lanes"].items()}  # fmt: skip
    return scs[0].replace(scenario_id=f"sample_x{n}", map=HDMap.build(**merged), agents=agents, lights=lights, metadata=meta)


def _concat(parts: list[Any]) -> Any:
    from avsim.maps.elements import Cuboids, LaneLines, Lanes

    first = parts[0]
    if isinstance(first, LaneLines):
        return LaneLines(_concat([p.lines for p in parts]), np.concatenate([p.color for p in parts]), np.concatenate([p.style for p in parts]))
    if isinstance(first, Lanes):
        return Lanes(np.concatenate([p.ids for p in parts]), _concat([p.left for p in parts]), _concat([p.right for p in parts]),
                     _concat([p.centre for p in parts]))  # fmt: skip
    if isinstance(first, Cuboids):
        return Cuboids(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("ids", "center_m", "size_m", "orientation")))
    cls = type(first)
    return cls.from_list(np.concatenate([p.ids for p in parts]), [pts for p in parts for pts in p])


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory_row(scenario: Any) -> dict[str, float]:
    """RSS at steps 200 and 2,000 of one long IDM episode, and the recorder's bytes per step."""
    from avsim.sim.actions import Control
    from avsim.sim.stepper import SimConfig, Simulator

    sim = Simulator(scenario, SimConfig(agents="idm", steps=2000))
    sim.reset()
    rss = {}
    while not sim.done:
        sim.step(Control(0.0, 0.0))
        if sim.k in (200, 2000):
            rss[sim.k] = _rss_mib()
    assert sim.recorder is not None
    return {"rss_200": rss[200], "rss_2000": rss[2000], "growth_per_step_b": (rss[2000] - rss[200]) * 2**20 / 1800,
            "record_per_step_b": sim.recorder.bytes_per_step()}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1,2,3,4,5", help="which rows to run (1-5)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per case (the best round counts)")
    args = parser.parse_args()
    rows = {int(r) for r in args.rows.split(",")}
    sample = _sample()
    results: list[str] = []
    if rows & {1, 2, 4, 5}:
        pinned = _pin(1)
        step_rate(sample, "idm", "control", steps=20)  # warm caches
        if 1 in rows:
            cases = [(sample, "idm", policy, steps, None, ctrl) for policy, ctrl, steps in
                     (("control", "lqr", None), ("constant-velocity", "lqr", None), ("expert", "perfect", None), ("idm", "lqr", PLANNER_STEPS))]  # fmt: skip
            for (_, _, policy, steps, _, ctrl), rate in zip(cases, best_rates(cases, args.repeats)):
                span = "" if steps is None else f", first {steps} steps"
                results.append(f"| 1 | box-level, IDM agents, policy {policy} ({ctrl}{span}), 1 core ({pinned}) | {rate:,.0f} steps/s ({1e6 / rate:.0f} us/step) | >= 2,000 steps/s | {rate / 2000:.2f}x goal |")
        if 2 in rows:
            rate = best_rates([(sample, "log", "control")], args.repeats)[0]
            results.append(f"| 2 | box-level, log agents, constant control, 1 core | {rate:,.0f} steps/s ({1e6 / rate:.0f} us/step) | (floor) | |")
        if 4 in rows:
            big = tiled(10)
            step_rate(big, "idm", "control", steps=10)
            one, ten = best_rates([(sample, "idm", "control"), (big, "idm", "control")], args.repeats)
            n1, n10 = len(sample.agents.track_ids), len(big.agents.track_ids)
            results.append(f"| 4 | 10x agents ({n10} tracks vs {n1}), IDM, constant control, 1 core | {1e6 / ten:.0f} vs {1e6 / one:.0f} us/step: {one / ten:.2f}x | <= 1.5x | {'meets' if one / ten <= 1.5 else f'misses by {one / ten / 1.5:.2f}x'} |")
        if 5 in rows:
            mem = memory_row(sample)
            results.append(f"| 5 | memory, IDM episode of 2,000 steps | RSS {mem['rss_200']:.0f} MiB at step 200, {mem['rss_2000']:.0f} MiB at 2,000: "
                           f"{mem['growth_per_step_b']:,.0f} B/step growth; the record keeps {mem['record_per_step_b']:,.0f} B/step | flat | |")
    if 3 in rows:
        from avsim.sim.render_source import RenderedControlSource

        pinned = _pin(2)
        step_rate(sample, "idm", "control", steps=3, source=RenderedControlSource(None, (1280, 720), workers=2))
        rate, n = step_rate(sample, "idm", "control", steps=60, source=RenderedControlSource(None, (1280, 720), workers=2), cpu_time=False)
        cpu_rate, _ = step_rate(sample, "idm", "control", steps=60, source=RenderedControlSource(None, (1280, 720), workers=2))
        results.append(f"| 3 | 7 cameras 1280x720 every step, numba, 2 threads ({pinned}) | {rate:.2f} steps/s wall ({n} steps); "
                       f"{2 * cpu_rate:.2f} steps/s from CPU time on 2 cores | >= 10 steps/s | {rate / 10:.2f}x goal (wall) |")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("| row | what | measured | goal | vs goal |\n|---|---|---|---|---|")
    print("\n".join(results))
    print(f"\npeak RSS {peak:.0f} MiB; python {sys.version.split()[0]}, numpy {np.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
