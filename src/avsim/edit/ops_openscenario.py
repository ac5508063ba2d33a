"""Edits of scenarios converted from OpenSCENARIO: run the scenario's storyboard again with other
values of its global parameters (`openscenario_parameters`).

`avsim convert --from openscenario` keeps the scenario's files in the converted scenario; this op
reads them back, sets the given parameters (every name must be declared in the scenario's global
`ParameterDeclarations`; the values are parameter strings, so numbers and booleans are written as
OpenSCENARIO reads them) and records a new run with the same ego, rate and longest duration. With
an edit file's `sweep`, an author's parameterised scenario becomes named variants:

    sweep: {speed: [20, 25, 30]}
    ops:
      - op: openscenario_parameters
        values: {EgoSpeed: $speed}

The op replaces the whole recording, so it comes first in `ops` (later ops edit the new run).
"""

from __future__ import annotations

import math
from typing import Any

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.scenario import Scenario
from avsim.scenario.importers.openscenario import run_loaded
from avsim.scenario.openscenario.load import RunOptions, load_from_metadata, load_scenario_files

from .editfile_parse import At, _fail, _type_name

MAX_VALUES = 1000


def parameter_values(v: Any, at: At) -> dict[str, str]:
    """`values`: parameter name -> a string, number or boolean (written as OpenSCENARIO reads them)."""
    if not isinstance(v, dict) or not v:
        _fail(at.line, at.path, f"expected a mapping of parameter names to values, got {_type_name(v)}")
    if len(v) > MAX_VALUES:
        _fail(at.line, at.path, f"more than {MAX_VALUES} parameters")
    out: dict[str, str] = {}
    for key, value in v.items():
        where = at.child(key, v)
        if not isinstance(key, str) or not key.strip("$"):
            _fail(where.line, where.path, "expected a parameter name")
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        elif isinstance(value, float) and math.isfinite(value):
            text = repr(value)
        elif isinstance(value, str) and len(value) <= 1024:
            text = value
        else:
            _fail(where.line, where.path, f"expected a string, number or boolean, got {_type_name(value)}")
        out[key.lstrip("$")] = text
    return out


def set_parameters(scenario: Scenario, values: dict[str, str]) -> Scenario:
    """The scenario's storyboard run again with `values` for its global parameters.

    Args:
        scenario: a scenario converted from OpenSCENARIO.
        values: parameter name -> value.

    Returns:
        The new recording, with the scenario's id and rig.
    """
    try:
        loaded, options = load_from_metadata(scenario.metadata, scenario.scenario_id)
        run = RunOptions(options.ego, {**options.parameters, **values}, options.rate_hz, options.max_duration_s)
        again = load_scenario_files(loaded.sources, run)
        out = run_loaded(again, run, scenario.scenario_id)
    except AvsimInputError as exc:
        raise AvsimValueError(f"values: {exc.field}: {exc.reason}") from None
    return out.replace(rig=scenario.rig)
