"""The embedded sample scenario: a seeded, deterministic urban intersection clip.

`make_sample_scenario(seed, duration_s, fps)` builds, from our own code only:

- an HD map of a signalised four-way intersection (`avsim.scenario.sample.roads`): 2 x 3.5 m lanes per
  direction plus bike lanes and 3 m sidewalks, double-yellow / dashed-solid-yellow centre
  lines, solid / long-dashed / short-dashed white lines, curbs with 4 m returns, crosswalks,
  stop lines, lane arrows, signal poles with mast arms and one signal head per lane group,
  street lights, signs, lanes (rails + centre lines, connectors through the intersection) and
  the drivable area;
- traffic from a 10 Hz microsimulation (`avsim.scenario.sample.traffic`): cars, trucks and buses
  following their lanes with the Intelligent Driver Model, turning on circular arcs, stopping
  at red and yellow, yielding to crossing traffic and pedestrians; cyclists in the bike lanes;
  pedestrians on the sidewalks and crosswalks, crossing on their walk signal;
- the ego, approaching from the south on the inner lane, stopping at the red light and
  driving straight through on green;
- the 7-camera model rig (`avsim.core.rig.cosmos_rig`).

Rates (like real logs): agent boxes are stored at 10 Hz, the simulation rate and the usual
annotation rate; ego poses at `fps` (default 30 Hz), evaluated exactly from the simulated
kinematics (constant acceleration within each 0.1 s step) rather than interpolated; traffic
lights as a table of state changes. Timestamps start at 0 ns. Renderers resample the boxes
to their frame rate (linear centre, SLERP heading), as for any imported dataset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from avsim.core.agents import AgentTracks
from avsim.core.errors import AvsimValueError
from avsim.core.lights import TrafficLightStates
from avsim.core.rig import cosmos_rig
from avsim.core.trajectory import NS_PER_S, EgoTrajectory
from avsim.core.transforms import SE3, yaw_to_quat
from avsim.maps import Cuboids, HDMap, LaneLines, Lanes, Polygons, Polylines
from avsim.scenario import Scenario
from avsim.scenario.sample import agents, roads, signals, traffic
from avsim.scenario.sample.overlaps import find_overlaps
from avsim.scenario.sample.routes import Route, RouteTable, vehicle_routes

MAX_DURATION_S = 24.0  # the ego reaches the end of the mapped road soon after
AGENT_RATE_HZ = traffic.SIM_RATE_HZ
EGO_REAR_AXLE_TO_CENTER_M = 1.385  # 4.87 m car, 1.05 m rear overhang
MAX_REPAIR_ROUNDS = 8
TRACK_PREFIX = {"Car": "car", "Truck": "truck", "Bus": "bus", "Pedestrian": "ped",
                "Cyclist": "bike"}


def make_sample_scenario(seed: int = 0, duration_s: float = 20.0, fps: float = 30.0) -> Scenario:
    """The embedded urban sample: same `seed` -> identical arrays; the map never changes.

    `duration_s` in (0, 24]; `fps` > 0 is the ego pose rate (and the intended render rate).
    Raises `AvsimValueError` for values outside those ranges.
    """
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise AvsimValueError(f"seed: expected an integer >= 0, got {seed!r}")
    if not (np.isfinite(duration_s) and 0.0 < duration_s <= MAX_DURATION_S):
        raise AvsimValueError(f"duration_s: expected 0 < duration_s <= {MAX_DURATION_S}, "
                              f"got {duration_s}")
    if not (np.isfinite(fps) and fps > 0.0):
        raise AvsimValueError(f"fps: expected a finite rate > 0, got {fps}")
    plan = signals.SignalPlan()
    sim = run_sample_traffic(int(seed), float(duration_s), plan)
    return Scenario(
        scenario_id=f"avsim_sample_seed{int(seed)}",
        rig=cosmos_rig(),
        ego=_ego_trajectory(sim, float(duration_s), float(fps)),
        agents=_agent_tracks(sim),
        map=build_sample_map(),
        lights=light_states(plan, float(duration_s)),
        metadata=_metadata(int(seed), float(duration_s), float(fps), plan),
    )


# --- traffic ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SampleTraffic:
    """The simulated clip: routes, the cast (index 0 = ego) and the recorded states."""

    routes: list[Route]
    cast: agents.Cast
    result: traffic.SimResult


def run_sample_traffic(seed: int, duration_s: float,
                       plan: signals.SignalPlan | None = None) -> SampleTraffic:
    """Simulate; if two boxes ever overlap (the driver model cannot rule it out in every
    corner case), drop the later-cast agent of each pair and simulate again (deterministic)."""
    plan = plan or signals.SignalPlan()
    routes, index = vehicle_routes()
    cast = agents.build_cast(np.random.default_rng(seed), routes, index, duration_s, plan)
    size_lw = np.asarray(cast.size)[:, :2]
    excluded: set[int] = set()
    for _ in range(MAX_REPAIR_ROUNDS):
        result = traffic.simulate(routes, cast, plan, duration_s, frozenset(excluded))
        pairs = find_overlaps(result.agent, result.time_s, result.center_xy,
                                      result.yaw_rad, size_lw)
        if not pairs:
            return SampleTraffic(routes, cast, result)
        excluded |= {max(a, b) for a, b in pairs}
    raise AssertionError(f"sample traffic still overlaps after {MAX_REPAIR_ROUNDS} rounds")


def _ego_trajectory(sim: SampleTraffic, duration_s: float, fps: float) -> EgoTrajectory:
    count = int(np.floor(duration_s * fps + 1e-6)) + 1
    timestamps_ns = np.round(np.arange(count) * (NS_PER_S / fps)).astype(np.int64)
    t_s = timestamps_ns / NS_PER_S
    s = traffic.ego_arc_length(sim.result, t_s)
    table = RouteTable(sim.routes)
    route = np.full(count, sim.cast.route[0])
    center_xy, direction = table.lookup(route, s)
    rear_axle_xy = center_xy - EGO_REAR_AXLE_TO_CENTER_M * direction
    yaw = np.arctan2(direction[:, 1], direction[:, 0])
    translation = np.concatenate([rear_axle_xy, np.zeros((count, 1))], axis=1)
    return EgoTrajectory(timestamps_ns, SE3.from_yaw(yaw, translation))


def _agent_tracks(sim: SampleTraffic) -> AgentTracks:
    res, cast = sim.result, sim.cast
    keep = res.agent != 0
    counts = np.bincount(res.agent[keep], minlength=len(cast))
    keep &= counts[res.agent] >= 2  # a track needs two observations to have a velocity
    agent = res.agent[keep]
    size = np.asarray(cast.size)[agent]
    source = np.asarray(cast.source_class)[agent]
    track_id = np.array([f"{TRACK_PREFIX[cast.source_class[a]]}_{a:03d}" for a in agent])
    center = np.concatenate([res.center_xy[keep], 0.5 * size[:, 2:3]], axis=1)
    timestamps_ns = np.round(res.time_s[keep] * NS_PER_S).astype(np.int64)
    return AgentTracks.from_unsorted(track_id, source, timestamps_ns, center, size,
                                     yaw_to_quat(res.yaw_rad[keep]))


def light_states(plan: signals.SignalPlan, duration_s: float) -> TrafficLightStates:
    """Each head's state at t = 0 and at every change up to `duration_s`."""
    ids, times, states = [], [], []
    for arm in range(4):
        for group in roads.LIGHT_GROUPS:
            for t, state in plan.changes(signals.arm_phase(arm), 0.0, duration_s):
                ids.append(roads.light_id(arm, group))
                times.append(round(t * NS_PER_S))
                states.append(state)
    return TrafficLightStates.from_unsorted(ids, times, states)


def _metadata(seed: int, duration_s: float, fps: float, plan: signals.SignalPlan) -> dict:
    furniture = roads.build_furniture()
    return {
        "source": "avsim.sample (procedural, deterministic)",
        "seed": seed,
        "duration_s": duration_s,
        "ego_rate_hz": fps,
        "agent_rate_hz": AGENT_RATE_HZ,
        "ego_size_m": list(agents.EGO_SIZE_M),
        "ego_rear_axle_to_center_m": EGO_REAR_AXLE_TO_CENTER_M,
        "traffic_light_lanes": {k: list(v) for k, v in sorted(furniture.light_lanes.items())},
        "lane_successors": {lane.lane_id: list(lane.successors)
                            for lane in roads.build_lanes() if lane.successors},
        "signal_plan_s": {"green": plan.green_s, "yellow": plan.yellow_s,
                          "all_red": plan.all_red_s, "cycle": plan.cycle_s,
                          "ew_green_start": plan.ew_green_start_s},
    }


# --- map --------------------------------------------------------------------------------------

def _polylines(ids: list[str], points_xy: list[np.ndarray], z_m: float = 0.0) -> Polylines:
    return Polylines.from_list(ids, [roads.lift(p, z_m) for p in points_xy])


def _polygons(ids: list[str], rings_xy: list[np.ndarray]) -> Polygons:
    return Polygons.from_list(ids, [roads.lift(r) for r in rings_xy])


def _cuboids(ids: list[str], centers: list[np.ndarray], sizes: list[np.ndarray],
             yaws: list[float]) -> Cuboids:
    return Cuboids(np.asarray(ids), np.asarray(centers), np.asarray(sizes),
                   yaw_to_quat(np.asarray(yaws)))


def build_sample_map() -> HDMap:
    """The sample's HD map (identical for every seed)."""
    lines = roads.build_lane_lines()
    lane_lines = LaneLines(_polylines([x.line_id for x in lines], [x.points_xy for x in lines]),
                           np.array([x.color for x in lines]), np.array([x.style for x in lines]))
    lane_specs = roads.build_lanes()
    lanes = Lanes(
        np.array([x.lane_id for x in lane_specs]),
        left=_polylines([x.lane_id for x in lane_specs],
                        [roads.offset_polyline(x.centre_xy, 0.5 * x.width_m) for x in lane_specs]),
        right=_polylines([x.lane_id for x in lane_specs],
                         [roads.offset_polyline(x.centre_xy, -0.5 * x.width_m)
                          for x in lane_specs]),
        centre=_polylines([x.lane_id for x in lane_specs], [x.centre_xy for x in lane_specs]),
    )
    names = roads.ARM_NAMES
    markings_ids, markings = [], []
    for k in range(4):
        for lane, offset in zip((0, 1), roads.LANE_OFFSETS_M):
            shape = roads.arrow_marking(roads.MOVEMENTS_BY_LANE[lane])
            for i, tip_s in enumerate((roads.STOP_LINE_M + 4.0, roads.STOP_LINE_M + 40.0)):
                markings_ids.append(f"arrow_{names[k]}_in_{lane}_{i}")
                markings.append(roads.place_in_lane(shape, k, tip_s, offset))
    f = roads.build_furniture()
    return HDMap(
        lane_lines=lane_lines,
        lanes=lanes,
        road_boundaries=_polylines([f"curb_{names[k]}{names[(k + 1) % 4]}" for k in range(4)],
                                   [roads.corner_curb(k) for k in range(4)], 0.0),
        wait_lines=_polylines([f"stop_line_{names[k]}" for k in range(4)],
                              [roads.wait_line(k) for k in range(4)]),
        crosswalks=_polygons([f"crosswalk_{names[k]}" for k in range(4)],
                             [roads.crosswalk(k) for k in range(4)]),
        road_markings=_polygons(markings_ids, markings),
        poles=Polylines.from_list(f.pole_ids, f.poles),
        traffic_signs=_cuboids(f.sign_ids, f.sign_center, f.sign_size, f.sign_yaw),
        traffic_lights=_cuboids(f.light_ids, f.light_center, f.light_size, f.light_yaw),
        drivable_areas=_polygons(["drivable_area_0"], [roads.drivable_area()]),
    )
