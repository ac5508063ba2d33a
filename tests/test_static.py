"""The linter and the type checker, run from the test command so CI fails on a new finding.

Both are pinned in the dev extra and configured in pyproject.toml. ruff checks the whole
repository; mypy checks the packages in `avsim.devtools.typecheck.CHECKED` on the installed
layout, with zero errors allowed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from avsim.devtools.typecheck import CHECKED, run_mypy

pytestmark = pytest.mark.lint

REPO = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is not installed; install the dev extra (README set-up command)")
    result = subprocess.run([ruff, "check", "--no-cache", str(REPO)], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_finds_no_error() -> None:
    status, lines = run_mypy(CHECKED, REPO)
    assert status == 0, "\n".join(lines)
    assert any(line.startswith("Success") for line in lines), lines


@pytest.mark.slow
def test_mypy_reports_real_source_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted error in src/avsim/maps/ is reported at that repository path."""
    root = tmp_path / "repo"
    for folder in ("src/avsim", "src/avsim/maps"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "src/avsim/maps/bad.py").write_text("x: int = 'text'\n")
    (root / "pyproject.toml").write_text("[tool.mypy]\n")
    monkeypatch.setenv("AVSIM_TYPECHECK_DIR", str(tmp_path / "typecheck"))
    status, lines = run_mypy(("avsim.maps",), root)
    assert status == 1
    assert any(line.startswith("src/avsim/maps/bad.py:1:") and "incompatible" in line.lower() for line in lines), lines


@pytest.mark.slow
def test_no_oversized_files_or_functions() -> None:
    from avsim.devtools.sizes import scan

    found = [str(item) for item in scan(REPO)]
    assert found == [], "split these:\n" + "\n".join(found)


def test_sizes_reports_long_functions_and_files(tmp_path: Path) -> None:
    from avsim.devtools.sizes import MAX_FILE_LINES, MAX_FUNCTION_LINES, scan

    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"class A:\n    @staticmethod\n    def f():\n{body}\n")
    (tmp_path / "big.py").write_text("x = 1\n" * (MAX_FILE_LINES + 1))
    (tmp_path / "ok.py").write_text("def g():\n    return 1\n")
    assert [(str(i.path), i.name, i.lines) for i in scan(tmp_path)] == [
        ("big.py", "", MAX_FILE_LINES + 1),
        ("long.py", "A.f", MAX_FUNCTION_LINES + 2),
    ]
