"""Where each installed package's source lives: the one home of the folder -> package map.

The design card keeps top-level folders (maps/, render/, ...) that install as `avsim.*`
subpackages (pyproject's `package-dir`, checked against this table by tests/test_layering.py).
Tools that need the installed layout on disk (the type checker) build it with `installed_tree`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# package name -> source folder, relative to the repository root
PACKAGE_DIRS: dict[str, str] = {
    "avsim": "avsim",
    "avsim.maps": "maps",
    "avsim.render": "render",
    "avsim.models": "models",
    "avsim.evaluation": "evaluation",
    "avsim.train": "train",
    "avsim.edit": "edit",
    "avsim.view": "view",
    "avsim.jobs": "jobs",
}
REPO_ROOT = Path(__file__).resolve().parents[2]


def installed_tree(dest: Path, root: Path = REPO_ROOT) -> Path:
    """Mirror the installed package layout under `dest` with symbolic links into `root`.

    Args:
        dest: folder to (re)create; `dest/avsim` becomes the package root.
        root: repository root holding the source folders.

    Returns:
        The path of the mirrored `avsim` package.
    """
    package = dest / "avsim"
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    for child in (root / PACKAGE_DIRS["avsim"]).iterdir():
        if child.name != "__pycache__":
            os.symlink(child.resolve(), package / child.name)
    for name, folder in PACKAGE_DIRS.items():
        if name != "avsim":
            os.symlink((root / folder).resolve(), package / name.split(".", 1)[1])
    return package


def source_path(mirrored: str, dest: Path, root: Path = REPO_ROOT) -> str:
    """Map a path inside the mirror back to the source file it links to.

    Args:
        mirrored: a path below `dest/avsim`, as a tool printed it (relative or absolute).
        dest: the folder given to `installed_tree`.
        root: repository root.

    Returns:
        The path relative to `root` (unchanged when it is not inside the mirror).
    """
    path = Path(mirrored)
    try:
        rel = (path if path.is_absolute() else Path.cwd() / path).relative_to(dest / "avsim")
    except ValueError:
        return mirrored
    head = f"avsim.{rel.parts[0]}"
    folder = PACKAGE_DIRS.get(head)
    parts = (folder, *rel.parts[1:]) if folder else ("avsim", *rel.parts)
    return str(Path(*parts))
