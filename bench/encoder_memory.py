"""Resident memory of libx264 encoders per preset and frame size: the data behind render/memory_plan.py.

Each (preset, size) runs in a fresh process that opens 3 encoders (`avsim.core.video.MP4Writer`,
crf 18, one thread, as a render does), feeds them the same moving control-like frames and reports
(peak RSS - RSS before the first encoder) / 3. A line a + b * megapixels is fitted per preset over
the sizes and printed next to `ENCODER_MIB`, the table the render's memory budget uses.

    python bench/encoder_memory.py                          # ultrafast ... medium at 640x360, 1280x720, 1920x1080
    python bench/encoder_memory.py --presets slow,veryslow  # the slow presets (minutes at 1080p)
    python bench/encoder_memory.py --decoders               # the real-video decoders `--overlay` keeps open

`--decoders` measures the H.264 decoders an overlay render holds (`avsim.core.video.iter_video_frames`,
threads as FFmpeg picks them, so the figure depends on the CPU count), 3 per process after 30
frames each, fitted the same way next to `memory_plan.DECODER_MIB`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

SIZES = ((640, 360), (1280, 720), (1920, 1080))
DEFAULT_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium")
ENCODERS = 3  # per process, as a render segment holds several


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure_one(preset: str, width_px: int, height_px: int, frames: int) -> dict:
    """Encode `frames` frames into ENCODERS encoders in this process.

    Args:
        preset: x264 preset.
        width_px: frame width.
        height_px: frame height.
        frames: frames per encoder.

    Returns:
        {"preset", "size", "per_encoder_mib"}.
    """
    from contextlib import ExitStack

    import numpy as np

    from avsim.core.video import MP4Writer

    base = _pattern(width_px, height_px)
    before = _rss_mib()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        writers = [stack.enter_context(MP4Writer(Path(tmp) / f"{k}.mp4", width_px, height_px, 30, preset=preset)) for k in range(ENCODERS)]
        for f in range(frames):
            frame = np.roll(base, 3 * f, axis=1)  # everything moves: motion search and references work
            for w in writers:
                w.write(frame)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"preset": preset, "size": [width_px, height_px], "per_encoder_mib": (peak - before) / ENCODERS}


def _pattern(width_px: int, height_px: int):
    import numpy as np

    y, x = np.mgrid[0:height_px, 0:width_px]
    base = np.zeros((height_px, width_px, 3), np.uint8)
    base[(x // 40 + y // 30) % 7 == 0] = (200, 40, 40)  # a lane-line-like pattern of flat colours on black
    base[((x - y) % 97) < 3] = (250, 250, 250)
    return base


def measure_decoders(width_px: int, height_px: int) -> dict:
    """Open ENCODERS decoders of one `width_px` x `height_px` H.264 video in this process, 30 frames each.

    Args:
        width_px: frame width.
        height_px: frame height.

    Returns:
        {"size", "per_decoder_mib"}.
    """
    import numpy as np

    from avsim.core.video import MP4Writer, iter_video_frames

    base = _pattern(width_px, height_px)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "real.mp4"
        with MP4Writer(path, width_px, height_px, 30) as w:
            for f in range(60):
                w.write(np.roll(base, 3 * f, axis=1))
        before = _rss_mib()
        readers = [iter_video_frames(path) for _ in range(ENCODERS)]
        for _ in range(30):
            for r in readers:
                next(r)
        after = _rss_mib()  # the readers stay open, as an overlay worker keeps them
    return {"size": [width_px, height_px], "per_decoder_mib": (after - before) / ENCODERS}


def decoder_table() -> None:
    """Print per-decoder MiB per size, the fitted line and DECODER_MIB."""
    from avsim.render.run.memory import DECODER_MIB

    sizes = [f"{w}x{h}" for w, h in SIZES]
    mib = [_run_child(["--one-decoder", s])["per_decoder_mib"] for s in sizes]
    a, b = fit_line([(w * h / 1e6, m) for (w, h), m in zip(SIZES, mib, strict=True)])
    print(f"| decoder | {' | '.join(s + ' MiB' for s in sizes)} | fit a + b*MPx | DECODER_MIB |\n|---|{'---|' * len(SIZES)}---|---|")
    print(f"| H.264 | {' | '.join(f'{m:.0f}' for m in mib)} | {a:.0f} + {b:.1f} | {DECODER_MIB[0]:.0f} + {DECODER_MIB[1]:.1f} |")
    import av

    print(f"\n{ENCODERS} decoders per process, 30 frames each; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, PyAV {av.__version__}")  # fmt: skip


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares a, b of MiB = a + b * megapixels.

    Args:
        points: (megapixels, MiB) pairs, at least two megapixel values.

    Returns:
        (a, b).
    """
    n = len(points)
    mx = sum(p for p, _ in points) / n
    my = sum(m for _, m in points) / n
    b = sum((p - mx) * (m - my) for p, m in points) / sum((p - mx) ** 2 for p, _ in points)
    return my - b * mx, b


def _child(preset: str, size: tuple[int, int], frames: int) -> dict:
    return _run_child(["--one", preset, f"{size[0]}x{size[1]}", "--frames", str(frames)])


def _run_child(args: list[str]) -> dict:
    """This script with `args` in a fresh process (its own peak RSS): the JSON of its last line."""
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def table(presets: list[str], frames: int) -> None:
    """Print per-encoder MiB per preset and size, the fitted line and ENCODER_MIB's.

    Args:
        presets: x264 presets.
        frames: frames per encoder.
    """
    from avsim.render.run.memory import ENCODER_MIB

    heads = " | ".join(f"{w}x{h} MiB" for w, h in SIZES)
    print(f"| preset | {heads} | fit a + b*MPx | ENCODER_MIB |\n|---|{'---|' * len(SIZES)}---|---|", flush=True)
    for preset in presets:
        mib = [_child(preset, size, frames)["per_encoder_mib"] for size in SIZES]
        a, b = fit_line([(w * h / 1e6, m) for (w, h), m in zip(SIZES, mib, strict=True)])
        used = ENCODER_MIB[preset]
        cells = " | ".join(f"{m:.0f}" for m in mib)
        print(f"| {preset} | {cells} | {a:.0f} + {b:.1f} | {used[0]:.0f} + {used[1]:.1f} |", flush=True)
    import av

    print(f"\n{ENCODERS} encoders per process, {frames} frames, crf 18, one thread; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, PyAV {av.__version__}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default=",".join(DEFAULT_PRESETS), help="comma-separated x264 presets")
    parser.add_argument("--frames", type=int, default=100, help="frames per encoder (memory is flat from about 100)")
    parser.add_argument("--one", nargs=2, metavar=("PRESET", "WxH"), help=argparse.SUPPRESS)
    parser.add_argument("--decoders", action="store_true", help="measure the overlay's real-video decoders instead")
    parser.add_argument("--one-decoder", metavar="WxH", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_decoder:
        w, h = (int(v) for v in args.one_decoder.split("x"))
        print(json.dumps(measure_decoders(w, h)))
        return
    if args.decoders:
        decoder_table()
        return
    if args.one:
        w, h = (int(v) for v in args.one[1].split("x"))
        print(json.dumps(measure_one(args.one[0], w, h, args.frames)))
        return
    table([p.strip() for p in args.presets.split(",") if p.strip()], args.frames)


if __name__ == "__main__":
    main()
