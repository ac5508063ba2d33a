"""Read a Lanelet2 map's OSM XML (JOSM's `.osm`, as Lanelet2's `lanelet2_io` writes and reads it).

Nodes carry lat/lon (degrees) and optional tags (`ele` in metres: the node's height, as
`lanelet2_io` reads it; Autoware's `local_x`, `local_y`); ways list node ids; relations list
members (type, ref, role). Tags are kept as strings. Nodes, ways and relations marked
`action="delete"` (JOSM edits) are dropped, as `lanelet2_io` does. The XML is untrusted:
`avsim.core.safe_xml` parses it; a bad value is `AvsimInputError(file, "node[id=..]@lat", ...)`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from avsim.core.errors import AvsimInputError
from avsim.core.safe_xml import read_xml


@dataclass(frozen=True)
class Node:
    lat: float
    lon: float
    ele: float
    tags: dict[str, str]


@dataclass(frozen=True)
class Way:
    nodes: tuple[int, ...]
    tags: dict[str, str]


@dataclass(frozen=True)
class Member:
    type: str  # node, way, relation
    ref: int
    role: str


@dataclass(frozen=True)
class Relation:
    members: tuple[Member, ...]
    tags: dict[str, str]

    def refs(self, role: str, kind: str | None = None) -> list[int]:
        """Member ids with this role (and member type)."""
        return [m.ref for m in self.members if m.role == role and (kind is None or m.type == kind)]


@dataclass(frozen=True)
class OsmMap:
    """The file's nodes, ways and relations by id (file order)."""

    nodes: dict[int, Node]
    ways: dict[int, Way]
    relations: dict[int, Relation]


def _id(path: Path, e: object, where: str) -> int:
    raw = e.get("id")  # type: ignore[attr-defined]
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise AvsimInputError(path, f"{where}@id", f"expected an integer id, got {str(raw)[:40]!r}") from None


def _coord(path: Path, e: object, name: str, where: str, limit: float) -> float:
    raw = e.get(name)  # type: ignore[attr-defined]
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise AvsimInputError(path, f"{where}@{name}", f"expected a number, got {str(raw)[:40]!r}") from None
    if not math.isfinite(value) or abs(value) > limit:
        raise AvsimInputError(path, f"{where}@{name}", f"expected degrees within +-{limit:g}, got {raw[:40]!r}")
    return value


def _tags(e: object) -> dict[str, str]:
    return {t.get("k", ""): t.get("v", "") for t in e.findall("tag")}  # type: ignore[attr-defined]


def read_osm(path: str | os.PathLike[str]) -> OsmMap:
    """Parse a Lanelet2 .osm file.

    Args:
        path: the file.

    Returns:
        Its nodes, ways and relations.
    """
    p = Path(path)
    root = read_xml(p, "osm")
    if root.tag != "osm":
        raise AvsimInputError(p, "root", f"expected an <osm> document, got <{root.tag[:40]}>")
    nodes: dict[int, Node] = {}
    for e in root.findall("node"):
        if e.get("action") == "delete":
            continue
        nid = _id(p, e, "node")
        where = f"node[id={nid}]"
        tags = _tags(e)
        ele = 0.0
        if "ele" in tags:
            try:
                ele = float(tags["ele"])
            except ValueError:
                raise AvsimInputError(p, f"{where}/tag[ele]", f"expected metres, got {tags['ele'][:40]!r}") from None
            if not math.isfinite(ele):
                raise AvsimInputError(p, f"{where}/tag[ele]", f"expected finite metres, got {tags['ele'][:40]!r}")
        nodes[nid] = Node(_coord(p, e, "lat", where, 90.0), _coord(p, e, "lon", where, 180.0), ele, tags)
    ways: dict[int, Way] = {}
    for e in root.findall("way"):
        if e.get("action") == "delete":
            continue
        wid = _id(p, e, "way")
        refs = []
        for k, nd in enumerate(e.findall("nd")):
            try:
                refs.append(int(nd.get("ref", "")))
            except ValueError:
                raise AvsimInputError(p, f"way[id={wid}]/nd[{k}]@ref", f"expected a node id, got {nd.get('ref', '')[:40]!r}") from None
        ways[wid] = Way(tuple(refs), _tags(e))
    relations: dict[int, Relation] = {}
    for e in root.findall("relation"):
        if e.get("action") == "delete":
            continue
        rid = _id(p, e, "relation")
        members = []
        for k, m in enumerate(e.findall("member")):
            try:
                members.append(Member(m.get("type", ""), int(m.get("ref", "")), m.get("role", "")))
            except ValueError:
                raise AvsimInputError(p, f"relation[id={rid}]/member[{k}]@ref", f"expected an id, got {m.get('ref', '')[:40]!r}") from None
        relations[rid] = Relation(tuple(members), _tags(e))
    if not nodes:
        raise AvsimInputError(p, "node", "the file has no node")
    return OsmMap(nodes, ways, relations)
