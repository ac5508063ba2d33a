"""A dataset job's items: what DATASET (a folder or a manifest) holds, one item per task.

DATASET is one of
- a folder of scenario folders (render, labels, sim) or of `avsim edit` variants folders (render),
- a folder of source files or folders (convert: one scene each, format detected per item),
- a folder of clips, video files or frame folders (eval),
- a folder of clip folders (detect, nuscenes: `labels/index.json` and the videos), or of folders of them
  (the output of `avsim run render --labels` or `avsim run generate`: items `<item>.<clip>`),
- a folder of render items, the output of `avsim run render` (generate, pair),
- a post-training layout (encode: one item per clip; no manifest),
- a manifest, `.csv` or `.parquet`, with a column `path` (relative paths are taken relative to
  the manifest's folder), an optional column `name` (default: the path's name, without the
  suffix for files) and optional per-item option columns that override the command's options.

Each kind names its folder lister here in its entry of `avsim.jobs.kinds.KINDS` (`scenario_items`,
`clip_items`, ...); a manifest is read the same way for every kind (`manifest_items`). Items are
sorted by name; names must be unique and plain (no `/`, not hidden), because each item writes the
folder `OUT/<name>/` (`checked_items`).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avsim.core.errors import AvsimInputError
from avsim.core.names import check_name
from avsim.core.safe_files import regular_file
from avsim.core.safe_parquet import TableLimits
from avsim.core.typing import StrEnum

MANIFEST_SUFFIXES = (".csv", ".parquet")

MANIFEST_LIMITS = TableLimits(max_rows=1_000_000, max_decoded_bytes=1 << 30, max_file_bytes=1 << 30)  # items of one job


class JobKind(StrEnum):
    """What `avsim run KIND` does per item (docs/jobs.md)."""

    RENDER = "render"
    LABELS = "labels"
    CONVERT = "convert"
    EVAL = "eval"
    GENERATE = "generate"
    PAIR = "pair"
    ENCODE = "encode"
    SIM = "sim"
    DETECT = "detect"
    NUSCENES = "nuscenes"


SCENARIO_MARKERS = ("scenario.json", "manifest.json")  # a scenario folder, an `avsim edit` variants folder


@dataclass(frozen=True)
class Item:
    """One input of a dataset job: its output name, its path and its own option overrides."""

    name: str
    path: Path
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or "\\" in self.name or self.name.startswith(".") or self.name in ("..",):
            raise AvsimInputError(self.path, "name", f"{self.name!r} is not a plain folder name")
        object.__setattr__(self, "options", dict(self.options))


def item_name(path: Path) -> str:
    """The default item name of `path`: a folder's name, a file's name without its suffix.

    Args:
        path: an input file or folder.

    Returns:
        The name.
    """
    return path.stem if path.is_file() else path.name


def scenario_items(dataset: Path, kind: str) -> list[Item]:
    """render, labels: each scenario folder or `avsim edit` variants folder of `dataset`."""
    if any((dataset / m).is_file() for m in SCENARIO_MARKERS):
        raise AvsimInputError(dataset, "DATASET", f"is one scenario, not a folder of them; use `avsim {kind}`")
    return _items([p for p in dataset.iterdir() if p.is_dir() and any((p / m).is_file() for m in SCENARIO_MARKERS)])


def sim_scenario_items(dataset: Path, kind: str) -> list[Item]:
    """sim: each scenario folder (`scenario.json`) of `dataset`."""
    if (dataset / "scenario.json").is_file():
        raise AvsimInputError(dataset, "DATASET", "is one scenario, not a folder of them; use `avsim sim`")
    return _items([p for p in dataset.iterdir() if p.is_dir() and (p / "scenario.json").is_file()])


def clip_items(dataset: Path, kind: str) -> list[Item]:
    """eval fid / fvd: each clip (video file or frame folder) of `dataset`, as `avsim eval fid` lists them."""
    from avsim.evaluation.video_frames import list_clips

    return _items(list_clips(dataset))


def layout_items(dataset: Path, kind: str) -> list[Item]:
    """encode: each clip of the post-training layout `dataset` (the item's path is the layout)."""
    from avsim.train.data import layout_clips

    return [Item(clip, dataset) for clip in layout_clips(dataset)]


def folder_items(dataset: Path, kind: str) -> list[Item]:
    """generate, pair: each folder of `dataset` (a render item), hidden ones aside."""
    return _items([p for p in dataset.iterdir() if p.is_dir() and not p.name.startswith(".")])


def entry_items(dataset: Path, kind: str) -> list[Item]:
    """convert: each file or folder of `dataset` (one scene each), hidden ones aside."""
    return _items([p for p in dataset.iterdir() if not p.name.startswith(".")])


def _items(paths: list[Path]) -> list[Item]:
    return [Item(item_name(p), p) for p in paths]


def clip_folder_items(dataset: Path, kind: str) -> list[Item]:
    """detect, nuscenes: `dataset` itself when it is one clip folder, else each clip folder of `dataset`, and each clip
    folder of a subfolder that holds clip folders (named `<subfolder>.<clip>`): the shapes `avsim eval detect`
    takes (and `avsim export nuscenes`); any other subfolder is an item too, and fails with its reason."""
    from avsim.evaluation.clip_folders import is_clip_folder

    if is_clip_folder(dataset):
        return [Item(item_name(dataset), dataset)]
    items = []
    for sub in sorted(p for p in dataset.iterdir() if p.is_dir() and not p.name.startswith(".")):
        clips = [] if is_clip_folder(sub) else sorted(c for c in sub.iterdir() if c.is_dir() and is_clip_folder(c))
        items += [Item(f"{sub.name}.{c.name}", c) for c in clips] if clips else [Item(sub.name, sub)]
    return items


def _manifest_rows(manifest: Path) -> list[dict[str, Any]]:
    """The rows of a CSV or parquet manifest as dicts (polars when installed, else `csv`)."""
    try:
        import polars as pl
    except ImportError:
        pl = None  # type: ignore[assignment]
    regular_file(manifest, "manifest")  # a FIFO or a device is named, never opened
    if manifest.suffix == ".parquet":
        if pl is None:
            raise AvsimInputError(manifest, "manifest", "reading parquet needs polars (pip install polars), or use CSV")
        from avsim.core.safe_parquet import read_frame

        return read_frame(manifest, MANIFEST_LIMITS).to_dicts()
    if manifest.stat().st_size > MANIFEST_LIMITS.max_file_bytes:
        raise AvsimInputError(manifest, "manifest", f"{manifest.stat().st_size} bytes, more than the {MANIFEST_LIMITS.max_file_bytes} a manifest may have")
    try:
        with manifest.open(newline="", encoding="utf-8") as stream:
            rows = [dict(row) for _, row in zip(range(MANIFEST_LIMITS.max_rows + 1), csv.DictReader(stream))]
        if len(rows) > MANIFEST_LIMITS.max_rows:
            raise AvsimInputError(manifest, "rows", f"more than the {MANIFEST_LIMITS.max_rows} items a manifest may list")
        return rows
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise AvsimInputError(manifest, "manifest", f"cannot read CSV: {exc}") from exc


def manifest_items(manifest: Path, option_types: Mapping[str, type]) -> list[Item]:
    """The items a manifest lists, each with its option columns (relative `Path` options taken
    relative to the manifest's folder).

    Args:
        manifest: a `.csv` or `.parquet` file with a column `path` (see the module docstring).
        option_types: the option columns it may hold, by name, and their types.

    Returns:
        The items, in row order.
    """
    option_names = tuple(option_types)
    rows = _manifest_rows(manifest)
    if rows and "path" not in rows[0]:
        raise AvsimInputError(manifest, "path", "the manifest needs a column `path`")
    items = []
    for i, row in enumerate(rows):
        raw = row.get("path")
        if raw is None or str(raw).strip() == "":
            raise AvsimInputError(manifest, f"row {i + 1}: path", "empty")
        path = Path(str(raw).strip())
        path = path if path.is_absolute() else manifest.parent / path
        if not path.exists():
            raise AvsimInputError(manifest, f"row {i + 1}: path", f"{path} does not exist")
        options = {}
        for key, value in row.items():
            if key in ("path", "name") or value is None or str(value).strip() == "":
                continue
            if key not in option_names:
                raise AvsimInputError(manifest, key, f"unknown option column; expected path, name or one of {', '.join(option_names)}")
            relative = option_types[key] is Path and not Path(str(value).strip()).is_absolute()
            options[key] = str(manifest.parent / str(value).strip()) if relative else value
        given = str(row.get("name") or "").strip()
        name = check_name(given, manifest, f"row {i + 1}: name") if given else item_name(path)  # a name from a file: the name rule
        items.append(Item(name, path, options))
    return items


def checked_items(dataset: Path, items: list[Item], command: str) -> list[Item]:
    """`items` sorted by name, once it is sure there is at least one and no two share a name.

    Args:
        dataset: where the items came from (named in an error).
        items: the items of a folder or a manifest.
        command: the words after `avsim run` (named in an error).

    Returns:
        The items, sorted by name.
    """
    if not items:
        raise AvsimInputError(dataset, "DATASET", f"no items for `avsim run {command}`")
    seen: dict[str, Path] = {}
    for item in items:
        if item.name in seen:
            raise AvsimInputError(dataset, "name", f"two items are named {item.name!r} ({seen[item.name]}, {item.path}); give them names")
        seen[item.name] = item.path
    return sorted(items, key=lambda item: item.name)
