"""Run the pinned type checker (mypy, configured in pyproject.toml) on the installed layout.

`python -m avsim.devtools.typecheck [PACKAGE ...]` mirrors the installed package tree with
symbolic links (the source folders maps/, render/, ... install as `avsim.*`, which mypy cannot
map by itself), runs mypy on the packages named (default: CHECKED) and prints its findings with
the real source paths. The exit status is mypy's: 0 when there is no error. The mirror and
mypy's cache live in build/typecheck/ (AVSIM_TYPECHECK_DIR overrides it, so that concurrent
runs do not share one).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from avsim.devtools.layout import REPO_ROOT, installed_tree, source_path

# the packages held to zero errors (docs/core_api.md, "Static checks")
CHECKED = (
    "avsim.core", "avsim.maps", "avsim.scenario", "avsim.render", "avsim.models",
    "avsim.evaluation", "avsim.edit", "avsim.train", "avsim.cli", "avsim.devtools", "avsim.view",
    "avsim.jobs",
)
_LOCATION = re.compile(r"^(?P<path>[^:\s]+\.py)(?P<rest>:.*)$")


def run_mypy(packages: tuple[str, ...] = CHECKED, root: Path = REPO_ROOT) -> tuple[int, list[str]]:
    """Type-check `packages` and return mypy's exit status and its lines with real paths.

    Args:
        packages: dotted package names to check.
        root: repository root (holds pyproject.toml and the source folders).

    Returns:
        (exit status, output lines).
    """
    dest = Path(os.environ.get("AVSIM_TYPECHECK_DIR", root / "build" / "typecheck"))
    installed_tree(dest / "tree", root)
    args = [sys.executable, "-m", "mypy", "--config-file", str(root / "pyproject.toml"),
            "--cache-dir", str(dest / "cache")]
    for package in packages:
        args += ["-p", package]
    result = subprocess.run(args, cwd=dest / "tree", capture_output=True, text=True, check=False)
    lines = []
    for line in (result.stdout + result.stderr).splitlines():
        match = _LOCATION.match(line)
        lines.append(source_path(str(dest / "tree" / match["path"]), dest / "tree", root) + match["rest"] if match else line)
    return result.returncode, lines


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: print mypy's findings; exit with its status."""
    args = sys.argv[1:] if argv is None else argv
    status, lines = run_mypy(tuple(args) or CHECKED)
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
