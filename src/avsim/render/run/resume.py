"""Resume by content for `avsim render`: which outputs are current, and the merged run summary.

Every output stream (a camera video, the mosaic, an overlay) is a job whose digest
(`avsim.core.digest.input_digest`) covers the scenario's content, the job's own options (camera,
frame range, fps, size, rig, backend, anti-aliasing, preset, paths of its outputs, PNGs, the real frames of an
overlay, ...) and avsim's version. The digests of finished jobs are recorded in
`OUT/<clip>/render_inputs.json`; a rerun keeps a job only when its outputs exist *and* its
recorded digest equals the one it would record now. `render_summary.json` keeps the record of
every run (`runs`, newest last) and, per output, the run that wrote it (`written_by_run`).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avsim.core.atomic import atomic_output_path
from avsim.core.digest import folder_digest, input_digest

if TYPE_CHECKING:
    from avsim.scenario import Scenario

RECORD_NAME = "render_inputs.json"
RECORD_FORMAT = "avsim-render-inputs"
SUMMARY_NAME = "render_summary.json"


def scenario_digest(scenario: Scenario, source: Path | None) -> str:
    """Content digest of the scenario: of its folder's files, or of its serialized form.

    Args:
        scenario: the scenario being rendered.
        source: the folder it was loaded from (None: an in-memory scenario, saved to a temporary
            folder with `avsim.scenario.io.save_scenario`, whose bytes are deterministic).

    Returns:
        64 hex characters (`avsim.core.digest.folder_digest`).
    """
    if source is not None:
        return folder_digest(Path(source), {})
    from avsim.scenario.io import save_scenario

    with tempfile.TemporaryDirectory(prefix="avsim-digest-") as tmp:
        folder = Path(tmp) / "scenario"
        save_scenario(scenario, folder, allow_empty_map=True)
        return folder_digest(folder, {})


def job_digest(scenario_hex: str, options: Mapping[str, Any]) -> str:
    """The digest of one output job: the scenario's digest and the job's options.

    Args:
        scenario_hex: `scenario_digest(...)`.
        options: JSON-ready options that change the job's bytes.

    Returns:
        64 hex characters (`avsim.core.digest.input_digest` with no further files).
    """
    return input_digest([], Path("."), {"scenario": scenario_hex, **options})


def record_path(out: Path, clip_id: str) -> Path:
    """`OUT/<clip>/render_inputs.json`.

    Args:
        out: the render output folder.
        clip_id: the clip id (without chunk suffix).

    Returns:
        The record file.
    """
    return Path(out) / clip_id / RECORD_NAME


def read_record(out: Path, clip_id: str) -> dict[str, str]:
    """The recorded digests of finished outputs (empty when missing or unreadable).

    Args:
        out: the render output folder.
        clip_id: the clip id.

    Returns:
        Output path relative to `out` (posix) -> digest.
    """
    try:
        doc = json.loads(record_path(out, clip_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    outputs = doc.get("outputs") if isinstance(doc, dict) and doc.get("format") == RECORD_FORMAT else None
    return {str(k): str(v) for k, v in outputs.items()} if isinstance(outputs, dict) else {}


def write_record(out: Path, clip_id: str, digests: Mapping[str, str]) -> None:
    """Write the record of finished outputs (atomic).

    Args:
        out: the render output folder.
        clip_id: the clip id.
        digests: output path relative to `out` -> digest.
    """
    doc = {"format": RECORD_FORMAT, "outputs": dict(sorted(digests.items()))}
    path = record_path(out, clip_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(path) as tmp:
        Path(tmp).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def merged_summary(out: Path, clip_id: str, run: dict[str, Any], written: list[str]) -> dict[str, Any]:
    """This run's summary merged with the previous one of the clip.

    Args:
        out: the render output folder.
        clip_id: the clip id.
        run: this run's fields (`RenderSummary.to_json()`).
        written: the outputs this run wrote (paths as in `run["outputs"]`).

    Returns:
        The document: this run's fields at the top level, `runs` (every run's fields, oldest
        first, with `finished_utc`), `written_by_run` (output -> index into `runs`) and
        `totals` (camera/mosaic/overlay frames rendered over all runs).
    """
    try:
        previous = json.loads((Path(out) / clip_id / SUMMARY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        previous = {}
    old_runs = previous.get("runs") if isinstance(previous, dict) else None
    runs: list[Any] = list(old_runs) if isinstance(old_runs, list) else []
    by_run = previous.get("written_by_run") if isinstance(previous, dict) else None
    by_run = dict(by_run) if isinstance(by_run, dict) else {}
    entry = {k: v for k, v in run.items() if k != "outputs"}
    entry["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    runs.append(entry)
    for path in written:
        by_run[path] = len(runs) - 1
    keys = ("camera_frames_rendered", "mosaic_frames_rendered", "overlay_frames_rendered", "seconds")
    totals = {k: round(sum(float(r.get(k, 0) or 0) for r in runs), 3) for k in keys}
    by_run = {p: by_run[p] for p in run.get("outputs", []) if p in by_run}
    return {**run, "runs": runs, "written_by_run": by_run, "totals": totals}


def write_summary(out: Path, clip_id: str, doc: Mapping[str, Any]) -> Path:
    """Write `OUT/<clip>/render_summary.json` (atomic).

    Args:
        out: the render output folder.
        clip_id: the clip id.
        doc: the summary document.

    Returns:
        The summary file.
    """
    path = Path(out) / clip_id / SUMMARY_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(path) as tmp:
        Path(tmp).write_text(json.dumps(dict(doc), indent=2) + "\n", encoding="utf-8")
    return path
