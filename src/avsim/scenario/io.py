"""Native on-disk scenario format: a folder with `scenario.json` and polars-written parquet tables.

Layout (schema version 1, documented field by field in docs/format.md)::

    <folder>/scenario.json            format, schema_version, scenario_id, rig, tables, metadata
    <folder>/ego.parquet              one row per ego pose (world_SE3_ego as a 3x3 matrix + t)
    <folder>/agents.parquet           one row per (track, timestamp) observation
    <folder>/lights.parquet           one row per (light, timestamp) state change
    <folder>/map_<element>.parquet    one row per map element; ragged geometry as list columns

Rotations of the ego are stored as matrices (not quaternions) so a save/load round trip is
bit-exact: `SE3` holds matrices and a quaternion detour would change the last bits.
Every table is always written (possibly with zero rows) so a missing file is always an error.
Loading validates everything and raises `AvsimInputError(file, field, reason)`.

This module is the public API (save, load, compare, the schema constants); the work is done by
`avsim.scenario.io_tables` (parquet tables), `avsim.scenario.io_header` (scenario.json),
`avsim.scenario.io_checks` (value checks), `avsim.scenario.io_schema` (constants) and
`avsim.scenario.compare` (`scenario_differences`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.maps import HDMap
from avsim.scenario.compare import scenario_differences
from avsim.scenario.io_checks import check_finite
from avsim.scenario.io_header import (
    check_table_digest,
    header_json,
    read_header,
    read_rig,
    read_table_digests,
    read_table_index,
    table_digest,
)
from avsim.scenario.io_schema import (
    AGENT_COLUMNS,
    AGENTS_FILE,
    CUBOID_COLUMNS,
    EGO_COLUMNS,
    EGO_FILE,
    FORMAT_NAME,
    LANE_COLUMNS,
    LANE_LINE_COLUMNS,
    LIGHT_COLUMNS,
    LIGHTS_FILE,
    MAP_ELEMENTS,
    POLYLINE_COLUMNS,
    ROTATION_TOLERANCE,
    SCENARIO_JSON,
    SCHEMA_VERSION,
    TABLE_COLUMNS,
    TABLE_FILES,
    UNIT_QUAT_TOLERANCE,
    build_checked,
    map_file,
)
from avsim.scenario.io_tables import MAP_READERS, agents_from, ego_from, lights_from, read_table, scenario_tables
from avsim.scenario.types import Scenario

ProgressFn = Callable[[str], None]
"""Called with each file name once it is written."""


# ==========================================================================================
# writing
# ==========================================================================================
def save_scenario(
    scenario: Scenario,
    folder: str | Path,
    *,
    allow_empty_map: bool = False,
    progress: ProgressFn | None = None,
) -> Path:
    """Write `scenario` to `folder` atomically (temp folder beside it, renamed on success).

    An existing `folder` is replaced only when it is empty or an avsim scenario folder, so a
    mistyped path never deletes unrelated data. `progress(file_name)` is called after each file.
    Raises `AvsimValueError` for an empty map (unless `allow_empty_map`) or non-JSON metadata,
    `AvsimInputError` for an unusable target. Same scenario -> same bytes.
    """
    folder = Path(folder)
    check_output_folder(folder)
    if scenario.map.is_empty() and not allow_empty_map:
        raise AvsimValueError(f"map: scenario {scenario.scenario_id!r} has no map elements (an empty map is not a usable scenario)")
    tables = scenario_tables(scenario)
    _check_loadable(scenario, tables)
    rows = {name: df.height for name, df in tables.items()}
    header_json(scenario, rows)  # checks the metadata before anything is written
    with atomic_output_path(folder, is_dir=True) as tmp:
        for name, df in tables.items():
            df.write_parquet(tmp / name, compression="zstd", statistics=True)
            if progress is not None:
                progress(name)
        digests = {name: table_digest(tmp / name) for name in tables}
        (tmp / SCENARIO_JSON).write_text(header_json(scenario, rows, digests), encoding="utf-8")
        if progress is not None:
            progress(SCENARIO_JSON)
    return folder


def _check_loadable(scenario: Scenario, tables: dict[str, Any]) -> None:
    """Refuse, before anything is written, a value the loader would refuse (non-finite, beyond a limit)."""
    for name, df in tables.items():
        try:
            check_finite(Path(name), df)
        except AvsimInputError as exc:
            raise AvsimValueError(
                f"{name}: {exc.field}: {exc.reason}; scenario {scenario.scenario_id!r} is not saved (load_scenario would refuse it)"
            ) from None


def check_output_folder(folder: str | Path) -> None:
    """Raise AvsimInputError unless `folder` is absent, empty or an avsim scenario (safe to replace)."""
    folder = Path(folder)
    if not folder.exists():
        return
    if not folder.is_dir():
        raise AvsimInputError(folder, "output", "exists and is not a folder; refusing to replace it")
    if (folder / SCENARIO_JSON).is_file() or not any(folder.iterdir()):
        return
    raise AvsimInputError(folder, "output", "exists, is not empty and is not an avsim scenario folder; refusing to replace it")


# ==========================================================================================
# reading
# ==========================================================================================
def load_scenario(folder: str | Path, *, allow_empty_map: bool = False) -> Scenario:
    """Read and validate a scenario folder written by `save_scenario`.

    Every problem raises `AvsimInputError(file, field, reason)` with a one-line message: a
    missing or truncated file, a wrong schema version, NaN/inf values, non-unit quaternions,
    non-rotation matrices, timestamps that do not strictly increase, a camera with zero focal
    length, (unless `allow_empty_map`) a map without any element, or a table whose bytes differ
    from the sha256 scenario.json recorded for it (corruption; scenarios written before digests
    have none and are not checked).
    """
    folder = Path(folder)
    if not folder.exists():
        raise AvsimInputError(folder, "scenario", "not found")
    if not folder.is_dir():
        raise AvsimInputError(folder, "scenario", "not a folder (a scenario is a folder holding scenario.json)")
    header_path = folder / SCENARIO_JSON
    header = read_header(header_path)
    rig = read_rig(header_path, header["rig"])
    expected_rows = read_table_index(header_path, header.get("tables"))
    digests = read_table_digests(header_path, header["tables"])
    frames = {name: read_table(folder / name, expected_rows[name]) for name in TABLE_FILES}

    ego = build_checked(folder / EGO_FILE, "EgoTrajectory", lambda: ego_from(folder / EGO_FILE, frames[EGO_FILE]))
    agents = build_checked(folder / AGENTS_FILE, "AgentTracks", lambda: agents_from(folder / AGENTS_FILE, frames[AGENTS_FILE]))
    lights = build_checked(folder / LIGHTS_FILE, "TrafficLightStates", lambda: lights_from(folder / LIGHTS_FILE, frames[LIGHTS_FILE]))
    elements: dict[str, Any] = {}
    for element, (kind, _) in MAP_ELEMENTS.items():
        path = folder / map_file(element)
        elements[element] = build_checked(path, element, partial(MAP_READERS[kind], path, frames[path.name]))
    hd_map = build_checked(folder, "map", lambda: HDMap(**elements))
    if hd_map.is_empty() and not allow_empty_map:
        raise AvsimInputError(folder, "map", "every map_*.parquet table is empty; a scenario needs a map")
    for name in TABLE_FILES:  # last: a truncated or invalid table has a more telling error above
        check_table_digest(header_path, folder / name, digests[name])
    return build_checked(
        header_path,
        "scenario",
        lambda: Scenario(
            scenario_id=header["scenario_id"],
            rig=rig,
            ego=ego,
            agents=agents,
            map=hd_map,
            lights=lights,
            metadata=header["metadata"],
            frame_origin_ns=header.get("frame_origin_ns"),
        ),
    )


__all__ = [
    "SCHEMA_VERSION",
    "FORMAT_NAME",
    "SCENARIO_JSON",
    "TABLE_FILES",
    "TABLE_COLUMNS",
    "MAP_ELEMENTS",
    "save_scenario",
    "check_output_folder",
    "load_scenario",
    "scenario_differences",
    # per-table column schemas and tolerances (module attributes before the split; kept importable)
    "EGO_COLUMNS",
    "AGENT_COLUMNS",
    "LIGHT_COLUMNS",
    "POLYLINE_COLUMNS",
    "LANE_LINE_COLUMNS",
    "LANE_COLUMNS",
    "CUBOID_COLUMNS",
    "EGO_FILE",
    "AGENTS_FILE",
    "LIGHTS_FILE",
    "UNIT_QUAT_TOLERANCE",
    "ROTATION_TOLERANCE",
    "ProgressFn",
    "map_file",
]
