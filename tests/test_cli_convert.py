"""`avsim convert` and `avsim sample` end to end: success, determinism, and bad input that
gives one error line, exit status 1 and no output folder."""

from __future__ import annotations

import importlib.util
import io
import os
import pickle
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest

from avsim.cli import main
from avsim.scenario.io import SCENARIO_JSON, TABLE_FILES, load_scenario

SCENARIONET_SCENE = "scenarionet/sd_nuscenes_v1.0-mini_scene-0103.pkl"


def run(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_bad_input(rc: int, err: str, out_dir: Path, *needles: str) -> None:
    assert rc == 1, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
    assert not out_dir.exists(), "bad input must write nothing"
    assert not [p for p in out_dir.parent.iterdir() if p.name.startswith(f".{out_dir.name}")], "temporary left behind"


def _have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


# ---- sample ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_sample_then_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(["sample", tmp_path / "out", "--duration-s", "2", "--fps", "10"], capsys)
    assert rc == 0, err
    assert "wrote" in err
    s = load_scenario(tmp_path / "out")
    assert s.duration_s == pytest.approx(2.0, abs=0.11)
    assert not s.map.is_empty() and len(s.agents) > 0
    rc, out, err = run(["info", tmp_path / "out"], capsys)
    assert rc == 0, err
    assert s.scenario_id in out


@pytest.mark.slow
def test_sample_is_deterministic_per_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        assert run(["sample", tmp_path / name, "--seed", seed, "--duration-s", "1", "--fps", "10"], capsys)[0] == 0
    files = [SCENARIO_JSON, *TABLE_FILES]
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    assert any((tmp_path / "a" / f).read_bytes() != (tmp_path / "c" / f).read_bytes() for f in files)


def test_sample_refuses_an_unrelated_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("keep me")
    rc, _, err = run(["sample", tmp_path / "docs", "--duration-s", "1"], capsys)
    assert rc == 1 and err.count("\n") == 1 and "not an avsim scenario folder" in err
    assert (tmp_path / "docs" / "notes.txt").read_text() == "keep me"


# ---- convert: real data ----------------------------------------------------------------------
@pytest.mark.realdata
def test_convert_scenarionet_then_info(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(["convert", shared_data / SCENARIONET_SCENE, tmp_path / "out", "--from", "scenarionet"], capsys)
    assert rc == 0, err
    rc, out, err = run(["info", tmp_path / "out"], capsys)
    assert rc == 0, err
    assert "scene-0103" in out and "CAM_FRONT" in out


@pytest.mark.realdata
def test_convert_detects_the_format(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(["convert", shared_data / SCENARIONET_SCENE, tmp_path / "out", "--rig", "cosmos"], capsys)
    assert rc == 0, err
    assert load_scenario(tmp_path / "out").rig.names[0] == "camera_front_wide_120fov"


# ---- convert: bad input ----------------------------------------------------------------------
class _RunsCode:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_pickle_with_a_foreign_global_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps({"id": "x", "payload": _RunsCode()}))
    rc, _, err = run(["convert", evil, tmp_path / "out", "--from", "scenarionet"], capsys)
    assert_bad_input(rc, err, tmp_path / "out", str(evil), "system")
    assert not (tmp_path / "pwned").exists()


def test_pickle_asking_for_a_builtin_callable_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(b"cbuiltins\neval\n(S'1+1'\ntR.")  # protocol 0: builtins.eval('1+1')
    rc, _, err = run(["convert", evil, tmp_path / "out", "--from", "scenarionet"], capsys)
    assert_bad_input(rc, err, tmp_path / "out", str(evil), "eval")


@pytest.mark.realdata
def test_truncated_pickle(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = (shared_data / SCENARIONET_SCENE).read_bytes()
    cut = tmp_path / "cut.pkl"
    cut.write_bytes(data[: len(data) // 3])
    rc, _, err = run(["convert", cut, tmp_path / "out", "--from", "scenarionet"], capsys)
    assert_bad_input(rc, err, tmp_path / "out", str(cut))


def test_missing_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(["convert", tmp_path / "nope.pkl", tmp_path / "out", "--from", "scenarionet"], capsys)
    assert_bad_input(rc, err, tmp_path / "out", "nope.pkl", "not found")


def _scenarionet(shared_data: Path) -> dict:
    from avsim.scenario.importers.safe_pickle import load_pickle

    return load_pickle(shared_data / SCENARIONET_SCENE)


def _write(tmp_path: Path, scenario: dict) -> Path:
    path = tmp_path / "changed.pkl"
    path.write_bytes(pickle.dumps(scenario))  # builtins and numpy arrays only, like the original
    return path


def _nan_ego(d: dict) -> None:
    d["tracks"][d["metadata"]["sdc_id"]]["state"]["position"][5, 0] = np.nan


def _inf_ego(d: dict) -> None:
    d["tracks"][d["metadata"]["sdc_id"]]["state"]["heading"][7] = np.inf


def _backwards_time(d: dict) -> None:
    ts = np.array(d["metadata"]["ts"], dtype=np.float64)
    ts[[10, 11]] = ts[[11, 10]]
    d["metadata"]["ts"] = ts


def _no_map(d: dict) -> None:
    d["map_features"] = {}


def _truncated_tracks(d: dict) -> None:
    sdc = d["metadata"]["sdc_id"]
    d["tracks"][sdc]["state"]["position"] = d["tracks"][sdc]["state"]["position"][:-20]


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("change", "needle"),
    [(_nan_ego, "position"), (_inf_ego, "heading"), (_backwards_time, "ts"), (_no_map, "map"), (_truncated_tracks, "position")],
)
def test_bad_values_in_a_real_source(change, needle: str, shared_data: Path, tmp_path: Path, capsys) -> None:
    scenario = _scenarionet(shared_data)
    change(scenario)
    src = _write(tmp_path, scenario)
    rc, _, err = run(["convert", src, tmp_path / "out", "--from", "scenarionet"], capsys)
    assert_bad_input(rc, err, tmp_path / "out", str(src), needle)


@pytest.mark.realdata
def test_truncated_tfrecord(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not _have("waymo_open_dataset"):
        pytest.skip("the waymo extra (waymo-open-dataset protobufs) is not installed")
    data = (shared_data / "waymo" / "motion_data_one_scenario.tfrecord").read_bytes()
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(data[: len(data) // 2])
    rc, _, err = run(["convert", cut, tmp_path / "out", "--from", "waymo"], capsys)
    assert_bad_input(rc, err, tmp_path / "out", str(cut))


def _tar_with(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("member", ["../x", "../../etc/passwd", "/abs/x", "clip/../../x"])
def test_tar_member_with_a_traversal_name_is_refused(
    shared_data: Path, member: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real RDS-HQ root whose lane-line tar gains one hostile member."""
    src_root = next((shared_data / "rdshq-example").rglob("3d_lanelines")).parent
    root = tmp_path / "clip_root"
    shutil.copytree(src_root, root)
    tar_path = next((root / "3d_lanelines").glob("*.tar"))
    with tarfile.open(tar_path) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    members[member] = b"{}"
    tar_path.write_bytes(_tar_with(members))
    rc, _, err = run(["convert", root, tmp_path / "out", "--from", "rdshq"], capsys)
    assert_bad_input(rc, err, tmp_path / "out", "3d_lanelines", "path traversal")
    assert not (tmp_path / "x").exists()


# ---- convert: bad values in a real Argoverse 2 log -------------------------------------------
AV2_LOG = "av2/sensor/adcf7d18-0510-35b0-a2fa-b4cea13a6d76"


def _av2_copy(shared_data: Path, tmp_path: Path) -> Path:
    log = tmp_path / "log" / Path(AV2_LOG).name
    shutil.copytree(shared_data / AV2_LOG, log, ignore=shutil.ignore_patterns("sensors"))
    return log


def _edit_feather(path: Path, column: str, row: int, value: float) -> None:
    import polars as pl

    df = pl.read_ipc(io.BytesIO(path.read_bytes()))  # not memory-mapped: the file is rewritten below
    values = df[column].to_numpy().copy()
    values[row] = value
    df.with_columns(pl.Series(column, values, dtype=df.schema[column])).write_ipc(path)


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("file", "column", "row", "value", "needle"),
    [
        ("city_SE3_egovehicle.feather", "tx_m", 3, float("nan"), "NaN or infinite"),
        ("city_SE3_egovehicle.feather", "qw", 3, 3.0, "quaternion"),
        ("annotations.feather", "qw", 0, 0.0, "quaternion"),
        ("annotations.feather", "tx_m", 2, float("inf"), "NaN or infinite"),
        ("calibration/intrinsics.feather", "fx_px", 0, 0.0, "fx_px"),
    ],
)
def test_bad_values_in_a_real_av2_log(
    file: str, column: str, row: int, value: float, needle: str, shared_data: Path, tmp_path: Path, capsys
) -> None:
    log = _av2_copy(shared_data, tmp_path)
    _edit_feather(log / file, column, row, value)
    rc, _, err = run(["convert", log, tmp_path / "out", "--from", "av2"], capsys)
    assert_bad_input(rc, err, tmp_path / "out", file.split("/")[-1], needle)


@pytest.mark.realdata
def test_truncated_av2_feather(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _av2_copy(shared_data, tmp_path)
    path = log / "annotations.feather"
    path.write_bytes(path.read_bytes()[:1000])
    rc, _, err = run(["convert", log, tmp_path / "out", "--from", "av2"], capsys)
    assert_bad_input(rc, err, tmp_path / "out", "annotations.feather")
