"""The detection-gap workflow on the real scenes of ../shared/data (issue 53).

- docs/jobs.md's chain (a 30 fps labelled render, `avsim run generate` at the model's 10 fps with the debug model and
  random weights, `avsim run eval detect` with the labels oracle, `avsim eval report`) on every real scene avsim
  converts: 7 nuScenes and 1 Waymo scenarionet scenes, the Argoverse 2 sensor log, the Waymo motion scenario. The
  oracle's LET and lane gaps are 0 with the interval [0, 0] (before: 0.61 and 0.44 on the same scenes).
- The real rigs rendered with avsim's defaults (each camera at its own aspect, 720 px high, 30 fps): the Argoverse 2
  log (7 ring cameras, the front centre portrait) and the nuScenes rig of `nuscenes-mmdet3d` (6 cameras): a detector
  that returns exactly the boxes its cameras show scores LET-AP 1 through `avsim eval detect` + `avsim eval report`, and
  the report has TSE and CSE for the rig (pairs chosen from its calibration).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avsim.cli import main

ORACLE = "avsim.evaluation.detectors:LabelsOracle"
pytestmark = [pytest.mark.realdata, pytest.mark.e2e, pytest.mark.slow]


def _sources(data: Path) -> dict[str, Path]:
    out = {p.stem: p for p in sorted((data / "scenarionet").glob("*.pkl"))}
    logs = [p for p in sorted((data / "av2" / "sensor").glob("*")) if p.is_dir()]
    if logs:
        out["av2"] = logs[0]
    if (data / "waymo" / "motion_data_one_scenario.tfrecord").is_file():
        out["waymo"] = data / "waymo" / "motion_data_one_scenario.tfrecord"
    return out


def _interval(d: dict) -> tuple[float, float, float]:
    return d["estimate"], d["ci_low"], d["ci_high"]


def test_docs_chain_with_the_oracle_has_no_gap_on_the_real_scenes(shared_data: Path, tmp_path: Path, monkeypatch) -> None:
    sources = _sources(shared_data)
    if len(sources) < 3:
        pytest.skip(f"the real scenes are not under {shared_data}")
    monkeypatch.chdir(tmp_path)
    for name, src in sources.items():
        assert main(["convert", str(src), f"scenes/{name}"]) == 0, name
    assert main(["run", "render", "scenes", "render", "--labels", "--rig", "cosmos", "--fps", "30", "--frames", "13", "--size", "112x64",
                 "--workers", "2"]) == 0  # fmt: skip
    assert main(["run", "generate", "render", "synthetic", "--config", "debug", "--random-weights", "--steps", "1", "--views", "front_wide",
                 "--workers", "2"]) == 0  # fmt: skip
    assert main(["run", "eval", "detect", "render", "gap", "--generated", "synthetic", "--detector", ORACLE, "--workers", "2"]) == 0
    assert main(["eval", "report", "--real", "gap/real", "--generated", "gap/generated", "--gt", "gap/real/gt", "--out", "gap/report",
                 "--no-video-metrics", "--n-resamples", "100"]) == 0  # fmt: skip
    rep = json.loads(Path("gap/report/report.json").read_text())
    for metric in ("ap", "apl", "aph"):
        assert _interval(rep["detection"]["intervals"][f"waymo_mean/{metric}/gap"]) == (0.0, 0.0, 0.0), metric
    assert _interval(rep["lanes"]["intervals"]["f_score/gap"]) == (0.0, 0.0, 0.0)
    assert rep["lanes"]["intervals"]["f_score/real"]["estimate"] == 1.0 and rep["lanes"]["counts"]["real"]["num_gt"] > 50
    clips = len(sources)
    # the generated side has every third instant of the 13-frame render: 5 per clip
    assert rep["instants"]["instants"] == rep["instants"]["generated"] == 5 * clips and rep["instants"]["real"] == 13 * clips
    assert rep["ground_truth"]["cameras"] == ["camera_front_wide_120fov"]  # the one view generated: both sides on it


@pytest.mark.parametrize("scene", ["av2", "nuscenes"])
def test_a_camera_visible_detector_on_real_rigs_rendered_with_defaults(shared_data: Path, tmp_path: Path, scene: str) -> None:
    src = next(iter(sorted((shared_data / "av2" / "sensor").glob("*"))), None) if scene == "av2" else shared_data / "nuscenes-mmdet3d" / "nus_info.pkl"
    if src is None or not src.exists():
        pytest.skip(f"no {scene} source under {shared_data}")
    assert main(["convert", str(src), str(tmp_path / "s")]) == 0
    frames = ["--frames", "0:8"] if scene == "av2" else []  # the nuScenes info is 15 frames; the AV2 log's 480 would take minutes
    assert main(["render", str(tmp_path / "s"), str(tmp_path / "r"), "--labels", *frames]) == 0  # every other option at its default
    (clip,) = [p for p in (tmp_path / "r").iterdir() if p.is_dir()]
    index = json.loads((clip / "labels" / "index.json").read_text())
    assert len(index["cameras"]) == (7 if scene == "av2" else 6)
    if scene == "av2":
        assert len({tuple(v) for v in index["camera_sizes_px"].values()}) == 2  # the front centre camera is portrait
    out = tmp_path / "gap"
    assert main(["eval", "detect", str(tmp_path / "r"), str(out), "--generated", str(tmp_path / "r"), "--detector", ORACLE]) == 0
    assert main(["eval", "report", "--real", str(out / "real"), "--generated", str(out / "generated"), "--gt", str(out / "real" / "gt"),
                 "--out", str(out / "report"), "--n-resamples", "50", "--max-frames", "6", "--fvd-windows", "1"]) == 0  # fmt: skip
    rep = json.loads((out / "report" / "report.json").read_text())
    assert rep["detection"]["intervals"]["mean_over_classes_with_gt/ap/real"]["estimate"] >= 0.99
    assert rep["detection"]["intervals"]["waymo_mean/ap/gap"]["estimate"] == 0.0
    samp = rep["sampson"]
    rig = next(iter(samp["rigs"]["real"].values()))
    assert rig["source"].endswith("calibration.json") and len(rig["pairs"]) >= 5
    for kind in ("tse", "cse"):
        assert samp[f"{kind}/real"]["videos"] >= 1 and samp[f"{kind}/real"]["median_px"] >= 0.0, (kind, samp[f"{kind}/real"])
    page = (out / "report" / "report.html").read_text()
    assert "CSE camera pairs" in page and "instants both sides have" in page
