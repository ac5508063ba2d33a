"""Untrusted inputs: restricted unpickling and in-memory tar reading refuse what they must."""

from __future__ import annotations

import collections
import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.safe_pickle import load_pickle, loads_pickle
from avsim.scenario.importers.safe_tar import check_member_name, read_sample, read_tar_members


class _System:
    def __reduce__(self):
        return (os.system, ("echo SHOULD-NOT-RUN",))


class _Eval:
    def __reduce__(self):
        return (eval, ("1+1",))


def test_pickle_allows_builtins_and_numpy_arrays():
    value = {
        "a": [1, 2.5, "x", b"y", (True, None)],
        "arr": np.arange(6, dtype=np.float32).reshape(2, 3),
        "obj": np.array(["s", 1], dtype=object),
        "dd": collections.defaultdict(int, {"k": 3}),
        "scalar": np.float64(2.0),
        "set": {1, 2},
    }
    for protocol in (2, 4, 5):
        back = loads_pickle(pickle.dumps(value, protocol=protocol))
        np.testing.assert_array_equal(back["arr"], value["arr"])
        assert back["arr"].dtype == np.float32 and back["dd"]["k"] == 3 and back["scalar"] == 2.0
        assert back["a"] == value["a"] and back["set"] == {1, 2}


@pytest.mark.parametrize("payload", [_System(), _Eval(), pickle.loads], ids=["os.system", "eval", "pickle.loads"])
def test_pickle_refuses_any_other_global(payload, tmp_path, capfd):
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps(payload))
    with pytest.raises(AvsimInputError) as err:
        load_pickle(path)
    msg = str(err.value)
    assert msg.startswith(str(path)) and "not allowed" in msg and "\n" not in msg
    assert "SHOULD-NOT-RUN" not in capfd.readouterr().out


def test_pickle_refuses_codecs_other_than_latin1():
    # protocol-2 numpy pickles use _codecs.encode(text, 'latin1'); nothing else is allowed
    evil = b"\x80\x02c_codecs\nencode\nq\x00X\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R."
    with pytest.raises(AvsimInputError, match="latin1"):
        loads_pickle(evil, "x.pkl")


def test_pickle_truncated_and_missing(tmp_path):
    path = tmp_path / "t.pkl"
    path.write_bytes(pickle.dumps({"a": np.zeros(100)})[:40])
    with pytest.raises(AvsimInputError, match="truncated or corrupt"):
        load_pickle(path)
    with pytest.raises(AvsimInputError, match="cannot read"):
        load_pickle(tmp_path / "absent.pkl")
    (tmp_path / "empty.pkl").write_bytes(b"")
    with pytest.raises(AvsimInputError, match="empty"):
        load_pickle(tmp_path / "empty.pkl")


def test_real_pickles_load_restricted(shared_data):
    files = sorted((shared_data / "scenarionet").glob("*.pkl")) + [shared_data / "nuscenes-mmdet3d" / "nus_info.pkl"]
    assert len(files) == 9
    for f in files:
        assert isinstance(load_pickle(f), dict)


def _tar_with(path: Path, members: dict[str, bytes], *, symlink: str | None = None) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if symlink:
            info = tarfile.TarInfo(symlink)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
    return path


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/etc/x", "..\\x"])
def test_tar_refuses_traversal_names(tmp_path, name):
    path = _tar_with(tmp_path / "clip.tar", {"clip.ok.json": b"{}", name: b"boom"})
    cwd_before = sorted(os.listdir(tmp_path))
    with pytest.raises(AvsimInputError) as err:
        read_tar_members(path)
    assert "path traversal" in str(err.value) and repr(name) in str(err.value)
    assert sorted(os.listdir(tmp_path)) == cwd_before  # nothing written
    assert not (tmp_path.parent / "x").exists()


def test_tar_refuses_links_and_reads_in_memory(tmp_path):
    with pytest.raises(AvsimInputError, match="not a regular file"):
        read_tar_members(_tar_with(tmp_path / "l.tar", {"clip.a.json": b"{}"}, symlink="clip.b.json"))
    buf = io.BytesIO()
    np.save(buf, np.eye(4))
    path = _tar_with(tmp_path / "ok.tar", {"clip.000001.vehicle_pose.npy": buf.getvalue(), "clip.meta.json": b'{"a": 1}'})
    sample = read_sample(path)
    assert set(sample) == {"000001.vehicle_pose.npy", "meta.json"}
    np.testing.assert_array_equal(sample["000001.vehicle_pose.npy"], np.eye(4))
    assert sample["meta.json"] == {"a": 1}


def test_tar_refuses_pickled_npy_and_truncation(tmp_path):
    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(AvsimInputError, match="cannot decode"):
        read_sample(_tar_with(tmp_path / "p.tar", {"clip.obj.npy": buf.getvalue()}))
    good = _tar_with(tmp_path / "g.tar", {"clip.x.json": b"{}" * 2000}).read_bytes()
    (tmp_path / "trunc.tar").write_bytes(good[:700])
    with pytest.raises(AvsimInputError, match="tar"):
        read_tar_members(tmp_path / "trunc.tar")
    with pytest.raises(AvsimInputError, match="not found"):
        read_tar_members(tmp_path / "absent.tar")


def test_member_name_check_accepts_plain_names():
    check_member_name("clip.000000.pose.camera_front_wide_120fov.npy", "t.tar")
    check_member_name("sub/clip.json", "t.tar")


def test_convert_cli_refuses_evil_inputs_with_one_line_and_writes_nothing(tmp_path, capsys):
    """`avsim convert` on a hostile pickle / tar: exit 1, one error line, no output folder."""
    from avsim.cli import main

    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps(_System()))
    root = tmp_path / "rds"
    _tar_with((root / "vehicle_pose").mkdir(parents=True) or root / "vehicle_pose" / "clip.tar", {"../x": b"escape"})
    for src, fmt in ((evil, "scenarionet"), (root, "rdshq")):
        out = tmp_path / f"out_{fmt}"
        capsys.readouterr()
        rc = main(["convert", str(src), str(out), "--from", fmt])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 1 and len(err) == 1 and err[0].startswith("error: "), err
        assert not out.exists() and not (tmp_path / "x").exists() and not (root / "x").exists()
