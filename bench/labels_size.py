"""Bytes of a clip's labels on disk, compact layout against the standard files (issue 41: at most 15 MB per 20 s clip).

Writes the labels of one clip with `avsim labels --label-files both` (the library entry point
`labels_run.run_labels`, every camera at its own aspect, 720 px high) into a temporary folder
and reports the bytes of each file kind, per clip and per camera-frame, and the ratio. The
goal is checked on the compact layout: `index.json` plus its four parquet tables.

    python bench/labels_size.py                      # sample, 20 s, 7 cameras, 1280x720 (a few minutes on 2 cores)
    python bench/labels_size.py --clip-s 4
    python bench/labels_size.py --scenario SCENE     # any scenario folder (e.g. `avsim convert` of an AV2 log)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

GOAL_MB_PER_20S_CLIP = 15.0


def _scenario(args: argparse.Namespace):
    if args.scenario:
        from avsim.scenario.io import load_scenario

        return load_scenario(args.scenario)
    from avsim.scenario.sample import make_sample_scenario

    return make_sample_scenario(seed=0, duration_s=args.clip_s, fps=30.0)


def _sizes(folder: Path) -> dict[str, int]:
    """Bytes per file kind of a label folder (index, each compact table, the standard files by kind)."""
    from avsim.render.labels.compact import COMPACT_FILES

    out = {"index.json": (folder / "index.json").stat().st_size}
    out.update({name: (folder / name).stat().st_size for name in COMPACT_FILES.values()})
    out["boxes3d.json"] = (folder / "boxes3d.json").stat().st_size
    for kind in ("coco", "openlane"):
        out[f"{kind}/"] = sum(p.stat().st_size for p in (folder / kind).rglob("*") if p.is_file())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip-s", type=float, default=20.0, help="length of the sample clip (s)")
    parser.add_argument("--scenario", type=Path, default=None, help="a scenario folder instead of the sample")
    parser.add_argument("--fps", type=float, default=30.0)
    args = parser.parse_args(argv)

    from avsim.render.run.labels import run_labels
    from avsim.render.run.plan import RenderOptions

    scenario = _scenario(args)
    with tempfile.TemporaryDirectory() as tmp:
        opts = RenderOptions(out=Path(tmp), fps=args.fps, exact_size=False, labels=True, label_files="both")
        t = time.perf_counter()
        done = [0]
        folder = run_labels(scenario, opts, progress=lambda n: done.__setitem__(0, done[0] + n))
        seconds = time.perf_counter() - t
        sizes = _sizes(folder)
    import json

    frames = done[0]
    compact = sizes["index.json"] + sum(v for k, v in sizes.items() if k.endswith(".parquet"))
    standard = sizes["index.json"] + sizes["boxes3d.json"] + sizes["coco/"] + sizes["openlane/"]
    clip_s = (len(scenario.frame_times(args.fps)) - 1) / args.fps + 1 / args.fps
    per_20s = compact / 1e6 * 20.0 / clip_s
    print(f"{scenario.scenario_id}: {frames} camera-frames ({clip_s:.1f} s at {args.fps:g} fps), labels written in {seconds:.0f} s")
    for name, n in sizes.items():
        print(f"  {name:24s} {n / 1e6:9.3f} MB  {n / max(frames, 1) / 1e3:8.2f} kB per camera-frame")
    print(f"compact {compact / 1e6:.2f} MB, standard {standard / 1e6:.2f} MB ({standard / compact:.1f}x); "
          f"compact per 20 s clip {per_20s:.2f} MB (goal <= {GOAL_MB_PER_20S_CLIP:g} MB: {'met' if per_20s <= GOAL_MB_PER_20S_CLIP else 'NOT met'})")
    print(json.dumps({"camera_frames": frames, "clip_s": clip_s, "bytes": sizes, "compact_bytes": compact, "standard_bytes": standard,
                      "compact_mb_per_20s_clip": round(per_20s, 3)}))  # fmt: skip
    return 0 if per_20s <= GOAL_MB_PER_20S_CLIP else 1


if __name__ == "__main__":
    sys.exit(main())
