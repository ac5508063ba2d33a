"""Which projection a Lanelet2 map is read with, and where its origin is.

Lanelet2 itself takes the origin from its caller (`lanelet2.io.load(path, UtmProjector(Origin(lat,
lon)))`); the .osm file does not state one. avsim takes, in order:

1. `--origin LAT,LON[,ELE]`: Lanelet2's `UtmProjector` with that origin;
2. Autoware's `map_projector_info.yaml` beside the map: `projector_type` LocalCartesianUTM
   (UtmProjector at `map_origin`), LocalCartesian (LocalCartesianProjector at `map_origin`), MGRS
   or Local (the nodes' own `local_x`, `local_y` tags, z from `ele`);
3. else UtmProjector with the origin at the file's first node.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from avsim.core.errors import AvsimInputError
from avsim.core.typing import NDArrayFloat
from avsim.maps.lanelet2.osm import OsmMap
from avsim.maps.lanelet2.projection import LocalCartesianProjector, Projector, UtmProjector

PROJECTOR_INFO = "map_projector_info.yaml"
MAX_INFO_BYTES = 64 * 1024


@dataclass(frozen=True)
class Placement:
    """How the nodes were placed: projector name, origin (lat, lon, ele) and where it came from."""

    projector: str
    origin: tuple[float, float, float] | None
    source: str


def _info(path: Path) -> dict[str, object] | None:
    info = path.parent / PROJECTOR_INFO
    if not info.is_file():
        return None
    if info.stat().st_size > MAX_INFO_BYTES:
        raise AvsimInputError(info, "yaml", f"over the {MAX_INFO_BYTES}-byte limit")
    try:
        doc = yaml.safe_load(info.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise AvsimInputError(info, "yaml", f"not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise AvsimInputError(info, "yaml", "expected a mapping")
    return doc


def _map_origin(doc: dict[str, object], info: Path) -> tuple[float, float, float]:
    origin = doc.get("map_origin")
    if not isinstance(origin, dict):
        raise AvsimInputError(info, "map_origin", "missing (latitude, longitude, altitude)")
    try:
        return float(origin["latitude"]), float(origin["longitude"]), float(origin.get("altitude", 0.0) or 0.0)
    except (KeyError, TypeError, ValueError):
        raise AvsimInputError(info, "map_origin", "needs numbers latitude and longitude") from None


def _local_tags(osm: OsmMap, ids: list[int], path: Path) -> NDArrayFloat:
    out = np.empty((len(ids), 3))
    for k, nid in enumerate(ids):
        node = osm.nodes[nid]
        try:
            out[k] = (float(node.tags["local_x"]), float(node.tags["local_y"]), node.ele)
        except (KeyError, ValueError):
            raise AvsimInputError(path, f"node[id={nid}]", "the projector is MGRS/Local but the node has no numeric local_x, local_y tags") from None
    return out


def place_nodes(osm: OsmMap, path: Path, origin: tuple[float, ...] | None) -> tuple[dict[int, NDArrayFloat], Placement]:
    """Every node's local x, y, z (see the module docstring).

    Args:
        osm: the parsed map.
        path: the .osm file (map_projector_info.yaml is looked for beside it).
        origin: --origin (lat, lon[, ele]) or None.

    Returns:
        node id -> (3,) position, and how they were placed.
    """
    ids = list(osm.nodes)
    lat = np.array([osm.nodes[i].lat for i in ids])
    lon = np.array([osm.nodes[i].lon for i in ids])
    ele = np.array([osm.nodes[i].ele for i in ids])
    projector: Projector
    if origin is not None:
        projector = UtmProjector(origin[0], origin[1])
        placement = Placement("UtmProjector", (origin[0], origin[1], origin[2] if len(origin) > 2 else 0.0), "--origin")
    elif (doc := _info(path)) is not None:
        info = path.parent / PROJECTOR_INFO
        kind = str(doc.get("projector_type", ""))
        if kind in ("MGRS", "Local"):
            xyz = _local_tags(osm, ids, path)
            return dict(zip(ids, xyz)), Placement(f"{kind} (local_x, local_y tags)", None, PROJECTOR_INFO)
        o = _map_origin(doc, info)
        if kind == "LocalCartesianUTM":
            projector = UtmProjector(o[0], o[1])
        elif kind == "LocalCartesian":
            projector = LocalCartesianProjector(*o)
        else:
            raise AvsimInputError(info, "projector_type", f"{kind!r} is not supported (LocalCartesianUTM, LocalCartesian, MGRS, Local)")
        placement = Placement(type(projector).__name__, o, PROJECTOR_INFO)
    else:
        first = osm.nodes[ids[0]]
        projector = UtmProjector(first.lat, first.lon)
        placement = Placement("UtmProjector", (first.lat, first.lon, 0.0), f"the first node ({ids[0]})")
    try:
        xyz = projector.forward(lat, lon, ele)
    except ValueError as exc:
        raise AvsimInputError(path, "origin", str(exc)) from None
    return dict(zip(ids, xyz)), placement
