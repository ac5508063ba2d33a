"""The "Reading the tables with other tools" example of docs/format.md runs on real folders."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_io_roundtrip import make_scenario

from avsim.scenario.io import save_scenario

DOC = Path(__file__).resolve().parents[1] / "docs" / "format.md"


def _example() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Reading the tables with other tools") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "no python example in the section"
    return match.group(1)


@pytest.mark.parametrize("vertex_attributes", [False, True], ids=["null-per-vertex", "per-vertex"])
def test_polars_example_explodes_one_row_per_vertex(
    vertex_attributes: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = make_scenario(3, vertex_attributes=vertex_attributes)
    save_scenario(scenario, tmp_path / "scene")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_example(), str(DOC), "exec"), namespace)  # the documented code, verbatim
    vertices = namespace["vertices"]
    lines = scenario.map.lane_lines.lines
    assert vertices.height == len(lines.points_m)
    assert ("vertex_color" in vertices.columns) == vertex_attributes
