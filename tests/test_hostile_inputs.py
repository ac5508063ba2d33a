"""Every case of the hostile-input suite (tests/hostile_cases.py): exit code, one line, no
traceback, no planted code run, no output left; and docs/hostile_inputs.md equals the table."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_cases import CASES, Case, World, render_table
from stderr_lines import error_line

from avsim.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A sample scenario and a 20-frame, 320x180 cosmos-rig render of it with compact labels, made once."""
    root = tmp_path_factory.mktemp("hostile")
    assert main(["sample", str(root / "s")]) == 0
    assert main(["render", str(root / "s"), str(root / "r"), "--frames", "20", "--size", "320x180", "--rig", "cosmos", "--labels"]) == 0
    video = next((root / "r").rglob("*camera_front_wide_120fov.mp4"))
    return root / "s", root / "r", video


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_case(case: Case, prepared: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario, render, video = prepared
    world = World(tmp_path / "case", scenario, video, render, tmp_path / "CANARY")
    world.root.mkdir()
    argv = case.build(world)
    before = {p for p in world.root.rglob("*")}
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == case.code, f"exit {code}: {err.strip()[-400:]}"
    if code == 1:
        line = error_line(err)  # the one error line, last; progress lines a slow step printed before it do not count
        assert case.expect in line, line
    else:
        assert case.expect in " ".join(err.split()), err
    assert not world.canary.exists(), "planted code ran"
    left = {p for p in world.root.rglob("*")} - before
    assert not left, f"left behind: {sorted(str(p.relative_to(world.root)) for p in left)[:5]}"


def test_docs_table_is_the_case_list() -> None:
    assert len(CASES) >= 80
    assert (REPO / "docs" / "hostile_inputs.md").read_text() == render_table()
