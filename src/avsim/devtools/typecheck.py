"""Run the pinned type checker (mypy, configured in pyproject.toml) on the source tree.

`python -m avsim.devtools.typecheck [PACKAGE ...]` runs mypy from `src/` on the packages named
(default: CHECKED) and prints its findings with paths relative to the repository root. The exit
status is mypy's: 0 when there is no error. mypy's cache lives in build/typecheck/
(AVSIM_TYPECHECK_DIR overrides it, so that concurrent runs do not share one).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
SOURCE_DIR = "src"

# the packages held to zero errors (docs/core_api.md, "Static checks")
CHECKED = (
    "avsim.core", "avsim.maps", "avsim.scenario", "avsim.render", "avsim.models",
    "avsim.evaluation", "avsim.edit", "avsim.train", "avsim.cli", "avsim.devtools", "avsim.view",
    "avsim.jobs", "avsim.sim",
)
_LOCATION = re.compile(r"^(?P<path>[^:\s]+\.py)(?P<rest>:.*)$")


def run_mypy(packages: tuple[str, ...] = CHECKED, root: Path = REPO_ROOT) -> tuple[int, list[str]]:
    """Type-check `packages` and return mypy's exit status and its lines with repository paths.

    Args:
        packages: dotted package names to check.
        root: repository root (holds pyproject.toml and `src/`).

    Returns:
        (exit status, output lines); a finding's path is relative to `root` (`src/avsim/...`).
    """
    dest = Path(os.environ.get("AVSIM_TYPECHECK_DIR", root / "build" / "typecheck"))
    args = [sys.executable, "-m", "mypy", "--config-file", str(root / "pyproject.toml"),
            "--cache-dir", str(dest / "cache")]
    for package in packages:
        args += ["-p", package]
    source = root / SOURCE_DIR
    env = {**os.environ, "MYPYPATH": str(source)}
    result = subprocess.run(args, cwd=source, capture_output=True, text=True, check=False, env=env)
    lines = []
    for line in (result.stdout + result.stderr).splitlines():
        match = _LOCATION.match(line)
        lines.append(f"{SOURCE_DIR}/{match['path']}{match['rest']}" if match else line)
    return result.returncode, lines


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: print mypy's findings; exit with its status."""
    args = sys.argv[1:] if argv is None else argv
    status, lines = run_mypy(tuple(args) or CHECKED)
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
