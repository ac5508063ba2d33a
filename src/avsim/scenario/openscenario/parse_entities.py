"""`Entities`: vehicles, pedestrians and miscellaneous objects, inline or from catalogs, with their
bounding boxes, categories, performance, axles and properties.

Descriptive content avsim takes no fact from is read past without a word: 3-D models
(`model3d`, `Properties/File`), `CustomContent`, mass and role, a trailer hitch or coupler with no
trailer attached. What would change how an entity moves is refused by name: a towed `Trailer`,
`ExternalObjectReference`, `EntitySelection`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from avsim.scenario.openscenario.model import UNLIMITED, BoundingBox, Entity, EntityKind, Performance
from avsim.scenario.openscenario.reader import XoscReader

MAX_ENTITIES = 2000
_DESCRIPTIVE = {"TrailerHitch", "TrailerCoupler"}


def _bbox(r: XoscReader, e: ET.Element) -> BoundingBox:
    b = r.need(e, "BoundingBox")
    with r.at(b):
        c, d = r.need(b, "Center"), r.need(b, "Dimensions")
        with r.at(c):
            center = (r.num(c, "x"), r.num(c, "y"), r.num(c, "z"))
        with r.at(d):
            return BoundingBox(center, r.num(d, "length", positive=True), r.num(d, "width", positive=True), r.num(d, "height", positive=True))


def _properties(r: XoscReader, e: ET.Element) -> tuple[tuple[str, str], ...]:
    p = e.find("Properties")
    if p is None:
        return ()
    with r.at(p):
        r.only(p, {"Property"}, {"File", "CustomContent"})
        return tuple((r.text(q, "name"), r.text(q, "value")) for q in p.findall("Property"))


def _trailer(r: XoscReader, e: ET.Element) -> None:
    t = e.find("Trailer")
    if t is None:
        return
    with r.at(t):
        ref = t.find("TrailerRef")
        if len(t) == 1 and ref is not None and not r.text(ref, "entityRef", "").strip():
            return  # a catalog's empty trailer slot (esmini's cars declare one)
        raise r.fail("a towed trailer is not supported by avsim's OpenSCENARIO runner (docs/editing.md lists the supported elements)")


def vehicle(r: XoscReader, e: ET.Element, name: str, entry: str | None) -> Entity:
    """A `Vehicle` element as an entity called `name`."""
    with r.at(e), r.scope(e.find("ParameterDeclarations")):
        r.only(e, {"ParameterDeclarations", "BoundingBox", "Performance", "Axles", "Properties", "Trailer"}, _DESCRIPTIVE)
        _trailer(r, e)
        perf = r.need(e, "Performance")
        with r.at(perf):
            performance = Performance(r.num(perf, "maxSpeed", nonneg=True), r.num(perf, "maxAcceleration", nonneg=True),
                                      r.num(perf, "maxDeceleration", nonneg=True))  # fmt: skip
        axles = r.need(e, "Axles")
        with r.at(axles):
            r.only(axles, {"FrontAxle", "RearAxle", "AdditionalAxle"})
            front, rear = axles.find("FrontAxle"), r.need(axles, "RearAxle")
            front_x = None if front is None else r.num(front, "positionX")
            rear_x = r.num(rear, "positionX")
        return Entity(name, EntityKind.VEHICLE, r.text(e, "vehicleCategory"), _bbox(r, e), performance, front_x, rear_x, _properties(r, e),
                      entry)  # fmt: skip


def _other(r: XoscReader, e: ET.Element, name: str, entry: str | None) -> Entity:
    """A `Pedestrian` or `MiscObject` element."""
    with r.at(e), r.scope(e.find("ParameterDeclarations")):
        r.only(e, {"ParameterDeclarations", "BoundingBox", "Properties"})
        if e.tag == "Pedestrian":
            return Entity(name, EntityKind.PEDESTRIAN, r.text(e, "pedestrianCategory"), _bbox(r, e), UNLIMITED, None, 0.0, _properties(r, e), entry)
        return Entity(name, EntityKind.MISC, r.text(e, "miscObjectCategory"), _bbox(r, e), UNLIMITED, None, 0.0, _properties(r, e), entry)


def _object(r: XoscReader, e: ET.Element, name: str, entry: str | None = None) -> Entity:
    if e.tag == "Vehicle":
        return vehicle(r, e, name, entry)
    if e.tag in ("Pedestrian", "MiscObject"):
        return _other(r, e, name, entry)
    if e.tag == "CatalogReference" and entry is None:
        with r.at(e):
            element, assigned, key = r.catalog_entry(e)
            with r.scope(None, assigned):
                declared: dict[str, str] = {}
                decls = element.find("ParameterDeclarations")
                if decls is not None:
                    r.declare(decls, declared, assigned)
                with r.scope(None, {**declared}):
                    return _object(r, element, name, key)
    raise r.unsupported(e)


def entities(r: XoscReader, e: ET.Element) -> tuple[Entity, ...]:
    """The `Entities` element's scenario objects, in file order (names unique)."""
    out: list[Entity] = []
    with r.at(e):
        r.only(e, {"ScenarioObject"})
        for obj in e.findall("ScenarioObject"):
            if len(out) >= MAX_ENTITIES:
                raise r.fail(f"more than {MAX_ENTITIES} entities")
            with r.at(obj):
                name = r.text(obj, "name")
                if not name or any(x.name == name for x in out):
                    raise r.fail(f"entity names must be unique and non-empty, got {name[:80]!r}", "@name")
                body = [c for c in obj if c.tag != "ObjectController"]
                if len(body) != 1:
                    raise r.fail("expected one Vehicle, Pedestrian, MiscObject or CatalogReference")
                entity = _object(r, body[0], name)
                controllers = obj.findall("ObjectController")
                if controllers:
                    entity = _with_controller(r, entity, controllers)
                out.append(entity)
    return tuple(out)


def _with_controller(r: XoscReader, entity: Entity, controllers: list[ET.Element]) -> Entity:
    """The entity with the name of its (single) object controller; the importer accepts one on the
    ego only, whose controller the policy replaces."""
    from dataclasses import replace

    if len(controllers) > 1:
        raise r.fail("more than one ObjectController", "ObjectController")
    c = controllers[0]
    inner = c.find("Controller")
    ref = c.find("CatalogReference")
    name = r.text(inner, "name", "controller") if inner is not None else r.text(ref, "entryName", "controller") if ref is not None else "controller"
    return replace(entity, controller=name or "controller")
