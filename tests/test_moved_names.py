"""Old import paths (avsim.core.moved): the same module object, a one-line pointer, the table in the docs."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from avsim.core.moved import MOVED, new_name, pointer

REPO = Path(__file__).resolve().parents[1]


def _fresh_import(old: str) -> object:
    """Import `old` as if for the first time (drop it and its parent's attribute)."""
    sys.modules.pop(old, None)
    parent, _, last = old.rpartition(".")
    if parent in sys.modules and last in vars(sys.modules[parent]):
        delattr(sys.modules[parent], last)
    return importlib.import_module(old)


@pytest.mark.parametrize(
    ("old", "new"),
    [("avsim.agents", "avsim.core.agents"), ("avsim.io", "avsim.scenario.io"), ("avsim.importers.registry", "avsim.scenario.importers.registry"),
     ("avsim.sample.roads", "avsim.scenario.sample.roads"), ("avsim.render.frame", "avsim.render.geometry.scene"),
     ("avsim.render.moved", "avsim.core.moved")],
)  # fmt: skip
def test_an_old_name_is_the_new_module_with_a_one_line_pointer(old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning) as caught:
        module = _fresh_import(old)
    assert module is importlib.import_module(new)
    assert str(caught[-1].message) == pointer(old, new) and "\n" not in pointer(old, new) and new in pointer(old, new)
    assert caught[-1].filename == __file__  # the warning points at the import, not at importlib
    assert module.__spec__.name == new  # the new module keeps its own spec


def test_every_target_exists_and_no_old_name_is_a_file() -> None:
    src = REPO / "src"
    for old, new in MOVED.items():
        assert importlib.util.find_spec(new) is not None, (old, new)
        path = src.joinpath(*old.split("."))
        assert not path.with_suffix(".py").exists() and not (path / "__init__.py").exists(), f"{old} stands at its old path"


def test_new_name_matches_whole_module_names_only() -> None:
    assert new_name("avsim.importers.waymo") == "avsim.scenario.importers.waymo"
    assert new_name("avsim.io_schema") is None and new_name("avsim.scenario.io") is None and new_name("numpy.io") is None
    assert new_name("avsim.render.run.runner") is None and new_name("avsim.render.runner") == "avsim.render.run.runner"


def test_unknown_names_still_fail() -> None:
    with pytest.raises(ModuleNotFoundError, match="avsim.scenario.importers.no_such_format"):
        importlib.import_module("avsim.importers.no_such_format")
    with pytest.raises(ModuleNotFoundError, match="avsim.no_such_module"):
        importlib.import_module("avsim.no_such_module")


def test_the_docs_table_names_every_moved_root_module() -> None:
    """docs/core_api.md's "Moved names" names every old path of the package root and where it went."""
    text = (REPO / "docs" / "core_api.md").read_text(encoding="utf-8")
    section = text[text.index("## Moved names") : text.index("## Static checks")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    for old, new in MOVED.items():
        if old.count(".") != 1:
            continue  # render's 30 flat modules are one row: "through one table"
        row = next((r for r in rows if re.search(rf"`{re.escape(old)}(\.\*)?`", r.split(" | ")[0])), None)
        assert row is not None, f"{old} is not in docs/core_api.md's Moved names"
        short = new.rpartition(".")[0] + ".<same name>"
        assert new in row or short in row, (old, new, row)
    assert "avsim.core.moved.MOVED" in section


@pytest.mark.subprocess
def test_a_script_sees_the_pointer_without_warning_flags(tmp_path: Path) -> None:
    """Python's default filters show a DeprecationWarning that the running script triggers: the user sees it."""
    script = tmp_path / "old.py"
    script.write_text("from avsim.rig import cosmos_rig\nprint(cosmos_rig.__module__)\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=360, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "avsim.core.rig"
    assert f"{script}:1: DeprecationWarning: {pointer('avsim.rig', 'avsim.core.rig')}" in result.stderr
