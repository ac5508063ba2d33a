"""Names that would become paths and parquet tables that lie: the rule and the guards below the CLI.

The command-line cases (one line, exit code, nothing written) are rows of tests/hostile_cases_surfaces.py;
these tests check the guards themselves: every writer's final containment check (`join_names`) with
a name that skipped the load-time check, the longest legal names end to end, and parquet limits
counted from the pages (a footer that lies, run-length and dictionary bombs, FIFOs, links out).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from avsim.core.errors import AvsimInputError, AvsimOutputError, AvsimValueError
from avsim.core.names import MAX_NAME_CHARS, check_name, join_names, name_problem, safe_name
from avsim.core.parquet_pages import _Compact
from avsim.core.safe_parquet import Column, TableLimits, check_frame, measure, read_arrow, read_frame
from avsim.evaluation import detect
from avsim.render.labels import records
from avsim.render.run import labels as run_labels
from avsim.render.run import writer

BAD_NAMES = ["cam_../../x", "../x", "/tmp/x", "x/y", "a\\b", "", ".", "..", ".hidden", "-rf", "x" * (MAX_NAME_CHARS + 1), "a b", "a\0b",
             "camera:front", "é"]  # fmt: skip
GOOD_NAMES = ["CAM_FRONT", "ring_front_center", "FRONT_LEFT", "camera_front_wide_120fov", "_x", "a.b-c",
              "segment-10017090168044687777_6380_000_6400_000_with_camera_labels", "x" * MAX_NAME_CHARS]  # fmt: skip


# ---------------------------------------------------------------------------- the name rule
@pytest.mark.parametrize("name", BAD_NAMES)
def test_unsafe_names_are_refused_naming_the_file_and_field(name: str) -> None:
    assert name_problem(name) is not None
    with pytest.raises(AvsimInputError, match=r"^f\.json: rig\.cameras\[0\]\.name: "):
        check_name(name, "f.json", "rig.cameras[0].name")


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_every_real_dataset_name_is_safe(name: str) -> None:
    assert check_name(name, "f", "x") == name


def test_safe_name_makes_a_safe_bounded_name_of_any_id() -> None:
    for text in ["scene-0061", "../../etc/passwd", "a" * 300, "-x", "", "ü/ö"]:
        made = safe_name(text)
        assert name_problem(made) is None, (text, made)
    assert safe_name("a" * 300) != safe_name("a" * 299 + "b") and len(safe_name("a" * 300)) == MAX_NAME_CHARS
    assert safe_name("avsim_sample_seed0") == "avsim_sample_seed0"


@pytest.mark.parametrize("part", ["../x", "x/../../y", "/abs", "..", ".", "", "a\\b", "n" * 256])
def test_join_names_refuses_anything_but_one_plain_component(tmp_path: Path, part: str) -> None:
    with pytest.raises(AvsimOutputError, match="refusing to write"):
        join_names(tmp_path, "clip", part)
    assert join_names(tmp_path, "clip", "clip.cam.mp4") == tmp_path / "clip" / "clip.cam.mp4"


def test_a_rig_refuses_an_unsafe_camera_name_whoever_builds_it() -> None:
    from avsim.core.rig import CameraRig, cosmos_rig

    rig = cosmos_rig(64, 36)
    with pytest.raises(AvsimValueError, match=r"rig\.names\[0\]: 'cam_\.\./x' is not a safe file name"):
        CameraRig(("cam_../x", *rig.names[1:]), rig.cameras, rig.ego_SE3_camera)


WRITERS = {
    "camera video (default layout)": lambda out, cam: writer.camera_video_paths(out, "clip", cam, "default"),
    "camera video (posttrain layout)": lambda out, cam: writer.camera_video_paths(out, "clip", cam, "posttrain"),
    "png frames": lambda out, cam: writer.png_folder(out, "clip", cam),
    "overlay video": lambda out, cam: writer.overlay_path(out, "clip", cam),
    "mosaic of a clip id": lambda out, cam: writer.mosaic_path(out, cam),
    "openlane file (labels --label-files standard)": lambda out, cam: records.openlane_path(out, cam, 0),
    "label part": lambda out, cam: run_labels._part_in(out, cam, 0),
    "detect video": lambda out, cam: detect.video_path(out, "clip", cam),
}


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("camera", ["../../x", "a/../../../b", "/abs/x"])
def test_every_writer_refuses_a_name_that_skipped_the_load_check(tmp_path: Path, writer: str, camera: str) -> None:
    """The final guard: a name that reached a writer without passing the rule never leaves OUT."""
    with pytest.raises(AvsimOutputError, match="refusing to write"):
        WRITERS[writer](tmp_path, camera)


@pytest.mark.e2e
def test_the_longest_legal_names_render_and_label(tmp_path: Path) -> None:
    """A 256-character scenario id and a 100-character camera: every file name fits (clip ids are shortened with a hash)."""
    import json
    import shutil

    from avsim.cli import main

    assert main(["sample", str(tmp_path / "s")]) == 0
    doc = json.loads((tmp_path / "s" / "scenario.json").read_text())
    long_camera = "c" * MAX_NAME_CHARS
    doc["rig"]["cameras"][0]["name"], doc["scenario_id"] = long_camera, "i" * 256
    (tmp_path / "s" / "scenario.json").write_text(json.dumps(doc))
    args = ["--frames", "2", "--size", "64x36", "--cameras", long_camera]
    assert main(["render", str(tmp_path / "s"), str(tmp_path / "out"), *args]) == 0
    assert main(["labels", str(tmp_path / "s"), str(tmp_path / "lab"), *args, "--label-files", "both"]) == 0
    names = [p.name for p in (tmp_path / "out").rglob("*")] + [p.name for p in (tmp_path / "lab").rglob("*")]
    assert max(len(n.encode()) for n in names) <= 255 and any(long_camera in n for n in names)
    assert all(p.resolve().is_relative_to(tmp_path) for p in tmp_path.rglob("*"))
    shutil.rmtree(tmp_path / "s")


# ---------------------------------------------------------------------------- parquet counted from its pages
def _footer(path: Path) -> tuple[bytes, bytes]:
    data = path.read_bytes()
    n = struct.unpack("<I", data[-8:-4])[0]
    return data[: -8 - n], data[-8 - n : -8]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _lying_footer(path: Path, rows: int) -> None:
    """Rewrite FileMetaData.num_rows and every RowGroup.num_rows to `rows` (Thrift compact: field 3, i64 zigzag)."""
    body, footer = _footer(path)
    r = _Compact(footer)
    spans = []  # (start, end) of every num_rows varint

    def struct_at(depth: int, is_file: bool) -> None:
        last = 0
        while True:
            head = r._byte()
            if head == 0:
                return
            delta, kind = head >> 4, head & 0x0F
            last = last + delta if delta else r._zigzag()
            if last == 3 and kind == 6 and depth <= 2:
                start = r.pos
                r._varint()
                spans.append((start, r.pos))
            elif is_file and last == 4 and kind == 9:  # row_groups: a list of RowGroup structs
                size = r._byte() >> 4
                for _ in range(size):
                    struct_at(depth + 1, False)
            else:
                r.value(kind, depth + 1)

    struct_at(0, True)
    patched, prev = bytearray(), 0
    for start, end in spans:
        patched += footer[prev:start] + _varint(rows << 1)
        prev = end
    patched += footer[prev:]
    path.write_bytes(body + bytes(patched) + struct.pack("<I", len(patched)) + b"PAR1")


def test_a_footer_claiming_ten_rows_is_not_believed(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(1_000_000, dtype=np.int64)}), path, row_group_size=1_000_000)
    _lying_footer(path, 10)
    assert pq.ParquetFile(path).metadata.num_rows == 10  # what the footer claims
    assert measure(path, TableLimits(10**7, 1 << 30)).rows == 1_000_000  # what the pages hold
    with pytest.raises(AvsimInputError, match=r"t\.parquet: rows: 1000000 rows, more than the 1000"):
        read_arrow(path, TableLimits(1000, 1 << 30))


def test_run_length_and_dictionary_bombs_are_refused_before_decoding(tmp_path: Path) -> None:
    lists = tmp_path / "lists.parquet"  # one row: a list of 20 million zeros, run-length encoded (a few hundred bytes)
    pq.write_table(pa.table({"l": pa.array([np.zeros(20_000_000)], type=pa.list_(pa.float64()))}), lists, use_dictionary=True)
    strings = tmp_path / "strings.parquet"  # 200 rows of one 1 MB string, dictionary encoded
    column = pa.DictionaryArray.from_arrays(pa.array([0] * 200, pa.int32()), pa.array(["x" * 1_000_000]))
    pq.write_table(pa.table({"s": column}), strings, use_dictionary=True, compression="zstd")
    assert lists.stat().st_size < 10_000 and strings.stat().st_size < 10_000
    for path, decoded in ((lists, 160_000_000), (strings, 200_000_000)):
        assert measure(path, TableLimits(10**6, 1 << 30)).decoded_bytes >= decoded  # counted, nothing decoded
        with pytest.raises(AvsimInputError, match=r"decodes to more than 100000000 bytes \(counted from its pages"):
            read_arrow(path, TableLimits(10**6, 100_000_000))


def test_an_honest_table_reads_and_its_bound_is_tight(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    df = pa.table({"a": np.arange(1000), "s": [f"track_{i:04d}" for i in range(1000)], "l": [[1.0, 2.0]] * 1000})
    pq.write_table(df, path)
    size = measure(path, TableLimits(10**6, 1 << 30))
    assert size.rows == 1000 and size.decoded_bytes < 20 * df.nbytes
    assert read_arrow(path, TableLimits(10**6, 1 << 30)).equals(df)
    assert read_frame(path, TableLimits(10**6, 1 << 30), ["a"]).columns == ["a"]
    with pytest.raises(AvsimInputError, match=r"t\.parquet: nope: missing column"):
        read_frame(path, TableLimits(10**6, 1 << 30), ["nope"])


def test_special_files_and_links_out_are_named(tmp_path: Path) -> None:
    pq.write_table(pa.table({"a": [1]}), tmp_path / "real.parquet")
    (tmp_path / "in").mkdir()
    os.mkfifo(tmp_path / "in" / "fifo.parquet")
    (tmp_path / "in" / "zero.parquet").symlink_to("/dev/zero")
    (tmp_path / "in" / "out.parquet").symlink_to(tmp_path / "real.parquet")
    (tmp_path / "in" / "junk.parquet").write_bytes(os.urandom(500))
    limits = TableLimits(10, 1 << 20)
    for name, expect in (("fifo", "is a named pipe"), ("zero", "is a character device"), ("out", "resolves outside"),
                         ("junk", "unreadable parquet"), ("gone", "missing")):  # fmt: skip
        with pytest.raises(AvsimInputError, match=expect):
            read_frame(tmp_path / "in" / f"{name}.parquet", limits, root=tmp_path / "in")


def test_columns_are_checked_for_type_nulls_finiteness_and_range(tmp_path: Path) -> None:
    import polars as pl

    df = pl.DataFrame({"x": [1.0, float("nan")], "n": [1, None], "v": [[0.0, 1.0], [2.0, 9.0]], "s": ["a", "b"]})
    for spec, expect in (({"x": Column("float")}, r"x: row 1: NaN or infinite"), ({"n": Column("int")}, "n: row 1 is null"),
                         ({"v": Column("floats", 2, 0.0, 5.0)}, r"v: row 1: 9 outside \[0, 5\]"),
                         ({"v": Column("floats", 3)}, "v: row 0 has 2 values, expected 3"), ({"s": Column("float")}, "s: has type String"),
                         ({"gone": Column("str")}, "gone: missing column")):  # fmt: skip
        with pytest.raises(AvsimInputError, match=expect):
            check_frame(df, "t.parquet", spec)
