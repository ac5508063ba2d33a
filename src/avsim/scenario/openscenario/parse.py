"""Reading an OpenSCENARIO file: a scenario definition (`read_scenario`) or a parameter value
distribution over one (`read_distribution`, in `distribution`).

The document is parsed with avsim's safe XML parser (no DTD, no entities, bounded size and depth),
its `FileHeader` must say revision 1.0-1.3, and the scenario's global `ParameterDeclarations` take
the caller's overrides (a distribution's variant, `avsim convert --param`, an edit sweep) before
anything is resolved. Errors are one line naming the file and the element path.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from avsim.core.errors import AvsimInputError
from avsim.core.safe_xml import MAX_XML_BYTES, parse_xml
from avsim.scenario.openscenario.model import FileHeader, ScenarioDocument
from avsim.scenario.openscenario.parse_entities import entities
from avsim.scenario.openscenario.parse_storyboard import storyboard
from avsim.scenario.openscenario.reader import XoscReader
from avsim.scenario.openscenario.sources import Sources

MAX_XOSC_BYTES = 64 * 1024**2
SUPPORTED_REVISIONS = (0, 1, 2, 3)
CATALOG_KINDS = ("VehicleCatalog", "PedestrianCatalog", "MiscObjectCatalog", "ControllerCatalog", "ManeuverCatalog", "TrajectoryCatalog",
                 "RouteCatalog", "EnvironmentCatalog")  # fmt: skip


@dataclass(frozen=True)
class ParsedFile:
    """A parsed OpenSCENARIO file: its root, header and the name errors give it."""

    root: ET.Element
    header: FileHeader
    name: str

    @property
    def is_distribution(self) -> bool:
        return self.root.find("ParameterValueDistribution") is not None


def parse_file(sources: Sources, relative: str | None = None) -> ParsedFile:
    """Parse the main file of `sources` (or the file `relative` to it) and check its header.

    Args:
        sources: where the file comes from.
        relative: another file than the main one (a distribution's scenario).

    Returns:
        The parsed file.
    """
    key = relative if relative is not None else sources.main
    name = sources.name(key)
    data = sources.read(key, "ScenarioFile" if relative is not None else "file")
    if len(data) > MAX_XOSC_BYTES:
        raise AvsimInputError(name, "file", f"{len(data)} bytes is over the {MAX_XOSC_BYTES}-byte limit for OpenSCENARIO files")
    root = parse_xml(data[:MAX_XML_BYTES], name)
    if root.tag not in ("OpenSCENARIO", "OpenScenario"):
        raise AvsimInputError(name, "root", f"expected an <OpenSCENARIO> document, got <{root.tag[:40]}>")
    r = XoscReader(name, sources)
    h = r.need(root, "FileHeader")
    with r.at(h):
        header = FileHeader(r.int_(h, "revMajor"), r.int_(h, "revMinor"), r.text(h, "description", ""), r.text(h, "author", ""),
                            r.text(h, "date", ""), _header_properties(r, h))  # fmt: skip
    if header.rev_major != 1 or header.rev_minor not in SUPPORTED_REVISIONS:
        raise AvsimInputError(name, "FileHeader", f"revision {header.rev_major}.{header.rev_minor}; avsim reads OpenSCENARIO 1.0 to 1.3")
    return ParsedFile(root, header, name)


def _header_properties(r: XoscReader, h: ET.Element) -> tuple[tuple[str, str], ...]:
    p = h.find("Properties")
    return () if p is None else tuple((r.text(q, "name"), r.text(q, "value")) for q in p.findall("Property"))


def _road_file(r: XoscReader, root: ET.Element) -> str | None:
    net = r.need(root, "RoadNetwork")
    with r.at(net):
        r.only(net, {"LogicFile", "SceneGraphFile", "UsedArea"}, {"TrafficSignals"} if not list(net.iterfind("TrafficSignals/*")) else set())
        logic = net.find("LogicFile")
        return None if logic is None else r.text(logic, "filepath")


def _catalog_dirs(r: XoscReader, root: ET.Element) -> list[str]:
    locations = r.need(root, "CatalogLocations")
    out: list[str] = []
    with r.at(locations):
        for kind in CATALOG_KINDS:
            loc = locations.find(kind)
            if loc is not None:
                with r.at(loc):
                    out.append(r.text(r.need(loc, "Directory"), "path"))
    return out


def read_scenario(sources: Sources, overrides: dict[str, str] | None = None, parsed: ParsedFile | None = None) -> ScenarioDocument:
    """The scenario definition of `sources`' main file.

    Args:
        sources: the main file and what it refers to.
        overrides: values for global parameters (names without `$`; every name must be declared).
        parsed: the main file already parsed (`parse_file`).

    Returns:
        The resolved scenario.
    """
    f = parsed or parse_file(sources)
    root = f.root
    if root.find("Catalog") is not None:
        raise AvsimInputError(f.name, "Catalog", "this is a catalog file, not a scenario")
    if f.is_distribution:
        raise AvsimInputError(f.name, "ParameterValueDistribution", "this is a parameter distribution; convert it to a folder of variants")
    r = XoscReader(f.name, sources)
    rev = f.header.rev_minor
    r.only(root, {"FileHeader", "ParameterDeclarations", "CatalogLocations", "RoadNetwork", "Entities", "Storyboard"},
           {"VariableDeclarations", "MonitorDeclarations"})  # fmt: skip
    declarations = root.find("ParameterDeclarations")
    overrides = dict(overrides or {})
    with r.scope(None):
        if declarations is not None:
            r.declare(declarations, r.scopes[-1], overrides)
        unknown = sorted(set(overrides) - set(r.scopes[-1]))
        if unknown:
            raise AvsimInputError(f.name, "ParameterDeclarations", f"no global parameter named {', '.join(unknown)[:200]} to set")
        values = dict(r.scopes[-1])
        r.catalog_dirs = _catalog_dirs(r, root)
        road = _road_file(r, root)
        ents = entities(r, r.need(root, "Entities"))
        board = storyboard(r, r.need(root, "Storyboard"), rev)
    return ScenarioDocument(f.header, values, road, ents, board, {k: r.types[k] for k in values if k in r.types})
