"""`avsim render EDIT_OUTPUT`: every variant of an `avsim edit` output folder, rendered with the same options.

`avsim edit` writes one scenario folder per variant beside `manifest.json` (format
`avsim-edit-manifest`, `avsim.edit.output`); `run_render_variants` renders each variant with
`avsim.render.run.runner.run_render` to `OUT/<scenario_id>/...` (each resumable on its own) and
writes `OUT/render_summary.json` listing them all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.names import check_name
from avsim.core.safe_files import contained_path, regular_file
from avsim.core.safe_json import read_json
from avsim.edit.output import MANIFEST_FORMAT, MANIFEST_NAME
from avsim.render.run.plan import RenderOptions, safe_name
from avsim.render.run.runner import Progress, RenderSummary, run_render
from avsim.scenario import Scenario
from avsim.scenario.io import load_scenario

VARIANTS_SUMMARY_FORMAT = "avsim-render-variants-summary"
MAX_MANIFEST_BYTES = 64 * 1024**2  # an edit manifest lists variants and their parameters: a few kB per variant


@dataclass(frozen=True)
class VariantFolder:
    """One variant listed in an `avsim edit` manifest: its name and scenario folder."""

    name: str
    folder: Path


def is_variants_folder(path: Path) -> bool:
    """Whether `path` holds an `avsim edit` manifest.

    Args:
        path: a folder given as SCENARIO.

    Returns:
        True when `path/manifest.json` is readable JSON of format avsim-edit-manifest.
    """
    manifest = Path(path) / MANIFEST_NAME
    if not manifest.is_file():
        return False
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("format") == MANIFEST_FORMAT


def read_variants(path: Path) -> list[VariantFolder]:
    """The variants of an `avsim edit` output folder, in manifest order.

    Each `folder` must be a plain name inside `path` that exists (no separators, no `..`, no link
    leading out of `path`), and no two variants may share one; anything else is an AvsimInputError naming the field.

    Args:
        path: the `avsim edit` output folder (holds manifest.json).

    Returns:
        One VariantFolder per manifest entry, in order.
    """
    manifest = Path(path) / MANIFEST_NAME
    doc = read_json(regular_file(manifest, "manifest"), "manifest", MAX_MANIFEST_BYTES)
    entries = doc.get("variants") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise AvsimInputError(manifest, "variants", "expected a non-empty list of variants")
    variants: list[VariantFolder] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        folder = entry.get("folder") if isinstance(entry, dict) else None
        field_name = f"variants[{i}].folder"
        folder = check_name(folder, manifest, field_name)  # a plain name (no separators, not `..`): inside `path`
        if folder in seen:
            raise AvsimInputError(manifest, field_name, f"folder {folder!r} is listed twice")
        if not contained_path(path, folder, manifest, field_name).is_dir():  # a link out of `path` is refused
            raise AvsimInputError(manifest, field_name, f"no such variant folder {folder!r}")
        seen.add(folder)
        name = check_name(entry.get("name", folder), manifest, f"variants[{i}].name")
        variants.append(VariantFolder(name, Path(path) / folder))
    return variants


def variants_summary_document(variants: list[VariantFolder], summaries: list[RenderSummary]) -> dict[str, Any]:
    """`OUT/render_summary.json` for a rendered set of edit variants (no paths of the inputs).

    Args:
        variants: the variants, in manifest order.
        summaries: one summary per variant, in the same order.

    Returns:
        The JSON-ready document (format avsim-render-variants-summary) with per-variant rows and totals.
    """
    return {
        "format": VARIANTS_SUMMARY_FORMAT,
        "variants": [{"name": v.name, **s.to_json()} for v, s in zip(variants, summaries)],
        "camera_frames_rendered": sum(s.camera_frames_rendered for s in summaries),
        "camera_frames_skipped": sum(s.camera_frames_skipped for s in summaries),
        "seconds": round(sum(s.seconds for s in summaries), 3),
    }


def run_render_variants(
    path: Path,
    opts: RenderOptions,
    progress: Progress | None = None,
    on_variant: Callable[[int, VariantFolder, Scenario], None] | None = None,
) -> list[RenderSummary]:
    """Render every variant of an `avsim edit` output folder with the same `opts`.

    Variants go to `opts.out/<scenario_id>/...` (ids differ per variant); each is resumable on
    its own, and `opts.out/render_summary.json` lists them all.

    Args:
        path: the `avsim edit` output folder.
        opts: render options shared by every variant.
        progress: called with stream-frame counts as they finish (see `run_render`).
        on_variant: `on_variant(i, variant, scenario)` is called before variant i renders (progress bars).

    Returns:
        One summary per variant, in manifest order.
    """
    variants = read_variants(path)
    summaries: list[RenderSummary] = []
    clip_owner: dict[str, str] = {}
    for i, variant in enumerate(variants):
        scenario = load_scenario(variant.folder)
        clip_id = safe_name(scenario.scenario_id)
        if clip_id in clip_owner:
            raise AvsimInputError(
                variant.folder, "scenario_id", f"{scenario.scenario_id!r} is also the id of variant {clip_owner[clip_id]!r}"
            )
        clip_owner[clip_id] = variant.name
        if on_variant is not None:
            on_variant(i, variant, scenario)
        summaries.append(run_render(scenario, opts, progress=progress, source=variant.folder))
        del scenario
    doc = variants_summary_document(variants, summaries)
    with atomic_output_path(opts.out / "render_summary.json") as tmp:
        Path(tmp).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return summaries
