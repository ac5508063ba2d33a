"""Importer registry: `convert(src, fmt, rig_name)` and format auto-detection.

``FORMATS`` maps each format name to its loader and a one-line description; `detect_format`
recognises a source by its layout (suffix, magic bytes, marker files) so ``--from`` can be
omitted. Every importer returns an `avsim.scenario.Scenario` or raises
`avsim.core.errors.AvsimInputError(path, field, reason)`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.common import split_selector

if TYPE_CHECKING:
    from avsim.scenario.bare_map import MapOptions
    from avsim.scenario.importers.openscenario import OpenScenarioOptions
    from avsim.scenario.types import Scenario


@dataclass(frozen=True)
class ImporterInfo:
    load: Callable[..., Scenario]
    source: str  # what SRC is
    default_rig: str  # where the camera rig comes from


def _load_scenarionet(src: Path, rig_name: str | None) -> Scenario:
    from avsim.scenario.importers.scenarionet import load_scenarionet

    return load_scenarionet(src, rig_name)


def _load_nuscenes(src: Path, rig_name: str | None) -> Scenario:
    from avsim.scenario.importers.nuscenes import load_nuscenes

    return load_nuscenes(src, rig_name)


def _load_av2(src: Path, rig_name: str | None) -> Scenario:
    from avsim.scenario.importers.av2 import load_av2

    return load_av2(src, rig_name)


def _load_waymo(src: str, rig_name: str | None) -> Scenario:
    from avsim.scenario.importers.waymo import load_waymo

    path, selector = split_selector(src)
    if selector is not None and not selector.isdigit():
        raise AvsimInputError(path, "record", f"select a record by its index (FILE::0), got {selector!r}")
    return load_waymo(path, rig_name, index=int(selector or 0))


def _load_mmdet3d(src: str, rig_name: str | None) -> Scenario:
    from avsim.scenario.importers.mmdet3d_source import load_mmdet3d

    return load_mmdet3d(src, rig_name)


def _load_waymo_frame(src: Path, rig_name: str | None) -> Scenario:
    from avsim.scenario.importers.waymo_frame import load_waymo_frames

    return load_waymo_frames(src, rig_name)


def _load_clipgt(src: str, rig_name: str | None) -> Scenario:
    from avsim.scenario.importers.clipgt import load_clipgt

    return load_clipgt(src, rig_name)


def _load_rdshq(src: Path, rig_name: str | None) -> Scenario:
    from avsim.scenario.importers.rdshq import load_rdshq

    return load_rdshq(src, rig_name)


def _load_opendrive(src: Path, rig_name: str | None, options: MapOptions | None = None) -> Scenario:
    from avsim.scenario.bare_map import MapOptions
    from avsim.scenario.importers.opendrive import load_opendrive

    options = options or MapOptions()
    return load_opendrive(src, rig_name, options.route, options.ego_trajectory())


def _load_lanelet2(src: Path, rig_name: str | None, options: MapOptions | None = None) -> Scenario:
    from avsim.scenario.bare_map import MapOptions
    from avsim.scenario.importers.lanelet2 import load_lanelet2

    options = options or MapOptions()
    return load_lanelet2(src, rig_name, options.route, options.ego_trajectory(), options.origin)


def _load_openscenario(src: Path, rig_name: str | None, options: OpenScenarioOptions | None = None) -> Scenario:
    from avsim.scenario.importers.openscenario import load_openscenario

    return load_openscenario(src, rig_name, options)


MAP_FORMATS = ("opendrive", "lanelet2")
"""Formats that hold a map only: the ego (a route or a trajectory file) and traffic come from `MapOptions`."""

FORMATS: dict[str, ImporterInfo] = {
    "scenarionet": ImporterInfo(
        _load_scenarionet, "a ScenarioNet scenario pickle (.pkl)",
        "named default: nuscenes for nuScenes-derived files, waymo for Waymo (--rig to override)",
    ),
    "nuscenes": ImporterInfo(
        _load_nuscenes,
        "a nuScenes dataroot (v1.0-*/ tables + maps/expansion/*.json v1.3); one scene: DATAROOT or DATAROOT::scene-name",
        "the 6 calibrated cameras of the scene",
    ),
    "av2": ImporterInfo(
        _load_av2, "an Argoverse 2 sensor-log folder, or a motion-forecasting scenario folder",
        "the 7 ring cameras from calibration/ (forecasting: named default av2)",
    ),
    "waymo": ImporterInfo(
        _load_waymo, "a Waymo Open Motion Scenario TFRecord file; FILE::k picks the k-th record (default 0)",
        "named default: waymo",
    ),
    "waymo-frame": ImporterInfo(
        _load_waymo_frame, "a Waymo Open perception Frame TFRecord (one segment: poses, calibrated cameras, laser labels)",
        "the calibrated cameras of context.camera_calibrations",
    ),
    "rdshq": ImporterInfo(
        _load_rdshq, "an RDS-HQ clip root (folders of <clip_id>.tar webdataset samples); one clip: ROOT or ROOT::clip_id",
        "the 7 f-theta cameras (intrinsics + per-camera poses)",
    ),
    "clipgt": ImporterInfo(
        _load_clipgt,
        "an NVIDIA world-scenario parquet clip folder (<clip_id>.<table>.parquet, cosmos-transfer2.5); one clip: FOLDER or FOLDER::clip_id",
        "the rig JSON's camera:* sensors (f-theta; pinhole via Model: pinhole)",
    ),
    "mmdet3d": ImporterInfo(
        _load_mmdet3d,
        "an mmdetection3d nuScenes info .pkl (FILE::LOG picks a log), a mono3d .coco.json (FILE::TOKEN picks a sample), or a folder holding one",
        "the info's cameras (cam2img, cam2ego)",
    ),
    "opendrive": ImporterInfo(
        _load_opendrive, "an ASAM OpenDRIVE road network (.xodr, 1.4-1.8): a map; the ego drives a lane route (--start/--goal) or a trajectory file",
        "named default: cosmos",
    ),
    "lanelet2": ImporterInfo(
        _load_lanelet2, "a Lanelet2 map (.osm, projected with --origin or the map's map_projector_info.yaml): a map; the ego drives a lane route or a trajectory file",
        "named default: cosmos",
    ),
    "openscenario": ImporterInfo(
        _load_openscenario, "an ASAM OpenSCENARIO 1.0-1.3 scenario (.xosc) with its OpenDRIVE road network: the storyboard runs, the ego is an entity "
        "(--ego); a ParameterValueDistribution .xosc converts to a folder of variants",
        "named default: cosmos",
    ),
}  # fmt: skip


def _is_mmdet3d_file(path: Path) -> bool:
    from avsim.scenario.importers.mmdet3d import looks_like_info

    return path.name.endswith(".coco.json") or (path.suffix == ".pkl" and looks_like_info(path))


def _is_waymo_frame_file(path: Path) -> bool:
    from avsim.scenario.importers.waymo_records import first_record_is_frame

    try:
        return first_record_is_frame(path)
    except AvsimInputError:  # the Waymo protobuf classes are not installed
        return False


def detect_format(src: str | os.PathLike[str]) -> str:
    """Guess the format of `src` from its layout; raise `AvsimInputError` when unrecognised."""
    path, _ = split_selector(src)
    if not path.exists():
        raise AvsimInputError(path, "source", "not found")
    if path.is_file():
        if path.suffix.lower() == ".xodr":
            return "opendrive"
        if path.suffix.lower() == ".osm":
            return "lanelet2"
        if path.suffix.lower() == ".xosc":
            return "openscenario"
        if _is_mmdet3d_file(path):
            return "mmdet3d"
        if path.suffix == ".pkl":
            return "scenarionet"
        if ".tfrecord" in path.name or path.suffix in (".tfrecord", ".tfrec"):
            return "waymo-frame" if _is_waymo_frame_file(path) else "waymo"
        with path.open("rb") as fh:
            head = fh.read(12)
        if len(head) == 12:
            from avsim.scenario.importers.waymo_records import masked_crc32c

            if masked_crc32c(head[:8]) == int.from_bytes(head[8:12], "little"):
                return "waymo-frame" if _is_waymo_frame_file(path) else "waymo"
        raise AvsimInputError(path, "source", "unrecognised file (expected a ScenarioNet .pkl, a Waymo TFRecord, an OpenDRIVE .xodr, a Lanelet2 .osm or an OpenSCENARIO .xosc)")
    if any(path.glob("*.calibration_estimate.parquet")):
        return "clipgt"
    if (path / "city_SE3_egovehicle.feather").exists() or any(path.glob("scenario_*.parquet")):
        return "av2"
    if (path / "maps").is_dir() and any(p.is_dir() and p.name.startswith("v1.0") for p in path.iterdir()):
        return "nuscenes"
    if (path / "vehicle_pose").is_dir() or (path / "3d_lanelines").is_dir() or (path / "pose").is_dir():
        return "rdshq"
    if any(_is_mmdet3d_file(p) for p in path.iterdir() if p.is_file()):
        return "mmdet3d"
    raise AvsimInputError(path, "source", f"cannot detect the format; pass one of: {', '.join(FORMATS)}")


def convert(src_path: str | os.PathLike[str], fmt: str | None = None, rig_name: str | None = None,
            map_options: MapOptions | None = None, scenario_options: OpenScenarioOptions | None = None) -> Scenario:  # fmt: skip
    """Import `src_path` (format `fmt`, or auto-detected when None) as an `avsim.scenario.Scenario`.

    `rig_name` (``cosmos``, ``nuscenes``, ``av2``, ``waymo``) replaces the source's rig with a
    named default rig; formats without calibration always use one (ScenarioNet, Waymo). `map_options`
    (the ego's route or trajectory file, traffic, seed; Lanelet2's origin) apply to the map-only
    formats (`MAP_FORMATS`) and are an error for the others; `scenario_options` (ego, parameters,
    rate, duration, root, road network) to OpenSCENARIO files only.
    """
    fmt = detect_format(src_path) if fmt is None else fmt.lower()
    if fmt not in FORMATS:
        raise AvsimInputError(src_path, "format", f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if rig_name is not None:
        from avsim.core.rig import NAMED_RIGS

        if rig_name not in NAMED_RIGS:
            raise AvsimInputError(src_path, "rig", f"unknown rig {rig_name!r}; choose one of {', '.join(NAMED_RIGS)}")
    loader = FORMATS[fmt].load
    if map_options is not None and fmt not in MAP_FORMATS:
        raise AvsimInputError(src_path, "format", f"route, trajectory, traffic and origin options apply to {' and '.join(MAP_FORMATS)} maps, not to {fmt}")
    if scenario_options is not None and fmt != "openscenario":
        raise AvsimInputError(src_path, "format", f"ego, parameter, rate, root and map options apply to OpenSCENARIO files, not to {fmt}")
    if fmt == "openscenario":
        path, _ = split_selector(src_path)
        if not path.exists():
            raise AvsimInputError(path, "source", "not found")
        return loader(path, rig_name, scenario_options)
    if fmt in MAP_FORMATS:
        path, _ = split_selector(src_path)
        if not path.exists():
            raise AvsimInputError(path, "source", "not found")
        return loader(path, rig_name, map_options)
    if fmt in ("nuscenes", "rdshq", "waymo", "mmdet3d", "clipgt"):
        return loader(os.fspath(src_path), rig_name)  # keeps a ::selector
    path, _ = split_selector(src_path)
    if not path.exists():
        raise AvsimInputError(path, "source", "not found")
    return loader(path, rig_name)
