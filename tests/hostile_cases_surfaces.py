"""Hostile cases of the surfaces added since the first trial (issue 52): names that would become paths,
compact label tables, ClipGT clips, `avsim sim` and `avsim run sim`, `eval detect` and `eval report`.

Each case is `(name, command as documented, build(world) -> argv, exit code, text of the error line)`;
`tests/hostile_cases.py` makes them `Case`s (its `World`: `root`, `scenario`, `video`, `render` with
labels, `canary`) and renders them into docs/hostile_inputs.md with `SURFACE_LIMITS`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

CLIP = "avsim_sample_seed0"
FRONT = "camera_front_wide_120fov"

SURFACE_LIMITS = [
    "| names that become file names (cameras, clips in `index.json`, variants, manifest items) | 1 to 100 ASCII letters, digits, `_`, `-`, `.`, not starting with `.` or `-`; every writer joins them with `join_names` (one path component, inside OUT) | `avsim.core.names.MAX_NAME_CHARS`, `NAME_PATTERN` |",
    "| every parquet table (scenario, ClipGT, labels, detections, lanes, manifests) | rows and decoded bytes counted from its page headers before decoding (the footer is not trusted); ClipGT: 2,000,000 rows, 512 MiB decoded; label tables: 10,000,000 rows, 1 GiB; box tables 5,000,000 rows and lane tables 20,000,000 points, 2 GiB | `avsim.core.safe_parquet.measure`, `clipgt_schema.MAX_DECODED_BYTES`, `compact_tables.LABEL_TABLE_LIMITS`, `detections.BOX_TABLE_LIMITS`, `lane_io.LANE_TABLE_LIMITS` |",
    "| `avsim sim` | `--steps` (or the scenario's span) 36,000; `--duration` 36,000 steps at `--rate`; `--rate` 100; `--budget` 600 s; `--size` 8192; cameras x size 2048 MiB of rendering a step | `avsim.sim.stepper.MAX_SIM_STEPS`, `avsim.sim.run.MAX_BUDGET_S`, `MAX_SIM_RENDER_MIB` |",
    "| a policy's trajectory | 1000 poses, 60 s ahead, 10 km from the ego (else the episode ends: `policy_error`) | `avsim.sim.actions.MAX_TRAJECTORY_POSES`, `MAX_HORIZON_S`, `MAX_REACH_M` |",
    "| `avsim run sim --seeds` | 1000 seeds, counted before they are made | `avsim.jobs.cli.MAX_SEEDS` |",
    "| LET / lane matching | 1e9 same-frame box pairs a class (in blocks of 2e6); 2e7 lane pairs kept | `avsim.evaluation.let_ap.MAX_LET_PAIRS`, `MAX_STORED_PAIRS` |",
    "| label `index.json` | 256 MiB, 1,000,000 frames; every field checked | `avsim.core.label_folders.read_index` |",
]  # fmt: skip


# ----------------------------------------------------------------------------- builders
def write_input(w: Any, name: str, data: bytes | str) -> Path:
    path = Path(w.root) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _scenario(w: Any, change: Callable[[dict[str, Any]], object] | None = None) -> Path:
    """A copy of the sample whose scenario.json went through `change`."""
    dst = Path(w.root) / "s"
    if not dst.exists():
        shutil.copytree(w.scenario, dst)
    if change is not None:
        doc = json.loads((dst / "scenario.json").read_text())
        change(doc)
        (dst / "scenario.json").write_text(json.dumps(doc))
    return dst


def _camera_named(name: str) -> Callable[[dict[str, Any]], object]:
    return lambda doc: doc["rig"]["cameras"][0].update(name=name)


def _labels(w: Any, change: Callable[[Path], object] | None = None) -> Path:
    """A copy of the prepared render's clip folder (videos and compact labels); returns its label folder."""
    clip = Path(w.root) / CLIP
    if not clip.exists():
        shutil.copytree(Path(w.render) / CLIP, clip, symlinks=True)
    if change is not None:
        change(clip / "labels")
    return clip / "labels"


def _cut(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_bytes((folder / name).read_bytes()[: (folder / name).stat().st_size // 2])


def _gone(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).unlink()


def _to_dev_zero(name: str) -> Callable[[Path], None]:
    return lambda folder: ((folder / name).unlink(), (folder / name).symlink_to("/dev/zero"))


def _frame(name: str, change: Callable[[Any], Any]) -> Callable[[Path], None]:
    """Rewrite label table `name` through `change(polars frame)`."""

    def apply(folder: Path) -> None:
        import polars as pl

        change(pl.read_parquet(folder / name)).write_parquet(folder / name)

    return apply


def _as_text(column: str) -> Callable[[Any], Any]:
    import polars as pl

    return lambda df: df.with_columns(pl.col(column).cast(pl.List(pl.String)) if isinstance(df.schema[column], pl.List)
                                      else pl.col(column).arr.to_list().cast(pl.List(pl.String)))  # fmt: skip


def _nan(column: str, rows: str = "first") -> Callable[[Any], Any]:
    import numpy as np
    import polars as pl

    def change(df: Any) -> Any:
        values = np.asarray(df[column].to_list(), np.float64)
        values[: 1 if rows == "first" else len(values)] = np.nan
        return df.with_columns(pl.Series(column, values, dtype=df.schema[column]))

    return change


def _index(change: Callable[[dict[str, Any]], object]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        doc = json.loads((folder / "index.json").read_text())
        change(doc)
        (folder / "index.json").write_text(json.dumps(doc))

    return apply


def _boxes_table(w: Any, name: str, scores: list[float], n: int = 0) -> Path:
    """A box table: the given scores at frame 0 (or `n` identical boxes at frame 0 when n > 0)."""
    import numpy as np
    import polars as pl

    k = n or len(scores)
    rows = {"frame": np.zeros(k, np.int64), "class": ["vehicle"] * k, "x_m": np.full(k, 10.0), "y_m": np.zeros(k), "z_m": np.full(k, 0.8),
            "length_m": np.full(k, 4.0), "width_m": np.full(k, 2.0), "height_m": np.full(k, 1.5), "heading_rad": np.zeros(k),
            "score": np.full(k, 0.5) if n else np.asarray(scores, np.float64)}  # fmt: skip
    path = Path(w.root) / name
    pl.DataFrame(rows).write_parquet(path)
    return path


FTHETA = {"Model": "ftheta", "polynomial": "0 0.00083 0 0 0 0", "polynomial-type": "pixeldistance-to-angle", "width": "1920",
          "height": "1080", "cx": "960", "cy": "540"}  # fmt: skip


def _clip(w: Any, sensors: list[dict[str, Any]] | None = None, rig_json: str | None = None,
          tables: dict[str, Callable[[Path], object]] | None = None) -> Path:  # fmt: skip
    """A ClipGT folder `clip/c.*.parquet`: calibration (`rig_json` or the sensors), 2 ego poses, then `tables` (name -> make(path))."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(w.root) / "clip"
    folder.mkdir(parents=True, exist_ok=True)
    text = rig_json if rig_json is not None else json.dumps({"rig": {"sensors": sensors or [{"name": "camera:front:wide:120fov", "properties": FTHETA}]}})
    row = {"key": {"clip_id": "c", "timestamp_micros": -1}, "calibration_estimate": {"name": "x", "rig_json": text}}
    pq.write_table(pa.Table.from_pylist([row]), folder / "c.calibration_estimate.parquet")
    pose = {"location": {"x": 0.0, "y": 0.0, "z": 0.0}, "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}}
    rows = [{"key": {"clip_id": "c", "timestamp_micros": t}, "egomotion_estimate": pose} for t in (0, 100_000)]
    pq.write_table(pa.Table.from_pylist(rows), folder / "c.egomotion_estimate.parquet")
    for name, make in (tables or {}).items():
        make(folder / f"c.{name}.parquet")
    return folder


def _string_bomb(path: Path) -> None:
    """600 rows of one 1 MB string, dictionary-encoded: a few kB on disk, 600 MB decoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    column = pa.DictionaryArray.from_arrays(pa.array([0] * 600, pa.int32()), pa.array(["x" * 1_000_000]))
    pq.write_table(pa.table({"obstacle": column}), path, use_dictionary=True, compression="zstd")


def _detect_side(w: Any, name: str, videos_to: str | None = None) -> Path:
    """One side of a report: a detections table (and `videos` linked to `videos_to`)."""
    side = Path(w.root) / name
    side.mkdir(parents=True, exist_ok=True)
    _boxes_table(w, f"{name}/detections.parquet", [0.5])
    if videos_to is not None:
        (side / "videos").symlink_to(videos_to, target_is_directory=True)
    return side


def _dataset(w: Any) -> Path:
    ds = Path(w.root) / "ds"
    ds.mkdir(exist_ok=True)
    shutil.copytree(w.scenario, ds / "s")
    return ds


def _variants(w: Any, name: str) -> Path:
    folder = Path(w.root) / "ev"
    (folder / "v").mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps({"format": "avsim-edit-manifest", "variants": [{"folder": "v", "name": name}]}))
    return folder


# ----------------------------------------------------------------------------- the cases
def _let(what: str, change: Callable[[Path], None], expect: str) -> tuple[Any, ...]:
    return (f"let compact {what}", f"avsim eval let --gt S --pred LABELS  ({what})",
            lambda w: ["eval", "let", "--gt", str(w.scenario), "--pred", str(_labels(w, change))], 1, expect)  # fmt: skip


def _lanes(what: str, change: Callable[[Path], None], expect: str) -> tuple[Any, ...]:
    return (f"lanes compact {what}", f"avsim eval lanes --gt LABELS/openlane/{FRONT} --pred S  ({what})",
            lambda w: ["eval", "lanes", "--gt", str(_labels(w, change) / "openlane" / FRONT), "--pred", str(w.scenario)], 1, expect)  # fmt: skip


def _mmdet3d(what: str, change: Callable[[Path], None], expect: str) -> tuple[Any, ...]:
    return (f"mmdet3d {what}", f"avsim labels-mmdet3d OUT.pkl LABELS  ({what})",
            lambda w: ["labels-mmdet3d", str(Path(w.root) / "i.pkl"), str(_labels(w, change))], 1, expect)  # fmt: skip


NAME_CASES = [
    ("camera name with a prefix", "avsim render S OUT  (rig camera cam_../../x)",
     lambda w: ["render", str(_scenario(w, _camera_named("cam_../../x"))), str(Path(w.root) / "out"), "--frames", "2"], 1,
     "rig.cameras[0].name: 'cam_../../x' is not a safe file name"),
    ("camera name absolute", "avsim labels S OUT --label-files standard  (rig camera /tmp/x)",
     lambda w: ["labels", str(_scenario(w, _camera_named("/tmp/x"))), str(Path(w.root) / "out"), "--label-files", "standard"], 1,
     "rig.cameras[0].name: '/tmp/x' is not a safe file name"),
    ("validate camera name", "avsim validate S  (rig camera x/../../y)",
     lambda w: ["validate", str(_scenario(w, _camera_named("x/../../y")))], 1, "rig.cameras[0].name: 'x/../../y' is not a safe file name"),
    ("clipgt sensor traversal", "avsim convert CLIP OUT --from clipgt  (rig sensor camera:../../x)",
     lambda w: ["convert", str(_clip(w, [{"name": "camera:../../x", "properties": FTHETA}])), str(Path(w.root) / "o"), "--from", "clipgt"], 1,
     "rig.sensors[0].name: 'camera_../../x' is not a safe file name"),
    ("labels index video clip traversal", "avsim labels-mmdet3d OUT.pkl LABELS  (index.json frames[0].video_clip ../../x)",
     lambda w: ["labels-mmdet3d", str(Path(w.root) / "i.pkl"), str(_labels(w, _index(lambda d: d["frames"][0].update(video_clip="../../x"))))], 1,
     "frames[0].video_clip: '../../x' is not a safe file name"),
    ("render variant name traversal", "avsim render EDIT_OUT OUT  (manifest variant name ../x)",
     lambda w: ["render", str(_variants(w, "../x")), str(Path(w.root) / "out")], 1, "variants[0].name: '../x' is not a safe file name"),
    ("run manifest item name traversal", "avsim run convert items.csv OUT  (name ../x)",
     lambda w: ["run", "convert", str(write_input(w, "items.csv", f"path,name\n{w.scenario},../x\n")), str(Path(w.root) / "out")], 1,
     "row 1: name: '../x' is not a safe file name"),
]  # fmt: skip

LABEL_TABLE_CASES = [
    _let("boxes3d.parquet cut in half", _cut("boxes3d.parquet"), "boxes3d.parquet: file: unreadable parquet"),
    _let("boxes3d.parquet deleted", _gone("boxes3d.parquet"), "boxes3d.parquet: file: missing"),
    _let("boxes3d.parquet centre as text", _frame("boxes3d.parquet", _as_text("center_ego_m")), "boxes3d.parquet: center_ego_m: has type"),
    _let("boxes3d.parquet -> /dev/zero", _to_dev_zero("boxes3d.parquet"), "boxes3d.parquet: file: is a character device"),
    _lanes("lanes.parquet cut in half", _cut("lanes.parquet"), "lanes.parquet: file: unreadable parquet"),
    _lanes("lanes.parquet deleted", _gone("lanes.parquet"), "lanes.parquet: file: missing"),
    _lanes("lanes.parquet x_m as text", _frame("lanes.parquet", _as_text("x_m")), "lanes.parquet: x_m: has type"),
    _lanes("lanes.parquet -> /dev/zero", _to_dev_zero("lanes.parquet"), "lanes.parquet: file: is a character device"),
    _mmdet3d("camera_poses.parquet cut in half", _cut("camera_poses.parquet"), "camera_poses.parquet: file: unreadable parquet"),
    _mmdet3d("boxes3d.parquet deleted", _gone("boxes3d.parquet"), "boxes3d.parquet: file: missing"),
    _mmdet3d("camera_poses.parquet poses as text", _frame("camera_poses.parquet", _as_text("ego_SE3_camera")), "camera_poses.parquet: ego_SE3_camera: has type"),
    _mmdet3d("camera_poses.parquet -> /dev/zero", _to_dev_zero("camera_poses.parquet"), "camera_poses.parquet: file: is a character device"),
    _mmdet3d("a NaN box centre", _frame("boxes3d.parquet", _nan("center_ego_m")), "boxes3d.parquet: center_ego_m: row 0: NaN or infinite"),
    _mmdet3d("every camera pose NaN", _frame("camera_poses.parquet", _nan("ego_SE3_camera", "all")), "camera_poses.parquet: ego_SE3_camera: row 0: NaN or infinite"),
    ("let scores above 1", "avsim eval let --gt S --pred boxes.parquet  (score 5.0)",
     lambda w: ["eval", "let", "--gt", str(w.scenario), "--pred", str(_boxes_table(w, "b.parquet", [5.0]))], 1, "score: row 0: 5 outside [0, 1]"),
    ("let scores below 0", "avsim eval let --gt S --pred boxes.parquet  (score -3.0)",
     lambda w: ["eval", "let", "--gt", str(w.scenario), "--pred", str(_boxes_table(w, "b.parquet", [-3.0]))], 1, "score: row 0: -3 outside [0, 1]"),
    ("let box pairs", "avsim eval let --gt gt.parquet --pred boxes.parquet  (200,000 x 200,000 boxes in one frame)",
     lambda w: ["eval", "let", "--gt", str(_boxes_table(w, "g.parquet", [], 200_000)), "--pred", str(_boxes_table(w, "b.parquet", [], 200_000))], 1,
     "40000000000 box pairs to compare"),
]  # fmt: skip

CLIPGT_CASES = [
    ("clipgt obstacle table -> /dev/zero", "avsim convert CLIP OUT --from clipgt  (c.obstacle.parquet -> /dev/zero)",
     lambda w: ["convert", str(_clip(w, tables={"obstacle": lambda p: p.symlink_to("/dev/zero")})), str(Path(w.root) / "o"), "--from", "clipgt"], 1,
     "c.obstacle.parquet: file: is a character device"),
    ("clipgt lane table FIFO", "avsim convert CLIP OUT --from clipgt  (c.lane_line.parquet a named pipe)",
     lambda w: ["convert", str(_clip(w, tables={"lane_line": lambda p: os.mkfifo(p)})), str(Path(w.root) / "o"), "--from", "clipgt"], 1,
     "c.lane_line.parquet: file: is a named pipe"),
    ("clipgt rig nested", "avsim convert CLIP OUT --from clipgt  (rig_json of 200,000 nested brackets)",
     lambda w: ["convert", str(_clip(w, rig_json="[" * 200_000 + "]" * 200_000)), str(Path(w.root) / "o"), "--from", "clipgt"], 1,
     "calibration_estimate.rig_json: nested too deeply"),
    ("clipgt f-theta diverging", "avsim convert CLIP OUT --from clipgt  (polynomial 0 1e-3 1e300 0 0 0)",
     lambda w: ["convert", str(_clip(w, [{"name": "camera:front:wide:120fov", "properties": {**FTHETA, "polynomial": "0 1e-3 1e300 0 0 0"}}])),
                str(Path(w.root) / "o"), "--from", "clipgt"], 1, "the polynomial diverges"),
    ("clipgt dictionary bomb", "avsim convert CLIP OUT --from clipgt  (obstacle: 600 rows of one 1 MB string, a few kB on disk)",
     lambda w: ["convert", str(_clip(w, tables={"obstacle": _string_bomb})), str(Path(w.root) / "o"), "--from", "clipgt"], 1,
     "decodes to more than 536870912 bytes (counted from its pages"),
]  # fmt: skip

SIM_CASES = [
    ("sim steps huge", "avsim sim S OUT --steps 1000000000", lambda w: ["sim", str(w.scenario), str(Path(w.root) / "o"), "--steps", "1000000000"], 2,
     "--steps: must be 1 to 36000"),
    ("sim duration huge", "avsim sim S OUT --duration 1e30", lambda w: ["sim", str(w.scenario), str(Path(w.root) / "o"), "--duration", "1e30"], 2,
     "--duration: must be > 0 and at most 36000 steps"),
    ("sim budget huge", "avsim sim S OUT --budget 1e300", lambda w: ["sim", str(w.scenario), str(Path(w.root) / "o"), "--budget", "1e300"], 2,
     "--budget: must be in (0, 600]"),
    ("sim cameras too large", "avsim sim S OUT --size 8192x8192 --cameras all",
     lambda w: ["sim", str(w.scenario), str(Path(w.root) / "o"), "--size", "8192x8192", "--cameras", "all"], 1,
     "7 cameras at 8192x8192 need about 6981 MiB to render each step, more than the 2048"),
    ("sim policy needs an argument", "avsim sim S OUT --policy sim_policies:NeedsArgument",
     lambda w: ["sim", str(w.scenario), str(Path(w.root) / "o"), "--policy", "sim_policies:NeedsArgument"], 1,
     "the class cannot be made without arguments: TypeError"),
    ("run sim seeds huge", "avsim run sim DATASET OUT --seeds 0:100000000",
     lambda w: ["run", "sim", str(_dataset(w)), str(Path(w.root) / "o"), "--seeds", "0:100000000"], 2, "100000000 seeds, more than the 1000"),
    ("run sim steps huge", "avsim run sim DATASET OUT --steps 1000000000",
     lambda w: ["run", "sim", str(_dataset(w)), str(Path(w.root) / "o"), "--steps", "1000000000"], 1, "steps: must be 1 to 36000"),
]  # fmt: skip

DETECT_CASES = [
    ("detect detector raises", "avsim eval detect CLIP OUT --detector hostile_detectors:explodes",
     lambda w: ["eval", "detect", str(Path(w.render) / CLIP), str(Path(w.root) / "d"), "--detector", "hostile_detectors:explodes"], 1,
     "--detector: hostile_detectors:explodes: raised RuntimeError on avsim_sample_seed0 frame 0"),
    ("detect os:system", "avsim eval detect CLIP OUT --detector os:system",
     lambda w: ["eval", "detect", str(Path(w.render) / CLIP), str(Path(w.root) / "d"), "--detector", "os:system"], 1,
     "--detector: os:system: raised TypeError"),
    ("detect scores outside [0, 1]", "avsim eval detect CLIP OUT --detector hostile_detectors:bad_scores",
     lambda w: ["eval", "detect", str(Path(w.render) / CLIP), str(Path(w.root) / "d"), "--detector", "hostile_detectors:bad_scores"], 1,
     "scores must be in [0, 1], got 5"),
    ("report gt missing", "avsim eval report --real R --generated G --gt missing/ --out OUT",
     lambda w: ["eval", "report", "--real", str(_detect_side(w, "r")), "--generated", str(_detect_side(w, "g")), "--gt", str(Path(w.root) / "nope"),
                "--out", str(Path(w.root) / "rep"), "--no-video-metrics"], 1, "nope: --gt: not found or not a folder"),
    ("report videos link out", "avsim eval report --real R --generated G --out OUT  (R/videos -> /etc)",
     lambda w: ["eval", "report", "--real", str(_detect_side(w, "r", "/etc")), "--generated", str(_detect_side(w, "g")), "--out", str(Path(w.root) / "rep")], 1,
     "videos: 'videos' resolves outside"),
]  # fmt: skip

SURFACE_CASES = [*NAME_CASES, *LABEL_TABLE_CASES, *CLIPGT_CASES, *SIM_CASES, *DETECT_CASES]
