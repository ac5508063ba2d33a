"""Native format speed and size: save_scenario / load_scenario on synthetic scenarios.

Run: .venv/bin/python bench/bench_io.py [--repeat 3]

Sizes: "clip" = a 20 s, 30 Hz clip with the 7-camera rig, 60 agents observed every frame and a
city-block map; "city" = the same clip over a 10x larger map (about 0.4 M map vertices).
Prints a table with the machine and library versions.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

import avsim
from avsim.core.agents import AgentTracks
from avsim.core.lights import TrafficLightStates
from avsim.core.rig import cosmos_rig
from avsim.core.trajectory import EgoTrajectory
from avsim.core.transforms import SE3, yaw_to_quat
from avsim.maps import Cuboids, HDMap, LaneLines, Lanes, Polygons, Polylines
from avsim.scenario import Scenario
from avsim.scenario.io import load_scenario, save_scenario


def _lines(rng: np.random.Generator, prefix: str, k: int, n: int, cls: type = Polylines) -> Polylines:
    start = rng.uniform(-500, 500, size=(k, 1, 3))
    steps = rng.normal(scale=1.0, size=(k, n, 3)).cumsum(axis=1)
    return cls.from_list([f"{prefix}{i}" for i in range(k)], list(start + steps))


def make(map_scale: int, seed: int = 0) -> Scenario:
    rng = np.random.default_rng(seed)
    t = (np.arange(600) * (1e9 / 30)).astype(np.int64)
    yaw = np.linspace(0, 1, 600)
    ego = EgoTrajectory(t, SE3.from_yaw(yaw, np.stack([np.arange(600) * 0.3, np.zeros(600), np.zeros(600)], -1)))
    n_agents = 60
    ids = np.repeat([f"agent{i:03d}" for i in range(n_agents)], 600)
    agents = AgentTracks(
        ids, np.repeat(["car"] * n_agents, 600), np.tile(t, n_agents), rng.normal(size=(600 * n_agents, 3)),
        rng.uniform(1, 5, size=(600 * n_agents, 3)), yaw_to_quat(rng.uniform(-3, 3, 600 * n_agents)),
    )  # fmt: skip
    k = 200 * map_scale
    lines = _lines(rng, "ll", k, 60)
    m = len(lines.points_m)
    lane_lines = LaneLines(lines, np.full(k, "WHITE"), np.full(k, "SOLID_SINGLE"), np.full(m, "WHITE"), np.full(m, "SOLID_SINGLE"))
    lanes = Lanes(np.array([f"lane{i}" for i in range(k)]), _lines(rng, "L", k, 30), _lines(rng, "R", k, 30), _lines(rng, "C", k, 30))
    cub = Cuboids(np.array([f"c{i}" for i in range(k // 4)]), rng.normal(size=(k // 4, 3)), np.ones((k // 4, 3)), yaw_to_quat(np.zeros(k // 4)))
    hd_map = HDMap.build(
        lane_lines=lane_lines, lanes=lanes, road_boundaries=_lines(rng, "rb", k // 2, 80),
        crosswalks=_lines(rng, "cw", k // 10, 4, Polygons), traffic_lights=cub, traffic_signs=cub,
    )  # fmt: skip
    lights = TrafficLightStates.from_unsorted(np.repeat(cub.ids[:20], 10), np.tile(t[::60], 20), np.tile(["red", "green"] * 5, 20))
    return Scenario(f"bench-{map_scale}", cosmos_rig(), ego, agents, hd_map, lights, {"bench": True})


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''} cpus={os.cpu_count()} | python {platform.python_version()}"
          f" | avsim {avsim.__version__} | polars {pl.__version__} | numpy {np.__version__}")  # fmt: skip
    print(f"{'case':<6} {'agent rows':>10} {'map vertices':>12} {'size MB':>8} {'save s':>7} {'load s':>7}")
    for name, scale in (("clip", 1), ("city", 10)):
        scenario = make(scale)
        vertices = sum(
            len(getattr(scenario.map, e).points_m) for e in ("road_boundaries", "crosswalks")
        ) + len(scenario.map.lane_lines.lines.points_m) + 3 * len(scenario.map.lanes.centre.points_m)
        tmp = Path(tempfile.mkdtemp())
        saves, loads = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            save_scenario(scenario, tmp / "s")
            saves.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            load_scenario(tmp / "s")
            loads.append(time.perf_counter() - t0)
        size = _folder_bytes(tmp / "s") / 1e6
        shutil.rmtree(tmp)
        print(f"{name:<6} {len(scenario.agents):>10} {vertices:>12} {size:>8.1f} {min(saves):>7.2f} {min(loads):>7.2f}")


if __name__ == "__main__":
    main()
