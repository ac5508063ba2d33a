"""avsim's OpenDRIVE lane centres against libOpenDRIVE (pageldev/libOpenDRIVE), a reference C++
implementation, where one is built.

Set AVSIM_LIBOPENDRIVE to a libOpenDRIVE checkout built with cmake (``build/libOpenDrive.a`` and
``build/_deps/pugixml-build/libpugixml.a``; its ``_deps/pugixml-src/src`` or AVSIM_PUGIXML_SRC for
the pugixml headers); the test compiles `tests/reference/libopendrive_probe.cpp` against it and
compares every driving lane's centre at avsim's sampling grid. Optional: AVSIM_OPENDRIVE_MAPS, a
folder of more .xodr files (CARLA's towns) to compare as well.

libOpenDRIVE maps a paramPoly3's arc length to its parameter through a piecewise-linear table, a
few millimetres off on the test curves (avsim integrates exactly: tests/test_opendrive_import.py),
and does not read poly3 at all; those roads are compared within 2 cm, the rest within 1 um.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from avsim.maps.opendrive.model import GeometryKind
from avsim.maps.opendrive.network import RoadNetwork
from avsim.maps.opendrive.sampling import section_grid

ROOT = os.environ.get("AVSIM_LIBOPENDRIVE")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.subprocess,
    pytest.mark.skipif(not ROOT or not (Path(ROOT) / "build" / "libOpenDrive.a").is_file(),
                       reason="AVSIM_LIBOPENDRIVE names no libOpenDRIVE build (see the module docstring)"),
    pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler"),
]  # fmt: skip


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = Path(ROOT or "")
    pugi = os.environ.get("AVSIM_PUGIXML_SRC") or str(root / "build" / "_deps" / "pugixml-src" / "src")
    exe = tmp_path_factory.mktemp("probe") / "odr_probe"
    subprocess.run(["g++", "-std=c++17", "-O2", f"-I{root / 'include'}", f"-I{pugi}", str(Path(__file__).parent / "reference" / "libopendrive_probe.cpp"),
                    str(root / "build" / "libOpenDrive.a"), str(root / "build" / "_deps" / "pugixml-build" / "libpugixml.a"), "-o", str(exe)],
                   check=True, capture_output=True)  # fmt: skip
    return exe


def compare(probe: Path, path: Path) -> dict[str, float]:
    """Largest distance (m) between avsim's and libOpenDRIVE's lane centres, per road."""
    net = RoadNetwork.from_file(path)
    queries, ours, roads = [], [], []
    for key in net.lane_keys():
        ev = net.road(key.road)
        sec = ev.road.sections[key.section]
        if sec.lane(key.lane).type != "driving":  # type: ignore[union-attr]
            continue
        s = section_grid(ev, key.section)
        s = s[:-1] if len(s) > 2 else s  # libOpenDRIVE's section ends just before the next one starts
        inner, outer = ev.lane_t(key.section, key.lane, s)
        ours.append(ev.points(s, (inner + outer) / 2))
        queries += [f"{key.road} {sec.s!r} {key.lane} {x!r}" for x in s]
        roads += [key.road] * len(s)
    out = subprocess.run([str(probe), str(path)], input="\n".join(queries) + "\n", capture_output=True, text=True, check=True).stdout
    theirs = np.array([[float(v) for v in line.split()] for line in out.splitlines()])
    d = np.linalg.norm(theirs - np.concatenate(ours), axis=1)
    worst: dict[str, float] = {}
    for road, dist in zip(roads, d):
        worst[road] = max(worst.get(road, 0.0), float(dist))
    return worst


def _check(probe: Path, path: Path) -> None:
    net = RoadNetwork.from_file(path)
    for road, dist in compare(probe, path).items():
        kinds = {g.kind for g in net.roads[road].geometries}
        bound = 0.02 if kinds & {GeometryKind.PARAM_POLY3, GeometryKind.POLY3} else 1e-6
        if GeometryKind.POLY3 in kinds:
            continue  # libOpenDRIVE skips poly3 geometries ("Could not parse poly3")
        assert dist <= bound, (path.name, road, dist)


def test_scenariogeneration_maps_equal_libopendrive(probe: Path, tmp_path: Path) -> None:
    maps = pytest.importorskip("opendrive_maps", reason="scenariogeneration 0.16.7 (dev extra) writes the test maps")
    for make in (maps.geometry_map, maps.sections_map, maps.junction_map):
        _check(probe, make(tmp_path / f"{make.__name__}.xodr"))


def test_more_maps_equal_libopendrive(probe: Path) -> None:
    folder = os.environ.get("AVSIM_OPENDRIVE_MAPS")
    if not folder or not sorted(Path(folder).glob("*.xodr")):
        pytest.skip("AVSIM_OPENDRIVE_MAPS names no folder of .xodr files")
    for path in sorted(Path(folder).glob("*.xodr")):
        _check(probe, path)
