"""Reading an OpenSCENARIO element tree: typed attributes with parameters resolved, the element
path in every error, parameter scopes, catalogs.

`XoscReader` walks the tree the parsers (`parse_*`) describe. Every attribute goes through
`expressions.resolve` in the innermost parameter scope that declares the name (the scenario's
`ParameterDeclarations`, then a story's, a maneuver's, a catalog entry's with the reference's
`ParameterAssignments`). Every error is one `AvsimInputError(file, element path, reason)`; the path
names each element with its `name` where it has one (`Storyboard/Story[cut-in]/Act[act]/...`), so
an unsupported element is one line naming it (`unsupported`).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any, TypeVar

from avsim.core.errors import AvsimInputError
from avsim.core.safe_xml import parse_xml
from avsim.scenario.openscenario.expressions import ExpressionError, resolve
from avsim.scenario.openscenario.sources import Sources

E = TypeVar("E", bound=Enum)
_MISSING: Any = object()
MAX_MAGNITUDE = 1e9  # every number in a scenario (metres, seconds, m/s)
MAX_PARAMETERS = 10_000
SUPPORTED_HINT = "docs/editing.md lists the supported elements"


class XoscReader:
    """Typed, parameter-resolving attribute access over one scenario (see the module docstring).

    Args:
        file: the file named in errors.
        sources: where referenced files (catalogs) are read from.
    """

    def __init__(self, file: str, sources: Sources) -> None:
        self.file = file
        self.sources = sources
        self.scopes: list[dict[str, str]] = [{}]
        self.types: dict[str, str] = {}
        self.path: list[str] = []
        self.catalog_dirs: list[str] = []
        self._catalogs: dict[str, ET.Element] = {}
        self.n_parameters = 0

    # ---- paths and errors --------------------------------------------------------------------
    @contextmanager
    def at(self, element: ET.Element | str, name: str | None = None) -> Iterator[None]:
        """Errors raised inside name this element (and its `name` attribute) in their path."""
        tag = element if isinstance(element, str) else element.tag
        if name is None and not isinstance(element, str):
            name = element.get("name")
        self.path.append(f"{tag}[{name}]" if name else tag)
        try:
            yield
        finally:
            self.path.pop()

    def where(self, extra: str | None = None) -> str:
        return "/".join(self.path + ([extra] if extra else [])) or "OpenSCENARIO"

    def fail(self, reason: str, extra: str | None = None) -> AvsimInputError:
        """An error at the current element (`extra`: an attribute or child named after it)."""
        return AvsimInputError(self.file, self.where(extra), reason)

    def unsupported(self, element: ET.Element, what: str = "element") -> AvsimInputError:
        """The one line for an element avsim does not run."""
        here = self.path[-1].split("[", 1)[0] if self.path else ""
        return self.fail(f"{element.tag} is not supported by avsim's OpenSCENARIO runner ({SUPPORTED_HINT})",
                         None if here == element.tag else element.tag)  # fmt: skip

    # ---- parameters --------------------------------------------------------------------------
    def lookup(self, name: str) -> str:
        """A parameter's value by name (with or without `$`), innermost scope first; KeyError when unknown."""
        key = name[1:] if name.startswith("$") else name
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        raise KeyError(key)

    @contextmanager
    def scope(self, declarations: ET.Element | None, assigned: dict[str, str] | None = None) -> Iterator[None]:
        """A parameter scope: `declarations`' values (each resolved in the scopes so far, in order),
        then `assigned` values replacing declared ones (a catalog reference's assignments)."""
        values: dict[str, str] = {}
        self.scopes.append(values)
        try:
            if declarations is not None:
                self.declare(declarations, values, assigned or {})
            yield
        finally:
            self.scopes.pop()

    def declare(self, declarations: ET.Element, into: dict[str, str], assigned: dict[str, str]) -> None:
        """Read a `ParameterDeclarations` element into `into` (see `scope`)."""
        with self.at(declarations):
            for d in declarations:
                if d.tag != "ParameterDeclaration":
                    raise self.fail(f"unexpected element <{d.tag[:60]}>")
                self.n_parameters += 1
                if self.n_parameters > MAX_PARAMETERS:
                    raise self.fail(f"more than {MAX_PARAMETERS} parameters")
                with self.at(d):
                    name = self.raw(d, "name").lstrip("$")
                    if not name:
                        raise self.fail("empty parameter name", "name")
                    kind = self.raw(d, "parameterType")
                    into[name] = assigned[name] if name in assigned else self.text(d, "value")
                    self.types.setdefault(name, kind)
                    if d.find("ConstraintGroup") is not None:
                        self._check_constraints(d, name, into[name])

    def _check_constraints(self, decl: ET.Element, name: str, value: str) -> None:
        """`ConstraintGroup`s (1.1+): the value must satisfy every constraint of at least one group."""
        ops = {"equalTo": lambda a, b: a == b, "greaterThan": lambda a, b: a > b, "lessThan": lambda a, b: a < b,
               "greaterOrEqual": lambda a, b: a >= b, "lessOrEqual": lambda a, b: a <= b, "notEqualTo": lambda a, b: a != b}  # fmt: skip
        groups = decl.findall("ConstraintGroup")
        for g in groups:
            ok = True
            for c in g.findall("ValueConstraint"):
                rule, bound = self.raw(c, "rule"), self.text(c, "value")
                if rule not in ops:
                    raise self.fail(f"unknown rule {rule!r}", "ValueConstraint")
                try:
                    a, b = float(value), float(bound)
                    ok &= bool(ops[rule](a, b))
                except ValueError:
                    ok &= bool(ops[rule](value, bound))
            if ok:
                return
        raise self.fail(f"value {value[:80]!r} of parameter {name} violates its ConstraintGroup", "ConstraintGroup")

    # ---- attributes --------------------------------------------------------------------------
    def raw(self, element: ET.Element, attr: str, default: Any = _MISSING) -> str:
        """An attribute as written (no parameter resolution)."""
        value = element.get(attr)
        if value is None:
            if default is _MISSING:
                raise self.fail(f"missing attribute {attr}", f"@{attr}")
            return str(default)
        return value

    def text(self, element: ET.Element, attr: str, default: Any = _MISSING) -> str:
        """An attribute with its parameter reference or expression resolved."""
        value = element.get(attr)
        if value is None:
            if default is _MISSING:
                raise self.fail(f"missing attribute {attr}", f"@{attr}")
            return default
        try:
            return resolve(value, self.lookup)
        except ExpressionError as exc:
            raise self.fail(str(exc), f"@{attr}") from None

    def opt_num(self, element: ET.Element, attr: str) -> float | None:
        """A number attribute, or None when absent."""
        return None if element.get(attr) is None else self.num(element, attr)

    def num(self, element: ET.Element, attr: str, default: Any = _MISSING, *, nonneg: bool = False, positive: bool = False) -> float:
        """A finite number attribute (bounded in magnitude)."""
        value = self.text(element, attr, default)
        if value is default and default is not _MISSING:
            return float(default)
        try:
            out = float(str(value).strip())
        except ValueError:
            raise self.fail(f"expected a number, got {str(value)[:80]!r}", f"@{attr}") from None
        if not math.isfinite(out) or abs(out) > MAX_MAGNITUDE:
            raise self.fail(f"expected a finite number of magnitude at most {MAX_MAGNITUDE:g}, got {str(value)[:80]!r}", f"@{attr}")
        if (nonneg and out < 0) or (positive and out <= 0):
            raise self.fail(f"expected a number {'> 0' if positive else '>= 0'}, got {out:g}", f"@{attr}")
        return out

    def int_(self, element: ET.Element, attr: str, default: Any = _MISSING) -> int:
        """An integer attribute (a number with no fraction, as expressions give them)."""
        value = self.num(element, attr, default)
        if not float(value).is_integer():
            raise self.fail(f"expected an integer, got {value:g}", f"@{attr}")
        return int(value)

    def flag(self, element: ET.Element, attr: str, default: Any = _MISSING) -> bool:
        """A boolean attribute (`true` / `false`, `1` / `0`)."""
        value = self.text(element, attr, default)
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text not in ("true", "false", "1", "0"):
            raise self.fail(f"expected true or false, got {str(value)[:80]!r}", f"@{attr}")
        return text in ("true", "1")

    def enum(self, element: ET.Element, attr: str, cls: type[E], default: Any = _MISSING, aliases: dict[str, str] | None = None) -> E:
        """An enumeration attribute (`aliases`: deprecated spellings read as their current names)."""
        value = self.text(element, attr, default)
        if isinstance(value, cls):
            return value
        text = (aliases or {}).get(str(value), str(value))
        try:
            return cls(text)
        except ValueError:
            allowed = ", ".join(str(m.value) for m in cls)
            raise self.fail(f"expected one of {allowed}, got {str(value)[:80]!r}", f"@{attr}") from None

    # ---- children ----------------------------------------------------------------------------
    def child(self, element: ET.Element, tag: str, required: bool = True) -> ET.Element | None:
        """The child `tag` (one line when required and absent)."""
        found = element.find(tag)
        if found is None and required:
            raise self.fail(f"missing element <{tag}>", tag)
        return found

    def need(self, element: ET.Element, tag: str) -> ET.Element:
        """The required child `tag`."""
        found = self.child(element, tag)
        assert found is not None
        return found

    def only(self, element: ET.Element, allowed: set[str], ignored: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        """Refuse a child outside `allowed` ∪ `ignored` by name (`ignored`: descriptive elements
        avsim reads no fact from, such as models and licences)."""
        for c in element:
            if c.tag not in allowed and c.tag not in ignored:
                raise self.unsupported(c)

    def choice(self, element: ET.Element) -> ET.Element:
        """The single child of a choice element (`Position`, `PrivateAction`, ...)."""
        children = list(element)
        if len(children) != 1:
            raise self.fail(f"expected exactly one child element, got {len(children)}")
        return children[0]

    # ---- catalogs ----------------------------------------------------------------------------
    def catalog_entry(self, ref: ET.Element) -> tuple[ET.Element, dict[str, str], str]:
        """The entry a `CatalogReference` names: its element, the reference's parameter
        assignments (resolved here) and `catalog:entry`."""
        catalog, entry = self.text(ref, "catalogName"), self.text(ref, "entryName")
        assigned: dict[str, str] = {}
        assignments = ref.find("ParameterAssignments")
        for a in assignments if assignments is not None else ():
            assigned[self.raw(a, "parameterRef").lstrip("$")] = self.text(a, "value")
        for key in self._catalog_files():
            root = self._catalog(key)
            cat = root.find("Catalog")
            if cat is None or cat.get("name") != catalog:
                continue
            for e in cat:
                if e.get("name") == entry:
                    return e, assigned, f"{catalog}:{entry}"
        raise self.fail(f"catalog {catalog!r} has no entry {entry!r} in the CatalogLocations' folders {self.catalog_dirs}", "CatalogReference")

    def _catalog_files(self) -> list[str]:
        out: list[str] = []
        for d in self.catalog_dirs:
            out += [k for k in self.sources.listing(d, self.where("CatalogLocations")) if k not in out]
        return out

    def _catalog(self, key: str) -> ET.Element:
        if key not in self._catalogs:
            name = self.sources.name(key)
            root = parse_xml(self.sources.read(key, self.where("CatalogLocations")), name)
            if root.tag not in ("OpenSCENARIO", "OpenScenario"):
                raise AvsimInputError(name, "root", f"expected an <OpenSCENARIO> catalog, got <{root.tag[:40]}>")
            self._catalogs[key] = root
        return self._catalogs[key]
