"""`avsim export opendrive SCENARIO OUT.xodr`: a scenario's lanes and lines as an ASAM OpenDRIVE network.

`avsim.maps.opendrive.export.export_network` builds the document from the scenario's map, its
`lane_successors` (else the geometric lane graph) and `geo_reference`; this module writes it
atomically (a temporary beside OUT, parsed back by avsim's own reader, then renamed) and returns
the export's report. Same scenario, same bytes.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.maps.opendrive.export import ExportReport, export_network
from avsim.maps.opendrive.parse import read_opendrive
from avsim.scenario.types import Scenario


def _readable(path: Path) -> None:
    read_opendrive(path)  # raises AvsimInputError: the temporary is dropped, OUT stays as it was


def export_opendrive(scenario: Scenario, out: str | os.PathLike[str]) -> ExportReport:
    """Write `scenario`'s lanes as an OpenDRIVE 1.7 file.

    Args:
        scenario: the scenario (its map needs lanes).
        out: the .xodr file to write (replaced when it exists).

    Returns:
        What was written (roads, junctions, geometries, crosswalks, the largest gap bridged between linked lanes, what was dropped).
    """
    if not len(scenario.map.lanes):
        raise AvsimInputError(scenario.scenario_id, "map.lanes", "the scenario's map has no lanes to export (OpenDRIVE describes roads by their lanes)")
    successors = scenario.metadata.get("lane_successors")
    geo = scenario.metadata.get("geo_reference")
    root, report = export_network(scenario.map, successors if isinstance(successors, dict) else None, scenario.scenario_id,
                                  geo if isinstance(geo, str) else None)  # fmt: skip
    ET.indent(root, space="  ")
    data = ET.tostring(root, encoding="UTF-8", xml_declaration=True) + b"\n"
    with atomic_output_path(Path(out), check=_readable) as tmp:
        tmp.write_bytes(data)
    return report
