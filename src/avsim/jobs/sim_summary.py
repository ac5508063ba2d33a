"""`avsim run sim`'s summary: one row per (scenario, seed) with its scores, written to
`OUT/sim_summary.csv` and printed as a table with the mean over the episodes that completed."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimError
from avsim.jobs.tasks import ItemResult, ItemTask

if TYPE_CHECKING:
    from rich.console import Console

SUMMARY_CSV = "sim_summary.csv"
SCORE_COLUMNS = ("pdms", "epdms", "epdms_human_filtered", "no_at_fault_collisions", "drivable_area_compliance",
                 "driving_direction_compliance", "traffic_light_compliance", "ego_progress", "time_to_collision_within_bound",
                 "lane_keeping", "history_comfort")  # fmt: skip
PRINTED = ("pdms", "epdms", "no_at_fault_collisions", "drivable_area_compliance", "traffic_light_compliance", "ego_progress")
SHORT = {"pdms": "PDMS", "epdms": "EPDMS", "epdms_human_filtered": "EPDMS(hf)", "no_at_fault_collisions": "NC",
         "drivable_area_compliance": "DAC", "driving_direction_compliance": "DDC", "traffic_light_compliance": "TLC",
         "ego_progress": "EP", "time_to_collision_within_bound": "TTC", "lane_keeping": "LK", "history_comfort": "HC"}  # fmt: skip


def _row(task: ItemTask, result: ItemResult) -> dict[str, Any]:
    from avsim.core.safe_json import read_json
    from avsim.sim.run import METRICS_JSON

    item, _, seed = task.name.rpartition("/seed")
    row: dict[str, Any] = {"scenario": item, "seed": int(seed), "job_status": result.status, "episode_status": "", "steps": None}
    row.update({k: None for k in SCORE_COLUMNS})
    if result.status == "failed":
        row["episode_status"] = result.reason
        return row
    try:
        doc = read_json(task.out_dir / METRICS_JSON, "sim_metrics")
    except AvsimError as exc:
        row["episode_status"] = str(exc)
        return row
    settings, episode = doc.get("settings", {}), doc.get("episode", {})
    row["episode_status"] = settings.get("status", "") if settings.get("status") == "completed" else settings.get("end_reason", "")
    row["steps"] = settings.get("steps_run")
    row.update({k: episode.get(k) for k in SCORE_COLUMNS})
    return row


def write_sim_summary(out: Path, tasks: list[ItemTask], results: list[ItemResult]) -> list[dict[str, Any]]:
    """`OUT/sim_summary.csv`: scenario, seed, job and episode status, steps and every score.

    Args:
        out: the job's output folder.
        tasks: the sim tasks.
        results: their results, in task order.

    Returns:
        The rows.
    """
    rows = [_row(t, r) for t, r in zip(tasks, results)]
    with atomic_output_path(out / SUMMARY_CSV) as tmp, tmp.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]) if rows else ["scenario"])
        writer.writeheader()
        writer.writerows(rows)
    return rows


def print_sim_summary(console: Console, rows: list[dict[str, Any]]) -> None:
    """The headline scores (every score is in the CSV), then their mean over the completed episodes."""
    from rich.table import Table

    table = Table(title="avsim run sim: scores")
    for col in ("scenario", "seed", "status", *(SHORT[k] for k in PRINTED)):
        table.add_column(col, overflow="fold")
    done = [r for r in rows if r["episode_status"] == "completed"]
    for r in rows:
        status = "ok" if r["episode_status"] == "completed" else (r["episode_status"] or r["job_status"])
        table.add_row(r["scenario"], str(r["seed"]), status, *(_fmt(r[k]) for k in PRINTED))
    if done:
        mean = [_fmt(sum(r[k] for r in done if r[k] is not None) / max(sum(r[k] is not None for r in done), 1)) for k in PRINTED]
        table.add_row("mean (completed)", "", f"{len(done)}/{len(rows)}", *mean)
    console.print(table)


def _fmt(value: Any) -> str:
    return "" if value is None else f"{float(value):.3f}"
