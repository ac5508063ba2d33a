"""Report source files over 600 lines and functions over 60 lines.

Run ``python -m avsim.devtools.sizes [ROOT]``: prints one line per offender and exits 1 when
there is any, 0 otherwise. ROOT defaults to the repository holding this package. Lines are
counted as in an editor (a function spans from its ``def`` or first decorator to its last
line); tests are included, virtual environments and caches are not.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 60
SKIPPED_PARTS = frozenset({".venv", "venv", ".git", "__pycache__", "build", "dist", ".eggs"})


@dataclass(frozen=True)
class Oversize:
    """One file or function over its limit."""

    path: Path
    name: str  # "" for a whole file, else the dotted function name
    lines: int
    limit: int

    def __str__(self) -> str:
        what = self.name or "file"
        return f"{self.path}: {what} has {self.lines} lines (limit {self.limit})"


def python_files(root: Path) -> list[Path]:
    """Every ``*.py`` below `root`, skipping virtual environments, caches and build outputs.

    Args:
        root: folder to scan.

    Returns:
        Sorted paths.
    """
    return sorted(p for p in root.rglob("*.py") if not SKIPPED_PARTS.intersection(p.relative_to(root).parts))


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def oversized(path: Path, root: Path) -> list[Oversize]:
    """Oversized pieces of one file.

    Args:
        path: a Python source file.
        root: reported paths are relative to it.

    Returns:
        The file itself if it is over MAX_FILE_LINES, then every function over MAX_FUNCTION_LINES.
    """
    source = path.read_text(encoding="utf-8")
    rel = path.relative_to(root)
    found = []
    n_lines = len(source.splitlines())
    if n_lines > MAX_FILE_LINES:
        found.append(Oversize(rel, "", n_lines, MAX_FILE_LINES))
    for name, node in _functions(ast.parse(source, filename=str(path))):
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        length = (node.end_lineno or node.lineno) - first + 1
        if length > MAX_FUNCTION_LINES:
            found.append(Oversize(rel, name, length, MAX_FUNCTION_LINES))
    return found


def scan(root: Path) -> list[Oversize]:
    """All oversized files and functions below `root`.

    Args:
        root: folder to scan.

    Returns:
        Files first within each file's entry, in path order.
    """
    return [item for path in python_files(root) for item in oversized(path, root)]


def main(argv: list[str] | None = None) -> int:
    """Print every oversized file and function; exit status 1 if there is any."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parents[3]
    found = scan(root)
    for item in found:
        print(item)
    print(f"{sum(not i.name for i in found)} files over {MAX_FILE_LINES} lines, "
          f"{sum(bool(i.name) for i in found)} functions over {MAX_FUNCTION_LINES} lines")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
