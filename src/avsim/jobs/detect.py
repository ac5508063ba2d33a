"""`avsim run eval detect`: a detector over a dataset of clip folders, one clip per task, the
clips' parts merged on the driver into the folder `avsim eval detect` writes.

Each item is one clip folder; its task instantiates the detector (`--detector MODULE:CALLABLE`,
once per clip), runs it over the clip (`avsim.evaluation.detect.detect_clip`) and writes the
clip's part as a one-clip output folder without videos (`write_detect_output(...,
link_videos=False)`): `detections.parquet`, `lanes.parquet`, `gt/`, `detect.json`. The items
live in `OUT/clips/<clip>/` (with `--generated`: `OUT/real/clips/<clip>/` and
`OUT/generated/clips/<clip>/`). When every item is done or current, the driver reads the parts
back in item order (`read_detect_part`) and writes `OUT` (or `OUT/real`, `OUT/generated`) with
`write_detect_output`, so the merged files are the ones `avsim eval detect` writes for the same
clip folders.

Before any task starts the driver gives each clip its evaluated cameras (`with_evaluated_cameras`:
`--cameras`, else with `--generated` the cameras both sides' clip of the same name have, as
`avsim eval detect` does), so a clip's task sees the same cameras in either command.

An item's input digest covers its clip folder's files, the detector's name and the options
(cameras, `--gt-visibility`), not the detector's code or weights: after changing those, run
into a new OUT.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from avsim.core.errors import AvsimInputError
from avsim.jobs.tasks import ItemTask

DETECT_CLIPS = "clips"  # OUT[/side]/clips/<clip>/: the items; OUT[/side]/ itself is the merged folder
SIDES = ("real", "generated")


def check_detect_options(options: Mapping[str, Any]) -> None:
    """Refuse a missing or unimportable detector once, on the driver, before any task starts.

    Args:
        options: the job's typed options (`detector`: MODULE:CALLABLE).
    """
    from avsim.evaluation.detect import GtVisibility, import_detector

    if not options.get("detector"):
        raise AvsimInputError("options", "--detector", "`avsim run eval detect` needs --detector MODULE:CALLABLE")
    import_detector(str(options["detector"]))
    choices = [str(v) for v in GtVisibility]
    if str(options.get("gt_visibility", GtVisibility.VISIBLE)) not in choices:
        raise AvsimInputError("options", "--gt-visibility", f"expected one of {', '.join(choices)}, got {options['gt_visibility']!r}")


def with_evaluated_cameras(tasks: list[ItemTask]) -> list[ItemTask]:
    """Each clip task with its evaluated cameras in `options["cameras"]` (module docstring).

    Args:
        tasks: the detect tasks of one side (`<item>`) or both (`real/<item>`, `generated/<item>`);
            an item that is not a readable clip folder is left as it is (its task fails with the reason).

    Returns:
        The tasks, in order.
    """
    from avsim.core.errors import AvsimError
    from avsim.evaluation.clip_folders import evaluated_cameras, parse_cameras, read_index

    def readable(t: ItemTask) -> bool:
        try:
            read_index(t.source)
        except AvsimError:
            return False
        return True

    ok = [t for t in tasks if readable(t)]
    gen = [t.source for t in ok if t.name.startswith("generated/")]
    real = [t.source for t in ok if not t.name.startswith("generated/")]
    cams = evaluated_cameras(real, gen, parse_cameras(tasks[0].options.get("cameras")) if tasks else None)
    return [replace(t, options={**t.options, "cameras": ",".join(cams[t.source])}) if t.source in cams else t for t in tasks]


def detect_item(task: ItemTask, tmp: Path) -> None:
    """Run the detector over one clip folder and write its part into `tmp`.

    Args:
        task: the item (source: the clip folder; options: `detector`, `cameras`, `gt_visibility`).
        tmp: the item's temporary output folder.
    """
    from avsim.evaluation.clip_folders import parse_cameras
    from avsim.evaluation.detect import GtVisibility, detect_clip, load_detector, write_detect_output
    from avsim.jobs.progress import current_item

    item, frames = current_item(), [0]

    def frame() -> None:
        frames[0] += 1
        item("detect", frames[0], 0, "frames")

    spec = str(task.options["detector"])
    visibility = GtVisibility(str(task.options.get("gt_visibility", GtVisibility.VISIBLE)))
    item("loading the detector")
    part = detect_clip(task.source, load_detector(spec), spec, on_frame=frame, cameras=parse_cameras(task.options.get("cameras")),
                       gt_visibility=visibility)  # fmt: skip
    write_detect_output(tmp, [part], spec, link_videos=False)


def side_folder(out: Path, side: str, generated: bool) -> Path:
    """Where one side's merged files go: `out`, or `out/<side>` when both sides run."""
    return out / side if generated else out


def merge_detect(out: Path, tasks: list[ItemTask], generated: bool) -> dict[str, Any]:
    """Merge the items' parts, in task order, into each side's folder.

    Args:
        out: the job's output folder.
        tasks: the detect tasks (all done or skipped), each in `<side folder>/clips/<clip>`.
        generated: whether both sides ran (`--generated`).

    Returns:
        `{"sides": {side: detect.json}, "report_command": ...}`, as `avsim eval detect` returns it.
    """
    from avsim.evaluation.detect import read_detect_part, report_command, write_detect_output

    spec = str(tasks[0].options["detector"])
    sides = {}
    for side in SIDES if generated else SIDES[:1]:
        folder = side_folder(out, side, generated)
        items = folder.resolve() / DETECT_CLIPS  # (task folders are absolute)
        parts = [read_detect_part(t.out_dir) for t in tasks if t.out_dir.parent == items]
        if not parts:
            raise AvsimInputError(items, side, "no clip of this side to merge")
        sides[side] = write_detect_output(folder, parts, spec)
    return {"sides": sides, "report_command": report_command(out, generated)}
