"""The README.md of an `avsim export nuscenes` dataroot: what is synthetic, what each file holds, what differs from nuScenes."""

from __future__ import annotations

from typing import Any

README_TEMPLATE = """# A synthetic nuScenes-format dataset written by avsim

**Everything here is synthetic.** The scenes are avsim renders (world-scenario control frames) or
frames a generative model made from them; the annotations are the scenario's boxes, not a person's;
the LiDAR sweeps are a ray cast of the boxes and the map's road surface, not a LiDAR's returns.
Do not mix them into real nuScenes without keeping them apart.

Read it like nuScenes: `NuScenes(version="{version}", dataroot=<this folder>)`.

## What each part is

- `{version}/`: the 13 tables. Tokens are digests of the records' content: the same input gives
  the same tokens and bytes. Records: {tables}.
- `samples/CAM_*/`, `sweeps/CAM_*/`: every camera frame as a JPEG, keyframes (2 Hz) under `samples/`.
  Each image is an ideal pinhole image of the `camera_intrinsic` of its `calibrated_sensor`: cameras
  with another lens model (f-theta, distortion) were resampled onto the pinhole that agrees with the
  lens at the principal point, at the same size (black where the lens saw nothing).
- `samples/LIDAR_TOP/*.pcd.bin`: one sweep per keyframe, float32 (x, y, z, intensity, ring index) in
  the sensor frame: {beams} beams from {el_min:.2f} to {el_max:.2f} deg, azimuth step {azimuth:.4g} deg,
  range {min_range:g}-{max_range:g} m, the whole sweep at the keyframe instant (no motion while it spins). It hits the agent boxes
  (inset 2 cm, so each box's points lie inside its annotation) and the map's road surface; nothing
  else (buildings, vegetation, the ego vehicle) returns points. Intensity is synthetic.
  `num_lidar_pts` counts the sweep's points inside each box; `num_radar_pts` is 0 (no radar).
- `maps/<log token>.png`: each log's semantic-prior mask (the road surface, 0.1 m per pixel);
  `maps/expansion/<location>.json`: the map expansion (v1.3) of the log at each location.
- `avsim_export.json`: the source of every scene and log, each log's export-frame offset, the
  camera -> channel names and the LiDAR model; `avsim convert --from nuscenes` reads it to give
  back the source scenario's frame and camera names.

## Differences from nuScenes

- The global frame of each log is the scenario's world moved by a whole-metre offset (so the map
  mask, whose corner is at the global origin, covers it); logs of different scenarios overlap.
- Each scene's times start at 2017-07-14 plus a span read from its token (scenes must not start at
  the same microsecond); `avsim_export.json` has each scene's offset.
- Attributes come from motion (the labels' `attribute_name`: moving / stopped / parked, with /
  without rider, moving / standing), visibility from the rendered visible fraction over all
  cameras; categories from the source class (a nuScenes category is kept), else from avsim's class.
- `NuScenesMap` knows four locations (`nuscenes.map_expansion.map_api.locations`): the first four
  scenarios take them; a fifth one's expansion is named `avsim-<log token>` and is read once that
  name is appended to that list. The map layers avsim has no data for (road segments, road blocks, walkways, car parks, lane
  connectors) are empty, and lanes carry straight `arcline_path_3` segments along their centre lines.
- Scene names are the clips' names, not nuScenes' (`nuscenes.utils.splits` does not list them).
- Camera frames after a scene's last keyframe are left out.

## Scenes

| scene | frames from | scenario | samples | camera frames per camera | left out | cameras |
|---|---|---|---|---|---|---|
{scenes}

## Logs

| log token | scenario | location | NuScenesMap reads it | offset added to x, y (m) |
|---|---|---|---|---|
{logs}
"""


def readme_text(manifest: dict[str, Any], counts: dict[str, int]) -> str:
    """The README of one export.

    Args:
        manifest: the export's `avsim_export.json` document.
        counts: records per table.

    Returns:
        Markdown text.
    """
    lidar = manifest["lidar"]
    el = lidar["elevations_deg"]
    scenes = "\n".join(f"| {s['name']} | {s['kind']} | {s['scenario_id']} | {s['samples']} | {s['frames']} | {s['frames_left_out']} | "
                       f"{', '.join(f'{c} -> {ch}' for c, ch in s['channels'].items())} |" for s in manifest["scenes"].values())  # fmt: skip
    logs = "\n".join(f"| {t} | {g['scenario_id']} | {g['location']} | {'yes' if g['devkit_location'] else 'add it to `nuscenes.map_expansion.map_api.locations`'} | "
                     f"({g['world_offset_m'][0]:g}, {g['world_offset_m'][1]:g}) |" for t, g in manifest["logs"].items())  # fmt: skip
    return README_TEMPLATE.format(
        version=manifest["nuscenes_version"], tables=", ".join(f"{name} {n}" for name, n in counts.items()), beams=len(el),
        el_min=min(el), el_max=max(el), azimuth=lidar["azimuth_step_deg"], min_range=lidar["min_range_m"],
        max_range=lidar["max_range_m"], scenes=scenes, logs=logs,
    )  # fmt: skip
