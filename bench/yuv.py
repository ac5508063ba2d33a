"""Benchmark the RGB -> YUV 4:2:0 step of the H.264 writer: avsim.core.yuv against libswscale.

Renders the first 60 frames of each of the sample's 7 cameras at 1280x720 (anti-aliasing on),
then encodes every camera's frames with `MP4Writer` (x264 superfast, crf 18), once with the
conversion libswscale did inside the encoder before and once with `avsim.core.yuv`, interleaved
and repeated in one process; prints CPU ms per camera-frame (conversion + x264) and the ratio.
A second table gives x264 `ultrafast` against `superfast` with the current conversion.

    python bench/yuv.py
"""

from __future__ import annotations

import os
import time

import av
import numpy as np

from avsim.core import video
from avsim.render.geometry.scene import SceneRenderer
from avsim.scenario.sample import make_sample_scenario

FRAMES, REPEATS = 60, 2


def _swscale(frame_rgb: np.ndarray) -> np.ndarray:
    return av.VideoFrame.from_ndarray(np.ascontiguousarray(frame_rgb), format="rgb24").reformat(format="yuv420p").to_ndarray()


def _encode_cpu_s(streams: list[list[np.ndarray]], preset: str, path: str) -> float:
    t = time.process_time()
    for frames in streams:
        with video.MP4Writer(path, 1280, 720, preset=preset) as writer:
            for frame in frames:
                writer.write(frame)
    return time.process_time() - t


def main() -> None:
    renderer = SceneRenderer(make_sample_scenario(seed=0, duration_s=FRAMES / 30.0 + 1.0, fps=30.0))
    streams = [[renderer.render_camera(f, c) for f in range(FRAMES)] for c in range(len(renderer.rig))]
    n, path, ours = REPEATS * len(streams) * FRAMES, os.path.join(os.environ.get("TMPDIR", "/tmp"), "avsim_bench_yuv.mp4"), video.rgb_to_yuv420p
    conv = {"libswscale": 0.0, "avsim.core.yuv": 0.0}
    presets = {"superfast": 0.0, "ultrafast": 0.0}
    try:
        for _ in range(REPEATS):
            for name, fn in (("libswscale", _swscale), ("avsim.core.yuv", ours)):
                video.rgb_to_yuv420p = fn  # type: ignore[assignment]
                conv[name] += _encode_cpu_s(streams, "superfast", path)
            video.rgb_to_yuv420p = ours
            for preset in presets:
                presets[preset] += _encode_cpu_s(streams, preset, path)
    finally:
        video.rgb_to_yuv420p = ours
    print(f"machine load {os.getloadavg()[0]:.1f}; {n} camera-frames per row, 1280x720\n")
    print("| conversion | CPU ms per camera-frame (conversion + x264 superfast) |\n|---|---|")
    for name, s in conv.items():
        print(f"| {name} | {1e3 * s / n:.2f} |")
    print(f"\nratio avsim.core.yuv / libswscale: {conv['avsim.core.yuv'] / conv['libswscale']:.2f}")
    print(f"ratio ultrafast / superfast (x264 + conversion): {presets['ultrafast'] / presets['superfast']:.2f}")


if __name__ == "__main__":
    main()
