"""avsim's scores against NAVSIM's own PDMScorer, on hand-built cases and on windows of real rollouts.

    NAVSIM_DEVKIT=/path/to/navsim NUPLAN_DEVKIT=/path/to/nuplan-devkit NAVSIM_PYTHON=/path/to/venv/bin/python \\
        python bench/navsim_compare.py [SCENARIO_FOLDER ...] [--policies expert,idm] [--starts 0,40,80,120] [--out DIR]

Each case is one 4 s window scored twice: by avsim (`avsim.sim.metrics.score_window`, what
`avsim sim` reports) and by NAVSIM's `PDMScorer` from the NAVSIM and nuplan-devkit sources
(`bench/navsim_scorer.py`, run by `NAVSIM_PYTHON` with both checkouts on its path: a virtual
environment of their own, e.g. numpy<2, shapely, pandas, scipy, geopandas, opencv and the few
modules nuplan's imports want). NAVSIM scores the log (in PDM-Closed's place) and the policy as
two proposals of one call, the log alone for its human penalty filter; EPDMS as its
`compute_final_scores`. The script prints every sub-score and EPDMS that differ (tolerance 1e-6)
and the count of cases that agree, and writes `OUT/cases.json`, `OUT/navsim.json` and
`OUT/report.json`.

Hand-built cases (`hand_cases`): a straight road with two lanes east, one west, a light-controlled
lane; at-fault and not-at-fault collisions, a static object, leaving the road, the oncoming lane,
a red light crossed, a window that starts inside a red zone, the log off the road (EP's mask), a
slower policy (EP's ratio), time to collision, lane keeping, harsh braking (HC), extended comfort.
Real windows: every SCENARIO_FOLDER (converted scenes) is driven by each policy with the log's
agents (NAVSIM scores the log and the policy among the same objects), and the windows starting
at `--starts` steps are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import shapely

REPO = Path(__file__).resolve().parents[1]
COMPARED = ("no_at_fault_collisions", "drivable_area_compliance", "driving_direction_compliance", "traffic_light_compliance",
            "ego_progress", "time_to_collision_within_bound", "lane_keeping", "history_comfort", "two_frame_extended_comfort",
            "epdms", "epdms_human_filtered")  # fmt: skip
NAVSIM_TYPE = {"Car": "VEHICLE", "Truck": "VEHICLE", "Pedestrian": "PEDESTRIAN", "Cyclist": "BICYCLE"}
MAP_MARGIN_M = 120.0
WINDOW_STEPS = 40
HISTORY_STEPS = 15


def _wkt_items(ids: list[str], geoms: list[Any], box: Any) -> list[dict[str, str]]:
    out = []
    for lid, g in zip(ids, geoms):
        if g is not None and not g.is_empty and shapely.intersects(g, box):
            out.append({"id": str(lid), "wkt": shapely.to_wkt(g, rounding_precision=-1)})
    return out


def export_case(name: str, policy: Any, human: Any, t0: int, t1: int, ec_states: tuple[Any, Any] | None) -> dict[str, Any]:
    """One window as NAVSIM's scorer reads it (see the module docstring).

    Args:
        name: the case's name.
        policy: the policy's `avsim.sim.scoring.Scene` (one sequence).
        human: the log's scene (one sequence, the same objects where the agents replay the log).
        t0, t1: the window.
        ec_states: (plan at t0, plan 0.5 s before) simulated states, or None.

    Returns:
        The case (plain JSON values).
    """
    from avsim.sim.vehicle import StateIndex

    road, route, veh = policy.road, policy.route, policy.vehicle
    xy = np.concatenate([policy.states[0, t0 : t1 + 1, :2], human.states[0, t0 : t1 + 1, :2]])
    box = shapely.box(*(xy.min(axis=0) - MAP_MARGIN_M), *(xy.max(axis=0) + MAP_MARGIN_M))
    world = policy.world
    objects = []
    for t in range(t0, t1 + 1):
        rows = np.arange(world.start[t], world.start[t + 1])
        b = world.boxes
        objects.append([{"token": str(b.track_id[r]), "type": NAVSIM_TYPE.get(str(b.object_class[r]), "GENERIC_OBJECT"),
                         "x": float(b.center_m[r, 0]), "y": float(b.center_m[r, 1]), "heading": float(b.yaw_rad[r]),
                         "length": float(b.size_m[r, 0]), "width": float(b.size_m[r, 1]), "height": float(b.size_m[r, 2]),
                         "vx": float(b.velocity_mps[r, 0]), "vy": float(b.velocity_mps[r, 1])} for r in rows])  # fmt: skip
    zones = policy.zone_lanes
    red = [[str(road.lane_ids[z]) for z, on in zip(zones.tolist(), policy.red[t].tolist()) if on] for t in range(t0, t1 + 1)]
    lo = max(t0 - HISTORY_STEPS, 0)
    history = policy.states[0, lo : t0].tolist() if t0 - lo >= 2 else []
    cl = route.centerline
    return {
        "name": name, "dt_s": policy.dt_s, "t0": t0,
        "vehicle": {"length_m": veh.length_m, "width_m": veh.width_m, "height_m": veh.height_m,
                    "rear_axle_to_center_m": veh.rear_axle_to_center_m, "wheel_base_m": veh.wheel_base_m},
        "states": [human.states[0, t0 : t1 + 1].tolist(), policy.states[0, t0 : t1 + 1].tolist()],
        "history": history, "objects": objects, "red": red,
        "lanes": _wkt_items(list(road.lane_ids), list(road.lane_polygons), box),
        "drivable": _wkt_items(["drivable"], [shapely.clip_by_rect(road.drivable, *box.bounds)], box),
        "intersections": _wkt_items(["intersection"], [shapely.clip_by_rect(road.intersection, *box.bounds)], box),
        "route_lane_ids": [str(road.lane_ids[k]) for k in np.flatnonzero(route.on_route)],
        "centerline": np.c_[cl.xy, cl.yaw].tolist(),
        "ec_states": None if ec_states is None else {"now": ec_states[0].tolist(), "prev": ec_states[1].tolist()},
        "state_index_x": int(StateIndex.X),
    }  # fmt: skip


def avsim_scores(policy: Any, human: Any, t0: int, t1: int, ec: float | None) -> dict[str, Any]:
    """avsim's scores of the window (`score_window`, what `avsim sim` reports)."""
    from avsim.sim.metrics import score_window

    raw, _ = score_window(policy, human, t0, t1, HISTORY_STEPS, ec, policy.config)
    out = {k: raw.get(k if k != "ego_progress" else "ego_progress") for k in COMPARED}
    out["human_failed"] = raw["human_failed"]
    return out


# ----------------------------------------------------------------------------- hand-built cases
def _road_scenario(ego_xy: Any, ego_yaw: Any, lights: list[tuple[float, str]]) -> Any:
    from avsim.core.agents import AgentTracks
    from avsim.core.lights import TrafficLightStates
    from avsim.core.rig import cosmos_rig
    from avsim.core.trajectory import EgoTrajectory
    from avsim.core.transforms import SE3
    from avsim.maps import HDMap, Lanes, Polygons, Polylines
    from avsim.scenario import Scenario

    lanes = {"E0a": ((-60.0, 0.0), (0.0, 0.0)), "E0b": ((0.0, 0.0), (20.0, 0.0)), "E0c": ((20.0, 0.0), (150.0, 0.0)),
             "E1": ((-60.0, 3.5), (150.0, 3.5)), "W0": ((150.0, -3.5), (-60.0, -3.5))}  # fmt: skip

    def line(a: Any, b: Any, off: float = 0.0) -> Any:
        a_, b_ = np.asarray(a), np.asarray(b)
        d = (b_ - a_) / np.linalg.norm(b_ - a_)
        pts = a_ + np.linspace(0, 1, 21)[:, None] * (b_ - a_) + off * np.array([-d[1], d[0]])
        return np.c_[pts, np.zeros(len(pts))]

    ids = list(lanes)
    hd = HDMap.build(lanes=Lanes(np.array(ids), Polylines.from_list(ids, [line(*lanes[k], 1.75) for k in ids]),
                                 Polylines.from_list(ids, [line(*lanes[k], -1.75) for k in ids]), Polylines.from_list(ids, [line(*lanes[k]) for k in ids])),
                     drivable_areas=Polygons.from_list(["road"], [np.array([[-60.0, -5.25, 0], [150.0, -5.25, 0], [150.0, 5.25, 0], [-60.0, 5.25, 0]])]))  # fmt: skip
    n = len(ego_xy)
    ego = EgoTrajectory(np.arange(n, dtype=np.int64) * 100_000_000, SE3.from_yaw(np.asarray(ego_yaw, float), np.c_[ego_xy, np.zeros(n)]))
    states = TrafficLightStates.from_unsorted(["L"] * len(lights), [round(t * 1e9) for t, _ in lights], [s for _, s in lights])
    meta = {"ego_size_m": [4.8, 2.0, 1.6], "ego_rear_axle_to_center_m": 1.4, "ego_wheel_base_m": 2.9,
            "lane_successors": {"E0a": ["E0b"], "E0b": ["E0c"]}, "traffic_light_lanes": {"L": ["E0a"]}}  # fmt: skip
    return Scenario("navsim_case", cosmos_rig(320, 180), ego, AgentTracks.empty(), hd, states, meta)


def hand_cases() -> list[tuple[str, Any, Any, tuple[Any, Any] | None, int]]:
    """(name, policy scene, log scene, EC plan states, window start) of the hand-built cases (see the module docstring)."""
    from avsim.scenario.road import road_model
    from avsim.sim.boxes import Boxes
    from avsim.sim.route import build_route
    from avsim.sim.scoring import Scene
    from avsim.sim.vehicle import VehicleParameters, initial_state

    veh, dt, n = VehicleParameters(4.8, 2.0, 1.6, 1.4, 2.9), 0.1, 41
    sc = _road_scenario(np.c_[np.linspace(-50, 100, 30), np.zeros(30)], np.zeros(30), [(0.0, "green")])
    road = road_model(sc)
    route = build_route(road, np.c_[np.linspace(-48.6, 101.4, 30), np.zeros(30)], np.zeros(30))
    ids = list(road.lane_ids)

    def along(x0: float, y: float, speed: Any, yaw: float = 0.0, count: int = n) -> Any:
        speed = np.broadcast_to(np.asarray(speed, float), (count,))
        d = np.r_[0.0, np.cumsum(speed[:-1] * dt)]
        a = np.gradient(speed, dt)
        return np.stack([initial_state(x0 + di * np.cos(yaw), y + di * np.sin(yaw), yaw, v, ai, 0.0, veh.wheel_base_m) for di, v, ai in zip(d, speed, a)])

    def car(tid: str, xy: tuple[float, float], v: float = 0.0, yaw: float = 0.0, cls: str = "Car", size: tuple[float, float] = (4.5, 2.0)) -> list[Any]:
        return [Boxes(np.array([tid]), np.array([cls]), np.array([cls]), np.array([[xy[0] + v * k * dt * np.cos(yaw), xy[1] + v * k * dt * np.sin(yaw), 0.8]]),
                      np.array([[size[0], size[1], 1.6]]), np.array([yaw]), np.array([[v * np.cos(yaw), v * np.sin(yaw)]])) for k in range(n)]  # fmt: skip

    def scene(states: Any, boxes: list[Any] | None = None, red: list[list[str]] | None = None) -> Any:
        count = len(states)
        reds = [np.array([ids.index(k) for k in r], np.int64) for r in (red or [[]] * count)]
        return Scene(np.asarray(states)[None], boxes or [Boxes.empty()] * count, reds, road, route, veh, dt)

    log = along(-20.0, 0.0, 8.0)
    red_all = [["E0b"]] * n
    harsh = np.maximum(14.0 - 6.0 * np.arange(n + 15) * dt, 0.0)  # braking since 1.5 s before the window (HC)
    approach = np.maximum(np.where(np.arange(n) * dt < 1.0, 8.0, 8.0 - 4.0 * (np.arange(n) * dt - 1.0)), 0.0)  # stops 0.5 m short of a car
    weave = along(-20.0, 0.0, 8.0)
    weave[5:30, 1] = 0.6
    cases = [
        ("slower_policy", scene(along(-20.0, 0.0, 5.0)), scene(log)),
        ("into_stopped_car", scene(along(-20.0, 0.0, 8.0), car("lead", (5.0, 0.0))), scene(log, car("lead", (5.0, 0.0)))),
        ("hit_from_behind", scene(along(-20.0, 0.0, 0.0), car("rear", (-30.0, 0.0), 9.0)), scene(log, car("rear", (-30.0, 0.0), 9.0))),
        ("static_object", scene(along(-20.0, 0.0, 8.0), car("cone", (0.0, 0.0), cls="Others", size=(0.5, 0.5))),
         scene(log, car("cone", (0.0, 0.0), cls="Others", size=(0.5, 0.5)))),
        ("lateral_across_lanes", scene(along(-20.0, 1.9, 8.0), car("side", (-16.0, 3.5), 8.0)), scene(log, car("side", (-16.0, 3.5), 8.0))),
        ("off_road", scene(along(-20.0, 4.6, 8.0)), scene(log)),
        ("oncoming_lane", scene(along(-20.0, -3.5, 8.0)), scene(log)),
        ("red_light_crossed", scene(along(-20.0, 0.0, 8.0), red=red_all), scene(along(-20.0, 0.0, 0.0), red=red_all)),
        ("starts_in_red_zone", scene(along(2.0, 0.0, 0.0), red=red_all), scene(along(2.0, 0.0, 0.0), red=red_all)),
        ("log_off_road_masks_ep", scene(along(-20.0, 0.0, 5.0)), scene(along(-20.0, 4.6, 10.0))),
        ("time_to_collision", scene(along(-20.0, 0.0, approach), car("lead", (2.55, 0.0))), scene(log, car("lead", (2.55, 0.0)))),
        ("lane_keeping", scene(weave), scene(log)),
    ]
    out: list[tuple[str, Any, Any, tuple[Any, Any] | None, int]] = [(nm, p, h, None, 0) for nm, p, h in cases]
    out.append(("harsh_braking_history", scene(along(-40.0, 0.0, harsh, count=n + 15)), scene(along(-40.0, 0.0, 8.0, count=n + 15)), None, 15))
    plan_a, plan_b = along(-20.0, 0.0, 8.0), along(-24.0, 0.0, np.r_[np.full(20, 8.0), np.full(21, 3.0)])
    out.append(("extended_comfort", scene(plan_a), scene(log), (plan_a, plan_b), 0))
    return out


# ----------------------------------------------------------------------------- real windows
Item = tuple[str, Any, Any, "tuple[Any, Any] | None", "float | None", int]


def real_cases(folders: list[Path], policies: list[str], starts: list[int]) -> list[Item]:
    """(name, policy scene, log scene, EC states, avsim's EC, t0) of windows of real rollouts (log agents)."""
    from avsim.scenario.io import load_scenario
    from avsim.sim.episode import run_episode
    from avsim.sim.metrics import EpisodeScorer, simulate_plans
    from avsim.sim.policies import load_policy
    from avsim.sim.run import SimOptions

    out: list[Item] = []
    for folder in folders:
        scenario = load_scenario(folder)
        for name in policies:
            from avsim.sim.stepper import Simulator

            sim = Simulator(scenario, SimOptions(policy=name).config())
            run_episode(sim, load_policy(name), budget_s=60.0)
            assert sim.recorder is not None
            scorer = EpisodeScorer(sim, sim.recorder.plans)
            driven = simulate_plans(sim.recorder.plans, sim)
            for t0 in starts:
                t1 = t0 + WINDOW_STEPS
                if t1 > scorer.n - 1:
                    continue
                pair = (driven[t0], driven[t0 - 5]) if t0 in scorer.ec else None
                out.append((f"{folder.name}/{name}/t{t0}", scorer.scene, scorer.human, pair, scorer.ec.get(t0), t0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenarios", nargs="*", type=Path, help="converted scenario folders to drive")
    ap.add_argument("--policies", default="expert,idm")
    ap.add_argument("--starts", default="0,40,80,120", help="window start steps")
    ap.add_argument("--out", type=Path, default=None, help="folder for cases.json, navsim.json, report.json (default: a temp folder)")
    args = ap.parse_args()
    env = {k: os.environ.get(k) for k in ("NAVSIM_DEVKIT", "NUPLAN_DEVKIT", "NAVSIM_PYTHON")}
    if not all(env.values()):
        print("set NAVSIM_DEVKIT, NUPLAN_DEVKIT (source checkouts) and NAVSIM_PYTHON (an interpreter with their dependencies)", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="navsim_compare_"))
    out.mkdir(parents=True, exist_ok=True)
    items: list[Item] = []
    for name, policy, human, pair, t0 in hand_cases():
        ec = None
        if pair is not None:
            from avsim.sim.comfort import two_frame_extended_comfort

            m = len(pair[0]) - 5
            ec = float(two_frame_extended_comfort(pair[0][None, :m], pair[1][None, 5 : 5 + m], np.arange(m) * 0.1)[0])
        items.append((f"hand/{name}", policy, human, pair, ec, t0))
    items += real_cases(args.scenarios, args.policies.split(","), [int(s) for s in args.starts.split(",")])
    cases = [export_case(name, p, h, t0, t0 + WINDOW_STEPS, pair) for name, p, h, pair, _, t0 in items]
    (out / "cases.json").write_text(json.dumps(cases))
    path = os.pathsep.join([str(env["NAVSIM_DEVKIT"]), str(env["NUPLAN_DEVKIT"])])
    subprocess.run([str(env["NAVSIM_PYTHON"]), str(REPO / "bench" / "navsim_scorer.py"), str(out / "cases.json"), str(out / "navsim.json")],
                   check=True, env={**os.environ, "PYTHONPATH": path, "NUPLAN_MAPS_ROOT": "", "NUPLAN_DATA_ROOT": ""})  # fmt: skip
    navsim = json.loads((out / "navsim.json").read_text())
    report, agree = [], 0
    for name, p, h, _, ec, t0 in items:
        mine, theirs = avsim_scores(p, h, t0, t0 + WINDOW_STEPS, ec), navsim[name]
        if "error" in theirs:
            report.append({"case": name, "error": theirs["error"]})
            print(f"{name:40s} NAVSIM failed: {theirs['error']}")
            continue
        diff = {k: (mine[k], theirs[k]) for k in COMPARED if not _same(mine[k], theirs[k])}
        agree += not diff
        report.append({"case": name, "avsim": mine, "navsim": theirs, "differences": diff})
        print(f"{name:40s} {'agrees' if not diff else 'DIFFERS ' + ', '.join(f'{k} avsim {a} navsim {b}' for k, (a, b) in diff.items())}")
    (out / "report.json").write_text(json.dumps(report, indent=1))
    print(f"{agree} of {len(items)} cases agree (hand-built {sum(1 for r in report if r['case'].startswith('hand/') and not r.get('differences') and 'error' not in r)}"
          f" of {sum(1 for r in report if r['case'].startswith('hand/'))}); report: {out / 'report.json'}")  # fmt: skip
    return 0


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(float(a) - float(b)) <= 1e-6


if __name__ == "__main__":
    sys.exit(main())
