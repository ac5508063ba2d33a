"""`avsim view` on every real dataset in ../shared/data (converted), and on an edit of a real scene
viewed against its source with `--before` (a real dash-cam clip as its `--real` video)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from avsim.cli import main
from avsim.scenario.io import save_scenario

pytestmark = pytest.mark.realdata
REAL_SOURCES = [
    *(f"scenarionet/{n}" for n in (
        "sd_nuscenes_v1.0-mini_scene-0103.pkl", "sd_nuscenes_v1.0-mini_scene-0553.pkl", "sd_nuscenes_v1.0-mini_scene-0655.pkl",
        "sd_nuscenes_v1.0-mini_scene-0757.pkl", "sd_nuscenes_v1.0-mini_scene-0796.pkl", "sd_nuscenes_v1.0-mini_scene-0916.pkl",
        "sd_nuscenes_v1.0-mini_scene-1077.pkl", "sd_waymo_v1.2_eb4b91b10ca94ff2.pkl")),
    "waymo/motion_data_one_scenario.tfrecord",
    "av2/sensor/adcf7d18-0510-35b0-a2fa-b4cea13a6d76",
    "av2/forecasting/0a1e6f0a-1817-4a98-b02e-db8c9327d151",
    "rdshq-example/assets/example",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _needs_rerun():
    pytest.importorskip("rerun", reason="the `view` extra is not installed (docs/viewer.md)")


@pytest.mark.parametrize("rel", REAL_SOURCES)
def test_view_every_shared_dataset(shared_data, tmp_path, rel, capsys):
    if rel.startswith("waymo/"):
        pytest.importorskip("waymo_open_dataset.protos.scenario_pb2", reason="the `waymo` extra is not installed")
    from avsim.scenario.importers.registry import convert

    save_scenario(convert(shared_data / rel), tmp_path / "s")
    assert main(["view", str(tmp_path / "s"), "--save", str(tmp_path / "s.rrd")]) == 0, capsys.readouterr().err
    assert (tmp_path / "s.rrd").stat().st_size > 10_000
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporaries left


def test_edit_variant_against_its_source_with_a_real_video(shared_data, tmp_path, capsys):
    pytest.importorskip("datafusion", reason="the `view` extra is not installed (docs/viewer.md)")
    from rerun.chunk import RrdReader

    from avsim.edit import ops_agents, ops_time
    from avsim.scenario.importers.registry import convert

    source = convert(shared_data / "scenarionet" / "sd_nuscenes_v1.0-mini_scene-0103.pkl")
    ids, counts = np.unique(source.agents.track_id, return_counts=True)
    removed = [str(i) for i in ids[np.argsort(counts)[-3:]]]  # the three longest tracks
    edited = ops_time.crop(ops_agents.remove_agents(source, removed), 2.0, 12.0)
    save_scenario(source, tmp_path / "before")
    save_scenario(edited, tmp_path / "after")
    (tmp_path / "real").mkdir()
    shutil.copy(shared_data / "udacity" / "solidWhiteRight.mp4", tmp_path / "real" / f"{edited.rig.names[0]}.mp4")
    argv = ["view", str(tmp_path / "after"), "--before", str(tmp_path / "before"), "--real", str(tmp_path / "real")]
    assert main([*argv, "--save", str(tmp_path / "v.rrd")]) == 0, capsys.readouterr().err
    # at 1 s after the edit's start, the source (same origin: absolute times line up) has the removed boxes
    t_abs = edited.start_ns + 10**9
    store = RrdReader(tmp_path / "v.rrd").stream().collect()
    table = store.reader(index="scenario_time", fill_latest_at=True, using_index_values=np.array([10**9], np.int64)).to_arrow_table()
    row = {n: table.column(n)[0].as_py() for n in table.column_names if n.startswith("/")}
    grid_after, grid_before = edited.frame_timestamps(30.0), source.frame_timestamps(30.0)
    k_after = int(np.searchsorted(grid_after, t_abs, side="right")) - 1
    k_before = int(np.searchsorted(grid_before, t_abs, side="right")) - 1
    after = edited.agents.resample(grid_after).at(int(grid_after[k_after]))
    before = source.agents.resample(grid_before).at(int(grid_before[k_before]))
    labels_after, labels_before = set(row["/world/agents:Boxes3D:labels"]), set(row["/before/world/agents:Boxes3D:labels"])
    assert len(labels_after) == len(after) and len(labels_before) == len(before)
    assert {label.split(" ", 1)[1] for label in labels_before - labels_after} <= set(removed)
    assert any(label.endswith(tuple(removed)) for label in labels_before)
    # the real clip (25 fps) plays on the same timeline
    frame_ns = row[f"/videos/real/{edited.rig.names[0]}:VideoFrameReference:timestamp"][0]
    assert frame_ns == 10**9 - (10**9 % 40_000_000)
