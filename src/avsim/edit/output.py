"""What `avsim edit` writes: one scenario folder per variant and a deterministic manifest.

`check_edit_output` refuses to replace anything but an empty folder or an earlier `avsim edit`
output; `write_edit_output` writes every variant and `manifest.json` atomically (a failing run
leaves nothing, or the previous output, behind).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from avsim.core.atomic import atomic_output_path, output_errors
from avsim.core.errors import AvsimInputError
from avsim.core.names import join_names
from avsim.scenario import Scenario

from .editfile import EditFile, VariantResult

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "avsim-edit-manifest"


def check_edit_output(out: Path) -> None:
    """Refuse to replace anything but an empty folder or an earlier `avsim edit` output."""
    if not out.exists():
        return
    if not out.is_dir():
        raise AvsimInputError(out, "output", "exists and is not a folder; refusing to replace it")
    if not any(out.iterdir()):
        return
    try:
        doc = json.loads((out / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict) and doc.get("format") == MANIFEST_FORMAT:  # valid JSON need not be an object
        return
    raise AvsimInputError(out, "output", "exists, is not empty and is not an avsim edit output; refusing to replace it")


def manifest_document(source: Scenario, edit: EditFile, results: Sequence[VariantResult]) -> dict[str, Any]:
    """The manifest written beside the variant folders (deterministic: no paths, no clock)."""
    return variants_manifest(source.scenario_id, edit.path.name, edit.sha256, results)


def variants_manifest(source_id: str, file_name: str, file_sha256: str, results: Sequence[VariantResult]) -> dict[str, Any]:
    """The manifest of variants of `source_id` made by the file `file_name` (an edit file, or an
    OpenSCENARIO parameter distribution)."""
    return {
        "format": MANIFEST_FORMAT,
        "version": 1,
        "source_scenario_id": source_id,
        "edit_file": file_name,
        "edit_file_sha256": file_sha256,
        "variants": [
            {
                "name": r.name,
                "folder": r.name,
                "scenario_id": r.scenario.scenario_id,
                "params": r.params,
                "findings": [{"op_index": i, **f.to_dict()} for i, f in r.new_findings],
            }
            for r in results
        ],
    }


def write_edit_output(
    out: str | os.PathLike[str], source: Scenario, edit: EditFile, results: Sequence[VariantResult]
) -> None:
    """Write `OUT/<variant>/` for every result and `OUT/manifest.json`, as one atomic folder."""
    write_variants_output(out, manifest_document(source, edit, results), results, allow_empty=source.map.is_empty())


def write_variants_output(out: str | os.PathLike[str], manifest: dict[str, Any], results: Sequence[VariantResult],
                          allow_empty: bool = False) -> None:  # fmt: skip
    """Write `OUT/<variant>/` for every result and `OUT/manifest.json` (`manifest`), as one atomic folder."""
    from avsim.scenario.io import save_scenario

    with output_errors(out), atomic_output_path(out, is_dir=True) as tmp:  # a full disk: `OUT: disk full`, nothing kept
        for r in results:
            save_scenario(r.scenario, join_names(tmp, r.name), allow_empty_map=allow_empty)
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def scenario_folders(paths: list[Path]) -> list[Path]:
    """The scenario folders among `avsim validate` arguments: an edit output's manifest is skipped.

    Args:
        paths: the command-line paths (e.g. the expansion of `OUT/*`).

    Returns:
        The paths in order, without files named like the edit output manifest.

    Raises:
        AvsimInputError: when nothing but manifests is left.
    """
    folders = [p for p in paths if not (p.name == MANIFEST_NAME and p.is_file())]
    if not folders:
        raise AvsimInputError(paths[0] if paths else Path("."), "scenario", "no scenario folder given (only edit manifests)")
    return folders
