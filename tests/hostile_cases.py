"""The hostile-input suite: every case a command line, what it is given, and the one-line error.

`tests/test_hostile_inputs.py` runs each case; `docs/hostile_inputs.md` is this table rendered
by `render_table()` (a test keeps the two equal; regenerate with
`python tests/hostile_cases.py > docs/hostile_inputs.md`). A case passes when the command exits
with the stated code, prints no traceback, prints exactly one `error:` line (exit 1) or a usage
message (exit 2) containing the expected text, runs no planted code, and writes no output.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hostile_cases_maps import MAP_CASES, MAP_LIMITS
from hostile_cases_openscenario import OPENSCENARIO_CASES, OPENSCENARIO_LIMITS
from hostile_cases_surfaces import SURFACE_CASES, SURFACE_LIMITS


@dataclass(frozen=True)
class World:
    """Paths the cases build their inputs in: a sample scenario, a short render, scratch space."""

    root: Path  # scratch folder of one case
    scenario: Path  # a pristine sample scenario (copy before corrupting)
    video: Path  # one rendered control video (20 frames, 320x180, cosmos front wide)
    render: Path  # its render folder
    canary: Path  # a planted gadget creates this file


@dataclass(frozen=True)
class Case:
    name: str
    command: str  # as shown in the docs
    build: Callable[[World], list[str]]
    code: int
    expect: str  # text the error line must contain


class Gadget:
    """Unpickling this would create the canary (what an attacker's file does)."""

    def __init__(self, canary: Path) -> None:
        self.canary = canary

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.canary}",)


# ----------------------------------------------------------------------------- input builders
def _write(w: World, name: str, data: bytes | str) -> Path:
    path = w.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _scenario(w: World, change: Callable[[Path], None] | None = None) -> Path:
    import shutil

    dst = w.root / "s"
    if not dst.exists():
        shutil.copytree(w.scenario, dst)
    if change is not None:
        change(dst)
    return dst


def _header(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        doc = json.loads((folder / "scenario.json").read_text())
        change(doc)
        (folder / "scenario.json").write_text(json.dumps(doc))

    return apply


def _bytes(name: str, change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        (folder / name).write_bytes(change((folder / name).read_bytes()))

    return apply


def _scramble(data: bytes) -> bytes:
    mid = len(data) // 2
    return data[:mid] + bytes((b * 7 + 13) % 256 for b in data[mid : mid + 2000]) + data[mid + 2000 :]


def _deep(n: int = 200_000) -> str:
    return "[" * n + "]" * n


def _tar(w: World, name: str, members: list[tarfile.TarInfo]) -> Path:
    path = w.root / name
    with tarfile.open(path, "w") as tar:
        for info in members:
            tar.addfile(info, io.BytesIO(b"{}") if info.isfile() else None)
    return path


def _rdshq(w: World, members: list[tarfile.TarInfo]) -> Path:
    """An RDS-HQ root whose vehicle_pose tar holds `members`."""
    (w.root / "rds" / "vehicle_pose").mkdir(parents=True)
    _tar(w, "rds/vehicle_pose/clip.tar", members)
    return w.root / "rds"


def _member(name: str, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = 2 if kind == tarfile.REGTYPE else 0
    if kind == tarfile.SYMTYPE:
        info.linkname = "/etc/passwd"
    return info


def _yaml_bomb() -> str:
    lines = ["version: 1", 'a: &a ["l","l","l","l","l","l","l","l","l"]']
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{cur}: &{cur} [{','.join([f'*{prev}'] * 9)}]")
    return "\n".join([*lines, "ops: *i", ""])


def _box_table(w: World, name: str, rows: dict[str, list[object]]) -> Path:
    import polars as pl

    path = w.root / name
    pl.DataFrame(rows).write_parquet(path)
    return path


def _boxes(cls: str = "vehicle", size: float = 4.0, frame: int = 0) -> dict[str, list[object]]:
    return {"frame": [frame], "class": [cls], "x_m": [10.0], "y_m": [0.0], "z_m": [0.8], "length_m": [size],
            "width_m": [2.0], "height_m": [1.5], "heading_rad": [0.0], "score": [0.9]}  # fmt: skip


def _waymo(w: World, name: str, typ: int) -> Path:
    from waymo_open_dataset.protos import metrics_pb2

    objects = metrics_pb2.Objects()
    o = objects.objects.add()
    o.object.type = typ
    o.object.box.length = o.object.box.width = o.object.box.height = 1.0
    return _write(w, name, objects.SerializeToString())


def _nuscenes(w: World, name: str, detection_name: str) -> Path:
    det = {"translation": [1, 2, 0], "size": [2, 4, 1.5], "rotation": [1, 0, 0, 0], "detection_score": 0.5,
           "sample_token": "t", "detection_name": detection_name}  # fmt: skip
    return _write(w, name, json.dumps({"results": {"t": [det]}}))


def _video_clip(w: World, data: bytes, name: str = "bad.mp4") -> Path:
    return _write(w, name, data)


def _pickle_bomb() -> bytes:
    return b"\x80\x04\x8e" + struct.pack("<Q", 10**12) + b"ab"  # BINBYTES8 claiming 1e12 bytes


def _fifo(w: World, name: str) -> Path:
    path = w.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _link(w: World, name: str, target: str = "/dev/zero") -> Path:
    path = w.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height (no image data: only the header is ever read)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", 0)


def _encoded(w: World, name: str, width: int, height: int, frames: int = 2) -> Path:
    """A tiny H.264 mp4 of `frames` black frames (e.g. 8200x16: wider than frames may be)."""
    import av
    import numpy as np

    path = w.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format="mp4") as c:
        stream = c.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for _ in range(frames):
            c.mux(stream.encode(av.VideoFrame.from_ndarray(np.zeros((height, width, 3), np.uint8), format="rgb24")))
        c.mux(stream.encode(None))
    return path


def _audio_only(w: World, name: str) -> Path:
    """An mp4 holding 0.1 s of silence and no video stream."""
    import av
    import numpy as np

    path = w.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format="mp4") as c:
        stream = c.add_stream("aac", rate=48000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 4800), np.float32), format="fltp", layout="mono")
        frame.sample_rate = 48000
        c.mux(stream.encode(frame))
        c.mux(stream.encode(None))
    return path


def _half(w: World, name: str = "half.mp4") -> Path:
    """The rendered clip cut at half its bytes: the container lists 20 frames, the data holds fewer."""
    data = w.video.read_bytes()
    return _write(w, name, data[: len(data) // 2])


def _table(name: str, change: Callable[[object], object]) -> Callable[[Path], None]:
    """Rewrite one table of the scenario through `change(polars frame)`."""

    def apply(folder: Path) -> None:
        import polars as pl

        change(pl.read_parquet(folder / name)).write_parquet(folder / name)  # type: ignore[attr-defined]

    return apply


def _set(column: str, row: int, value: float) -> Callable[[object], object]:
    def change(df: object) -> object:
        import polars as pl

        assert isinstance(df, pl.DataFrame)
        dtype = df.schema[column]
        values = df[column].to_list()
        values[row] = [value, *values[row][1:]] if isinstance(dtype, pl.List) else value
        return df.with_columns(pl.Series(column, values, dtype=dtype))

    return change


def _many_rows(folder: Path) -> None:
    import polars as pl

    pl.DataFrame({"timestamp_ns": pl.zeros(20_000_001, pl.Int8, eager=True)}).write_parquet(folder / "ego.parquet")


def _edit(w: World, text: str, name: str = "e.yaml") -> list[str]:
    return ["edit", str(_scenario(w)), str(_write(w, name, text)), str(w.root / "o")]


def _sweep_edit(sweep: str, name: str = "", op: str = "  - op: crop\n    start_s: 0\n") -> str:
    return f"version: 1\n{name}sweep:\n{sweep}ops:\n{op}"


def _overlay(w: World, make: Callable[[World], Path]) -> list[str]:
    """`avsim render S OUT --overlay DIR` of one camera, DIR holding what `make` builds."""
    folder = make(w).parent
    return ["render", str(_scenario(w)), str(w.root / "out"), "--overlay", str(folder), "--cameras", "camera_front_wide_120fov",
            "--frames", "5", "--size", "320x180", "--overlay-fps", "30"]  # fmt: skip


def _variants(w: World, entry: dict[str, str], link_out: bool = False) -> Path:
    """An `avsim edit` output whose manifest lists `entry`: its folder a link out of it, or an empty folder."""
    folder = w.root / "ev"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps({"format": "avsim-edit-manifest", "variants": [entry]}))
    if link_out:
        (folder / entry["folder"]).symlink_to(_scenario(w), target_is_directory=True)
    else:
        (folder / entry["folder"]).mkdir()
    return folder


# ----------------------------------------------------------------------------- the cases
def _info(name: str, what: str, change: Callable[[Path], None], expect: str) -> Case:
    return Case(name, f"avsim info S  ({what})", lambda w: ["info", str(_scenario(w, change))], 1, expect)


def _render(name: str, opts: list[str], code: int, expect: str) -> Case:
    return Case(name, "avsim render S OUT " + " ".join(opts), lambda w: ["render", str(_scenario(w)), str(w.root / "out"), *opts], code, expect)


SCENARIO_CASES = [
    Case("missing scenario", "avsim info missing/", lambda w: ["info", str(w.root / "missing")], 1, "scenario: not found"),
    Case("scenario is a file", "avsim info file.txt", lambda w: ["info", str(_write(w, "f.txt", "x"))], 1, "not a folder"),
    Case("empty folder", "avsim info empty/", lambda w: ["info", str(_write(w, "e/.keep", "") and w.root / "e")], 1, "scenario.json: file: missing"),
    _info("truncated header", "scenario.json cut after 40 bytes", _bytes("scenario.json", lambda d: d[:40]), "scenario.json: json: truncated or invalid JSON"),
    _info("nested header", "scenario.json of 200,000 nested brackets", lambda f: (f / "scenario.json").write_text(_deep()), "scenario.json: json: nested too deeply"),
    _info("header not an object", "scenario.json is []", lambda f: (f / "scenario.json").write_text("[]"), "top level must be an object"),
    _info("NaN in header", "scenario.json holds NaN", _bytes("scenario.json", lambda d: d.replace(b'"metadata": {', b'"metadata": {"x": NaN, ', 1)), "NaN is not valid JSON"),
    _info("schema version string", 'schema_version "1"', _header(lambda d: d.update(schema_version="1")), "schema_version: must be an integer"),
    _info("wrong format name", 'format "other"', _header(lambda d: d.update(format="other")), "format: expected"),
    _info("table missing", "agents.parquet deleted", lambda f: (f / "agents.parquet").unlink(), "agents.parquet: file: missing"),
    _info("table truncated", "ego.parquet cut in half", _bytes("ego.parquet", lambda d: d[: len(d) // 2]), "ego.parquet"),
    _info("table empty", "lights.parquet zero bytes", _bytes("lights.parquet", lambda d: b""), "lights.parquet"),
    _info("table is JSON", "map_crosswalks.parquet holds JSON", _bytes("map_crosswalks.parquet", lambda d: b"{}"), "map_crosswalks.parquet"),
    _info("table corrupted", "2,000 scrambled bytes in agents.parquet", _bytes("agents.parquet", _scramble), "agents.parquet"),
    _info("digest malformed", "tables.agents.parquet.sha256 is 12", _header(lambda d: d["tables"]["agents.parquet"].update(sha256=12)), "sha256: must be 64 hex digits"),
    _info("row count lies", "tables.ego.parquet.rows is 3", _header(lambda d: d["tables"]["ego.parquet"].update(rows=3)), "ego.parquet"),
    _info("unknown table", "tables lists x.parquet", _header(lambda d: d["tables"].update({"x.parquet": {"rows": 0}})), "unknown table 'x.parquet'"),
    _info("camera size zero", "rig camera width_px 0", _header(lambda d: d["rig"]["cameras"][0].update(width_px=0)), "width_px"),
    _info("camera model unknown", 'rig camera model "fisheye9"', _header(lambda d: d["rig"]["cameras"][0].update(model="fisheye9")), "model"),
    Case("validate corrupted", "avsim validate S  (scrambled agents.parquet)", lambda w: ["validate", str(_scenario(w, _bytes("agents.parquet", _scramble)))], 1, "agents.parquet"),
    Case("diff missing side", "avsim diff S missing/", lambda w: ["diff", str(_scenario(w)), str(w.root / "missing")], 1, "not found"),
    Case("preview corrupted", "avsim preview S OUT  (truncated ego.parquet)", lambda w: ["preview", str(_scenario(w, _bytes("ego.parquet", lambda d: d[:100]))), str(w.root / "p.mp4")], 1, "ego.parquet"),
]

RENDER_CASES = [
    _render("size huge", ["--size", "100000x100000"], 2, "at most 8192"),
    _render("size odd", ["--size", "641x360"], 2, "even"),
    _render("size garbage", ["--size", "big"], 2, "expected WxH"),
    _render("fps huge", ["--fps", "1e9"], 2, "at most 1000"),
    _render("fps zero", ["--fps", "0"], 2, "--fps"),
    _render("fps nan", ["--fps", "nan"], 2, "--fps"),
    _render("frames out of range", ["--frames", "5000:6000"], 2, "no frames selected"),
    _render("frames garbage", ["--frames", "a:b"], 2, "expected N or A:B"),
    _render("camera unknown", ["--cameras", "nope"], 1, "nope: no such camera"),
    _render("workers zero", ["--workers", "0"], 2, "--workers: must be >= 1"),
    _render("layout unknown", ["--layout", "weird"], 2, "--layout"),
    _render("rig unknown", ["--rig", "weird"], 2, "--rig"),
    Case("render out is a file", "avsim render S file.txt", lambda w: ["render", str(_scenario(w)), str(_write(w, "o.txt", "x"))], 1, "exists and is not a folder"),
    Case("render corrupted", "avsim render S OUT  (scrambled agents.parquet)", lambda w: ["render", str(_scenario(w, _bytes("agents.parquet", _scramble))), str(w.root / "out")], 1, "agents.parquet"),
]

EDIT_CASES = [
    Case("yaml bomb", "avsim edit S bomb.yaml OUT  (9 levels of 9 aliases)", lambda w: ["edit", str(_scenario(w)), str(_write(w, "b.yaml", _yaml_bomb())), str(w.root / "o")], 1, "YAML bomb"),
    Case("yaml nested", "avsim edit S deep.yaml OUT  (50,000 nested lists)", lambda w: ["edit", str(_scenario(w)), str(_write(w, "d.yaml", "ops: " + _deep(50_000))), str(w.root / "o")], 1, "nested too deeply"),
    Case("edit not utf8", "avsim edit S latin1.yaml OUT", lambda w: ["edit", str(_scenario(w)), str(_write(w, "l.yaml", b"version: 1\nname: \xff\xfe\n")), str(w.root / "o")], 1, "l.yaml"),
    Case("edit unknown op", "avsim edit S ops.yaml OUT  (op: explode)", lambda w: ["edit", str(_scenario(w)), str(_write(w, "u.yaml", "version: 1\nops:\n  - op: explode\n")), str(w.root / "o")], 1, "unknown op 'explode'"),
    Case("edit file missing", "avsim edit S missing.yaml OUT", lambda w: ["edit", str(_scenario(w)), str(w.root / "missing.yaml"), str(w.root / "o")], 1, "missing.yaml"),
    Case("edit out is a file", "avsim edit S ok.yaml file.txt", lambda w: ["edit", str(_scenario(w)), str(_write(w, "k.yaml", "version: 1\nops: []\n")), str(_write(w, "o.txt", "x"))], 1, "exists and is not a folder"),
    Case("edit json invalid", "avsim edit S bad.json OUT", lambda w: ["edit", str(_scenario(w)), str(_write(w, "e.json", '{"version": 1, "ops": [}')), str(w.root / "o")], 1, "e.json"),
]

def _clipgt(w: World, calibration: bytes | None = None, rig_json: str = "{}", egomotion: bool = True) -> Path:
    """A ClipGT folder ``clip/c.*.parquet``: the calibration as `calibration` bytes, or a one-row table holding `rig_json`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = w.root / "clip"
    folder.mkdir(parents=True, exist_ok=True)
    if calibration is not None:
        (folder / "c.calibration_estimate.parquet").write_bytes(calibration)
    else:
        row = {"key": {"clip_id": "c", "timestamp_micros": -1}, "calibration_estimate": {"name": "x", "rig_json": rig_json}}
        pq.write_table(pa.Table.from_pylist([row]), folder / "c.calibration_estimate.parquet")
    if egomotion:
        pose = {"location": {"x": 0.0, "y": 0.0, "z": 0.0}, "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}}
        rows = [{"key": {"clip_id": "c", "timestamp_micros": t}, "egomotion_estimate": pose} for t in (0, 100_000)]
        pq.write_table(pa.Table.from_pylist(rows), folder / "c.egomotion_estimate.parquet")
    return folder


def _clipgt_target(w: World) -> Path:
    _write(w, "target/notes.txt", "keep me")
    return w.root / "target"


CONVERT_CASES = [
    Case("clipgt table junk", "avsim convert CLIP OUT --from clipgt  (calibration_estimate.parquet random bytes)", lambda w: ["convert", str(_clipgt(w, os.urandom(700))), str(w.root / "o"), "--from", "clipgt"], 1, "unreadable parquet (truncated or corrupt)"),
    Case("clipgt rig not json", "avsim convert CLIP OUT --from clipgt  (rig_json '{rig')", lambda w: ["convert", str(_clipgt(w, rig_json="{rig")), str(w.root / "o"), "--from", "clipgt"], 1, "calibration_estimate.rig_json"),
    Case("clipgt rig no camera", "avsim convert CLIP OUT --from clipgt  (rig_json without camera:* sensors)", lambda w: ["convert", str(_clipgt(w, rig_json='{"rig": {"sensors": []}}')), str(w.root / "o"), "--from", "clipgt"], 1, "no usable camera"),
    Case("clipgt no egomotion", "avsim convert CLIP OUT --from clipgt  (calibration only)", lambda w: ["convert", str(_clipgt(w, egomotion=False)), str(w.root / "o"), "--from", "clipgt"], 1, "egomotion_estimate.parquet"),
    Case("export clipgt foreign folder", "avsim export clipgt S OUT  (OUT holds notes.txt)", lambda w: ["export", "clipgt", str(_scenario(w)), str(_clipgt_target(w))], 1, "not a ClipGT table; refusing to replace it"),
    Case("pickle gadget", "avsim convert gadget.pkl OUT --from scenarionet", lambda w: ["convert", str(_write(w, "g.pkl", pickle.dumps(Gadget(w.canary)))), str(w.root / "o"), "--from", "scenarionet"], 1, "refused: global 'posix.system'"),
    Case("pickle bomb", "avsim convert bomb.pkl OUT --from scenarionet  (13 bytes claiming 1e12)", lambda w: ["convert", str(_write(w, "b.pkl", _pickle_bomb())), str(w.root / "o"), "--from", "scenarionet"], 1, "b.pkl: pickle"),
    Case("pickle empty", "avsim convert empty.pkl OUT --from scenarionet", lambda w: ["convert", str(_write(w, "e.pkl", b"")), str(w.root / "o"), "--from", "scenarionet"], 1, "file is empty"),
    Case("pickle truncated", "avsim convert cut.pkl OUT --from scenarionet", lambda w: ["convert", str(_write(w, "t.pkl", pickle.dumps({"a": list(range(100))})[:30])), str(w.root / "o"), "--from", "scenarionet"], 1, "truncated or corrupt pickle"),
    Case("pickle not a dict", "avsim convert list.pkl OUT --from scenarionet", lambda w: ["convert", str(_write(w, "l.pkl", pickle.dumps([1, 2]))), str(w.root / "o"), "--from", "scenarionet"], 1, "l.pkl"),
    Case("waymo junk", "avsim convert junk.tfrecord OUT --from waymo", lambda w: ["convert", str(_write(w, "j.tfrecord", os.urandom(64))), str(w.root / "o"), "--from", "waymo"], 1, "j.tfrecord"),
    Case("tar traversal", "avsim convert ROOT OUT --from rdshq  (vehicle_pose tar member ../x.json)", lambda w: ["convert", str(_rdshq(w, [_member("../x.json")])), str(w.root / "o"), "--from", "rdshq"], 1, "path traversal"),
    Case("tar symlink", "avsim convert ROOT OUT --from rdshq  (vehicle_pose tar symlink member)", lambda w: ["convert", str(_rdshq(w, [_member("clip.a.json", tarfile.SYMTYPE)])), str(w.root / "o"), "--from", "rdshq"], 1, "not a regular file"),
    Case("tar junk", "avsim convert ROOT OUT --from rdshq  (vehicle_pose/clip.tar random bytes)", lambda w: ["convert", str(_write(w, "rds/vehicle_pose/clip.tar", os.urandom(700)).parent.parent), str(w.root / "o"), "--from", "rdshq"], 1, "clip.tar"),
    Case("rdshq not a root", "avsim convert file.tar OUT --from rdshq", lambda w: ["convert", str(_write(w, "j.tar", os.urandom(700))), str(w.root / "o"), "--from", "rdshq"], 1, "not found or not a folder"),
    Case("convert unknown source", "avsim convert x OUT --from nope", lambda w: ["convert", str(_write(w, "x", "x")), str(w.root / "o"), "--from", "nope"], 2, "nope"),
    Case("convert missing input", "avsim convert missing.pkl OUT --from scenarionet", lambda w: ["convert", str(w.root / "missing.pkl"), str(w.root / "o"), "--from", "scenarionet"], 1, "missing.pkl"),
    *(Case(*c) for c in MAP_CASES),
    *(Case(*c) for c in OPENSCENARIO_CASES),
]


def _vid(kind: str) -> Callable[[World], Path]:
    def make(w: World) -> Path:
        data = {"zero": b"", "junk": bytes(range(256)) * 20, "cut": w.video.read_bytes()[:3000]}[kind]
        return _video_clip(w, data, f"{kind}.mp4")

    return make


_VIDEO_KINDS = (("zero", "zero-length mp4", "container"), ("junk", "random-bytes mp4", "container"), ("cut", "mp4 cut at 3 kB", "cut.mp4"))

EVAL_VIDEO_CASES = [
    Case(f"{cmd} {kind}", f"avsim eval {cmd} {kind}.mp4 ...  ({what})", build, 1, expect)
    for kind, what, expect in _VIDEO_KINDS
    for cmd, build in (
        ("fid", lambda w, k=kind: ["eval", "fid", str(_vid(k)(w)), str(w.video)]),
        ("fvd", lambda w, k=kind: ["eval", "fvd", str(_vid(k)(w)), str(w.video)]),
        ("sampson", lambda w, k=kind: ["eval", "sampson", str(_vid(k)(w)), "--ransac"]),
        ("rnds", lambda w, k=kind: ["eval", "rnds", "--generated", str(_vid(k)(w)), "--real", str(w.video)]),
    )
]

EVAL_CASES = [
    Case("fid not a video", "avsim eval fid notes.txt clip.mp4", lambda w: ["eval", "fid", str(_write(w, "n.txt", "x")), str(w.video)], 1, "not a video"),
    Case("sampson no calibration", "avsim eval sampson clip.mp4", lambda w: ["eval", "sampson", str(w.video)], 1, "--ransac"),
    Case("sampson calibration nested", "avsim eval sampson clip.mp4 --calibration deep.json", lambda w: ["eval", "sampson", str(w.video), "--calibration", str(_write(w, "d.json", _deep()))], 1, "nested too deeply"),
    Case("sampson calibration empty object", "avsim eval sampson clip.mp4 --calibration {}.json", lambda w: ["eval", "sampson", str(w.video), "--calibration", str(_write(w, "c.json", "{}"))], 1, "c.json"),
    Case("sampson scenario corrupted", "avsim eval sampson clip.mp4 --scenario S  (scrambled agents)", lambda w: ["eval", "sampson", str(w.video), "--scenario", str(_scenario(w, _bytes("agents.parquet", _scramble)))], 1, "agents.parquet"),
    Case("let unknown class", "avsim eval let --gt S --pred boxes.parquet  (class car)", lambda w: ["eval", "let", "--gt", str(_scenario(w)), "--pred", str(_box_table(w, "b.parquet", _boxes("car")))], 1, "unknown class 'car'"),
    Case("let missing column", "avsim eval let --gt S --pred boxes.parquet  (no score)", lambda w: ["eval", "let", "--gt", str(_scenario(w)), "--pred", str(_box_table(w, "b.parquet", {k: v for k, v in _boxes().items() if k != "score"}))], 1, "score: missing column"),
    Case("let zero size", "avsim eval let --gt S --pred boxes.parquet  (length 0)", lambda w: ["eval", "let", "--gt", str(_scenario(w)), "--pred", str(_box_table(w, "b.parquet", _boxes(size=0.0)))], 1, "sizes must be > 0"),
    Case("let frames disjoint", "avsim eval let --gt S --pred boxes.parquet  (frame keys of another clip)", lambda w: ["eval", "let", "--gt", str(_scenario(w)), "--pred", str(_box_table(w, "b.parquet", _boxes(frame=7)))], 1, "no frame key in common"),
    Case("let nuscenes class", "avsim eval let --gt S --pred results.json  (detection_name spaceship)", lambda w: ["eval", "let", "--gt", str(_scenario(w)), "--pred", str(_nuscenes(w, "r.json", "spaceship"))], 1, "unknown detection class 'spaceship'"),
    Case("let nuscenes nested", "avsim eval let --gt S --pred deep.json", lambda w: ["eval", "let", "--gt", str(_scenario(w)), "--pred", str(_write(w, "d.json", '{"results": ' + _deep() + "}"))], 1, "nested too deeply"),
    Case("let nuscenes not a submission", "avsim eval let --gt S --pred other.json", lambda w: ["eval", "let", "--gt", str(_scenario(w)), "--pred", str(_write(w, "o.json", "[1, 2]"))], 1, "not a nuScenes detection submission"),
    Case("let waymo junk", "avsim eval let --gt S --pred junk.bin", lambda w: ["eval", "let", "--gt", str(_scenario(w)), "--pred", str(_write(w, "j.bin", b"\xff" * 40))], 1, "metrics_pb2.Objects"),
    Case("let waymo unknown type", "avsim eval let --gt S --pred pred.bin  (TYPE_UNKNOWN)", lambda w: ["eval", "let", "--gt", str(_scenario(w)), "--pred", str(_waymo(w, "p.bin", 0))], 1, "is not a LET type"),
    Case("let waymo gt all filtered", "avsim eval let --gt gt.bin --pred pred.bin  (no lidar points)", lambda w: ["eval", "let", "--gt", str(_waymo(w, "g.bin", 1)), "--pred", str(_waymo(w, "p.bin", 1))], 1, "every object left out"),
    Case("let sensor garbage", "avsim eval let --gt S --pred boxes.parquet --sensor a,b", lambda w: ["eval", "let", "--gt", str(_scenario(w)), "--pred", str(_box_table(w, "b.parquet", _boxes())), "--sensor", "a,b"], 2, "--sensor"),
    Case("lanes nested", "avsim eval lanes --gt S --pred deep.json", lambda w: ["eval", "lanes", "--gt", str(_scenario(w)), "--pred", str(_write(w, "d.json", _deep()))], 1, "nested too deeply"),
    Case("lanes junk json", "avsim eval lanes --gt S --pred junk.json", lambda w: ["eval", "lanes", "--gt", str(_scenario(w)), "--pred", str(_write(w, "j.json", "{nope"))], 1, "j.json: json"),
    Case("lanes not an object", "avsim eval lanes --gt S --pred list.json", lambda w: ["eval", "lanes", "--gt", str(_scenario(w)), "--pred", str(_write(w, "l.json", "[1]"))], 1, "top level must be an object"),
    Case("rnds clip count", "avsim eval rnds --generated a.mp4 --real two_clips/", lambda w: ["eval", "rnds", "--generated", str(w.video), "--real", str(w.render / w.video.parent.name)], 1, "generated clips but"),
    Case("report real is a file", "avsim eval report --real file.txt --generated G --out OUT", lambda w: ["eval", "report", "--real", str(_write(w, "f.txt", "x")), "--generated", str(w.render), "--out", str(w.root / "o")], 1, "folder: not found"),
    Case("report gt corrupted", "avsim eval report --real R --generated G --gt S --out OUT  (scrambled agents)", lambda w: ["eval", "report", "--real", str(w.render), "--generated", str(w.render), "--gt", str(_scenario(w, _bytes("agents.parquet", _scramble))), "--out", str(w.root / "o"), "--no-video-metrics"], 1, "agents.parquet"),
]

TRAIN_CASES = [
    Case("export not a run", "avsim train export file.txt net.pt", lambda w: ["train", "export", str(_write(w, "f.txt", "x")), str(w.root / "net.pt")], 1, "f.txt"),
    Case("export config nested", "avsim train export RUN net.pt  (config.json of 200,000 brackets)", lambda w: ["train", "export", str(_write(w, "run/config.json", _deep()).parent), str(w.root / "net.pt")], 1, "config.json"),
]

CAM0 = "rig.cameras[0]"

BOUND_CASES = [  # named limits (docs: "Limits"), checked before the work
    _info("table rows over the limit", "ego.parquet footer says 20,000,001 rows", _many_rows, "more than the 20000000 a table may have"),
    _info("scenario id huge", "scenario_id of 10 MB", _header(lambda d: d.update(scenario_id="x" * 10_000_000)), "scenario_id: 10000000 characters, more than 256"),
    _info("metadata string huge", "a metadata string of 70,000 characters", _header(lambda d: d["metadata"].update(note="n" * 70_000)), "more than 65536"),
    _info("camera name huge", "a camera name of 300 characters", _header(lambda d: d["rig"]["cameras"][0].update(name="c" * 300)), "has 300 characters; a name has 1 to 100"),
    _info("camera width huge", "rig camera width_px 100000", _header(lambda d: d["rig"]["cameras"][0].update(width_px=100_000)), "more than the 16384 a camera may have"),
    _info("pinhole distortion folds", "rig camera: AlpaSim's k1 -0.356 lens over a 3840x2160 image (its polynomial turns back inside)", _header(lambda d: d["rig"]["cameras"][0].update(model="pinhole", width_px=3840, height_px=2160, fx_px=1545.0, fy_px=1545.0, cx_px=1920.0, cy_px=1080.0, distortion=[-0.356123, 0.172545, -0.00213, 0.000464, -0.05231])), "turns back 51.7 deg off axis"),
    _info("pinhole focal tiny", "rig camera fy_px 1e-300", _header(lambda d: d["rig"]["cameras"][0].update(model="pinhole", fx_px=1000.0, fy_px=1e-300, distortion=[0, 0, 0, 0, 0])), "fy_px: focal length 1e-300 px is outside"),
    _info("map vertex huge", "a lane-line vertex x of 1e300", _table("map_lane_lines.parquet", _set("x_m", 0, 1e300)), "beyond the 1e+08 m a scenario may hold"),
    _info("agent centre far", "an agent centre x of 1e9 m", _table("agents.parquet", _set("center_x_m", 0, 1e9)), "center_x_m: row 0"),
    _info("agent box huge", "an agent length of 1e5 m", _table("agents.parquet", _set("length_m", 0, 1e5)), "beyond the 10000 m"),
    _info("ego position huge", "ego tx_m 1e300", _table("ego.parquet", _set("tx_m", 3, 1e300)), "tx_m: row 3"),
    Case("validate map vertex huge", "avsim validate S  (a lane-line vertex of 1e300)", lambda w: ["validate", str(_scenario(w, _table("map_lane_lines.parquet", _set("x_m", 0, 1e300))))], 1, "beyond the 1e+08 m"),
    Case("render map vertex huge", "avsim render S OUT  (a lane-line vertex of 1e300)", lambda w: ["render", str(_scenario(w, _table("map_lane_lines.parquet", _set("x_m", 0, 1e300)))), str(w.root / "out")], 1, "beyond the 1e+08 m"),
    Case("edit sweep of a million", "avsim edit S sweep.yaml OUT  (3 parameters of 100 values)", lambda w: _edit(w, _sweep_edit("".join(f"  {k}: {list(range(100))}\n" for k in "abc"))), 1, "1000000 variants, more than the 1000"),
    Case("name template attribute", 'avsim edit S e.yaml OUT  (name "{a.__class__.__mro__}")', lambda w: _edit(w, _sweep_edit("  a: [1, 2]\n", 'name: "{a.__class__.__mro__}"\n')), 1, "only plain {param} fields"),
    Case("name template huge padding", 'avsim edit S e.yaml OUT  (name "{a:>2000000000}")', lambda w: _edit(w, _sweep_edit("  a: [1, 2]\n", 'name: "{a:>2000000000}"\n')), 1, "only plain {param} fields"),
    Case("name template index", 'avsim edit S e.yaml OUT  (name "{a[0]}")', lambda w: _edit(w, _sweep_edit("  a: [1, 2]\n", 'name: "{a[0]}"\n')), 1, "only plain {param} fields"),
    Case("name template conversion", 'avsim edit S e.yaml OUT  (name "{a!r}")', lambda w: _edit(w, _sweep_edit("  a: [1, 2]\n", 'name: "{a!r}"\n')), 1, "only plain {param} fields"),
    Case("name template unknown", 'avsim edit S e.yaml OUT  (name "{b}")', lambda w: _edit(w, _sweep_edit("  a: [1, 2]\n", 'name: "{b}"\n')), 1, "unknown parameter {b}"),
    Case("resample rate huge", "avsim edit S e.yaml OUT  (resample rate_hz 1e6)", lambda w: _edit(w, "version: 1\nops:\n  - op: resample\n    rate_hz: 1000000\n"), 1, "rate_hz: must be <= 1000"),
    Case("retime factor tiny", "avsim edit S e.yaml OUT  (retime speed_factor 1e-9)", lambda w: _edit(w, "version: 1\nops:\n  - op: retime\n    speed_factor: 1.0e-9\n"), 1, "speed_factor: must be >= 0.01"),
    Case("scale_speed factor huge", "avsim edit S e.yaml OUT  (scale_speed factor 1e6)", lambda w: _edit(w, "version: 1\nops:\n  - op: scale_speed\n    track_id: car_000\n    factor: 1000000\n"), 1, "factor: must be <= 100"),
    Case("shift huge", "avsim edit S e.yaml OUT  (shift_agents dx_m 1e300)", lambda w: _edit(w, "version: 1\nops:\n  - op: shift_agents\n    track_id: car_000\n    dx_m: 1.0e+300\n"), 1, "magnitude at most 1e+07"),
    Case("number beyond float", "avsim edit S e.json OUT  (dx_m of 400 digits)", lambda w: _edit(w, '{"version": 1, "ops": [{"op": "shift_agents", "track_id": "car_000", "dx_m": 1' + "0" * 400 + "}]}", "e.json"), 1, "magnitude at most 1e+07"),
    Case("seed beyond 64 bits", "avsim edit S e.yaml OUT  (perturb_agents seed 10**30)", lambda w: _edit(w, f"version: 1\nops:\n  - op: perturb_agents\n    track_id: car_000\n    seed: {10**30}\n"), 1, "does not fit in 64 bits"),
    Case("edit string huge", "avsim edit S e.yaml OUT  (a track id of 2000 characters)", lambda w: _edit(w, f"version: 1\nops:\n  - op: remove_agents\n    track_id: {'t' * 2000}\n"), 1, "more than 1024"),
]

FILE_KIND_CASES = [  # FIFOs, devices and links are named for what they are, never read
    Case("header is a FIFO", "avsim info S  (scenario.json a named pipe)", lambda w: ["info", str(_scenario(w, lambda f: ((f / "scenario.json").unlink(), os.mkfifo(f / "scenario.json"))))], 1, "named pipe (FIFO)"),
    Case("table links to /dev/zero", "avsim info S  (agents.parquet -> /dev/zero)", lambda w: ["info", str(_scenario(w, lambda f: ((f / "agents.parquet").unlink(), (f / "agents.parquet").symlink_to("/dev/zero"))))], 1, "agents.parquet: file: is a character device"),
    Case("table is a folder", "avsim info S  (ego.parquet a folder)", lambda w: ["info", str(_scenario(w, lambda f: ((f / "ego.parquet").unlink(), (f / "ego.parquet").mkdir())))], 1, "ego.parquet: file: is a folder"),
    Case("header dangling link", "avsim info S  (scenario.json -> missing file)", lambda w: ["info", str(_scenario(w, lambda f: ((f / "scenario.json").unlink(), (f / "scenario.json").symlink_to(f / "gone"))))], 1, "a dangling link"),
    Case("edit file is a FIFO", "avsim edit S fifo.yaml OUT", lambda w: ["edit", str(_scenario(w)), str(_fifo(w, "f.yaml")), str(w.root / "o")], 1, "f.yaml: file: is a named pipe"),
    Case("edit file links to /dev/zero", "avsim edit S zero.yaml OUT", lambda w: ["edit", str(_scenario(w)), str(_link(w, "z.yaml")), str(w.root / "o")], 1, "z.yaml: file: is a character device"),
    Case("convert a FIFO", "avsim convert fifo.pkl OUT --from scenarionet", lambda w: ["convert", str(_fifo(w, "f.pkl")), str(w.root / "o"), "--from", "scenarionet"], 1, "f.pkl: source: is a named pipe"),
    Case("convert /dev/zero", "avsim convert zero.pkl OUT  (a link to /dev/zero)", lambda w: ["convert", str(_link(w, "z.pkl")), str(w.root / "o")], 1, "z.pkl: source: is a character device"),
    Case("fid FIFO", "avsim eval fid fifo.mp4 clip.mp4", lambda w: ["eval", "fid", str(_fifo(w, "f.mp4")), str(w.video)], 1, "f.mp4: path: is a named pipe"),
    Case("fid /dev/zero link", "avsim eval fid zero.mp4 clip.mp4", lambda w: ["eval", "fid", str(_link(w, "z.mp4")), str(w.video)], 1, "z.mp4: path: is a character device"),
    Case("sampson calibration FIFO", "avsim eval sampson clip.mp4 --calibration fifo.json", lambda w: ["eval", "sampson", str(w.video), "--calibration", str(_fifo(w, "c.json"))], 1, "c.json: file: is a named pipe"),
    Case("overlay video FIFO", "avsim render S OUT --overlay DIR  (DIR/<camera>.mp4 a named pipe)", lambda w: _overlay(w, lambda w: _fifo(w, "real/camera_front_wide_120fov.mp4")), 1, "camera_front_wide_120fov.mp4: video: is a named pipe"),
    Case("render variant links out", "avsim render EDIT_OUT OUT  (manifest folder v -> a folder outside)", lambda w: ["render", str(_variants(w, {"folder": "v", "name": "v"}, link_out=True)), str(w.root / "out")], 1, "resolves outside"),
    Case("render variant name huge", "avsim render EDIT_OUT OUT  (manifest variant name of 300 characters)", lambda w: ["render", str(_variants(w, {"folder": "v", "name": "n" * 300})), str(w.root / "out")], 1, "has 300 characters; a name has 1 to 100"),
]

MEDIA_CASES = [  # truncated, too large or stream-less media, wherever frames are read
    *[Case(f"{cmd} truncated", f"avsim eval {cmd} half.mp4 ...  (mp4 cut at half its bytes)", build, 1, "frames: truncated:") for cmd, build in (
        ("fid", lambda w: ["eval", "fid", str(_half(w)), str(w.video)]),
        ("fvd", lambda w: ["eval", "fvd", str(_half(w)), str(w.video)]),
        ("sampson", lambda w: ["eval", "sampson", str(_half(w)), "--ransac"]),
        ("rnds", lambda w: ["eval", "rnds", "--generated", str(_half(w)), "--real", str(w.video)]),
    )],
    *[Case(f"{cmd} frames too large", f"avsim eval {cmd} wide.mp4 ...  (8200x16 frames)", build, 1, "8200x16 px frames are too large") for cmd, build in (
        ("fid", lambda w: ["eval", "fid", str(_encoded(w, "wide.mp4", 8200, 16)), str(w.video)]),
        ("sampson", lambda w: ["eval", "sampson", str(_encoded(w, "wide.mp4", 8200, 16)), "--ransac"]),
        ("rnds", lambda w: ["eval", "rnds", "--generated", str(_encoded(w, "wide.mp4", 8200, 16)), "--real", str(w.video)]),
    )],
    Case("fid image too large", "avsim eval fid frames/ clip.mp4  (a PNG claiming 20000x20000)", lambda w: ["eval", "fid", str(_write(w, "fr/000.png", _png_header(20000, 20000)).parent), str(w.video)], 1, "20000x20000 px frames are too large"),
    Case("fid audio only", "avsim eval fid audio.mp4 clip.mp4  (no video stream)", lambda w: ["eval", "fid", str(_audio_only(w, "a.mp4")), str(w.video)], 1, "no video stream (streams: audio)"),
    Case("overlay audio only", "avsim render S OUT --overlay DIR  (DIR/<camera>.mp4 audio only)", lambda w: _overlay(w, lambda w: _audio_only(w, "real/camera_front_wide_120fov.mp4")), 1, "no video stream (streams: audio)"),
    Case("overlay truncated", "avsim render S OUT --overlay DIR  (DIR/<camera>.mp4 cut at half)", lambda w: _overlay(w, lambda w: _half(w, "real/camera_front_wide_120fov.mp4")), 1, "frames: truncated:"),
    Case("overlay frames too large", "avsim render S OUT --overlay DIR  (8200x16 real video)", lambda w: _overlay(w, lambda w: _encoded(w, "real/camera_front_wide_120fov.mp4", 8200, 16)), 1, "8200x16 px frames are too large"),
    Case("overlay image too large", "avsim render S OUT --overlay DIR  (DIR/<camera>/0.png claiming 20000x20000)", lambda w: _overlay(w, lambda w: _write(w, "real/camera_front_wide_120fov/000000.png", _png_header(20000, 20000)).parent), 1, "20000x20000 px frames are too large"),
]

CASES: list[Case] = [*SCENARIO_CASES, *RENDER_CASES, *EDIT_CASES, *CONVERT_CASES, *EVAL_VIDEO_CASES, *EVAL_CASES, *TRAIN_CASES,
                     *BOUND_CASES, *FILE_KIND_CASES, *MEDIA_CASES, *(Case(*c) for c in SURFACE_CASES)]  # fmt: skip


def render_table() -> str:
    """docs/hostile_inputs.md: the cases as a Markdown table."""
    head = [
        "# Hostile inputs: what each command does with them",
        "",
        "Generated from `tests/hostile_cases.py` (`python tests/hostile_cases.py > docs/hostile_inputs.md`);",
        "`tests/test_hostile_inputs.py` runs every row. Each gives the exit code shown, no traceback, one",
        "`error: <file>: <field>: <reason>` line (exit 1; the last line: progress a slow step printed before it",
        "is not an error) or a usage message (exit 2) containing the text",
        "shown, runs no planted code, and leaves no output behind. Checkpoint gadgets are in",
        "`tests/test_train_safe_checkpoint.py`, resource bounds in `tests/test_hostile_bounds.py`, format",
        "errors of every table field in `tests/test_io_bad_input.py`. A killed run leaves at most",
        "temporaries named `.<name>.tmp<host>.<pid>-*`; the next run writing the same output removes",
        "those whose process is gone (`avsim.core.atomic.remove_stale_temporaries`), and",
        "`tests/test_hostile_bounds.py` kills `avsim edit`, `avsim eval report` and a chunked `avsim",
        "render` with SIGKILL at several points and reruns them to identical bytes with no stray file",
        "(render also drops a dead run's part temporaries and empty `.parts` folders on resume).",
        "",
        "Faults (`tests/test_hostile_faults.py`): a full or read-only disk is one line, `error: OUT: disk full`",
        "(`read-only file system`), exit 1, with nothing half-written under a final name (every mp4 is",
        "checked against its frame count before its rename; a resume keeps only parts that pass that",
        "check), and a plain rerun after freeing space ends byte-identical to an uninterrupted run. One",
        "process writes `OUT/<clip>` (render, labels) or a job folder (`avsim run`) at a time: a second",
        "says `another avsim process is writing here` (exit 1) or waits with `--wait` (one `warning:` line); the lock is an",
        "`flock` that dies with its process, so a killed run never blocks the next. FIFOs, devices and",
        "links are named for what they are (never opened), and a FIFO or `/dev/zero` never hangs a command.",
        "",
        "Limits (each a named constant; raise it in code if a real input needs more):",
        "",
        "| input | limit | constant |",
        "|---|---|---|",
        "| any JSON input (labels, results, calibration, maps, configs) | 1 GiB; nesting up to Python's recursion limit (~1000) | `avsim.core.safe_json.MAX_JSON_BYTES` |",
        "| edit files (YAML) | 100,000 nodes with aliases expanded | `avsim.edit.editfile_parse.MAX_EXPANDED_NODES` |",
        "| RDS-HQ tars | 512 MiB a member, 1 GiB all members read; only .json/.npy members are read | `safe_tar.MAX_MEMBER_BYTES`, `MAX_TOTAL_BYTES` |",
        "| ClipGT parquet tables | 1 GiB a file, 2,000,000 rows, 512 MiB decoded, counted from the page headers before decoding; a table that is a FIFO, a device or a link out of the clip folder is named, never skipped | `avsim.scenario.importers.clipgt_schema.MAX_TABLE_BYTES`, `MAX_TABLE_ROWS`, `MAX_DECODED_BYTES` |",
        "| ClipGT frame-time file (`<clip_id>.camera_front_wide_120fov.json`) | 64 MiB | `avsim.scenario.importers.clipgt_schema.MAX_CAMERA_TIMESTAMPS_BYTES` |",
        "| ScenarioNet pickles | a length field larger than memory is an error, not a MemoryError | `safe_pickle.loads_pickle` |",
        "| `avsim render --size` / `--fps` | 8192 px a side / 1000 frames per second | `avsim.render.run.plan.MAX_SIDE_PX`, `MAX_FPS` |",
        "| frames read from videos and images (eval, overlay, generate, train) | 8192 px a side, from the stream or image header | `avsim.core.video.MAX_FRAME_SIDE_PX` |",
        "| a video read to its end | the frames its container lists (else `truncated`, or a warning with `avsim --allow-truncated`) | `avsim.core.video.check_complete` |",
        "| scenario tables (parquet) | 20,000,000 rows and 2 GiB decoded a table, counted from the page headers | `avsim.scenario.io_schema.MAX_TABLE_ROWS`, `MAX_TABLE_DECODED_BYTES` |",
        "| `scenario.json` | 64 MiB; `scenario_id` 256 characters; camera names the name rule below; metadata strings 65,536 | `io_schema.MAX_HEADER_BYTES`, `MAX_ID_CHARS`, `MAX_METADATA_TEXT_CHARS` |",
        "| scenario values | positions within 1e8 m (the world extent), box sizes 1e4 m, pinhole focal lengths 0.01 to 1e7 px, camera sides 16384 px | `io_schema.MAX_WORLD_COORD_M`, `MAX_BOX_SIZE_M`, `MIN_FOCAL_PX`, `MAX_FOCAL_PX`, `MAX_CAMERA_SIDE_PX` |",
        "| edit files | 16 MiB; 1000 variants a sweep; numbers finite within 1e7; strings 1024 characters; `rate_hz` 1000 (as `render --fps`); speed factors 1/100 to 100; name templates plain `{param}` fields | `avsim.edit.editfile.MAX_VARIANTS`, `editfile_parse.MAX_EDIT_MAGNITUDE`, `MAX_SPEED_FACTOR` |",
        "| `avsim edit` manifests (read by `avsim render`) | 64 MiB; variant folders inside the output (no links out); folders and names the name rule below | `avsim.edit.render_variants.MAX_MANIFEST_BYTES` |",
        "| DCP checkpoint `.metadata` / `meta.json` | 256 MiB / 16 MiB; storage entries are byte ranges of regular files inside the checkpoint folder; `step`, `world_size`, `loader_batch` in range | `avsim.train.safe_dcp.MAX_METADATA_BYTES`, `check_storage_entries`, `avsim.train.checkpoint.META_LIMITS` |",
        "| Waymo `metrics_pb2.Objects` files | 2 GiB (protobuf's message limit) | `avsim.evaluation.waymo_objects.MAX_OBJECTS_FILE_BYTES` |",
        "| pinhole distortion (scenarios, sensor-server requests) | used inside its valid range (up to the radial map's first turning point); a camera whose image reaches past it is refused | `avsim.core.distortion.OpenCVDistortion.check_covers` |",
        "| `avsim serve sensorsim` requests | 8192 px a side, 10,000 objects, 64 images a call, 4 MiB a request (`--max-request-mib`); each costed before work and refused `RESOURCE_EXHAUSTED` above 3/4 of `--max-memory-mib` (2048; 8192x8192 needs 1,160 MiB), the bound named; `--workers` (4) drawn at once, large requests (over 1/4 of the budget) in all but one slot, 2 a worker waiting; ray maps kept within `--ray-cache-mib` (512); a cancelled request stops at its next ray-map block | `avsim.sim.alpasim.render_requests.MAX_SIDE_PX`, `MAX_OBJECTS`, `server.MAX_AGGREGATED`, `scheduling.RenderScheduler`, `RayMapCache` |",
        "| `alpasim://` driver answers | 100,000 poses; followed up to 30 s ahead (a pose 10^14 us ahead allocates nothing more) | `avsim.sim.alpasim.driver.MAX_TRAJECTORY_POSES`, `MAX_PLAN_AHEAD_S` |",
        *MAP_LIMITS, *OPENSCENARIO_LIMITS,  # the scenario authors' formats
        *SURFACE_LIMITS,
        "",
        f"{len(CASES)} cases.",
        "",
        "| case | command (input) | exit | error contains |",
        "|---|---|---|---|",
    ]
    rows = [f"| {c.name} | `{c.command}` | {c.code} | `{c.expect}` |" for c in CASES]
    return "\n".join(head + rows) + "\n"


if __name__ == "__main__":
    print(render_table(), end="")
