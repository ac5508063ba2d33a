"""`avsim convert --from openscenario FILE.xosc`: an ASAM OpenSCENARIO 1.x scenario, run by avsim's
storyboard runner, as an avsim scenario.

The scenario is read (`avsim.scenario.openscenario.parse`), its road network (`RoadNetwork/LogicFile`,
OpenDRIVE) becomes the map as `--from opendrive` builds it, and its storyboard runs at a fixed rate
(`avsim.scenario.openscenario.engine`) with the ego driven by the storyboard: the run is the
recorded scenario (`avsim.scenario.openscenario.record`). The metadata keeps the scenario's
header, parameter values, ego, rate, the storyboard's state changes with their times, how the run
ended, and the scenario's files themselves (compressed: the scenario, its catalogs and its road
network), so that `avsim sim --agents storyboard` and the parameter edits can run it again.

A `ParameterValueDistribution` file converts to one scenario per parameter set (`load_distribution`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.lights import TrafficLightStates
from avsim.core.rig import named_rig
from avsim.maps.opendrive.hdmap import build_hdmap
from avsim.scenario.importers.opendrive import opendrive_metadata
from avsim.scenario.openscenario.distribution import Variant, read_distribution
from avsim.scenario.openscenario.load import META_KEY, Loaded, RunOptions, load_scenario_files
from avsim.scenario.openscenario.parse import parse_file
from avsim.scenario.openscenario.record import ID_PROPERTY, START_PROPERTY, ego_metadata, recorded_tracks
from avsim.scenario.openscenario.sources import FolderSources, Sources
from avsim.scenario.types import Scenario

StepFn = Callable[[int, int], None]


@dataclass(frozen=True)
class OpenScenarioOptions:
    """`avsim convert --from openscenario`'s options: the run (`RunOptions`), the folder references
    may reach into (`root`; None: the scenario's folder), a road network replacing the scenario's,
    and the run's progress (called with steps done, steps at most)."""

    run: RunOptions = field(default_factory=RunOptions)
    root: Path | None = None
    road_file: Path | None = None
    on_step: StepFn | None = field(default=None, compare=False)


def _header(loaded: Loaded) -> dict[str, Any]:
    h = loaded.doc.header
    return {"rev_major": h.rev_major, "rev_minor": h.rev_minor, "description": h.description, "author": h.author, "date": h.date}


def run_loaded(loaded: Loaded, options: RunOptions, scenario_id: str, rig_name: str | None = None, served: dict[str, bytes] | None = None,
               on_step: StepFn | None = None) -> Scenario:  # fmt: skip
    """Run a loaded scenario with the storyboard driving the ego and record it.

    Args:
        loaded: the scenario, its network and ego.
        options: rate, longest run, ego, parameters (as recorded in the metadata).
        scenario_id: the new scenario's id.
        rig_name: named camera rig (default cosmos).
        served: the files read (to embed; None: re-embed the loaded scenario's own).
        on_step: progress, called with (steps done, steps at most).

    Returns:
        The recorded scenario.
    """
    options.check(loaded.where)
    engine = loaded.engine()
    header = dict(loaded.doc.header.properties)
    start_ns = _start_ns(header.get(START_PROPERTY), loaded.where)
    scenario_id = header.get(ID_PROPERTY) or scenario_id
    try:
        engine.run(options.rate_hz, options.max_duration_s, on_step)
        ego, agents = recorded_tracks({e.name: e for e in loaded.doc.entities}, engine.samples, loaded.ego, start_ns)
    except AvsimValueError as exc:
        raise AvsimInputError(loaded.where, "Storyboard", str(exc)) from None
    built = build_hdmap(loaded.net)
    assert loaded.doc.road_file is not None
    meta = opendrive_metadata(loaded.net, built, loaded.doc.road_file)
    ended = "stop trigger" if engine.root.state == "completeState" else "stories complete" if engine.finished else "duration limit"
    meta.update(source_format="openscenario", source=Path(loaded.sources.main).name, map_source=Path(loaded.doc.road_file).name)
    meta.update(ego_metadata(loaded.doc.entity(loaded.ego)))  # type: ignore[arg-type]
    meta[META_KEY] = {
        "header": _header(loaded), "parameters": dict(loaded.doc.parameters), "parameter_types": dict(loaded.doc.parameter_types),
        "ego": loaded.ego, "rate_hz": options.rate_hz, "max_duration_s": options.max_duration_s, "ended": ended,
        "duration_s": round(engine.time, 9),
        "entities": {e.name: {"kind": str(e.kind), "category": e.category, "catalog_entry": e.catalog_entry, "controller": e.controller}
                     for e in loaded.doc.entities},
        "storyboard_log": [{"time_s": c.time, "element": c.element, "type": c.kind, "state": c.state} for c in engine.changes],
        "sources": loaded.embedded(served if served is not None else _served(loaded.sources)),
    }  # fmt: skip
    rig = named_rig(rig_name or "cosmos")
    meta["rig_source"] = f"named default {rig_name or 'cosmos'!r}"
    return Scenario(scenario_id, rig, ego, agents, built.hdmap, TrafficLightStates.empty(), meta)


def _start_ns(value: str | None, where: str) -> int:
    """The `avsim:startTimeNs` header property (avsim's exports): the timestamp of simulation time 0."""
    if value is None:
        return 0
    try:
        out = int(value)
    except ValueError:
        raise AvsimInputError(where, f"FileHeader/Properties/{START_PROPERTY}", f"expected integer nanoseconds, got {value[:80]!r}") from None
    if abs(out) > 2**62:
        raise AvsimInputError(where, f"FileHeader/Properties/{START_PROPERTY}", "out of range")
    return out


def _served(sources: Sources) -> dict[str, bytes]:
    served = getattr(sources, "served", None)
    if isinstance(served, dict):
        return served
    files = getattr(sources, "files", {})
    return {k: sources.read(k, "sources") for k in files}


def _sources(path: str | os.PathLike[str], options: OpenScenarioOptions) -> tuple[FolderSources, bytes | None]:
    sources = FolderSources(path, options.root)
    road = None
    if options.road_file is not None:
        from avsim.core.safe_files import regular_file

        road = regular_file(options.road_file, "--map").read_bytes()
    return sources, road


def load_openscenario(path: str | os.PathLike[str], rig_name: str | None = None, options: OpenScenarioOptions | None = None,
                      on_step: StepFn | None = None) -> Scenario:  # fmt: skip
    """Convert an OpenSCENARIO scenario file (see the module docstring).

    Args:
        path: the .xosc file.
        rig_name: named camera rig (default cosmos).
        options: ego, parameters, rate, longest run, root, road network.
        on_step: progress of the run.

    Returns:
        The scenario, id the file's stem.
    """
    options = options or OpenScenarioOptions()
    sources, road = _sources(path, options)
    if parse_file(sources).is_distribution:
        raise AvsimInputError(path, "ParameterValueDistribution", "a parameter distribution converts to a folder of variants (avsim convert DIST.xosc OUT/ writes one scenario per parameter set)")
    loaded = load_scenario_files(sources, options.run, road)
    return run_loaded(loaded, options.run, Path(path).stem or "openscenario", rig_name, sources.served, on_step or options.on_step)


def is_distribution(path: str | os.PathLike[str], options: OpenScenarioOptions | None = None) -> bool:
    """Whether an .xosc file is a `ParameterValueDistribution`."""
    return parse_file(_sources(path, options or OpenScenarioOptions())[0]).is_distribution


def load_distribution(path: str | os.PathLike[str], rig_name: str | None = None, options: OpenScenarioOptions | None = None,
                      on_variant: Callable[[int, int, str], None] | None = None) -> list[tuple[Variant, Scenario]]:  # fmt: skip
    """Convert every parameter set of a `ParameterValueDistribution` (see `distribution`).

    Args:
        path: the distribution .xosc file.
        rig_name: named camera rig.
        options: as `load_openscenario` (their parameters apply under every set's).
        on_variant: progress, called with (index, count, variant name) before each variant runs.

    Returns:
        (variant, scenario) per parameter set, in the distribution's order; scenario ids `<scenario stem>__<variant>`.
    """
    options = options or OpenScenarioOptions()
    dist_sources, road = _sources(path, options)
    dist = read_distribution(dist_sources)
    out = []
    for k, variant in enumerate(dist.variants):
        if on_variant is not None:
            on_variant(k, len(dist.variants), variant.name)
        sources = FolderSources(dist.scenario_path, options.root or Path(path).parent)
        run = RunOptions(options.run.ego, {**options.run.parameters, **variant.parameters}, options.run.rate_hz, options.run.max_duration_s)
        loaded = load_scenario_files(sources, run, road)
        scenario_id = f"{Path(dist.scenario_path).stem}__{variant.name}"
        out.append((variant, run_loaded(loaded, run, scenario_id, rig_name, sources.served, options.on_step)))
    return out
