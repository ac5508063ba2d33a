"""Scenario workflows behind the core CLI commands: write the sample, convert a dataset scene.

`avsim sample` and `avsim convert` only parse options and call these; progress reporting stays
with the caller through `on_built`, which is called once the scenario exists and may return a
per-file progress callback for the save.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from avsim.core.errors import AvsimInputError
from avsim.core.safe_files import file_kind
from avsim.scenario.io import ProgressFn, check_output_folder, save_scenario
from avsim.scenario.types import Scenario

if TYPE_CHECKING:
    from avsim.scenario.bare_map import MapOptions
    from avsim.scenario.importers.openscenario import OpenScenarioOptions

OnBuilt = Callable[[Scenario], "ProgressFn | None"]
"""Called with the new scenario before it is saved; returns the save's progress callback (or None)."""


def require_map(scenario: Scenario, source: str | os.PathLike[str]) -> None:
    """Refuse a scenario without map elements (nothing to render it on).

    Args:
        scenario: the scenario to check.
        source: file or folder named in the error.

    Raises:
        AvsimInputError: the map is empty.
    """
    if scenario.map.is_empty():
        raise AvsimInputError(source, "map", "the scenario has no map elements; nothing to render it on")


def _save(scenario: Scenario, out: Path, source: str | os.PathLike[str], on_built: OnBuilt | None) -> Scenario:
    require_map(scenario, source)
    progress = on_built(scenario) if on_built is not None else None
    save_scenario(scenario, out, progress=progress)
    return scenario


def write_sample(
    out: str | os.PathLike[str],
    *,
    seed: int = 0,
    duration_s: float = 20.0,
    fps: float = 30.0,
    on_built: OnBuilt | None = None,
) -> Scenario:
    """Generate the embedded sample scenario and save it to `out` (`avsim sample`).

    Args:
        out: output scenario folder (absent, empty or an avsim scenario folder, which is replaced).
        seed: random seed; the same seed gives the same bytes.
        duration_s: scenario length in seconds.
        fps: ego pose rate in Hz.
        on_built: see the module docstring.

    Returns:
        The scenario written.
    """
    from avsim.scenario.sample import make_sample_scenario

    out = Path(out)
    check_output_folder(out)
    scenario = make_sample_scenario(seed=seed, duration_s=duration_s, fps=fps)
    return _save(scenario, out, out, on_built)


def convert_to_folder(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    fmt: str | None = None,
    rig_name: str | None = None,
    on_built: OnBuilt | None = None,
    map_options: MapOptions | None = None,
    then: Callable[[Scenario], Scenario] | None = None,
    scenario_options: OpenScenarioOptions | None = None,
) -> Scenario:
    """Convert one real-dataset scene and save it to `out` (`avsim convert`).

    Args:
        src: source file or folder; ``ROOT::name`` picks one scene or clip of a dataset root.
        out: output scenario folder (absent, empty or an avsim scenario folder, which is replaced).
        fmt: source format (see `avsim.scenario.importers.registry.FORMATS`); detected when None.
        rig_name: replace the source's camera rig by this named rig.
        on_built: see the module docstring.
        map_options: the ego and traffic of a map-only format (OpenDRIVE, Lanelet2).
        then: applied to the imported scenario before it is saved (the CLI drives a bare map's ego
            with the simulator's IDM planner through it).
        scenario_options: an OpenSCENARIO file's ego, parameters, rate and duration.

    Returns:
        The scenario written.
    """
    from avsim.scenario.importers import registry
    from avsim.scenario.importers.common import split_selector

    out = Path(out)
    check_output_folder(out)
    source = Path(split_selector(src)[0])
    kind = file_kind(source)
    if kind not in (None, "missing", "a folder"):  # a FIFO or device would be read forever
        raise AvsimInputError(source, "source", f"is {kind}, not a file or folder of a dataset")
    scenario = registry.convert(src, fmt, rig_name, map_options, scenario_options)
    if then is not None:
        scenario = then(scenario)
    return _save(scenario, out, split_selector(src)[0], on_built)


__all__ = ["OnBuilt", "convert_to_folder", "require_map", "write_sample"]
