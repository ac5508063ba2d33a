"""Seconds of `avsim export nuscenes` per camera-frame and per LiDAR sweep (issue 56).

Labels the sample (`run_labels` with `--images jpg`, nuScenes' 12 fps) into a temporary folder, then
exports it (`export_nuscenes`, the library entry of `avsim export nuscenes`) and reports, from the
export's own counters (`ExportCounts`: CPU time, `time.process_time`, so that other work on a shared
machine does not count; OpenCV's own threads do):

- per camera-frame: writing the frame's JPEG (read the labels' image, resample it onto the pinhole
  when the lens is not one, encode; a pinhole JPEG is copied) and its table records;
- per LiDAR sweep: the ray cast (`render.geometry.lidar.cast_sweep`), the point count of every box
  and the `.pcd.bin` file;
- the whole export's CPU time per camera-frame (tables, maps, README included), and its wall time.

Two rigs: the sample's own 7 f-theta cameras at 1280x720 (every frame resampled) and `--rig nuscenes`
(6 pinhole cameras at 1600x900, copied). The first LiDAR sweep of a process compiles the kernels
unless numba's cache holds them: a warm-up export runs first.

    python bench/export_nuscenes.py                  # 4 s of the sample at 12 fps, both rigs (about 2 minutes on 2 cores)
    python bench/export_nuscenes.py --clip-s 2 --rigs scenario
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

RIGS = {"scenario": (1280, 720), "nuscenes": (1600, 900)}


def _export(folder: Path, rig: str, clip_s: float, fps: float) -> dict[str, float]:
    from avsim.render.labels.nuscenes_export import ExportOptions, export_nuscenes
    from avsim.render.run.labels import run_labels
    from avsim.render.run.plan import RenderOptions
    from avsim.scenario.workflows import write_sample

    write_sample(folder / "s", duration_s=clip_s)
    from avsim.scenario.io import load_scenario

    w, h = RIGS[rig]
    opts = RenderOptions(out=folder / "l", fps=fps, width_px=w, height_px=h, labels=True, label_images="jpg", rig=rig)
    labels = run_labels(load_scenario(folder / "s"), opts)
    t, c = time.perf_counter(), time.process_time()
    counts = export_nuscenes([labels], folder / "s", folder / "nus", ExportOptions("v1.0-mini"))
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return {"rig": rig, "size": f"{w}x{h}", "camera_frames": counts.camera_frames, "lidar_sweeps": counts.lidar_sweeps,
            "cpu_s_per_camera_frame": counts.image_cpu_s / counts.camera_frames, "cpu_s_per_lidar_sweep": counts.lidar_cpu_s / counts.lidar_sweeps,
            "export_cpu_s_per_camera_frame": cpu / counts.camera_frames, "export_cpu_s": cpu, "export_wall_s": wall}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip-s", type=float, default=4.0, help="length of the sample clip (s)")
    parser.add_argument("--fps", type=float, default=12.0, help="label rate (nuScenes' cameras: 12 Hz)")
    parser.add_argument("--rigs", default="scenario,nuscenes", help="comma-separated: scenario (7 f-theta), nuscenes (6 pinhole)")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        _export(Path(tmp) / "warm", "scenario", 1.0, 4.0)  # compiles (or loads) the LiDAR kernels
        for rig in args.rigs.split(","):
            rows.append(_export(Path(tmp) / rig, rig, args.clip_s, args.fps))
    for r in rows:
        print(f"{r['rig']:9s} {r['size']}: {r['camera_frames']} camera-frames, {r['lidar_sweeps']} sweeps; CPU "
              f"{r['cpu_s_per_camera_frame'] * 1e3:.1f} ms per camera-frame, {r['cpu_s_per_lidar_sweep'] * 1e3:.1f} ms per LiDAR sweep, "
              f"whole export {r['export_cpu_s_per_camera_frame'] * 1e3:.1f} ms per camera-frame ({r['export_cpu_s']:.1f} s CPU, "
              f"{r['export_wall_s']:.1f} s wall)")  # fmt: skip
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
