"""`avsim run export nuscenes`: a dataset of labelled clips as one nuScenes dataroot, one clip per task.

Each item is one clip folder (a folder holding `labels/`: a render's `<clip>/`, a generated folder;
the items of `avsim run render --labels` and `avsim run generate` outputs are named
`<item>.<clip>`; the item's name is its scene's). Its task writes that clip as a one-scene nuScenes dataroot into
`OUT/scenes/<item>/` (`avsim.render.labels.nuscenes_export.write_export`, the library of `avsim
export nuscenes`). When every item is done or current, the driver joins the parts into the
dataroot `OUT` (`nuscenes_merge.merge_exports`: `OUT/<version>/`, `OUT/samples/`, `OUT/sweeps/`,
`OUT/maps/`, the README and `avsim_export.json`), so `NuScenes(version, dataroot=OUT)` reads the
whole dataset; every token is a digest of content, so the joined tables equal those of one
`avsim export nuscenes` of all the clips. A rerun skips the current items and joins again.

An item's input digest covers its clip folder's files, the options and the `scenario.json` of the
scenarios its labels may come from (`--scenario`, matched by id; those headers hold the digests of
every scenario table). The kind's entry in `avsim.jobs.kinds.KINDS` names these functions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from avsim.core.errors import AvsimInputError
from avsim.jobs.dataset import Item
from avsim.jobs.tasks import ItemTask

NUSCENES_SCENES = "scenes"  # OUT/scenes/<item>/: the items' one-scene dataroots; OUT itself is the joined dataroot
SCENARIO_DIGEST = "scenario_sha256"  # an item option set on the driver: the digest of its candidate scenarios' headers


def export_options(options: Mapping[str, Any]) -> Any:
    """The `ExportOptions` of a job's typed options (version, LiDAR).

    Args:
        options: the job's typed options.

    Returns:
        The export options.
    """
    from avsim.render.geometry.lidar import nuscenes_lidar
    from avsim.render.labels.nuscenes_export import ExportOptions

    elevations = options.get("lidar_elevations")
    try:
        table = tuple(float(v) for v in str(elevations).split(",") if v.strip()) if elevations else None
        lidar = nuscenes_lidar(int(options.get("lidar_beams", 32)), table, float(options.get("lidar_azimuth_deg", 1.0 / 3.0)),
                               float(options.get("lidar_range_m", 70.0)))  # fmt: skip
    except ValueError as exc:
        raise AvsimInputError("options", "--lidar-*", str(exc)) from None
    return ExportOptions(str(options.get("version", "v1.0-trainval")), lidar)


def check_nuscenes_options(options: Mapping[str, Any]) -> None:
    """Refuse a missing scenario or bad export options once, on the driver.

    Args:
        options: the job's typed options.
    """
    if not options.get("scenario"):
        raise AvsimInputError("options", "--scenario", "`avsim run export nuscenes` needs --scenario (the scenarios the labels were made from)")
    if not Path(str(options["scenario"])).exists():
        raise AvsimInputError(str(options["scenario"]), "--scenario", "not found")
    export_options(options)


def scenario_digest(scenario_root: Path, clip_dir: Path) -> str:
    """The digest of the headers of the scenarios an item's labels may come from (its input digest covers them).

    Args:
        scenario_root: `--scenario`.
        clip_dir: the item's clip folder.

    Returns:
        64 hex characters ("" when the clip has no readable label index: the item fails with its reason).
    """
    from avsim.core.errors import AvsimError
    from avsim.render.labels.nuscenes_clip import find_scenario, read_clip

    try:
        candidates = find_scenario(scenario_root, read_clip(clip_dir / "labels"), {})
    except AvsimError:
        return ""
    h = hashlib.sha256()
    for path in sorted(candidates):
        h.update((path / "scenario.json").read_bytes())
    return h.hexdigest()


def nuscenes_item(task: ItemTask, tmp: Path) -> None:
    """One clip folder as a one-scene dataroot in `tmp`, its scene named after the item.

    Args:
        task: the item (`source`: the clip folder).
        tmp: the item's temporary output folder.
    """
    from avsim.render.labels.nuscenes_export import write_export

    write_export([task.source / "labels"], Path(str(task.options["scenario"])), tmp, export_options(task.options), names=[task.name])


def nuscenes_item_options(base: Mapping[str, Any], item: Item, dataset: Path) -> dict[str, Any]:
    """What an item adds to the job's options: its scenarios' digest (its input digest covers them).

    Args:
        base: the command's typed options.
        item: the item (a manifest row may name its own `scenario`).
        dataset: the dataset.

    Returns:
        {SCENARIO_DIGEST: ...}.
    """
    root = Path(str(item.options.get("scenario") or base["scenario"])).resolve()
    return {SCENARIO_DIGEST: scenario_digest(root, item.path)}


def merge_nuscenes(out: Path, tasks: list[ItemTask]) -> dict[str, int]:
    """The items' dataroots joined into `out` (`nuscenes_merge.merge_exports`), in item order.

    Args:
        out: the job's output folder.
        tasks: the items (all done or current).

    Returns:
        Records per table of the joined dataroot.
    """
    from avsim.render.labels.nuscenes_merge import merge_exports

    return merge_exports([t.out_dir for t in tasks], out, str(tasks[0].options.get("version", "v1.0-trainval")))
