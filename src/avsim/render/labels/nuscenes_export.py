"""`avsim export nuscenes`: labelled clips as a nuScenes v1.0 dataset that nuscenes-devkit and its users read.

Per clip (a label folder, `nuscenes_clip`) one **scene**; per scenario one **log** (its map, its
export frame); frames from `nuscenes_clip.keyframes` on:

- `sample`: the keyframes (2 Hz), timestamp = the frame time (us, on the scene's time axis below);
- `sample_data`: every camera frame (keyframes under `samples/<CHANNEL>/`, the others under
  `sweeps/<CHANNEL>/`, JPEG, `nuscenes_images`) at its capture time (frame time + the camera's
  capture offset), and one LiDAR sweep per keyframe (`samples/LIDAR_TOP/*.pcd.bin`,
  `render.geometry.lidar`); a sweep frame belongs to the next sample, as in nuScenes;
- `ego_pose`: the scenario's ego pose at each capture; `calibrated_sensor`: each camera's
  extrinsic and the pinhole intrinsic of its images, the LiDAR's mount;
- `instance` per track, `sample_annotation` per track and keyframe (the scenario's boxes at the
  frame time, `labels.boxes.frame_boxes_3d`, as the labels have them), with category and visibility
  by `scenario.exporters.nuscenes_names`, the labels' attribute (`labels.attributes`, from motion)
  and `num_lidar_pts` from the sweep;
- `log`, `map`: the scenario, its map mask (`maps/<log>.png`); the map expansion
  (`maps/expansion/<location>.json`, `scenario.exporters.nuscenes_map`; see Locations).

**Export frame.** nuscenes-devkit draws a map mask with its bottom-left corner at the global origin,
0.1 m per pixel, so each log's world is moved by a whole-metre offset that puts its region (the
ego path's bounding box plus `REGION_MARGIN_M`) in the positive quadrant, starting at the origin.
`avsim_export.json` in the dataroot records each log's offset and the camera -> channel names;
`avsim convert --from nuscenes` reads it and gives back the source frame and camera names.

**Time axis.** nuscenes-devkit sorts scenes by their first timestamp (`list_scenes` fails on two
scenes that start at the same microsecond, as every avsim scenario starting at 0 would), so each
scene's times are moved to start at `TIME_BASE_US` plus a whole number of microseconds below
`TIME_SPAN_US` read from its token (content, not order: parts exported apart join without
clashes); `avsim_export.json` records each scene's offset and `avsim convert` takes it off.

**Locations.** `NuScenesMap` reads only the four nuScenes locations (the names in
`nuscenes.map_expansion.map_api.locations`), one expansion file each; the first four scenarios (by
first scene) take them (a nuScenes-sourced scenario its own location when free); a fifth
scenario's log is located at `avsim-<log token>`, its expansion written under that name, which
`NuScenesMap` reads once the name is added to that list (README and `avsim_export.json` say which).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.names import check_name, join_names, safe_name
from avsim.core.transforms import SE3
from avsim.render.geometry.lidar import (
    LidarModel,
    RoadSurface,
    cast_sweep,
    nuscenes_lidar,
    points_in_boxes,
    road_surface,
)
from avsim.render.labels.attributes import nuscenes_attributes, travelling_tracks
from avsim.render.labels.boxes import frame_boxes_3d
from avsim.render.labels.nuscenes_clip import (
    LabelledClip,
    check_scenario,
    clip_rig,
    find_scenario,
    frame_sources,
    generated_cameras,
    keyframes,
    read_clip,
    visibility_fractions,
)
from avsim.render.labels.nuscenes_images import Rectifier, export_intrinsic, write_frames
from avsim.scenario import Scenario
from avsim.scenario.exporters import nuscenes_map
from avsim.scenario.exporters.nuscenes_names import LIDAR_CHANNEL, nuscenes_category, visibility_token
from avsim.scenario.exporters.nuscenes_tables import NuScenesTables, SampleBoxes, SampleDataRecord, content_token

LOCATIONS: tuple[str, ...] = ("boston-seaport", "singapore-onenorth", "singapore-hollandvillage", "singapore-queenstown")
REGION_MARGIN_M = 150.0
TIME_BASE_US = 1_500_000_000_000_000  # 2017-07-14 UTC: nuScenes-like unix microseconds
TIME_SPAN_US = 100_000_000_000_000  # scenes start within about 3.2 years of it
TIME_BASE_DATE = "2017-07-14"  # every log's date_captured (synthetic: the time axis's base)
EXPORT_FORMAT = "avsim-nuscenes-export"
MANIFEST = "avsim_export.json"
README = "README.md"


@dataclass(frozen=True)
class ExportOptions:
    """What `avsim export nuscenes` writes: the table folder name and the LiDAR."""

    version: str = "v1.0-trainval"
    lidar: LidarModel = field(default_factory=nuscenes_lidar)

    def __post_init__(self) -> None:
        check_name(self.version, "--version", "version")  # a folder name (e.g. v1.0-trainval)


@dataclass
class ExportCounts:
    """What an export wrote, and the CPU seconds its two heavy steps took (`time.process_time`: a busy machine's
    other work does not count)."""

    scenes: int = 0
    samples: int = 0
    camera_frames: int = 0
    lidar_sweeps: int = 0
    annotations: int = 0
    dropped_frames: int = 0
    image_cpu_s: float = 0.0  # process CPU time (OpenCV's threads included) of writing the camera frames
    lidar_cpu_s: float = 0.0  # of casting, counting and writing the sweeps


@dataclass(frozen=True)
class _SceneRef:
    """A scene being written: its token, samples, name and the microseconds added to its times (module docstring)."""

    token: str
    name: str
    shift_us: int
    samples: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, key: str, name: str, first_us: int) -> _SceneRef:
        token = content_token("scene", key)
        return cls(token, name, TIME_BASE_US + int(token[:16], 16) % TIME_SPAN_US - first_us)

    def us(self, t_ns: int | np.integer) -> int:
        """A time of the clip (ns) as the scene's timestamp (us)."""
        return _us(t_ns) + self.shift_us


@dataclass
class _Log:
    """One scenario in the export: moved into its export frame, its map cut to the region."""

    token: str
    scenario: Scenario
    offset_m: tuple[float, float, float]
    canvas_m: tuple[float, float]
    road: RoadSurface
    preferred: str | None
    travelling: frozenset[str]  # `labels.attributes.travelling_tracks`: the tracks that move in the scenario
    location: str = ""


def assign_locations(preferred: dict[str, str | None]) -> dict[str, str]:
    """Each log's location, logs in order: its preferred nuScenes location when free, else the next free one
    of `LOCATIONS`, else `avsim-<log token>` (an expansion `NuScenesMap` does not know by default).

    Args:
        preferred: log token -> its preferred location (a nuScenes-sourced scenario's own) or None.

    Returns:
        log token -> location.
    """
    free = list(LOCATIONS)
    out: dict[str, str] = {}
    for token, want in preferred.items():
        if want in free:
            out[token] = want
            free.remove(want)
    for token in preferred:
        if token not in out:
            out[token] = free.pop(0) if free else f"avsim-{token[:12]}"
    return {t: out[t] for t in preferred}


def camera_channels(rig: Any) -> dict[str, str]:
    """Each camera's nuScenes channel: its own name on a nuScenes rig; else the nuScenes name `avsim labels-mmdet3d
    --camera-names nuscenes` gives it (`mmdet3d_info.nuscenes_camera_map`, by heading), and `CAM_<NAME>` for a camera
    left over (the export keeps every camera).

    Args:
        rig: the clip's rig (its cameras, in rig order).

    Returns:
        camera -> channel, one distinct channel each.
    """
    from avsim.render.labels.mmdet3d_info import NUSCENES_CAMERAS, nuscenes_camera_map

    if all(c in NUSCENES_CAMERAS for c in rig.names):
        return {c: c for c in rig.names}
    mapped = nuscenes_camera_map({c: rig.extrinsic(c).as_matrix() for c in rig.names})
    out, taken = {}, set(mapped.values()) | {LIDAR_CHANNEL}
    for c in rig.names:
        if c in mapped:
            out[c] = mapped[c]
            continue
        base = "CAM_" + re.sub(r"[^A-Z0-9]+", "_", c.upper()).strip("_").removeprefix("CAMERA_")
        name, k = base, 2
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        out[c] = name
        taken.add(name)
    return out


def world_offset(scenario: Scenario) -> tuple[tuple[float, float, float], tuple[float, float]]:
    """The whole-metre shift of a scenario's world into its export frame, and the region's size there.

    Args:
        scenario: the scenario (source frame).

    Returns:
        ((dx, dy, 0) metres, (width, height) metres of the region from the origin).
    """
    xy = np.asarray(scenario.ego.world_SE3_ego.translation, np.float64)[:, :2]
    lo, hi = xy.min(axis=0) - REGION_MARGIN_M, xy.max(axis=0) + REGION_MARGIN_M
    shift = -np.floor(lo)
    size = np.ceil(hi + shift)
    return (float(shift[0]), float(shift[1]), 0.0), (float(size[0]), float(size[1]))


def _file(root: Path, relative: str) -> Path:
    """`root / relative` for a file name built from names (`avsim.core.names.join_names`: it stays inside `root`)."""
    return join_names(root, *relative.split("/"))


class NuScenesExport:
    """A nuScenes dataroot being written into `root` (a temporary folder renamed into place by `export_nuscenes`).

    Args:
        root: the folder to fill.
        options: the export options.
        progress: called with the number of files written (camera frames and sweeps) as they are.
    """

    def __init__(self, root: Path, options: ExportOptions, progress: Callable[[int], None] | None = None) -> None:
        self.root, self.options = root, options
        self.progress = progress or (lambda n: None)
        self.tables = NuScenesTables()
        self.logs: dict[str, _Log] = {}
        self.scenes: dict[str, dict[str, Any]] = {}
        self.counts = ExportCounts()
        self._names: set[str] = set()

    def log_of(self, scenario: Scenario, scenario_path: Path) -> _Log:
        """The log of a scenario (added on first use).

        Args:
            scenario: the scenario, in its own frame.
            scenario_path: its folder (its `scenario.json` is its identity).

        Returns:
            The log.
        """
        import hashlib

        from avsim.maps.queries import within_box
        from avsim.scenario.frames import transform_scenario

        key = hashlib.sha256((scenario_path / "scenario.json").read_bytes()).hexdigest()
        token = content_token("log", key)
        if token not in self.logs:
            offset, canvas = world_offset(scenario)
            moved = transform_scenario(scenario, SE3(np.eye(3), np.asarray(offset)))
            moved = moved.replace(map=within_box(moved.map, [0.0, 0.0, canvas[0], canvas[1]]))
            name = str(scenario.metadata.get("map_name", ""))
            self.tables.add_log(key, f"avsim-{safe_name(scenario.scenario_id)}", "", TIME_BASE_DATE)
            self.logs[token] = _Log(token, moved, offset, canvas, road_surface(moved.map), name if name in LOCATIONS else None,
                                    travelling_tracks(moved.agents))  # fmt: skip
        return self.logs[token]

    def add_clip(self, clip: LabelledClip, scenario: Scenario, scenario_path: Path, name: str | None = None) -> None:
        """One clip as one scene: tables, images, sweeps.

        Args:
            clip: the label folder.
            scenario: the scenario it was made from (its own frame; checked against the clip).
            scenario_path: where the scenario was read.
            name: the scene's name (default: the clip's, made unique in this export).
        """
        check_scenario(clip, scenario, scenario_path)
        log = self.log_of(scenario, scenario_path)
        rig = clip_rig(clip, scenario)
        key_pos = keyframes(clip.timestamps_ns)
        last = int(key_pos[-1])
        times = clip.timestamps_ns[: last + 1]
        name = self._unique_name(name or clip.name)
        key = json.dumps([clip.digest, name])
        scene = _SceneRef.of(key, name, _us(times[0]))
        samples = self.tables.add_scene(key, name, f"avsim synthetic {clip.kind} of scenario {scenario.scenario_id}: {clip.name}",
                                        log.token, [scene.us(t) for t in times[key_pos]])  # fmt: skip
        scene = dataclasses.replace(scene, samples=samples)
        sample_of = np.searchsorted(key_pos, np.arange(last + 1), side="left")
        channels = camera_channels(rig)
        for cam in rig.names:
            self._camera(clip, log, rig, cam, channels[cam], scene, key_pos, sample_of)
        boxes = self._lidar_and_boxes(clip, log, scene, times, key_pos)
        self.counts.annotations += self.tables.add_annotations(scene.token, samples, boxes)
        self.counts.scenes += 1
        self.counts.samples += len(key_pos)
        self.counts.dropped_frames += len(clip.timestamps_ns) - (last + 1)
        self.scenes[scene.token] = {"name": name, "kind": clip.kind, "labels": str(clip.folder.resolve()), "log": log.token,
                                    "scenario_id": scenario.scenario_id, "channels": channels, "samples": len(key_pos),
                                    "frames": last + 1, "frames_left_out": len(clip.timestamps_ns) - (last + 1),
                                    "time_offset_us": scene.shift_us}  # fmt: skip

    def _unique_name(self, base: str) -> str:
        name, k = safe_name(base), 2
        while name in self._names:
            name, k = f"{safe_name(base)}-{k}", k + 1
        self._names.add(name)
        return name

    def _camera(self, clip: LabelledClip, log: _Log, rig: Any, cam: str, channel: str, scene: _SceneRef, key_pos: np.ndarray,
                sample_of: np.ndarray) -> None:  # fmt: skip
        """One camera's frames: sample_data, ego poses at capture, calibration, JPEG files."""
        model = rig.camera(cam)
        cs = self.tables.add_sensor(channel, "camera", rig.extrinsic(cam), export_intrinsic(model))
        n = len(sample_of)
        capture = clip.timestamps_ns[:n] + int(rig.capture_offset_ns[rig.index(cam)])
        poses = log.scenario.ego.pose_at(capture)
        keyset = set(np.asarray(key_pos).tolist())
        files = [f"{'samples' if p in keyset else 'sweeps'}/{channel}/{scene.name}__{channel}__{scene.us(capture[p])}.jpg" for p in range(n)]
        records = [SampleDataRecord(scene.us(capture[p]), poses[p], files[p], p in keyset, int(sample_of[p]), model.width_px,
                                    model.height_px) for p in range(n)]  # fmt: skip
        self.tables.add_channel(scene.token, scene.samples, channel, cs, records)
        for folder in {str(Path(f).parent) for f in files}:
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        images, videos = frame_sources(clip, cam, np.arange(n))
        t0 = time.process_time()
        write_frames(images, videos, Rectifier(model), lambda p: _file(self.root, files[p]), lambda: self.progress(1))
        self.counts.image_cpu_s += time.process_time() - t0
        self.counts.camera_frames += n

    def _lidar_and_boxes(self, clip: LabelledClip, log: _Log, scene: _SceneRef, times: np.ndarray,
                         key_pos: np.ndarray) -> list[SampleBoxes]:  # fmt: skip
        """The LiDAR sweep of every keyframe (files and sample_data) and the keyframes' annotations."""
        lidar = self.options.lidar
        cs = self.tables.add_sensor(LIDAR_CHANNEL, "lidar", lidar.ego_SE3_lidar, None)
        frames = frame_boxes_3d(log.scenario, times)
        visible = visibility_fractions(clip)
        (self.root / "samples" / LIDAR_CHANNEL).mkdir(parents=True, exist_ok=True)
        records, out = [], []
        for j, p in enumerate(np.asarray(key_pos).tolist()):
            fb = frames[p]
            rot = fb.rotation_world_matrices()
            t0 = time.process_time()
            sweep = cast_sweep(lidar, fb.world_SE3_ego, fb.center_world_m, rot, fb.size_lwh_m, log.road)
            points_world = fb.world_SE3_ego.compose(lidar.ego_SE3_lidar).apply(sweep.points_m) if len(sweep.points_m) else sweep.points_m
            counts = points_in_boxes(points_world, fb.center_world_m, rot, fb.size_lwh_m)
            file = f"samples/{LIDAR_CHANNEL}/{scene.name}__{LIDAR_CHANNEL}__{scene.us(times[p])}.pcd.bin"
            _file(self.root, file).write_bytes(sweep.pcd_bin())
            self.counts.lidar_cpu_s += time.process_time() - t0
            self.counts.lidar_sweeps += 1
            self.progress(1)
            records.append(SampleDataRecord(scene.us(times[p]), fb.world_SE3_ego, file, True, j))
            fi = int(clip.frame_index[p])
            ids = [str(t) for t in fb.track_id.tolist()]
            cats = [nuscenes_category(s, c) for s, c in zip(fb.source_class.tolist(), fb.object_class.tolist())]
            attrs = nuscenes_attributes(fb.object_class, fb.track_id, fb.velocity_world_mps, log.travelling)  # the labels' own
            out.append(SampleBoxes(
                ids, cats, [a or None for a in attrs], [visibility_token(visible.get((fi, t), 0.0)) for t in ids], fb.center_world_m,
                fb.size_lwh_m, fb.rotation_world_wxyz, counts.tolist(),
            ))  # fmt: skip
        self.tables.add_channel(scene.token, scene.samples, LIDAR_CHANNEL, cs, records)
        return out

    def assign_locations(self) -> None:
        """Give each log a location (`assign_locations`)."""
        located = assign_locations({t: log.preferred for t, log in self.logs.items()})
        for token, log in self.logs.items():
            log.location = located[token]
            self.tables.set_location(token, log.location)

    def write_maps(self) -> None:
        """Every log's mask and map expansion (`maps/expansion/<location>.json`)."""
        (self.root / "maps" / "expansion").mkdir(parents=True, exist_ok=True)
        for log in self.logs.values():
            (self.root / "maps" / f"{log.token}.png").write_bytes(nuscenes_map.mask_png(log.scenario.map, log.canvas_m))
            doc = nuscenes_map.map_expansion(log.scenario.map, log.token, log.canvas_m)
            _file(self.root, f"maps/expansion/{log.location}.json").write_text(json.dumps(doc) + "\n", encoding="utf-8")

    def finish(self) -> None:
        """Locations, maps, the 13 tables, `avsim_export.json` and the README."""
        from avsim.render.labels.nuscenes_readme import readme_text

        if not self.counts.scenes:
            raise AvsimInputError(self.root, "SOURCE", "no clip to export")
        self.assign_locations()
        self.write_maps()
        folder = self.root / self.options.version
        folder.mkdir(parents=True, exist_ok=True)
        for table, text in self.tables.documents().items():
            (folder / f"{table}.json").write_text(text, encoding="utf-8")
        manifest = self.manifest()
        (self.root / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        (self.root / README).write_text(readme_text(manifest, self.tables.counts()), encoding="utf-8")

    def manifest(self) -> dict[str, Any]:
        """`avsim_export.json`: the logs (scenario, export-frame offset, location, expansion), scenes and LiDAR."""
        logs = {t: {"scenario_id": log.scenario.scenario_id, "world_offset_m": list(log.offset_m), "location": log.location,
                    "preferred_location": log.preferred, "devkit_location": log.location in LOCATIONS, "canvas_m": list(log.canvas_m)}
                for t, log in self.logs.items()}  # fmt: skip
        return {"format": EXPORT_FORMAT, "format_version": 1, "nuscenes_version": self.options.version, "logs": logs,
                "scenes": self.scenes, "lidar": self.options.lidar.to_dict()}  # fmt: skip


def _us(t_ns: int | np.integer) -> int:
    """Nanoseconds -> whole microseconds (nuScenes timestamps), rounded half up."""
    return int((int(t_ns) + 500) // 1000)


def export_nuscenes(label_folders: list[Path], scenario_root: Path, out: Path, options: ExportOptions,
                    progress: Callable[[int], None] | None = None) -> ExportCounts:  # fmt: skip
    """Write the clips of `label_folders` as one nuScenes dataroot `out` (atomic: a temporary folder renamed into place).

    Args:
        label_folders: label folders (one scene each).
        scenario_root: the scenario folder, or a folder of scenario folders, the clips were made from.
        out: the dataroot (absent, empty, or an earlier avsim nuScenes export, which is replaced).
        options: the export options.
        progress: called with the number of files written as they are.

    Returns:
        What was written.
    """
    check_output(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(out, is_dir=True) as tmp:
        tmp.mkdir(parents=True, exist_ok=True)
        counts = write_export(label_folders, scenario_root, tmp, options, progress)
    return counts


def write_export(label_folders: list[Path], scenario_root: Path, root: Path, options: ExportOptions,
                 progress: Callable[[int], None] | None = None, names: list[str] | None = None) -> ExportCounts:  # fmt: skip
    """Write the dataroot of `label_folders` into the empty folder `root` (`export_nuscenes` without the rename).

    Args:
        label_folders: label folders (one scene each).
        scenario_root: the scenario folder, or a folder of scenario folders.
        root: an existing empty folder.
        options: the export options.
        progress: called with the number of files written.
        names: the scenes' names (default: each clip's folder name, made unique).

    Returns:
        What was written.
    """
    from avsim.scenario.io import load_scenario

    clips = [read_clip(f) for f in label_folders]
    headers: dict[Path, str] = {}
    scenarios: dict[Path, Scenario] = {}
    export = NuScenesExport(root, options, progress)
    for k, clip in enumerate(clips):
        path = _matching_scenario(clip, find_scenario(scenario_root, clip, headers), scenarios, load_scenario)
        export.add_clip(clip, scenarios[path], path, names[k] if names else None)
    export.finish()
    return export.counts


def _matching_scenario(clip: LabelledClip, candidates: list[Path], loaded: dict[Path, Scenario],
                       load: Callable[[Path], Scenario]) -> Path:  # fmt: skip
    """The one candidate scenario whose ego poses are the clip's (loaded into `loaded` as needed)."""
    matches, last_error = [], None
    for path in candidates:
        if path not in loaded:
            loaded[path] = load(path)
        try:
            check_scenario(clip, loaded[path], path)
            matches.append(path)
        except AvsimInputError as exc:
            last_error = exc
    if len(matches) == 1:
        return matches[0]
    if not matches and last_error is not None:
        raise last_error
    raise AvsimInputError(clip.index_path, "scenario_id", f"{len(matches)} scenarios under --scenario match these labels: "
                          f"{', '.join(map(str, matches[:3]))}; pass the one they were made from")  # fmt: skip


def check_output(out: Path) -> None:
    """OUT must be absent, an empty folder or an earlier avsim nuScenes export (it is replaced whole).

    Args:
        out: the dataroot to write.
    """
    if not out.exists():
        return
    if not out.is_dir():
        raise AvsimInputError(out, "OUT", "exists and is not a folder")
    if any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise AvsimInputError(out, "OUT", f"is a folder with other files (not an avsim nuScenes export: no {MANIFEST}); "
                              "pass an absent or empty folder")  # fmt: skip


def planned_files(label_folders: list[Path]) -> int:
    """How many files (camera frames and LiDAR sweeps) exporting these clips writes: a progress bar's total.

    Args:
        label_folders: the label folders.

    Returns:
        The count.
    """
    total = 0
    for folder in label_folders:
        clip = read_clip(folder)
        key_pos = keyframes(clip.timestamps_ns)
        total += (int(key_pos[-1]) + 1) * len(generated_cameras(clip)) + len(key_pos)
    return total
