"""Hostile cases of the map formats (issue 57): OpenDRIVE and Lanelet2 XML, `avsim convert`'s route and
trajectory options.

Each case is `(name, command as documented, build(world) -> argv, exit code, text of the error line)`;
`tests/hostile_cases.py` makes them `Case`s and renders them into docs/hostile_inputs.md with `MAP_LIMITS`.
"""

from __future__ import annotations

from typing import Any

from hostile_cases_surfaces import write_input

MAP_LIMITS = [
    "| XML (OpenDRIVE .xodr, Lanelet2 .osm) | 512 MiB, checked before reading; elements nested 64 deep, 20,000,000 elements; no DOCTYPE, entity or external reference | `avsim.core.safe_xml.MAX_XML_BYTES`, `MAX_XML_DEPTH`, `MAX_XML_ELEMENTS` |",
    "| ego trajectory CSV (`avsim convert --trajectory`), Lanelet2 `map_projector_info.yaml` | 64 MiB / 64 KiB | `avsim.scenario.bare_map.MAX_TRAJECTORY_BYTES`, `avsim.maps.lanelet2.origin.MAX_INFO_BYTES` |",
]  # fmt: skip

_LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
           + "".join(f'<!ENTITY lol{k} "{("&lol" + (str(k - 1) if k > 1 else "") + ";") * 10}">' for k in range(1, 10))
           + ']>\n<OpenDRIVE>&lol9;</OpenDRIVE>\n')
_XXE = '<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<OpenDRIVE>&x;</OpenDRIVE>\n'
_XODR_BAD_LENGTH = ('<OpenDRIVE><header revMajor="1" revMinor="7"/><road id="1" length="10" junction="-1"><planView>'
                    '<geometry s="0" x="0" y="0" hdg="0" length="ten"><line/></geometry></planView><lanes><laneSection s="0">'
                    '<center><lane id="0" type="none"/></center></laneSection></lanes></road></OpenDRIVE>')
_OSM_BAD_LAT = "<?xml version='1.0'?><osm version='0.6'><node id='1' lat='91.5' lon='8.4'/></osm>"
_OSM_LAUGHS = _LAUGHS.replace("OpenDRIVE", "osm")


def _xodr(w: Any, name: str, text: str) -> str:
    return str(write_input(w, name, text))


MAP_CASES = [
    ("xodr entity bomb", "avsim convert laughs.xodr OUT  (9 levels of 10 nested entities)", lambda w: ["convert", _xodr(w, "l.xodr", _LAUGHS), str(w.root / "o")], 1, "a DOCTYPE declaration is not accepted"),
    ("xodr external entity", "avsim convert xxe.xodr OUT  (<!ENTITY x SYSTEM file:///etc/passwd>)", lambda w: ["convert", _xodr(w, "x.xodr", _XXE), str(w.root / "o")], 1, "a DOCTYPE declaration is not accepted"),
    ("xodr not xml", "avsim convert junk.xodr OUT", lambda w: ["convert", _xodr(w, "j.xodr", "<OpenDRIVE><road></OpenDRIVE>"), str(w.root / "o")], 1, "not well-formed XML"),
    ("xodr nested", "avsim convert deep.xodr OUT  (100 nested elements)", lambda w: ["convert", _xodr(w, "d.xodr", "<OpenDRIVE>" + "<a>" * 100 + "</a>" * 100 + "</OpenDRIVE>"), str(w.root / "o")], 1, "nested deeper than 64"),
    ("xodr wrong root", "avsim convert other.xodr OUT  (<osm> document)", lambda w: ["convert", _xodr(w, "r.xodr", "<osm/>"), str(w.root / "o")], 1, "expected an <OpenDRIVE> document"),
    ("xodr bad number", "avsim convert bad.xodr OUT  (geometry length=\"ten\")", lambda w: ["convert", _xodr(w, "b.xodr", _XODR_BAD_LENGTH), str(w.root / "o")], 1, "road[id=1]/planView/geometry[0]@length: expected a number"),
    ("osm entity bomb", "avsim convert laughs.osm OUT", lambda w: ["convert", _xodr(w, "l.osm", _OSM_LAUGHS), str(w.root / "o")], 1, "a DOCTYPE declaration is not accepted"),
    ("osm bad latitude", "avsim convert bad.osm OUT  (lat=91.5)", lambda w: ["convert", _xodr(w, "b.osm", _OSM_BAD_LAT), str(w.root / "o")], 1, "node[id=1]@lat: expected degrees within +-90"),
    ("map route half", "avsim convert map.xodr OUT --start 1:0:-1  (no --goal)", lambda w: ["convert", _xodr(w, "h.xodr", _XODR_BAD_LENGTH), str(w.root / "o"), "--start", "1:0:-1"], 2, "give --start and --goal together"),
    ("map trajectory bad", "avsim convert map.xodr OUT --trajectory ego.csv  (no y_m column)", lambda w: ["convert", _xodr(w, "m.xodr", _XODR_BAD_LENGTH.replace('"ten"', '"10"')), str(w.root / "o"), "--trajectory", str(write_input(w, "e.csv", "t_s,x_m\n0,0\n1,1\n"))], 1, "missing column(s) ['y_m']"),
]

