"""Where a render's labels sit: `<clip>/labels/`, holding `index.json` (docs/labels.md).

One home for the folder's name and for finding label folders under a render, generate or
dataset output, read by the renderer (`avsim.render.run.labels`), generation
(`avsim.models.labels_pairing`) and evaluation (`avsim.evaluation.detect`).
"""

from __future__ import annotations

from pathlib import Path

LABELS_FOLDER = "labels"
INDEX_JSON = "index.json"


def labels_folder(clip_dir: Path) -> Path:
    """`<clip_dir>/labels`.

    Args:
        clip_dir: a clip's output folder (beside its videos).

    Returns:
        The label folder (it may not exist).
    """
    return Path(clip_dir) / LABELS_FOLDER


def is_label_folder(folder: Path) -> bool:
    """Whether `folder` holds a label index.

    Args:
        folder: a path.

    Returns:
        True when `folder/index.json` is a file.
    """
    return (Path(folder) / INDEX_JSON).is_file()


def find_label_folders(roots: list[Path], depth: int = 2) -> list[Path]:
    """The label folders given, or found up to `depth` folders below the given folders (`<clip>/labels`).

    Args:
        roots: label folders, clip folders, render / generate outputs or dataset outputs.
        depth: how many folder levels below a root a clip folder may sit (0: the root itself).

    Returns:
        Label folders (holding `index.json`), sorted, each once.
    """
    found: set[Path] = set()
    for root in map(Path, roots):
        if is_label_folder(root):
            found.add(root)
            continue
        patterns = ["/".join(["*"] * level + [LABELS_FOLDER, INDEX_JSON]) for level in range(depth + 1)]
        found.update(p.parent for pattern in patterns for p in root.glob(pattern))
    return sorted(found)
