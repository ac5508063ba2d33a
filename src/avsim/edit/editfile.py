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
import string as string_module
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from avsim.core.errors import AvsimError, AvsimInputError, AvsimValueError
from avsim.core.lights import LIGHT_STATES
from avsim.core.names import MAX_NAME_CHARS  # a variant name is a folder name
from avsim.core.safe_files import file_kind
from avsim.scenario import Scenario
from avsim.scenario.compare import scenario_differences

from . import ops_agents, ops_ego, ops_lights, ops_map, ops_openscenario, ops_time
from .editfile_parse import (
    At,
    Checker,
    LineDict,
    LineList,
    _EditError,
    _fail,
    _type_name,
    agent_selector,
    boolean,
    integer,
    map_kind,
    mapping,
    nonneg,
    num,
    points,
    pos,
    rate_hz,
    read_document,
    region,
    s_range,
    seq,
    speed_factor,
    speed_profile,
    string,
    strings,
    timeline,
    vec,
    waypoints,
)
from .selectors import select_agents, select_map_elements
from .validate import Finding, ValidationConfig, validate_scenario

EDIT_SCHEMA_VERSION = 1
SUPPORTED_VERSIONS = (1,)
_REF = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
_INLINE_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME_OK = re.compile(r"[^A-Za-z0-9._-]+")
MAX_VARIANTS = 1000  # variants of one edit file (each a scenario folder written)
MAX_EDIT_FILE_BYTES = 16 * 1024**2  # an edit file is a few kB



# ----------------------------------------------------------------------------- op table
@dataclass(frozen=True)
class OpSpec:
    """An edit operation: its fields {name: (checker, required)} and how to apply it."""

    fields: dict[str, tuple[Checker, bool]]
    apply: Callable[[Scenario, dict[str, Any]], Scenario]
    doc: str
    one_of: tuple[tuple[str, ...], ...] = ()


_AGENT_TARGET: dict[str, tuple[Checker, bool]] = {"track_id": (string, False), "track_ids": (strings, False), "select": (agent_selector, False)}
_MAP_TARGET: dict[str, tuple[Checker, bool]] = {"ids": (strings, False), "region": (region, False), "within_m_of_ego": (pos, False)}


def _targets(scenario: Scenario, a: dict[str, Any]) -> list[str]:
    if "select" in a:
        ids = select_agents(scenario, a["select"])
        if not ids:
            raise AvsimValueError("select: matches no agent")
        return ids
    return ops_agents.require_ids(scenario, a["track_ids"] if "track_ids" in a else [a["track_id"]], "track_id" if "track_id" in a else "track_ids")


def _map_mask(scenario: Scenario, kind: str, a: dict[str, Any]) -> np.ndarray:
    if not any(k in a for k in ("ids", "region", "within_m_of_ego")) and not a.get("all", False):
        raise AvsimValueError("ids: give ids, a region, within_m_of_ego or all: true")
    ego_xy = np.asarray(scenario.ego.world_SE3_ego.translation)[:, :2]
    mask = select_map_elements(scenario.map, kind, a.get("ids"), a.get("region"), a.get("within_m_of_ego"), ego_xy)
    if not mask.any():
        given = next((k for k in ("within_m_of_ego", "region", "ids") if k in a), "all")
        raise AvsimValueError(f"{given}: selects no {kind} element")
    return mask


def _deg(a: dict[str, Any], key: str) -> float | None:
    return None if key not in a else float(np.deg2rad(a[key]))


def _add_agent(s: Scenario, a: dict[str, Any]) -> Scenario:
    cls = a["class"]
    if "waypoints" in a:
        t, xy = a["waypoints"]
        return ops_agents.add_agent_waypoints(s, a["track_id"], cls, t, xy, a.get("size_m"))
    r = a["route"]
    return ops_agents.add_agent_route(s, a["track_id"], cls, r["start_xy"], r["speed"], _deg(r, "heading_deg"),
                                      r.get("turns", ()), r.get("start_s", 0.0), r.get("stop_s"), a.get("size_m"))  # fmt: skip


_ROUTE: dict[str, tuple[Checker, bool]] = {"start_xy": (vec(2), True), "speed": (speed_profile, True), "heading_deg": (num, False),
          "turns": (lambda x, a: [string(t, a, ("straight", "left", "right")) for t in strings(x, a)], False),
          "start_s": (nonneg, False), "stop_s": (nonneg, False)}  # fmt: skip


def _route(v: Any, at: At) -> dict[str, Any]:
    return mapping(v, at, _ROUTE)


_EGO_ROUTE: dict[str, tuple[Checker, bool]] = {"speed": (speed_profile, True), "start_xy": (vec(2), False), "heading_deg": (num, False),
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
    "scale_speed": OpSpec({**_AGENT_TARGET, "factor": (speed_factor, True), "from_s": (nonneg, False)},
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
    "resample": OpSpec({"rate_hz": (rate_hz, True)}, lambda s, a: ops_time.resample(s, a["rate_hz"]), "resample to a clip rate"),
    "retime": OpSpec({"speed_factor": (speed_factor, True)}, lambda s, a: ops_time.retime(s, a["speed_factor"]), "play faster or slower"),
    # ego
    "ego_waypoints": OpSpec({"waypoints": (waypoints, True)}, lambda s, a: ops_ego.replace_ego_waypoints(s, *a["waypoints"]), "replace the ego path by waypoints"),
    "ego_route": OpSpec(dict(_EGO_ROUTE), lambda s, a: ops_ego.replace_ego_route(s, a["speed"], a.get("start_xy"), _deg(a, "heading_deg"), a.get("turns", ())),
                        "replace the ego path by a lane route"),
    "ego_shift": OpSpec({"offset_m": (num, True), "start_s": (nonneg, False), "duration_s": (nonneg, False)},
                        lambda s, a: ops_ego.shift_ego_lateral(s, a["offset_m"], a.get("start_s", 0.0), a.get("duration_s", 0.0)),
                        "shift the ego sideways (lane change)"),
    # scenarios converted from OpenSCENARIO
    "openscenario_parameters": OpSpec({"values": (ops_openscenario.parameter_values, True)},
                                      lambda s, a: ops_openscenario.set_parameters(s, a["values"]),
                                      "run the scenario's OpenSCENARIO storyboard again with other parameter values"),
}  # fmt: skip


# ----------------------------------------------------------------------------- edit file model
@dataclass(frozen=True)
class BoundOp:
    """One op of one variant: checked arguments and the lines they came from."""

    index: int
    name: str
    args: dict[str, Any]
    line: int
    field_lines: dict[str, int]


@dataclass(frozen=True)
class Variant:
    name: str
    params: dict[str, Any]
    ops: tuple[BoundOp, ...]


@dataclass(frozen=True)
class EditFile:
    path: Path
    version: int
    variants: tuple[Variant, ...]
    sha256: str


def _substitute(value: Any, params: dict[str, Any], at: At) -> Any:
    """Replace `$name` / `${name}` references to sweep parameters (keeps line info)."""
    if isinstance(value, LineDict):
        out = LineDict()
        out.line, out.lines = value.line, dict(value.lines)
        for k, v in value.items():
            out[k] = _substitute(v, params, at.child(k, value))
        return out
    if isinstance(value, LineList):
        out_list = LineList(_substitute(v, params, at.child(i, value)) for i, v in enumerate(value))
        out_list.line, out_list.lines = value.line, list(value.lines)
        return out_list
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


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _bind_op(raw: Any, at: At, index: int) -> BoundOp:
    if not isinstance(raw, dict):
        _fail(at.line, at.path, f"expected a mapping with an 'op' field, got {_type_name(raw)}")
    raw = cast(LineDict, raw)  # every mapping the loader builds is a LineDict
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


def _ops_digest(ops_sub: Any) -> str:
    """8 hex digits of the variant's ops after substitution (canonical JSON): its content id."""
    canonical = json.dumps(ops_sub, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def _default_name(params: dict[str, Any], stem: str, ops_sub: Any) -> str:
    """`<param-value_...>-<ops digest>` for a sweep point, `<edit file stem>-<ops digest>` without a sweep.

    The 8 hex digits of the variant's ops (`_ops_digest`) make two different edits' variants
    differ in id and output folder even when their files share a stem or their sweeps share values.
    """
    base = "_".join(f"{k}-{_fmt(v)}" for k, v in params.items()) if params else stem
    return f"{base}-{_ops_digest(ops_sub)}"


def _variant_name(template: str | None, params: dict[str, Any], index: int, at: At, default: str) -> str:
    """The variant's name: the `name` template filled in, else `default` (made filesystem-safe).

    A template holds text and plain `{param}` fields only: no attribute or index access, format
    spec or conversion (`{a.__class__}`, `{a:>2000000000}` are refused before anything is built).
    """
    if template is None:
        raw = default
    else:
        raw = "".join(text + (_fmt(params[name]) if name is not None else "") for text, name in _template_fields(template, params, at))
    name = _NAME_OK.sub("_", raw).strip("._") or f"variant_{index:03d}"
    if len(name) > MAX_NAME_CHARS:
        _fail(at.line, at.path, f"variant name of {len(name)} characters, more than {MAX_NAME_CHARS} (a folder name; `avsim.core.names`)")
    return name


def _template_fields(template: str, params: dict[str, Any], at: At) -> list[tuple[str, str | None]]:
    """(literal text, plain parameter name or None) pieces of a name template; anything else fails."""
    try:
        pieces = list(string_module.Formatter().parse(template))
    except ValueError as exc:
        _fail(at.line, at.path, f"name template {template[:80]!r}: {exc}")
    out: list[tuple[str, str | None]] = []
    for text, name, spec, conversion in pieces:
        if name is not None and (spec or conversion or name not in params):
            plain = not (spec or conversion) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
            why = f"unknown parameter {{{name[:40]}}}" if plain else "only plain {param} fields are allowed (no attributes, indexes, format specs or conversions)"
            _fail(at.line, at.path, f"name template {template[:80]!r}: {why}")
        out.append((text, name))
    return out


def _check_sweep(doc: LineDict, root: At) -> dict[Any, Any]:
    """The `sweep` mapping (parameter -> non-empty list of scalars), empty when absent."""
    sweep_at = root.child("sweep", doc)
    sweep = doc.get("sweep") or LineDict()
    if not isinstance(sweep, dict):
        _fail(sweep_at.line, "sweep", f"expected a mapping of parameter -> list of values, got {_type_name(sweep)}")
    for k, values in sweep.items():
        at = sweep_at.child(k, sweep)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k)):
            _fail(at.line, at.path, "parameter names are letters, digits and _")
        seq(values, at, lambda x, a: x if isinstance(x, (int, float, str, bool)) else _fail(a.line, a.path, "sweep values must be numbers, strings or booleans"), min_len=1)
    return sweep


def expand_variants(doc: LineDict, name_template: str | None, sweep: dict[Any, Any], root: At,
                    stem: str = "edited") -> tuple[Variant, ...]:  # fmt: skip
    """One variant per point of the sweep's cartesian product, its ops substituted and bound.

    `stem` (the edit file's name without suffix) starts the default name of a sweep-less edit.
    """
    ops_raw = doc["ops"]
    ops_at = root.child("ops", doc)
    if not isinstance(ops_raw, list) or not ops_raw:
        _fail(ops_at.line, "ops", "expected a non-empty list of operations")
    keys = list(sweep.keys())
    n_variants = math.prod(len(sweep[k]) for k in keys)
    if n_variants > MAX_VARIANTS:
        _fail(root.child("sweep", doc).line, "sweep", f"{n_variants} variants, more than the {MAX_VARIANTS} one edit file may make")
    combos = list(itertools.product(*(sweep[k] for k in keys))) if keys else [()]
    variants: list[Variant] = []
    names: dict[str, int] = {}
    for vi, combo in enumerate(combos):
        params = dict(zip(keys, combo))
        ops_sub = _substitute(ops_raw, params, ops_at)
        bound = tuple(_bind_op(raw, ops_at.child(i, ops_sub), i) for i, raw in enumerate(ops_sub))
        default = _default_name(params, stem, ops_sub)
        name = _variant_name(name_template, params, vi, root.child("name", doc), default)
        if name in names:
            _fail(root.child("name", doc).line, "name", f"variants {names[name]} and {vi} are both named {name!r}; put every sweep parameter in the name")
        names[name] = vi
        variants.append(Variant(name, params, bound))
    return tuple(variants)


def parse_edit_text(text: str, path: Path) -> EditFile:
    """Parse and check an edit file's text (static checks only: types, fields, ops, sweeps)."""
    try:
        doc = read_document(text, path)
        root = At("", 1)
        top = mapping(doc, root, {"version": (integer, True), "name": (string, False), "sweep": (lambda v, a: v, False),
                                  "ops": (lambda v, a: v, True), "description": (string, False)})  # fmt: skip
        if top["version"] not in SUPPORTED_VERSIONS:
            at = root.child("version", doc)
            _fail(at.line, at.path, f"unsupported edit-file version {top['version']} (supported: {SUPPORTED_VERSIONS})")
        variants = expand_variants(doc, top.get("name"), _check_sweep(doc, root), root, path.stem)
    except _EditError as exc:
        raise AvsimInputError(path, f"line {exc.line}: {exc.field}", exc.reason) from None
    return EditFile(path, top["version"], variants, hashlib.sha256(text.encode()).hexdigest())


def load_edit_file(path: str | Path) -> EditFile:
    path = Path(path)
    kind = file_kind(path)
    if kind is not None:
        raise AvsimInputError(path, "file", "edit file not found" if kind == "missing" else f"is {kind}, not an edit file")
    if path.stat().st_size > MAX_EDIT_FILE_BYTES:
        raise AvsimInputError(path, "file", f"{path.stat().st_size} bytes, more than the {MAX_EDIT_FILE_BYTES} an edit file may have")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AvsimInputError(path, "file", f"cannot read: {exc}") from None
    return parse_edit_text(text, path)


# ----------------------------------------------------------------------------- applying
@dataclass
class VariantResult:
    name: str
    params: dict[str, Any]
    scenario: Scenario
    new_findings: list[tuple[int, Finding]] = field(default_factory=list)  # (op index, finding)
    unchanged_ops: list[tuple[int, str]] = field(default_factory=list)  # (op index, op name) of ops that changed nothing


def _field_of(message: str, op: BoundOp) -> str | None:
    head = message.split(":", 1)[0].strip()
    head = head.split(".", 1)[0].split("[", 1)[0].split(" ", 1)[0]
    head = {"light_id": "light_ids", "source_class": "class"}.get(head, head)  # op argument -> edit-file field
    return head if head in op.field_lines else None


def apply_op(scenario: Scenario, op: BoundOp, path: Path, variant: str) -> Scenario:
    """Apply one bound op; AvsimValueError becomes AvsimInputError naming the field's line."""
    try:
        return OPS[op.name].apply(scenario, op.args)
    except AvsimError as exc:
        msg = str(exc)
        fld = _field_of(msg, op)
        line = op.field_lines.get(fld, op.line) if fld else op.line
        where = f"ops[{op.index}].{fld}" if fld else f"ops[{op.index}] ({op.name})"
        reason = msg.split(":", 1)[1].strip() if fld and ":" in msg else msg
        prefix = f"variant {variant}: " if variant else ""
        raise AvsimInputError(path, f"line {line}: {where}", prefix + reason) from None


def apply_variant(scenario: Scenario, edit: EditFile, variant: Variant, validate: bool = True,
                  config: ValidationConfig | None = None, base_findings: list[Finding] | None = None) -> VariantResult:  # fmt: skip
    """Apply a variant's ops in order; record the findings of the final variant that its input did
    not have, each with the op that introduced it and at the final variant's times (a finding an
    op made and a later op removed, e.g. by a crop, is not reported), and the ops that changed
    nothing at all (`VariantResult.unchanged_ops`).

    `base_findings` (the input's own findings) may be passed to skip validating the input again.
    """
    result = VariantResult(variant.name, dict(variant.params), scenario)
    if validate and base_findings is None:
        base_findings = validate_scenario(scenario, config)
    before = {f.key for f in (base_findings or [])} if validate else set()
    introduced: dict[tuple[str, tuple[str, ...]], int] = {}  # finding key -> the op that first showed it
    final: list[Finding] = []
    current = scenario
    for op in variant.ops:
        previous, current = current, apply_op(current, op, edit.path, variant.name if variant.params else "")
        if not scenario_differences(previous, current, limit=1):
            result.unchanged_ops.append((op.index, op.name))
        if validate:
            final = validate_scenario(current, config)
            for f in final:
                if f.key not in before:
                    introduced.setdefault(f.key, op.index)
            before |= {f.key for f in final}
    # only what the final variant holds, at its times: a later op (a crop) may remove a finding an earlier one made
    result.new_findings = [(introduced[f.key], f) for f in final if f.key in introduced]
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
    result.scenario = current.replace(scenario_id=f"{scenario.scenario_id}__{variant.name}", metadata=meta)
    return result


def apply_edit_file(scenario: Scenario, edit: EditFile | str | Path, validate: bool = True,
                    config: ValidationConfig | None = None,
                    progress: Callable[[int, int, VariantResult], None] | None = None) -> list[VariantResult]:  # fmt: skip
    """Every variant of an edit file applied to `scenario` (in memory; nothing is written).

    `progress(i, n, result)` is called after variant i (0-based) of n has been applied.
    """
    if not isinstance(edit, EditFile):
        edit = load_edit_file(edit)
    base = validate_scenario(scenario, config) if validate else []
    results: list[VariantResult] = []
    for v in edit.variants:
        results.append(apply_variant(scenario, edit, v, validate, config, base))
        if progress is not None:
            progress(len(results) - 1, len(edit.variants), results[-1])
    return results
