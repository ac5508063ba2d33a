"""scenariogeneration's example scenarios (written at test time, `openscenario_examples`) through
`avsim convert --from openscenario`: the agents' timing against the actions' definitions.

Every expectation is restated here from the standard's definitions as esmini implements them
(triggers evaluated on a fixed step, a condition's rising edge and delay, the transition shapes
f(x) = a + b x / c, a + 3 b (x/c)^2 - 2 b (x/c)^3, a - b (cos(pi x / c) - 1) / 2, a lane change's
lateral step rate x dt and longitudinal step sqrt(step^2 - lateral^2)), not read from avsim's code.
The e6mini stand-in road runs along +x from the origin for its first 600 m, so there road s is x
and road t is y: lane centres at y = -4.425 (lane -2), -8.0 (-3), -11.7 (-4).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import openscenario_examples as ex
import pytest
from scenariogeneration import xosc

from avsim.core.transforms import quat_to_matrix
from avsim.scenario import Scenario
from avsim.scenario.importers.openscenario import OpenScenarioOptions, load_openscenario
from avsim.scenario.openscenario.load import RunOptions

pytestmark = pytest.mark.slow

DT = 0.05  # the default rate, 20 Hz
LANE_Y = {-2: -4.425, -3: -8.0, -4: -11.7}
SMALL = 1e-6  # esmini's rule tolerance


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("xosc_examples")
    ex.write_resources(folder)
    return folder


def _convert(path: Path, root: Path, **run: object) -> Scenario:
    return load_openscenario(path, None, OpenScenarioOptions(RunOptions(**run), root))  # type: ignore[arg-type]


def _log(s: Scenario, element: str, state: str) -> float:
    rows = [r["time_s"] for r in s.metadata["openscenario"]["storyboard_log"] if r["element"].endswith(element) and r["state"] == state]
    assert rows, f"{element} never reached {state}"
    return float(rows[0])


def _reference_points(s: Scenario, track: str) -> tuple[np.ndarray, np.ndarray]:
    """(times s, (T, 2) xy of the entity's reference point) from its box track (centre minus the rotated box offset)."""
    t = s.agents.track(track)
    offset = np.array(ex.CARS[{"Target1": "car_red", "Target2": "car_yellow", "Target": "car_red"}[track]][0][3:])
    rot = quat_to_matrix(t.orientation)
    ref = t.center_m - rot @ np.array([offset[0], 0.0, offset[1]])
    return (t.timestamps_ns - s.start_ns) / 1e9, ref[:, :2]


def _first_grid_time(predicate: object, t_max: float = 20.0) -> float:
    for k in range(int(t_max / DT) + 1):
        if predicate(k * DT):  # type: ignore[operator]
            return round(k * DT, 9)
    raise AssertionError("never true")


# ---- cut-in ------------------------------------------------------------------------------------
def test_cut_in_starts_on_its_headway_trigger_and_follows_the_sinusoid(root: Path) -> None:
    s = _convert(ex.cut_in(root), root)
    white, red = ex.CARS["car_white"][0], ex.CARS["car_red"][0]
    ego_front = lambda t: 25 + 30 * t + white[3] + white[1] / 2  # noqa: E731
    red_rear = lambda t: 15 + 40 * t + red[3] - red[1] / 2  # noqa: E731
    # TimeHeadwayCondition(Target1 > 0.1 s, freespace, road, longitudinal) from the ego, rising, delay 0.2 s
    rises = _first_grid_time(lambda t: (red_rear(t) - ego_front(t)) / 30 > 0.1 + SMALL)
    start = round(rises + 0.2, 9)
    assert _log(s, "first_lane_change::lane_change_red", "runningState") == pytest.approx(start, abs=1e-9)
    times, xy = _reference_points(s, "Target1")
    k = np.arange(0, 81)
    on = np.isin(np.round(times, 9), np.round(start + k * DT, 9))
    assert on.sum() == 81
    # offset from lane -4's centre: a = y(-2) - y(-4) -> 0, sinusoidal over 4 s, the parameter at k dt after k steps
    a = LANE_Y[-2] - LANE_Y[-4]
    expected = LANE_Y[-4] + a * (1 + np.cos(np.pi * k * DT / 4)) / 2
    np.testing.assert_allclose(xy[on, 1], expected, atol=1e-9)
    # each step's longitudinal move: sqrt(step^2 - (dt |f'(x before the step)|)^2), step = 40 m/s x dt
    rate = np.pi * a * np.sin(np.pi * (k[:-1]) * DT / 4) / (2 * 4)
    np.testing.assert_allclose(np.diff(xy[on, 0]), np.sqrt((40 * DT) ** 2 - (DT * rate) ** 2), atol=1e-9)
    # the action ends in the step that takes the parameter to 4 s; the car then stays on lane -4's centre
    assert _log(s, "first_lane_change::lane_change_red", "completeState") == pytest.approx(start + 4 - DT, abs=1e-9)
    after = times > start + 4 + 1e-9
    np.testing.assert_allclose(xy[after, 1], LANE_Y[-4], atol=1e-9)
    assert s.metadata["openscenario"]["ended"] == "stop trigger" and s.duration_s == pytest.approx(10.05)


def test_cut_in_yellow_car_changes_into_the_ego_lane_over_two_seconds(root: Path) -> None:
    s = _convert(ex.cut_in(root), root)
    start = _log(s, "yellow_lanechange::lane_change_yellow", "runningState")
    times, xy = _reference_points(s, "Target2")
    k = np.arange(0, 41)
    on = np.isin(np.round(times, 9), np.round(start + k * DT, 9))
    a = LANE_Y[-4] - LANE_Y[-3]
    np.testing.assert_allclose(xy[on, 1], LANE_Y[-3] + a * (1 + np.cos(np.pi * k * DT / 2)) / 2, atol=1e-9)
    assert _log(s, "yellow_lanechange::lane_change_yellow", "completeState") == pytest.approx(start + 2 - DT, abs=1e-9)


# ---- follow trajectory -----------------------------------------------------------------------
def test_trajectory_follows_its_relative_timed_polyline(root: Path) -> None:
    s = _convert(ex.trajectory(root), root)
    white, red = ex.CARS["car_white"][0], ex.CARS["car_red"][0]
    gap = lambda t: (15 + 40 * t + red[3] - red[1] / 2) - (25 + 30 * t + white[3] + white[1] / 2)  # noqa: E731
    start = round(_first_grid_time(lambda t: gap(t) / 30 > 0.4 + SMALL) + 0.2, 9)
    assert _log(s, "myfirstevent::newspeed", "runningState") == pytest.approx(start, abs=1e-9)
    # vertices: RelativeLanePosition(dLane 0, ds, offset) of the car where it is when the action starts
    x0 = 15 + 40 * start
    vx, vy, vt = x0 + np.array([0, 20, 40, 60.0]), LANE_Y[-2] + np.array([0, 0.5, -0.5, -1.0]), np.array([0, 0.5, 1.0, 1.5])
    times, xy = _reference_points(s, "Target")
    k = np.arange(0, 31)
    on = np.isin(np.round(times, 9), np.round(start + k * DT, 9))
    np.testing.assert_allclose(xy[on, 0], np.interp(k * DT, vt, vx), atol=1e-9)
    np.testing.assert_allclose(xy[on, 1], np.interp(k * DT, vt, vy), atol=1e-9)
    assert _log(s, "myfirstevent::newspeed", "completeState") == pytest.approx(start + 1.5 - DT, abs=1e-9)
    # the vertices (every 0.5 s of trajectory time) are recorded although they fall between steps only by chance
    assert s.metadata["openscenario"]["ended"] == "stories complete"


# ---- lane change on curved roads ---------------------------------------------------------------
@pytest.fixture(scope="module")
def lane_change_files(root: Path) -> list[Path]:
    cwd = os.getcwd()
    try:
        os.chdir(root)
        return ex.lane_change(root, [0.001, 0.004], [10, 30])
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("index", range(4))
def test_lane_change_lateral_profile_on_a_spiral_arc_road(root: Path, lane_change_files: list[Path], index: int) -> None:
    from avsim.maps.opendrive.network import RoadNetwork

    path = lane_change_files[index]
    s = _convert(path, root / "lane_change")
    # SimulationTimeCondition(> 4 s, edge none): first true at the grid time after 4 + 1e-6
    start = _first_grid_time(lambda t: t > 4 + SMALL)
    assert _log(s, "my event::lane change", "runningState") == pytest.approx(start, abs=1e-9)
    road = next((root / "lane_change" / "xodr").glob(path.stem + ".xodr"), None) or next((root / "lane_change" / "xodr").glob("*.xodr"))
    net = RoadNetwork.from_file(root / "lane_change" / "xodr" / Path(s.metadata["map_source"]).name if s.metadata.get("map_source") else road)
    k = np.arange(0, 81)
    wanted = np.round(start + k * DT, 9)
    times = np.round((s.ego.timestamps_ns - s.start_ns) / 1e9, 9)
    on = np.isin(times, wanted)
    assert on.sum() == 81
    offsets = []
    for p in s.ego.world_SE3_ego.translation[on]:  # the rear axle is the ego's reference point (positionX 0)
        rc = net.locate(float(p[0]), float(p[1]))
        assert rc is not None
        offsets.append(rc.t - float(net.lane_centre_t(rc.road, -1, rc.s)[0]))
    # the offset from lane -1's centre (3 m lanes) goes from -3 to 0 along the sinusoid over 4 s
    np.testing.assert_allclose(offsets, -3 * (1 + np.cos(np.pi * k * DT / 4)) / 2, atol=1e-6)
    assert _log(s, "my event::lane change", "completeState") == pytest.approx(start + 4 - DT, abs=1e-9)
    assert s.metadata["openscenario"]["ended"] == "stop trigger" and s.duration_s == pytest.approx(13.05)


# ---- speed transitions -------------------------------------------------------------------------
def _speed_scenario(root: Path, name: str, shape: str, dim: str, value: float, v0: float, v1: float) -> Path:
    entities = xosc.Entities()
    entities.add_scenario_object("Ego", xosc.CatalogReference("VehicleCatalog", "car_white"))
    init = xosc.Init()
    init.add_init_action("Ego", xosc.AbsoluteSpeedAction(v0, ex.STEP_1S))
    init.add_init_action("Ego", xosc.TeleportAction(xosc.LanePosition(10, 0, -3, 0)))
    event = xosc.Event("change", xosc.Priority.override)
    event.add_action("speed", xosc.AbsoluteSpeedAction(v1, xosc.TransitionDynamics(getattr(xosc.DynamicsShapes, shape), getattr(xosc.DynamicsDimension, dim), value)))
    event.add_trigger(xosc.ValueTrigger("at_1s", 0, xosc.ConditionEdge.none, xosc.SimulationTimeCondition(1, xosc.Rule.greaterThan)))
    man = xosc.Maneuver("m")
    man.add_event(event)
    stop = xosc.ValueTrigger("stop", 0, xosc.ConditionEdge.none, xosc.SimulationTimeCondition(10, xosc.Rule.greaterThan), "stop")
    board = xosc.StoryBoard(init, stoptrigger=stop)
    board.add_maneuver(man, "Ego")
    scenario = xosc.Scenario(name, "avsim", xosc.ParameterDeclarations(), entities, board, xosc.RoadNetwork("../xodr/e6mini.xodr"), ex._catalog())
    return ex._write(root, name, scenario)


def _shape(shape: str, a: float, b: float, x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0, 1)
    if shape == "linear":
        return a + b * x
    if shape == "cubic":
        return a + 3 * b * x**2 - 2 * b * x**3
    if shape == "sinusoidal":
        return a - b * (np.cos(np.pi * x) - 1) / 2
    return np.full_like(x, a + b)


SPEED_CASES = {  # name: (shape, dimension, value, v0, v1, duration of the change in s)
    "linear_time": ("linear", "time", 4.0, 10.0, 20.0, 4.0),
    "cubic_time": ("cubic", "time", 4.0, 10.0, 20.0, 4.0),
    "sinusoidal_time": ("sinusoidal", "time", 4.0, 10.0, 20.0, 4.0),
    "step": ("step", "time", 1.0, 10.0, 20.0, 0.0),
    "linear_distance": ("linear", "distance", 60.0, 10.0, 20.0, 2 * 60 / 30),  # t = 2 d / |v0 + v1|
    "cubic_distance_braking": ("cubic", "distance", 45.0, 20.0, 10.0, 2 * 45 / 30),
    "sinusoidal_rate": ("sinusoidal", "rate", 2.5, 10.0, 20.0, np.pi / 2 * 10 / 2.5),  # peak rate pi b / (2 c)
    "cubic_rate": ("cubic", "rate", 3.0, 10.0, 20.0, 1.5 * 10 / 3.0),  # peak rate 1.5 b / c
    "linear_over_the_acceleration_limit": ("linear", "time", 1.0, 10.0, 20.0, 2.0),  # 10 m/s^2 > car_white's 5: twice as long
}


@pytest.mark.parametrize("case", list(SPEED_CASES))
def test_speed_action_follows_its_transition(root: Path, case: str) -> None:
    shape, dim, value, v0, v1, duration = SPEED_CASES[case]
    s = _convert(_speed_scenario(root, f"speed_{case}", shape, dim, value, v0, v1), root)
    start = _first_grid_time(lambda t: t > 1 + SMALL)
    assert _log(s, "change::speed", "runningState") == pytest.approx(start, abs=1e-9)
    t = np.round((s.ego.timestamps_ns - s.start_ns) / 1e9, 9)
    x = s.ego.world_SE3_ego.translation[:, 0]
    np.testing.assert_allclose(s.ego.world_SE3_ego.translation[:, 1], LANE_Y[-3], atol=1e-9)
    speed = np.diff(x) / np.diff(t)  # the speed of each step is the shape at the step's end
    k = np.round((t[1:] - start) / DT).astype(int)
    x_param = k * DT / duration if duration > 0 else np.ones(len(k))
    expected = np.where(k >= 1, _shape(shape, v0, v1 - v0, x_param), v0)
    np.testing.assert_allclose(speed, expected, atol=1e-9)
    if duration > 0:
        done = _log(s, "change::speed", "completeState")
        assert done == pytest.approx(start + math.ceil(duration / DT - 1e-9) * DT - DT, abs=1e-9)
