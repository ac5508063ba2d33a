"""Edit files: a versioned YAML/JSON list of operations, with selectors and parameter sweeps.

    version: 1
    name: "cutin_gap{gap_m}_dur{duration_s}"   # variant names (optional)
    sweep:                                      # cartesian product -> named variants (optional)
      gap_m: [8, 12, 16]
      duration_s: [2, 3, 4, 5]
    ops:
      - op: cut_in
        track_id: cutter
        start_s: 3
        duration_s: $duration_s                 # a sweep parameter
        gap_m: $gap_m

Every problem is reported as `AvsimInputError(file, "line N: <field path>", reason)`: unknown
ops or fields, wrong types, unknown ids, times outside the scenario. The file is read with
PyYAML's node marks so each value keeps its line (JSON files are read by the same loader).
The full op reference is in docs/editing.md; `OPS` below is the source of truth.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from avsim.core.agents import OBJECT_CLASSES
from avsim.core.errors import AvsimError, AvsimInputError, AvsimValueError
from avsim.core.lights import LIGHT_STATES
from avsim.maps.elements import MAP_ELEMENT_TYPES

from . import ops_agents, ops_ego, ops_lights, ops_map, ops_time
from .routes import SpeedProfile
from .selectors import AgentSelector, Region, select_agents, select_map_elements
from .validate import Finding, ValidationConfig, validate_scenario

EDIT_SCHEMA_VERSION = 1
SUPPORTED_VERSIONS = (1,)
_REF = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
_INLINE_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME_OK = re.compile(r"[^A-Za-z0-9._-]+")


# ----------------------------------------------------------------------------- line-aware loading
class LineDict(dict):
    """A mapping that remembers its own line and the line of each value (1-based)."""

    line: int = 0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines: dict[Any, int] = {}


class LineList(list):
    line: int = 0

    def __init__(self, *args):
        super().__init__(*args)
        self.lines: list[int] = []


class _Loader(yaml.SafeLoader):
    pass


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

    def __init__(self, line: int, field: str, reason: str):
        super().__init__(reason)
        self.line, self.field, self.reason = line, field, reason


def _fail(line: int, field: str, reason: str) -> None:
    raise _EditError(line, field, reason)


# ----------------------------------------------------------------------------- value checkers
@dataclass(frozen=True)
class At:
    """Where a value sits: its field path and line."""

    path: str
    line: int

    def child(self, key, container) -> At:
        if isinstance(container, LineDict):
            line = container.lines.get(key, container.line)
            return At(f"{self.path}.{key}" if self.path else str(key), line)
        line = container.lines[key] if isinstance(container, LineList) and key < len(container.lines) else self.line
        return At(f"{self.path}[{key}]", line)


def _type_name(v) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(v), "a list" if isinstance(v, list) else "a mapping" if isinstance(v, dict) else "null" if v is None else type(v).__name__
    )


def num(v, at: At, lo: float | None = None, hi: float | None = None, positive: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        _fail(at.line, at.path, f"expected a number, got {_type_name(v)} {v!r}")
    v = float(v)
    if positive and v <= 0:
        _fail(at.line, at.path, f"must be > 0, got {v:g}")
    if lo is not None and v < lo:
        _fail(at.line, at.path, f"must be >= {lo:g}, got {v:g}")
    if hi is not None and v > hi:
        _fail(at.line, at.path, f"must be <= {hi:g}, got {v:g}")
    return v


def integer(v, at: At) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        _fail(at.line, at.path, f"expected an integer, got {_type_name(v)} {v!r}")
    return int(v)


def string(v, at: At, choices: tuple[str, ...] | None = None) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and choices is None:
        v = str(v)  # numeric ids (nuScenes tokens are strings, Waymo ids numbers)
    if not isinstance(v, str) or not v:
        _fail(at.line, at.path, f"expected a non-empty string, got {_type_name(v)} {v!r}")
    if choices is not None and v not in choices:
        _fail(at.line, at.path, f"{v!r} is not one of {', '.join(choices)}")
    return v


def boolean(v, at: At) -> bool:
    if not isinstance(v, bool):
        _fail(at.line, at.path, f"expected true or false, got {_type_name(v)} {v!r}")
    return v


def seq(v, at: At, item: Callable, min_len: int = 0, exact: int | None = None) -> list:
    if not isinstance(v, list):
        _fail(at.line, at.path, f"expected a list, got {_type_name(v)} {v!r}")
    if exact is not None and len(v) != exact:
        _fail(at.line, at.path, f"expected {exact} values, got {len(v)}")
    if len(v) < min_len:
        _fail(at.line, at.path, f"expected at least {min_len} entries, got {len(v)}")
    return [item(x, at.child(i, v)) for i, x in enumerate(v)]


def strings(v, at: At) -> list[str]:
    """One string or a list of strings."""
    if isinstance(v, list):
        return seq(v, at, string, min_len=1)
    return [string(v, at)]


def vec(n: int) -> Callable:
    return lambda v, at: seq(v, at, num, exact=n)


def points(v, at: At, min_len: int = 2) -> np.ndarray:
    rows = seq(v, at, lambda p, a: seq(p, a, num, min_len=2), min_len=min_len)
    dims = {len(r) for r in rows}
    if len(dims) != 1 or dims.pop() not in (2, 3):
        _fail(at.line, at.path, "points must all be [x, y] or all [x, y, z]")
    return np.asarray(rows, dtype=np.float64)


def mapping(v, at: At, schema: dict[str, tuple[Callable, bool]]) -> dict:
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


def region(v, at: At) -> Region:
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


def agent_selector(v, at: At) -> AgentSelector:
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


def speed_profile(v, at: At) -> SpeedProfile:
    """A constant speed (number, m/s) or {t_s: [...], mps: [...]} (piecewise linear)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return SpeedProfile.constant(num(v, at, lo=0))
    d = mapping(v, at, {"t_s": (lambda x, a: seq(x, a, num, min_len=1), True), "mps": (lambda x, a: seq(x, a, lambda y, b: num(y, b, lo=0), min_len=1), True)})
    try:
        return SpeedProfile(np.array(d["t_s"]), np.array(d["mps"]))
    except AvsimValueError as exc:
        _fail(at.line, at.path, str(exc))


def waypoints(v, at: At) -> tuple[np.ndarray, np.ndarray]:
    """[[t_s, x, y(, z)], ...] or [{t_s, x, y, (z)}, ...] -> (times (K,), xyz/xy (K, 2|3))."""
    def row(p, a):
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


def timeline(v, at: At) -> list[tuple[float, str]]:
    def row(p, a):
        if isinstance(p, dict):
            d = mapping(p, a, {"t_s": (lambda x, b: num(x, b, lo=0), True), "state": (lambda x, b: string(x, b, LIGHT_STATES), True)})
            return d["t_s"], d["state"]
        r = seq(p, a, lambda x, b: x, exact=2)
        return num(r[0], a.child(0, p), lo=0), string(r[1], a.child(1, p), LIGHT_STATES)

    return seq(v, at, row, min_len=1)


def s_range(v, at: At) -> tuple[float, float]:
    a, b = seq(v, at, lambda x, y: num(x, y, lo=0), exact=2)
    if b <= a:
        _fail(at.line, at.path, "s_range_m needs [start, end] with start < end")
    return a, b


def pos(v, at):
    return num(v, at, positive=True)


def nonneg(v, at):
    return num(v, at, lo=0)


def map_kind(v, at):
    return string(v, at, tuple(MAP_ELEMENT_TYPES))


# ----------------------------------------------------------------------------- op table
@dataclass(frozen=True)
class OpSpec:
    """An edit operation: its fields {name: (checker, required)} and how to apply it."""

    fields: dict[str, tuple[Callable, bool]]
    apply: Callable[..., Any]
    doc: str
    one_of: tuple[tuple[str, ...], ...] = ()


_AGENT_TARGET = {"track_id": (string, False), "track_ids": (strings, False), "select": (agent_selector, False)}
_MAP_TARGET = {"ids": (strings, False), "region": (region, False), "within_m_of_ego": (pos, False)}


def _targets(scenario, a: dict) -> list[str]:
    if "select" in a:
        ids = select_agents(scenario, a["select"])
        if not ids:
            raise AvsimValueError("select: matches no agent")
        return ids
    return ops_agents.require_ids(scenario, a["track_ids"] if "track_ids" in a else [a["track_id"]], "track_id" if "track_id" in a else "track_ids")


def _map_mask(scenario, kind: str, a: dict) -> np.ndarray:
    if not any(k in a for k in ("ids", "region", "within_m_of_ego")) and not a.get("all", False):
        raise AvsimValueError("ids: give ids, a region, within_m_of_ego or all: true")
    ego_xy = np.asarray(scenario.ego.world_SE3_ego.translation)[:, :2]
    mask = select_map_elements(scenario.map, kind, a.get("ids"), a.get("region"), a.get("within_m_of_ego"), ego_xy)
    if not mask.any():
        given = next((k for k in ("within_m_of_ego", "region", "ids") if k in a), "all")
        raise AvsimValueError(f"{given}: selects no {kind} element")
    return mask


def _deg(a: dict, key: str) -> float | None:
    return None if key not in a else float(np.deg2rad(a[key]))


def _add_agent(s, a):
    cls = a["class"]
    if "waypoints" in a:
        t, xy = a["waypoints"]
        return ops_agents.add_agent_waypoints(s, a["track_id"], cls, t, xy, a.get("size_m"))
    r = a["route"]
    return ops_agents.add_agent_route(s, a["track_id"], cls, r["start_xy"], r["speed"], _deg(r, "heading_deg"),
                                      r.get("turns", ()), r.get("start_s", 0.0), r.get("stop_s"), a.get("size_m"))  # fmt: skip


_ROUTE = {"start_xy": (vec(2), True), "speed": (speed_profile, True), "heading_deg": (num, False),
          "turns": (lambda x, a: [string(t, a, ("straight", "left", "right")) for t in strings(x, a)], False),
          "start_s": (nonneg, False), "stop_s": (nonneg, False)}  # fmt: skip


def _route(v, at):
    return mapping(v, at, _ROUTE)


_EGO_ROUTE = {"speed": (speed_profile, True), "start_xy": (vec(2), False), "heading_deg": (num, False),
              "turns": (lambda x, a: [string(t, a, ("straight", "left", "right")) for t in strings(x, a)], False)}  # fmt: skip

OPS: dict[str, OpSpec] = {
    # agents
    "add_agent": OpSpec(
        {"track_id": (string, True), "class": (string, True), "size_m": (vec(3), False), "waypoints": (waypoints, False), "route": (_route, False)},
        _add_agent, "add an agent on waypoints or a lane route", (("waypoints", "route"),)),
    "remove_agents": OpSpec(dict(_AGENT_TARGET), lambda s, a: ops_agents.remove_agents(s, _targets(s, a)),
                            "remove tracks", (("track_id", "track_ids", "select"),)),
    "replace_agents": OpSpec({**_AGENT_TARGET, "class": (string, False), "size_m": (vec(3), False)},
                             lambda s, a: ops_agents.replace_agents(s, _targets(s, a), a.get("class"), a.get("size_m")),
                             "change class and/or size", (("track_id", "track_ids", "select"),)),
    "shift_agents": OpSpec({**_AGENT_TARGET, "dx_m": (num, False), "dy_m": (num, False), "dz_m": (num, False), "dt_s": (num, False), "lateral_m": (num, False)},
                           lambda s, a: ops_agents.shift_agents(s, _targets(s, a), a.get("dx_m", 0.0), a.get("dy_m", 0.0), a.get("dz_m", 0.0), a.get("dt_s", 0.0), a.get("lateral_m", 0.0)),
                           "move tracks in space and/or time", (("track_id", "track_ids", "select"),)),
    "scale_speed": OpSpec({**_AGENT_TARGET, "factor": (pos, True), "from_s": (nonneg, False)},
                          lambda s, a: ops_agents.scale_speed(s, _targets(s, a), a["factor"], a.get("from_s", 0.0)),
                          "replay tracks faster or slower", (("track_id", "track_ids", "select"),)),
    "mirror_agents": OpSpec(dict(_AGENT_TARGET), lambda s, a: ops_agents.mirror_agents(s, _targets(s, a)),
                            "mirror paths about their start heading", (("track_id", "track_ids", "select"),)),
    "perturb_agents": OpSpec({**_AGENT_TARGET, "sigma_m": (nonneg, False), "seed": (integer, False), "correlation_s": (pos, False)},
                             lambda s, a: ops_agents.perturb_agents(s, _targets(s, a), a.get("sigma_m", 0.3), a.get("seed", 0), a.get("correlation_s", 2.0)),
                             "smooth seeded noise on paths", (("track_id", "track_ids", "select"),)),
    "follow": OpSpec({"track_id": (string, True), "leader": (string, True), "time_gap_s": (nonneg, False), "min_gap_m": (nonneg, False), "class": (string, False), "size_m": (vec(3), False)},
                     lambda s, a: ops_agents.follow_agent(s, a["track_id"], a["leader"], a.get("time_gap_s", 1.5), a.get("min_gap_m", 2.0), a.get("class"), a.get("size_m")),
                     "drive a leader's path with a time gap"),
    "cut_in": OpSpec({"track_id": (string, True), "start_s": (nonneg, True), "duration_s": (pos, True), "side": (lambda x, a: string(x, a, ("left", "right")), False),
                      "gap_m": (num, False), "rel_speed_mps": (num, False), "lane_offset_m": (num, False), "class": (string, False), "size_m": (vec(3), False),
                      "lead_in_s": (nonneg, False), "lead_out_s": (nonneg, False)},
                     lambda s, a: ops_agents.cut_in(s, a["track_id"], a["start_s"], a["duration_s"], a.get("side", "left"), a.get("gap_m", 3.0), a.get("rel_speed_mps", 0.0),
                                                    a.get("lane_offset_m"), a.get("class", "Car"), a.get("size_m"), a.get("lead_in_s"), a.get("lead_out_s")),
                     "a vehicle changes from the adjacent lane into the ego's lane"),
    # map
    "restyle_lane_lines": OpSpec({**_MAP_TARGET, "all": (boolean, False), "color": (lambda x, a: string(x, a, ops_map.LANE_COLORS), False), "style": (string, False), "s_range_m": (s_range, False)},
                                 lambda s, a: ops_map.restyle_lane_lines(s, _map_mask(s, "lane_lines", a), a.get("color"), a.get("style"), a.get("s_range_m")),
                                 "change lane-line colour/style, optionally over an arc-length range"),
    "remove_map_elements": OpSpec({"type": (map_kind, True), **_MAP_TARGET, "all": (boolean, False)},
                                  lambda s, a: ops_map.remove_map_elements(s, a["type"], _map_mask(s, a["type"], a)), "delete elements by id or region"),
    "move_map_elements": OpSpec({"type": (map_kind, True), **_MAP_TARGET, "all": (boolean, False), "dx_m": (num, False), "dy_m": (num, False), "dz_m": (num, False)},
                                lambda s, a: ops_map.move_map_elements(s, a["type"], _map_mask(s, a["type"], a), a.get("dx_m", 0.0), a.get("dy_m", 0.0), a.get("dz_m", 0.0)),
                                "translate elements by id or region"),
    "add_map_element": OpSpec({"type": (map_kind, True), "id": (string, True), "points": (lambda x, a: points(x, a, 2), False), "center": (lambda x, a: seq(x, a, num, min_len=2), False),
                               "size_m": (vec(3), False), "yaw_deg": (num, False), "color": (string, False), "style": (string, False)},
                              lambda s, a: ops_map.add_map_element(s, a["type"], a["id"], a.get("points"), a.get("center"), a.get("size_m"), _deg(a, "yaw_deg") or 0.0,
                                                                   a.get("color", "WHITE"), a.get("style", "SOLID_SINGLE")),
                              "add a crosswalk, wait line, marking, sign, light, ...", (("points", "center"),)),
    # lights
    "set_light_states": OpSpec({"light_ids": (strings, True), "timeline": (timeline, True)},
                               lambda s, a: ops_lights.set_light_states(s, a["light_ids"], a["timeline"]), "replace state timelines"),
    "shift_lights": OpSpec({"light_ids": (strings, True), "dt_s": (num, True)},
                           lambda s, a: ops_lights.shift_lights(s, a["light_ids"], a["dt_s"]), "delay or advance timelines"),
    "extend_light_state": OpSpec({"light_ids": (strings, True), "state": (lambda x, a: string(x, a, LIGHT_STATES), True), "at_s": (nonneg, True), "extra_s": (pos, True)},
                                 lambda s, a: ops_lights.extend_light_state(s, a["light_ids"], a["state"], a["at_s"], a["extra_s"]), "hold a state longer"),
    # time
    "crop": OpSpec({"start_s": (nonneg, False), "stop_s": (nonneg, False)},
                   lambda s, a: ops_time.crop(s, a.get("start_s", 0.0), a.get("stop_s")), "keep a time window"),
    "resample": OpSpec({"rate_hz": (pos, True)}, lambda s, a: ops_time.resample(s, a["rate_hz"]), "resample to a clip rate"),
    "retime": OpSpec({"speed_factor": (pos, True)}, lambda s, a: ops_time.retime(s, a["speed_factor"]), "play faster or slower"),
    # ego
    "ego_waypoints": OpSpec({"waypoints": (waypoints, True)}, lambda s, a: ops_ego.replace_ego_waypoints(s, *a["waypoints"]), "replace the ego path by waypoints"),
    "ego_route": OpSpec(dict(_EGO_ROUTE), lambda s, a: ops_ego.replace_ego_route(s, a["speed"], a.get("start_xy"), _deg(a, "heading_deg"), a.get("turns", ())),
                        "replace the ego path by a lane route"),
    "ego_shift": OpSpec({"offset_m": (num, True), "start_s": (nonneg, False), "duration_s": (nonneg, False)},
                        lambda s, a: ops_ego.shift_ego_lateral(s, a["offset_m"], a.get("start_s", 0.0), a.get("duration_s", 0.0)),
                        "shift the ego sideways (lane change)"),
}  # fmt: skip


# ----------------------------------------------------------------------------- edit file model
@dataclass(frozen=True)
class BoundOp:
    """One op of one variant: checked arguments and the lines they came from."""

    index: int
    name: str
    args: dict
    line: int
    field_lines: dict[str, int]


@dataclass(frozen=True)
class Variant:
    name: str
    params: dict
    ops: tuple[BoundOp, ...]


@dataclass(frozen=True)
class EditFile:
    path: Path
    version: int
    variants: tuple[Variant, ...]
    sha256: str


def _substitute(value, params: dict, at: At):
    """Replace `$name` / `${name}` references to sweep parameters (keeps line info)."""
    if isinstance(value, LineDict):
        out = LineDict()
        out.line, out.lines = value.line, dict(value.lines)
        for k, v in value.items():
            out[k] = _substitute(v, params, at.child(k, value))
        return out
    if isinstance(value, LineList):
        out = LineList(_substitute(v, params, at.child(i, value)) for i, v in enumerate(value))
        out.line, out.lines = value.line, list(value.lines)
        return out
    if isinstance(value, str):
        m = _REF.match(value)
        if m:
            if m.group(1) not in params:
                _fail(at.line, at.path, f"unknown sweep parameter ${m.group(1)} (defined: {', '.join(params) or 'none'})")
            return params[m.group(1)]
        for name in _INLINE_REF.findall(value):
            if name not in params:
                _fail(at.line, at.path, f"unknown sweep parameter ${{{name}}}")
        return _INLINE_REF.sub(lambda mm: _fmt(params[mm.group(1)]), value)
    return value


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _bind_op(raw, at: At, index: int) -> BoundOp:
    if not isinstance(raw, dict):
        _fail(at.line, at.path, f"expected a mapping with an 'op' field, got {_type_name(raw)}")
    if "op" not in raw:
        _fail(raw.line, at.path, "missing field 'op'")
    name = raw["op"]
    op_at = at.child("op", raw)
    if not isinstance(name, str) or name not in OPS:
        _fail(op_at.line, op_at.path, f"unknown op {name!r} (known: {', '.join(OPS)})")
    spec = OPS[name]
    body = LineDict({k: v for k, v in raw.items() if k != "op"})
    body.line, body.lines = raw.line, {k: v for k, v in raw.lines.items() if k != "op"}
    args = mapping(body, at, spec.fields)
    for group in spec.one_of:
        given = [g for g in group if g in args]
        if len(given) != 1:
            _fail(raw.line, at.path, f"{name} needs exactly one of {', '.join(group)}" + (f" (got {', '.join(given)})" if given else ""))
    return BoundOp(index, name, args, raw.line, dict(body.lines))


def _variant_name(template: str | None, params: dict, index: int, at: At) -> str:
    if template is None:
        raw = "_".join(f"{k}-{_fmt(v)}" for k, v in params.items()) if params else "edited"
    else:
        try:
            raw = template.format(**{k: _fmt(v) for k, v in params.items()})
        except (KeyError, IndexError, ValueError) as exc:
            _fail(at.line, at.path, f"name template {template!r}: {exc}")
    name = _NAME_OK.sub("_", raw).strip("._") or f"variant_{index:03d}"
    return name


def parse_edit_text(text: str, path: Path) -> EditFile:
    """Parse and check an edit file's text (static checks only: types, fields, ops, sweeps)."""
    try:
        try:
            doc = yaml.load(text, Loader=_Loader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            if path.suffix.lower() == ".json":
                try:
                    json.loads(text)
                except json.JSONDecodeError as jexc:
                    _fail(jexc.lineno, "json", jexc.msg)
            _fail((mark.line + 1) if mark else 0, "syntax", " ".join(str(getattr(exc, "problem", exc)).split()))
        root = At("", 1)
        if not isinstance(doc, LineDict):
            _fail(1, "document", "expected a mapping with 'version' and 'ops'")
        top = mapping(doc, root, {"version": (integer, True), "name": (string, False), "sweep": (lambda v, a: v, False),
                                  "ops": (lambda v, a: v, True), "description": (string, False)})  # fmt: skip
        if top["version"] not in SUPPORTED_VERSIONS:
            at = root.child("version", doc)
            _fail(at.line, at.path, f"unsupported edit-file version {top['version']} (supported: {SUPPORTED_VERSIONS})")
        sweep_at = root.child("sweep", doc)
        sweep = doc.get("sweep") or LineDict()
        if not isinstance(sweep, dict):
            _fail(sweep_at.line, "sweep", f"expected a mapping of parameter -> list of values, got {_type_name(sweep)}")
        for k, values in sweep.items():
            at = sweep_at.child(k, sweep)
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k)):
                _fail(at.line, at.path, "parameter names are letters, digits and _")
            seq(values, at, lambda x, a: x if isinstance(x, (int, float, str, bool)) else _fail(a.line, a.path, "sweep values must be numbers, strings or booleans"), min_len=1)
        ops_raw = doc["ops"]
        ops_at = root.child("ops", doc)
        if not isinstance(ops_raw, list) or not ops_raw:
            _fail(ops_at.line, "ops", "expected a non-empty list of operations")
        keys = list(sweep.keys())
        combos = list(itertools.product(*(sweep[k] for k in keys))) if keys else [()]
        variants, names = [], {}
        for vi, combo in enumerate(combos):
            params = dict(zip(keys, combo))
            ops_sub = _substitute(ops_raw, params, ops_at)
            bound = tuple(_bind_op(raw, ops_at.child(i, ops_sub), i) for i, raw in enumerate(ops_sub))
            name = _variant_name(top.get("name"), params, vi, root.child("name", doc))
            if name in names:
                _fail(root.child("name", doc).line, "name", f"variants {names[name]} and {vi} are both named {name!r}; put every sweep parameter in the name")
            names[name] = vi
            variants.append(Variant(name, params, bound))
    except _EditError as exc:
        raise AvsimInputError(path, f"line {exc.line}: {exc.field}", exc.reason) from None
    return EditFile(path, top["version"], tuple(variants), hashlib.sha256(text.encode()).hexdigest())


def load_edit_file(path: str | Path) -> EditFile:
    path = Path(path)
    if not path.is_file():
        raise AvsimInputError(path, "file", "edit file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AvsimInputError(path, "file", f"cannot read: {exc}") from None
    return parse_edit_text(text, path)


# ----------------------------------------------------------------------------- applying
@dataclass
class VariantResult:
    name: str
    params: dict
    scenario: Any
    new_findings: list[tuple[int, Finding]] = field(default_factory=list)  # (op index, finding)


def _field_of(message: str, op: BoundOp) -> str | None:
    head = message.split(":", 1)[0].strip()
    head = head.split(".", 1)[0].split("[", 1)[0].split(" ", 1)[0]
    head = {"light_id": "light_ids", "source_class": "class"}.get(head, head)  # op argument -> edit-file field
    return head if head in op.field_lines else None


def apply_op(scenario, op: BoundOp, path: Path, variant: str):
    """Apply one bound op; AvsimValueError becomes AvsimInputError naming the field's line."""
    try:
        return OPS[op.name].apply(scenario, op.args)
    except AvsimError as exc:
        msg = str(exc)
        fld = _field_of(msg, op)
        line = op.field_lines.get(fld, op.line) if fld else op.line
        where = f"ops[{op.index}].{fld}" if fld else f"ops[{op.index}] ({op.name})"
        reason = msg.split(":", 1)[1].strip() if fld and ":" in msg else msg
        prefix = f"variant {variant}: " if variant != "edited" else ""
        raise AvsimInputError(path, f"line {line}: {where}", prefix + reason) from None


def apply_variant(scenario, edit: EditFile, variant: Variant, validate: bool = True,
                  config: ValidationConfig | None = None, base_findings: list[Finding] | None = None) -> VariantResult:  # fmt: skip
    """Apply a variant's ops in order; after every op, record findings that op introduced.

    `base_findings` (the input's own findings) may be passed to skip validating the input again.
    """
    result = VariantResult(variant.name, dict(variant.params), scenario)
    if validate and base_findings is None:
        base_findings = validate_scenario(scenario, config)
    before = {f.key for f in base_findings} if validate else set()
    current = scenario
    for op in variant.ops:
        current = apply_op(current, op, edit.path, variant.name)
        if validate:
            found = validate_scenario(current, config)
            for f in found:
                if f.key not in before:
                    result.new_findings.append((op.index, f))
            before |= {f.key for f in found}
    meta = dict(current.metadata)
    # an edited scenario can be edited again: keep every step, oldest first
    meta["edit_history"] = [*scenario.metadata.get("edit_history", []), {
        "source_scenario_id": scenario.scenario_id,
        "edit_file": edit.path.name,
        "edit_file_sha256": edit.sha256,
        "variant": variant.name,
        "params": dict(variant.params),
        "ops": [op.name for op in variant.ops],
    }]  # fmt: skip
    new_id = scenario.scenario_id if variant.name == "edited" else f"{scenario.scenario_id}__{variant.name}"
    result.scenario = current.replace(scenario_id=new_id, metadata=meta)
    return result


def apply_edit_file(scenario, edit: EditFile | str | Path, validate: bool = True,
                    config: ValidationConfig | None = None) -> list[VariantResult]:  # fmt: skip
    """Every variant of an edit file applied to `scenario` (in memory; nothing is written)."""
    if not isinstance(edit, EditFile):
        edit = load_edit_file(edit)
    base = validate_scenario(scenario, config) if validate else []
    return [apply_variant(scenario, edit, v, validate, config, base) for v in edit.variants]
