"""Contained and bounded inputs: checkpoint storage paths stay in their folder, meta.json counters
are in range, tables are measured before they are decoded, truncated media are an error."""

from __future__ import annotations

import json
import os
import pickle
import warnings
from pathlib import Path

import pytest

from avsim.core.errors import AvsimInputError, TruncatedMediaWarning
from avsim.core.safe_files import contained_file, contained_path, file_kind, regular_file


# ---------------------------------------------------------------------------- paths from files
def test_contained_paths_refuse_absolute_parent_and_links_out(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.bin").write_bytes(b"x")
    (tmp_path / "outside.bin").write_bytes(b"y")
    (root / "out.bin").symlink_to(tmp_path / "outside.bin")
    (root / "in.bin").symlink_to(root / "sub" / "a.bin")
    os.mkfifo(root / "pipe")
    src = root / ".metadata"
    assert contained_file(root, "sub/a.bin", src, "f") == root / "sub" / "a.bin"
    assert contained_file(root, "in.bin", src, "f") == root / "in.bin"  # a link that stays inside
    for bad, why in (("../outside.bin", "leads outside"), ("/etc/passwd", "leads outside"), ("sub/../../outside.bin", "leads outside"),
                     ("out.bin", "resolves outside"), ("pipe", "named pipe"), ("sub", "is a folder"), ("nope.bin", "is missing"),
                     ("", "non-empty relative path"), (7, "non-empty relative path"), ("a\0b", "non-empty relative path")):  # fmt: skip
        with pytest.raises(AvsimInputError, match=why):
            contained_file(root, bad, src, "f")
    assert contained_path(root, "new/folder", src, "f") == root / "new" / "folder"
    assert file_kind("/dev/zero") == "a character device" and file_kind(root / "sub" / "a.bin") is None
    with pytest.raises(AvsimInputError, match="is a named pipe"):
        regular_file(root / "pipe")


# ---------------------------------------------------------------------------- DCP checkpoints
@pytest.fixture
def checkpoint(tmp_path: Path):
    import torch
    from torch import nn

    from avsim.train.checkpoint import CheckpointManager
    from avsim.train.ema import EMA, EMAConfig

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ema = EMA(model, EMAConfig())
    manager = CheckpointManager(tmp_path / "ckpt", keep=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # DCP: "assuming the intent is to save in a single process"
        path = manager.save(1, model, opt, ema, {"loader_batch": 1, "model": "tiny"})
    return manager, model, opt, ema, path


def _rewrite_storage(path: Path, change) -> None:
    from avsim.train.safe_dcp import read_dcp_metadata

    metadata = read_dcp_metadata(path / ".metadata")
    for info in metadata.storage_data.values():
        change(info)
    (path / ".metadata").write_bytes(pickle.dumps(metadata))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda p, i: setattr(i, "relative_path", "../../../../outside/dcp/__0_0.distcp"), "leads outside"),
        (lambda p, i: setattr(i, "relative_path", "/dev/zero"), "leads outside"),
        (lambda p, i: setattr(i, "relative_path", "zero"), "resolves outside"),
        (lambda p, i: setattr(i, "relative_path", "link.distcp"), "resolves outside"),
        (lambda p, i: setattr(i, "relative_path", "pipe"), "named pipe"),
        (lambda p, i: setattr(i, "offset", i.offset + 10**9), "are not within"),
        (lambda p, i: setattr(i, "length", -1), "are not within"),
    ],
    ids=["parent", "absolute", "device link", "link out", "fifo", "offset", "length"],
)
def test_dcp_storage_paths_stay_in_the_checkpoint_folder(checkpoint, tmp_path: Path, change, why: str) -> None:
    manager, model, opt, ema, path = checkpoint
    outside = tmp_path / "outside" / "dcp"
    outside.mkdir(parents=True)
    for f in path.glob("*.distcp"):
        (outside / f.name).write_bytes(f.read_bytes())
    (path / "zero").symlink_to("/dev/zero")
    (path / "link.distcp").symlink_to(outside / "__0_0.distcp")
    os.mkfifo(path / "pipe")
    _rewrite_storage(path, lambda info: change(path, info))
    with pytest.raises(AvsimInputError, match=rf"\.metadata: storage_data\[.*{why}"):
        manager.load(1, model, opt, ema)


@pytest.mark.parametrize(
    ("meta", "why"),
    [({"step": 10**30}, "step: must be an integer from 0 to 99999999"), ({"step": 2}, "step: is 2 in the folder of step 1"),
     ({"world_size": 0}, "world_size: must be an integer"), ({"loader_batch": -5}, "loader_batch: must be an integer"),
     ({"loader_batch": 1.5}, "loader_batch: must be an integer"), ({"model": "m" * 5000}, "model: a string of 5000 characters")],
)  # fmt: skip
def test_meta_json_fields_are_bounded(checkpoint, meta: dict, why: str) -> None:
    manager, model, opt, ema, path = checkpoint
    doc = json.loads((path / "meta.json").read_text())
    (path / "meta.json").write_text(json.dumps({**doc, **meta}))
    with pytest.raises(AvsimInputError, match=rf"meta\.json: {why}"):
        manager.load(1, model, opt, ema)


def test_untouched_checkpoint_still_loads(checkpoint) -> None:
    manager, model, opt, ema, _ = checkpoint
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert manager.load(1, model, opt, ema)["loader_batch"] == 1


# ---------------------------------------------------------------------------- tables measured first
def test_decoded_table_bytes_are_measured_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Strings that compress to nothing (one repeated long track id) count at their decoded size."""
    import polars as pl

    from avsim.cli import main
    from avsim.scenario import io_tables

    assert main(["sample", str(tmp_path / "s")]) == 0
    agents = pl.read_parquet(tmp_path / "s" / "agents.parquet")
    n = agents.height
    agents.with_columns(pl.lit("x" * 100_000).alias("source_class")).write_parquet(tmp_path / "s" / "agents.parquet")
    assert (tmp_path / "s" / "agents.parquet").stat().st_size < 1_000_000  # small on disk...
    monkeypatch.setattr(io_tables, "MAX_TABLE_DECODED_BYTES", 50 * n * 1000)  # ...but n * 100 kB decoded
    with pytest.raises(AvsimInputError, match=r"agents\.parquet: source_class: decodes to more than \d+ bytes \(counted from its pages"):
        io_tables.read_table(tmp_path / "s" / "agents.parquet", n)
    monkeypatch.setattr(io_tables, "MAX_TABLE_ROWS", n - 1)
    with pytest.raises(AvsimInputError, match=rf"rows: {n} rows, more than the {n - 1}"):
        io_tables.read_table(tmp_path / "s" / "agents.parquet", n)


# ---------------------------------------------------------------------------- truncated media
def test_truncated_video_is_an_error_or_a_counted_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from avsim.core.video import ALLOW_TRUNCATED_ENV, MP4Writer, iter_video_frames, read_video

    rng = np.random.default_rng(0)
    with MP4Writer(tmp_path / "v.mp4", 64, 32) as w:  # noise: every frame is a large packet
        for _ in range(30):
            w.write(rng.integers(0, 256, (32, 64, 3), dtype=np.uint8))
    data = (tmp_path / "v.mp4").read_bytes()
    (tmp_path / "half.mp4").write_bytes(data[: len(data) * 4 // 5])
    assert len(read_video(tmp_path / "v.mp4")) == 30
    assert len(read_video(tmp_path / "half.mp4", max_frames=3)) == 3  # a prefix is not a truncation
    with pytest.raises(AvsimInputError, match=r"half\.mp4: frames: truncated: \d+ of the 30 frames"):
        list(iter_video_frames(tmp_path / "half.mp4"))
    with pytest.warns(TruncatedMediaWarning, match=r"truncated: (\d+) of the 30 frames .*; using those \1"):
        got = list(iter_video_frames(tmp_path / "half.mp4", allow_truncated=True))
    assert 0 < len(got) < 30
    monkeypatch.setenv(ALLOW_TRUNCATED_ENV, "1")
    with pytest.warns(TruncatedMediaWarning):
        assert len(list(iter_video_frames(tmp_path / "half.mp4"))) == len(got)


@pytest.mark.e2e
def test_allow_truncated_option_gives_one_warning_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from avsim.cli import main

    assert main(["sample", str(tmp_path / "s")]) == 0
    assert main(["render", str(tmp_path / "s"), str(tmp_path / "r"), "--frames", "60", "--size", "128x72", "--cameras", "camera_front_wide_120fov"]) == 0
    video = next((tmp_path / "r").rglob("*.mp4"))
    data = video.read_bytes()
    (tmp_path / "half.mp4").write_bytes(data[: len(data) * 4 // 5])
    capsys.readouterr()
    assert main(["eval", "rnds", "--generated", str(tmp_path / "half.mp4"), "--real", str(video)]) == 1
    assert "frames: truncated:" in capsys.readouterr().err
    assert main(["--allow-truncated", "eval", "rnds", "--generated", str(tmp_path / "half.mp4"), "--real", str(video)]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 1 and "truncated:" in warned[0] and "of the 60 frames" in warned[0]
    assert main(["eval", "rnds", "--generated", str(tmp_path / "half.mp4"), "--real", str(video)]) == 1  # the option lasts one command
