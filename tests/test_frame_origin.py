"""Frame 0 on the source's own sample (issue 41): `Scenario.frame_origin_ns`, saved, edited, reported by `avsim info`."""

from __future__ import annotations

import json
from pathlib import Path

import mmdet3d_synth as synth
import numpy as np
import pytest

from avsim.cli import main
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.scenario.importers.mmdet3d_source import load_mmdet3d
from avsim.scenario.io import load_scenario, save_scenario, scenario_differences


@pytest.fixture
def info_scenario(tmp_path: Path):
    return load_mmdet3d(synth.write_info(tmp_path / "src", image=False))


def test_frames_start_at_the_first_sample_not_the_first_capture(info_scenario) -> None:
    keyframe = synth.T0_US * 1000
    assert info_scenario.start_ns == keyframe - synth.CAM_DELAY_US * 1000  # the ego span starts at the first capture
    assert info_scenario.frame_origin_ns == info_scenario.frame_start_ns == keyframe
    assert info_scenario.frame_timestamps(2.0).tolist() == [keyframe, keyframe + 500_000_000]
    assert info_scenario.frame_times(2.0)[1] == keyframe + 500_000_000 and len(info_scenario.frame_times(2.0)) == 2


def test_the_origin_is_saved_and_read_back(info_scenario, tmp_path: Path) -> None:
    save_scenario(info_scenario, tmp_path / "a")
    header = json.loads((tmp_path / "a" / "scenario.json").read_text())
    assert header["frame_origin_ns"] == info_scenario.frame_origin_ns
    back = load_scenario(tmp_path / "a")
    assert scenario_differences(back, info_scenario) == [] and back.frame_origin_ns == info_scenario.frame_origin_ns
    plain = back.replace(frame_origin_ns=None)
    save_scenario(plain, tmp_path / "b")
    assert "frame_origin_ns" not in json.loads((tmp_path / "b" / "scenario.json").read_text())  # absent: the first pose
    assert load_scenario(tmp_path / "b").frame_start_ns == plain.start_ns
    header["frame_origin_ns"] = "soon"
    (tmp_path / "a" / "scenario.json").write_text(json.dumps(header))
    with pytest.raises(AvsimInputError, match="frame_origin_ns"):
        load_scenario(tmp_path / "a")


def test_an_origin_outside_the_ego_span_is_refused(info_scenario) -> None:
    with pytest.raises(AvsimValueError, match="frame_origin_ns"):
        info_scenario.replace(frame_origin_ns=info_scenario.end_ns + 1)
    with pytest.raises(AvsimValueError, match="frame_origin_ns"):
        info_scenario.replace(frame_origin_ns=1.5)


def test_time_edits_keep_or_drop_the_origin(info_scenario) -> None:
    from avsim.edit.ops_time import crop, retime

    origin = info_scenario.frame_origin_ns
    assert crop(info_scenario, 0.0, 0.2).frame_origin_ns == origin  # the window holds the keyframe
    later = crop(info_scenario, 0.1)
    assert later.frame_origin_ns is None and later.frame_start_ns == later.start_ns
    slow = retime(info_scenario, 0.5)
    assert slow.frame_origin_ns == info_scenario.start_ns + 2 * (origin - info_scenario.start_ns)


def test_info_says_how_frames_map_to_the_source_samples(info_scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("COLUMNS", "400")
    save_scenario(info_scenario, tmp_path / "s")
    capsys.readouterr()
    assert main(["info", str(tmp_path / "s")]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("frames:")]
    assert "frame 0 = the first sample's (lidar keyframe) timestamp" in line and "(30.0 ms after the first ego pose)" in line
    assert "2 source samples (labelled times) every 0.500 s (median), the first on frame 0: at --fps 2 frame k" in line
    assert main(["info", str(tmp_path / "s"), "--json"]) == 0
    frames = json.loads(capsys.readouterr().out)["frames"]
    assert frames["frame0_timestamp_ns"] == synth.T0_US * 1000 and frames["frame0_after_first_pose_ms"] == 30.0


@pytest.mark.realdata
def test_real_av2_frame_0_is_the_first_annotated_sweep(shared_data: Path, tmp_path: Path) -> None:
    logs = sorted((shared_data / "av2" / "sensor").glob("*"))
    if not logs:
        pytest.skip("no Argoverse 2 sensor log in the shared data")
    from avsim.scenario.importers.av2 import load_av2

    scenario = load_av2(logs[0])
    first = int(np.min(scenario.agents.timestamps_ns))
    assert scenario.frame_origin_ns == first and first - scenario.start_ns == 59_951_786  # 60 ms after the first pose
    assert int(scenario.frame_timestamps(10.0)[0]) == first
