"""Outputs are created with the user's umask (issue 55): `tempfile.mkdtemp` makes a temporary folder
private, and `avsim.core.atomic.atomic_output_path` opens it to `0o777 & ~umask` before anything is
written, so every folder and file `avsim sample`, `convert`, `edit`, `render` and `avsim run` write
is readable by the group and others under umask 022 (as `ls -l` shows), and stays private under 077."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from avsim.cli import main
from avsim.core.atomic import atomic_output_path, current_umask, umask_mode

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _modes(root: Path) -> dict[str, str]:
    """`ls -l`'s mode string of `root` and everything under it (hidden temporaries included)."""
    paths = [root, *sorted(root.rglob("*"))]
    return {str(p.relative_to(root.parent)): stat.filemode(p.lstat().st_mode) for p in paths}


def _not_shared(root: Path) -> dict[str, str]:
    """The paths under `root` that group and others cannot read (folders: also enter), with their mode."""
    shared_dir = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
    shared_file = stat.S_IRGRP | stat.S_IROTH
    bad = {}
    for p in [root, *root.rglob("*")]:
        mode = p.lstat().st_mode
        need = shared_dir if stat.S_ISDIR(mode) else shared_file
        if mode & need != need:
            bad[str(p.relative_to(root.parent))] = stat.filemode(mode)
    return bad


def test_current_umask_reads_without_changing_it() -> None:
    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027
        assert umask_mode(0o777) == 0o750 and umask_mode(0o666) == 0o640
        assert os.umask(0o027) == 0o027  # unchanged by the read
    finally:
        os.umask(old)


@pytest.mark.parametrize(("mask", "folder_mode"), [(0o022, "drwxr-xr-x"), (0o027, "drwxr-x---"), (0o077, "drwx------")])
def test_atomic_folders_and_files_follow_the_umask(tmp_path: Path, mask: int, folder_mode: str) -> None:
    old = os.umask(mask)
    try:
        with atomic_output_path(tmp_path / "item", is_dir=True) as tmp:
            assert stat.filemode(tmp.stat().st_mode) == folder_mode  # before the writer adds anything
            (tmp / "sub").mkdir()
            (tmp / "sub" / "a.txt").write_text("a")
        with atomic_output_path(tmp_path / "b.json") as tmp:
            tmp.write_text("{}")
    finally:
        os.umask(old)
    assert stat.filemode((tmp_path / "item").stat().st_mode) == folder_mode
    file_mode = stat.filemode(0o100666 & ~mask)
    assert stat.filemode((tmp_path / "item" / "sub" / "a.txt").stat().st_mode) == file_mode
    assert stat.filemode((tmp_path / "b.json").stat().st_mode) == file_mode


@pytest.mark.e2e
def test_every_output_is_readable_by_group_and_others_under_umask_022(tmp_path: Path, umask_022: None, capsys) -> None:
    from opendrive_maps import sections_map

    scenes = tmp_path / "scenes"
    assert main(["sample", str(scenes / "a"), "--duration-s", "1"]) == 0
    edits = tmp_path / "crop.yaml"
    edits.write_text('version: 1\nname: "crop"\nops:\n  - op: crop\n    start_s: 0.2\n    stop_s: 0.8\n')
    assert main(["edit", str(scenes / "a"), str(edits), str(tmp_path / "variants")]) == 0
    sources = tmp_path / "sources"
    sections_map(sources.mkdir() or sources / "m.xodr")
    assert main(["convert", str(sources / "m.xodr"), str(tmp_path / "converted")]) == 0
    tiny = ["--frames", "2", "--size", "64x36", "--cameras", "camera_front_wide_120fov"]
    assert main(["render", str(scenes / "a"), str(tmp_path / "render"), *tiny, "--labels"]) == 0
    assert main(["run", "render", str(scenes), str(tmp_path / "run_render"), *tiny, "--workers", "1"]) == 0
    assert main(["run", "convert", str(sources), str(tmp_path / "run_convert"), "--workers", "1"]) == 0
    for out in ("scenes", "variants", "converted", "render", "run_render", "run_convert"):
        root = tmp_path / out
        assert root.is_dir(), out
        assert _not_shared(root) == {}, f"{out}: not readable by group/others under umask 022"
    assert _modes(tmp_path / "run_render")["run_render/a"] == "drwxr-xr-x"  # an `avsim run` item folder
