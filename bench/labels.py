"""Benchmark what `--labels` adds to a render: labels on and off, interleaved segment by segment in one process.

The development machine is shared and its speed drifts by tens of percent within a minute, so
two whole renders one after the other (`bench/render.py --modes encode_w1,encode_w1_labels`)
differ by more than the labels cost. Here one process holds two render workers of the same
clip, cameras and options, one with `--labels` and one without, and renders each time segment
with both (which one goes first alternates), summing the CPU time of each. Both encode every
camera's frames (x264, the render's preset); the labelled one also computes and writes the label
parts. The labels' merge into the clip's label files (`labels_run.merge_parts`) runs once at the
end and is timed on its own; the overhead includes it.

    python bench/labels.py                               # sample, 20 s, 1 s segments (about 5 min on 2 cores)
    python bench/labels.py --clip-s 4 --segment-frames 15
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from render import _versions, load_case


def _worker(scenario, out: Path, labels: bool):
    """A started render worker of all the sample's cameras at 1280x720, with or without labels."""
    from avsim.render.pipeline import SegmentWorker
    from avsim.render.runner import RenderOptions, resolve_rig

    cameras = resolve_rig(scenario, "scenario").names
    opts = RenderOptions(out=out, cameras=tuple(cameras), labels=labels)
    worker = SegmentWorker()
    worker.start(scenario, opts, {}, 0, None)
    return worker


def _segment(clip_id: str, cameras: tuple[str, ...], start: int, stop: int, out: Path):
    """The time segment [start, stop) of every camera's control video, its parts under `out`."""
    from avsim.render import writer
    from avsim.render.pipeline import StreamPart, TimeSegment

    out.mkdir(parents=True, exist_ok=True)
    parts = tuple(StreamPart("camera", c, writer.Segment(c, start, stop, out / f"{c}.{start:06d}.mp4", None)) for c in cameras)
    return TimeSegment(clip_id, start, stop, parts)


def run(clip_s: float, segment_frames: int) -> dict:
    """Labels on / off CPU seconds per segment, and the merge's, for the sample cut to `clip_s`."""
    from avsim.render import labels_run, writer

    scenario = load_case("sample", clip_s)
    clip_id = writer.safe_name(scenario.scenario_id)
    with tempfile.TemporaryDirectory() as tmp:
        workers = {on: _worker(scenario, Path(tmp) / str(on), on) for on in (False, True)}
        cameras = tuple(workers[False].opts.cameras)
        n = workers[False].renderer.n_frames
        starts = list(range(0, n, segment_frames))
        segs = {on: [_segment(clip_id, cameras, a, min(a + segment_frames, n), Path(tmp) / str(on) / "parts") for a in starts]
                for on in (False, True)}  # fmt: skip
        warm = _segment(clip_id, cameras, 0, 1, Path(tmp) / "warm")
        for on in (False, True):  # JIT caches and imports of both paths
            workers[on].render_segment(warm)
        cpu: dict[bool, list[float]] = {False: [], True: []}
        for k in range(len(starts)):
            for on in ((False, True) if k % 2 == 0 else (True, False)):
                t = time.process_time()
                workers[on].render_segment(segs[on][k])
                cpu[on].append(time.process_time() - t)
            print(f"  segment {k + 1}/{len(starts)}: off {cpu[False][-1]:.2f} s, on {cpu[True][-1]:.2f} s", file=sys.stderr)
        t = time.process_time()
        parts = [p.segment for s in segs[True] for p in s.parts]
        labels_run.merge_parts(scenario, workers[True].opts, clip_id, parts, 0, n)
        merge = time.process_time() - t
    return {"camera_frames": n * len(cameras), "segments": len(starts), "off": cpu[False], "on": cpu[True], "merge_s": merge}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clip-s", type=float, default=20.0)
    parser.add_argument("--segment-frames", type=int, default=30)
    args = parser.parse_args()
    r = run(args.clip_s, args.segment_frames)
    off, on = sum(r["off"]), sum(r["on"])
    each = [100.0 * (b / a - 1.0) for a, b in zip(r["off"], r["on"])]
    cf = r["camera_frames"]
    print(f"\nversions: {_versions()}; sample {args.clip_s:g} s at 30 fps, 7 cameras, 1280x720, "
          f"{r['segments']} segments of {args.segment_frames} frames, labels on / off interleaved in one process\n")  # fmt: skip
    print("| camera-frames | CPU ms per camera-frame, off | on (render, encode, parts) | merge | labels overhead | per segment: min / median / max |")
    print("|---|---|---|---|---|---|")
    print(f"| {cf} | {1e3 * off / cf:.2f} | {1e3 * on / cf:.2f} | {1e3 * r['merge_s'] / cf:.2f} | "
          f"{100.0 * ((on + r['merge_s']) / off - 1.0):+.1f} % | "
          f"{min(each):+.1f} / {statistics.median(each):+.1f} / {max(each):+.1f} % |")  # fmt: skip


if __name__ == "__main__":
    main()
