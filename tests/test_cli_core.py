"""CLI plumbing: help everywhere, exit codes 0/1/2, `info`, bad input as one line, entry point."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_io_roundtrip import make_scenario

from avsim.cli.main import LAZY_COMMANDS, main
from avsim.scenario.io import SCENARIO_JSON, save_scenario

CONSOLE_SCRIPT = Path(sys.executable).parent / "avsim"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def scenario_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli") / "scene"
    save_scenario(make_scenario(11), folder)
    return folder


# ---- help and usage --------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["sample", "--help"], ["convert", "--help"], ["info", "--help"]])
def test_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(argv, capsys)
    assert rc == 0
    assert "Usage: avsim" in out


def test_root_help_lists_core_commands(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(["--help"], capsys)
    for command in ("sample", "convert", "info"):
        assert command in out


@pytest.mark.parametrize("command", sorted(LAZY_COMMANDS))
def test_help_of_mounted_command_groups(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run([command, "--help"], capsys)
    assert rc == 0, err
    assert "Usage: avsim" in out


def _command_paths() -> list[list[str]]:
    import typer

    from avsim.cli import build_app

    def walk(command, path: list[str]):
        yield path
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, [*path, name])

    return list(walk(typer.main.get_command(build_app([])), []))


@pytest.mark.slow
def test_help_on_every_command_and_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    """`--help` works on every command and subcommand of every mounted group."""
    paths = _command_paths()
    assert ["info"] in paths and ["sample"] in paths and ["convert"] in paths
    for path in paths:
        rc, out, err = run([*path, "--help"], capsys)
        assert rc == 0, (path, err)
        assert f"Usage: avsim {' '.join(path)}".rstrip() in " ".join(out.split()), path


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["--version"], capsys)
    assert rc == 0 and out.startswith("avsim ") and "schema 1" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "Usage: avsim"),
        (["info"], "Missing argument"),
        (["info", "x", "--bogus"], "No such option: --bogus"),
        (["sample"], "Missing argument"),
        (["sample", "OUT", "--fps", "0"], "Invalid value for '--fps'"),
        (["sample", "OUT", "--duration-s", "-1"], "Invalid value for '--duration-s'"),
        (["sample", "OUT", "--seed", "abc"], "Invalid value for '--seed'"),
        (["convert", "src"], "Missing argument"),
        (["convert", "src", "OUT", "--from", "kitti"], "unknown format 'kitti'"),
        (["convert", "src", "OUT", "--rig", "tesla"], "unknown rig 'tesla'"),
        (["no-such-command"], "No such command"),
        (["rendr", "x", "y"], "No such command 'rendr'. Did you mean 'render'?"),  # a lazily mounted group
        (["valdate", "x"], "No such command 'valdate'. Did you mean 'validate'?"),
        (["smaple", "x"], "No such command 'smaple'. Did you mean 'sample'?"),  # a core command
        (["run", "rendr"], "No such command 'rendr'. Did you mean 'render'?"),
    ],
)
def test_usage_errors_exit_2_and_write_nothing(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(argv, capsys)
    assert rc == 2
    assert message in out + err
    assert list(tmp_path.iterdir()) == []


# ---- info ------------------------------------------------------------------------------------
def test_info_prints_a_readable_summary(scenario_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["info", scenario_folder], capsys)
    assert rc == 0, err
    for text in ("scene-11", "CAM_FRONT", "camera_cross_right_120fov", "pinhole", "ftheta", "1600x900", "Car", "Truck",
                 "Pedestrian", "Cyclist", "lane_lines", "crosswalks", "traffic_lights", "extent", "Hz"):  # fmt: skip
        assert text in out, text


def test_info_json_matches_the_scenario(scenario_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = make_scenario(11)
    rc, out, _ = run(["info", scenario_folder, "--json"], capsys)
    assert rc == 0
    info = json.loads(out)  # stdout holds nothing but the JSON
    assert info["scenario_id"] == "scene-11"
    assert info["duration_s"] == pytest.approx(s.duration_s)
    assert info["ego_poses"] == len(s.ego)
    assert [c["name"] for c in info["cameras"]] == list(s.rig.names)
    assert info["cameras"][0]["horizontal_fov_deg"] == pytest.approx(np.degrees(s.rig.cameras[0].horizontal_fov_rad), abs=0.01)
    assert info["agents"]["tracks_per_class"] == {"Car": 1, "Cyclist": 1, "Pedestrian": 1, "Truck": 1}
    assert info["agents"]["observations"] == len(s.agents)
    assert info["map"] == s.map.element_counts()
    assert info["traffic_lights"]["states"] == {"green": 1, "red": 2, "unknown": 1, "yellow": 1}
    ext = info["extent"]
    ego_xy = s.ego.world_SE3_ego.translation[:, :2]
    assert ext["x_min_m"] <= ego_xy[:, 0].min() and ext["x_max_m"] >= ego_xy[:, 0].max()
    assert ext["size_y_m"] == pytest.approx(ext["y_max_m"] - ext["y_min_m"])
    assert ext["ego_path_length_m"] == pytest.approx(np.linalg.norm(np.diff(s.ego.world_SE3_ego.translation, axis=0), axis=1).sum())


def _zero_focal(folder: Path) -> None:
    doc = json.loads((folder / SCENARIO_JSON).read_text())
    doc["rig"]["cameras"][0]["fx_px"] = 0
    (folder / SCENARIO_JSON).write_text(json.dumps(doc))


def _nan_pose(folder: Path) -> None:
    df = pl.read_parquet(folder / "ego.parquet")
    df.with_columns(pl.when(pl.int_range(pl.len()) == 3).then(float("nan")).otherwise(pl.col("ty_m")).alias("ty_m")).write_parquet(
        folder / "ego.parquet"
    )


def _truncate(folder: Path) -> None:
    data = (folder / "agents.parquet").read_bytes()
    (folder / "agents.parquet").write_bytes(data[: len(data) // 2])


def _schema(folder: Path) -> None:
    text = (folder / SCENARIO_JSON).read_text()
    (folder / SCENARIO_JSON).write_text(text.replace('"schema_version": 1', '"schema_version": 99'))


def _empty_map(folder: Path) -> None:
    doc = json.loads((folder / SCENARIO_JSON).read_text())
    for path in folder.glob("map_*.parquet"):
        pl.read_parquet(path).head(0).write_parquet(path)
        doc["tables"][path.name]["rows"] = 0
    (folder / SCENARIO_JSON).write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("corrupt", "expected"),
    [
        (lambda f: (f / "lights.parquet").unlink(), "lights.parquet: file: missing"),
        (_truncate, "agents.parquet: file: unreadable parquet"),
        (_schema, "scenario.json: schema_version: is 99"),
        (_nan_pose, "ego.parquet: ty_m: row 3 is nan"),
        (_zero_focal, "scenario.json: rig.cameras[0] (CAM_FRONT).fx_px: focal length must be > 0"),
        (_empty_map, ": map: every map_*.parquet table is empty"),
    ],
)
def test_info_bad_input_is_one_line_and_exit_1(
    corrupt, expected: str, scenario_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "scene"
    shutil.copytree(scenario_folder, folder)
    corrupt(folder)
    rc, out, err = run(["info", folder], capsys)
    assert rc == 1
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: {folder}"), err
    assert expected in err, err


def test_info_on_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(["info", tmp_path / "nope"], capsys)
    assert rc == 1 and err == f"error: {tmp_path / 'nope'}: scenario: not found\n"


# ---- the installed console script -------------------------------------------------------------
@pytest.mark.subprocess
def test_console_script_is_installed_and_runs(scenario_folder: Path, tmp_path: Path) -> None:
    assert CONSOLE_SCRIPT.exists(), f"{CONSOLE_SCRIPT} missing: is avsim installed in this environment?"
    ok = subprocess.run([CONSOLE_SCRIPT, "--help"], capture_output=True, text=True, timeout=360)
    assert ok.returncode == 0, ok.stderr
    assert all(c in ok.stdout for c in ("sample", "convert", "info"))
    info = subprocess.run([CONSOLE_SCRIPT, "info", scenario_folder, "--json"], capture_output=True, text=True, timeout=360)
    assert info.returncode == 0 and json.loads(info.stdout)["scenario_id"] == "scene-11"
    bad = subprocess.run([CONSOLE_SCRIPT, "info", tmp_path / "nope"], capture_output=True, text=True, timeout=360)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "scenario: not found" in bad.stderr
    usage = subprocess.run([CONSOLE_SCRIPT, "info"], capture_output=True, text=True, timeout=360)
    assert usage.returncode == 2 and "Missing argument" in usage.stderr


def test_info_reports_native_rates_and_the_render_frames(scenario_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = make_scenario(11)
    rc, out, _ = run(["info", scenario_folder, "--json"], capsys)
    assert rc == 0
    info = json.loads(out)
    assert info["render"] == {"fps": 30.0, "frames": len(s.frame_times(30.0))}
    steps = np.concatenate([np.diff(s.agents.timestamps_ns[rows]) for _, rows in s.agents.track_slices()])
    assert info["agent_rate_hz"] == pytest.approx(1e9 / np.median(steps[steps > 0]))
    rc, out, _ = run(["info", scenario_folder], capsys)
    assert "native rates: ego" in out and f"render: {len(s.frame_times(30.0))} frames at 30 fps" in out
