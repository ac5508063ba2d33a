"""Peak memory of hostile inputs (issue 52): each case runs `avsim ...` in its own process and reports
its exit code, its peak resident size (`wait4`'s ru_maxrss) and the bytes the input claims or decodes to.

The cases are the memory blow-ups the trial stopped with a 4 GB cap: parquet tables whose pages decode
to far more than their bytes, a ClipGT obstacle table of honest rows above and at the limit, LET pairs,
a policy's 100,000 poses, `avsim sim` at 8192x8192. Refused cases must stay near an idle command's
size; the accepted table at the limit states the bound of a conversion.

    python bench/hostile_memory.py              # every case (a few minutes; about 3 GB free memory)
    python bench/hostile_memory.py --quick      # the cheap ones
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

TESTS = Path(__file__).resolve().parents[1] / "tests"


# VmHWM of the command's own address space (ru_maxrss would carry the forking parent's size across exec)
_MEASURED = ("import sys\nfrom avsim.cli.main import main\nrc = main(sys.argv[2:])\n"
             "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')).split()[1]\n"
             "open(sys.argv[1], 'w').write(hwm)\nsys.exit(rc)\n")


def _run(args: list[str], cwd: Path) -> tuple[int, float, str]:
    """(exit code, peak resident MiB of the command's process, last stderr line) of `avsim ARGS`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    peak_file = cwd / "peak.txt"
    done = subprocess.run([sys.executable, "-c", _MEASURED, str(peak_file), *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)  # fmt: skip
    peak = int(peak_file.read_text()) / 1024 if peak_file.is_file() else float("nan")  # VmHWM: KiB
    peak_file.unlink(missing_ok=True)
    return done.returncode, peak, (done.stderr.strip().splitlines() or [""])[-1][:160]


def _clip(folder: Path, obstacle: Callable[[Path], None]) -> Path:
    """A ClipGT clip folder with a real f-theta camera, two ego poses and the obstacle table `obstacle` writes."""
    folder.mkdir(parents=True)
    props = {"Model": "ftheta", "polynomial": "0 0.00083 0 0 0 0", "width": "1920", "height": "1080", "cx": "960", "cy": "540"}
    rig = json.dumps({"rig": {"sensors": [{"name": "camera:front:wide:120fov", "properties": props}]}})
    pq.write_table(pa.Table.from_pylist([{"key": {"clip_id": "c", "timestamp_micros": -1}, "calibration_estimate": {"name": "x", "rig_json": rig}}]),
                   folder / "c.calibration_estimate.parquet")  # fmt: skip
    pose = {"location": {"x": 0.0, "y": 0.0, "z": 0.0}, "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}}
    rows = [{"key": {"clip_id": "c", "timestamp_micros": t}, "egomotion_estimate": pose} for t in range(0, 20_000_000, 100_000)]
    pq.write_table(pa.Table.from_pylist(rows), folder / "c.egomotion_estimate.parquet")
    line = {"line_rail": [{"x": float(x), "y": 2.0, "z": 0.0} for x in (0, 50, 100)], "colors": ["WHITE"] * 3, "styles": ["SOLID_SINGLE"] * 3,
            "left_driving_direction": "", "right_driving_direction": ""}  # fmt: skip
    key = {"clip_id": "c", "label_class_id": "map", "map_id": "", "map_id_version": "1"}
    pq.write_table(pa.Table.from_pylist([{"key": key, "lane_line": line}]), folder / "c.lane_line.parquet")
    obstacle(folder / "c.obstacle.parquet")
    return folder


def _honest_obstacles(rows: int) -> Callable[[Path], None]:
    """`rows` obstacle rows: 1000 tracks seen every 0.1 s, boxes moving along x."""

    def arr(values: object) -> pa.Array:
        a = pa.array(values)
        return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a

    def write(path: Path) -> None:
        track = np.arange(rows) % 1000
        t_us = (np.arange(rows) // 1000) * 100_000 % 20_000_000
        xyz = lambda x, y, z: pa.StructArray.from_arrays([arr(x), arr(y), arr(z)], ["x", "y", "z"])  # noqa: E731
        zeros = np.zeros(rows)
        obstacle = pa.StructArray.from_arrays([
            arr(track.astype(str)), xyz(track * 5.0 + t_us / 1e6, zeros + 3.0, zeros), xyz(zeros + 4.5, zeros + 1.9, zeros + 1.6),
            pa.StructArray.from_arrays([arr(zeros), arr(zeros), arr(zeros), arr(zeros + 1.0)], ["x", "y", "z", "w"]),
            arr(np.full(rows, "automobile")),
        ], ["trackline_id", "center", "size", "orientation", "category"])  # fmt: skip
        key = pa.StructArray.from_arrays([arr(np.full(rows, "c")), arr(t_us)], ["clip_id", "timestamp_micros"])
        pq.write_table(pa.table({"key": key, "obstacle": obstacle}), path)

    return write


def _string_bomb(rows: int, mb: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), pa.array(["x" * (mb << 20)]))
        pq.write_table(pa.table({"obstacle": column}), path, use_dictionary=True, compression="zstd")

    return write


def _list_bomb(values: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        pq.write_table(pa.table({"obstacle": pa.array([np.zeros(values)], type=pa.list_(pa.float64()))}), path, use_dictionary=True)

    return write


def _boxes(path: Path, n: int) -> Path:
    import polars as pl

    pl.DataFrame({"frame": np.zeros(n, np.int64), "class": ["vehicle"] * n, "x_m": np.random.default_rng(0).uniform(5, 50, n),
                  "y_m": np.zeros(n), "z_m": np.zeros(n), "length_m": np.full(n, 4.0), "width_m": np.full(n, 2.0),
                  "height_m": np.full(n, 1.5), "heading_rad": np.zeros(n), "score": np.full(n, 0.5)}).write_parquet(path)  # fmt: skip
    return path


def cases(root: Path, quick: bool) -> list[tuple[str, Callable[[], list[str]]]]:
    out = [
        ("idle: avsim info of the sample", lambda: ["info", str(root / "s")]),
        ("clipgt dictionary bomb: 4800 rows of one 1 MiB string (4.8 GB decoded)", lambda: ["convert", str(_clip(root / "c1", _string_bomb(4800, 1))), str(root / "o1"), "--from", "clipgt"]),
        ("clipgt list bomb: one row of 80 M doubles (640 MB decoded)", lambda: ["convert", str(_clip(root / "c2", _list_bomb(80_000_000))), str(root / "o2"), "--from", "clipgt"]),
        ("eval let: 2,000,000 x 2,000,000 boxes in one frame", lambda: ["eval", "let", "--gt", str(_boxes(root / "g.parquet", 2_000_000)), "--pred", str(root / "g.parquet")]),
        ("sim --size 8192x8192 --cameras all", lambda: ["sim", str(root / "s"), str(root / "o3"), "--size", "8192x8192", "--cameras", "all"]),
        ("sim: a policy returning 100,000 poses", lambda: ["sim", str(root / "s"), str(root / "o4"), "--policy", "sim_policies:many_poses", "--steps", "5"]),
    ]  # fmt: skip
    if not quick:
        out += [
            ("clipgt honest obstacle table: 10,000,000 rows (over the limit)", lambda: ["convert", str(_clip(root / "c3", _honest_obstacles(10_000_000))), str(root / "o5"), "--from", "clipgt"]),
            ("clipgt honest obstacle table: 2,000,000 rows (the limit; converted)", lambda: ["convert", str(_clip(root / "c4", _honest_obstacles(2_000_000))), str(root / "o6"), "--from", "clipgt"]),
        ]  # fmt: skip
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Skip the tables of millions of honest rows.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run([sys.executable, "-m", "avsim.cli.main", "sample", str(root / "s")], check=True, capture_output=True)
        print(f"{'case':70s} {'exit':>4s} {'peak MiB':>9s}  last line")
        for name, build in cases(root, args.quick):
            argv = build()
            code, peak, line = _run(argv, root)
            print(f"{name:70s} {code:4d} {peak:9.0f}  {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
