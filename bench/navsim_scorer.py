"""NAVSIM's own PDMScorer on avsim's scoring cases (run by bench/navsim_compare.py, in NAVSIM's environment).

    NAVSIM_PYTHON bench/navsim_scorer.py CASES.json RESULTS.json

This script imports only NAVSIM, nuplan-devkit, numpy and shapely (never avsim): it is run by
the interpreter of a virtual environment that has NAVSIM's dependencies, with the NAVSIM and
nuplan-devkit source checkouts on PYTHONPATH. Every case is one 4 s window: the sequences
scored as NAVSIM's proposals (row 0 the log, in PDM-Closed's place; row 1 the policy), the
objects of every time, the red on-route zones of every time, the lanes, drivable area and
intersections, the route's lanes and centre line, the policy's history, and (optionally) the
two overlapping plans of NAVSIM's two-frame extended comfort. It is scored exactly as
`navsim.evaluate.pdm_score.pdm_score_from_interpolated_trajectory` scores a frame (the metric
cache's observation with traffic lights, `PDMScorer.score_proposals`, the human penalty filter
on the log scored alone), and EPDMS as `run_pdm_score.compute_final_scores` aggregates it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import shapely
import shapely.wkt
from navsim.planning.simulation.planner.pdm_planner.observation.pdm_observation import PDMObservation
from navsim.planning.simulation.planner.pdm_planner.observation.pdm_occupancy_map import PDMDrivableMap
from navsim.planning.simulation.planner.pdm_planner.scoring.pdm_comfort_metrics import ego_is_two_frame_extended_comfort
from navsim.planning.simulation.planner.pdm_planner.scoring.pdm_scorer import PDMScorer, PDMScorerConfig
from navsim.planning.simulation.planner.pdm_planner.utils.pdm_enums import WeightedMetricIndex
from navsim.planning.simulation.planner.pdm_planner.utils.pdm_path import PDMPath
from nuplan.common.actor_state.agent import Agent
from nuplan.common.actor_state.car_footprint import CarFootprint
from nuplan.common.actor_state.dynamic_car_state import DynamicCarState
from nuplan.common.actor_state.ego_state import EgoState
from nuplan.common.actor_state.oriented_box import OrientedBox
from nuplan.common.actor_state.scene_object import SceneObjectMetadata
from nuplan.common.actor_state.state_representation import StateSE2, StateVector2D, TimePoint
from nuplan.common.actor_state.static_object import StaticObject
from nuplan.common.actor_state.tracked_objects import TrackedObjects
from nuplan.common.actor_state.tracked_objects_types import TrackedObjectType
from nuplan.common.actor_state.vehicle_parameters import VehicleParameters
from nuplan.common.maps.maps_datatypes import SemanticMapLayer, TrafficLightStatusData, TrafficLightStatusType
from nuplan.planning.simulation.observation.observation_type import DetectionsTracks
from nuplan.planning.simulation.trajectory.interpolated_trajectory import InterpolatedTrajectory
from nuplan.planning.simulation.trajectory.trajectory_sampling import TrajectorySampling

TYPES = {"VEHICLE": TrackedObjectType.VEHICLE, "PEDESTRIAN": TrackedObjectType.PEDESTRIAN, "BICYCLE": TrackedObjectType.BICYCLE,
         "GENERIC_OBJECT": TrackedObjectType.GENERIC_OBJECT}  # fmt: skip
COLUMNS = ("no_at_fault_collisions", "drivable_area_compliance", "driving_direction_compliance", "traffic_light_compliance",
           "ego_progress", "time_to_collision_within_bound", "lane_keeping", "history_comfort")  # fmt: skip
SKIP = {"multiplicative_metrics_prod", "weighted_metrics", "weighted_metrics_array", "pdm_score"}


class _Lane:
    """What the observation reads of an on-route lane connector: its polygon."""

    def __init__(self, lane_id: str, polygon: Any) -> None:
        self.id, self.polygon = lane_id, polygon


def _vehicle(v: dict[str, float]) -> VehicleParameters:
    half, d = v["length_m"] / 2, v["rear_axle_to_center_m"]
    return VehicleParameters(width=v["width_m"], front_length=half + d, rear_length=half - d, cog_position_from_rear_axle=d,
                             wheel_base=v["wheel_base_m"], vehicle_name="avsim_ego", vehicle_type="car", height=v["height_m"])  # fmt: skip


def _object(o: dict[str, Any], t_us: int) -> Any:
    box = OrientedBox(StateSE2(o["x"], o["y"], o["heading"]), o["length"], o["width"], o["height"])
    meta = SceneObjectMetadata(timestamp_us=t_us, token=o["token"], track_id=None, track_token=o["token"])
    kind = TYPES[o["type"]]
    if kind == TrackedObjectType.GENERIC_OBJECT:
        return StaticObject(tracked_object_type=kind, oriented_box=box, metadata=meta)
    return Agent(tracked_object_type=kind, oriented_box=box, velocity=StateVector2D(o["vx"], o["vy"]), metadata=meta)


def _ego_state(row: list[float], t_us: int, vehicle: VehicleParameters) -> EgoState:
    x, y, h, vx, vy, ax, ay, steer, steer_rate, w, w_dot = row
    footprint = CarFootprint.build_from_rear_axle(StateSE2(x, y, h), vehicle)
    dyn = DynamicCarState.build_from_rear_axle(footprint.rear_axle_to_center_dist, StateVector2D(vx, vy), StateVector2D(ax, ay), w, w_dot,
                                               steer_rate)  # fmt: skip
    return EgoState(footprint, dyn, steer, True, TimePoint(t_us))


def _drivable_map(case: dict[str, Any]) -> PDMDrivableMap:
    tokens, types, geoms = [], [], []
    for key, layer in (("lanes", SemanticMapLayer.LANE), ("drivable", SemanticMapLayer.DRIVABLE_AREA),
                       ("intersections", SemanticMapLayer.INTERSECTION)):  # fmt: skip
        for item in case[key]:
            tokens.append(item["id"])
            types.append(layer)
            geoms.append(shapely.wkt.loads(item["wkt"]))
    return PDMDrivableMap(tokens, types, np.array(geoms, dtype=object))


def _observation(case: dict[str, Any], sampling: TrajectorySampling, lanes: dict[str, _Lane]) -> PDMObservation:
    dt_us = int(round(case["dt_s"] * 1e6))
    tracks = [DetectionsTracks(TrackedObjects([_object(o, k * dt_us) for o in objs])) for k, objs in enumerate(case["objects"])]
    lights = [[TrafficLightStatusData(TrafficLightStatusType.RED, lane, k * dt_us) for lane in red] for k, red in enumerate(case["red"])]
    obs = PDMObservation(sampling, sampling, map_radius=100, observation_sample_res=1, extend_observation_for_ttc=False)
    obs.update_detections_tracks(tracks, lights, lanes, compute_traffic_light_data=True)
    return obs


def score_case(case: dict[str, Any]) -> dict[str, Any]:
    """NAVSIM's scores of one case's policy (row 1), its human-filtered EPDMS and EC."""
    vehicle = _vehicle(case["vehicle"])
    states = np.asarray(case["states"], np.float64)
    sampling = TrajectorySampling(num_poses=states.shape[1] - 1, interval_length=case["dt_s"])
    lanes = {item["id"]: _Lane(item["id"], shapely.wkt.loads(item["wkt"])) for item in case["lanes"] if item["id"] in case["route_lane_ids"]}
    obs = _observation(case, sampling, lanes)
    centerline = PDMPath([StateSE2(*p) for p in case["centerline"]])
    drivable = _drivable_map(case)
    dt_us = int(round(case["dt_s"] * 1e6))
    history = None
    if len(case["history"]) >= 2:  # NAVSIM's past trajectory: the history states up to the window's first
        rows = [*case["history"], case["states"][1][0]]
        history = InterpolatedTrajectory([_ego_state(r, (k - len(rows) + 1) * dt_us + 10**9, vehicle) for k, r in enumerate(rows)])
    scorer = PDMScorer(sampling, PDMScorerConfig(human_penalty_filter=True), vehicle)
    result = scorer.score_proposals(states, obs, centerline, case["route_lane_ids"], drivable, None, None, history)[1]
    human = scorer.score_proposals(states[:1], obs, centerline, case["route_lane_ids"], drivable, None, None, None)[0]
    out: dict[str, Any] = {k: float(result[k].iloc[0]) for k in COLUMNS}
    filtered = dict(out)
    for column in human.columns:  # pdm_score_from_interpolated_trajectory's human penalty filter
        if column not in SKIP and column in filtered and human[column].iloc[0] == 0:
            filtered[column] = 1.0
    ec = None
    if case.get("ec_states") is not None:
        now, prev = np.asarray(case["ec_states"]["now"]), np.asarray(case["ec_states"]["prev"])
        overlap = int(round(0.5 / case["dt_s"]))
        cur, old = now[:-overlap], prev[overlap:]
        n = min(len(cur), len(old))
        ec = float(ego_is_two_frame_extended_comfort(cur[None, :n], old[None, :n], np.arange(n) * case["dt_s"])[0])
    out["two_frame_extended_comfort"] = ec
    out["epdms"] = _final(out, ec)
    out["epdms_human_filtered"] = _final(filtered, ec)
    out["human_failed"] = [k for k in COLUMNS if float(human[k].iloc[0]) == 0.0]
    return out


def _final(m: dict[str, Any], ec: float | None) -> float:
    """`compute_final_scores`: multiplicative product times the weighted mean (EC left out where there is none)."""
    weights = PDMScorerConfig().weighted_metrics_array
    values = np.zeros(len(weights))
    values[WeightedMetricIndex.PROGRESS] = m["ego_progress"]
    values[WeightedMetricIndex.TTC] = m["time_to_collision_within_bound"]
    values[WeightedMetricIndex.LANE_KEEPING] = m["lane_keeping"]
    values[WeightedMetricIndex.HISTORY_COMFORT] = m["history_comfort"]
    mask = np.ones(len(weights), bool)
    if ec is None:
        mask[WeightedMetricIndex.TWO_FRAME_EXTENDED_COMFORT] = False
    else:
        values[WeightedMetricIndex.TWO_FRAME_EXTENDED_COMFORT] = ec
    multi = m["no_at_fault_collisions"] * m["drivable_area_compliance"] * m["driving_direction_compliance"] * m["traffic_light_compliance"]
    return float(multi * (values[mask] * weights[mask]).sum() / weights[mask].sum())


def main(argv: list[str]) -> int:
    cases = json.loads(Path(argv[1]).read_text())
    results = {}
    for case in cases:
        try:
            results[case["name"]] = score_case(case)
        except Exception as exc:  # one failing case is reported, the others still scored
            results[case["name"]] = {"error": f"{type(exc).__name__}: {exc}"}
    Path(argv[2]).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
