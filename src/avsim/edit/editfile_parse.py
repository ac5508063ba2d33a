"""Edit files, first half: reading the text and checking values (the second half, `editfile`,
expands sweeps into variants of bound ops and applies them).

The file is read with PyYAML's node marks so each value keeps its line (JSON files are read by
the same loader); the checkers below turn a raw value plus its place (`At`) into a checked
Python value or raise `_EditError(line, field, reason)`, which `editfile` reports as
`AvsimInputError(file, "line N: <field path>", reason)`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import yaml

from avsim.core.agents import OBJECT_CLASSES
from avsim.core.errors import AvsimValueError
from avsim.core.lights import LIGHT_STATES
from avsim.maps.elements import MAP_ELEMENT_TYPES
from avsim.render.run.plan import MAX_FPS

from .routes import SpeedProfile
from .selectors import AgentSelector, Region

Checker = Callable[[Any, "At"], Any]  # (raw value, where it sits) -> checked value


# ----------------------------------------------------------------------------- line-aware loading
class LineDict(dict[Any, Any]):
    """A mapping that remembers its own line and the line of each value (1-based)."""

    line: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lines: dict[Any, int] = {}


class LineList(list[Any]):
    line: int = 0

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.lines: list[int] = []


MAX_EXPANDED_NODES = 100_000  # an edit file is a few hundred nodes; bounds a "billion laughs" document
MAX_EDIT_MAGNITUDE = 1e7  # any number in an edit file (metres, seconds, degrees, ...): finite, |x| <= this
MAX_EDIT_TEXT_CHARS = 1024  # any string in an edit file (ids, names, templates)
MAX_SPEED_FACTOR = 100.0  # `scale_speed.factor`, `retime.speed_factor`: within [1/100, 100]


class _TooLarge(Exception):
    def __init__(self, line: int, nodes: int) -> None:
        super().__init__(line)
        self.line, self.nodes = line, nodes


def _expanded_nodes(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes the document has with every alias expanded (linear time: shared nodes memoised)."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 1  # a recursive alias counts once (PyYAML refuses to construct it anyway)
    if isinstance(node, yaml.SequenceNode):
        total = 1 + sum(_expanded_nodes(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        total = 1 + sum(_expanded_nodes(k, memo) + _expanded_nodes(v, memo) for k, v in node.value)
    else:
        total = 1
    memo[id(node)] = total
    return total


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps lines (constructors below) and refuses alias bombs."""

    def construct_document(self, node: yaml.Node) -> object:
        n = _expanded_nodes(node, {})
        if n > MAX_EXPANDED_NODES:
            raise _TooLarge(node.start_mark.line + 1, n)
        return super().construct_document(node)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise _EditError(key_node.start_mark.line + 1, str(key), "duplicate key")
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = value_node.start_mark.line + 1
    return out


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


class _EditError(Exception):
    """Internal: a problem at a line; turned into AvsimInputError with the file path."""

    def __init__(self, line: int, field: str, reason: str) -> None:
        super().__init__(reason)
        self.line, self.field, self.reason = line, field, reason


def _fail(line: int, field: str, reason: str) -> NoReturn:
    raise _EditError(line, field, reason)


def read_document(text: str, path: Path) -> LineDict:
    """The edit file's top-level mapping, every value keeping its line (YAML or JSON text)."""
    try:
        doc = yaml.load(text, Loader=_Loader)
    except RecursionError:
        _fail(1, "document", "nested too deeply")
    except _TooLarge as exc:
        _fail(exc.line, "document", f"{exc.nodes} nodes with its aliases expanded, more than {MAX_EXPANDED_NODES} (a YAML bomb?)")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if path.suffix.lower() == ".json":
            try:
                json.loads(text)
            except json.JSONDecodeError as jexc:
                _fail(jexc.lineno, "json", jexc.msg)
        _fail((mark.line + 1) if mark else 0, "syntax", " ".join(str(getattr(exc, "problem", exc)).split()))
    if not isinstance(doc, LineDict):
        _fail(1, "document", "expected a mapping with 'version' and 'ops'")
    return doc


# ----------------------------------------------------------------------------- value checkers
@dataclass(frozen=True)
class At:
    """Where a value sits: its field path and line."""

    path: str
    line: int

    def child(self, key: Any, container: Any) -> At:
        if isinstance(container, LineDict):
            line = container.lines.get(key, container.line)
            return At(f"{self.path}.{key}" if self.path else str(key), line)
        line = container.lines[key] if isinstance(container, LineList) and key < len(container.lines) else self.line
        return At(f"{self.path}[{key}]", line)


def _type_name(v: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(v), "a list" if isinstance(v, list) else "a mapping" if isinstance(v, dict) else "null" if v is None else type(v).__name__
    )


def num(v: Any, at: At, lo: float | None = None, hi: float | None = None, positive: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        _fail(at.line, at.path, f"expected a number, got {_type_name(v)} {str(v)[:40]}")
    if not (isinstance(v, float) and math.isfinite(v) or isinstance(v, int)) or not abs(v) <= MAX_EDIT_MAGNITUDE:
        _fail(at.line, at.path, f"{str(v)[:40]} is not a finite number of magnitude at most {MAX_EDIT_MAGNITUDE:g}")
    v = float(v)
    if positive and v <= 0:
        _fail(at.line, at.path, f"must be > 0, got {v:g}")
    if lo is not None and v < lo:
        _fail(at.line, at.path, f"must be >= {lo:g}, got {v:g}")
    if hi is not None and v > hi:
        _fail(at.line, at.path, f"must be <= {hi:g}, got {v:g}")
    return v


def integer(v: Any, at: At) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        _fail(at.line, at.path, f"expected an integer, got {_type_name(v)} {str(v)[:40]}")
    if not -(2**63) <= v < 2**63:
        _fail(at.line, at.path, f"{str(v)[:40]} does not fit in 64 bits")
    return int(v)


def string(v: Any, at: At, choices: tuple[str, ...] | None = None) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and choices is None:
        v = str(v)  # numeric ids (nuScenes tokens are strings, Waymo ids numbers)
    if not isinstance(v, str) or not v:
        _fail(at.line, at.path, f"expected a non-empty string, got {_type_name(v)} {str(v)[:40]!r}")
    if len(v) > MAX_EDIT_TEXT_CHARS:
        _fail(at.line, at.path, f"a string of {len(v)} characters, more than {MAX_EDIT_TEXT_CHARS}")
    if choices is not None and v not in choices:
        _fail(at.line, at.path, f"{v!r} is not one of {', '.join(choices)}")
    return v


def boolean(v: Any, at: At) -> bool:
    if not isinstance(v, bool):
        _fail(at.line, at.path, f"expected true or false, got {_type_name(v)} {v!r}")
    return v


def seq(v: Any, at: At, item: Checker, min_len: int = 0, exact: int | None = None) -> list[Any]:
    if not isinstance(v, list):
        _fail(at.line, at.path, f"expected a list, got {_type_name(v)} {v!r}")
    if exact is not None and len(v) != exact:
        _fail(at.line, at.path, f"expected {exact} values, got {len(v)}")
    if len(v) < min_len:
        _fail(at.line, at.path, f"expected at least {min_len} entries, got {len(v)}")
    return [item(x, at.child(i, v)) for i, x in enumerate(v)]


def strings(v: Any, at: At) -> list[str]:
    """One string or a list of strings."""
    if isinstance(v, list):
        return seq(v, at, string, min_len=1)
    return [string(v, at)]


def vec(n: int) -> Checker:
    return lambda v, at: seq(v, at, num, exact=n)


def points(v: Any, at: At, min_len: int = 2) -> np.ndarray:
    rows = seq(v, at, lambda p, a: seq(p, a, num, min_len=2), min_len=min_len)
    dims = {len(r) for r in rows}
    if len(dims) != 1 or dims.pop() not in (2, 3):
        _fail(at.line, at.path, "points must all be [x, y] or all [x, y, z]")
    return np.asarray(rows, dtype=np.float64)


def mapping(v: Any, at: At, schema: dict[str, tuple[Checker, bool]]) -> dict[str, Any]:
    """Check a mapping against {key: (checker, required)}; unknown keys are errors."""
    if not isinstance(v, dict):
        _fail(at.line, at.path, f"expected a mapping, got {_type_name(v)} {v!r}")
    for key in v:
        if key not in schema:
            _fail(at.child(key, v).line, at.child(key, v).path, f"unknown field (expected one of {', '.join(schema)})")
    out = {}
    for key, (check, required) in schema.items():
        if key in v:
            out[key] = check(v[key], at.child(key, v))
        elif required:
            _fail(at.line, at.path, f"missing required field {key!r}")
    return out


def region(v: Any, at: At) -> Region:
    d = mapping(v, at, {"center": (vec(2), False), "radius_m": (lambda x, a: num(x, a, positive=True), False),
                        "box": (vec(4), False), "polygon": (lambda x, a: points(x, a, 3), False)})  # fmt: skip
    try:
        return Region(
            center_xy=tuple(d["center"]) if "center" in d else None,
            radius_m=d.get("radius_m"),
            box=tuple(d["box"]) if "box" in d else None,
            polygon=tuple(map(tuple, d["polygon"][:, :2].tolist())) if "polygon" in d else None,
        )
    except AvsimValueError as exc:
        _fail(at.line, at.path, str(exc))


def agent_selector(v: Any, at: At) -> AgentSelector:
    d = mapping(v, at, {
        "ids": (strings, False), "class": (lambda x, a: [string(c, a, OBJECT_CLASSES) for c in strings(x, a)], False),
        "region": (region, False), "within_m_of_ego": (lambda x, a: num(x, a, positive=True), False),
        "at_s": (lambda x, a: num(x, a, lo=0), False),
    })  # fmt: skip
    if not d:
        _fail(at.line, at.path, "an empty selector would select every agent; give ids, class, region or within_m_of_ego")
    return AgentSelector(
        track_ids=tuple(d["ids"]) if "ids" in d else None,
        classes=tuple(d["class"]) if "class" in d else None,
        region=d.get("region"),
        max_distance_from_ego_m=d.get("within_m_of_ego"),
        at_s=d.get("at_s"),
    )


def speed_profile(v: Any, at: At) -> SpeedProfile:
    """A constant speed (number, m/s) or {t_s: [...], mps: [...]} (piecewise linear)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return SpeedProfile.constant(num(v, at, lo=0))
    d = mapping(v, at, {"t_s": (lambda x, a: seq(x, a, num, min_len=1), True), "mps": (lambda x, a: seq(x, a, lambda y, b: num(y, b, lo=0), min_len=1), True)})
    try:
        return SpeedProfile(np.array(d["t_s"]), np.array(d["mps"]))
    except AvsimValueError as exc:
        _fail(at.line, at.path, str(exc))


def waypoints(v: Any, at: At) -> tuple[np.ndarray, np.ndarray]:
    """[[t_s, x, y(, z)], ...] or [{t_s, x, y, (z)}, ...] -> (times (K,), xyz/xy (K, 2|3))."""
    def row(p: Any, a: At) -> Any:
        if isinstance(p, dict):
            d = mapping(p, a, {"t_s": (num, True), "x": (num, True), "y": (num, True), "z": (num, False)})
            return [d["t_s"], d["x"], d["y"]] + ([d["z"]] if "z" in d else [])
        return seq(p, a, num, min_len=3)

    rows = seq(v, at, row, min_len=2)
    if len({len(r) for r in rows}) != 1 or len(rows[0]) not in (3, 4):
        _fail(at.line, at.path, "waypoints must all be [t_s, x, y] or all [t_s, x, y, z]")
    arr = np.asarray(rows, dtype=np.float64)
    if np.any(np.diff(arr[:, 0]) <= 0):
        _fail(at.line, at.path, "waypoint times must be strictly increasing")
    return arr[:, 0], arr[:, 1:]


def timeline(v: Any, at: At) -> list[tuple[float, str]]:
    def row(p: Any, a: At) -> Any:
        if isinstance(p, dict):
            d = mapping(p, a, {"t_s": (lambda x, b: num(x, b, lo=0), True), "state": (lambda x, b: string(x, b, LIGHT_STATES), True)})
            return d["t_s"], d["state"]
        r = seq(p, a, lambda x, b: x, exact=2)
        return num(r[0], a.child(0, p), lo=0), string(r[1], a.child(1, p), LIGHT_STATES)

    return seq(v, at, row, min_len=1)


def s_range(v: Any, at: At) -> tuple[float, float]:
    a, b = seq(v, at, lambda x, y: num(x, y, lo=0), exact=2)
    if b <= a:
        _fail(at.line, at.path, "s_range_m needs [start, end] with start < end")
    return a, b


def pos(v: Any, at: At) -> float:
    return num(v, at, positive=True)


def nonneg(v: Any, at: At) -> float:
    return num(v, at, lo=0)


def speed_factor(v: Any, at: At) -> float:
    return num(v, at, lo=1 / MAX_SPEED_FACTOR, hi=MAX_SPEED_FACTOR)


def rate_hz(v: Any, at: At) -> float:
    """A clip rate, bounded like `avsim render --fps` (`avsim.render.run.plan.MAX_FPS`)."""
    return num(v, at, positive=True, hi=MAX_FPS)


def map_kind(v: Any, at: At) -> str:
    return string(v, at, tuple(MAP_ELEMENT_TYPES))

