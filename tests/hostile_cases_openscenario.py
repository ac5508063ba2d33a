"""Hostile cases of ASAM OpenSCENARIO (issue 58): entity bombs and external entities in .xosc files,
references out of `--root`, unsupported elements, expressions that are not code, bad `--param`.

Each case is `(name, command as documented, build(world) -> argv, exit code, text of the error line)`;
`tests/hostile_cases.py` makes them `Case`s and renders them into docs/hostile_inputs.md with
`OPENSCENARIO_LIMITS`.
"""

from __future__ import annotations

from typing import Any

from hostile_cases_surfaces import write_input

OPENSCENARIO_LIMITS = [
    "| OpenSCENARIO (.xosc) | 64 MiB a scenario, 256 MiB a file it refers to, read only inside `--root` (default the scenario's folder; links resolved); as XML above; numbers finite within 1e9; expressions 1024 characters, nested 32 deep, evaluated by a parser (never executed); 10,000 parameters, 2000 entities, 200,000 vertices a trajectory, 10,000 conditions a trigger, 1000 catalog files a folder; runs at most 3600 s at most 1000 Hz; 1000 variants a distribution; files embedded in a converted scenario 48 MiB compressed, each inflated no further than its declared size and checked against its SHA-256 | `avsim.scenario.openscenario.parse.MAX_XOSC_BYTES`, `sources.MAX_SOURCE_BYTES`, `MAX_EMBEDDED_BYTES`, `reader.MAX_MAGNITUDE`, `expressions.MAX_EXPRESSION_CHARS`, `load.MAX_DURATION_S`, `distribution.MAX_VARIANTS` |",
]  # fmt: skip

_LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
           + "".join(f'<!ENTITY lol{k} "{("&lol" + (str(k - 1) if k > 1 else "") + ";") * 10}">' for k in range(1, 10))
           + ']>\n<OpenSCENARIO>&lol9;</OpenSCENARIO>\n')
_XXE = '<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<OpenSCENARIO>&x;</OpenSCENARIO>\n'


def _file(w: Any, name: str, text: str) -> str:
    return str(write_input(w, name, text))


_XOSC_PARAM = '<ParameterDeclarations><ParameterDeclaration name="Speed" parameterType="double" value="{v}"/></ParameterDeclarations>'


def _xosc(road: str, catalog: str = "", init: str = "", params: str = "") -> str:
    """A scenario with one vehicle on road file `road` (which need not exist: the errors come first)."""
    cat = f'<VehicleCatalog><Directory path="{catalog}"/></VehicleCatalog>' if catalog else ""
    ego = '<CatalogReference catalogName="V" entryName="car"/>' if catalog else ('<Vehicle name="car" vehicleCategory="car"><BoundingBox><Center x="1" y="0" z="1"/>'
           '<Dimensions width="2" length="4" height="1.5"/></BoundingBox><Performance maxSpeed="50" maxAcceleration="5" maxDeceleration="9"/>'
           '<Axles><RearAxle maxSteering="0.5" wheelDiameter="0.6" trackWidth="1.6" positionX="0" positionZ="0.3"/></Axles></Vehicle>')  # fmt: skip
    return ('<OpenSCENARIO><FileHeader revMajor="1" revMinor="2" date="2024-01-01T00:00:00" description="" author=""/>'
            f'{params}<CatalogLocations>{cat}</CatalogLocations><RoadNetwork>{road}</RoadNetwork>'
            f'<Entities><ScenarioObject name="Ego">{ego}</ScenarioObject></Entities><Storyboard><Init><Actions>{init}</Actions></Init></Storyboard></OpenSCENARIO>')  # fmt: skip


OPENSCENARIO_CASES = [
    ("xosc entity bomb", "avsim convert laughs.xosc OUT", lambda w: ["convert", _file(w, "l.xosc", _LAUGHS), str(w.root / "o")], 1, "a DOCTYPE declaration is not accepted"),
    ("xosc external entity", "avsim convert xxe.xosc OUT", lambda w: ["convert", _file(w, "x.xosc", _XXE), str(w.root / "o")], 1, "a DOCTYPE declaration is not accepted"),
    ("xosc road outside", "avsim convert s.xosc OUT  (LogicFile ../../../etc/passwd)", lambda w: ["convert", _file(w, "s.xosc", _xosc('<LogicFile filepath="../../../etc/passwd"/>')), str(w.root / "o")], 1, "leads outside"),
    ("xosc catalog outside", "avsim convert s.xosc OUT  (Directory /etc)", lambda w: ["convert", _file(w, "c.xosc", _xosc('<LogicFile filepath="r.xodr"/>', catalog="/etc")), str(w.root / "o")], 1, "leads outside"),
    ("xosc unsupported", "avsim convert s.xosc OUT  (Init InfrastructureAction)", lambda w: ["convert", _file(w, "u.xosc", _xosc('<LogicFile filepath="r.xodr"/>', init='<GlobalAction><InfrastructureAction/></GlobalAction>')), str(w.root / "o")], 1, "InfrastructureAction is not supported"),
    ("xosc bad expression", "avsim convert s.xosc OUT  (value=\"${__import__('os')}\")", lambda w: ["convert", _file(w, "e.xosc", _xosc('<LogicFile filepath="r.xodr"/>', params=_XOSC_PARAM.format(v="${__import__('os')}"))), str(w.root / "o")], 1, "unexpected"),
    ("xosc unknown param", "avsim convert s.xosc OUT --param Nope=1", lambda w: ["convert", _file(w, "p.xosc", _xosc('<LogicFile filepath="r.xodr"/>')), str(w.root / "o"), "--param", "Nope=1"], 1, "no global parameter named Nope"),
    ("xosc param syntax", "avsim convert s.xosc OUT --param Nope", lambda w: ["convert", _file(w, "q.xosc", _xosc('<LogicFile filepath="r.xodr"/>')), str(w.root / "o"), "--param", "Nope"], 2, "expected NAME=VALUE"),
    ("xosc map options", "avsim convert s.xosc OUT --traffic 3", lambda w: ["convert", _file(w, "t.xosc", _xosc('<LogicFile filepath="r.xodr"/>')), str(w.root / "o"), "--traffic", "3"], 2, "apply to map formats"),
]
