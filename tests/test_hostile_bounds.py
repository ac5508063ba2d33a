"""Resource bounds on hostile inputs: one line, exit 1 or 2, no traceback, nothing written."""

from __future__ import annotations

import io
import struct
import tarfile
from pathlib import Path

import pytest

from avsim.cli import main
from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.safe_pickle import loads_pickle
from avsim.scenario.importers.safe_tar import read_sample, read_tar_members


def test_pickle_claiming_a_huge_object_is_one_line() -> None:
    bomb = b"\x80\x04\x8e" + struct.pack("<Q", 10**12) + b"ab"  # BINBYTES8 of 1e12 bytes in 13 bytes
    with pytest.raises(AvsimInputError, match=r"x\.pkl: pickle: (declares an object larger|truncated)"):
        loads_pickle(bomb, "x.pkl")


def test_deeply_nested_scenario_json_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample", str(tmp_path / "s")]) == 0
    (tmp_path / "s" / "scenario.json").write_text("[" * 200_000 + "]" * 200_000)
    capsys.readouterr()
    assert main(["info", str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "scenario.json: json:" in err[0] and "Traceback" not in err[0]


def _tar(path: Path, members: dict[str, int]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, size in members.items():
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(b"\0" * size))
    return path


def test_tar_total_is_bounded_and_other_members_are_not_read(tmp_path: Path) -> None:
    path = _tar(tmp_path / "t.tar.gz", {"clip.a.npy": 3000, "clip.b.npy": 3000, "clip.c.bin": 10_000})
    with pytest.raises(AvsimInputError, match=r"members: more than 5000 bytes in all"):
        read_tar_members(path, max_total_bytes=5000)
    got = read_tar_members(path, max_total_bytes=7000, suffixes=(".npy",))  # the .bin is skipped unread
    assert sorted(got) == ["clip.a.npy", "clip.b.npy"]
    with pytest.raises(AvsimInputError, match="cannot decode"):
        read_sample(path)  # zero bytes are no .npy, but the .bin never counted


@pytest.mark.parametrize("args", [["--size", "100000x100000"], ["--fps", "1e9"]])
def test_render_bounds_size_and_fps(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    assert main(["sample", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    assert main(["render", str(tmp_path / "s"), str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err
    assert "at most" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
