"""OpenSCENARIO test scenarios written by scenariogeneration 0.16.7 at test time.

scenariogeneration's example scenarios (examples/xosc and examples/generator in pyoscx/scenariogeneration;
the wheel does not ship them) are rebuilt here with its own API, each as its example builds it:

- `cut_in`: examples/xosc/multiple_maneuvers.py: the red car passes the ego on its left at 40 m/s
  and, 0.2 s after its headway from the ego passes 0.1 s, changes across the ego's lane into the
  lane on its right (sinusoidal, 4 s); the yellow car changes into the ego's lane (2 s);
- `trajectory`: examples/xosc/trajectory_example.py: a relative-timed polyline of lane positions
  relative to the car itself (ds 0/20/40/60 m, offsets 0/0.5/-0.5/-1 m at 0/0.5/1/1.5 s);
- `lane_change`: examples/generator/generate_with_permutations.py: a spiral-arc-spiral-line road
  and an ego changing to the lane on its left at 4 s (sinusoidal, 4 s), one per speed and curvature;
- `distribution`: examples/xosc/ParameterValueDistribution.py: a scenario with speed parameters and
  a stochastic distribution over them (normal, histogram).

They refer to `../xodr/e6mini.xodr` and `../xosc/Catalogs/Vehicles`, esmini's resources; `write_resources`
writes stand-ins: a road 0 with e6mini's lanes (border, three driving lanes, a stop lane, two borders
per side, e6mini's widths) and a vehicle catalog with esmini's cars' boxes, axles and limits.
"""

from __future__ import annotations

from pathlib import Path

from scenariogeneration import ScenarioGenerator, xodr, xosc

# esmini's resources/xosc/Catalogs/Vehicles/VehicleCatalog.xosc: name -> (width, length, height, centre x, z), limits
CARS = {
    "car_white": ((2.0, 5.04, 1.5, 1.4, 0.75), (250 / 3.6, 5.0, 10.0)),
    "car_red": ((2.0, 5.04, 1.5, 1.45, 0.75), (70.0, 5.0, 10.0)),
    "car_yellow": ((2.5, 6.04, 1.5, 1.6, 0.75), (70.0, 5.0, 10.0)),
    "car_blue": ((2.0, 5.04, 1.5, 1.45, 0.75), (69.0, 5.0, 10.0)),
}
E6MINI_LANES = ((xodr.LaneType.border, 2.6), (xodr.LaneType.driving, 3.65), (xodr.LaneType.driving, 3.5), (xodr.LaneType.driving, 3.9),
                (xodr.LaneType.stop, 2.85), (xodr.LaneType.border, 1.5), (xodr.LaneType.border, 6.0))  # fmt: skip
STEP_1S = xosc.TransitionDynamics(xosc.DynamicsShapes.step, xosc.DynamicsDimension.time, 1)


def _vehicle(name: str) -> xosc.Vehicle:
    (w, length, h, cx, cz), (vmax, amax, dmax) = CARS[name]
    front = xosc.Axle(0.523598775598, 0.8, 1.68, 2.98, 0.4)
    rear = xosc.Axle(0.523598775598, 0.8, 1.68, 0, 0.4)
    return xosc.Vehicle(name, xosc.VehicleCategory.car, xosc.BoundingBox(w, length, h, cx, 0, cz), front, rear, vmax, amax, dmax)


def write_resources(root: Path) -> None:
    """`root/xodr/e6mini.xodr` and `root/xosc/Catalogs/Vehicles/VehicleCatalog.xosc` (see the module docstring)."""
    centre = xodr.Lane(a=0)
    centre.add_roadmark(xodr.RoadMark(xodr.RoadMarkType.solid))
    section = xodr.LaneSection(0, centre)
    for kind, width in E6MINI_LANES:
        for add in (section.add_right_lane, section.add_left_lane):
            lane = xodr.Lane(kind, a=width)
            lane.add_roadmark(xodr.RoadMark(xodr.RoadMarkType.broken if kind == xodr.LaneType.driving else xodr.RoadMarkType.solid))
            add(lane)
    lanes = xodr.Lanes()
    lanes.add_lanesection(section)
    plan = xodr.PlanView()
    for g in (xodr.Line(600), xodr.Arc(0.002, 300), xodr.Line(600)):
        plan.add_geometry(g)
    road = xodr.Road(0, plan, lanes)
    odr = xodr.OpenDrive("e6mini")
    odr.add_road(road)
    odr.adjust_roads_and_lanes()
    (root / "xodr").mkdir(parents=True, exist_ok=True)
    odr.write_xml(str(root / "xodr" / "e6mini.xodr"))
    folder = root / "xosc" / "Catalogs" / "Vehicles"
    folder.mkdir(parents=True, exist_ok=True)
    catalog = xosc.CatalogFile()
    catalog.create_catalog(str(folder / "VehicleCatalog.xosc"), "VehicleCatalog", "esmini's cars (boxes, axles, limits)", "avsim tests")
    for name in CARS:
        catalog.add_to_catalog(_vehicle(name))
    catalog.dump()


def _catalog() -> xosc.Catalog:
    catalog = xosc.Catalog()
    catalog.add_catalog("VehicleCatalog", "../xosc/Catalogs/Vehicles")
    return catalog


def _road() -> xosc.RoadNetwork:
    return xosc.RoadNetwork(roadfile="../xodr/e6mini.xodr", scenegraph="../models/e6mini.osgb")


def _write(root: Path, name: str, scenario: xosc.Scenario) -> Path:
    path = root / "xosc" / f"{name}.xosc"
    path.parent.mkdir(parents=True, exist_ok=True)
    scenario.write_xml(str(path))
    return path


def _start_act(name: str) -> xosc.Act:
    return xosc.Act(name, xosc.ValueTrigger("starttrigger", 0, xosc.ConditionEdge.rising, xosc.SimulationTimeCondition(0, xosc.Rule.greaterThan)))


def _lane_change_event(event: str, action: str, trigger: xosc.EntityTrigger, lane: int, duration: float) -> xosc.Event:
    ev = xosc.Event(event, xosc.Priority.overwrite)
    ev.add_trigger(trigger)
    dyn = xosc.TransitionDynamics(xosc.DynamicsShapes.sinusoidal, xosc.DynamicsDimension.time, duration)
    ev.add_action(action, xosc.AbsoluteLaneChangeAction(lane, dyn))
    return ev


def _group(name: str, actor: str, maneuver: str, event: xosc.Event) -> xosc.ManeuverGroup:
    man = xosc.Maneuver(maneuver)
    man.add_event(event)
    group = xosc.ManeuverGroup(name)
    group.add_actor(actor)
    group.add_maneuver(man)
    return group


def cut_in(root: Path) -> Path:
    """examples/xosc/multiple_maneuvers.py (see the module docstring)."""
    entities = xosc.Entities()
    for name, car in (("Ego", "car_white"), ("Target1", "car_red"), ("Target2", "car_yellow")):
        entities.add_scenario_object(name, xosc.CatalogReference("VehicleCatalog", car))
    init = xosc.Init()
    for name, speed, lane, s in (("Ego", 30, -3, 25), ("Target1", 40, -2, 15), ("Target2", 30, -4, 35)):
        init.add_init_action(name, xosc.AbsoluteSpeedAction(speed, STEP_1S))
        init.add_init_action(name, xosc.TeleportAction(xosc.LanePosition(s, 0, lane, 0)))
    red = xosc.EntityTrigger("redtrigger", 0.2, xosc.ConditionEdge.rising, xosc.TimeHeadwayCondition("Target1", 0.1, xosc.Rule.greaterThan), "Ego")
    yellow = xosc.EntityTrigger("yellow_trigger", 0, xosc.ConditionEdge.rising,
                                xosc.TimeHeadwayCondition("Target1", 0.5, xosc.Rule.greaterThan), "Target2")  # fmt: skip
    act = _start_act("red_act")
    act.add_maneuver_group(_group("mangroup_red", "Target1", "red_maneuver", _lane_change_event("first_lane_change", "lane_change_red", red, -4, 4)))
    act.add_maneuver_group(_group("yellow_mangroup", "Target2", "yellow_maneuver",
                                  _lane_change_event("yellow_lanechange", "lane_change_yellow", yellow, -3, 2)))  # fmt: skip
    story = xosc.Story("mystory")
    story.add_act(act)
    stop = xosc.ValueTrigger("stop_simulation", 0, xosc.ConditionEdge.rising, xosc.SimulationTimeCondition(10, xosc.Rule.greaterThan), "stop")
    board = xosc.StoryBoard(init, stop)
    board.add_story(story)
    scenario = xosc.Scenario("adaptspeed_example", "Mandolin", xosc.ParameterDeclarations(), entities=entities, storyboard=board,
                             roadnetwork=_road(), catalog=_catalog(), osc_minor_version=2)  # fmt: skip
    return _write(root, "cut_in", scenario)


def trajectory(root: Path) -> Path:
    """examples/xosc/trajectory_example.py (see the module docstring)."""
    params = xosc.ParameterDeclarations()
    params.add_parameter(xosc.Parameter("$HostVehicle", xosc.ParameterType.string, "car_white"))
    params.add_parameter(xosc.Parameter("$TargetVehicle", xosc.ParameterType.string, "car_red"))
    entities = xosc.Entities()
    entities.add_scenario_object("Ego", _vehicle("car_white"))
    entities.add_scenario_object("Target", _vehicle("car_red"))
    init = xosc.Init()
    for name, speed, lane, s in (("Ego", 30, -3, 25), ("Target", 40, -2, 15)):
        init.add_init_action(name, xosc.AbsoluteSpeedAction(speed, STEP_1S))
        init.add_init_action(name, xosc.TeleportAction(xosc.LanePosition(s, 0, lane, 0)))
    trigger = xosc.EntityTrigger("mytesttrigger", 0.2, xosc.ConditionEdge.rising, xosc.TimeHeadwayCondition("Target", 0.4, xosc.Rule.greaterThan), "Ego")
    event = xosc.Event("myfirstevent", xosc.Priority.overwrite)
    event.add_trigger(trigger)
    positions = [xosc.RelativeLanePosition(0, "Target", offset, ds=ds) for offset, ds in ((0, 0), (0.5, 20), (-0.5, 40), (-1, 60))]
    traj = xosc.Trajectory("my_trajectory", False)
    traj.add_shape(xosc.Polyline([0, 0.5, 1, 1.5], positions))
    event.add_action("newspeed", xosc.FollowTrajectoryAction(traj, xosc.FollowingMode.position, xosc.ReferenceContext.relative, 1, 0))
    act = _start_act("my_act")
    act.add_maneuver_group(_group("mangroup", "$owner", "my_maneuver", event))
    story_params = xosc.ParameterDeclarations()
    story_params.add_parameter(xosc.Parameter("$owner", xosc.ParameterType.string, "Target"))
    story = xosc.Story("mystory", story_params)
    story.add_act(act)
    board = xosc.StoryBoard(init)
    board.add_story(story)
    scenario = xosc.Scenario("trajectory_example", "Mandolin", params, entities=entities, storyboard=board, roadnetwork=_road(),
                             catalog=_catalog(), osc_minor_version=2)  # fmt: skip
    return _write(root, "trajectory", scenario)


class LaneChange(ScenarioGenerator):  # type: ignore[misc]
    """examples/generator/generate_with_permutations.py: road curvatures x ego speeds."""

    def __init__(self, curvatures: list[float], speeds: list[float]) -> None:
        super().__init__()
        self.parameters["road_curvature"] = curvatures
        self.parameters["speed"] = speeds
        self.naming = "parameter"
        self.generate_all_roads = False
        self.number_of_parallel_writings = 1

    def road(self, **kwargs: float) -> xodr.OpenDrive:
        c = kwargs["road_curvature"]
        road = xodr.create_road([xodr.Spiral(1e-10, c, 100), xodr.Arc(c, 50), xodr.Spiral(c, 1e-10, 100), xodr.Line(100)], id=0,
                                left_lanes=2, right_lanes=2)  # fmt: skip
        odr = xodr.OpenDrive("myroad")
        odr.add_road(road)
        odr.adjust_roads_and_lanes()
        return odr

    def scenario(self, **kwargs: float) -> xosc.Scenario:
        entities = xosc.Entities()
        entities.add_scenario_object("Ego", xosc.CatalogReference("VehicleCatalog", "car_white"))
        init = xosc.Init()
        init.add_init_action("Ego", xosc.TeleportAction(xosc.LanePosition(50, 0, -2, 0)))
        init.add_init_action("Ego", xosc.AbsoluteSpeedAction(kwargs["speed"], STEP_1S))
        event = xosc.Event("my event", xosc.Priority.overwrite)
        dyn = xosc.TransitionDynamics(xosc.DynamicsShapes.sinusoidal, xosc.DynamicsDimension.time, 4)
        event.add_action("lane change", xosc.AbsoluteLaneChangeAction(-1, dyn))
        event.add_trigger(xosc.ValueTrigger("start_trigger ", 0, xosc.ConditionEdge.none, xosc.SimulationTimeCondition(4, xosc.Rule.greaterThan)))
        man = xosc.Maneuver("maneuver")
        man.add_event(event)
        stop = xosc.ValueTrigger("start_trigger ", 0, xosc.ConditionEdge.none, xosc.SimulationTimeCondition(13, xosc.Rule.greaterThan), "stop")
        board = xosc.StoryBoard(init, stoptrigger=stop)
        board.add_maneuver(man, "Ego")
        return xosc.Scenario("my scenario", "Mandolin", xosc.ParameterDeclarations(), entities, board, xosc.RoadNetwork(self.road_file),
                             _catalog())  # fmt: skip


def lane_change(root: Path, curvatures: list[float], speeds: list[float]) -> list[Path]:
    """The lane-change scenarios (and their roads) under `root/lane_change/` (see `LaneChange`)."""
    out = root / "lane_change"
    (out / "xosc" / "Catalogs").mkdir(parents=True, exist_ok=True)
    write_resources(out)
    scenarios, _ = LaneChange(curvatures, speeds).generate(str(out))
    return [Path(p) if Path(p).is_absolute() else Path.cwd() / p for p in scenarios]


def distribution(root: Path) -> Path:
    """examples/xosc/ParameterValueDistribution.py: base_scenario.xosc and the distribution over it."""
    params = xosc.ParameterDeclarations()
    params.add_parameter(xosc.Parameter("$egospeed", xosc.ParameterType.double, "10"))
    params.add_parameter(xosc.Parameter("$targetspeed", xosc.ParameterType.double, "10"))
    entities = xosc.Entities()
    entities.add_scenario_object("Ego", xosc.CatalogReference("VehicleCatalog", "car_white"))
    entities.add_scenario_object("Target1", xosc.CatalogReference("VehicleCatalog", "car_red"))
    init = xosc.Init()
    for name, speed, lane, s in (("Ego", "$egospeed", -3, 25), ("Target1", "$targetspeed", -2, 15)):
        init.add_init_action(name, xosc.AbsoluteSpeedAction(speed, STEP_1S))
        init.add_init_action(name, xosc.TeleportAction(xosc.LanePosition(s, 0, lane, 0)))
    stop = xosc.ValueTrigger("stop_simulation", 0, xosc.ConditionEdge.rising, xosc.SimulationTimeCondition(10, xosc.Rule.greaterThan), "stop")
    board = xosc.StoryBoard(init, stop)
    scenario = xosc.Scenario("Parameter_example", "Mandolin", params, entities=entities, storyboard=board, roadnetwork=xosc.RoadNetwork("../xodr/e6mini.xodr"),
                             catalog=_catalog())  # fmt: skip
    _write(root, "base_scenario", scenario)
    stochastic = xosc.Stochastic(50, 1.234)
    stochastic.add_distribution("$egospeed", xosc.NormalDistribution(25, 1))
    histogram = xosc.Histogram()
    histogram.add_bin(0.3, xosc.Range(15, 25))
    histogram.add_bin(0.7, xosc.Range(25, 35))
    stochastic.add_distribution("$targetspeed", histogram)
    pvd = xosc.ParameterValueDistribution("my_parametrization", "Mandolin", "base_scenario.xosc", stochastic)
    path = root / "xosc" / "ParameterValueDistribution.xosc"
    pvd.write_xml(str(path))
    return path
