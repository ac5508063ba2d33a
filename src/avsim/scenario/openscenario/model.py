"""The parsed ASAM OpenSCENARIO 1.x scenario, as frozen records: what the file says once its
parameters, expressions and catalog references are resolved (nothing evaluated against the road).

Names follow the standard (the XSD of 1.0-1.3): a scenario has entities and a storyboard; the
storyboard has Init actions, stories of acts, acts of maneuver groups (with their actors), maneuvers
of events, events of actions, and triggers (condition groups OR-ed, conditions in a group AND-ed).
Only the elements avsim runs are modelled (docs/editing.md lists them); the reader refuses the
others by name. Units are the standard's: metres, seconds, radians, m/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from avsim.core.typing import StrEnum


# ---- enumerations (the XSD's values) -----------------------------------------------------------
class DynamicsShape(StrEnum):
    STEP = "step"
    LINEAR = "linear"
    CUBIC = "cubic"
    SINUSOIDAL = "sinusoidal"


class DynamicsDimension(StrEnum):
    TIME = "time"
    DISTANCE = "distance"
    RATE = "rate"


class Rule(StrEnum):
    EQUAL_TO = "equalTo"
    GREATER_THAN = "greaterThan"
    LESS_THAN = "lessThan"
    GREATER_OR_EQUAL = "greaterOrEqual"
    LESS_OR_EQUAL = "lessOrEqual"
    NOT_EQUAL_TO = "notEqualTo"


class ConditionEdge(StrEnum):
    NONE = "none"
    RISING = "rising"
    FALLING = "falling"
    RISING_OR_FALLING = "risingOrFalling"


class Priority(StrEnum):
    """An event's priority; 1.0's `overwrite` is read as `override` (its 1.1+ name)."""

    OVERRIDE = "override"
    PARALLEL = "parallel"
    SKIP = "skip"


class ElementType(StrEnum):
    STORY = "story"
    ACT = "act"
    MANEUVER_GROUP = "maneuverGroup"
    MANEUVER = "maneuver"
    EVENT = "event"
    ACTION = "action"


class ElementState(StrEnum):
    """`StoryboardElementState`: the three states and the four transitions."""

    STANDBY = "standbyState"
    RUNNING = "runningState"
    COMPLETE = "completeState"
    START_TRANSITION = "startTransition"
    END_TRANSITION = "endTransition"
    STOP_TRANSITION = "stopTransition"
    SKIP_TRANSITION = "skipTransition"


class CoordinateSystem(StrEnum):
    ENTITY = "entity"
    LANE = "lane"
    ROAD = "road"
    TRAJECTORY = "trajectory"
    WORLD = "world"


class DistanceType(StrEnum):
    """`RelativeDistanceType`; 1.0's `cartesianDistance` is read as `euclidianDistance`."""

    LATERAL = "lateral"
    LONGITUDINAL = "longitudinal"
    EUCLIDEAN = "euclidianDistance"


class EntityKind(StrEnum):
    VEHICLE = "vehicle"
    PEDESTRIAN = "pedestrian"
    MISC = "miscObject"


class TriggeringRule(StrEnum):
    ANY = "any"
    ALL = "all"


class SpeedDirection(StrEnum):
    """`SpeedCondition@direction` (1.2+); None in `SpeedCondition` is the entity's speed."""

    LONGITUDINAL = "longitudinal"
    LATERAL = "lateral"
    VERTICAL = "vertical"


# ---- positions ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Orientation:
    """`Orientation`: h, p, r (None: not given) and whether they are relative to the road or the
    reference entity (`type="relative"`, the 1.3 default) or absolute (world; the 1.0-1.2 default)."""

    h: float | None = None
    p: float | None = None
    r: float | None = None
    relative: bool = True


@dataclass(frozen=True)
class WorldPosition:
    x: float
    y: float
    z: float | None = None
    h: float | None = None
    p: float | None = None
    r: float | None = None


@dataclass(frozen=True)
class LanePosition:
    road: str
    lane: int
    s: float
    offset: float = 0.0
    orientation: Orientation | None = None


@dataclass(frozen=True)
class RoadPosition:
    road: str
    s: float
    t: float
    orientation: Orientation | None = None


@dataclass(frozen=True)
class RelativeWorldPosition:
    entity: str
    dx: float
    dy: float
    dz: float | None = None
    orientation: Orientation | None = None


@dataclass(frozen=True)
class RelativeObjectPosition:
    """dx, dy, dz in the reference entity's frame (x forward, y left)."""

    entity: str
    dx: float
    dy: float
    dz: float | None = None
    orientation: Orientation | None = None


@dataclass(frozen=True)
class RelativeLanePosition:
    """dLane lanes from the reference entity's lane, ds along the road (or dsLane along the lane's
    driving direction), offset from the lane centre."""

    entity: str
    d_lane: int
    ds: float | None = None
    ds_lane: float | None = None
    offset: float = 0.0
    orientation: Orientation | None = None


@dataclass(frozen=True)
class RelativeRoadPosition:
    entity: str
    ds: float
    dt: float
    orientation: Orientation | None = None


Position = (
    WorldPosition | LanePosition | RoadPosition | RelativeWorldPosition | RelativeObjectPosition | RelativeLanePosition | RelativeRoadPosition
)


# ---- actions -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TransitionDynamics:
    """How a value moves from its start to its target: shape over time, distance or at a rate."""

    shape: DynamicsShape
    dimension: DynamicsDimension
    value: float


@dataclass(frozen=True)
class AbsoluteSpeed:
    value: float


@dataclass(frozen=True)
class RelativeSpeed:
    """The reference entity's speed plus `value` (delta) or times `value` (factor); `continuous`
    keeps following it after the transition."""

    entity: str
    value: float
    factor: bool
    continuous: bool


@dataclass(frozen=True)
class SpeedAction:
    dynamics: TransitionDynamics
    target: AbsoluteSpeed | RelativeSpeed


@dataclass(frozen=True)
class LaneChangeAction:
    """To lane `lane` (absolute) or `relative` lanes from `entity`'s lane (left > 0), ending
    `target_offset` metres from its centre."""

    dynamics: TransitionDynamics
    lane: int | None = None
    entity: str | None = None
    relative: int = 0
    target_offset: float = 0.0


@dataclass(frozen=True)
class LaneOffsetAction:
    """To `value` metres from the lane centre (absolute), or from `entity`'s lateral position
    (relative); `max_lateral_acc` bounds the shape's duration."""

    shape: DynamicsShape
    value: float
    continuous: bool
    max_lateral_acc: float | None = None
    entity: str | None = None


@dataclass(frozen=True)
class Vertex:
    position: Position
    time: float | None = None


@dataclass(frozen=True)
class Trajectory:
    """A polyline trajectory (the shape avsim runs)."""

    name: str
    closed: bool
    vertices: tuple[Vertex, ...]


@dataclass(frozen=True)
class Timing:
    """`TimeReference/Timing`: vertex times are absolute simulation times (or relative to the
    action's start), scaled by `scale` and shifted by `offset`."""

    absolute: bool
    scale: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class FollowTrajectoryAction:
    trajectory: Trajectory
    timing: Timing | None  # None: `TimeReference/None`, the entity's speed moves it along
    following_mode: str = "position"
    initial_distance_offset: float = 0.0


@dataclass(frozen=True)
class Waypoint:
    position: Position
    strategy: str = "shortest"


@dataclass(frozen=True)
class Route:
    name: str
    closed: bool
    waypoints: tuple[Waypoint, ...]


@dataclass(frozen=True)
class AssignRouteAction:
    route: Route


@dataclass(frozen=True)
class TeleportAction:
    position: Position


@dataclass(frozen=True)
class AddEntityAction:
    entity: str
    position: Position


@dataclass(frozen=True)
class DeleteEntityAction:
    entity: str


PrivateAction = SpeedAction | LaneChangeAction | LaneOffsetAction | FollowTrajectoryAction | AssignRouteAction | TeleportAction
GlobalAction = AddEntityAction | DeleteEntityAction
Action = PrivateAction | GlobalAction


# ---- conditions --------------------------------------------------------------------------------
@dataclass(frozen=True)
class SimulationTimeCondition:
    rule: Rule
    value: float


@dataclass(frozen=True)
class StoryboardElementStateCondition:
    element_type: ElementType
    element: str
    state: ElementState


@dataclass(frozen=True)
class ReachPositionCondition:
    position: Position
    tolerance: float


@dataclass(frozen=True)
class DistanceCondition:
    position: Position
    rule: Rule
    value: float
    freespace: bool
    coordinate_system: CoordinateSystem = CoordinateSystem.ENTITY
    distance_type: DistanceType = DistanceType.EUCLIDEAN


@dataclass(frozen=True)
class RelativeDistanceCondition:
    entity: str
    rule: Rule
    value: float
    freespace: bool
    coordinate_system: CoordinateSystem = CoordinateSystem.ENTITY
    distance_type: DistanceType = DistanceType.EUCLIDEAN


@dataclass(frozen=True)
class TimeHeadwayCondition:
    entity: str
    rule: Rule
    value: float
    freespace: bool
    coordinate_system: CoordinateSystem = CoordinateSystem.ENTITY
    distance_type: DistanceType = DistanceType.EUCLIDEAN


@dataclass(frozen=True)
class TimeToCollisionCondition:
    """Time to reach an entity (`entity`) or a position (`position`) at the current speeds."""

    rule: Rule
    value: float
    freespace: bool
    entity: str | None = None
    position: Position | None = None
    coordinate_system: CoordinateSystem = CoordinateSystem.ENTITY
    distance_type: DistanceType = DistanceType.EUCLIDEAN


@dataclass(frozen=True)
class SpeedCondition:
    rule: Rule
    value: float
    direction: SpeedDirection | None = None


EntityConditionKind = (
    ReachPositionCondition | DistanceCondition | RelativeDistanceCondition | TimeHeadwayCondition | TimeToCollisionCondition | SpeedCondition
)
ValueConditionKind = SimulationTimeCondition | StoryboardElementStateCondition


@dataclass(frozen=True)
class ByEntity:
    """An entity condition over the triggering entities (any or all of them must satisfy it)."""

    entities: tuple[str, ...]
    rule: TriggeringRule
    condition: EntityConditionKind


@dataclass(frozen=True)
class Condition:
    name: str
    delay: float
    edge: ConditionEdge
    kind: ByEntity | ValueConditionKind


@dataclass(frozen=True)
class Trigger:
    """Condition groups, OR-ed; the conditions of a group AND-ed. No group: `default`."""

    groups: tuple[tuple[Condition, ...], ...]
    default: bool


# ---- storyboard --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ActionElement:
    """A named `Action` of an event: a private action (applied to every actor of its maneuver
    group) or a global one."""

    name: str
    action: Action


@dataclass(frozen=True)
class Event:
    name: str
    priority: Priority
    actions: tuple[ActionElement, ...]
    start_trigger: Trigger | None
    max_executions: int = 1


@dataclass(frozen=True)
class Maneuver:
    name: str
    events: tuple[Event, ...]


@dataclass(frozen=True)
class ManeuverGroup:
    name: str
    max_executions: int
    actors: tuple[str, ...]
    select_triggering_entities: bool
    maneuvers: tuple[Maneuver, ...]


@dataclass(frozen=True)
class Act:
    name: str
    groups: tuple[ManeuverGroup, ...]
    start_trigger: Trigger | None
    stop_trigger: Trigger | None


@dataclass(frozen=True)
class Story:
    name: str
    acts: tuple[Act, ...]


@dataclass(frozen=True)
class InitAction:
    """An Init action: a private action of `entity`, or a global action (`entity` None)."""

    entity: str | None
    action: Action


@dataclass(frozen=True)
class Storyboard:
    init: tuple[InitAction, ...]
    stories: tuple[Story, ...]
    stop_trigger: Trigger | None


# ---- entities ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BoundingBox:
    """Centre (x, y, z) relative to the entity's reference point (vehicles: the rear axle on the
    ground), dimensions length, width, height."""

    center: tuple[float, float, float]
    length: float
    width: float
    height: float


@dataclass(frozen=True)
class Performance:
    max_speed: float
    max_acceleration: float
    max_deceleration: float


UNLIMITED = Performance(1e9, 1e9, 1e9)  # pedestrians and objects: the standard gives no limits


@dataclass(frozen=True)
class Entity:
    """A `ScenarioObject`: its name, kind and category (vehicleCategory, pedestrianCategory or
    miscObjectCategory), bounding box, performance, axles (front, rear positionX; None: absent)
    and properties."""

    name: str
    kind: EntityKind
    category: str
    bbox: BoundingBox
    performance: Performance = UNLIMITED
    front_axle_x: float | None = None
    rear_axle_x: float = 0.0
    properties: tuple[tuple[str, str], ...] = ()
    catalog_entry: str | None = None
    controller: str | None = None  # the name of an `ObjectController`'s controller (the ego's only)

    def property(self, name: str) -> str | None:
        """The value of property `name`, or None."""
        return next((v for k, v in self.properties if k == name), None)


@dataclass(frozen=True)
class FileHeader:
    rev_major: int
    rev_minor: int
    description: str = ""
    author: str = ""
    date: str = ""
    properties: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ScenarioDocument:
    """A scenario definition: header, the parameters' values (after overrides), the road network
    file as written (None: none), entities in file order and the storyboard."""

    header: FileHeader
    parameters: dict[str, str]
    road_file: str | None
    entities: tuple[Entity, ...]
    storyboard: Storyboard
    parameter_types: dict[str, str] = field(default_factory=dict)

    def entity(self, name: str) -> Entity | None:
        """The entity `name`, or None."""
        return next((e for e in self.entities if e.name == name), None)
