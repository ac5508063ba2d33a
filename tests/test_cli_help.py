"""Every command's --help reads at 80 columns: full option names, no type on flags, no double negatives."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer

from avsim.cli.main import build_app


def _command_paths() -> list[tuple[str, ...]]:
    """Every command of the CLI, as the argv words that reach it."""
    root = typer.main.get_command(build_app(None))
    paths: list[tuple[str, ...]] = []

    def walk(cmd, prefix: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if not subs:
            paths.append(prefix)
            return
        for name, sub in sorted(subs.items()):
            walk(sub, (*prefix, name))

    walk(root, ())
    return paths


PATHS = _command_paths()


def test_every_group_is_walked():
    names = {p[0] for p in PATHS}
    assert {"render", "eval", "train", "edit", "view", "info", "convert"} <= names
    assert ("eval", "report") in PATHS


@pytest.mark.subprocess
@pytest.mark.parametrize("words", [" ".join(p) for p in PATHS])
def test_help_reads_at_80_columns(words):
    code = "import sys; from avsim.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    result = subprocess.run([sys.executable, "-c", code, *words.split(), "--help"], capture_output=True, text=True, env=env, timeout=360)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "…" not in text, text  # nothing truncated
    assert "<bool>" not in text, text  # flags show no type
    assert "--no-no-" not in text, text
    assert max(len(line) for line in text.splitlines()) <= 80, text
