"""`avsim edit / validate / diff / preview` end to end on saved scenario folders."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from test_edit_helpers import road_scenario

from avsim.cli import main
from avsim.edit import ops_agents
from avsim.scenario.io import load_scenario, save_scenario

EDITS = """version: 1
name: "gap{gap_m}"
sweep:
  gap_m: [4, 9]
ops:
  - op: cut_in
    track_id: cutter
    start_s: 2
    duration_s: 3
    gap_m: $gap_m
  - op: restyle_lane_lines
    ids: ll_div
    style: SOLID_SINGLE
    s_range_m: [40, 90]
"""


@pytest.fixture(scope="module")
def road_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("scn") / "road"
    save_scenario(road_scenario(), folder)
    return folder


def _tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.e2e
def test_edit_writes_variants_and_manifest_deterministically(road_dir, tmp_path, capsys):
    edits = tmp_path / "cut.yaml"
    edits.write_text(EDITS)
    assert main(["edit", str(road_dir), str(edits), str(tmp_path / "a")]) == 0
    assert main(["edit", str(road_dir), str(edits), str(tmp_path / "b")]) == 0
    da, db = _tree_digest(tmp_path / "a"), _tree_digest(tmp_path / "b")
    assert da == db, "applying the same edit file twice must give identical bytes"
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert [v["name"] for v in manifest["variants"]] == ["gap4", "gap9"]
    assert manifest["variants"][0]["findings"] == [] and manifest["variants"][1]["params"] == {"gap_m": 9}
    loaded = load_scenario(tmp_path / "a" / "gap4")
    assert "cutter" in set(loaded.agents.track_ids) and loaded.scenario_id == "road__gap4"
    # rerun into an existing edit output replaces it
    assert main(["edit", str(road_dir), str(edits), str(tmp_path / "a")]) == 0
    assert _tree_digest(tmp_path / "a") == da


@pytest.mark.parametrize(
    "text,line",
    [
        ("version: 1\nops:\n  - op: fly\n", "line 3: ops[0].op"),
        ("version: 1\nops:\n  - op: remove_agents\n    track_id: ghost\n", "line 4: ops[0].track_id"),
        ("version: 1\nops:\n  - op: shift_agents\n    track_id: lead\n    dx_m: [1]\n", "line 5: ops[0].dx_m"),
        ("version: 1\nops:\n  - op: crop\n    start_s: 11\n", "line 4: ops[0].start_s"),
    ],
)
def test_bad_edit_file_fails_with_line_and_writes_nothing(road_dir, tmp_path, capsys, text, line):
    edits = tmp_path / "bad.yaml"
    edits.write_text(text)
    out = tmp_path / "out"
    assert main(["edit", str(road_dir), str(edits), str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: {edits}: {line}: ")
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_edit_strict_refuses_findings(road_dir, tmp_path, capsys):
    edits = tmp_path / "crash.yaml"
    edits.write_text("version: 1\nops:\n  - op: shift_agents\n    track_id: lead\n    dx_m: -25\n")
    assert main(["edit", str(road_dir), str(edits), str(tmp_path / "o"), "--strict"]) == 1
    assert "overlap" in capsys.readouterr().err and not (tmp_path / "o").exists()
    assert main(["edit", str(road_dir), str(edits), str(tmp_path / "o")]) == 0
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    (f,) = manifest["variants"][0]["findings"]
    assert f["kind"] == "overlap" and f["ids"] == ["ego", "lead"] and f["time_s"] == 0.0 and f["op_index"] == 0


def test_edit_refuses_unrelated_output_folder(road_dir, tmp_path, capsys):
    edits = tmp_path / "e.yaml"
    edits.write_text(EDITS)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("x")
    assert main(["edit", str(road_dir), str(edits), str(precious)]) == 1
    assert (precious / "thesis.tex").read_text() == "x"
    (precious / "manifest.json").write_text("[1, 2]")  # valid JSON, but not an edit manifest
    assert main(["edit", str(road_dir), str(edits), str(precious)]) == 1
    assert (precious / "thesis.tex").read_text() == "x"


@pytest.mark.slow
def test_validate_command(road_dir, tmp_path, capsys):
    assert main(["validate", str(road_dir), "--strict"]) == 0
    assert "0 finding(s)" in capsys.readouterr().out
    bad = tmp_path / "bad"
    save_scenario(ops_agents.shift_agents(road_scenario(), ["lead"], dx_m=-25), bad)
    assert main(["validate", str(bad)]) == 0
    assert main(["validate", str(bad), "--strict"]) == 1
    capsys.readouterr()
    assert main(["validate", str(bad), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["counts"] == {"overlap": 1} and doc["findings"][0]["ids"] == ["ego", "lead"]


def test_validate_reports_load_errors_in_one_line(road_dir, tmp_path, capsys):
    broken = tmp_path / "broken"
    save_scenario(road_scenario(), broken)
    (broken / "agents.parquet").write_bytes(b"not parquet")
    assert main(["validate", str(broken)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "agents.parquet" in err[0]
    assert main(["validate", str(tmp_path / "missing")]) == 1


@pytest.mark.slow
def test_diff_command(road_dir, tmp_path, capsys):
    other = tmp_path / "other"
    save_scenario(ops_agents.shift_agents(ops_agents.remove_agents(road_scenario(), ["ped"]), ["lead"], dy_m=1.5), other)
    assert main(["diff", str(road_dir), str(other)]) == 0
    text = capsys.readouterr().out
    assert "agent - ped" in text and "agent ~ lead: moved up to 1.50 m" in text
    assert main(["diff", str(road_dir), str(other), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["agents"]["removed"] == ["ped"] and doc["agents"]["changed"][0]["max_displacement_m"] == 1.5
    assert main(["diff", str(road_dir), str(road_dir)]) == 0
    assert "no differences" in capsys.readouterr().out


@pytest.mark.slow
def test_preview_command(road_dir, tmp_path, capsys):
    from avsim.core.video import video_info

    out = tmp_path / "p.mp4"
    assert main(["preview", str(road_dir), str(out), "--fps", "5", "--size", "128"]) == 0
    info = video_info(out)
    assert (info["frames"], info["width_px"], info["height_px"]) == (51, 128, 128)
    assert main(["preview", str(road_dir), str(tmp_path / "ba.mp4"), "--before", str(road_dir), "--fps", "2", "--size", "96"]) == 0
    assert video_info(tmp_path / "ba.mp4")["width_px"] == 192
    assert main(["preview", str(road_dir), str(tmp_path / "p.avi")]) == 2


@pytest.mark.e2e
def test_nameless_edit_renders_beside_its_source(road_dir, tmp_path, capsys):
    """Issue 14 item 4: a variant without a name template never takes its source's id or folder."""
    edit = tmp_path / "shift.yaml"
    edit.write_text("version: 1\nops:\n  - op: shift_agents\n    track_id: lead\n    dx_m: 2.5\n")
    out = tmp_path / "out"
    tiny = ["--frames", "0:2", "--size", "160x90", "--cameras", "camera_front_wide_120fov"]
    assert main(["render", str(road_dir), str(out), *tiny]) == 0
    assert main(["edit", str(road_dir), str(edit), str(tmp_path / "v")]) == 0
    capsys.readouterr()
    assert main(["render", str(tmp_path / "v"), str(out), *tiny]) == 0
    captured = capsys.readouterr()
    said = captured.out + captured.err
    assert "2 camera-frames rendered, 0 kept" in said, said
    (variant,) = json.loads((tmp_path / "v" / "manifest.json").read_text())["variants"]
    assert variant["scenario_id"].startswith("road__shift-") and (out / variant["scenario_id"]).is_dir()
    assert (out / "road").is_dir()
