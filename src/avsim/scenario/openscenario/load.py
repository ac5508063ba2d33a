"""A scenario ready to run: its document with the parameters set, its road network, its ego;
from files on disk or from a converted scenario's metadata.

The ego is `--ego NAME`, else the entity with the property `avsim:role=ego` (avsim's exports), else
the first entity named `Ego`, `hero` or `ego_vehicle` (any case; esmini's and CARLA's conventions),
else the first vehicle. Only the ego may carry an
`ObjectController`: the storyboard drives it in a conversion and the policy in `avsim sim`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from avsim.core.errors import AvsimInputError
from avsim.maps.opendrive.network import RoadNetwork
from avsim.maps.opendrive.parse import parse_opendrive
from avsim.scenario.openscenario.engine import StoryboardEngine
from avsim.scenario.openscenario.model import EntityKind, ScenarioDocument
from avsim.scenario.openscenario.parse import read_scenario
from avsim.scenario.openscenario.record import ROLE_EGO, ROLE_PROPERTY
from avsim.scenario.openscenario.sources import EmbeddedSources, Sources, embed_sources

EGO_NAMES = ("ego", "hero", "ego_vehicle", "egovehicle")
DEFAULT_RATE_HZ = 20.0
DEFAULT_MAX_DURATION_S = 60.0
MAX_DURATION_S = 3600.0
MAX_RATE_HZ = 1000.0
META_KEY = "openscenario"


@dataclass(frozen=True)
class RunOptions:
    """How a scenario runs: its ego (None: see the module docstring), global parameter values,
    the step rate and the longest run (without a stop trigger it ends when its stories complete)."""

    ego: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    rate_hz: float = DEFAULT_RATE_HZ
    max_duration_s: float = DEFAULT_MAX_DURATION_S

    def check(self, where: str) -> None:
        if not (math.isfinite(self.rate_hz) and 0 < self.rate_hz <= MAX_RATE_HZ):
            raise AvsimInputError(where, "--rate", f"expected a rate in (0, {MAX_RATE_HZ:g}] Hz, got {self.rate_hz}")
        if not (math.isfinite(self.max_duration_s) and 0 < self.max_duration_s <= MAX_DURATION_S):
            raise AvsimInputError(where, "--duration", f"expected (0, {MAX_DURATION_S:g}] s, got {self.max_duration_s}")


@dataclass
class Loaded:
    """A parsed scenario with its network and ego, and where its files came from."""

    doc: ScenarioDocument
    net: RoadNetwork
    ego: str
    sources: Sources
    road_bytes: bytes
    where: str

    def engine(self, external_ego: bool = False) -> StoryboardEngine:
        return StoryboardEngine(self.doc, self.net, self.ego if external_ego else None)

    def embedded(self, served: dict[str, bytes]) -> dict[str, Any]:
        """The files to embed in the converted scenario's metadata."""
        assert self.doc.road_file is not None
        from avsim.scenario.openscenario.sources import normalise

        files = dict(served)
        files[normalise(self.doc.road_file)] = self.road_bytes
        return embed_sources(normalise(self.sources.main), files)


def pick_ego(doc: ScenarioDocument, asked: str | None, where: str) -> str:
    """The ego entity's name (see the module docstring)."""
    names = [e.name for e in doc.entities]
    if asked is not None:
        if asked not in names:
            raise AvsimInputError(where, "--ego", f"no entity named {asked!r} (entities: {', '.join(names)[:300]})")
        return asked
    for e in doc.entities:
        if e.property(ROLE_PROPERTY) == ROLE_EGO:
            return e.name
    for e in doc.entities:
        if e.name.lower() in EGO_NAMES:
            return e.name
    for e in doc.entities:
        if e.kind is EntityKind.VEHICLE:
            return e.name
    raise AvsimInputError(where, "Entities", "no vehicle to be the ego; name one with --ego")


def load_scenario_files(sources: Sources, options: RunOptions, road_override: bytes | None = None) -> Loaded:
    """Parse a scenario and its road network.

    Args:
        sources: the main file and its references.
        options: ego and parameters.
        road_override: the road network's bytes instead of its `LogicFile` (`avsim convert --map`).

    Returns:
        The loaded scenario.
    """
    where = sources.name(sources.main)
    doc = read_scenario(sources, options.parameters)
    if doc.road_file is None:
        raise AvsimInputError(where, "RoadNetwork/LogicFile", "the scenario names no OpenDRIVE road network (or give one with --map)")
    data = road_override if road_override is not None else sources.read(doc.road_file, "RoadNetwork/LogicFile")
    net = RoadNetwork(parse_opendrive(data, sources.name(doc.road_file)))
    ego = pick_ego(doc, options.ego, where)
    for e in doc.entities:
        if e.controller is not None and e.name != ego:
            raise AvsimInputError(where, f"Entities/ScenarioObject[{e.name}]/ObjectController",
                                  "controllers are not supported by avsim's OpenSCENARIO runner (the ego's is replaced by the storyboard or the policy)")  # fmt: skip
    return Loaded(doc, net, ego, sources, data, where)


def load_from_metadata(metadata: dict[str, Any], where: str) -> tuple[Loaded, RunOptions]:
    """The scenario a converted scenario came from, with the options it ran with.

    Args:
        metadata: the converted scenario's metadata (`metadata["openscenario"]`).
        where: the scenario named in errors.

    Returns:
        (the loaded scenario, its run options).
    """
    doc = metadata.get(META_KEY)
    if not isinstance(doc, dict) or "sources" not in doc:
        raise AvsimInputError(where, f"metadata.{META_KEY}", "the scenario was not converted from OpenSCENARIO (avsim convert --from openscenario)")
    sources = EmbeddedSources(doc["sources"], where)
    params = doc.get("parameters") or {}
    if not isinstance(params, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in params.items()):
        raise AvsimInputError(where, f"metadata.{META_KEY}.parameters", "expected names and string values")
    ego, rate, duration = doc.get("ego"), doc.get("rate_hz"), doc.get("max_duration_s")
    if not isinstance(ego, str) or not isinstance(rate, (int, float)) or not isinstance(duration, (int, float)):
        raise AvsimInputError(where, f"metadata.{META_KEY}", "expected ego, rate_hz and max_duration_s")
    options = RunOptions(ego, dict(params), float(rate), float(duration))
    options.check(where)
    return load_scenario_files(sources, options), options
