"""Several `avsim export nuscenes` dataroots joined into one (`avsim run export nuscenes`: one part per item).

Every token is a digest of content, so the parts' tables join without renaming: the records of a
log, a sensor or a calibration that several parts share are the same record (checked), the others
are added. Logs are located again over the whole dataset (`nuscenes_export.assign_locations`: the
first four scenarios get nuScenes' four locations and their map expansions), and each part's files
(images, sweeps, masks, map expansions) are hard-linked into the joined dataroot (copied where the file system has
no hard links). The joined parts stay where they are, so a rerun joins them again.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.render.labels.nuscenes_export import LOCATIONS, MANIFEST, README, assign_locations
from avsim.scenario.exporters.nuscenes_tables import NuScenesTables

DATA_FOLDERS = ("samples", "sweeps", "maps")


def _place(src: Path, dst: Path) -> None:
    """A hard link to `src` at `dst` (a copy across file systems); a different file already there is an error."""
    import filecmp

    if dst.exists():
        if not filecmp.cmp(src, dst, shallow=False):
            raise AvsimInputError(src, "file", f"two parts hold different files named {dst.name} (two scenes with one name?)")
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _read_part(part: Path, version: str) -> tuple[NuScenesTables, dict[str, Any]]:
    from avsim.core.safe_json import read_json

    manifest = read_json(part / MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("nuscenes_version") != version:
        raise AvsimInputError(part / MANIFEST, "nuscenes_version", f"not an avsim nuScenes export of version {version}")
    return NuScenesTables.read(part / version), manifest


def merge_exports(parts: list[Path], out: Path, version: str) -> dict[str, int]:
    """Join the dataroots `parts` (each an `export_nuscenes` output of `version`) into the dataroot `out`.

    `out` gets `<version>/`, `samples/`, `sweeps/`, `maps/`, `README.md` and `avsim_export.json` (each
    replaced whole); anything else in it is left alone.

    Args:
        parts: the dataroots, in dataset order (the order in which logs take locations).
        out: the joined dataroot.
        version: the table folder's name.

    Returns:
        Records per table.
    """
    from avsim.render.labels.nuscenes_readme import readme_text

    tables = NuScenesTables()
    logs: dict[str, dict[str, Any]] = {}
    scenes: dict[str, dict[str, Any]] = {}
    lidar: dict[str, Any] | None = None
    part_of_log: dict[str, Path] = {}
    for part in parts:
        part_tables, manifest = _read_part(part, version)
        tables.merge(part_tables)
        scenes.update(manifest["scenes"])
        lidar = lidar or manifest["lidar"]
        for token, log in manifest["logs"].items():
            logs.setdefault(token, log)
            part_of_log.setdefault(token, part)
    located = assign_locations({t: g.get("preferred_location") for t, g in logs.items()})
    out.mkdir(parents=True, exist_ok=True)
    for folder in DATA_FOLDERS:
        with atomic_output_path(out / folder, is_dir=True) as tmp:
            tmp.mkdir(parents=True, exist_ok=True)
            for part in parts:
                for src in sorted((part / folder).rglob("*")) if (part / folder).is_dir() else []:
                    rel = src.relative_to(part / folder)
                    if src.is_file() and rel.parts[0] != "expansion":
                        _place(src, tmp / rel)
            if folder == "maps":
                for token, location in located.items():
                    expansion = part_of_log[token] / "maps" / "expansion" / f"{logs[token]['location']}.json"
                    if expansion.is_file():
                        _place(expansion, tmp / "expansion" / f"{location}.json")
    for token, location in located.items():
        tables.set_location(token, location)
        logs[token] = {**logs[token], "location": location, "devkit_location": location in LOCATIONS}
    manifest = {"format": "avsim-nuscenes-export", "format_version": 1, "nuscenes_version": version, "logs": logs, "scenes": scenes,
                "lidar": lidar}  # fmt: skip
    for name, text in ((MANIFEST, json.dumps(manifest, indent=1) + "\n"), (README, readme_text(manifest, tables.counts()))):
        with atomic_output_path(out / name) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")
    with atomic_output_path(out / version, is_dir=True) as tmp:  # the tables last: the dataroot is whole once they appear
        tmp.mkdir(parents=True, exist_ok=True)
        for table, text in tables.documents().items():
            (tmp / f"{table}.json").write_text(text, encoding="utf-8")
    return tables.counts()
